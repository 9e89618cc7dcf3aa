//! What can go wrong on a wgpu device, as typed values with messages a user can act on.

use tessera_core::{DeviceId, ObjectId};
use tessera_runtime::{BackendError, RuntimeError};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WgpuError {
    #[error("no GPU adapter found ({0}); on Linux install Mesa's lavapipe (apt-get install mesa-vulkan-drivers) or a GPU driver")]
    NoAdapter(String),
    /// `TESSERA_ADAPTER` names no adapter there is.
    #[error("no adapter is named like {wanted:?} (TESSERA_ADAPTER); the adapters here: {found}")]
    NoAdapterNamed { wanted: String, found: String },
    /// A `TESSERA_WGPU_*` switch set to something other than `on` or `off`.
    #[error("{0}")]
    Switch(String),
    #[error("adapter {adapter} refused a device: {message}")]
    RequestDevice { adapter: String, message: String },
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error("out of GPU memory: {0}")]
    OutOfMemory(String),
    #[error("a kernel binds at most {max} physical memories; memory {memory} was asked for")]
    TooManyMemories { memory: u16, max: usize },
    #[error("kernel {kernel} has no WGSL twin")]
    NoWgsl { kernel: String },
    #[error("kernel {kernel} does not compile: {message}")]
    Shader { kernel: String, message: String },
    #[error("a launch binds at most {max} remote objects on wgpu; kernel {kernel} binds more")]
    TooManyRemote { kernel: String, max: u32 },
    #[error("remote object {object} lives on another wgpu device: the devices of a node must share one (tessera_wgpu::system, or WgpuDevice::on with one SharedGpu)")]
    RemoteAcrossDevices { object: tessera_core::ObjectId },
    /// wgpu's own message: it reports these as text, outside any call that returned them.
    #[error("wgpu reported an error outside any call: {0}")]
    Uncaptured(String),
    #[error("a read-back's mapping failed: {0}")]
    ReadBack(String),
    #[error("a read-back's mapping never completed")]
    ReadBackNeverCompleted,
    /// The status a launch wrote disagrees with itself: a fault in the prelude, not in input.
    #[error("kernel {kernel}: inconsistent counts in its status (incomplete {incomplete} of {invocations}, requests {requests} of {pages} pages)")]
    InconsistentLaunch {
        kernel: String,
        incomplete: u64,
        invocations: u64,
        requests: u64,
        pages: u64,
    },
    #[error("merge: inconsistent counts in its status (written {written}, left {left} of {count}, requests {requests} of {pages} pages)")]
    InconsistentMerge {
        written: u64,
        left: u64,
        count: u64,
        requests: u64,
        pages: u64,
    },
    #[error("a queued merge left {left} stores over: the page table changed under queued work")]
    QueuedMergeLeftStores { left: u64 },
    #[error("kernel {kernel}: a level error on object {object}, which has no levels")]
    LevelErrorWithoutLevels { kernel: String, object: ObjectId },
    #[error("kernel {kernel}: unknown format code {code} in its status")]
    UnknownFormatCode { kernel: String, code: u32 },
    #[error("kernel {kernel}: error code {code} on object {object}, which the host cannot decode")]
    UndecodableError {
        kernel: String,
        code: u32,
        object: ObjectId,
    },
    #[error("no physical memory {memory} on this device")]
    NoMemory { memory: u16 },
    #[error("slot {slot} outside physical memory {memory}")]
    SlotOutside { memory: u16, slot: u32 },
    #[error("physical memory {memory} cannot be made of {slot_bytes}-byte slots")]
    BadMemory { memory: u16, slot_bytes: u64 },
    #[error("a slot write of {bytes} bytes into a {slot_bytes}-byte slot")]
    SlotSize { bytes: u64, slot_bytes: u64 },
    #[error("{pages} pages: the GPU page table addresses at most 2^32")]
    PageTableTooLarge { pages: u64 },
    #[error("a launch over {pages} pages; the page table has {table}")]
    LaunchPastTable { pages: u64, table: u64 },
    #[error("an object beyond global page 2^32")]
    PageBeyond32Bits,
    #[error("a peer copy from a memory on another wgpu device")]
    PeerAcrossDevices,
    #[error("a peer copy from slot {from_slot} of {slot_bytes}-byte slots ({capacity} of them) into a {into_bytes}-byte slot")]
    PeerSlot {
        from_slot: u32,
        slot_bytes: u64,
        capacity: u32,
        into_bytes: u64,
    },
    #[error("merge: page {page} maps outside its physical memory")]
    MergeOutside { page: u64 },
    #[error("kernel {kernel}: a domain of {width}x{height} is too large for one dispatch")]
    DispatchTooLarge {
        kernel: String,
        width: u32,
        height: u32,
    },
    #[error("object {object}: an unpaged run takes ids below {max}")]
    UnpagedId { object: ObjectId, max: usize },
    #[error("object {object} is given twice")]
    ObjectTwice { object: ObjectId },
    #[error("no object {object} in this unpaged run")]
    NoObject { object: ObjectId },
    #[error("object {object} holds {want} bytes; {got} were given")]
    ObjectSize {
        object: ObjectId,
        want: u64,
        got: u64,
    },
    #[error(
        "plain copies of {bytes} bytes in {page_bytes}-byte pages into {buffer_bytes}-byte buffers"
    )]
    PlainCopies {
        bytes: u64,
        page_bytes: u64,
        buffer_bytes: u64,
    },
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
}

impl WgpuError {
    /// The runtime's error for this device.
    pub fn on(self, device: DeviceId) -> RuntimeError {
        match self {
            // Already the runtime's: wrapping it again would only hide it.
            WgpuError::Runtime(e) => e,
            e => RuntimeError::Device {
                device,
                error: BackendError::new(e),
            },
        }
    }
}
