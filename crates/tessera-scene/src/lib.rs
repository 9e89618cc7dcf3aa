//! Quake 3 / OpenArena scenes as plain data: triangles, RGBA8 textures, lightmaps and spawn
//! points, for tessera's game trace, ray tracer and VR workloads.
//!
//! - [`pk3`]: the pak set (pk3 files are zips; later files override earlier ones) and a writer;
//! - [`bsp`]: the Quake 3 BSP version 46 (`IBSP`) parser, which checks every range and index,
//!   and a writer;
//! - [`Scene`]: a map turned into triangles ([`Scene::load_map`]), or a generated test scene
//!   ([`Scene::generated`]);
//! - [`CameraPath`]: a deterministic fly-through of a scene's spawn points.
//!
//! Coordinates are Quake's: Z up, X and Y horizontal, one unit about an inch; a player's eye is
//! [`EYE_HEIGHT`] units above a spawn origin. Triangles keep Quake 3's winding (see
//! [`Triangle`]). Shader scripts are not parsed: a face's shader name is looked up as an image
//! (`.tga`, then `.jpg`), and a name with no image gets a checker placeholder, so surfaces
//! whose look comes from a shader script (skies, animated or multi-stage shaders, shaders whose
//! image has another name) show the placeholder. Lightmaps are kept as stored, without Quake's
//! overbright shift.

pub mod bsp;
mod camera;
mod entities;
mod generated;
mod patch;
pub mod pk3;
mod scene;
mod texture;

use std::path::PathBuf;

pub use bsp::BspError;
pub use camera::{Camera, CameraPath, EYE_HEIGHT};
pub use entities::{parse_entities, EntitiesError, Entity};
pub use patch::PATCH_SEGMENTS;
pub use pk3::Pak;
pub use texture::PLACEHOLDER_SIZE;

/// The directory the Debian packages `openarena-data` and `openarena-081-maps` install to.
pub const DEFAULT_PAK_DIR: &str = "/usr/share/games/openarena/baseoa";

/// What [`DEFAULT_PAK_DIR`] needs installed, for error messages.
pub const DEBIAN_PACKAGES: &str = "openarena-data openarena-081-maps";

/// One vertex, as a BSP file stores it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vertex {
    /// Position, Quake units, Z up.
    pub pos: [f32; 3],
    /// Surface texture coordinate; (0, 0) is the top-left texel of the image (row 0 of
    /// [`TextureImage::rgba`]), 1 is one image width or height. Repeats outside 0..1.
    pub uv: [f32; 2],
    /// Lightmap coordinate in the triangle's lightmap, 0..1, same orientation as `uv`.
    pub lm_uv: [f32; 2],
    /// Unit normal (as stored; patch vertices are renormalised after interpolation).
    pub normal: [f32; 3],
    /// Vertex colour, RGBA.
    pub color: [u8; 4],
}

/// One triangle: three indices into [`Scene::vertices`].
///
/// The winding is Quake 3's: seen from the side the face's normal points to, the vertices run
/// clockwise (the cross product `(v1 - v0) × (v2 - v0)` points against the normal).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Triangle {
    pub v: [u32; 3],
    /// Index into [`Scene::textures`].
    pub texture: u32,
    /// Index into [`Scene::lightmaps`]; `None` for vertex-lit surfaces.
    pub lightmap: Option<u32>,
    /// The BSP face this triangle came from, so draw calls can be grouped by surface.
    pub surface: u32,
}

/// An RGBA8 image, rows top to bottom, `width * height * 4` bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextureImage {
    /// The shader name (`textures/base_wall/metal1`), or `lightmap N` for lightmaps.
    pub name: String,
    pub width: u32,
    pub height: u32,
    pub rgba: Vec<u8>,
}

/// A player spawn point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spawn {
    /// The entity's origin (the player's centre, [`EYE_HEIGHT`] below the eye).
    pub origin: [f32; 3],
    /// Facing, degrees counter-clockwise from +X seen from above (Quake's `angle` key).
    pub yaw_degrees: f32,
}

/// A scene: everything a renderer needs, as plain data.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    /// The map name (`oa_dm1`), or `generated-N`.
    pub name: String,
    pub vertices: Vec<Vertex>,
    pub triangles: Vec<Triangle>,
    /// The textures kept faces use, in BSP order; placeholders included.
    pub textures: Vec<TextureImage>,
    /// Indices into `textures` of the names that had no image (checker placeholders).
    pub missing_textures: Vec<u32>,
    /// 128 × 128 RGBA8 images, alpha 255.
    pub lightmaps: Vec<TextureImage>,
    /// `info_player_deathmatch` entities, or `info_player_start` when there are none.
    pub spawns: Vec<Spawn>,
    /// Axis-aligned bounds of the vertices (min, max); all zero for a scene without vertices.
    pub bounds: ([f32; 3], [f32; 3]),
}

/// Why a scene could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SceneError {
    #[error(
        "pak directory {} does not exist; install OpenArena's data with \
         `apt-get install {DEBIAN_PACKAGES}`, or give a directory that holds pk3 files",
        dir.display()
    )]
    PakDirMissing { dir: PathBuf },
    #[error(
        "pak directory {} is a file, not a directory: give the directory that holds the pk3 \
         files (a single pk3 is not read on its own)",
        dir.display()
    )]
    PakDirIsAFile { dir: PathBuf },
    #[error(
        "no .pk3 file in {}; install OpenArena's data with `apt-get install {DEBIAN_PACKAGES}`, \
         or give a directory that holds pk3 files",
        dir.display()
    )]
    NoPaks { dir: PathBuf },
    // The wrapped errors are in the messages, so they are not also marked as sources (an
    // error chain printer such as anyhow's `{:#}` would print them twice).
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: not a readable pk3 (zip) file: {error}")]
    Zip {
        path: String,
        error: zip::result::ZipError,
    },
    #[error("{name}: {size} bytes uncompressed, over the {limit}-byte limit for one pk3 entry")]
    EntryTooLarge { name: String, size: u64, limit: u64 },
    #[error(
        "map {map} not found (no maps/{map}.bsp in the pak set); available: {}{}",
        if available.is_empty() { "none".to_string() } else { available.join(", ") },
        if *total > available.len() { format!(" … ({total} in all)") } else { String::new() }
    )]
    MapNotFound {
        map: String,
        /// The first few map names, sorted.
        available: Vec<String>,
        total: usize,
    },
    #[error("maps/{map}.bsp: {error}")]
    Bsp { map: String, error: BspError },
}

impl Scene {
    /// Number of texels over all textures (placeholders included).
    pub fn texels(&self) -> u64 {
        self.textures
            .iter()
            .map(|t| u64::from(t.width) * u64::from(t.height))
            .sum()
    }
}

/// Bounds of a set of positions; all zero when empty, so callers never see infinities.
pub(crate) fn bounds_of(vertices: &[Vertex]) -> ([f32; 3], [f32; 3]) {
    if vertices.is_empty() {
        return ([0.0; 3], [0.0; 3]);
    }
    let mut lo = [f32::INFINITY; 3];
    let mut hi = [f32::NEG_INFINITY; 3];
    for v in vertices {
        for k in 0..3 {
            // NaN positions from a hostile file must not poison the bounds: min/max skip NaN.
            lo[k] = lo[k].min(v.pos[k]);
            hi[k] = hi[k].max(v.pos[k]);
        }
    }
    for k in 0..3 {
        if !lo[k].is_finite() || !hi[k].is_finite() {
            lo[k] = 0.0;
            hi[k] = 0.0;
        }
    }
    (lo, hi)
}
