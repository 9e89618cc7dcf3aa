//! Border pass (Table 1: 1 texel read): heat source along the bottom row, cold top row.
use tessera_core::ObjectId;
use tessera_runtime::Fault;

use super::{math, BoilingPass, Ctx};
use crate::access::TexelAccess;

pub struct Border(pub Ctx);

impl BoilingPass for Border {
    const NAME: &'static str = "border";
    const WGSL: &'static str = concat!(include_str!("math.wgsl"), include_str!("border.wgsl"));
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn output(&self) -> ObjectId {
        self.0.tex.border
    }
    fn reads(&self) -> Vec<(ObjectId, u32)> {
        vec![(self.0.tex.field, 0)]
    }
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let centre = a.load_f32(c.tex.field, x, y)?;
        a.store_f32(
            c.tex.border,
            x,
            y,
            math::border(&c.params, x, y, c.height, centre),
        )
    }
}
