//! Border pass (Table 1: 1 texel read): heat source along the bottom row, cold top row.
use tessera_runtime::Fault;

use super::math;
use crate::access::TexelAccess;

boiling_pass!(
    Border,
    "border",
    writes border,
    reads [(field, 0)],
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
);
