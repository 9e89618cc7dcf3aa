//! Mip chains and bordered pages: where each level of a mipmapped texture lies in its pages,
//! and where each texel of a bordered page comes from.
//!
//! The journal paper's address formulas (eq. 3–4) cut one level into pages of P × P texels,
//! row-major. A mip chain extends them level by level (the paper's section 5.2.2): level l is
//! max(1, W >> l) × max(1, H >> l) texels, cut into pages of the same P × P, and its pages
//! follow those of the levels before it, so the whole chain is one contiguous range of pages of
//! the object:
//!
//! ```text
//! pages_x(l) = ceil(max(1, W >> l) / P),  pages_y(l) = ceil(max(1, H >> l) / P)
//! offset(l)  = sum over k < l of pages_x(k) * pages_y(k)
//! page(l, s, t) = offset(l) + floor(s / P) + floor(t / P) * pages_x(l)
//! ```
//!
//! A bordered page (B texels a side) is stored in a slot of (P + 2B)² texels: the page's own
//! P × P texels at (B, B), and around them the texels of its neighbours at the same level, so
//! that a filter footprint of up to B texels beyond a texel never leaves the slot and one
//! translation serves a whole bilinear tap set. Texel (s, t) of a page sits at slot index
//! `(t % P + B) * (P + 2B) + (s % P + B)`. A border texel copies the level's texel at the same
//! place as if the page were not cut, wrapped or clamped to the level as the texture is
//! addressed ([`Addressing`]). A border is at most a quarter of the page side (B ≤ P / 4):
//! beyond that the slot is mostly border, and a border of half the page would copy whole
//! neighbouring pages.

use crate::error::{CoreError, Result};
use crate::geometry::PageSize;

/// How texel coordinates beyond a level's edge are brought back into it, for the samplers and
/// for what a page's border copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Addressing {
    /// Coordinates wrap around: the texture tiles the plane.
    Wrap,
    /// Coordinates stop at the edge texel.
    Clamp,
}

impl Addressing {
    /// Coordinate `c` (which may be negative or past the end) brought into `0..n`.
    pub fn apply(self, c: i64, n: u64) -> u64 {
        let n = n as i64;
        match self {
            Addressing::Wrap => c.rem_euclid(n) as u64,
            Addressing::Clamp => c.clamp(0, n - 1) as u64,
        }
    }
}

/// The most levels a chain can have: a texture of at most 2^32 texels a side has 33.
pub const MAX_LEVELS: u32 = 33;

/// The page layout of a mipmapped texture with bordered pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct MipLayout {
    width: u32,
    height: u32,
    page: PageSize,
    levels: u32,
    border: u32,
}

impl MipLayout {
    /// The layout of a `width` × `height` texture with `levels` levels (`None`: the full chain,
    /// down to 1 × 1) on pages of `page` texels a side with a border of `border` texels.
    pub fn new(
        width: u32,
        height: u32,
        page: u32,
        levels: Option<u32>,
        border: u32,
    ) -> Result<Self> {
        let page = PageSize::new(page)?;
        if width == 0 || height == 0 {
            return Err(CoreError::ZeroSized {
                width: width as u64,
                height: height as u64,
            });
        }
        let full = Self::full_levels(width, height);
        let levels = levels.unwrap_or(full);
        if levels == 0 || levels > full {
            return Err(CoreError::LevelCount {
                asked: levels,
                width,
                height,
                full,
            });
        }
        if border > page.get() / 4 {
            return Err(CoreError::BorderTooWide {
                border,
                page: page.get(),
            });
        }
        Ok(MipLayout {
            width,
            height,
            page,
            levels,
            border,
        })
    }

    /// Levels of a full chain: until both sides are 1, floor(log2(max(W, H))) + 1.
    pub fn full_levels(width: u32, height: u32) -> u32 {
        32 - width.max(height).max(1).leading_zeros()
    }

    pub fn levels(&self) -> u32 {
        self.levels
    }
    pub fn page(&self) -> PageSize {
        self.page
    }
    pub fn border(&self) -> u32 {
        self.border
    }

    fn check_level(&self, level: u32) -> Result<()> {
        if level >= self.levels {
            return Err(CoreError::LevelOutOfRange {
                level,
                levels: self.levels,
            });
        }
        Ok(())
    }

    /// Texels across and up at `level`: max(1, W >> l) × max(1, H >> l).
    pub fn extent(&self, level: u32) -> Result<(u64, u64)> {
        self.check_level(level)?;
        Ok((
            (self.width >> level).max(1) as u64,
            (self.height >> level).max(1) as u64,
        ))
    }

    /// Pages across and up at `level`.
    pub fn pages_xy(&self, level: u32) -> Result<(u64, u64)> {
        let (w, h) = self.extent(level)?;
        let p = self.page.get() as u64;
        Ok((w.div_ceil(p), h.div_ceil(p)))
    }

    /// The first page of `level`, counted from the chain's first page.
    pub fn level_offset(&self, level: u32) -> Result<u64> {
        self.check_level(level)?;
        (0..level).map(|l| self.level_pages(l)).sum()
    }

    fn level_pages(&self, level: u32) -> Result<u64> {
        let (px, py) = self.pages_xy(level)?;
        Ok(px * py)
    }

    /// Pages of the whole chain.
    pub fn page_count(&self) -> u64 {
        (0..self.levels)
            .map(|l| self.level_pages(l).unwrap_or(0))
            .sum()
    }

    /// The page of texel (s, t) of `level`, counted from the chain's first page.
    pub fn local_page(&self, level: u32, s: u64, t: u64) -> Result<u64> {
        let (w, h) = self.extent(level)?;
        if s >= w || t >= h {
            return Err(CoreError::TexelOutOfLevel {
                level,
                s,
                t,
                width: w,
                height: h,
            });
        }
        let shift = self.page.shift();
        let (px, _) = self.pages_xy(level)?;
        Ok(self.level_offset(level)? + (s >> shift) + (t >> shift) * px)
    }

    /// Texels a side of a slot: P + 2B.
    pub fn slot_side(&self) -> u64 {
        self.page.get() as u64 + 2 * self.border as u64
    }

    /// Texels of a slot: (P + 2B)².
    pub fn slot_texels(&self) -> u64 {
        self.slot_side() * self.slot_side()
    }

    /// Where texel (s, t) of `level` is stored: its page, and its index in the page's slot.
    pub fn locate(&self, level: u32, s: u64, t: u64) -> Result<(u64, u64)> {
        let page = self.local_page(level, s, t)?;
        let mask = self.page.get() as u64 - 1;
        let b = self.border as u64;
        Ok((page, ((t & mask) + b) * self.slot_side() + (s & mask) + b))
    }

    /// The level texel a slot texel holds: for slot coordinates (x, y), both in
    /// `0..slot_side()`, of the page at (px, py) of `level`, the texel at the same place of
    /// the uncut level, brought into it by `addressing` where it lies beyond an edge (only a
    /// border texel can).
    pub fn slot_source(
        &self,
        level: u32,
        (px, py): (u64, u64),
        (x, y): (u64, u64),
        addressing: Addressing,
    ) -> Result<(u64, u64)> {
        let (w, h) = self.extent(level)?;
        let (npx, npy) = self.pages_xy(level)?;
        let side = self.slot_side();
        if px >= npx || py >= npy || x >= side || y >= side {
            return Err(CoreError::TexelOutOfLevel {
                level,
                s: x,
                t: y,
                width: side,
                height: side,
            });
        }
        let p = self.page.get() as i64;
        let b = self.border as i64;
        let s = px as i64 * p + x as i64 - b;
        let t = py as i64 * p + y as i64 - b;
        Ok((addressing.apply(s, w), addressing.apply(t, h)))
    }

    /// Memory the borders add to the chain's pages: (P + 2B)² / P² − 1.
    pub fn border_overhead(&self) -> f64 {
        self.slot_texels() as f64 / self.page.texels() as f64 - 1.0
    }
}

/// The next level of an RGBA8 level of `w` × `h` texels (r in the low byte): each texel the
/// 2 × 2 box of the level above, per channel `(a + b + c + d + 2) >> 2` (exact in integers,
/// halves rounded up). Where a side is odd its last row or column is dropped (as `W >> 1`
/// drops it); where a side is 1 the box repeats its one row or column.
pub fn box_filter_rgba8(src: &[u32], w: u64, h: u64) -> Vec<u32> {
    let (nw, nh) = ((w >> 1).max(1), (h >> 1).max(1));
    let mut out = Vec::with_capacity((nw * nh) as usize);
    for y in 0..nh {
        let (y0, y1) = ((2 * y).min(h - 1), (2 * y + 1).min(h - 1));
        for x in 0..nw {
            let (x0, x1) = ((2 * x).min(w - 1), (2 * x + 1).min(w - 1));
            let taps =
                [(x0, y0), (x1, y0), (x0, y1), (x1, y1)].map(|(x, y)| src[(y * w + x) as usize]);
            let mut v = 0u32;
            for k in 0..4 {
                let sum: u32 = taps.iter().map(|t| (t >> (8 * k)) & 255).sum();
                v |= ((sum + 2) >> 2) << (8 * k);
            }
            out.push(v);
        }
    }
    out
}

/// Every level of `layout`'s chain from its level 0 (RGBA8 words, row-major from the lower
/// left), each level the box filter of the one before.
pub fn chain_rgba8(layout: &MipLayout, level0: Vec<u32>) -> Vec<Vec<u32>> {
    let mut chain = vec![level0];
    for l in 1..layout.levels {
        let (w, h) = (
            (layout.width >> (l - 1)).max(1) as u64,
            (layout.height >> (l - 1)).max(1) as u64,
        );
        let next = box_filter_rgba8(&chain[l as usize - 1], w, h);
        chain.push(next);
    }
    chain
}

/// The slots of every page of the chain, back to back in page order: the host layout of a
/// mipmapped object (`ObjectDesc::Mipmapped`). Each slot is filled by [`MipLayout::slot_source`],
/// its border and the part of an edge page beyond the level included.
pub fn slots(layout: &MipLayout, chain: &[Vec<u32>], addressing: Addressing) -> Vec<u32> {
    let side = layout.slot_side();
    let mut out = Vec::with_capacity((layout.page_count() * layout.slot_texels()) as usize);
    for l in 0..layout.levels {
        let (w, _) = layout.extent(l).unwrap_or((1, 1));
        let (npx, npy) = layout.pages_xy(l).unwrap_or((0, 0));
        for py in 0..npy {
            for px in 0..npx {
                for y in 0..side {
                    for x in 0..side {
                        let (s, t) = layout
                            .slot_source(l, (px, py), (x, y), addressing)
                            .unwrap_or((0, 0));
                        out.push(chain[l as usize][(t * w + s) as usize]);
                    }
                }
            }
        }
    }
    out
}

/// Level `level` read back out of a chain's slots (the inverse of [`slots`] on a level).
pub fn level_from_slots(layout: &MipLayout, slots: &[u32], level: u32) -> Result<Vec<u32>> {
    let (w, h) = layout.extent(level)?;
    let mut out = Vec::with_capacity((w * h) as usize);
    for t in 0..h {
        for s in 0..w {
            let (page, at) = layout.locate(level, s, t)?;
            out.push(slots[(page * layout.slot_texels() + at) as usize]);
        }
    }
    Ok(out)
}

/// Words as the little-endian bytes of an object's host layout.
pub fn words_to_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// An object's host layout as words.
pub fn bytes_to_words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// Every page of the chain, found by walking every texel of every level in order (levels,
    /// then rows, then texels) and numbering each page the first time one of its texels is
    /// met: no offsets, no page counts.
    fn naive_pages(w: u32, h: u32, p: u32, levels: u32) -> HashMap<(u32, u64, u64), u64> {
        let mut pages = HashMap::new();
        for l in 0..levels {
            let (lw, lh) = ((w >> l).max(1) as u64, (h >> l).max(1) as u64);
            for t in 0..lh {
                for s in 0..lw {
                    let next = pages.len() as u64;
                    pages.entry((l, s / p as u64, t / p as u64)).or_insert(next);
                }
            }
        }
        pages
    }

    fn layouts() -> impl Strategy<Value = (u32, u32, u32, u32, u32)> {
        (1u32..300, 1u32..300, 0u32..6).prop_flat_map(|(w, h, ps)| {
            let p = 1u32 << ps;
            let full = MipLayout::full_levels(w, h);
            (Just(w), Just(h), Just(p), 1..=full, 0..=p / 4)
        })
    }

    proptest! {
        /// The formulas give every texel of every level the page the naive walk gives it,
        /// and the chain's page count is the walk's.
        #[test]
        fn pages_match_a_naive_walk((w, h, p, levels, border) in layouts()) {
            let m = MipLayout::new(w, h, p, Some(levels), border).unwrap();
            let naive = naive_pages(w, h, p, levels);
            prop_assert_eq!(m.page_count(), naive.len() as u64);
            for l in 0..levels {
                let (lw, lh) = m.extent(l).unwrap();
                prop_assert_eq!((lw, lh), ((w >> l).max(1) as u64, (h >> l).max(1) as u64));
                for t in (0..lh).step_by(3) {
                    for s in (0..lw).step_by(3) {
                        let want = naive[&(l, s / p as u64, t / p as u64)];
                        prop_assert_eq!(m.local_page(l, s, t).unwrap(), want);
                    }
                }
            }
        }

        /// Within a page, the texels land on distinct slot places inside the border, and the
        /// slot texel at each place holds that very texel back.
        #[test]
        fn a_page_fills_its_slot_inside_the_border((w, h, p, levels, border) in layouts()) {
            let m = MipLayout::new(w, h, p, Some(levels), border).unwrap();
            let l = levels - 1;
            let (lw, lh) = m.extent(l).unwrap();
            let side = m.slot_side();
            let mut seen = HashMap::new();
            for t in 0..lh.min(40) {
                for s in 0..lw.min(40) {
                    let (page, at) = m.locate(l, s, t).unwrap();
                    let (x, y) = (at % side, at / side);
                    prop_assert!(x >= border as u64 && x < side - border as u64);
                    prop_assert!(y >= border as u64 && y < side - border as u64);
                    prop_assert!(seen.insert((page, at), (s, t)).is_none());
                    let local = page - m.level_offset(l).unwrap();
                    let (px, _) = m.pages_xy(l).unwrap();
                    for a in [Addressing::Wrap, Addressing::Clamp] {
                        let back = m.slot_source(l, (local % px, local / px), (x, y), a).unwrap();
                        prop_assert_eq!(back, (s, t));
                    }
                }
            }
        }

        /// A border texel holds the neighbour's texel at the same place of the level,
        /// wrapped or clamped at the level's edges.
        #[test]
        fn borders_copy_the_neighbours((w, h, p, levels, border) in layouts(), wrap in any::<bool>()) {
            let m = MipLayout::new(w, h, p, Some(levels), border).unwrap();
            let a = if wrap { Addressing::Wrap } else { Addressing::Clamp };
            let (lw, lh) = m.extent(0).unwrap();
            let (npx, npy) = m.pages_xy(0).unwrap();
            let (px, py) = (npx - 1, npy / 2);
            let b = border as i64;
            for y in 0..m.slot_side() {
                for x in 0..m.slot_side() {
                    let (s, t) = m.slot_source(0, (px, py), (x, y), a).unwrap();
                    // The naive rule: step from the page's first texel by the slot offset,
                    // one texel at a time, folding back at every edge.
                    let mut fs = (px * p as u64) as i64 + x as i64 - b;
                    let mut ft = (py * p as u64) as i64 + y as i64 - b;
                    if wrap {
                        while fs < 0 { fs += lw as i64; }
                        while fs >= lw as i64 { fs -= lw as i64; }
                        while ft < 0 { ft += lh as i64; }
                        while ft >= lh as i64 { ft -= lh as i64; }
                    } else {
                        fs = fs.max(0).min(lw as i64 - 1);
                        ft = ft.max(0).min(lh as i64 - 1);
                    }
                    prop_assert_eq!((s, t), (fs as u64, ft as u64));
                }
            }
        }
    }

    #[test]
    fn bad_layouts_are_refused_with_what_is_wrong() {
        assert!(matches!(
            MipLayout::new(64, 64, 16, None, 8),
            Err(CoreError::BorderTooWide {
                border: 8,
                page: 16
            })
        ));
        assert!(matches!(
            MipLayout::new(64, 64, 16, None, 5),
            Err(CoreError::BorderTooWide { .. })
        ));
        MipLayout::new(64, 64, 16, None, 4).unwrap();
        // 64 × 64 has 7 levels (64 down to 1).
        assert_eq!(MipLayout::full_levels(64, 64), 7);
        assert!(matches!(
            MipLayout::new(64, 64, 16, Some(8), 0),
            Err(CoreError::LevelCount {
                asked: 8,
                full: 7,
                ..
            })
        ));
        // None at all is not a chain either, and the message says what was asked.
        let none = MipLayout::new(64, 64, 16, Some(0), 0).unwrap_err();
        assert_eq!(
            none.to_string(),
            "a chain of 0 mip levels was asked for: a 64x64 texture has 1 to 7"
        );
        let m = MipLayout::new(64, 64, 16, None, 1).unwrap();
        assert!(matches!(
            m.extent(7),
            Err(CoreError::LevelOutOfRange {
                level: 7,
                levels: 7
            })
        ));
        assert!(matches!(
            m.local_page(1, 32, 0),
            Err(CoreError::TexelOutOfLevel { level: 1, .. })
        ));
        assert!(matches!(
            MipLayout::new(64, 64, 24, None, 0),
            Err(CoreError::BadPageSize(24))
        ));
        assert!(matches!(
            crate::ObjectDesc::buffer(1024, 64)
                .unwrap()
                .mip_layout(None, 0),
            Err(CoreError::MipsOnBuffer)
        ));
    }

    #[test]
    fn border_overhead_is_the_slot_over_the_page() {
        // (16 + 2)² / 16² − 1 = 324 / 256 − 1.
        let m = MipLayout::new(64, 64, 16, None, 1).unwrap();
        assert!((m.border_overhead() - (324.0 / 256.0 - 1.0)).abs() < 1e-12);
        assert_eq!(
            MipLayout::new(64, 64, 16, None, 0)
                .unwrap()
                .border_overhead(),
            0.0
        );
    }

    #[test]
    fn the_box_filter_rounds_halves_up_and_drops_an_odd_last_column() {
        // 3 × 2 → 1 × 1: column 2 is dropped. Red 1 + 2 + 3 + 4 = 10 → 2.5 → 3; green
        // 0 + 0 + 0 + 1 = 1 → 0.25 → 0; blue all 255; alpha 7 + 8 + 8 + 8 = 31 → 7.75 → 8.
        let px = |r: u32, g: u32, b: u32, a: u32| r | g << 8 | b << 16 | a << 24;
        let src = [
            px(1, 0, 255, 7),
            px(2, 0, 255, 8),
            px(200, 200, 0, 0),
            px(3, 0, 255, 8),
            px(4, 1, 255, 8),
            px(200, 200, 0, 0),
        ];
        assert_eq!(box_filter_rgba8(&src, 3, 2), vec![px(3, 0, 255, 8)]);
        // A side of 1 repeats its one column: 1 × 2 → 1 × 1 averages the two texels twice.
        assert_eq!(
            box_filter_rgba8(&[px(10, 0, 0, 0), px(13, 0, 0, 0)], 1, 2),
            vec![px(12, 0, 0, 0)]
        );
    }

    #[test]
    fn a_full_chain_of_a_non_square_texture() {
        // 100 × 20 on pages of 8: 13×3, 7×2, 4×1, 2×1, 1×1, 1×1, 1×1 pages (100 >> 6 = 1).
        let m = MipLayout::new(100, 20, 8, None, 0).unwrap();
        assert_eq!(m.levels(), 7);
        let pages: Vec<u64> = (0..7).map(|l| m.level_pages(l).unwrap()).collect();
        assert_eq!(pages, vec![39, 14, 4, 2, 1, 1, 1]);
        assert_eq!(m.page_count(), 62);
        assert_eq!(m.level_offset(3).unwrap(), 57);
        assert_eq!(m.extent(6).unwrap(), (1, 1));
    }
}
