//! Remote objects: pages with one location each, never copied (GPU-SM §2, §5; the rules are
//! in docs/PROTOCOL.md, "Access modes").
//!
//! On the CPU backend a remote object's pages live in one shared pool the node owns, page
//! after page (each page a whole slot's words, as the home store lays them out), that every
//! device's invocations read and write in place. A page's [`Location`] is where it would
//! live on a machine of GPUs (host memory, or one device's memory): it decides which
//! accesses cross a link and which link they are charged to, not where the words are here.
//! GPU-SM measures host memory about as fast as a peer behind the same PCIe switch (§4,
//! Fig. 4), so one pool standing for "wherever the page lives" loses nothing the cost model
//! needs: the topology prices each (accessor, location) pair.
//!
//! The words are `AtomicU32` with relaxed ordering, as the CPU devices' own memories are: two
//! devices writing one texel in one pass is allowed (paper 3.1) with an undefined winner.
//! Passes are separated by barriers (the drivers' replies), which order everything.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use tessera_core::{GlobalPage, Location, ObjectEntry, ObjectId};

use crate::error::Result;

/// Where a backend keeps a remote object's words instead of the pool: the wgpu backend keeps
/// them in one buffer that every device of the node binds (a GPU kernel cannot reach the
/// pool's host memory). Once a backing exists, it holds the words and the pool is only read
/// back from it when the runtime reads the object (`RemoteObject::bytes`).
pub trait RemoteBacking: Send + Sync {
    /// Copies the backing's words into `into` (the pool, page after page).
    fn pull(&self, into: &[AtomicU32]) -> Result<()>;
    /// The backend's own type, for the backend that made it.
    fn as_any(&self) -> &dyn Any;
}

/// One remote object's pages and the location of each.
pub struct RemoteObject {
    pub id: ObjectId,
    pub page_offset: u64,
    /// Words per page (a whole slot's worth, as a device slot would hold it).
    pub page_words: u64,
    words: Vec<AtomicU32>,
    locations: Vec<AtomicU16>,
    /// Set by the first backend launch that keeps the words elsewhere (see [`RemoteBacking`]).
    backing: Mutex<Option<Arc<dyn RemoteBacking>>>,
}

impl RemoteObject {
    /// An object holding `pages` (page layout, whole slots) placed at `location`.
    pub(crate) fn new(e: &ObjectEntry, pages: &[u8], location: Location) -> Self {
        RemoteObject {
            id: e.id,
            page_offset: e.page_offset,
            page_words: e.desc.page_bytes() / 4,
            words: pages
                .chunks_exact(4)
                .map(|b| AtomicU32::new(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            locations: (0..e.desc.page_count())
                .map(|_| AtomicU16::new(location.code()))
                .collect(),
            backing: Mutex::new(None),
        }
    }

    /// The object's backing, made by `make` from the pool's words on first use. The lock is
    /// held while `make` runs, so that devices launching at once agree on one backing.
    pub fn backing_or_init(
        &self,
        make: impl FnOnce(&[AtomicU32]) -> Result<Arc<dyn RemoteBacking>>,
    ) -> Result<Arc<dyn RemoteBacking>> {
        let mut g = self.backing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = &*g {
            return Ok(b.clone());
        }
        let b = make(&self.words)?;
        *g = Some(b.clone());
        Ok(b)
    }

    /// Every word, page after page.
    pub fn words(&self) -> &[AtomicU32] {
        &self.words
    }

    /// The object's pages as bytes, page after page (from its backing, where it has one).
    pub(crate) fn bytes(&self) -> Result<Vec<u8>> {
        let backing = self
            .backing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(b) = backing {
            b.pull(&self.words)?;
        }
        let mut out = vec![0u8; self.words.len() * 4];
        for (o, w) in out.chunks_exact_mut(4).zip(&self.words) {
            o.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        Ok(out)
    }

    pub fn pages(&self) -> u64 {
        self.locations.len() as u64
    }

    /// Where global page `page` of this object lives.
    #[inline]
    pub fn location(&self, page: GlobalPage) -> Location {
        self.locations
            .get((page.0 - self.page_offset) as usize)
            .map(|c| Location::from_code(c.load(Ordering::Relaxed)))
            .unwrap_or_default()
    }

    /// Places local page `local` at `location`. Only between passes (a pass reads the
    /// locations while it runs; the barrier orders the change before the next pass).
    pub(crate) fn place(&self, local: u64, location: Location) {
        if let Some(c) = self.locations.get(local as usize) {
            c.store(location.code(), Ordering::Relaxed);
        }
    }
}

/// The remote objects of a launch's bindings, one entry per binding (`None`: not remote).
/// Empty for a launch that binds none.
pub type RemoteBindings = Arc<Vec<Option<Arc<RemoteObject>>>>;

/// The node's remote objects, shared by the memory manager (which creates, places and frees
/// them) and the drivers (which attach them to their launches). The lock is held only to
/// clone or change the map, never across a wait, so it cannot take part in a deadlock.
#[derive(Clone, Default)]
pub(crate) struct RemoteRegistry(Arc<RwLock<HashMap<ObjectId, Arc<RemoteObject>>>>);

impl RemoteRegistry {
    pub fn insert(&self, o: Arc<RemoteObject>) {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(o.id, o);
    }

    pub fn remove(&self, id: ObjectId) -> Option<Arc<RemoteObject>> {
        self.0
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
    }

    pub fn get(&self, id: ObjectId) -> Option<Arc<RemoteObject>> {
        self.0
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id)
            .cloned()
    }

    /// The remote objects of `ids`, in order; an empty list when none is remote, so that a
    /// launch binding only migrate objects carries nothing.
    pub fn bindings(&self, ids: impl Iterator<Item = ObjectId>) -> RemoteBindings {
        let map = self.0.read().unwrap_or_else(|p| p.into_inner());
        if map.is_empty() {
            return RemoteBindings::default();
        }
        let v: Vec<_> = ids.map(|id| map.get(&id).cloned()).collect();
        if v.iter().all(Option::is_none) {
            return RemoteBindings::default();
        }
        Arc::new(v)
    }
}
