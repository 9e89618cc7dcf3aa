//! A procedural scene for tests: a room, a corridor and n × n boxes, deterministic.

use crate::{bounds_of, Scene, Spawn, TextureImage, Triangle, Vertex};

/// Room side and height, corridor length, width and height, in Quake units.
const ROOM: f32 = 1024.0;
const ROOM_HEIGHT: f32 = 256.0;
const CORRIDOR_LENGTH: f32 = 512.0;
const CORRIDOR_WIDTH: f32 = 128.0;
const CORRIDOR_HEIGHT: f32 = 128.0;
const BOX_SIDE: f32 = 32.0;
/// World units per texture repeat on the room's surfaces.
const TEXTURE_SCALE: f32 = 128.0;

/// Texture names and sizes: several powers of two, one not square.
const TEXTURES: [(&str, u32, u32); 5] = [
    ("textures/generated/floor", 256, 256),
    ("textures/generated/wall", 128, 64),
    ("textures/generated/ceiling", 64, 64),
    ("textures/generated/corridor", 128, 128),
    ("textures/generated/box", 32, 32),
];
const FLOOR: u32 = 0;
const WALL: u32 = 1;
const CEILING: u32 = 2;
const CORRIDOR: u32 = 3;
const BOX: u32 = 4;

fn texture(index: u32) -> TextureImage {
    let (name, width, height) = TEXTURES[index as usize];
    let mut rgba = Vec::with_capacity((width * height * 4) as usize);
    let cell = (width / 8).max(1);
    for y in 0..height {
        for x in 0..width {
            let on = ((x / cell) + (y / cell)) % 2 == 0;
            let base = 60 * index as u8;
            rgba.extend_from_slice(&[
                (if on { 200 } else { 40 }) ^ base,
                (x * 255 / width) as u8,
                (y * 255 / height) as u8,
                255,
            ]);
        }
    }
    TextureImage {
        name: name.to_string(),
        width,
        height,
        rgba,
    }
}

fn lightmap(index: u32) -> TextureImage {
    let side = 128u32;
    let mut rgba = Vec::with_capacity((side * side * 4) as usize);
    for y in 0..side {
        for x in 0..side {
            let v = 96 + ((x + y + 37 * index) % 160) as u8;
            rgba.extend_from_slice(&[v, v, (v / 2).wrapping_add(64 * index as u8), 255]);
        }
    }
    TextureImage {
        name: format!("lightmap {index}"),
        width: side,
        height: side,
        rgba,
    }
}

struct Builder {
    vertices: Vec<Vertex>,
    triangles: Vec<Triangle>,
    surfaces: u32,
}

impl Builder {
    /// A quad whose corners run counter-clockwise seen from the side `normal` points to; its
    /// triangles get Quake's winding (clockwise seen from the front). `surface`: `None` opens a
    /// new surface, `Some(s)` adds to surface `s`.
    fn quad(
        &mut self,
        corners: [[f32; 3]; 4],
        normal: [f32; 3],
        texture: u32,
        lightmap: Option<u32>,
        surface: Option<u32>,
    ) {
        let surface = surface.unwrap_or_else(|| {
            self.surfaces += 1;
            self.surfaces - 1
        });
        let edge =
            |a: [f32; 3], b: [f32; 3]| ((0..3).map(|k| (b[k] - a[k]).powi(2)).sum::<f32>()).sqrt();
        let (w, h) = (edge(corners[0], corners[1]), edge(corners[0], corners[3]));
        let scale = if texture == BOX { w } else { TEXTURE_SCALE };
        let tile = surface % 64;
        let (lu, lv) = ((tile % 8) as f32 / 8.0, (tile / 8) as f32 / 8.0);
        let base = self.vertices.len() as u32;
        for (k, pos) in corners.into_iter().enumerate() {
            let (s, t) = [(0.0, 1.0), (1.0, 1.0), (1.0, 0.0), (0.0, 0.0)][k];
            self.vertices.push(Vertex {
                pos,
                uv: [s * w / scale, t * h / scale],
                lm_uv: [lu + s / 8.0, lv + t / 8.0],
                normal,
                color: [255, 255 - (surface % 128) as u8, 255, 255],
            });
        }
        for v in [[base, base + 3, base + 2], [base, base + 2, base + 1]] {
            self.triangles.push(Triangle {
                v,
                texture,
                lightmap,
                surface,
            });
        }
    }

    /// An axis-aligned box: `inward` normals for rooms (seen from inside), outward for solids.
    /// `skip` leaves out faces by index: -x, +x, -y, +y, -z, +z.
    #[allow(clippy::too_many_arguments)]
    fn cuboid(
        &mut self,
        lo: [f32; 3],
        hi: [f32; 3],
        inward: bool,
        textures: [u32; 6],
        lightmap: Option<u32>,
        one_surface: bool,
        skip: [bool; 6],
    ) {
        let [x0, y0, z0] = lo;
        let [x1, y1, z1] = hi;
        // Each face's corners counter-clockwise seen from outside, and its outward normal.
        let faces: [([[f32; 3]; 4], [f32; 3]); 6] = [
            (
                [[x0, y1, z0], [x0, y0, z0], [x0, y0, z1], [x0, y1, z1]],
                [-1.0, 0.0, 0.0],
            ),
            (
                [[x1, y0, z0], [x1, y1, z0], [x1, y1, z1], [x1, y0, z1]],
                [1.0, 0.0, 0.0],
            ),
            (
                [[x0, y0, z0], [x1, y0, z0], [x1, y0, z1], [x0, y0, z1]],
                [0.0, -1.0, 0.0],
            ),
            (
                [[x1, y1, z0], [x0, y1, z0], [x0, y1, z1], [x1, y1, z1]],
                [0.0, 1.0, 0.0],
            ),
            (
                [[x0, y1, z0], [x1, y1, z0], [x1, y0, z0], [x0, y0, z0]],
                [0.0, 0.0, -1.0],
            ),
            (
                [[x0, y0, z1], [x1, y0, z1], [x1, y1, z1], [x0, y1, z1]],
                [0.0, 0.0, 1.0],
            ),
        ];
        let mut surface = None;
        for (k, (mut corners, mut normal)) in faces.into_iter().enumerate() {
            if skip[k] {
                continue;
            }
            if inward {
                corners.reverse();
                normal = normal.map(|x| -x);
            }
            self.quad(corners, normal, textures[k], lightmap, surface);
            if one_surface {
                surface = Some(self.surfaces - 1);
            }
        }
    }
}

impl Scene {
    /// A deterministic test scene: a 1024 × 1024 × 256 room (floor, ceiling, walls), a
    /// 512-unit corridor leaving its +X wall through an opening, and `n × n` boxes on the room's
    /// floor (one surface each). Five textures of different power-of-two sizes (256², 128 × 64,
    /// 64², 128², 32²; the last, the boxes', only when `n > 0`), two lightmaps (room, boxes; the corridor is vertex-lit), five spawns
    /// (four in the room's corners facing its centre, one at the corridor's end). One surface per
    /// room or corridor quad; every surface's vertices are contiguous and in surface order, as
    /// [`crate::bsp::write`] and the loader keep them, so a round trip gives back this scene.
    pub fn generated(n: u32) -> Scene {
        let mut b = Builder {
            vertices: Vec::new(),
            triangles: Vec::new(),
            surfaces: 0,
        };
        let room = Some(0);
        b.cuboid(
            [0.0, 0.0, 0.0],
            [ROOM, ROOM, ROOM_HEIGHT],
            true,
            [WALL, WALL, WALL, WALL, FLOOR, CEILING],
            room,
            false,
            [false, true, false, false, false, false],
        );
        // The +X wall, around the corridor's opening.
        let (c0, c1) = ((ROOM - CORRIDOR_WIDTH) / 2.0, (ROOM + CORRIDOR_WIDTH) / 2.0);
        let inward = [-1.0, 0.0, 0.0];
        for (ya, yb, za, zb) in [
            (0.0, c0, 0.0, ROOM_HEIGHT),
            (c1, ROOM, 0.0, ROOM_HEIGHT),
            (c0, c1, CORRIDOR_HEIGHT, ROOM_HEIGHT),
        ] {
            b.quad(
                [
                    [ROOM, yb, za],
                    [ROOM, ya, za],
                    [ROOM, ya, zb],
                    [ROOM, yb, zb],
                ],
                inward,
                WALL,
                room,
                None,
            );
        }
        b.cuboid(
            [ROOM, c0, 0.0],
            [ROOM + CORRIDOR_LENGTH, c1, CORRIDOR_HEIGHT],
            true,
            [CORRIDOR; 6],
            None,
            false,
            [true, false, false, false, false, false],
        );
        let step = ROOM / (n as f32 + 1.0);
        for j in 0..n {
            for i in 0..n {
                let (x, y) = ((i + 1) as f32 * step, (j + 1) as f32 * step);
                let height = BOX_SIDE * (1.0 + ((i + j) % 4) as f32 / 2.0);
                let h = BOX_SIDE / 2.0;
                b.cuboid(
                    [x - h, y - h, 0.0],
                    [x + h, y + h, height],
                    false,
                    [BOX; 6],
                    Some(1),
                    true,
                    [false, false, false, false, true, false],
                );
            }
        }
        let spawn = |x, y, yaw| Spawn {
            origin: [x, y, 24.0],
            yaw_degrees: yaw,
        };
        let bounds = bounds_of(&b.vertices);
        Scene {
            name: format!("generated-{n}"),
            vertices: b.vertices,
            triangles: b.triangles,
            // As the loader does, no texture that no triangle uses: no boxes, no box texture
            // (the last, so no index moves).
            textures: (0..TEXTURES.len() as u32)
                .filter(|&t| t != BOX || n > 0)
                .map(texture)
                .collect(),
            missing_textures: Vec::new(),
            lightmaps: vec![lightmap(0), lightmap(1)],
            spawns: vec![
                spawn(64.0, 64.0, 45.0),
                spawn(ROOM - 64.0, 64.0, 135.0),
                spawn(ROOM - 64.0, ROOM - 64.0, 225.0),
                spawn(64.0, ROOM - 64.0, -45.0),
                spawn(ROOM + CORRIDOR_LENGTH - 64.0, ROOM / 2.0, 180.0),
            ],
            bounds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
        [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
    }

    fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
        [
            a[1] * b[2] - a[2] * b[1],
            a[2] * b[0] - a[0] * b[2],
            a[0] * b[1] - a[1] * b[0],
        ]
    }

    #[test]
    fn counts_winding_and_determinism() {
        let s = Scene::generated(3);
        // Room: 5 quads + 3 wall pieces; corridor: 5 quads; boxes: 9 × 5 quads, 4 vertices and
        // 2 triangles per quad (by hand).
        let quads = 5 + 3 + 5 + 9 * 5;
        assert_eq!(s.vertices.len(), 4 * quads);
        assert_eq!(s.triangles.len(), 2 * quads);
        assert_eq!(
            s.triangles.iter().map(|t| t.surface).max(),
            Some(5 + 3 + 5 + 9 - 1)
        );
        assert_eq!(s.bounds, ([0.0, 0.0, 0.0], [1536.0, 1024.0, 256.0]));
        assert_eq!(s, Scene::generated(3));
        // Quake's winding: the geometric normal points against the stored one.
        for t in &s.triangles {
            let [a, b, c] = t.v.map(|i| s.vertices[i as usize]);
            let n = cross(sub(b.pos, a.pos), sub(c.pos, a.pos));
            let d: f32 = (0..3).map(|k| n[k] * a.normal[k]).sum();
            assert!(d < 0.0, "triangle {t:?} winds the wrong way");
        }
        for t in &s.textures {
            assert!(t.width.is_power_of_two() && t.height.is_power_of_two());
            assert_eq!(t.rgba.len(), (t.width * t.height * 4) as usize);
        }
    }
}
