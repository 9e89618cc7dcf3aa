//! The BSP parser and scene builder on arbitrary input: a typed error or a scene whose every
//! index is in range, never a panic or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tessera_scene::{bsp, CameraPath, Scene};

fuzz_target!(|data: &[u8]| {
    let Ok(parsed) = bsp::parse(data) else { return };
    // No images: every used texture becomes a placeholder, which is what the loader does for a
    // texture no pk3 holds.
    let scene = Scene::from_bsp(&parsed, "fuzz", |_| Ok(None)).expect("a parsed BSP builds");
    for t in &scene.triangles {
        assert!(t.v.iter().all(|&v| (v as usize) < scene.vertices.len()));
        assert!((t.texture as usize) < scene.textures.len());
        assert!(t.lightmap.is_none_or(|l| (l as usize) < scene.lightmaps.len()));
    }
    let _ = CameraPath::through_spawns(&scene, 8);
});
