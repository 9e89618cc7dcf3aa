//! The game trace's raster kernel on wgpu devices (lavapipe in CI) against the CPU backend:
//! an image diff on the procedural scene, and the texture page requests per frame and device.
//!
//! Tolerance: coverage is integer arithmetic and identical on both backends; the depth and
//! texture-coordinate planes are f32 sums of products, which a Vulkan driver may fuse into
//! FMAs (SPIR-V allows contraction), so a pixel whose depth tie or texel boundary falls within
//! an ulp may sample a neighbouring texel or the other triangle. We allow at most 0.5% of the
//! pixels to differ, and require the texel each pixel sampled to be the same for at least
//! 99.5% of pixels. Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use tessera_runtime::{Procedure, System, SystemConfig};
use tessera_workloads::quake::render::{RenderOptions, Renderer};
use tessera_workloads::quake::{scene, Split};

const W: u32 = 128;
const H: u32 = 96;
/// Pixels of a frame that may differ between backends (see the module's comment).
const TOLERANCE: f64 = 0.005;

fn wgpu_system(n: usize) -> Option<System> {
    common::system(&SystemConfig::new(n))
}

fn renderer(sys: System, procedure: Procedure) -> Renderer {
    Renderer::new(
        sys,
        scene::generated(),
        RenderOptions {
            width: W,
            height: H,
            page: 16,
            split: Split::LeftRight,
            procedure,
            clear_each_frame: false,
            drop_unused: false,
        },
    )
    .unwrap()
}

#[test]
fn lavapipe_frames_match_the_cpu_within_tolerance() {
    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
        let Some(gpu) = wgpu_system(2) else {
            return;
        };
        let mut g = renderer(gpu, procedure);
        let mut c = renderer(
            System::cpu(&SystemConfig::new(2).threads(2)).unwrap(),
            procedure,
        );
        for cam in scene::camera_path(30).into_iter().step_by(15) {
            let vp = cam.view_proj(W as f64 / H as f64);
            let gs = g.frame(&vp).unwrap();
            let cs = c.frame(&vp).unwrap();
            let (gf, cf) = (g.framebuffer().unwrap(), c.framebuffer().unwrap());
            let (ga, ca) = (g.access_map().unwrap(), c.access_map().unwrap());
            let px = (W * H) as f64;
            let diff = gf
                .chunks(4)
                .zip(cf.chunks(4))
                .filter(|(a, b)| a != b)
                .count() as f64;
            let adiff = ga.iter().zip(&ca).filter(|(a, b)| a != b).count() as f64;
            eprintln!(
                "{procedure:?}: {diff} of {px} pixels differ, {adiff} sampled another texel; requests gpu {:?} cpu {:?}",
                gs.requests, cs.requests
            );
            assert!(diff / px <= TOLERANCE, "{diff} of {px} pixels differ");
            assert!(adiff / px <= TOLERANCE, "{adiff} of {px} texels differ");
            // Requests differ only where a differing pixel reached another page.
            for (a, b) in gs.requests.iter().zip(&cs.requests) {
                assert!(a.abs_diff(*b) as f64 <= adiff.max(0.0), "{a} vs {b}");
            }
        }
    }
}

/// The filtered raster twin (trilinear over a bordered mipmapped atlas) on lavapipe against
/// the CPU backend, with the tolerance above: the samplers are integer arithmetic on both,
/// and only the f32 planes and divisions before them may round apart.
#[test]
fn filtered_lavapipe_frames_match_the_cpu_within_tolerance() {
    use tessera_workloads::quake::render::{Filtering, Miss};
    let filtering = Some(Filtering {
        filter: tessera_core::Filter::Trilinear,
        border: 1,
        miss: Miss::Relaunch,
    });
    let opts = RenderOptions {
        width: W,
        height: H,
        page: 16,
        split: Split::LeftRight,
        procedure: Procedure::Relaunch,
        clear_each_frame: false,
        drop_unused: false,
    };
    let Some(gpu) = wgpu_system(2) else {
        return;
    };
    let mut g = Renderer::new_with(gpu, scene::generated(), opts, filtering).unwrap();
    let cpu = System::cpu(&SystemConfig::new(2).threads(2)).unwrap();
    let mut c = Renderer::new_with(cpu, scene::generated(), opts, filtering).unwrap();
    // Two frames, as the nearest test above; the samplers themselves are compared over a
    // whole grid in `tests/mip_wgpu.rs`.
    for cam in scene::camera_path(30).into_iter().step_by(15) {
        let vp = cam.view_proj(W as f64 / H as f64);
        let gs = g.frame(&vp).unwrap();
        let cs = c.frame(&vp).unwrap();
        let (gf, cf) = (g.framebuffer().unwrap(), c.framebuffer().unwrap());
        let px = (W * H) as f64;
        let diff = gf
            .chunks(4)
            .zip(cf.chunks(4))
            .filter(|(a, b)| a != b)
            .count() as f64;
        eprintln!(
            "trilinear: {diff} of {px} pixels differ; requests by level gpu {:?} cpu {:?}",
            gs.by_level, cs.by_level
        );
        assert!(diff / px <= TOLERANCE, "{diff} of {px} pixels differ");
        assert!(gs.by_level.len() > 1);
    }
}
