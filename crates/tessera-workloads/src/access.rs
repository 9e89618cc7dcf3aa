//! The texel access a kernel body is written against: paged (the runtime's translation API)
//! or plain (an unpaged array, for the reference runs and the overhead benchmark). Writing a
//! kernel body once, generic over this trait, is what makes "paged vs unpaged" measure the
//! paging and nothing else.

use tessera_core::ObjectId;
use tessera_runtime::{Fault, Invocation};

pub trait TexelAccess {
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault>;
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault>;
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault>;
}

impl TexelAccess for Invocation<'_> {
    #[inline(always)]
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        Invocation::load_f32(self, id, x, y)
    }
    #[inline(always)]
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        Invocation::store_f32(self, id, x, y, v)
    }
    #[inline(always)]
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        Invocation::store_rgba8(self, id, x, y, v)
    }
}

/// Unpaged access for one task: plain input arrays, and a band of output rows it owns.
pub struct Plain<'a> {
    pub width: u32,
    pub inputs: &'a [(ObjectId, &'a [f32])],
    pub output: ObjectId,
    /// First row of `out_f32` / `out_rgba8`.
    pub y0: u32,
    pub out_f32: &'a mut [f32],
    pub out_rgba8: &'a mut [[u8; 4]],
}

impl TexelAccess for Plain<'_> {
    #[inline]
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        let (_, a) = self
            .inputs
            .iter()
            .find(|(i, _)| *i == id)
            .ok_or(Fault::Miss)?;
        a.get(y as usize * self.width as usize + x as usize)
            .copied()
            .ok_or(Fault::Miss)
    }
    #[inline]
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        let i = (y - self.y0) as usize * self.width as usize + x as usize;
        match self.out_f32.get_mut(i) {
            Some(t) if id == self.output => {
                *t = v;
                Ok(())
            }
            _ => Err(Fault::Miss),
        }
    }
    #[inline]
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        let i = (y - self.y0) as usize * self.width as usize + x as usize;
        match self.out_rgba8.get_mut(i) {
            Some(t) if id == self.output => {
                *t = v;
                Ok(())
            }
            _ => Err(Fault::Miss),
        }
    }
}
