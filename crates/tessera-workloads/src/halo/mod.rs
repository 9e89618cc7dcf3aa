//! The halo workloads (stencil, convolution; [`crate::decomp`]) run step by step and phase
//! by phase, each phase charged to a topology with [`tessera_runtime::modeled::charge`] (the
//! same isolated-device model as boiling's), checked against the plain single-device
//! reference, and their report.
//!
//! A run: `warmup` steps counted nowhere (the pages move in on the first), `steps` steps with
//! the devices together for the measured wall time and the field (the run's result), and
//! (isolated model) two settling steps and then as many again one device at a time, which the
//! model, the counters and the stage times come from.

use std::time::Instant;

use serde::Serialize;
use tessera_core::AccessMode;
use tessera_model::{Endpoint, RemoteUse, Topology, TopologyError};
use tessera_runtime::modeled::{
    charge, device_work, remote_uses, transfers, Model, Modeled, ModeledError,
};
use tessera_runtime::{
    HostCounters, HostReport, PassStats, Procedure, RuntimeError, Schedule, StageTimes, System,
};

use crate::decomp::runner::Decomposed;
use crate::decomp::{run_phase, square_reads, star_reads, Access, Axis, DecompError, Grid};
use crate::{convolution, stencil};

mod text;

pub use text::{speedup_chart, sweep_table};

/// What can stop a halo run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HaloError {
    #[error("page size {page} (--page) is larger than the field's side {size} (--size): give a page of at most {size}")]
    PageLargerThanField { page: u32, size: u32 },
    #[error(transparent)]
    Decomp(#[from] DecompError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Modeled(#[from] ModeledError),
    #[error(transparent)]
    Topology(#[from] TopologyError),
    #[error("--size must be between 1 and {max} for the {name} (got {size})")]
    Size {
        size: u32,
        max: u32,
        name: &'static str,
    },
    #[error("the explicit version replicates the filter by hand (a private copy per device): --filter-access must be replicate")]
    ExplicitSharedFilter,
}

pub type Result<T, E = HaloError> = std::result::Result<T, E>;

/// Which halo workload, with its own sizes.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// The N³ stencil of radius `halo`.
    Stencil { halo: u32 },
    /// The N² image with an F × F filter, the filter buffer in `filter_mode` (shared
    /// versions).
    Convolution {
        filter: u32,
        filter_mode: AccessMode,
    },
}

/// One run's settings.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub kind: Kind,
    pub size: u32,
    pub split: Axis,
    pub devices: usize,
    pub access: Access,
    pub page: u32,
    pub steps: u32,
    pub warmup: u32,
    /// `None`: [`default_procedure`] for the access.
    pub procedure: Option<Procedure>,
    pub model: Model,
}

/// Where a convolution's filter lives, in `--filter-access`'s word, and what it means for
/// the access version.
fn filter_words(access: Access, filter_mode: AccessMode) -> (&'static str, &'static str) {
    match (access, filter_mode) {
        (Access::Explicit, _) => ("replicate", "a copy per device, by hand"),
        (_, AccessMode::Remote) => ("remote", "read in host memory"),
        (_, AccessMode::ReplicateRead) => ("remote-cached", "a read-only copy on first touch"),
        (_, AccessMode::Migrate) => ("replicate", "demand-paged read copies"),
    }
}

/// The procedure a halo run takes unless `--procedure` says otherwise: two-pass for migrate,
/// relaunch for explicit and remote. Under migrate a device's cells next to a slab edge need
/// the neighbour's pages, which the neighbour rewrote last step; relaunch learns one missing
/// page per invocation per round, so a halo reaching r pages away takes about r rounds (18
/// launches per step at halo 16, docs/EVALUATION.md), where two-pass's request pass records
/// every page first and one batch brings them. Remote never misses (its pages are never
/// requested); explicit's slabs never miss, and its halo buffers, which change owner every
/// step, fault once per pack and unpack: a request pass would repeat all their work to save
/// that one round.
pub fn default_procedure(access: Access) -> Procedure {
    match access {
        Access::Migrate => Procedure::TwoPass,
        Access::Explicit | Access::Remote => Procedure::Relaunch,
    }
}

/// The largest stencil side accepted: two fields of 512³ f32 are 1 GiB.
pub const MAX_STENCIL: u32 = 512;
/// The largest image side accepted (two 16384² f32 images are 2 GiB).
pub const MAX_IMAGE: u32 = 16384;

impl Setup {
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Stencil { .. } => "stencil",
            Kind::Convolution { .. } => "convolution",
        }
    }

    /// The procedure this run takes.
    pub fn procedure(&self) -> Procedure {
        self.procedure
            .unwrap_or_else(|| default_procedure(self.access))
    }

    /// Where the convolution's filter lives, in `--filter-access`'s word and what it means
    /// here; none for the stencil.
    pub fn filter_access(&self) -> Option<(&'static str, &'static str)> {
        match self.kind {
            Kind::Convolution { filter_mode, .. } => Some(filter_words(self.access, filter_mode)),
            Kind::Stencil { .. } => None,
        }
    }

    /// The settings in words, for titles and the report's first line.
    pub fn describe(&self) -> String {
        let s = self.size;
        let kind = match self.kind {
            Kind::Convolution {
                filter,
                filter_mode,
            } => {
                let (word, means) = filter_words(self.access, filter_mode);
                format!(
                    "convolution {s}x{s}, filter {filter}x{filter} (filter-access {word}: {means})"
                )
            }
            Kind::Stencil { halo } => format!("stencil {s}^3, halo {halo}"),
        };
        format!(
            "{kind}, split {}, {} device(s), {} ({}), page {}",
            self.split.name(),
            self.devices,
            self.access.name(),
            self.procedure(),
            self.page
        )
    }

    /// The largest side [`Setup::size`] may have for this workload, and the grid's sides.
    pub fn bounds(&self) -> (u32, [u32; 3]) {
        match self.kind {
            Kind::Stencil { .. } => (MAX_STENCIL, [self.size; 3]),
            Kind::Convolution { .. } => (MAX_IMAGE, [self.size, self.size, 1]),
        }
    }

    /// Everything about the setup that can be refused before a node starts; its grid.
    pub fn check(&self) -> Result<Grid> {
        let max = self.bounds().0;
        if self.size == 0 || self.size > max {
            return Err(HaloError::Size {
                size: self.size,
                max,
                name: self.name(),
            });
        }
        if let Kind::Convolution { filter_mode, .. } = self.kind {
            if self.access == Access::Explicit && filter_mode != AccessMode::Migrate {
                return Err(HaloError::ExplicitSharedFilter);
            }
        }
        self.grid()
    }

    /// The decomposition, once the filter, the split, the halo and the page fit the field.
    pub fn grid(&self) -> Result<Grid> {
        let halo = match self.kind {
            Kind::Stencil { halo } => halo,
            Kind::Convolution { filter, .. } => {
                convolution::check_filter(filter)?;
                convolution::check_split(self.split)?;
                filter / 2
            }
        };
        let grid =
            Grid::new(self.bounds().1, self.split, halo, self.devices).map_err(|e| {
                match (e, self.kind) {
                    (
                        DecompError::HaloTooLarge {
                            slab,
                            axis,
                            devices,
                            ..
                        },
                        Kind::Convolution { filter, .. },
                    ) => DecompError::FilterTooLarge {
                        filter,
                        slab,
                        axis,
                        devices,
                    },
                    (e, _) => e,
                }
            })?;
        if self.page > self.size {
            return Err(HaloError::PageLargerThanField {
                page: self.page,
                size: self.size,
            });
        }
        Ok(grid)
    }

    /// (remote reads, all reads) of one step, GPU-SM Table 1's "% Remote".
    pub fn reads(&self, grid: &Grid) -> (u64, u64) {
        match self.kind {
            Kind::Stencil { .. } => star_reads(grid),
            Kind::Convolution { .. } => square_reads(grid),
        }
    }

    fn build(&self, sys: System) -> Result<Decomposed> {
        Ok(match self.kind {
            Kind::Stencil { halo } => {
                stencil::decomposed(sys, self.size, halo, self.split, self.access, self.page)?
            }
            Kind::Convolution {
                filter,
                filter_mode,
            } => convolution::decomposed_with(
                sys,
                self.size,
                filter,
                self.split,
                self.access,
                self.page,
                filter_mode,
            )?,
        })
    }

    /// The plain single-device reference after `steps` steps.
    pub fn reference(&self, steps: u32) -> Vec<f32> {
        match self.kind {
            Kind::Stencil { halo } => {
                stencil::reference::run(&stencil::initial(self.size), self.size, halo, steps)
            }
            Kind::Convolution { filter, .. } => convolution::reference::run(
                &convolution::initial(self.size),
                self.size,
                &convolution::filter(filter),
                filter,
                steps,
            ),
        }
    }

    /// Steps [`measure`] runs in all: what its progress callback counts up to.
    pub fn simulated_steps(&self) -> u32 {
        self.warmup
            + match self.model {
                Model::Isolated => 2 * self.steps + SETTLING_STEPS,
                Model::Concurrent => self.steps,
            }
    }
}

/// Isolated steps [`measure`] runs before the measured ones (the isolated model): one per
/// field of the two a step swaps.
const SETTLING_STEPS: u32 = 2;

/// What a run leaves for its report.
pub struct Measured {
    pub run: Decomposed,
    pub adapter_name: Option<String>,
    pub modeled: Modeled,
    /// Each device's stats over the modeled steps.
    pub per_device: Vec<PassStats>,
    /// Measured wall time of `steps` steps with the devices together.
    pub wall: f64,
    /// Device time of those steps' kernels from timestamp queries, summed over the devices;
    /// `None` where the backend has none.
    pub gpu: Option<f64>,
    /// The page moves over the modeled steps, summed per pair of ends (`transfers`), those
    /// of no page left out.
    pub moves: Vec<tessera_model::Transfer>,
    pub page_requests: u64,
    /// Remote accesses over the modeled steps, per accessor and location.
    pub remote: Vec<RemoteUse>,
    /// Per device, the host's work over the measured steps with the devices together.
    pub host: Vec<HostCounters>,
    /// Per device, what its budget's page cache did over the modeled steps.
    pub eviction: Vec<EvictionPerFrame>,
    /// The field after the warm-up and the measured steps with the devices together, and how
    /// many steps that is: the run's result. The isolated model's steps run after it on the
    /// same node, for its timing only, so neither model changes the result.
    pub field: Vec<f32>,
    pub field_steps: u32,
}

fn step(
    run: &mut Decomposed,
    procedure: Procedure,
    schedule: Schedule,
    model: Option<(&Topology, &mut Modeled)>,
) -> Result<Vec<PassStats>> {
    let mut total = vec![PassStats::default(); run.sys.devices()];
    let mut model = model;
    for phase in run.phases() {
        let before = run.sys.mm.traffic()?;
        let per = run_phase(&run.sys, &phase, procedure, schedule)?;
        if let Some((topo, modeled)) = model.as_mut() {
            let after = run.sys.mm.traffic()?;
            charge(topo, modeled, &per, &before, &after, schedule)?;
        }
        for (t, s) in total.iter_mut().zip(&per) {
            t.add(s);
        }
    }
    // A step ends when its deferred launches do (`SystemConfig::deferred`):
    // their time belongs to the step that queued them, in the wall time and the model alike.
    let before = run.sys.mm.traffic()?;
    let settled = run.sys.settle()?;
    if settled.iter().any(|s| s.stages.total() > 0.0) {
        if let Some((topo, modeled)) = model.as_mut() {
            let after = run.sys.mm.traffic()?;
            charge(topo, modeled, &settled, &before, &after, schedule)?;
        }
    }
    for (t, s) in total.iter_mut().zip(&settled) {
        t.add(s);
    }
    run.finish_step();
    Ok(total)
}

/// Runs `s` on `sys`, a fresh node of `s.devices` devices (on the wgpu adapter named
/// `adapter_name`, for the report); `tick` is called after every step (the progress bar).
pub fn measure(
    s: &Setup,
    sys: System,
    adapter_name: Option<String>,
    topo: &Topology,
    mut tick: impl FnMut(),
) -> Result<Measured> {
    s.grid()?;
    topo.check_devices(s.devices)?;
    let mut run = s.build(sys)?;
    let fresh = || Modeled {
        link_seconds: vec![0.0; topo.links().len()],
        work_per_device: vec![0.0; s.devices],
        manager_per_device: vec![0.0; s.devices],
        ..Default::default()
    };
    for _ in 0..s.warmup {
        step(&mut run, s.procedure(), Schedule::Concurrent, None)?;
        tick();
    }
    let isolated = s.model == Model::Isolated;
    let mut modeled = fresh();
    let mut per_device = vec![PassStats::default(); s.devices];
    let mut baseline = run.sys.mm.traffic()?;
    let mut wall = 0.0;
    let mut gpu: Option<f64> = None;
    let host_before = run.sys.host_counters();
    for _ in 0..s.steps {
        let t = Instant::now();
        let model = (!isolated).then_some((topo, &mut modeled));
        let stats = step(&mut run, s.procedure(), Schedule::Concurrent, model)?;
        wall += t.elapsed().as_secs_f64();
        for g in stats.iter().filter_map(|p| p.gpu_stages) {
            *gpu.get_or_insert(0.0) += g.total();
        }
        if !isolated {
            for (a, b) in per_device.iter_mut().zip(&stats) {
                a.add(b);
            }
        }
        tick();
    }
    let mut host = vec![HostCounters::default(); s.devices];
    run.sys.add_host_since(&mut host, &host_before);
    // Read after the host counters are taken, as the report's reads always were.
    let (field, field_steps) = (run.field()?, run.steps());
    if isolated {
        // Two isolated steps first, counted nowhere: the concurrent steps leave each field's
        // pages wherever their timing put them, and the fields swap every step, so it takes
        // one step per field before every page is where the isolated turns put it. Measured
        // from the concurrent steps' end, the same run's link figures moved from run to run.
        for _ in 0..SETTLING_STEPS {
            step(&mut run, s.procedure(), Schedule::Isolated, None)?;
            tick();
        }
        baseline = run.sys.mm.traffic()?;
        for _ in 0..s.steps {
            let stats = step(
                &mut run,
                s.procedure(),
                Schedule::Isolated,
                Some((topo, &mut modeled)),
            )?;
            for (a, b) in per_device.iter_mut().zip(&stats) {
                a.add(b);
            }
            tick();
        }
    }
    let after = run.sys.mm.traffic()?;
    let moves = transfers(&baseline, &after)?
        .into_iter()
        .filter(|t| t.pages > 0)
        .collect();
    let page_requests = after
        .iter()
        .zip(&baseline)
        .map(|(a, b)| a.since(b).page_requests)
        .sum();
    let remote = remote_uses(&baseline, &after);
    let eviction = after
        .iter()
        .zip(&baseline)
        .map(|(a, b)| EvictionPerFrame::of(&a.since(b), s.steps))
        .collect();
    Ok(Measured {
        run,
        adapter_name,
        modeled,
        per_device,
        wall,
        gpu,
        moves,
        page_requests,
        remote,
        host,
        eviction,
        field,
        field_steps,
    })
}

/// What a device's budget did per step (`--budget-mib`, `--policy`, `--thrashing`): all zero
/// while everything fits.
#[derive(Serialize, Clone, Copy, Default, Debug, PartialEq)]
pub struct EvictionPerFrame {
    pub evictions: f64,
    /// Modified pages written home before they were evicted.
    pub write_backs: f64,
    /// Pages requested again after the device evicted them.
    pub refaults: f64,
    /// Pages refaulted 3 times within 16 batches of their eviction.
    pub thrashing_pages: f64,
}

impl EvictionPerFrame {
    fn of(t: &tessera_runtime::DeviceTraffic, steps: u32) -> Self {
        let n = steps.max(1) as f64;
        EvictionPerFrame {
            evictions: t.evictions as f64 / n,
            write_backs: t.eviction_write_backs as f64 / n,
            refaults: t.refaults as f64 / n,
            thrashing_pages: t.thrashing_pages as f64 / n,
        }
    }

    fn add(&mut self, o: &EvictionPerFrame) {
        self.evictions += o.evictions;
        self.write_backs += o.write_backs;
        self.refaults += o.refaults;
        self.thrashing_pages += o.thrashing_pages;
    }
}

#[derive(Serialize, Clone)]
pub struct LinkReport {
    pub link: String,
    pub pages_per_frame: f64,
    pub mib_per_frame: f64,
    /// Modeled.
    pub busy_ms_per_frame: f64,
}

/// Remote accesses (`AccessMode::Remote`) of one device to one memory, per step.
#[derive(Serialize, Clone)]
pub struct RemoteReport {
    pub from: String,
    pub to: String,
    pub read_mib_per_frame: f64,
    pub write_mib_per_frame: f64,
    /// Bytes in runs of at least 128 consecutive bytes of one page (GPU-SM's batch accesses)
    /// and the rest (spread), per the runtime's rule.
    pub batch_mib_per_frame: f64,
    pub spread_mib_per_frame: f64,
    pub batches_per_frame: f64,
}

#[derive(Serialize, Clone)]
pub struct DeviceReport {
    pub device: usize,
    /// The device's own work per step (measured; alone, in the isolated model).
    pub work_ms_per_frame: f64,
    /// The memory manager's time serving it per step (measured).
    pub manager_ms_per_frame: f64,
    /// Seconds per stage, as the report's `stages` sums them.
    #[serde(rename = "stages")]
    pub stage_seconds: StageTimes,
    pub launches: u64,
    pub relaunched_invocations: u64,
    /// The host's work for this device per step, over the steps run with the devices together.
    pub host: HostReport,
    /// Its budget's evictions per modeled step: a mean, where boiling's `eviction` is a total.
    #[serde(rename = "eviction_per_frame")]
    pub eviction: EvictionPerFrame,
}

/// The report of one run. Times under `modeled_*` are modeled on the topology; `wall_*` is
/// measured wall time on this machine with the software devices sharing its cores.
#[derive(Serialize, Clone)]
pub struct HaloReport {
    pub schema_version: u32,
    pub workload: &'static str,
    pub settings: String,
    pub size: u32,
    /// The stencil's radius, or the filter's reach (F / 2).
    pub halo: u32,
    /// The convolution's filter side; none for the stencil. `filter` in other reports is a
    /// texture sampler, so this is `filter_size`.
    #[serde(rename = "filter_size")]
    pub filter: Option<u32>,
    /// Where the convolution's filter lives, as `--filter-access` names it (`replicate`,
    /// `remote`, `remote-cached`); none for the stencil.
    pub filter_access: Option<&'static str>,
    pub split: &'static str,
    pub devices: usize,
    pub access: &'static str,
    /// How passes got their pages (`--procedure`, or the access's default).
    pub procedure: Procedure,
    #[serde(rename = "page_size")]
    pub page: u32,
    /// Steps measured: a step is the schema's frame.
    #[serde(rename = "frames")]
    pub steps: u32,
    #[serde(rename = "warmup_frames")]
    pub warmup: u32,
    /// `cpu` or `wgpu`.
    #[serde(rename = "backend")]
    pub backend_kind: &'static str,
    /// The devices as the backend describes them: `cpu (N threads)`, or the wgpu adapter's
    /// name.
    pub adapter: String,
    pub topology: String,
    pub model: Model,
    /// GPU-SM Table 1's "% Remote": reads of cells another device owns, over all reads.
    pub remote_read_fraction: f64,
    pub modeled_ms_per_frame: f64,
    pub modeled_work_ms_per_frame: f64,
    pub modeled_link_ms_per_frame: f64,
    pub modeled_manager_ms_per_frame: f64,
    pub wall_ms_per_frame_measured: f64,
    /// Device time of a measured step's kernels, summed over the devices (on one GPU, the time
    /// it was busy with them); absent where the backend has no timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_ms_per_frame_measured: Option<f64>,
    pub page_requests_per_frame: f64,
    pub moved_mib_per_frame: f64,
    /// Whether the backend counted the run's remote accesses (the CPU backend does, wgpu
    /// does not). Where it did not, the three figures below are null and the modeled time
    /// leaves remote accesses out.
    pub remote_counted: bool,
    /// What remote accesses add to the modeled step (inside `modeled_work_ms_per_frame`).
    pub modeled_remote_ms_per_frame: Option<f64>,
    /// Remote bytes in all, and the batch share of them.
    pub remote_mib_per_frame: Option<f64>,
    pub remote_batch_fraction: Option<f64>,
    pub remote: Vec<RemoteReport>,
    pub links: Vec<LinkReport>,
    /// Per device budget, bytes: the page cache's size (`--budget-mib`).
    pub budget_bytes: u64,
    pub policy: tessera_runtime::Policy,
    pub thrashing: tessera_runtime::Thrashing,
    /// Summed over devices, per modeled step.
    #[serde(rename = "eviction_per_frame")]
    pub eviction: EvictionPerFrame,
    pub per_device: Vec<DeviceReport>,
    /// FNV-1a of the field's f32 bits, in hex (`checksum_kind`: "field").
    pub checksum: String,
    pub checksum_kind: &'static str,
    pub time_kind: &'static str,
    /// Summed over devices and the measured steps, seconds.
    pub stages: StageTimes,
    /// Whether `--verify` passed (bit for bit, or within tolerance where the GPU fuses
    /// multiply-adds: `verification`); none if not run.
    pub verified: Option<bool>,
    pub verification: Option<Verification>,
}

/// What `--verify` compared: the plain single-device reference on the CPU against the field.
#[derive(Serialize, Clone, Debug)]
pub struct Verification {
    pub passed: bool,
    /// Cells whose f32 bits differ from the reference's.
    pub cells_differing: u64,
    pub max_abs_diff: f32,
    /// The largest |value| of the reference: what `max_abs_diff` is relative to.
    pub scale: f32,
    /// Whether the adapter's compiler fuses `a * b + c` (wgpu only: `SharedGpu::fuses_multiply_add`).
    /// Where it does, bit-for-bit equality with the CPU cannot hold, and the field must be
    /// within `tolerance` × scale instead.
    pub fuses_multiply_add: bool,
    pub tolerance: Option<f32>,
}

/// Relative error allowed per step where the GPU fuses multiply-adds: each cell is a sum of at
/// most 49 products (a 7 × 7 filter), each fused product saving one rounding of half an ulp
/// (6e-8 relative); stencil and convolution average, so errors grow at most linearly.
const FMA_TOLERANCE_PER_STEP: f32 = 1e-5;

/// What [`compare`] found between a field and its reference.
#[derive(Clone, Copy, Debug)]
pub struct Comparison {
    /// Cells whose f32 bits differ from the reference's.
    pub cells_differing: u64,
    pub max_abs_diff: f32,
    /// The largest |value| of the reference: what `max_abs_diff` is relative to.
    pub scale: f32,
}

/// Compares a field with the plain reference's, bit by bit; fields of different lengths
/// differ in every cell by an infinite amount.
pub fn compare(want: &[f32], got: &[f32]) -> Comparison {
    let cells_differing = if want.len() == got.len() {
        want.iter()
            .zip(got)
            .filter(|(a, b)| a.to_bits() != b.to_bits())
            .count() as u64
    } else {
        want.len().max(got.len()) as u64
    };
    let max_abs_diff = if want.len() == got.len() {
        want.iter()
            .zip(got)
            .map(|(a, b)| {
                if b.is_finite() {
                    (a - b).abs()
                } else {
                    f32::INFINITY
                }
            })
            .fold(0.0, f32::max)
    } else {
        f32::INFINITY
    };
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    Comparison {
        cells_differing,
        max_abs_diff,
        scale,
    }
}

impl Verification {
    /// The verdict on `c` after `steps` steps, with the tolerance where the adapter's
    /// compiler fuses multiply-adds; `same_len` is whether the fields had the same length.
    pub fn new(c: Comparison, same_len: bool, fuses_multiply_add: bool, steps: u32) -> Self {
        let tolerance = fuses_multiply_add.then(|| FMA_TOLERANCE_PER_STEP * steps.max(1) as f32);
        let passed = c.cells_differing == 0
            || tolerance.is_some_and(|t| same_len && c.max_abs_diff <= t * c.scale);
        Verification {
            passed,
            cells_differing: c.cells_differing,
            max_abs_diff: c.max_abs_diff,
            scale: c.scale,
            fuses_multiply_add,
            tolerance,
        }
    }
}

fn checksum(v: &[f32]) -> String {
    use crate::boiling::reference::{checksum_hex, field_checksum};
    checksum_hex(field_checksum(v))
}

/// Where a run ran, as its report names it.
#[derive(Clone, Copy, Debug)]
pub struct Ran<'a> {
    /// `cpu` or `wgpu`.
    pub backend_kind: &'static str,
    pub topology: &'a Topology,
    /// Each device's budget, bytes, and what it evicts by.
    pub budget_bytes: u64,
    pub policy: tessera_runtime::Policy,
    pub thrashing: tessera_runtime::Thrashing,
}

/// The report of run `m` of `s`, whose field is `field`, verified as `verification` says.
pub fn report(
    s: &Setup,
    ran: Ran,
    m: &Measured,
    field: &[f32],
    verification: Option<Verification>,
) -> Result<HaloReport> {
    let topo = ran.topology;
    let grid = s.grid()?;
    let n = s.steps as f64;
    let mib = (1u64 << 20) as f64;
    let verified = verification.as_ref().map(|v| v.passed);
    let mut links: Vec<LinkReport> = topo
        .links()
        .iter()
        .enumerate()
        .map(|(i, l)| LinkReport {
            link: format!("{}->{}", l.from, l.to),
            pages_per_frame: 0.0,
            mib_per_frame: 0.0,
            busy_ms_per_frame: m.modeled.link_seconds.get(i).copied().unwrap_or(0.0) * 1e3 / n,
        })
        .collect();
    let mut moved = 0.0;
    for t in &m.moves {
        moved += t.bytes as f64;
        for i in topo.transfer_route(t)? {
            if let Some(l) = links.get_mut(i) {
                l.pages_per_frame += t.pages as f64 / n;
                l.mib_per_frame += t.bytes as f64 / mib / n;
            }
        }
    }
    let (remote, total) = s.reads(&grid);
    let md = &m.modeled;
    // Remote accesses the backend did not count are unknown, not zero.
    let uses_remote = s.access == Access::Remote
        || matches!(
            s.kind,
            Kind::Convolution {
                filter_mode: AccessMode::Remote,
                ..
            }
        );
    let counted = !uses_remote || m.run.sys.counts_remote();
    let mut stages = StageTimes::default();
    for p in &m.per_device {
        stages.add(&p.stages);
    }
    Ok(HaloReport {
        schema_version: crate::SCHEMA_VERSION,
        workload: s.name(),
        settings: s.describe(),
        size: s.size,
        halo: grid.halo,
        filter: match s.kind {
            Kind::Convolution { filter, .. } => Some(filter),
            Kind::Stencil { .. } => None,
        },
        filter_access: s.filter_access().map(|(word, _)| word),
        split: s.split.name(),
        devices: s.devices,
        access: s.access.name(),
        procedure: s.procedure(),
        page: s.page,
        steps: s.steps,
        warmup: s.warmup,
        backend_kind: ran.backend_kind,
        // The adapter's own name on wgpu, as every other workload's report gives it.
        adapter: m
            .adapter_name
            .clone()
            .unwrap_or_else(|| m.run.sys.backend().to_string()),
        topology: topo.name().to_string(),
        model: s.model,
        remote_read_fraction: remote as f64 / total.max(1) as f64,
        modeled_ms_per_frame: md.seconds() * 1e3 / n,
        modeled_work_ms_per_frame: md.device_seconds * 1e3 / n,
        modeled_link_ms_per_frame: md.transfer_seconds * 1e3 / n,
        modeled_manager_ms_per_frame: md.manager_seconds * 1e3 / n,
        wall_ms_per_frame_measured: m.wall * 1e3 / n,
        gpu_ms_per_frame_measured: m.gpu.map(|g| g * 1e3 / n),
        page_requests_per_frame: m.page_requests as f64 / n,
        moved_mib_per_frame: moved / mib / n,
        remote_counted: counted,
        modeled_remote_ms_per_frame: counted.then(|| md.remote_seconds * 1e3 / n),
        remote_mib_per_frame: counted.then(|| {
            m.remote
                .iter()
                // A fold from +0.0: an empty f64 sum is -0.0.
                .fold(0.0, |a, u| {
                    a + (u.link.read_bytes + u.link.write_bytes) as f64
                })
                / mib
                / n
        }),
        remote_batch_fraction: counted.then(|| {
            let (b, all) = m.remote.iter().fold((0u64, 0u64), |(b, a), u| {
                (
                    b + u.link.batch_bytes,
                    a + u.link.batch_bytes + u.link.spread_bytes,
                )
            });
            b as f64 / all.max(1) as f64
        }),
        remote: m
            .remote
            .iter()
            .map(|u| RemoteReport {
                from: Endpoint::Device(u.accessor).to_string(),
                to: u.location.to_string(),
                read_mib_per_frame: u.link.read_bytes as f64 / mib / n,
                write_mib_per_frame: u.link.write_bytes as f64 / mib / n,
                batch_mib_per_frame: u.link.batch_bytes as f64 / mib / n,
                spread_mib_per_frame: u.link.spread_bytes as f64 / mib / n,
                batches_per_frame: u.link.batches as f64 / n,
            })
            .collect(),
        links,
        budget_bytes: ran.budget_bytes,
        policy: ran.policy,
        thrashing: ran.thrashing,
        eviction: m
            .eviction
            .iter()
            .fold(EvictionPerFrame::default(), |mut a, e| {
                a.add(e);
                a
            }),
        per_device: m
            .per_device
            .iter()
            .enumerate()
            .map(|(d, p)| DeviceReport {
                device: d,
                work_ms_per_frame: device_work(&p.stages) * 1e3 / n,
                manager_ms_per_frame: md.manager_per_device.get(d).copied().unwrap_or(0.0) * 1e3
                    / n,
                stage_seconds: p.stages,
                launches: p.launches,
                relaunched_invocations: p.relaunched,
                host: HostReport::of(&m.host[d], s.steps),
                eviction: m.eviction.get(d).copied().unwrap_or_default(),
            })
            .collect(),
        checksum: checksum(field),
        checksum_kind: "field",
        time_kind: "measured",
        stages,
        verified,
        verification,
    })
}

/// One point of a sweep: its report and where it stands against the others.
pub struct Point {
    pub r: HaloReport,
    /// Against the same access mode and halo/filter at the sweep's first device count.
    pub speedup: f64,
    pub ideal: f64,
    /// Modeled time over the explicit version's at the same point, minus 1.
    pub gap_vs_explicit: Option<f64>,
}

/// The points of a sweep, each against the same access mode and halo (or filter) at the
/// sweep's first device count and against the explicit version at the same point.
pub fn points(reports: &[HaloReport]) -> Vec<Point> {
    let key = |r: &HaloReport| (r.access, r.halo);
    reports
        .iter()
        .map(|r| {
            let base = reports
                .iter()
                .filter(|b| key(b) == key(r))
                .min_by_key(|b| b.devices)
                .unwrap_or(r);
            let explicit = reports
                .iter()
                .find(|e| e.access == "explicit" && e.halo == r.halo && e.devices == r.devices);
            Point {
                r: r.clone(),
                speedup: base.modeled_ms_per_frame / r.modeled_ms_per_frame,
                ideal: r.devices as f64 / base.devices as f64,
                gap_vs_explicit: explicit
                    .map(|e| r.modeled_ms_per_frame / e.modeled_ms_per_frame - 1.0),
            }
        })
        .collect()
}
