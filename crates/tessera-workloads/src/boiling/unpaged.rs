//! The boiling kernels run unpaged: the same kernel bodies as the paged run, on plain arrays,
//! on the same number of threads. This is the "unpaged original" the overhead benchmark
//! compares against, so the ratio measures paging and nothing else.

use rayon::prelude::*;
use tessera_core::{ObjectId, TexelFormat};

use super::border::Border;
use super::buoyancy::Buoyancy;
use super::diffusion::Diffusion;
use super::display::Display;
use super::latent_heat::LatentHeat;
use super::math::{initial_value, BoilingParams};
use super::{BoilingPass, Ctx, Textures};
use crate::access::{Plain, PlainInput, PlainOutput};

const ROWS_PER_TASK: usize = 4;

pub struct UnpagedBoiling {
    pub ctx: Ctx,
    /// Every texture as 32-bit words, indexed like `Textures` ids 0..5: the four fields
    /// (R32Float bits), then the display image (Rgba8Unorm, little-endian).
    objects: [Vec<u32>; 5],
    pool: rayon::ThreadPool,
}

impl UnpagedBoiling {
    /// Fails only when the operating system refuses the worker threads.
    pub fn new(
        width: u32,
        height: u32,
        params: BoilingParams,
        threads: usize,
    ) -> Result<Self, rayon::ThreadPoolBuildError> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()?;
        let n = width as usize * height as usize;
        let field = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .map(|(x, y)| initial_value(&params, x, y, width, height).to_bits())
            .collect();
        Ok(UnpagedBoiling {
            ctx: Ctx {
                tex: Textures::NUMBERED,
                width,
                height,
                params,
            },
            objects: [field, vec![0; n], vec![0; n], vec![0; n], vec![0; n]],
            pool,
        })
    }

    /// The frame input field.
    pub fn field(&self) -> Vec<f32> {
        self.objects[0].iter().map(|&w| f32::from_bits(w)).collect()
    }

    /// The display image.
    pub fn display(&self) -> Vec<[u8; 4]> {
        self.objects[4].iter().map(|w| w.to_le_bytes()).collect()
    }

    fn run<P: BoilingPass>(&mut self, pass: P) {
        let (w, h) = (self.ctx.width, self.ctx.height);
        let out = pass.output().0 as usize;
        let format = if out == 4 {
            TexelFormat::Rgba8Unorm
        } else {
            TexelFormat::R32Float
        };
        let mut target = std::mem::take(&mut self.objects[out]);
        let inputs: Vec<PlainInput<'_>> = (0..5)
            .filter(|&i| i != out)
            .map(|i| PlainInput {
                id: ObjectId(i as u32),
                x0: 0,
                y0: 0,
                w,
                h,
                data: &self.objects[i],
            })
            .collect();
        let chunk = w as usize * ROWS_PER_TASK;
        self.pool.install(|| {
            target.par_chunks_mut(chunk).enumerate().for_each(|(b, o)| {
                let y0 = (b * ROWS_PER_TASK) as u32;
                let rows = (o.len() / w as usize) as u32;
                let mut a = Plain {
                    inputs: &inputs,
                    output: PlainOutput {
                        id: pass.output(),
                        format,
                        x0: 0,
                        y0,
                        w,
                        h: rows,
                        data: o,
                        written: None,
                    },
                };
                for y in y0..y0 + rows {
                    for x in 0..w {
                        // Plain access cannot miss on in-range texels; the kernels stay in range.
                        let _ = pass.texel(&mut a, x, y);
                    }
                }
            });
        });
        self.objects[out] = target;
    }
    /// One frame, the same five passes as the paged run.
    pub fn frame(&mut self) {
        let c = self.ctx;
        self.run(Border(c));
        self.run(Diffusion(c));
        self.run(Buoyancy(c));
        self.run(LatentHeat(c));
        self.run(Display(c));
    }
}
