//! A procedural test scene and camera path: a walled room with a checkered floor, a ceiling,
//! four pillars and a few crates, drawn with 42 textures from 8×8 to 512×256 (the paper's
//! GLQuake trace used 135 from 8×8 to 512×256), so that each part of the room has its own. Texture coordinates are one texel per world
//! unit, as Quake maps usually are, so textures repeat over large faces. Every texel differs
//! from its neighbours (a hashed pattern), so a wrong fetch shows in an image diff.

use super::{Camera, Mesh, TextureImage, Triangle, Vertex};

/// The room's side and height, in world units.
pub const ROOM: f32 = 1024.0;
pub const HEIGHT: f32 = 256.0;

/// Texture sizes the generator draws from, as Quake's: 8×8 to 512×256.
const SIZES: [(u32, u32); 12] = [
    (8, 8),
    (16, 16),
    (32, 32),
    (64, 64),
    (128, 128),
    (256, 256),
    (64, 32),
    (128, 64),
    (256, 128),
    (512, 256),
    (32, 128),
    (64, 256),
];

/// Floor cells draw from 8 textures, wall segments from 24 (one per segment and wall side,
/// some repeated), the ceiling from 4, then 4 pillars and 2 crates: 42 textures.
const FLOOR: u32 = 8;
const WALL: u32 = 24;
const CEILING: u32 = 4;
const PILLAR: u32 = 4;
const CRATE: u32 = 2;

fn texture_list() -> Vec<(String, u32, u32)> {
    let mut out = Vec::new();
    let mut add = |kind: &str, n: u32, salt: u32| {
        for i in 0..n {
            let (w, h) = SIZES[(hash(i * 7 + salt) % SIZES.len() as u32) as usize];
            out.push((format!("{kind}_{i}"), w, h));
        }
    };
    add("floor", FLOOR, 1);
    add("wall", WALL, 2);
    add("ceiling", CEILING, 3);
    add("pillar", PILLAR, 4);
    // Crates are small, as Quake's details are.
    out.push(("crate_0".into(), 8, 8));
    out.push(("crate_1".into(), 16, 16));
    out
}

fn hash(mut v: u32) -> u32 {
    v ^= v >> 16;
    v = v.wrapping_mul(0x7feb_352d);
    v ^= v >> 15;
    v = v.wrapping_mul(0x846c_a68b);
    v ^ (v >> 16)
}

fn texture(i: usize, name: &str, w: u32, h: u32) -> TextureImage {
    let base = hash(i as u32 + 1);
    let (r0, g0, b0) = (base & 0xff, (base >> 8) & 0xff, (base >> 16) & 0xff);
    let mut rgba = Vec::with_capacity((w * h * 4) as usize);
    for y in 0..h {
        for x in 0..w {
            let check = ((x * 8 / w.max(1)) + (y * 8 / h.max(1))) % 2;
            let n = hash(x | y << 12 | (i as u32) << 24) & 0x3f;
            let k = if check == 0 { 1.0 } else { 0.55 };
            let c = |v: u32| ((v as f32 * k) as u32 + n).min(255) as u8;
            rgba.extend_from_slice(&[c(r0), c(g0), c(b0), 255]);
        }
    }
    TextureImage {
        name: name.into(),
        width: w,
        height: h,
        rgba,
    }
}

struct Builder {
    mesh: Mesh,
}

impl Builder {
    /// A quad from corner `o` along edges `a` and `b`, texture coordinates from the world
    /// position projected on the axes `(ua, va)` (indices into xyz), one texel per unit.
    fn quad(&mut self, o: [f32; 3], a: [f32; 3], b: [f32; 3], tex: u32, axes: (usize, usize)) {
        let (tw, th) = {
            let t = &self.mesh.textures[tex as usize];
            (t.width as f32, t.height as f32)
        };
        let first = self.mesh.vertices.len() as u32;
        for (s, t) in [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)] {
            let pos = [0, 1, 2].map(|k| o[k] + a[k] * s + b[k] * t);
            self.mesh.vertices.push(Vertex {
                pos,
                uv: [pos[axes.0] / tw, pos[axes.1] / th],
                color: [255; 4],
                ..Default::default()
            });
        }
        for v in [[0, 1, 2], [0, 2, 3]] {
            self.mesh.triangles.push(Triangle {
                v: v.map(|k| first + k),
                texture: tex,
                lightmap: None,
                surface: self.mesh.triangles.len() as u32 / 2,
            });
        }
    }

    /// A box from `lo` to `hi`: four sides and the top.
    fn cuboid(&mut self, lo: [f32; 3], hi: [f32; 3], tex: u32) {
        let d = [hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]];
        let up = [0.0, 0.0, d[2]];
        self.quad(lo, [d[0], 0.0, 0.0], up, tex, (0, 2));
        self.quad([lo[0], hi[1], lo[2]], [d[0], 0.0, 0.0], up, tex, (0, 2));
        self.quad(lo, [0.0, d[1], 0.0], up, tex, (1, 2));
        self.quad([hi[0], lo[1], lo[2]], [0.0, d[1], 0.0], up, tex, (1, 2));
        self.quad(
            [lo[0], lo[1], hi[2]],
            [d[0], 0.0, 0.0],
            [0.0, d[1], 0.0],
            tex,
            (0, 1),
        );
    }
}

/// The generated scene.
pub fn generated() -> Mesh {
    let textures = texture_list()
        .iter()
        .enumerate()
        .map(|(i, (n, w, h))| texture(i, n, *w, *h))
        .collect();
    let mut b = Builder {
        mesh: Mesh {
            textures,
            ..Default::default()
        },
    };
    let cell = ROOM / 8.0;
    for j in 0..8 {
        for i in 0..8 {
            let o = [i as f32 * cell, j as f32 * cell, 0.0];
            b.quad(
                o,
                [cell, 0.0, 0.0],
                [0.0, cell, 0.0],
                ((i + j) % 2) as u32,
                (0, 1),
            );
        }
    }
    for k in 0..8u32 {
        let s = k as f32 * cell;
        let up = [0.0, 0.0, HEIGHT];
        // Each wall's segments in pairs of one texture, the four walls 6 textures each.
        let t = |wall: u32| FLOOR + wall * 6 + (k / 2 + wall) % 6;
        b.quad([s, ROOM, 0.0], [cell, 0.0, 0.0], up, t(0), (0, 2));
        b.quad([s, 0.0, 0.0], [cell, 0.0, 0.0], up, t(1), (0, 2));
        b.quad([ROOM, s, 0.0], [0.0, cell, 0.0], up, t(2), (1, 2));
        b.quad([0.0, s, 0.0], [0.0, cell, 0.0], up, t(3), (1, 2));
    }
    let c = ROOM / 4.0;
    for j in 0..4 {
        for i in 0..4 {
            let o = [i as f32 * c, j as f32 * c, HEIGHT];
            let t = FLOOR + WALL + (i + j) % CEILING;
            b.quad(o, [c, 0.0, 0.0], [0.0, c, 0.0], t, (0, 1));
        }
    }
    for (k, (x, y)) in [
        (256.0, 256.0),
        (768.0, 256.0),
        (768.0, 768.0),
        (256.0, 768.0),
    ]
    .into_iter()
    .enumerate()
    {
        b.cuboid(
            [x - 32.0, y - 32.0, 0.0],
            [x + 32.0, y + 32.0, HEIGHT],
            FLOOR + WALL + CEILING + k as u32,
        );
    }
    for (k, (x, y, s)) in [
        (420.0, 600.0, 24.0),
        (600.0, 420.0, 40.0),
        (150.0, 512.0, 32.0),
    ]
    .into_iter()
    .enumerate()
    {
        b.cuboid(
            [x - s, y - s, 0.0],
            [x + s, y + s, 2.0 * s],
            FLOOR + WALL + CEILING + PILLAR + k as u32 % CRATE,
        );
    }
    b.mesh
}

/// `frames` cameras on a loop around the room's centre, inside the pillars, looking along the
/// path with the view swinging left and right and up and down.
pub fn camera_path(frames: u32) -> Vec<Camera> {
    let tau = std::f32::consts::TAU;
    (0..frames)
        .map(|f| {
            let t = f as f32 / frames.max(1) as f32;
            let a = tau * t;
            Camera {
                eye: [
                    ROOM / 2.0 + 220.0 * a.cos(),
                    ROOM / 2.0 + 220.0 * a.sin(),
                    64.0,
                ],
                yaw: a + tau / 4.0 + 0.6 * (3.0 * a).sin(),
                pitch: 0.15 * (2.0 * a).sin(),
                fov_y: 1.2,
            }
        })
        .collect()
}
