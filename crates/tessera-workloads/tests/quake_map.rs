//! A map as a user renders it: a scene written as a real pk3 (BSP v46 plus TGA textures), read
//! back by tessera-scene's loader, converted, and rendered through the paged memory on two
//! devices, frame for frame equal to the unpaged rasterizer over the scene as generated (so
//! the file round trip, the conversion and the paging are all checked against data that went
//! through none of them).

use std::io::Cursor;

use image::{ImageFormat, RgbaImage};
use tessera_runtime::{Procedure, System, SystemConfig};
use tessera_scene::{bsp, pk3, Pak, Scene};
use tessera_workloads::quake::atlas::Atlas;
use tessera_workloads::quake::render::{RenderOptions, Renderer};
use tessera_workloads::quake::{map, reference, Mesh, Split};

const W: u32 = 80;
const H: u32 = 60;

fn pk3_of(scene: &Scene) -> Vec<u8> {
    let mut files = vec![(format!("maps/{}.bsp", scene.name), bsp::write(scene))];
    for t in &scene.textures {
        let img = RgbaImage::from_raw(t.width, t.height, t.rgba.clone()).unwrap();
        let mut tga = Cursor::new(Vec::new());
        img.write_to(&mut tga, ImageFormat::Tga).unwrap();
        files.push((format!("{}.tga", t.name), tga.into_inner()));
    }
    pk3::write(&files).unwrap()
}

#[test]
fn a_loaded_map_renders_through_paged_memory_as_the_generated_scene_does_unpaged() {
    let generated = Scene::generated(2);
    let mut pak = Pak::from_bytes(vec![pk3_of(&generated)]).unwrap();
    let loaded = Scene::load_from_pak(&mut pak, &generated.name).unwrap();
    assert!(loaded.missing_textures.is_empty());

    let want_mesh = Mesh::from(&generated);
    let cams: Vec<_> = map::camera_path(&generated, 30)
        .into_iter()
        .step_by(7)
        .collect();
    let page = 16;
    let sizes: Vec<(u32, u32)> = want_mesh
        .textures
        .iter()
        .map(|t| (t.width, t.height))
        .collect();
    let atlas = Atlas::pack(&sizes, page).unwrap();
    let aspect = W as f64 / H as f64;

    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
        let sys = System::cpu(&SystemConfig::new(2).threads(2).memory(1 << 20)).unwrap();
        let mut r = Renderer::new(
            sys,
            Mesh::from(&loaded),
            RenderOptions {
                width: W,
                height: H,
                page,
                split: Split::LeftRight,
                procedure,
                clear_each_frame: false,
                drop_unused: false,
            },
        )
        .unwrap();
        for (i, c) in cams.iter().enumerate() {
            let vp = c.view_proj(aspect);
            let (want, _) = reference::render(&want_mesh, &atlas, &vp, W, H).unwrap();
            // The view is not empty: most pixels are textured, not the clear colour.
            let covered = want.chunks(4).filter(|p| *p != [0, 0, 0, 255]).count();
            assert!(
                covered > (W * H / 2) as usize,
                "frame {i}: {covered} pixels"
            );
            r.frame(&vp).unwrap();
            assert!(
                r.framebuffer().unwrap() == want,
                "frame {i} ({procedure:?}) differs from the unpaged render"
            );
        }
    }
}
