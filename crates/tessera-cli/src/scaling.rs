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

use crate::lists::{parse_devices, List};
use crate::measure::run_boiling;
use crate::run::progress;
use crate::sweep::check_points;
use crate::{parse_partition, parse_procedure, topology_args, ModelKind, NodeOpts, RunOpts};

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
    #[arg(long, default_value = "on", value_parser = crate::parse_against_write_home(), action = clap::ArgAction::Set)]
    against_write_home: bool,
    #[command(flatten)]
    node: NodeOpts,
}

fn ms_list(v: &[f64]) -> String {
    v.iter()
        .map(|s| format!("{:.1}", s * 1e3))
        .collect::<Vec<_>>()
        .join(" ")
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
        for (p, runs) in points.iter().zip(&mut runs) {
            bar.set_message(format!("round {r}, {} device(s)", p.devices));
            let topo = topology_args::load(&p.node.topology, p.devices)?;
            let run = run_boiling(p, &topo, |_, _| {
                bar.inc(1);
                Ok(())
            })?;
            backend = run.sim.sys.backend().to_string();
            runs.push(run.figures(p.frames)?);
        }
        for (p, runs) in home_points.iter().zip(&mut home_runs) {
            bar.set_message(format!("round {r}, {} device(s), write-home", p.devices));
            let topo = topology_args::load(&p.node.topology, p.devices)?;
            let run = run_boiling(p, &topo, |_, _| {
                bar.inc(1);
                Ok(())
            })?;
            runs.push(run.figures(p.frames)?);
        }
    }
    bar.finish_and_clear();
    let mut ranges = Vec::new();
    let medians = |runs: Vec<Vec<Figures>>, ranges: &mut Vec<(f64, f64)>| -> Vec<Figures> {
        runs.into_iter()
            .map(|mut v| {
                v.sort_by(|a, b| a.modeled.total_cmp(&b.modeled));
                let lo = v.first().map_or(0.0, |p| p.modeled);
                let hi = v.last().map_or(0.0, |p| p.modeled);
                ranges.push((lo, hi));
                v.swap_remove(v.len() / 2)
            })
            .collect()
    };
    let out: Vec<Figures> = medians(runs, &mut ranges);
    let home_out: Vec<Figures> = medians(home_runs, &mut Vec::new());
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
    println!("modeled ms/frame = slowest device's work alone + busiest link + memory manager (all per frame)");
    println!(
        "{:>7} {:>11} {:>9} {:>6} {:>10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>13}",
        "devices",
        "modeled ms",
        "speed-up",
        "ideal",
        "efficiency",
        "work ms",
        "link ms",
        "manager",
        "req/f",
        "MiB/f",
        "fps together"
    );
    let Some(base) = out.first().map(|p| (p.devices as f64, p.modeled)) else {
        bail!("no device count ran");
    };
    for p in &out {
        let speedup = base.1 / p.modeled;
        let ideal = p.devices as f64 / base.0;
        println!(
            "{:>7} {:>11.2} {:>9.2} {:>6.1} {:>9.0}% {:>9.2} {:>8.3} {:>9.2} {:>9.1} {:>9.2} {:>13.2}",
            p.devices,
            p.modeled * 1e3,
            speedup,
            ideal,
            100.0 * speedup / ideal,
            p.work * 1e3,
            p.link * 1e3,
            p.manager * 1e3,
            p.requests,
            p.moved_mib,
            p.measured_fps
        );
    }
    println!("(fps together: measured wall time with the devices sharing this machine; not a multi-GPU figure)");
    if o.rounds > 1 {
        let spread: Vec<String> = out
            .iter()
            .zip(&ranges)
            .map(|(p, (lo, hi))| format!("{}: {:.1}–{:.1}", p.devices, lo * 1e3, hi * 1e3))
            .collect();
        println!(
            "modeled ms/frame over the runs, min–max: {}",
            spread.join(", ")
        );
    }
    println!(
        "work per device, ms/frame: alone (the model's) | with all devices together (measured)"
    );
    for p in &out {
        let alone: f64 = p.per_device_work.iter().sum();
        println!(
            "{:>7}: {} | {}   (sum alone {:.1})",
            p.devices,
            ms_list(&p.per_device_work),
            ms_list(&p.concurrent_work),
            alone * 1e3
        );
    }
    if let Some(home_base) = home_out.first().map(|p| p.modeled) {
        println!(
            "owned pages against the paper's write-home rule, same rounds (busiest link and modeled ms per frame):"
        );
        println!(
            "{:>7} {:>18} {:>13} {:>21} {:>16} {:>19} {:>14}",
            "devices",
            "link ms write-home",
            "link ms owned",
            "modeled ms write-home",
            "modeled ms owned",
            "speed-up write-home",
            "speed-up owned"
        );
        for (h, p) in home_out.iter().zip(&out) {
            println!(
                "{:>7} {:>18.3} {:>13.3} {:>21.2} {:>16.2} {:>19.2} {:>14.2}",
                p.devices,
                h.link * 1e3,
                p.link * 1e3,
                h.modeled * 1e3,
                p.modeled * 1e3,
                home_base / h.modeled,
                base.1 / p.modeled
            );
        }
        for h in &home_out {
            println!(
                "speedup_write_home_{}={:.3} link_ms_write_home_{}={:.4}",
                h.devices,
                home_base / h.modeled,
                h.devices,
                h.link * 1e3
            );
        }
    }
    for p in &out {
        println!("link_ms_{}={:.4}", p.devices, p.link * 1e3);
    }
    for p in &out {
        println!(
            "speedup_{}={:.3} ideal_{}={:.3}",
            p.devices,
            base.1 / p.modeled,
            p.devices,
            p.devices as f64 / base.0
        );
    }
    Ok(())
}
