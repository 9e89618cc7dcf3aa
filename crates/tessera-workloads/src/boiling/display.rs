//! Display pass: the field through the colour map into an RGBA8 image.
use tessera_runtime::Fault;

use super::math;
use crate::access::TexelAccess;

boiling_pass!(
    Display,
    "display",
    writes display,
    reads [(field, 0)],
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let t = a.load_f32(c.tex.field, x, y)?;
        a.store_rgba8(c.tex.display, x, y, math::display(&c.params, t))
    }
);
