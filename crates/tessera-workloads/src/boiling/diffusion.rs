//! Diffusion pass (Table 1: 5 texels read): centre and 4 neighbours of the border output.
use tessera_core::ObjectId;
use tessera_runtime::Fault;

use super::{math, BoilingPass, Ctx};
use crate::access::TexelAccess;

pub struct Diffusion(pub Ctx);

impl BoilingPass for Diffusion {
    const NAME: &'static str = "diffusion";
    const WGSL: &'static str = concat!(include_str!("math.wgsl"), include_str!("diffusion.wgsl"));
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn output(&self) -> ObjectId {
        self.0.tex.diffusion
    }
    fn reads(&self) -> Vec<(ObjectId, u32)> {
        vec![(self.0.tex.border, 1)]
    }
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let i = c.tex.border;
        let centre = c.at(a, i, x, y, 0, 0)?;
        let n = c.at(a, i, x, y, 0, 1)?;
        let s = c.at(a, i, x, y, 0, -1)?;
        let e = c.at(a, i, x, y, 1, 0)?;
        let w = c.at(a, i, x, y, -1, 0)?;
        a.store_f32(
            c.tex.diffusion,
            x,
            y,
            math::diffusion(&c.params, centre, n, s, e, w),
        )
    }
}
