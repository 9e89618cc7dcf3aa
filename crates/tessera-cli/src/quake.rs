//! `tessera run quake` (the game trace of paper 4.1.2: split-screen frames through paged
//! textures, requests per frame and device, residency pictures, a trace) and `tessera trace
//! replay` (the memory manager driven by a trace, without rendering).

use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_core::PageSize;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use tessera_runtime::{Procedure, SystemConfig};
use tessera_workloads::quake::render::{Filtering, Miss, RenderOptions, Renderer, DEFAULT_TAIL};
use tessera_workloads::quake::replay::{replay_all, ReplayOptions, Replayed};
use tessera_workloads::quake::run::{
    record, DegradeFigures, Figures, Footprint, QuakeDevice, TextureFigures,
};
use tessera_workloads::quake::trace::{Trace, BLOCK};
use tessera_workloads::quake::{
    map, pictures, reference, scene, Camera, Mesh, Split, MAX_SCREEN_SIDE,
};

use crate::backend;
use crate::report::write_png;
use crate::run::progress;
use crate::{parse_procedure, parse_threads, BackendKind};
use tessera_workloads::plot::{line_chart, LineChart, Series};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SceneKind {
    /// The procedural room of `tessera_workloads::quake::scene` (42 textures, 8x8 to 512x256).
    Generated,
}

/// `--filter`: how a pixel samples its texture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FilterKind {
    /// The nearest texel of the full-resolution atlas (no mip chain): the original renderer.
    Nearest,
    /// Four texels of the nearest mip level of a mipmapped atlas.
    Bilinear,
    /// Bilinear samples of the two mip levels around the level of detail, blended.
    Trilinear,
}

/// `--miss`: what a filtered sample does when its atlas page is not on its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissKind {
    /// Fault, bring the page, run the pixel again: every frame exact.
    Relaunch,
    /// Serve the sample from the finest resident coarser level and bring the page for a
    /// later frame: no pixel runs twice.
    Degrade,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every page starts at home only.
    Home,
    /// Every atlas page starts as a read copy on one device chosen at random (`--seed`), the
    /// start of the paper's Fig 13.
    Random,
}

fn parse_split(s: &str) -> Result<Split, String> {
    s.parse()
}

/// `--width` and `--height`: 1 to the rasterizer's largest side.
fn screen_side(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SCREEN_SIDE).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a screen side from 1 to {MAX_SCREEN_SIDE} pixels"
        )),
    }
}

#[derive(Args, Clone)]
pub struct QuakeOpts {
    /// Where the scene comes from when no `--map` is given.
    #[arg(long, value_enum, default_value = "generated")]
    scene: SceneKind,
    /// Render this Quake 3 / OpenArena map (`oa_dm1`; `tessera scene info` lists what a pak
    /// set holds) along its camera path through the spawn points, instead of `--scene`.
    #[arg(long, value_name = "NAME")]
    map: Option<String>,
    /// Where the map's pk3 files are (`bash scripts/openarena.sh` installs OpenArena's there).
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Frames to render (along the scene's camera path).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Length of the camera path in frames (the path is one loop); `--frames` renders its
    /// first frames. The same as `--frames` when not given.
    #[arg(long)]
    path_frames: Option<u32>,
    /// Number of devices, each rendering one strip of the screen.
    #[arg(long, default_value_t = 2)]
    devices: usize,
    /// How the screen is split: left-right (vertical strips, device 0 on the left) or
    /// top-bottom (horizontal strips, device 0 at the bottom).
    #[arg(long, default_value = "left-right", value_parser = parse_split)]
    split: Split,
    /// Page side P in texels (atlas, framebuffer): a power of two from 1 to 512.
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// Screen width in pixels (at most 2048).
    #[arg(long, default_value_t = 640, value_parser = screen_side)]
    width: u32,
    /// Screen height in pixels (at most 2048).
    #[arg(long, default_value_t = 480, value_parser = screen_side)]
    height: u32,
    /// Output directory.
    #[arg(long, default_value = "out/quake")]
    pub(crate) out: PathBuf,
    /// Also write the trace (texture blocks per frame and device) to FILE.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Empty every device's texture memory at the start of each frame (the paper's Fig 12).
    #[arg(long)]
    clear_each_frame: bool,
    /// How each frame's pass gets its pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// Device backend.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendKind,
    /// CPU threads for the software devices (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Write frame-NNNN.png every K frames and after the last (0: only the last).
    #[arg(long, value_name = "K", default_value_t = 50)]
    png_every: u32,
    /// Write residency/frame-NNNN.png after every frame: each atlas page coloured by the
    /// device that holds it (the paper's Fig 13).
    #[arg(long)]
    residency_png: bool,
    /// After each frame, drop each device's texture pages it did not sample in that frame: a
    /// page stays on a device only while the device keeps using it (the paper's Fig 13).
    #[arg(long)]
    drop_unused: bool,
    /// Where the atlas pages start.
    #[arg(long, value_enum, default_value = "home")]
    initial_placement: Placement,
    /// Seed of the random initial placement.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also render the last frame with the unpaged rasterizer and compare pixel for pixel; a
    /// difference fails the command and writes nothing.
    #[arg(long)]
    verify: bool,
    /// How a pixel samples its texture: nearest (the full-resolution atlas, no mip chain),
    /// or bilinear / trilinear from a mipmapped atlas at a level of detail from the texture
    /// coordinates' screen-space derivatives.
    #[arg(long, value_enum, default_value = "nearest")]
    filter: FilterKind,
    /// Border of each atlas page, in texels copied from its neighbours, so that a bilinear
    /// tap set inside a texture takes one translation (bilinear or trilinear only; at most a
    /// quarter of --page). A bordered atlas is read-only, replicated to its readers.
    #[arg(long, value_name = "B", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=128))]
    border: u32,
    /// What a filtered sample does when its atlas page is not on its device: relaunch (fault
    /// and run the pixel again, exact) or degrade (a coarser resident level now, the page
    /// for a later frame; the levels of at most 64x64 texels are replicated on every device).
    #[arg(long, value_enum, default_value = "relaunch")]
    miss: MissKind,
}

/// The filtered renderer's own figures.
#[derive(Serialize)]
struct FilterReport {
    filter: FilterKind,
    border: u32,
    /// Levels of the atlas's mip chain.
    levels: u32,
    /// Pages of the whole chain (level 0 is `atlas_pages`).
    chain_pages: u64,
    /// Memory the borders add to every page: (P + 2B)² / P² − 1.
    border_overhead: f64,
    /// Per frame, per mip level: texture page requests of all devices.
    requests_by_level: Vec<Vec<u64>>,
    miss: MissKind,
    /// With --miss degrade.
    #[serde(skip_serializing_if = "Option::is_none")]
    degrade: Option<DegradeFigures>,
}

/// The schema's core (docs/report.schema.json), then the game trace's own section.
#[derive(Serialize)]
struct QuakeReport {
    schema_version: u32,
    workload: &'static str,
    /// `cpu` or `wgpu`.
    backend: &'static str,
    /// The devices as the backend describes them (the wgpu adapter's name on wgpu).
    adapter: String,
    devices: usize,
    page_size: u32,
    frames: u32,
    warmup_frames: u32,
    procedure: Procedure,
    split: &'static str,
    /// FNV-1a of the last frame's framebuffer (`checksum_kind`: "image").
    checksum: String,
    checksum_kind: &'static str,
    time_kind: &'static str,
    /// Summed over devices and frames, seconds.
    stages: tessera_runtime::StageTimes,
    per_device: Vec<QuakeDevice>,
    /// `generated`, or `map:NAME`.
    scene: String,
    width: u32,
    height: u32,
    clear_each_frame: bool,
    drop_unused: bool,
    initial_placement: Placement,
    textures: usize,
    atlas_width: u32,
    atlas_height: u32,
    atlas_pages: u64,
    /// Atlas pages holding texels of some texture (the rest is padding).
    texture_pages: u64,
    /// Measured wall time of the whole loop (set-up, passes, read-backs, files).
    wall_seconds: f64,
    /// Per frame, measured wall time of its passes alone (no pictures, no trace).
    frame_seconds: Vec<f64>,
    /// Per frame, per device: texture page requests.
    requests: Vec<Vec<u64>>,
    /// Per frame, per device: requests for the frame's buffers and the framebuffer.
    other_requests: Vec<Vec<u64>>,
    /// Per device, texture page requests over all frames.
    total_requests: Vec<u64>,
    mean_requests_per_frame: Vec<f64>,
    triangles_per_frame: Vec<u32>,
    /// Per device, atlas pages it holds at the end: only it, and it and another device.
    texture_footprint: Vec<Footprint>,
    /// Per texture: its pages in the atlas and the requests for them.
    per_texture: Vec<TextureFigures>,
    /// With --filter bilinear or trilinear.
    #[serde(skip_serializing_if = "Option::is_none")]
    filtering: Option<FilterReport>,
}

/// The mesh, its camera path (`path` frames long) and the scene's name in the report.
fn scene_of(o: &QuakeOpts, path: u32) -> Result<(Mesh, Vec<Camera>, String)> {
    if let Some(name) = &o.map {
        let loaded = tessera_scene::Scene::load_map(&o.pak_dir, name)
            .with_context(|| format!("cannot load map {name}"))?;
        if loaded.triangles.is_empty() {
            bail!("map {name} has no surfaces to draw");
        }
        let cams = map::camera_path(&loaded, path);
        return Ok((Mesh::from(&loaded), cams, format!("map:{name}")));
    }
    match o.scene {
        SceneKind::Generated => Ok((
            scene::generated(),
            scene::camera_path(path),
            "generated".into(),
        )),
    }
}

fn csv_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

pub fn run_quake(o: &QuakeOpts) -> Result<()> {
    if o.clear_each_frame && o.initial_placement == Placement::Random {
        bail!("--initial-placement random and --clear-each-frame do not go together: the placement would be cleared before the first frame uses it");
    }
    if o.trace.is_some() && o.page.get() < BLOCK {
        bail!("--trace records {BLOCK}x{BLOCK} texel blocks: it needs --page {BLOCK} or more (got {})", o.page.get());
    }
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let cfg = SystemConfig {
        devices: o.devices,
        cpu_threads: o.threads,
        ..Default::default()
    };
    let (sys, adapter) = backend::system(o.backend, &cfg)?;
    let backend_name = adapter.unwrap_or_else(|| sys.backend().to_string());
    let path = o.path_frames.unwrap_or(o.frames);
    if path < o.frames {
        bail!("--path-frames {path} is shorter than --frames {}", o.frames);
    }
    let (mesh, mut cams, scene_name) = scene_of(o, path)?;
    cams.truncate(o.frames as usize);
    let sizes: Vec<(u32, u32)> = mesh.textures.iter().map(|t| (t.width, t.height)).collect();
    let reference_mesh = o.verify.then(|| mesh.clone());
    let mut r = Renderer::new_with(
        sys,
        mesh,
        RenderOptions {
            width: o.width,
            height: o.height,
            page: o.page.get(),
            split: o.split,
            procedure: o.procedure,
            clear_each_frame: o.clear_each_frame,
            drop_unused: o.drop_unused,
        },
        o.filtering(),
    )?;
    if o.initial_placement == Placement::Random {
        r.place_randomly(o.seed)?;
    }
    let residency_dir = o.out.join("residency");
    if o.residency_png {
        std::fs::create_dir_all(&residency_dir)
            .with_context(|| format!("cannot create {}", residency_dir.display()))?;
    }
    let aspect = o.width as f64 / o.height as f64;
    let bar = progress(o.frames as u64, "quake");
    let start = Instant::now();
    let mut checksum = String::new();
    let mut last_image = Vec::new();
    let rec = record(
        &mut r,
        &cams,
        aspect,
        o.trace.is_some(),
        |f, r, s| -> Result<()> {
            let last = f + 1 == cams.len();
            if last || (o.png_every > 0 && (f as u32).is_multiple_of(o.png_every)) {
                let path = o.out.join(format!("frame-{f:04}.png"));
                let image = r.framebuffer()?;
                write_png(&path, o.width, o.height, &image)?;
                if last {
                    checksum = crate::report::fnv1a_hex(&image);
                    last_image = image;
                }
            }
            if o.residency_png {
                let path = residency_dir.join(format!("frame-{f:04}.png"));
                write_residency(r, &path)?;
            }
            bar.set_message(format!("requests {:?}", s.requests));
            bar.inc(1);
            Ok(())
        },
    )?;
    bar.finish();
    let wall = start.elapsed().as_secs_f64();
    if let (Some(mesh), Some(cam)) = (&reference_mesh, cams.last()) {
        // The unpaged reference samples as the paged renderer does (`--filter`).
        let filter = o.filtering().map(|f| f.filter);
        let (want, _) = reference::render_filtered(
            mesh,
            &r.atlas,
            &cam.view_proj(aspect),
            o.width,
            o.height,
            filter,
        )?;
        crate::verify::require_image(&want, &last_image)?;
    }
    let n = o.devices;
    let figures = Figures::of(&r, &rec, o.page.get())?;
    let total = figures.total_requests;
    let requests = rec.requests;
    let degrade = DegradeFigures::of(&r, &rec.degrade);
    let report = QuakeReport {
        schema_version: crate::report::SCHEMA_VERSION,
        workload: "quake",
        backend: o.backend.name(),
        adapter: backend_name,
        devices: n,
        page_size: o.page.get(),
        frames: o.frames,
        warmup_frames: 0,
        procedure: o.procedure,
        split: o.split.name(),
        checksum,
        checksum_kind: "image",
        time_kind: "measured",
        stages: figures.stages,
        per_device: figures.per_device,
        scene: scene_name,
        width: o.width,
        height: o.height,
        clear_each_frame: o.clear_each_frame,
        drop_unused: o.drop_unused,
        initial_placement: o.initial_placement,
        textures: sizes.len(),
        atlas_width: r.atlas.width,
        atlas_height: r.atlas.height,
        atlas_pages: r.atlas.page_count(),
        texture_pages: figures.texture_pages,
        wall_seconds: wall,
        frame_seconds: rec.frame_seconds,
        mean_requests_per_frame: total.iter().map(|&t| t as f64 / o.frames as f64).collect(),
        total_requests: total.clone(),
        requests: requests.clone(),
        other_requests: rec.other_requests,
        triangles_per_frame: rec.triangles,
        texture_footprint: figures.texture_footprint,
        per_texture: figures.per_texture,
        filtering: r.mip_layout().map(|m| FilterReport {
            filter: o.filter,
            border: o.border,
            levels: m.levels(),
            chain_pages: m.page_count(),
            border_overhead: m.border_overhead(),
            requests_by_level: rec.by_level.clone(),
            miss: o.miss,
            degrade,
        }),
    };
    let json = o.out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    write_requests_csv(&csv_path(&o.out, "requests.csv"), &requests)?;
    if o.miss == MissKind::Degrade {
        crate::output::write_whole(
            &csv_path(&o.out, "degrade.csv"),
            DegradeFigures::csv(&rec.degrade).as_bytes(),
        )?;
    }
    pictures::requests_chart(
        &o.out.join("requests"),
        &requests,
        o.page.get(),
        o.clear_each_frame,
    )?;
    if let Some(path) = &o.trace {
        let trace = Trace {
            block: BLOCK,
            devices: n as u32,
            width: o.width,
            height: o.height,
            split: o.split,
            page: o.page.get(),
            clear_each_frame: o.clear_each_frame,
            drop_unused: o.drop_unused,
            random_placement: (o.initial_placement == Placement::Random).then_some(o.seed),
            textures: sizes,
            frames: rec.trace_frames,
        };
        std::fs::write(path, trace.encode())
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("trace: {}", crate::output::shown(path).display());
    }
    println!(
        "quake: {} frames {}x{} on {n} device(s) ({}), split {}, page {}, {}{}",
        o.frames,
        o.width,
        o.height,
        report.backend,
        o.split.name(),
        o.page.get(),
        o.procedure_name(),
        if o.clear_each_frame {
            ", memory cleared each frame"
        } else {
            ""
        }
    );
    for (d, t) in total.iter().enumerate() {
        println!(
            "device {d}: {t} texture page requests ({:.1} per frame); holds {} atlas pages only it holds, {} shared",
            report.mean_requests_per_frame[d],
            report.texture_footprint[d].unique_pages,
            report.texture_footprint[d].shared_pages
        );
    }
    println!(
        "wall time {wall:.2} s; report {}",
        crate::output::shown(&json).display()
    );
    Ok(())
}

impl QuakeOpts {
    /// What `--filter` and `--border` ask the renderer for.
    fn filtering(&self) -> Option<Filtering> {
        let filter = match self.filter {
            FilterKind::Nearest => return None,
            FilterKind::Bilinear => tessera_core::Filter::Bilinear,
            FilterKind::Trilinear => tessera_core::Filter::Trilinear,
        };
        Some(Filtering {
            filter,
            border: self.border,
            miss: match self.miss {
                MissKind::Relaunch => Miss::Relaunch,
                MissKind::Degrade => Miss::Degrade { tail: DEFAULT_TAIL },
            },
        })
    }

    /// A combination of options that cannot work, found before anything runs (a usage
    /// error, as a bad value of one option is).
    pub fn usage_problem(&self) -> Option<String> {
        if self.border > 0 && self.filter == FilterKind::Nearest {
            return Some(
                "--border needs --filter bilinear or trilinear: the nearest filter reads the atlas without a mip chain or borders".into(),
            );
        }
        if self.miss == MissKind::Degrade && self.filter == FilterKind::Nearest {
            return Some(
                "--miss degrade needs --filter bilinear or trilinear: a degrading sample falls back on coarser mip levels, and the nearest filter reads the atlas without a mip chain".into(),
            );
        }
        if self.miss == MissKind::Degrade && self.procedure == Procedure::TwoPass {
            return Some(
                "--miss degrade needs --procedure relaunch: two-pass brings every page a frame samples before it runs, so nothing would degrade".into(),
            );
        }
        if self.border > self.page.get() / 4 {
            return Some(format!(
                "--border {} is too wide for --page {}: at most a quarter of the page side ({})",
                self.border,
                self.page.get(),
                self.page.get() / 4
            ));
        }
        None
    }

    fn procedure_name(&self) -> &'static str {
        match self.procedure {
            Procedure::TwoPass => "two-pass",
            Procedure::Relaunch => "relaunch",
        }
    }
}

fn write_requests_csv(path: &Path, requests: &[Vec<u64>]) -> Result<()> {
    let mut s = String::from("frame,device,requests\n");
    for (f, per) in requests.iter().enumerate() {
        for (d, r) in per.iter().enumerate() {
            s.push_str(&format!("{f},{d},{r}\n"));
        }
    }
    crate::output::write_whole(path, s.as_bytes())
}

/// Home only: light grey; padding pages (no texture): white; shared: near black.
fn write_residency(r: &Renderer, path: &Path) -> Result<()> {
    let (w, h, img) = pictures::residency_image(r)?;
    write_png(path, w, h, &img)
}

#[derive(Args, Clone)]
pub struct ReplayOpts {
    /// The trace file (`tessera run quake --trace FILE`).
    file: PathBuf,
    /// Page side P to replay at (at least the trace's block side, 4); the recorded one when
    /// not given.
    #[arg(long)]
    page: Option<u32>,
    /// Devices to replay on (at most the recorded count; adjacent strips merge); the
    /// recorded count when not given.
    #[arg(long)]
    devices: Option<usize>,
    /// Empty every device's texture memory at the start of each frame (`--clear-each-frame
    /// false`: do not); as the recorded run did when not given.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    clear_each_frame: Option<bool>,
    /// After each frame, drop each device's pages it did not touch in that frame
    /// (`--drop-unused false`: do not); as the recorded run did when not given.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    drop_unused: Option<bool>,
    /// Where the atlas pages start: home, or random (with the recorded run's seed, or 1); as
    /// the recorded run did when not given.
    #[arg(long, value_enum)]
    initial_placement: Option<Placement>,
    /// How each frame's touch pass gets its pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// CPU threads for the software devices (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Also write the requests per frame and device as CSV (frame,device,requests).
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// A page-size sweep: replay once per page size (comma-separated, e.g. 8,16,32,64) and
    /// write `--out`/sweep.csv and plots of requests per frame and texture memory per device
    /// against the page size.
    #[arg(long, value_delimiter = ',', conflicts_with = "page")]
    pub(crate) pages: Vec<u32>,
    /// Output directory: a sweep's sweep.csv and plots (default out/replay); without
    /// `--pages`, requests.csv and the plot of requests per frame and device.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

fn read_trace(path: &Path) -> Result<Trace> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Trace::decode(&bytes).with_context(|| format!("{}", path.display()))
}

/// The replay's settings: the options given, the recorded run's otherwise.
fn settings(o: &ReplayOpts, trace: &Trace) -> (bool, bool, Option<u64>) {
    let placement = match o.initial_placement {
        None => trace.random_placement,
        Some(Placement::Home) => None,
        Some(Placement::Random) => Some(trace.random_placement.unwrap_or(1)),
    };
    (
        o.clear_each_frame.unwrap_or(trace.clear_each_frame),
        o.drop_unused.unwrap_or(trace.drop_unused),
        placement,
    )
}

fn replay_on(o: &ReplayOpts, trace: &Trace, page: u32, devices: usize) -> Result<(Replayed, f64)> {
    let (clear_each_frame, drop_unused, random_placement) = settings(o, trace);
    let sys = tessera_runtime::System::cpu(&SystemConfig {
        devices,
        cpu_threads: o.threads,
        ..Default::default()
    })?;
    let bar = progress(trace.frames.len() as u64, &format!("replay page {page}"));
    let start = Instant::now();
    let got = replay_all(
        &sys,
        trace,
        &ReplayOptions {
            page,
            clear_each_frame,
            drop_unused,
            random_placement,
            procedure: o.procedure,
        },
        |_| bar.inc(1),
    )?;
    bar.finish_and_clear();
    Ok((got, start.elapsed().as_secs_f64()))
}

pub fn trace_replay(o: &ReplayOpts) -> Result<()> {
    let trace = read_trace(&o.file)?;
    let devices = o.devices.unwrap_or(trace.devices as usize);
    if devices == 0 || devices > trace.devices as usize {
        bail!(
            "--devices {devices}: the trace was recorded on {} device(s); replay on 1 to {}",
            trace.devices,
            trace.devices
        );
    }
    if !o.pages.is_empty() {
        return sweep(o, &trace, devices);
    }
    let page = o.page.unwrap_or(trace.page);
    let (got, secs) = replay_on(o, &trace, page, devices)?;
    let (clear, drop_unused, placement) = settings(o, &trace);
    let frames = got.requests.len().max(1) as f64;
    println!(
        "replay: {} frames on {devices} device(s), page {page}{}{}{}, {:.2} s",
        got.requests.len(),
        if clear {
            ", memory cleared each frame"
        } else {
            ""
        },
        if drop_unused {
            ", unused pages dropped"
        } else {
            ""
        },
        if placement.is_some() {
            ", random initial placement"
        } else {
            ""
        },
        secs
    );
    for d in 0..devices {
        let t: u64 = got.requests.iter().map(|f| f[d]).sum();
        println!(
            "device {d}: {t} texture page requests ({:.1} per frame); at the end {} pages only it holds, {} shared",
            t as f64 / frames,
            got.unique_pages[d],
            got.shared_pages[d]
        );
    }
    if let Some(path) = &o.csv {
        write_requests_csv(path, &got.requests)?;
    }
    if let Some(dir) = &o.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        write_requests_csv(&dir.join("requests.csv"), &got.requests)?;
        pictures::requests_chart(&dir.join("requests"), &got.requests, page, clear)?;
        println!(
            "requests: {}",
            crate::output::shown(&dir.join("requests.csv")).display()
        );
    }
    if page == trace.page
        && devices == trace.devices as usize
        && (clear, drop_unused, placement)
            == (
                trace.clear_each_frame,
                trace.drop_unused,
                trace.random_placement,
            )
    {
        for (f, (g, rec)) in got.requests.iter().zip(&trace.frames).enumerate() {
            for (d, (a, b)) in g.iter().zip(rec).enumerate() {
                if *a != b.requests {
                    bail!(
                        "frame {f}, device {d}: the replay made {a} requests; the recorded run made {}",
                        b.requests
                    );
                }
            }
        }
        println!("matches the recorded run: every frame and device");
    } else {
        println!(
            "(recorded at page {} on {} device(s){}{}: not compared at other settings)",
            trace.page,
            trace.devices,
            if trace.clear_each_frame {
                ", cleared each frame"
            } else {
                ""
            },
            if trace.drop_unused {
                ", unused pages dropped"
            } else {
                ""
            }
        );
    }
    Ok(())
}

fn sweep(o: &ReplayOpts, trace: &Trace, devices: usize) -> Result<()> {
    let out = o.out.clone().unwrap_or_else(|| PathBuf::from("out/replay"));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let mib = |pages: u64, bytes: u64| (pages * bytes) as f64 / (1u64 << 20) as f64;
    let mut csv =
        String::from("page,device,requests,requests_per_frame,unique_mib,shared_mib,seconds\n");
    let mut req: Vec<Series> = (0..devices)
        .map(|d| Series {
            name: format!("device {d}"),
            points: Vec::new(),
            secondary: false,
        })
        .collect();
    let mut mem: Vec<Series> = [
        "unique (all devices)",
        "shared (per device, summed)",
        "total",
    ]
    .iter()
    .map(|n| Series {
        name: n.to_string(),
        points: Vec::new(),
        secondary: false,
    })
    .collect();
    let frames = trace.frames.len().max(1) as f64;
    for &page in &o.pages {
        let (got, secs) = replay_on(o, trace, page, devices)?;
        let (mut unique, mut shared) = (0.0, 0.0);
        for d in 0..devices {
            let t: u64 = got.requests.iter().map(|f| f[d]).sum();
            let (u, s) = (
                mib(got.unique_pages[d], got.page_bytes),
                mib(got.shared_pages[d], got.page_bytes),
            );
            unique += u;
            shared += s;
            csv.push_str(&format!(
                "{page},{d},{t},{:.3},{u:.4},{s:.4},{secs:.3}\n",
                t as f64 / frames
            ));
            req[d].points.push((page as f64, t as f64 / frames));
            println!(
                "page {page}: device {d}: {:.1} requests per frame; {u:.3} MiB only it holds, {s:.3} MiB shared ({secs:.2} s)",
                t as f64 / frames
            );
        }
        mem[0].points.push((page as f64, unique));
        mem[1].points.push((page as f64, shared));
        mem[2].points.push((page as f64, unique + shared));
    }
    let path = out.join("sweep.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    let clear = if settings(o, trace).0 {
        ", memory cleared each frame"
    } else {
        ""
    };
    line_chart(
        &out.join("requests"),
        &LineChart {
            title: &format!("Texture page requests per frame against page size{clear}"),
            x_label: "page width (texels)",
            y_label: "requests per frame",
            x_log2: true,
            y_log: false,
            series: req,
        },
    )?;
    line_chart(
        &out.join("memory"),
        &LineChart {
            title: "Texture memory at the end against page size",
            x_label: "page width (texels)",
            y_label: "MiB",
            x_log2: true,
            y_log: false,
            series: mem,
        },
    )?;
    println!("sweep: {}", crate::output::shown(&path).display());
    Ok(())
}
