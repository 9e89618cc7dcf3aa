//! Deferred execution on a wgpu device: held bands (relaunch), held two-pass parts run in
//! place (one launch) and, with that off, held two-pass parts as the paper runs them (the
//! compute pass into the temporary and its merge) are queued on the GPU without a wait, a
//! frame costs one wait for the GPU (reading every queued status back at once), and queued
//! work that faults closes the gate in device memory, so everything queued behind it does
//! nothing until the driver settles and runs it again in order. The field must be the exact
//! one and the CPU backend's, bit for bit (the arithmetic is exact), per texel and on the tile
//! path.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use tessera_core::DeviceId;
use tessera_runtime::{
    Device, HostCounters, Partition, PassStats, Procedure, System, SystemConfig,
};
use tessera_wgpu::{AdapterChoice, SharedGpu, TilePath, WgpuDevice};

#[path = "../../tessera-runtime/tests/shared/deferred_kernels.rs"]
mod kernels;

use kernels::{floats, Scene, H, W};

/// `in_place`: two-pass runs a held part in place (`SystemConfig::held_in_place`).
fn cfg(in_place: bool) -> SystemConfig {
    SystemConfig::new(1)
        .threads(1)
        .deferred(true)
        .held_in_place(in_place)
}

/// One wgpu device on the default adapter with the tile path as asked, and the per-texel
/// path's stamps once per workgroup where `group` says so (`None`: the adapter's default), or
/// `None` as `common::opened` says.
fn wgpu_system(tiles: TilePath, group: Option<bool>, in_place: bool) -> Option<System> {
    let gpu = common::opened(SharedGpu::open(&AdapterChoice::Default), "a wgpu device")?;
    let mut d = common::opened(WgpuDevice::on(DeviceId(0), &gpu), "a wgpu device")?;
    d.set_tile_path(tiles);
    if let Some(g) = group {
        d.set_group_stamps(g);
    }
    eprintln!(
        "wgpu adapter: {} (tile path {})",
        d.describe(),
        d.tile_path()
    );
    Some(System::with_devices(vec![Box::new(d) as Box<dyn Device>], &cfg(in_place)).unwrap())
}

/// What each frame of a run cost the host, and the run's `c`.
struct Run {
    frames: Vec<(PassStats, HostCounters)>,
    c: Vec<f32>,
}

/// Four frames of `b += a + e; c += b`; before the fourth the host takes half of `e` away, so
/// the deferred sum faults and the accumulate queued behind it must wait for its redo.
fn run(sys: System, procedure: Procedure) -> Run {
    let scene = Scene::new(&sys);
    let mut frames = Vec::new();
    for frame in 0..4 {
        if frame == 3 {
            // Half of `e`: the sum completes some invocations and faults on the others, so
            // a merge of its partial temporary, or an accumulate run on its partial `b`,
            // would show.
            let e_pages = scene.e_pages(scene.e.desc.page_count() / 2);
            sys.mm.evict(DeviceId(0), e_pages).unwrap();
        }
        let before = sys.host_counters()[0];
        let mut total = PassStats::default();
        for p in &scene.passes {
            let s = sys.run_pass(p, W, H, Partition::Rows, procedure).unwrap();
            total.add(&s[0]);
        }
        total.add(&sys.settle().unwrap()[0]);
        frames.push((total, sys.host_counters()[0].since(&before)));
    }
    let c = floats(&sys.mm.read(scene.c.id).unwrap());
    // Four frames of `b += a + e; c += b`, each pass once and in order: `c` is 1 + 2 + 3 + 4
    // times `a + e`, exactly (small integers). An accumulate run on the previous frame's `b`,
    // or skipped after the sum's redo, leaves it short.
    let want: Vec<f32> = scene
        .a_vals
        .iter()
        .zip(&scene.e_vals)
        .map(|(x, y)| 10.0 * (x + y))
        .collect();
    let wrong = c.iter().zip(&want).filter(|(g, w)| g != w).count();
    assert_eq!(
        wrong,
        0,
        "{procedure:?}: {wrong} texels wrong; first: {:?}, want {:?}",
        &c[..4],
        &want[..4]
    );
    Run { frames, c }
}

fn check(tiles: TilePath, group: Option<bool>, procedure: Procedure, in_place: bool) {
    let Some(sys) = wgpu_system(tiles, group, in_place) else {
        return;
    };
    let gpu = run(sys, procedure);
    let cpu = run(System::cpu(&cfg(in_place)).unwrap(), procedure);
    assert_eq!(gpu.c, cpu.c);
    // Per pass, a relaunch band is one launch, and so is a two-pass part run in place; a
    // two-pass part otherwise its compute pass and its merge.
    let per_pass = match procedure {
        Procedure::TwoPass if !in_place => 2,
        _ => 1,
    };
    // Frames 2 and 3: both passes held and queued on the GPU; one submission per launch or
    // merge, and one wait for the GPU, when the frame settles, for the host and inside the
    // worker.
    for (stats, h) in &gpu.frames[1..3] {
        assert_eq!(stats.launches, 2, "{stats:?}");
        assert_eq!(stats.relaunched, 0, "{stats:?}");
        match procedure {
            Procedure::Relaunch => assert_eq!(stats.held_bands, 2, "{stats:?}"),
            Procedure::TwoPass => {
                assert_eq!(stats.request_passes_skipped, 2, "{stats:?}");
                assert_eq!(stats.held_bands, if in_place { 2 } else { 0 }, "{stats:?}");
            }
        }
        assert_eq!(h.manager_messages, 0, "{h:?}");
        assert_eq!(h.blocking_waits, 1, "{h:?}");
        assert_eq!(h.device_waits, 1, "{h:?}");
        assert_eq!(h.submissions, 2 * per_pass, "{h:?}");
        // The statuses (80 bytes each), not the fault lists.
        assert_eq!(h.bytes_read_back, 80 * 2 * per_pass, "{h:?}");
    }
    // Frame 4: the queued sum faulted; everything behind it skipped on the GPU and ran again
    // after the sum was serviced, so the frame asked the memory manager for `e`.
    let (_, h) = &gpu.frames[3];
    assert!(h.manager_messages > 0, "{h:?}");
}

#[test]
fn a_queued_launch_that_faults_gates_the_ones_behind_it_per_texel() {
    check(TilePath::Off, Some(false), Procedure::Relaunch, true);
}

/// The GPU's per-texel variant (stamps once per workgroup and page, in workgroup memory).
#[test]
fn a_queued_launch_that_faults_gates_the_ones_behind_it_per_workgroup() {
    check(TilePath::Off, Some(true), Procedure::Relaunch, true);
}

#[test]
fn a_queued_launch_that_faults_gates_the_ones_behind_it_on_the_tile_path() {
    check(TilePath::On, None, Procedure::Relaunch, true);
}

#[test]
fn a_queued_two_pass_part_that_faults_gates_its_merge_and_the_parts_behind_it() {
    check(TilePath::Off, Some(false), Procedure::TwoPass, false);
}

#[test]
fn a_queued_two_pass_part_per_workgroup_gates_its_merge_and_the_parts_behind_it() {
    check(TilePath::Off, Some(true), Procedure::TwoPass, false);
}

#[test]
fn a_queued_two_pass_part_on_the_tile_path() {
    check(TilePath::On, None, Procedure::TwoPass, false);
}

/// Two-pass, held parts in place: each is one queued launch that stores into the pages, no
/// temporary and no merge; the one that faults gates the launches behind it and relaunches
/// what it missed, as a relaunch band does.
#[test]
fn a_held_two_pass_part_runs_in_place_and_a_fault_gates_the_ones_behind_it() {
    check(TilePath::Off, Some(false), Procedure::TwoPass, true);
}

#[test]
fn a_held_two_pass_part_runs_in_place_on_the_tile_path() {
    check(TilePath::On, None, Procedure::TwoPass, true);
}

/// More passes than the GPU's queue holds between two settles (256): the queue is read back
/// early to make room, once, and the result is still every pass run in turn.
#[test]
fn a_queue_longer_than_its_staging_buffer_is_read_back_early() {
    let Some(sys) = wgpu_system(TilePath::Off, None, true) else {
        return;
    };
    let scene = Scene::new(&sys);
    let frame = |settle: bool| {
        for p in &scene.passes {
            sys.run_pass(p, W, H, Partition::Rows, Procedure::Relaunch)
                .unwrap();
        }
        if settle {
            sys.settle().unwrap();
        }
    };
    // Frame 1 pages everything in; after it every launch is held and queued.
    frame(true);
    let before = sys.host_counters()[0];
    let frames = 140;
    for _ in 0..frames {
        frame(false);
    }
    sys.settle().unwrap();
    let h = sys.host_counters()[0].since(&before);
    // 280 queued launches: one early read-back at 256, one at the settle.
    assert_eq!(h.submissions, 2 * frames, "{h:?}");
    assert_eq!(h.device_waits, 2, "{h:?}");
    assert_eq!(h.blocking_waits, 1, "{h:?}");
    // c = (1 + 2 + ... + 141) (a + e), exactly: integers below 2^24.
    let k = (frames + 1) as f32;
    let c = floats(&sys.mm.read(scene.c.id).unwrap());
    let want: Vec<f32> = scene
        .a_vals
        .iter()
        .zip(&scene.e_vals)
        .map(|(x, y)| k * (k + 1.0) / 2.0 * (x + y))
        .collect();
    assert!(c == want, "first: {:?}, want {:?}", &c[..4], &want[..4]);
}

/// `b = b + a`, stored twice (`b + a`, then `b + a + 1`): two stores an invocation, where a
/// queued compute pass gets room for one until its kernel has shown it needs more.
struct Twice {
    a: tessera_core::ObjectId,
    b: tessera_core::ObjectId,
}

impl tessera_runtime::Kernel for Twice {
    fn name(&self) -> &'static str {
        "deferred_twice"
    }
    fn invoke(
        &self,
        inv: &mut tessera_runtime::Invocation<'_>,
        x: u32,
        y: u32,
    ) -> Result<(), tessera_runtime::Fault> {
        let v = inv.load_f32(self.b, x, y)? + inv.load_f32(self.a, x, y)?;
        inv.store_f32(self.b, x, y, v)?;
        inv.store_f32(self.b, x, y, v + 1.0)
    }
    fn footprint(&self) -> Option<tessera_runtime::Footprint> {
        Some(tessera_runtime::Footprint {
            reads: vec![(self.a, 0), (self.b, 0)],
            write: self.b,
        })
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Objects {
                a: u32,
                b: u32,
            }
        }
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let v = load_f32(params.b, x, y) + load_f32(params.a, x, y);
                store_f32(params.b, x, y, v);
                store_f32(params.b, x, y, v + 1.0);
            }",
            &Objects {
                a: self.a.0,
                b: self.b.0,
            },
        ))
    }
}

/// A queued compute pass whose invocations store more than the room it was given stops its
/// merge, runs again the ordinary way, and the kernel's later parts are queued with the room
/// it needed: one wait for the GPU a frame again, and the field of every pass run in turn.
#[test]
fn a_queued_compute_pass_short_of_room_runs_again_and_the_next_ones_get_it() {
    // The paper's two-pass: a held part computes into the temporary.
    let Some(sys) = wgpu_system(TilePath::Off, None, false) else {
        return;
    };
    let desc =
        tessera_core::ObjectDesc::texture(W, H, tessera_core::TexelFormat::R32Float, 8).unwrap();
    let a_vals: Vec<f32> = (0..W * H).map(|i| (i % 13) as f32).collect();
    let bytes: Vec<u8> = a_vals.iter().flat_map(|f| f.to_le_bytes()).collect();
    let a = sys.create(desc, Some(bytes)).unwrap();
    let b = sys.create(desc, None).unwrap();
    let pass = tessera_runtime::PassSpec::over(Twice { a: a.id, b: b.id }, &[&a, &b], W, H);
    let mut waits = Vec::new();
    for _ in 0..4 {
        let before = sys.host_counters()[0];
        sys.run_pass(&pass, W, H, Partition::Rows, Procedure::TwoPass)
            .unwrap();
        sys.settle().unwrap();
        waits.push(sys.host_counters()[0].since(&before).device_waits);
    }
    // Frame 1 pages in; frame 2 is queued with room for one store, falls short and runs
    // again; frames 3 and 4 are queued with room for two: one wait each.
    assert!(waits[1] > 1, "{waits:?}");
    assert_eq!(&waits[2..], &[1, 1], "{waits:?}");
    let got = floats(&sys.mm.read(b.id).unwrap());
    let want: Vec<f32> = a_vals.iter().map(|x| 4.0 * (x + 1.0)).collect();
    assert!(got == want, "first: {:?}, want {:?}", &got[..4], &want[..4]);
}

/// `c(x, y) += b(x, top - y)`: each row of `c` reads the mirrored row of `b`, so with the rows
/// split over two devices every texel one device accumulates was summed by the other.
struct Mirror {
    b: tessera_core::ObjectId,
    c: tessera_core::ObjectId,
}

impl tessera_runtime::Kernel for Mirror {
    fn name(&self) -> &'static str {
        "deferred_mirror"
    }
    fn invoke(
        &self,
        inv: &mut tessera_runtime::Invocation<'_>,
        x: u32,
        y: u32,
    ) -> Result<(), tessera_runtime::Fault> {
        let v = inv.load_f32(self.c, x, y)? + inv.load_f32(self.b, x, H - 1 - y)?;
        inv.store_f32(self.c, x, y, v)
    }
    fn footprint(&self) -> Option<tessera_runtime::Footprint> {
        // A halo of the whole height covers the mirrored rows.
        Some(tessera_runtime::Footprint {
            reads: vec![(self.b, H), (self.c, 0)],
            write: self.c,
        })
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Objects {
                b: u32,
                c: u32,
                top: u32,
            }
        }
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let c = load_f32(params.c, x, y);
                store_f32(params.c, x, y, c + load_f32(params.b, x, params.top - y));
            }",
            &Objects {
                b: self.b.0,
                c: self.c.0,
                top: H - 1,
            },
        ))
    }
}

/// Four frames of `b += a + e; c(y) += b(top - y)` on two devices, the rows split between
/// them; before the fourth the host takes half of `e` from device 0, so its queued sum faults.
/// Returns `c` and, per frame, per device, the host's work.
fn run_mirrored(sys: &System) -> (Vec<f32>, Vec<Vec<HostCounters>>) {
    let scene = Scene::new(sys);
    let mirror = tessera_runtime::PassSpec::over(
        Mirror {
            b: scene.b.id,
            c: scene.c.id,
        },
        &[&scene.b, &scene.c],
        W,
        H,
    );
    let passes = [scene.passes[0].clone(), mirror];
    let mut frames = Vec::new();
    for frame in 0..4 {
        if frame == 3 {
            sys.mm
                .evict(DeviceId(0), scene.e_pages(scene.e.desc.page_count() / 2))
                .unwrap();
        }
        let before = sys.host_counters();
        for p in &passes {
            sys.run_pass(p, W, H, Partition::Rows, Procedure::Relaunch)
                .unwrap();
        }
        sys.settle().unwrap();
        let after = sys.host_counters();
        frames.push(after.iter().zip(&before).map(|(a, b)| a.since(b)).collect());
    }
    let c = floats(&sys.mm.read(scene.c.id).unwrap());
    // Four frames, each pass once and in order: `c(y)` is 1 + 2 + 3 + 4 times `(a + e)(top -
    // y)`, exactly. A mirror run on a partial `b` from the other device, or run before that
    // device's sum ran again, leaves rows short.
    let want: Vec<f32> = (0..(W * H) as usize)
        .map(|i| {
            let (x, y) = (i as u32 % W, i as u32 / W);
            let j = ((H - 1 - y) * W + x) as usize;
            10.0 * (scene.a_vals[j] + scene.e_vals[j])
        })
        .collect();
    let wrong: Vec<usize> = (0..c.len()).filter(|&i| c[i] != want[i]).collect();
    assert!(
        wrong.is_empty(),
        "{} texels wrong, rows {:?}",
        wrong.len(),
        wrong
            .iter()
            .map(|i| i / W as usize)
            .collect::<std::collections::BTreeSet<_>>()
    );
    (c, frames)
}

/// Two tessera devices on one wgpu device share its queue, so held bands and bands whose pages
/// must first be asked for are queued on both with no wait: a frame waits for the GPU once a
/// device, when it settles, and the boundary pages move device to device on the GPU. When one
/// device's queued launch faults, the gate they share makes everything queued behind it, on
/// both devices, do nothing, and the node runs it all again in queue order: the result is the
/// CPU backend's, bit for bit.
#[test]
fn a_fault_on_one_device_gates_what_both_devices_queued_behind_it() {
    let cfg = SystemConfig::new(2).threads(1).deferred(true);
    let Some(sys) = common::system(&cfg) else {
        return;
    };
    let (gpu, frames) = run_mirrored(&sys);
    let (cpu, _) = run_mirrored(&System::cpu(&cfg).unwrap());
    assert_eq!(gpu, cpu);
    // Frames 2 and 3: every texel of `c` reads a row the other device wrote, so both devices
    // ask for pages every pass, and still wait for the GPU once a frame.
    for f in &frames[1..3] {
        for h in f {
            assert!(h.manager_messages > 0, "{h:?}");
            assert_eq!(h.device_waits, 1, "{h:?}");
            assert!(h.bytes_read_back <= 80 * h.submissions, "{h:?}");
        }
    }
    // Frame 4: device 0's sum faulted, and what ran again waited for its launches.
    assert!(frames[3].iter().map(|h| h.device_waits).sum::<u64>() > 2);
}
