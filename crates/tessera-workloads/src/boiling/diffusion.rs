//! Diffusion pass (Table 1: 5 texels read): centre and 4 neighbours of the border output.
use tessera_runtime::Fault;

use super::math;
use crate::access::TexelAccess;

boiling_pass!(
    Diffusion,
    "diffusion",
    writes diffusion,
    reads [(border, 1)],
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let [centre, n, s, e, w] = c.five_point(a, c.tex.border, x, y)?;
        a.store_f32(
            c.tex.diffusion,
            x,
            y,
            math::diffusion(&c.params, centre, n, s, e, w),
        )
    }
);
