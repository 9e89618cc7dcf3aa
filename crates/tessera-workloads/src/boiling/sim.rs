//! The boiling simulation run paged on a tessera node.

use std::sync::Arc;

use tessera_core::{ObjectDesc, ObjectEntry, TexelFormat};
use tessera_runtime::{
    Bound, Partition, PassSpec, PassStats, Procedure, Result, RuntimeError, System,
};

use super::border::Border;
use super::buoyancy::Buoyancy;
use super::diffusion::Diffusion;
use super::display::Display;
use super::latent_heat::LatentHeat;
use super::math::{initial_value, BoilingParams};
use super::{BoilingPass, Ctx, Paged, Textures};

/// A boiling simulation whose textures live in a node's distributed texture memory.
pub struct PagedBoiling {
    pub sys: System,
    pub ctx: Ctx,
    passes: Vec<PassSpec>,
}

fn spec<P: BoilingPass>(p: P, reads: &[&ObjectEntry], display: bool) -> PassSpec {
    let bindings = reads.iter().map(|e| Bound::new(e)).collect();
    PassSpec {
        display,
        ..PassSpec::new(Arc::new(Paged(p)), Arc::new(bindings), 0, 0)
    }
}

impl PagedBoiling {
    /// Creates the textures (the field initialised as the reference does) on `sys`.
    pub fn new(
        sys: System,
        width: u32,
        height: u32,
        page: u32,
        params: BoilingParams,
    ) -> Result<Self> {
        tessera_core::PageSize::new(page)?;
        if page > width.max(height) {
            return Err(RuntimeError::Config(format!(
                "page size {page} is larger than the {width}x{height} texture"
            )));
        }
        let f32_tex = ObjectDesc::texture(width, height, TexelFormat::R32Float, page)?;
        let init: Vec<u8> = (0..height)
            .flat_map(|y| (0..width).map(move |x| (x, y)))
            .flat_map(|(x, y)| initial_value(&params, x, y, width, height).to_le_bytes())
            .collect();
        let field = sys.create(f32_tex, Some(init))?;
        let border = sys.create(f32_tex, None)?;
        let diffusion = sys.create(f32_tex, None)?;
        let buoyancy = sys.create(f32_tex, None)?;
        let display = sys.create(
            ObjectDesc::texture(width, height, TexelFormat::Rgba8Unorm, page)?,
            None,
        )?;
        let ctx = Ctx {
            tex: Textures {
                field: field.id,
                border: border.id,
                diffusion: diffusion.id,
                buoyancy: buoyancy.id,
                display: display.id,
            },
            width,
            height,
            params,
        };
        let passes = vec![
            spec(Border(ctx), &[&field, &border], false),
            spec(Diffusion(ctx), &[&border, &diffusion], false),
            spec(Buoyancy(ctx), &[&diffusion, &buoyancy], false),
            spec(LatentHeat(ctx), &[&border, &buoyancy, &field], false),
            spec(Display(ctx), &[&field, &display], true),
        ];
        Ok(PagedBoiling { sys, ctx, passes })
    }

    /// A frame's passes in order, for callers that run them one by one (the evaluation
    /// measures traffic per pass to model it on a topology).
    pub fn passes(&self) -> &[PassSpec] {
        &self.passes
    }

    /// One frame: four render-to-texture passes and the display pass, each a barrier.
    /// Returns each device's stats summed over the passes.
    pub fn frame(&self, partition: Partition, procedure: Procedure) -> Result<Vec<PassStats>> {
        let mut total = vec![PassStats::default(); self.sys.devices()];
        for p in &self.passes {
            let per =
                self.sys
                    .run_pass(p, self.ctx.width, self.ctx.height, partition, procedure)?;
            for (t, s) in total.iter_mut().zip(&per) {
                t.add(s);
            }
        }
        // The frame is done when its deferred launches are (`SystemConfig::deferred`).
        for (t, s) in total.iter_mut().zip(&self.sys.settle()?) {
            t.add(s);
        }
        Ok(total)
    }

    /// The heat field (the next frame's input), row-major from the lower left.
    pub fn field(&self) -> Result<Vec<f32>> {
        let bytes = self.sys.mm.read(self.ctx.tex.field)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    }

    /// The last display pass's image, RGBA8 rows from the lower left.
    pub fn display_rgba(&self) -> Result<Vec<u8>> {
        self.sys.mm.read(self.ctx.tex.display)
    }
}
