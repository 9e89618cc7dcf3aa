//! What `tessera run quake` writes to report.json and prints.

use serde::Serialize;
use tessera_runtime::StageTimes;

use super::render::{RenderOptions, Renderer};
use super::run::{DegradeFigures, Figures, Footprint, QuakeDevice, Recorded, TextureFigures};
use super::QuakeError;
use crate::{ImageCore, Made};

/// The filtered renderer's own figures.
#[derive(Serialize)]
pub struct FilterReport {
    /// `bilinear` or `trilinear`.
    pub filter: String,
    pub border: u32,
    /// Levels of the atlas's mip chain.
    pub levels: u32,
    /// Pages of the whole chain (level 0 is `atlas_pages`).
    pub chain_pages: u64,
    /// Memory the borders add to every page: (P + 2B)² / P² − 1.
    pub border_overhead: f64,
    /// Per frame, per mip level: texture page requests of all devices.
    pub requests_by_level: Vec<Vec<u64>>,
    /// Per mip level: the chain's pages, and those some device holds at the end (each page
    /// `page_bytes` bytes on a device).
    pub pages_by_level: Vec<u64>,
    pub held_pages_by_level: Vec<u64>,
    pub page_bytes: u64,
    /// `relaunch` or `degrade`: what a sample does when its page is not on its device.
    pub miss: String,
    /// With `--miss degrade`: the coarse samples per frame and how long pages took to arrive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub degrade: Option<DegradeFigures>,
}

/// The schema's core (docs/report.schema.json), then the game trace's own section.
#[derive(Serialize)]
pub struct QuakeReport {
    #[serde(flatten)]
    pub core: ImageCore<&'static str>,
    /// Summed over devices and frames, seconds.
    pub stages: StageTimes,
    /// Device time per stage from timestamp queries, summed over devices and frames, seconds;
    /// absent where the backend has none (the CPU backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_stage_seconds: Option<StageTimes>,
    pub per_device: Vec<QuakeDevice>,
    /// `generated`, `generated:N` or `openarena:MAP`.
    pub scene: String,
    pub width: u32,
    pub height: u32,
    /// Strips cut on page boundaries where they stay near even (`--split-on-pages`).
    pub split_on_pages: bool,
    pub clear_each_frame: bool,
    pub drop_unused: bool,
    /// `home` or `random`.
    pub initial_placement: String,
    /// The random placement's seed (`--seed`); absent with `home`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    pub textures: usize,
    pub atlas_width: u32,
    pub atlas_height: u32,
    pub atlas_pages: u64,
    /// Atlas pages holding texels of some texture (the rest is padding).
    pub texture_pages: u64,
    /// Measured wall time of the whole loop (set-up, passes, read-backs, files): not the
    /// measured frames' alone, as `wall_seconds` is elsewhere (`frame_seconds` has those).
    #[serde(rename = "loop_wall_seconds")]
    pub wall_seconds: f64,
    /// Per frame, measured wall time of its passes alone (no pictures, no trace).
    pub frame_seconds: Vec<f64>,
    /// Per frame, device time of its kernels, summed over the devices (on one GPU, the time
    /// it was busy with them); absent where the backend has no timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_gpu_seconds: Option<Vec<f64>>,
    /// Per frame, per device: texture page requests.
    #[serde(rename = "texture_requests_by_frame")]
    pub requests: Vec<Vec<u64>>,
    /// Per frame, per device: requests for the frame's buffers and the framebuffer.
    #[serde(rename = "other_requests_by_frame")]
    pub other_requests: Vec<Vec<u64>>,
    /// Per device, texture page requests over all frames: in the report as each
    /// `per_device[].texture_requests`.
    #[serde(skip)]
    pub total_requests: Vec<u64>,
    /// Per device, texture page requests per frame.
    #[serde(rename = "mean_texture_requests_per_frame")]
    pub mean_requests_per_frame: Vec<f64>,
    /// Per measured frame, the triangles drawn.
    pub triangles_by_frame: Vec<u32>,
    /// Per device, atlas pages it holds at the end: only it, and it and another device.
    pub texture_footprint: Vec<Footprint>,
    /// Per texture: its pages in the atlas and the requests for them.
    pub per_texture: Vec<TextureFigures>,
    /// With --filter bilinear or trilinear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filtering: Option<FilterReport>,
}

/// How the run was made, beside its renderer's options.
pub struct Ran {
    /// `cpu` or `wgpu`.
    pub backend: &'static str,
    pub adapter: String,
    pub scene: String,
    pub frames: u32,
    /// `home` or `random`.
    pub initial_placement: String,
    /// The random placement's seed; `None` with `home`.
    pub seed: Option<u64>,
    /// The filter's name, and the border of a bordered atlas.
    pub filter: String,
    pub border: u32,
    /// `relaunch` or `degrade`.
    pub miss: String,
    pub textures: usize,
    pub wall_seconds: f64,
}

impl QuakeReport {
    /// The report of `r` after the frames `rec` recorded, rendered with `o`, the last one's
    /// image `image`.
    pub fn new(
        r: &Renderer,
        rec: &Recorded,
        o: &RenderOptions,
        ran: Ran,
        image: &[u8],
    ) -> Result<Self, QuakeError> {
        let figures = Figures::of(r, rec, o.page)?;
        let held = r.held_pages_by_level()?;
        let total = figures.total_requests;
        let made = Made {
            workload: "quake",
            backend: ran.backend,
            adapter: ran.adapter,
            devices: r.sys.devices(),
            page_size: o.page,
            warmup_frames: 0,
            procedure: o.procedure,
            split: o.split.name(),
        };
        Ok(QuakeReport {
            core: ImageCore::new(made, ran.frames as usize, image),
            stages: figures.stages,
            gpu_stage_seconds: rec.gpu_stages,
            per_device: figures.per_device,
            scene: ran.scene,
            width: o.width,
            height: o.height,
            split_on_pages: r.sys.split_on_pages(),
            clear_each_frame: o.clear_each_frame,
            drop_unused: o.drop_unused,
            initial_placement: ran.initial_placement,
            seed: ran.seed,
            textures: ran.textures,
            atlas_width: r.atlas.width,
            atlas_height: r.atlas.height,
            atlas_pages: r.atlas.page_count(),
            texture_pages: figures.texture_pages,
            wall_seconds: ran.wall_seconds,
            frame_seconds: rec.frame_seconds.clone(),
            frame_gpu_seconds: rec.frame_gpu_seconds.iter().copied().collect(),
            mean_requests_per_frame: total
                .iter()
                .map(|&t| t as f64 / ran.frames as f64)
                .collect(),
            total_requests: total,
            requests: rec.requests.clone(),
            other_requests: rec.other_requests.clone(),
            triangles_by_frame: rec.triangles.clone(),
            texture_footprint: figures.texture_footprint,
            per_texture: figures.per_texture,
            filtering: r.mip_layout().map(|m| FilterReport {
                filter: ran.filter,
                border: ran.border,
                levels: m.levels(),
                chain_pages: m.page_count(),
                border_overhead: m.border_overhead(),
                requests_by_level: rec.by_level.clone(),
                pages_by_level: (0..m.levels())
                    .map(|l| m.pages_xy(l).map_or(0, |(x, y)| x * y))
                    .collect(),
                held_pages_by_level: held.clone(),
                page_bytes: r.atlas_entry().desc.page_bytes(),
                miss: ran.miss,
                degrade: DegradeFigures::of(r, &rec.degrade),
            }),
        })
    }

    /// The summary `tessera run quake` prints.
    pub fn summary(&self) -> String {
        let c = &self.core;
        let procedure = c.procedure;
        // Every setting that changes the counts below, so that two summaries side by side
        // say why they differ (a replay's summary names the same ones).
        let mut settings = String::new();
        if let Some(f) = &self.filtering {
            settings += &format!(", filter {}", f.filter);
            if f.border > 0 {
                settings += &format!(" with border {}", f.border);
            }
            settings += &format!(", miss {}", f.miss);
        }
        if self.clear_each_frame {
            settings += ", memory cleared each frame";
        }
        if self.drop_unused {
            settings += ", unused pages dropped";
        }
        if let Some(seed) = self.seed {
            settings += &format!(", random initial placement (seed {seed})");
        }
        let mut s = format!(
            "quake: {}, {} {}x{} on {} device(s) [{}], split {}, page {}, procedure {procedure}{settings}\n",
            self.scene,
            tessera_runtime::error::count(c.frames as u64, "frame"),
            self.width,
            self.height,
            c.devices,
            c.adapter,
            c.split,
            c.page_size,
        );
        for (d, t) in self.total_requests.iter().enumerate() {
            s += &format!(
                "device {d}: {t} texture page requests ({} per frame); at the end it alone holds {} atlas pages, {} shared\n",
                crate::plot::fmt_num(self.mean_requests_per_frame[d]),
                self.texture_footprint[d].unique_pages,
                self.texture_footprint[d].shared_pages
            );
        }
        let host: Vec<_> = self.per_device.iter().map(|d| (d.device, d.host)).collect();
        s + &crate::host_table("host:", &host, None)
    }
}
