//! `tessera bench scaling`: the modeled speed-up of boiling at several device counts, side by
//! side with the ideal, in one run.
//!
//! Each device count is an ordinary run ([`crate::measure::run_boiling`]) under the
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
use tessera_runtime::{Partition, Procedure};
use tessera_workloads::boiling::modeled::Figures;
use tessera_workloads::boiling::scaling::{medians, table};

use crate::lists::{parse_devices, List};
use crate::measure::run_boiling;
use crate::run::progress;
use crate::sweep::check_points;
use crate::{parse_partition, parse_procedure, topology_args, ModelKind, PagingOpts, RunOpts};

#[derive(Args, Clone)]
pub struct ScalingOpts {
    /// Field side in texels.
    #[arg(long, default_value_t = 1024, value_parser = crate::parse_size)]
    size: u32,
    /// Page side P in texels.
    #[arg(long, default_value = "64", value_parser = crate::parse_page)]
    page: PageSize,
    /// Device counts, from 1 to 64: a list such as 1,2,4,8 (`...` keeps doubling). The first
    /// is the base of the speed-up.
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Measured frames per device count (on two nodes side by side: devices together, and one
    /// at a time for the model).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Frames run first at every count and counted nowhere (pages move in on the first).
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Runs of every device count, interleaved (round 1 runs every count, then round 2 ...);
    /// each count's median run by modeled time is printed, with the range. On a shared
    /// machine one descheduled device turn inflates a run's model; the median resists that.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// How each pass's domain is split across devices.
    #[arg(long = "split", alias = "partition", default_value = "rows", value_parser = parse_partition())]
    partition: Partition,
    /// With `--coherence owned`: also run every count under the paper's write-home rule, in
    /// the same rounds, and print both rules' busiest link and speed-up side by side (on or
    /// off).
    #[arg(long, default_value = "on", value_parser = crate::on_off(), action = clap::ArgAction::Set)]
    against_write_home: bool,
    #[command(flatten)]
    node: PagingOpts,
}

pub fn scaling(o: &ScalingOpts) -> Result<()> {
    let points: Vec<RunOpts> = o
        .devices
        .0
        .iter()
        .map(|&d| RunOpts {
            devices: d as usize,
            size: o.size,
            page: o.page,
            frames: o.frames,
            procedure: o.procedure,
            partition: o.partition,
            out: std::path::PathBuf::new(),
            node: o.node.clone(),
            warmup: o.warmup,
            residency_png: false,
            gif_every: 0,
            verify: false,
            cluster: Default::default(),
        })
        .collect();
    check_points(&points)?;
    let compare = o.against_write_home && o.node.coherence == Coherence::Owned;
    let home_points: Vec<RunOpts> = if compare {
        points
            .iter()
            .map(|p| {
                let mut q = p.clone();
                q.node.coherence = Coherence::WriteHome;
                q
            })
            .collect()
    } else {
        Vec::new()
    };
    let total: u64 = points
        .iter()
        .map(|p| crate::measure::simulated_frames(p) as u64)
        .sum::<u64>()
        * o.rounds as u64
        * if compare { 2 } else { 1 };
    let bar = progress(total, "scaling");
    let mut runs: Vec<Vec<Figures>> = points.iter().map(|_| Vec::new()).collect();
    let mut home_runs: Vec<Vec<Figures>> = home_points.iter().map(|_| Vec::new()).collect();
    let mut backend = String::new();
    for r in 1..=o.rounds {
        let all = points.iter().zip(&mut runs).map(|(p, v)| (p, v, ""));
        let home = home_points.iter().zip(&mut home_runs);
        for (p, runs, rule) in all.chain(home.map(|(p, v)| (p, v, ", write-home"))) {
            bar.set_message(format!("round {r}, {} device(s){rule}", p.devices));
            let topo = topology_args::load(&p.node.topology, p.devices)?;
            let run = run_boiling(p, &topo, |_, _| {
                bar.inc(1);
                Ok(())
            })?;
            if rule.is_empty() {
                backend = run.sim.sys.backend().to_string();
            }
            runs.push(run.figures(p.frames)?);
        }
    }
    bar.finish_and_clear();
    let (out, ranges) = medians(runs);
    let (home_out, _) = medians(home_runs);
    let Some(table) = table(&out, &ranges, &home_out, o.rounds) else {
        bail!("no device count ran");
    };
    let model = match o.node.model {
        ModelKind::Isolated => "isolated-device model",
        ModelKind::Concurrent => {
            "concurrent model (work timed with all devices sharing the machine)"
        }
    };
    println!(
        "boiling {s}x{s}, page {p}x{p}, {:?}, {:?}, [{backend}], topology {}, coherence {}, {model}, {} frame(s) after {} warm-up, median of {} run(s) per count",
        o.partition,
        o.procedure,
        o.node.topology,
        o.node.coherence,
        o.frames,
        o.warmup,
        o.rounds,
        s = o.size,
        p = o.page.get(),
    );
    print!("{table}");
    Ok(())
}
