//! What `tessera run stencil`, `tessera run convolution` and their sweeps share: running a
//! halo workload ([`tessera_workloads::decomp`]) step by step and phase by phase, modeling
//! each phase with [`crate::measure::charge`] (the same isolated-device model as boiling's),
//! and its report.
//!
//! A run: `--warmup` steps counted nowhere (the pages move in on the first), `--steps`
//! steps with the devices together for the measured wall time, and (isolated model) as many
//! again one device at a time, which the model, the counters and the stage times come from.

use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tessera_core::AccessMode;
use tessera_model::{Endpoint, RemoteUse, Topology};
use tessera_runtime::{PassStats, Procedure, Schedule, StageTimes, SystemConfig};
use tessera_workloads::decomp::runner::Decomposed;
use tessera_workloads::decomp::{run_phase, square_reads, star_reads, Access, Axis, Grid};
use tessera_workloads::{convolution, stencil};

use crate::measure::{charge, device_work, remote_uses, transfers, Modeled};
use crate::{ModelKind, NodeOpts};

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
#[derive(Clone)]
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
    pub node: NodeOpts,
}

/// The procedure a halo run takes unless `--procedure` says otherwise: two-pass for migrate,
/// relaunch for explicit and remote. Under migrate a device's cells next to a slab edge need
/// the neighbour's pages, which the neighbour rewrote last step; relaunch learns one missing
/// page per invocation per round, so a halo reaching r pages away takes about r rounds (18
/// launches per step at halo 16, docs/EVALUATION.md), where two-pass's request pass records
/// every page first and one batch brings them. Explicit and remote never miss in steady
/// state (private slabs; remote pages are never requested), so a request pass would only
/// repeat their work.
fn procedure_name(p: Procedure) -> &'static str {
    match p {
        Procedure::TwoPass => "two-pass",
        Procedure::Relaunch => "relaunch",
    }
}

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

pub fn parse_access(s: &str) -> Result<Access, String> {
    s.parse()
}
pub fn parse_split(s: &str) -> Result<Axis, String> {
    s.parse()
}

/// A comma-separated list of access modes.
#[derive(Clone, Debug)]
pub struct Accesses(pub Vec<Access>);

pub fn parse_accesses(s: &str) -> Result<Accesses, String> {
    let v = s
        .split(',')
        .map(|a| a.trim().parse::<Access>())
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err("no access mode given".into());
    }
    Ok(Accesses(v))
}

impl Setup {
    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Stencil { .. } => "stencil",
            Kind::Convolution { .. } => "convolution",
        }
    }

    /// The settings in words, for titles and the report's first line.
    /// The procedure this run takes.
    pub fn procedure(&self) -> Procedure {
        self.procedure
            .unwrap_or_else(|| default_procedure(self.access))
    }

    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Stencil { halo } => format!(
                "stencil {s}^3, halo {halo}, split {}, {} device(s), {} ({}), page {p}",
                self.split.name(),
                self.devices,
                self.access.name(),
                procedure_name(self.procedure()),
                s = self.size,
                p = self.page
            ),
            Kind::Convolution {
                filter,
                filter_mode,
            } => format!(
                "convolution {s}x{s}, filter {filter}x{filter} ({}), split {}, {} device(s), {} ({}), page {p}",
                match (self.access, filter_mode) {
                    (Access::Explicit, _) => "filter replicated by hand",
                    (_, AccessMode::Remote) => "filter remote in host memory",
                    (_, AccessMode::ReplicateRead) => "filter replicate-read",
                    (_, AccessMode::Migrate) => "filter read copies",
                },
                self.split.name(),
                self.devices,
                self.access.name(),
                procedure_name(self.procedure()),
                s = self.size,
                p = self.page
            ),
        }
    }

    /// Everything that can be refused before a node starts, with the CLI's words.
    pub fn check(&self) -> Result<Grid> {
        if self.steps == 0 {
            bail!("--steps must be at least 1");
        }
        if self.devices == 0 || self.devices > tessera_core::MAX_DEVICES {
            bail!(
                "--devices must be between 1 and {} (got {})",
                tessera_core::MAX_DEVICES,
                self.devices
            );
        }
        tessera_core::PageSize::new(self.page)?;
        let (max, dims) = match self.kind {
            Kind::Stencil { .. } => (MAX_STENCIL, [self.size; 3]),
            Kind::Convolution { .. } => (MAX_IMAGE, [self.size, self.size, 1]),
        };
        if self.size == 0 || self.size > max {
            bail!(
                "--size must be between 1 and {max} for the {} (got {})",
                self.name(),
                self.size
            );
        }
        let halo = match self.kind {
            Kind::Stencil { halo } => halo,
            Kind::Convolution {
                filter,
                filter_mode,
            } => {
                if self.access == Access::Explicit && filter_mode != AccessMode::Migrate {
                    bail!("the explicit version replicates the filter by hand (a private copy per device): --filter-access must be replicate");
                }
                convolution::check_filter(filter)?;
                convolution::check_split(self.split)?;
                filter / 2
            }
        };
        let grid = Grid::new(dims, self.split, halo, self.devices)?;
        if self.page > self.size {
            bail!(
                "page size {} is larger than the field's side {} (--size)",
                self.page,
                self.size
            );
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

    fn build(&self, sys: tessera_runtime::System) -> Result<Decomposed> {
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
            + self.steps
                * match self.node.model {
                    ModelKind::Isolated => 2,
                    ModelKind::Concurrent => 1,
                }
    }
}

/// What a run leaves for its report.
pub struct Measured {
    pub run: Decomposed,
    pub adapter_name: Option<String>,
    pub modeled: Modeled,
    /// Each device's stats over the modeled steps.
    pub per_device: Vec<PassStats>,
    /// Measured wall time of `steps` steps with the devices together.
    pub wall: f64,
    /// Per modeled step: (from, to, pages, bytes) of every page move.
    pub moves: Vec<(Endpoint, Endpoint, u64, u64)>,
    pub page_requests: u64,
    /// Remote accesses over the modeled steps, per accessor and location.
    pub remote: Vec<RemoteUse>,
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
    run.finish_step();
    Ok(total)
}

/// Runs `s` on a fresh node; `tick` is called after every step (the progress bar).
pub fn measure(s: &Setup, topo: &Topology, mut tick: impl FnMut()) -> Result<Measured> {
    s.check()?;
    topo.check_devices(s.devices)?;
    let (sys, adapter_name) = crate::backend::system(
        s.node.backend,
        &SystemConfig {
            devices: s.devices,
            cpu_threads: s.node.threads,
            budget_bytes: crate::budget_bytes(s.node.budget_mib),
            policy: s.node.policy,
            thrashing: s.node.thrashing,
            prefetch: s.node.prefetch,
            staging: s.node.staging,
            footprint_ahead: s.node.footprint_ahead,
            home_file: s.node.home_file.clone(),
            ..Default::default()
        },
    )?;
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
    let isolated = s.node.model == ModelKind::Isolated;
    let mut modeled = fresh();
    let mut per_device = vec![PassStats::default(); s.devices];
    let mut baseline = run.sys.mm.traffic()?;
    let mut wall = 0.0;
    for _ in 0..s.steps {
        let t = Instant::now();
        let model = (!isolated).then_some((topo, &mut modeled));
        let stats = step(&mut run, s.procedure(), Schedule::Concurrent, model)?;
        wall += t.elapsed().as_secs_f64();
        if !isolated {
            for (a, b) in per_device.iter_mut().zip(&stats) {
                a.add(b);
            }
        }
        tick();
    }
    if isolated {
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
        .map(|t| (t.from, t.to, t.pages, t.bytes))
        .collect();
    let page_requests = after
        .iter()
        .zip(&baseline)
        .map(|(a, b)| a.since(b).page_requests)
        .sum();
    let remote = remote_uses(&baseline, &after);
    Ok(Measured {
        run,
        adapter_name,
        modeled,
        per_device,
        wall,
        moves,
        page_requests,
        remote,
    })
}

#[derive(Serialize, Clone)]
pub struct LinkReport {
    pub link: String,
    pub pages_per_step: f64,
    pub mib_per_step: f64,
    /// Modeled.
    pub busy_ms_per_step: f64,
}

/// Remote accesses (`AccessMode::Remote`) of one device to one memory, per step.
#[derive(Serialize, Clone)]
pub struct RemoteReport {
    pub from: String,
    pub to: String,
    pub read_mib_per_step: f64,
    pub write_mib_per_step: f64,
    /// Bytes in runs of at least 128 consecutive bytes of one page (GPU-SM's batch accesses)
    /// and the rest (spread), per the runtime's rule.
    pub batch_mib_per_step: f64,
    pub spread_mib_per_step: f64,
    pub batches_per_step: f64,
}

#[derive(Serialize, Clone)]
pub struct DeviceReport {
    pub device: usize,
    /// The device's own work per step (measured; alone, in the isolated model).
    pub work_ms_per_step: f64,
    /// The memory manager's time serving it per step (measured).
    pub manager_ms_per_step: f64,
    pub stage_seconds: StageTimes,
    pub launches: u64,
    pub relaunched_invocations: u64,
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
    /// The convolution's filter side; none for the stencil.
    pub filter: Option<u32>,
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
    /// The devices as the backend describes them.
    #[serde(rename = "adapter")]
    pub backend: String,
    /// The wgpu adapter's name; none on the CPU backend.
    #[serde(rename = "adapter_name")]
    pub adapter: Option<String>,
    pub topology: String,
    pub model: ModelKind,
    /// GPU-SM Table 1's "% Remote": reads of cells another device owns, over all reads.
    pub remote_read_fraction: f64,
    pub modeled_ms_per_step: f64,
    pub modeled_work_ms_per_step: f64,
    pub modeled_link_ms_per_step: f64,
    pub modeled_manager_ms_per_step: f64,
    pub wall_ms_per_step_measured: f64,
    pub page_requests_per_step: f64,
    pub moved_mib_per_step: f64,
    /// What remote accesses add to the modeled step (inside `modeled_work_ms_per_step`).
    pub modeled_remote_ms_per_step: f64,
    /// Remote bytes in all, and the batch share of them.
    pub remote_mib_per_step: f64,
    pub remote_batch_fraction: f64,
    pub remote: Vec<RemoteReport>,
    pub links: Vec<LinkReport>,
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

fn verify_field(s: &Setup, want: &[f32], got: &[f32], steps: u32) -> Result<Verification> {
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
    // The probe runs only where the bits differ: on lavapipe and the CPU they do not.
    let fuses_multiply_add = cells_differing > 0
        && matches!(s.node.backend, crate::BackendKind::Wgpu)
        && tessera_wgpu::SharedGpu::open(&crate::backend::adapter_choice())?
            .fuses_multiply_add()?;
    let tolerance = fuses_multiply_add.then(|| FMA_TOLERANCE_PER_STEP * steps.max(1) as f32);
    let passed = cells_differing == 0
        || tolerance.is_some_and(|t| want.len() == got.len() && max_abs_diff <= t * scale);
    Ok(Verification {
        passed,
        cells_differing,
        max_abs_diff,
        scale,
        fuses_multiply_add,
        tolerance,
    })
}

fn checksum(v: &[f32]) -> String {
    use tessera_workloads::boiling::reference::{checksum_hex, field_checksum};
    checksum_hex(field_checksum(v))
}

pub fn report(s: &Setup, topo: &Topology, m: &Measured, verify: bool) -> Result<HaloReport> {
    let grid = s.check()?;
    let n = s.steps as f64;
    let mib = (1u64 << 20) as f64;
    let field = m.run.field()?;
    let verification = if verify {
        let want = s.reference(m.run.steps());
        Some(verify_field(s, &want, &field, m.run.steps())?)
    } else {
        None
    };
    let verified = verification.as_ref().map(|v| v.passed);
    let mut links: Vec<LinkReport> = topo
        .links()
        .iter()
        .enumerate()
        .map(|(i, l)| LinkReport {
            link: format!("{}->{}", l.from, l.to),
            pages_per_step: 0.0,
            mib_per_step: 0.0,
            busy_ms_per_step: m.modeled.link_seconds.get(i).copied().unwrap_or(0.0) * 1e3 / n,
        })
        .collect();
    let mut moved = 0.0;
    for &(from, to, pages, bytes) in &m.moves {
        moved += bytes as f64;
        for i in topo.route(from, to)? {
            if let Some(l) = links.get_mut(i) {
                l.pages_per_step += pages as f64 / n;
                l.mib_per_step += bytes as f64 / mib / n;
            }
        }
    }
    let (remote, total) = s.reads(&grid);
    let md = &m.modeled;
    let mut stages = StageTimes::default();
    for p in &m.per_device {
        stages.add(&p.stages);
    }
    Ok(HaloReport {
        schema_version: crate::report::SCHEMA_VERSION,
        workload: s.name(),
        settings: s.describe(),
        size: s.size,
        halo: grid.halo,
        filter: match s.kind {
            Kind::Convolution { filter, .. } => Some(filter),
            Kind::Stencil { .. } => None,
        },
        split: s.split.name(),
        devices: s.devices,
        access: s.access.name(),
        procedure: s.procedure(),
        page: s.page,
        steps: s.steps,
        warmup: s.warmup,
        backend_kind: s.node.backend.name(),
        backend: m.run.sys.backend().to_string(),
        adapter: m.adapter_name.clone(),
        topology: topo.name().to_string(),
        model: s.node.model,
        remote_read_fraction: remote as f64 / total.max(1) as f64,
        modeled_ms_per_step: md.seconds() * 1e3 / n,
        modeled_work_ms_per_step: md.device_seconds * 1e3 / n,
        modeled_link_ms_per_step: md.transfer_seconds * 1e3 / n,
        modeled_manager_ms_per_step: md.manager_seconds * 1e3 / n,
        wall_ms_per_step_measured: m.wall * 1e3 / n,
        page_requests_per_step: m.page_requests as f64 / n,
        moved_mib_per_step: moved / mib / n,
        modeled_remote_ms_per_step: md.remote_seconds * 1e3 / n,
        remote_mib_per_step: m
            .remote
            .iter()
            // A fold from +0.0: an empty f64 sum is -0.0.
            .fold(0.0, |a, u| {
                a + (u.link.read_bytes + u.link.write_bytes) as f64
            })
            / mib
            / n,
        remote_batch_fraction: {
            let (b, all) = m.remote.iter().fold((0u64, 0u64), |(b, a), u| {
                (
                    b + u.link.batch_bytes,
                    a + u.link.batch_bytes + u.link.spread_bytes,
                )
            });
            b as f64 / all.max(1) as f64
        },
        remote: m
            .remote
            .iter()
            .map(|u| RemoteReport {
                from: Endpoint::Device(u.accessor).to_string(),
                to: u.location.to_string(),
                read_mib_per_step: u.link.read_bytes as f64 / mib / n,
                write_mib_per_step: u.link.write_bytes as f64 / mib / n,
                batch_mib_per_step: u.link.batch_bytes as f64 / mib / n,
                spread_mib_per_step: u.link.spread_bytes as f64 / mib / n,
                batches_per_step: u.link.batches as f64 / n,
            })
            .collect(),
        links,
        per_device: m
            .per_device
            .iter()
            .enumerate()
            .map(|(d, p)| DeviceReport {
                device: d,
                work_ms_per_step: device_work(&p.stages) * 1e3 / n,
                manager_ms_per_step: md.manager_per_device.get(d).copied().unwrap_or(0.0) * 1e3 / n,
                stage_seconds: p.stages,
                launches: p.launches,
                relaunched_invocations: p.relaunched,
            })
            .collect(),
        checksum: checksum(&field),
        checksum_kind: "field",
        time_kind: "measured",
        stages,
        verified,
        verification,
    })
}

impl HaloReport {
    pub fn print(&self) {
        let model = match self.model {
            ModelKind::Isolated => "isolated-device model",
            ModelKind::Concurrent => "concurrent model",
        };
        println!(
            "{} [{}{}], topology {}, {} step(s) after {} warm-up",
            self.settings,
            self.backend,
            self.adapter
                .as_ref()
                .map(|a| format!(", {a}"))
                .unwrap_or_default(),
            self.topology,
            self.steps,
            self.warmup
        );
        println!(
            "remote reads (GPU-SM Table 1's % remote): {:.2}%",
            100.0 * self.remote_read_fraction
        );
        println!(
            "modeled ({model}): {:.3} ms/step = work {:.3} + busiest link {:.3} + manager {:.3}",
            self.modeled_ms_per_step,
            self.modeled_work_ms_per_step,
            self.modeled_link_ms_per_step,
            self.modeled_manager_ms_per_step
        );
        println!(
            "measured wall time, devices together on this machine: {:.3} ms/step (not a multi-GPU figure)",
            self.wall_ms_per_step_measured
        );
        println!(
            "page requests {:.1}/step, moved {:.3} MiB/step",
            self.page_requests_per_step, self.moved_mib_per_step
        );
        if !self.remote.is_empty() {
            println!(
                "remote accesses: {:.3} MiB/step, {:.0}% in batches; they add {:.3} ms/step to the modeled work",
                self.remote_mib_per_step,
                100.0 * self.remote_batch_fraction,
                self.modeled_remote_ms_per_step
            );
            for r in &self.remote {
                println!(
                    "  remote {}->{}: read {:.3} write {:.3} MiB/step, batch {:.3} spread {:.3} MiB/step, {:.0} batches/step",
                    r.from,
                    r.to,
                    r.read_mib_per_step,
                    r.write_mib_per_step,
                    r.batch_mib_per_step,
                    r.spread_mib_per_step,
                    r.batches_per_step
                );
            }
        }
        for l in self.links.iter().filter(|l| l.pages_per_step > 0.0) {
            println!(
                "  link {:<18} {:>10.1} pages/step {:>10.3} MiB/step {:>9.3} ms/step busy (modeled)",
                l.link, l.pages_per_step, l.mib_per_step, l.busy_ms_per_step
            );
        }
        for d in &self.per_device {
            println!(
                "  device {}: work {:.3} ms/step, manager serving it {:.3} ms/step, {} launches, {} relaunched",
                d.device, d.work_ms_per_step, d.manager_ms_per_step, d.launches, d.relaunched_invocations
            );
        }
        println!("checksum {}", self.checksum);
        match &self.verification {
            Some(v) if v.cells_differing == 0 => {
                println!("verified: equals the plain single-device reference bit for bit")
            }
            Some(v) if v.passed => println!(
                "verified: within {:.1e} × {:.3} of the plain single-device reference ({} cells differ, by at most {:.3e}): this GPU's compiler fuses multiply-adds, so bit for bit with the CPU cannot hold",
                v.tolerance.unwrap_or(0.0), v.scale, v.cells_differing, v.max_abs_diff
            ),
            Some(v) => println!(
                "verified: DIFFERS from the plain single-device reference ({} cells, by at most {:.3e}{})",
                v.cells_differing,
                v.max_abs_diff,
                match v.tolerance {
                    Some(t) => format!(", beyond the fused multiply-add tolerance {:.3e}", t * v.scale),
                    None => String::new(),
                }
            ),
            None => {}
        }
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `tessera run stencil|convolution`: one run, printed and written to `out/report.json`.
pub fn run_one(s: &Setup, out: &Path, verify: bool) -> Result<()> {
    s.check()?;
    let topo = crate::topology_args::load(&s.node.topology, s.devices)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let bar = crate::run::progress(s.simulated_steps() as u64, s.name());
    let m = measure(s, &topo, || bar.inc(1))?;
    bar.finish_and_clear();
    let r = report(s, &topo, &m, verify)?;
    r.print();
    let json = out.join("report.json");
    write_json(&json, &r)?;
    println!("wrote {}", crate::output::shown(&json).display());
    if r.verified == Some(false) {
        bail!("the field differs from the plain reference");
    }
    Ok(())
}

/// One point of a sweep: its report and where it stands against the others.
struct Point {
    r: HaloReport,
    /// Against the same access mode and halo/filter at the sweep's first device count.
    speedup: f64,
    ideal: f64,
    /// Modeled time over the explicit version's at the same point, minus 1.
    gap_vs_explicit: Option<f64>,
}

/// `tessera sweep stencil|convolution`: every setup, one CSV row each, and the plots. A
/// setup the decomposition refuses (a halo larger than a slab at many devices) is skipped
/// with its reason printed. `size_name` names the swept size (halo or filter).
pub fn sweep(setups: Vec<Setup>, size_name: &str, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let mut runnable = Vec::new();
    for s in setups {
        match s.check() {
            Ok(_) => runnable.push(s),
            Err(e) => println!("skipped {}: {e:#}", s.describe()),
        }
    }
    if runnable.is_empty() {
        bail!("no point of the sweep can run (see above)");
    }
    let total: u64 = runnable.iter().map(|s| s.simulated_steps() as u64).sum();
    let bar = crate::run::progress(total, "sweep");
    let mut reports = Vec::new();
    for s in &runnable {
        bar.set_message(s.describe());
        let topo = crate::topology_args::load(&s.node.topology, s.devices)?;
        let m = measure(s, &topo, || bar.inc(1))?;
        reports.push(report(s, &topo, &m, false)?);
    }
    bar.finish_and_clear();
    let key = |r: &HaloReport| (r.access, r.halo);
    let points: Vec<Point> = reports
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
                speedup: base.modeled_ms_per_step / r.modeled_ms_per_step,
                ideal: r.devices as f64 / base.devices as f64,
                gap_vs_explicit: explicit
                    .map(|e| r.modeled_ms_per_step / e.modeled_ms_per_step - 1.0),
            }
        })
        .collect();
    let mut csv = String::from(
        "workload,size,split,access,halo,filter,devices,page,steps,modeled_ms_per_step,work_ms,link_ms,manager_ms,wall_ms_measured,speedup,ideal,gap_vs_explicit,remote_read_fraction,page_requests_per_step,moved_mib_per_step,remote_mib_per_step,remote_batch_fraction,remote_ms\n",
    );
    println!(
        "{:>8} {:>5} {:>7} {:>11} {:>9} {:>8} {:>8} {:>8} {:>9} {:>6} {:>9} {:>8} {:>9}",
        "access",
        size_name,
        "devices",
        "modeled ms",
        "work ms",
        "link ms",
        "manager",
        "speedup",
        "vs expl.",
        "ideal",
        "% remote",
        "MiB/step",
        "wall ms"
    );
    for p in &points {
        let r = &p.r;
        let shown = r.filter.unwrap_or(r.halo);
        let gap = p
            .gap_vs_explicit
            .map(|g| format!("{:+.1}%", 100.0 * g))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:>8} {:>5} {:>7} {:>11.3} {:>9.3} {:>8.3} {:>8.3} {:>8.2} {:>9} {:>6.1} {:>8.2}% {:>8.3} {:>9.1}",
            r.access,
            shown,
            r.devices,
            r.modeled_ms_per_step,
            r.modeled_work_ms_per_step,
            r.modeled_link_ms_per_step,
            r.modeled_manager_ms_per_step,
            p.speedup,
            gap,
            p.ideal,
            100.0 * r.remote_read_fraction,
            r.moved_mib_per_step,
            r.wall_ms_per_step_measured
        );
        csv.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.4},{:.1},{},{:.6},{:.2},{:.6},{:.6},{:.4},{:.6}\n",
            r.workload,
            r.size,
            r.split,
            r.access,
            r.halo,
            r.filter.map(|f| f.to_string()).unwrap_or_default(),
            r.devices,
            r.page,
            r.steps,
            r.modeled_ms_per_step,
            r.modeled_work_ms_per_step,
            r.modeled_link_ms_per_step,
            r.modeled_manager_ms_per_step,
            r.wall_ms_per_step_measured,
            p.speedup,
            p.ideal,
            p.gap_vs_explicit.map(|g| format!("{g:.4}")).unwrap_or_default(),
            r.remote_read_fraction,
            r.page_requests_per_step,
            r.moved_mib_per_step,
            r.remote_mib_per_step,
            r.remote_batch_fraction,
            r.modeled_remote_ms_per_step
        ));
    }
    println!("(speedup: modeled, against the same access and {size_name} at the first device count; vs expl.: modeled time over the explicit version's at the same point; wall ms: measured with the devices sharing this machine)");
    let path = out.join("sweep.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", crate::output::shown(&path).display());
    write_json(&out.join("reports.json"), &reports)?;
    let mut series = Vec::new();
    let mut keys: Vec<(&str, u32)> = Vec::new();
    for p in &points {
        let k = (p.r.access, p.r.filter.unwrap_or(p.r.halo));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (access, size) in &keys {
        series.push(crate::plot::Series {
            name: format!("{access}, {size_name} {size}"),
            points: points
                .iter()
                .filter(|p| p.r.access == *access && p.r.filter.unwrap_or(p.r.halo) == *size)
                .map(|p| (p.r.devices as f64, p.speedup))
                .collect(),
            secondary: false,
        });
    }
    let mut ideal: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.r.devices as f64, p.ideal))
        .collect();
    ideal.sort_by(|a, b| a.0.total_cmp(&b.0));
    ideal.dedup_by(|a, b| a.0 == b.0);
    series.push(crate::plot::Series {
        name: "ideal".into(),
        points: ideal,
        secondary: true,
    });
    let first = &points[0].r;
    let title = format!(
        "{} {}: modeled speed-up ({}, split {}, page {})",
        first.workload, first.size, first.topology, first.split, first.page
    );
    let stem = out.join("speedup");
    crate::plot::line_chart(
        &stem,
        &crate::plot::LineChart {
            title: &title,
            x_label: "devices",
            y_label: "modeled speed-up",
            x_log2: true,
            y_log: false,
            series,
        },
    )?;
    let stem = crate::output::shown(&stem);
    println!("wrote {}.svg and {}.png", stem.display(), stem.display());
    Ok(())
}
