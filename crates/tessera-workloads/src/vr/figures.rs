//! OO-VR's Figures 15–18 out of a sweep's measured runs: every figure is the runs' frames
//! modeled under a link model ([`summarise`]), set against the baseline on 4 GPMs or the
//! single GPU; then their CSVs and plots.

use std::fmt::Write as _;
use std::path::Path;

use tessera_model::{Endpoint, Topology};

use super::render::{FrameMeasure, LinkModel};
use super::run::{summarise, Summary};
use super::scheme::NAMES;
use super::VrError;
use crate::plot::{line_chart, LineChart, PlotError, Series};

/// The bandwidths of Fig. 17, GB/s.
pub const BANDWIDTHS: [f64; 4] = [32.0, 64.0, 128.0, 256.0];
/// The GPM counts of Fig. 18.
pub const GPM_COUNTS: [usize; 4] = [1, 2, 4, 8];
/// The schemes Figs 17–18 follow (the paper's three).
pub const FOLLOWED: [&str; 3] = ["baseline", "object", "oo-vr"];
/// The link bandwidth of Figs 15, 16 and 18, GB/s (OO-VR's).
pub const GBPS: f64 = 64.0;

/// The link model of `gpms` GPMs at `gbps`: the mcm preset's per-move latency and ROP rate.
pub fn link_model(gpms: usize, gbps: f64) -> Result<LinkModel, VrError> {
    let preset = if gpms <= 4 { "mcm-4" } else { "mcm-8" };
    let topo = Topology::preset(preset, gpms.max(2)).map_err(|e| VrError::Config(e.to_string()))?;
    let latency = topo
        .links()
        .iter()
        .find(|l| l.from == Endpoint::Device(0) && l.to == Endpoint::Device(1))
        .map_or(0.0, |l| l.latency);
    let gpm = topo
        .gpm()
        .ok_or_else(|| VrError::Config("the mcm presets model GPU modules".into()))?;
    Ok(LinkModel {
        bandwidth: gbps * 1e9,
        latency,
        rop_pixels_per_second: gpm.rop_pixels_per_second,
    })
}

/// One scheme on 4 GPMs at [`GBPS`] (Figs 15 and 16).
pub struct SchemeRow {
    pub scheme: &'static str,
    pub summary: Summary,
    /// Baseline latency over this one's.
    pub speedup: f64,
    /// Baseline latency over this one's frame interval.
    pub throughput: f64,
    /// Inter-GPM traffic over the baseline's.
    pub traffic: f64,
}

/// One followed scheme's speed-ups along an axis (bandwidth or GPMs): (x, latency ms,
/// speed-up).
pub struct Curve {
    pub scheme: &'static str,
    pub points: Vec<(f64, f64, f64)>,
}

pub struct Figures {
    pub fig15: Vec<SchemeRow>,
    pub fig17: Vec<Curve>,
    /// One GPU's latency, ms per frame: the base of Fig. 18.
    pub single_ms: f64,
    pub fig18: Vec<Curve>,
}

impl Figures {
    /// The figures from the runs `find` gives by (scheme, GPMs): every scheme on 4, the
    /// followed ones on 2 and 8, and afr on 1.
    pub fn of<'a>(
        find: impl Fn(&str, usize) -> Option<&'a [FrameMeasure]>,
    ) -> Result<Self, VrError> {
        let run = |s: &str, g: usize| {
            find(s, g).ok_or_else(|| VrError::Config(format!("no run of {s} on {g} GPM(s)")))
        };
        let l64 = link_model(4, GBPS)?;
        let base = summarise(run("baseline", 4)?, &l64, 4);
        let base_traffic = (base.texture_mib + base.composition_mib).max(f64::MIN_POSITIVE);
        let mut fig15 = Vec::new();
        for s in NAMES {
            let m = summarise(run(s, 4)?, &l64, 4);
            fig15.push(SchemeRow {
                scheme: s,
                speedup: base.latency_ms / m.latency_ms,
                throughput: base.latency_ms / m.frame_interval_ms,
                traffic: (m.texture_mib + m.composition_mib) / base_traffic,
                summary: m,
            });
        }
        let mut fig17 = Vec::new();
        for s in FOLLOWED {
            let mut points = Vec::new();
            for gbps in BANDWIDTHS {
                let m = summarise(run(s, 4)?, &link_model(4, gbps)?, 4);
                points.push((gbps, m.latency_ms, base.latency_ms / m.latency_ms));
            }
            fig17.push(Curve { scheme: s, points });
        }
        let single = summarise(run("afr", 1)?, &link_model(1, GBPS)?, 1).latency_ms;
        let mut fig18 = Vec::new();
        for s in FOLLOWED {
            let mut points = Vec::new();
            for g in GPM_COUNTS {
                let ms = if g == 1 {
                    single
                } else {
                    summarise(run(s, g)?, &link_model(g, GBPS)?, g).latency_ms
                };
                points.push((g as f64, ms, single / ms));
            }
            fig18.push(Curve { scheme: s, points });
        }
        Ok(Figures {
            fig15,
            fig17,
            single_ms: single,
            fig18,
        })
    }

    /// Writes `fig15.csv` … `fig18.csv` and their plots into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), PlotError> {
        let mut csv15 = String::from("scheme,latency_ms,frame_interval_ms,speedup,throughput_speedup,load_balance,prediction_error\n");
        let mut csv16 =
            String::from("scheme,texture_mib_per_frame,composition_mib_per_frame,total_mib_per_frame,normalized_to_baseline\n");
        let (mut pts15, mut pts16) = (Vec::new(), Vec::new());
        for (i, r) in self.fig15.iter().enumerate() {
            let m = &r.summary;
            let _ = writeln!(
                csv15,
                "{},{:.4},{:.4},{:.4},{:.4},{:.4},{}",
                r.scheme,
                m.latency_ms,
                m.frame_interval_ms,
                r.speedup,
                r.throughput,
                m.load_balance,
                m.prediction_error
                    .map_or(String::new(), |e| format!("{e:.4}"))
            );
            let _ = writeln!(
                csv16,
                "{},{:.4},{:.4},{:.4},{:.4}",
                r.scheme,
                m.texture_mib,
                m.composition_mib,
                m.texture_mib + m.composition_mib,
                r.traffic
            );
            pts15.push(series(r.scheme, vec![(i as f64 + 1.0, r.speedup)]));
            pts16.push(series(r.scheme, vec![(i as f64 + 1.0, r.traffic)]));
        }
        let mut csv17 = String::from("scheme,link_gbps,latency_ms,speedup_vs_baseline_64\n");
        for c in &self.fig17 {
            for (gbps, ms, sp) in &c.points {
                let _ = writeln!(csv17, "{},{gbps},{ms:.4},{sp:.4}", c.scheme);
            }
        }
        let mut csv18 = String::from("scheme,gpms,latency_ms,speedup_vs_single_gpu\n");
        for c in &self.fig18 {
            for (g, ms, sp) in &c.points {
                let _ = writeln!(csv18, "{},{g},{ms:.4},{sp:.4}", c.scheme);
            }
        }
        for (name, text) in [
            ("fig15.csv", csv15),
            ("fig16.csv", csv16),
            ("fig17.csv", csv17),
            ("fig18.csv", csv18),
        ] {
            let path = dir.join(name);
            std::fs::write(&path, text).map_err(|e| PlotError::Write {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        }
        let curves = |cs: &[Curve]| -> Vec<Series> {
            cs.iter()
                .map(|c| series(c.scheme, c.points.iter().map(|p| (p.0, p.2)).collect()))
                .collect()
        };
        let by_scheme = "scheme (1 baseline … 7 oo-vr)";
        for (stem, title, x_label, y_label, x_log2, series) in [
            (
                "fig15",
                "Fig 15: speed-up over the baseline, 4 GPMs (modeled)",
                by_scheme,
                "speed-up",
                false,
                pts15,
            ),
            (
                "fig16",
                "Fig 16: inter-GPM traffic, normalized to the baseline",
                by_scheme,
                "traffic / baseline's",
                false,
                pts16,
            ),
            (
                "fig17",
                "Fig 17: speed-up against link bandwidth (modeled)",
                "inter-GPM link, GB/s",
                "speed-up over baseline at 64 GB/s",
                true,
                curves(&self.fig17),
            ),
            (
                "fig18",
                "Fig 18: speed-up over one GPU against GPMs (modeled)",
                "GPMs",
                "speed-up",
                true,
                curves(&self.fig18),
            ),
        ] {
            line_chart(
                &dir.join(stem),
                &LineChart {
                    title,
                    x_label,
                    y_label,
                    x_log2,
                    y_log: false,
                    series,
                },
            )?;
        }
        Ok(())
    }
}

fn series(name: &str, points: Vec<(f64, f64)>) -> Series {
    Series {
        name: name.to_string(),
        points,
        secondary: false,
    }
}
