//! A game-trace run: every camera of a path rendered split-screen, each frame's requests,
//! stage times and (for a trace) accessed blocks recorded, and the run's figures at its end.

use std::time::Instant;

use serde::Serialize;
use tessera_runtime::{DeviceTraffic, HostCounters, HostReport, StageTimes};

use super::reference::render_filtered;
use super::render::{DegradeFrame, FrameStats, Renderer};
use super::trace::{DeviceFrame, Trace, BLOCK};
use super::{Camera, QuakeError};

/// What the frames of a run recorded.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// Per frame, per device: texture page requests.
    pub requests: Vec<Vec<u64>>,
    /// Per frame, per device: requests for the frame's buffers and the framebuffer.
    pub other_requests: Vec<Vec<u64>>,
    pub triangles: Vec<u32>,
    /// Per texture, page requests of every device over the run.
    pub by_texture: Vec<u64>,
    /// Per frame, per mip level of the atlas, texture page requests of every device.
    pub by_level: Vec<Vec<u64>>,
    /// Per device, summed over frames, seconds.
    pub stages: Vec<StageTimes>,
    /// Per frame, measured wall time of its passes alone.
    pub frame_seconds: Vec<f64>,
    /// Per frame, device time of its kernels from timestamp queries, summed over the devices
    /// (`None` where the backend has none).
    pub frame_gpu_seconds: Vec<Option<f64>>,
    /// Device time per stage, summed over devices and frames, where the backend has it.
    pub gpu_stages: Option<StageTimes>,
    /// Per frame, per device, the texel blocks it accessed (only when asked for a trace).
    pub trace_frames: Vec<Vec<DeviceFrame>>,
    /// Per frame, what degrading did (`Miss::Degrade` only).
    pub degrade: Vec<DegradeFrame>,
    /// Per device, the host's work over the frames' passes (pictures and traces aside).
    pub host: Vec<HostCounters>,
}

/// Renders `r` through every camera of `cams` at `aspect` (width / height), recording each
/// frame, and its accessed blocks where `trace`; `after_frame` is called after each frame
/// with its index and stats (the caller's pictures and progress bar).
pub fn record<E: From<QuakeError>>(
    r: &mut Renderer,
    cams: &[Camera],
    aspect: f64,
    trace: bool,
    mut after_frame: impl FnMut(usize, &Renderer, &FrameStats) -> Result<(), E>,
) -> Result<Recorded, E> {
    let mut out = Recorded {
        by_texture: vec![0; r.mesh().textures.len()],
        stages: vec![StageTimes::default(); r.sys.devices()],
        host: vec![HostCounters::default(); r.sys.devices()],
        ..Default::default()
    };
    for (f, cam) in cams.iter().enumerate() {
        let t = Instant::now();
        let before = r.sys.host_counters();
        let s = r.frame(&cam.view_proj(aspect))?;
        out.frame_seconds.push(t.elapsed().as_secs_f64());
        r.sys.add_host_since(&mut out.host, &before);
        if trace {
            let blocks = r.accessed_blocks()?;
            out.trace_frames.push(
                s.requests
                    .iter()
                    .zip(blocks)
                    .map(|(&requests, blocks)| DeviceFrame { requests, blocks })
                    .collect(),
            );
        }
        after_frame(f, r, &s)?;
        let mut gpu: Option<StageTimes> = None;
        for (a, p) in out.stages.iter_mut().zip(&s.passes) {
            a.add(&p.stages);
            if let Some(g) = &p.gpu_stages {
                gpu.get_or_insert_with(Default::default).add(g);
            }
        }
        out.frame_gpu_seconds.push(gpu.map(|g| g.total()));
        if let Some(g) = &gpu {
            out.gpu_stages.get_or_insert_with(Default::default).add(g);
        }
        for (t, r) in out.by_texture.iter_mut().zip(&s.by_texture) {
            *t += r;
        }
        out.degrade.extend(s.degrade);
        out.by_level.push(s.by_level);
        out.requests.push(s.requests);
        out.other_requests.push(s.other_requests);
        out.triangles.push(s.triangles);
    }
    Ok(out)
}

impl Recorded {
    /// The trace of a run of `r` recorded with `trace` set: its settings and every frame's
    /// blocks. `random_placement`: the seed of the run's random initial placement, if any.
    pub fn into_trace(self, r: &Renderer, random_placement: Option<u64>) -> Trace {
        let o = &r.opts;
        Trace {
            block: BLOCK,
            devices: r.sys.devices() as u32,
            width: o.width,
            height: o.height,
            split: o.split,
            page: o.page,
            clear_each_frame: o.clear_each_frame,
            drop_unused: o.drop_unused,
            random_placement,
            textures: r.mesh().texture_sizes(),
            frames: self.trace_frames,
        }
    }
}

impl Renderer {
    /// The unpaged rasterizer's image through `cam`, sampled as this renderer samples (its
    /// filter on the same atlas): what `--verify` holds a frame against.
    pub fn reference_image(&self, cam: &Camera) -> Result<Vec<u8>, QuakeError> {
        let o = &self.opts;
        let vp = cam.view_proj(o.width as f64 / o.height as f64);
        let filter = self.filtering().map(|f| f.filter);
        let (image, _) = render_filtered(self.mesh(), &self.atlas, &vp, o.width, o.height, filter)?;
        Ok(image)
    }
}

/// Atlas pages one device holds at the end: only it, and it and another device.
#[derive(Serialize)]
pub struct Footprint {
    pub unique_pages: u64,
    pub shared_pages: u64,
    pub unique_bytes: u64,
    pub shared_bytes: u64,
}

#[derive(Serialize)]
pub struct TextureFigures {
    pub name: String,
    pub width: u32,
    pub height: u32,
    /// Atlas pages the texture's rectangle covers (an 8x8 texture takes a whole page).
    pub pages: u64,
    /// Page requests for it over the run, all devices.
    pub requests: u64,
}

/// One device's figures over the run.
#[derive(Serialize)]
pub struct QuakeDevice {
    pub device: usize,
    /// Texture page requests, all frames.
    pub texture_requests: u64,
    /// Every page move of the run (all objects).
    pub traffic: DeviceTraffic,
    /// Summed over frames, seconds.
    pub stages: StageTimes,
    /// The host's work for this device per frame, counted over the frames' passes.
    pub host: HostReport,
}

/// The run's figures at its end, from the renderer and what its frames recorded.
pub struct Figures {
    /// Per device, texture page requests over all frames.
    pub total_requests: Vec<u64>,
    pub texture_footprint: Vec<Footprint>,
    /// Atlas pages holding texels of some texture (the rest is padding).
    pub texture_pages: u64,
    pub per_texture: Vec<TextureFigures>,
    pub per_device: Vec<QuakeDevice>,
    /// Summed over devices and frames, seconds.
    pub stages: StageTimes,
}

impl Figures {
    /// The figures of `r` after the frames `rec` recorded, on pages of `page`² texels.
    pub fn of(r: &Renderer, rec: &Recorded, page: u32) -> Result<Self, QuakeError> {
        let n = r.sys.devices();
        let total: Vec<u64> = (0..n)
            .map(|d| rec.requests.iter().map(|f| f[d]).sum())
            .collect();
        let residency = r.atlas_residency()?;
        // A bordered atlas page takes a bigger slot than P² texels.
        let page_bytes = r
            .atlas_entry()
            .desc
            .page_bytes()
            .max(page as u64 * page as u64 * 4);
        let texture_footprint = (0..n)
            .map(|d| {
                let mine = residency.iter().filter(|&&m| m >> d & 1 == 1);
                let shared = mine.clone().filter(|m| m.count_ones() > 1).count() as u64;
                let unique = mine.count() as u64 - shared;
                Footprint {
                    unique_pages: unique,
                    shared_pages: shared,
                    unique_bytes: unique * page_bytes,
                    shared_bytes: shared * page_bytes,
                }
            })
            .collect();
        let texture_pages = (0..r.atlas.page_count())
            .filter(|&p| r.atlas.texture_of_page(p).is_some())
            .count() as u64;
        let mut stages = StageTimes::default();
        for st in &rec.stages {
            stages.add(st);
        }
        let per_device = r
            .sys
            .mm
            .traffic()?
            .into_iter()
            .zip(&total)
            .zip(&rec.stages)
            .zip(&rec.host)
            .enumerate()
            .map(
                |(device, (((traffic, &texture_requests), &stages), host))| QuakeDevice {
                    device,
                    texture_requests,
                    traffic,
                    stages,
                    host: HostReport::of(host, rec.requests.len() as u32),
                },
            )
            .collect();
        let per_texture = r
            .mesh()
            .textures
            .iter()
            .enumerate()
            .map(|(t, tex)| TextureFigures {
                name: tex.name.clone(),
                width: tex.width,
                height: tex.height,
                pages: (0..r.atlas.page_count())
                    .filter(|&p| r.atlas.texture_of_page(p) == Some(t as u32))
                    .count() as u64,
                requests: rec.by_texture.get(t).copied().unwrap_or(0),
            })
            .collect();
        Ok(Figures {
            total_requests: total,
            texture_footprint,
            texture_pages,
            per_texture,
            per_device,
            stages,
        })
    }
}

/// What degrading did over a run (`Miss::Degrade`), for the report.
#[derive(Serialize)]
pub struct DegradeFigures {
    /// Atlas pages of the tail replicated on every device before the first frame.
    pub tail_pages: u64,
    /// Per frame, the fraction of sampling pixels served at a coarser level than wanted.
    pub coarse_fraction: Vec<f64>,
    /// Per frame, invocations run again after a fault, all devices (0 when nothing but
    /// texture pages was missing).
    #[serde(rename = "relaunched_invocations")]
    pub relaunched: Vec<u64>,
    /// Per frame, pages asked for by pixels that completed without them, all devices.
    pub late_requests: Vec<u64>,
    /// Pages by the frames they took to arrive (index k: asked k frames before the first
    /// frame that found them on the device), all frames and devices.
    pub arrived_after_frames: Vec<u64>,
    /// Mean of `arrived_after_frames` (0 when nothing arrived).
    pub mean_arrival_frames: f64,
    /// Pages asked for that were still not on their device after the last frame.
    pub waiting_at_end: u64,
}

impl DegradeFigures {
    /// The figures of a degrading run; `None` for a relaunching one.
    pub fn of(r: &Renderer, frames: &[DegradeFrame]) -> Option<Self> {
        if frames.is_empty() {
            return None;
        }
        let mut arrived = Vec::new();
        for d in frames {
            if arrived.len() < d.arrived_after.len() {
                arrived.resize(d.arrived_after.len(), 0);
            }
            for (a, n) in arrived.iter_mut().zip(&d.arrived_after) {
                *a += n;
            }
        }
        let pages: u64 = arrived.iter().sum();
        let weighted: u64 = arrived.iter().enumerate().map(|(k, n)| k as u64 * n).sum();
        Some(DegradeFigures {
            tail_pages: r.tail_pages().end - r.tail_pages().start,
            coarse_fraction: frames.iter().map(|d| d.coarse_fraction()).collect(),
            relaunched: frames.iter().map(|d| d.relaunched).collect(),
            late_requests: frames.iter().map(|d| d.late_requests).collect(),
            mean_arrival_frames: if pages == 0 {
                0.0
            } else {
                weighted as f64 / pages as f64
            },
            arrived_after_frames: arrived,
            waiting_at_end: r.waiting_pages(),
        })
    }

    /// One line per frame: `frame,samples,coarse_samples,coarse_fraction,relaunched_invocations,late_requests`.
    pub fn csv(frames: &[DegradeFrame]) -> String {
        let mut s = String::from(
            "frame,samples,coarse_samples,coarse_fraction,relaunched_invocations,late_requests\n",
        );
        for (f, d) in frames.iter().enumerate() {
            s.push_str(&format!(
                "{f},{},{},{},{},{}\n",
                d.samples,
                d.coarse_samples,
                d.coarse_fraction(),
                d.relaunched,
                d.late_requests
            ));
        }
        s
    }
}
