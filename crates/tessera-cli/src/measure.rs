//! Runs boiling frame by frame and pass by pass, so that each pass's page moves can be charged
//! to a topology: `run` and both sweeps go through [`run_boiling`], which is why a sweep's CSV
//! row and a `tessera run` report of the same settings hold the same counters.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use tessera_core::{ObjectDesc, TexelFormat};
use tessera_model::{Endpoint, RemoteUse, Topology, Transfer};
use tessera_runtime::{DeviceTraffic, HostCounters, PassStats, Schedule, StageTimes, SystemConfig};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::sim::PagedBoiling;

use crate::{ModelKind, RunOpts};

/// One texture of the run: its name, global page range and description.
#[derive(Clone, Debug)]
pub struct TextureInfo {
    pub name: &'static str,
    pub pages: std::ops::Range<u64>,
    pub desc: ObjectDesc,
}

/// Modeled time summed over the modeled frames' passes.
#[derive(Clone, Debug, Default)]
pub struct Modeled {
    /// Σ over passes of the slowest device's work (measured; alone, in the isolated model).
    pub device_seconds: f64,
    /// Σ over passes of the busiest link's time (modeled).
    pub transfer_seconds: f64,
    /// Σ over passes of the memory manager's time serving the devices' batches, summed over
    /// devices (measured; zero in the concurrent model, which leaves it out).
    pub manager_seconds: f64,
    /// Each link's busy time over the modeled frames, indexed like `Topology::links`.
    pub link_seconds: Vec<f64>,
    /// Per device, Σ over passes of its own work (measured).
    pub work_per_device: Vec<f64>,
    /// Per device, Σ over passes of the manager's time serving it (measured).
    pub manager_per_device: Vec<f64>,
    /// Σ over passes of what remote accesses (`AccessMode::Remote`) add to the slowest
    /// device's work (modeled by `Topology::remote_pass_time`; included in
    /// `device_seconds`).
    pub remote_seconds: f64,
}

impl Modeled {
    pub fn seconds(&self) -> f64 {
        self.device_seconds + self.transfer_seconds + self.manager_seconds
    }
}

/// What a run leaves behind for its report.
pub struct Run {
    /// The simulation the user sees: `frames` frames with the devices running together. Its
    /// field gives the checksum, frame.png and the GIF.
    pub sim: PagedBoiling,
    /// In the isolated model, a second node running the same frames from the same start with
    /// the devices one at a time: the model, the counters and the stage times come from it.
    /// Results do not depend on the schedule, so its field equals `sim`'s frame by frame;
    /// running it beside `sim` rather than after it keeps `--frames N` at N frames of the
    /// field. `None` in the concurrent model, where `sim` serves both.
    pub isolated: Option<PagedBoiling>,
    /// The wgpu adapter the devices ran on; none on the CPU backend.
    pub adapter_name: Option<String>,
    pub textures: Vec<TextureInfo>,
    /// Each device's stats summed over the modeled frames (warm-up frames excluded): the
    /// frames run with the devices one at a time in the isolated model.
    pub per_device: Vec<PassStats>,
    /// Measured wall time of `frames` frames with the devices running together.
    pub wall: f64,
    /// Each device's work (stages but the request waits) in those concurrent frames.
    pub concurrent_work_per_device: Vec<f64>,
    /// Measured wall time of the modeled frames when they ran one device at a time (isolated
    /// model only): the sum of the devices' turns, not a multi-device time.
    pub wall_isolated: Option<f64>,
    /// Traffic counters of [`Run::modeled_sim`] when the modeled frames began.
    pub baseline: Vec<DeviceTraffic>,
    /// Per device, the host's work in the modeled frames alone (`after_frame`'s reads of
    /// the field left out).
    pub host: Vec<HostCounters>,
    pub modeled: Modeled,
}

impl Run {
    /// The node whose frames were modeled: where traffic, directory and counters are read.
    pub fn modeled_sim(&self) -> &PagedBoiling {
        self.isolated.as_ref().unwrap_or(&self.sim)
    }
}

/// Builds a node and the simulation for `o`, runs `o.warmup` frames and then `o.frames`
/// measured ones with the devices together, calling `after_frame` with the simulation and the
/// number of frames run so far (warm-up included) after every frame. In the isolated model
/// (`--model isolated`) a second node runs the same frames beside them with the devices one
/// at a time; those are the frames the model, the counters and the stage times come from,
/// and the first node's give only the measured wall time.
///
/// `after_frame`'s time is left out of the measured wall time: it is the caller's progress bar
/// and animation sampling, not the memory's work.
pub fn run_boiling(
    o: &RunOpts,
    topo: &Topology,
    mut after_frame: impl FnMut(&PagedBoiling, u32) -> Result<()>,
) -> Result<Run> {
    topo.check_devices(o.devices)?;
    // Validate the partition before creating textures so the error names the real problem.
    o.partition.regions(o.size, o.size, o.devices as u32)?;
    let isolated = o.node.model == ModelKind::Isolated;
    let build = |home_file: Option<std::path::PathBuf>| -> Result<(PagedBoiling, Option<String>)> {
        let (sys, adapter_name) = crate::backend::system(
            o.node.backend,
            &SystemConfig {
                devices: o.devices,
                cpu_threads: o.node.threads,
                budget_bytes: crate::budget_bytes(o.node.budget_mib),
                policy: o.node.policy,
                thrashing: o.node.thrashing,
                prefetch: o.node.prefetch,
                staging: o.node.staging,
                footprint_ahead: o.node.footprint_ahead,
                home_file,
                deferred: o.node.deferred,
                coherence: o.node.coherence,
                ..Default::default()
            },
        )?;
        let sim = PagedBoiling::new(sys, o.size, o.size, o.page, BoilingParams::default())?;
        Ok((sim, adapter_name))
    };
    let (sim, adapter_name) = build(o.node.home_file.clone())?;
    // The isolated node's home copies go beside the user's home file, never into it.
    let copy = if isolated {
        let home = o.node.home_file.as_ref().map(|p| {
            let mut name = p.as_os_str().to_owned();
            name.push(".isolated");
            std::path::PathBuf::from(name)
        });
        Some(build(home)?.0)
    } else {
        None
    };
    let modeled_sim = copy.as_ref().unwrap_or(&sim);
    let textures = textures(&sim, o.page)?;
    let fresh = || Modeled {
        link_seconds: vec![0.0; topo.links().len()],
        work_per_device: vec![0.0; o.devices],
        manager_per_device: vec![0.0; o.devices],
        ..Default::default()
    };
    let together = Schedule::Concurrent;
    for n in 1..=o.warmup {
        frame(&sim, o, topo, &mut fresh(), together)?;
        if let Some(c) = &copy {
            frame(c, o, topo, &mut fresh(), Schedule::Isolated)?;
        }
        after_frame(&sim, n)?;
    }
    let mut modeled = fresh();
    let baseline = modeled_sim.sys.mm.traffic()?;
    let mut per_device = vec![PassStats::default(); o.devices];
    let mut wall = 0.0;
    let mut wall_isolated = copy.as_ref().map(|_| 0.0);
    // In the isolated model the concurrent frames give the measured wall time and the
    // devices' work together only; their model (the concurrent one) is thrown away.
    let mut concurrent = fresh();
    let mut host = vec![HostCounters::default(); o.devices];
    for n in 1..=o.frames {
        // The counters and stats are the modeled node's: the copy's in the isolated model.
        let host_before = modeled_sim.sys.host_counters();
        let t = Instant::now();
        let mut stats = frame(
            &sim,
            o,
            topo,
            if isolated {
                &mut concurrent
            } else {
                &mut modeled
            },
            together,
        )?;
        wall += t.elapsed().as_secs_f64();
        if let (Some(c), Some(w)) = (&copy, wall_isolated.as_mut()) {
            let t = Instant::now();
            stats = frame(c, o, topo, &mut modeled, Schedule::Isolated)?;
            *w += t.elapsed().as_secs_f64();
        }
        for ((h, a), b) in host
            .iter_mut()
            .zip(modeled_sim.sys.host_counters())
            .zip(&host_before)
        {
            h.add(&a.since(b));
        }
        for (a, s) in per_device.iter_mut().zip(&stats) {
            a.add(s);
        }
        after_frame(&sim, o.warmup + n)?;
    }
    let concurrent_work_per_device = if isolated {
        concurrent.work_per_device
    } else {
        modeled.work_per_device.clone()
    };
    Ok(Run {
        sim,
        isolated: copy,
        adapter_name,
        textures,
        per_device,
        wall,
        concurrent_work_per_device,
        wall_isolated,
        baseline,
        host,
        modeled,
    })
}

/// Frames of the field `run_boiling` simulates for `o`: what its `after_frame` counts up to.
/// The model never changes it.
pub fn simulated_frames(o: &RunOpts) -> u32 {
    o.warmup + o.frames
}

/// One frame, pass by pass: the same passes in the same order as `PagedBoiling::frame`, with
/// the traffic counters read around each pass to model it. With `Schedule::Isolated` the
/// devices run one at a time and the pass is modeled by the isolated-device model (each
/// device's work alone, the links, the manager's time); with `Schedule::Concurrent` by the
/// older model (work measured while the devices shared the machine, the links, no manager).
fn frame(
    sim: &PagedBoiling,
    o: &RunOpts,
    topo: &Topology,
    modeled: &mut Modeled,
    schedule: Schedule,
) -> Result<Vec<PassStats>> {
    let (w, h) = (sim.ctx.width, sim.ctx.height);
    let mut total = vec![PassStats::default(); sim.sys.devices()];
    for spec in sim.passes() {
        // A display pass reports all its time as display; run it as an ordinary pass to keep
        // its device work apart from its waiting, then lump it as the runtime would.
        let mut plain = spec.clone();
        plain.display = false;
        let before = sim.sys.mm.traffic()?;
        let mut per =
            sim.sys
                .run_pass_scheduled(&plain, w, h, o.partition, o.procedure, schedule)?;
        let after = sim.sys.mm.traffic()?;
        charge(topo, modeled, &per, &before, &after, schedule)?;
        if spec.display {
            for s in &mut per {
                s.lump_into_display();
            }
        }
        for (t, s) in total.iter_mut().zip(&per) {
            t.add(s);
        }
    }
    // The frame ends when its deferred launches do (`SystemConfig::deferred`); on one device
    // their time is the last pass's, where the model charges it.
    let before = sim.sys.mm.traffic()?;
    let settled = sim.sys.settle()?;
    if settled.iter().any(|s| s.stages.total() > 0.0) {
        let after = sim.sys.mm.traffic()?;
        charge(topo, modeled, &settled, &before, &after, schedule)?;
    }
    for (t, s) in total.iter_mut().zip(&settled) {
        t.add(s);
    }
    Ok(total)
}

/// Charges one pass (or one phase of passes between two barriers) to `modeled`: `per` is
/// each device's stats in it and `before`/`after` the traffic counters around it. With
/// `Schedule::Isolated` (the devices ran one at a time) by the isolated-device model, with
/// `Schedule::Concurrent` by the older one. The halo workloads (`crate::halo`) model their
/// phases with it too, so every workload is modeled alike.
pub fn charge(
    topo: &Topology,
    modeled: &mut Modeled,
    per: &[PassStats],
    before: &[DeviceTraffic],
    after: &[DeviceTraffic],
    schedule: Schedule,
) -> Result<()> {
    let busy: Vec<f64> = per.iter().map(|s| device_work(&s.stages)).collect();
    let serving: Vec<f64> = per.iter().map(|s| manager_time(&s.stages)).collect();
    let moves = transfers(before, after)?;
    let mut pass = match schedule {
        Schedule::Isolated => {
            topo.overlapped_pass_time(&busy, &serving, &moves, &during_launches(before, after))?
        }
        Schedule::Concurrent => topo.pass_time(&busy, &moves)?,
    };
    let uses = remote_uses(before, after);
    if !uses.is_empty() {
        // The devices' work with their remote accesses (GPU-SM §4: spread accesses overlap
        // the work, batches add to it; shared segments' aggregate limits) replaces the
        // slowest device's bare work.
        let remote = topo.remote_pass_time(&busy, &uses)?;
        modeled.remote_seconds += (remote.total - pass.device_seconds).max(0.0);
        pass.device_seconds = pass.device_seconds.max(remote.total);
    }
    if modeled.link_seconds.len() == pass.link_seconds.len() {
        for (a, s) in modeled.link_seconds.iter_mut().zip(&pass.link_seconds) {
            *a += s;
        }
    }
    for (a, s) in modeled.work_per_device.iter_mut().zip(&busy) {
        *a += s;
    }
    for (a, s) in modeled.manager_per_device.iter_mut().zip(&serving) {
        *a += s;
    }
    modeled.device_seconds += pass.device_seconds;
    modeled.transfer_seconds += pass.transfer_seconds;
    modeled.manager_seconds += pass.manager_seconds;
    Ok(())
}

/// The remote accesses between two traffic snapshots, per accessor and location, as the
/// topology prices them.
pub fn remote_uses(before: &[DeviceTraffic], after: &[DeviceTraffic]) -> Vec<RemoteUse> {
    after
        .iter()
        .enumerate()
        .flat_map(|(d, a)| {
            a.since(&before.get(d).cloned().unwrap_or_default())
                .remote_uses(d)
        })
        .collect()
}

/// A device's own work in a pass: every stage but the waits for request batches, whose
/// measured time on the CPU backend is the memory manager copying bytes in host memory; the
/// topology model replaces it.
pub fn device_work(s: &StageTimes) -> f64 {
    s.request_pass + s.uniquify + s.compute + s.page_writes + s.display
}

/// The memory manager's time serving a device's batches in a pass: the device's waits for
/// them. Measured with the device alone (isolated model), nothing else queues at the manager,
/// so the wait is the manager's protocol and bookkeeping plus, on the CPU backend, the
/// host-memory copies of the pages, which the link model charges again: the model errs slow
/// by that copy time (docs/EVALUATION.md).
pub fn manager_time(s: &StageTimes) -> f64 {
    s.read_requests + s.write_requests
}

/// Of the page moves between two traffic snapshots, those the memory manager made while the
/// device computed (staged pages copied during its launch): home to each device.
pub fn during_launches(before: &[DeviceTraffic], after: &[DeviceTraffic]) -> Vec<Transfer> {
    after
        .iter()
        .enumerate()
        .map(|(d, a)| {
            let moved = a.host_to_device_during_launch.since(
                before
                    .get(d)
                    .cloned()
                    .unwrap_or_default()
                    .host_to_device_during_launch,
            );
            Transfer {
                from: Endpoint::Host,
                to: Endpoint::Device(d),
                pages: moved.pages,
                bytes: moved.bytes,
            }
        })
        .collect()
}

/// The page moves between two traffic snapshots, as transfers a topology can route: home to
/// each device, each device home, and each (source, destination) pair of devices as the
/// memory manager counted them.
pub fn transfers(before: &[DeviceTraffic], after: &[DeviceTraffic]) -> Result<Vec<Transfer>> {
    let mut out = Vec::new();
    for (d, a) in after.iter().enumerate() {
        let b = before.get(d).cloned().unwrap_or_default();
        let moved = a.since(&b);
        let dev = Endpoint::Device(d);
        out.push(Transfer {
            from: Endpoint::Host,
            to: dev,
            pages: moved.host_to_device.pages,
            bytes: moved.host_to_device.bytes,
        });
        out.push(Transfer {
            from: dev,
            to: Endpoint::Host,
            pages: moved.device_to_host.pages,
            bytes: moved.device_to_host.bytes,
        });
        let mut counted = 0;
        for (s, c) in moved.device_to_device_from.iter().enumerate() {
            if c.pages == 0 {
                continue;
            }
            if s == d {
                bail!("device{d} counted a page move from itself");
            }
            counted += c.pages;
            out.push(Transfer {
                from: Endpoint::Device(s),
                to: dev,
                pages: c.pages,
                bytes: c.bytes,
            });
        }
        if counted != moved.device_to_device.pages {
            bail!(
                "device{d} received {} pages from other devices but {counted} were counted by source",
                moved.device_to_device.pages
            );
        }
    }
    Ok(out)
}

/// The simulation's textures with their page ranges, from the passes' bindings.
fn textures(sim: &PagedBoiling, page: u32) -> Result<Vec<TextureInfo>> {
    let t = sim.ctx.tex;
    let (w, h) = (sim.ctx.width, sim.ctx.height);
    let named = [
        ("field", t.field, TexelFormat::R32Float),
        ("border", t.border, TexelFormat::R32Float),
        ("diffusion", t.diffusion, TexelFormat::R32Float),
        ("buoyancy", t.buoyancy, TexelFormat::R32Float),
        ("display", t.display, TexelFormat::Rgba8Unorm),
    ];
    named
        .into_iter()
        .map(|(name, id, format)| {
            let b = sim
                .passes()
                .iter()
                .flat_map(|p| p.bindings.iter())
                .find(|b| b.id == id)
                .with_context(|| format!("no pass binds the {name} texture"))?;
            let desc = ObjectDesc::texture(w, h, format, page)?;
            let pages = b.page_offset..b.pages_end;
            if pages.end - pages.start != desc.page_count() {
                bail!(
                    "the {name} texture spans {} pages, expected {}",
                    pages.end - pages.start,
                    desc.page_count()
                );
            }
            Ok(TextureInfo { name, pages, desc })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_runtime::LinkCounters;

    fn traffic(h2d: (u64, u64), d2h: (u64, u64), from: &[(usize, u64, u64)]) -> DeviceTraffic {
        let c = |(pages, bytes)| LinkCounters { pages, bytes };
        let mut t = DeviceTraffic {
            host_to_device: c(h2d),
            device_to_host: c(d2h),
            ..Default::default()
        };
        for &(s, pages, bytes) in from {
            for _ in 0..pages {
                t.add_from_device(s, bytes / pages);
            }
        }
        t
    }

    #[test]
    fn counters_become_routed_transfers_by_source() {
        let before = vec![traffic((1, 100), (0, 0), &[]); 3];
        let after = vec![
            traffic((4, 400), (2, 200), &[(2, 1, 100)]),
            traffic((1, 100), (0, 0), &[(0, 3, 300), (2, 2, 200)]),
            traffic((1, 100), (0, 0), &[]),
        ];
        let t = transfers(&before, &after).unwrap();
        let find = |from, to| {
            t.iter()
                .find(|t| t.from == from && t.to == to)
                .map(|t| (t.pages, t.bytes))
        };
        let (h, d0, d1, d2) = (
            Endpoint::Host,
            Endpoint::Device(0),
            Endpoint::Device(1),
            Endpoint::Device(2),
        );
        assert_eq!(find(h, d0), Some((3, 300)));
        assert_eq!(find(d0, h), Some((2, 200)));
        assert_eq!(find(h, d1), Some((0, 0)));
        // Each pair as counted, not all of device1's moves from one source.
        assert_eq!(find(d0, d1), Some((3, 300)));
        assert_eq!(find(d2, d1), Some((2, 200)));
        assert_eq!(find(d2, d0), Some((1, 100)));
        assert_eq!(find(d1, d0), None);
    }

    #[test]
    fn moves_not_counted_by_source_are_an_error() {
        let zero = vec![DeviceTraffic::default(); 2];
        let mut after = zero.clone();
        after[1].device_to_device = LinkCounters {
            pages: 1,
            bytes: 10,
        };
        assert!(transfers(&zero, &after).is_err());
    }

    #[test]
    fn device_work_leaves_out_the_waits() {
        let s = StageTimes {
            request_pass: 1.0,
            uniquify: 2.0,
            read_requests: 100.0,
            compute: 4.0,
            write_requests: 200.0,
            page_writes: 8.0,
            display: 16.0,
        };
        assert_eq!(device_work(&s), 31.0);
        assert_eq!(manager_time(&s), 300.0);
    }
}
