//! `tessera bench scaling`: the modeled speed-up of boiling at several device counts, side by
//! side with the ideal, in one run.
//!
//! Each device count is an ordinary run ([`crate::run::run_boiling`]) under the
//! isolated-device model (docs/EVALUATION.md): per pass the slowest device's work timed alone,
//! plus the busiest link, plus the memory manager's time. The table splits each point's
//! modeled frame time into those three parts, which is what limits the speed-up, and lists
//! each device's isolated work; the measured frame rate of the devices run together is printed
//! beside it, labelled, for comparison only.
//!
//! Under owned pages (`--coherence owned`, the default) every count also runs under the
//! journal paper's write-home rule in the same rounds, and a second table sets the two side
//! by side: the busiest link's time per frame and the speed-up under each rule.

use anyhow::{bail, Result};
use clap::Args;
use tessera_core::Coherence;
use tessera_core::PageSize;
use tessera_workloads::boiling::scaling::{medians, run_rounds, table};

use crate::lists::{parse_devices, List};
use crate::run::progress;
use crate::run::run_boiling;
use crate::sweep::{check_points, PointOpts};
use crate::{ModelKind, RunOpts};

#[derive(Args, Clone)]
pub struct ScalingOpts {
    /// Page side P in texels.
    #[arg(long, default_value = "64", value_parser = crate::parse_page)]
    page: PageSize,
    /// Device counts, from 1 to 64: a list such as 1,2,4,8 (`...` keeps doubling). The first
    /// is the base of the speed-up.
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Runs of every device count, interleaved (round 1 runs every count, then round 2 ...);
    /// each count's median run by modeled time is printed, with the range. On a shared
    /// machine one descheduled device turn inflates a run's model; the median resists that.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// With `--coherence owned`: also run every count under the paper's write-home rule, in
    /// the same rounds, and print both rules' busiest link and speed-up side by side (on or
    /// off).
    #[arg(long, default_value = "on", value_parser = crate::on_off(), action = clap::ArgAction::Set)]
    against_write_home: bool,
    #[command(flatten)]
    point: PointOpts,
}

pub fn scaling(o: &ScalingOpts) -> Result<()> {
    let points: Vec<RunOpts> = o
        .devices
        .0
        .iter()
        .map(|&d| o.point.point(d as usize, o.page, std::path::PathBuf::new()))
        .collect();
    check_points(&points)?;
    let compare = o.against_write_home && o.point.node.coherence == Coherence::Owned;
    let total: u64 = points
        .iter()
        .map(|p| crate::run::simulated_frames(p) as u64)
        .sum::<u64>()
        * o.rounds as u64
        * if compare { 2 } else { 1 };
    let bar = progress(total, "scaling");
    let mut backend = String::new();
    let (runs, home_runs) = run_rounds(points.len(), o.rounds, compare, |r, i, write_home| {
        let mut p = points[i].clone();
        let rule = match write_home {
            true => {
                p.node.coherence = Coherence::WriteHome;
                ", write-home"
            }
            false => "",
        };
        bar.set_message(format!("round {r}, {} device(s){rule}", p.devices));
        let topo = p.node.topology(p.devices)?;
        let run = run_boiling(&p, &topo, |_, _| {
            bar.inc(1);
            Ok(())
        })?;
        if !write_home {
            backend = run.sim.sys.backend().to_string();
        }
        anyhow::Ok(run.figures(p.frames)?)
    })?;
    bar.finish_and_clear();
    let (out, ranges) = medians(runs);
    let (home_out, _) = medians(home_runs);
    let isolated = matches!(o.point.node.model, ModelKind::Isolated);
    let Some(table) = table(&out, &ranges, &home_out, o.rounds, isolated) else {
        bail!("no device count ran");
    };
    let model = match o.point.node.model {
        ModelKind::Isolated => "isolated-device model",
        ModelKind::Concurrent => {
            "concurrent model (work timed with all devices sharing the machine)"
        }
    };
    outln!(
        "boiling {s}x{s}, page {p}x{p}, split {}, {}, [{backend}], topology {}, coherence {}, {model}, {} frame(s) after {} warm-up, median of {} run(s) per count",
        o.point.partition,
        o.point.procedure,
        o.point.node.topology,
        o.point.node.coherence,
        o.point.frames,
        o.point.warmup,
        o.rounds,
        s = o.point.size,
        p = o.page.get(),
    );
    out!("{table}");
    Ok(())
}
