//! `tessera run raytrace`: a scene larger than the device budget, rendered by rays that
//! fault, save their state and resume.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tessera_core::PageSize;
use tessera_runtime::{Partition, Procedure, SystemConfig};
use tessera_workloads::quake::atlas::Packing;
use tessera_workloads::raytrace::render::{resident_image, RenderOptions};
use tessera_workloads::raytrace::run::{run as render, RunSpec};
use tessera_workloads::raytrace::{check_budget, SceneSpec};

use crate::output::{create_dir, shown, write_json, write_png};
use crate::quake::FilterKind;
use crate::run::progress;
use crate::{parse_partition, parse_procedure, CacheOpts, NodeOpts};

/// A side of the image: 1 to the renderer's largest.
pub(crate) fn image_side() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=tessera_workloads::raytrace::render::MAX_SIDE as i64)
}

/// A positive, finite length.
pub(crate) fn ao_radius(s: &str) -> Result<f32, String> {
    match s.trim().parse::<f32>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        // Parsed as a positive number but past f32's range: not "not positive".
        Ok(v) if v == f32::INFINITY && s.trim().parse::<f64>().is_ok_and(f64::is_finite) => Err(
            format!("{s:?} is too large: a length is at most {:e}", f32::MAX),
        ),
        _ => Err(format!("{s:?} is not a positive length")),
    }
}

#[derive(Args, Clone)]
pub struct RaytraceOpts {
    /// `openarena:MAP` (a Quake 3 / OpenArena map from --pak-dir) or `generated[:N]` (the
    /// generated room with N × N boxes, 3 by default).
    #[arg(long, default_value = "generated:3")]
    scene: SceneSpec,
    /// Shorthand for `--scene openarena:NAME`, as on `run quake` and `run vr`.
    #[arg(long, value_name = "NAME", conflicts_with = "scene")]
    map: Option<String>,
    /// Where the map's pk3 files are (`bash scripts/openarena.sh` installs OpenArena's there).
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Copies of the scene on a grid, so that it exceeds the budget by a chosen factor.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=tessera_workloads::raytrace::scene::MAX_INSTANCES as i64))]
    instances: u32,
    #[arg(long, default_value_t = 320, value_parser = image_side())]
    width: u32,
    #[arg(long, default_value_t = 240, value_parser = image_side())]
    height: u32,
    /// Page side of the textures (atlas, image); buffer pages hold as many bytes (P² × 4).
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How the albedo samples its texture: nearest (the nearest texel of a plain atlas), or
    /// bilinear or trilinear on a mip chain of the atlas, at the level of the pixel's
    /// footprint (the neighbouring pixels' rays met on the hit triangle's plane).
    #[arg(long, value_enum, default_value = "nearest")]
    filter: FilterKind,
    /// Ambient-occlusion rays per pixel.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=tessera_workloads::raytrace::render::MAX_AO_SAMPLES as i64))]
    ao_samples: u32,
    /// Length of the AO rays, world units (Quake units for a map).
    #[arg(long, default_value_t = 96.0, value_parser = ao_radius)]
    ao_radius: f32,
    #[arg(long, default_value_t = 1, value_parser = crate::parse_device_count)]
    devices: usize,
    /// How the image is split across devices: rows, cols or tiles.
    #[arg(long = "split", alias = "partition", value_name = "SPLIT", default_value = "rows", value_parser = parse_partition())]
    partition: Partition,
    /// Whether the image is cut across devices on page boundaries where every band stays
    /// within a quarter of an even share (on), so that no page of the image is written by two
    /// devices, or evenly (off).
    #[arg(long, default_value = "on", value_parser = crate::on_off(), action = clap::ArgAction::Set)]
    split_on_pages: bool,
    #[command(flatten)]
    cache: CacheOpts,
    /// How passes get their pages: relaunch (rays save their state and resume) or two-pass
    /// (a request pass first; a ray missing in the compute pass restarts, as it saves no state
    /// there).
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// Frames to render (the same view; each from fresh ray state, with the pages the last
    /// frame left on the devices).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    #[command(flatten)]
    node: NodeOpts,
    /// Output directory for image.png and report.json (created only after the render).
    #[arg(long, default_value = "out/raytrace")]
    pub(crate) out: PathBuf,
    /// Also render the last frame on one device with every page resident and compare pixel
    /// for pixel; a difference fails the command and writes nothing.
    #[arg(long)]
    verify: bool,
}

pub fn run(o: &RaytraceOpts) -> Result<()> {
    let budget = o.cache.budget_bytes();
    check_budget(budget, o.page.get())?;
    // More devices than rows (or columns) to split: a usage error before anything runs.
    o.partition
        .regions(o.width, o.height, o.devices as u32)
        .map_err(crate::usage)?;
    let spec = match &o.map {
        Some(map) => SceneSpec::OpenArena(map.clone()),
        None => o.scene.clone(),
    };
    let packing = match o.filter.filter() {
        None => Packing::Pages,
        Some(_) => Packing::Levels,
    };
    let (scene, view, name, warning) =
        spec.paged(&o.pak_dir, o.instances, o.page, packing, o.width, o.height)?;
    crate::warn(warning);
    let cfg = o
        .node
        .config(o.devices)
        .budget(budget)
        // Memories of the default size, created as pages arrive (a large budget allocates
        // nothing up front), or one of the budget's size when that is smaller.
        .memory(budget.min(SystemConfig::default().memory_bytes))
        .policy(o.cache.policy)
        .split_on_pages(o.split_on_pages);
    let (sys, adapter) = o.node.system(&cfg)?;
    let reference_scene = o.verify.then(|| scene.clone());
    let options = RenderOptions {
        width: o.width,
        height: o.height,
        page: o.page.get(),
        ao_samples: o.ao_samples,
        ao_radius: o.ao_radius,
        partition: o.partition,
        procedure: o.procedure,
        filter: o.filter.filter(),
    };
    let spec = RunSpec {
        scene,
        view,
        name,
        instances: o.instances,
        options,
        budget_bytes: budget,
        policy: o.cache.policy,
        frames: o.frames,
    };
    let bar = progress(o.frames as u64, "raytrace");
    let (mut report, image) = render(sys, o.node.backend.name(), adapter, spec, || bar.inc(1))?;
    bar.finish_and_clear();
    if let Some(scene) = &reference_scene {
        crate::verify::require_image(&resident_image(scene, view, options)?, &image)?;
        report.core.verified = Some(true);
    }
    // Only now, with the render done, is anything written.
    create_dir(&o.out)?;
    let png = o.out.join("image.png");
    write_png(&png, o.width, o.height, &image)?;
    let json = o.out.join("report.json");
    write_json(&json, &report)?;
    outln!("{}", report.summary());
    wrote!("wrote {}, {}", shown(&png), shown(&json));
    Ok(())
}
