//! Differential tests: GPU-SM's stencil and convolution on wgpu devices (lavapipe in CI)
//! against the plain reference, in both versions (explicit halo copies, migrate).
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use tessera_runtime::{Procedure, Schedule, System, SystemConfig};
use tessera_workloads::convolution;
use tessera_workloads::decomp::runner::Decomposed;
use tessera_workloads::decomp::{Access, Axis};
use tessera_workloads::stencil;

fn gpu(n: usize) -> Option<System> {
    common::system(&SystemConfig {
        devices: n,
        cpu_threads: 2,
        memory_bytes: 1 << 20,
        ..Default::default()
    })
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn run(mut d: Decomposed, steps: u32, procedure: Procedure) -> Vec<u32> {
    for _ in 0..steps {
        d.step(procedure, Schedule::Concurrent).unwrap();
    }
    bits(&d.field().unwrap())
}

/// Every operation is IEEE f32 + and ×, in the same order as the CPU twin and the
/// reference, so the GPU must match bit for bit.
#[test]
fn stencil_on_wgpu_equals_the_reference() {
    let n = 12;
    let init = stencil::initial(n);
    let want = bits(&stencil::reference::run(&init, n, 2, 2));
    for (access, split, devices, procedure) in [
        (Access::Migrate, Axis::Z, 2, Procedure::Relaunch),
        (Access::Migrate, Axis::Y, 3, Procedure::TwoPass),
        (Access::Explicit, Axis::X, 2, Procedure::Relaunch),
        (Access::Explicit, Axis::Y, 4, Procedure::TwoPass),
    ] {
        let Some(sys) = gpu(devices) else {
            return;
        };
        let d = stencil::decomposed(sys, n, 2, split, access, 4).unwrap();
        assert!(
            run(d, 2, procedure) == want,
            "stencil differs on wgpu: {access:?} {split:?} {devices} devices"
        );
    }
}

#[test]
fn convolution_on_wgpu_equals_the_reference() {
    let n = 16;
    let init = convolution::initial(n);
    let w = convolution::filter(5);
    let want = bits(&convolution::reference::run(&init, n, &w, 5, 2));
    for (access, split, devices) in [
        (Access::Migrate, Axis::Y, 2),
        (Access::Explicit, Axis::X, 2),
        (Access::Explicit, Axis::Y, 4),
    ] {
        let Some(sys) = gpu(devices) else {
            return;
        };
        let d = convolution::decomposed(sys, n, 5, split, access, 4).unwrap();
        assert!(
            run(d, 2, Procedure::Relaunch) == want,
            "convolution differs on wgpu: {access:?} {split:?} {devices} devices"
        );
    }
}

/// The remote version needs remote pages on the GPU, which the wgpu backend does not build
/// yet: the step fails with that typed error, and nothing panics.
#[test]
fn remote_version_on_wgpu_is_a_typed_error() {
    let Some(sys) = gpu(2) else {
        return;
    };
    let mut d = stencil::decomposed(sys, 8, 1, Axis::Z, Access::Remote, 4).unwrap();
    let err = d
        .step(Procedure::Relaunch, Schedule::Concurrent)
        .unwrap_err();
    assert!(
        matches!(
            err,
            tessera_workloads::decomp::DecompError::Runtime(
                tessera_runtime::RuntimeError::RemoteNotBuilt { .. }
            )
        ),
        "{err}"
    );
}
