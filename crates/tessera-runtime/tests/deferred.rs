//! Deferred execution on a node of one device (`SystemConfig::deferred`): held bands are
//! queued without waiting, a frame costs one blocking wait, and a deferred launch that faults
//! (here on a page its kernel's footprint leaves out) makes the launches queued behind it do
//! nothing until the driver settles and runs them again in order, so the result is the one
//! every frame computed in turn gives.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{DeviceId, GlobalPage, ObjectDesc, TexelFormat};
use tessera_runtime::{Partition, PassSpec, PassStats, Procedure, System, SystemConfig};

#[path = "shared/deferred_kernels.rs"]
mod kernels;

use kernels::{floats, Scene, Sum, H, W};

#[test]
fn a_deferred_frame_waits_once_and_a_fault_redoes_what_was_skipped_in_order() {
    let sys = cpu_system();
    let scene = Scene::new(&sys);
    // Per frame: the stats, the blocking waits and the messages to the memory manager.
    let frame = || -> (PassStats, u64, u64) {
        let before = sys.host_counters()[0];
        let mut total = PassStats::default();
        for p in &scene.passes {
            let s = sys
                .run_pass(p, W, H, Partition::Rows, Procedure::Relaunch)
                .unwrap();
            total.add(&s[0]);
        }
        total.add(&sys.settle().unwrap()[0]);
        let d = sys.host_counters()[0].since(&before);
        (total, d.blocking_waits, d.manager_messages)
    };
    // Frame 1 pages everything in the ordinary way.
    let (first, _, asked) = frame();
    assert_eq!(first.held_bands, 0);
    assert!(asked > 0, "frame 1 must ask for its pages");
    // Frame 2: both bands held, queued without a wait; the frame's one wait is the settle.
    let (steady, waits, messages) = frame();
    assert_eq!(steady.held_bands, 2, "{steady:?}");
    assert_eq!(steady.relaunched, 0, "{steady:?}");
    assert_eq!(steady.launches, 2, "{steady:?}");
    assert_eq!(waits, 1, "{steady:?}");
    assert_eq!(messages, 0, "{steady:?}");
    // The host takes `e` away; the sum's footprint does not name it, so frame 3's deferred
    // sum faults, and the accumulate queued behind it must do nothing until it is redone.
    let e_pages = scene.e_pages(scene.e.desc.page_count());
    sys.mm.evict(DeviceId(0), e_pages).unwrap();
    let (faulted, _, _) = frame();
    assert_eq!(faulted.held_bands, 2, "{faulted:?}");
    assert!(faulted.relaunched > 0, "{faulted:?}");
    // Three frames of `b += a + e; c += b`, each pass once, in order: an accumulate run on
    // frame 2's `b`, or not run again after the sum is redone, leaves `c` short.
    let want: Vec<f32> = scene
        .a_vals
        .iter()
        .zip(&scene.e_vals)
        .map(|(x, y)| {
            let s = x + y;
            let (b1, b2, b3) = (0.0 + s, (0.0 + s) + s, ((0.0 + s) + s) + s);
            ((0.0 + b1) + b2) + b3
        })
        .collect();
    assert_eq!(floats(&sys.mm.read(scene.c.id).unwrap()), want);
}

fn cpu_system() -> System {
    System::cpu(&SystemConfig::new(1).threads(1).deferred(true)).unwrap()
}

#[test]
fn a_host_read_waits_for_a_deferred_pass_that_faulted() {
    let sys = cpu_system();
    let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap();
    let n = (W * H) as usize;
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    let twos: Vec<u8> = (0..n).flat_map(|_| 2.0f32.to_le_bytes()).collect();
    let a = sys.create(desc, Some(ones)).unwrap();
    let e = sys.create(desc, Some(twos)).unwrap();
    let b = sys.create(desc, None).unwrap();
    let sum = PassSpec::over(
        Sum {
            a: a.id,
            e: e.id,
            b: b.id,
        },
        &[&a, &e, &b],
        W,
        H,
    );
    let e_pages: Vec<GlobalPage> = (0..desc.page_count())
        .map(|p| GlobalPage(e.page_offset + p))
        .collect();
    for k in 1..=4u32 {
        // From the second pass on, `a` and `b` are held, so the pass is deferred, and it
        // faults on `e`, which the footprint leaves out.
        sys.mm.evict(DeviceId(0), e_pages.clone()).unwrap();
        sys.run_pass(&sum, W, H, Partition::Rows, Procedure::Relaunch)
            .unwrap();
        // No settle by the caller: the read itself waits for the pass, redone.
        let got = floats(&sys.mm.read(b.id).unwrap());
        let want = 3.0 * k as f32;
        assert!(got.iter().all(|&v| v == want), "after {k} passes: {got:?}");
    }
}
