//! `--verify`: a run's result against its workload's unpaged reference. A difference is an
//! error, returned before the run's output is moved into `--out`, so a run that fails its
//! check leaves nothing behind.

use anyhow::{bail, Result};
use tessera_workloads::halo::{compare, Verification};

use crate::BackendKind;

/// A field against the plain single-device reference's. Where the bits differ on wgpu,
/// whether the adapter fuses multiply-adds decides the tolerance (halo::Verification).
pub fn field(backend: BackendKind, want: &[f32], got: &[f32], steps: u32) -> Result<Verification> {
    let c = compare(want, got);
    // The probe runs only where the bits differ: on lavapipe and the CPU they do not.
    let fuses_multiply_add = c.cells_differing > 0
        && matches!(backend, BackendKind::Wgpu)
        && tessera_wgpu::SharedGpu::open(&tessera_wgpu::AdapterChoice::from_env())?
            .fuses_multiply_add()?;
    Ok(Verification::new(
        c,
        want.len() == got.len(),
        fuses_multiply_add,
        steps,
    ))
}

/// A field check that must pass: prints the verdict, and fails the command on a difference.
pub fn require_field(backend: BackendKind, want: &[f32], got: &[f32], steps: u32) -> Result<()> {
    let v = field(backend, want, got, steps)?;
    outln!("{}", v.describe());
    if !v.passed {
        bail!("--verify: the field differs from the plain single-device reference");
    }
    Ok(())
}

/// An RGBA8 image against the unpaged reference's, pixel for pixel: prints the verdict, and
/// fails the command on a difference.
pub fn require_image(want: &[u8], got: &[u8]) -> Result<()> {
    tessera_workloads::compare_images(want, got)?;
    outln!("verified: equals the unpaged reference pixel for pixel");
    Ok(())
}
