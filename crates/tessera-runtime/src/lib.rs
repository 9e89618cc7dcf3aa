//! tessera-runtime: the running system on top of tessera-core.
//!
//! Threads after the paper's model (3.7–3.8): a device worker per device owning the backend
//! device, one memory manager owning the directory, a driver per device running its command
//! stream. The CPU backend is the embedded default. See docs/ARCHITECTURE.md.

pub mod backend;
pub mod cluster;
mod contract;
pub mod cpu;
pub mod driver;
pub mod error;
mod held;
mod home;
pub mod kernel;
pub mod manager;
pub mod modeled;
pub mod partition;
mod peer;
pub mod remote;
pub mod stats;
mod sync;
pub mod system;
mod wgsl_words;
pub mod worker;

/// For [`kernel_params!`]: the traits it implements, reached through this crate so that the
/// crate using the macro needs no bytemuck of its own.
#[doc(hidden)]
pub use bytemuck as __bytemuck;

pub use backend::{
    Device, Domain, GpuLaunchTime, Launch, LaunchOutcome, MergeOutcome, PeerCopy, PeerMemory,
    PendingRead, Queued, QueuedOutcome, Settled, SlotSink,
};
pub use cpu::{run_span_with, Invocation, Plain, PlainInput, PlainOutput, RequestBits, MIPMAPPED};
pub use driver::{DeviceContext, PassSpec, PassStats, Procedure, StageTimes};
pub use error::{BackendError, Result, RuntimeError};
pub use home::remove_home_files;
pub use kernel::{
    check_launch, kind_name, Bound, Fault, Footprint, Kernel, KernelParams, Mode, ParamField,
    ParamScalar, ScalarKind, TempStore, TexelAccess, WgslKernel, MAX_BINDINGS, MAX_DOMAIN_SIDE,
    MAX_PARAMS, MAX_STORES, RESUMED_BIT,
};
pub use manager::{
    LaunchStarter, ManagerHandle, Prefetch, Thrashing, PAGE_LIMIT, PIN_BATCHES, PREFETCH_REGION,
    THRASH_EVENTS, THRASH_WINDOW,
};
pub use partition::Partition;
pub use remote::{RemoteBacking, RemoteBindings, RemoteObject};
pub use stats::{
    BackendCounters, DeviceMemoryUse, DeviceTraffic, HostCounters, HostReport, LinkCounters,
};
pub use system::{
    env_switch, max_cpu_threads, Schedule, System, SystemConfig, CPU_THREADS_FLOOR,
    CPU_THREADS_PER_CORE, PEER_COPY,
};
pub use tessera_core::Policy;
// For `kernel_params!`, whose expansion checks each name with it.
#[doc(hidden)]
pub use wgsl_words::wgsl_name_ok;
