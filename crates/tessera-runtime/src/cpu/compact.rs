//! Per-launch request bit fields (the patent's request bit field) and their compaction into a
//! request list: the CPU twin of `shader/compact.wgsl` in tessera-wgpu.
//!
//! A kernel invocation that misses sets one bit per global page it needs, in a read field or a
//! write field. Thousands of invocations touching one page set the same bit, so the redundancy
//! the paper fought with readbacks and compaction (3.4) never materialises. Turning the fields
//! into a sorted, de-duplicated request list scans one 64-bit word per 64 pages and visits only
//! the set bits: O(pages/64 + requests), no sort.

use std::sync::atomic::{AtomicU64, Ordering};

use tessera_core::{Access, GlobalPage, PageRequest};

/// The read and write request bits of one launch, one bit per global page each. Bits are set
/// with atomic ORs so that a launch's worker threads can record misses concurrently.
#[derive(Debug, Default)]
pub struct RequestBits {
    read: Vec<AtomicU64>,
    write: Vec<AtomicU64>,
}

impl RequestBits {
    pub fn new(pages: u64) -> Self {
        let words = pages.div_ceil(64) as usize;
        RequestBits {
            read: (0..words).map(|_| AtomicU64::new(0)).collect(),
            write: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Pages covered (rounded up to whole words).
    pub fn capacity(&self) -> u64 {
        self.read.len() as u64 * 64
    }

    /// Records a request. Pages beyond the field are the caller's bug and are ignored here
    /// because translation has already refused them with a typed error.
    #[inline]
    pub fn record(&self, page: GlobalPage, access: Access) {
        let field = match access {
            Access::Read => &self.read,
            Access::Write => &self.write,
        };
        if let Some(w) = field.get(page.index() / 64) {
            // Relaxed is enough: the launch's join orders these stores before uniquify reads.
            w.fetch_or(1 << (page.0 % 64), Ordering::Relaxed);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.read
            .iter()
            .chain(&self.write)
            .all(|w| w.load(Ordering::Relaxed) == 0)
    }

    /// The sorted, de-duplicated request list; a page asked for both ways is one write request.
    /// Clears the fields in the same scan, ready for the next launch.
    pub fn uniquify(&mut self) -> Vec<PageRequest> {
        let mut out = Vec::new();
        for (i, (r, w)) in self.read.iter_mut().zip(&mut self.write).enumerate() {
            let (r, w) = (std::mem::take(r.get_mut()), std::mem::take(w.get_mut()));
            let mut any = r | w;
            while any != 0 {
                let b = any.trailing_zeros() as u64;
                any &= any - 1;
                out.push(PageRequest {
                    page: GlobalPage(i as u64 * 64 + b),
                    access: if w >> b & 1 == 1 {
                        Access::Write
                    } else {
                        Access::Read
                    },
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        #[test]
        fn uniquify_matches_a_sort_of_every_request(
            pages in 1u64..700,
            reqs in proptest::collection::vec((0u64..700, any::<bool>()), 0..400)
        ) {
            let mut bits = RequestBits::new(pages);
            let mut naive: BTreeMap<u64, Access> = BTreeMap::new();
            for &(p, w) in &reqs {
                if p >= pages { continue; }
                let a = if w { Access::Write } else { Access::Read };
                bits.record(GlobalPage(p), a);
                let e = naive.entry(p).or_insert(a);
                *e = (*e).max(a);
            }
            let want: Vec<PageRequest> = naive
                .into_iter()
                .map(|(p, access)| PageRequest { page: GlobalPage(p), access })
                .collect();
            prop_assert_eq!(bits.uniquify(), want);
            prop_assert!(bits.is_empty(), "uniquify leaves the fields clear");
        }
    }
}
