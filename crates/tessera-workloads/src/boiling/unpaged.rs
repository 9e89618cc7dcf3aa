//! The boiling kernels run unpaged: the same kernel bodies as the paged run, on plain arrays,
//! on the same number of threads. This is the "unpaged original" the overhead benchmark
//! compares against, so the ratio measures paging and nothing else.

use rayon::prelude::*;
use tessera_core::ObjectId;

use super::border::Border;
use super::buoyancy::Buoyancy;
use super::diffusion::Diffusion;
use super::display::Display;
use super::latent_heat::LatentHeat;
use super::math::{initial_value, BoilingParams};
use super::{BoilingPass, Ctx, Textures};
use crate::access::Plain;

const ROWS_PER_TASK: usize = 4;

pub struct UnpagedBoiling {
    pub ctx: Ctx,
    /// Field, border, diffusion, buoyancy, indexed like `Textures` ids 0..4.
    fields: [Vec<f32>; 4],
    pub display: Vec<[u8; 4]>,
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
            .map(|(x, y)| initial_value(&params, x, y, width, height))
            .collect();
        Ok(UnpagedBoiling {
            ctx: Ctx {
                tex: Textures::NUMBERED,
                width,
                height,
                params,
            },
            fields: [field, vec![0.0; n], vec![0.0; n], vec![0.0; n]],
            display: vec![[0; 4]; n],
            pool,
        })
    }

    pub fn field(&self) -> &[f32] {
        &self.fields[0]
    }

    fn run<P: BoilingPass>(&mut self, pass: P) {
        let w = self.ctx.width as usize;
        let out = pass.output().0 as usize;
        let mut target = if out < 4 {
            std::mem::take(&mut self.fields[out])
        } else {
            Vec::new()
        };
        let mut display = std::mem::take(&mut self.display);
        let inputs: Vec<(ObjectId, &[f32])> = (0..4)
            .filter(|&i| i != out)
            .map(|i| (ObjectId(i as u32), &self.fields[i][..]))
            .collect();
        let chunk = w * ROWS_PER_TASK;
        self.pool.install(|| {
            let run_band = |band: usize, out_f32: &mut [f32], out_rgba8: &mut [[u8; 4]]| {
                let y0 = band * ROWS_PER_TASK;
                let rows = (out_f32.len().max(out_rgba8.len())) / w;
                let mut a = Plain {
                    width: w as u32,
                    inputs: &inputs,
                    output: pass.output(),
                    y0: y0 as u32,
                    out_f32,
                    out_rgba8,
                };
                for y in y0..y0 + rows {
                    for x in 0..w {
                        // Plain access cannot miss on in-range texels; the kernels stay in range.
                        let _ = pass.texel(&mut a, x as u32, y as u32);
                    }
                }
            };
            if out < 4 {
                target
                    .par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(b, o)| run_band(b, o, &mut []));
            } else {
                display
                    .par_chunks_mut(chunk)
                    .enumerate()
                    .for_each(|(b, o)| run_band(b, &mut [], o));
            }
        });
        self.display = display;
        if out < 4 {
            self.fields[out] = target;
        }
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
