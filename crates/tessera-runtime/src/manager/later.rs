//! Write-backs in the background: an evicted page's bytes are read from its device without
//! waiting (`Device::read_slots_later`), and go into its home copy only when something needs
//! home's bytes for that page.
//!
//! Home stays current in the protocol's sense the moment the write-back is carried out: the
//! directory says so, and every reader of home's bytes for a page first takes its pending
//! write-back (`Manager::settle_home`). The readers are the manager's own: copies from home
//! into a device (`carry_out`, staging), host reads of an object, and a later write-back of
//! the same page, which makes the pending one stale (`forget`). A freed object's pending
//! write-backs are dropped with it.

use super::*;

/// One started read of a device's evicted pages.
struct Batch {
    read: Box<dyn PendingRead>,
    /// Where each slot's bytes go, in the order read: the page and its place at home.
    dests: Vec<(GlobalPage, ObjectId, u64, u64)>,
}

/// The write-backs still in flight, by page.
#[derive(Default)]
pub(super) struct Later {
    batches: HashMap<u64, Batch>,
    /// The batch whose bytes are the page's newest; a page written home since is absent.
    pages: HashMap<GlobalPage, u64>,
    next: u64,
}

impl Later {
    pub(super) fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    pub(super) fn add(
        &mut self,
        read: Box<dyn PendingRead>,
        dests: Vec<(GlobalPage, ObjectId, u64, u64)>,
    ) {
        let id = self.next;
        self.next += 1;
        for &(page, ..) in &dests {
            self.pages.insert(page, id);
        }
        self.batches.insert(id, Batch { read, dests });
    }

    /// Drops the page's pending bytes: home's copy of it is written, or the page freed. A
    /// batch with no page left is dropped unread.
    pub(super) fn forget(&mut self, page: GlobalPage) {
        if let Some(id) = self.pages.remove(&page) {
            let live = self
                .batches
                .get(&id)
                .is_some_and(|b| b.dests.iter().any(|d| self.pages.get(&d.0) == Some(&id)));
            if !live {
                self.batches.remove(&id);
            }
        }
    }

    /// The batches holding any of `pages`' newest bytes, taken out of the set.
    fn take(&mut self, pages: impl IntoIterator<Item = GlobalPage>) -> Vec<(u64, Batch)> {
        let mut ids: Vec<u64> = pages
            .into_iter()
            .filter_map(|p| self.pages.get(&p).copied())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|id| self.batches.remove(&id).map(|b| (id, b)))
            .collect()
    }
}

impl Manager {
    /// Waits for the pending write-backs of any of `pages` and puts their bytes home, with
    /// the rest of their batches' pages (already read, so no more waits).
    pub(super) fn settle_home(
        &mut self,
        pages: impl IntoIterator<Item = GlobalPage>,
    ) -> Result<()> {
        if self.later.is_empty() {
            return Ok(());
        }
        for (id, b) in self.later.take(pages) {
            let data = b.read.wait()?;
            if data.len() != b.dests.len() {
                return Err(RuntimeError::Internal(format!(
                    "{} slots read back for {} asked",
                    data.len(),
                    b.dests.len()
                )));
            }
            let mut home = write_home(&self.home)?;
            for ((page, obj, local, bytes), d) in b.dests.into_iter().zip(data) {
                if self.later.pages.get(&page) == Some(&id) {
                    self.later.pages.remove(&page);
                    copy_slot(home.page_mut(obj, local, bytes)?, &d)?;
                }
            }
        }
        Ok(())
    }

    /// [`Manager::settle_home`] of every page of these objects.
    pub(super) fn settle_objects(&mut self, ids: &[ObjectId]) -> Result<()> {
        if self.later.is_empty() {
            return Ok(());
        }
        let mut pages = Vec::new();
        for &id in ids {
            pages.extend(self.space.get(id)?.pages().map(GlobalPage));
        }
        self.settle_home(pages)
    }
}
