//! Buoyancy pass (Table 1: 3 texels read): centre, above and below of the diffusion output.
use tessera_runtime::Fault;

use super::math;
use crate::access::TexelAccess;

boiling_pass!(
    Buoyancy,
    "buoyancy",
    writes buoyancy,
    reads [(diffusion, 1)],
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
);
