//! The filtered game trace: a mipmapped atlas sampled bilinearly or trilinearly, paged and
//! bordered, against the unpaged rasterizer sampling the chain in host memory; 1 against 2
//! devices; requests per mip level.

use tessera_core::Filter;
use tessera_runtime::{Procedure, System};
use tessera_workloads::quake::atlas::{Atlas, Packing};
use tessera_workloads::quake::render::{Filtering, Miss, Renderer};
use tessera_workloads::quake::{reference, scene, Camera, Split};

mod common;

use common::{opts, H, W};

fn sys(devices: usize) -> System {
    common::cpu(devices, 1 << 22)
}

#[test]
fn filtered_frames_equal_the_unpaged_rasterizer_on_any_device_count() {
    let mesh = scene::generated();
    let cams: Vec<Camera> = scene::camera_path(40).into_iter().step_by(13).collect();
    let page = 16;
    let sizes: Vec<(u32, u32)> = mesh.textures.iter().map(|t| (t.width, t.height)).collect();
    let atlas = Atlas::pack_with(&sizes, page, Packing::Levels).unwrap();
    // 32-texel textures on 32-aligned corners halve five times: levels 0 to 5 at least.
    assert!(atlas.mip_levels() >= 6, "{}", atlas.mip_levels());
    let aspect = W as f64 / H as f64;
    for filter in [Filter::Bilinear, Filter::Trilinear] {
        let want: Vec<Vec<u8>> = cams
            .iter()
            .map(|c| {
                reference::render_filtered(&mesh, &atlas, &c.view_proj(aspect), W, H, Some(filter))
                    .unwrap()
                    .0
            })
            .collect();
        let nearest: Vec<Vec<u8>> = cams
            .iter()
            .map(|c| {
                reference::render(&mesh, &atlas, &c.view_proj(aspect), W, H)
                    .unwrap()
                    .0
            })
            .collect();
        // Filtering changes most textured pixels of a frame: it is not the nearest texel.
        let changed = want[0]
            .chunks(4)
            .zip(nearest[0].chunks(4))
            .filter(|(a, b)| a != b)
            .count();
        assert!(
            changed > (W * H / 4) as usize,
            "{filter:?}: {changed} pixels changed"
        );
        let mut coarse = 0;
        for (devices, border, split, procedure) in [
            (1, 0, Split::LeftRight, Procedure::Relaunch),
            (2, 1, Split::LeftRight, Procedure::Relaunch),
            (2, 1, Split::TopBottom, Procedure::TwoPass),
            (2, 4, Split::LeftRight, Procedure::TwoPass),
        ] {
            let mut r = Renderer::new_with(
                sys(devices),
                mesh.clone(),
                opts(page, split, procedure),
                Some(Filtering {
                    filter,
                    border,
                    miss: Miss::Relaunch,
                }),
            )
            .unwrap();
            for (f, (c, frame)) in cams.iter().zip(&want).enumerate() {
                let s = r.frame(&c.view_proj(aspect)).unwrap();
                assert_eq!(
                    &r.framebuffer().unwrap(),
                    frame,
                    "{filter:?}, frame {f}, {devices} devices, border {border}, {procedure:?}"
                );
                assert_eq!(s.by_level.len() as u32, atlas.mip_levels());
                assert_eq!(
                    s.by_level.iter().sum::<u64>(),
                    s.requests.iter().sum::<u64>()
                );
                coarse += s.by_level[1..].iter().sum::<u64>();
            }
        }
        // Distant surfaces sample coarser levels, whose pages are requested.
        assert!(coarse > 0, "{filter:?}: no request beyond level 0");
    }
}

/// The residency picture of a mipmapped atlas shows every level: its legend counts each page
/// of the chain once, and a device's pages at the coarser levels, which distant surfaces use,
/// are among those it counts for the device.
#[test]
fn the_residency_picture_counts_every_level_of_the_chain() {
    let mesh = scene::generated();
    let cam = &scene::camera_path(40)[13];
    let mut r = Renderer::new_with(
        sys(2),
        mesh,
        opts(16, Split::LeftRight, Procedure::Relaunch),
        Some(Filtering {
            filter: Filter::Trilinear,
            border: 1,
            miss: Miss::Relaunch,
        }),
    )
    .unwrap();
    let s = r.frame(&cam.view_proj(W as f64 / H as f64)).unwrap();
    assert!(s.by_level[1..].iter().sum::<u64>() > 0, "no coarse request");
    let held = r.atlas_residency().unwrap();
    let chain = r.mip_layout().expect("a mipmapped atlas").page_count();
    assert_eq!(held.len() as u64, chain);
    let picture = tessera_workloads::quake::pictures::residency_image(&r, 1).unwrap();
    assert_eq!(
        picture.counts.iter().sum::<u64>(),
        chain,
        "{:?}",
        picture.counts
    );
    for d in 0..2 {
        let alone = held.iter().filter(|&&m| m == 1 << d).count() as u64;
        assert_eq!(picture.counts[d], alone, "device {d}: {:?}", picture.counts);
    }
    let shared = held.iter().filter(|m| m.count_ones() > 1).count() as u64;
    assert_eq!(picture.counts[2], shared);
    assert_eq!(
        picture.rgba.len() as u64,
        picture.width as u64 * picture.height as u64 * 4
    );
}

/// A filtered frame is a function of the scene and the view, not of the page size: each
/// texture's levels stop where its own size says, wherever the page size puts its rectangle.
/// With rectangles on page boundaries alone, the generated scene's frames at pages 16 and 32
/// differed from those at 8 and 64 on this small screen, where distant texels reach coarse levels.
#[test]
fn filtered_frames_do_not_depend_on_the_page_size() {
    let mesh = scene::generated();
    let cams: Vec<Camera> = scene::camera_path(40).into_iter().step_by(13).collect();
    let (w, h) = (48, 32);
    let aspect = w as f64 / h as f64;
    for filter in [Filter::Bilinear, Filter::Trilinear] {
        let mut first: Option<Vec<Vec<u8>>> = None;
        for page in [4, 8, 16, 32, 64] {
            let mut r = Renderer::new_with(
                sys(1),
                mesh.clone(),
                tessera_workloads::quake::render::RenderOptions {
                    width: w,
                    height: h,
                    ..opts(page, Split::LeftRight, Procedure::Relaunch)
                },
                Some(Filtering {
                    filter,
                    border: 0,
                    miss: Miss::Relaunch,
                }),
            )
            .unwrap();
            let frames: Vec<Vec<u8>> = cams
                .iter()
                .map(|c| {
                    r.frame(&c.view_proj(aspect)).unwrap();
                    r.framebuffer().unwrap()
                })
                .collect();
            match &first {
                None => first = Some(frames),
                Some(want) => {
                    for (f, (got, want)) in frames.iter().zip(want).enumerate() {
                        assert!(got == want, "{filter:?}, page {page}, frame {f}");
                    }
                }
            }
        }
    }
}

/// Under [`Packing::Levels`] every texture keeps the levels its own size allows at every page
/// size; under [`Packing::Pages`] the same sizes lose levels at some page size (the case the
/// filtered atlas avoids), and the two agree wherever the plain layout was aligned already.
#[test]
fn a_mipmapped_atlas_gives_each_texture_its_own_levels() {
    use tessera_workloads::quake::atlas::window_levels;
    let sizes = [
        (64, 256),
        (256, 128),
        (48, 48),
        (32, 32),
        (128, 64),
        (16, 8),
        (24, 40),
    ];
    let own = |&(w, h): &(u32, u32)| (w | h).trailing_zeros();
    let levels = |a: &Atlas| -> Vec<u32> {
        a.rects
            .iter()
            .map(|r| window_levels(r.x | r.y << 16, r.w | r.h << 16).min(16))
            .collect()
    };
    let want: Vec<u32> = sizes.iter().map(own).collect();
    let mut plain_short = false;
    for page in [1, 4, 8, 16, 32, 64, 128] {
        let a = Atlas::pack_with(&sizes, page, Packing::Levels).unwrap();
        assert_eq!(levels(&a), want, "page {page}");
        plain_short |= levels(&Atlas::pack(&sizes, page).unwrap()) != want;
    }
    assert!(plain_short, "the plain layout kept every texture's levels");
    // Powers of two, tallest first, land aligned already: both layouts are one.
    let aligned = [(256, 256), (128, 128), (128, 128), (64, 64), (32, 32)];
    for page in [8, 64] {
        assert_eq!(
            Atlas::pack_with(&aligned, page, Packing::Levels).unwrap(),
            Atlas::pack(&aligned, page).unwrap()
        );
    }
}

#[test]
fn a_border_on_a_writable_atlas_cannot_happen_and_a_too_wide_one_is_refused() {
    let mesh = scene::generated();
    let r = Renderer::new_with(
        sys(1),
        mesh,
        opts(16, Split::LeftRight, Procedure::Relaunch),
        Some(Filtering {
            filter: Filter::Trilinear,
            border: 5,
            miss: Miss::Relaunch,
        }),
    );
    assert!(
        matches!(
            r,
            Err(tessera_workloads::quake::QuakeError::Core(
                tessera_core::CoreError::BorderTooWide {
                    border: 5,
                    page: 16
                }
            ))
        ),
        "{:?}",
        r.err()
    );
}
