//! Draw objects: what an OO-VR application submits (§5.1, Fig. 12: "pillar1", "flag", each
//! with its textures). A scene's BSP face (`Triangle::surface`) is one draw call in Quake 3,
//! so one object is one surface: its triangles, in scene order, and the textures they sample.
use std::collections::BTreeMap;

use tessera_scene::Scene;

/// One draw object.
#[derive(Clone, Debug, PartialEq)]
pub struct DrawObject {
    /// The BSP face (`Triangle::surface`).
    pub surface: u32,
    /// Indices into `Scene::triangles`, ascending.
    pub triangles: Vec<u32>,
    /// The textures the object samples, with their sizes in bytes (RGBA8). Lightmaps are
    /// left out: every face has its own lightmap region, so counting them would make no two
    /// objects share much, and OO-VR's example (Fig. 12, "stone" shared by two pillars) is
    /// about surface textures.
    pub textures: TextureSet,
}

impl DrawObject {
    pub fn triangle_count(&self) -> u64 {
        self.triangles.len() as u64
    }
}

/// Why a scene gives no objects.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectError {
    #[error("scene {0:?} has no surfaces (no triangles), so nothing to draw")]
    NoSurfaces(String),
    #[error("scene {scene:?}: triangle {triangle} names texture {texture}, but the scene has {count} textures")]
    BadTexture {
        scene: String,
        triangle: usize,
        texture: u32,
        count: usize,
    },
}

/// The scene's draw objects, one per surface, in the order each surface first appears among
/// the triangles: that is the programmer-defined submission order OO_APP's queue starts from.
pub fn objects_of(scene: &Scene) -> Result<Vec<DrawObject>, ObjectError> {
    if scene.triangles.is_empty() {
        return Err(ObjectError::NoSurfaces(scene.name.clone()));
    }
    let mut index_of: BTreeMap<u32, usize> = BTreeMap::new();
    let mut objects: Vec<DrawObject> = Vec::new();
    for (i, tri) in scene.triangles.iter().enumerate() {
        let Some(image) = scene.textures.get(tri.texture as usize) else {
            return Err(ObjectError::BadTexture {
                scene: scene.name.clone(),
                triangle: i,
                texture: tri.texture,
                count: scene.textures.len(),
            });
        };
        let k = *index_of.entry(tri.surface).or_insert_with(|| {
            objects.push(DrawObject {
                surface: tri.surface,
                triangles: Vec::new(),
                textures: TextureSet::default(),
            });
            objects.len() - 1
        });
        let object = &mut objects[k];
        object.triangles.push(i as u32);
        let bytes = u64::from(image.width) * u64::from(image.height) * 4;
        object.textures.insert(tri.texture, bytes);
    }
    Ok(objects)
}

/// A set of textures with each one's size in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextureSet(BTreeMap<u32, u64>);

impl TextureSet {
    /// Adds texture `id` of `bytes` bytes (a second insert of one id keeps the first size).
    pub fn insert(&mut self, id: u32, bytes: u64) {
        self.0.entry(id).or_insert(bytes);
    }

    /// `(id, bytes)` in ascending id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.0.iter().map(|(&k, &v)| (k, v))
    }

    pub fn total_bytes(&self) -> u64 {
        self.0.values().sum()
    }

    /// The size of texture `id`, if the set has it.
    pub fn bytes_of(&self, id: u32) -> Option<u64> {
        self.0.get(&id).copied()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn union_with(&mut self, other: &TextureSet) {
        for (id, bytes) in other.iter() {
            self.insert(id, bytes);
        }
    }
}

impl FromIterator<(u32, u64)> for TextureSet {
    fn from_iter<I: IntoIterator<Item = (u32, u64)>>(iter: I) -> Self {
        let mut s = TextureSet::default();
        for (id, bytes) in iter {
            s.insert(id, bytes);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_scene::{TextureImage, Triangle};

    fn image(w: u32, h: u32) -> TextureImage {
        TextureImage {
            name: format!("{w}x{h}"),
            width: w,
            height: h,
            rgba: vec![0; (w * h * 4) as usize],
        }
    }

    fn tri(texture: u32, surface: u32) -> Triangle {
        Triangle {
            v: [0, 0, 0],
            texture,
            lightmap: None,
            surface,
        }
    }

    fn scene(triangles: Vec<Triangle>) -> Scene {
        Scene {
            name: "hand".into(),
            vertices: Vec::new(),
            triangles,
            textures: vec![image(2, 2), image(4, 2)],
            missing_textures: Vec::new(),
            lightmaps: Vec::new(),
            spawns: Vec::new(),
            bounds: ([0.0; 3], [0.0; 3]),
        }
    }

    #[test]
    fn objects_group_triangles_by_surface_in_first_appearance_order() {
        // Surfaces 7, 3, 7, 3, 9: objects 7 (triangles 0, 2), 3 (1, 3), 9 (4).
        let s = scene(vec![tri(0, 7), tri(1, 3), tri(0, 7), tri(1, 3), tri(1, 9)]);
        let objs = objects_of(&s).unwrap();
        let summary: Vec<(u32, Vec<u32>)> = objs
            .iter()
            .map(|o| (o.surface, o.triangles.clone()))
            .collect();
        assert_eq!(summary, [(7, vec![0, 2]), (3, vec![1, 3]), (9, vec![4])]);
        // Texture 0 is 2x2 RGBA8 = 16 bytes; texture 1 is 4x2 = 32 bytes.
        assert_eq!(objs[0].textures.iter().collect::<Vec<_>>(), [(0, 16)]);
        assert_eq!(objs[1].textures.iter().collect::<Vec<_>>(), [(1, 32)]);
        assert_eq!(objs[2].triangle_count(), 1);
    }

    #[test]
    fn bad_scenes_are_errors() {
        assert_eq!(
            objects_of(&scene(Vec::new())),
            Err(ObjectError::NoSurfaces("hand".into()))
        );
        assert!(matches!(
            objects_of(&scene(vec![tri(0, 1), tri(5, 2)])),
            Err(ObjectError::BadTexture {
                triangle: 1,
                texture: 5,
                count: 2,
                ..
            })
        ));
    }

    #[test]
    fn the_generated_scene_gives_objects_covering_every_triangle_once() {
        let s = Scene::generated(1);
        let objs = objects_of(&s).unwrap();
        let mut seen = vec![false; s.triangles.len()];
        for o in &objs {
            for &t in &o.triangles {
                assert!(!seen[t as usize]);
                seen[t as usize] = true;
                assert_eq!(s.triangles[t as usize].surface, o.surface);
            }
        }
        assert!(seen.iter().all(|&b| b));
    }
}
