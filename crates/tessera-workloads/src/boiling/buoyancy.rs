//! Buoyancy pass (Table 1: 3 texels read): centre, above and below of the diffusion output.
use tessera_core::ObjectId;
use tessera_runtime::Fault;

use super::{math, BoilingPass, Ctx};
use crate::access::TexelAccess;

pub struct Buoyancy(pub Ctx);

impl BoilingPass for Buoyancy {
    const NAME: &'static str = "buoyancy";
    const WGSL: &'static str = concat!(include_str!("math.wgsl"), include_str!("buoyancy.wgsl"));
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn output(&self) -> ObjectId {
        self.0.tex.buoyancy
    }
    fn reads(&self) -> Vec<(ObjectId, u32)> {
        vec![(self.0.tex.diffusion, 1)]
    }
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let i = c.tex.diffusion;
        let centre = c.at(a, i, x, y, 0, 0)?;
        let above = c.at(a, i, x, y, 0, 1)?;
        let below = c.at(a, i, x, y, 0, -1)?;
        a.store_f32(
            c.tex.buoyancy,
            x,
            y,
            math::buoyancy(&c.params, centre, above, below),
        )
    }
}
