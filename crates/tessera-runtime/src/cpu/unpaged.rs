//! Plain access: kernel bodies over rectangles of plain, row-major words, with no translation.
//! The CPU twin of `shader/unpaged.wgsl` in tessera-wgpu. It serves twice: the CPU backend's
//! tile path runs a tile over windows copied from resident pages, and the unpaged original of
//! `tessera bench overhead` runs whole objects.
//!
//! An access outside the rectangles is `Err(Fault::Miss)`: on the tile path that sends the
//! tile back to the per-texel path, which is exact; the unpaged runs stay inside their arrays.

use tessera_core::{ObjectId, TexelFormat};

use crate::contract::{Fault, TexelAccess};

/// A rectangle of an object's texels, one 32-bit word each, row-major: texel (x, y) is
/// `data[(y - y0) * w + (x - x0)]`.
#[derive(Clone, Copy, Debug)]
pub struct PlainInput<'a> {
    pub id: ObjectId,
    pub x0: u32,
    pub y0: u32,
    pub w: u32,
    pub h: u32,
    pub data: &'a [u32],
}

impl PlainInput<'_> {
    #[inline(always)]
    fn get(&self, x: u32, y: u32) -> Option<u32> {
        let (dx, dy) = (x.wrapping_sub(self.x0), y.wrapping_sub(self.y0));
        if dx < self.w && dy < self.h {
            self.data
                .get(dy as usize * self.w as usize + dx as usize)
                .copied()
        } else {
            None
        }
    }
}

/// The rectangle an invocation group writes, with a mask of the texels it wrote.
#[derive(Debug)]
pub struct PlainOutput<'a> {
    pub id: ObjectId,
    pub format: TexelFormat,
    pub x0: u32,
    pub y0: u32,
    pub w: u32,
    pub h: u32,
    pub data: &'a mut [u32],
    /// One byte per texel, set when it is stored; `None` where every texel is written and
    /// nobody asks which (the unpaged runs).
    pub written: Option<&'a mut [u8]>,
}

/// Plain access for one group of invocations: input rectangles and one output rectangle.
#[derive(Debug)]
pub struct Plain<'a> {
    pub inputs: &'a [PlainInput<'a>],
    pub output: PlainOutput<'a>,
}

impl Plain<'_> {
    #[inline(always)]
    fn store(&mut self, id: ObjectId, x: u32, y: u32, v: u32) -> Result<(), Fault> {
        let o = &mut self.output;
        let (dx, dy) = (x.wrapping_sub(o.x0), y.wrapping_sub(o.y0));
        if id != o.id || dx >= o.w || dy >= o.h {
            return Err(Fault::Miss);
        }
        let i = dy as usize * o.w as usize + dx as usize;
        if let Some(m) = o.written.as_deref_mut() {
            // A second store to one texel is left to the per-texel path, which counts an
            // invocation's stores against the limit both backends share.
            match m.get_mut(i) {
                Some(b) if *b == 0 => *b = 1,
                _ => return Err(Fault::Miss),
            }
        }
        match o.data.get_mut(i) {
            Some(t) => *t = v,
            None => return Err(Fault::Miss),
        }
        Ok(())
    }
}

impl TexelAccess for Plain<'_> {
    #[inline(always)]
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        for i in self.inputs {
            if i.id == id {
                return i.get(x, y).map(f32::from_bits).ok_or(Fault::Miss);
            }
        }
        Err(Fault::Miss)
    }

    #[inline(always)]
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        self.store(id, x, y, v.to_bits())
    }

    #[inline(always)]
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        // The per-texel path checks the format and reports a misuse precisely.
        if self.output.format != TexelFormat::Rgba8Unorm {
            return Err(Fault::Miss);
        }
        self.store(id, x, y, u32::from_le_bytes(v))
    }
}
