//! `tessera scene info`: loads a Quake 3 / OpenArena map (tessera-scene) and prints what a
//! renderer would get from it. `tessera scene list`: the maps a pak set holds.

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Subcommand};
use tessera_scene::{Pak, Scene, DEFAULT_PAK_DIR};

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
        outln!("{m}\t{source}");
    }
    // On stderr: standard output is the list alone, each line a name and its pk3, so that a
    // loop over `scene list | cut -f1` gets map names only.
    eprintln!(
        "{} map(s) in {} pk3 file(s) of {}",
        maps.len(),
        pak.archives(),
        opts.pak_dir.display()
    );
    Ok(())
}

fn info(opts: &InfoOpts) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut pak = Pak::open_dir(&opts.pak_dir)?;
    let bsp_name = format!("maps/{}.bsp", opts.map);
    let source = pak.source_of(&bsp_name).unwrap_or("?").to_string();
    let scene = Scene::load_from_pak(&mut pak, &opts.map)?;
    let seconds = start.elapsed().as_secs_f64();
    outln!("map: {} ({bsp_name} in {source})", scene.name);
    out!("{}", scene.summary());
    outln!("load seconds: {seconds:.3}");
    Ok(())
}
