//! Out-of-core ray tracing (the patent's motivating use): a scene whose BVH,
//! triangles and textures live in paged objects, rendered by rays that fault on pages they do
//! not have and resume from their saved state.
//!
//! - `scene`: the host side. A `quake::Mesh` (a loaded OpenArena map or a generated scene),
//!   optionally instanced K times, gets a BVH built with `obvhs`; the BVH is flattened into
//!   depth-first nodes with escape indices, so traversal needs no stack, and everything
//!   becomes buffer words (nodes, triangles, per-triangle material) plus the `quake` texture
//!   atlas. No scene data is captured in the kernel: it reads only objects and parameters.
//! - `rays.rs` / `rays.wgsl`: the per-pixel kernel in twins: a primary ray, then
//!   `AO_SAMPLES` ambient-occlusion rays with directions hashed from the pixel index. Each
//!   ray's state (phase, BVH node, nearest hit, albedo, occlusion count) lives in a per-pixel
//!   state buffer; a ray that misses a page after making progress stores its state and
//!   suspends (`Fault::Suspend`), and its relaunch continues from there.
//! - `render`: the renderer on a tessera node: objects, the frame loop, the image split across
//!   devices, residency per object.
pub mod rays;
pub mod render;
pub mod run;
pub mod scene;

use tessera_core::CoreError;
use tessera_runtime::RuntimeError;

/// Everything that can go wrong in the ray tracer, typed.
#[derive(Debug, thiserror::Error)]
pub enum RaytraceError {
    #[error("bad scene: {0}")]
    Scene(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Quake(#[from] crate::quake::QuakeError),
    #[error(transparent)]
    Load(#[from] tessera_scene::SceneError),
    #[error("a budget of {budget_bytes} bytes per device is below the ray tracer's minimum of {min_bytes} bytes ({MIN_BUDGET_PAGES} pages of {page_bytes} bytes: one ray's state, image, node, triangle, attribute and texel pages at once)")]
    BudgetTooSmall {
        budget_bytes: u64,
        min_bytes: u64,
        page_bytes: u64,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Pages a device's budget must hold at least: a ray's state and image pages, the node page
/// it is at, a triangle's and an attribute record's (each may straddle two pages) and a texel.
pub const MIN_BUDGET_PAGES: u64 = 8;
/// The largest `generated:N` accepted (N × N boxes).
pub const MAX_GENERATED: u32 = 64;

/// Refuses a per-device budget below [`MIN_BUDGET_PAGES`] pages of page side `page`.
pub fn check_budget(budget_bytes: u64, page: u32) -> Result<(), RaytraceError> {
    let page_bytes = page as u64 * page as u64 * 4;
    let min_bytes = MIN_BUDGET_PAGES * page_bytes;
    if budget_bytes < min_bytes {
        return Err(RaytraceError::BudgetTooSmall {
            budget_bytes,
            min_bytes,
            page_bytes,
        });
    }
    Ok(())
}

/// Where a scene comes from: `openarena:MAP` (a map from the pak directory) or
/// `generated[:N]` (tessera-scene's generated room with N × N boxes; 3 when N is left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SceneSpec {
    OpenArena(String),
    Generated(u32),
}

impl std::str::FromStr for SceneSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(map) = s.strip_prefix("openarena:") {
            if map.is_empty() {
                return Err("openarena: needs a map name (openarena:oa_dm1)".into());
            }
            return Ok(SceneSpec::OpenArena(map.to_string()));
        }
        if s == "generated" {
            return Ok(SceneSpec::Generated(3));
        }
        if let Some(n) = s.strip_prefix("generated:") {
            return match n.parse::<u32>() {
                Ok(n) if n <= MAX_GENERATED => Ok(SceneSpec::Generated(n)),
                _ => Err(format!(
                    "generated:{n}: N must be a whole number from 0 to {MAX_GENERATED}"
                )),
            };
        }
        Err(format!(
            "unknown scene {s:?} (expected openarena:MAP, generated or generated:N)"
        ))
    }
}

/// The scene as `--scene` spells it (`openarena:oa_dm1`, `generated:3`): its name in every
/// report and printout, which `--scene` takes back.
impl std::fmt::Display for SceneSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SceneSpec::OpenArena(map) => write!(f, "openarena:{map}"),
            SceneSpec::Generated(n) => write!(f, "generated:{n}"),
        }
    }
}

impl SceneSpec {
    /// Loads the scene: its mesh, the first camera of its path through the spawn points, and
    /// its name.
    pub fn load(
        &self,
        pak_dir: &std::path::Path,
    ) -> Result<
        (
            crate::quake::Mesh,
            tessera_scene::Camera,
            String,
            Option<String>,
        ),
        RaytraceError,
    > {
        let scene = match self {
            SceneSpec::OpenArena(map) => tessera_scene::Scene::load_map(pak_dir, map)?,
            SceneSpec::Generated(n) => tessera_scene::Scene::generated(*n),
        };
        // Said as the rasterizing workloads say it, before a mesh with nothing in it is
        // refused for lacking a texture.
        if scene.triangles.is_empty() {
            return Err(RaytraceError::Scene(format!(
                "scene {self} has no surfaces to draw"
            )));
        }
        let camera = tessera_scene::CameraPath::through_spawns(&scene, 1)
            .frames
            .first()
            .copied()
            .ok_or_else(|| RaytraceError::Scene("the scene has no camera path".into()))?;
        Ok((
            crate::quake::Mesh::from(&scene),
            camera,
            self.to_string(),
            scene.placeholder_warning(),
        ))
    }

    /// The scene paged with pages of side `page` (its atlas packed as `packing` says),
    /// `instances` copies of it on a grid, the view of its first camera for a `width` ×
    /// `height` image, and its name.
    #[allow(clippy::too_many_arguments)]
    pub fn paged(
        &self,
        pak_dir: &std::path::Path,
        instances: u32,
        page: tessera_core::PageSize,
        packing: crate::quake::atlas::Packing,
        width: u32,
        height: u32,
    ) -> Result<(scene::PagedScene, rays::View, String, Option<String>), RaytraceError> {
        let (mesh, cam, name, warning) = self.load(pak_dir)?;
        let scene = scene::PagedScene::build(&mesh, instances, page.get(), packing)?;
        let view = rays::View::new(
            cam.eye,
            cam.yaw,
            cam.pitch,
            cam.fov_y,
            width as f64 / height as f64,
        );
        Ok((scene, view, name, warning))
    }
}
