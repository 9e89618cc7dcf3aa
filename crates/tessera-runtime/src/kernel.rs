//! The kernel contract: what the runtime and a kernel agree on, whichever backend runs it.
//!
//! A kernel comes in twins of one name: a Rust twin that the CPU backend runs through
//! [`Invocation`] (`cpu/invocation.rs`), and a WGSL twin that a GPU
//! backend compiles after its prelude (`shader/invocation.wgsl` in tessera-wgpu). Both read
//! and write objects by id and texel coordinates; both fault on a missing page and leave no
//! side effect; both fail with the same typed [`RuntimeError`]s. This file holds the trait
//! and the launch check; what an invocation is given (bindings, modes, faults, limits) is
//! `contract.rs`, re-exported here, which the twins' contexts import without the trait.

pub use crate::contract::*;
use crate::cpu::invocation::{run_span_with, Invocation};
use crate::cpu::unpaged::Plain;
use crate::error::RuntimeError;

/// Checks what a launch asks for against the limits, before any invocation runs. Every
/// backend calls it, so a launch a backend refuses is refused by all, with the same error.
pub fn check_launch(kernel: &dyn Kernel, bindings: &[Bound]) -> Result<(), RuntimeError> {
    if bindings.len() > MAX_BINDINGS {
        return Err(RuntimeError::TooManyBindings {
            kernel: kernel.name().into(),
            bindings: bindings.len(),
            max: MAX_BINDINGS,
        });
    }
    if let Some(w) = kernel.wgsl() {
        if w.param_words() > MAX_PARAMS {
            return Err(RuntimeError::TooManyParams {
                kernel: kernel.name().into(),
                words: w.param_words(),
                max: MAX_PARAMS,
            });
        }
    }
    Ok(())
}

/// One kernel: the CPU twin of a compute pass.
pub trait Kernel: Send + Sync {
    /// Names the kernel and its WGSL twin (`<name>.wgsl`).
    fn name(&self) -> &'static str;
    /// The WGSL twin, for GPU backends; `None` for a kernel with a CPU twin only.
    fn wgsl(&self) -> Option<WgslKernel> {
        None
    }
    /// Runs the invocation at (x, y) of the launch domain.
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault>;

    /// Runs the invocations (x0..x1, y), committing each that completes and listing each that
    /// faulted. A kernel need not override it: a default method is compiled once per
    /// implementing type, so `self.invoke` here is a static call, inlined into the row loop
    /// (mark `invoke` `#[inline]`), and only the call to `run_span` itself is dynamic.
    fn run_span(
        &self,
        inv: &mut Invocation<'_>,
        y: u32,
        xs: std::ops::Range<u32>,
        incomplete: &mut Vec<(u32, u32)>,
    ) -> Result<(), RuntimeError> {
        run_span_with(inv, y, xs, incomplete, |inv, x, y| self.invoke(inv, x, y))
    }

    /// Where the invocation at (x, y) reads and writes, when that is known before it runs.
    /// A backend then translates each page of a tile of invocations once and runs the tile
    /// over plain windows of the pages ([`Kernel::run_plain`]). It is a hint: an access
    /// outside the windows falls back to the per-texel path, which is always exact.
    fn footprint(&self) -> Option<Footprint> {
        None
    }

    /// At most how many pages one invocation touches, where the kernel knows it without a
    /// footprint (a 3D stencil's star: its centre, `6 × radius` neighbours and the cell it
    /// writes, each possibly on a page of its own). Only the message of a budget too small
    /// uses it, to say how many bytes are enough rather than a lower bound that a run given
    /// it may fail again on.
    fn pages_per_invocation(&self) -> Option<u64> {
        None
    }

    /// Objects whose missing pages never stop an invocation: a degrading sample serves them
    /// from a coarser level the device holds and asks for the page
    /// (`sampler::sample_degraded`). Their pages are brought after the pass, never between
    /// its rounds, so an invocation run again after another page's fault (a framebuffer page
    /// two devices' strips share) samples what it sampled the first time, and the image does
    /// not depend on which device took that page first.
    fn late_objects(&self) -> Vec<tessera_core::ObjectId> {
        Vec::new()
    }

    /// Runs the invocations `xs × ys` over plain windows (see [`Kernel::footprint`]). Kernels
    /// with a footprint override it with their body over [`Plain`]; any `Err` makes the backend
    /// discard the tile's stores and run it again through the per-texel path.
    fn run_plain(
        &self,
        plain: &mut Plain<'_>,
        xs: std::ops::Range<u32>,
        ys: std::ops::Range<u32>,
    ) -> Result<(), Fault> {
        let _ = (plain, xs, ys);
        Err(Fault::Miss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kernel whose parameters take one word more than a launch carries.
    struct Wide;

    impl Kernel for Wide {
        fn name(&self) -> &'static str {
            "wide"
        }
        fn wgsl(&self) -> Option<WgslKernel> {
            Some(WgslKernel {
                source: "",
                params: vec![0; 4 * (MAX_PARAMS + 1)],
                fields: &[],
            })
        }
        fn invoke(&self, _: &mut Invocation<'_>, _: u32, _: u32) -> Result<(), Fault> {
            Ok(())
        }
    }

    #[test]
    fn too_many_parameter_words_are_refused() {
        assert_eq!(
            check_launch(&Wide, &[]),
            Err(RuntimeError::TooManyParams {
                kernel: "wide".into(),
                words: MAX_PARAMS + 1,
                max: MAX_PARAMS,
            })
        );
    }
}
