//! What devices hand each other to copy slots without the host: a physical memory as a peer
//! sees it, one slot's copy, and a sink a staged copy writes into. A leaf, so that a backend's
//! memory can name these without the device trait (backend.rs, which re-exports them).

use std::any::Any;
use std::sync::Arc;

use tessera_core::SlotAddr;

/// One physical memory of a device, as a device of the same peer group
/// ([`Device::peer_group`](crate::Device::peer_group)) addresses it to copy slots out of it:
/// on wgpu, the memory's buffer (a handle to the same buffer, not a copy of its bytes). Opaque to the runtime, which only
/// hands it from the source device's worker to the destination's.
pub type PeerMemory = Arc<dyn Any + Send + Sync>;

/// One slot copied from a peer's physical memory into one of this device's slots, on the
/// device: `from`'s slot `from_slot` into `at`. Both slots are as long (one page).
#[derive(Clone)]
pub struct PeerCopy {
    pub from: PeerMemory,
    pub from_slot: u32,
    pub at: SlotAddr,
}

/// Writes slots of a device's physical memory from another thread, while the device may be
/// running a launch: what the memory manager uses to copy staged pages during a launch. The
/// caller writes only slots that no launch can reach (free slots, whose last page's
/// descriptor was cleared by a job the device has finished).
pub trait SlotSink: Send + Sync {
    fn write_slot(&self, slot: u32, data: &[u8]) -> std::result::Result<(), String>;
}
