//! Display pass: the field through the colour map into an RGBA8 image.
use tessera_core::ObjectId;
use tessera_runtime::Fault;

use super::{math, BoilingPass, Ctx};
use crate::access::TexelAccess;

pub struct Display(pub Ctx);

impl BoilingPass for Display {
    const NAME: &'static str = "display";
    const WGSL: &'static str = concat!(include_str!("math.wgsl"), include_str!("display.wgsl"));
    fn ctx(&self) -> &Ctx {
        &self.0
    }
    fn output(&self) -> ObjectId {
        self.0.tex.display
    }
    fn reads(&self) -> Vec<(ObjectId, u32)> {
        vec![(self.0.tex.field, 0)]
    }
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let t = a.load_f32(c.tex.field, x, y)?;
        a.store_rgba8(c.tex.display, x, y, math::display(&c.params, t))
    }
}
