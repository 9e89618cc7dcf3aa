//! What each device's page table grants, published by the memory manager for the drivers to
//! read without a message: the steady state's "no host work when nothing faults"
//! (docs/PROTOCOL.md, "The held set").
//!
//! The memory manager writes a device's entries as it sends the descriptor changes to the
//! device's worker (`Outbox::flush`), so for rights taken away the set is never behind the
//! device: a downgrade or invalidation shows here before the worker applies it. Rights are
//! only ever added by the device's own request, while its
//! driver waits for the reply. A driver that finds every page of a band here launches without
//! asking the memory manager and without its memory lock; if another device takes a page
//! between the look and the launch, the launch faults on it and the relaunch procedure asks as
//! always. So the set chooses the cost of a pass, never its result: the device's page table,
//! checked by every access, stays the authority (the model checker's "held operations" check
//! that argument on the protocol, docs/PROTOCOL.md).

use tessera_core::{Access, DeviceId, GlobalPage, PageDescriptor, PageRequest};

use crate::sync::RwLock;

const NONE: u8 = 0;
const READ: u8 = 1;
const WRITE: u8 = 2;

/// Per device, per global page: not held, held readable, or held writable.
pub struct HeldPages {
    devices: Vec<RwLock<Vec<u8>>>,
}

impl HeldPages {
    pub(crate) fn new(devices: usize) -> Self {
        HeldPages {
            devices: (0..devices).map(|_| RwLock::new(Vec::new())).collect(),
        }
    }

    /// Records the descriptor the memory manager is about to give `device` for `page`.
    #[cfg(all(test, not(feature = "shuttle")))]
    pub(crate) fn set(&self, device: DeviceId, page: GlobalPage, desc: PageDescriptor) {
        self.set_all(device, std::iter::once((page, desc)));
    }

    /// Records the descriptors the memory manager is about to give `device`, in order, under
    /// one lock (a batch's tens of pages took a lock each).
    pub(crate) fn set_all(
        &self,
        device: DeviceId,
        descs: impl Iterator<Item = (GlobalPage, PageDescriptor)>,
    ) {
        let Some(lock) = self.devices.get(device.index()) else {
            return;
        };
        let mut descs = descs.peekable();
        if descs.peek().is_none() {
            return;
        }
        // A poisoned lock means a driver panicked while reading; the set is a hint, so a
        // missing entry (read as "not held") is always safe.
        let Ok(mut v) = lock.write() else {
            return;
        };
        for (page, desc) in descs {
            let level = match (desc.is_resident(), desc.is_writable()) {
                (false, _) => NONE,
                (true, false) => READ,
                (true, true) => WRITE,
            };
            let i = page.index();
            if i >= v.len() {
                if level == NONE {
                    continue;
                }
                v.resize(i + 1, NONE);
            }
            v[i] = level;
        }
    }

    /// Whether `device` holds every one of `pages` with at least the access asked for.
    pub fn covers(&self, device: DeviceId, pages: &[PageRequest]) -> bool {
        self.with(device, |held| pages.iter().all(held))
            .unwrap_or(false)
    }

    /// The requests among `pages` that `device` does not hold with the access asked for, in
    /// their order; all of them when the set cannot be read.
    pub fn missing(&self, device: DeviceId, pages: Vec<PageRequest>) -> Vec<PageRequest> {
        match self.with(device, |held| {
            pages.iter().filter(|r| !held(r)).copied().collect()
        }) {
            Some(m) => m,
            None => pages,
        }
    }

    /// Calls `f` with a test of one request against `device`'s set; `None` for an unknown
    /// device or a poisoned lock.
    fn with<T>(
        &self,
        device: DeviceId,
        f: impl FnOnce(&dyn Fn(&PageRequest) -> bool) -> T,
    ) -> Option<T> {
        let lock = self.devices.get(device.index())?;
        let v = lock.read().ok()?;
        let held = |r: &PageRequest| {
            let need = match r.access {
                Access::Read => READ,
                Access::Write => WRITE,
            };
            v.get(r.page.index()).is_some_and(|&l| l >= need)
        };
        Some(f(&held))
    }
}

#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;
    use tessera_core::SlotAddr;

    fn req(page: u64, access: Access) -> PageRequest {
        PageRequest {
            page: GlobalPage(page),
            access,
        }
    }

    #[test]
    fn rights_are_covered_only_as_far_as_granted() {
        let h = HeldPages::new(2);
        let d = DeviceId(0);
        let at = SlotAddr { memory: 0, slot: 3 };
        assert!(!h.covers(d, &[req(5, Access::Read)]));
        h.set(d, GlobalPage(5), PageDescriptor::resident(at, false));
        assert!(h.covers(d, &[req(5, Access::Read)]));
        assert!(!h.covers(d, &[req(5, Access::Write)]));
        h.set(d, GlobalPage(5), PageDescriptor::resident(at, true));
        assert!(h.covers(d, &[req(5, Access::Write), req(5, Access::Read)]));
        // Another device's set is its own.
        assert!(!h.covers(DeviceId(1), &[req(5, Access::Read)]));
        h.set(d, GlobalPage(5), PageDescriptor::NOT_RESIDENT);
        assert!(!h.covers(d, &[req(5, Access::Read)]));
        // A page past the end and an unknown device are not held.
        assert!(!h.covers(d, &[req(999, Access::Read)]));
        assert!(!h.covers(DeviceId(7), &[]));
        // The empty set is covered by any known device.
        assert!(h.covers(d, &[]));
        // What is missing keeps its order and its access; an unknown device misses all.
        h.set(d, GlobalPage(2), PageDescriptor::resident(at, false));
        let asked = vec![
            req(1, Access::Read),
            req(2, Access::Read),
            req(2, Access::Write),
            req(3, Access::Write),
        ];
        assert_eq!(
            h.missing(d, asked.clone()),
            [
                req(1, Access::Read),
                req(2, Access::Write),
                req(3, Access::Write)
            ]
        );
        assert_eq!(h.missing(DeviceId(7), asked.clone()), asked);
    }
}
