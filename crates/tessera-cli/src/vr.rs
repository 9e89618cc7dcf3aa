//! `tessera run vr` (OO-VR's stereo rendering over the GPMs of an `mcm-*` topology with one
//! scheme) and `tessera sweep vr` (its Figures 15–18 from the same runs).
//!
//! Every figure is modeled (docs/EVALUATION.md, "OO-VR"): per GPM, the device seconds of its
//! passes measured alone, plus (or, with OO-VR's pre-allocation, overlapped with) the link time
//! of the texture pages it fetched from other GPMs, plus the composition's link and ROP time.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tessera_core::PageSize;
use tessera_runtime::Procedure;
use tessera_scene::Scene;
use tessera_workloads::quake::Camera;
use tessera_workloads::raytrace::SceneSpec;
use tessera_workloads::vr::figures::{link_model, Figures};
use tessera_workloads::vr::report::{
    load_scene as load_scene_of, sweep_medians, sweep_plan, Ran, VrReport,
};
use tessera_workloads::vr::run::Run as VrRun;
use tessera_workloads::vr::{by_name, reference_stereo, StereoOptions};
use tessera_workloads::Made;

use crate::output::{create_dir, shown, write_json, write_png};
use crate::run::progress;
use crate::{parse_procedure, NodeOpts};

/// The most GPMs: the `mcm-8` preset's.
const MAX_GPMS: usize = 8;

#[derive(Args, Clone)]
#[command(group(clap::ArgGroup::new("source")))]
pub struct SceneOpts {
    /// The scene (this or --map is required), drawn along its camera path: `generated[:N]` (the generated room with N × N
    /// boxes, 3 by default; 0 is the bare room) or `openarena:MAP` (a Quake 3 / OpenArena map
    /// from --pak-dir).
    #[arg(long, group = "source")]
    scene: Option<SceneSpec>,
    /// Shorthand for `--scene openarena:NAME`.
    #[arg(long, value_name = "NAME", group = "source")]
    map: Option<String>,
    /// The older spelling of `--scene generated:N`, with the same bound on N.
    #[arg(long, value_name = "N", hide = true, group = "source",
          value_parser = clap::value_parser!(u32).range(0..=tessera_workloads::raytrace::MAX_GENERATED as i64))]
    generated: Option<u32>,
    /// Where the map's pk3 files are.
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Stereo frames measured along the camera path, at most a million.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=crate::MAX_PATH_FRAMES as i64))]
    frames: u32,
    /// Frames rendered first and counted nowhere: on the first, every texture page is
    /// touched for the first time (and so homed where it is used), and OO-VR's predictor is
    /// fitted on its first batches. At most a million.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=crate::MAX_PATH_FRAMES as i64))]
    warmup: u32,
    /// One eye's width in pixels (the stereo frame is twice as wide).
    #[arg(long, default_value_t = 320, value_parser = screen_side())]
    width: u32,
    /// One eye's height in pixels.
    #[arg(long, default_value_t = 240, value_parser = screen_side())]
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
    // Each GPM is a tessera device of the backend.
    #[command(flatten)]
    node: NodeOpts,
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
    #[arg(long, default_value_t = 64.0, value_parser = crate::parse_gbps)]
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

/// A side of one eye's screen: 1 to the raster's largest.
fn screen_side() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=tessera_workloads::quake::MAX_SCREEN_SIDE as i64)
}

/// The scene, its camera path and its name in reports.
fn load_scene(o: &SceneOpts) -> Result<(Scene, Vec<Camera>, String)> {
    let spec = match (&o.scene, &o.map, o.generated) {
        (Some(spec), _, _) => spec.clone(),
        (None, Some(name), _) => SceneSpec::OpenArena(name.clone()),
        (None, None, Some(n)) => SceneSpec::Generated(n),
        // Not clap's required group, which would name the hidden older spelling in the usage.
        (None, None, None) => {
            return Err(crate::usage(
                "give a scene: --scene generated[:N]|openarena:MAP, or --map NAME",
            ))
        }
    };
    let (scene, cams, name) = load_scene_of(&spec, &o.pak_dir, o.frames.checked_add(o.warmup))?;
    crate::warn(scene.placeholder_warning());
    Ok((scene, cams, name))
}

/// The split-frame schemes cut the stereo frame into one strip per GPM: more GPMs than the
/// frame has columns (`sfr-v`) or rows (`sfr-h`) would leave some with nothing to draw, which
/// is refused before anything runs, as every command refuses more devices than rows or
/// columns to split.
/// `sweep`: the check is of a point of `sweep vr`, whose schemes and GPM counts are fixed, so
/// the advice is a larger frame alone.
fn check_strips(scheme: &str, gpms: usize, o: &SceneOpts, sweep: bool) -> Result<()> {
    let (along, what, side) = match scheme {
        "sfr-v" => (2 * o.width as usize, "columns (twice --width)", "--width"),
        "sfr-h" => (o.height as usize, "rows", "--height"),
        _ => return Ok(()),
    };
    if gpms > along {
        let least = match scheme {
            "sfr-v" => gpms.div_ceil(2),
            _ => gpms,
        };
        return Err(crate::usage(match sweep {
            false => format!(
                "--scheme {scheme} gives each GPM a strip of the stereo frame, but {gpms} GPMs are more than its {along} {what}: use at most {} or a larger {side}", tessera_runtime::error::count(along as u64, "GPM")
            ),
            true => format!(
                "sweep vr runs {scheme} on {gpms} GPMs, each a strip of the stereo frame, but its {along} {what} are fewer: give {side} {least} or more"
            ),
        }));
    }
    Ok(())
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

fn execute(
    o: &SceneOpts,
    scene: &Scene,
    cams: &[Camera],
    scheme: &str,
    gpms: usize,
    tick: impl FnMut(),
) -> Result<(VrRun, Option<String>)> {
    let mut scheme = by_name(scheme)?;
    let (sys, adapter) = o.node.system(&o.node.config(gpms))?;
    let run = tessera_workloads::vr::run::run(
        sys,
        scene,
        cams,
        scheme.as_mut(),
        stereo_options(o),
        o.warmup,
        tick,
    )?;
    Ok((run, adapter))
}

pub fn run(o: &VrOpts) -> Result<()> {
    by_name(&o.scheme).map_err(crate::usage)?;
    check_strips(&o.scheme, o.gpms, &o.scene, false)?;
    let link = link_model(o.gpms, o.link_gbps)?;
    let (scene, cams, name) = load_scene(&o.scene)?;
    create_dir(&o.out)?;
    let bar = progress(cams.len() as u64, "vr");
    let (run, adapter) = execute(&o.scene, &scene, &cams, &o.scheme, o.gpms, || bar.inc(1))?;
    bar.finish_and_clear();
    if let Some(cam) = cams.last().filter(|_| o.verify) {
        let want = reference_stereo(&scene, cam, &stereo_options(&o.scene))?;
        crate::verify::require_image(&want, &run.last_image)?;
    }
    let made = Made {
        workload: "vr",
        backend: o.scene.node.backend.name(),
        // The adapter's own name on wgpu, as every other workload's report gives it.
        adapter: adapter.unwrap_or_else(|| run.backend.clone()),
        devices: o.gpms,
        page_size: o.scene.page.get(),
        warmup_frames: o.scene.warmup,
        procedure: o.scene.procedure,
        split: o.scheme.as_str(),
    };
    let ran = Ran {
        made,
        scene: &name,
        link,
        width: o.scene.width,
        height: o.scene.height,
    };
    let mut report = VrReport::new(&run, ran);
    report.core.verified = o.verify.then_some(true);
    let json = o.out.join("report.json");
    write_json(&json, &report)?;
    let png = o.out.join("stereo.png");
    write_png(&png, 2 * o.scene.width, o.scene.height, &run.last_image)?;
    outln!("{}", report.summary_text(o.link_gbps));
    outln!("wall time {:.2} s", run.wall);
    wrote!("wrote {} and {}", shown(&json), shown(&png));
    Ok(())
}

pub fn sweep(o: &VrSweepOpts) -> Result<()> {
    for (scheme, gpms) in sweep_plan() {
        check_strips(&scheme, gpms, &o.scene, true)?;
    }
    let (scene, cams, name) = load_scene(&o.scene)?;
    create_dir(&o.out)?;
    let points = (sweep_plan().len() * cams.len()) as u64;
    let bar = progress(points * o.rounds as u64, "vr sweep");
    let mut backend = String::new();
    let runs = sweep_medians(o.rounds, |round, scheme, g| -> Result<VrRun> {
        bar.set_message(format!("round {round}: {scheme} on {g} GPM(s)"));
        let (run, _) = execute(&o.scene, &scene, &cams, scheme, g, || bar.inc(1))?;
        backend = run.backend.clone();
        Ok(run)
    })?;
    bar.finish_and_clear();
    for (scheme, g, run) in &runs {
        let dir = o.out.join(format!("{scheme}-{g}"));
        create_dir(&dir)?;
        let (w, h) = (2 * o.scene.width, o.scene.height);
        write_png(&dir.join("stereo.png"), w, h, &run.last_image)?;
        write_json(&dir.join("measured.json"), &run.frames)?;
    }
    let figures = Figures::of_runs(&runs)?;
    outln!(
        "vr sweep: {name}, {} stereo frames {}x{} per eye after {} warm-up, page {} [{backend}], median of {} run(s) per point; modeled latency = slowest GPM (device work alone + texture link) + composition",
        cams.len() - o.scene.warmup as usize,
        o.scene.width,
        o.scene.height,
        o.scene.warmup,
        o.scene.page.get(),
        o.rounds
    );
    out!("{}", figures.table());
    figures.write(&o.out)?;
    wrote!("wrote the CSV and plots in {}", shown(&o.out));
    Ok(())
}
