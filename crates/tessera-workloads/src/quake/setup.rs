//! Host-side triangle setup for one frame, written as the words of two buffer objects that
//! the per-pixel kernel reads with `load_u32` (as its WGSL twin must).
//!
//! Per triangle: transform to clip space, clip against the near plane and the four sides of
//! the screen (Sutherland–Hodgman in homogeneous coordinates, so nothing is projected from
//! behind the eye and every screen coordinate lies on the screen), project, snap to a grid of
//! 1/`SUB` pixel, fan the clipped polygon into triangles, orient each counter-clockwise
//! (screen y up, row 0 at the bottom), and write a record:
//!
//! | word | content |
//! | --- | --- |
//! | 0 | texture rectangle origin in the atlas, x \| y << 16 |
//! | 1 | texture size, w \| h << 16 (0: an empty record, skipped) |
//! | 2–7 | the vertices' snapped screen positions X0, Y0, X1, Y1, X2, Y2 (i32, 1/`SUB` px) |
//! | 8 | bit i: edge i (vertex i to i+1) owns the pixel centres exactly on it |
//! | 9, 10 | vertex 0's position in pixels (f32): the planes' origin |
//! | 11–13 | plane of 1/w: value at the origin, d/dx, d/dy (f32) |
//! | 14–16 | plane of u/w (u in texels) |
//! | 17–19 | plane of v/w |
//!
//! **Coverage** is exact integer arithmetic: pixel (x, y) is sampled at its centre,
//! (x·SUB + SUB/2, y·SUB + SUB/2), and covered when every edge function is positive, or zero on
//! an edge that owns its centres. An edge owns them when it points down, or points right when
//! horizontal (in y-up coordinates: the top-left rule of y-down rasterizers, mirrored). A
//! shared edge runs in opposite directions in its two triangles, so exactly one owns it: a
//! pixel centre on it is drawn once. With screen sides up to `MAX_SCREEN_SIDE` (2^11) and
//! SUB = 8, coordinates stay below 2^14, each product of an edge function below 2^28 and the
//! function inside i32.
//!
//! **Binning**: the screen in `TILE`×`TILE` tiles; each triangle is listed in every tile its
//! pixel bounding box touches. The bins buffer holds (first word, count) per tile, tiles
//! row-major from the lower left, then the lists, triangle numbers in ascending order. Record
//! 0 is empty, so a zero read where data is missing (a request pass) names nothing.

use super::atlas::Atlas;
use super::{Mesh, ViewProj};

pub const SUB_BITS: u32 = 3;
pub const SUB: i64 = 1 << SUB_BITS;
pub const TILE: u32 = 16;
/// Words per triangle record: a power of two, so no record straddles a buffer page.
pub const RECORD_WORDS: u32 = 32;
/// Page size of the per-frame buffers, independent of the atlas's page size.
pub const BUFFER_PAGE_BYTES: u64 = 4096;

/// Record word indices.
pub mod word {
    pub const RECT: u32 = 0;
    pub const SIZE: u32 = 1;
    pub const VERTS: u32 = 2;
    pub const OWNS: u32 = 8;
    pub const ORIGIN: u32 = 9;
    pub const INV_W: u32 = 11;
    pub const U: u32 = 14;
    pub const V: u32 = 17;
}

/// One frame's buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSetup {
    pub tris: Vec<u32>,
    pub bins: Vec<u32>,
    pub tiles_x: u32,
    pub tiles_y: u32,
    /// Triangle records written (record 0, the empty one, not counted).
    pub triangles: u32,
    /// Per record, the index in `Mesh::triangles` it was fanned from (record 0, the empty
    /// one: `u32::MAX`). Ascending, since records are written in mesh order.
    pub source: Vec<u32>,
}

#[derive(Clone, Copy, Debug)]
struct ClipVertex {
    c: [f64; 4],
    u: f64,
    v: f64,
}

fn lerp(a: &ClipVertex, b: &ClipVertex, t: f64) -> ClipVertex {
    let m = |x: f64, y: f64| x + (y - x) * t;
    ClipVertex {
        c: [
            m(a.c[0], b.c[0]),
            m(a.c[1], b.c[1]),
            m(a.c[2], b.c[2]),
            m(a.c[3], b.c[3]),
        ],
        u: m(a.u, b.u),
        v: m(a.v, b.v),
    }
}

/// Clips a polygon against the near plane (z ≥ 0) and the screen's sides (|x|, |y| ≤ w).
fn clip(poly: Vec<ClipVertex>) -> Vec<ClipVertex> {
    let planes: [fn(&[f64; 4]) -> f64; 5] = [
        |c| c[2],
        |c| c[3] + c[0],
        |c| c[3] - c[0],
        |c| c[3] + c[1],
        |c| c[3] - c[1],
    ];
    let mut poly = poly;
    for dist in planes {
        if poly.len() < 3 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(poly.len() + 2);
        for i in 0..poly.len() {
            let (a, b) = (&poly[i], &poly[(i + 1) % poly.len()]);
            let (da, db) = (dist(&a.c), dist(&b.c));
            if da >= 0.0 {
                out.push(*a);
            }
            if (da >= 0.0) != (db >= 0.0) {
                out.push(lerp(a, b, da / (da - db)));
            }
        }
        poly = out;
    }
    poly
}

fn transform(m: &ViewProj, p: [f32; 3]) -> [f64; 4] {
    let p = [p[0] as f64, p[1] as f64, p[2] as f64, 1.0];
    m.map(|r| r[0] * p[0] + r[1] * p[1] + r[2] * p[2] + r[3] * p[3])
}

/// Sets up every triangle of `mesh` seen through `vp` on a `width × height` screen (sides
/// checked by the caller against `MAX_SCREEN_SIDE`).
pub fn setup(mesh: &Mesh, atlas: &Atlas, vp: &ViewProj, width: u32, height: u32) -> FrameSetup {
    let tiles_x = width.div_ceil(TILE);
    let tiles_y = height.div_ceil(TILE);
    let mut tris = vec![0u32; RECORD_WORDS as usize];
    let mut lists: Vec<Vec<u32>> = vec![Vec::new(); (tiles_x * tiles_y) as usize];
    let mut source = vec![u32::MAX];
    let (wf, hf) = (width as f64, height as f64);
    let (xmax, ymax) = (width as i64 * SUB, height as i64 * SUB);
    for (ti, t) in mesh.triangles.iter().enumerate() {
        let tex = &mesh.textures[t.texture as usize];
        let r = atlas.rects[t.texture as usize];
        let poly: Vec<ClipVertex> =
            t.v.iter()
                .map(|&i| {
                    let v = &mesh.vertices[i as usize];
                    ClipVertex {
                        c: transform(vp, v.pos),
                        u: v.uv[0] as f64 * tex.width as f64,
                        v: v.uv[1] as f64 * tex.height as f64,
                    }
                })
                .collect();
        let poly = clip(poly);
        if poly.len() < 3 {
            continue;
        }
        // Screen position (snapped) and the attributes over w, per polygon vertex.
        let pts: Vec<([i64; 2], [f64; 3])> = poly
            .iter()
            .map(|p| {
                let w = p.c[3];
                let sx = (p.c[0] / w * 0.5 + 0.5) * wf;
                let sy = (p.c[1] / w * 0.5 + 0.5) * hf;
                let x = ((sx * SUB as f64).round() as i64).clamp(0, xmax);
                let y = ((sy * SUB as f64).round() as i64).clamp(0, ymax);
                ([x, y], [1.0 / w, p.u / w, p.v / w])
            })
            .collect();
        for k in 1..pts.len() - 1 {
            let mut v = [pts[0], pts[k], pts[k + 1]];
            let area = (v[1].0[0] - v[0].0[0]) * (v[2].0[1] - v[0].0[1])
                - (v[1].0[1] - v[0].0[1]) * (v[2].0[0] - v[0].0[0]);
            if area == 0 {
                continue;
            }
            if area < 0 {
                v.swap(1, 2);
            }
            let lo = |a: usize| v.iter().map(|p| p.0[a]).min().unwrap_or(0);
            let hi = |a: usize| v.iter().map(|p| p.0[a]).max().unwrap_or(0);
            // Pixels whose centre lies inside the bounding box.
            let first = |m: i64| (m - SUB / 2 + SUB - 1).div_euclid(SUB).max(0);
            let last = |m: i64, n: u32| (m - SUB / 2).div_euclid(SUB).min(n as i64 - 1);
            let (px0, px1) = (first(lo(0)), last(hi(0), width));
            let (py0, py1) = (first(lo(1)), last(hi(1), height));
            if px0 > px1 || py0 > py1 {
                continue;
            }
            let id = (tris.len() / RECORD_WORDS as usize) as u32;
            tris.extend(record(&v, r));
            source.push(ti as u32);
            for ty in (py0 as u32 / TILE)..=(py1 as u32 / TILE) {
                for tx in (px0 as u32 / TILE)..=(px1 as u32 / TILE) {
                    lists[(ty * tiles_x + tx) as usize].push(id);
                }
            }
        }
    }
    let mut bins = Vec::with_capacity(lists.len() * 2 + lists.iter().map(Vec::len).sum::<usize>());
    let mut next = (lists.len() * 2) as u32;
    for l in &lists {
        bins.push(next);
        bins.push(l.len() as u32);
        next += l.len() as u32;
    }
    for l in lists {
        bins.extend(l);
    }
    let triangles = (tris.len() / RECORD_WORDS as usize) as u32 - 1;
    FrameSetup {
        tris,
        bins,
        tiles_x,
        tiles_y,
        triangles,
        source,
    }
}

/// The record of one counter-clockwise triangle (see the module's table).
fn record(v: &[([i64; 2], [f64; 3]); 3], r: super::atlas::Rect) -> [u32; RECORD_WORDS as usize] {
    let mut w = [0u32; RECORD_WORDS as usize];
    w[word::RECT as usize] = r.x | r.y << 16;
    w[word::SIZE as usize] = r.w | r.h << 16;
    for (i, p) in v.iter().enumerate() {
        w[(word::VERTS + 2 * i as u32) as usize] = p.0[0] as i32 as u32;
        w[(word::VERTS + 2 * i as u32 + 1) as usize] = p.0[1] as i32 as u32;
    }
    let mut owns = 0;
    for i in 0..3 {
        let (a, b) = (v[i].0, v[(i + 1) % 3].0);
        let d = [b[0] - a[0], b[1] - a[1]];
        if d[1] < 0 || (d[1] == 0 && d[0] > 0) {
            owns |= 1 << i;
        }
    }
    w[word::OWNS as usize] = owns;
    let s = SUB as f64;
    let pos = |i: usize| [v[i].0[0] as f64 / s, v[i].0[1] as f64 / s];
    let (p0, p1, p2) = (pos(0), pos(1), pos(2));
    let (d1, d2) = (
        [p1[0] - p0[0], p1[1] - p0[1]],
        [p2[0] - p0[0], p2[1] - p0[1]],
    );
    let det = d1[0] * d2[1] - d2[0] * d1[1];
    w[word::ORIGIN as usize] = (p0[0] as f32).to_bits();
    w[word::ORIGIN as usize + 1] = (p0[1] as f32).to_bits();
    for (a, at) in [word::INV_W, word::U, word::V].into_iter().enumerate() {
        let f0 = v[0].1[a];
        let (g1, g2) = (v[1].1[a] - f0, v[2].1[a] - f0);
        let fx = (g1 * d2[1] - g2 * d1[1]) / det;
        let fy = (g2 * d1[0] - g1 * d2[0]) / det;
        w[at as usize] = (f0 as f32).to_bits();
        w[at as usize + 1] = (fx as f32).to_bits();
        w[at as usize + 2] = (fy as f32).to_bits();
    }
    w
}
