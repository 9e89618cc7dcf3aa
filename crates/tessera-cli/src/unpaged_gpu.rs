//! Boiling on [`UnpagedGpu`]: the unpaged original of `bench overhead --backend wgpu`.
//!
//! The same five WGSL kernel bodies as the paged wgpu run, in the same order, on plain arrays
//! (ids 0..4, as `UnpagedBoiling` numbers them); the field starts as the reference's does.

use anyhow::Result;
use tessera_wgpu::{AdapterChoice, UnpagedGpu};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::ReferenceBoiling;
use tessera_workloads::boiling::{frame_kernels, Ctx, Textures};

pub struct GpuBoiling {
    pub gpu: UnpagedGpu,
    ctx: Ctx,
}

impl GpuBoiling {
    pub fn new(choice: &AdapterChoice, size: u32, params: BoilingParams) -> Result<Self> {
        let tex = Textures::NUMBERED;
        let objects: Vec<_> = tex
            .formats()
            .iter()
            .map(|&(id, f)| (id, size, size, f))
            .collect();
        let mut gpu = UnpagedGpu::new(choice, &objects)?;
        let field = ReferenceBoiling::new(size, size, params).field;
        let bytes: Vec<u8> = field.iter().flat_map(|v| v.to_le_bytes()).collect();
        gpu.write_object(tex.field, &bytes)?;
        let ctx = Ctx {
            tex,
            width: size,
            height: size,
            params,
        };
        Ok(GpuBoiling { gpu, ctx })
    }

    /// One frame, waiting for the GPU to finish it.
    pub fn frame(&mut self) -> Result<()> {
        let size = (self.ctx.width, self.ctx.height);
        for k in frame_kernels(self.ctx) {
            self.gpu.run(&*k, size)?;
        }
        Ok(self.gpu.finish()?)
    }

    /// The field after the frames run so far: `--verify`'s reference on wgpu.
    pub fn field(&mut self) -> Result<Vec<f32>> {
        let bytes = self.gpu.read_object(self.ctx.tex.field)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }
}
