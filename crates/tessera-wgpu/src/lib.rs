//! tessera's wgpu backend: [`tessera_runtime::Device`] on Vulkan, Metal and DX12 GPUs, and on
//! Mesa's lavapipe (a software Vulkan) in CI.
//!
//! Each tessera device is one wgpu `Device` with its own queue, requested from its own
//! `Adapter` (WebGPU allows one device per adapter object; a fresh adapter object is requested
//! for each). Several tessera devices on one physical adapter therefore emulate a multi-GPU
//! machine: their memories are separate allocations, and every page moves between them through
//! the host, as it would between real GPUs. [`AdapterChoice`] picks the adapter.
//!
//! On the device:
//! - each physical memory is one storage buffer of `u32` words; at most [`MAX_MEMORIES`] are
//!   bound to a kernel (WGSL cannot index an array of separate buffers dynamically, so the
//!   prelude selects one with a `switch`);
//! - the page table is a storage buffer of `vec2<u32>` (low, high word of the 64-bit
//!   descriptor of `tessera_core::page_table`), updated with queued writes;
//! - a launch runs the kernel's WGSL twin after `prelude.wgsl`, which records request bits
//!   with `atomicOr`, then `compact.wgsl` turns the bit fields into a request list on the GPU;
//!   only the counts and the lists are read back.
//!
//! Not yet: access time stamps (no GPU eviction yet, so nothing reads them), a GPU merge
//! kernel (the merge of `Mode::Temp` runs on the host from the read-back temporary, writing
//! runs of consecutive words with queued writes).
//!
//! [`UnpagedGpu`] runs the same kernel bodies with no paging, after `unpaged.wgsl`, on plain
//! row-major arrays: the unpaged original that `tessera bench overhead --backend wgpu` compares
//! the paged device against.

mod device;
mod error;
mod unpaged;

pub use device::{adapters, AdapterChoice, WgpuDevice, MAX_MEMORIES};
pub use error::WgpuError;
pub use unpaged::{UnpagedGpu, UNPAGED_MAX_OBJECTS};

/// The prelude every kernel body is compiled after.
pub const PRELUDE: &str = include_str!("prelude.wgsl");
/// The request compaction kernel.
pub const COMPACT: &str = include_str!("compact.wgsl");
/// The prelude of [`UnpagedGpu`]: the same kernel bodies on plain arrays, with no paging.
pub const UNPAGED_PRELUDE: &str = include_str!("unpaged.wgsl");
