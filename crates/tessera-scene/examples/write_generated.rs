//! Writes generated scenes as files: `DIR/generated-N.bsp` and `DIR/generated-N.pk3` (the BSP
//! as `maps/generated-N.bsp` plus its textures as TGA), for N in the box counts given.
//!
//! ```text
//! cargo run -p tessera-scene --example write_generated -- DIR [N ...]   # N: 0 1 4 by default
//! tessera scene info --pak-dir DIR --map generated-4
//! ```

use std::io::Cursor;
use std::process::ExitCode;

use image::{ImageFormat, RgbaImage};
use tessera_scene::{bsp, pk3, Scene};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: write_generated DIR [N ...]");
        return ExitCode::FAILURE;
    };
    let mut counts = Vec::new();
    for a in args {
        match a.parse::<u32>() {
            Ok(n) if n <= 256 => counts.push(n),
            _ => {
                eprintln!("not a box count from 0 to 256: {a}");
                return ExitCode::FAILURE;
            }
        }
    }
    if counts.is_empty() {
        counts = vec![0, 1, 4];
    }
    if let Err(e) = write_all(&dir, &counts) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

fn write_all(dir: &str, counts: &[u32]) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    for &n in counts {
        let scene = Scene::generated(n);
        let bsp = bsp::write(&scene);
        let mut files = vec![(format!("maps/{}.bsp", scene.name), bsp.clone())];
        for t in &scene.textures {
            let img = RgbaImage::from_raw(t.width, t.height, t.rgba.clone()).ok_or("bad size")?;
            let mut tga = Cursor::new(Vec::new());
            img.write_to(&mut tga, ImageFormat::Tga)?;
            files.push((format!("{}.tga", t.name), tga.into_inner()));
        }
        let base = std::path::Path::new(dir).join(&scene.name);
        std::fs::write(base.with_extension("bsp"), bsp)?;
        std::fs::write(base.with_extension("pk3"), pk3::write(&files)?)?;
        println!("{}: {} triangles", base.display(), scene.triangles.len());
    }
    Ok(())
}
