//! Several nodes, each the home of part of the address space (*Distributed Texture Memory in a
//! Multi-GPU Environment*, 5.4.2–5.4.3).
//!
//! Every node runs its own [`crate::Protocol`] and answers only for the pages [`HomeMap`] gives
//! it. A device's request batch is split by home ([`split_by_home`]) and the parts are
//! *acquired in increasing home order*: the part for the next home is sent only once the
//! previous home's `Complete` is in. A home locks the device when it grants its part (the
//! memory lock of paper 3.8, per home), so a device may hold the lock at homes below `h` while
//! its part waits at `h`. A deferred part at `h` waits only on devices locked at `h`, each of
//! which either runs (all its parts granted) or waits at a home above `h`: every wait points
//! to a strictly higher home or to a running device, so there is no cycle. Sending every part
//! at once ([`crate::model_nodes::SplitVariant::Parallel`]) deadlocks: two devices each granted
//! at one home and deferred at the other. The two-node model checker finds that run.
//!
//! A device releases by sending `Release` to every home that granted it a part, and sends no
//! new request until each has been delivered. Evictions go to the page's home.

use crate::directory::HomeMap;
use crate::protocol::RequestBatch;
use crate::NodeId;

/// The parts of `batch` per home node, in increasing node order (the acquisition order).
/// Each part keeps the batch's id and device and its pages in their original order; a node
/// with no page in the batch gets no part.
pub fn split_by_home(batch: &RequestBatch, homes: &HomeMap) -> Vec<(NodeId, RequestBatch)> {
    let mut parts: Vec<(NodeId, RequestBatch)> = Vec::new();
    for r in &batch.pages {
        let node = homes.home(r.page);
        match parts.iter_mut().find(|(n, _)| *n == node) {
            Some((_, part)) => part.pages.push(*r),
            None => parts.push((
                node,
                RequestBatch {
                    id: batch.id,
                    device: batch.device,
                    pages: vec![*r],
                },
            )),
        }
    }
    parts.sort_by_key(|(n, _)| *n);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Access, PageRequest, RequestId};
    use crate::{DeviceId, GlobalPage};

    #[test]
    fn a_batch_is_split_by_home_in_node_order() {
        let homes = HomeMap::Blocked {
            nodes: 3,
            block_pages: 2,
        };
        let r = |p, access| PageRequest {
            page: GlobalPage(p),
            access,
        };
        let batch = RequestBatch {
            id: RequestId(7),
            device: DeviceId(1),
            // Homes (blocks of 2, round robin over 3): 5→2, 0→0, 4→2, 3→1, 1→0.
            pages: vec![
                r(5, Access::Write),
                r(0, Access::Read),
                r(4, Access::Read),
                r(3, Access::Write),
                r(1, Access::Write),
            ],
        };
        let parts = split_by_home(&batch, &homes);
        let got: Vec<(u16, Vec<u64>)> = parts
            .iter()
            .map(|(n, b)| (n.0, b.pages.iter().map(|r| r.page.0).collect()))
            .collect();
        assert_eq!(got, [(0, vec![0, 1]), (1, vec![3]), (2, vec![5, 4])]);
        assert!(parts
            .iter()
            .all(|(_, b)| b.id == RequestId(7) && b.device == DeviceId(1)));
        assert_eq!(parts[2].1.pages[0].access, Access::Write);
        assert_eq!(
            split_by_home(&batch, &HomeMap::Single(NodeId(0))).len(),
            1,
            "one node is home for everything"
        );
    }
}
