//! The game trace's renderer: paged frames against the unpaged rasterizer for 1–3 devices,
//! both splits and both procedures; a hand-computed frame; trace replay against the run that
//! recorded it.

use tessera_runtime::{Procedure, System};
use tessera_workloads::quake::atlas::Atlas;
use tessera_workloads::quake::raster::NO_ACCESS;
use tessera_workloads::quake::render::{RenderOptions, Renderer};
use tessera_workloads::quake::replay::{replay, ReplayOptions};
use tessera_workloads::quake::trace::{DeviceFrame, Trace, BLOCK};
use tessera_workloads::quake::{
    reference, scene, Camera, Mesh, QuakeError, Split, TextureImage, Triangle, Vertex,
};

mod common;

use common::{H, W};

fn sys(devices: usize) -> System {
    common::cpu(devices, 1 << 20)
}

fn opts(page: u32, split: Split, procedure: Procedure, clear: bool) -> RenderOptions {
    RenderOptions {
        clear_each_frame: clear,
        ..common::opts(page, split, procedure)
    }
}

fn sizes(m: &Mesh) -> Vec<(u32, u32)> {
    m.textures.iter().map(|t| (t.width, t.height)).collect()
}

#[test]
fn paged_frames_equal_the_unpaged_rasterizer_for_any_split_and_procedure() {
    let mesh = scene::generated();
    // Frames spread over the path, so different textures are in view.
    let cams: Vec<Camera> = scene::camera_path(40).into_iter().step_by(13).collect();
    let page = 8;
    let atlas = Atlas::pack(&sizes(&mesh), page).unwrap();
    let want: Vec<(Vec<u8>, Vec<u32>)> = cams
        .iter()
        .map(|c| reference::render(&mesh, &atlas, &c.view_proj(W as f64 / H as f64), W, H).unwrap())
        .collect();
    // The frames are not trivial: most pixels textured, several textures seen.
    for (frame, access) in &want {
        assert!(access.iter().filter(|&&a| a != NO_ACCESS).count() > (W * H / 2) as usize);
        assert!(frame.chunks(4).any(|p| p != [0, 0, 0, 255]));
    }
    for (devices, split, procedure) in [
        (1, Split::LeftRight, Procedure::Relaunch),
        (2, Split::LeftRight, Procedure::Relaunch),
        (2, Split::LeftRight, Procedure::TwoPass),
        (3, Split::TopBottom, Procedure::TwoPass),
        (3, Split::TopBottom, Procedure::Relaunch),
    ] {
        let mut r = Renderer::new(
            sys(devices),
            mesh.clone(),
            opts(page, split, procedure, false),
        )
        .unwrap();
        let mut total = 0;
        for (c, (frame, access)) in cams.iter().zip(&want) {
            let s = r.frame(&c.view_proj(W as f64 / H as f64)).unwrap();
            total += s.requests.iter().sum::<u64>();
            // Every texture request maps back to one texture (no page holds padding only
            // and is sampled).
            assert_eq!(
                s.by_texture.iter().sum::<u64>(),
                s.requests.iter().sum::<u64>()
            );
            assert_eq!(
                &r.framebuffer().unwrap(),
                frame,
                "{devices} {split:?} {procedure:?}"
            );
            assert_eq!(
                &r.access_map().unwrap(),
                access,
                "{devices} {split:?} {procedure:?}"
            );
        }
        assert!(total > 0);
    }
}

/// A wall facing the camera that fills the view exactly, with texture coordinates of one texel
/// per pixel: pixel (x, y) must show texel (x mod w, y mod h), by hand.
#[test]
fn a_wall_filling_the_screen_shows_one_texel_per_pixel() {
    let (tw, th) = (16u32, 8u32);
    let rgba: Vec<u8> = (0..tw * th)
        .flat_map(|i| [(i % 256) as u8, (i / 256) as u8, 7, 255])
        .collect();
    let fov_y: f32 = 1.0;
    let (d, eye_z) = (100.0f32, 50.0f32);
    let hh = d * (fov_y / 2.0).tan();
    let hw = hh * W as f32 / H as f32;
    // Looking along +X, screen right is world -Y.
    let corner = |sx: f32, sy: f32| Vertex {
        pos: [d, hw - 2.0 * hw * sx, eye_z - hh + 2.0 * hh * sy],
        uv: [sx * W as f32 / tw as f32, sy * H as f32 / th as f32],
        ..Default::default()
    };
    // A fan around the centre: eight triangles sharing edges, so the fill rule is exercised
    // on edges in every direction; a gap would show as a background pixel.
    let ring = [
        (0.0, 0.0),
        (0.5, 0.0),
        (1.0, 0.0),
        (1.0, 0.5),
        (1.0, 1.0),
        (0.5, 1.0),
        (0.0, 1.0),
        (0.0, 0.5),
    ];
    let mut vertices = vec![corner(0.5, 0.5)];
    vertices.extend(ring.iter().map(|&(x, y)| corner(x, y)));
    let triangles = (0..8)
        .map(|i| Triangle {
            v: [0, 1 + i, 1 + (i + 1) % 8],
            texture: 0,
            ..Default::default()
        })
        .collect();
    let mesh = Mesh {
        vertices,
        triangles,
        textures: vec![TextureImage {
            name: "t".into(),
            width: tw,
            height: th,
            rgba,
        }],
    };
    let cam = Camera {
        eye: [0.0, 0.0, eye_z],
        yaw: 0.0,
        pitch: 0.0,
        fov_y,
    };
    let atlas = Atlas::pack(&[(tw, th)], 8).unwrap();
    let (frame, access) =
        reference::render(&mesh, &atlas, &cam.view_proj(W as f64 / H as f64), W, H).unwrap();
    for y in 0..H {
        for x in 0..W {
            let i = (y * W + x) as usize;
            let t = (y % th) * tw + x % tw;
            assert_eq!(
                &frame[i * 4..i * 4 + 4],
                &[(t % 256) as u8, (t / 256) as u8, 7, 255],
                "pixel ({x}, {y})"
            );
            assert_eq!(access[i], (x % tw) | (y % th) << 16);
        }
    }
    // The same on two devices, paged.
    let mut r = Renderer::new(
        sys(2),
        mesh,
        opts(8, Split::LeftRight, Procedure::Relaunch, false),
    )
    .unwrap();
    r.frame(&cam.view_proj(W as f64 / H as f64)).unwrap();
    assert_eq!(r.framebuffer().unwrap(), frame);
}

fn record(
    devices: usize,
    page: u32,
    procedure: Procedure,
    (clear, drop_unused): (bool, bool),
    frames: u32,
) -> (Trace, Vec<Vec<u64>>) {
    let mesh = scene::generated();
    let tex = sizes(&mesh);
    let mut r = Renderer::new(
        sys(devices),
        mesh,
        RenderOptions {
            drop_unused,
            ..opts(page, Split::LeftRight, procedure, clear)
        },
    )
    .unwrap();
    let mut recorded = Vec::new();
    let mut out = Vec::new();
    for c in scene::camera_path(frames) {
        let s = r.frame(&c.view_proj(W as f64 / H as f64)).unwrap();
        let blocks = r.accessed_blocks().unwrap();
        out.push(
            s.requests
                .iter()
                .zip(blocks)
                .map(|(&requests, blocks)| DeviceFrame { requests, blocks })
                .collect(),
        );
        recorded.push(s.requests);
    }
    let trace = Trace {
        block: BLOCK,
        devices: devices as u32,
        width: W,
        height: H,
        split: Split::LeftRight,
        page,
        clear_each_frame: clear,
        drop_unused,
        random_placement: None,
        textures: tex,
        frames: out,
    };
    (trace, recorded)
}

#[test]
fn replay_makes_exactly_the_recorded_requests() {
    for (devices, page, procedure, clear, drop_unused) in [
        (2, 8, Procedure::Relaunch, false, false),
        (2, 16, Procedure::TwoPass, true, false),
        (3, 4, Procedure::Relaunch, false, false),
        (2, 8, Procedure::Relaunch, false, true),
    ] {
        let (trace, recorded) = record(devices, page, procedure, (clear, drop_unused), 8);
        let trace = Trace::decode(&trace.encode()).unwrap();
        assert!(recorded[0].iter().sum::<u64>() > 0);
        let got = replay(
            &sys(devices),
            &trace,
            &ReplayOptions {
                page,
                clear_each_frame: clear,
                drop_unused,
                random_placement: None,
                procedure: Procedure::Relaunch,
            },
            |_| {},
        )
        .unwrap();
        assert_eq!(
            got, recorded,
            "{devices} devices, page {page}, clear {clear}, drop {drop_unused}"
        );
        // Clearing or dropping makes later frames ask again for pages they keep using.
        if clear || drop_unused {
            let (_, kept) = record(devices, page, procedure, (false, false), 8);
            let sum = |r: &Vec<Vec<u64>>| r.iter().flatten().sum::<u64>();
            assert!(sum(&recorded) > sum(&kept), "{recorded:?} vs {kept:?}");
        }
    }
}

#[test]
fn replay_refuses_what_the_trace_cannot_give() {
    let (trace, _) = record(2, 8, Procedure::Relaunch, (false, false), 2);
    let o = |page| ReplayOptions {
        page,
        clear_each_frame: false,
        drop_unused: false,
        random_placement: None,
        procedure: Procedure::Relaunch,
    };
    assert!(matches!(
        replay(&sys(3), &trace, &o(8), |_| {}),
        Err(QuakeError::Config(_))
    ));
    assert!(matches!(
        replay(&sys(2), &trace, &o(2), |_| {}),
        Err(QuakeError::Config(_))
    ));
    // One device takes both strips: at least the larger strip's requests, at most the sum.
    let one = replay(&sys(1), &trace, &o(8), |_| {}).unwrap();
    let two = replay(&sys(2), &trace, &o(8), |_| {}).unwrap();
    for (a, b) in one.iter().zip(&two) {
        assert!(a[0] <= b[0] + b[1] && a[0] >= b[0].max(b[1]), "{a:?} {b:?}");
    }
}

#[test]
fn a_bad_mesh_is_a_typed_error() {
    let mut mesh = scene::generated();
    mesh.triangles[0].texture = 99;
    let e = Renderer::new(
        sys(1),
        mesh,
        opts(8, Split::LeftRight, Procedure::Relaunch, false),
    );
    assert!(matches!(e, Err(QuakeError::Mesh(_))));
    let mut mesh = scene::generated();
    mesh.textures[0].rgba.pop();
    assert!(matches!(mesh.validate(), Err(QuakeError::Mesh(_))));
    let e = Renderer::new(
        sys(1),
        scene::generated(),
        RenderOptions {
            width: 4096,
            ..opts(8, Split::LeftRight, Procedure::Relaunch, false)
        },
    );
    assert!(matches!(e, Err(QuakeError::Config(_))));
}
