//! The memory manager: one thread per node that owns the directory (through the protocol),
//! the home copies in host memory and the slot allocators of every device.
//!
//! It runs the sans-IO protocol and carries out its actions by sending jobs to device workers,
//! waiting only on them (paper 3.7–3.8). A request the protocol defers under the memory lock
//! just keeps its reply channel here; nothing blocks. Replies travel on per-request channels,
//! separate from the command queue.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_core::protocol::Source;
use tessera_core::{
    AccessMode, Action, AddressSpace, Coherence, DeviceId, DeviceMemory, DirEntry, Directory,
    GlobalPage, HomeMap, Location, Message, ObjectDesc, ObjectEntry, ObjectId, PageDescriptor,
    PageRequest, Policy, Protocol, ProtocolVariant, RemoteLink, RequestBatch, RequestId, Resident,
    SlotAddr,
};

use crate::backend::{copy_slot, Device, PeerCopy, PeerMemory, SlotSink};
use crate::error::{Result, RuntimeError};
use crate::held::HeldPages;
use crate::home::{read_home, write_home, HomeStore, SharedHome};
use crate::remote::{RemoteBindings, RemoteObject, RemoteRegistry};
use crate::stats::{DeviceMemoryUse, DeviceTraffic};
use crate::sync::channel::{bounded, unbounded, Receiver, Sender};
use crate::sync::{AtomicBool, Builder, JoinHandle, RwLock};
use crate::worker::{Pending, WorkerHandle};

pub(crate) enum Cmd {
    Create(
        ObjectDesc,
        Option<Vec<u8>>,
        AccessMode,
        Sender<Result<ObjectEntry>>,
    ),
    Place(ObjectId, Vec<Location>, Sender<Result<()>>),
    Access(ObjectId, Sender<Result<AccessMode>>),
    Remote(DeviceId, Vec<(Location, RemoteLink)>),
    Free(ObjectId, Sender<Result<()>>),
    Read(ObjectId, Sender<Result<Vec<u8>>>),
    ReadPacked(ObjectId, Sender<Result<(ObjectEntry, Vec<u8>)>>),
    Request(
        DeviceId,
        Vec<PageRequest>,
        Vec<GlobalPage>,
        Sender<Result<()>>,
    ),
    Evictable(ObjectId, bool, Sender<Result<()>>),
    Trace(Sender<Vec<Vec<Vec<GlobalPage>>>>),
    Release(DeviceId),
    Traffic(Sender<Vec<DeviceTraffic>>),
    Holds(DeviceId, Vec<GlobalPage>, Sender<bool>),
    Memory(Sender<(Vec<DeviceMemoryUse>, Vec<DirEntry>)>),
    LogRequests(bool),
    Evict(DeviceId, Vec<GlobalPage>, Sender<Result<()>>),
    TakeRequests(Sender<Vec<Vec<GlobalPage>>>),
    /// The run cannot go on (a node of the cluster was lost): every waiting and later request
    /// gets this error.
    Fail(RuntimeError),
    Stage(
        DeviceId,
        Vec<PageRequest>,
        Option<LaunchStarter>,
        Sender<Result<()>>,
    ),
}

/// Queues a driver's launch on its device's worker, for the memory manager to call between
/// the two steps of a stage ([`ManagerHandle::stage_around`]). Dropped without being called
/// (a refused stage, a manager that is gone, a command never delivered) it queues the launch
/// all the same, so the driver's launch always runs exactly once.
pub struct LaunchStarter(Option<Box<dyn FnOnce() + Send>>);

impl LaunchStarter {
    pub fn new(start: impl FnOnce() + Send + 'static) -> Self {
        LaunchStarter(Some(Box::new(start)))
    }
    /// Queues the launch now (dropping it would too, later).
    fn start(mut self) {
        self.run();
    }
    fn run(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

impl Drop for LaunchStarter {
    fn drop(&mut self) {
        self.run();
    }
}

/// The command side of the memory manager; cheap to clone.
#[derive(Clone)]
pub struct ManagerHandle {
    tx: Sender<Cmd>,
    /// Per device: whether the manager has ever evicted one of its pages. A hint the drivers
    /// read without waiting (it only chooses how they fetch pages, never what is right).
    pressed: Arc<Vec<AtomicBool>>,
    remote: RemoteRegistry,
    /// On a node of a cluster: the other homes, which get their parts of every batch.
    cluster: Option<Arc<crate::cluster::Link>>,
    /// What each device's page table grants, published by the manager (`crate::held`).
    held: Arc<HeldPages>,
    /// Per device, the messages its driver sent the manager (requests, stages, releases,
    /// `holds`, remote counts, evictions): the steady state sends none.
    messages: Arc<Vec<AtomicU64>>,
    /// The host's handle only: settles the drivers' deferred launches before the host reads,
    /// frees, evicts or places (`System`, `SystemConfig::deferred`).
    settle: Option<SettleHook>,
}

/// Settles every driver of the node; see [`ManagerHandle::settling_first`].
pub(crate) type SettleHook = Arc<dyn Fn() -> Result<()> + Send + Sync>;

fn call<R>(tx: &Sender<Cmd>, make: impl FnOnce(Sender<R>) -> Cmd) -> Pending<R> {
    let (rtx, rrx) = bounded(1);
    let _ = tx.send(make(rtx));
    Pending::new(rrx, "memory manager")
}

impl ManagerHandle {
    /// A handle to nothing: every call reports the manager gone. Lets `System::drop` let go
    /// of its real handle before joining the threads.
    pub(crate) fn detached(tx: Sender<Cmd>) -> Self {
        ManagerHandle {
            tx,
            pressed: Arc::new(Vec::new()),
            remote: RemoteRegistry::default(),
            cluster: None,
            held: Arc::new(HeldPages::new(0)),
            messages: Arc::new(Vec::new()),
            settle: None,
        }
    }
    /// This handle, running `hook` before every call of the host's that reaches a device's
    /// pages. Only for the host's handle: a driver waiting on its own settle would wait on
    /// itself.
    pub(crate) fn settling_first(mut self, hook: SettleHook) -> Self {
        self.settle = Some(hook);
        self
    }
    fn settle_first(&self) -> Result<()> {
        match &self.settle {
            Some(h) => h(),
            None => Ok(()),
        }
    }
    /// Whether this handle reaches the homes of a cluster.
    pub fn is_on_cluster(&self) -> bool {
        self.cluster.is_some()
    }
    /// Counts one message sent on behalf of `device`.
    fn sent(&self, device: DeviceId) {
        if let Some(c) = self.messages.get(device.index()) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
    /// Messages sent to the memory manager on behalf of `device` so far.
    pub fn messages(&self, device: DeviceId) -> u64 {
        self.messages
            .get(device.index())
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
    /// Whether `device`'s page table holds every one of `pages` with the access asked for,
    /// as the memory manager last set it; read without a message (`crate::held`). Only a
    /// hint: another device may take a page right after, and the caller must still handle a
    /// miss. Always `false` on a cluster, whose other homes publish nothing here.
    pub fn covers(&self, device: DeviceId, pages: &[PageRequest]) -> bool {
        self.cluster.is_none() && self.held.covers(device, pages)
    }
    /// This handle routed over a cluster: batches, releases, `holds` and reads reach every
    /// home (crate::cluster).
    pub(crate) fn on_cluster(mut self, link: Arc<crate::cluster::Link>) -> Self {
        self.cluster = Some(link);
        self
    }
    /// Fails every request waiting here, and every later command that moves data, with `e`:
    /// a request deferred for a lost node's release would otherwise wait forever.
    pub(crate) fn fail(&self, e: RuntimeError) {
        let _ = self.tx.send(Cmd::Fail(e));
    }
    /// This node's manager alone.
    pub(crate) fn here(&self) -> Self {
        ManagerHandle {
            cluster: None,
            ..self.clone()
        }
    }
    /// Whether `device`'s budget has made the manager evict any of its pages yet.
    pub fn under_pressure(&self, device: DeviceId) -> bool {
        self.pressed
            .get(device.index())
            .is_some_and(|p| p.load(Ordering::Relaxed))
    }
    /// Creates an object; `data` (row-major from the lower left, texels tightly packed)
    /// becomes its home copy, zeros when absent.
    pub fn create(&self, desc: ObjectDesc, data: Option<Vec<u8>>) -> Result<ObjectEntry> {
        self.create_with(desc, data, AccessMode::Migrate)
    }
    /// [`ManagerHandle::create`] with an access mode (docs/PROTOCOL.md, "Access modes"). A
    /// remote object's pages are all placed in host memory; [`ManagerHandle::place`] moves
    /// their location.
    pub fn create_with(
        &self,
        desc: ObjectDesc,
        data: Option<Vec<u8>>,
        mode: AccessMode,
    ) -> Result<ObjectEntry> {
        if self.cluster.is_some() && mode == AccessMode::Remote {
            return Err(RuntimeError::Config(
                "remote objects are not built across nodes: their pages live on one device".into(),
            ));
        }
        let e = call(&self.tx, |r| Cmd::Create(desc, data, mode, r)).wait()?;
        // Every node creates the object before any device asks a home for its pages.
        if let Some(link) = &self.cluster {
            link.barrier()?;
        }
        e
    }
    /// Sets where each page of a remote object lives, `locations[local page]`. Between
    /// passes only. Refused for an object that is not remote, a list of the wrong length, or
    /// a device that does not exist.
    pub fn place(&self, id: ObjectId, locations: Vec<Location>) -> Result<()> {
        self.settle_first()?;
        call(&self.tx, |r| Cmd::Place(id, locations, r)).wait()?
    }
    /// The object's access mode.
    pub fn access(&self, id: ObjectId) -> Result<AccessMode> {
        call(&self.tx, |r| Cmd::Access(id, r)).wait()?
    }
    /// The remote objects among `bindings`, for a launch (read without waiting on the
    /// manager: the registry is shared).
    pub fn remote_bindings(&self, bindings: &[crate::kernel::Bound]) -> RemoteBindings {
        self.remote.bindings(bindings.iter().map(|b| b.id))
    }
    /// Adds a launch's remote traffic to `device`'s counters (no reply: a later `traffic`
    /// call is queued behind it).
    pub fn count_remote(&self, device: DeviceId, counts: Vec<(Location, RemoteLink)>) {
        if !counts.is_empty() {
            self.sent(device);
            let _ = self.tx.send(Cmd::Remote(device, counts));
        }
    }
    /// Drops every copy of the object and frees its pages.
    pub fn free(&self, id: ObjectId) -> Result<()> {
        self.settle_first()?;
        // Every node is done with the object before any home forgets it.
        if let Some(link) = &self.cluster {
            link.barrier()?;
        }
        call(&self.tx, |r| Cmd::Free(id, r)).wait()?
    }
    /// The object's latest data, row-major from the lower left. Call between passes.
    pub fn read(&self, id: ObjectId) -> Result<Vec<u8>> {
        self.settle_first()?;
        match &self.cluster {
            None => call(&self.tx, |r| Cmd::Read(id, r)).wait()?,
            Some(link) => {
                let (e, pages) = link.read_packed(&self.here(), id)?;
                let mut out = vec![0u8; host_len(&e.desc) as usize];
                unpack(&e.desc, &pages, &mut out);
                Ok(out)
            }
        }
    }
    /// The object's pages, packed, as this node's manager knows them: right for the pages it
    /// is home to.
    pub(crate) fn read_packed_here(&self, id: ObjectId) -> Result<(ObjectEntry, Vec<u8>)> {
        call(&self.tx, |r| Cmd::ReadPacked(id, r)).wait()?
    }
    /// Sends a request batch; the reply arrives when it is granted (the device is then locked).
    pub fn request(&self, device: DeviceId, pages: Vec<PageRequest>) -> Pending<Result<()>> {
        self.request_keeping(device, pages, Vec::new())
    }
    /// A request batch that must not evict `keep` (pages the device's current wave was granted
    /// earlier and still needs) to make room. When the batch and `keep` cannot fit the budget
    /// together the reply is [`RuntimeError::OverBudget`] and nothing changes.
    pub fn request_keeping(
        &self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
    ) -> Pending<Result<()>> {
        self.sent(device);
        let Some(link) = self.cluster.clone() else {
            return call(&self.tx, |r| Cmd::Request(device, pages, keep, r));
        };
        // The parts go one home at a time, each waited for: that waiting is the driver's, so
        // it happens on a thread of its own and the caller gets a Pending as before.
        let (rtx, rrx) = bounded(1);
        let here = self.here();
        let spawned = Builder::new().name("tessera-batch".into()).spawn(move || {
            let _ = rtx.send(link.request(&here, device, pages, keep));
        });
        if let Err(e) = spawned {
            let (etx, erx) = bounded(1);
            let _ = etx.send(Err(RuntimeError::Config(format!(
                "cannot start a thread: {e}"
            ))));
            return Pending::new(erx, "memory manager");
        }
        Pending::new(rrx, "memory manager")
    }
    /// Asynchronous staging (`ManagerConfig::staging`): from a device whose procedure holds
    /// the memory lock, pages of its next wave or pass. Granted at once (the pages are
    /// resident when the reply comes, the lock as it was) or refused with nothing changed:
    /// [`tessera_core::CoreError::StageWouldWait`] when another device's lock or an older
    /// deferred request stands in the way, [`RuntimeError::OverBudget`] when the batch does
    /// not fit beside the pages the procedure holds, or the protocol's error for a batch it
    /// refuses outright. Never deferred, so the caller may wait for the reply while locked.
    pub fn stage(&self, device: DeviceId, pages: Vec<PageRequest>) -> Pending<Result<()>> {
        self.stage_with(device, pages, None)
    }

    /// [`ManagerHandle::stage`] around the device's next launch, which `start` queues on its
    /// worker: the manager first makes room for the pages (time stamps, write-backs and
    /// invalidations run on the idle worker), then calls `start`, then copies the pages from
    /// home into the freed slots from its own thread *while the launch runs*, where the
    /// device can take such writes (`Device::slot_sink`: the CPU backend), and queues only the
    /// descriptors behind the launch. The launch cannot reach those slots: every descriptor
    /// that named them was cleared by a job that finished before it was queued. `start` is
    /// called exactly once, also when the stage is refused.
    pub fn stage_around(
        &self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        start: LaunchStarter,
    ) -> Pending<Result<()>> {
        self.stage_with(device, pages, Some(start))
    }

    fn stage_with(
        &self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        start: Option<LaunchStarter>,
    ) -> Pending<Result<()>> {
        self.sent(device);
        if self.cluster.is_some() {
            // A stage is answered by one manager at once; across homes it would be parts
            // acquired in node order, which may wait. Refused, so the band asks as before.
            let (tx, rx) = bounded(1);
            let _ = tx.send(Err(RuntimeError::Core(
                tessera_core::CoreError::StageWouldWait(device),
            )));
            return Pending::new(rx, "memory manager");
        }
        call(&self.tx, |r| Cmd::Stage(device, pages, start, r))
    }
    /// Marks an object's pages as never evicted (`false`) or evictable again (`true`, the
    /// default). A non-evictable object's resident pages take their share of every device's
    /// budget for good.
    pub fn set_evictable(&self, id: ObjectId, evictable: bool) -> Result<()> {
        call(&self.tx, |r| Cmd::Evictable(id, evictable, r)).wait()?
    }
    /// Per device, every batch's pages together with the pages its wave kept: the sets that
    /// had to be resident at once, in order (recorded when `ManagerConfig::record_trace`).
    /// The input of Belady's OPT (`tessera_core::eviction::belady_loads`).
    pub fn trace(&self) -> Result<Vec<Vec<Vec<GlobalPage>>>> {
        call(&self.tx, Cmd::Trace).wait()
    }
    /// Whether the directory lists a copy of every one of `pages` on `device`. Answered from
    /// the directory alone, waiting on no device worker and locking nothing, so a driver may
    /// ask at any time, locked or not. Only a hint: another device may take a page right
    /// after, and the caller must still handle a miss.
    pub fn holds(&self, device: DeviceId, pages: Vec<GlobalPage>) -> Result<bool> {
        self.sent(device);
        match &self.cluster {
            None => self.holds_here(device, pages),
            Some(link) => link.holds(&self.here(), device, pages),
        }
    }
    pub(crate) fn holds_here(&self, device: DeviceId, pages: Vec<GlobalPage>) -> Result<bool> {
        call(&self.tx, |r| Cmd::Holds(device, pages, r)).wait()
    }
    /// Releases the device's memory lock.
    pub fn release(&self, device: DeviceId) {
        self.sent(device);
        match &self.cluster {
            None => {
                let _ = self.tx.send(Cmd::Release(device));
            }
            Some(link) => link.release(&self.here(), device),
        }
    }
    pub fn traffic(&self) -> Result<Vec<DeviceTraffic>> {
        call(&self.tx, Cmd::Traffic).wait()
    }
    /// Drops `device`'s copies of `pages` now (a modified one is written home first), as an
    /// eviction does; pages it does not hold are left alone. Refused while the device is
    /// locked. The game trace uses it to empty texture memory between frames and to keep a
    /// page on a device only while the device uses it (paper Figs 12–13).
    pub fn evict(&self, device: DeviceId, pages: Vec<GlobalPage>) -> Result<()> {
        self.settle_first()?;
        self.sent(device);
        call(&self.tx, |r| Cmd::Evict(device, pages, r)).wait()?
    }
    /// Starts (`true`) or stops keeping, per device, every page each of its request batches
    /// asked for: exactly the pages `DeviceTraffic::page_requests` counts, in order. Off by
    /// default. A workload that shares a node between objects of several kinds (the game
    /// trace's texture atlas beside its per-frame buffers) counts the requests of one object
    /// from it, which the per-device totals cannot tell apart.
    pub fn log_requests(&self, on: bool) {
        let _ = self.tx.send(Cmd::LogRequests(on));
    }
    /// The pages logged since the last take (see [`ManagerHandle::log_requests`]), per device;
    /// the log starts empty again.
    pub fn take_requests(&self) -> Result<Vec<Vec<GlobalPage>>> {
        call(&self.tx, Cmd::TakeRequests).wait()
    }
    /// Memory per device and the directory, as they stand.
    pub fn memory(&self) -> Result<(Vec<DeviceMemoryUse>, Vec<DirEntry>)> {
        call(&self.tx, Cmd::Memory).wait()
    }
}

/// Settings of one memory manager.
#[derive(Clone, Debug)]
pub struct ManagerConfig {
    pub variant: ProtocolVariant,
    pub coherence: Coherence,
    /// Per device byte budget for physical memories.
    pub budget_bytes: u64,
    /// Bytes per physical memory (a new one is created when all are full).
    pub memory_bytes: u64,
    /// Each device's backend limits on memories (`Device::memory_limits`), in device order;
    /// a device not listed has none.
    pub memory_limits: Vec<tessera_core::MemoryLimits>,
    pub policy: Policy,
    /// Seeds the `random` policy (each device's generator from `seed + device`).
    pub seed: u64,
    pub thrashing: Thrashing,
    /// Keep the request trace for [`ManagerHandle::trace`].
    pub record_trace: bool,
    /// Pages fetched with a batch beyond the ones it asked for.
    pub prefetch: Prefetch,
    /// Keep the home copies in a memory-mapped file created fresh at this path (an existing
    /// path is refused) and removed when the manager stops; in host memory when None.
    pub home_file: Option<PathBuf>,
    /// Which node is home to each page: `HomeMap::Single` on one node; on a cluster this
    /// manager is asked only about its own pages (crate::cluster).
    pub homes: HomeMap,
    /// Build the protocol `with_staging()`, so drivers may stage their next band's pages
    /// while the current one runs ([`ManagerHandle::stage`]).
    pub staging: bool,
}

/// What the memory manager does about thrashing pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Thrashing {
    /// Count them only.
    Off,
    /// Spare them from eviction for `PIN_BATCHES` of the device's batches, up to half of its
    /// capacity (UVM pins thrashing pages too; it also throttles, which we do not).
    #[default]
    Pin,
}

impl std::str::FromStr for Thrashing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Thrashing::Off),
            "pin" => Ok(Thrashing::Pin),
            _ => Err(format!(
                "unknown thrashing response {s:?} (expected off or pin)"
            )),
        }
    }
}

/// Whether a request batch brings more pages than it asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Prefetch {
    /// Only the pages asked for.
    #[default]
    Off,
    /// CUDA UVM's bitmap tree (`tessera_core::prefetch`): within each region of
    /// `PREFETCH_REGION` pages of an object, the largest aligned power-of-two run that is more
    /// than 51% resident or asked for comes whole, as read copies of pages no device has
    /// modified, evicting by policy like the batch itself; when batch and prefetch do not fit
    /// together, the batch goes alone.
    Tree,
}

impl std::str::FromStr for Prefetch {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Prefetch::Off),
            "tree" => Ok(Prefetch::Tree),
            _ => Err(format!("unknown prefetch {s:?} (expected off or tree)")),
        }
    }
}

impl std::fmt::Display for Prefetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Prefetch::Off => "off",
            Prefetch::Tree => "tree",
        })
    }
}

/// Pages per prefetch region (UVM: a 2 MiB region of 64 KiB pages, 32 leaves).
pub const PREFETCH_REGION: u64 = 32;

/// A refault counts toward thrashing when it comes within this many of the device's batches
/// of the eviction (UVM counts 3 events within 500 µs; batches are our clock, so the rule does
/// not depend on how fast the machine is).
pub const THRASH_WINDOW: u64 = 16;
/// Refaults within the window that make a page thrashing.
pub const THRASH_EVENTS: u32 = 3;
/// How long, in the device's batches, a thrashing page is spared.
pub const PIN_BATCHES: u64 = 64;

/// Per device eviction state: what is resident, and the thrashing record.
struct Evictor {
    resident: Resident,
    /// Page → the device's batch count when it was evicted.
    evicted: HashMap<GlobalPage, u64>,
    /// Page → refaults within the window so far.
    events: HashMap<GlobalPage, u32>,
    /// Page → the batch count until which it is spared.
    pins: HashMap<GlobalPage, u64>,
    /// Prefetched pages no launch has been seen touching yet → their time stamp when they
    /// were fetched. A later stamp is a prefetch hit.
    prefetched: HashMap<GlobalPage, u64>,
}

impl Evictor {
    fn forget(&mut self, page: GlobalPage) {
        self.evicted.remove(&page);
        self.events.remove(&page);
        self.pins.remove(&page);
        self.prefetched.remove(&page);
    }
}

struct Manager {
    protocol: Protocol,
    space: AddressSpace,
    /// Home copies, per object, page after page (each page a whole slot's worth of bytes),
    /// in host memory or a memory-mapped file. Shared with the device workers, which copy
    /// pages between home and their slots themselves (`DeviceOp::WriteFromHome`,
    /// `read_ahead`'s write-backs).
    home: SharedHome,
    memories: Vec<DeviceMemory>,
    /// Per device, the slot holding each resident global page, indexed by global page.
    slots: Vec<Vec<Option<SlotAddr>>>,
    workers: Vec<WorkerHandle>,
    waiting: HashMap<RequestId, Sender<Result<()>>>,
    next_request: u64,
    traffic: Vec<DeviceTraffic>,
    evictors: Vec<Evictor>,
    /// Objects whose pages are never evicted.
    pinned: HashSet<ObjectId>,
    thrashing: Thrashing,
    prefetch: Prefetch,
    trace: Option<Vec<Vec<Vec<GlobalPage>>>>,
    /// Per device, the pages its batches asked for, while logging is on.
    request_log: Option<Vec<Vec<GlobalPage>>>,
    /// Set while an eviction's actions are carried out, so its invalidations are counted as
    /// evictions.
    evicting: bool,
    /// Pages an action list moves out of a device, read before the list is carried out, by
    /// (device, page).
    read_ahead: HashMap<(DeviceId, GlobalPage), Vec<u8>>,
    /// Modified pages the source device's worker has already written home itself (read ahead
    /// too), by (device, page): their `WriteBack` moves no more bytes, and a `Copy` from that
    /// device takes the page from home.
    written_home: HashSet<(DeviceId, GlobalPage)>,
    /// Page buffers reused across batches for device → device copies, so a batch does not
    /// page-fault fresh memory for every page it moves (a quarter of a move's time,
    /// `tessera bench page-moves`). Bounded by `POOL_BYTES`.
    pool: Vec<Vec<u8>>,
    /// Per device, its peer group (`Device::peer_group`), asked once at start: a page moves
    /// between two devices of one group as one copy on the device (`DeviceOp::PeerCopy`).
    peer_groups: Vec<Option<u64>>,
    /// Handles to the physical memories peer copies read from, by (device, memory), fetched
    /// from the source's worker the first time a copy reads that memory. Memories are never
    /// destroyed, so a handle stays good.
    peer_memories: HashMap<(DeviceId, u16), PeerMemory>,
    /// Per device and physical memory, the device's `slot_sink` (asked once).
    sinks: HashMap<(DeviceId, u16), Option<Arc<dyn SlotSink>>>,
    /// While a stage's actions run around its device's launch (`stage_around`): that device,
    /// whose copies from home this thread makes itself, into slots no launch can reach.
    copying_during_launch: Option<DeviceId>,
    /// Pages an action list copies out of a device on the device, made read-only on the
    /// source before the list is carried out (`read_ahead`), by (device, page): their slot.
    peer_ahead: HashMap<(DeviceId, GlobalPage), SlotAddr>,
    pressed: Arc<Vec<AtomicBool>>,
    /// What each device's page table grants, for the drivers (`crate::held`); written by
    /// every `Outbox` as it queues a descriptor.
    held: Arc<HeldPages>,
    /// Objects not in migrate mode (absent: migrate).
    modes: HashMap<ObjectId, AccessMode>,
    /// Remote objects' pages, shared with the drivers.
    remote: RemoteRegistry,
    /// Set when carrying out actions failed half way: the directory no longer matches the
    /// devices, so every later command gets this error rather than wrong data.
    broken: Option<RuntimeError>,
}

/// Starts the memory manager of a node driving these device workers.
pub fn spawn(
    workers: Vec<WorkerHandle>,
    cfg: &ManagerConfig,
) -> Result<(ManagerHandle, JoinHandle<()>)> {
    let n = workers.len();
    // First, so a bad path fails before anything else is built.
    let home = HomeStore::open(cfg.home_file.as_deref())?;
    let protocol =
        Protocol::new(Directory::new(0, cfg.homes), n, cfg.variant)?.with_coherence(cfg.coherence);
    let protocol = if cfg.staging {
        protocol.with_staging()
    } else {
        protocol
    };
    // Asked before the manager thread starts: no batch can need it earlier.
    let peer_groups = workers
        .iter()
        .map(|w| w.call(|d| Ok(d.peer_group())))
        .collect::<Result<Vec<_>>>()?;
    let mut m = Manager {
        protocol,
        space: AddressSpace::new(),
        home: Arc::new(RwLock::new(home)),
        memories: workers
            .iter()
            .enumerate()
            .map(|(i, w)| {
                DeviceMemory::with_limits(
                    w.device,
                    cfg.budget_bytes,
                    cfg.memory_bytes,
                    cfg.memory_limits.get(i).copied().unwrap_or_default(),
                )
            })
            .collect(),
        slots: vec![Vec::new(); n],
        workers,
        waiting: HashMap::new(),
        next_request: 0,
        traffic: vec![DeviceTraffic::default(); n],
        evictors: (0..n)
            .map(|d| Evictor {
                resident: Resident::new(cfg.policy, cfg.seed.wrapping_add(d as u64)),
                evicted: HashMap::new(),
                events: HashMap::new(),
                pins: HashMap::new(),
                prefetched: HashMap::new(),
            })
            .collect(),
        pinned: HashSet::new(),
        thrashing: cfg.thrashing,
        prefetch: cfg.prefetch,
        trace: cfg.record_trace.then(|| vec![Vec::new(); n]),
        request_log: None,
        evicting: false,
        read_ahead: HashMap::new(),
        written_home: HashSet::new(),
        pool: Vec::new(),
        peer_groups,
        peer_memories: HashMap::new(),
        sinks: HashMap::new(),
        copying_during_launch: None,
        peer_ahead: HashMap::new(),
        pressed: Arc::new((0..n).map(|_| AtomicBool::new(false)).collect()),
        held: Arc::new(HeldPages::new(n)),
        modes: HashMap::new(),
        remote: RemoteRegistry::default(),
        broken: None,
    };
    let (tx, rx) = unbounded();
    let pressed = m.pressed.clone();
    let remote = m.remote.clone();
    let held = m.held.clone();
    let join = Builder::new()
        .name("tessera-memory-manager".into())
        .spawn(move || m.run(rx))
        .map_err(|e| RuntimeError::Config(format!("cannot start a thread: {e}")))?;
    Ok((
        ManagerHandle {
            tx,
            pressed,
            remote,
            cluster: None,
            held,
            messages: Arc::new((0..n).map(|_| AtomicU64::new(0)).collect()),
            settle: None,
        },
        join,
    ))
}

impl Manager {
    fn run(&mut self, rx: Receiver<Cmd>) {
        while let Ok(cmd) = rx.recv() {
            match cmd {
                Cmd::Create(desc, data, mode, r) => {
                    let _ = r.send(self.guarded(|m| m.create(desc, data, mode)));
                }
                Cmd::Place(id, locations, r) => {
                    let _ = r.send(self.place(id, locations));
                }
                Cmd::Access(id, r) => {
                    let res = self
                        .space
                        .get(id)
                        .map(|_| self.modes.get(&id).copied().unwrap_or_default());
                    let _ = r.send(res.map_err(Into::into));
                }
                Cmd::Remote(device, counts) => {
                    if let Some(t) = self.traffic.get_mut(device.index()) {
                        for (loc, link) in counts {
                            t.add_remote(loc, &link);
                        }
                    }
                }
                Cmd::Free(id, r) => {
                    let _ = r.send(self.guarded(|m| m.free(id)));
                }
                Cmd::Read(id, r) => {
                    let _ = r.send(self.guarded(|m| m.read(id)));
                }
                Cmd::ReadPacked(id, r) => {
                    let _ = r.send(self.guarded(|m| {
                        let e = *m.space.get(id)?;
                        Ok((e, m.read_packed(id)?))
                    }));
                }
                Cmd::Request(device, pages, keep, r) => self.request(device, pages, keep, r),
                Cmd::Stage(device, pages, start, r) => self.stage(device, pages, start, r),
                Cmd::Evictable(id, evictable, r) => {
                    let res = self.space.get(id).map(|_| {
                        if evictable {
                            self.pinned.remove(&id);
                        } else {
                            self.pinned.insert(id);
                        }
                    });
                    let _ = r.send(res.map_err(Into::into));
                }
                Cmd::Trace(r) => {
                    let _ = r.send(self.trace.clone().unwrap_or_default());
                }
                Cmd::Release(d) => {
                    let res = self.guarded(|m| {
                        let actions = m.protocol.handle(Message::Release(d))?;
                        m.execute(actions)
                    });
                    if let Err(e) = res {
                        self.fail_all(e);
                    }
                }
                Cmd::Traffic(r) => {
                    let res = self.guarded(|m| {
                        m.count_prefetch_hits()?;
                        Ok(m.traffic.clone())
                    });
                    match res {
                        Ok(t) => {
                            let _ = r.send(t);
                        }
                        Err(e) => {
                            // Counters are still worth having; the error reaches the next
                            // command that moves data.
                            let _ = r.send(self.traffic.clone());
                            self.fail_all(e);
                        }
                    }
                }
                Cmd::Memory(r) => {
                    let _ = r.send(self.memory_use());
                }
                Cmd::LogRequests(on) => {
                    let n = self.workers.len();
                    match (on, &self.request_log) {
                        (true, None) => self.request_log = Some(vec![Vec::new(); n]),
                        (false, _) => self.request_log = None,
                        (true, Some(_)) => {}
                    }
                }
                Cmd::Evict(device, pages, r) => {
                    let res = self.guarded(|m| {
                        if device.index() >= m.workers.len() {
                            return Err(RuntimeError::Core(
                                tessera_core::CoreError::UnknownDevice(device),
                            ));
                        }
                        // Only pages the device holds: the protocol checks each page exists,
                        // and the eviction's own bookkeeping wants held pages.
                        let held: Vec<GlobalPage> = pages
                            .into_iter()
                            .filter(|&p| {
                                m.protocol
                                    .directory()
                                    .entry(p)
                                    .is_ok_and(|e| e.copies.contains(device))
                            })
                            .collect();
                        m.evict(device, held)
                    });
                    let _ = r.send(res);
                }
                Cmd::Fail(e) => self.fail_all(e),
                Cmd::TakeRequests(r) => {
                    let n = self.workers.len();
                    let taken = match &mut self.request_log {
                        Some(log) => std::mem::replace(log, vec![Vec::new(); n]),
                        None => vec![Vec::new(); n],
                    };
                    let _ = r.send(taken);
                }
                Cmd::Holds(device, pages, r) => {
                    let directory = self.protocol.directory();
                    let all = pages
                        .iter()
                        .all(|&p| directory.entry(p).is_ok_and(|e| e.copies.contains(device)));
                    let _ = r.send(all);
                }
            }
        }
    }

    fn guarded<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        f(self)
    }

    fn fail_all(&mut self, e: RuntimeError) {
        self.broken.get_or_insert(e.clone());
        for (_, r) in self.waiting.drain() {
            let _ = r.send(Err(e.clone()));
        }
    }

    fn request(
        &mut self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
        reply: Sender<Result<()>>,
    ) {
        if let Some(e) = &self.broken {
            let _ = reply.send(Err(e.clone()));
            return;
        }
        if !self.modes.is_empty() {
            if let Err(e) = self.check_modes(device, &pages) {
                // Refused before anything changed: only this request fails.
                let _ = reply.send(Err(e));
                return;
            }
        }
        let demanded = pages.len();
        let mut pages = pages;
        let extra = match self.prefetch_for(device, &pages) {
            Ok(extra) => extra,
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        };
        let room = if extra.is_empty() {
            self.make_room(device, &pages, demanded, &keep)
        } else {
            let mut all = pages.clone();
            all.extend(extra);
            match self.make_room(device, &all, demanded, &keep) {
                Ok(()) => {
                    pages = all;
                    self.note_prefetched(device, &pages[demanded..])
                }
                // Prefetch is a bet: when it does not fit beside the batch, the batch goes
                // alone (any evictions made for the pair lose nothing).
                Err(RuntimeError::OverBudget { .. }) => {
                    self.make_room(device, &pages, demanded, &keep)
                }
                Err(e) => Err(e),
            }
        };
        match room {
            Ok(()) => {}
            Err(e @ RuntimeError::OverBudget { .. }) | Err(e @ RuntimeError::Core(_)) => {
                // Refused before anything changed (or after whole evictions only, which lose
                // nothing): only this request fails.
                let _ = reply.send(Err(e));
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        if let Some(t) = self.traffic.get_mut(device.index()) {
            t.batches += 1;
            t.page_requests += demanded as u64;
            t.prefetched += (pages.len() - demanded) as u64;
            if let Some(log) = &mut self.request_log {
                log[device.index()].extend(pages[..demanded].iter().map(|p| p.page));
            }
            for p in &pages[..demanded] {
                match p.access {
                    tessera_core::Access::Read => t.read_requests += 1,
                    tessera_core::Access::Write => t.write_requests += 1,
                }
            }
        }
        let msg = Message::Request(RequestBatch { id, device, pages });
        match self.protocol.handle(msg) {
            Err(e) => {
                // Refused before any state changed (bad page, locked requester): only this
                // request fails.
                let _ = reply.send(Err(e.into()));
            }
            Ok(actions) => {
                if actions.is_empty() {
                    self.traffic[device.index()].deferred += 1;
                }
                self.waiting.insert(id, reply);
                if let Err(e) = self.execute(actions) {
                    self.fail_all(e);
                }
            }
        }
    }

    /// A staged batch (`Cmd::Stage`): checked against the protocol first, so that a refused
    /// stage evicts nothing; then room is made keeping the pages the device's running
    /// procedure holds, and the batch is granted at once.
    ///
    /// With a `start` (`ManagerHandle::stage_around`) the device's worker is idle while room
    /// is made (time stamps, write-backs, invalidations run at once); then the launch is
    /// queued, and the copies from home go into the device's slots from this thread during
    /// it, only the descriptors queuing behind it. Without one (`ManagerHandle::stage`) every
    /// device job queues on the worker in order behind whatever the caller queued before;
    /// either way the manager waits for the jobs as for any batch.
    fn stage(
        &mut self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        start: Option<LaunchStarter>,
        reply: Sender<Result<()>>,
    ) {
        if let Some(e) = &self.broken {
            let _ = reply.send(Err(e.clone()));
            return;
        }
        let refused = |m: &mut Self, e: RuntimeError| {
            if let Some(t) = m.traffic.get_mut(device.index()) {
                t.stage_refusals += 1;
            }
            let _ = reply.send(Err(e));
        };
        if !self.modes.is_empty() {
            if let Err(e) = self.check_modes(device, &pages) {
                refused(self, e);
                return;
            }
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        let batch = RequestBatch { id, device, pages };
        if let Err(e) = self.protocol.check_stage(&batch) {
            refused(self, e.into());
            return;
        }
        let keep = self.protocol.held(device).to_vec();
        let demanded = batch.pages.len();
        let mut batch = batch;
        // With `--prefetch tree` the stage takes the tree's choice too (UVM's prefetch, made
        // while the device computes), when the protocol grants the larger stage and it fits;
        // otherwise the stage goes alone, as a request's prefetch does.
        let extra = match self.stage_prefetch(device, &batch, &keep) {
            Ok(extra) => extra,
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        };
        let room = match extra {
            Some(all) => match self.make_room_for(device, &all.pages, demanded, &keep) {
                Ok(()) => {
                    batch = all;
                    self.note_prefetched(device, &batch.pages[demanded..])
                }
                Err(RuntimeError::OverBudget { .. }) => {
                    self.make_room_for(device, &batch.pages, demanded, &keep)
                }
                Err(e) => Err(e),
            },
            None => self.make_room_for(device, &batch.pages, demanded, &keep),
        };
        match room {
            Ok(()) => {}
            Err(e @ RuntimeError::OverBudget { .. }) | Err(e @ RuntimeError::Core(_)) => {
                refused(self, e);
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        }
        let t = &mut self.traffic[device.index()];
        t.staged_batches += 1;
        t.staged_pages += demanded as u64;
        t.prefetched += (batch.pages.len() - demanded) as u64;
        if let Some(start) = start {
            // The worker is idle until `start`: the sinks are fetched without waiting behind
            // the launch.
            if let Err(e) = self.fetch_sinks(device) {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
            start.start();
            self.copying_during_launch = Some(device);
        }
        match self.protocol.handle(Message::Stage(batch)) {
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
            Ok(actions) => {
                self.waiting.insert(id, reply);
                if let Err(e) = self.execute(actions) {
                    self.fail_all(e);
                }
            }
        }
        self.copying_during_launch = None;
    }

    /// The stage with its tree prefetch added (pages outside the batch and the held pages,
    /// read copies from home), if there is any and the protocol would grant it; `None` to
    /// stage the batch alone.
    fn stage_prefetch(
        &self,
        device: DeviceId,
        batch: &RequestBatch,
        held: &[GlobalPage],
    ) -> Result<Option<RequestBatch>> {
        let held: HashSet<GlobalPage> = held.iter().copied().collect();
        let extra: Vec<PageRequest> = self
            .tree_prefetch(device, &batch.pages)?
            .into_iter()
            .filter(|r| !held.contains(&r.page))
            .collect();
        if extra.is_empty() {
            return Ok(None);
        }
        let mut all = batch.clone();
        all.pages.extend(extra);
        Ok(self.protocol.check_stage(&all).is_ok().then_some(all))
    }

    /// Asks `device` for a slot sink of each physical memory it has that the manager has not
    /// asked about yet (`Device::slot_sink`; `None` is remembered too).
    fn fetch_sinks(&mut self, device: DeviceId) -> Result<()> {
        let ids: Vec<u16> = self.memories[device.index()]
            .memories()
            .iter()
            .map(|m| m.id)
            .filter(|&m| !self.sinks.contains_key(&(device, m)))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let got = self.workers[device.index()].call(move |dev| {
            Ok(ids
                .into_iter()
                .map(|m| (m, dev.slot_sink(m)))
                .collect::<Vec<_>>())
        })?;
        for (m, sink) in got {
            self.sinks.insert((device, m), sink);
        }
        Ok(())
    }

    /// Evicts enough of `device`'s pages that the batch fits its budget, never a page of the
    /// batch, of `keep`, or of a non-evictable object; thrashing pages that are pinned go only
    /// when nothing else can. Also counts refaults and thrashing, and records the trace.
    /// `pages[..demanded]` were asked for; the rest are prefetched, which are not faults (no
    /// refaults counted) and not steps of the trace (OPT needs only what had to be resident).
    fn make_room(
        &mut self,
        device: DeviceId,
        pages: &[PageRequest],
        demanded: usize,
        keep: &[GlobalPage],
    ) -> Result<()> {
        if device.index() >= self.workers.len() || self.protocol.locked().contains(device) {
            // The protocol refuses these, with its own error, before anything changes.
            return Ok(());
        }
        self.make_room_for(device, pages, demanded, keep)
    }

    /// `make_room` for a device that is unlocked, or locked and staging, whose `keep` then
    /// holds every page its running procedure holds (the protocol refuses to evict those).
    fn make_room_for(
        &mut self,
        device: DeviceId,
        pages: &[PageRequest],
        demanded: usize,
        keep: &[GlobalPage],
    ) -> Result<()> {
        let d = device.index();
        let mut sizes: HashMap<u64, (u64, u64)> = HashMap::new();
        for r in pages {
            let (_, _, bytes) = self.page_bytes(r.page)?;
            let e = sizes.entry(bytes).or_default();
            e.0 += 1;
            if self.slots[d]
                .get(r.page.index())
                .copied()
                .flatten()
                .is_none()
            {
                e.1 += 1;
            }
        }
        let now = self.traffic[d].batches;
        let requested: HashSet<GlobalPage> = pages.iter().map(|r| r.page).collect();
        let kept_set: HashSet<GlobalPage> = keep.iter().copied().collect();
        for (bytes, (count, need)) in sizes {
            let room = self.memories[d].room(bytes);
            if need <= room {
                continue;
            }
            let k = (need - room) as usize;
            // Resident pages of this size by what may happen to them.
            let mut free_to_go = Vec::new();
            let mut pinned_now = 0u64;
            let mut kept = 0u64;
            for p in self.evictors[d].resident.iter() {
                let Ok((obj, _, b)) = self.page_bytes(p) else {
                    continue;
                };
                if b != bytes {
                    continue;
                }
                if requested.contains(&p) {
                    // Stays, and is already counted in the batch.
                    continue;
                }
                if kept_set.contains(&p) {
                    kept += 1;
                } else if self.pinned.contains(&obj) {
                    pinned_now += 1;
                } else {
                    free_to_go.push(p);
                }
            }
            let capacity = self.memories[d].capacity(bytes).saturating_sub(pinned_now);
            if (free_to_go.len() as u64) < k as u64 {
                return Err(RuntimeError::OverBudget {
                    device,
                    pages: count + kept,
                    capacity,
                    page_bytes: bytes,
                    budget_bytes: self.memories[d].budget_bytes,
                });
            }
            let stamps: HashMap<GlobalPage, u64> =
                if self.evictors[d].resident.policy().uses_stamps() {
                    let ask = free_to_go.clone();
                    let times = self.workers[d].call(move |dev| dev.page_times(&ask))?;
                    free_to_go.iter().copied().zip(times).collect()
                } else {
                    HashMap::new()
                };
            let go: HashSet<GlobalPage> = free_to_go.into_iter().collect();
            self.resolve_prefetched(device, go.iter().copied(), &stamps)?;
            let ev = &mut self.evictors[d];
            let pins = &ev.pins;
            let stamp = |p: GlobalPage| stamps.get(&p).copied().unwrap_or(0);
            let spared = |p: GlobalPage| pins.get(&p).is_some_and(|&until| until > now);
            let mut victims = ev
                .resident
                .choose(k, |p| go.contains(&p) && !spared(p), stamp);
            if victims.len() < k {
                let more = ev.resident.choose(
                    k - victims.len(),
                    |p| go.contains(&p) && !victims.contains(&p),
                    stamp,
                );
                victims.extend(more);
            }
            self.evict(device, victims)?;
        }
        // Counted once room is made: a refused batch (retried alone after its prefetch did
        // not fit) must not count its refaults twice.
        self.count_refaults(device, &pages[..demanded], now);
        // Only batches that are granted are steps of the trace: a refused one needed nothing.
        if let Some(t) = &mut self.trace {
            let mut step: Vec<GlobalPage> = pages[..demanded]
                .iter()
                .map(|r| r.page)
                .chain(keep.iter().copied())
                .collect();
            step.sort_unstable();
            step.dedup();
            t[d].push(step);
        }
        Ok(())
    }

    /// The pages `Prefetch::Tree` adds to a batch for `device`: per object the batch touches,
    /// the bitmap tree's choice, kept to pages no device has modified (a read copy from home,
    /// which disturbs no other device and so can never be deferred behind a lock).
    fn prefetch_for(&self, device: DeviceId, pages: &[PageRequest]) -> Result<Vec<PageRequest>> {
        if self.protocol.locked().contains(device) {
            return Ok(Vec::new());
        }
        self.tree_prefetch(device, pages)
    }

    /// `prefetch_for` without its lock rule: a stage comes from a locked device, and its
    /// prefetch goes into the stage.
    fn tree_prefetch(&self, device: DeviceId, pages: &[PageRequest]) -> Result<Vec<PageRequest>> {
        let d = device.index();
        if self.prefetch == Prefetch::Off || d >= self.workers.len() {
            return Ok(Vec::new());
        }
        let asked: HashSet<GlobalPage> = pages.iter().map(|r| r.page).collect();
        let mut by_object: HashMap<ObjectId, (ObjectEntry, Vec<u64>)> = HashMap::new();
        for r in pages {
            // Unknown pages: the protocol refuses the batch with its own error.
            let Some((e, local)) = self.space.object_of(r.page) else {
                return Ok(Vec::new());
            };
            by_object
                .entry(e.id)
                .or_insert_with(|| (*e, Vec::new()))
                .1
                .push(local);
        }
        let mut out = Vec::new();
        for (id, (e, locals)) in by_object {
            if self.pinned.contains(&id) {
                continue;
            }
            let first = e.pages().start;
            let resident = |local: u64| {
                self.slots[d]
                    .get((first + local) as usize)
                    .copied()
                    .flatten()
                    .is_some()
            };
            let more = tessera_core::prefetch::tree_prefetch(
                e.desc.page_count(),
                PREFETCH_REGION,
                tessera_core::prefetch::DEFAULT_THRESHOLD_PCT,
                resident,
                &locals,
            );
            for local in more {
                let page = GlobalPage(first + local);
                if asked.contains(&page) {
                    continue;
                }
                if self.protocol.directory().entry(page)?.owner.is_none() {
                    out.push(PageRequest {
                        page,
                        access: tessera_core::Access::Read,
                    });
                }
            }
        }
        out.sort_unstable_by_key(|r| r.page);
        Ok(out)
    }

    /// Remembers the time stamps of pages about to be prefetched, so that a later, newer
    /// stamp shows a launch used one (a prefetch hit).
    fn note_prefetched(&mut self, device: DeviceId, extra: &[PageRequest]) -> Result<()> {
        if extra.is_empty() {
            return Ok(());
        }
        let ask: Vec<GlobalPage> = extra.iter().map(|r| r.page).collect();
        let times = {
            let ask = ask.clone();
            self.workers[device.index()].call(move |dev| dev.page_times(&ask))?
        };
        let ev = &mut self.evictors[device.index()];
        for (p, t) in ask.into_iter().zip(times) {
            ev.prefetched.insert(p, t);
        }
        Ok(())
    }

    /// Counts, among `pages`, the prefetched ones a launch has touched since they came (a
    /// newer time stamp). Stamps in `known`, already read for the policy, are reused; the
    /// rest are asked of the device.
    fn resolve_prefetched(
        &mut self,
        device: DeviceId,
        pages: impl IntoIterator<Item = GlobalPage>,
        known: &HashMap<GlobalPage, u64>,
    ) -> Result<()> {
        let d = device.index();
        let open: Vec<GlobalPage> = pages
            .into_iter()
            .filter(|p| self.evictors[d].prefetched.contains_key(p))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let missing: Vec<GlobalPage> = open
            .iter()
            .copied()
            .filter(|p| !known.contains_key(p))
            .collect();
        let mut now: HashMap<GlobalPage, u64> = HashMap::new();
        if !missing.is_empty() {
            let ask = missing.clone();
            let times = self.workers[d].call(move |dev| dev.page_times(&ask))?;
            now.extend(missing.into_iter().zip(times));
        }
        let ev = &mut self.evictors[d];
        for p in open {
            let t = known.get(&p).or_else(|| now.get(&p)).copied().unwrap_or(0);
            if ev.prefetched.get(&p).is_some_and(|&at| t > at) {
                ev.prefetched.remove(&p);
                self.traffic[d].prefetch_hits += 1;
            }
        }
        Ok(())
    }

    /// Settles the hits of every device's prefetched pages that are still resident, before
    /// the counters are read.
    fn count_prefetch_hits(&mut self) -> Result<()> {
        for d in 0..self.workers.len() {
            let open: Vec<GlobalPage> = self.evictors[d].prefetched.keys().copied().collect();
            self.resolve_prefetched(DeviceId(d as u8), open, &HashMap::new())?;
        }
        Ok(())
    }

    fn count_refaults(&mut self, device: DeviceId, pages: &[PageRequest], now: u64) {
        let d = device.index();
        let ev = &mut self.evictors[d];
        let t = &mut self.traffic[d];
        let cap_pins = (ev.resident.len() as u64).max(2) / 2;
        ev.pins.retain(|_, until| *until > now);
        for r in pages {
            if ev.resident.contains(r.page) {
                continue;
            }
            let Some(at) = ev.evicted.remove(&r.page) else {
                continue;
            };
            t.refaults += 1;
            if now.saturating_sub(at) > THRASH_WINDOW {
                ev.events.remove(&r.page);
                continue;
            }
            let n = ev.events.entry(r.page).or_default();
            *n += 1;
            if *n == THRASH_EVENTS {
                t.thrashing_pages += 1;
            }
            if *n >= THRASH_EVENTS
                && self.thrashing == Thrashing::Pin
                && (ev.pins.len() as u64) < cap_pins
                && ev.pins.insert(r.page, now + PIN_BATCHES).is_none()
            {
                t.thrash_pins += 1;
            }
        }
    }

    /// Releases the pages through the protocol: a modified one is written home first.
    fn evict(&mut self, device: DeviceId, victims: Vec<GlobalPage>) -> Result<()> {
        if victims.is_empty() {
            return Ok(());
        }
        let actions = self.protocol.handle(Message::Evict {
            device,
            pages: victims,
        })?;
        self.evicting = true;
        if let Some(p) = self.pressed.get(device.index()) {
            p.store(true, Ordering::Relaxed);
        }
        let res = self.execute(actions);
        self.evicting = false;
        res
    }

    /// Reads, before carrying out `actions`, every page they will read from a device (write-backs
    /// and device-to-device copies): per source device, one job revokes write access to all of
    /// them and reads them, where reading them one at a time cost a round trip to the worker
    /// per page (most of an oversubscribed run's request time, and of a multi-device pass's
    /// boundary pages). A page written back is read by the worker straight into its home copy
    /// (one copy; `written_home`), the others into pooled buffers (`read_ahead`), which
    /// `execute` then hands on. A page copied to a device of the source's peer group, and not
    /// written home by the same list, is not read at all: it is only made read-only here (`peer_ahead`), and `carry_out` queues a
    /// copy on the device (`DeviceOp::PeerCopy`) reading the source's slot, which the list
    /// does not overwrite before that copy is acknowledged (`Outbox::peer_sources`).
    ///
    /// Reading early is the same as reading in order unless an earlier action in the list
    /// copies to, installs on or invalidates that (device, page) first; those are left to be
    /// read in order. Likewise a write-back is done early only if no earlier action in the list
    /// copies that page from home (which must see the older home value). (Under the memory lock
    /// neither can happen: a device granted a page is locked, so no later grant in the same
    /// list takes it from it.)
    fn read_ahead(&mut self, actions: &[Action]) -> Result<()> {
        let mut changed: HashSet<(DeviceId, GlobalPage)> = HashSet::new();
        let mut from_home: HashSet<GlobalPage> = HashSet::new();
        let n = self.workers.len();
        let mut reads: Vec<Vec<(GlobalPage, SlotAddr)>> = vec![Vec::new(); n];
        let mut backs: Vec<Vec<HomeBound>> = vec![Vec::new(); n];
        let mut wanted: HashSet<(DeviceId, GlobalPage)> = HashSet::new();
        let mut peer: Vec<Vec<(GlobalPage, SlotAddr)>> = vec![Vec::new(); n];
        let mut peer_wanted: HashSet<(DeviceId, GlobalPage)> = HashSet::new();
        // A page this list also writes home is read back to the host anyway; the reader is
        // then written from there (one wait), not copied on the device as well (two waits:
        // on the H100, boiling 1024² on 2 devices spent 12.8–13.5 ms a frame in the manager
        // with such pages copied on the device, 9.0–9.7 without; docs/EVALUATION.md).
        let homebound: HashSet<(DeviceId, GlobalPage)> = actions
            .iter()
            .filter_map(|a| match *a {
                Action::WriteBack { page, from } => Some((from, page)),
                _ => None,
            })
            .collect();
        for a in actions {
            match *a {
                Action::WriteBack { page, from } => {
                    let key = (from, page);
                    if !changed.contains(&key) && !from_home.contains(&page) && wanted.insert(key) {
                        let at = self.slot(from, page)?;
                        let (obj, local, bytes) = self.page_bytes(page)?;
                        backs[from.index()].push((page, at, obj, local, bytes));
                    }
                }
                Action::Copy {
                    page,
                    from: Source::Device(o),
                    to,
                } => {
                    changed.insert((to, page));
                    let key = (o, page);
                    if self.peers(o, to) && !homebound.contains(&key) {
                        // Only made read-only now; copied on the device in order (`carry_out`),
                        // while the source slot still holds what it holds now.
                        if !changed.contains(&key) && peer_wanted.insert(key) {
                            let at = self.slot(o, page)?;
                            peer[o.index()].push((page, at));
                        }
                    } else if !changed.contains(&key) && wanted.insert(key) {
                        let at = self.slot(o, page)?;
                        reads[o.index()].push((page, at));
                    }
                }
                Action::Copy { page, to, .. } => {
                    changed.insert((to, page));
                    from_home.insert(page);
                }
                Action::Invalidate { page, device } | Action::Install { page, device, .. } => {
                    changed.insert((device, page));
                }
                _ => {}
            }
        }
        let mut out = Outbox::new(n, self.home.clone(), self.held.clone());
        let mut jobs = Vec::new();
        for (d, ((list, back), peer)) in reads.into_iter().zip(backs).zip(peer).enumerate() {
            if list.is_empty() && back.is_empty() && peer.is_empty() {
                continue;
            }
            let device = DeviceId(d as u8);
            let revoked = list
                .iter()
                .map(|&(page, at)| (page, at))
                .chain(back.iter().map(|&(page, at, ..)| (page, at)))
                .chain(peer.iter().copied());
            for (page, at) in revoked {
                out.push(
                    device,
                    DeviceOp::Set(page, PageDescriptor::resident(at, false)),
                );
            }
            out.flush(&self.workers, device);
            let mut bufs = Vec::with_capacity(list.len());
            for &(page, _) in &list {
                let (_, _, bytes) = self.page_bytes(page)?;
                bufs.push(self.buffer(bytes));
            }
            let slots: Vec<SlotAddr> = list.iter().map(|&(_, at)| at).collect();
            let home_slots: Vec<_> = back
                .iter()
                .map(|&(_, at, obj, local, bytes)| (at, obj, local, bytes))
                .collect();
            let mut mems: Vec<u16> = peer
                .iter()
                .map(|&(_, at)| at.memory)
                .filter(|&m| !self.peer_memories.contains_key(&(device, m)))
                .collect();
            mems.sort_unstable();
            mems.dedup();
            let home = self.home.clone();
            // Behind the revocations in the worker's queue: once it answers, every launch that
            // could still store into the pages has run (and, on a shared queue, was submitted
            // before any peer copy of this list will be).
            let job = self.workers[d].submit(move |dev| {
                let mut bufs = bufs;
                // All of the job's slots in one read where the backend batches reads (a GPU:
                // one wait instead of one per page), else each straight into its buffer.
                let all: Vec<SlotAddr> = slots
                    .iter()
                    .copied()
                    .chain(home_slots.iter().map(|h| h.0))
                    .collect();
                let batched = if all.len() > 1 {
                    dev.read_slots(&all)?
                } else {
                    None
                };
                if let Some(data) = batched {
                    if data.len() != all.len() {
                        return Err(RuntimeError::Config(format!(
                            "{} slots read back for {} asked",
                            data.len(),
                            all.len()
                        )));
                    }
                    let mut data = data.into_iter();
                    for (buf, d) in bufs.iter_mut().zip(data.by_ref()) {
                        copy_slot(buf, &d)?;
                    }
                    for ((_, obj, local, bytes), d) in home_slots.into_iter().zip(data) {
                        let mut h = write_home(&home)?;
                        copy_slot(h.page_mut(obj, local, bytes)?, &d)?;
                    }
                } else {
                    for (at, buf) in slots.into_iter().zip(bufs.iter_mut()) {
                        dev.read_slot_to(at, buf)?;
                    }
                    // One page per lock, so workers writing back at once interleave.
                    for (at, obj, local, bytes) in home_slots {
                        let mut h = write_home(&home)?;
                        dev.read_slot_to(at, h.page_mut(obj, local, bytes)?)?;
                    }
                }
                let handles = mems
                    .into_iter()
                    .map(|m| dev.peer_memory(m).map(|h| (m, h)))
                    .collect::<Result<Vec<_>>>()?;
                Ok((bufs, handles))
            });
            jobs.push((device, list, back, peer, job));
        }
        let sent = out.finish(&self.workers);
        self.recycle(out.take_spent());
        // Every job is waited for before any error goes out, so none is still writing home
        // when the manager carries on.
        let done: Vec<_> = jobs
            .into_iter()
            .map(|(device, list, back, peer, job)| {
                (device, list, back, peer, job.wait().and_then(|r| r))
            })
            .collect();
        sent?;
        for (device, list, back, peer, res) in done {
            let (bufs, handles) = res?;
            for (m, h) in handles {
                self.peer_memories.insert((device, m), h);
            }
            for (page, at) in peer {
                self.peer_ahead.insert((device, page), at);
            }
            for ((page, _), data) in list.into_iter().zip(bufs) {
                self.read_ahead.insert((device, page), data);
            }
            for (page, ..) in back {
                self.written_home.insert((device, page));
            }
        }
        Ok(())
    }

    /// A page buffer of `bytes` from the pool, or a fresh one.
    fn buffer(&mut self, bytes: u64) -> Vec<u8> {
        match self.pool.pop() {
            Some(mut b) => {
                b.resize(bytes as usize, 0);
                b
            }
            None => vec![0; bytes as usize],
        }
    }

    /// Returns spent page buffers to the pool, up to `POOL_BYTES`.
    fn recycle(&mut self, spent: Vec<Vec<u8>>) {
        let mut held: usize = self.pool.iter().map(Vec::capacity).sum();
        for b in spent {
            if held + b.capacity() > POOL_BYTES {
                break;
            }
            held += b.capacity();
            self.pool.push(b);
        }
    }

    /// Whether a page moves from device `from` to device `to` as a copy on the device.
    fn peers(&self, from: DeviceId, to: DeviceId) -> bool {
        let g = |d: DeviceId| self.peer_groups.get(d.index()).copied().flatten();
        from != to && g(from).is_some() && g(from) == g(to)
    }

    fn page_bytes(&self, page: GlobalPage) -> Result<(ObjectId, u64, u64)> {
        let (e, local) = self
            .space
            .object_of(page)
            .ok_or(tessera_core::CoreError::UnknownPage(page))?;
        Ok((e.id, local, e.desc.page_bytes()))
    }

    fn slot(&self, d: DeviceId, page: GlobalPage) -> Result<SlotAddr> {
        self.slots[d.index()]
            .get(page.index())
            .copied()
            .flatten()
            .ok_or_else(|| RuntimeError::Backend {
                device: d,
                message: format!("directory lists a copy of {page} the device does not hold"),
            })
    }

    fn read_slot(&self, d: DeviceId, at: SlotAddr) -> Result<Vec<u8>> {
        self.workers[d.index()].call(move |dev| dev.read_slot(at))
    }

    /// Carries out actions in order. Slot writes and descriptor updates are collected per
    /// device and sent as one job per device (a worker runs its queue in order, and a driver
    /// launches only after the reply), so a batch of a thousand pages costs a few channel
    /// round trips, not thousands. A device's collected work is sent before any read from it,
    /// and every acknowledgement is in before a request's reply goes out.
    fn execute(&mut self, actions: Vec<Action>) -> Result<()> {
        let res = self
            .read_ahead(&actions)
            .and_then(|()| self.execute_in_order(actions));
        let left: Vec<Vec<u8>> = self.read_ahead.drain().map(|(_, b)| b).collect();
        self.recycle(left);
        self.written_home.clear();
        self.peer_ahead.clear();
        res
    }

    fn execute_in_order(&mut self, actions: Vec<Action>) -> Result<()> {
        let mut out = Outbox::new(self.workers.len(), self.home.clone(), self.held.clone());
        let res = self.carry_out(&mut out, actions);
        // After an error too: no job of this list is still running when the manager goes on.
        let res = res.and(out.finish(&self.workers));
        let spent = out.take_spent();
        self.recycle(spent);
        res
    }

    fn carry_out(&mut self, out: &mut Outbox, actions: Vec<Action>) -> Result<()> {
        for a in actions {
            match a {
                Action::Copy { page, from, to } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    // The bytes are in the source's slot on a device both share (copied there),
                    // at home (the worker copies them into the slot itself: one copy), read
                    // ahead from the source, or (rarely) read from it now.
                    let fill = match from {
                        Source::Home => {
                            self.traffic[to.index()].host_to_device.add(bytes);
                            Fill::Home
                        }
                        Source::Device(o) => {
                            self.traffic[to.index()].add_from_device(o.index(), bytes);
                            if let Some(src) = self.peer_ahead.remove(&(o, page)) {
                                self.traffic[to.index()].device_to_device_peer.add(bytes);
                                Fill::Peer(o, src)
                            } else if self.written_home.contains(&(o, page)) {
                                Fill::Home
                            } else if let Some(d) = self.read_ahead.remove(&(o, page)) {
                                Fill::Bytes(d)
                            } else {
                                Fill::Bytes(self.revoke_and_read(out, o, page)?)
                            }
                        }
                    };
                    let (at, created) = self.memories[to.index()].alloc(bytes)?;
                    // The slot was freed earlier in this list and a queued peer copy still
                    // reads it: that copy must be done before anything overwrites the slot.
                    if out.peer_sources.contains(&(to, at)) {
                        out.finish(&self.workers)?;
                    }
                    let fresh_memory = created.is_some();
                    if let Some(m) = created {
                        out.push(to, DeviceOp::Create(m.id, m.slot_bytes, m.capacity));
                    }
                    if matches!(fill, Fill::Home)
                        && !fresh_memory
                        && self.copy_during_launch(out, to, at, obj, local, bytes)?
                    {
                        self.slots[to.index()][page.index()] = Some(at);
                        self.evictors[to.index()].resident.insert(page);
                        continue;
                    }
                    let op = match fill {
                        Fill::Bytes(d) => DeviceOp::Write(at, d),
                        Fill::Home => DeviceOp::WriteFromHome {
                            at,
                            obj,
                            local,
                            bytes,
                        },
                        Fill::Peer(o, src) => {
                            let from = self
                                .peer_memories
                                .get(&(o, src.memory))
                                .cloned()
                                .ok_or_else(|| RuntimeError::Backend {
                                    device: o,
                                    message: format!(
                                        "no handle to physical memory {} for a peer copy",
                                        src.memory
                                    ),
                                })?;
                            out.peer_sources.insert((o, src));
                            DeviceOp::PeerCopy(PeerCopy {
                                from,
                                from_slot: src.slot,
                                at,
                            })
                        }
                    };
                    out.push(to, op);
                    self.slots[to.index()][page.index()] = Some(at);
                    self.evictors[to.index()].resident.insert(page);
                }
                Action::WriteBack { page, from } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    self.traffic[from.index()].device_to_host.add(bytes);
                    if self.evicting {
                        self.traffic[from.index()].eviction_write_backs += 1;
                    } else {
                        self.traffic[from.index()].coherence_write_backs += 1;
                    }
                    if self.written_home.contains(&(from, page)) {
                        // The source's worker wrote it home during `read_ahead`.
                        continue;
                    }
                    // Left in `read_ahead`, not taken: a read of a modified page copies the
                    // same data on to the reader next, and must not read the owner twice.
                    let read;
                    let data = match self.read_ahead.get(&(from, page)) {
                        Some(d) => d,
                        None => {
                            read = self.revoke_and_read(out, from, page)?;
                            &read
                        }
                    };
                    debug_assert_eq!(data.len() as u64, bytes);
                    // Copies from home queued before this write must read the value before it.
                    if out.reads_home {
                        out.finish(&self.workers)?;
                    }
                    write_home(&self.home)?.write_page(obj, local, data)?;
                }
                Action::Invalidate { page, device } => {
                    let at = self.slot(device, page)?;
                    self.slots[device.index()][page.index()] = None;
                    self.memories[device.index()].free(at)?;
                    out.freed.insert((device, at));
                    let ev = &mut self.evictors[device.index()];
                    ev.resident.remove(page);
                    // Leaving before a launch was seen using it: not a hit (eviction settles
                    // its candidates' hits before choosing; another device's write does not).
                    ev.prefetched.remove(&page);
                    if self.evicting {
                        let t = &mut self.traffic[device.index()];
                        t.evictions += 1;
                        ev.evicted.insert(page, t.batches);
                    } else {
                        self.traffic[device.index()].invalidations += 1;
                    }
                    out.push(device, DeviceOp::Set(page, PageDescriptor::NOT_RESIDENT));
                }
                Action::Install {
                    page,
                    device,
                    writable,
                } => self.set_page(out, device, page, writable)?,
                Action::GrantWrite { page, device } => self.set_page(out, device, page, true)?,
                Action::Downgrade { page, device } => self.set_page(out, device, page, false)?,
                Action::Complete { request, .. } => {
                    let res = out.finish(&self.workers);
                    let failed = res.clone().err();
                    if let Some(r) = self.waiting.remove(&request) {
                        let _ = r.send(res);
                    }
                    if let Some(e) = failed {
                        return Err(e);
                    }
                }
            }
        }
        out.finish(&self.workers)
    }

    /// Copies a page from home into `to`'s slot `at` on this thread, now, while `to` may be
    /// running a launch (`stage_around`), where that is safe and the device takes such writes:
    /// `false` leaves the copy to the worker, behind the launch. A slot freed by this list's
    /// own invalidations may still be mapped by the running launch until the worker runs them
    /// (the quarantine), so it is filled on the worker.
    fn copy_during_launch(
        &mut self,
        out: &Outbox,
        to: DeviceId,
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    ) -> Result<bool> {
        if self.copying_during_launch != Some(to) || out.freed.contains(&(to, at)) {
            return Ok(false);
        }
        let Some(Some(sink)) = self.sinks.get(&(to, at.memory)) else {
            return Ok(false);
        };
        sink.write_slot(at.slot, read_home(&self.home)?.page(obj, local, bytes)?)
            .map_err(|message| RuntimeError::Backend {
                device: to,
                message: format!("staged copy into physical memory {}: {message}", at.memory),
            })?;
        self.traffic[to.index()]
            .host_to_device_during_launch
            .add(bytes);
        Ok(true)
    }

    /// Reads the owner's copy of a page it is about to lose write access to. The owner need
    /// not be locked, so a launch of its own could store into the page between our read and
    /// a later downgrade, and that store would be lost (found by the litmus runner). Making
    /// the page read-only on the owner's worker first, in the same queue as the read, closes
    /// the window: launches before it are in the data we read, launches after it fault and
    /// ask the memory manager, which answers only after this batch.
    fn revoke_and_read(
        &self,
        out: &mut Outbox,
        owner: DeviceId,
        page: GlobalPage,
    ) -> Result<Vec<u8>> {
        let at = self.slot(owner, page)?;
        out.push(
            owner,
            DeviceOp::Set(page, PageDescriptor::resident(at, false)),
        );
        out.flush(&self.workers, owner);
        self.read_slot(owner, at)
    }

    fn set_page(
        &self,
        out: &mut Outbox,
        device: DeviceId,
        page: GlobalPage,
        writable: bool,
    ) -> Result<()> {
        let at = self.slot(device, page)?;
        out.push(
            device,
            DeviceOp::Set(page, PageDescriptor::resident(at, writable)),
        );
        Ok(())
    }

    /// Sizes the slot maps and the devices' page tables to the address space; the directory
    /// follows the space through `Create` and `Free`.
    fn resize_tables(&mut self) -> Result<()> {
        let pages = self.space.page_count();
        for s in &mut self.slots {
            s.resize(pages as usize, None);
        }
        let acks: Vec<_> = self
            .workers
            .iter()
            .map(|w| w.submit(move |d| d.resize_page_table(pages)))
            .collect();
        acks.into_iter().try_for_each(|p| p.wait()?)
    }

    /// A store to a replicate-read object, or any request for a remote page (which a device
    /// never makes: its accesses go in place), is refused.
    fn check_modes(&self, device: DeviceId, pages: &[PageRequest]) -> Result<()> {
        for p in pages {
            let Some((e, _)) = self.space.object_of(p.page) else {
                continue;
            };
            match self.modes.get(&e.id) {
                Some(AccessMode::ReplicateRead) if p.access == tessera_core::Access::Write => {
                    return Err(RuntimeError::ReadOnlyObject {
                        object: e.id,
                        device,
                        page: p.page,
                    })
                }
                Some(AccessMode::Remote) => {
                    return Err(RuntimeError::RemoteRequested {
                        object: e.id,
                        device,
                        page: p.page,
                    })
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn place(&mut self, id: ObjectId, locations: Vec<Location>) -> Result<()> {
        let e = *self.space.get(id)?;
        let Some(r) = self.remote.get(id) else {
            return Err(RuntimeError::Config(format!(
                "object {id} is {}, not remote: only a remote object's pages are placed",
                self.modes.get(&id).copied().unwrap_or_default()
            )));
        };
        if locations.len() as u64 != e.desc.page_count() {
            return Err(RuntimeError::Config(format!(
                "object {id} has {} pages; {} locations given",
                e.desc.page_count(),
                locations.len()
            )));
        }
        for l in &locations {
            if let Location::Device(d) = *l {
                if d as usize >= self.workers.len() {
                    return Err(tessera_core::CoreError::UnknownDevice(DeviceId(d)).into());
                }
            }
        }
        for (local, l) in locations.into_iter().enumerate() {
            r.place(local as u64, l);
        }
        Ok(())
    }

    fn create(
        &mut self,
        desc: ObjectDesc,
        data: Option<Vec<u8>>,
        mode: AccessMode,
    ) -> Result<ObjectEntry> {
        let want = host_len(&desc);
        if let Some(d) = &data {
            if d.len() as u64 != want {
                return Err(RuntimeError::DataSize {
                    object: ObjectId(u32::MAX),
                    got: d.len(),
                    want: want as usize,
                });
            }
        }
        let e = self.space.create(desc)?;
        let created = self.protocol.handle(Message::Create { pages: e.pages() });
        if let Err(err) = created {
            // The space and the directory disagree only if the bookkeeping is wrong; undo so
            // that at least this object does not half exist.
            self.space.free(e.id)?;
            return Err(err.into());
        }
        if mode == AccessMode::Remote {
            // Its pages live in the shared pool, not the home store: one location, no copy.
            let mut pages = vec![0u8; (desc.page_count() * desc.page_bytes()) as usize];
            if let Some(d) = data {
                pack(&desc, &d, &mut pages);
            }
            self.remote
                .insert(Arc::new(RemoteObject::new(&e, &pages, Location::Host)));
            self.modes.insert(e.id, mode);
            self.resize_tables()?;
            return Ok(e);
        }
        if mode != AccessMode::Migrate {
            self.modes.insert(e.id, mode);
        }
        let created = write_home(&self.home).and_then(|mut h| {
            let home = h.create(e.id, desc.page_count() * desc.page_bytes())?;
            if let Some(d) = data {
                pack(&desc, &d, home);
            }
            Ok(())
        });
        if let Err(err) = created {
            // No room for its home copy (a full disk under a home file): the object must
            // not half exist. No device holds a page of it yet, so freeing moves nothing.
            let actions = self.protocol.handle(Message::Free { pages: e.pages() })?;
            self.execute(actions)?;
            self.space.free(e.id)?;
            return Err(err);
        }
        // Freeing dropped every device's copy of reused pages, so no device maps one of them.
        self.resize_tables()?;
        Ok(e)
    }

    /// Refused, changing nothing, while a device is inside a pass holding one of the object's
    /// pages or a deferred request names one (`CoreError::FreeWhileLocked`,
    /// `CoreError::FreeWhileDeferred`): free between passes. Otherwise every device's copy is
    /// dropped, without writing modified ones home, since the data goes with the object.
    fn free(&mut self, id: ObjectId) -> Result<()> {
        let e = *self.space.get(id)?;
        let actions = self.protocol.handle(Message::Free { pages: e.pages() })?;
        if let Err(err) = self.execute(actions) {
            // The directory has forgotten copies some device may still map.
            self.fail_all(err.clone());
            return Err(err);
        }
        self.space.free(id)?;
        if self.modes.remove(&id) == Some(AccessMode::Remote) {
            self.remote.remove(id);
        } else {
            write_home(&self.home)?.remove(id)?;
        }
        self.pinned.remove(&id);
        for p in e.pages() {
            for ev in &mut self.evictors {
                ev.forget(GlobalPage(p));
            }
        }
        self.resize_tables()
    }

    fn read(&mut self, id: ObjectId) -> Result<Vec<u8>> {
        let e = *self.space.get(id)?;
        if let Some(r) = self.remote.get(id) {
            let mut out = vec![0u8; host_len(&e.desc) as usize];
            unpack(&e.desc, &r.bytes()?, &mut out);
            return Ok(out);
        }
        let pages = self.read_packed(id)?;
        let mut out = vec![0u8; host_len(&e.desc) as usize];
        unpack(&e.desc, &pages, &mut out);
        Ok(out)
    }

    /// The object's latest pages, packed: home copies, with modified pages from their owners.
    fn read_packed(&mut self, id: ObjectId) -> Result<Vec<u8>> {
        let e = *self.space.get(id)?;
        if self.remote.get(id).is_some() {
            return Err(RuntimeError::Config(format!(
                "object {id} is remote: its pages are not kept as pages"
            )));
        }
        let bytes = e.desc.page_bytes() as usize;
        let mut pages = read_home(&self.home)?.object(id)?.to_vec();
        // Modified pages come from their owners: one job per device, not one per page.
        let mut by_owner: Vec<Vec<(usize, SlotAddr)>> = vec![Vec::new(); self.workers.len()];
        for (local, page) in e.pages().enumerate() {
            if let Some(o) = self.protocol.directory().entry(GlobalPage(page))?.owner {
                by_owner[o.index()].push((local, self.slot(o, GlobalPage(page))?));
                self.traffic[o.index()].host_reads += 1;
            }
        }
        let jobs: Vec<_> = by_owner
            .into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(d, v)| {
                self.workers[d].submit(move |dev| {
                    v.into_iter()
                        .map(|(local, at)| Ok((local, dev.read_slot(at)?)))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        for j in jobs {
            for (local, data) in j.wait()?? {
                pages[local * bytes..(local + 1) * bytes].copy_from_slice(&data);
            }
        }
        Ok(pages)
    }

    fn memory_use(&self) -> (Vec<DeviceMemoryUse>, Vec<DirEntry>) {
        let mut out: Vec<DeviceMemoryUse> = self
            .memories
            .iter()
            .map(|m| DeviceMemoryUse {
                reserved_bytes: m.reserved_bytes(),
                ..Default::default()
            })
            .collect();
        let entries = self.protocol.directory().entries();
        for obj in self.space.live_objects() {
            let bytes = obj.desc.page_bytes();
            for p in obj.pages() {
                let copies = entries[p as usize].copies;
                for d in copies.iter() {
                    let u = &mut out[d.index()];
                    if copies.len() == 1 {
                        u.unique_pages += 1;
                        u.unique_bytes += bytes;
                    } else {
                        u.shared_pages += 1;
                        u.shared_bytes += bytes;
                    }
                }
            }
        }
        (out, entries.to_vec())
    }
}

/// Work for one device worker, collected while a batch of actions is carried out.
enum DeviceOp {
    Create(u16, u64, u32),
    /// Writes these bytes into the slot; the buffer comes back to the manager's pool.
    Write(SlotAddr, Vec<u8>),
    /// Copies the page's home copy into the slot, on the worker: one copy, where copying it
    /// into a vector to hand over cost a second copy and a fresh allocation. In-process only:
    /// a transport to a worker elsewhere would send the bytes (`Write`) instead.
    WriteFromHome {
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    },
    Set(GlobalPage, PageDescriptor),
    /// Copies a slot of a peer's memory into the slot on the device (`Device::copy_from_peers`);
    /// a job's consecutive peer copies go in one submission.
    PeerCopy(PeerCopy),
}

/// Where the bytes of a page copied onto a device come from.
enum Fill {
    Home,
    Bytes(Vec<u8>),
    /// The source device's slot, copied on the device they share.
    Peer(DeviceId, SlotAddr),
}

/// One slot write of a worker's batch: bytes the manager read, or a page of home.
enum SlotWrite {
    Bytes(SlotAddr, Vec<u8>),
    Home {
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    },
}

/// Writes the batch collected so far as one `Device::write_slots`, home's pages read under one
/// lock, and leaves in `writes` only the buffers the writes came from (for the pool).
fn write_batch(dev: &mut dyn Device, home: &SharedHome, writes: &mut Vec<SlotWrite>) -> Result<()> {
    if writes.is_empty() {
        return Ok(());
    }
    let from_home = writes.iter().any(|w| matches!(w, SlotWrite::Home { .. }));
    let guard = if from_home {
        Some(read_home(home)?)
    } else {
        None
    };
    let mut batch = Vec::with_capacity(writes.len());
    for w in writes.iter() {
        match w {
            SlotWrite::Bytes(at, data) => batch.push((*at, data.as_slice())),
            &SlotWrite::Home {
                at,
                obj,
                local,
                bytes,
            } => {
                if let Some(h) = guard.as_ref() {
                    batch.push((at, h.page(obj, local, bytes)?));
                }
            }
        }
    }
    dev.write_slots(&batch)?;
    drop(batch);
    drop(guard);
    writes.retain(|w| matches!(w, SlotWrite::Bytes(..)));
    Ok(())
}

/// A modified page a worker writes straight home: the page, its slot on the source, and where
/// it goes at home (object, local page, bytes).
type HomeBound = (GlobalPage, SlotAddr, ObjectId, u64, u64);

/// Page buffers the manager keeps for reuse at most (device → device copies); a batch that
/// moves more allocates the rest.
const POOL_BYTES: usize = 64 << 20;

/// Per-device queues of collected work and the acknowledgements still to come.
struct Outbox {
    ops: Vec<Vec<DeviceOp>>,
    acks: Vec<Pending<Result<Vec<Vec<u8>>>>>,
    home: SharedHome,
    held: Arc<HeldPages>,
    /// Some queued or sent job copies from home: the manager must let them finish before it
    /// writes home itself.
    reads_home: bool,
    /// Buffers the workers have written from, for the pool.
    spent: Vec<Vec<u8>>,
    /// Source slots of the peer copies queued or sent and not yet acknowledged: none may be
    /// written before `finish` (a slot freed by an invalidation and reused in the same list).
    peer_sources: HashSet<(DeviceId, SlotAddr)>,
    /// Slots freed by this list's invalidations, which are queued or sent and not yet
    /// acknowledged: a launch may still map them.
    freed: HashSet<(DeviceId, SlotAddr)>,
}

impl Outbox {
    fn new(devices: usize, home: SharedHome, held: Arc<HeldPages>) -> Self {
        Outbox {
            ops: (0..devices).map(|_| Vec::new()).collect(),
            acks: Vec::new(),
            home,
            held,
            reads_home: false,
            spent: Vec::new(),
            peer_sources: HashSet::new(),
            freed: HashSet::new(),
        }
    }

    fn push(&mut self, d: DeviceId, op: DeviceOp) {
        self.reads_home |= matches!(op, DeviceOp::WriteFromHome { .. });
        // Published as queued, before the worker applies it: a right taken away shows at once
        // (`crate::held`).
        if let DeviceOp::Set(page, desc) = op {
            self.held.set(d, page, desc);
        }
        self.ops[d.index()].push(op);
    }

    /// Sends device `d`'s collected work as one job.
    fn flush(&mut self, workers: &[WorkerHandle], d: DeviceId) {
        let ops = std::mem::take(&mut self.ops[d.index()]);
        if ops.is_empty() {
            return;
        }
        let home = self.home.clone();
        self.acks.push(workers[d.index()].submit(move |dev| {
            // Consecutive slot writes go as one batch (`Device::write_slots`), consecutive peer
            // copies as another (`Device::copy_from_peers`). Each batch is sent before an op of
            // the other kind, so a slot a peer copy fills and a write then reuses (or the other
            // way round) is filled in list order. Descriptor updates go whenever they come: the
            // next launch comes after the job anyway.
            let mut peer: Vec<PeerCopy> = Vec::new();
            let mut writes: Vec<SlotWrite> = Vec::new();
            for op in ops {
                match op {
                    DeviceOp::PeerCopy(c) => {
                        write_batch(dev, &home, &mut writes)?;
                        peer.push(c);
                    }
                    DeviceOp::Write(at, data) => {
                        dev.copy_from_peers(&std::mem::take(&mut peer))?;
                        writes.push(SlotWrite::Bytes(at, data));
                    }
                    DeviceOp::WriteFromHome {
                        at,
                        obj,
                        local,
                        bytes,
                    } => {
                        dev.copy_from_peers(&std::mem::take(&mut peer))?;
                        writes.push(SlotWrite::Home {
                            at,
                            obj,
                            local,
                            bytes,
                        });
                    }
                    DeviceOp::Create(id, bytes, cap) => {
                        // The memory must exist before a batch writes into it.
                        write_batch(dev, &home, &mut writes)?;
                        dev.create_memory(id, bytes, cap)?
                    }
                    DeviceOp::Set(page, desc) => dev.set_page(page, desc)?,
                }
            }
            dev.copy_from_peers(&peer)?;
            write_batch(dev, &home, &mut writes)?;
            Ok(writes
                .into_iter()
                .filter_map(|w| match w {
                    SlotWrite::Bytes(_, data) => Some(data),
                    SlotWrite::Home { .. } => None,
                })
                .collect())
        }));
    }

    /// Sends everything and waits for every acknowledgement; the first error wins.
    fn finish(&mut self, workers: &[WorkerHandle]) -> Result<()> {
        for d in 0..self.ops.len() {
            self.flush(workers, DeviceId(d as u8));
        }
        let mut res = Ok(());
        for p in self.acks.drain(..) {
            match p.wait().and_then(|r| r) {
                Ok(mut spent) => self.spent.append(&mut spent),
                Err(e) => {
                    if res.is_ok() {
                        res = Err(e);
                    }
                }
            }
        }
        self.reads_home = false;
        self.peer_sources.clear();
        self.freed.clear();
        res
    }

    fn take_spent(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.spent)
    }
}

/// Bytes of an object's host layout: texels row-major from the lower left, tightly packed.
pub fn host_len(desc: &ObjectDesc) -> u64 {
    let (w, h) = desc.extent();
    w * h * desc.texel_bytes()
}

/// Copies host layout into page layout (each page a whole slot, rows from its lower left).
fn pack(desc: &ObjectDesc, host: &[u8], pages: &mut [u8]) {
    for_each_page_row(desc, |host_off, page_off, len| {
        pages[page_off..page_off + len].copy_from_slice(&host[host_off..host_off + len]);
    });
}

fn unpack(desc: &ObjectDesc, pages: &[u8], host: &mut [u8]) {
    for_each_page_row(desc, |host_off, page_off, len| {
        host[host_off..host_off + len].copy_from_slice(&pages[page_off..page_off + len]);
    });
}

/// Calls `f(host_offset, page_offset, bytes)` for every row segment of every page.
fn for_each_page_row(desc: &ObjectDesc, mut f: impl FnMut(usize, usize, usize)) {
    let (w, _) = desc.extent();
    let tb = desc.texel_bytes();
    let side = desc.page_side();
    for local in 0..desc.page_count() {
        let (x0, y0, pw, ph) = desc.page_rect(local);
        for r in 0..ph {
            let host = ((y0 + r) * w + x0) * tb;
            let page = local * desc.page_bytes() + r * side * tb;
            f(host as usize, page as usize, (pw * tb) as usize);
        }
    }
}

// With `shuttle` the runtime's threads exist only inside a shuttle run (tests/shuttle.rs).
#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use std::sync::Arc;

    use tessera_core::{
        Access, Coherence, CoreError, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, ObjectId,
        PageRequest, ProtocolVariant, TexelFormat,
    };

    use crate::{
        Bound, Domain, Fault, Invocation, Kernel, Partition, PassSpec, Procedure, RuntimeError,
        System, SystemConfig,
    };

    struct Fill {
        to: ObjectId,
        value: f32,
    }

    impl Kernel for Fill {
        fn name(&self) -> &'static str {
            "fill"
        }
        fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
            inv.store_f32(self.to, x, y, self.value)
        }
    }

    struct CopyTexels {
        from: ObjectId,
        to: ObjectId,
    }

    impl Kernel for CopyTexels {
        fn name(&self) -> &'static str {
            "copy"
        }
        fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
            let v = inv.load_f32(self.from, x, y)?;
            inv.store_f32(self.to, x, y, v)
        }
    }

    /// One 8×8 page of 32-bit floats.
    fn one_page() -> ObjectDesc {
        ObjectDesc::texture(8, 8, TexelFormat::R32Float, 8).unwrap()
    }

    fn texels(v: f32) -> Vec<u8> {
        (0..64).flat_map(|_| v.to_le_bytes()).collect()
    }

    fn system(variant: ProtocolVariant) -> System {
        System::cpu(&SystemConfig {
            devices: 1,
            variant,
            cpu_threads: 1,
            ..Default::default()
        })
        .unwrap()
    }

    fn pass(sys: &System, kernel: impl Kernel + 'static, objects: &[&ObjectEntry]) {
        let spec = PassSpec {
            kernel: Arc::new(kernel),
            bindings: Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
            domain: Domain::Rect {
                x0: 0,
                y0: 0,
                x1: 8,
                y1: 8,
            },
            display: false,
        };
        sys.run_pass(&spec, 8, 8, Partition::Rows, Procedure::Relaunch)
            .unwrap();
    }

    /// Device 0 writes an object, which is freed; the next object reuses its page, and device
    /// 0 copies it: what it copies is what it saw of the new object.
    fn copy_of_a_reused_page(variant: ProtocolVariant) -> Vec<u8> {
        let sys = system(variant);
        let old = sys.create(one_page(), None).unwrap();
        // Keeps the old page a hole inside the space, so page tables are not shortened past it
        // (which would hide a stale mapping).
        let _keep = sys.create(one_page(), None).unwrap();
        pass(
            &sys,
            Fill {
                to: old.id,
                value: 1.0,
            },
            &[&old],
        );
        sys.mm.free(old.id).unwrap();
        let new = sys.create(one_page(), Some(texels(2.0))).unwrap();
        assert_eq!(new.page_offset, old.page_offset, "the page is reused");
        let out = sys.create(one_page(), None).unwrap();
        pass(
            &sys,
            CopyTexels {
                from: new.id,
                to: out.id,
            },
            &[&new, &out],
        );
        sys.mm.read(out.id).unwrap()
    }

    #[test]
    fn a_reused_page_is_not_mapped_to_the_freed_objects_data() {
        assert_eq!(copy_of_a_reused_page(ProtocolVariant::Correct), texels(2.0));
        // Without the invalidations the device keeps its mapping of the old object's slot and
        // reads it without asking.
        assert_eq!(
            copy_of_a_reused_page(ProtocolVariant::FreeWithoutInvalidation),
            texels(1.0)
        );
    }

    /// Reads the texel mirrored left to right: on two column devices each reads the page the
    /// other wrote.
    struct Mirror {
        from: ObjectId,
        to: ObjectId,
    }

    impl Kernel for Mirror {
        fn name(&self) -> &'static str {
            "mirror"
        }
        fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
            let v = inv.load_f32(self.from, 15 - x, y)?;
            inv.store_f32(self.to, x, y, v)
        }
    }

    /// Each device writes its page, then reads the other's: the reader's copy comes from the
    /// owner under both rules; under `coherence` it also goes home (write-home) or not (owned).
    fn read_of_a_modified_page(coherence: Coherence) {
        let sys = System::cpu(&SystemConfig {
            devices: 2,
            cpu_threads: 1,
            coherence,
            ..Default::default()
        })
        .unwrap();
        let home_too = coherence == Coherence::WriteHome;
        // Two 8×8 pages side by side; with columns, device d writes and owns page d of `a`.
        let two_pages = ObjectDesc::texture(16, 8, TexelFormat::R32Float, 8).unwrap();
        let a = sys.create(two_pages, None).unwrap();
        let b = sys.create(two_pages, None).unwrap();
        let run = |kernel: Arc<dyn Kernel>, objects: &[&ObjectEntry]| {
            let spec = PassSpec {
                kernel,
                bindings: Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
                domain: Domain::Rect {
                    x0: 0,
                    y0: 0,
                    x1: 16,
                    y1: 8,
                },
                display: false,
            };
            sys.run_pass(&spec, 16, 8, Partition::Cols, Procedure::Relaunch)
                .unwrap();
        };
        run(
            Arc::new(Fill {
                to: a.id,
                value: 5.0,
            }),
            &[&a],
        );
        let before = sys.mm.traffic().unwrap();
        run(
            Arc::new(Mirror {
                from: a.id,
                to: b.id,
            }),
            &[&a, &b],
        );
        let after = sys.mm.traffic().unwrap();
        const PAGE: u64 = 8 * 8 * 4;
        for (d, other) in [(0, 1), (1, 0)] {
            let (t0, t1) = (&before[d], &after[d]);
            // Only its page of `b` comes from home; the other's page of `a` comes from the
            // other device (owner → home → reader before reads came from the owner: two pages from home).
            assert_eq!(
                t1.host_to_device.bytes - t0.host_to_device.bytes,
                PAGE,
                "{d}"
            );
            assert_eq!(t1.device_to_device.bytes, PAGE, "{d}");
            let from = |s: usize| t1.device_to_device_from.get(s).map_or(0, |c| c.bytes);
            assert_eq!((from(other), from(d)), (PAGE, 0), "{d}");
            // Its own page of `a` was written home for the other's read, under write-home only.
            assert_eq!(
                t1.device_to_host.bytes - t0.device_to_host.bytes,
                if home_too { PAGE } else { 0 },
                "{d}"
            );
            assert_eq!(
                t1.coherence_write_backs - t0.coherence_write_backs,
                home_too as u64,
                "{d}"
            );
        }
        assert_eq!(
            sys.mm.read(b.id).unwrap(),
            [texels(5.0), texels(5.0)].concat()
        );
        let (_, directory) = sys.mm.memory().unwrap();
        let pages = a.page_offset as usize..a.page_offset as usize + 2;
        for (d, e) in directory[pages].iter().enumerate() {
            assert_eq!(e.copies.len(), 2);
            if home_too {
                // Home is current with both copies clean: no owner.
                assert_eq!((e.owner, e.writable), (None, false));
            } else {
                // The writer still owns its page, read-only, and home is stale: the host's
                // read below must come from the owner.
                assert_eq!((e.owner, e.writable), (Some(DeviceId(d as u8)), false));
            }
        }
        assert_eq!(
            sys.mm.read(a.id).unwrap(),
            [texels(5.0), texels(5.0)].concat()
        );
    }

    #[test]
    fn a_read_of_a_modified_page_comes_from_its_owner_and_goes_home_under_write_home() {
        read_of_a_modified_page(Coherence::WriteHome);
    }

    #[test]
    fn a_read_of_a_modified_page_comes_from_its_owner_which_keeps_it_under_owned_pages() {
        read_of_a_modified_page(Coherence::Owned);
    }

    #[test]
    fn freeing_a_page_held_under_the_memory_lock_is_refused_until_release() {
        let sys = system(ProtocolVariant::Correct);
        let e = sys.create(one_page(), Some(texels(3.0))).unwrap();
        let page = GlobalPage(e.page_offset);
        let write = vec![PageRequest {
            page,
            access: Access::Write,
        }];
        sys.mm
            .request(DeviceId(0), write.clone())
            .wait()
            .unwrap()
            .unwrap();
        assert_eq!(
            sys.mm.free(e.id),
            Err(RuntimeError::Core(CoreError::FreeWhileLocked {
                page,
                device: DeviceId(0)
            }))
        );
        // Refused means untouched: the object is still there, with its data.
        assert_eq!(sys.mm.read(e.id).unwrap(), texels(3.0));
        sys.mm.release(DeviceId(0));
        sys.mm.free(e.id).unwrap();
        assert_eq!(
            sys.mm.read(e.id),
            Err(RuntimeError::Core(CoreError::UnknownObject(e.id)))
        );
        assert_eq!(
            sys.mm.request(DeviceId(0), write).wait().unwrap(),
            Err(RuntimeError::Core(CoreError::UnknownPage(page)))
        );
        let (_, directory) = sys.mm.memory().unwrap();
        assert!(directory.is_empty(), "the space shrank to nothing");
    }

    #[test]
    fn the_request_log_lists_exactly_the_pages_asked_for_while_on() {
        let sys = system(ProtocolVariant::Correct);
        let a = sys.create(one_page(), Some(texels(1.0))).unwrap();
        let b = sys.create(one_page(), Some(texels(2.0))).unwrap();
        let ask = |e: &ObjectEntry| {
            let req = vec![PageRequest {
                page: GlobalPage(e.page_offset),
                access: Access::Read,
            }];
            sys.mm.request(DeviceId(0), req).wait().unwrap().unwrap();
            sys.mm.release(DeviceId(0));
        };
        ask(&a);
        sys.mm.log_requests(true);
        ask(&b);
        ask(&a);
        assert_eq!(
            sys.mm.take_requests().unwrap(),
            vec![vec![GlobalPage(b.page_offset), GlobalPage(a.page_offset)]]
        );
        assert_eq!(
            sys.mm.take_requests().unwrap(),
            vec![Vec::<GlobalPage>::new()]
        );
        sys.mm.log_requests(false);
        ask(&b);
        assert_eq!(
            sys.mm.take_requests().unwrap(),
            vec![Vec::<GlobalPage>::new()]
        );
        // The totals count the same requests, logged or not.
        assert_eq!(sys.mm.traffic().unwrap()[0].page_requests, 4);
        // Evicting drops the device's copy (and leaves pages it does not hold alone).
        let holds = |e: &ObjectEntry| {
            sys.mm
                .holds(DeviceId(0), vec![GlobalPage(e.page_offset)])
                .unwrap()
        };
        assert!(holds(&a) && holds(&b));
        sys.mm
            .evict(DeviceId(0), vec![GlobalPage(a.page_offset)])
            .unwrap();
        sys.mm
            .evict(DeviceId(0), vec![GlobalPage(a.page_offset)])
            .unwrap();
        assert!(!holds(&a) && holds(&b));
        assert_eq!(sys.mm.traffic().unwrap()[0].evictions, 1);
        assert!(sys.mm.evict(DeviceId(5), vec![]).is_err());
        assert_eq!(sys.mm.read(a.id).unwrap(), texels(1.0));
    }
}
