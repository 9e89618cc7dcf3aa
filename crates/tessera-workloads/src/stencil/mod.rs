//! GPU-SM's 3D finite-difference stencil (its section 3.3.1, Listing 1 and Table 1): a star
//! stencil of radius r (the halo width) on an N³ field of f32, a fixed number of time steps
//! ping-ponging between two fields, split into slabs along X, Y or Z across the devices.
//!
//! Each output cell is `w0 · centre + Σ_{s=1..r} (wx · (x−s + x+s) + wy · (y−s + y+s) +
//! wz · (z−s + z+s))`, summed in that order (so every version and both twins add the same
//! f32s in the same order). GPU-SM's Listing 3 weighs the axes 3.1, 2.1 and 1.1; we keep
//! those ratios and scale them so that the weights sum to 1 with `w0 = 1/2`, which keeps the
//! field bounded over many steps. Cells outside the grid read as 0 (a zero Dirichlet
//! boundary).
//!
//! `stencil.rs` / `stencil.wgsl` are the kernel twins, `reference` the plain single-device
//! loop; the versions (explicit, migrate) are [`crate::decomp::runner`]'s.
pub mod reference;
#[allow(clippy::module_inception)]
pub mod stencil;

use std::sync::Arc;

use tessera_runtime::{Kernel, System};

use crate::decomp::runner::{Decomposed, KernelArgs, MakeKernel};
use crate::decomp::{Access, Axis, Grid, Result};

/// The halo widths GPU-SM evaluates (Table 1).
pub const PAPER_HALOS: [u32; 4] = [2, 4, 8, 16];

/// The stencil's weights for radius `r`: centre, then per-offset weights along X, Y, Z.
pub fn weights(r: u32) -> [f32; 4] {
    let k = 0.5 / (2.0 * r.max(1) as f32 * 6.3);
    [0.5, 3.1 * k, 2.1 * k, 1.1 * k]
}

/// The initial field: a deterministic pattern with structure at every scale the halos see.
pub fn initial(n: u32) -> Vec<f32> {
    let mut v = Vec::with_capacity((n as usize).pow(3));
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let h = (x.wrapping_mul(7) ^ y.wrapping_mul(13) ^ z.wrapping_mul(29)) % 64;
                v.push(h as f32 / 64.0 + if (x + y + z) % 5 == 0 { 1.0 } else { 0.0 });
            }
        }
    }
    v
}

/// The stencil of radius `halo` on an `n`³ field, cut along `split` for `sys`'s devices, in
/// version `access`, with texture pages of `page`² cells.
pub fn decomposed(
    sys: System,
    n: u32,
    halo: u32,
    split: Axis,
    access: Access,
    page: u32,
) -> Result<Decomposed> {
    let grid = Grid::new([n; 3], split, halo, sys.devices())?;
    let w = weights(halo);
    let make: MakeKernel = Arc::new(move |a: &KernelArgs| {
        Arc::new(stencil::Stencil {
            input: a.input,
            output: a.output,
            dims: [n; 3],
            bx: a.bx,
            order: grid.order(),
            radius: halo,
            w,
        }) as Arc<dyn Kernel>
    });
    Decomposed::new(sys, grid, access, page, &initial(n), None, make)
}
