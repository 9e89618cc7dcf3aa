//! The per-pixel ray kernel (CPU twin of `rays.wgsl`): a primary ray through the pixel's
//! centre, the albedo of its nearest hit from the atlas, then `ao_samples` ambient-occlusion
//! rays; the pixel is the albedo darkened by the occluded fraction (integer arithmetic).
//!
//! Saved ray state ("thread state saved", patent 003): each pixel owns `STATE_WORDS` words
//! of the state buffer: phase (with the AO sample and an in-leaf flag), the BVH node to visit
//! next, the nearest hit's distance and triangle, the albedo, the occluded count and, inside a
//! leaf, the leaf's next triangle. An
//! invocation that saved them at an earlier launch (`Invocation::resumed`) loads them; any
//! other starts at `START`, which the buffer holds until a ray suspends, so that rays that
//! never suspend touch none of its pages. It advances the ray as far as the resident pages
//! let it, and on a miss either (no progress) faults as usual, or (progress) stores the new
//! state and returns `Fault::Suspend`: the runtime commits those stores and relaunches it
//! once its pages are there, and it continues from the saved node. A ray that has made progress never starts
//! again from the camera; a relaunch repeats at most one triangle. A leaf's triangles are
//! steps of their own because a whole leaf may span more pages than a budget holds: at pages
//! of 64 bytes a leaf's triangles took six pages, so the leaf, its node, the ray's state and
//! the image page did not fit the ray tracer's 8-page minimum.
//!
//! Exactness: the walk over the threaded BVH (see `scene`) visits nodes in one fixed order
//! whatever the suspensions, a hit replaces the nearest only when strictly nearer, and a leaf
//! resumed after a suspension skips its box test (its box already passed), so any budget,
//! device count, policy or procedure gives the same image bit for bit. Directions are hashed
//! from the pixel index (no RNG state), and the shading is integer.

use tessera_core::{Addressing, Filter, ObjectId, Sampler, Window};
use tessera_runtime::{Fault, Invocation, Kernel, WgslKernel};

use crate::access::BufferAccess;
use crate::quake::atlas::window_levels;
use crate::quake::raster::lod_of;

use super::scene::{LEAF_COUNT_SHIFT, NODE_WORDS, TRI_WORDS};

/// Words of the state buffer per pixel (seven used, padded so a page holds whole pixels).
pub const STATE_WORDS: u32 = 8;
/// Words a suspension stores.
pub const SAVED_WORDS: usize = 7;
/// Phases (the state's word 0, low byte).
pub const START: u32 = 0;
pub const PRIMARY: u32 = 1;
pub const SHADE: u32 = 2;
pub const AO: u32 = 3;
/// Word 0: the ray is inside the leaf at `node`, whose box has passed.
pub const IN_LEAF: u32 = 1 << 8;
/// Word 0: the AO sample, from this bit up.
pub const SAMPLE_SHIFT: u32 = 16;
/// "No triangle".
pub const NONE: u32 = u32::MAX;
/// A pixel whose primary ray hits nothing.
pub const SKY: [u8; 4] = [96, 128, 176, 255];
/// A pixel whose state word 0 is none of the phases (a corrupt state buffer).
pub const BAD_STATE: [u8; 4] = [255, 0, 255, 255];
/// The AO rays' start, as a fraction of the primary hit's distance (backs off the surface).
/// 1 − 2⁻¹⁰. The constants are given by their bits, as `rays.wgsl` gives them, so both twins
/// hold the same value (a decimal literal rounds through WGSL's abstract floats).
const BACK_OFF: f32 = f32::from_bits(0x3f7f_c000);
/// AO hits nearer than this (in units of the AO ray's length) are the surface itself.
const AO_T_MIN: f32 = f32::from_bits(0x3a80_0000); // 2⁻¹⁰
const COORD_LIMIT: f32 = 16_777_216.0;
/// 2⁻⁶⁴: stands in for a zero direction component.
const TINY: f32 = f32::from_bits(0x1f80_0000);
/// The AO offset's scale per hash step: 1.5 / 1024.
const OFFSET_STEP: f32 = f32::from_bits(0x3ac0_0000);

/// What the body reads and writes through ([`BufferAccess`]; its atlas samples only a
/// filtering kernel, [`Rays::filter`], takes), and the ray state's stores.
pub trait RayAccess: BufferAccess {
    fn store_u32(&mut self, id: ObjectId, index: u32, v: u32) -> Result<(), Fault>;
    /// Whether this pixel's ray saved its state at an earlier launch of the frame.
    fn resumed(&self) -> bool;
}

impl RayAccess for Invocation<'_> {
    #[inline(always)]
    fn store_u32(&mut self, id: ObjectId, index: u32, v: u32) -> Result<(), Fault> {
        Invocation::store_u32(self, id, index, v)
    }
    #[inline(always)]
    fn resumed(&self) -> bool {
        Invocation::resumed(self)
    }
}

/// The objects a launch binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Objects {
    pub nodes: ObjectId,
    pub tris: ObjectId,
    pub attrs: ObjectId,
    /// RGBA8 texture atlas.
    pub atlas: ObjectId,
    /// Per-pixel ray state (buffer).
    pub state: ObjectId,
    /// RGBA8 image, rows from the bottom.
    pub image: ObjectId,
}

/// A pinhole camera as the kernel takes it: the eye, the view direction, and the right and up
/// vectors scaled to the image's half extent at distance 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct View {
    pub eye: [f32; 3],
    pub forward: [f32; 3],
    pub right: [f32; 3],
    pub up: [f32; 3],
}

impl View {
    /// The view of a scene camera (`tessera_scene::Camera` conventions: Z up, yaw about Z
    /// from +X, pitch up) for an image of aspect `width / height`.
    pub fn new(eye: [f32; 3], yaw: f32, pitch: f32, fov_y: f32, aspect: f64) -> View {
        let [f, r, u] = crate::quake::basis(yaw, pitch);
        let ty = (fov_y as f64 * 0.5).tan();
        View {
            eye,
            forward: f.map(|c| c as f32),
            right: r.map(|c| (c * ty * aspect) as f32),
            up: u.map(|c| (c * ty) as f32),
        }
    }
}

/// The kernel: one invocation per pixel.
#[derive(Clone, Copy, Debug)]
pub struct Rays {
    pub obj: Objects,
    pub width: u32,
    pub height: u32,
    pub node_count: u32,
    pub ao_samples: u32,
    /// AO ray length, world units.
    pub ao_radius: f32,
    pub view: View,
    /// `None`: the nearest texel of a plain atlas. Otherwise the atlas is a mip chain and the
    /// albedo samples it with this filter at the level of the pixel's footprint.
    pub filter: Option<Filter>,
}

#[derive(Clone, Copy, Debug)]
struct Ray {
    o: [f32; 3],
    d: [f32; 3],
    inv: [f32; 3],
}

impl Ray {
    fn new(o: [f32; 3], d: [f32; 3]) -> Ray {
        // A zero component would give 0 × ∞ = NaN in the slab test; a tiny one gives a huge,
        // finite slope with the same answer.
        let inv = d.map(|c| 1.0 / if c == 0.0 { TINY } else { c });
        Ray { o, d, inv }
    }
}

fn cross(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}
fn dot(a: [f32; 3], b: [f32; 3]) -> f32 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
fn sub(a: [f32; 3], b: [f32; 3]) -> [f32; 3] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

/// A 32-bit integer hash (PCG's output permutation), the same in both twins.
pub fn hash(v: u32) -> u32 {
    let s = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let w = ((s >> ((s >> 28) + 4)) ^ s).wrapping_mul(277_803_737);
    (w >> 22) ^ w
}

/// Nearest texel along one axis, repeating over `size` texels.
fn wrap(t: f32, size: u32) -> u32 {
    let i = t.floor().clamp(-COORD_LIMIT, COORD_LIMIT) as i32;
    i.rem_euclid(size.max(1) as i32) as u32
}

/// The slab test: does the ray meet the box at some t in [0, t_max]?
fn box_hit(r: &Ray, min: [f32; 3], max: [f32; 3], t_max: f32) -> bool {
    let mut near = 0.0f32;
    let mut far = t_max;
    for k in 0..3 {
        let a = (min[k] - r.o[k]) * r.inv[k];
        let b = (max[k] - r.o[k]) * r.inv[k];
        near = near.max(a.min(b));
        far = far.min(a.max(b));
    }
    near <= far
}

/// The node after `node` when leaving it: its escape, or the end when the escape does not
/// move forward (only a request pass's zeros do that).
fn escape_of(escape: u32, node: u32, end: u32) -> u32 {
    if escape > node {
        escape
    } else {
        end
    }
}

impl Rays {
    fn vec3<A: RayAccess>(a: &mut A, id: ObjectId, at: u32) -> Result<[f32; 3], Fault> {
        Ok([
            f32::from_bits(a.load_u32(id, at)?),
            f32::from_bits(a.load_u32(id, at + 1)?),
            f32::from_bits(a.load_u32(id, at + 2)?),
        ])
    }

    fn primary(&self, x: u32, y: u32) -> Ray {
        let v = self.view;
        let sx = (x as f32 + 0.5) * (2.0 / self.width as f32) - 1.0;
        let sy = (y as f32 + 0.5) * (2.0 / self.height as f32) - 1.0;
        let d = [0, 1, 2].map(|k| v.forward[k] + v.right[k] * sx + v.up[k] * sy);
        Ray::new(v.eye, d)
    }

    /// Möller–Trumbore: (t, u, v) of the hit with t > t_min, if any.
    fn triangle<A: RayAccess>(
        &self,
        a: &mut A,
        r: &Ray,
        tri: u32,
        t_min: f32,
    ) -> Result<Option<(f32, f32, f32)>, Fault> {
        let Some((t, u, v)) = self.on_plane(a, r, tri)? else {
            return Ok(None);
        };
        if !(0.0..=1.0).contains(&u) || v < 0.0 || u + v > 1.0 {
            return Ok(None);
        }
        Ok((t > t_min).then_some((t, u, v)))
    }

    /// Walks the BVH from the state's node. Nearest hit (`any` false): updates the state's
    /// distance and triangle. Any hit (`any`): true at the first hit with t in (AO_T_MIN, 1]
    /// on a triangle other than `skip`. The state's node and in-leaf flag always say where
    /// the walk is, so a miss at any load leaves a state to resume from.
    fn walk<A: RayAccess>(
        &self,
        a: &mut A,
        r: &Ray,
        s: &mut [u32; SAVED_WORDS],
        any: bool,
        skip: u32,
    ) -> Result<bool, Fault> {
        let nodes = self.obj.nodes;
        while s[1] < self.node_count {
            let node = s[1];
            let at = node * NODE_WORDS;
            let escape = a.load_u32(nodes, at + 6)?;
            let leaf = a.load_u32(nodes, at + 7)?;
            if s[0] & IN_LEAF == 0 {
                let min = Self::vec3(a, nodes, at)?;
                let max = Self::vec3(a, nodes, at + 3)?;
                let t_max = if any { 1.0 } else { f32::from_bits(s[2]) };
                if !box_hit(r, min, max, t_max) {
                    s[1] = escape_of(escape, node, self.node_count);
                    continue;
                }
                if leaf == 0 {
                    s[1] = node + 1;
                    continue;
                }
                s[0] |= IN_LEAF;
                s[6] = leaf & ((1 << LEAF_COUNT_SHIFT) - 1);
            }
            let first = leaf & ((1 << LEAF_COUNT_SHIFT) - 1);
            for t in s[6]..first + (leaf >> LEAF_COUNT_SHIFT) {
                let t_min = if any { AO_T_MIN } else { 0.0 };
                if let Some((h, _, _)) = self.triangle(a, r, t, t_min)? {
                    if any {
                        if t != skip && h <= 1.0 {
                            s[0] &= !IN_LEAF;
                            return Ok(true);
                        }
                    } else if h < f32::from_bits(s[2]) {
                        s[2] = h.to_bits();
                        s[3] = t;
                    }
                }
                s[6] = t + 1;
            }
            s[0] &= !IN_LEAF;
            s[1] = escape_of(escape, node, self.node_count);
        }
        Ok(false)
    }

    /// Where ray `r` meets the plane of triangle `tri` (Möller–Trumbore): its distance and
    /// barycentric coordinates (t, u, v), inside the triangle or not; `None` when the ray runs
    /// parallel to it.
    fn on_plane<A: RayAccess>(
        &self,
        a: &mut A,
        r: &Ray,
        tri: u32,
    ) -> Result<Option<(f32, f32, f32)>, Fault> {
        let at = tri.wrapping_mul(TRI_WORDS);
        let v0 = Self::vec3(a, self.obj.tris, at)?;
        let e1 = Self::vec3(a, self.obj.tris, at + 3)?;
        let e2 = Self::vec3(a, self.obj.tris, at + 6)?;
        let p = cross(r.d, e2);
        let det = dot(e1, p);
        if det == 0.0 {
            return Ok(None);
        }
        let inv = 1.0 / det;
        let s = sub(r.o, v0);
        let q = cross(s, e1);
        Ok(Some((dot(e2, q) * inv, dot(s, p) * inv, dot(r.d, q) * inv)))
    }

    /// The albedo at pixel (x, y)'s primary hit: the triangle's texture, repeating; the
    /// nearest texel, or (`filter`) a filtered sample at the level of the pixel's footprint.
    fn albedo<A: RayAccess>(
        &self,
        a: &mut A,
        (x, y): (u32, u32),
        r: &Ray,
        s: &[u32; SAVED_WORDS],
    ) -> Result<[u8; 4], Fault> {
        let tri = s[3];
        let (u, v) = match self.triangle(a, r, tri, 0.0)? {
            Some((_, u, v)) => (u, v),
            None => (0.0, 0.0),
        };
        let at = tri.wrapping_mul(super::scene::ATTR_WORDS);
        let o = self.obj.attrs;
        let mut uv = [0.0f32; 6];
        for (k, c) in uv.iter_mut().enumerate() {
            *c = f32::from_bits(a.load_u32(o, at + k as u32)?);
        }
        let rect = a.load_u32(o, at + 6)?;
        let size = a.load_u32(o, at + 7)?;
        let tex = |(u, v): (f32, f32)| {
            let w0 = 1.0 - u - v;
            (
                uv[0] * w0 + uv[2] * u + uv[4] * v,
                uv[1] * w0 + uv[3] * u + uv[5] * v,
            )
        };
        let (tu, tv) = tex((u, v));
        let (sw, sh) = (size & 0xffff, size >> 16);
        let Some(filter) = self.filter else {
            let tx = (rect & 0xffff) + wrap(tu * sw as f32, sw);
            let ty = (rect >> 16) + wrap(tv * sh as f32, sh);
            return a.load_rgba8(self.obj.atlas, tx, ty);
        };
        if sw == 0 || sh == 0 {
            // Only a request pass's zeros (the attributes missed) give an empty window: the
            // texels are asked for when the compute pass has the attributes.
            return Ok([0; 4]);
        }
        // The pixel's footprint in texels: where the rays through the next pixel right and
        // the next pixel up meet the hit triangle's plane (ray differentials, taken as the
        // rasterizer takes its screen-space differences), so a level is chosen as the game
        // trace chooses it. A neighbour's ray parallel to the plane gives the coarsest level.
        let mut rho2 = 0.0f32;
        for n in [self.primary(x + 1, y), self.primary(x, y + 1)] {
            let d2 = match self.on_plane(a, &n, tri)? {
                Some((_, u, v)) => {
                    let (nu, nv) = tex((u, v));
                    let (du, dv) = ((nu - tu) * sw as f32, (nv - tv) * sh as f32);
                    du * du + dv * dv
                }
                None => f32::INFINITY,
            };
            rho2 = rho2.max(d2);
        }
        let lod = lod_of(rho2).min(window_levels(rect, size) as f32);
        let window = Window {
            x: rect & 0xffff,
            y: rect >> 16,
            width: sw,
            height: sh,
        };
        let sampler = Sampler {
            filter,
            addressing: Addressing::Wrap,
        };
        a.sample_window(self.obj.atlas, sampler, window, (tu, tv, lod))
    }

    /// AO ray `k` of pixel `pixel`: from just before the primary hit, along the hit
    /// triangle's normal (facing the eye, scaled to a largest component of 1) plus a hashed
    /// offset, flipped into the normal's hemisphere, `ao_radius` long.
    fn ao_ray<A: RayAccess>(
        &self,
        a: &mut A,
        primary: &Ray,
        s: &[u32; SAVED_WORDS],
        pixel: u32,
        k: u32,
    ) -> Result<Ray, Fault> {
        let at = s[3].wrapping_mul(TRI_WORDS);
        let e1 = Self::vec3(a, self.obj.tris, at + 3)?;
        let e2 = Self::vec3(a, self.obj.tris, at + 6)?;
        let mut n = cross(e1, e2);
        if dot(n, primary.d) > 0.0 {
            n = n.map(|c| -c);
        }
        let m = n[0].abs().max(n[1].abs()).max(n[2].abs());
        n = n.map(|c| c / m);
        let h = hash(pixel.wrapping_mul(16).wrapping_add(k));
        let off = [0, 10, 20].map(|b| (((h >> b) & 1023) as f32 - 511.5) * OFFSET_STEP);
        let mut d = [n[0] + off[0], n[1] + off[1], n[2] + off[2]];
        if dot(d, n) <= 0.0 {
            d = [n[0] - off[0], n[1] - off[1], n[2] - off[2]];
        }
        let t = f32::from_bits(s[2]) * BACK_OFF;
        let o = [0, 1, 2].map(|c| primary.o[c] + primary.d[c] * t);
        Ok(Ray::new(o, d.map(|c| c * self.ao_radius)))
    }

    /// Advances the ray from state `s` to its pixel's colour, or to the first miss (with `s`
    /// saying how far it got).
    fn advance<A: RayAccess>(
        &self,
        a: &mut A,
        x: u32,
        y: u32,
        s: &mut [u32; SAVED_WORDS],
    ) -> Result<[u8; 4], Fault> {
        let primary = self.primary(x, y);
        loop {
            match s[0] & 0xff {
                START => *s = [PRIMARY, 0, f32::INFINITY.to_bits(), NONE, 0, 0, 0],
                PRIMARY => {
                    self.walk(a, &primary, s, false, NONE)?;
                    if s[3] == NONE {
                        return Ok(SKY);
                    }
                    s[0] = SHADE;
                }
                SHADE => {
                    s[4] = u32::from_le_bytes(self.albedo(a, (x, y), &primary, s)?);
                    s[0] = AO;
                    s[1] = 0;
                    s[5] = 0;
                }
                AO => {
                    let k = s[0] >> SAMPLE_SHIFT;
                    if k >= self.ao_samples {
                        let c = s[4].to_le_bytes();
                        let n = self.ao_samples.max(1);
                        let lit = n + 3 * (n - s[5].min(n));
                        let f = |c: u8| (c as u32 * lit / (4 * n)) as u8;
                        return Ok([f(c[0]), f(c[1]), f(c[2]), 255]);
                    }
                    let ray = self.ao_ray(a, &primary, s, y * self.width + x, k)?;
                    if self.walk(a, &ray, s, true, s[3])? {
                        s[5] += 1;
                    }
                    s[0] = AO | (k + 1) << SAMPLE_SHIFT;
                    s[1] = 0;
                }
                _ => return Ok(BAD_STATE),
            }
        }
    }

    /// The body, generic over paged or plain access.
    #[inline(always)]
    pub fn pixel<A: RayAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let base = (y * self.width + x) * STATE_WORDS;
        // A ray that never suspended this frame has the state the buffer was created with,
        // START (zeros): reading it would fault on the state's pages at every pixel's first
        // launch, and hold pages of them in the budget, for nothing.
        let mut s = [0u32; SAVED_WORDS];
        if a.resumed() {
            for (i, w) in s.iter_mut().enumerate() {
                *w = a.load_u32(self.obj.state, base + i as u32)?;
            }
        }
        let saved = s;
        match self.advance(a, x, y, &mut s) {
            Ok(c) => a.store_rgba8(self.obj.image, x, y, c),
            Err(Fault::Miss) if s != saved => {
                for (i, &w) in s.iter().enumerate() {
                    a.store_u32(self.obj.state, base + i as u32, w)?;
                }
                Err(Fault::Suspend)
            }
            Err(e) => Err(e),
        }
    }

    /// The WGSL twin's parameters.
    pub fn params(&self) -> RaysParams {
        let o = self.obj;
        let v = self.view;
        RaysParams {
            nodes: o.nodes.0,
            tris: o.tris.0,
            attrs: o.attrs.0,
            atlas: o.atlas.0,
            state: o.state.0,
            image: o.image.0,
            width: self.width,
            height: self.height,
            node_count: self.node_count,
            ao_samples: self.ao_samples,
            ao_radius: self.ao_radius,
            eye_x: v.eye[0],
            eye_y: v.eye[1],
            eye_z: v.eye[2],
            forward_x: v.forward[0],
            forward_y: v.forward[1],
            forward_z: v.forward[2],
            right_x: v.right[0],
            right_y: v.right[1],
            right_z: v.right[2],
            up_x: v.up[0],
            up_y: v.up[1],
            up_z: v.up[2],
            filter_code: self.filter.map_or(0, |f| f.code() + 1),
        }
    }
}

tessera_runtime::kernel_params! {
    /// What `rays.wgsl` reads as `params`: the objects, the image size, the BVH's node
    /// count, ambient occlusion, the [`View`] by components (a uniform `vec3` would be
    /// 16-aligned), and the filter's code + 1 (0: the nearest texel of a plain atlas).
    pub struct RaysParams {
        pub nodes: u32,
        pub tris: u32,
        pub attrs: u32,
        pub atlas: u32,
        pub state: u32,
        pub image: u32,
        pub width: u32,
        pub height: u32,
        pub node_count: u32,
        pub ao_samples: u32,
        pub ao_radius: f32,
        pub eye_x: f32,
        pub eye_y: f32,
        pub eye_z: f32,
        pub forward_x: f32,
        pub forward_y: f32,
        pub forward_z: f32,
        pub right_x: f32,
        pub right_y: f32,
        pub right_z: f32,
        pub up_x: f32,
        pub up_y: f32,
        pub up_z: f32,
        pub filter_code: u32,
    }
}

impl Kernel for Rays {
    fn name(&self) -> &'static str {
        "rays"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(include_str!("rays.wgsl"), &self.params()))
    }
    #[inline]
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        self.pixel(inv, x, y)
    }
}
