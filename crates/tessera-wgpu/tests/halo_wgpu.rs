//! Differential tests: GPU-SM's stencil and convolution on wgpu devices (lavapipe in CI)
//! against the plain reference, in all three versions (explicit halo copies, migrate, remote).
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use tessera_core::AccessMode;
use tessera_runtime::{Procedure, Schedule, System, SystemConfig};
use tessera_workloads::convolution;
use tessera_workloads::decomp::runner::Decomposed;
use tessera_workloads::decomp::{Access, Axis};
use tessera_workloads::stencil;

fn gpu(n: usize) -> Option<System> {
    common::system(&SystemConfig::new(n).threads(2).memory(1 << 20))
}

fn run(mut d: Decomposed, steps: u32, procedure: Procedure) -> Vec<f32> {
    for _ in 0..steps {
        d.step(procedure, Schedule::Concurrent).unwrap();
    }
    d.field().unwrap()
}

/// Relative to the field's largest magnitude: a fused multiply-add changes the last bit of a
/// sum of a few terms, and two steps add a few such roundings.
const TOL: f32 = 1e-5;

/// Every operation is IEEE f32 + and ×, in the same order as the CPU twin and the
/// reference, so the GPU must match bit for bit where its compiler does not fuse multiply-adds
/// (lavapipe); where it does, see `common::Exactness`.
#[test]
fn stencil_on_wgpu_equals_the_reference() {
    let n = 12;
    let init = stencil::initial(n);
    let want = stencil::reference::run(&init, n, 2, 2);
    let mut exact = common::Exactness::new(TOL);
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
        exact.check(
            &run(d, 2, procedure),
            &want,
            &format!("stencil differs on wgpu: {access:?} {split:?} {devices} devices"),
        );
    }
}

#[test]
fn convolution_on_wgpu_equals_the_reference() {
    let n = 16;
    let init = convolution::initial(n);
    let w = convolution::filter(5);
    let want = convolution::reference::run(&init, n, &w, 5, 2);
    let mut exact = common::Exactness::new(TOL);
    for (access, split, devices) in [
        (Access::Migrate, Axis::Y, 2),
        (Access::Explicit, Axis::X, 2),
        (Access::Explicit, Axis::Y, 4),
    ] {
        let Some(sys) = gpu(devices) else {
            return;
        };
        let d = convolution::decomposed(sys, n, 5, split, access, 4).unwrap();
        exact.check(
            &run(d, 2, Procedure::Relaunch),
            &want,
            &format!("convolution differs on wgpu: {access:?} {split:?} {devices} devices"),
        );
    }
}

/// Remote mode on wgpu: the fields' pages live in one buffer each that every device of the
/// node binds (never in a device's slots); each device reads its neighbours' halos in place.
#[test]
fn stencil_remote_on_wgpu_equals_the_reference() {
    let n = 12;
    let init = stencil::initial(n);
    let want = stencil::reference::run(&init, n, 2, 2);
    let mut exact = common::Exactness::new(TOL);
    for (split, devices, procedure) in [
        (Axis::Z, 2, Procedure::Relaunch),
        (Axis::X, 3, Procedure::TwoPass),
        (Axis::Y, 4, Procedure::Relaunch),
    ] {
        let Some(sys) = gpu(devices) else {
            return;
        };
        let d = stencil::decomposed(sys, n, 2, split, Access::Remote, 4).unwrap();
        exact.check(
            &run(d, 2, procedure),
            &want,
            &format!("remote stencil differs on wgpu: {split:?} {devices} devices {procedure:?}"),
        );
    }
}

#[test]
fn convolution_remote_on_wgpu_equals_the_reference() {
    let n = 16;
    let init = convolution::initial(n);
    let w = convolution::filter(5);
    let want = convolution::reference::run(&init, n, &w, 5, 2);
    let mut exact = common::Exactness::new(TOL);
    for (split, devices, filter_mode, procedure) in [
        (Axis::Y, 2, AccessMode::Remote, Procedure::Relaunch),
        (Axis::X, 4, AccessMode::Migrate, Procedure::TwoPass),
        (Axis::Y, 4, AccessMode::ReplicateRead, Procedure::Relaunch),
    ] {
        let Some(sys) = gpu(devices) else {
            return;
        };
        let d =
            convolution::decomposed_with(sys, n, 5, split, Access::Remote, 4, filter_mode).unwrap();
        exact.check(&run(d, 2, procedure), &want, &format!("remote convolution differs on wgpu: {split:?} {devices} devices, filter {filter_mode}"));
    }
}
