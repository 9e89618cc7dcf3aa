//! What kernel bodies are written against. Texel access lives in the runtime's kernel contract
//! ([`tessera_runtime::TexelAccess`]), re-exported here for the workloads' kernels;
//! [`BufferAccess`] is what the game trace's rasterizer and the ray tracer add to it.
pub use tessera_runtime::{Plain, PlainInput, PlainOutput, TexelAccess};

use tessera_core::{ObjectId, Sampler, Window};
use tessera_runtime::{Fault, Invocation};

/// What the rasterizer's and the ray tracer's bodies read and write through: paged
/// ([`Invocation`]) or plain arrays (their references and tests). The runtime's
/// `TexelAccess` has no buffer loads, hence this trait.
pub trait BufferAccess {
    fn load_u32(&mut self, id: ObjectId, index: u32) -> Result<u32, Fault>;
    fn load_rgba8(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault>;
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault>;
    /// A sample of `window` of a mipmapped atlas (`Invocation::sample_rgba8_window`), at
    /// texture coordinates and level of detail `uvl`.
    fn sample_window(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        uvl: (f32, f32, f32),
    ) -> Result<[u8; 4], Fault>;
}

impl BufferAccess for Invocation<'_> {
    #[inline(always)]
    fn load_u32(&mut self, id: ObjectId, index: u32) -> Result<u32, Fault> {
        Invocation::load_u32(self, id, index)
    }
    #[inline(always)]
    fn load_rgba8(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault> {
        Invocation::load_rgba8(self, id, x, y)
    }
    #[inline(always)]
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        Invocation::store_rgba8(self, id, x, y, v)
    }
    #[inline(always)]
    fn sample_window(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        (u, v, lod): (f32, f32, f32),
    ) -> Result<[u8; 4], Fault> {
        Invocation::sample_rgba8_window(self, id, sampler, window, u, v, lod)
    }
}
