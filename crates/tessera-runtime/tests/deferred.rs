//! Deferred execution on a node of one device (`SystemConfig::deferred`): held bands, and under
//! a budget the bands just granted, are queued without waiting, a frame costs one blocking wait, and a deferred launch that faults
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

/// Under a budget a lone device seldom holds a band: it asks for the band's pages, evicting
/// others, and queues the band it was granted without waiting for it (docs/PROTOCOL.md,
/// "Granted bands on a lone device"). The sum's footprint leaves `e` out, so granted sums
/// fault on it, and what was queued behind them runs again in order at the settle: the result
/// is that of every frame in turn, with or without deferral. Then frames of the accumulate
/// alone, whose footprint is whole, fault nowhere, and deferral waits less for them.
#[test]
fn granted_bands_are_queued_under_a_budget_and_a_fault_redoes_what_follows_in_order() {
    const FRAMES: usize = 3;
    // A page is 8 × 8 texels of 4 bytes; each object has 8. Room for 12 of the 32: a whole
    // pass never fits, so its rows go in waves that evict each other's pages.
    let page = 8 * 8 * 4;
    let run = |deferred: bool| {
        let cfg = SystemConfig::new(1)
            .threads(1)
            .deferred(deferred)
            .budget(12 * page);
        let sys = System::cpu(&cfg).unwrap();
        let scene = Scene::new(&sys);
        let pass = |p: &PassSpec, total: &mut PassStats| {
            let s = sys
                .run_pass(p, W, H, Partition::Rows, Procedure::Relaunch)
                .unwrap();
            total.add(&s[0]);
        };
        let mut faulting = PassStats::default();
        for _ in 0..FRAMES {
            for p in &scene.passes {
                pass(p, &mut faulting);
            }
            faulting.add(&sys.settle().unwrap()[0]);
        }
        let before = sys.host_counters()[0];
        let mut whole = PassStats::default();
        for _ in 0..FRAMES {
            pass(&scene.passes[1], &mut whole);
            whole.add(&sys.settle().unwrap()[0]);
        }
        let waits = sys.host_counters()[0].since(&before).blocking_waits;
        let evictions = sys.mm.traffic().unwrap()[0].evictions;
        let c = floats(&sys.mm.read(scene.c.id).unwrap());
        (c, scene, faulting, whole, waits, evictions)
    };
    let (c_on, scene, faulting_on, whole_on, waits_on, evictions_on) = run(true);
    let (c_off, _, faulting_off, whole_off, waits_off, evictions_off) = run(false);
    // `b += a + e; c += b` FRAMES times, then `c += b` FRAMES times more.
    let want: Vec<f32> = scene
        .a_vals
        .iter()
        .zip(&scene.e_vals)
        .map(|(x, y)| {
            let (mut b, mut c) = (0.0f32, 0.0f32);
            for _ in 0..FRAMES {
                b += x + y;
                c += b;
            }
            for _ in 0..FRAMES {
                c += b;
            }
            c
        })
        .collect();
    assert_eq!(c_on, want);
    assert_eq!(c_off, want);
    assert!(
        evictions_on > 0 && evictions_off > 0,
        "the budget must evict"
    );
    assert!(
        faulting_on.relaunched > 0,
        "the sums must fault on `e`: {faulting_on:?}"
    );
    assert!(faulting_off.relaunched > 0, "{faulting_off:?}");
    assert_eq!(whole_on.relaunched, 0, "{whole_on:?}");
    assert!(
        whole_on.batches > 0,
        "the accumulate must ask for pages: {whole_on:?}"
    );
    // Queued, a frame waits for the settle and at most once more, for the manager's question
    // of the victims' stamps behind a queued launch; each granted band waited for its launch
    // before (four waits a frame here then, five with deferral off).
    assert!(
        waits_on <= 2 * FRAMES as u64 && waits_on < waits_off,
        "queued: {waits_on} blocking waits ({whole_on:?}); waited for: {waits_off} ({whole_off:?})"
    );
}

/// The accumulate, a few milliseconds a row: a launch long enough that counting it twice shows.
struct Slow(kernels::Accumulate);

const ROW_SLEEP: std::time::Duration = std::time::Duration::from_millis(5);

impl tessera_runtime::Kernel for Slow {
    fn name(&self) -> &'static str {
        "slow_accumulate"
    }
    fn invoke(
        &self,
        inv: &mut tessera_runtime::Invocation<'_>,
        x: u32,
        y: u32,
    ) -> Result<(), tessera_runtime::Fault> {
        if x == 0 {
            std::thread::sleep(ROW_SLEEP);
        }
        self.0.invoke(inv, x, y)
    }
    fn footprint(&self) -> Option<tessera_runtime::Footprint> {
        self.0.footprint()
    }
}

/// Under a budget a lone device queues a band it was granted and asks for the next band's
/// pages at once; the evictions that make room run on the worker behind the queued launch, so
/// the wait for them lasts as long as the launch. That part of the wait is the launch's, which
/// the settle counts as compute: the stages must not count it again as the memory manager's
/// time, or the model charges every such launch twice. So the waits charged to the manager
/// stay short of a queued launch's rows, and a pass's stage times add up to no more than the
/// wall time it took, where counting the launch twice would add a band's launch to them.
#[test]
fn a_wait_behind_a_queued_launch_is_not_counted_as_the_memory_managers() {
    // Pages of 8 × 8 texels: a band is a page row, 4 pages of `b` and 4 of `c`; the budget
    // holds 12, so the second band's batch evicts half of the first's.
    let page = 8 * 8 * 4;
    let sys = System::cpu(
        &SystemConfig::new(1)
            .threads(1)
            .deferred(true)
            .budget(12 * page),
    )
    .unwrap();
    let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap();
    let b = sys.create(desc, None).unwrap();
    let c = sys.create(desc, None).unwrap();
    let pass = PassSpec::over(
        Slow(kernels::Accumulate { b: b.id, c: c.id }),
        &[&b, &c],
        W,
        H,
    );
    let band = ROW_SLEEP.as_secs_f64() * 8.0;
    for frame in 1..=2 {
        let t = std::time::Instant::now();
        let mut s = sys
            .run_pass(&pass, W, H, Partition::Rows, Procedure::Relaunch)
            .unwrap()[0];
        s.add(&sys.settle().unwrap()[0]);
        let wall = t.elapsed().as_secs_f64();
        assert!(s.batches >= 2, "the bands must ask for pages: {s:?}");
        let stages = s.stages.total();
        // And the waits are the manager's bookkeeping alone (well under a millisecond here),
        // not the queued launches' rows of 5 ms: charged to the manager, they came to 26 and
        // 42 ms in the two frames, and the stage times still added up to the wall time.
        let requests = s.stages.read_requests + s.stages.write_requests;
        assert!(
            requests < 2.0 * ROW_SLEEP.as_secs_f64(),
            "frame {frame}: {requests:.4} s of waits charged to the memory manager: {:?}",
            s.stages
        );
        assert!(
            stages <= wall + band / 2.0,
            "frame {frame}: the stages add up to {stages:.3} s in {wall:.3} s of wall time \
             (a band's launch is {band:.3} s): {:?}",
            s.stages
        );
    }
    assert!(
        sys.mm.traffic().unwrap()[0].evictions > 0,
        "the budget must evict"
    );
}
