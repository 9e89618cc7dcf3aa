//! Boiling frame by frame and pass by pass, so that each pass's page moves can be charged to
//! a topology ([`tessera_runtime::modeled`]): a run and both of the CLI's sweeps go through
//! [`run`], which is why a sweep's CSV row and a run's report of the same settings hold the
//! same counters.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tessera_core::{CoreError, ObjectDesc, TexelFormat};
use tessera_model::Topology;
use tessera_runtime::modeled::{charge, device_work, Model, Modeled, ModeledError, Steady};
use tessera_runtime::{
    DeviceTraffic, HostCounters, HostReport, Partition, PassStats, Procedure, RuntimeError,
    Schedule, System,
};

use super::math::BoilingParams;
use super::sim::PagedBoiling;

/// What can stop a modeled boiling run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunError {
    #[error("no pass binds the {0} texture")]
    Unbound(&'static str),
    #[error("the {name} texture spans {got} pages, expected {want}")]
    Pages {
        name: &'static str,
        got: u64,
        want: u64,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Modeled(#[from] ModeledError),
}

/// A run's settings beside its nodes.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub devices: usize,
    pub page: u32,
    pub partition: Partition,
    pub procedure: Procedure,
    /// Frames run first, counted nowhere.
    pub warmup: u32,
    /// Measured frames.
    pub frames: u32,
    pub model: Model,
}

/// Builds the simulation of a `size`² field on the node `make` builds for a home file
/// (`home_file`), and in the isolated model a second one whose home copies go beside it
/// (`PATH.isolated`, never into it), and runs them as [`run`] does.
pub fn run_on_nodes<E: From<RunError>>(
    mut make: impl FnMut(Option<PathBuf>) -> Result<(System, Option<String>), E>,
    home_file: Option<&Path>,
    size: u32,
    s: &Settings,
    topo: &Topology,
    after_frame: impl FnMut(&PagedBoiling, u32) -> Result<(), E>,
) -> Result<Run, E> {
    // Validate the partition before creating textures so the error names the real problem.
    let checked = s.partition.regions(size, size, s.devices as u32);
    checked.map_err(RunError::from)?;
    let mut build = |home: Option<PathBuf>| -> Result<(PagedBoiling, Option<String>), E> {
        let (sys, adapter_name) = make(home)?;
        let sim = PagedBoiling::new(sys, size, size, s.page, BoilingParams::default());
        Ok((sim.map_err(RunError::from)?, adapter_name))
    };
    let (sim, adapter_name) = build(home_file.map(Path::to_path_buf))?;
    let copy = if s.model == Model::Isolated {
        Some(build(home_file.map(isolated_home))?.0)
    } else {
        None
    };
    run(sim, copy, adapter_name, s, topo, after_frame)
}

/// Where the isolated model's second node keeps its home copies beside `home_file`'s.
pub fn isolated_home(home_file: &Path) -> PathBuf {
    let mut name = home_file.as_os_str().to_owned();
    name.push(".isolated");
    PathBuf::from(name)
}

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
    /// Per device, the pages the host had read from `sim`'s devices when the measured frames
    /// began: the reads for the run's own output (the GIF, the checksum, frame.png) are
    /// `sim`'s in either model, and count from here.
    pub shown_reads_baseline: Vec<u64>,
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

    /// Per device, the pages the host has read from its copies since the measured frames
    /// began, for the run's own output: the same in either model, since the output is read
    /// from `sim` (the modeled node's own reads, in the isolated model, are none).
    pub fn shown_reads(&self) -> Result<Vec<u64>, RuntimeError> {
        Ok(host_reads(&self.sim)?
            .iter()
            .zip(&self.shown_reads_baseline)
            .map(|(now, then)| now - then)
            .collect())
    }
}

fn host_reads(sim: &PagedBoiling) -> Result<Vec<u64>, RuntimeError> {
    Ok(sim.sys.mm.traffic()?.iter().map(|t| t.host_reads).collect())
}

/// A run's figures, per frame: what `tessera bench scaling` sets side by side per device
/// count.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    pub devices: usize,
    pub modeled: f64,
    pub work: f64,
    pub link: f64,
    pub manager: f64,
    /// The page copies made during the devices' waits for the manager, left out of
    /// `manager` (the links charge them).
    pub copies: f64,
    /// The steady-state estimate of a frame ([`Modeled::steady`]).
    pub steady: Steady,
    pub per_device_work: Vec<f64>,
    pub concurrent_work: Vec<f64>,
    pub measured_fps: f64,
    pub requests: f64,
    pub moved_mib: f64,
    /// The host's work per frame, the mean over the devices.
    pub host: HostReport,
}

impl Run {
    /// This run's figures per frame over its `frames` measured frames.
    pub fn figures(&self, frames: u32) -> Result<Figures, RuntimeError> {
        let run = self;
        let f = frames as f64;
        let m = &run.modeled;
        let traffic = run.modeled_sim().sys.mm.traffic()?;
        let (mut requests, mut bytes) = (0u64, 0u64);
        for (a, b) in traffic.iter().zip(&run.baseline) {
            let t = a.since(b);
            requests += t.page_requests;
            bytes += t.host_to_device.bytes + t.device_to_host.bytes + t.device_to_device.bytes;
        }
        // The isolated frames' own work, from the stage times, must be what the model used.
        debug_assert!(run
            .per_device
            .iter()
            .zip(&m.work_per_device)
            .all(|(s, w)| (device_work(&s.stages) - w).abs() <= 1e-6 * w.max(1.0)));
        Ok(Figures {
            devices: run.per_device.len(),
            modeled: m.seconds() / f,
            work: m.device_seconds / f,
            link: m.transfer_seconds / f,
            manager: m.manager_seconds / f,
            copies: m.copy_seconds / f,
            // Every frame is marked: without passes the estimate is of an empty frame.
            steady: m.steady().unwrap_or_default(),
            per_device_work: m.work_per_device.iter().map(|w| w / f).collect(),
            concurrent_work: run
                .concurrent_work_per_device
                .iter()
                .map(|w| w / f)
                .collect(),
            measured_fps: f / run.wall,
            requests: requests as f64 / f,
            moved_mib: bytes as f64 / f / (1u64 << 20) as f64,
            host: {
                let mut all = HostCounters::default();
                for h in &run.host {
                    all.add(h);
                }
                HostReport::of(&all, frames * run.host.len().max(1) as u32)
            },
        })
    }
}

/// Runs `s.warmup` frames and then `s.frames` measured ones of `sim` with the devices
/// together, calling `after_frame` with the simulation and the number of frames run so far
/// (warm-up included) after every frame. In the isolated model `isolated`, a second node
/// simulating the same field from the same start, runs the same frames beside them with the
/// devices one at a time; those are the frames the model, the counters and the stage times
/// come from, and the first node's give only the measured wall time. `adapter_name` is the
/// wgpu adapter the devices run on, for the report.
///
/// `after_frame`'s time is left out of the measured wall time: it is the caller's progress bar
/// and animation sampling, not the memory's work.
pub fn run<E: From<RunError>>(
    sim: PagedBoiling,
    isolated: Option<PagedBoiling>,
    adapter_name: Option<String>,
    s: &Settings,
    topo: &Topology,
    mut after_frame: impl FnMut(&PagedBoiling, u32) -> Result<(), E>,
) -> Result<Run, E> {
    let o = s;
    let copy = isolated;
    let isolated = o.model == Model::Isolated;
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
    let baseline = modeled_sim.sys.mm.traffic().map_err(RunError::from)?;
    let shown_reads_baseline = host_reads(&sim).map_err(RunError::from)?;
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
        modeled_sim.sys.add_host_since(&mut host, &host_before);
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
        shown_reads_baseline,
        host,
        modeled,
    })
}

/// One frame, pass by pass: the same passes in the same order as `PagedBoiling::frame`, with
/// the traffic counters read around each pass to model it. With `Schedule::Isolated` the
/// devices run one at a time and the pass is modeled by the isolated-device model (each
/// device's work alone, the links, the manager's time); with `Schedule::Concurrent` by the
/// older model (work measured while the devices shared the machine, the links, no manager).
fn frame(
    sim: &PagedBoiling,
    o: &Settings,
    topo: &Topology,
    modeled: &mut Modeled,
    schedule: Schedule,
) -> Result<Vec<PassStats>, RunError> {
    let (w, h) = (sim.ctx.width, sim.ctx.height);
    let mut total = vec![PassStats::default(); sim.sys.devices()];
    modeled.next_frame();
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
fn textures(sim: &PagedBoiling, page: u32) -> Result<Vec<TextureInfo>, RunError> {
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
                .ok_or(RunError::Unbound(name))?;
            let desc = ObjectDesc::texture(w, h, format, page)?;
            let pages = b.page_offset..b.pages_end;
            if pages.end - pages.start != desc.page_count() {
                return Err(RunError::Pages {
                    name,
                    got: pages.end - pages.start,
                    want: desc.page_count(),
                });
            }
            Ok(TextureInfo { name, pages, desc })
        })
        .collect()
}
