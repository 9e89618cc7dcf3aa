//! The scene and the counts the ray tracer's tests share: the CPU test (`tests/raytrace.rs`)
//! and the lavapipe one (tessera-wgpu's `tests/raytrace_wgpu.rs`).

use tessera_runtime::{Partition, Procedure, System};
use tessera_workloads::quake::atlas::Packing;
use tessera_workloads::raytrace::rays::View;
use tessera_workloads::raytrace::render::RenderOptions;
use tessera_workloads::raytrace::scene::PagedScene;
use tessera_workloads::raytrace::SceneSpec;

/// The generated scene of `n` with `instances` instances on pages of `page`, its camera's
/// view at the aspect of `w × h`, and options that render it plainly (rows, relaunch, two AO
/// samples, the nearest texel of a plain atlas).
pub fn setup_paged(
    n: u32,
    instances: u32,
    w: u32,
    h: u32,
    page: u32,
) -> (PagedScene, View, RenderOptions) {
    let (mesh, cam, _, _) = SceneSpec::Generated(n)
        .load(std::path::Path::new("/nonexistent"))
        .unwrap();
    let scene = PagedScene::build(&mesh, instances, page, Packing::Pages).unwrap();
    let view = View::new(cam.eye, cam.yaw, cam.pitch, cam.fov_y, w as f64 / h as f64);
    let opts = RenderOptions {
        width: w,
        height: h,
        page,
        ao_samples: 2,
        ao_radius: 96.0,
        partition: Partition::Rows,
        procedure: Procedure::Relaunch,
        filter: None,
    };
    (scene, view, opts)
}

/// The pages `sys` evicted, over all its devices.
pub fn evictions(sys: &System) -> u64 {
    sys.mm.traffic().unwrap().iter().map(|t| t.evictions).sum()
}
