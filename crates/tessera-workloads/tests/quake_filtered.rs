//! The filtered game trace: a mipmapped atlas sampled bilinearly or trilinearly, paged and
//! bordered, against the unpaged rasterizer sampling the chain in host memory; 1 against 2
//! devices; requests per mip level.

use tessera_core::Filter;
use tessera_runtime::{Procedure, System};
use tessera_workloads::quake::atlas::Atlas;
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
    let atlas = Atlas::pack(&sizes, page).unwrap();
    // 32-texel textures on 16-aligned corners halve four times: levels 0 to 4 at least.
    assert!(atlas.mip_levels() >= 5, "{}", atlas.mip_levels());
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
