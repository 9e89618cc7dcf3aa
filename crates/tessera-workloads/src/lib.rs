//! Workloads that run on tessera: each is a set of kernels plus an unpaged reference.
pub mod access;
pub mod boiling;
pub mod convolution;
pub mod decomp;
pub mod halo;
pub mod oversub;
pub mod page_moves;
pub mod plot;
pub mod quake;
pub mod raytrace;
pub mod stencil;
pub mod vr;

/// The version of the report schema (docs/report.schema.json): the core every workload's
/// report.json shares, before its own section.
pub const SCHEMA_VERSION: u32 = 1;
