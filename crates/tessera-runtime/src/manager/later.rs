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

use std::collections::BTreeMap;

use super::*;

/// The most bytes of started reads kept before the oldest are put home unasked: each holds
/// a staging buffer (on a GPU, host-visible memory), and evicted pages that are never needed
/// again would otherwise hold theirs until their object is freed.
const LATER_MAX_BYTES: u64 = 256 << 20;

/// One started read of a device's evicted pages.
struct Batch {
    read: Box<dyn PendingRead>,
    /// Where each slot's bytes go, in the order read: the page and its place at home.
    dests: Vec<(GlobalPage, ObjectId, u64, u64)>,
    bytes: u64,
}

/// The write-backs still in flight, by page.
#[derive(Default)]
pub(super) struct Later {
    /// By id, so the first is the oldest.
    batches: BTreeMap<u64, Batch>,
    /// The batch whose bytes are the page's newest; a page written home since is absent.
    pages: HashMap<GlobalPage, u64>,
    next: u64,
    /// Of every batch kept.
    bytes: u64,
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
        // Older pending bytes of these pages are stale from now on.
        for &(page, ..) in &dests {
            self.forget(page);
        }
        let id = self.next;
        self.next += 1;
        for &(page, ..) in &dests {
            self.pages.insert(page, id);
        }
        let bytes = dests.iter().map(|d| d.3).sum();
        self.bytes += bytes;
        self.batches.insert(id, Batch { read, dests, bytes });
    }

    fn remove(&mut self, id: u64) -> Option<Batch> {
        let b = self.batches.remove(&id)?;
        self.bytes -= b.bytes;
        Some(b)
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
                self.remove(id);
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
            .filter_map(|id| self.remove(id).map(|b| (id, b)))
            .collect()
    }

    /// The oldest batch, taken out, while more than [`LATER_MAX_BYTES`] are kept.
    fn take_oldest_over_bound(&mut self) -> Option<(u64, Batch)> {
        if self.bytes <= LATER_MAX_BYTES {
            return None;
        }
        let id = *self.batches.keys().next()?;
        self.remove(id).map(|b| (id, b))
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
            self.put_home(id, b)?;
        }
        Ok(())
    }

    /// Keeps the started reads within [`LATER_MAX_BYTES`], putting the oldest home: by then
    /// long done, so no wait.
    pub(super) fn bound_later(&mut self) -> Result<()> {
        while let Some((id, b)) = self.later.take_oldest_over_bound() {
            self.put_home(id, b)?;
        }
        Ok(())
    }

    /// Waits for a batch's bytes and writes home those still the newest of their page.
    fn put_home(&mut self, id: u64, b: Batch) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A read no test takes.
    struct Untaken;

    impl PendingRead for Untaken {
        fn wait(self: Box<Self>) -> Result<Vec<Vec<u8>>> {
            Err(RuntimeError::Internal("an untaken read was taken".into()))
        }
    }

    fn batch(l: &mut Later, page: u64, bytes: u64) {
        l.add(
            Box::new(Untaken),
            vec![(GlobalPage(page), ObjectId(0), page, bytes)],
        );
    }

    #[test]
    fn past_the_bound_the_oldest_reads_go_first_and_forgotten_ones_stop_counting() {
        let mut l = Later::default();
        let quarter = LATER_MAX_BYTES / 4;
        for p in 0..4 {
            batch(&mut l, p, quarter);
        }
        assert!(l.take_oldest_over_bound().is_none(), "at the bound: kept");
        batch(&mut l, 4, quarter);
        assert_eq!(l.take_oldest_over_bound().map(|(id, _)| id), Some(0));
        assert!(l.take_oldest_over_bound().is_none());
        // A page written home since: its batch is dropped and its bytes no longer count.
        l.forget(GlobalPage(1));
        assert_eq!(l.bytes, 3 * quarter);
        // A newer read of a page drops the older batch once nothing in it is the newest.
        batch(&mut l, 2, quarter);
        assert_eq!(l.batches.keys().copied().collect::<Vec<_>>(), [3, 4, 5]);
        assert_eq!(l.bytes, 3 * quarter);
        l.forget(GlobalPage(2));
        assert_eq!(l.batches.keys().copied().collect::<Vec<_>>(), [3, 4]);
        assert_eq!(l.bytes, 2 * quarter);
    }
}
