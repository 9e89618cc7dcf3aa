//! Objects, pages and the address formulas of paper 3.3 (thesis eqs. 3.1–3.7).
//!
//! Texture pages are P×P texel tiles numbered row-major from the lower left; pages on the right
//! and top edges may be partial (their unused texels are never read or written). Buffer pages
//! are fixed byte ranges.

use crate::error::{CoreError, Result};

/// The widest side of a mipmapped texture: the samplers scale a coordinate by a level's side
/// in 32-bit fixed point (`sampler`).
pub const MAX_SAMPLED_SIDE: u32 = 1 << 15;

/// Largest object, in texels (or bytes for buffers): keeps every page count and texel address
/// comfortably inside `u64` and every per-object page count inside `u32`.
pub const MAX_OBJECT_TEXELS: u64 = 1 << 32;

/// Texel formats a texture can hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum TexelFormat {
    R32Float,
    Rgba8Unorm,
    Rgba32Float,
}

impl TexelFormat {
    pub const fn bytes(self) -> u32 {
        match self {
            TexelFormat::R32Float | TexelFormat::Rgba8Unorm => 4,
            TexelFormat::Rgba32Float => 16,
        }
    }
}

/// The side P of a square texture page: a power of two from 1 to 512.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct PageSize(u32);

impl PageSize {
    pub const MAX: u32 = 512;

    pub fn new(p: u32) -> Result<Self> {
        if p == 0 || p > Self::MAX || !p.is_power_of_two() {
            return Err(CoreError::BadPageSize(p));
        }
        Ok(PageSize(p))
    }
    pub const fn get(self) -> u32 {
        self.0
    }
    /// log2(P): divisions and remainders by P become shifts and masks on the hot path.
    pub const fn shift(self) -> u32 {
        self.0.trailing_zeros()
    }
    pub const fn texels(self) -> u64 {
        (self.0 as u64) * (self.0 as u64)
    }
}

/// What an object is: its shape and how it is cut into pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ObjectDesc {
    Texture {
        width: u32,
        height: u32,
        format: TexelFormat,
        page: PageSize,
    },
    Buffer {
        len: u64,
        page_bytes: u64,
    },
    /// A texture with its mip chain, every level paged as `layout` says (`crate::mip`), its
    /// pages bordered by `layout.border()` texels copied under `addressing`, which is also how
    /// the samplers address it. To the rest of the runtime it is a row of opaque slot-sized
    /// pages: its host layout is its slots back to back, in page order (`crate::mip::slots`
    /// builds them from a chain), so paging, copies and the directory need nothing new.
    Mipmapped {
        layout: crate::MipLayout,
        format: TexelFormat,
        addressing: crate::Addressing,
    },
}

impl ObjectDesc {
    /// A validated texture description.
    pub fn texture(width: u32, height: u32, format: TexelFormat, page: u32) -> Result<Self> {
        let page = PageSize::new(page)?;
        if width == 0 || height == 0 {
            return Err(CoreError::ZeroSized {
                width: width as u64,
                height: height as u64,
            });
        }
        let texels = width as u64 * height as u64;
        if texels > MAX_OBJECT_TEXELS {
            return Err(CoreError::Oversized {
                texels,
                limit: MAX_OBJECT_TEXELS,
            });
        }
        Ok(ObjectDesc::Texture {
            width,
            height,
            format,
            page,
        })
    }

    /// A validated buffer description: `len` bytes cut into pages of `page_bytes`.
    pub fn buffer(len: u64, page_bytes: u64) -> Result<Self> {
        if !(4..=1 << 20).contains(&page_bytes) || !page_bytes.is_power_of_two() {
            return Err(CoreError::BadBufferPageSize(page_bytes));
        }
        if len == 0 {
            return Err(CoreError::EmptyBuffer);
        }
        if len > MAX_OBJECT_TEXELS {
            return Err(CoreError::BufferOversized {
                bytes: len,
                limit: MAX_OBJECT_TEXELS,
            });
        }
        // Kernels address a buffer by 32-bit word: a tail of fewer bytes could be written by
        // the host and read back, but no kernel could reach it.
        if !len.is_multiple_of(4) {
            return Err(CoreError::BufferNotWords(len));
        }
        Ok(ObjectDesc::Buffer { len, page_bytes })
    }

    /// A validated mipmapped texture: `levels` levels (`None`: the full chain) on pages of
    /// `page` texels bordered by `border`, addressed (borders and samplers) by `addressing`.
    pub fn mipmapped(
        width: u32,
        height: u32,
        format: TexelFormat,
        page: u32,
        levels: Option<u32>,
        border: u32,
        addressing: crate::Addressing,
    ) -> Result<Self> {
        let layout = Self::texture(width, height, format, page)?.mip_layout(levels, border)?;
        if format != TexelFormat::Rgba8Unorm {
            return Err(CoreError::MipFormat {
                format: match format {
                    TexelFormat::R32Float => "R32Float",
                    TexelFormat::Rgba32Float => "Rgba32Float",
                    TexelFormat::Rgba8Unorm => "Rgba8Unorm",
                },
            });
        }
        if width.max(height) > MAX_SAMPLED_SIDE {
            return Err(CoreError::MipTooWide {
                width,
                height,
                limit: MAX_SAMPLED_SIDE,
            });
        }
        let texels = layout.page_count() * layout.slot_texels();
        if texels > MAX_OBJECT_TEXELS {
            return Err(CoreError::Oversized {
                texels,
                limit: MAX_OBJECT_TEXELS,
            });
        }
        Ok(ObjectDesc::Mipmapped {
            layout,
            format,
            addressing,
        })
    }

    /// Holds a description however it was made to what its constructor checks: the variants
    /// are public, so a description built by hand skips [`ObjectDesc::texture`],
    /// [`ObjectDesc::buffer`] and [`ObjectDesc::mipmapped`]. The address space checks every
    /// object it creates so (a buffer of pages of 0 bytes had divided by zero on the memory
    /// manager's thread, which ended the system).
    pub fn validate(&self) -> Result<()> {
        let remade = match *self {
            ObjectDesc::Texture {
                width,
                height,
                format,
                page,
            } => Self::texture(width, height, format, page.get())?,
            ObjectDesc::Buffer { len, page_bytes } => Self::buffer(len, page_bytes)?,
            ObjectDesc::Mipmapped {
                layout,
                format,
                addressing,
            } => {
                // `MipLayout::new` took level 0's sides as `u32`s, and its fields are private.
                let (w, h) = layout.extent(0)?;
                Self::mipmapped(
                    w as u32,
                    h as u32,
                    format,
                    layout.page().get(),
                    Some(layout.levels()),
                    layout.border(),
                    addressing,
                )?
            }
        };
        debug_assert_eq!(&remade, self);
        Ok(())
    }

    /// The chain's layout and addressing of a mipmapped texture; `None` for other objects.
    pub fn mip(&self) -> Option<(crate::MipLayout, crate::Addressing)> {
        match *self {
            ObjectDesc::Mipmapped {
                layout, addressing, ..
            } => Some((layout, addressing)),
            _ => None,
        }
    }

    /// The layout of this texture with `levels` mip levels (`None`: the full chain) and pages
    /// bordered by `border` texels (`crate::mip`); a buffer has none.
    pub fn mip_layout(&self, levels: Option<u32>, border: u32) -> Result<crate::MipLayout> {
        match *self {
            ObjectDesc::Texture {
                width,
                height,
                page,
                ..
            } => crate::MipLayout::new(width, height, page.get(), levels, border),
            ObjectDesc::Buffer { .. } => Err(CoreError::MipsOnBuffer),
            ObjectDesc::Mipmapped { layout, .. } => Ok(layout),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            ObjectDesc::Texture { .. } => "texture",
            ObjectDesc::Buffer { .. } => "buffer",
            ObjectDesc::Mipmapped { .. } => "mipmapped texture",
        }
    }

    /// Pages across and up: ceil(W/P) and ceil(H/P). A buffer is one row of pages.
    pub fn pages_xy(&self) -> (u64, u64) {
        match *self {
            ObjectDesc::Texture {
                width,
                height,
                page,
                ..
            } => (
                (width as u64).div_ceil(page.get() as u64),
                (height as u64).div_ceil(page.get() as u64),
            ),
            ObjectDesc::Buffer { len, page_bytes } => (len.div_ceil(page_bytes), 1),
            ObjectDesc::Mipmapped { layout, .. } => (layout.page_count(), 1),
        }
    }

    /// Number of pages the object occupies in the global address space.
    pub fn page_count(&self) -> u64 {
        let (x, y) = self.pages_xy();
        x * y
    }

    /// Bytes one page takes in a physical memory slot (partial pages take a whole slot).
    pub fn page_bytes(&self) -> u64 {
        match *self {
            ObjectDesc::Texture { format, page, .. } => page.texels() * format.bytes() as u64,
            ObjectDesc::Buffer { page_bytes, .. } => page_bytes,
            ObjectDesc::Mipmapped { layout, format, .. } => {
                layout.slot_texels() * format.bytes() as u64
            }
        }
    }

    /// (width, height) in texels; a buffer is `len` × 1 bytes; a mipmapped texture is its
    /// slots' texels in one row.
    pub fn extent(&self) -> (u64, u64) {
        match *self {
            ObjectDesc::Texture { width, height, .. } => (width as u64, height as u64),
            ObjectDesc::Buffer { len, .. } => (len, 1),
            ObjectDesc::Mipmapped { layout, .. } => (layout.page_count() * layout.slot_texels(), 1),
        }
    }

    /// Local-to-texture page address, paper eq. 1 / thesis eq. 3.1:
    /// `floor(S/P) + floor(T/P) * ceil(W/P)`. For a buffer, `floor(offset / page_bytes)`.
    /// The caller has checked that (s, t) is inside the object.
    #[inline]
    pub fn local_page(&self, s: u64, t: u64) -> u64 {
        match *self {
            ObjectDesc::Texture { width, page, .. } => {
                let sh = page.shift();
                let pages_x = (width as u64 + page.get() as u64 - 1) >> sh;
                (s >> sh) + (t >> sh) * pages_x
            }
            ObjectDesc::Buffer { page_bytes, .. } => s / page_bytes,
            ObjectDesc::Mipmapped { layout, .. } => s / layout.slot_texels(),
        }
    }

    /// Texel offset inside its page, thesis eqs. 3.2–3.3: `(S mod P, T mod P)`.
    #[inline]
    pub fn texel_offset(&self, s: u64, t: u64) -> (u64, u64) {
        match *self {
            ObjectDesc::Texture { page, .. } => {
                let m = page.get() as u64 - 1;
                (s & m, t & m)
            }
            ObjectDesc::Buffer { page_bytes, .. } => (s % page_bytes, 0),
            ObjectDesc::Mipmapped { layout, .. } => (s % layout.slot_texels(), 0),
        }
    }

    /// Checks (s, t) against the object's extent.
    pub fn check(&self, object: crate::ObjectId, s: u64, t: u64) -> Result<()> {
        let (w, h) = self.extent();
        if s >= w || t >= h {
            return Err(CoreError::OutOfRange {
                object,
                x: s,
                y: t,
                width: w,
                height: h,
                buffer: matches!(self, ObjectDesc::Buffer { .. }),
            });
        }
        Ok(())
    }

    /// The texels a local page covers: lower-left corner and (width, height), clipped at the
    /// right and top edges.
    pub fn page_rect(&self, local_page: u64) -> (u64, u64, u64, u64) {
        let (pages_x, _) = self.pages_xy();
        let (w, h) = self.extent();
        let (px, py) = (local_page % pages_x, local_page / pages_x);
        let (pw, ph) = match *self {
            ObjectDesc::Texture { page, .. } => (page.get() as u64, page.get() as u64),
            ObjectDesc::Buffer { page_bytes, .. } => (page_bytes, 1),
            ObjectDesc::Mipmapped { layout, .. } => (layout.slot_texels(), 1),
        };
        let (x0, y0) = (px * pw, py * ph);
        (x0, y0, pw.min(w - x0), ph.min(h - y0))
    }

    /// Side of a page in texels (P), or bytes for a buffer page.
    pub fn page_side(&self) -> u64 {
        match *self {
            ObjectDesc::Texture { page, .. } => page.get() as u64,
            ObjectDesc::Buffer { page_bytes, .. } => page_bytes,
            ObjectDesc::Mipmapped { layout, .. } => layout.slot_texels(),
        }
    }

    /// Texels one slot holds: P×P for a texture, `page_bytes` for a buffer.
    pub fn slot_texels(&self) -> u64 {
        match *self {
            ObjectDesc::Texture { page, .. } => page.texels(),
            ObjectDesc::Buffer { page_bytes, .. } => page_bytes,
            ObjectDesc::Mipmapped { layout, .. } => layout.slot_texels(),
        }
    }

    /// Texel address inside a physical memory, thesis eq. 3.6: the page's physical address
    /// (its slot, holding the page's texels row-major from the lower left) plus the texel offset.
    #[inline]
    pub fn texel_address(&self, slot: u32, offset: (u64, u64)) -> u64 {
        slot as u64 * self.slot_texels() + offset.1 * self.page_side() + offset.0
    }

    /// Bytes per texel (1 for buffers).
    pub fn texel_bytes(&self) -> u64 {
        match *self {
            ObjectDesc::Texture { format, .. } | ObjectDesc::Mipmapped { format, .. } => {
                format.bytes() as u64
            }
            ObjectDesc::Buffer { .. } => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_bounds() {
        for p in [1, 2, 4, 64, 512] {
            assert!(PageSize::new(p).is_ok());
        }
        for p in [0, 3, 6, 1024, 513] {
            assert_eq!(PageSize::new(p), Err(CoreError::BadPageSize(p)));
        }
    }

    #[test]
    fn bad_objects_are_typed_errors() {
        use crate::DeviceId;
        assert_eq!(
            ObjectDesc::texture(0, 5, TexelFormat::R32Float, 4),
            Err(CoreError::ZeroSized {
                width: 0,
                height: 5
            })
        );
        assert!(matches!(
            ObjectDesc::texture(1 << 17, 1 << 16, TexelFormat::R32Float, 4),
            Err(CoreError::Oversized { texels, .. }) if texels == 1 << 33
        ));
        assert_eq!(
            ObjectDesc::texture(8, 8, TexelFormat::R32Float, 12),
            Err(CoreError::BadPageSize(12))
        );
        assert!(matches!(
            ObjectDesc::buffer(0, 64),
            Err(CoreError::EmptyBuffer)
        ));
        assert_eq!(
            ObjectDesc::buffer(1 << 40, 64).unwrap_err().to_string(),
            "a buffer of 1099511627776 bytes is larger than the limit of 4294967296 bytes"
        );
        assert_eq!(
            ObjectDesc::buffer(64, 6),
            Err(CoreError::BadBufferPageSize(6))
        );
        let d = ObjectDesc::texture(8, 4, TexelFormat::R32Float, 4).unwrap();
        assert!(matches!(
            d.check(crate::ObjectId(3), 8, 0),
            Err(CoreError::OutOfRange { x: 8, .. })
        ));
        assert!(d.check(crate::ObjectId(3), 7, 3).is_ok());
        assert_eq!(DeviceId::new(63), Ok(DeviceId(63)));
        assert_eq!(DeviceId::new(64), Err(CoreError::TooManyDevices(65)));
    }

    #[test]
    fn paper_figure4_numbering() {
        // Fig. 4: a texture of 4×4 pages; page 0x07 is the last page of the second row.
        let d = ObjectDesc::texture(64, 64, TexelFormat::R32Float, 16).unwrap();
        assert_eq!(d.local_page(63, 16), 7);
        assert_eq!(d.local_page(0, 0), 0);
        assert_eq!(d.local_page(63, 63), 15);
    }

    #[test]
    fn partial_pages_on_right_and_top() {
        let d = ObjectDesc::texture(10, 5, TexelFormat::Rgba8Unorm, 4).unwrap();
        assert_eq!(d.pages_xy(), (3, 2));
        assert_eq!(d.page_rect(2), (8, 0, 2, 4));
        assert_eq!(d.page_rect(5), (8, 4, 2, 1));
    }
}
