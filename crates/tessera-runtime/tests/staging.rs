//! Asynchronous staging (`SystemConfig::staging`) through a real node's memory manager: a
//! staged batch from a locked device is granted at once, or refused with nothing changed
//! (directory, memory, counters other than the refusal's, data).
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{Access, CoreError, DeviceId, GlobalPage, ObjectDesc, PageRequest};
use tessera_runtime::{DeviceTraffic, RuntimeError, System, SystemConfig};

/// Bytes per page of the test buffer: 16 words.
const PAGE: u64 = 64;

fn node(devices: usize, budget_pages: u64, staging: bool) -> System {
    System::cpu(
        &SystemConfig::new(devices)
            .threads(1)
            .budget(budget_pages * PAGE)
            .memory(budget_pages * PAGE)
            .staging(staging),
    )
    .unwrap()
}

fn req(page: u64, access: Access) -> PageRequest {
    PageRequest {
        page: GlobalPage(page),
        access,
    }
}

/// Everything a refused stage must leave as it was: the directory, each device's memory,
/// the object's data and every counter except the refusals.
fn snapshot(sys: &System, id: tessera_core::ObjectId) -> impl PartialEq + std::fmt::Debug {
    let (memory, dir) = sys.mm.memory().unwrap();
    let traffic: Vec<DeviceTraffic> = sys
        .mm
        .traffic()
        .unwrap()
        .into_iter()
        .map(|t| DeviceTraffic {
            stage_refusals: 0,
            // The snapshot's own read of the object below counts here.
            host_reads: 0,
            ..t
        })
        .collect();
    (memory, dir, traffic, sys.mm.read(id).unwrap())
}

fn refusals(sys: &System, d: usize) -> u64 {
    sys.mm.traffic().unwrap()[d].stage_refusals
}

#[test]
fn a_refused_stage_changes_nothing_and_a_granted_one_keeps_the_lock() {
    let sys = node(2, 8, true);
    let data: Vec<u8> = (0..4 * PAGE).map(|i| i as u8).collect();
    let obj = sys
        .create(
            ObjectDesc::buffer(4 * PAGE, PAGE).unwrap(),
            Some(data.clone()),
        )
        .unwrap();
    let p = |l: u64| obj.pages().start + l;
    let (d0, d1) = (DeviceId(0), DeviceId(1));
    // Unlocked: nothing to stage for.
    let err = sys
        .mm
        .stage(d0, vec![req(p(2), Access::Read)])
        .wait()
        .unwrap();
    assert!(matches!(
        err,
        Err(RuntimeError::Core(CoreError::StageWhileUnlocked(_)))
    ));
    // Device 1 locked owning page 0, device 0 locked holding page 1.
    sys.mm
        .request(d1, vec![req(p(0), Access::Write)])
        .wait()
        .unwrap()
        .unwrap();
    sys.mm
        .request(d0, vec![req(p(1), Access::Read)])
        .wait()
        .unwrap()
        .unwrap();
    let before = snapshot(&sys, obj.id);
    // Page 0 would need locked device 1: refused, never deferred.
    let r = sys
        .mm
        .stage(d0, vec![req(p(0), Access::Read)])
        .wait()
        .unwrap();
    assert!(
        matches!(r, Err(RuntimeError::Core(CoreError::StageWouldWait(_)))),
        "{r:?}"
    );
    // Page 1 is held by device 0's running procedure.
    let r = sys
        .mm
        .stage(d0, vec![req(p(3), Access::Read), req(p(1), Access::Write)])
        .wait()
        .unwrap();
    assert!(
        matches!(r, Err(RuntimeError::Core(CoreError::StageHeld { .. }))),
        "{r:?}"
    );
    // With the unlocked one at the start, three refusals.
    assert_eq!(refusals(&sys, 0), 3);
    assert_eq!(snapshot(&sys, obj.id), before);
    // Pages no locked device holds: granted at once, and device 0 is still locked.
    sys.mm
        .stage(d0, vec![req(p(2), Access::Write), req(p(3), Access::Read)])
        .wait()
        .unwrap()
        .unwrap();
    assert!(sys
        .mm
        .holds(d0, vec![GlobalPage(p(2)), GlobalPage(p(3))])
        .unwrap());
    let t = sys.mm.traffic().unwrap();
    assert_eq!((t[0].staged_batches, t[0].staged_pages), (1, 2));
    // Staged batches are not request batches (one request so far).
    assert_eq!(t[0].batches, 1);
    let again = sys
        .mm
        .request(d0, vec![req(p(2), Access::Read)])
        .wait()
        .unwrap();
    assert!(
        matches!(
            again,
            Err(RuntimeError::Core(CoreError::RequestWhileLocked(_)))
        ),
        "{again:?}"
    );
    sys.mm.release(d0);
    sys.mm.release(d1);
    assert_eq!(sys.mm.read(obj.id).unwrap(), data);
}

#[test]
fn a_stage_that_does_not_fit_beside_the_held_pages_evicts_nothing() {
    // Three slots: device 0 holds two pages under its lock and has one more resident.
    let sys = node(1, 3, true);
    let obj = sys
        .create(ObjectDesc::buffer(6 * PAGE, PAGE).unwrap(), None)
        .unwrap();
    let p = |l: u64| obj.pages().start + l;
    let d0 = DeviceId(0);
    sys.mm
        .request(d0, vec![req(p(0), Access::Write)])
        .wait()
        .unwrap()
        .unwrap();
    sys.mm.release(d0);
    sys.mm
        .request(d0, vec![req(p(1), Access::Read), req(p(2), Access::Read)])
        .wait()
        .unwrap()
        .unwrap();
    let before = snapshot(&sys, obj.id);
    // Two pages beside the two held: only one slot can be freed (page 0's).
    let r = sys
        .mm
        .stage(d0, vec![req(p(3), Access::Read), req(p(4), Access::Read)])
        .wait()
        .unwrap();
    assert!(matches!(r, Err(RuntimeError::OverBudget { .. })), "{r:?}");
    assert_eq!(snapshot(&sys, obj.id), before);
    // One page fits by evicting page 0 (written home first), never a held page.
    sys.mm
        .stage(d0, vec![req(p(3), Access::Read)])
        .wait()
        .unwrap()
        .unwrap();
    let t = sys.mm.traffic().unwrap();
    assert_eq!((t[0].evictions, t[0].eviction_write_backs), (1, 1));
    assert!(sys
        .mm
        .holds(
            d0,
            vec![GlobalPage(p(1)), GlobalPage(p(2)), GlobalPage(p(3))]
        )
        .unwrap());
    sys.mm.release(d0);
}

#[test]
fn staging_off_refuses_every_stage() {
    let sys = node(1, 8, false);
    let obj = sys
        .create(ObjectDesc::buffer(2 * PAGE, PAGE).unwrap(), None)
        .unwrap();
    let p = obj.pages().start;
    sys.mm
        .request(DeviceId(0), vec![req(p, Access::Read)])
        .wait()
        .unwrap()
        .unwrap();
    let r = sys
        .mm
        .stage(DeviceId(0), vec![req(p + 1, Access::Read)])
        .wait()
        .unwrap();
    assert!(
        matches!(r, Err(RuntimeError::Core(CoreError::StagingOff))),
        "{r:?}"
    );
    sys.mm.release(DeviceId(0));
}
