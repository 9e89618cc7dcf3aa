//! The directory (paper 3.2.3): per global page, which devices hold a valid copy, which one (if
//! any) holds it modified, and where its home copy in host memory is.

use std::ops::Range;

use crate::error::{CoreError, Result};
use crate::{DeviceId, GlobalPage, NodeId};

/// A set of up to 64 devices, one bit each (the paper's per-GPU presence bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceSet(pub u64);

impl DeviceSet {
    pub const EMPTY: DeviceSet = DeviceSet(0);

    pub fn only(d: DeviceId) -> Self {
        DeviceSet(1 << d.0)
    }
    #[inline]
    pub fn contains(self, d: DeviceId) -> bool {
        self.0 & (1 << d.0) != 0
    }
    pub fn insert(&mut self, d: DeviceId) {
        self.0 |= 1 << d.0;
    }
    pub fn remove(&mut self, d: DeviceId) {
        self.0 &= !(1 << d.0);
    }
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn without(self, d: DeviceId) -> Self {
        DeviceSet(self.0 & !(1 << d.0))
    }
    pub fn intersects(self, o: DeviceSet) -> bool {
        self.0 & o.0 != 0
    }
    /// Members in increasing order.
    pub fn iter(self) -> impl Iterator<Item = DeviceId> {
        let mut bits = self.0;
        std::iter::from_fn(move || {
            (bits != 0).then(|| {
                let d = bits.trailing_zeros();
                bits &= bits - 1;
                DeviceId(d as u8)
            })
        })
    }
}

/// One page's directory entry: MOESI's states, per page. With no owner, home holds the latest
/// data and every member of `copies` holds the same (shared, or exclusive and clean). With
/// `owner == Some(d)`, `d` is in `copies`, home is stale and `d`'s copy is the latest:
/// - `writable`: `d` holds it writable and `copies == {d}` (modified);
/// - not `writable`: `d` holds it read-only and every other member of `copies` holds the same
///   bytes (owned and shared, under [`Coherence::Owned`](crate::Coherence::Owned) only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DirEntry {
    pub copies: DeviceSet,
    pub owner: Option<DeviceId>,
    pub writable: bool,
}

impl DirEntry {
    /// Home is the latest copy exactly when no device owns the page.
    pub fn home_is_latest(&self) -> bool {
        self.owner.is_none()
    }
}

/// Which node is home for a page. A pure function of the page number, so the directory can be
/// split across nodes later (each node the home of part of the space) without changing callers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HomeMap {
    /// One node is home for everything: today's single-process runtime.
    Single(NodeId),
    /// Pages are dealt out to `nodes` nodes in blocks of `block_pages`, round robin.
    Blocked { nodes: u16, block_pages: u64 },
}

impl HomeMap {
    pub fn home(&self, page: GlobalPage) -> NodeId {
        match *self {
            HomeMap::Single(n) => n,
            HomeMap::Blocked { nodes, block_pages } => {
                NodeId(((page.0 / block_pages.max(1)) % nodes.max(1) as u64) as u16)
            }
        }
    }
}

/// The directory of every global page.
///
/// Only the protocol changes it (see [`crate::protocol::Message::Create`] and
/// [`crate::protocol::Message::Free`]): readers get `&Directory` from
/// [`crate::Protocol::directory`]. A page is *live* while it belongs to a live object; the
/// pages of freed objects stay in the table as holes until a later object reuses them or the
/// space shrinks past them, and a hole is as unknown to every lookup as a page past the end.
#[derive(Clone, Debug)]
pub struct Directory {
    entries: Vec<DirEntry>,
    live: Vec<bool>,
    pub home: HomeMap,
}

impl Directory {
    /// A directory of `pages` live pages, every one home-only.
    pub fn new(pages: u64, home: HomeMap) -> Self {
        Directory {
            entries: vec![DirEntry::default(); pages as usize],
            live: vec![true; pages as usize],
            home,
        }
    }

    /// Pages spanned, holes included.
    pub fn len(&self) -> u64 {
        self.entries.len() as u64
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the page belongs to a live object.
    pub fn is_live(&self, page: GlobalPage) -> bool {
        self.live.get(page.index()).copied().unwrap_or(false)
    }

    /// The entry of a live page; a hole or a page past the end is unknown.
    pub fn entry(&self, page: GlobalPage) -> Result<&DirEntry> {
        if !self.is_live(page) {
            return Err(CoreError::UnknownPage(page));
        }
        Ok(&self.entries[page.index()])
    }

    pub(crate) fn entry_mut(&mut self, page: GlobalPage) -> Result<&mut DirEntry> {
        if !self.is_live(page) {
            return Err(CoreError::UnknownPage(page));
        }
        Ok(&mut self.entries[page.index()])
    }

    /// Every entry, holes included (a hole's entry is always home-only with no copies).
    pub fn entries(&self) -> &[DirEntry] {
        &self.entries
    }

    /// Makes `pages` live and home-only, growing the table when they reach past its end.
    /// The caller has checked that none of them is live.
    pub(crate) fn create(&mut self, pages: Range<u64>) {
        if pages.end > self.len() {
            self.entries.resize(pages.end as usize, DirEntry::default());
            self.live.resize(pages.end as usize, false);
        }
        let r = pages.start as usize..pages.end as usize;
        self.entries[r.clone()].fill(DirEntry::default());
        self.live[r].fill(true);
    }

    /// Turns `pages` into holes and drops the holes that end the table. The caller has
    /// dropped every copy of them first.
    pub(crate) fn free(&mut self, pages: Range<u64>) {
        let r = pages.start as usize..pages.end as usize;
        self.entries[r.clone()].fill(DirEntry::default());
        self.live[r].fill(false);
        let end = self.live.iter().rposition(|&l| l).map_or(0, |i| i + 1);
        self.entries.truncate(end);
        self.live.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_set_ops() {
        let mut s = DeviceSet::EMPTY;
        s.insert(DeviceId(63));
        s.insert(DeviceId(0));
        s.insert(DeviceId(5));
        assert_eq!(
            s.iter().collect::<Vec<_>>(),
            [DeviceId(0), DeviceId(5), DeviceId(63)]
        );
        assert_eq!(s.len(), 3);
        s.remove(DeviceId(5));
        assert!(!s.contains(DeviceId(5)) && s.contains(DeviceId(63)));
        assert_eq!(s.without(DeviceId(63)), DeviceSet::only(DeviceId(0)));
    }

    #[test]
    fn home_map_splits_blocks_round_robin() {
        let h = HomeMap::Blocked {
            nodes: 3,
            block_pages: 4,
        };
        let homes: Vec<u16> = (0..16).map(|p| h.home(GlobalPage(p)).0).collect();
        assert_eq!(homes, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0]);
        assert_eq!(HomeMap::Single(NodeId(2)).home(GlobalPage(9)), NodeId(2));
    }
}
