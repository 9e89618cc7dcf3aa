//! `tessera sweep page-size` and `tessera sweep devices`: many runs, one CSV, the paper's
//! figures as plots.
//!
//! Every point is an ordinary `tessera run` (the same [`crate::run::execute`]) whose
//! report.json is kept in its own folder; the CSV's columns and the plots are read out of the
//! same [`Report`] values that were written there, field by typed field, so a CSV row and the
//! report of the same run cannot disagree and a renamed field is a compile error here.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::Value;
use tessera_core::PageSize;
use tessera_runtime::{Partition, Procedure, StageTimes};

use crate::lists::{parse_devices, parse_pages, List};
use crate::plot::{self, LineChart, Series};
use crate::report::{DeviceReport, Report};
use crate::run::{check_size, execute, progress, write_report};
use crate::{parse_partition, parse_procedure, topology_args, NodeOpts, RunOpts, Workload};

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

#[derive(Args, Clone)]
pub struct SweepCommon {
    /// The workload to run at every point.
    #[arg(long, value_enum, default_value = "boiling")]
    workload: Workload,
    /// Field side in texels.
    #[arg(long, default_value_t = 1024)]
    size: u32,
    /// Measured frames per point.
    #[arg(long, default_value_t = 3)]
    frames: u32,
    /// Frames run before the measured ones at every point (pages move in on the first).
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// How each pass's domain is split across devices.
    #[arg(long, default_value = "rows", value_parser = parse_partition())]
    partition: Partition,
    #[command(flatten)]
    node: NodeOpts,
    /// Output directory: sweep.csv, per_device.csv, the plots, and a report.json per point.
    #[arg(long, default_value = "out/sweep")]
    pub(crate) out: PathBuf,
}

#[derive(Args, Clone)]
pub struct PageSweepOpts {
    #[command(flatten)]
    pub(crate) common: SweepCommon,
    /// Number of devices.
    #[arg(long, default_value_t = 2)]
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
    #[arg(long, default_value_t = 64, value_parser = crate::parse_page)]
    page: u32,
}

fn point_opts(c: &SweepCommon, devices: usize, page: u32, out: PathBuf) -> RunOpts {
    RunOpts {
        devices,
        size: c.size,
        page,
        frames: c.frames,
        warmup: c.warmup,
        procedure: c.procedure,
        partition: c.partition,
        out,
        node: c.node.clone(),
        residency_png: false,
        gif_every: 0,
        cluster: Default::default(),
    }
}

/// Checks every point before the first runs, so a bad point fails in seconds, not after an
/// hour of good ones.
pub fn check_points(points: &[RunOpts]) -> Result<()> {
    for o in points {
        check_size(o.size)?;
        if o.frames == 0 {
            bail!("--frames must be at least 1");
        }
        PageSize::new(o.page)?;
        if o.page > o.size {
            bail!(
                "page size {} is larger than the {s}x{s} field (--size {s})",
                o.page,
                s = o.size
            );
        }
        o.partition
            .regions(o.size, o.size, o.devices as u32)
            .with_context(|| format!("--devices {}", o.devices))?;
        topology_args::load(&o.node.topology, o.devices)?;
    }
    Ok(())
}

/// Runs the points in order (checked by [`check_points`] first), writing each report.json;
/// returns the reports.
fn run_points(points: &[RunOpts], label: impl Fn(&RunOpts) -> String) -> Result<Vec<Report>> {
    let total: u64 = points
        .iter()
        .map(|o| crate::measure::simulated_frames(o) as u64)
        .sum();
    let bar = progress(total, "sweep");
    let mut reports = Vec::new();
    for o in points {
        bar.set_message(label(o));
        let topo = topology_args::load(&o.node.topology, o.devices)?;
        std::fs::create_dir_all(&o.out)
            .with_context(|| format!("cannot create output directory {}", o.out.display()))?;
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

/// A field of the report as report.json holds it, so that a CSV cell is the same text as the
/// report's value (serde_json's number formatting; a non-finite number is `null`).
fn json<T: Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A CSV column: its name and the report field it holds. The fields are read through the
/// report's own types, so renaming one breaks the build here instead of emptying a column.
type Column<R> = (&'static str, fn(&R) -> Value);

pub const COLUMNS: &[Column<Report>] = &[
    ("workload", |r| json(r.workload)),
    ("size", |r| json(&r.size)),
    ("devices", |r| json(&r.devices)),
    ("page_size", |r| json(&r.page_size)),
    ("procedure", |r| json(&r.procedure)),
    ("partition", |r| json(&r.partition)),
    ("topology", |r| json(&r.topology)),
    ("frames", |r| json(&r.frames)),
    ("warmup_frames", |r| json(&r.warmup_frames)),
    ("wall_seconds_measured", |r| json(&r.wall_seconds)),
    ("frames_per_second_measured", |r| {
        json(&r.frames_per_second_measured)
    }),
    ("frames_per_second_modeled", |r| {
        json(&r.frames_per_second_modeled)
    }),
    ("seconds_modeled", |r| json(&r.modeled.seconds)),
    ("device_seconds_measured_in_model", |r| {
        json(&r.modeled.device_seconds_measured)
    }),
    ("transfer_seconds_modeled", |r| {
        json(&r.modeled.transfer_seconds_modeled)
    }),
    ("manager_seconds_measured_in_model", |r| {
        json(&r.modeled.manager_seconds_measured)
    }),
    ("model", |r| json(&r.modeled.model)),
    ("simulated_frames", |r| json(&r.simulated_frames)),
    ("page_requests_per_frame", |r| {
        json(&r.page_requests_per_frame)
    }),
    ("host_to_device_pages_per_frame", |r| {
        json(&r.host_to_device_per_frame.pages)
    }),
    ("host_to_device_bytes_per_frame", |r| {
        json(&r.host_to_device_per_frame.bytes)
    }),
    ("device_to_host_pages_per_frame", |r| {
        json(&r.device_to_host_per_frame.pages)
    }),
    ("device_to_host_bytes_per_frame", |r| {
        json(&r.device_to_host_per_frame.bytes)
    }),
    ("device_to_device_pages_per_frame", |r| {
        json(&r.device_to_device_via_host_per_frame.pages)
    }),
    ("device_to_device_bytes_per_frame", |r| {
        json(&r.device_to_device_via_host_per_frame.bytes)
    }),
    ("texels_to_devices_per_frame", |r| {
        json(&r.texels_to_devices_per_frame)
    }),
    ("texels_to_host_per_frame", |r| {
        json(&r.texels_to_host_per_frame)
    }),
    ("memory_unique_bytes", |r| json(&r.memory.unique_bytes)),
    ("memory_shared_bytes", |r| json(&r.memory.shared_bytes)),
    ("memory_total_bytes", |r| json(&r.memory.total_bytes)),
    ("request_pass_seconds", |r| {
        json(&r.stage_seconds.request_pass)
    }),
    ("uniquify_seconds", |r| json(&r.stage_seconds.uniquify)),
    ("read_requests_seconds", |r| {
        json(&r.stage_seconds.read_requests)
    }),
    ("compute_seconds", |r| json(&r.stage_seconds.compute)),
    ("write_requests_seconds", |r| {
        json(&r.stage_seconds.write_requests)
    }),
    ("page_writes_seconds", |r| {
        json(&r.stage_seconds.page_writes)
    }),
    ("display_seconds", |r| json(&r.stage_seconds.display)),
    ("field_checksum", |r| json(&r.field_checksum)),
];

/// Per device columns, from each of the report's `per_device`.
pub const DEVICE_COLUMNS: &[Column<DeviceReport>] = &[
    ("device", |d| json(&d.device)),
    ("page_requests_per_frame", |d| {
        json(&d.page_requests_per_frame)
    }),
    ("read_requests_per_frame", |d| {
        json(&d.read_requests_per_frame)
    }),
    ("write_requests_per_frame", |d| {
        json(&d.write_requests_per_frame)
    }),
    ("host_to_device_pages_per_frame", |d| {
        json(&d.host_to_device_per_frame.pages)
    }),
    ("host_to_device_bytes_per_frame", |d| {
        json(&d.host_to_device_per_frame.bytes)
    }),
    ("device_to_host_pages_per_frame", |d| {
        json(&d.device_to_host_per_frame.pages)
    }),
    ("device_to_host_bytes_per_frame", |d| {
        json(&d.device_to_host_per_frame.bytes)
    }),
    ("device_to_device_pages_per_frame", |d| {
        json(&d.device_to_device_via_host_per_frame.pages)
    }),
    ("device_to_device_bytes_per_frame", |d| {
        json(&d.device_to_device_via_host_per_frame.bytes)
    }),
    ("unique_pages", |d| json(&d.memory.unique_pages)),
    ("unique_bytes", |d| json(&d.memory.unique_bytes)),
    ("shared_pages", |d| json(&d.memory.shared_pages)),
    ("shared_bytes", |d| json(&d.memory.shared_bytes)),
    ("compute_seconds", |d| json(&d.stage_seconds.compute)),
    ("read_requests_seconds", |d| {
        json(&d.stage_seconds.read_requests)
    }),
    ("write_requests_seconds", |d| {
        json(&d.stage_seconds.write_requests)
    }),
];

/// A CSV cell holding `v` as report.json writes it, quoted where it needs to be.
fn cell(v: &Value) -> String {
    match v {
        Value::String(s) if s.contains([',', '"', '\n']) => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

fn row<R>(columns: &[Column<R>], r: &R) -> String {
    columns
        .iter()
        .map(|c| cell(&(c.1)(r)))
        .collect::<Vec<_>>()
        .join(",")
}

fn header<R>(columns: &[Column<R>]) -> String {
    columns.iter().map(|c| c.0).collect::<Vec<_>>().join(",")
}

fn write_csvs(dir: &Path, reports: &[Report]) -> Result<Vec<PathBuf>> {
    let mut main = header(COLUMNS);
    main.push('\n');
    let mut dev = format!("page_size,devices,{}\n", header(DEVICE_COLUMNS));
    for r in reports {
        writeln!(main, "{}", row(COLUMNS, r))?;
        for d in &r.per_device {
            writeln!(
                dev,
                "{},{},{}",
                cell(&json(&r.page_size)),
                cell(&json(&r.devices)),
                row(DEVICE_COLUMNS, d)
            )?;
        }
    }
    let (a, b) = (dir.join("sweep.csv"), dir.join("per_device.csv"));
    for (path, text) in [(&a, main), (&b, dev)] {
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(vec![a, b])
}

/// The legend of the measured series: what ran it, e.g. `measured (wgpu: llvmpipe)`. Every
/// point of a sweep runs on the same node options, so the first report speaks for all.
fn measured_label(reports: &[Report]) -> String {
    match reports.first() {
        Some(r) => format!("measured ({})", r.ran_on()),
        None => "measured".to_string(),
    }
}

/// A log y axis when the values span more than two orders of magnitude.
fn wants_log(series: &[Series]) -> bool {
    let v: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|v| *v > 0.0 && v.is_finite())
        .collect();
    let (lo, hi) = v
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &x| (l.min(x), h.max(x)));
    !v.is_empty() && hi / lo > 100.0
}

fn series(
    name: &str,
    reports: &[Report],
    x: impl Fn(&Report) -> f64,
    y: impl Fn(&Report) -> f64,
) -> Series {
    Series {
        name: name.to_string(),
        points: reports.iter().map(|r| (x(r), y(r))).collect(),
        secondary: false,
    }
}

fn chart(
    dir: &Path,
    stem: &str,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: Vec<Series>,
) -> Result<PathBuf> {
    let path = dir.join(stem);
    plot::line_chart(
        &path,
        &LineChart {
            title,
            x_label,
            y_label,
            x_log2: true,
            y_log: wants_log(&series),
            series,
        },
    )?;
    Ok(path)
}

const MIB: f64 = 1024.0 * 1024.0;

/// The sum over devices of one per-device figure.
fn sum_devices(r: &Report, f: impl Fn(&DeviceReport) -> f64) -> f64 {
    r.per_device.iter().map(f).sum()
}

pub fn page_size(o: &PageSweepOpts) -> Result<()> {
    let c = &o.common;
    let points: Vec<RunOpts> = o
        .pages
        .0
        .iter()
        .map(|&p| point_opts(c, o.devices, p, c.out.join(format!("page-{p}"))))
        .collect();
    check_points(&points)?;
    std::fs::create_dir_all(&c.out)
        .with_context(|| format!("cannot create output directory {}", c.out.display()))?;
    let reports = run_points(&points, |o| format!("page {}", o.page))?;
    let Some(first) = reports.first() else {
        bail!("the sweep ran no point");
    };
    let dir = &c.out;
    let mut wrote = write_csvs(dir, &reports)?;
    let x = |r: &Report| r.page_size as f64;
    let setting = format!(
        "boiling {s}x{s}, {d} device(s), {part}",
        s = c.size,
        d = o.devices,
        part = cell(&json(&first.partition))
    );
    let mut mem: Vec<Series> = (0..o.devices)
        .map(|d| {
            series(&format!("device {d} unique"), &reports, x, |r| {
                r.per_device
                    .get(d)
                    .map_or(f64::NAN, |dev| dev.memory.unique_bytes as f64 / MIB)
            })
        })
        .collect();
    mem.push(series("shared (counted once)", &reports, x, |r| {
        r.memory.shared_bytes as f64 / MIB
    }));
    mem.push(series("total", &reports, x, |r| {
        r.memory.total_bytes as f64 / MIB
    }));
    wrote.push(chart(
        dir,
        "memory",
        &format!("Memory on devices at the end of the run (Fig. 8), {setting}"),
        "page width (texels)",
        "memory (MiB)",
        mem,
    )?);
    wrote.push(chart(
        dir,
        "requests",
        &format!("Page requests per frame (Fig. 9), {setting}"),
        "page width (texels)",
        "page requests per frame (all devices)",
        vec![
            series("all requests", &reports, x, |r| r.page_requests_per_frame),
            series("read", &reports, x, |r| {
                sum_devices(r, |d| d.read_requests_per_frame)
            }),
            series("write (exclusive)", &reports, x, |r| {
                sum_devices(r, |d| d.write_requests_per_frame)
            }),
        ],
    )?);
    wrote.push(chart(
        dir,
        "transfer",
        &format!("Texels transferred per frame (Fig. 10), {setting}"),
        "page width (texels)",
        "texels per frame (all devices)",
        vec![
            series("to devices (from home or a device)", &reports, x, |r| {
                r.texels_to_devices_per_frame
            }),
            series("written back to home", &reports, x, |r| {
                r.texels_to_host_per_frame
            }),
        ],
    )?);
    let topo = cell(&json(&first.topology));
    let mut modeled = series(&format!("modeled on {topo}"), &reports, x, |r| {
        r.frames_per_second_modeled
    });
    modeled.secondary = true;
    wrote.push(chart(
        dir,
        "speed",
        &format!("Frames per second (Fig. 11), {setting}"),
        "page width (texels)",
        "frames per second",
        vec![
            series(&measured_label(&reports), &reports, x, |r| {
                r.frames_per_second_measured
            }),
            modeled,
        ],
    )?);
    let bars: Vec<(String, StageTimes)> = reports
        .iter()
        .map(|r| (cell(&json(&r.page_size)), r.stage_seconds))
        .collect();
    let stem = dir.join("stages");
    plot::stage_bars(
        &stem,
        &format!("Share of time per stage (Table 3), {setting}"),
        "page width (texels)",
        &bars,
        true,
    )?;
    wrote.push(stem);
    summary(&reports, "page", x);
    for p in wrote {
        println!(
            "wrote {}{}",
            crate::output::shown(&p).display(),
            if p.extension().is_some() {
                ""
            } else {
                ".svg/.png"
            }
        );
    }
    Ok(())
}

pub fn devices(o: &DeviceSweepOpts) -> Result<()> {
    let c = &o.common;
    let points: Vec<RunOpts> = o
        .devices
        .0
        .iter()
        .map(|&d| point_opts(c, d as usize, o.page, c.out.join(format!("devices-{d}"))))
        .collect();
    check_points(&points)?;
    std::fs::create_dir_all(&c.out)
        .with_context(|| format!("cannot create output directory {}", c.out.display()))?;
    let reports = run_points(&points, |o| format!("{} device(s)", o.devices))?;
    let Some(first) = reports.first() else {
        bail!("the sweep ran no point");
    };
    let dir = &c.out;
    let mut wrote = write_csvs(dir, &reports)?;
    let x = |r: &Report| r.devices as f64;
    let setting = format!(
        "boiling {s}x{s}, page {p}, {part}",
        s = c.size,
        p = o.page,
        part = cell(&json(&first.partition))
    );
    let topo = cell(&json(&first.topology));
    let (n0, m0, q0) = (
        first.devices as f64,
        first.frames_per_second_measured,
        first.frames_per_second_modeled,
    );
    let mut modeled = series(&format!("modeled on {topo}"), &reports, x, |r| {
        r.frames_per_second_modeled / q0
    });
    modeled.secondary = true;
    let mut ideal = series("ideal (linear)", &reports, x, |r| r.devices as f64 / n0);
    ideal.secondary = true;
    wrote.push(chart(
        dir,
        "speedup",
        &format!("Speed-up over {n0} device(s), {setting}"),
        "devices",
        "speed-up (frames per second ratio)",
        vec![
            series(&measured_label(&reports), &reports, x, |r| {
                r.frames_per_second_measured / m0
            }),
            modeled,
            ideal,
        ],
    )?);
    wrote.push(chart(
        dir,
        "traffic",
        &format!("Traffic per frame, {setting}"),
        "devices",
        "MiB per frame (all devices)",
        vec![
            series("host to device", &reports, x, |r| {
                r.host_to_device_per_frame.bytes / MIB
            }),
            series("device to host", &reports, x, |r| {
                r.device_to_host_per_frame.bytes / MIB
            }),
            series("device to device", &reports, x, |r| {
                r.device_to_device_via_host_per_frame.bytes / MIB
            }),
        ],
    )?);
    wrote.push(chart(
        dir,
        "requests",
        &format!("Page requests per frame, {setting}"),
        "devices",
        "page requests per frame (all devices)",
        vec![series("all requests", &reports, x, |r| {
            r.page_requests_per_frame
        })],
    )?);
    let bars: Vec<(String, StageTimes)> = reports
        .iter()
        .map(|r| (cell(&json(&r.devices)), r.stage_seconds))
        .collect();
    let stem = dir.join("stages");
    plot::stage_bars(
        &stem,
        &format!("Share of time per stage, {setting}"),
        "devices",
        &bars,
        true,
    )?;
    wrote.push(stem);
    summary(&reports, "devices", x);
    for p in wrote {
        println!(
            "wrote {}{}",
            crate::output::shown(&p).display(),
            if p.extension().is_some() {
                ""
            } else {
                ".svg/.png"
            }
        );
    }
    Ok(())
}

fn summary(reports: &[Report], what: &str, key: impl Fn(&Report) -> f64) {
    println!(
        "modeled on {}; wall time of the measured frames is measured",
        reports
            .first()
            .map_or(String::new(), |r| cell(&json(&r.topology)))
    );
    println!(
        "{what:>7} {:>12} {:>12} {:>12} {:>14} {:>10} {:>10} {:>10}",
        "fps meas.",
        "fps modeled",
        "req/frame",
        "texels→dev/f",
        "uniq MiB",
        "shared MiB",
        "total MiB"
    );
    for r in reports {
        println!(
            "{:>7} {:>12.3} {:>12.3} {:>12.1} {:>14.0} {:>10.2} {:>10.2} {:>10.2}",
            key(r),
            r.frames_per_second_measured,
            r.frames_per_second_modeled,
            r.page_requests_per_frame,
            r.texels_to_devices_per_frame,
            r.memory.unique_bytes as f64 / MIB,
            r.memory.shared_bytes as f64 / MIB,
            r.memory.total_bytes as f64 / MIB,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_cells_quote_what_needs_it() {
        assert_eq!(cell(&Value::from("a,b")), "\"a,b\"");
        assert_eq!(cell(&Value::from("say \"hi\"")), "\"say \"\"hi\"\"\"");
        assert_eq!(cell(&Value::from(2.5)), "2.5");
        assert_eq!(cell(&json(&f64::NAN)), "null");
    }
}
