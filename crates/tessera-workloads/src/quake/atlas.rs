//! Every texture of a scene in one paged RGBA8 atlas object.
//!
//! A launch binds at most `MAX_BINDINGS` objects, so one object per texture cannot all be
//! bound at once. Instead each texture gets a rectangle of the atlas whose origin is a
//! multiple of the page side P and whose size is rounded up to whole pages: no page holds
//! texels of two textures, so residency, requests and traffic are page for page those of one
//! object per texture with the same P (an 8×8 texture still takes one P×P page, as its own
//! object would). Per-texture figures come back by mapping pages to textures
//! ([`Atlas::texture_of_page`]).
//!
//! Packing is shelf packing, deterministic in the texture sizes and P alone, so a trace replay
//! rebuilds the same layout for the page size the trace was recorded at.
//!
//! A mipmapped atlas ([`Packing::Levels`]) also starts each rectangle on a multiple of the
//! texture's own alignment (the largest power of two dividing both its sides), so that its
//! levels stop where the texture alone says ([`window_levels`]), whatever P is. With
//! rectangles on page boundaries only, a texture whose corner fell on a multiple of 16 at
//! P = 16 but of 64 at P = 64 halved twice more at P = 64, and a filtered frame changed with
//! the page size.

use super::QuakeError;

/// One texture's place in the atlas (texels; the padding to whole pages is not part of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x: u32,
    pub y: u32,
    pub w: u32,
    pub h: u32,
}

/// The atlas layout for one page size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Atlas {
    pub page: u32,
    pub width: u32,
    pub height: u32,
    /// Per texture, in the mesh's order.
    pub rects: Vec<Rect>,
    /// Per page of the atlas (row-major from the lower left), the texture it belongs to.
    owner: Vec<Option<u32>>,
}

/// Where a texture's rectangle may start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    /// On page boundaries: the plain atlas, sampled at level 0 only.
    Pages,
    /// On page boundaries and on multiples of the texture's own alignment: the mipmapped
    /// atlas, whose texture levels then do not depend on the page size.
    Levels,
}

/// The largest power of two dividing both sides: the corner alignment under which a texture
/// halves as often as its size allows.
fn own_alignment(w: u32, h: u32) -> u64 {
    1u64 << (w | h).trailing_zeros().min(16)
}

/// The atlas side is kept within what a texture object may be.
const MAX_ATLAS_SIDE: u64 = 1 << 16;

fn round_up(v: u32, p: u32) -> u64 {
    (v as u64).div_ceil(p as u64) * p as u64
}

impl Atlas {
    /// The atlas of `textures` in pages of `page`, packed as `packing` says, and its texels.
    pub fn of(
        textures: &[super::TextureImage],
        page: u32,
        packing: Packing,
    ) -> Result<(Atlas, Vec<u8>), QuakeError> {
        let sizes: Vec<(u32, u32)> = textures.iter().map(|t| (t.width, t.height)).collect();
        let atlas = Atlas::pack_with(&sizes, page, packing)?;
        let texels = atlas.texels(textures);
        Ok((atlas, texels))
    }

    /// Packs textures of these sizes for page side `page` (a power of two, checked by the
    /// caller through `PageSize`) into a plain atlas ([`Packing::Pages`]).
    pub fn pack(sizes: &[(u32, u32)], page: u32) -> Result<Atlas, QuakeError> {
        Atlas::pack_with(sizes, page, Packing::Pages)
    }

    /// Packs textures of these sizes for page side `page` as `packing` says.
    pub fn pack_with(
        sizes: &[(u32, u32)],
        page: u32,
        packing: Packing,
    ) -> Result<Atlas, QuakeError> {
        tessera_core::PageSize::new(page)?;
        if sizes.is_empty() {
            return Err(QuakeError::Mesh("no textures to pack".into()));
        }
        let padded: Vec<(u64, u64)> = sizes
            .iter()
            .map(|&(w, h)| (round_up(w, page), round_up(h, page)))
            .collect();
        let area: u64 = padded.iter().map(|(w, h)| w * h).sum();
        let widest = padded.iter().map(|p| p.0).max().unwrap_or(0);
        // About square: the side is the square root of the padded area, in whole pages.
        let side = ((area as f64).sqrt().ceil() as u64).div_ceil(page as u64) * page as u64;
        let width = side.max(widest);
        // Tallest first, then widest, then mesh order: a total order, so the layout is a
        // function of the sizes alone.
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&i| {
            (
                std::cmp::Reverse(padded[i].1),
                std::cmp::Reverse(padded[i].0),
                i,
            )
        });
        let mut rects = vec![
            Rect {
                x: 0,
                y: 0,
                w: 0,
                h: 0
            };
            sizes.len()
        ];
        let align = |i: usize| match packing {
            Packing::Pages => page as u64,
            Packing::Levels => own_alignment(sizes[i].0, sizes[i].1).max(page as u64),
        };
        // A shelf starts at `y`; a rectangle in it starts at `y` rounded up to its alignment,
        // and the next shelf starts below the lowest of them. Where every corner is already
        // aligned, as in a set of powers of two, the layout is the plain one.
        let (mut x, mut y, mut bottom) = (0u64, 0u64, 0u64);
        for &i in &order {
            let (pw, ph) = padded[i];
            let a = align(i);
            let mut at = x.div_ceil(a) * a;
            if at + pw > width {
                y = bottom;
                at = 0;
            }
            let top = y.div_ceil(a) * a;
            rects[i] = Rect {
                x: at as u32,
                y: top as u32,
                w: sizes[i].0,
                h: sizes[i].1,
            };
            x = at + pw;
            bottom = bottom.max(top + ph);
        }
        let height = bottom;
        if width > MAX_ATLAS_SIDE || height > MAX_ATLAS_SIDE {
            return Err(QuakeError::Config(format!(
                "the textures need a {width}x{height} atlas at page {page}; at most {MAX_ATLAS_SIDE} a side"
            )));
        }
        let (pages_x, pages_y) = (width / page as u64, height / page as u64);
        let mut owner = vec![None; (pages_x * pages_y) as usize];
        for (t, r) in rects.iter().enumerate() {
            let (px0, py0) = (r.x / page, r.y / page);
            let (px1, py1) = ((r.x + r.w).div_ceil(page), (r.y + r.h).div_ceil(page));
            for py in py0..py1 {
                for px in px0..px1 {
                    owner[(py as u64 * pages_x + px as u64) as usize] = Some(t as u32);
                }
            }
        }
        Ok(Atlas {
            page,
            width: width as u32,
            height: height as u32,
            rects,
            owner,
        })
    }

    pub fn pages_x(&self) -> u32 {
        self.width / self.page
    }
    pub fn pages_y(&self) -> u32 {
        self.height / self.page
    }
    pub fn page_count(&self) -> u64 {
        self.owner.len() as u64
    }

    /// The texture whose rectangle covers local page `page`, or `None` for padding.
    pub fn texture_of_page(&self, page: u64) -> Option<u32> {
        self.owner.get(page as usize).copied().flatten()
    }

    /// The texture at atlas texel (x, y), or `None` outside every rectangle's pages.
    pub fn texture_at(&self, x: u32, y: u32) -> Option<u32> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let p = (y / self.page) as u64 * self.pages_x() as u64 + (x / self.page) as u64;
        self.texture_of_page(p)
    }

    /// Levels of the atlas's mip chain: as many as its most finely aligned texture can use
    /// ([`window_levels`]: a texture's rectangle halves cleanly while its corner and size
    /// are even), within the atlas's full chain. Each texture's samples stop at its own.
    pub fn mip_levels(&self) -> u32 {
        let most = self
            .rects
            .iter()
            .map(|r| window_levels(r.x | r.y << 16, r.w | r.h << 16))
            .max()
            .unwrap_or(0);
        tessera_core::MipLayout::full_levels(self.width, self.height).min(most + 1)
    }

    /// The plain atlas object: one RGBA8 texture on the atlas's pages, no mip chain.
    pub fn desc(&self) -> Result<tessera_core::ObjectDesc, QuakeError> {
        use tessera_core::{ObjectDesc, TexelFormat};
        Ok(ObjectDesc::texture(
            self.width,
            self.height,
            TexelFormat::Rgba8Unorm,
            self.page,
        )?)
    }

    /// The mipmapped atlas object: [`Atlas::mip_levels`] levels on the atlas's pages bordered
    /// by `border`, the border clamped at the atlas's edges (a window's sampler wraps within
    /// the window itself, never through a border).
    pub fn mip_desc(&self, border: u32) -> Result<tessera_core::ObjectDesc, QuakeError> {
        Ok(tessera_core::ObjectDesc::mipmapped(
            self.width,
            self.height,
            tessera_core::TexelFormat::Rgba8Unorm,
            self.page,
            Some(self.mip_levels()),
            border,
            tessera_core::Addressing::Clamp,
        )?)
    }

    /// The chain of the atlas's texels ([`Atlas::texels`]) for `layout`.
    pub fn mip_chain(&self, texels: &[u8], layout: &tessera_core::MipLayout) -> Vec<Vec<u32>> {
        tessera_core::mip::chain_rgba8(layout, tessera_core::mip::bytes_to_words(texels))
    }

    /// The atlas's texels, RGBA8 rows from the lower left (padding transparent black).
    pub fn texels(&self, textures: &[super::TextureImage]) -> Vec<u8> {
        let w = self.width as usize;
        let mut out = vec![0u8; w * self.height as usize * 4];
        for (t, r) in textures.iter().zip(&self.rects) {
            let row = r.w as usize * 4;
            for ty in 0..r.h as usize {
                let dst = ((r.y as usize + ty) * w + r.x as usize) * 4;
                out[dst..dst + row].copy_from_slice(&t.rgba[ty * row..(ty + 1) * row]);
            }
        }
        out
    }
}

/// The finest-to-coarsest levels a texture's window of the atlas halves cleanly through:
/// the trailing zero bits of its corner and size, all at once.
// The raster twin calls it per pixel (its WGSL twin is in raster.wgsl).
#[inline(always)]
pub fn window_levels(rect: u32, size: u32) -> u32 {
    ((rect & 0xffff) | (rect >> 16) | (size & 0xffff) | (size >> 16)).trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_are_page_aligned_and_never_share_a_page() {
        let sizes = [(8, 8), (512, 256), (64, 32), (13, 7), (256, 256), (8, 128)];
        for (page, packing) in [1, 4, 8, 32, 64, 256]
            .into_iter()
            .flat_map(|p| [(p, Packing::Pages), (p, Packing::Levels)])
        {
            let a = Atlas::pack_with(&sizes, page, packing).unwrap();
            let mut seen = vec![None::<usize>; a.page_count() as usize];
            for (t, r) in a.rects.iter().enumerate() {
                assert_eq!((r.w, r.h), sizes[t]);
                assert_eq!((r.x % page, r.y % page), (0, 0));
                assert!(r.x + r.w <= a.width && r.y + r.h <= a.height);
                for y in r.y..r.y + r.h {
                    for x in r.x..r.x + r.w {
                        let p = ((y / page) * a.pages_x() + x / page) as usize;
                        assert!(seen[p].is_none_or(|o| o == t), "page {p} shared");
                        seen[p] = Some(t);
                        assert_eq!(a.texture_at(x, y), Some(t as u32));
                    }
                }
            }
            // An 8x8 texture takes exactly one page at P >= 8, as its own object would.
            if page >= 8 {
                assert_eq!(seen.iter().filter(|s| **s == Some(0)).count(), 1);
            }
        }
    }
}
