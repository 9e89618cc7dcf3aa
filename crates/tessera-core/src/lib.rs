//! tessera-core: the pure memory model of tessera.
//!
//! No threads, no GPU, no I/O. Everything here is deterministic so that it can be tested
//! exhaustively: the address formulas against naive references, the coherence protocol by the
//! model checker in [`model`]. The runtime drives these types; see docs/ARCHITECTURE.md.

pub mod access;
pub mod address;
pub mod directory;
pub mod error;
pub mod eviction;
pub mod geometry;
pub mod mip;
pub mod model;
pub mod model_nodes;
pub mod nodes;
pub mod page_table;
pub mod physical;
pub mod prefetch;
pub mod protocol;
pub mod sampler;
mod search;

pub use access::{AccessMode, Location, RemoteLink, UnknownAccessMode};
pub use address::{AddressSpace, ObjectEntry};
pub use directory::{DeviceSet, DirEntry, Directory, HomeMap};
pub use error::{CoreError, Result};
pub use eviction::{Policy, Resident};
pub use geometry::{ObjectDesc, PageSize, TexelFormat};
pub use mip::{Addressing, MipLayout};
pub use page_table::{PageDescriptor, PageTable};
pub use physical::{DeviceMemory, MemoryLimits, PhysicalMemory, SlotAddr};
pub use protocol::{
    Access, Action, Coherence, Message, PageRequest, Protocol, ProtocolVariant, RequestBatch,
    RequestId,
};
pub use sampler::{Filter, Probe, Sampler, Window};

use std::fmt;

/// At most this many devices share one address space: the directory keeps a 64-bit copy set.
pub const MAX_DEVICES: usize = 64;

/// One GPU (or one emulated GPU), numbered from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct DeviceId(pub u8);

impl DeviceId {
    /// A checked constructor: device numbers above 63 do not fit the directory's copy set.
    pub fn new(index: usize) -> Result<Self> {
        if index >= MAX_DEVICES {
            return Err(CoreError::TooManyDevices(index + 1));
        }
        Ok(DeviceId(index as u8))
    }
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device{}", self.0)
    }
}

/// A texture or buffer, named by an id that stays unique for the address space's lifetime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct ObjectId(pub u32);

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A page's number in the one global address space (paper eq. 4 / thesis eq. 3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct GlobalPage(pub u64);

impl GlobalPage {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for GlobalPage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page{}", self.0)
    }
}

/// One node (process or machine) with a memory manager; today there is one, node 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct NodeId(pub u16);
