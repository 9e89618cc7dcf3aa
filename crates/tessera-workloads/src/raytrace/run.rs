//! A ray-tracing run: frames of the same view, each timed and counted, and what the report
//! says of the node at the end (page moves per device, residency per object).

use std::time::Instant;

use serde::Serialize;
use tessera_runtime::{PassStats, StageTimes};

use super::render::RayRenderer;
use super::RaytraceError;

/// One frame's wall time and counts, summed over devices.
#[derive(Serialize)]
pub struct FrameReport {
    pub wall_ms: f64,
    pub launches: u64,
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
}

/// Stats of several devices as one.
pub fn sum_stats(stats: &[PassStats]) -> PassStats {
    let mut all = PassStats::default();
    for s in stats {
        all.add(s);
    }
    all
}

/// Renders `frames` frames with `r`, calling `tick` after each; returns each frame's report
/// and the stage times summed over devices and frames.
pub fn record(
    r: &mut RayRenderer,
    frames: u32,
    mut tick: impl FnMut(),
) -> Result<(Vec<FrameReport>, StageTimes), RaytraceError> {
    let mut out = Vec::new();
    let mut stages = StageTimes::default();
    for _ in 0..frames {
        let t = Instant::now();
        let stats = r.frame()?;
        let wall = t.elapsed().as_secs_f64();
        let s = sum_stats(&stats);
        stages.add(&s.stages);
        out.push(FrameReport {
            wall_ms: wall * 1e3,
            launches: s.launches,
            relaunched: s.relaunched,
            suspended: s.suspended,
            wave_splits: s.wave_splits,
            batches: s.batches,
        });
        tick();
    }
    Ok((out, stages))
}

/// Each device's page moves over the run so far.
pub fn traffic(r: &RayRenderer) -> Result<Vec<TrafficReport>, RaytraceError> {
    Ok(r.sys
        .mm
        .traffic()?
        .iter()
        .enumerate()
        .map(|(device, t)| TrafficReport {
            device,
            host_to_device_bytes: t.host_to_device.bytes,
            device_to_device_bytes: t.device_to_device.bytes,
            device_to_host_bytes: t.device_to_host.bytes,
            page_requests: t.page_requests,
            evictions: t.evictions,
            refaults: t.refaults,
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
