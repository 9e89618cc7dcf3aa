//! From a parsed BSP (and a pak set for the images) to a [`Scene`].

use std::path::Path;

use crate::bsp::{self, Bsp, BspError, FaceKind, LIGHTMAP_SIDE};
use crate::patch::{patch_counts, tessellate};
use crate::texture::{candidates, decode, placeholder};
use crate::{bounds_of, CameraPath, Pak, Scene, SceneError, Spawn, TextureImage, Triangle};

/// How many map names a "map not found" error lists.
const MAPS_LISTED: usize = 8;

impl Scene {
    /// Loads `maps/<map>.bsp` from the pk3 files in `dir` (see [`Pak::open_dir`]), with the
    /// images of the textures its faces use.
    pub fn load_map(dir: impl AsRef<Path>, map: &str) -> Result<Scene, SceneError> {
        let mut pak = Pak::open_dir(dir.as_ref())?;
        Scene::load_from_pak(&mut pak, map)
    }

    /// Loads `maps/<map>.bsp` from a pak set.
    pub fn load_from_pak(pak: &mut Pak, map: &str) -> Result<Scene, SceneError> {
        let Some(bytes) = pak.read(&format!("maps/{map}.bsp"))? else {
            let maps = pak.maps();
            return Err(SceneError::MapNotFound {
                map: map.to_string(),
                available: maps.iter().take(MAPS_LISTED).cloned().collect(),
                total: maps.len(),
            });
        };
        let bsp = bsp::parse(&bytes).map_err(|error| SceneError::Bsp {
            map: map.to_string(),
            error,
        })?;
        Scene::from_bsp(&bsp, map, |name| pak.read(name))
    }

    /// Builds a scene from a checked BSP. `images` returns a file's bytes by pak name
    /// (`textures/foo/bar.tga`), or `None`.
    ///
    /// Kept faces: polygons and meshes (triangles from their meshverts, their vertex range
    /// copied), patches (tessellated, [`crate::PATCH_SEGMENTS`] per block side); billboards are
    /// left out. Surface flags are not consulted (see [`bsp::SURF_NODRAW`]). Only the textures
    /// kept faces
    /// use are loaded, in BSP order.
    pub fn from_bsp(
        bsp: &Bsp,
        name: &str,
        mut images: impl FnMut(&str) -> Result<Option<Vec<u8>>, SceneError>,
    ) -> Result<Scene, SceneError> {
        let bsp_error = |error| SceneError::Bsp {
            map: name.to_string(),
            error,
        };
        // `parse` checked every index, so the indexing below cannot fail.
        let kept: Vec<usize> = (0..bsp.faces.len())
            .filter(|&i| bsp.faces[i].kind != FaceKind::Billboard)
            .collect();

        // Faces may share vertex ranges, so the output can exceed the file; bound it before
        // allocating anything.
        let (mut n_vertices, mut n_triangles) = (0u64, 0u64);
        for &i in &kept {
            let f = &bsp.faces[i];
            let (v, t) = match f.kind {
                FaceKind::Patch => patch_counts(f.size[0] as usize, f.size[1] as usize),
                _ => (f.n_vertices as u64, f.n_meshverts as u64 / 3),
            };
            n_vertices += v;
            n_triangles += t;
        }
        let limit = 64 * (bsp.vertices.len() as u64 + bsp.meshverts.len() as u64) + 65_536;
        if n_vertices > limit || n_triangles > limit {
            return Err(bsp_error(BspError::TooLarge {
                vertices: n_vertices,
                triangles: n_triangles,
                limit,
            }));
        }

        let mut remap: Vec<Option<u32>> = vec![None; bsp.textures.len()];
        for &i in &kept {
            remap[bsp.faces[i].texture as usize] = Some(0);
        }
        let mut used = Vec::new();
        for (i, slot) in remap.iter_mut().enumerate() {
            if slot.is_some() {
                *slot = Some(used.len() as u32);
                used.push(i);
            }
        }

        let mut vertices = Vec::with_capacity(n_vertices as usize);
        let mut triangles = Vec::with_capacity(n_triangles as usize);
        let mut patch_tris = Vec::new();
        for &i in &kept {
            let f = &bsp.faces[i];
            let texture = remap[f.texture as usize].unwrap_or(0);
            let lightmap = f.lightmap();
            let triangle = |v: [u32; 3]| Triangle {
                v,
                texture,
                lightmap,
                surface: i as u32,
            };
            match f.kind {
                FaceKind::Polygon | FaceKind::Mesh => {
                    let base = vertices.len() as u32;
                    vertices.extend_from_slice(&bsp.vertices[f.vertex_range()]);
                    for m in bsp.meshverts[f.meshvert_range()].chunks_exact(3) {
                        triangles.push(triangle([
                            base + m[0] as u32,
                            base + m[1] as u32,
                            base + m[2] as u32,
                        ]));
                    }
                }
                FaceKind::Patch => {
                    patch_tris.clear();
                    let [w, h] = f.size;
                    tessellate(
                        &bsp.vertices[f.vertex_range()],
                        w as usize,
                        h as usize,
                        &mut vertices,
                        &mut patch_tris,
                    );
                    triangles.extend(patch_tris.iter().map(|&v| triangle(v)));
                }
                FaceKind::Billboard => {}
            }
        }

        let mut textures = Vec::with_capacity(used.len());
        let mut missing_textures = Vec::new();
        for &t in &used {
            let shader = &bsp.textures[t].name;
            let mut image = None;
            for file in candidates(shader) {
                if let Some(bytes) = images(&file)? {
                    image = decode(shader, &file, &bytes);
                    if image.is_some() {
                        break;
                    }
                }
            }
            textures.push(image.unwrap_or_else(|| {
                missing_textures.push(textures.len() as u32);
                placeholder(shader)
            }));
        }

        let lightmaps = bsp
            .lightmaps
            .iter()
            .enumerate()
            .map(|(i, rgb)| TextureImage {
                name: format!("lightmap {i}"),
                width: LIGHTMAP_SIDE as u32,
                height: LIGHTMAP_SIDE as u32,
                rgba: rgb
                    .chunks_exact(3)
                    .flat_map(|p| [p[0], p[1], p[2], 255])
                    .collect(),
            })
            .collect();

        let bounds = bounds_of(&vertices);
        Ok(Scene {
            name: name.to_string(),
            vertices,
            triangles,
            textures,
            missing_textures,
            lightmaps,
            spawns: spawns(bsp),
            bounds,
        })
    }
}

/// `info_player_deathmatch` entities, then, while there are fewer than two, the other kinds of
/// spawn point (`info_player_start`, the capture-the-flag team spawns), each kind whole.
/// Entities whose origin is not three finite numbers within the world
/// ([`crate::bsp::WORLD_LIMIT`]) are skipped.
fn spawns(bsp: &Bsp) -> Vec<Spawn> {
    let of_class = |class: &str| -> Vec<Spawn> {
        bsp.entities
            .iter()
            .filter(|e| e.get("classname") == Some(class))
            .filter_map(|e| {
                let origin = floats(e.get("origin")?)?;
                let [x, y, z] = origin[..] else { return None };
                if origin.iter().any(|c| c.abs() > crate::bsp::WORLD_LIMIT) {
                    return None;
                }
                let yaw = e
                    .get("angle")
                    .and_then(|a| a.trim().parse::<f32>().ok())
                    .or_else(|| floats(e.get("angles")?)?.get(1).copied())
                    .filter(|y| y.is_finite())
                    .unwrap_or(0.0);
                Some(Spawn {
                    origin: [x, y, z],
                    yaw_degrees: yaw,
                })
            })
            .collect()
    };
    // Deathmatch spawns first; a capture-the-flag map may have one or none of them and tens of
    // team spawns, and a path through fewer than two points orbits the bounds, which on such
    // a map (hydronex) leaves the map: its frames were mostly the void.
    let mut points = of_class("info_player_deathmatch");
    for class in [
        "info_player_start",
        "team_CTF_redplayer",
        "team_CTF_blueplayer",
        "team_CTF_redspawn",
        "team_CTF_bluespawn",
    ] {
        if points.len() >= 2 {
            break;
        }
        points.extend(of_class(class));
    }
    points
}

fn floats(s: &str) -> Option<Vec<f32>> {
    s.split_whitespace()
        .map(|x| x.parse::<f32>().ok().filter(|v| v.is_finite()))
        .collect()
}

/// How many missing texture names [`Scene::summary`] lists.
const MISSING_LISTED: usize = 5;

/// `println!` into a string.
macro_rules! ln {
        ($s:ident, $($t:tt)*) => {{
            $s.push_str(&format!($($t)*));
            $s.push('\n');
        }};
}

impl Scene {
    /// Whether more than half of the scene's textures are checker placeholders: a map read
    /// without OpenArena's texture package (only `openarena-081-maps` installed) has all of
    /// them missing, and its atlas, requests and images are a different workload's.
    pub fn mostly_placeholders(&self) -> bool {
        !self.textures.is_empty() && 2 * self.missing_textures.len() > self.textures.len()
    }

    /// A warning for a run on a scene that is [`Scene::mostly_placeholders`], else `None`.
    pub fn placeholder_warning(&self) -> Option<String> {
        self.mostly_placeholders().then(|| {
            format!(
                "{} of the {} textures of {} are missing from the pak set and drawn as checker placeholders, so its atlas, page requests and images are not the map's; install OpenArena's textures (`apt-get install {}`)",
                self.missing_textures.len(),
                self.textures.len(),
                self.name,
                crate::DEBIAN_PACKAGES
            )
        })
    }

    /// What a renderer gets from the scene, a line each: vertices, triangles, textures,
    /// missing textures, lightmaps, spawn points, bounds and the default camera path.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let mut surfaces: Vec<u32> = self.triangles.iter().map(|t| t.surface).collect();
        surfaces.sort_unstable();
        surfaces.dedup();
        ln!(s, "vertices: {}", self.vertices.len());
        ln!(
            s,
            "triangles: {} in {} surfaces",
            self.triangles.len(),
            surfaces.len()
        );
        let by_texels = |t: &&TextureImage| u64::from(t.width) * u64::from(t.height);
        let size = |t: Option<&TextureImage>| {
            t.map_or("-".to_string(), |t| format!("{}x{}", t.width, t.height))
        };
        ln!(
            s,
            "textures: {}, {} texels, smallest {}, largest {}",
            self.textures.len(),
            self.texels(),
            size(self.textures.iter().min_by_key(by_texels)),
            size(self.textures.iter().max_by_key(by_texels)),
        );
        let missing: Vec<&str> = self
            .missing_textures
            .iter()
            .take(MISSING_LISTED)
            .map(|&i| self.textures[i as usize].name.as_str())
            .collect();
        ln!(
            s,
            "missing textures: {} (checker placeholders; {}){}{}{}",
            self.missing_textures.len(),
            if self.mostly_placeholders() {
                "the pak set holds almost none of the images: is openarena-data installed?"
            } else {
                "shader-script names, which are not parsed, or images the pak set lacks"
            },
            if missing.is_empty() { "" } else { ": " },
            missing.join(", "),
            if self.missing_textures.len() > MISSING_LISTED {
                ", …"
            } else {
                ""
            }
        );
        ln!(s, "lightmaps: {} (128x128)", self.lightmaps.len());
        ln!(s, "spawns: {}", self.spawns.len());
        let (lo, hi) = self.bounds;
        ln!(
            s,
            "bounds: min ({}, {}, {}) max ({}, {}, {}) (Quake units, Z up)",
            lo[0],
            lo[1],
            lo[2],
            hi[0],
            hi[1],
            hi[2]
        );
        let path = CameraPath::through_spawns(self, CameraPath::DEFAULT_FRAMES);
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
        ln!(
            s,
            "camera path: {} frames, {} ({length:.0} units)",
            path.frames.len(),
            if self.spawns.len() < 2 {
                "orbiting the bounds' centre".to_string()
            } else {
                format!("a loop through the {} spawns", self.spawns.len())
            }
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bsp::{BspTexture, Face};
    use crate::entities::parse_entities;
    use crate::Vertex;

    fn vertex(x: f32, y: f32) -> Vertex {
        Vertex {
            pos: [x, y, 0.0],
            uv: [x / 64.0, y / 64.0],
            lm_uv: [0.5, 0.5],
            normal: [0.0, 0.0, 1.0],
            color: [255; 4],
        }
    }

    fn face(kind: FaceKind, texture: i32, vertex: i32, n_vertices: i32) -> Face {
        Face {
            texture,
            effect: -1,
            kind,
            vertex,
            n_vertices,
            meshvert: 0,
            n_meshverts: 0,
            lightmap: -1,
            lm_start: [0; 2],
            lm_size: [0; 2],
            lm_origin: [0.0; 3],
            lm_vecs: [[0.0; 3]; 2],
            normal: [0.0, 0.0, 1.0],
            size: [0; 2],
        }
    }

    /// A hand-built BSP: a triangle, a 3 × 3 patch, a billboard and a triangle whose texture
    /// has the no-draw flag.
    fn sample() -> Bsp {
        let mut vertices: Vec<Vertex> =
            vec![vertex(0.0, 0.0), vertex(64.0, 0.0), vertex(0.0, 64.0)];
        vertices.extend((0..9).map(|k| vertex((k % 3) as f32 * 32.0, (k / 3) as f32 * 32.0)));
        let tex = |name: &str, flags| BspTexture {
            name: name.to_string(),
            flags,
            contents: 1,
        };
        let mut tri = face(FaceKind::Polygon, 2, 0, 3);
        tri.n_meshverts = 3;
        tri.lightmap = 0;
        let mut flagged = face(FaceKind::Polygon, 3, 0, 3);
        flagged.n_meshverts = 3;
        let mut patch = face(FaceKind::Patch, 0, 3, 9);
        patch.size = [3, 3];
        Bsp {
            entities: parse_entities(
                "{ \"classname\" \"info_player_start\" \"origin\" \"1 2 3\" \"angle\" \"90\" }\n\
                 { \"classname\" \"info_player_start\" \"origin\" \"1 2\" }",
            )
            .unwrap(),
            textures: vec![
                tex("textures/a/patch", 0),
                tex("textures/a/unused", 0),
                tex("textures/a/tri", 0),
                tex("textures/a/flagged", crate::bsp::SURF_NODRAW),
            ],
            vertices,
            meshverts: vec![0, 2, 1],
            faces: vec![tri, patch, face(FaceKind::Billboard, 1, 0, 1), flagged],
            lightmaps: vec![vec![7; crate::bsp::LIGHTMAP_LEN]],
            effects: 0,
        }
    }

    #[test]
    fn faces_become_triangles_and_only_used_textures_load() {
        let mut asked = Vec::new();
        let scene = Scene::from_bsp(&sample(), "sample", |name| {
            asked.push(name.to_string());
            Ok(None)
        })
        .unwrap();
        let s = crate::PATCH_SEGMENTS;
        // The triangle's 3 vertices, the patch's (s + 1)², the flagged triangle's 3.
        assert_eq!(scene.vertices.len(), 3 + (s + 1) * (s + 1) + 3);
        assert_eq!(scene.triangles.len(), 1 + 2 * s * s + 1);
        // BSP order, the unused texture skipped, the flagged one kept.
        let names: Vec<&str> = scene.textures.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["textures/a/patch", "textures/a/tri", "textures/a/flagged"]
        );
        assert_eq!(
            asked,
            [
                "textures/a/patch.tga",
                "textures/a/patch.jpg",
                "textures/a/tri.tga",
                "textures/a/tri.jpg",
                "textures/a/flagged.tga",
                "textures/a/flagged.jpg"
            ]
        );
        assert_eq!(scene.missing_textures, [0, 1, 2]);
        assert_eq!(
            scene.triangles[0],
            Triangle {
                v: [0, 2, 1],
                texture: 1,
                lightmap: Some(0),
                surface: 0
            }
        );
        let patch = &scene.triangles[1..1 + 2 * s * s];
        assert!(patch
            .iter()
            .all(|t| t.surface == 1 && t.texture == 0 && t.lightmap.is_none()));
        let base = (3 + (s + 1) * (s + 1)) as u32;
        assert_eq!(
            scene.triangles.last(),
            Some(&Triangle {
                v: [base, base + 2, base + 1],
                texture: 2,
                lightmap: None,
                surface: 3
            })
        );
        assert_eq!(scene.bounds, ([0.0, 0.0, 0.0], [64.0, 64.0, 0.0]));
        assert_eq!(scene.lightmaps[0].rgba[..8], [7, 7, 7, 255, 7, 7, 7, 255]);
        // The second start has a bad origin and is skipped.
        assert_eq!(
            scene.spawns,
            [Spawn {
                origin: [1.0, 2.0, 3.0],
                yaw_degrees: 90.0
            }]
        );
    }

    /// Deathmatch spawns, then the other kinds until there are two: a capture-the-flag map
    /// with one deathmatch spawn and many team spawns gets a path through them, not an orbit.
    #[test]
    fn spawns_are_taken_until_a_path_has_two() {
        let at = |class: &str, x: i32| {
            format!("{{ \"classname\" \"{class}\" \"origin\" \"{x} 0 0\" }}\n")
        };
        let xs = |entities: String| -> Vec<f32> {
            let mut bsp = sample();
            bsp.entities = parse_entities(&entities).unwrap();
            spawns(&bsp).iter().map(|s| s.origin[0]).collect()
        };
        // Two deathmatch spawns: nothing else is taken.
        let dm = at("info_player_deathmatch", 1) + &at("info_player_deathmatch", 2);
        assert_eq!(xs(dm + &at("team_CTF_redplayer", 9)), [1.0, 2.0]);
        // One: the start, then the team spawns, each kind whole.
        let one = at("info_player_deathmatch", 1) + &at("info_player_start", 2);
        assert_eq!(xs(one.clone() + &at("team_CTF_redplayer", 9)), [1.0, 2.0]);
        let ctf = at("info_player_deathmatch", 1)
            + &at("team_CTF_redplayer", 3)
            + &at("team_CTF_redplayer", 4)
            + &at("team_CTF_blueplayer", 5);
        assert_eq!(xs(ctf), [1.0, 3.0, 4.0]);
        assert_eq!(xs(at("team_CTF_bluespawn", 7)), [7.0]);
        // An origin outside the world is skipped, as one that is not finite is.
        let far = at("info_player_deathmatch", 1)
            + &at("info_player_deathmatch", 2_000_000)
            + &at("info_player_deathmatch", 3);
        assert_eq!(xs(far), [1.0, 3.0]);
    }
}
