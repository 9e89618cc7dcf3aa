//! `tessera sweep page-size` and `tessera sweep devices`: many runs, one CSV, the paper's
//! figures as plots.
//!
//! Every point is an ordinary `tessera run` (the same [`crate::run::execute`]) whose
//! report.json is kept in its own folder; the CSVs and the plots are made from the same
//! [`Report`] values that were written there (tessera_workloads::boiling::sweep).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use tessera_core::PageSize;
use tessera_runtime::{Partition, Procedure};

use crate::lists::{parse_devices, parse_pages, List};
use crate::output::{create_dir, shown};
use crate::run::{execute, progress, write_report};
use crate::{parse_partition, parse_procedure, PagingOpts, RunOpts, Workload};
use tessera_workloads::boiling::report::Report;
use tessera_workloads::boiling::sweep as figures;

#[derive(Subcommand)]
pub enum SweepKind {
    /// One run per page size: memory, requests, transfers and speed against page width
    /// (the paper's Figures 8–11) and the stage breakdown (Table 3).
    PageSize(PageSweepOpts),
    /// One run per device count: speed-up and traffic against devices.
    Devices(DeviceSweepOpts),
    /// GPU-SM's stencil per access mode, halo and device count: modeled speed-ups
    /// (its Fig. 12), the gap to explicit copies, traffic.
    Stencil(crate::stencil::StencilSweepOpts),
    /// GPU-SM's convolution per access mode, filter size and device count (its Fig. 14).
    Convolution(crate::convolution::ConvolutionSweepOpts),
    /// OO-VR's Figures 15–18: speed-up per scheme, inter-GPM traffic, link bandwidth 32–256
    /// GB/s and 1/2/4/8 GPMs, from stereo renders of one scene.
    Vr(crate::vr::VrSweepOpts),
}

/// What a boiling point of a sweep or of `bench scaling` runs with, beside its device count
/// and page.
#[derive(Args, Clone)]
pub struct PointOpts {
    /// Field side in texels.
    #[arg(long, default_value_t = 1024, value_parser = crate::parse_size)]
    pub(crate) size: u32,
    /// Measured frames per point (in the isolated model on two nodes side by side: the
    /// devices together, and one at a time for the model).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=crate::MAX_FRAMES as i64))]
    pub(crate) frames: u32,
    /// Frames run before the measured ones at every point and counted nowhere (pages move
    /// in on the first).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=crate::MAX_FRAMES as i64))]
    pub(crate) warmup: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    pub(crate) procedure: Procedure,
    /// How each pass's domain is split across devices.
    #[arg(long = "split", alias = "partition", value_name = "SPLIT", default_value = "rows", value_parser = parse_partition())]
    pub(crate) partition: Partition,
    #[command(flatten)]
    pub(crate) node: PagingOpts,
}

impl PointOpts {
    /// The run of one point: `devices` devices, pages of `page`, its report.json in `out`.
    pub fn point(&self, devices: usize, page: PageSize, out: PathBuf) -> RunOpts {
        RunOpts {
            devices,
            size: self.size,
            page,
            frames: self.frames,
            warmup: self.warmup,
            procedure: self.procedure,
            partition: self.partition,
            out,
            node: self.node.clone(),
            residency_png: false,
            gif_every: 0,
            verify: false,
            cluster: Default::default(),
        }
    }
}

#[derive(Args, Clone)]
pub struct SweepCommon {
    /// The workload to run at every point: boiling, the only one these sweeps run (the ray
    /// tracer's sweep is `bench oversubscription --workload raytrace`).
    #[arg(long, default_value = "boiling", value_parser = parse_workload)]
    workload: Workload,
    #[command(flatten)]
    point: PointOpts,
    /// Output directory: sweep.csv, per_device.csv, the plots, and a report.json per point.
    #[arg(long, default_value = "out/sweep")]
    pub(crate) out: PathBuf,
}

#[derive(Args, Clone)]
pub struct PageSweepOpts {
    #[command(flatten)]
    pub(crate) common: SweepCommon,
    /// Number of devices.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// Page sides to run, powers of two from 1 to 512: a list such as 16,32,64, where `...`
    /// keeps doubling up to the next value (1,2,...,512).
    #[arg(long, default_value = "1,2,...,512", value_parser = parse_pages)]
    pages: List,
}

#[derive(Args, Clone)]
pub struct DeviceSweepOpts {
    #[command(flatten)]
    pub(crate) common: SweepCommon,
    /// Device counts to run, from 1 to 64: a list such as 1,2,4,8 (`...` keeps doubling).
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Page side P in texels.
    #[arg(long, default_value = "64", value_parser = crate::parse_page)]
    page: PageSize,
}

/// `--workload`: boiling. The ray tracer is named so that asking for it says where its sweep
/// is, instead of running boiling at every point under its name.
fn parse_workload(s: &str) -> Result<Workload, String> {
    match s.trim() {
        "boiling" => Ok(Workload::Boiling),
        "raytrace" => Err("sweep page-size and sweep devices run boiling only; the ray tracer's budgets are swept by `tessera bench oversubscription --workload raytrace`".into()),
        _ => Err(format!("{s:?} is not a workload these sweeps run (boiling)")),
    }
}

/// Checks every point before the first runs, so a bad point fails in seconds, not after an
/// hour of good ones.
pub fn check_points(points: &[RunOpts]) -> Result<()> {
    for o in points {
        // Usage errors (exit 2), as the same values are on `run boiling`.
        if o.page.get() > o.size {
            return Err(crate::usage(format!(
                "page size {} is larger than the {s}x{s} field (--size {s})",
                o.page.get(),
                s = o.size
            )));
        }
        o.partition
            .regions(o.size, o.size, o.devices as u32)
            .map_err(|e| crate::usage(format!("--devices {}: {e}", o.devices)))?;
        o.node.topology(o.devices)?;
    }
    Ok(())
}

/// Runs the points in order (checked by [`check_points`] first), writing each report.json;
/// returns the reports.
fn run_points(points: &[RunOpts], label: impl Fn(&RunOpts) -> String) -> Result<Vec<Report>> {
    let total: u64 = points
        .iter()
        .map(|o| crate::run::simulated_frames(o) as u64)
        .sum();
    let bar = progress(total, "sweep");
    let mut reports = Vec::new();
    for o in points {
        bar.set_message(label(o));
        let topo = o.node.topology(o.devices)?;
        create_dir(&o.out)?;
        let (_, report) = execute(o, &topo, |_, _| {
            bar.inc(1);
            Ok(())
        })
        .with_context(|| format!("at {}", label(o)))?;
        write_report(&report, &o.out)?;
        reports.push(report);
    }
    bar.finish_and_clear();
    Ok(reports)
}

pub fn page_size(o: &PageSweepOpts) -> Result<()> {
    let c = &o.common;
    let points: Vec<RunOpts> = o
        .pages
        .0
        .iter()
        .map(|&p| {
            let out = c.out.join(format!("page-{p}"));
            Ok(c.point.point(o.devices, PageSize::new(p)?, out))
        })
        .collect::<Result<_>>()?;
    sweep(
        c,
        &points,
        "page",
        |o| format!("page {}", o.page.get()),
        |r| r.page_size as f64,
        |dir, reports| figures::page_size_figures(dir, reports, c.point.size, o.devices),
    )
}

pub fn devices(o: &DeviceSweepOpts) -> Result<()> {
    let c = &o.common;
    let points: Vec<RunOpts> = o
        .devices
        .0
        .iter()
        .map(|&d| {
            c.point
                .point(d as usize, o.page, c.out.join(format!("devices-{d}")))
        })
        .collect();
    sweep(
        c,
        &points,
        "devices",
        |o| format!("{} device(s)", o.devices),
        |r| r.devices as f64,
        |dir, reports| figures::device_figures(dir, reports, c.point.size, o.page.get()),
    )
}

/// Runs a sweep's points, then writes its CSVs and `figures` into `--out` and prints the
/// summary, a row per point keyed by `key` (named `what`).
fn sweep(
    c: &SweepCommon,
    points: &[RunOpts],
    what: &str,
    label: impl Fn(&RunOpts) -> String,
    key: impl Fn(&Report) -> f64,
    figures: impl FnOnce(&Path, &[Report]) -> Result<Vec<PathBuf>, tessera_workloads::plot::PlotError>,
) -> Result<()> {
    check_points(points)?;
    create_dir(&c.out)?;
    let reports = run_points(points, label)?;
    if reports.is_empty() {
        bail!("the sweep ran no point");
    }
    let (main, dev) = figures::csvs(&reports);
    let mut wrote = vec![c.out.join("sweep.csv"), c.out.join("per_device.csv")];
    crate::output::write(&wrote[0], main)?;
    crate::output::write(&wrote[1], dev)?;
    wrote.extend(figures(&c.out, &reports)?);
    out!("{}", figures::summary(&reports, what, key));
    for p in wrote {
        let plot = p.extension().is_none();
        let p = shown(&p);
        if plot {
            wrote!("wrote {p}.svg and {p}.png");
        } else {
            wrote!("wrote {p}");
        }
    }
    Ok(())
}
