//! Workloads that run on tessera: each is a set of kernels plus an unpaged reference.

/// `println!` into a string: the reports' text is made here and printed by the CLI.
macro_rules! ln {
    ($s:ident, $($t:tt)*) => {{
        $s.push_str(&format!($($t)*));
        $s.push('\n');
    }};
}

pub mod access;
pub mod boiling;
pub mod convolution;
pub mod decomp;
pub mod halo;
pub mod oversub;
pub mod page_moves;
pub mod plot;
pub mod quake;
pub mod raytrace;
pub mod stencil;
pub mod vr;

/// A device's budget as the printouts give it: bytes under a KiB, KiB under a MiB, MiB above.
/// One unit and precision for every workload: a budget of a few pages printed as "0.000 MiB"
/// in one workload's summary and "0 KiB" in another's.
pub fn budget_text(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    match bytes {
        b if b < KIB => format!("{b} bytes"),
        b if b < MIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.2} MiB", b as f64 / MIB as f64),
    }
}

/// Seconds per measured frame in a `workload`'s report.json, without what a first frame adds
/// (a GPU compiles its kernels on their first launch): the workloads run with a warm-up report
/// their measured frames only; the others report each frame, and the first is dropped. `None`
/// for an unknown workload or a report without the times it should hold.
pub fn seconds_per_frame(workload: &str, r: &serde_json::Value) -> Option<f64> {
    frame_statistic(workload, r, false)
}

/// Device time per measured frame in a `workload`'s report.json (its kernels' time from
/// timestamp queries, summed over the devices: on one GPU, the time it was busy with them),
/// over the same frames and with the same statistic as [`seconds_per_frame`]. `None` where
/// the report has none (the CPU backend, an adapter without timestamp queries).
pub fn gpu_seconds_per_frame(workload: &str, r: &serde_json::Value) -> Option<f64> {
    frame_statistic(workload, r, true)
}

/// [`seconds_per_frame`] (wall time) or, with `gpu`, [`gpu_seconds_per_frame`]: each report
/// keeps the two side by side under its own keys.
fn frame_statistic(workload: &str, r: &serde_json::Value, gpu: bool) -> Option<f64> {
    use serde_json::Value;
    let key = |wall: &'static str, device: &'static str| if gpu { device } else { wall };
    let each = |list: &Value, field: Option<&str>| -> Option<Vec<f64>> {
        let pick = |v: &Value| field.map_or(v, |f| &v[f]).as_f64();
        list.as_array()?.iter().map(pick).collect()
    };
    let after_first = |t: Vec<f64>| oversub::median(if t.len() > 1 { t[1..].to_vec() } else { t });
    Some(match workload {
        "boiling" => {
            let total = match gpu {
                true => r["gpu_stage_seconds"]
                    .as_object()?
                    .values()
                    .filter_map(Value::as_f64)
                    .sum(),
                false => r["wall_seconds"].as_f64()?,
            };
            total / r["frames"].as_f64()?
        }
        "quake" => after_first(each(&r[key("frame_seconds", "frame_gpu_seconds")], None)?),
        "raytrace" => after_first(each(
            &r["by_frame"],
            Some(key("wall_seconds", "gpu_seconds")),
        )?),
        "stencil" | "convolution" => {
            r[key("wall_ms_per_frame_measured", "gpu_ms_per_frame_measured")].as_f64()? * 1e-3
        }
        "vr" => oversub::median(each(&r[key("frame_seconds", "frame_gpu_seconds")], None)?),
        _ => return None,
    })
}

/// One workload's row of `tessera bench gpu`: measured seconds per frame on each backend, and
/// the host's work per device and frame of the GPU run.
pub struct GpuVsCpu {
    pub workload: String,
    pub cpu: f64,
    pub gpu: f64,
    /// Of `gpu`, the device time of the kernels ([`gpu_seconds_per_frame`]), where measured.
    pub gpu_busy: Option<f64>,
    pub gpu_host: tessera_runtime::HostReport,
}

/// A report's `per_device[].host`, the mean over its devices (zeros where it has none).
pub fn mean_host(r: &serde_json::Value) -> tessera_runtime::HostReport {
    let devices = r["per_device"].as_array().map_or(&[][..], |v| v.as_slice());
    let n = devices.len().max(1) as f64;
    let mean = |k: &str| {
        devices
            .iter()
            .filter_map(|d| d["host"][k].as_f64())
            .sum::<f64>()
            / n
    };
    tessera_runtime::HostReport {
        submissions_per_frame: mean("submissions_per_frame"),
        blocking_waits_per_frame: mean("blocking_waits_per_frame"),
        device_waits_per_frame: mean("device_waits_per_frame"),
        bytes_read_back_per_frame: mean("bytes_read_back_per_frame"),
        manager_messages_per_frame: mean("manager_messages_per_frame"),
    }
}

/// `tessera bench gpu`'s table under its header: each workload's times and ratio, the GPU
/// runs' host work, and a `gpu_vs_cpu_<workload>=` line each.
pub fn gpu_vs_cpu_table(rows: &[GpuVsCpu]) -> String {
    let mut s = String::new();
    ln!(
        s,
        "workload        cpu ms/frame   gpu ms/frame   cpu/gpu   gpu busy ms/frame   busy"
    );
    for r in rows {
        let (busy, share) = r.gpu_busy.map_or(("-".to_string(), "-".to_string()), |b| {
            (
                format!("{:.2}", b * 1e3),
                format!("{:.0}%", 100.0 * b / r.gpu),
            )
        });
        ln!(
            s,
            "{:<14} {:>13.2} {:>14.2} {:>9.2} {:>19} {:>6}",
            r.workload,
            r.cpu * 1e3,
            r.gpu * 1e3,
            r.cpu / r.gpu,
            busy,
            share
        );
    }
    ln!(
        s,
        "(gpu busy: the kernels' device time by timestamp queries, summed over the devices; the rest of a GPU frame is the host's work and its waits)"
    );
    ln!(
        s,
        "the host's work per device and frame on the GPU (mean over the devices; quake's and raytrace's over every frame run, the dropped first one too, as their reports count it):"
    );
    let host: Vec<_> = rows.iter().map(|r| (&r.workload, r.gpu_host)).collect();
    s += &host_table("workload", &host, None);
    for r in rows {
        ln!(s, "gpu_vs_cpu_{}={:.3}", r.workload, r.cpu / r.gpu);
    }
    for r in rows {
        if let Some(b) = r.gpu_busy {
            ln!(s, "gpu_busy_share_{}={:.3}", r.workload, b / r.gpu);
        }
    }
    s
}

/// The version of the report schema (docs/report.schema.json): the core every workload's
/// report.json shares, before its own section.
pub const SCHEMA_VERSION: u32 = 3;

/// The schema's core (docs/report.schema.json) of a report whose checksum is an image's: the
/// ray tracer's, the game trace's and vr's reports flatten it before their own sections.
#[derive(serde::Serialize)]
pub struct ImageCore<S: serde::Serialize> {
    pub schema_version: u32,
    pub workload: &'static str,
    /// `cpu` or `wgpu`.
    pub backend: &'static str,
    /// The devices as the backend describes them (the wgpu adapter's name on wgpu).
    pub adapter: String,
    pub devices: usize,
    pub page_size: u32,
    pub frames: usize,
    pub warmup_frames: u32,
    pub procedure: tessera_runtime::Procedure,
    /// How the work is split across devices.
    pub split: S,
    /// FNV-1a of the last frame's image (`checksum_kind`: "image").
    pub checksum: String,
    pub checksum_kind: &'static str,
    /// `Some(true)` once `--verify` found the image equal to the unpaged reference's (a
    /// difference fails the run, which then writes no report); `None` where it was not asked.
    pub verified: Option<bool>,
    /// Every time at the top level is measured.
    pub time_kind: &'static str,
}

/// How a run was made, as its report's core says.
pub struct Made<S> {
    pub workload: &'static str,
    pub backend: &'static str,
    pub adapter: String,
    pub devices: usize,
    pub page_size: u32,
    pub warmup_frames: u32,
    pub procedure: tessera_runtime::Procedure,
    pub split: S,
}

impl<S: serde::Serialize> ImageCore<S> {
    /// The core of a run made as `m`, `frames` measured, the last one's image `image`.
    pub fn new(m: Made<S>, frames: usize, image: &[u8]) -> Self {
        use boiling::reference::{checksum_hex, fnv1a};
        ImageCore {
            schema_version: SCHEMA_VERSION,
            workload: m.workload,
            backend: m.backend,
            adapter: m.adapter,
            devices: m.devices,
            page_size: m.page_size,
            frames,
            warmup_frames: m.warmup_frames,
            procedure: m.procedure,
            split: m.split,
            checksum: checksum_hex(fnv1a(image.iter().copied())),
            checksum_kind: "image",
            verified: None,
            time_kind: "measured",
        }
    }
}

/// How an image differs from its unpaged reference's (`--verify`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageDiff {
    #[error("--verify: the image has {got} bytes, the unpaged reference's {want}")]
    Size { got: usize, want: usize },
    #[error("--verify: {differing} of {pixels} pixels differ from the unpaged reference")]
    Pixels { differing: usize, pixels: usize },
}

/// An RGBA8 image against the unpaged reference's, pixel for pixel.
pub fn compare_images(want: &[u8], got: &[u8]) -> Result<(), ImageDiff> {
    if want.len() != got.len() {
        return Err(ImageDiff::Size {
            got: got.len(),
            want: want.len(),
        });
    }
    let differing = want
        .chunks(4)
        .zip(got.chunks(4))
        .filter(|(a, b)| a != b)
        .count();
    match differing {
        0 => Ok(()),
        _ => Err(ImageDiff::Pixels {
            differing,
            pixels: want.len() / 4,
        }),
    }
}

/// The `host:` rows every run prints: per device, the host's work per frame (a step is a
/// frame), with one more column where a workload has one to add (`extra`: its heading and a
/// value per row). `first` heads the first column (`host:`, or what its labels name: device
/// counts, workloads).
pub fn host_table<L: std::fmt::Display>(
    first: &str,
    rows: &[(L, tessera_runtime::HostReport)],
    extra: Option<(&str, Vec<String>)>,
) -> String {
    let mut s = String::new();
    let (extra_head, extra_cells) = extra.map_or(("", Vec::new()), |(h, c)| (h, c));
    let labels: Vec<String> = rows.iter().map(|(l, _)| l.to_string()).collect();
    let w = labels
        .iter()
        .map(String::len)
        .chain([first.len(), 7])
        .max()
        .unwrap_or(7);
    ln!(
        s,
        "{:>w$} {:>10} {:>10} {:>10} {:>13} {:>10} {:>10}",
        first,
        "submit/f",
        "waits/f",
        "gpu wait/f",
        "read-back B/f",
        "msgs/f",
        extra_head
    );
    for (i, ((_, h), label)) in rows.iter().zip(&labels).enumerate() {
        ln!(
            s,
            "{:>w$} {:>10.1} {:>10.1} {:>10.1} {:>13.0} {:>10.1} {:>10}",
            label,
            h.submissions_per_frame,
            h.blocking_waits_per_frame,
            h.device_waits_per_frame,
            h.bytes_read_back_per_frame,
            h.manager_messages_per_frame,
            extra_cells.get(i).map_or("", |c| c.as_str())
        );
    }
    // A table without its extra column ends each line in spaces.
    s.lines().map(|l| l.trim_end().to_string() + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::budget_text;

    #[test]
    fn a_budget_prints_in_the_unit_that_shows_it() {
        // `--budget-mib 0.00025` is 262 bytes: it had printed as "0.000 MiB" and "0 KiB".
        assert_eq!(budget_text(262), "262 bytes");
        assert_eq!(budget_text(1023), "1023 bytes");
        assert_eq!(budget_text(1024), "1.0 KiB");
        assert_eq!(budget_text(6291), "6.1 KiB");
        assert_eq!(budget_text((1 << 20) - 1), "1024.0 KiB");
        assert_eq!(budget_text(1 << 20), "1.00 MiB");
        assert_eq!(budget_text(3 << 19), "1.50 MiB");
    }
}
