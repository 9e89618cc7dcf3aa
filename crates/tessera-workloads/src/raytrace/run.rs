//! A ray-tracing run: frames of the same view, each timed and counted, and what the report
//! says of the node at the end (page moves per device, residency per object).

use std::time::Instant;

use serde::Serialize;
use tessera_runtime::{HostCounters, HostReport, PassStats, Policy, StageTimes, System};

use super::rays::View;
use super::render::{RayRenderer, RenderOptions};
use super::scene::PagedScene;
use super::RaytraceError;
use crate::{ImageCore, Made};

/// One frame's wall time and counts, summed over devices.
#[derive(Serialize)]
pub struct FrameReport {
    pub wall_seconds: f64,
    /// Device time of the frame's kernels from timestamp queries, summed over the devices
    /// (on one GPU, the time it was busy with them); absent where the backend has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_seconds: Option<f64>,
    pub launches: u64,
    #[serde(rename = "relaunched_invocations")]
    pub relaunched: u64,
    pub suspended: u64,
    pub wave_splits: u64,
    pub batches: u64,
}

/// One object's pages and the pages of it each device holds.
#[derive(Serialize)]
pub struct ObjectReport {
    pub name: &'static str,
    pub pages: u64,
    pub page_bytes: u64,
    pub resident_pages_per_device: Vec<u64>,
}

/// One device's page moves over the run.
#[derive(Serialize)]
pub struct TrafficReport {
    pub device: usize,
    pub host_to_device_bytes: u64,
    pub device_to_device_bytes: u64,
    pub device_to_host_bytes: u64,
    pub page_requests: u64,
    pub evictions: u64,
    pub refaults: u64,
    /// The host's work for this device per frame.
    pub host: HostReport,
}

/// Stats of several devices as one.
pub fn sum_stats(stats: &[PassStats]) -> PassStats {
    let mut all = PassStats::default();
    for s in stats {
        all.add(s);
    }
    all
}

/// What the frames of a run recorded.
pub struct Recorded {
    pub per_frame: Vec<FrameReport>,
    /// Summed over devices and frames.
    pub stages: StageTimes,
    /// Device time, summed over devices and frames, where the backend has timestamps.
    pub gpu_stages: Option<StageTimes>,
    /// Per device, the host's work over the frames.
    pub host: Vec<HostCounters>,
}

/// Renders `frames` frames with `r`, calling `tick` after each.
pub fn record(
    r: &mut RayRenderer,
    frames: u32,
    mut tick: impl FnMut(),
) -> Result<Recorded, RaytraceError> {
    let mut out = Vec::new();
    let mut stages = StageTimes::default();
    let mut gpu_stages: Option<StageTimes> = None;
    let mut host = vec![HostCounters::default(); r.sys.devices()];
    for _ in 0..frames {
        let t = Instant::now();
        let before = r.sys.host_counters();
        let stats = r.frame()?;
        let wall = t.elapsed().as_secs_f64();
        r.sys.add_host_since(&mut host, &before);
        let s = sum_stats(&stats);
        stages.add(&s.stages);
        if let Some(g) = &s.gpu_stages {
            gpu_stages.get_or_insert_with(Default::default).add(g);
        }
        out.push(FrameReport {
            wall_seconds: wall,
            gpu_seconds: s.gpu_stages.map(|g| g.total()),
            launches: s.launches,
            relaunched: s.relaunched,
            suspended: s.suspended,
            wave_splits: s.wave_splits,
            batches: s.batches,
        });
        tick();
    }
    Ok(Recorded {
        per_frame: out,
        stages,
        gpu_stages,
        host,
    })
}

/// Each device's page moves over the run so far, and the host's work per frame of `rec`.
pub fn traffic(r: &RayRenderer, rec: &Recorded) -> Result<Vec<TrafficReport>, RaytraceError> {
    let frames = rec.per_frame.len() as u32;
    Ok(r.sys
        .mm
        .traffic()?
        .iter()
        .zip(&rec.host)
        .enumerate()
        .map(|(device, (t, h))| TrafficReport {
            device,
            host_to_device_bytes: t.host_to_device.bytes,
            device_to_device_bytes: t.device_to_device.bytes,
            device_to_host_bytes: t.device_to_host.bytes,
            page_requests: t.page_requests,
            evictions: t.evictions,
            refaults: t.refaults,
            host: HostReport::of(h, frames),
        })
        .collect())
}

/// Each object's residency now.
pub fn residency(r: &RayRenderer) -> Result<Vec<ObjectReport>, RaytraceError> {
    Ok(r.residency()?
        .into_iter()
        .map(|o| ObjectReport {
            name: o.name,
            pages: o.pages,
            page_bytes: o.page_bytes,
            resident_pages_per_device: o.per_device,
        })
        .collect())
}

/// The schema's core (docs/report.schema.json), then the ray tracer's own section.
#[derive(Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub core: ImageCore<tessera_runtime::Partition>,
    /// Summed over devices and frames, seconds.
    pub stages: StageTimes,
    /// Device time per stage from timestamp queries, summed over devices and frames, seconds;
    /// absent where the backend has none (the CPU backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_stage_seconds: Option<StageTimes>,
    /// Per device, over all frames.
    pub per_device: Vec<TrafficReport>,
    pub scene: String,
    pub instances: u32,
    pub triangles: u32,
    pub bvh_nodes: u32,
    pub scene_bytes: u64,
    pub objects_bytes: u64,
    pub width: u32,
    pub height: u32,
    pub ao_samples: u32,
    /// Bands cut on page boundaries where they stay near even (`--split-on-pages`).
    pub split_on_pages: bool,
    /// Each device's budget, as in every report.
    #[serde(rename = "budget_bytes")]
    pub budget_bytes_per_device: u64,
    pub policy: String,
    /// The albedo's filter: `nearest` (a plain atlas), `bilinear` or `trilinear`.
    pub filter: &'static str,
    /// Per level of the atlas's chain (one for a plain atlas), its pages, as quake's
    /// `filtering.pages_by_level`.
    pub pages_by_level: Vec<u64>,
    /// Per level, the pages some device holds at the end of the run (not a sum over
    /// devices): quake's `filtering.held_pages_by_level`.
    #[serde(rename = "held_pages_by_level")]
    pub atlas_pages_by_level: Vec<u64>,
    /// Per measured frame, in order (quake's and vr's lists end in `_by_frame` too).
    #[serde(rename = "by_frame")]
    pub per_frame: Vec<FrameReport>,
    /// At the end of the run.
    pub residency: Vec<ObjectReport>,
}

/// What a run renders, besides its node.
pub struct RunSpec {
    pub scene: PagedScene,
    pub view: View,
    /// The scene's name in the report.
    pub name: String,
    pub instances: u32,
    pub options: RenderOptions,
    pub budget_bytes: u64,
    pub policy: Policy,
    pub frames: u32,
}

/// Renders `spec.frames` frames on `sys` (whose backend `backend` names, on the adapter
/// `adapter` where it has one), calling `tick` after each; returns the report and the last
/// frame's image.
pub fn run(
    sys: System,
    backend: &'static str,
    adapter: Option<String>,
    spec: RunSpec,
    tick: impl FnMut(),
) -> Result<(Report, Vec<u8>), RaytraceError> {
    let adapter = adapter.unwrap_or_else(|| sys.backend().to_string());
    let devices = sys.devices();
    let split_on_pages = sys.split_on_pages();
    let scene_bytes = spec.scene.bytes();
    let (triangles, bvh_nodes) = (spec.scene.triangle_count, spec.scene.node_count);
    let o = spec.options;
    let mut r = RayRenderer::new(sys, spec.scene, spec.view, o)?;
    let objects_bytes = r.total_bytes();
    let rec = record(&mut r, spec.frames, tick)?;
    let image = r.image()?;
    let made = Made {
        workload: "raytrace",
        backend,
        adapter,
        devices,
        page_size: o.page,
        warmup_frames: 0,
        procedure: o.procedure,
        split: o.partition,
    };
    let levels = r.atlas_levels()?;
    let report = Report {
        core: ImageCore::new(made, rec.per_frame.len(), &image),
        stages: rec.stages,
        gpu_stage_seconds: rec.gpu_stages,
        per_device: traffic(&r, &rec)?,
        scene: spec.name,
        instances: spec.instances,
        triangles,
        bvh_nodes,
        scene_bytes,
        objects_bytes,
        width: o.width,
        height: o.height,
        ao_samples: o.ao_samples,
        split_on_pages,
        budget_bytes_per_device: spec.budget_bytes,
        policy: spec.policy.name().to_string(),
        filter: o.filter.map_or("nearest", |f| f.name()),
        pages_by_level: levels.0,
        atlas_pages_by_level: levels.1,
        per_frame: rec.per_frame,
        residency: residency(&r)?,
    };
    Ok((report, image))
}

impl Report {
    /// The summary `tessera run raytrace` prints.
    pub fn summary(&self) -> String {
        let last = self.per_frame.last();
        let moved: u64 = self
            .per_device
            .iter()
            .map(|t| t.host_to_device_bytes + t.device_to_device_bytes + t.device_to_host_bytes)
            .sum();
        let mut s = format!(
            "{} x{} ({} triangles, {} BVH nodes, scene {:.1} MiB, objects {:.1} MiB), {}x{}, {} device(s) [{}], budget {}/device, {}, {}\n",
            self.scene,
            self.instances,
            self.triangles,
            self.bvh_nodes,
            self.scene_bytes as f64 / 1048576.0,
            self.objects_bytes as f64 / 1048576.0,
            self.width,
            self.height,
            self.core.devices,
            self.core.adapter,
            crate::budget_text(self.budget_bytes_per_device),
            self.policy,
            self.core.procedure,
        );
        if let Some(last) = last {
            s += &format!(
                "last frame {:.1} ms (measured), {} launches, {} relaunched ({} with saved state), {} wave splits; {:.2} MiB moved over the run\n",
                last.wall_seconds * 1e3,
                last.launches,
                last.relaunched,
                last.suspended,
                last.wave_splits,
                moved as f64 / 1048576.0
            );
        }
        let host: Vec<_> = self.per_device.iter().map(|d| (d.device, d.host)).collect();
        s += &crate::host_table("host:", &host, None);
        s + &format!("image {}", self.core.checksum)
    }
}
