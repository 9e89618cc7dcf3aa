//! What `tessera run stencil`, `tessera run convolution` and their sweeps share: the
//! options' checks, a node for [`tessera_workloads::halo`]'s phase runner, and printing and
//! writing its reports.

use std::path::Path;

use anyhow::{bail, Result};
use tessera_model::Topology;
use tessera_workloads::decomp::{Access, Axis};
use tessera_workloads::halo::{self, HaloReport, Ran};

pub use tessera_workloads::halo::{Kind, Setup};

use clap::Args;
use tessera_core::PageSize;
use tessera_runtime::Procedure;

use crate::lists::{parse_devices, List};
use crate::output::{create_dir, shown, write_json};
use crate::{parse_procedure, PagingOpts};

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
    if let Some(a) = crate::lists::repeated(&v) {
        return Err(format!("{} is named twice", a.name()));
    }
    Ok(Accesses(v))
}

/// What every halo command shares: the steps before the measured ones, the page, the
/// procedure and the node.
#[derive(Args, Clone)]
pub struct HaloCommon {
    /// Steps run first and counted nowhere (the pages move in on the first).
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Texture page side P: a power of two.
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How passes get their pages; default two-pass for migrate, relaunch for explicit and
    /// remote (docs/EVALUATION.md says why).
    #[arg(long, value_parser = parse_procedure())]
    procedure: Option<Procedure>,
    #[command(flatten)]
    node: PagingOpts,
}

impl HaloCommon {
    /// A run of `kind` on an N-sided field split along `split` over `devices` in `access`,
    /// `steps` measured.
    fn setup(
        &self,
        kind: Kind,
        size: u32,
        split: Axis,
        devices: usize,
        access: Access,
        steps: u32,
    ) -> Setup {
        Setup {
            kind,
            size,
            split,
            devices,
            access,
            page: self.page.get(),
            steps,
            warmup: self.warmup,
            procedure: self.procedure,
            model: self.node.model.into(),
        }
    }
}

/// What `run stencil` and `run convolution` share.
#[derive(Args, Clone)]
pub struct HaloRunOpts {
    /// Number of devices.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// explicit (private slabs and hand-written halo copies), migrate (one shared field,
    /// demand paging) or remote (needs the runtime's remote access mode).
    #[arg(long, default_value = "migrate")]
    access: Access,
    /// Also run the plain single-device reference and compare the field bit for bit (fails
    /// the command if it differs).
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    common: HaloCommon,
}

impl HaloRunOpts {
    /// `tessera run stencil|convolution`: one run of `kind` on an N-sided field split along
    /// `split`, `steps` measured, printed and written to `out/report.json`.
    pub fn run(&self, kind: Kind, size: u32, split: Axis, steps: u32, out: &Path) -> Result<()> {
        let c = &self.common;
        let s = c.setup(kind, size, split, self.devices, self.access, steps);
        // Every setting the decomposition refuses is a usage error: nothing has run yet.
        s.check().map_err(crate::usage)?;
        let topo = c.node.topology(s.devices)?;
        create_dir(out)?;
        // Steps simulated, not --steps: the isolated model runs a measured step alone and
        // with the others, after the warm-up and settling steps.
        let what = format!("{} steps simulated", s.name());
        let bar = crate::run::progress(s.simulated_steps() as u64, &what);
        let r = run_setup(&s, &c.node, &topo, self.verify, || bar.inc(1))?;
        bar.finish_and_clear();
        out!("{}", r.summary());
        if r.verified == Some(false) {
            bail!("--verify: the field differs from the plain single-device reference");
        }
        let json = out.join("report.json");
        write_json(&json, &r)?;
        wrote!("wrote {}", shown(&json));
        Ok(())
    }
}

/// What `sweep stencil` and `sweep convolution` share.
#[derive(Args, Clone)]
pub struct HaloSweepOpts {
    /// Device counts, a list such as 1,2,4,8; the first is the speed-ups' base.
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Access modes, a list of explicit, migrate, remote.
    #[arg(long, default_value = "explicit,migrate", value_parser = parse_accesses)]
    access: Accesses,
    /// Measured time steps per point (a step is a frame). `--steps` is the older name.
    #[arg(long = "frames", visible_alias = "steps", value_name = "FRAMES", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    #[command(flatten)]
    common: HaloCommon,
}

impl HaloSweepOpts {
    /// `tessera sweep stencil|convolution`: every access mode, swept size (`sizes` of `kind`,
    /// named `size_name`) and device count on an N-sided field split along `split`, one CSV
    /// row each, and the plots. A setup the decomposition refuses only at its device count (a
    /// halo larger than a slab at many devices) is skipped with its reason printed; one it
    /// would refuse on one device too (an even filter, a page larger than the field, an axis
    /// the workload cannot split along) is a usage error, as on `run`, before anything runs.
    pub fn sweep(
        &self,
        size: u32,
        split: Axis,
        sizes: &List,
        kind: impl Fn(u32) -> Kind,
        size_name: &str,
        out: &Path,
    ) -> Result<()> {
        let c = &self.common;
        let mut setups = Vec::new();
        for &access in &self.access.0 {
            for &k in &sizes.0 {
                for &devices in &self.devices.0 {
                    let d = devices as usize;
                    setups.push(c.setup(kind(k), size, split, d, access, self.steps));
                }
            }
        }
        let mut runnable = Vec::new();
        let mut skipped = Vec::new();
        for s in setups {
            match s.check() {
                Ok(_) => runnable.push(s),
                Err(e) => {
                    let alone = Setup { devices: 1, ..s };
                    if alone.check().is_err() {
                        return Err(crate::usage(format!("{}: {e:#}", s.describe())));
                    }
                    skipped.push(format!("skipped {}: {e:#}", s.describe()));
                }
            }
        }
        create_dir(out)?;
        for line in skipped {
            outln!("{line}");
        }
        // The options leave nothing to run: a usage error, as the same point given to `run`
        // is.
        if runnable.is_empty() {
            return Err(crate::usage(
                "no point of the sweep can run (see above): give fewer --devices or a larger --size",
            ));
        }
        let total: u64 = runnable.iter().map(|s| s.simulated_steps() as u64).sum();
        let bar = crate::run::progress(total, "sweep: steps simulated");
        let mut reports = Vec::new();
        for s in &runnable {
            bar.set_message(s.describe());
            let topo = c.node.topology(s.devices)?;
            reports.push(run_setup(s, &c.node, &topo, false, || bar.inc(1))?);
        }
        bar.finish_and_clear();
        let points = halo::points(&reports);
        let (table, csv) = halo::sweep_table(&points, size_name);
        outln!("{table}");
        let path = out.join("sweep.csv");
        crate::output::write(&path, csv)?;
        wrote!("wrote {}", shown(&path));
        let json = out.join("reports.json");
        write_json(&json, &reports)?;
        wrote!("wrote {}", shown(&json));
        let stem = out.join("speedup");
        halo::speedup_chart(&points, size_name, &stem)?;
        let stem = shown(&stem);
        wrote!("wrote {stem}.svg and {stem}.png");
        Ok(())
    }
}

/// Runs `s` on a fresh node and reports it, its field verified where asked; `tick` is called
/// after every step (the progress bar).
fn run_setup(
    s: &Setup,
    node: &PagingOpts,
    topo: &Topology,
    verify: bool,
    tick: impl FnMut(),
) -> Result<HaloReport> {
    s.check()?;
    topo.check_devices(s.devices)?;
    let (sys, adapter_name) = node.base.system(&node.config(s.devices))?;
    let m = halo::measure(s, sys, adapter_name, topo, tick)?;
    let (field, steps) = (&m.field, m.field_steps);
    let backend = node.base.backend;
    let check = || crate::verify::field(backend, &s.reference(steps), field, steps);
    let verification = verify.then(check).transpose()?;
    let ran = Ran {
        backend_kind: backend.name(),
        topology: topo,
        budget_bytes: node.cache.budget_bytes(),
        policy: node.cache.policy,
        thrashing: node.thrashing,
    };
    Ok(halo::report(s, ran, &m, field, verification)?)
}
