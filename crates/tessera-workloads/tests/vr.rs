//! OO-VR's schemes against a single-device render: every scheme, on 4 GPMs, must
//! compose the same stereo frames, pixel for pixel, as the unpaged rasterizer draws each eye.
use tessera_runtime::{Procedure, System, SystemConfig};
use tessera_scene::Scene;
use tessera_workloads::quake::map::camera_path;
use tessera_workloads::quake::{reference, Mesh};
use tessera_workloads::vr::render::FRAGMENT_BYTES;
use tessera_workloads::vr::scheme::{Composition, FrameInput, SchemeError};
use tessera_workloads::vr::{
    by_name, eyes, reference_stereo, ObjectError, StereoOptions, StereoRenderer, VrError, NAMES,
};

const W: u32 = 48;
const H: u32 = 32;

fn renderer(scene: &Scene, gpms: usize) -> Result<StereoRenderer, VrError> {
    let sys = System::cpu(&SystemConfig::new(gpms).threads(1))?;
    StereoRenderer::new(
        sys,
        scene,
        StereoOptions {
            width: W,
            height: H,
            page: 16,
            procedure: Procedure::Relaunch,
        },
    )
}

#[test]
fn every_scheme_composes_the_single_device_stereo_frames() {
    let scene = Scene::generated(2);
    let mesh = Mesh::from(&scene);
    let cams = camera_path(&scene, 12);
    // Frames 0, 5 and 10 of the path: different views, several frames per run (OO-VR's
    // predictor carries over, first-touch homes persist).
    let cams: Vec<_> = cams.into_iter().step_by(5).collect();
    let mut references = Vec::new();
    for cam in &cams {
        let r = renderer(&scene, 1).unwrap();
        let pair: Vec<Vec<u8>> = eyes(cam)
            .iter()
            .map(|c| {
                reference::render(&mesh, r.atlas(), &c.view_proj(W as f64 / H as f64), W, H)
                    .unwrap()
                    .0
            })
            .collect();
        // The eyes see something and differ (the interpupillary offset shows).
        assert!(pair[0].chunks(4).any(|p| p != [0, 0, 0, 255]));
        assert_ne!(pair[0], pair[1]);
        references.push(pair);
    }
    for name in NAMES {
        let mut scheme = by_name(name).unwrap();
        let mut r = renderer(&scene, 4).unwrap();
        for (f, cam) in cams.iter().enumerate() {
            let m = r.frame(cam, scheme.as_mut()).unwrap();
            assert_eq!((m.uncomposed, m.overdrawn), (0, 0), "{name} frame {f}");
            for (e, (got, want)) in r.eye_images().iter().zip(&references[f]).enumerate() {
                assert!(
                    got == want,
                    "{name}: frame {f}, eye {e} differs from the single-device render"
                );
            }
            assert_eq!(m.finish.len(), 4);
            assert!(m.passes > 0);
        }
    }
}

/// A GPM's pieces meet in its one framebuffer before it composes, so it sends each pixel at
/// most once a frame, however many of its pieces drew there: on one GPM every composing
/// scheme composes the same pixels (the scene's, whichever pieces drew them), and no GPM sends
/// more fragments than an eye pair has pixels.
#[test]
fn a_gpm_sends_each_pixel_it_drew_to_composition_once() {
    let scene = Scene::generated(2);
    let cams: Vec<_> = camera_path(&scene, 12).into_iter().step_by(5).collect();
    let pixels = 2 * (W * H) as u64;
    for gpms in [1, 2] {
        let mut one_gpm: Vec<Vec<u64>> = Vec::new();
        for name in NAMES {
            let mut scheme = by_name(name).unwrap();
            if scheme.composition() == Composition::InPlace {
                continue;
            }
            let mut r = renderer(&scene, gpms).unwrap();
            let mut per_frame = Vec::new();
            for (f, cam) in cams.iter().enumerate() {
                let m = r.frame(cam, scheme.as_mut()).unwrap();
                let composed: u64 = m.composed_fragments.iter().sum();
                assert!(composed > 0, "{name} on {gpms} GPM(s), frame {f}");
                assert!(
                    composed <= gpms as u64 * pixels,
                    "{name} on {gpms} GPM(s), frame {f}: {composed} fragments from {pixels}-pixel eye pairs"
                );
                for (from, to) in m.composition_bytes.iter().enumerate() {
                    let sent: u64 = to.iter().sum();
                    assert!(
                        sent <= pixels * FRAGMENT_BYTES,
                        "{name} on {gpms} GPM(s), frame {f}: GPM {from} sent {sent} bytes"
                    );
                }
                per_frame.push(composed);
            }
            if gpms == 1 {
                one_gpm.push(per_frame);
            }
        }
        assert!(gpms > 1 || one_gpm.len() >= 2, "too few composing schemes");
        for w in one_gpm.windows(2) {
            assert_eq!(
                w[0], w[1],
                "composing schemes on one GPM compose different pixels"
            );
        }
    }
}

/// `reference_stereo` (what `run vr --verify` compares with) is the frame every scheme
/// composes, and a different view is not.
#[test]
fn the_reference_stereo_frame_is_the_composed_one() {
    let scene = Scene::generated(2);
    let cams = camera_path(&scene, 8);
    let mut r = renderer(&scene, 2).unwrap();
    let mut scheme = by_name("oo-vr").unwrap();
    r.frame(&cams[3], scheme.as_mut()).unwrap();
    let opts = StereoOptions {
        width: W,
        height: H,
        page: 16,
        procedure: Procedure::Relaunch,
    };
    assert_eq!(
        r.stereo_image(),
        reference_stereo(&scene, &cams[3], &opts).unwrap()
    );
    assert_ne!(
        r.stereo_image(),
        reference_stereo(&scene, &cams[0], &opts).unwrap()
    );
}

#[test]
fn zero_gpms_and_a_scene_without_surfaces_are_errors() {
    let scene = Scene::generated(1);
    for name in NAMES {
        let mut s = by_name(name).unwrap();
        let input = FrameInput {
            index: 0,
            objects: &[],
            features: &[],
            gpms: 0,
            width: W,
            height: H,
        };
        let r = s.frame(&input, &mut |_| Ok(0.0));
        assert!(
            matches!(r, Err(VrError::Scheme(SchemeError::NoGpms))),
            "{name}"
        );
    }
    let mut empty = scene.clone();
    empty.triangles.clear();
    assert!(matches!(
        renderer(&empty, 2),
        Err(VrError::Objects(ObjectError::NoSurfaces(_)))
    ));
}
