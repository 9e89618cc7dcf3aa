//! Deferred execution on a node of one device (`SystemConfig::deferred`): held bands are
//! queued without waiting, a frame costs one blocking wait, and a deferred launch that faults
//! (here on a page its kernel's footprint leaves out) makes the launches queued behind it do
//! nothing until the driver settles and runs them again in order, so the result is the one
//! every frame computed in turn gives.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use std::sync::Arc;

use tessera_core::{DeviceId, GlobalPage, ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{
    Bound, Domain, Fault, Footprint, Invocation, Kernel, Partition, PassSpec, PassStats, Procedure,
    System, SystemConfig,
};

const W: u32 = 32;
const H: u32 = 16;

/// `b += a + e`, whose footprint leaves `e` out: a miss on `e` is a fault the footprint did
/// not foresee.
struct Sum {
    a: ObjectId,
    e: ObjectId,
    b: ObjectId,
}

impl Kernel for Sum {
    fn name(&self) -> &'static str {
        "sum"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.b, x, y)?
            + (inv.load_f32(self.a, x, y)? + inv.load_f32(self.e, x, y)?);
        inv.store_f32(self.b, x, y, v)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.a, 0), (self.b, 0)],
            write: self.b,
        })
    }
}

/// `c += b`: run on stale or partial `b`, run twice or not at all, and `c` shows it.
struct Accumulate {
    b: ObjectId,
    c: ObjectId,
}

impl Kernel for Accumulate {
    fn name(&self) -> &'static str {
        "accumulate"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.c, x, y)? + inv.load_f32(self.b, x, y)?;
        inv.store_f32(self.c, x, y, v)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.b, 0), (self.c, 0)],
            write: self.c,
        })
    }
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn pass(kernel: impl Kernel + 'static, objects: &[&ObjectEntry]) -> PassSpec {
    PassSpec {
        kernel: Arc::new(kernel),
        bindings: Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
        domain: Domain::Rect {
            x0: 0,
            y0: 0,
            x1: W,
            y1: H,
        },
        display: false,
    }
}

#[test]
fn a_deferred_frame_waits_once_and_a_fault_redoes_what_was_skipped_in_order() {
    let sys = System::cpu(&SystemConfig {
        devices: 1,
        cpu_threads: 1,
        deferred: true,
        ..Default::default()
    })
    .unwrap();
    let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap();
    let n = (W * H) as usize;
    let a_vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let e_vals: Vec<f32> = (0..n).map(|i| 1000.0 + (i % 7) as f32).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
    let a = sys.create(desc, Some(bytes(&a_vals))).unwrap();
    let e = sys.create(desc, Some(bytes(&e_vals))).unwrap();
    let b = sys.create(desc, None).unwrap();
    let c = sys.create(desc, None).unwrap();
    let passes = [
        pass(
            Sum {
                a: a.id,
                e: e.id,
                b: b.id,
            },
            &[&a, &e, &b],
        ),
        pass(Accumulate { b: b.id, c: c.id }, &[&b, &c]),
    ];
    // Per frame: the stats, the blocking waits and the messages to the memory manager.
    let frame = || -> (PassStats, u64, u64) {
        let before = sys.host_counters()[0];
        let mut total = PassStats::default();
        for p in &passes {
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
    let e_pages: Vec<GlobalPage> = (0..desc.page_count())
        .map(|p| GlobalPage(e.page_offset + p))
        .collect();
    sys.mm.evict(DeviceId(0), e_pages).unwrap();
    let (faulted, _, _) = frame();
    assert_eq!(faulted.held_bands, 2, "{faulted:?}");
    assert!(faulted.relaunched > 0, "{faulted:?}");
    // Three frames of `b += a + e; c += b`, each pass once, in order: an accumulate run on
    // frame 2's `b`, or not run again after the sum is redone, leaves `c` short.
    let want: Vec<f32> = a_vals
        .iter()
        .zip(&e_vals)
        .map(|(x, y)| {
            let s = x + y;
            let (b1, b2, b3) = (0.0 + s, (0.0 + s) + s, ((0.0 + s) + s) + s);
            ((0.0 + b1) + b2) + b3
        })
        .collect();
    assert_eq!(floats(&sys.mm.read(c.id).unwrap()), want);
}

#[test]
fn a_host_read_waits_for_a_deferred_pass_that_faulted() {
    let sys = System::cpu(&SystemConfig {
        devices: 1,
        cpu_threads: 1,
        deferred: true,
        ..Default::default()
    })
    .unwrap();
    let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap();
    let n = (W * H) as usize;
    let ones: Vec<u8> = (0..n).flat_map(|_| 1.0f32.to_le_bytes()).collect();
    let twos: Vec<u8> = (0..n).flat_map(|_| 2.0f32.to_le_bytes()).collect();
    let a = sys.create(desc, Some(ones)).unwrap();
    let e = sys.create(desc, Some(twos)).unwrap();
    let b = sys.create(desc, None).unwrap();
    let sum = pass(
        Sum {
            a: a.id,
            e: e.id,
            b: b.id,
        },
        &[&a, &e, &b],
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
