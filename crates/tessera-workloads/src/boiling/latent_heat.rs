//! Latent-heat pass (Table 1: 9 texels read): the 3×3 of the frame input (the border
//! output) and the 5-point stencil of the buoyancy output. Writes the next frame's input.
use tessera_runtime::Fault;

use super::math;
use crate::access::TexelAccess;

boiling_pass!(
    LatentHeat,
    "latent_heat",
    writes field,
    reads [(border, 1), (buoyancy, 1)],
    #[inline]
    fn texel<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let c = &self.0;
        let mut input = [0.0f32; 9];
        for (i, t) in input.iter_mut().enumerate() {
            *t = c.at(
                a,
                c.tex.border,
                x,
                y,
                (i % 3) as i64 - 1,
                (i / 3) as i64 - 1,
            )?;
        }
        let [b_c, b_n, b_s, b_e, b_w] = c.five_point(a, c.tex.buoyancy, x, y)?;
        let t = math::latent_heat(&c.params, input, b_c, b_n, b_s, b_e, b_w);
        a.store_f32(c.tex.field, x, y, t)
    }
);
