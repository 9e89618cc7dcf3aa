//! The samplers' arithmetic, in integers, so that the CPU twin, the WGSL twin
//! (`sample_rgba8` in tessera-wgpu's prelude) and the unpaged references give the same bits.
//!
//! Floats are touched once, at the entry, by operations that are exact in any IEEE f32
//! arithmetic (a clamp, a product with a power of two, a floor); everything after is integer:
//!
//! ```text
//! uf  = floor(clamp(u, -16384, 16384) * 65536)        u in 1/65536 of the texture
//! uf  = uf mod 65536 (wrap) | clamp(uf, 0, 65536) (clamp)
//! lf  = min(floor(clamp(lod, 0, 64) * 256), (levels - 1) * 256)   lod in 1/256 of a level
//! w_l = max(1, W >> l)
//! nearest:   level l = min((lf + 128) >> 8, levels - 1); texel min((uf * w_l) >> 16, w_l - 1)
//! bilinear:  level as nearest; s = ((uf * w_l) >> 8) - 128  (texel units of 1/256, centred)
//!            x0 = s >> 8 (arithmetic), a = s & 255; likewise y0, b from vf
//!            c = (c00 (256-a)(256-b) + c10 a (256-b) + c01 (256-a) b + c11 a b + 32768) >> 16
//!            with c00 at (x0, y0), c10 at (x0+1, y0), c01 at (x0, y0+1), each addressed
//!            (x, y) within the sample's window (`Window`), addressed within it
//! trilinear: l = lf >> 8, f = lf & 255; f = 0: bilinear at l; else
//!            c = (bilinear(l) (256 - f) + bilinear(l + 1) f + 128) >> 8
//! ```
//!
//! per 8-bit channel, in u32: `uf * w_l` is below 2^31 because a side is at most
//! [`MAX_SIDE`] texels, and a channel's weighted sum is below 2^24. Clamping u to [0, 1]
//! before scaling changes no clamped sample: every tap beyond an edge reads the edge texel.
//! A non-finite u, v or lod gives an unspecified (but not undefined) sample.

use crate::mip::Addressing;

/// The widest side of a sampled texture: `uf * w_l` must fit in 32 bits. Kept with the
/// object descriptions, which refuse a wider mip chain.
pub use crate::geometry::MAX_SAMPLED_SIDE as MAX_SIDE;

/// How a sample combines texels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Filter {
    /// The nearest texel of the nearest level.
    Nearest,
    /// Four texels of the nearest level, weighted by distance.
    Bilinear,
    /// Bilinear samples of the two levels around the level of detail, weighted by it.
    Trilinear,
}

impl Filter {
    pub const ALL: [Filter; 3] = [Filter::Nearest, Filter::Bilinear, Filter::Trilinear];

    pub fn name(self) -> &'static str {
        match self {
            Filter::Nearest => "nearest",
            Filter::Bilinear => "bilinear",
            Filter::Trilinear => "trilinear",
        }
    }

    /// The code the WGSL twin takes.
    pub fn code(self) -> u32 {
        match self {
            Filter::Nearest => 0,
            Filter::Bilinear => 1,
            Filter::Trilinear => 2,
        }
    }
}

/// A texture coordinate in 1/65536 of the texture, brought into range by `a`.
pub fn coordinate(c: f32, a: Addressing) -> u32 {
    let f = (c.clamp(-16384.0, 16384.0) * 65536.0).floor() as i32;
    match a {
        Addressing::Wrap => (f & 0xffff) as u32,
        Addressing::Clamp => f.clamp(0, 65536) as u32,
    }
}

/// A level of detail in 1/256 of a level, within the chain's `levels`.
pub fn level_of_detail(lod: f32, levels: u32) -> u32 {
    let f = (lod.clamp(0.0, 64.0) * 256.0).floor() as u32;
    f.min((levels - 1) * 256)
}

/// What a sampler reads: the texel (x, y) of a level (inside it), and the 2 × 2 quad whose
/// lower-left texel is at (x0, y0) of a level (x0 in -1..w_l), as [c00, c10, c01, c11], each
/// tap addressed within the level by the object's own addressing ([`Shape::addressing`]). A
/// bordered store answers a quad from one page; a plain one reads four texels.
pub trait Texels {
    type Error;
    fn texel(&mut self, level: u32, x: u32, y: u32) -> Result<u32, Self::Error>;
    fn quad(&mut self, level: u32, x0: i32, y0: i32) -> Result<[u32; 4], Self::Error>;
}

/// The sampled texture's shape: level-0 extent, level count, and the addressing its borders
/// were copied under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub width: u32,
    pub height: u32,
    pub levels: u32,
    pub addressing: Addressing,
}

impl Shape {
    pub fn extent(&self, l: u32) -> (u32, u32) {
        ((self.width >> l).max(1), (self.height >> l).max(1))
    }
    /// The whole of level 0, as a window.
    pub fn whole(&self) -> Window {
        Window {
            x: 0,
            y: 0,
            width: self.width,
            height: self.height,
        }
    }
}

/// How a sample filters and addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    pub filter: Filter,
    pub addressing: Addressing,
}

/// The part of a texture a sample sees, in level-0 texels: (u, v) span it, and addressing
/// wraps or clamps within it (a texture of an atlas). At level l it is
/// (x >> l, y >> l, max(1, width >> l), max(1, height >> l)): a window whose corner and
/// sides are multiples of 2^l halves with the chain, and its texels at level l are the box
/// filter of its own texels alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub x: u32,
    pub y: u32,
    pub width: u32,
    pub height: u32,
}

impl Window {
    fn at(&self, l: u32) -> (u32, u32, u32, u32) {
        (
            self.x >> l,
            self.y >> l,
            (self.width >> l).max(1),
            (self.height >> l).max(1),
        )
    }
}

/// One RGBA8 sample (r in the low byte) at (u, v) of `window` and level of detail `lod`.
pub fn sample<T: Texels>(
    t: &mut T,
    shape: Shape,
    sampler: Sampler,
    window: Window,
    (u, v, lod): (f32, f32, f32),
) -> Result<u32, T::Error> {
    let a = sampler.addressing;
    let (uf, vf) = (coordinate(u, a), coordinate(v, a));
    let lf = level_of_detail(lod, shape.levels);
    let nearest_level = ((lf + 128) >> 8).min(shape.levels - 1);
    match sampler.filter {
        Filter::Nearest => nearest(t, window, nearest_level, uf, vf),
        Filter::Bilinear => bilinear(t, shape, sampler, window, nearest_level, uf, vf),
        Filter::Trilinear => {
            let (l, f) = (lf >> 8, lf & 255);
            let c0 = bilinear(t, shape, sampler, window, l, uf, vf)?;
            if f == 0 {
                return Ok(c0);
            }
            let c1 = bilinear(t, shape, sampler, window, l + 1, uf, vf)?;
            Ok(blend(c0, c1, f))
        }
    }
}

/// A store a degrading sample can probe: between [`Probe::begin`] and [`Probe::end`] a tap
/// whose page is not resident yields zeros instead of failing, and is remembered; with
/// `record`, it also records the page's read request, as a request pass's load does.
pub trait Probe: Texels {
    fn begin(&mut self, record: bool);
    /// Whether a tap missed since `begin`.
    fn end(&mut self) -> bool;
}

/// One sample that never waits for a page (virtual texturing's way to meet a miss): the
/// exact [`sample`] when every tap it reads is resident; otherwise the pages it missed are
/// requested, and the sample is the bilinear one (nearest, for a nearest sampler) of the
/// finest level coarser than the finest wanted level whose taps are all resident, found
/// without requesting anything. Returns the colour and how many levels coarser than wanted
/// it was served (0: exact); a chain with no resident level gives zero and
/// `levels − wanted`.
///
/// The exact attempt probes every tap (it does not stop at the first miss), so one frame's
/// requests bring every page the sample wants, and a view that stays put is exact from the
/// next frame on.
pub fn sample_degraded<T: Probe>(
    t: &mut T,
    shape: Shape,
    sampler: Sampler,
    window: Window,
    uvl: (f32, f32, f32),
) -> Result<(u32, u32), T::Error> {
    t.begin(true);
    let c = sample(t, shape, sampler, window, uvl);
    let missed = t.end();
    let c = c?;
    if !missed {
        return Ok((c, 0));
    }
    let a = sampler.addressing;
    let (uf, vf) = (coordinate(uvl.0, a), coordinate(uvl.1, a));
    let lf = level_of_detail(uvl.2, shape.levels);
    let wanted = match sampler.filter {
        Filter::Trilinear => lf >> 8,
        _ => ((lf + 128) >> 8).min(shape.levels - 1),
    };
    for k in wanted + 1..shape.levels {
        t.begin(false);
        let c = match sampler.filter {
            Filter::Nearest => nearest(t, window, k, uf, vf),
            _ => bilinear(t, shape, sampler, window, k, uf, vf),
        };
        let missed = t.end();
        let c = c?;
        if !missed {
            return Ok((c, k - wanted));
        }
    }
    Ok((0, shape.levels - wanted))
}

fn nearest<T: Texels>(
    t: &mut T,
    window: Window,
    l: u32,
    uf: u32,
    vf: u32,
) -> Result<u32, T::Error> {
    let (wx, wy, w, h) = window.at(l);
    let x = ((uf * w) >> 16).min(w - 1);
    let y = ((vf * h) >> 16).min(h - 1);
    t.texel(l, wx + x, wy + y)
}

fn bilinear<T: Texels>(
    t: &mut T,
    shape: Shape,
    sampler: Sampler,
    window: Window,
    l: u32,
    uf: u32,
    vf: u32,
) -> Result<u32, T::Error> {
    let (wx, wy, w, h) = window.at(l);
    let s = ((uf * w) >> 8) as i32 - 128;
    let r = ((vf * h) >> 8) as i32 - 128;
    let (a, b) = ((s & 255) as u32, (r & 255) as u32);
    let (x0, y0) = (s >> 8, r >> 8);
    let inside = x0 >= 0 && y0 >= 0 && x0 + 1 < w as i32 && y0 + 1 < h as i32;
    let whole = (wx, wy, w, h) == {
        let (lw, lh) = shape.extent(l);
        (0, 0, lw, lh)
    };
    // The store's quad addresses by the object's rule: good for taps that need none, or for
    // a sample of the whole level that addresses as the object does.
    let [c00, c10, c01, c11] = if inside || (whole && sampler.addressing == shape.addressing) {
        t.quad(l, wx as i32 + x0, wy as i32 + y0)?
    } else {
        let ad = sampler.addressing;
        let xs = [x0, x0 + 1].map(|x| wx + ad.apply(x as i64, w as u64) as u32);
        let ys = [y0, y0 + 1].map(|y| wy + ad.apply(y as i64, h as u64) as u32);
        [
            t.texel(l, xs[0], ys[0])?,
            t.texel(l, xs[1], ys[0])?,
            t.texel(l, xs[0], ys[1])?,
            t.texel(l, xs[1], ys[1])?,
        ]
    };
    let weights = [(256 - a) * (256 - b), a * (256 - b), (256 - a) * b, a * b];
    let mut out = 0u32;
    for k in 0..4 {
        let ch = |c: u32| (c >> (8 * k)) & 255;
        let sum = ch(c00) * weights[0]
            + ch(c10) * weights[1]
            + ch(c01) * weights[2]
            + ch(c11) * weights[3];
        out |= ((sum + 32768) >> 16) << (8 * k);
    }
    Ok(out)
}

fn blend(c0: u32, c1: u32, f: u32) -> u32 {
    let mut out = 0u32;
    for k in 0..4 {
        let ch = |c: u32| (c >> (8 * k)) & 255;
        out |= ((ch(c0) * (256 - f) + ch(c1) * f + 128) >> 8) << (8 * k);
    }
    out
}

/// A whole chain in host memory, level by level (row-major from the lower left), read as a
/// sampler reads: what the unpaged references sample.
pub struct ChainTexels<'a> {
    pub levels: &'a [Vec<u32>],
    pub shape: Shape,
}

impl Texels for ChainTexels<'_> {
    type Error = std::convert::Infallible;
    fn texel(&mut self, level: u32, x: u32, y: u32) -> Result<u32, Self::Error> {
        let (w, _) = self.shape.extent(level);
        Ok(self.levels[level as usize][(y * w + x) as usize])
    }
    fn quad(&mut self, level: u32, x0: i32, y0: i32) -> Result<[u32; 4], Self::Error> {
        let (w, h) = self.shape.extent(level);
        let a = self.shape.addressing;
        let at = |x: i32, y: i32| {
            let (x, y) = (a.apply(x as i64, w as u64), a.apply(y as i64, h as u64));
            self.levels[level as usize][(y * w as u64 + x) as usize]
        };
        Ok([
            at(x0, y0),
            at(x0 + 1, y0),
            at(x0, y0 + 1),
            at(x0 + 1, y0 + 1),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Level l is one colour, `0x0101_0101 * (l + 1)`; only the levels of `resident` answer.
    struct Levels {
        resident: Vec<u32>,
        probing: Option<bool>,
        missed: bool,
        requested: Vec<u32>,
    }

    #[derive(Debug, PartialEq)]
    struct Miss;

    impl Levels {
        fn new(resident: &[u32]) -> Self {
            Levels {
                resident: resident.to_vec(),
                probing: None,
                missed: false,
                requested: Vec::new(),
            }
        }
        fn at(&mut self, level: u32) -> Result<u32, Miss> {
            if self.resident.contains(&level) {
                return Ok(0x0101_0101 * (level + 1));
            }
            match self.probing {
                None => Err(Miss),
                Some(record) => {
                    self.missed = true;
                    if record && !self.requested.contains(&level) {
                        self.requested.push(level);
                    }
                    Ok(0)
                }
            }
        }
    }

    impl Texels for Levels {
        type Error = Miss;
        fn texel(&mut self, level: u32, _: u32, _: u32) -> Result<u32, Miss> {
            self.at(level)
        }
        fn quad(&mut self, level: u32, _: i32, _: i32) -> Result<[u32; 4], Miss> {
            let c = self.at(level)?;
            Ok([c; 4])
        }
    }

    impl Probe for Levels {
        fn begin(&mut self, record: bool) {
            self.probing = Some(record);
            self.missed = false;
        }
        fn end(&mut self) -> bool {
            self.probing = None;
            self.missed
        }
    }

    const SHAPE: Shape = Shape {
        width: 64,
        height: 64,
        levels: 7,
        addressing: Addressing::Wrap,
    };

    fn run(filter: Filter, lod: f32, resident: &[u32]) -> ((u32, u32), Vec<u32>) {
        let mut t = Levels::new(resident);
        let s = Sampler {
            filter,
            addressing: Addressing::Wrap,
        };
        let out = sample_degraded(&mut t, SHAPE, s, SHAPE.whole(), (0.3, 0.6, lod)).unwrap();
        t.requested.sort_unstable();
        (out, t.requested)
    }

    #[test]
    fn a_resident_sample_is_exact_and_requests_nothing() {
        assert_eq!(run(Filter::Bilinear, 2.0, &[2]), ((0x0303_0303, 0), vec![]));
        // Trilinear halfway between levels 1 and 2: (2 · 128 + 3 · 128 + 128) >> 8 = 3.
        assert_eq!(
            run(Filter::Trilinear, 1.5, &[1, 2]),
            ((0x0303_0303, 0), vec![])
        );
    }

    #[test]
    fn a_miss_requests_every_wanted_level_and_serves_the_finest_resident_coarser_one() {
        assert_eq!(
            run(Filter::Bilinear, 0.0, &[3, 6]),
            ((0x0404_0404, 3), vec![0])
        );
        assert_eq!(run(Filter::Nearest, 1.0, &[4]), ((0x0505_0505, 3), vec![1]));
        // Both levels of a trilinear sample are probed, and the fallback starts below the
        // finer one: level 2 (the coarser wanted one) is missing too, so level 3 serves.
        assert_eq!(
            run(Filter::Trilinear, 1.5, &[0, 3]),
            ((0x0404_0404, 2), vec![1, 2])
        );
        // The finer wanted level is resident, the coarser is not: served from below both.
        assert_eq!(
            run(Filter::Trilinear, 1.5, &[1, 5]),
            ((0x0606_0606, 4), vec![2])
        );
    }

    #[test]
    fn a_chain_with_nothing_resident_gives_zero_one_past_its_coarsest_level() {
        assert_eq!(run(Filter::Bilinear, 2.0, &[]), ((0, 5), vec![2]));
        // A finer level does not serve a miss.
        assert_eq!(run(Filter::Bilinear, 2.0, &[0, 1]), ((0, 5), vec![2]));
    }
}
