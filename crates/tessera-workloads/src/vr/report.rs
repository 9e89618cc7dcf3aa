//! What `tessera run vr` reports and `tessera sweep vr` prints, and the scene both load.

use std::fmt::Write as _;

use serde::Serialize;
use tessera_scene::Scene;

use super::figures::{link_model, Figures, FOLLOWED};
use super::render::{FrameMeasure, FrameReport, LinkModel};
use super::run::{summarise, Run, Summary};
use super::{VrError, NAMES};
use crate::quake::map::camera_path;
use crate::quake::Camera;
use crate::raytrace::SceneSpec;
use crate::{ImageCore, Made};

/// The scene of `spec`, its camera path of `frames` cameras and its name in reports.
pub fn load_scene(
    spec: &SceneSpec,
    pak_dir: &std::path::Path,
    frames: Option<u32>,
) -> Result<(Scene, Vec<Camera>, String), VrError> {
    let (scene, name) = crate::quake::map::load_spec(spec, pak_dir)?;
    let frames =
        frames.ok_or_else(|| VrError::Config("--frames plus --warmup is too large".into()))?;
    let cams = camera_path(&scene, frames);
    Ok((scene, cams, name))
}

/// One GPM's measured figures, summed over the run's frames.
#[derive(Serialize)]
pub struct VrDevice {
    pub device: usize,
    /// Measured device seconds of its passes.
    pub busy_seconds: f64,
    /// Texture pages it fetched from its own memory, and from the other GPMs.
    pub local_texture_pages: u64,
    pub remote_texture_pages: u64,
    /// The host's work for this device per measured frame.
    pub host: tessera_runtime::HostReport,
}

/// The schema's core (docs/report.schema.json), then OO-VR's own section.
#[derive(Serialize)]
pub struct VrReport<'a> {
    #[serde(flatten)]
    pub core: ImageCore<&'a str>,
    /// Not timed stage by stage: a GPM's passes are timed whole (`per_device`).
    pub stages: Option<tessera_runtime::StageTimes>,
    pub per_device: Vec<VrDevice>,
    pub scene: &'a str,
    /// The scheme, which the core gives as `split`; kept for the text summary.
    #[serde(skip)]
    pub scheme: &'a str,
    pub width: u32,
    pub height: u32,
    pub link: LinkModel,
    /// Means over the frames (modeled; see docs/EVALUATION.md, "OO-VR").
    pub summary: Summary,
    /// Per frame: what was measured and counted.
    #[serde(rename = "measured_by_frame")]
    pub measured: &'a [FrameMeasure],
    /// Per frame: the modeled figures (boiling's `modeled` is one object for the run).
    #[serde(rename = "modeled_by_frame")]
    pub modeled: Vec<FrameReport>,
    pub wall_seconds: f64,
    /// Per measured frame, its wall time.
    pub frame_seconds: &'a [f64],
    /// Per measured frame, device time of its kernels, all GPMs; absent where the backend has
    /// no timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_gpu_seconds: Option<Vec<f64>>,
}

/// How a run was made, for its report: the core's part (the scheme is its split), the scene,
/// the link model and one eye's size.
pub struct Ran<'a> {
    pub made: Made<&'a str>,
    pub scene: &'a str,
    pub link: LinkModel,
    pub width: u32,
    pub height: u32,
}

impl<'a> VrReport<'a> {
    pub fn new(run: &'a Run, ran: Ran<'a>) -> Self {
        let gpms = ran.made.devices;
        let scheme = ran.made.split;
        let per_device = (0..gpms)
            .map(|d| VrDevice {
                device: d,
                busy_seconds: run.frames.iter().map(|m| m.busy[d]).sum(),
                local_texture_pages: run.frames.iter().map(|m| m.local_pages[d]).sum(),
                remote_texture_pages: run
                    .frames
                    .iter()
                    .map(|m| {
                        (0..gpms)
                            .filter(|&from| from != d)
                            .map(|from| m.texture_pages[from][d])
                            .sum::<u64>()
                    })
                    .sum(),
                host: tessera_runtime::HostReport::of(&run.host[d], run.frames.len() as u32),
            })
            .collect();
        VrReport {
            core: ImageCore::new(ran.made, run.frames.len(), &run.last_image),
            stages: None,
            per_device,
            scene: ran.scene,
            scheme,
            width: ran.width,
            height: ran.height,
            link: ran.link,
            summary: summarise(&run.frames, &ran.link, gpms),
            measured: &run.frames,
            modeled: run.frames.iter().map(|m| m.cost(&ran.link)).collect(),
            wall_seconds: run.wall,
            frame_seconds: &run.frame_seconds,
            frame_gpu_seconds: run.frames.iter().map(|m| m.gpu_seconds).collect(),
        }
    }

    /// The two lines `tessera run vr` prints; `gbps` is the link's bandwidth as given.
    pub fn summary_text(&self, gbps: f64) -> String {
        let s = &self.summary;
        let host: Vec<_> = self.per_device.iter().map(|d| (d.device, d.host)).collect();
        format!(
            "vr: {}, {} stereo frames {}x{} per eye after {} warm-up, scheme {}, {} GPM(s) at {gbps} GB/s [{}]\nmodeled latency {:.2} ms/frame (frame interval {:.2} ms); inter-GPM traffic {:.2} MiB texture + {:.2} MiB composition per frame; load balance {:.2}{}",
            self.scene,
            self.core.frames,
            self.width,
            self.height,
            self.core.warmup_frames,
            self.scheme,
            self.core.devices,
            self.core.adapter,
            s.latency_ms,
            s.frame_interval_ms,
            s.texture_mib,
            s.composition_mib,
            s.load_balance,
            s.prediction_error
                .map_or(String::new(), |e| format!("; predictor error {:.1}%", e * 100.0))
        ) + "\n"
            + crate::host_table("host:", &host, None).trim_end()
    }
}

/// The sweep's runs: every scheme on 4 GPMs; the followed schemes on 2 and 8; AFR on 1 GPM,
/// which is one whole frame in one piece: the single GPU.
pub fn sweep_plan() -> Vec<(String, usize)> {
    let mut plan: Vec<(String, usize)> = NAMES.iter().map(|s| (s.to_string(), 4)).collect();
    for g in [2, 8] {
        plan.extend(FOLLOWED.iter().map(|s| (s.to_string(), g)));
    }
    plan.push(("afr".into(), 1));
    plan
}

/// The run of median modeled latency at 64 GB/s among `tries` on `gpms` GPMs.
pub fn median_run(mut tries: Vec<Run>, gpms: usize) -> Result<Run, VrError> {
    let link = link_model(gpms, 64.0)?;
    tries.sort_by(|a, b| {
        let la = summarise(&a.frames, &link, gpms).latency_ms;
        let lb = summarise(&b.frames, &link, gpms).latency_ms;
        la.total_cmp(&lb)
    });
    Ok(tries.swap_remove(tries.len() / 2))
}

/// The sweep: every point of [`sweep_plan`] run `rounds` times by `run(round, scheme, gpms)`,
/// interleaved (round 1 runs every point, then round 2 ...); each point with its median run.
pub fn sweep_medians<E: From<VrError>>(
    rounds: u32,
    mut run: impl FnMut(u32, &str, usize) -> Result<Run, E>,
) -> Result<Vec<(String, usize, Run)>, E> {
    let plan = sweep_plan();
    let mut tries: Vec<Vec<Run>> = plan.iter().map(|_| Vec::new()).collect();
    for round in 1..=rounds {
        for ((scheme, g), tries) in plan.iter().zip(&mut tries) {
            tries.push(run(round, scheme, *g)?);
        }
    }
    let medians = plan.into_iter().zip(tries);
    medians
        .map(|((scheme, g), tries)| Ok((scheme, g, median_run(tries, g)?)))
        .collect()
}

impl Figures {
    /// The figures of the sweep's `runs` ([`sweep_medians`]).
    pub fn of_runs(runs: &[(String, usize, Run)]) -> Result<Self, VrError> {
        Figures::of(|s, g| {
            let run = runs.iter().find(|r| r.0 == s && r.1 == g);
            run.map(|r| r.2.frames.as_slice())
        })
    }

    /// Figures 15 to 18 as `tessera sweep vr` prints them.
    pub fn table(&self) -> String {
        let mut s = String::from("Fig 15/16, 4 GPMs at 64 GB/s:\n");
        let _ = writeln!(
            s,
            "{:>9} {:>11} {:>9} {:>10} {:>9} {:>10} {:>10} {:>9} {:>8}",
            "scheme",
            "latency ms",
            "speed-up",
            "thru-put×",
            "balance",
            "tex MiB/f",
            "comp MiB/f",
            "traffic",
            "pred err"
        );
        for r in &self.fig15 {
            let m = &r.summary;
            let err = m
                .prediction_error
                .map_or("-".to_string(), |e| format!("{:.1}%", e * 100.0));
            let _ = writeln!(
                s,
                "{:>9} {:>11.2} {:>9.2} {:>10.2} {:>9.2} {:>10.3} {:>10.3} {:>9.2} {err:>8}",
                r.scheme,
                m.latency_ms,
                r.speedup,
                r.throughput,
                m.load_balance,
                m.texture_mib,
                m.composition_mib,
                r.traffic
            );
        }
        s.push_str("Fig 17, 4 GPMs, speed-up over the baseline at 64 GB/s:\n");
        for c in &self.fig17 {
            let _ = write!(s, "{:>9}:", c.scheme);
            for (gbps, _, sp) in &c.points {
                let _ = write!(s, " {gbps} GB/s {sp:.2}");
            }
            s.push('\n');
        }
        let _ = writeln!(
            s,
            "Fig 18, speed-up over one GPU ({:.2} ms/frame), 64 GB/s:",
            self.single_ms
        );
        for c in &self.fig18 {
            let _ = write!(s, "{:>9}:", c.scheme);
            for (g, _, sp) in &c.points {
                let _ = write!(s, " {g}: {sp:.2}");
            }
            s.push('\n');
        }
        s
    }
}
