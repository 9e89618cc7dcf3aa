//! Workloads that run on tessera: each is a set of kernels plus an unpaged reference.
pub mod access;
pub mod boiling;
pub mod convolution;
pub mod decomp;
pub mod quake;
pub mod raytrace;
pub mod stencil;
pub mod vr;
