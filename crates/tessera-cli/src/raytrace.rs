//! `tessera run raytrace`: a scene larger than the device budget, rendered by rays that
//! fault, save their state and resume.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use tessera_core::PageSize;
use tessera_runtime::{Partition, Policy, Procedure, SystemConfig};
use tessera_workloads::raytrace::rays::View;
use tessera_workloads::raytrace::render::{resident_image, RayRenderer, RenderOptions};
use tessera_workloads::raytrace::run::{
    record, residency, traffic, FrameReport, ObjectReport, TrafficReport,
};
use tessera_workloads::raytrace::scene::PagedScene;
use tessera_workloads::raytrace::{check_budget, SceneSpec};

use crate::quake::FilterKind;
use crate::report::write_png;
use crate::run::progress;
use crate::{
    backend, budget_bytes, parse_partition, parse_policy, parse_procedure, parse_threads,
    BackendKind,
};

fn parse_scene(s: &str) -> Result<SceneSpec, String> {
    s.parse()
}

#[derive(Args, Clone)]
pub struct RaytraceOpts {
    /// `openarena:MAP` (a Quake 3 / OpenArena map from --pak-dir) or `generated[:N]` (the
    /// generated room with N × N boxes, 3 by default).
    #[arg(long, default_value = "generated:3", value_parser = parse_scene)]
    scene: SceneSpec,
    /// Where the map's pk3 files are (`bash scripts/openarena.sh` installs OpenArena's there).
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
    /// Copies of the scene on a grid, so that it exceeds the budget by a chosen factor.
    #[arg(long, default_value_t = 1)]
    instances: u32,
    #[arg(long, default_value_t = 320, value_parser = clap::value_parser!(u32).range(1..))]
    width: u32,
    #[arg(long, default_value_t = 240, value_parser = clap::value_parser!(u32).range(1..))]
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
    #[arg(long, default_value_t = 4)]
    ao_samples: u32,
    /// Length of the AO rays, world units (Quake units for a map).
    #[arg(long, default_value_t = 96.0)]
    ao_radius: f32,
    #[arg(long, default_value_t = 1, value_parser = crate::parse_device_count)]
    devices: usize,
    /// How the image is split across devices: rows, cols or tiles.
    #[arg(long = "split", alias = "partition", default_value = "rows", value_parser = parse_partition())]
    partition: Partition,
    /// Per-device memory budget in MiB (fractions allowed): a page cache, see `run boiling`.
    #[arg(long, default_value = "4096", value_parser = crate::parse_budget)]
    budget_mib: f64,
    /// Which pages a device gives up when its budget is full: lru, clock, fifo or random.
    #[arg(long, default_value = "lru", value_parser = parse_policy())]
    policy: Policy,
    /// How passes get their pages: relaunch (rays save their state and resume) or two-pass
    /// (a request pass first; a ray missing in the compute pass restarts, as it saves no state
    /// there).
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// Frames to render (the same view; each from fresh ray state, with the pages the last
    /// frame left on the devices).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendKind,
    /// CPU threads for the software devices (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    threads: usize,
    /// Output directory for image.png and report.json (created only after the render).
    #[arg(long, default_value = "out/raytrace")]
    pub(crate) out: PathBuf,
    /// Also render the last frame on one device with every page resident and compare pixel
    /// for pixel; a difference fails the command and writes nothing.
    #[arg(long)]
    verify: bool,
}

/// The schema's core (docs/report.schema.json), then the ray tracer's own section.
#[derive(Serialize)]
struct Report {
    schema_version: u32,
    workload: &'static str,
    backend: &'static str,
    adapter: String,
    devices: usize,
    page_size: u32,
    frames: usize,
    warmup_frames: u32,
    procedure: tessera_runtime::Procedure,
    split: tessera_runtime::Partition,
    checksum: String,
    checksum_kind: &'static str,
    time_kind: &'static str,
    /// Summed over devices and frames, seconds.
    stages: tessera_runtime::StageTimes,
    /// Per device, over all frames.
    per_device: Vec<TrafficReport>,
    scene: String,
    instances: u32,
    triangles: u32,
    bvh_nodes: u32,
    scene_bytes: u64,
    objects_bytes: u64,
    width: u32,
    height: u32,
    ao_samples: u32,
    budget_bytes_per_device: u64,
    policy: String,
    filter: FilterKind,
    /// Per level of the atlas's chain (one for a plain atlas), pages some device holds at the
    /// end of the run.
    atlas_pages_by_level: Vec<u64>,
    per_frame: Vec<FrameReport>,
    /// At the end of the run.
    residency: Vec<ObjectReport>,
}

/// The scene, its view for a `width` × `height` image, and its name.
pub(crate) fn load(
    spec: &SceneSpec,
    pak_dir: &Path,
    instances: u32,
    page: PageSize,
    width: u32,
    height: u32,
) -> Result<(PagedScene, View, String)> {
    let (mesh, cam, name) = spec.load(pak_dir)?;
    let scene = PagedScene::build(&mesh, instances, page.get())?;
    let view = View::new(
        cam.eye,
        cam.yaw,
        cam.pitch,
        cam.fov_y,
        width as f64 / height as f64,
    );
    Ok((scene, view, name))
}

pub fn run(o: &RaytraceOpts) -> Result<()> {
    let budget = budget_bytes(o.budget_mib);
    check_budget(budget, o.page.get())?;
    let (scene, view, name) = load(&o.scene, &o.pak_dir, o.instances, o.page, o.width, o.height)?;
    let cfg = SystemConfig {
        devices: o.devices,
        cpu_threads: o.threads,
        budget_bytes: budget,
        // Memories of the default size, created as pages arrive (a large budget allocates
        // nothing up front), or one of the budget's size when that is smaller.
        memory_bytes: budget.min(SystemConfig::default().memory_bytes),
        policy: o.policy,
        ..Default::default()
    };
    let (sys, adapter) = backend::system(o.backend, &cfg)?;
    let backend_name = adapter.unwrap_or_else(|| sys.backend().to_string());
    let reference_scene = o.verify.then(|| scene.clone());
    let scene_bytes = scene.bytes();
    let (triangles, nodes) = (scene.triangle_count, scene.node_count);
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
    let mut r = RayRenderer::new(sys, scene, view, options)?;
    let objects_bytes = r.total_bytes();
    let bar = progress(o.frames as u64, "raytrace");
    let (frames, stages) = record(&mut r, o.frames, || bar.inc(1))?;
    bar.finish_and_clear();
    let image = r.image()?;
    if let Some(scene) = &reference_scene {
        crate::verify::require_image(&resident_image(scene, view, options)?, &image)?;
    }
    let traffic = traffic(&r)?;
    let residency = residency(&r)?;
    let report = Report {
        schema_version: crate::report::SCHEMA_VERSION,
        workload: "raytrace",
        backend: o.backend.name(),
        adapter: backend_name.clone(),
        devices: o.devices,
        page_size: o.page.get(),
        frames: frames.len(),
        warmup_frames: 0,
        procedure: o.procedure,
        split: o.partition,
        checksum: crate::report::fnv1a_hex(&image),
        checksum_kind: "image",
        time_kind: "measured",
        stages,
        per_device: traffic,
        scene: name.clone(),
        instances: o.instances,
        triangles,
        bvh_nodes: nodes,
        scene_bytes,
        objects_bytes,
        width: o.width,
        height: o.height,
        ao_samples: o.ao_samples,
        budget_bytes_per_device: budget,
        policy: o.policy.name().to_string(),
        filter: o.filter,
        atlas_pages_by_level: r.atlas_pages_by_level()?,
        per_frame: frames,
        residency,
    };
    // Only now, with the render done, is anything written.
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let png = o.out.join("image.png");
    write_png(&png, o.width, o.height, &image)?;
    let json = o.out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let last = report.per_frame.last().expect("at least one frame");
    let moved: u64 = report
        .per_device
        .iter()
        .map(|t| t.host_to_device_bytes + t.device_to_device_bytes + t.device_to_host_bytes)
        .sum();
    println!(
        "{name} x{} ({triangles} triangles, {nodes} BVH nodes, scene {:.1} MiB, objects {:.1} MiB), {}x{}, {} device(s) [{backend_name}], budget {:.2} MiB/device, {}, {:?}",
        o.instances,
        scene_bytes as f64 / 1048576.0,
        objects_bytes as f64 / 1048576.0,
        o.width,
        o.height,
        o.devices,
        budget as f64 / 1048576.0,
        o.policy.name(),
        o.procedure,
    );
    println!(
        "last frame {:.1} ms (measured), {} launches, {} relaunched ({} with saved state), {} wave splits; {:.2} MiB moved over the run",
        last.wall_ms,
        last.launches,
        last.relaunched,
        last.suspended,
        last.wave_splits,
        moved as f64 / 1048576.0
    );
    println!("image {}", report.checksum);
    println!(
        "wrote {}, {}",
        crate::output::shown(&png).display(),
        crate::output::shown(&json).display()
    );
    Ok(())
}
