//! GPU-SM's image filtering (its section 3.3.2, Table 2 and Fig. 14): a 2D convolution of an
//! N × N f32 image with an F × F filter (F odd, 3 to 11 in the evaluation), the image cut
//! into slabs of columns (split X) or rows (split Y) across the devices.
//!
//! Each output pixel is `Σ_j Σ_i w[j·F + i] · in(x + i − F/2, y + j − F/2)`, j outer, starting
//! from 0.0, coordinates clamped to the image (clamp to edge). The filter is a normalised
//! tent (weights proportional to (1 + min(i, F−1−i)) · (1 + min(j, F−1−j))), held in a
//! tessera buffer object that the kernel reads through the runtime: shared and read-copied
//! by demand paging in the shared versions, one private copy per device in the explicit
//! version (GPU-SM's "replicated"). `--steps` applies the filter repeatedly, ping-ponging
//! between two images, so that a run is long enough to time.
//!
//! `convolution.rs` / `convolution.wgsl` are the kernel twins, `reference` the plain loop.
#[allow(clippy::module_inception)]
pub mod convolution;
pub mod reference;

use std::sync::Arc;

use tessera_core::AccessMode;
use tessera_runtime::{Kernel, System};

use crate::decomp::runner::{Decomposed, Extra, KernelArgs, MakeKernel};
use crate::decomp::{Access, Axis, DecompError, Grid, Result};

/// The largest filter side accepted.
pub const MAX_FILTER: u32 = 31;

/// Checks a filter side: odd, 3 to [`MAX_FILTER`].
pub fn check_filter(f: u32) -> Result<()> {
    if !(3..=MAX_FILTER).contains(&f) || f.is_multiple_of(2) {
        return Err(DecompError::BadFilter {
            size: f,
            max: MAX_FILTER,
        });
    }
    Ok(())
}

/// The F × F tent filter, row j at `j · F`.
pub fn filter(f: u32) -> Vec<f32> {
    let t = |i: u32| (1 + i.min(f - 1 - i)) as f32;
    let sum: f32 = (0..f).map(t).sum::<f32>().powi(2);
    (0..f)
        .flat_map(|j| (0..f).map(move |i| t(i) * t(j) / sum))
        .collect()
}

/// The initial image: a deterministic pattern with edges and texture.
pub fn initial(n: u32) -> Vec<f32> {
    let mut v = Vec::with_capacity((n as usize).pow(2));
    for y in 0..n {
        for x in 0..n {
            let h = (x.wrapping_mul(37) ^ y.wrapping_mul(91)) % 128;
            v.push(h as f32 / 128.0 + if (x / 8 + y / 8) % 2 == 0 { 0.5 } else { 0.0 });
        }
    }
    v
}

/// The image's split axes: only X and Y exist in 2D.
pub fn check_split(split: Axis) -> Result<()> {
    if split == Axis::Z {
        return Err(DecompError::FlatAxis { axis: "z" });
    }
    Ok(())
}

/// The F × F convolution of an `n` × `n` image, cut along `split` (X or Y) for `sys`'s
/// devices, in version `access`, with texture pages of `page`² pixels; the filter is
/// demand-paged (read copies) in the shared versions.
pub fn decomposed(
    sys: System,
    n: u32,
    filter_size: u32,
    split: Axis,
    access: Access,
    page: u32,
) -> Result<Decomposed> {
    decomposed_with(
        sys,
        n,
        filter_size,
        split,
        access,
        page,
        AccessMode::Migrate,
    )
}

/// [`decomposed`] with the filter buffer created in `filter_mode` in the shared versions
/// (GPU-SM 6.2's choices: `Migrate` read copies, `Remote` in host memory, `ReplicateRead`
/// read-only copies on first touch, tessera's read-only cache). The explicit version keeps a
/// private copy per device whatever `filter_mode` says.
pub fn decomposed_with(
    sys: System,
    n: u32,
    filter_size: u32,
    split: Axis,
    access: Access,
    page: u32,
    filter_mode: AccessMode,
) -> Result<Decomposed> {
    check_filter(filter_size)?;
    check_split(split)?;
    let grid = Grid::new([n, n, 1], split, filter_size / 2, sys.devices())?;
    let bytes: Vec<u8> = filter(filter_size)
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    // The filter fits one page.
    let page_bytes = (bytes.len() as u64).next_power_of_two().max(4);
    let make: MakeKernel = Arc::new(move |a: &KernelArgs| {
        Arc::new(convolution::Convolution {
            input: a.input,
            output: a.output,
            filter: a.extra.unwrap_or(a.input),
            dims: [n, n],
            bx: a.bx,
            order: grid.order(),
            size: filter_size,
        }) as Arc<dyn Kernel>
    });
    Decomposed::new(
        sys,
        grid,
        access,
        page,
        &initial(n),
        Some(Extra {
            bytes,
            page_bytes,
            mode: filter_mode,
        }),
        make,
    )
}
