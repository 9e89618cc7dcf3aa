//! `tessera run vr` (OO-VR's stereo rendering over the GPMs of an `mcm-*` topology with one
//! scheme) and `tessera sweep vr` (its Figures 15–18 from the same runs).
//!
//! Every figure is modeled (docs/EVALUATION.md, "OO-VR"): per GPM, the device seconds of its
//! passes measured alone, plus (or, with OO-VR's pre-allocation, overlapped with) the link time
//! of the texture pages it fetched from other GPMs, plus the composition's link and ROP time.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tessera_core::PageSize;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use tessera_runtime::{Procedure, SystemConfig};
use tessera_scene::Scene;
use tessera_workloads::quake::map::camera_path;
use tessera_workloads::quake::Camera;
use tessera_workloads::raytrace::SceneSpec;
use tessera_workloads::vr::figures::{link_model, Figures, FOLLOWED};
use tessera_workloads::vr::render::{FrameMeasure, FrameReport};
use tessera_workloads::vr::run::{summarise, Run as VrRun, Summary};
use tessera_workloads::vr::{by_name, reference_stereo, LinkModel, StereoOptions, NAMES};

use crate::report::write_png;
use crate::run::progress;
use crate::{parse_procedure, parse_threads, BackendKind};

/// The most GPMs: the `mcm-8` preset's.
const MAX_GPMS: usize = 8;

#[derive(Args, Clone)]
#[command(group(clap::ArgGroup::new("source").required(true)))]
pub struct SceneOpts {
    /// The scene, drawn along its camera path: `generated[:N]` (the generated room with N × N
    /// boxes, 3 by default; 0 is the bare room) or `openarena:MAP` (a Quake 3 / OpenArena map
    /// from --pak-dir).
    #[arg(long, value_parser = parse_scene, group = "source")]
    scene: Option<SceneSpec>,
    /// Shorthand for `--scene openarena:NAME`.
    #[arg(long, value_name = "NAME", group = "source")]
    map: Option<String>,
    /// The older spelling of `--scene generated:N`.
    #[arg(long, value_name = "N", hide = true, group = "source")]
    generated: Option<u32>,
    /// Where the map's pk3 files are.
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Stereo frames measured along the camera path.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Frames rendered first and counted nowhere: on the first, every texture page is
    /// touched for the first time (and so homed where it is used), and OO-VR's predictor is
    /// fitted on its first batches.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// One eye's width in pixels (the stereo frame is twice as wide).
    #[arg(long, default_value_t = 320)]
    width: u32,
    /// One eye's height in pixels.
    #[arg(long, default_value_t = 240)]
    height: u32,
    /// Page side P in texels (atlas and framebuffers).
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How each pass gets its pages. Two-pass by default: a request pass, the pages, then
    /// the compute pass, so a piece's device work does not grow with fault-and-relaunch
    /// rounds (every frame misses every page it samples, since GPMs keep no texture page
    /// across frames).
    #[arg(long, default_value = "two-pass", value_parser = parse_procedure())]
    procedure: Procedure,
    /// CPU threads per software device (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Device backend: each GPM is a tessera device of it.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendKind,
}

#[derive(Args, Clone)]
pub struct VrOpts {
    #[command(flatten)]
    scene: SceneOpts,
    /// The distribution scheme: baseline, afr, sfr-v, sfr-h, object, oo-app or oo-vr.
    #[arg(long, default_value = "oo-vr")]
    scheme: String,
    /// Devices, here GPU modules: 1 to 8 (the mcm-4 preset up to 4, mcm-8 above).
    #[arg(long = "devices", visible_alias = "gpms", value_name = "N", default_value_t = 4, value_parser = parse_gpms)]
    gpms: usize,
    /// Bandwidth of each inter-GPM link, one direction, GB/s (OO-VR: 64).
    #[arg(long, default_value_t = 64.0, value_parser = crate::parse_positive)]
    link_gbps: f64,
    /// Output directory.
    #[arg(long, default_value = "out/vr")]
    pub(crate) out: PathBuf,
    /// Also draw the last stereo frame with the unpaged rasterizer and compare pixel for
    /// pixel; a difference fails the command and writes nothing.
    #[arg(long)]
    verify: bool,
}

#[derive(Args, Clone)]
pub struct VrSweepOpts {
    #[command(flatten)]
    scene: SceneOpts,
    /// Output directory.
    #[arg(long, default_value = "out/vr-sweep")]
    pub(crate) out: PathBuf,
    /// Runs of every point, interleaved (round 1 runs every point, then round 2 ...); each
    /// point keeps its run of median modeled latency at 64 GB/s. On a shared machine one
    /// descheduled pass inflates a run; the median resists that.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    rounds: u32,
}

/// The scene, its camera path and its name in reports.
fn load_scene(o: &SceneOpts) -> Result<(Scene, Vec<Camera>, String)> {
    let spec = match (&o.scene, &o.map, o.generated) {
        (Some(spec), _, _) => spec.clone(),
        (None, Some(name), _) => SceneSpec::OpenArena(name.clone()),
        (None, None, Some(n)) => SceneSpec::Generated(n),
        (None, None, None) => bail!("give a scene: --scene generated[:N]|openarena:MAP"),
    };
    let (scene, name) = match spec {
        SceneSpec::OpenArena(name) => (
            Scene::load_map(&o.pak_dir, &name)
                .with_context(|| format!("cannot load map {name}"))?,
            format!("map:{name}"),
        ),
        SceneSpec::Generated(n) => (Scene::generated(n), format!("generated:{n}")),
    };
    if scene.triangles.is_empty() {
        bail!("{name} has no surfaces to draw");
    }
    let total = o
        .frames
        .checked_add(o.warmup)
        .context("--frames plus --warmup is too large")?;
    let cams = camera_path(&scene, total);
    Ok((scene, cams, name))
}

/// `--devices` of vr, read as clap reads every option (a bad one is a usage error).
fn parse_gpms(s: &str) -> std::result::Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_GPMS).contains(&n) => Ok(n),
        _ => Err(format!("must be between 1 and {MAX_GPMS} (got {s})")),
    }
}

fn stereo_options(o: &SceneOpts) -> StereoOptions {
    StereoOptions {
        width: o.width,
        height: o.height,
        page: o.page.get(),
        procedure: o.procedure,
    }
}

fn parse_scene(s: &str) -> Result<SceneSpec, String> {
    s.parse()
}

fn execute(
    o: &SceneOpts,
    scene: &Scene,
    cams: &[Camera],
    scheme: &str,
    gpms: usize,
    tick: impl FnMut(),
) -> Result<VrRun> {
    let mut scheme = by_name(scheme)?;
    let (sys, _) = crate::backend::system(
        o.backend,
        &SystemConfig {
            devices: gpms,
            cpu_threads: o.threads,
            ..Default::default()
        },
    )?;
    Ok(tessera_workloads::vr::run::run(
        sys,
        scene,
        cams,
        scheme.as_mut(),
        stereo_options(o),
        o.warmup,
        tick,
    )?)
}

/// One GPM's measured figures, summed over the run's frames.
#[derive(Serialize)]
struct VrDevice {
    device: usize,
    /// Measured device seconds of its passes.
    busy_seconds: f64,
    /// Texture pages it fetched from its own memory, and from the other GPMs.
    local_texture_pages: u64,
    remote_texture_pages: u64,
}

/// The schema's core (docs/report.schema.json), then OO-VR's own section.
#[derive(Serialize)]
struct VrReport<'a> {
    schema_version: u32,
    workload: &'static str,
    /// `cpu` or `wgpu`.
    backend: &'static str,
    /// The devices as the backend describes them.
    adapter: &'a str,
    devices: usize,
    page_size: u32,
    frames: usize,
    warmup_frames: u32,
    procedure: Procedure,
    /// How the frame is split across GPMs: the scheme.
    split: &'a str,
    /// FNV-1a of the last stereo frame (`checksum_kind`: "image").
    checksum: String,
    checksum_kind: &'static str,
    time_kind: &'static str,
    /// Not timed stage by stage: a GPM's passes are timed whole (`per_device`).
    stages: Option<tessera_runtime::StageTimes>,
    per_device: Vec<VrDevice>,
    scene: &'a str,
    scheme: &'a str,
    width: u32,
    height: u32,
    link: LinkModel,
    /// Means over the frames (modeled; see docs/EVALUATION.md, "OO-VR").
    summary: Summary,
    /// Per frame: what was measured and counted.
    measured: &'a [FrameMeasure],
    /// Per frame: the modeled figures.
    modeled: Vec<FrameReport>,
    wall_seconds: f64,
    /// Per measured frame, its wall time.
    frame_seconds: &'a [f64],
}

pub fn run(o: &VrOpts) -> Result<()> {
    by_name(&o.scheme)?;
    let link = link_model(o.gpms, o.link_gbps)?;
    let (scene, cams, name) = load_scene(&o.scene)?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let bar = progress(cams.len() as u64, "vr");
    let run = execute(&o.scene, &scene, &cams, &o.scheme, o.gpms, || bar.inc(1))?;
    bar.finish_and_clear();
    if let Some(cam) = cams.last().filter(|_| o.verify) {
        let want = reference_stereo(&scene, cam, &stereo_options(&o.scene))?;
        crate::verify::require_image(&want, &run.last_image)?;
    }
    let summary = summarise(&run.frames, &link, o.gpms);
    let per_device = (0..o.gpms)
        .map(|d| VrDevice {
            device: d,
            busy_seconds: run.frames.iter().map(|m| m.busy[d]).sum(),
            local_texture_pages: run.frames.iter().map(|m| m.local_pages[d]).sum(),
            remote_texture_pages: run
                .frames
                .iter()
                .map(|m| {
                    (0..o.gpms)
                        .filter(|&from| from != d)
                        .map(|from| m.texture_pages[from][d])
                        .sum::<u64>()
                })
                .sum(),
        })
        .collect();
    let report = VrReport {
        schema_version: crate::report::SCHEMA_VERSION,
        workload: "vr",
        backend: o.scene.backend.name(),
        adapter: &run.backend,
        devices: o.gpms,
        page_size: o.scene.page.get(),
        frames: run.frames.len(),
        warmup_frames: o.scene.warmup,
        procedure: o.scene.procedure,
        split: &o.scheme,
        checksum: crate::report::fnv1a_hex(&run.last_image),
        checksum_kind: "image",
        time_kind: "measured",
        stages: None,
        per_device,
        scene: &name,
        scheme: &o.scheme,
        width: o.scene.width,
        height: o.scene.height,
        link,
        summary: summary.clone(),
        measured: &run.frames,
        modeled: run.frames.iter().map(|m| m.cost(&link)).collect(),
        wall_seconds: run.wall,
        frame_seconds: &run.frame_seconds,
    };
    let json = o.out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let png = o.out.join("stereo.png");
    write_png(&png, 2 * o.scene.width, o.scene.height, &run.last_image)?;
    println!(
        "vr: {name}, {} stereo frames {}x{} per eye after {} warm-up, scheme {}, {} GPM(s) at {} GB/s [{}]",
        run.frames.len(),
        o.scene.width,
        o.scene.height,
        o.scene.warmup,
        o.scheme,
        o.gpms,
        o.link_gbps,
        run.backend
    );
    println!(
        "modeled latency {:.2} ms/frame (frame interval {:.2} ms); inter-GPM traffic {:.2} MiB texture + {:.2} MiB composition per frame; load balance {:.2}{}",
        summary.latency_ms,
        summary.frame_interval_ms,
        summary.texture_mib,
        summary.composition_mib,
        summary.load_balance,
        summary
            .prediction_error
            .map_or(String::new(), |e| format!("; predictor error {:.1}%", e * 100.0))
    );
    println!(
        "wall time {:.2} s; report {}, image {}",
        run.wall,
        crate::output::shown(&json).display(),
        crate::output::shown(&png).display()
    );
    Ok(())
}

pub fn sweep(o: &VrSweepOpts) -> Result<()> {
    let (scene, cams, name) = load_scene(&o.scene)?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    // The runs: every scheme on 4 GPMs; the followed schemes on 2 and 8; AFR on 1 GPM, which
    // is one whole frame in one piece: the single GPU.
    let mut plan: Vec<(String, usize)> = NAMES.iter().map(|s| (s.to_string(), 4)).collect();
    for g in [2, 8] {
        plan.extend(FOLLOWED.iter().map(|s| (s.to_string(), g)));
    }
    plan.push(("afr".into(), 1));
    let bar = progress(
        (plan.len() * cams.len()) as u64 * o.rounds as u64,
        "vr sweep",
    );
    let mut tries: Vec<Vec<VrRun>> = plan.iter().map(|_| Vec::new()).collect();
    let mut backend = String::new();
    for round in 1..=o.rounds {
        for ((scheme, g), tries) in plan.iter().zip(&mut tries) {
            bar.set_message(format!("round {round}: {scheme} on {g} GPM(s)"));
            let run = execute(&o.scene, &scene, &cams, scheme, *g, || bar.inc(1))?;
            backend = run.backend.clone();
            tries.push(run);
        }
    }
    bar.finish_and_clear();
    let mut runs: Vec<(String, usize, Vec<FrameMeasure>)> = Vec::new();
    for ((scheme, g), mut tries) in plan.iter().zip(tries) {
        let link = link_model(*g, 64.0)?;
        tries.sort_by(|a, b| {
            let la = summarise(&a.frames, &link, *g).latency_ms;
            let lb = summarise(&b.frames, &link, *g).latency_ms;
            la.total_cmp(&lb)
        });
        let run = tries.swap_remove(tries.len() / 2);
        let dir = o.out.join(format!("{scheme}-{g}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        write_png(
            &dir.join("stereo.png"),
            2 * o.scene.width,
            o.scene.height,
            &run.last_image,
        )?;
        write(
            &dir,
            "measured.json",
            &serde_json::to_string_pretty(&run.frames)?,
        )?;
        runs.push((scheme.clone(), *g, run.frames));
    }
    let find = |s: &str, g: usize| {
        runs.iter()
            .find(|r| r.0 == s && r.1 == g)
            .map(|r| r.2.as_slice())
    };
    let figures = Figures::of(find)?;
    println!(
        "vr sweep: {name}, {} stereo frames {}x{} per eye after {} warm-up, page {} [{backend}], median of {} run(s) per point; modeled latency = slowest GPM (device work alone + texture link) + composition",
        cams.len() - o.scene.warmup as usize,
        o.scene.width,
        o.scene.height,
        o.scene.warmup,
        o.scene.page.get(),
        o.rounds
    );
    println!("Fig 15/16, 4 GPMs at 64 GB/s:");
    println!(
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
    for r in &figures.fig15 {
        let m = &r.summary;
        let err = m
            .prediction_error
            .map_or("-".to_string(), |e| format!("{:.1}%", e * 100.0));
        println!(
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
    println!("Fig 17, 4 GPMs, speed-up over the baseline at 64 GB/s:");
    for c in &figures.fig17 {
        let mut line = format!("{:>9}:", c.scheme);
        for (gbps, _, sp) in &c.points {
            let _ = write!(line, " {gbps} GB/s {sp:.2}");
        }
        println!("{line}");
    }
    println!(
        "Fig 18, speed-up over one GPU ({:.2} ms/frame), 64 GB/s:",
        figures.single_ms
    );
    for c in &figures.fig18 {
        let mut line = format!("{:>9}:", c.scheme);
        for (g, _, sp) in &c.points {
            let _ = write!(line, " {g}: {sp:.2}");
        }
        println!("{line}");
    }
    figures.write(&o.out)?;
    println!(
        "CSV and plots in {}",
        crate::output::shown(&o.out).display()
    );
    Ok(())
}

fn write(dir: &Path, name: &str, text: &str) -> Result<()> {
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
}
