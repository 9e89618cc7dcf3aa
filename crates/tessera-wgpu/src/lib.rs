//! tessera's wgpu backend: [`tessera_runtime::Device`] on Vulkan, Metal and DX12 GPUs, and on
//! Mesa's lavapipe (a software Vulkan) in CI.
//!
//! The tessera devices of a node share one wgpu `Device` and queue ([`SharedGpu`], as
//! [`system`] opens them), each with its own physical memories, page table and scratch
//! buffers. Several tessera devices on one physical adapter therefore emulate a multi-GPU
//! machine: their memories are separate allocations, and a page moves between them as one
//! copy on the GPU, a batch's copies in one submission (a peer copy, as between real GPUs
//! with peer access); sharing the wgpu device is also what lets all of them bind a remote
//! object's one buffer (`AccessMode::Remote`). [`WgpuDevice::new`] opens a wgpu device of its
//! own, whose pages move through the host. [`AdapterChoice`] picks the adapter.
//!
//! On the device:
//! - each physical memory is one storage buffer of `u32` words; at most [`MAX_MEMORIES`] are
//!   bound to a kernel (WGSL cannot index an array of separate buffers dynamically, so the
//!   prelude selects one with a `switch`);
//! - the page table is a storage buffer of `vec2<u32>` (low, high word of the 64-bit
//!   descriptor of `tessera_core::page_table`), updated with queued writes;
//! - a launch runs the kernel's WGSL twin after the prelude, `shader/invocation.wgsl`, which
//!   records request bits with `atomicOr`, then `compact.wgsl` turns the bit fields into a
//!   request list on the GPU; one read-back brings the counts, the timestamps and the first
//!   entries of the lists (a second only when more than `SPECULATIVE` (1024) entries are due);
//! - `Mode::Temp` stores stay on the device in a temporary that the pass's launches append to;
//!   `merge.wgsl` writes it through the page table and keeps the stores whose page is not held
//!   writable for the next merge;
//! - buffers a launch needs (lists, bit fields, temporary, staging) are kept and grown, so a
//!   launch in the steady state allocates nothing;
//! - where the adapter has timestamp queries, every launch and merge is timed on the device,
//!   and the runtime's stage breakdown gets the device time beside the wall time;
//! - each launch stamps the pages it translates with its time (a `u32` per page beside the
//!   page table, widened by the host in `page_times`);
//! - a held band or two-pass part is queued without a wait (`Device::queue_launch`): a gate
//!   word in device memory makes the work behind one that faulted skip itself, and a frame
//!   reads every queued status back at once. An eviction's write-backs are read in the
//!   background (`Device::read_slots_later`), and a batch of peer copies and a page table's
//!   resize are submitted without a wait too, as is a staged page's write (queued from the
//!   memory manager's thread during a launch); each relies on the queue's order instead.
//!   Every other call that submits work waits for it. Slot writes are queued behind
//!   everything submitted before, so the memory manager can give a slot to another page
//!   between calls (docs/WGPU.md, "Queued launches", "Write-backs in the background", "Slot
//!   reuse").
//!
//! [`UnpagedGpu`] runs the same kernel bodies with no paging, after `unpaged.wgsl`, on plain
//! row-major arrays: the unpaged original that `tessera bench overhead --backend wgpu` compares
//! the paged device against.

pub mod abi;
mod device;
mod error;
mod gpu;
mod node;
mod plain_copy;
mod scratch;
mod shape;
mod switches;
mod unpaged;

pub use device::{WgpuDevice, MAX_MEMORIES};
pub use error::WgpuError;
pub use gpu::{adapters, quiet_mesa, AdapterChoice, SharedGpu};
pub use node::{devices_on, system, system_on_cluster, NodeError};
pub use plain_copy::{PlainCopies, PlainTimes};
pub use switches::{TilePath, BOUNDS_CHECKS, SPECIALIZE, TILES};
pub use unpaged::{UnpagedGpu, UNPAGED_MAX_OBJECTS};

// Every shader is compiled after `abi::header()`, which declares what host and shaders share.
/// The prelude every kernel body is compiled after.
pub const PRELUDE: &str = include_str!("shader/invocation.wgsl");
/// How the prelude stamps pages: every invocation its own (`stamp_each.wgsl`), once per
/// workgroup for the tile's written page on the tile path (`stamp_group.wgsl`), or once per
/// workgroup and page on the per-texel path of a GPU (`stamp_cache.wgsl`).
pub(crate) const STAMP_EACH: &str = include_str!("shader/stamp_each.wgsl");
pub(crate) const STAMP_GROUP: &str = include_str!("shader/stamp_group.wgsl");
pub(crate) const STAMP_CACHE: &str = include_str!("shader/stamp_cache.wgsl");
/// Compiled before the prelude: whether every descriptor names memory 0 (a device of one
/// physical memory, a launch that binds no remote object), so that the prelude's memory
/// accesses skip their switch over eight buffers.
pub(crate) const ONE_MEMORY: &str = "const ONE_MEMORY: bool = true;\n";
pub(crate) const ANY_MEMORY: &str = "const ONE_MEMORY: bool = false;\n";
/// The request compaction kernel.
pub const COMPACT: &str = include_str!("shader/compact.wgsl");
/// The merge, compiled after the prelude, whose bindings it shares.
pub const MERGE: &str = include_str!("shader/merge.wgsl");
/// The prelude of [`UnpagedGpu`]: the same kernel bodies on plain arrays, with no paging.
pub const UNPAGED_PRELUDE: &str = include_str!("shader/unpaged.wgsl");
