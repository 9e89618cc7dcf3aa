//! A loaded map (`tessera_scene::Scene`, an OpenArena / Quake 3 BSP) as the renderer's input.
//!
//! The renderer draws the loader's vertices, triangles and images as they are (Quake's Z-up
//! coordinates, `uv` in texture repeats with row 0 at v = 0); its camera has the loader's
//! angles, so the conversion only copies. Triangles are drawn from both sides, so Quake 3's clockwise winding
//! needs no flip.

use tessera_scene::{CameraPath, Scene};

use super::{Camera, Mesh, QuakeError};

impl From<&Scene> for Mesh {
    fn from(s: &Scene) -> Mesh {
        Mesh {
            vertices: s.vertices.clone(),
            triangles: s.triangles.clone(),
            textures: s.textures.clone(),
        }
    }
}

/// The map's deterministic fly-through (`CameraPath::through_spawns`), `frames` cameras long.
pub fn camera_path(scene: &Scene, frames: u32) -> Vec<Camera> {
    CameraPath::through_spawns(scene, frames as usize)
        .frames
        .iter()
        .map(|c| Camera {
            eye: c.eye,
            yaw: c.yaw,
            pitch: c.pitch,
            fov_y: c.fov_y,
        })
        .collect()
}

/// The scene `spec` names (a map from the pk3 files of `pak_dir`, or tessera-scene's generated
/// room) and its name in reports; a scene with nothing to draw is refused.
pub fn load_spec(
    spec: &crate::raytrace::SceneSpec,
    pak_dir: &std::path::Path,
) -> Result<(Scene, String), QuakeError> {
    use crate::raytrace::SceneSpec;
    let (loaded, name) = match spec {
        SceneSpec::OpenArena(name) => (
            Scene::load_map(pak_dir, name).map_err(|source| QuakeError::Load {
                name: name.clone(),
                source,
            })?,
            spec.to_string(),
        ),
        SceneSpec::Generated(n) => (Scene::generated(*n), spec.to_string()),
    };
    if loaded.triangles.is_empty() {
        return Err(QuakeError::Config(format!(
            "scene {name} has no surfaces to draw"
        )));
    }
    Ok((loaded, name))
}

/// The mesh of the scene `spec` (a map from the pk3 files of `pak_dir`, or tessera-scene's
/// generated room; the game trace's own room where none is given), its camera path `frames`
/// cameras long, its name in reports, and a warning when its textures are mostly
/// placeholders.
pub fn load(
    spec: Option<&crate::raytrace::SceneSpec>,
    pak_dir: &std::path::Path,
    frames: u32,
) -> Result<(Mesh, Vec<Camera>, String, Option<String>), QuakeError> {
    let Some(spec) = spec else {
        let path = super::scene::camera_path(frames);
        return Ok((super::scene::generated(), path, "generated".into(), None));
    };
    let (loaded, name) = load_spec(spec, pak_dir)?;
    let cams = camera_path(&loaded, frames);
    Ok((
        Mesh::from(&loaded),
        cams,
        name,
        loaded.placeholder_warning(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated scene passes the renderer's checks, and its camera path keeps the
    /// loader's angles.
    #[test]
    fn a_generated_scene_is_a_valid_mesh_with_the_loaders_path() {
        Mesh::from(&Scene::generated(2)).validate().unwrap();
        let s = Scene::generated(2);
        let cams = camera_path(&s, 10);
        let path = CameraPath::through_spawns(&s, 10);
        assert_eq!(cams.len(), 10);
        for (a, b) in cams.iter().zip(&path.frames) {
            assert_eq!(
                (a.eye, a.yaw, a.pitch, a.fov_y),
                (b.eye, b.yaw, b.pitch, b.fov_y)
            );
        }
    }
}
