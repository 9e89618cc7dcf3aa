//! The stencil kernel (twin of `stencil.wgsl`): one output cell per invocation.
use tessera_core::ObjectId;
use tessera_runtime::{Fault, Invocation, Kernel, WgslKernel};

use crate::decomp::{Box3, Order};

crate::decomp::box_kernel_params! {
    /// What `stencil.wgsl` reads as `params`: the objects, the grid's size, the objects' box
    /// (origin, extent), the launch order, the radius and the weights.
    pub struct StencilParams {
        pub input: u32,
        pub output: u32,
        pub nx: u32,
        pub ny: u32,
        pub nz: u32,
        ..Box3,
        pub order: u32,
        pub radius: u32,
        pub w0: f32,
        pub wx: f32,
        pub wy: f32,
        pub wz: f32,
    }
}

pub struct Stencil {
    pub input: ObjectId,
    pub output: ObjectId,
    /// The whole grid's size: cells outside it read as 0.
    pub dims: [u32; 3],
    /// The cells the two field objects hold.
    pub bx: Box3,
    pub order: Order,
    pub radius: u32,
    /// Centre, X, Y, Z weights (`super::weights`).
    pub w: [f32; 4],
}

impl Stencil {
    #[inline(always)]
    fn at(&self, inv: &mut Invocation<'_>, g: [i64; 3]) -> Result<f32, Fault> {
        if (0..3).any(|a| g[a] < 0 || g[a] >= self.dims[a] as i64) {
            return Ok(0.0);
        }
        // A cell outside the box wraps to a coordinate out of range: the runtime's bounds
        // check fails the launch with a typed error.
        let l = [0, 1, 2].map(|a| (g[a] as u32).wrapping_sub(self.bx.origin[a]));
        let (x, y) = self.bx.texel(l);
        inv.load_f32(self.input, x, y)
    }

    #[inline(always)]
    fn cell(&self, inv: &mut Invocation<'_>, u: u32, v: u32) -> Result<(), Fault> {
        let l = self.bx.unlaunch(self.order, u, v);
        let g = [0, 1, 2].map(|a| (self.bx.origin[a] + l[a]) as i64);
        let [w0, wx, wy, wz] = self.w;
        let mut c = w0 * self.at(inv, g)?;
        for s in 1..=self.radius as i64 {
            let xl = self.at(inv, [g[0] - s, g[1], g[2]])?;
            let xr = self.at(inv, [g[0] + s, g[1], g[2]])?;
            let yl = self.at(inv, [g[0], g[1] - s, g[2]])?;
            let yr = self.at(inv, [g[0], g[1] + s, g[2]])?;
            let zl = self.at(inv, [g[0], g[1], g[2] - s])?;
            let zr = self.at(inv, [g[0], g[1], g[2] + s])?;
            c += (wx * (xl + xr) + wy * (yl + yr)) + wz * (zl + zr);
        }
        let (x, y) = self.bx.texel(l);
        inv.store_f32(self.output, x, y, c)
    }
}

impl Kernel for Stencil {
    fn name(&self) -> &'static str {
        "stencil"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        let [w0, wx, wy, wz] = self.w;
        let params = StencilParams {
            input: self.input.0,
            output: self.output.0,
            nx: self.dims[0],
            ny: self.dims[1],
            nz: self.dims[2],
            order: self.order.word(),
            radius: self.radius,
            w0,
            wx,
            wy,
            wz,
            ..StencilParams::with_box(&self.bx)
        };
        Some(WgslKernel::new(
            concat!(
                include_str!("../decomp/grid.wgsl"),
                include_str!("stencil.wgsl")
            ),
            &params,
        ))
    }
    #[inline]
    fn invoke(&self, inv: &mut Invocation<'_>, u: u32, v: u32) -> Result<(), Fault> {
        self.cell(inv, u, v)
    }
    /// The star's centre and its `6 × radius` neighbours, and the cell written.
    fn pages_per_invocation(&self) -> Option<u64> {
        Some(6 * self.radius as u64 + 2)
    }
}
