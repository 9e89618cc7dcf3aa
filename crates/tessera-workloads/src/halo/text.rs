//! The halo workloads' reports as text: what `run stencil|convolution` prints, the sweep's
//! table and CSV, and its speed-up plot's series.

use std::fmt::Write as _;
use std::path::Path;

use tessera_runtime::modeled::Model;

use super::{HaloReport, Point, Verification};
use crate::plot::{line_chart, LineChart, PlotError, Series};

impl Verification {
    /// The line `--verify` prints.
    pub fn describe(&self) -> String {
        if self.cells_differing == 0 {
            "verified: equals the plain single-device reference bit for bit".into()
        } else if self.passed {
            format!(
                "verified: within {:.1e} × {:.3} of the plain single-device reference ({} cells differ, by at most {:.3e}): this GPU's compiler fuses multiply-adds, so bit for bit with the CPU cannot hold",
                self.tolerance.unwrap_or(0.0),
                self.scale,
                self.cells_differing,
                self.max_abs_diff
            )
        } else {
            format!(
                "verified: DIFFERS from the plain single-device reference ({} cells, by at most {:.3e}{})",
                self.cells_differing,
                self.max_abs_diff,
                match self.tolerance {
                    Some(t) => format!(
                        ", beyond the fused multiply-add tolerance {:.3e}",
                        t * self.scale
                    ),
                    None => String::new(),
                }
            )
        }
    }
}

impl HaloReport {
    /// The report as `tessera run stencil|convolution` prints it, one line each.
    pub fn summary(&self) -> String {
        let r = self;
        let mut s = String::new();
        let model = match r.model {
            Model::Isolated => "isolated-device model",
            Model::Concurrent => "concurrent model",
        };
        let mut line = |l: String| {
            s.push_str(&l);
            s.push('\n');
        };
        line(format!(
            "{} [{}{}], topology {}, {} step(s) after {} warm-up",
            r.settings,
            // `cpu (N threads)`, or `wgpu, <adapter>`.
            match r.backend_kind {
                "wgpu" => "wgpu, ",
                _ => "",
            },
            r.adapter,
            r.topology,
            r.steps,
            r.warmup
        ));
        line(format!(
            "remote reads (GPU-SM Table 1's % remote): {:.2}%",
            100.0 * r.remote_read_fraction
        ));
        line(format!(
            "modeled ({model}): {:.3} ms/step = work {:.3} + busiest link {:.3} + manager {:.3}",
            r.modeled_ms_per_frame,
            r.modeled_work_ms_per_frame,
            r.modeled_link_ms_per_frame,
            r.modeled_manager_ms_per_frame
        ));
        line(format!(
            "measured wall time, devices together on this machine: {:.3} ms/step (not a multi-GPU figure)",
            r.wall_ms_per_frame_measured
        ));
        line(format!(
            "page requests {:.1}/step, moved {:.3} MiB/step",
            r.page_requests_per_frame, r.moved_mib_per_frame
        ));
        let e = &r.eviction;
        if e.evictions > 0.0 {
            line(format!(
                "budget {}/device, {} (thrashing {}): {:.1} evictions/step, {:.1} written home, {:.1} refaults, {:.1} thrashing pages",
                crate::budget_text(r.budget_bytes),
                r.policy.name(),
                r.thrashing,
                e.evictions,
                e.write_backs,
                e.refaults,
                e.thrashing_pages
            ));
        }
        if !r.remote_counted {
            line(format!(
                "remote accesses: not counted on this backend ({}): the modeled time leaves them out",
                r.backend_kind
            ));
        }
        if !r.remote.is_empty() {
            line(format!(
                "remote accesses: {:.3} MiB/step, {:.0}% in batches; they add {:.3} ms/step to the modeled work",
                r.remote_mib_per_frame.unwrap_or_default(),
                100.0 * r.remote_batch_fraction.unwrap_or_default(),
                r.modeled_remote_ms_per_frame.unwrap_or_default()
            ));
            for r in &r.remote {
                line(format!(
                    "  remote {}->{}: read {:.3} write {:.3} MiB/step, batch {:.3} spread {:.3} MiB/step, {:.0} batches/step",
                    r.from,
                    r.to,
                    r.read_mib_per_frame,
                    r.write_mib_per_frame,
                    r.batch_mib_per_frame,
                    r.spread_mib_per_frame,
                    r.batches_per_frame
                ));
            }
        }
        for l in r.links.iter().filter(|l| l.pages_per_frame > 0.0) {
            line(format!(
                "  link {:<18} {:>10.1} pages/step {:>10.3} MiB/step {:>9.3} ms/step busy (modeled)",
                l.link, l.pages_per_frame, l.mib_per_frame, l.busy_ms_per_frame
            ));
        }
        for d in &r.per_device {
            line(format!(
                "  device {}: work {:.3} ms/step, manager serving it {:.3} ms/step, {} launches, {} relaunched",
                d.device, d.work_ms_per_frame, d.manager_ms_per_frame, d.launches, d.relaunched_invocations
            ));
        }
        let host: Vec<_> = r.per_device.iter().map(|d| (d.device, d.host)).collect();
        line(
            crate::host_table("host:", &host, None)
                .trim_end()
                .to_string(),
        );
        line(format!("checksum {}", r.checksum));
        if let Some(v) = &r.verification {
            line(v.describe());
        }
        s
    }
}

/// A figure for a CSV cell with `places` decimals; empty where it was not counted.
fn unknown(v: Option<f64>, places: usize) -> String {
    v.map(|v| format!("{v:.places$}")).unwrap_or_default()
}

/// A sweep's table as printed and its CSV; `size_name` names the swept size (halo or filter).
pub fn sweep_table(points: &[Point], size_name: &str) -> (String, String) {
    let mut csv = String::from(
        "workload,backend,adapter,size,split,access,procedure,halo,filter_size,devices,page_size,frames,warmup_frames,modeled_ms_per_frame,modeled_work_ms_per_frame,modeled_link_ms_per_frame,modeled_manager_ms_per_frame,wall_ms_per_frame_measured,speedup,ideal,gap_vs_explicit,remote_read_fraction,page_requests_per_frame,moved_mib_per_frame,remote_mib_per_frame,remote_batch_fraction,modeled_remote_ms_per_frame,checksum\n",
    );
    let mut text = format!(
        "{:>8} {:>5} {:>7} {:>11} {:>9} {:>8} {:>8} {:>8} {:>9} {:>6} {:>9} {:>8} {:>9}\n",
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
    for p in points {
        let r = &p.r;
        let shown = r.filter.unwrap_or(r.halo);
        let gap = p
            .gap_vs_explicit
            .map(|g| format!("{:+.1}%", 100.0 * g))
            .unwrap_or_else(|| "-".into());
        writeln!(
            text,
            "{:>8} {:>5} {:>7} {:>11.3} {:>9.3} {:>8.3} {:>8.3} {:>8.2} {:>9} {:>6.1} {:>8.2}% {:>8.3} {:>9.1}",
            r.access,
            shown,
            r.devices,
            r.modeled_ms_per_frame,
            r.modeled_work_ms_per_frame,
            r.modeled_link_ms_per_frame,
            r.modeled_manager_ms_per_frame,
            p.speedup,
            gap,
            p.ideal,
            100.0 * r.remote_read_fraction,
            r.moved_mib_per_frame,
            r.wall_ms_per_frame_measured
        )
        .unwrap();
        writeln!(
            csv,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{:.4},{:.1},{},{:.6},{:.2},{:.6},{},{},{},{}",
            r.workload,
            r.backend_kind,
            crate::boiling::sweep::cell(&serde_json::Value::String(r.adapter.clone())),
            r.size,
            r.split,
            r.access,
            r.procedure,
            r.halo,
            r.filter.map(|f| f.to_string()).unwrap_or_default(),
            r.devices,
            r.page,
            r.steps,
            r.warmup,
            r.modeled_ms_per_frame,
            r.modeled_work_ms_per_frame,
            r.modeled_link_ms_per_frame,
            r.modeled_manager_ms_per_frame,
            r.wall_ms_per_frame_measured,
            p.speedup,
            p.ideal,
            p.gap_vs_explicit.map(|g| format!("{g:.4}")).unwrap_or_default(),
            r.remote_read_fraction,
            r.page_requests_per_frame,
            r.moved_mib_per_frame,
            unknown(r.remote_mib_per_frame, 6),
            unknown(r.remote_batch_fraction, 4),
            unknown(r.modeled_remote_ms_per_frame, 6),
            r.checksum
        )
        .unwrap();
    }
    text.push_str(&format!("(speedup: modeled, against the same access and {size_name} at the first device count; vs expl.: modeled time over the explicit version's at the same point; wall ms: measured with the devices sharing this machine)"));
    (text, csv)
}

/// Draws the sweep's speed-up plot at `stem` (.svg, .png): a series per access mode and swept
/// size, beside the ideal. `points` is not empty.
pub fn speedup_chart(points: &[Point], size_name: &str, stem: &Path) -> Result<(), PlotError> {
    let mut series = Vec::new();
    let mut keys: Vec<(&str, u32)> = Vec::new();
    for p in points {
        let k = (p.r.access, p.r.filter.unwrap_or(p.r.halo));
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    for (access, size) in &keys {
        series.push(Series {
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
    series.push(Series {
        name: "ideal".into(),
        points: ideal,
        secondary: true,
    });
    let first = &points[0].r;
    let title = format!(
        "{} {}: modeled speed-up ({}, split {}, page {})",
        first.workload, first.size, first.topology, first.split, first.page
    );
    line_chart(
        stem,
        &LineChart {
            title: &title,
            x_label: "devices",
            y_label: "modeled speed-up",
            x_log2: true,
            y_log: false,
            series,
        },
    )
}
