//! The convolution kernel (twin of `convolution.wgsl`): one output pixel per invocation,
//! the filter read from its buffer object word by word.
use tessera_core::ObjectId;
use tessera_runtime::{Fault, Invocation, Kernel, WgslKernel};

use crate::decomp::{Box3, Order};

crate::decomp::box_kernel_params! {
    /// What `convolution.wgsl` reads as `params`: the objects (`weights` is the filter
    /// buffer; `filter` is a reserved word in WGSL), the image size, the objects' box
    /// (origin, extent), the launch order and the filter side F.
    pub struct ConvolutionParams {
        pub input: u32,
        pub output: u32,
        pub weights: u32,
        pub nx: u32,
        pub ny: u32,
        ..Box3,
        pub order: u32,
        pub size: u32,
    }
}

pub struct Convolution {
    pub input: ObjectId,
    pub output: ObjectId,
    /// The buffer of F² f32 weights, row j at j · F.
    pub filter: ObjectId,
    /// The whole image's size: reads are clamped to it.
    pub dims: [u32; 2],
    /// The pixels the two image objects hold (z extent 1).
    pub bx: Box3,
    pub order: Order,
    /// F, odd.
    pub size: u32,
}

impl Convolution {
    #[inline(always)]
    fn cell(&self, inv: &mut Invocation<'_>, u: u32, v: u32) -> Result<(), Fault> {
        let l = self.bx.unlaunch(self.order, u, v);
        let gx = (self.bx.origin[0] + l[0]) as i64;
        let gy = (self.bx.origin[1] + l[1]) as i64;
        let r = (self.size / 2) as i64;
        let clamp = |c: i64, n: u32| c.clamp(0, n as i64 - 1) as u32;
        let mut sum = 0.0f32;
        for j in 0..self.size {
            let y = clamp(gy + j as i64 - r, self.dims[1]).wrapping_sub(self.bx.origin[1]);
            for i in 0..self.size {
                let x = clamp(gx + i as i64 - r, self.dims[0]).wrapping_sub(self.bx.origin[0]);
                let w = f32::from_bits(inv.load_u32(self.filter, j * self.size + i)?);
                // Outside the box (never, when the box holds the ghost cells) the coordinate
                // wraps out of range and the runtime fails the launch with a typed error.
                let (tx, ty) = self.bx.texel([x, y, 0]);
                sum += w * inv.load_f32(self.input, tx, ty)?;
            }
        }
        let (x, y) = self.bx.texel(l);
        inv.store_f32(self.output, x, y, sum)
    }
}

impl Kernel for Convolution {
    fn name(&self) -> &'static str {
        "convolution"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        let params = ConvolutionParams {
            input: self.input.0,
            output: self.output.0,
            weights: self.filter.0,
            nx: self.dims[0],
            ny: self.dims[1],
            order: self.order.word(),
            size: self.size,
            ..ConvolutionParams::with_box(&self.bx)
        };
        Some(WgslKernel::new(
            concat!(
                include_str!("../decomp/grid.wgsl"),
                include_str!("convolution.wgsl")
            ),
            &params,
        ))
    }
    #[inline]
    fn invoke(&self, inv: &mut Invocation<'_>, u: u32, v: u32) -> Result<(), Fault> {
        self.cell(inv, u, v)
    }
}
