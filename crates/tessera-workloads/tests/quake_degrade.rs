//! Degrading frames (`Miss::Degrade`): a missing atlas page is served from a coarser level
//! and brought for a later frame, so no pixel runs twice, and a view that stays put becomes
//! the exact frame of the unpaged rasterizer.

use tessera_core::Filter;
use tessera_runtime::{Procedure, System, SystemConfig};
use tessera_workloads::quake::render::{Filtering, Miss, RenderOptions, Renderer, DEFAULT_TAIL};
use tessera_workloads::quake::{reference, scene, Split};

mod common;

use common::{H, W};

fn sys(devices: usize) -> System {
    common::cpu(devices, 1 << 22)
}

fn opts(split: Split) -> RenderOptions {
    common::opts(16, split, Procedure::Relaunch)
}

#[test]
fn a_degrading_view_never_relaunches_and_converges_to_the_exact_frame() {
    let mesh = scene::generated();
    let cam = scene::camera_path(40)[0];
    let aspect = W as f64 / H as f64;
    // Each device's strip is whole pages of the framebuffer (96 = 2 · 48, 64 = 2 · 32 on
    // pages of 16), so no device takes another's written page away.
    for (filter, devices, border, split) in [
        (Filter::Trilinear, 1, 0, Split::LeftRight),
        (Filter::Trilinear, 2, 1, Split::TopBottom),
        (Filter::Bilinear, 2, 0, Split::LeftRight),
    ] {
        let case = format!("{filter:?}, {devices} devices, border {border}");
        let mut r = Renderer::new_with(
            sys(devices),
            mesh.clone(),
            opts(split),
            Some(Filtering {
                filter,
                border,
                miss: Miss::Degrade { tail: DEFAULT_TAIL },
            }),
        )
        .unwrap();
        assert!(!r.tail_pages().is_empty(), "{case}");
        let (want, _) =
            reference::render_filtered(&mesh, &r.atlas, &cam.view_proj(aspect), W, H, Some(filter))
                .unwrap();
        let mut frames = Vec::new();
        for _ in 0..3 {
            let s = r.frame(&cam.view_proj(aspect)).unwrap();
            let d = s.degrade.clone().unwrap();
            assert_eq!(d.relaunched, 0, "{case}: {d:?}");
            assert!(s.passes.iter().all(|p| p.relaunched == 0), "{case}");
            frames.push((s, d, r.framebuffer().unwrap()));
        }
        let (first, d0, image0) = &frames[0];
        // Cold: only the tail is on the devices, so finer samples are served coarser, and
        // what they asked for is there by the next frame.
        assert!(d0.coarse_samples > 0, "{case}: {d0:?}");
        assert!(d0.coarse_fraction() > 0.0 && d0.coarse_fraction() <= 1.0);
        let asked: u64 = first.requests.iter().sum();
        assert!(asked > 0, "{case}");
        assert_eq!(d0.late_requests, asked, "{case}");
        assert_eq!(d0.arrived_after, vec![0, asked], "{case}");
        let differ = image0
            .chunks(4)
            .zip(want.chunks(4))
            .filter(|(a, b)| a != b)
            .count();
        assert!(differ > 0, "{case}: a degraded frame equals the exact one");
        for (f, (s, d, image)) in frames.iter().enumerate().skip(1) {
            assert_eq!(d.coarse_samples, 0, "{case}, frame {f}");
            assert_eq!(d.samples, d0.samples, "{case}, frame {f}");
            assert_eq!(s.requests.iter().sum::<u64>(), 0, "{case}, frame {f}");
            assert!(image == &want, "{case}, frame {f}: not the exact frame");
        }
        let map = r.coarse_map().unwrap().unwrap();
        assert!(map.iter().all(|&c| c == 0), "{case}");
    }
}

/// Where two devices' strips share framebuffer pages, one device takes such a page from the
/// other and its pixels there run again. Those pixels must sample what they sampled the first
/// time: the atlas pages degrading samples asked for come after the pass, not with the
/// framebuffer page. So the cold first frame, served from the replicated tail alone on every
/// device, is the one-device cold frame whichever device took the page first; it was not when
/// the pixels run again found the pages their first try had asked for (the image then
/// depended on the devices' timing).
#[test]
fn pixels_run_again_for_a_shared_framebuffer_page_sample_what_they_sampled_before() {
    let mesh = scene::generated();
    let cam = scene::camera_path(40)[0];
    // 72 columns on pages of 16, cut evenly (not on pages): the two strips of 36 share the
    // page of columns 32 to 47.
    let (w, h) = (72, 32);
    let frame = |devices: usize| {
        let cfg = SystemConfig::new(devices)
            .threads(2)
            .memory(1 << 22)
            .split_on_pages(false);
        let mut r = Renderer::new_with(
            System::cpu(&cfg).unwrap(),
            mesh.clone(),
            RenderOptions {
                width: w,
                height: h,
                ..opts(Split::LeftRight)
            },
            Some(Filtering {
                filter: Filter::Trilinear,
                border: 0,
                miss: Miss::Degrade { tail: DEFAULT_TAIL },
            }),
        )
        .unwrap();
        let s = r.frame(&cam.view_proj(w as f64 / h as f64)).unwrap();
        let d = s.degrade.clone().unwrap();
        (d, r.framebuffer().unwrap())
    };
    let (alone, want) = frame(1);
    assert_eq!(alone.relaunched, 0, "{alone:?}");
    assert!(alone.coarse_samples > 0, "cold: {alone:?}");
    for round in 0..3 {
        let (d, image) = frame(2);
        assert!(
            d.relaunched > 0,
            "round {round}: the shared page moved: {d:?}"
        );
        assert_eq!(
            d.coarse_samples, alone.coarse_samples,
            "round {round}: {d:?}"
        );
        let differ = image
            .chunks(4)
            .zip(want.chunks(4))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(
            differ, 0,
            "round {round}: pixels unlike the one-device cold frame"
        );
    }
}

#[test]
fn a_relaunching_renderer_has_no_coarse_map_and_no_tail() {
    let r = Renderer::new_with(
        sys(1),
        scene::generated(),
        opts(Split::LeftRight),
        Some(Filtering {
            filter: Filter::Trilinear,
            border: 0,
            miss: Miss::Relaunch,
        }),
    )
    .unwrap();
    assert!(r.tail_pages().is_empty());
    assert!(r.coarse_map().unwrap().is_none());
}
