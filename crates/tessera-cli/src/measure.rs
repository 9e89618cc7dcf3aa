//! Runs boiling frame by frame and pass by pass, so that each pass's page moves can be charged
//! to a topology: `run` and both sweeps go through [`run_boiling`], which is why a sweep's CSV
//! row and a `tessera run` report of the same settings hold the same counters.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use tessera_core::{ObjectDesc, TexelFormat};
use tessera_model::Topology;
use tessera_runtime::modeled::{charge, Modeled};
use tessera_runtime::{DeviceTraffic, HostCounters, PassStats, Schedule, SystemConfig};
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
