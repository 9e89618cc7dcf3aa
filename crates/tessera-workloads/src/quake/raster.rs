//! The per-pixel kernel (CPU twin of `raster.wgsl`): walks the triangles binned to the
//! pixel's tile, keeps the nearest one that covers the pixel's centre (the depth test, kept in
//! the invocation), samples its texture through tessera's translation (nearest texel, wrapping
//! inside the texture's rectangle of the atlas) and stores the colour into the framebuffer.
//! It also stores which atlas texel it sampled into the access map, from which the host
//! builds the trace. A miss is `Err(Fault::Miss)`, passed up with `?`; the runtime fetches the
//! page and runs the pixel again (or, two-pass, the request pass has fetched it first).
//!
//! Filtered (`Raster::filter`): the atlas is a mipmapped object and the pixel samples its
//! texture's window of the atlas (`tessera_core::sampler`, wrapping within the window) at a
//! level of detail from the texture coordinates' screen-space derivatives: the planes are
//! evaluated again one pixel right and one pixel up, and with ρ² the larger squared length of
//! the two differences, lod = log2(ρ) is read off ρ²'s f32 bits (exponent and mantissa as a
//! fixed-point log2, `lod_of`), so no transcendental function enters. A texture's levels stop
//! where its rectangle no longer halves cleanly (`Atlas::levels_of`): below that a level's
//! texels would mix in a neighbour's, so lod is capped there.
//!
//! Exactness: coverage is integer arithmetic with a fill rule that gives every pixel centre
//! on a shared edge to one triangle (`setup`); depth (1/w, larger is nearer) and the texture
//! coordinates are f32 planes evaluated in one fixed order, and ties go to the triangle
//! listed first. A pixel's result depends on nothing but its own inputs, so any split of the
//! screen over devices, and either procedure, gives the same frame bit for bit.

use tessera_core::{Addressing, Filter, ObjectId, Sampler, Window};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, WgslKernel};

use super::atlas::window_levels;
use super::setup::{word, RECORD_WORDS, SUB, SUB_BITS, TILE};
use crate::access::BufferAccess;

/// What the kernel body reads and writes through ([`BufferAccess`]), and how a filtered
/// sample meets a missing page.
pub trait RasterAccess: BufferAccess {
    /// [`BufferAccess::sample_window`] that serves a missing page from a coarser level
    /// instead of faulting (`Invocation::sample_rgba8_window_degraded`), and how many levels
    /// coarser. Plain arrays miss nothing: the exact sample.
    fn sample_window_degraded(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        uvl: (f32, f32, f32),
    ) -> Result<([u8; 4], u32), Fault> {
        Ok((self.sample_window(id, sampler, window, uvl)?, 0))
    }
}

impl RasterAccess for Invocation<'_> {
    fn sample_window_degraded(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        (u, v, lod): (f32, f32, f32),
    ) -> Result<([u8; 4], u32), Fault> {
        Invocation::sample_rgba8_window_degraded(self, id, sampler, window, u, v, lod)
    }
}

/// The objects one frame binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Objects {
    /// The texture atlas (RGBA8).
    pub atlas: ObjectId,
    /// Triangle records (buffer).
    pub tris: ObjectId,
    /// Tile bins (buffer).
    pub bins: ObjectId,
    /// The framebuffer (RGBA8, the screen's size).
    pub frame: ObjectId,
    /// Per pixel, the atlas texel sampled (x | y << 16) or `NO_ACCESS`, as an RGBA8 word.
    pub access: ObjectId,
}

/// The colour of a pixel no triangle covers.
pub const BACKGROUND: [u8; 4] = [0, 0, 0, 255];
/// The access map's word for a pixel that sampled nothing.
pub const NO_ACCESS: u32 = u32::MAX;
/// Texel coordinates are clamped to ±2^24 before wrapping: beyond, f32 has no fraction left.
const COORD_LIMIT: f32 = 16_777_216.0;

/// The kernel: one invocation per pixel of the screen.
#[derive(Clone, Copy, Debug)]
pub struct Raster {
    pub obj: Objects,
    pub width: u32,
    pub height: u32,
    pub tiles_x: u32,
    /// `None`: the nearest texel of level 0 through a plain atlas (the original renderer);
    /// otherwise the filter sampling a mipmapped atlas.
    pub filter: Option<Filter>,
    /// `None`: a missing atlas page faults and the pixel runs again once it is there (the
    /// exact renderer). `Some(map)`: a filtered sample degrades instead
    /// (`RasterAccess::sample_window_degraded`) and the pixel stores into `map` (RGBA8, the
    /// screen's size) how many levels coarser than wanted it was served (0 where exact or
    /// where no triangle covers it).
    pub degrade: Option<ObjectId>,
}

/// log2 of ρ from ρ² in 1/256 of a level: ρ²'s f32 bits less 1.0's are log2(ρ²) in units
/// of 2^-23 between powers of two (linear in the mantissa), and the shift by 16 halves it
/// (log2 ρ = log2(ρ²) / 2) and keeps 8 fraction bits. Exact in both twins: integer work on
/// the bits. Zero gives a very negative lod (level 0); infinities and NaN a very large one.
#[inline(always)]
pub fn lod_of(rho2: f32) -> f32 {
    ((rho2.to_bits() as i32).wrapping_sub(0x3f80_0000) >> 16) as f32 / 256.0
}

#[inline(always)]
fn plane<A: RasterAccess>(
    a: &mut A,
    tris: ObjectId,
    at: u32,
    dx: f32,
    dy: f32,
) -> Result<f32, Fault> {
    let f0 = f32::from_bits(a.load_u32(tris, at)?);
    let fx = f32::from_bits(a.load_u32(tris, at + 1)?);
    let fy = f32::from_bits(a.load_u32(tris, at + 2)?);
    Ok(f0 + fx * dx + fy * dy)
}

/// Nearest texel along one axis, repeating over `size` texels.
#[inline(always)]
fn wrap(t: f32, size: u32) -> u32 {
    let i = t.floor().clamp(-COORD_LIMIT, COORD_LIMIT) as i32;
    i.rem_euclid(size.max(1) as i32) as u32
}

impl Raster {
    /// The depth test alone: the nearest triangle record covering pixel (x, y) and its 1/w,
    /// or record 0 when none does. Split out of [`Raster::pixel`] so that the host can
    /// resolve visibility over the same records with the same arithmetic (the VR schemes'
    /// composition, `crate::vr::render`); the WGSL twin keeps it inline.
    #[inline(always)]
    pub fn nearest<A: RasterAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(f32, u32), Fault> {
        let o = self.obj;
        let tile = (y / TILE) * self.tiles_x + x / TILE;
        let first = a.load_u32(o.bins, 2 * tile)?;
        let count = a.load_u32(o.bins, 2 * tile + 1)?;
        let sx = ((x as i32) << SUB_BITS) + (SUB as i32) / 2;
        let sy = ((y as i32) << SUB_BITS) + (SUB as i32) / 2;
        let (cx, cy) = (x as f32 + 0.5, y as f32 + 0.5);
        let mut best = 0.0f32;
        let mut winner = 0u32;
        for i in 0..count {
            let t = a.load_u32(o.bins, first.wrapping_add(i))?;
            let base = t.wrapping_mul(RECORD_WORDS);
            if a.load_u32(o.tris, base + word::SIZE)? == 0 {
                continue;
            }
            let mut v = [0i32; 6];
            for (k, c) in v.iter_mut().enumerate() {
                *c = a.load_u32(o.tris, base + word::VERTS + k as u32)? as i32;
            }
            let owns = a.load_u32(o.tris, base + word::OWNS)?;
            let mut inside = true;
            for e in 0..3 {
                let (ax, ay) = (v[2 * e], v[2 * e + 1]);
                let n = (e + 1) % 3;
                let (bx, by) = (v[2 * n], v[2 * n + 1]);
                // Wrapping, as WGSL's i32 does; in range it never wraps (`setup`).
                let f = (bx.wrapping_sub(ax))
                    .wrapping_mul(sy.wrapping_sub(ay))
                    .wrapping_sub((by.wrapping_sub(ay)).wrapping_mul(sx.wrapping_sub(ax)));
                if !(f > 0 || (f == 0 && (owns >> e) & 1 == 1)) {
                    inside = false;
                    break;
                }
            }
            if !inside {
                continue;
            }
            let ox = f32::from_bits(a.load_u32(o.tris, base + word::ORIGIN)?);
            let oy = f32::from_bits(a.load_u32(o.tris, base + word::ORIGIN + 1)?);
            let iw = plane(a, o.tris, base + word::INV_W, cx - ox, cy - oy)?;
            if iw > best {
                best = iw;
                winner = t;
            }
        }
        Ok((best, winner))
    }

    /// The body, generic over paged or plain access.
    #[inline(always)]
    pub fn pixel<A: RasterAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let o = self.obj;
        let (best, winner) = self.nearest(a, x, y)?;
        let (cx, cy) = (x as f32 + 0.5, y as f32 + 0.5);
        if winner == 0 {
            a.store_rgba8(o.frame, x, y, BACKGROUND)?;
            a.store_rgba8(o.access, x, y, NO_ACCESS.to_le_bytes())?;
            if let Some(map) = self.degrade {
                a.store_rgba8(map, x, y, [0; 4])?;
            }
            return Ok(());
        }
        let base = winner * RECORD_WORDS;
        let rect = a.load_u32(o.tris, base + word::RECT)?;
        let size = a.load_u32(o.tris, base + word::SIZE)?;
        let ox = f32::from_bits(a.load_u32(o.tris, base + word::ORIGIN)?);
        let oy = f32::from_bits(a.load_u32(o.tris, base + word::ORIGIN + 1)?);
        let (dx, dy) = (cx - ox, cy - oy);
        let uw = plane(a, o.tris, base + word::U, dx, dy)?;
        let vw = plane(a, o.tris, base + word::V, dx, dy)?;
        let tx = (rect & 0xffff) + wrap(uw / best, size & 0xffff);
        let ty = (rect >> 16) + wrap(vw / best, size >> 16);
        let mut coarser = 0u32;
        let c = match self.filter {
            None => a.load_rgba8(o.atlas, tx, ty)?,
            Some(filter) => {
                let (u0, v0) = (uw / best, vw / best);
                let iwx = plane(a, o.tris, base + word::INV_W, dx + 1.0, dy)?;
                let ux = plane(a, o.tris, base + word::U, dx + 1.0, dy)? / iwx;
                let vx = plane(a, o.tris, base + word::V, dx + 1.0, dy)? / iwx;
                let iwy = plane(a, o.tris, base + word::INV_W, dx, dy + 1.0)?;
                let uy = plane(a, o.tris, base + word::U, dx, dy + 1.0)? / iwy;
                let vy = plane(a, o.tris, base + word::V, dx, dy + 1.0)? / iwy;
                let (ax, ay, bx, by) = (ux - u0, vx - v0, uy - u0, vy - v0);
                let rho2 = (ax * ax + ay * ay).max(bx * bx + by * by);
                let lod = lod_of(rho2).min(window_levels(rect, size) as f32);
                let (w, h) = (size & 0xffff, size >> 16);
                let window = Window {
                    x: rect & 0xffff,
                    y: rect >> 16,
                    width: w,
                    height: h,
                };
                let sampler = Sampler {
                    filter,
                    addressing: Addressing::Wrap,
                };
                let uvl = (u0 / w as f32, v0 / h as f32, lod);
                if self.degrade.is_some() {
                    let (c, k) = a.sample_window_degraded(o.atlas, sampler, window, uvl)?;
                    coarser = k;
                    c
                } else {
                    a.sample_window(o.atlas, sampler, window, uvl)?
                }
            }
        };
        a.store_rgba8(o.frame, x, y, c)?;
        a.store_rgba8(o.access, x, y, (tx | ty << 16).to_le_bytes())?;
        if let Some(map) = self.degrade {
            a.store_rgba8(map, x, y, coarser.to_le_bytes())?;
        }
        Ok(())
    }

    /// The WGSL twin's parameters.
    pub fn params(&self) -> RasterParams {
        let o = self.obj;
        RasterParams {
            atlas: o.atlas.0,
            tris: o.tris.0,
            bins: o.bins.0,
            frame: o.frame.0,
            access: o.access.0,
            width: self.width,
            height: self.height,
            tiles_x: self.tiles_x,
            filter_code: self.filter.map_or(0, |f| f.code() + 1),
            degrade: match self.filter {
                Some(_) => self.degrade.map_or(0, |m| m.0 + 1),
                None => 0,
            },
        }
    }
}

tessera_runtime::kernel_params! {
    /// What `raster.wgsl` reads as `params`: the objects, the frame's size and tiles, the
    /// filter's code + 1 (0: unfiltered) and, for a filtered kernel, the degrade map's id + 1
    /// (0: a miss faults).
    pub struct RasterParams {
        pub atlas: u32,
        pub tris: u32,
        pub bins: u32,
        pub frame: u32,
        pub access: u32,
        pub width: u32,
        pub height: u32,
        pub tiles_x: u32,
        pub filter_code: u32,
        pub degrade: u32,
    }
}

impl Kernel for Raster {
    fn name(&self) -> &'static str {
        "raster"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(include_str!("raster.wgsl"), &self.params()))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        self.pixel(inv, x, y)
    }
    fn late_objects(&self) -> Vec<ObjectId> {
        // Only a filtered sample degrades (`Raster::params`); the exact renderer faults.
        match (self.filter, self.degrade) {
            (Some(_), Some(_)) => vec![self.obj.atlas],
            _ => Vec::new(),
        }
    }
    fn run_span(
        &self,
        inv: &mut Invocation<'_>,
        y: u32,
        xs: std::ops::Range<u32>,
        incomplete: &mut Vec<(u32, u32)>,
    ) -> Result<(), RuntimeError> {
        tessera_runtime::run_span_with(inv, y, xs, incomplete, |inv, x, y| self.pixel(inv, x, y))
    }
}
