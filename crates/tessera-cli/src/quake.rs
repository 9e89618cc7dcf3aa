//! `tessera run quake` (the game trace of paper 4.1.2: split-screen frames through paged
//! textures, requests per frame and device, residency pictures, a trace) and `tessera trace
//! replay` (the memory manager driven by a trace, without rendering).

use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_core::PageSize;

use anyhow::Result;
use clap::{Args, ValueEnum};
use serde::Serialize;
use tessera_runtime::{Procedure, SystemConfig};
use tessera_workloads::quake::render::{Filtering, Miss, RenderOptions, Renderer, DEFAULT_TAIL};
use tessera_workloads::quake::replay::{replay_all, ReplayOptions, Replayed};
use tessera_workloads::quake::replay_text::{levels_csv, not_compared, requests_csv, PageSweep};
use tessera_workloads::quake::report::{QuakeReport, Ran};
use tessera_workloads::quake::run::{record, DegradeFigures};
use tessera_workloads::quake::trace::{Trace, BLOCK};
use tessera_workloads::quake::{map, pictures, Split, MAX_SCREEN_SIDE};
use tessera_workloads::raytrace::SceneSpec;

use crate::output::{create_dir, shown, write_json, write_png};
use crate::run::progress;
use crate::{parse_procedure, parse_threads, NodeOpts};

/// `--scene`: the game trace's own procedural room (`generated`, 42 textures, 8x8 to
/// 512x256), tessera-scene's generated room with N × N boxes (`generated:N`, the scene of
/// `run raytrace` and `run vr`), or an OpenArena map (`openarena:MAP`, as `--map MAP`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuakeScene {
    Room,
    Spec(SceneSpec),
}

fn parse_scene(s: &str) -> Result<QuakeScene, String> {
    if s == "generated" {
        return Ok(QuakeScene::Room);
    }
    s.parse().map(QuakeScene::Spec)
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

impl FilterKind {
    /// The sampler's filter; `None` for the nearest texel of a plain atlas.
    pub fn filter(self) -> Option<tessera_core::Filter> {
        match self {
            FilterKind::Nearest => None,
            FilterKind::Bilinear => Some(tessera_core::Filter::Bilinear),
            FilterKind::Trilinear => Some(tessera_core::Filter::Trilinear),
        }
    }
}

/// `--miss`: what a filtered sample does when its atlas page is not on its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MissKind {
    /// Fault, bring the page, run the pixel again: every frame exact.
    Relaunch,
    /// Serve the sample from the finest resident coarser level and bring the page for a
    /// later frame: no pixel runs twice for a texture page (one may where two devices'
    /// strips share a framebuffer page).
    Degrade,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Every page starts at home only.
    Home,
    /// Every atlas page starts as a read copy on one device chosen at random (`run quake
    /// --seed`; a replay takes the recorded seed), the start of the paper's Fig 13.
    Random,
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
    /// The scene: `generated` (the game trace's procedural room), `generated:N`
    /// (tessera-scene's room with N × N boxes, as in `run raytrace`) or `openarena:MAP`.
    #[arg(long, value_name = "SCENE", value_parser = parse_scene, conflicts_with = "map")]
    scene: Option<QuakeScene>,
    /// Render this Quake 3 / OpenArena map (`oa_dm1`; `tessera scene list` lists the maps a pak
    /// set holds) along its camera path through the spawn points: `--scene openarena:NAME`.
    #[arg(long, value_name = "NAME")]
    map: Option<String>,
    /// Where the map's pk3 files are (`bash scripts/openarena.sh` installs OpenArena's there).
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Frames to render (along the scene's camera path), at most a million.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=crate::MAX_PATH_FRAMES as i64))]
    frames: u32,
    /// Length of the camera path in frames (the path is one loop), at most a million;
    /// `--frames` renders its first frames. The same as `--frames` when not given.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=crate::MAX_PATH_FRAMES as i64))]
    path_frames: Option<u32>,
    /// Number of devices, each rendering one strip of the screen.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// How the screen is split: left-right (vertical strips, device 0 on the left) or
    /// top-bottom (horizontal strips, device 0 at the bottom).
    #[arg(long, default_value = "left-right")]
    split: Split,
    /// Whether the screen is cut on page boundaries where every strip stays within a quarter
    /// of an even share (on), so that no page of the frame is written by two devices, or
    /// evenly, as the paper's split screen (off).
    #[arg(long, default_value = "on", value_parser = crate::on_off(), action = clap::ArgAction::Set)]
    split_on_pages: bool,
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
    pub trace: Option<PathBuf>,
    /// Empty every device's texture memory at the start of each frame (the paper's Fig 12).
    #[arg(long)]
    clear_each_frame: bool,
    /// How each frame's pass gets its pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    #[command(flatten)]
    node: NodeOpts,
    /// Write frame-NNNN.png every K frames and after the last (0: only the last).
    #[arg(long, value_name = "K", default_value_t = 50)]
    png_every: u32,
    /// Write residency/frame-NNNN.png after every frame: each atlas page coloured by the
    /// device that holds it (the paper's Fig 13); a filtered run's coarser mip levels in a
    /// row under level 0.
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

pub fn run_quake(o: &QuakeOpts) -> Result<()> {
    if o.trace.is_some() && o.page.get() < BLOCK {
        return Err(crate::usage(format!("--trace records {BLOCK}x{BLOCK} texel blocks: it needs --page {BLOCK} or more (got {})", o.page.get())));
    }
    if o.trace.is_some() && o.filter != FilterKind::Nearest {
        return Err(crate::usage(format!("--trace records the full-resolution texels each frame samples, not the coarser mip levels --filter {} also reads, so no replay could match the recorded run: record with --filter nearest", value_name(o.filter))));
    }
    // More devices than columns (or rows) to split: a usage error before anything runs.
    o.split
        .partition()
        .regions(o.width, o.height, o.devices as u32)
        .map_err(crate::usage)?;
    create_dir(&o.out)?;
    let cfg = o.node.config(o.devices).split_on_pages(o.split_on_pages);
    let (sys, adapter) = o.node.system(&cfg)?;
    let backend_name = adapter.unwrap_or_else(|| sys.backend().to_string());
    let path = o.path_frames.unwrap_or(o.frames);
    if path < o.frames {
        return Err(crate::usage(format!(
            "--path-frames {path} is shorter than --frames {}",
            o.frames
        )));
    }
    let spec = match (&o.map, &o.scene) {
        (Some(name), _) => Some(SceneSpec::OpenArena(name.clone())),
        (None, Some(QuakeScene::Spec(spec))) => Some(spec.clone()),
        (None, None | Some(QuakeScene::Room)) => None,
    };
    let (mesh, mut cams, scene_name, warning) = map::load(spec.as_ref(), &o.pak_dir, path)?;
    crate::warn(warning);
    cams.truncate(o.frames as usize);
    let options = RenderOptions {
        width: o.width,
        height: o.height,
        page: o.page.get(),
        split: o.split,
        procedure: o.procedure,
        clear_each_frame: o.clear_each_frame,
        drop_unused: o.drop_unused,
    };
    let mut r = Renderer::new_with(sys, mesh, options, o.filtering())?;
    if o.initial_placement == Placement::Random {
        r.place_randomly(o.seed)?;
    }
    let residency_dir = o.out.join("residency");
    if o.residency_png {
        create_dir(&residency_dir)?;
    }
    let aspect = o.width as f64 / o.height as f64;
    let bar = progress(o.frames as u64, "quake");
    let start = Instant::now();
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
                    last_image = image;
                }
            }
            if o.residency_png {
                let path = residency_dir.join(format!("frame-{f:04}.png"));
                write_residency(r, f as u32 + 1, &path)?;
            }
            bar.set_message(format!("requests {:?}", s.requests));
            bar.inc(1);
            Ok(())
        },
    )?;
    bar.finish();
    let wall = start.elapsed().as_secs_f64();
    if let Some(cam) = cams.last().filter(|_| o.verify) {
        let checked = crate::verify::require_image(&r.reference_image(cam)?, &last_image);
        if o.miss == MissKind::Degrade {
            // Not necessarily a defect: say which reading the user should check first.
            checked.map_err(|e| {
                anyhow::anyhow!(
                    "{e:#} (--miss degrade serves a sample whose page has not arrived from a \
                     coarser level, so a frame differs from the unpaged one until its pages are \
                     there: a still view converges in a few frames, a moving view or \
                     --clear-each-frame may never)"
                )
            })?;
        } else {
            checked?;
        }
    }
    let mut report = QuakeReport::new(
        &r,
        &rec,
        &options,
        Ran {
            backend: o.node.backend.name(),
            adapter: backend_name,
            scene: scene_name,
            frames: o.frames,
            initial_placement: value_name(o.initial_placement),
            seed: (o.initial_placement == Placement::Random).then_some(o.seed),
            filter: value_name(o.filter),
            miss: value_name(o.miss),
            border: o.border,
            textures: r.mesh().textures.len(),
            wall_seconds: wall,
        },
        &last_image,
    )?;
    report.core.verified = o.verify.then_some(true);
    let requests = &report.requests;
    let json = o.out.join("report.json");
    write_json(&json, &report)?;
    write_requests_csv(&o.out.join("requests.csv"), requests)?;
    if o.miss == MissKind::Degrade {
        crate::output::write_whole(
            &o.out.join("degrade.csv"),
            DegradeFigures::csv(&rec.degrade).as_bytes(),
        )?;
    }
    pictures::requests_chart(
        &o.out.join("requests"),
        requests,
        o.page.get(),
        o.clear_each_frame,
    )?;
    if r.mip_layout().is_some() {
        crate::output::write_whole(
            &o.out.join("requests_by_level.csv"),
            levels_csv(&rec.by_level).as_bytes(),
        )?;
        pictures::levels_chart(
            &o.out.join("requests_by_level"),
            &rec.by_level,
            o.page.get(),
        )?;
    }
    if let Some(path) = &o.trace {
        let random = (o.initial_placement == Placement::Random).then_some(o.seed);
        let trace = rec.into_trace(&r, random);
        crate::output::write_on_commit(path, &trace.encode())?;
        wrote!("wrote {}", path.display());
    }
    out!("{}", report.summary());
    outln!("wall time {wall:.2} s");
    wrote!(
        "wrote {} and, beside it, requests.csv, the request plots and the frames' PNGs",
        shown(&json)
    );
    Ok(())
}

impl QuakeOpts {
    /// The folder the run reads its map from.
    pub fn pak_dir(&self) -> &Path {
        &self.pak_dir
    }

    /// What `--filter` and `--border` ask the renderer for.
    fn filtering(&self) -> Option<Filtering> {
        let filter = self.filter.filter()?;
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
}

/// The name `--help` gives a value of an option.
fn value_name(v: impl ValueEnum) -> String {
    v.to_possible_value()
        .expect("every value is named")
        .get_name()
        .to_string()
}

fn write_requests_csv(path: &Path, requests: &[Vec<u64>]) -> Result<()> {
    crate::output::write_whole(path, requests_csv(requests).as_bytes())
}

fn write_residency(r: &Renderer, frames: u32, path: &Path) -> Result<()> {
    let p = pictures::residency_image(r, frames)?;
    write_png(path, p.width, p.height, &p.rgba)
}

/// A page side to replay a trace at: a page side (`--page`'s rule) no smaller than the blocks
/// a trace records, checked for every size of a sweep before the first runs.
fn replay_page(s: &str) -> Result<u32, String> {
    at_least_a_block(crate::parse_page(s)?.get())
}

/// `--pages`: a list of page sides, as `sweep page-size` takes (`...` doubles), each no
/// smaller than a block.
fn replay_pages(s: &str) -> Result<crate::lists::List, String> {
    let pages = crate::lists::parse_pages(s)?;
    for &p in &pages.0 {
        at_least_a_block(p)?;
    }
    Ok(pages)
}

fn at_least_a_block(p: u32) -> Result<u32, String> {
    if p < BLOCK {
        return Err(format!(
            "a trace records {BLOCK}x{BLOCK} blocks, so it replays at page sides of {BLOCK} or more"
        ));
    }
    Ok(p)
}

#[derive(Args, Clone)]
pub struct ReplayOpts {
    /// The trace file (`tessera run quake --trace FILE`).
    pub(crate) file: PathBuf,
    /// Page side P to replay at (at least the trace's block side, 4); the recorded one when
    /// not given.
    #[arg(long, value_parser = replay_page)]
    page: Option<u32>,
    /// Devices to replay on (at most the recorded count; adjacent strips merge); the
    /// recorded count when not given.
    #[arg(long, value_parser = crate::parse_device_count)]
    devices: Option<usize>,
    /// Empty every device's texture memory at the start of each frame (alone or `on`;
    /// `--clear-each-frame off`: do not); as the recorded run did when not given.
    #[arg(long, num_args = 0..=1, default_missing_value = "on", value_name = "on|off", value_parser = crate::on_off())]
    clear_each_frame: Option<bool>,
    /// After each frame, drop each device's pages it did not touch in that frame (alone or
    /// `on`; `--drop-unused off`: do not); as the recorded run did when not given.
    #[arg(long, num_args = 0..=1, default_missing_value = "on", value_name = "on|off", value_parser = crate::on_off())]
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
    /// Also write the requests per frame and device as CSV (frame,device,texture_requests),
    /// once the replay has succeeded.
    #[arg(long, value_name = "FILE", conflicts_with = "pages")]
    pub(crate) csv: Option<PathBuf>,
    /// A page-size sweep: replay once per page size (a list such as 8,16,32,64 or 4,8,...,64)
    /// and write `--out`/sweep.csv and plots of requests per frame and texture memory per
    /// device against the page size.
    #[arg(long, conflicts_with = "page", value_parser = replay_pages)]
    pub(crate) pages: Option<crate::lists::List>,
    /// Output directory: a sweep's sweep.csv and plots (default out/replay); without
    /// `--pages`, requests.csv and the plot of requests per frame and device.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
}

/// The replay's settings at `page`: the options given, the recorded run's otherwise.
fn settings(o: &ReplayOpts, trace: &Trace, page: u32) -> ReplayOptions {
    ReplayOptions::of(
        trace,
        page,
        o.procedure,
        o.clear_each_frame,
        o.drop_unused,
        o.initial_placement.map(|p| p == Placement::Random),
    )
}

fn replay_on(o: &ReplayOpts, trace: &Trace, page: u32, devices: usize) -> Result<(Replayed, f64)> {
    let options = settings(o, trace, page);
    let sys = tessera_runtime::System::cpu(&SystemConfig::new(devices).threads(o.threads))?;
    let bar = progress(trace.frames.len() as u64, &format!("replay page {page}"));
    let start = Instant::now();
    let got = replay_all(&sys, trace, &options, |_| bar.inc(1))?;
    bar.finish_and_clear();
    Ok((got, start.elapsed().as_secs_f64()))
}

pub fn trace_replay(o: &ReplayOpts) -> Result<()> {
    let trace = Trace::read(&o.file)?;
    let devices = ReplayOptions::devices(&trace, o.devices)?;
    if let Some(pages) = &o.pages {
        return sweep(o, &pages.0, &trace, devices);
    }
    let page = o.page.unwrap_or(trace.page);
    let (got, secs) = replay_on(o, &trace, page, devices)?;
    let options = settings(o, &trace, page);
    out!("{}", got.summary(&options, devices, secs));
    if let Some(path) = &o.csv {
        crate::output::write_on_commit(path, requests_csv(&got.requests).as_bytes())?;
        wrote!("wrote {}", path.display());
    }
    if let Some(dir) = &o.out {
        create_dir(dir)?;
        write_requests_csv(&dir.join("requests.csv"), &got.requests)?;
        pictures::requests_chart(
            &dir.join("requests"),
            &got.requests,
            page,
            options.clear_each_frame,
        )?;
        wrote!(
            "wrote {} and the request plots beside it",
            shown(&dir.join("requests.csv"))
        );
    }
    if options.as_recorded(&trace, devices) {
        outln!("{}", got.compare(&trace)?);
    } else {
        outln!("{}", not_compared(&options, &trace, devices));
    }
    Ok(())
}

fn sweep(o: &ReplayOpts, pages: &[u32], trace: &Trace, devices: usize) -> Result<()> {
    let out = o.out.clone().unwrap_or_else(|| PathBuf::from("out/replay"));
    create_dir(&out)?;
    let mut sweep = PageSweep::new(devices, trace.frames.len());
    for &page in pages {
        let (got, secs) = replay_on(o, trace, page, devices)?;
        out!("{}", sweep.add(page, &got, secs));
        // The recorded point is checked as a single replay checks it: a trace whose requests
        // the replay does not reproduce fails the sweep before anything is written.
        if settings(o, trace, page).as_recorded(trace, devices) {
            outln!("{}", got.compare(trace)?);
        }
    }
    let path = out.join("sweep.csv");
    crate::output::write(&path, &sweep.csv)?;
    let clear = settings(o, trace, trace.page).clear_each_frame;
    sweep.plots(&out, clear)?;
    wrote!(
        "wrote {} and the memory and request plots beside it",
        shown(&path)
    );
    Ok(())
}
