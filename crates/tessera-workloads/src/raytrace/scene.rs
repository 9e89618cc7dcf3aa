//! The paged scene: a mesh's triangles, a BVH over them, their materials and textures, as the
//! words of buffer objects and the texels of the `quake` atlas.
//!
//! The BVH is built on the host by `obvhs` (PLOC, leaves of up to 8 triangles) and flattened
//! depth first: an inner node's first child is the next node, and every node carries its
//! escape index, the node after its subtree. A ray walks the array front to back, going to
//! `i + 1` when it enters a node and to `escape` when it misses it or leaves a leaf, so its
//! whole traversal state is one node index (a "threaded" BVH): that is what makes the saved
//! ray state small enough for an invocation's store budget (`MAX_STORES`). Triangles are
//! reordered so each leaf's are contiguous.
//!
//! Layout (32-bit words, f32 as bits):
//! - node `i` at `8 i`: min xyz, max xyz, escape, leaf (`first | count << 24`, 0 for an
//!   inner node);
//! - triangle `t` at `9 t`: v0 xyz, e1 = v1 − v0, e2 = v2 − v0;
//! - attributes of `t` at `8 t`: uv0, uv1, uv2, the texture's atlas rectangle origin
//!   (`x | y << 16`) and size (`w | h << 16`).

use std::time::Duration;

use glam::Vec3A;
use obvhs::bvh2::builder::build_bvh2;
use obvhs::triangle::Triangle as BvhTriangle;
use obvhs::BvhBuildParams;

use super::RaytraceError;
use crate::quake::atlas::{Atlas, Packing};
use crate::quake::Mesh;

pub const NODE_WORDS: u32 = 8;
pub const TRI_WORDS: u32 = 9;
pub const ATTR_WORDS: u32 = 8;
/// A leaf's word: first triangle in the low bits, count above.
pub const LEAF_COUNT_SHIFT: u32 = 24;
/// Triangles a scene may have: a leaf names its first in 24 bits.
pub const MAX_TRIANGLES: u64 = 1 << LEAF_COUNT_SHIFT;
/// Instances a scene may be made of.
pub const MAX_INSTANCES: u32 = 4096;

/// The scene as the kernel reads it.
#[derive(Clone, Debug)]
pub struct PagedScene {
    pub nodes: Vec<u32>,
    pub tris: Vec<u32>,
    pub attrs: Vec<u32>,
    pub node_count: u32,
    pub triangle_count: u32,
    pub atlas: Atlas,
    /// The atlas's RGBA8 texels, rows from the lower left.
    pub atlas_texels: Vec<u8>,
    /// Bounds of all instances (min, max).
    pub bounds: ([f32; 3], [f32; 3]),
}

fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

impl PagedScene {
    /// Builds the scene of `instances` copies of `mesh`, laid on a square grid in X and Y with
    /// a quarter of the mesh's extent between copies (copy 0 where the mesh is), its atlas
    /// packed for page side `page` as `packing` says (a filtered albedo wants
    /// [`Packing::Levels`], so that its image does not depend on the page size).
    pub fn build(
        mesh: &Mesh,
        instances: u32,
        page: u32,
        packing: Packing,
    ) -> Result<PagedScene, RaytraceError> {
        mesh.validate()?;
        if instances == 0 || instances > MAX_INSTANCES {
            return Err(RaytraceError::Config(format!(
                "--instances must be between 1 and {MAX_INSTANCES} (got {instances})"
            )));
        }
        if mesh.triangles.is_empty() {
            return Err(RaytraceError::Scene("the scene has no triangle".into()));
        }
        let total = mesh.triangles.len() as u64 * instances as u64;
        if total > MAX_TRIANGLES {
            let per = mesh.triangles.len() as u64;
            let advice = match MAX_TRIANGLES / per {
                0 => "one instance is already too many".to_string(),
                most => format!("so --instances {most} or fewer for this scene"),
            };
            return Err(RaytraceError::Scene(format!(
                "{total} triangles ({instances} instances of {per}): at most {MAX_TRIANGLES}, \
                 {advice}"
            )));
        }
        let sizes: Vec<(u32, u32)> = mesh.textures.iter().map(|t| (t.width, t.height)).collect();
        let atlas = Atlas::pack_with(&sizes, page, packing)?;
        let atlas_texels = atlas.texels(&mesh.textures);

        let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
        for v in &mesh.vertices {
            for k in 0..3 {
                lo[k] = lo[k].min(v.pos[k]);
                hi[k] = hi[k].max(v.pos[k]);
            }
        }
        let side = (instances as f64).sqrt().ceil() as u32;
        let step = [(hi[0] - lo[0]) * 1.25, (hi[1] - lo[1]) * 1.25];
        let mut corners: Vec<[[f32; 3]; 3]> = Vec::with_capacity(total as usize);
        let mut source: Vec<usize> = Vec::with_capacity(total as usize);
        for i in 0..instances {
            let off = [
                (i % side) as f32 * step[0],
                (i / side) as f32 * step[1],
                0.0,
            ];
            for (ti, t) in mesh.triangles.iter().enumerate() {
                corners.push(t.v.map(|v| {
                    let p = mesh.vertices[v as usize].pos;
                    [p[0] + off[0], p[1] + off[1], p[2] + off[2]]
                }));
                source.push(ti);
            }
        }
        let last = [
            ((instances - 1).min(side - 1)) as f32 * step[0],
            ((instances - 1) / side) as f32 * step[1],
        ];
        let bounds = (lo, [hi[0] + last[0], hi[1] + last[1], hi[2]]);

        let prims: Vec<BvhTriangle> = corners
            .iter()
            .map(|c| BvhTriangle {
                v0: Vec3A::from_array(c[0]),
                v1: Vec3A::from_array(c[1]),
                v2: Vec3A::from_array(c[2]),
            })
            .collect();
        let bvh = build_bvh2(
            &prims,
            BvhBuildParams::fast_build(),
            &mut Duration::default(),
        );
        if bvh.nodes.is_empty() {
            return Err(RaytraceError::Scene(
                "the BVH builder returned no node".into(),
            ));
        }

        // Subtree sizes, children before parents (an explicit stack: a PLOC tree of a big
        // map can be deep).
        let n = bvh.nodes.len();
        let mut size = vec![0u32; n];
        let mut stack = vec![(0usize, false)];
        while let Some((i, expanded)) = stack.pop() {
            let node = &bvh.nodes[i];
            if node.prim_count > 0 {
                size[i] = 1;
            } else if expanded {
                let c = node.first_index as usize;
                size[i] = 1 + size[c] + size[c + 1];
            } else {
                stack.push((i, true));
                let c = node.first_index as usize;
                if c + 1 >= n {
                    return Err(RaytraceError::Scene(format!(
                        "BVH node {i} names children {c}, {} of {n}",
                        c + 1
                    )));
                }
                stack.push((c, false));
                stack.push((c + 1, false));
            }
        }

        let mut nodes = Vec::with_capacity(size[0] as usize * NODE_WORDS as usize);
        let mut order: Vec<u32> = Vec::with_capacity(corners.len());
        let mut stack = vec![0usize];
        while let Some(i) = stack.pop() {
            let node = &bvh.nodes[i];
            let at = (nodes.len() / NODE_WORDS as usize) as u32;
            let min = node.aabb.min.to_array();
            let max = node.aabb.max.to_array();
            nodes.extend(min.iter().chain(&max).map(|f| f.to_bits()));
            nodes.push(at + size[i]);
            if node.prim_count > 0 {
                let first = order.len() as u32;
                let range =
                    node.first_index as usize..(node.first_index + node.prim_count) as usize;
                order.extend_from_slice(&bvh.primitive_indices[range]);
                nodes.push(first | node.prim_count << LEAF_COUNT_SHIFT);
            } else {
                nodes.push(0);
                let c = node.first_index as usize;
                stack.push(c + 1);
                stack.push(c);
            }
        }

        let mut tris = Vec::with_capacity(order.len() * TRI_WORDS as usize);
        let mut attrs = Vec::with_capacity(order.len() * ATTR_WORDS as usize);
        for &p in &order {
            let c = corners[p as usize];
            for v in [c[0], sub(c[1], c[0]), sub(c[2], c[0])] {
                tris.extend(v.map(f32::to_bits));
            }
            let t = &mesh.triangles[source[p as usize]];
            for v in t.v {
                attrs.extend(mesh.vertices[v as usize].uv.map(f32::to_bits));
            }
            let r = atlas.rects[t.texture as usize];
            attrs.push(r.x | r.y << 16);
            attrs.push(r.w | r.h << 16);
        }
        Ok(PagedScene {
            node_count: (nodes.len() / NODE_WORDS as usize) as u32,
            triangle_count: order.len() as u32,
            nodes,
            tris,
            attrs,
            atlas,
            atlas_texels,
            bounds,
        })
    }

    /// Bytes of the scene's objects (nodes, triangles, attributes, atlas).
    pub fn bytes(&self) -> u64 {
        4 * (self.nodes.len() + self.tris.len() + self.attrs.len()) as u64
            + self.atlas_texels.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quake::Mesh;
    use tessera_scene::Scene;

    /// Every triangle lands in exactly one leaf, every node's box holds its subtree's, and
    /// escape indices close subtrees as a depth-first walk with a stack would.
    #[test]
    fn the_flattened_bvh_is_a_complete_depth_first_tree() {
        let mesh = Mesh::from(&Scene::generated(3));
        let s = PagedScene::build(&mesh, 2, 16, Packing::Pages).unwrap();
        assert_eq!(s.triangle_count as usize, 2 * mesh.triangles.len());
        let n = s.node_count;
        let node = |i: u32| &s.nodes[(i * NODE_WORDS) as usize..((i + 1) * NODE_WORDS) as usize];
        let f = |w: u32| f32::from_bits(w);
        let mut covered = vec![0u32; s.triangle_count as usize];
        // A reference walk with a stack: visits each node once, in array order.
        let mut stack = vec![0u32];
        let mut next = 0u32;
        while let Some(i) = stack.pop() {
            assert_eq!(i, next, "depth-first order");
            next += 1;
            let w = node(i);
            let leaf = w[7] >> LEAF_COUNT_SHIFT;
            if leaf > 0 {
                assert_eq!(w[6], i + 1, "a leaf's escape is the next node");
                let first = w[7] & ((1 << LEAF_COUNT_SHIFT) - 1);
                for t in first..first + leaf {
                    covered[t as usize] += 1;
                    let tw = &s.tris[(t * TRI_WORDS) as usize..][..9];
                    let v0 = [f(tw[0]), f(tw[1]), f(tw[2])];
                    for k in 0..3 {
                        assert!(f(w[k]) <= v0[k] && v0[k] <= f(w[3 + k]));
                    }
                }
            } else {
                // The second child starts where the first's subtree ends.
                let second = node(i + 1)[6];
                assert!(second < w[6] && w[6] <= n);
                stack.push(second);
                stack.push(i + 1);
            }
        }
        assert_eq!(next, n);
        assert!(covered.iter().all(|&c| c == 1));
    }

    /// The refusal names the largest `--instances` the scene takes, and that count is under
    /// the triangle limit where one more is over it.
    #[test]
    fn too_many_instances_names_the_most_the_scene_takes() {
        let mut mesh = Mesh::from(&Scene::generated(3));
        // Repeated until under MAX_INSTANCES copies reach the triangle limit: the limit is
        // what this test refuses, not the instance cap.
        let base = mesh.triangles.clone();
        while mesh.triangles.len() as u64 * u64::from(MAX_INSTANCES) <= MAX_TRIANGLES * 2 {
            mesh.triangles.extend_from_slice(&base);
        }
        let per = mesh.triangles.len() as u64;
        let most = MAX_TRIANGLES / per;
        let over = u32::try_from(most + 1).unwrap();
        assert!(over <= MAX_INSTANCES);
        let Err(e) = PagedScene::build(&mesh, over, 16, Packing::Pages) else {
            panic!("one instance past the limit is refused");
        };
        let e = e.to_string();
        assert!(e.contains(&format!("--instances {most} or fewer")), "{e}");
        assert!(most * per <= MAX_TRIANGLES && (most + 1) * per > MAX_TRIANGLES);
    }
}
