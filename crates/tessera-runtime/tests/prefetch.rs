//! `Prefetch::Tree` through a real node: what a batch brings beyond what it asked for, when it
//! brings nothing, and how its hits are counted. The expected page counts are worked out by
//! hand from UVM's rule (a run of pages more than 51% resident or asked for comes whole).
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use std::sync::Arc;

use tessera_core::{Access, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, PageRequest};
use tessera_runtime::{
    Bound, Domain, Fault, Invocation, Kernel, PassSpec, Prefetch, Procedure, System, SystemConfig,
    PREFETCH_REGION,
};

/// Bytes per page of the test buffer: 16 words.
const PAGE: u64 = 64;

fn node(devices: usize, budget_pages: u64, prefetch: Prefetch) -> System {
    System::cpu(
        &SystemConfig::new(devices)
            .threads(1)
            .budget(budget_pages * PAGE)
            .memory(budget_pages * PAGE)
            .prefetch(prefetch),
    )
    .unwrap()
}

fn buffer(sys: &System, pages: u64) -> ObjectEntry {
    sys.create(ObjectDesc::buffer(pages * PAGE, PAGE).unwrap(), None)
        .unwrap()
}

fn ask(sys: &System, device: u8, obj: &ObjectEntry, locals: impl Iterator<Item = u64>, w: bool) {
    let first = obj.pages().start;
    let pages = locals
        .map(|l| PageRequest {
            page: GlobalPage(first + l),
            access: if w { Access::Write } else { Access::Read },
        })
        .collect();
    sys.mm
        .request(DeviceId(device), pages)
        .wait()
        .unwrap()
        .unwrap();
    sys.mm.release(DeviceId(device));
}

fn resident_on(sys: &System, device: usize) -> u64 {
    let (memory, _) = sys.mm.memory().unwrap();
    memory[device].unique_pages + memory[device].shared_pages
}

#[test]
fn a_region_more_than_half_asked_for_comes_whole() {
    assert_eq!(
        PREFETCH_REGION, 32,
        "the counts below assume regions of 32 pages"
    );
    let sys = node(1, 64, Prefetch::Tree);
    let b = buffer(&sys, 64);
    // 17 of region 0's 32 pages: 53% > 51%, so its other 15 come too. Region 1 untouched.
    ask(&sys, 0, &b, 0..17, false);
    let t = &sys.mm.traffic().unwrap()[0];
    assert_eq!((t.page_requests, t.prefetched), (17, 15));
    assert_eq!(t.host_to_device.pages, 32);
    assert_eq!(resident_on(&sys, 0), 32);
}

#[test]
fn without_prefetch_only_the_asked_pages_come() {
    let sys = node(1, 64, Prefetch::Off);
    let b = buffer(&sys, 64);
    ask(&sys, 0, &b, 0..17, false);
    let t = &sys.mm.traffic().unwrap()[0];
    assert_eq!((t.page_requests, t.prefetched), (17, 0));
    assert_eq!(resident_on(&sys, 0), 17);
}

#[test]
fn a_sparse_batch_brings_nothing_more() {
    let sys = node(1, 64, Prefetch::Tree);
    let b = buffer(&sys, 64);
    // Every fourth page: no pair, quad, ... is more than half full.
    ask(&sys, 0, &b, (0..32).step_by(4), false);
    assert_eq!(sys.mm.traffic().unwrap()[0].prefetched, 0);
}

#[test]
fn a_page_another_device_modified_is_not_prefetched() {
    let sys = node(2, 64, Prefetch::Tree);
    let b = buffer(&sys, 64);
    // Device 1 owns page 20 (a modified copy): reading it would take device 1's copy away
    // from it (a downgrade), which a guess must not do.
    ask(&sys, 1, &b, 20..21, true);
    ask(&sys, 0, &b, 0..17, false);
    let t = &sys.mm.traffic().unwrap()[0];
    assert_eq!(t.prefetched, 14);
    let (_, dir) = sys.mm.memory().unwrap();
    let e = dir[(b.pages().start + 20) as usize];
    assert_eq!(e.owner, Some(DeviceId(1)));
    assert!(!e.copies.contains(DeviceId(0)));
}

#[test]
fn a_prefetch_that_does_not_fit_beside_the_batch_is_dropped_not_the_batch() {
    // Room for 20 pages: the batch's 17 fit, with its 15 prefetched pages they would not, and
    // there is nothing else to evict.
    let sys = node(1, 20, Prefetch::Tree);
    let b = buffer(&sys, 32);
    ask(&sys, 0, &b, 0..17, false);
    let t = &sys.mm.traffic().unwrap()[0];
    assert_eq!((t.prefetched, t.evictions), (0, 0));
    assert_eq!(resident_on(&sys, 0), 17);
}

/// Reads word 0 of each page in `pages` (one invocation per page).
struct Touch {
    obj: ObjectEntry,
    words_per_page: u32,
}

impl Kernel for Touch {
    fn name(&self) -> &'static str {
        "touch"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, _y: u32) -> Result<(), Fault> {
        inv.load_u32(self.obj.id, x * self.words_per_page)
            .map(|_| ())
    }
}

#[test]
fn a_prefetched_page_a_launch_reads_is_a_hit() {
    let sys = node(1, 64, Prefetch::Tree);
    let b = buffer(&sys, 32);
    ask(&sys, 0, &b, 0..17, false);
    // Pages 17..32 were prefetched; a pass reads pages 17..20 of them.
    let spec = PassSpec {
        kernel: Arc::new(Touch {
            obj: b,
            words_per_page: (PAGE / 4) as u32,
        }),
        bindings: Arc::new(vec![Bound::new(&b)]),
        domain: Domain::Rect {
            x0: 17,
            y0: 0,
            x1: 20,
            y1: 1,
        },
        display: false,
    };
    sys.on_device(0, move |c| c.run_pass(&spec, Procedure::Relaunch))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap();
    let t = &sys.mm.traffic().unwrap()[0];
    assert_eq!(t.prefetched, 15);
    assert_eq!(t.prefetch_hits, 3);
    // Nothing was missing, so the pass asked for nothing more.
    assert_eq!(t.page_requests, 17);
}
