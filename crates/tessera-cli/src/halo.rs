//! What `tessera run stencil`, `tessera run convolution` and their sweeps share: the
//! options' checks, a node for [`tessera_workloads::halo`]'s phase runner, and printing and
//! writing its reports.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tessera_core::AccessMode;
use tessera_model::Topology;
use tessera_runtime::modeled::Model;
use tessera_workloads::decomp::{Access, Axis, Grid};
use tessera_workloads::halo::{self, HaloReport, Measured, Ran};

pub use tessera_workloads::halo::{Kind, Setup};

use crate::NodeOpts;

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

/// Everything about `s` that can be refused before a node starts, in the CLI's words.
pub fn check(s: &Setup) -> Result<Grid> {
    let max = s.bounds().0;
    if s.size == 0 || s.size > max {
        bail!(
            "--size must be between 1 and {max} for the {} (got {})",
            s.name(),
            s.size
        );
    }
    if let Kind::Convolution { filter_mode, .. } = s.kind {
        if s.access == Access::Explicit && filter_mode != AccessMode::Migrate {
            bail!("the explicit version replicates the filter by hand (a private copy per device): --filter-access must be replicate");
        }
    }
    Ok(s.grid()?)
}

/// Runs `s` on a fresh node; `tick` is called after every step (the progress bar).
pub fn measure(
    s: &Setup,
    node: &NodeOpts,
    topo: &Topology,
    tick: impl FnMut(),
) -> Result<Measured> {
    check(s)?;
    topo.check_devices(s.devices)?;
    let (sys, adapter_name) = crate::backend::system(node.backend, &node.config(s.devices))?;
    Ok(halo::measure(s, sys, adapter_name, topo, tick)?)
}

pub fn report(
    s: &Setup,
    node: &NodeOpts,
    topo: &Topology,
    m: &Measured,
    verify: bool,
) -> Result<HaloReport> {
    check(s)?;
    let field = m.run.field()?;
    let verification = if verify {
        let want = s.reference(m.run.steps());
        Some(crate::verify::field(
            node.backend,
            &want,
            &field,
            m.run.steps(),
        )?)
    } else {
        None
    };
    let ran = Ran {
        backend_kind: node.backend.name(),
        topology: topo,
    };
    Ok(halo::report(s, ran, m, &field, verification)?)
}

/// Prints `r` as `tessera run stencil|convolution` shows it.
pub fn print(r: &HaloReport) {
    let model = match r.model {
        Model::Isolated => "isolated-device model",
        Model::Concurrent => "concurrent model",
    };
    println!(
        "{} [{}{}], topology {}, {} step(s) after {} warm-up",
        r.settings,
        r.backend,
        r.adapter
            .as_ref()
            .map(|a| format!(", {a}"))
            .unwrap_or_default(),
        r.topology,
        r.steps,
        r.warmup
    );
    println!(
        "remote reads (GPU-SM Table 1's % remote): {:.2}%",
        100.0 * r.remote_read_fraction
    );
    println!(
        "modeled ({model}): {:.3} ms/step = work {:.3} + busiest link {:.3} + manager {:.3}",
        r.modeled_ms_per_step,
        r.modeled_work_ms_per_step,
        r.modeled_link_ms_per_step,
        r.modeled_manager_ms_per_step
    );
    println!(
        "measured wall time, devices together on this machine: {:.3} ms/step (not a multi-GPU figure)",
        r.wall_ms_per_step_measured
    );
    println!(
        "page requests {:.1}/step, moved {:.3} MiB/step",
        r.page_requests_per_step, r.moved_mib_per_step
    );
    if !r.remote.is_empty() {
        println!(
            "remote accesses: {:.3} MiB/step, {:.0}% in batches; they add {:.3} ms/step to the modeled work",
            r.remote_mib_per_step,
            100.0 * r.remote_batch_fraction,
            r.modeled_remote_ms_per_step
        );
        for r in &r.remote {
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
    for l in r.links.iter().filter(|l| l.pages_per_step > 0.0) {
        println!(
            "  link {:<18} {:>10.1} pages/step {:>10.3} MiB/step {:>9.3} ms/step busy (modeled)",
            l.link, l.pages_per_step, l.mib_per_step, l.busy_ms_per_step
        );
    }
    for d in &r.per_device {
        println!(
            "  device {}: work {:.3} ms/step, manager serving it {:.3} ms/step, {} launches, {} relaunched",
            d.device, d.work_ms_per_step, d.manager_ms_per_step, d.launches, d.relaunched_invocations
        );
    }
    println!("checksum {}", r.checksum);
    if let Some(v) = &r.verification {
        println!("{}", crate::verify::describe(v));
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `tessera run stencil|convolution`: one run, printed and written to `out/report.json`.
pub fn run_one(s: &Setup, node: &NodeOpts, out: &Path, verify: bool) -> Result<()> {
    check(s)?;
    let topo = crate::topology_args::load(&node.topology, s.devices)?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let bar = crate::run::progress(s.simulated_steps() as u64, s.name());
    let m = measure(s, node, &topo, || bar.inc(1))?;
    bar.finish_and_clear();
    let r = report(s, node, &topo, &m, verify)?;
    print(&r);
    if r.verified == Some(false) {
        bail!("--verify: the field differs from the plain single-device reference");
    }
    let json = out.join("report.json");
    write_json(&json, &r)?;
    println!("wrote {}", crate::output::shown(&json).display());
    Ok(())
}

/// `tessera sweep stencil|convolution`: every setup, one CSV row each, and the plots. A
/// setup the decomposition refuses (a halo larger than a slab at many devices) is skipped
/// with its reason printed. `size_name` names the swept size (halo or filter).
pub fn sweep(setups: Vec<Setup>, node: &NodeOpts, size_name: &str, out: &Path) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let mut runnable = Vec::new();
    for s in setups {
        match check(&s) {
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
        let topo = crate::topology_args::load(&node.topology, s.devices)?;
        let m = measure(s, node, &topo, || bar.inc(1))?;
        reports.push(report(s, node, &topo, &m, false)?);
    }
    bar.finish_and_clear();
    let points = halo::points(&reports);
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
        series.push(tessera_workloads::plot::Series {
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
    series.push(tessera_workloads::plot::Series {
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
    tessera_workloads::plot::line_chart(
        &stem,
        &tessera_workloads::plot::LineChart {
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
