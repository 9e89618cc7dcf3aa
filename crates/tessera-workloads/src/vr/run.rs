//! A vr run: every camera of a path rendered in stereo with one scheme, the warm-up frames
//! left out of the figures, and the means over the measured frames under a link model.

use std::time::Instant;

use serde::Serialize;
use tessera_runtime::{HostCounters, System};
use tessera_scene::Scene;

use super::render::{FrameMeasure, FrameReport, LinkModel, StereoOptions, StereoRenderer};
use super::scheme::Scheme;
use super::VrError;
use crate::quake::Camera;

/// One run's frames.
pub struct Run {
    /// The measured frames, warm-up left out.
    pub frames: Vec<FrameMeasure>,
    /// Per measured frame, its wall time.
    pub frame_seconds: Vec<f64>,
    pub last_image: Vec<u8>,
    /// Wall time of the measured frames, from the first one's start: the warm-up is counted
    /// nowhere, as in every workload.
    pub wall: f64,
    /// The devices as the backend describes them.
    pub backend: String,
    /// Per device, the host's work over the measured frames.
    pub host: Vec<HostCounters>,
}

/// Renders `scene` on `sys` through every camera of `cams` with `scheme`; the first `warmup`
/// frames count nowhere. `tick` is called after every frame (the progress bar). A frame the
/// scheme did not cover exactly once is an error.
pub fn run(
    sys: System,
    scene: &Scene,
    cams: &[Camera],
    scheme: &mut dyn Scheme,
    options: StereoOptions,
    warmup: u32,
    mut tick: impl FnMut(),
) -> Result<Run, VrError> {
    let backend = sys.backend().to_string();
    let mut r = StereoRenderer::new(sys, scene, options)?;
    let mut start = Instant::now();
    let mut frames = Vec::new();
    let mut frame_seconds = Vec::new();
    let mut host = vec![HostCounters::default(); r.sys.devices()];
    for (f, cam) in cams.iter().enumerate() {
        let t = Instant::now();
        if f == warmup as usize {
            start = t;
        }
        let before = r.sys.host_counters();
        let m = r.frame(cam, scheme)?;
        let seconds = t.elapsed().as_secs_f64();
        if f >= warmup as usize {
            r.sys.add_host_since(&mut host, &before);
        }
        if m.uncomposed != 0 || m.overdrawn != 0 {
            return Err(VrError::Uncovered {
                scheme: m.scheme,
                uncomposed: m.uncomposed,
                overdrawn: m.overdrawn,
            });
        }
        if f >= warmup as usize {
            frames.push(m);
            frame_seconds.push(seconds);
        }
        tick();
    }
    Ok(Run {
        frames,
        frame_seconds,
        last_image: r.stereo_image(),
        wall: start.elapsed().as_secs_f64(),
        backend,
        host,
    })
}

/// Means over a run's frames under one link model.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub latency_ms: f64,
    /// AFR keeps `gpms` frames in flight: the interval between frames is its latency / gpms.
    /// Other schemes: the latency.
    pub frame_interval_ms: f64,
    #[serde(rename = "texture_mib_per_frame")]
    pub texture_mib: f64,
    #[serde(rename = "composition_mib_per_frame")]
    pub composition_mib: f64,
    pub load_balance: f64,
    /// Mean relative error of OO-VR's predictions (None: nothing predicted).
    pub prediction_error: Option<f64>,
    #[serde(rename = "batches_per_frame")]
    pub batches: f64,
    #[serde(rename = "passes_per_frame")]
    pub passes: f64,
    /// Over all the frames.
    pub tail_splits: usize,
}

/// The means of `frames` on `gpms` GPMs under `link`.
pub fn summarise(frames: &[FrameMeasure], link: &LinkModel, gpms: usize) -> Summary {
    let reports: Vec<FrameReport> = frames.iter().map(|m| m.cost(link)).collect();
    let n = frames.len().max(1) as f64;
    let mean = |f: &dyn Fn(&FrameReport) -> f64| reports.iter().map(f).sum::<f64>() / n;
    let latency = mean(&|r| r.latency);
    let errors: Vec<f64> = frames
        .iter()
        .flat_map(|m| m.prediction_errors.iter().copied())
        .collect();
    let afr = frames.first().is_some_and(|m| m.scheme == "afr");
    Summary {
        latency_ms: latency * 1e3,
        frame_interval_ms: if afr {
            latency * 1e3 / gpms as f64
        } else {
            latency * 1e3
        },
        texture_mib: mean(&|r| r.texture_bytes as f64) / (1u64 << 20) as f64,
        composition_mib: mean(&|r| r.composition_bytes as f64) / (1u64 << 20) as f64,
        load_balance: mean(&|r| r.load_balance),
        prediction_error: (!errors.is_empty())
            .then(|| errors.iter().sum::<f64>() / errors.len() as f64),
        batches: frames.iter().map(|m| m.batches as f64).sum::<f64>() / n,
        passes: frames.iter().map(|m| m.passes as f64).sum::<f64>() / n,
        tail_splits: frames.iter().filter(|m| m.tail_split).count(),
    }
}
