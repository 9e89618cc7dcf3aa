//! The game trace of paper 4.1.2 (Figs 12–13): a textured scene rasterized split-screen across
//! devices, every texel fetch going through tessera's translation, so that each device's
//! texture misses become page requests.
//!
//! - `Mesh` is the renderer's input: tessera-scene's vertices, triangles (with a texture
//!   index) and RGBA8 textures; `map` makes one from a loaded map, with the map's camera path;
//!   `scene` generates a procedural test scene and camera path.
//! - `atlas`: every texture in one paged RGBA8 atlas object, each texture's rectangle aligned
//!   and padded to the page size, so that no page holds texels of two textures.
//! - `setup`: host-side triangle setup per frame (transform, clip, project, fixed-point edges,
//!   perspective-correct attribute planes) and binning into screen tiles, as buffer words.
//! - `raster.rs` / `raster.wgsl`: the per-pixel kernel in twins; `reference` runs the same
//!   body over plain arrays (the unpaged rasterizer).
//! - `render`: the paged renderer on a node; `trace`: the versioned trace file of texture
//!   blocks per frame and device; `replay`: drives the memory manager from a trace.
pub mod atlas;
pub mod map;
pub mod pictures;
pub mod raster;
pub mod reference;
pub mod render;
pub mod replay;
pub mod replay_text;
pub mod report;
pub mod run;
pub mod scene;
pub mod setup;
pub mod trace;

use tessera_core::CoreError;
use tessera_runtime::RuntimeError;

/// The renderer draws the scene loader's own types: a vertex in Quake's coordinates (Z up,
/// `uv` in texture repeats with row 0 at v = 0), a triangle with its texture, an RGBA8 image.
/// Lightmap coordinates, normal and colour are carried; the renderer samples the texture only.
pub use tessera_scene::{TextureImage, Triangle, Vertex};

/// What the renderer draws.
#[derive(Clone, Debug, Default)]
pub struct Mesh {
    pub vertices: Vec<Vertex>,
    pub triangles: Vec<Triangle>,
    pub textures: Vec<TextureImage>,
}

/// The largest texture side accepted (Quake 3 textures stay well below it).
pub const MAX_TEXTURE_SIDE: u32 = 4096;
/// The largest screen side: the kernel's fixed-point edge functions stay inside 32 bits up to
/// it (see `setup`).
pub const MAX_SCREEN_SIDE: u32 = 2048;

impl Mesh {
    /// Each texture's (width, height), in order.
    pub fn texture_sizes(&self) -> Vec<(u32, u32)> {
        self.textures.iter().map(|t| (t.width, t.height)).collect()
    }

    /// Checks every index and texture, so the renderer never meets a bad one.
    pub fn validate(&self) -> Result<(), QuakeError> {
        if self.textures.is_empty() {
            return Err(QuakeError::Mesh("the mesh has no texture".into()));
        }
        for (i, t) in self.textures.iter().enumerate() {
            if t.width == 0
                || t.height == 0
                || t.width > MAX_TEXTURE_SIDE
                || t.height > MAX_TEXTURE_SIDE
            {
                return Err(QuakeError::Mesh(format!(
                    "texture {i} ({}) is {}x{}: each side must be 1 to {MAX_TEXTURE_SIDE}",
                    t.name, t.width, t.height
                )));
            }
            if t.rgba.len() as u64 != t.width as u64 * t.height as u64 * 4 {
                return Err(QuakeError::Mesh(format!(
                    "texture {i} ({}) is {}x{} but has {} bytes of RGBA8",
                    t.name,
                    t.width,
                    t.height,
                    t.rgba.len()
                )));
            }
        }
        let n = self.vertices.len() as u64;
        for (i, t) in self.triangles.iter().enumerate() {
            if let Some(v) = t.v.iter().find(|&&v| v as u64 >= n) {
                return Err(QuakeError::Mesh(format!(
                    "triangle {i} names vertex {v}; the mesh has {n}"
                )));
            }
            if t.texture as usize >= self.textures.len() {
                return Err(QuakeError::Mesh(format!(
                    "triangle {i} names texture {}; the mesh has {}",
                    t.texture,
                    self.textures.len()
                )));
            }
        }
        for (i, v) in self.vertices.iter().enumerate() {
            if !v.pos.iter().chain(&v.uv).all(|c| c.is_finite()) {
                return Err(QuakeError::Mesh(format!(
                    "vertex {i} has a coordinate that is not finite"
                )));
            }
        }
        Ok(())
    }
}

/// A camera in Quake's conventions: `yaw` about +Z from +X, `pitch` up from the horizon,
/// both in radians; `fov_y` the vertical field of view in radians.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Camera {
    pub eye: [f32; 3],
    pub yaw: f32,
    pub pitch: f32,
    pub fov_y: f32,
}

/// The near plane's distance from the eye, in world units.
pub const NEAR: f64 = 4.0;

/// A view-projection matrix (row-major: clip = M · [x, y, z, 1]). The clip space is the
/// renderer's own: x and y in [-w, w] on screen, w the distance along the view direction, and
/// z = w − NEAR, so the near plane is z = 0 and there is no far plane.
pub type ViewProj = [[f64; 4]; 4];

/// The view's forward, right and up vectors for `yaw` about +Z from +X and `pitch` up from
/// the horizon (Quake's conventions): what the rasterizer's and the ray tracer's cameras share.
pub fn basis(yaw: f32, pitch: f32) -> [[f64; 3]; 3] {
    let (sy, cy) = (yaw as f64).sin_cos();
    let (sp, cp) = (pitch as f64).sin_cos();
    let f = [cp * cy, cp * sy, sp];
    let r = [sy, -cy, 0.0];
    // u = r × f
    let u = [
        r[1] * f[2] - r[2] * f[1],
        r[2] * f[0] - r[0] * f[2],
        r[0] * f[1] - r[1] * f[0],
    ];
    [f, r, u]
}

impl Camera {
    pub fn view_proj(&self, aspect: f64) -> ViewProj {
        let [f, r, u] = basis(self.yaw, self.pitch);
        let e = self.eye.map(|c| c as f64);
        let dot = |a: [f64; 3], b: [f64; 3]| a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
        let ky = 1.0 / (self.fov_y as f64 * 0.5).tan();
        let kx = ky / aspect;
        let row =
            |a: [f64; 3], k: f64, add: f64| [a[0] * k, a[1] * k, a[2] * k, -dot(a, e) * k + add];
        [
            row(r, kx, 0.0),
            row(u, ky, 0.0),
            row(f, 1.0, -NEAR),
            row(f, 1.0, 0.0),
        ]
    }
}

/// How the screen is split across devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Vertical strips, device 0 on the left (the paper's split for two GPUs).
    LeftRight,
    /// Horizontal strips, device 0 at the bottom.
    TopBottom,
}

impl Split {
    pub fn partition(self) -> tessera_runtime::Partition {
        match self {
            Split::LeftRight => tessera_runtime::Partition::Cols,
            Split::TopBottom => tessera_runtime::Partition::Rows,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Split::LeftRight => "left-right",
            Split::TopBottom => "top-bottom",
        }
    }
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "left-right" => Ok(Split::LeftRight),
            "top-bottom" => Ok(Split::TopBottom),
            _ => Err(format!(
                "unknown split {s:?} (expected left-right or top-bottom)"
            )),
        }
    }
}

/// Everything that can go wrong in the game trace, typed.
#[derive(Debug, thiserror::Error)]
pub enum QuakeError {
    #[error("bad mesh: {0}")]
    Mesh(String),
    #[error("{0}")]
    Config(String),
    #[error("cannot load map {name}")]
    Load {
        name: String,
        #[source]
        source: tessera_scene::SceneError,
    },
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error(transparent)]
    Plot(#[from] crate::plot::PlotError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
}
