//! Which pages to fetch with a batch beyond the ones it asked for: CUDA UVM's bitmap-tree
//! heuristic (open-gpu-kernel-modules, `uvm_perf_prefetch.c`), over an object's pages.
//!
//! UVM splits a 2 MiB region into its 64 KiB pages and views them as the leaves of a binary
//! tree. A faulting page climbs the tree; at each level it looks at the subtree it is in and
//! counts the leaves that are resident or faulting now. The largest subtree in which that count
//! exceeds the threshold (51% by default) is fetched whole. So a region being filled densely
//! is fetched in growing powers of two, while isolated faults fetch only themselves.
//!
//! Here a region is `region` consecutive local pages of one object (row-major page order, so
//! a region is a run of pages along a page row), aligned to a multiple of `region`. An object
//! whose page count is not a multiple of `region` has a short last region; leaves past the
//! object's end count as neither resident nor wanted, and are never returned.
//!
//! Pure: the caller says which local pages are resident on the device and which the batch
//! asks for, and gets back the local pages worth adding. Whether they can be added (room in
//! the budget, no other device disturbed) is the caller's business.

use std::collections::BTreeSet;

/// UVM's default threshold: a subtree is fetched when more than this share (in percent) of
/// its leaves are resident or faulting.
pub const DEFAULT_THRESHOLD_PCT: u32 = 51;

/// Pages (local indices, ascending) of the object to prefetch along with `faulted`, which are
/// not themselves returned. `pages` is the object's page count; `region` must be a power of
/// two (others are rounded up to one); `resident(p)` says whether local page `p` is already on
/// the device. Faulted pages at or past `pages` are ignored.
pub fn tree_prefetch(
    pages: u64,
    region: u64,
    threshold_pct: u32,
    resident: impl Fn(u64) -> bool,
    faulted: &[u64],
) -> Vec<u64> {
    let region = region.max(1).next_power_of_two();
    let wanted: BTreeSet<u64> = faulted.iter().copied().filter(|&p| p < pages).collect();
    let mut out = BTreeSet::new();
    let mut regions: Vec<u64> = wanted.iter().map(|p| p / region).collect();
    regions.dedup();
    for r in regions {
        let start = r * region;
        let end = (start + region).min(pages);
        // Leaves: resident or faulting now (the subtree counts of UVM's bitmap tree).
        let leaf: Vec<bool> = (start..start + region)
            .map(|p| p < end && (wanted.contains(&p) || resident(p)))
            .collect();
        // Prefix sums make each subtree's count one subtraction.
        let mut sum = vec![0u64; leaf.len() + 1];
        for (i, &l) in leaf.iter().enumerate() {
            sum[i + 1] = sum[i] + l as u64;
        }
        for &p in wanted.range(start..end) {
            let mut best: Option<(u64, u64)> = None;
            let mut size = 2;
            while size <= region {
                let lo = (p - start) / size * size;
                let count = sum[(lo + size) as usize] - sum[lo as usize];
                if count * 100 > threshold_pct as u64 * size {
                    best = Some((start + lo, size));
                }
                size *= 2;
            }
            if let Some((lo, size)) = best {
                for q in lo..(lo + size).min(end) {
                    if !wanted.contains(&q) && !resident(q) {
                        out.insert(q);
                    }
                }
            }
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: u64) -> bool {
        false
    }

    #[test]
    fn an_isolated_fault_fetches_only_itself() {
        // One leaf of 16: in its pair the count is 1 of 2, which is not over 51%.
        assert!(tree_prefetch(16, 16, 51, none, &[5]).is_empty());
    }

    #[test]
    fn two_faults_in_a_pair_of_a_quad_do_not_fetch_the_quad() {
        // Pages 4 and 5: the pair {4,5} is full (2 of 2) but is already wanted; the quad
        // {4..7} has 2 of 4 = 50%, not over 51%.
        assert!(tree_prefetch(16, 16, 51, none, &[4, 5]).is_empty());
    }

    #[test]
    fn three_of_a_quad_fetch_the_fourth() {
        // {4,5,6} of quad {4..7}: 3 of 4 = 75%; the octet {0..7} has 3 of 8, not enough.
        assert_eq!(tree_prefetch(16, 16, 51, none, &[4, 5, 6]), vec![7]);
    }

    #[test]
    fn resident_pages_count_toward_the_subtree() {
        // Resident 0..=4 plus fault 5: octet {0..7} holds 6 of 8 = 75%, so 6 and 7 come;
        // the whole region has 6 of 16, not enough.
        let res = |p: u64| p <= 4;
        assert_eq!(tree_prefetch(16, 16, 51, res, &[5]), vec![6, 7]);
    }

    #[test]
    fn a_dense_region_is_fetched_whole_and_only_missing_pages_are_returned() {
        // 9 of 16 faulting: 56% of the region. Pages 9..=15 are missing; 10 is resident.
        let faulted: Vec<u64> = (0..9).collect();
        let res = |p: u64| p == 10;
        assert_eq!(
            tree_prefetch(32, 16, 51, res, &faulted),
            vec![9, 11, 12, 13, 14, 15]
        );
    }

    #[test]
    fn the_threshold_is_strict_and_adjustable() {
        // {0,1} of quad {0..3} is exactly 50%.
        assert!(tree_prefetch(16, 16, 50, none, &[0, 1]).is_empty());
        assert_eq!(tree_prefetch(16, 16, 49, none, &[0, 1]), vec![2, 3]);
    }

    #[test]
    fn a_short_last_region_never_reaches_past_the_object() {
        // 10 pages, regions of 8: the second region holds 8 and 9 only. Faults 8 and 9 fill
        // pair {8,9}; quad {8..11} has 2 of 4 (10 and 11 do not exist).
        assert!(tree_prefetch(10, 8, 51, none, &[8, 9]).is_empty());
        // With 8 resident and 9 faulting in a 3-of-4 quad we would need a third leaf that
        // does not exist; faults past the end are ignored.
        assert!(tree_prefetch(10, 8, 51, none, &[9, 10, 11]).is_empty());
    }

    #[test]
    fn regions_are_independent() {
        // Region 0 dense, region 1 a lone fault.
        let faulted = [0, 1, 2, 20];
        assert_eq!(tree_prefetch(32, 16, 51, none, &faulted), vec![3]);
    }

    #[test]
    fn a_non_power_of_two_region_is_rounded_up() {
        // region 12 -> 16.
        let faulted: Vec<u64> = (0..9).collect();
        assert_eq!(
            tree_prefetch(16, 12, 51, none, &faulted),
            (9..16).collect::<Vec<_>>()
        );
    }
}
