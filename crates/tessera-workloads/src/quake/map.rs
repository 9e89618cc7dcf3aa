//! A loaded map (`tessera_scene::Scene`, an OpenArena / Quake 3 BSP) as the renderer's input.
//!
//! The renderer's types were written to mirror the loader's field for field (Quake's Z-up
//! coordinates, `uv` in texture repeats with row 0 at v = 0, the same camera angles), so the
//! conversion only copies. Triangles are drawn from both sides, so Quake 3's clockwise winding
//! needs no flip.

use tessera_scene::{CameraPath, Scene};

use super::{Camera, Mesh, TextureImage, Triangle, Vertex};

impl From<&Scene> for Mesh {
    fn from(s: &Scene) -> Mesh {
        Mesh {
            vertices: s
                .vertices
                .iter()
                .map(|v| Vertex {
                    pos: v.pos,
                    uv: v.uv,
                    lm_uv: v.lm_uv,
                    normal: v.normal,
                    color: v.color,
                })
                .collect(),
            triangles: s
                .triangles
                .iter()
                .map(|t| Triangle {
                    v: t.v,
                    texture: t.texture,
                    lightmap: t.lightmap,
                    surface: t.surface,
                })
                .collect(),
            textures: s
                .textures
                .iter()
                .map(|t| TextureImage {
                    name: t.name.clone(),
                    width: t.width,
                    height: t.height,
                    rgba: t.rgba.clone(),
                })
                .collect(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated scene converts with every index and texture intact, and its camera path
    /// keeps the loader's angles.
    #[test]
    fn a_generated_scene_converts_field_for_field() {
        let s = Scene::generated(2);
        let m = Mesh::from(&s);
        m.validate().unwrap();
        assert_eq!(m.vertices.len(), s.vertices.len());
        assert_eq!(m.triangles.len(), s.triangles.len());
        for (a, b) in m.triangles.iter().zip(&s.triangles) {
            assert_eq!((a.v, a.texture, a.surface), (b.v, b.texture, b.surface));
        }
        for (a, b) in m.textures.iter().zip(&s.textures) {
            assert_eq!((a.width, a.height, &a.rgba), (b.width, b.height, &b.rgba));
        }
        let cams = camera_path(&s, 10);
        let path = CameraPath::through_spawns(&s, 10);
        assert_eq!(cams.len(), 10);
        for (a, b) in cams.iter().zip(&path.frames) {
            assert_eq!((a.eye, a.yaw, a.pitch), (b.eye, b.yaw, b.pitch));
        }
    }
}
