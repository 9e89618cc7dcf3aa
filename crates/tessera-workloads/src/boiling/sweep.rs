//! A boiling sweep's files: `sweep.csv` and `per_device.csv`, whose cells are read out of the
//! reports field by typed field (so a CSV row and the report.json of the same run cannot
//! disagree, and a renamed field is a compile error here), and the paper's figures as plots.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tessera_runtime::StageTimes;

use super::report::{DeviceReport, Report};
use crate::plot::{line_chart, stage_bars, LineChart, PlotError, Series};

/// A field of the report as report.json holds it, so that a CSV cell is the same text as the
/// report's value (serde_json's number formatting; a non-finite number is `null`).
pub fn json<T: Serialize + ?Sized>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// A CSV column: its name and the report field it holds. The fields are read through the
/// report's own types, so renaming one breaks the build here instead of emptying a column.
type Column<R> = (&'static str, fn(&R) -> Value);

pub const COLUMNS: &[Column<Report>] = &[
    ("workload", |r| json(r.workload)),
    ("backend", |r| json(r.backend)),
    ("adapter", |r| json(&r.adapter)),
    ("size", |r| json(&r.size)),
    ("devices", |r| json(&r.devices)),
    ("page_size", |r| json(&r.page_size)),
    ("procedure", |r| json(&r.procedure)),
    ("split", |r| json(&r.partition)),
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
        json(&r.device_to_device_per_frame.pages)
    }),
    ("device_to_device_bytes_per_frame", |r| {
        json(&r.device_to_device_per_frame.bytes)
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
    ("checksum", |r| json(&r.field_checksum)),
    // Under a budget, what it cost: appended, so the columns before keep their places.
    ("budget_bytes", |r| json(&r.budget_bytes)),
    ("policy", |r| json(&r.policy)),
    ("evictions", |r| json(&r.eviction.evictions)),
    ("eviction_write_backs", |r| json(&r.eviction.write_backs)),
    ("refaults", |r| json(&r.eviction.refaults)),
    ("write_backs_coherence_per_frame", |r| {
        json(&r.write_backs_per_frame.coherence)
    }),
    ("eviction_write_backs_per_frame", |r| {
        json(&r.write_backs_per_frame.eviction)
    }),
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
        json(&d.device_to_device_per_frame.pages)
    }),
    ("device_to_device_bytes_per_frame", |d| {
        json(&d.device_to_device_per_frame.bytes)
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
    ("evictions", |d| json(&d.eviction.evictions)),
    ("eviction_write_backs", |d| json(&d.eviction.write_backs)),
    ("refaults", |d| json(&d.eviction.refaults)),
];

/// A CSV cell holding `v` as report.json writes it, quoted where it needs to be.
pub fn cell(v: &Value) -> String {
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

/// The text of `sweep.csv` (a row per report) and `per_device.csv` (a row per device of each).
pub fn csvs(reports: &[Report]) -> (String, String) {
    let mut main = header(COLUMNS);
    main.push('\n');
    let mut dev = format!("page_size,devices,{}\n", header(DEVICE_COLUMNS));
    for r in reports {
        main.push_str(&row(COLUMNS, r));
        main.push('\n');
        for d in &r.per_device {
            dev.push_str(&format!(
                "{},{},{}\n",
                cell(&json(&r.page_size)),
                cell(&json(&r.devices)),
                row(DEVICE_COLUMNS, d)
            ));
        }
    }
    (main, dev)
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
) -> Result<PathBuf, PlotError> {
    let path = dir.join(stem);
    line_chart(
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

pub const MIB: f64 = 1024.0 * 1024.0;

/// The sum over devices of one per-device figure.
pub fn sum_devices(r: &Report, f: impl Fn(&DeviceReport) -> f64) -> f64 {
    r.per_device.iter().map(f).sum()
}

/// Figures 8–11 and Table 3 of the paper for a page-size sweep of `size`² on `devices`
/// devices: memory, requests, transfers, speed and the stage breakdown. Returns the stems
/// written (each as `.svg` and `.png`).
pub fn page_size_figures(
    dir: &Path,
    reports: &[Report],
    size: u32,
    devices: usize,
) -> Result<Vec<PathBuf>, PlotError> {
    let Some(first) = reports.first() else {
        return Ok(Vec::new());
    };
    let mut wrote = Vec::new();
    let x = |r: &Report| r.page_size as f64;
    let setting = format!(
        "boiling {s}x{s}, {d} device(s), {part}",
        s = size,
        d = devices,
        part = cell(&json(&first.partition))
    );
    let mut mem: Vec<Series> = (0..devices)
        .map(|d| {
            series(&format!("device {d} unique"), reports, x, |r| {
                r.per_device
                    .get(d)
                    .map_or(f64::NAN, |dev| dev.memory.unique_bytes as f64 / MIB)
            })
        })
        .collect();
    mem.push(series("shared (counted once)", reports, x, |r| {
        r.memory.shared_bytes as f64 / MIB
    }));
    mem.push(series("total", reports, x, |r| {
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
            series("all requests", reports, x, |r| r.page_requests_per_frame),
            series("read", reports, x, |r| {
                sum_devices(r, |d| d.read_requests_per_frame)
            }),
            series("write (exclusive)", reports, x, |r| {
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
            series("to devices (from home or a device)", reports, x, |r| {
                r.texels_to_devices_per_frame
            }),
            series("written back to home", reports, x, |r| {
                r.texels_to_host_per_frame
            }),
        ],
    )?);
    let topo = cell(&json(&first.topology));
    let mut modeled = series(&format!("modeled on {topo}"), reports, x, |r| {
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
            series(&measured_label(reports), reports, x, |r| {
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
    stage_bars(
        &stem,
        &format!("Share of time per stage (Table 3), {setting}"),
        "page width (texels)",
        &bars,
        true,
    )?;
    wrote.push(stem);
    Ok(wrote)
}

/// Speed-up, traffic, requests and the stage breakdown of a device-count sweep of `size`² at
/// page `page`. Returns the stems written (each as `.svg` and `.png`).
pub fn device_figures(
    dir: &Path,
    reports: &[Report],
    size: u32,
    page: u32,
) -> Result<Vec<PathBuf>, PlotError> {
    let Some(first) = reports.first() else {
        return Ok(Vec::new());
    };
    let mut wrote = Vec::new();
    let x = |r: &Report| r.devices as f64;
    let setting = format!(
        "boiling {s}x{s}, page {p}, {part}",
        s = size,
        p = page,
        part = cell(&json(&first.partition))
    );
    let topo = cell(&json(&first.topology));
    let (n0, m0, q0) = (
        first.devices as f64,
        first.frames_per_second_measured,
        first.frames_per_second_modeled,
    );
    let mut modeled = series(&format!("modeled on {topo}"), reports, x, |r| {
        r.frames_per_second_modeled / q0
    });
    modeled.secondary = true;
    let mut ideal = series("ideal (linear)", reports, x, |r| r.devices as f64 / n0);
    ideal.secondary = true;
    wrote.push(chart(
        dir,
        "speedup",
        &format!("Speed-up over {n0} device(s), {setting}"),
        "devices",
        "speed-up (frames per second ratio)",
        vec![
            series(&measured_label(reports), reports, x, |r| {
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
            series("host to device", reports, x, |r| {
                r.host_to_device_per_frame.bytes / MIB
            }),
            series("device to host", reports, x, |r| {
                r.device_to_host_per_frame.bytes / MIB
            }),
            series("device to device", reports, x, |r| {
                r.device_to_device_per_frame.bytes / MIB
            }),
        ],
    )?);
    wrote.push(chart(
        dir,
        "requests",
        &format!("Page requests per frame, {setting}"),
        "devices",
        "page requests per frame (all devices)",
        vec![series("all requests", reports, x, |r| {
            r.page_requests_per_frame
        })],
    )?);
    let bars: Vec<(String, StageTimes)> = reports
        .iter()
        .map(|r| (cell(&json(&r.devices)), r.stage_seconds))
        .collect();
    let stem = dir.join("stages");
    stage_bars(
        &stem,
        &format!("Share of time per stage, {setting}"),
        "devices",
        &bars,
        true,
    )?;
    wrote.push(stem);
    Ok(wrote)
}

/// The sweep's table as printed: a row per point keyed by `key` (named `what`).
pub fn summary(reports: &[Report], what: &str, key: impl Fn(&Report) -> f64) -> String {
    let mut s = String::new();
    s += &format!(
        "modeled on {}; wall time of the measured frames is measured",
        reports
            .first()
            .map_or(String::new(), |r| cell(&json(&r.topology)))
    );
    s.push('\n');
    s += &format!(
        "{what:>7} {:>12} {:>12} {:>12} {:>14} {:>10} {:>10} {:>10}",
        "fps meas.",
        "fps modeled",
        "req/frame",
        "texels→dev/f",
        "uniq MiB",
        "shared MiB",
        "total MiB"
    );
    s.push('\n');
    for r in reports {
        s += &format!(
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
        s.push('\n');
    }
    s
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
