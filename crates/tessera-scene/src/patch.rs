//! Biquadratic Bézier patches (face type 2) to triangles.

use crate::Vertex;

/// Segments per side of each 3 × 3 block of control points: a block becomes
/// `(PATCH_SEGMENTS + 1)²` vertices and `2 · PATCH_SEGMENTS²` triangles. Fixed, where Quake 3
/// picks a level per patch from its curvature.
pub const PATCH_SEGMENTS: usize = 8;

/// The quadratic Bernstein weights at `t`.
fn weights(t: f32) -> [f32; 3] {
    let s = 1.0 - t;
    [s * s, 2.0 * s * t, t * t]
}

/// Blends nine control vertices with weights `wu[col] * wv[row]`.
fn blend(ctrl: &[[Vertex; 3]; 3], wu: [f32; 3], wv: [f32; 3]) -> Vertex {
    let mut pos = [0.0f32; 3];
    let mut uv = [0.0f32; 2];
    let mut lm = [0.0f32; 2];
    let mut normal = [0.0f32; 3];
    let mut color = [0.0f32; 4];
    for (row, wr) in ctrl.iter().zip(wv) {
        for (c, wc) in row.iter().zip(wu) {
            let w = wr * wc;
            for k in 0..3 {
                pos[k] += w * c.pos[k];
                normal[k] += w * c.normal[k];
            }
            for k in 0..2 {
                uv[k] += w * c.uv[k];
                lm[k] += w * c.lm_uv[k];
            }
            for (acc, &channel) in color.iter_mut().zip(&c.color) {
                *acc += w * f32::from(channel);
            }
        }
    }
    let len = normal.iter().map(|x| x * x).sum::<f32>().sqrt();
    if len > 0.0 && len.is_finite() {
        normal.iter_mut().for_each(|x| *x /= len);
    }
    Vertex {
        pos,
        uv,
        lm_uv: lm,
        normal,
        // `as` saturates (and maps NaN to 0), which is what a colour wants.
        color: color.map(|c| c.round() as u8),
    }
}

/// Number of vertices and triangles [`tessellate`] makes for a `width × height` grid.
pub fn patch_counts(width: usize, height: usize) -> (u64, u64) {
    let blocks = (width.saturating_sub(1) / 2) as u64 * (height.saturating_sub(1) / 2) as u64;
    let s = PATCH_SEGMENTS as u64;
    (blocks * (s + 1) * (s + 1), blocks * 2 * s * s)
}

/// Tessellates a `width × height` control grid (row-major, both odd and at least 3) block by
/// block, appending vertices to `vertices` and index triples (into `vertices`) to `triangles`.
///
/// The winding follows the control grid: seen with rows going up and columns to the right,
/// each quad's triangles run clockwise, which is Quake 3's for the patches q3map writes (a
/// patch's stored normals point to the side where the grid's `u × v` points away).
pub fn tessellate(
    grid: &[Vertex],
    width: usize,
    height: usize,
    vertices: &mut Vec<Vertex>,
    triangles: &mut Vec<[u32; 3]>,
) {
    let s = PATCH_SEGMENTS;
    let side = s + 1;
    for by in 0..(height.saturating_sub(1) / 2) {
        for bx in 0..(width.saturating_sub(1) / 2) {
            let ctrl: [[Vertex; 3]; 3] = std::array::from_fn(|r| {
                std::array::from_fn(|c| grid[(2 * by + r) * width + 2 * bx + c])
            });
            let base = vertices.len() as u32;
            for j in 0..=s {
                let wv = weights(j as f32 / s as f32);
                for i in 0..=s {
                    vertices.push(blend(&ctrl, weights(i as f32 / s as f32), wv));
                }
            }
            for j in 0..s {
                for i in 0..s {
                    let a = base + (j * side + i) as u32;
                    let b = a + 1;
                    let c = a + side as u32;
                    let d = c + 1;
                    triangles.push([a, c, b]);
                    triangles.push([b, c, d]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(x: f32, y: f32, z: f32) -> Vertex {
        Vertex {
            pos: [x, y, z],
            uv: [x, y],
            lm_uv: [0.0, 0.0],
            normal: [0.0, 0.0, 1.0],
            color: [200, 100, 0, 255],
        }
    }

    #[test]
    fn flat_grid_stays_on_its_plane_and_curved_one_bulges_by_half() {
        // Controls on a flat 2 × 2 square, the middle row raised by 2: the quadratic Bézier
        // with heights 0, 2, 0 is 2·2·t(1-t), so 1 at t = 1/2 (by hand).
        let grid: Vec<Vertex> = (0..9)
            .map(|k| {
                let (c, r) = ((k % 3) as f32, (k / 3) as f32);
                v(c, r, if r == 1.0 { 2.0 } else { 0.0 })
            })
            .collect();
        let (mut vs, mut ts) = (Vec::new(), Vec::new());
        tessellate(&grid, 3, 3, &mut vs, &mut ts);
        let s = PATCH_SEGMENTS;
        assert_eq!(vs.len(), (s + 1) * (s + 1));
        assert_eq!(ts.len(), 2 * s * s);
        assert_eq!(patch_counts(3, 3), (vs.len() as u64, ts.len() as u64));
        // Corners are the corner control points.
        assert_eq!(vs[0].pos, [0.0, 0.0, 0.0]);
        assert_eq!(vs[s].pos, [2.0, 0.0, 0.0]);
        assert_eq!(vs[(s + 1) * (s + 1) - 1].pos, [2.0, 2.0, 0.0]);
        // The middle row (t = 1/2): height 1, x and y linear.
        let mid = vs[(s / 2) * (s + 1) + s / 2];
        assert!((mid.pos[2] - 1.0).abs() < 1e-6, "{:?}", mid.pos);
        assert!((mid.pos[0] - 1.0).abs() < 1e-6 && (mid.pos[1] - 1.0).abs() < 1e-6);
        assert_eq!(mid.color, [200, 100, 0, 255]);
        assert!(ts.iter().flatten().all(|&i| (i as usize) < vs.len()));
    }

    #[test]
    fn wider_grid_makes_one_block_per_pair_of_columns() {
        let grid: Vec<Vertex> = (0..15)
            .map(|k| v((k % 5) as f32, (k / 5) as f32, 0.0))
            .collect();
        let (mut vs, mut ts) = (Vec::new(), Vec::new());
        tessellate(&grid, 5, 3, &mut vs, &mut ts);
        let s = PATCH_SEGMENTS;
        assert_eq!(vs.len(), 2 * (s + 1) * (s + 1));
        assert_eq!(ts.len(), 4 * s * s);
        // The second block starts at column 2.
        assert_eq!(vs[(s + 1) * (s + 1)].pos, [2.0, 0.0, 0.0]);
        assert_eq!(vs.last().unwrap().pos, [4.0, 2.0, 0.0]);
    }
}
