//! The memory manager: one thread per node that owns the directory (through the protocol),
//! the home copies in host memory and the slot allocators of every device.
//!
//! It runs the sans-IO protocol and carries out its actions by sending jobs to device workers,
//! waiting only on them (paper 3.7–3.8). A request the protocol defers under the memory lock
//! just keeps its reply channel here; nothing blocks. Replies travel on per-request channels,
//! separate from the command queue.
//!
//! Its parts: `handle` (what the other threads hold, the commands they send), `request` (a
//! device's batch through the protocol, now or staged ahead), `evict` (room under the budget,
//! victims, thrashing), `prefetch` (pages added to a batch), `execute` (the protocol's actions
//! as device jobs, in order), `outbox` (those jobs per worker, slot writes batched) and
//! `objects` (create, place, free, host reads).

// The manager's maps are keyed by page numbers and device ids it made itself, not by anything
// an attacker chooses, so a fast unkeyed hash serves them: SipHash was a tenth of a boundary
// batch's bookkeeping (docs/EVALUATION.md, "Owned pages").
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_core::eviction::TraceEvent;
use tessera_core::protocol::Source;
use tessera_core::{
    AccessMode, Action, AddressSpace, Coherence, DeviceId, DeviceMemory, DirEntry, Directory,
    GlobalPage, HomeMap, Location, Message, ObjectDesc, ObjectEntry, ObjectId, PageDescriptor,
    PageRequest, Policy, Protocol, ProtocolVariant, RemoteLink, RequestBatch, RequestId, Resident,
    SlotAddr,
};

use crate::backend::{copy_slot, Device, PeerCopy, PeerMemory, PendingRead, SlotSink};
use crate::error::{Result, RuntimeError};
use crate::held::HeldPages;
use crate::home::{read_home, write_home, HomeStore, SharedHome};
use crate::remote::{RemoteBindings, RemoteObject, RemoteRegistry};
use crate::stats::{DeviceMemoryUse, DeviceTraffic};
use crate::sync::channel::{bounded, unbounded, Receiver, Sender};
use crate::sync::{AtomicBool, AtomicUsize, Builder, JoinHandle, Mutex, RwLock};
use crate::worker::{Pending, WorkerHandle};

mod evict;
mod execute;
use execute::AheadSets;
mod handle;
mod later;
mod objects;
mod outbox;
mod prefetch;
mod request;

pub(crate) use handle::{Cmd, Homes, Inbox, SettleHook};
pub use handle::{LaunchStarter, ManagerHandle};
pub use objects::host_len;
use objects::*;
use outbox::*;

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
    /// resident pages (UVM pins thrashing pages too; it also throttles, which we do not).
    #[default]
    Pin,
}

/// The option's word (`--thrashing pin`).
impl std::fmt::Display for Thrashing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Thrashing::Off => "off",
            Thrashing::Pin => "pin",
        })
    }
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

/// The most global pages a system's objects may span, holes included. Each page costs the
/// memory manager and the devices bookkeeping (directory entry, page-table slots, batch
/// actions): about 400 bytes a page, measured as the maximum resident set of `run boiling
/// --size 2048 --page 1` (21 million pages, 8.3 GB). At this limit that is about 6.7 GB; past
/// it a run of tiny pages ran out of memory and aborted in the middle of a pass, where an
/// object that does not fit is now refused when it is created.
pub const PAGE_LIMIT: u64 = 1 << 24;

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
    trace: Option<Vec<Vec<TraceEvent>>>,
    /// Per device, the pages its batches asked for and it did not hold, while logging is on.
    request_log: Option<Vec<Vec<GlobalPage>>>,
    /// Set while an eviction's actions are carried out, so its invalidations are counted as
    /// evictions.
    evicting: bool,
    /// Pages an action list moves out of a device, read before the list is carried out, by
    /// (device, page).
    read_ahead: HashMap<(DeviceId, GlobalPage), Vec<u8>>,
    /// `read_ahead`'s sets, kept from batch to batch: allocating a boundary batch's five sets
    /// afresh was 57 of the manager's 693 profile samples in boiling on 8 devices.
    ahead_sets: AheadSets,
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
    /// every `Outbox` as it sends descriptors.
    held: Arc<HeldPages>,
    /// An idle outbox kept from one action list to the next, with its sets' and op lists'
    /// room (`Manager::outbox`).
    spare_outbox: Option<Outbox>,
    /// Objects not in migrate mode (absent: migrate).
    modes: HashMap<ObjectId, AccessMode>,
    /// Remote objects' pages, shared with the drivers.
    remote: RemoteRegistry,
    /// Set when carrying out actions failed half way: the directory no longer matches the
    /// devices, so every later command gets this error rather than wrong data.
    broken: Option<RuntimeError>,
    /// Host time the page copies of the commands carried out so far took, in nanoseconds
    /// (`copied`): charged to the requesting device's `DeviceTraffic::copy_nanos`.
    copy_nanos: u64,
    /// Evicted pages read back in the background, not yet home (`later`).
    later: later::Later,
}

/// Runs `f`, adding the time it took to `nanos`: the page copies the memory manager's jobs
/// make, which the link model charges as transfers (`DeviceTraffic::copy_nanos`).
pub(super) fn copied<T>(nanos: &mut u64, f: impl FnOnce() -> T) -> T {
    let t = std::time::Instant::now();
    let r = f();
    *nanos += t.elapsed().as_nanos() as u64;
    r
}

/// A tag no other memory manager of this process has had, for its address space: entries a
/// system made are refused by every other (`ObjectEntry::space`). Starts at 1, so a space
/// made outside a manager (tag 0) matches none.
fn next_space_tag() -> u64 {
    // Only uniqueness matters, so no ordering with other memory is needed.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
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
        .map(|w| w.call_here(|d| Ok(d.peer_group())))
        .collect::<Result<Vec<_>>>()?;
    let m = Manager {
        protocol,
        space: AddressSpace::with_limit(PAGE_LIMIT).tagged(next_space_tag()),
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
        waiting: HashMap::default(),
        next_request: 0,
        traffic: vec![DeviceTraffic::default(); n],
        evictors: (0..n)
            .map(|d| Evictor {
                resident: Resident::new(cfg.policy, cfg.seed.wrapping_add(d as u64)),
                evicted: HashMap::default(),
                events: HashMap::default(),
                pins: HashMap::default(),
                prefetched: HashMap::default(),
            })
            .collect(),
        pinned: HashSet::default(),
        thrashing: cfg.thrashing,
        prefetch: cfg.prefetch,
        trace: cfg.record_trace.then(|| vec![Vec::new(); n]),
        request_log: None,
        evicting: false,
        read_ahead: HashMap::default(),
        ahead_sets: AheadSets::default(),
        written_home: HashSet::default(),
        pool: Vec::new(),
        peer_groups,
        peer_memories: HashMap::default(),
        sinks: HashMap::default(),
        copying_during_launch: None,
        peer_ahead: HashMap::default(),
        later: later::Later::default(),
        pressed: Arc::new((0..n).map(|_| AtomicBool::new(false)).collect()),
        held: Arc::new(HeldPages::new(n)),
        spare_outbox: None,
        modes: HashMap::default(),
        remote: RemoteRegistry::default(),
        broken: None,
        copy_nanos: 0,
    };
    let (tx, rx) = unbounded();
    let pressed = m.pressed.clone();
    let remote = m.remote.clone();
    let held = m.held.clone();
    let shared = Arc::new(Shared {
        manager: Mutex::new(m),
        queued: AtomicUsize::new(0),
    });
    let mine = shared.clone();
    let join = Builder::new()
        .name("tessera-memory-manager".into())
        .spawn(move || mine.run(rx))
        .map_err(|e| RuntimeError::Spawn {
            what: "a thread",
            message: e.to_string(),
        })?;
    Ok((
        ManagerHandle {
            inbox: Inbox::new(tx, Some(shared)),
            pressed,
            remote,
            cluster: None,
            held,
            messages: Arc::new((0..n).map(|_| AtomicU64::new(0)).collect()),
            settle: None,
            live: handle::LiveObjects::default(),
        },
        join,
    ))
}

/// The memory manager as the threads that may run it share it: its own thread runs the
/// commands queued for it, and a caller that would only wait for the answer runs its command
/// itself when nothing is queued or running (`Inbox::ask`). One command runs at a time
/// either way, in the order sent, so the manager is still the one owner of the directory.
pub(crate) struct Shared {
    manager: Mutex<Manager>,
    /// Commands queued for the manager's thread and not yet done.
    queued: AtomicUsize,
}

impl Shared {
    fn run(&self, rx: Receiver<Cmd>) {
        while let Ok(cmd) = rx.recv() {
            // A command that panicked poisoned the lock; the manager is as it left it, as it
            // was before there was a lock.
            self.manager
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .handle(cmd);
            self.queued.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Runs `cmd` on this thread when the manager is idle, else `post`s it.
    pub(super) fn run_or_post(&self, cmd: Cmd, post: impl FnOnce(Cmd)) {
        if self.queued.load(Ordering::SeqCst) == 0 {
            if let Ok(mut m) = self.manager.try_lock() {
                // Checked again under the lock: a command queued since was sent first.
                if self.queued.load(Ordering::SeqCst) == 0 {
                    m.handle(cmd);
                    return;
                }
            }
        }
        post(cmd)
    }
}

impl Manager {
    fn handle(&mut self, cmd: Cmd) {
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
            Cmd::Write(id, data, r) => {
                let _ = r.send(self.guarded(|m| m.write(id, data)));
            }
            Cmd::Read(id, r) => {
                let _ = r.send(self.guarded(|m| m.read(id)));
            }
            Cmd::ReadMany(ids, r) => {
                let _ = r.send(self.guarded(|m| m.read_many(&ids)));
            }
            Cmd::ReadPacked(id, r) => {
                let _ = r.send(self.guarded(|m| {
                    let e = *m.space.get(id)?;
                    Ok((e, m.read_packed(id)?))
                }));
            }
            Cmd::Request(device, pages, keep, r) => {
                let before = self.copy_nanos;
                self.request(device, pages, keep, r);
                self.charge_copies(device, before);
            }
            Cmd::Stage(device, pages, start, r) => {
                let before = self.copy_nanos;
                self.stage(device, pages, start, r);
                self.charge_copies(device, before);
            }
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
                        return Err(RuntimeError::Core(tessera_core::CoreError::UnknownDevice(
                            device,
                        )));
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

    /// Charges the page copies made since `before` to `device`, whose batch they served.
    fn charge_copies(&mut self, device: DeviceId, before: u64) {
        if let Some(t) = self.traffic.get_mut(device.index()) {
            t.copy_nanos += self.copy_nanos - before;
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
}

// With `shuttle` the runtime's threads exist only inside a shuttle run (tests/shuttle.rs).
#[cfg(all(test, not(feature = "shuttle")))]
mod tests;
