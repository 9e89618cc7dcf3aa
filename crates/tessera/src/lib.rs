//! # tessera
//!
//! The memories of several GPUs as one shared, consistent, demand-paged address space for
//! textures and buffers. Objects live at home, in host memory; a device holds pages of them in
//! its own memory and asks for the rest when a kernel touches them. A directory keeps the copies
//! coherent, so a kernel reads the latest write wherever it ran; when a device's memory is full,
//! pages are evicted and the kernel relaunched.
//!
//! This crate is the library's chosen surface: the types a program needs to create objects, write
//! kernels and run them on the CPU backend or on GPUs through wgpu (the `wgpu` feature, on by
//! default; without it nothing of wgpu is built). [`internals`] reaches the
//! rest (the protocol, the model checker, the device seam) for those who build on them.
//!
//! ## A kernel
//!
//! A kernel is Rust code per texel for the CPU backend, and optionally WGSL for wgpu
//! ([`Kernel::wgsl`]); both go through the page table. A load of a page the device does not hold
//! is `Err(Fault::Miss)`: `?` hands it to the runtime, which fetches the page and runs the
//! invocation again.
//!
//! ```
//! use tessera::{Fault, Invocation, Kernel, ObjectId, System, SystemConfig};
//!
//! /// `dst = 2 × src`, texel by texel.
//! struct Double {
//!     src: ObjectId,
//!     dst: ObjectId,
//! }
//!
//! impl Kernel for Double {
//!     fn name(&self) -> &'static str {
//!         "double"
//!     }
//!     fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
//!         let v = inv.load_f32(self.src, x, y)?;
//!         inv.store_f32(self.dst, x, y, 2.0 * v)
//!     }
//! }
//!
//! # fn main() -> Result<(), tessera::RuntimeError> {
//! let sys = System::cpu(&SystemConfig {
//!     devices: 2,
//!     ..Default::default()
//! })?;
//! let data: Vec<f32> = (0..64 * 64).map(|i| i as f32).collect();
//! // 64 × 64 texels in 16 × 16 pages; the two devices split the rows between them.
//! let src = sys.create_f32(64, 64, 16, Some(&data))?;
//! let dst = sys.create_f32(64, 64, 16, None)?;
//! sys.run_kernel(Double { src: src.id, dst: dst.id }, &[&src, &dst], 64, 64)?;
//! assert_eq!(sys.read_f32(&dst)?[100], 200.0);
//! // Each device fetched only the pages of its band: 8 of `src` and the 8 of `dst` it wrote.
//! assert!(sys.traffic()?.iter().all(|t| t.host_to_device.pages == 16));
//! # Ok(())
//! # }
//! ```
//!
//! ## Limits and errors
//!
//! A node has 1 to [`MAX_DEVICES`] devices; a launch binds at most [`MAX_BINDINGS`] objects,
//! an invocation stores at most [`MAX_STORES`] times, and a parameter struct
//! ([`kernel_params!`]) takes at most [`MAX_PARAMS`] words. Textures take page sides of 1 to
//! 512 texels, powers of two ([`PageSize`]); make descriptions with [`ObjectDesc::texture`]
//! and [`ObjectDesc::buffer`], or [`System::create_f32`]: one built from the variants is
//! checked the same when it is created. Everything a program can get wrong is a
//! [`RuntimeError`], never a panic: an access outside an object
//! ([`CoreError::OutOfRange`]), a freed object, a budget ([`SystemConfig::budget_bytes`]) too
//! small for one invocation's pages. With a budget, pages are evicted ([`Policy`]) and a
//! kernel that faults runs again; `examples/oversubscribed` shows it.
//!
//! Between passes the host reads an object ([`System::read_f32`], [`System::read`]) and
//! replaces its data ([`System::write_f32`], [`System::write`]): the next pass on every device
//! sees the new bytes.
//!
//! Mipmapped RGBA8 textures ([`ObjectDesc::mipmapped`]) are made from their level 0 by
//! [`System::create_mip_rgba8`], made again from a new one by [`System::write_mip_rgba8`], and
//! read back by level with [`System::read_mip_rgba8`]; kernels
//! read them by level or through a [`Sampler`] (`Invocation::sample_rgba8`, docs/TEXTURES.md).
//!
//! `examples/blur` is a complete program: twins for both backends, several passes over several
//! devices, checked against a plain loop. `examples/oversubscribed` runs a buffer object through
//! a device memory smaller than its working set.
#![warn(missing_docs)]

pub use tessera_core::{
    AccessMode, Addressing, Coherence, CoreError, DeviceId, Filter, Location, MipLayout,
    ObjectDesc, ObjectEntry, ObjectId, PageSize, Policy, ProtocolVariant, Sampler, TexelFormat,
    Window, MAX_DEVICES,
};
/// Declares a kernel's parameter struct, which both twins read (see [`KernelParams`]).
pub use tessera_runtime::kernel_params;
pub use tessera_runtime::{
    max_cpu_threads, BackendError, Bound, DeviceTraffic, Domain, Fault, Footprint, HostCounters,
    Invocation, Kernel, KernelParams, LinkCounters, Mode, ParamField, ParamScalar, Partition,
    PassSpec, PassStats, Plain, Prefetch, Procedure, RuntimeError, ScalarKind, Schedule,
    StageTimes, System, SystemConfig, TexelAccess, Thrashing, WgslKernel, MAX_BINDINGS, MAX_PARAMS,
    MAX_STORES,
};

/// GPUs through wgpu: Vulkan, Metal or DX12, and Mesa's lavapipe on a machine without a GPU.
/// With the `wgpu` feature (on by default).
#[cfg(feature = "wgpu")]
pub mod wgpu {
    pub use tessera_wgpu::{adapters, quiet_mesa, system, AdapterChoice, WgpuError};
}

/// The crates under this facade, whole: the protocol and its model checker, the device seam a
/// new backend implements, the memory manager's handle. Their APIs change more freely than this
/// crate's.
pub mod internals {
    pub use tessera_core as core;
    pub use tessera_runtime as runtime;
    #[cfg(feature = "wgpu")]
    pub use tessera_wgpu as wgpu;
}
