//! `tessera scene info`: loads a Quake 3 / OpenArena map (tessera-scene) and prints what a
//! renderer would get from it. `tessera scene list`: the maps a pak set holds.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use tessera_scene::{CameraPath, Pak, Scene, DEFAULT_PAK_DIR};

#[derive(Subcommand)]
pub enum SceneKind {
    /// Load a map and print its vertices, triangles, textures, missing textures, lightmaps,
    /// spawn points, bounds, the default camera path and the time the load took.
    Info(InfoOpts),
    /// List the maps of the pak set, each with the pk3 it comes from, for `--map`.
    List(ListOpts),
}

#[derive(Args)]
pub struct ListOpts {
    /// Directory whose `*.pk3` files form the pak set, as for `scene info`.
    #[arg(long, default_value = DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
}

#[derive(Args)]
pub struct InfoOpts {
    /// The map: `maps/<MAP>.bsp` in the pak set (e.g. oa_dm1).
    #[arg(long)]
    map: String,
    /// Directory whose `*.pk3` files form the pak set (alphabetical, later files override
    /// earlier ones). The default is where Debian's `openarena-data` and
    /// `openarena-081-maps` install them.
    #[arg(long, default_value = DEFAULT_PAK_DIR)]
    pak_dir: PathBuf,
}

pub fn scene(which: &SceneKind) -> anyhow::Result<()> {
    match which {
        SceneKind::Info(opts) => info(opts),
        SceneKind::List(opts) => list(opts),
    }
}

fn list(opts: &ListOpts) -> anyhow::Result<()> {
    let pak = Pak::open_dir(&opts.pak_dir)?;
    let maps = pak.maps();
    for m in &maps {
        // The pk3's file name: they all lie in the one folder, named below.
        let source = pak
            .source_of(&format!("maps/{m}.bsp"))
            .and_then(|p| std::path::Path::new(p).file_name())
            .map_or("?".into(), |n| n.to_string_lossy());
        println!("{m}\t{source}");
    }
    println!(
        "{} map(s) in {} pk3 file(s) of {}",
        maps.len(),
        pak.archives(),
        opts.pak_dir.display()
    );
    Ok(())
}

/// How many missing texture names are printed.
const MISSING_LISTED: usize = 5;

fn info(opts: &InfoOpts) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut pak = Pak::open_dir(&opts.pak_dir)?;
    let bsp_name = format!("maps/{}.bsp", opts.map);
    let source = pak.source_of(&bsp_name).unwrap_or("?").to_string();
    let scene = Scene::load_from_pak(&mut pak, &opts.map)?;
    let seconds = start.elapsed().as_secs_f64();

    let mut surfaces: Vec<u32> = scene.triangles.iter().map(|t| t.surface).collect();
    surfaces.sort_unstable();
    surfaces.dedup();
    println!("map: {} ({bsp_name} in {source})", scene.name);
    println!("vertices: {}", scene.vertices.len());
    println!(
        "triangles: {} in {} surfaces",
        scene.triangles.len(),
        surfaces.len()
    );
    let by_texels = |t: &&tessera_scene::TextureImage| u64::from(t.width) * u64::from(t.height);
    let size = |t: Option<&tessera_scene::TextureImage>| {
        t.map_or("-".to_string(), |t| format!("{}x{}", t.width, t.height))
    };
    println!(
        "textures: {}, {} texels, smallest {}, largest {}",
        scene.textures.len(),
        scene.texels(),
        size(scene.textures.iter().min_by_key(by_texels)),
        size(scene.textures.iter().max_by_key(by_texels)),
    );
    let missing: Vec<&str> = scene
        .missing_textures
        .iter()
        .take(MISSING_LISTED)
        .map(|&i| scene.textures[i as usize].name.as_str())
        .collect();
    println!(
        "missing textures: {} (checker placeholders; shader scripts are not parsed){}{}{}",
        scene.missing_textures.len(),
        if missing.is_empty() { "" } else { ": " },
        missing.join(", "),
        if scene.missing_textures.len() > MISSING_LISTED {
            ", …"
        } else {
            ""
        }
    );
    println!("lightmaps: {} (128x128)", scene.lightmaps.len());
    println!("spawns: {}", scene.spawns.len());
    let (lo, hi) = scene.bounds;
    println!(
        "bounds: min ({}, {}, {}) max ({}, {}, {}) (Quake units, Z up)",
        lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]
    );
    let path = CameraPath::through_spawns(&scene, CameraPath::DEFAULT_FRAMES);
    let length: f32 = path
        .frames
        .windows(2)
        .map(|w| {
            (0..3)
                .map(|k| (w[1].eye[k] - w[0].eye[k]).powi(2))
                .sum::<f32>()
                .sqrt()
        })
        .sum();
    println!(
        "camera path: {} frames, {} ({length:.0} units)",
        path.frames.len(),
        if scene.spawns.len() < 2 {
            "orbiting the bounds' centre".to_string()
        } else {
            format!("a loop through the {} spawns", scene.spawns.len())
        }
    );
    println!("load seconds: {seconds:.3}");
    Ok(())
}
