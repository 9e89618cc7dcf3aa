//! One runtime over several nodes (the journal paper, 5.4.2–5.4.3): one process per
//! node, each the home of part of the pages, with one memory manager for its pages and the
//! device workers and drivers of its own devices.
//!
//! How the single-node runtime is reused, unchanged in its core:
//! - **Homes.** Every node's memory manager runs the real protocol over the whole address space
//!   and every device of the cluster, but is asked only about the pages `HomeMap::Blocked`
//!   gives it, so each page has exactly one directory entry that moves: its home's. Every node
//!   creates the same objects in the same order (the program runs SPMD), so page numbers agree.
//! - **Devices.** A manager reaches each device, its own node's or another's, through a
//!   `NodeView`: a `Device` that forwards slot writes and reads, page-table updates and time
//!   stamps to the device's worker, over the transport when the device is elsewhere. A view
//!   renames the manager's physical memories to the device's own numbering, so the managers of
//!   several homes share one device without sharing slots; each gets `1/nodes` of its budget.
//! - **Batches.** A driver's batch is split by home and acquired one home at a time in node
//!   order, each part granted before the next is sent (the order model-checked in
//!   `tessera_core::model_nodes`: sending all parts at once deadlocks); the release goes to every
//!   home that granted a part.
//! - **Passes.** Each node runs its own devices' regions of a pass, then waits at a barrier for
//!   every node: the pass barrier of paper 3.1 across nodes.
//!
//! Wait-for graph (docs/PROTOCOL.md, "The runtime over nodes"): drivers wait on managers (their own
//! node's or, through the router, another's); managers wait on views; a view waits on its
//! device's worker (through the router when remote); workers wait on nobody. The router thread
//! of each node never waits on any of them: it hands incoming work to the worker's queue or to
//! a short-lived thread that waits on the local manager, and replies come back through it.
//!
//! A node that stops answering (no message, heartbeats included, for
//! [`ClusterConfig::lost_after`]) is lost: every call waiting on the cluster fails with
//! [`RuntimeError::NodeLost`] naming it. Nothing is recovered: its home pages are gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tessera_core::protocol::{Access, PageRequest};
use tessera_core::{DeviceId, GlobalPage, HomeMap, ObjectId, PageDescriptor, SlotAddr};

use crate::backend::{Device, Launch, LaunchOutcome, MergeOutcome};
use crate::error::{Result, RuntimeError};
use crate::manager::{Homes, ManagerHandle};
use crate::worker::WorkerHandle;

/// Point-to-point messages between the nodes' routers: messages from one node to another
/// arrive in the order sent (MPI's non-overtaking rule). Implemented over MPI and over channels
/// between threads by `tessera-mpi`.
pub trait Transport {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Sends without waiting for the receiver to take the message.
    fn send(&self, to: usize, bytes: Vec<u8>) -> std::result::Result<(), TransportError>;
    /// The next message from any node, waiting at most `timeout`; `None` when none came.
    fn recv(
        &self,
        timeout: Duration,
    ) -> std::result::Result<Option<(usize, Vec<u8>)>, TransportError>;
}

/// A transport failure: the node it concerns, when known, and what happened.
#[derive(Clone, Debug)]
pub struct TransportError {
    pub node: Option<usize>,
    pub how: String,
}

/// How a cluster is laid out.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Devices on each node (every node the same). Device `g` is on node `g / devices_per_node`.
    pub devices_per_node: usize,
    /// Pages are dealt to homes in blocks of this many, round robin (`HomeMap::Blocked`).
    pub block_pages: u64,
    /// A node silent this long is lost.
    pub lost_after: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            devices_per_node: 1,
            block_pages: 16,
            lost_after: Duration::from_secs(10),
        }
    }
}

/// Messages between nodes, postcard-encoded.
#[derive(Serialize, Deserialize, Debug)]
enum Msg {
    /// A device's part of a batch, to the pages' home: (page, write); `keep` homed there too.
    Request {
        id: u64,
        device: u8,
        pages: Vec<(u64, bool)>,
        keep: Vec<u64>,
    },
    Release {
        device: u8,
    },
    Holds {
        id: u64,
        device: u8,
        pages: Vec<u64>,
    },
    /// The latest data of an object's pages as its home knows them (pages packed).
    ReadPacked {
        id: u64,
        object: u32,
    },
    /// A home's operation on a device of the receiving node, answered by a `Reply` (posted
    /// operations travel in `DevBatch`).
    Dev {
        id: u64,
        device: u8,
        home: u16,
        op: DevOp,
    },
    /// A home's posted operations on a device, in order, sent as one message at the end of
    /// a worker job (no reply; a failure is kept as for a posted `Dev`).
    DevBatch {
        device: u8,
        home: u16,
        ops: Vec<DevOp>,
    },
    Barrier {
        epoch: u64,
    },
    Heartbeat,
    /// This node's traffic counters.
    Counters {
        id: u64,
    },
    /// The bytes this node shares in the current [`Link::all_gather`].
    Shared {
        id: u64,
    },
    Reply {
        id: u64,
        body: std::result::Result<Body, WireError>,
    },
}

#[derive(Serialize, Deserialize, Debug)]
enum DevOp {
    CreateMemory {
        memory: u16,
        slot_bytes: u64,
        capacity: u32,
    },
    WriteSlot {
        memory: u16,
        slot: u32,
        data: Vec<u8>,
    },
    ReadSlot {
        memory: u16,
        slot: u32,
    },
    ReadSlots {
        at: Vec<(u16, u32)>,
    },
    ResizePageTable {
        pages: u64,
    },
    SetPage {
        page: u64,
        desc: u64,
    },
    PageTimes {
        pages: Vec<u64>,
    },
}

#[derive(Serialize, Deserialize, Debug)]
enum Body {
    Unit,
    Bool(bool),
    Bytes(Vec<u8>),
    Slots(Option<Vec<Vec<u8>>>),
    Times(Vec<u64>),
    Counters(NodeCounters),
}

/// An error that crossed nodes. The budget refusal keeps its fields: a driver splits a wave
/// on it, whichever home refused.
#[derive(Serialize, Deserialize, Debug)]
enum WireError {
    OverBudget {
        device: u8,
        pages: u64,
        capacity: u64,
        page_bytes: u64,
        budget_bytes: u64,
    },
    Other(String),
}

impl WireError {
    fn from_runtime(e: &RuntimeError) -> Self {
        match *e {
            RuntimeError::OverBudget {
                device,
                pages,
                capacity,
                page_bytes,
                budget_bytes,
            } => WireError::OverBudget {
                device: device.0,
                pages,
                capacity,
                page_bytes,
                budget_bytes,
            },
            ref other => WireError::Other(other.to_string()),
        }
    }
    fn into_runtime(self, node: usize) -> RuntimeError {
        match self {
            WireError::OverBudget {
                device,
                pages,
                capacity,
                page_bytes,
                budget_bytes,
            } => RuntimeError::OverBudget {
                device: DeviceId(device),
                pages,
                capacity,
                page_bytes,
                budget_bytes,
            },
            WireError::Other(message) => RuntimeError::OnNode { node, message },
        }
    }
}

/// Bytes this node sent to other nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCounters {
    /// Every message, encoded.
    pub bytes: u64,
    /// Of which page data: slot writes and slot reads' replies that crossed nodes.
    pub page_bytes: u64,
    pub messages: u64,
}

impl NodeCounters {
    pub fn add(&mut self, o: &NodeCounters) {
        self.bytes += o.bytes;
        self.page_bytes += o.page_bytes;
        self.messages += o.messages;
    }
}

type Reply = std::result::Result<Body, RuntimeError>;

enum Out {
    Send(usize, Vec<u8>),
    Stop,
}

/// What a node serves to the others: its devices and its memory manager. Set once the node is
/// built, before the start barrier, so no request can arrive earlier.
struct Served {
    workers: Vec<WorkerHandle>,
    maps: Vec<Arc<Mutex<MemoryMap>>>,
    mm: ManagerHandle,
}

struct Barrier {
    epoch: u64,
    /// Per epoch, how many other nodes have arrived.
    arrived: HashMap<u64, usize>,
}

/// A node's end of the cluster: routes calls to other nodes and their replies back. Shared by
/// the node's memory-manager handle, its views and its `System`.
pub struct Link {
    rank: usize,
    size: usize,
    cfg: ClusterConfig,
    homes: HomeMap,
    out: crossbeam_channel::Sender<Out>,
    pending: Mutex<HashMap<u64, crossbeam_channel::Sender<Reply>>>,
    next: AtomicU64,
    /// Per device of this node (global index): the homes that granted its current batch.
    locked: Mutex<HashMap<u8, Vec<usize>>>,
    lost: Mutex<Option<RuntimeError>>,
    served: Mutex<Option<Arc<Served>>>,
    barrier: Mutex<Barrier>,
    barrier_cv: Condvar,
    counters: Mutex<NodeCounters>,
    /// What this node shares in the current [`Link::all_gather`].
    shared: Mutex<Vec<u8>>,
    router: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Homes for Link {
    fn barrier(&self) -> Result<()> {
        Link::barrier(self)
    }
    /// An object's latest data in page order (packed), each page from its home.
    fn read_packed(
        &self,
        local: &ManagerHandle,
        id: ObjectId,
    ) -> Result<(tessera_core::ObjectEntry, Vec<u8>)> {
        let (entry, mut pages) = local.read_packed_here(id)?;
        let bytes = entry.desc.page_bytes() as usize;
        for home in (0..self.size).filter(|&h| h != self.rank) {
            let theirs = match self.call(home, |rid| Msg::ReadPacked {
                id: rid,
                object: id.0,
            })? {
                Body::Bytes(b) => b,
                other => return Err(unexpected(home, &other)),
            };
            if theirs.len() != pages.len() {
                return Err(RuntimeError::OnNode {
                    node: home,
                    message: format!(
                        "object {id} has {} bytes of pages there and {} here: the nodes' address spaces differ",
                        theirs.len(),
                        pages.len()
                    ),
                });
            }
            for (local, page) in entry.pages().enumerate() {
                if self.homes.home(GlobalPage(page)).0 as usize == home {
                    let r = local * bytes..(local + 1) * bytes;
                    pages[r.clone()].copy_from_slice(&theirs[r]);
                }
            }
        }
        Ok((entry, pages))
    }
    /// Acquires a device's batch, split by home, one home at a time in node order; `local` is
    /// this node's manager. A refused part releases the parts granted before it.
    fn request(
        &self,
        local: &ManagerHandle,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
    ) -> Result<()> {
        let mut parts: Vec<(Vec<PageRequest>, Vec<GlobalPage>)> =
            vec![(Vec::new(), Vec::new()); self.size];
        for r in pages {
            parts[self.homes.home(r.page).0 as usize].0.push(r);
        }
        for p in keep {
            parts[self.homes.home(p).0 as usize].1.push(p);
        }
        let mut granted = Vec::new();
        let mut res = Ok(());
        for (home, (pages, keep)) in parts.into_iter().enumerate() {
            if pages.is_empty() {
                continue;
            }
            let r = if home == self.rank {
                local
                    .request_keeping(device, pages, keep)
                    .wait()
                    .and_then(|r| r)
            } else {
                self.call(home, |id| Msg::Request {
                    id,
                    device: device.0,
                    pages: pages
                        .iter()
                        .map(|r| (r.page.0, r.access == Access::Write))
                        .collect(),
                    keep: keep.iter().map(|p| p.0).collect(),
                })
                .map(|_| ())
            };
            match r {
                Ok(()) => granted.push(home),
                Err(e) => {
                    res = Err(e);
                    break;
                }
            }
        }
        if res.is_err() {
            for &home in &granted {
                self.release_at(local, home, device);
            }
            granted.clear();
        }
        self.locked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(device.0, granted);
        res
    }
    fn holds(
        &self,
        local: &ManagerHandle,
        device: DeviceId,
        pages: Vec<GlobalPage>,
    ) -> Result<bool> {
        let mut parts = vec![Vec::new(); self.size];
        for p in pages {
            parts[self.homes.home(p).0 as usize].push(p);
        }
        for (home, part) in parts.into_iter().enumerate() {
            if part.is_empty() {
                continue;
            }
            let all = if home == self.rank {
                local.holds_here(device, part)?
            } else {
                match self.call(home, |id| Msg::Holds {
                    id,
                    device: device.0,
                    pages: part.iter().map(|p| p.0).collect(),
                })? {
                    Body::Bool(b) => b,
                    other => return Err(unexpected(home, &other)),
                }
            };
            if !all {
                return Ok(false);
            }
        }
        Ok(true)
    }
    /// Releases the device's lock at every home that granted a part of its batch.
    fn release(&self, local: &ManagerHandle, device: DeviceId) {
        let homes = self
            .locked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&device.0)
            .unwrap_or_default();
        for home in homes {
            self.release_at(local, home, device);
        }
    }
}

impl Link {
    /// Starts this node's router thread on the transport `open` makes. `open` runs on the
    /// router thread, which alone ever touches the transport: MPI is then used by one thread,
    /// as its default threading level requires.
    pub fn start<T: Transport + 'static>(
        open: impl FnOnce() -> std::result::Result<T, String> + Send + 'static,
        cfg: ClusterConfig,
    ) -> Result<Arc<Link>> {
        if cfg.devices_per_node == 0 {
            return Err(RuntimeError::NoDevicesPerNode);
        }
        let (out_tx, out_rx) = crossbeam_channel::unbounded::<Out>();
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Result<Arc<Link>>>(1);
        let (link_tx, link_rx) = crossbeam_channel::bounded::<Arc<Link>>(1);
        let join = std::thread::Builder::new()
            .name("tessera-router".into())
            .spawn(move || {
                let transport = match open() {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = ready_tx.send(Err(RuntimeError::Transport(e)));
                        return;
                    }
                };
                let (rank, size) = (transport.rank(), transport.size());
                let nodes_devices = size * cfg.devices_per_node;
                if nodes_devices > tessera_core::MAX_DEVICES || size > u16::MAX as usize {
                    let _ = ready_tx.send(Err(RuntimeError::ClusterTooLarge {
                        nodes: size,
                        per_node: cfg.devices_per_node,
                        total: nodes_devices,
                        max: tessera_core::MAX_DEVICES,
                    }));
                    return;
                }
                let link = Arc::new(Link {
                    rank,
                    size,
                    homes: HomeMap::Blocked {
                        nodes: size as u16,
                        block_pages: cfg.block_pages.max(1),
                    },
                    cfg,
                    out: out_tx,
                    pending: Mutex::new(HashMap::new()),
                    next: AtomicU64::new(1),
                    locked: Mutex::new(HashMap::new()),
                    lost: Mutex::new(None),
                    served: Mutex::new(None),
                    barrier: Mutex::new(Barrier {
                        epoch: 0,
                        arrived: HashMap::new(),
                    }),
                    barrier_cv: Condvar::new(),
                    counters: Mutex::new(NodeCounters::default()),
                    shared: Mutex::new(Vec::new()),
                    router: Mutex::new(None),
                });
                let _ = ready_tx.send(Ok(link.clone()));
                drop(link);
                // The link comes back once the starter stored the join handle in it.
                if let Ok(link) = link_rx.recv() {
                    route(&link, &transport, &out_rx);
                }
            })
            .map_err(|e| RuntimeError::Spawn {
                what: "a thread",
                message: e.to_string(),
            })?;
        let link = match ready_rx.recv() {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => {
                let _ = join.join();
                return Err(e);
            }
            Err(_) => {
                let _ = join.join();
                return Err(RuntimeError::ThreadGone("router"));
            }
        };
        *link.router.lock().unwrap_or_else(|p| p.into_inner()) = Some(join);
        let _ = link_tx.send(link.clone());
        Ok(link)
    }

    pub fn rank(&self) -> usize {
        self.rank
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn devices_per_node(&self) -> usize {
        self.cfg.devices_per_node
    }
    pub fn homes(&self) -> HomeMap {
        self.homes
    }
    /// The node a device is on.
    pub fn node_of(&self, d: DeviceId) -> usize {
        d.index() / self.cfg.devices_per_node
    }
    /// Bytes this node has sent to the others so far.
    pub fn counters(&self) -> NodeCounters {
        *self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn serve(
        &self,
        workers: Vec<WorkerHandle>,
        maps: Vec<Arc<Mutex<MemoryMap>>>,
        mm: ManagerHandle,
    ) {
        *self.served.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Arc::new(Served { workers, maps, mm }));
    }

    fn check_lost(&self) -> Result<()> {
        match &*self.lost.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn send(&self, to: usize, msg: &Msg) -> Result<()> {
        let bytes = postcard::to_allocvec(msg)
            .map_err(|e| RuntimeError::Internal(format!("cannot encode a message: {e}")))?;
        {
            let mut c = self.counters.lock().unwrap_or_else(|p| p.into_inner());
            c.bytes += bytes.len() as u64;
            c.messages += 1;
            c.page_bytes += match msg {
                Msg::DevBatch { ops, .. } => ops
                    .iter()
                    .map(|op| match op {
                        DevOp::WriteSlot { data, .. } => data.len() as u64,
                        _ => 0,
                    })
                    .sum(),
                Msg::Reply {
                    body: Ok(Body::Bytes(b)),
                    ..
                } => b.len() as u64,
                Msg::Reply {
                    body: Ok(Body::Slots(Some(s))),
                    ..
                } => s.iter().map(|b| b.len() as u64).sum(),
                _ => 0,
            };
        }
        self.out
            .send(Out::Send(to, bytes))
            .map_err(|_| RuntimeError::ThreadGone("router"))
    }

    /// Sends `make(id)` to `to` and waits for its reply.
    fn call(&self, to: usize, make: impl FnOnce(u64) -> Msg) -> Result<Body> {
        self.check_lost()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        // The router may have failed everything between the check and the insert.
        if let Err(e) = self.check_lost() {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(e);
        }
        self.send(to, &make(id))?;
        rx.recv().map_err(|_| RuntimeError::ThreadGone("router"))?
    }

    fn release_at(&self, local: &ManagerHandle, home: usize, device: DeviceId) {
        if home == self.rank {
            local.release(device);
        } else {
            let _ = self.send(home, &Msg::Release { device: device.0 });
        }
    }

    /// Every node's traffic counters, in rank order.
    pub fn gather_counters(&self) -> Result<Vec<NodeCounters>> {
        self.one_from_each(
            || self.counters(),
            |id| Msg::Counters { id },
            |body| match body {
                Body::Counters(c) => Ok(c),
                other => Err(other),
            },
        )
    }

    /// One value from every node, in rank order: this node's `here`, each other's its reply
    /// to `ask`, which `take` reads (an unexpected reply is an error naming the node).
    fn one_from_each<T>(
        &self,
        here: impl Fn() -> T,
        ask: impl Fn(u64) -> Msg + Copy,
        take: impl Fn(Body) -> std::result::Result<T, Body>,
    ) -> Result<Vec<T>> {
        (0..self.size)
            .map(|n| match n == self.rank {
                true => Ok(here()),
                false => take(self.call(n, ask)?).map_err(|other| unexpected(n, &other)),
            })
            .collect()
    }

    /// Every node's `mine`, in rank order, on every node: how a run's per-device figures
    /// reach the report. Every node must call it, the same number of times.
    pub fn all_gather(&self, mine: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        *self.shared.lock().unwrap_or_else(|p| p.into_inner()) = mine.clone();
        // Every node's bytes are in place before any is asked for...
        self.barrier()?;
        let all = self.one_from_each(
            || mine.clone(),
            |id| Msg::Shared { id },
            |body| match body {
                Body::Bytes(b) => Ok(b),
                other => Err(other),
            },
        )?;
        // ...and stay there until every node has them: a next call replaces them.
        self.barrier()?;
        Ok(all)
    }

    /// Waits until every node has called `barrier` as many times as this one.
    pub fn barrier(&self) -> Result<()> {
        self.check_lost()?;
        let epoch = {
            let mut b = self.barrier.lock().unwrap_or_else(|p| p.into_inner());
            b.epoch += 1;
            b.epoch
        };
        for n in (0..self.size).filter(|&n| n != self.rank) {
            self.send(n, &Msg::Barrier { epoch })?;
        }
        let mut b = self.barrier.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            self.check_lost()?;
            if b.arrived.get(&epoch).copied().unwrap_or(0) >= self.size - 1 {
                b.arrived.remove(&epoch);
                return Ok(());
            }
            b = self
                .barrier_cv
                .wait_timeout(b, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Stops the router after a last barrier, so no node leaves while another may still ask
    /// it for pages. After a lost node there is no barrier and no waiting for the router: it
    /// may be inside the transport, talking to the dead node (an MPI send to a failed process
    /// need not return), and the process must still be able to exit.
    pub(crate) fn shut_down(&self) {
        let healthy = self.barrier().is_ok();
        let _ = self.out.send(Out::Stop);
        let join = self.router.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (true, Some(j)) = (healthy, join) {
            let _ = j.join();
        }
        // Lets the node's threads go: the served handles are the link's last hold on them.
        *self.served.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Stops this node's router at once, with no last barrier: the node goes silent to the
    /// others, as a killed process would. For tests and for a node that must abort. The router
    /// is not waited for (see `Link::shut_down`); the node serves nothing afterwards.
    pub fn kill(&self) {
        let _ = self.out.send(Out::Stop);
        drop(self.router.lock().unwrap_or_else(|p| p.into_inner()).take());
        *self.served.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn fail_all(&self, e: RuntimeError) {
        {
            let mut lost = self.lost.lock().unwrap_or_else(|p| p.into_inner());
            if lost.is_none() {
                *lost = Some(e.clone());
            }
        }
        let waiting: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, tx) in waiting {
            let _ = tx.send(Err(e.clone()));
        }
        // A batch deferred here for a lost device's release would wait forever.
        if let Some(s) = served(self) {
            s.mm.fail(e);
        }
        self.barrier_cv.notify_all();
    }
}

fn unexpected(node: usize, body: &Body) -> RuntimeError {
    RuntimeError::OnNode {
        node,
        message: format!("unexpected reply {body:?}"),
    }
}

/// The router loop: sends what the node's threads queued, receives and dispatches, keeps
/// heartbeats. Never waits on another thread of the node.
fn route<T: Transport>(link: &Arc<Link>, transport: &T, out: &crossbeam_channel::Receiver<Out>) {
    let beat = (link.cfg.lost_after / 4).max(Duration::from_millis(10));
    let start = Instant::now();
    let mut heard = vec![start; link.size];
    let mut said = vec![start; link.size];
    let mut stopping = false;
    loop {
        while let Ok(o) = out.try_recv() {
            match o {
                Out::Send(to, bytes) => {
                    if let Err(e) = transport.send(to, bytes) {
                        link.fail_all(lost_error(&e, to));
                    }
                    said[to] = Instant::now();
                }
                Out::Stop => stopping = true,
            }
        }
        if stopping {
            return;
        }
        match transport.recv(Duration::from_micros(200)) {
            Ok(Some((from, bytes))) => {
                if from < link.size {
                    heard[from] = Instant::now();
                }
                match postcard::from_bytes::<Msg>(&bytes) {
                    Ok(msg) => dispatch(link, from, msg),
                    Err(e) => link.fail_all(RuntimeError::OnNode {
                        node: from,
                        message: format!("a message could not be decoded: {e}"),
                    }),
                }
            }
            Ok(None) => {}
            Err(e) => {
                link.fail_all(lost_error(&e, usize::MAX));
                return;
            }
        }
        let now = Instant::now();
        for n in (0..link.size).filter(|&n| n != link.rank) {
            if now.duration_since(said[n]) >= beat {
                if let Ok(bytes) = postcard::to_allocvec(&Msg::Heartbeat) {
                    if let Err(e) = transport.send(n, bytes) {
                        link.fail_all(lost_error(&e, n));
                    }
                }
                said[n] = now;
            }
            if now.duration_since(heard[n]) >= link.cfg.lost_after {
                link.fail_all(RuntimeError::NodeLost {
                    node: n,
                    // A live node too busy to answer for that long is lost all the same:
                    // the message says which limit it ran into, so a user can raise it.
                    how: format!(
                        "silent for {:.2} s, past the {:.2} s limit after which a node counts \
                         as lost, `--lost-after-s`",
                        now.duration_since(heard[n]).as_secs_f64(),
                        link.cfg.lost_after.as_secs_f64()
                    ),
                });
                // Keep going: replies to the others still flow until this node stops.
                heard[n] = now;
            }
        }
    }
}

fn lost_error(e: &TransportError, node: usize) -> RuntimeError {
    RuntimeError::NodeLost {
        node: e.node.unwrap_or(node),
        how: e.how.clone(),
    }
}

fn served(link: &Link) -> Option<Arc<Served>> {
    link.served
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

fn reply(link: &Link, to: usize, id: u64, r: Result<Body>) {
    let body = r.map_err(|e| WireError::from_runtime(&e));
    let _ = link.send(to, &Msg::Reply { id, body });
}

/// Work that may wait (on the local manager) runs on its own thread, so the router never does.
fn off_router(link: &Arc<Link>, f: impl FnOnce(&Link) + Send + 'static) {
    let link = link.clone();
    let _ = std::thread::Builder::new()
        .name("tessera-remote-call".into())
        .spawn(move || f(&link));
}

fn not_ready(rank: usize) -> RuntimeError {
    RuntimeError::OnNode {
        node: rank,
        message: "asked before it was built".into(),
    }
}

fn dispatch(link: &Arc<Link>, from: usize, msg: Msg) {
    match msg {
        Msg::Heartbeat => {}
        Msg::Reply { id, body } => {
            let tx = link
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            if let Some(tx) = tx {
                let _ = tx.send(body.map_err(|e| e.into_runtime(from)));
            }
        }
        Msg::Barrier { epoch } => {
            let mut b = link.barrier.lock().unwrap_or_else(|p| p.into_inner());
            *b.arrived.entry(epoch).or_insert(0) += 1;
            link.barrier_cv.notify_all();
        }
        Msg::Counters { id } => reply(link, from, id, Ok(Body::Counters(link.counters()))),
        Msg::Shared { id } => {
            let bytes = link
                .shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            reply(link, from, id, Ok(Body::Bytes(bytes)))
        }
        Msg::Release { device } => {
            if let Some(s) = served(link) {
                s.mm.release_queued(DeviceId(device));
            }
        }
        Msg::Request {
            id,
            device,
            pages,
            keep,
        } => off_router(link, move |link| {
            let r = match served(link) {
                Some(s) => {
                    s.mm.request_keeping(
                        DeviceId(device),
                        pages
                            .into_iter()
                            .map(|(p, w)| PageRequest {
                                page: GlobalPage(p),
                                access: if w { Access::Write } else { Access::Read },
                            })
                            .collect(),
                        keep.into_iter().map(GlobalPage).collect(),
                    )
                    .wait()
                    .and_then(|r| r)
                    .map(|()| Body::Unit)
                }
                None => Err(not_ready(link.rank)),
            };
            reply(link, from, id, r);
        }),
        Msg::Holds { id, device, pages } => off_router(link, move |link| {
            let r = match served(link) {
                Some(s) => {
                    s.mm.holds_here(
                        DeviceId(device),
                        pages.into_iter().map(GlobalPage).collect(),
                    )
                    .map(Body::Bool)
                }
                None => Err(not_ready(link.rank)),
            };
            reply(link, from, id, r);
        }),
        Msg::ReadPacked { id, object } => off_router(link, move |link| {
            let r = match served(link) {
                Some(s) => {
                    s.mm.read_packed_here(ObjectId(object))
                        .map(|(_, b)| Body::Bytes(b))
                }
                None => Err(not_ready(link.rank)),
            };
            reply(link, from, id, r);
        }),
        Msg::DevBatch { device, home, ops } => {
            // Posted: nobody waits, so an unknown device has nobody to tell either.
            let Some((worker, map)) = served_device(link, device) else {
                return;
            };
            let _ = worker.submit(move |d: &mut dyn Device| {
                for op in ops {
                    if let Err(e) = apply(d, &map, home, op) {
                        map.lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .keep_failure(home, e);
                        break;
                    }
                }
            });
        }
        Msg::Dev {
            id,
            device,
            home,
            op,
        } => {
            let Some((worker, map)) = served_device(link, device) else {
                let e = match served(link) {
                    None => not_ready(link.rank),
                    Some(_) => {
                        RuntimeError::Core(tessera_core::CoreError::UnknownDevice(DeviceId(device)))
                    }
                };
                reply(link, from, id, Err(e));
                return;
            };
            let link = link.clone();
            // Queued on the device's worker in arrival order, behind nothing but the device's
            // own work; the worker sends the reply itself, so the router moves on at once.
            let _ = worker.submit(move |d: &mut dyn Device| {
                reply(&link, from, id, apply(d, &map, home, op));
            });
        }
    }
}

/// The worker and memory map of `device` when it is one of this node's, once the node serves.
fn served_device(link: &Link, device: u8) -> Option<(WorkerHandle, Arc<Mutex<MemoryMap>>)> {
    let s = served(link)?;
    let k = (device as usize)
        .checked_sub(link.rank * link.cfg.devices_per_node)
        .filter(|&k| k < s.workers.len())?;
    Some((s.workers[k].clone(), s.maps[k].clone()))
}

/// A device's physical memories as each home numbers them, and the first failure of a posted
/// operation per home (reported by that home's next waited-for operation).
#[derive(Default)]
pub(crate) struct MemoryMap {
    real: HashMap<(u16, u16), u16>,
    count: u16,
    failed: HashMap<u16, RuntimeError>,
}

impl MemoryMap {
    fn real(&self, home: u16, memory: u16) -> Result<u16> {
        self.real.get(&(home, memory)).copied().ok_or_else(|| {
            RuntimeError::Internal(format!(
                "home {home} used its memory {memory} on a device before creating it"
            ))
        })
    }
    /// A posted operation of `home` failed: kept (the first only) for its next waited one.
    fn keep_failure(&mut self, home: u16, e: RuntimeError) {
        self.failed.entry(home).or_insert(e);
    }
    fn slot(&self, home: u16, memory: u16, slot: u32) -> Result<SlotAddr> {
        Ok(SlotAddr {
            memory: self.real(home, memory)?,
            slot,
        })
    }
}

/// Carries out one home's operation on a device, with the home's memory numbers renamed.
fn apply(d: &mut dyn Device, map: &Mutex<MemoryMap>, home: u16, op: DevOp) -> Result<Body> {
    let mut m = map.lock().unwrap_or_else(|p| p.into_inner());
    let waited = !matches!(
        op,
        DevOp::CreateMemory { .. }
            | DevOp::WriteSlot { .. }
            | DevOp::SetPage { .. }
            | DevOp::ResizePageTable { .. }
    );
    if waited {
        if let Some(e) = m.failed.remove(&home) {
            return Err(e);
        }
    }
    match op {
        DevOp::CreateMemory {
            memory,
            slot_bytes,
            capacity,
        } => {
            let real = m.count;
            d.create_memory(real, slot_bytes, capacity)?;
            m.count += 1;
            m.real.insert((home, memory), real);
            Ok(Body::Unit)
        }
        DevOp::WriteSlot { memory, slot, data } => {
            d.write_slot(m.slot(home, memory, slot)?, &data)?;
            Ok(Body::Unit)
        }
        DevOp::ReadSlot { memory, slot } => {
            Ok(Body::Bytes(d.read_slot(m.slot(home, memory, slot)?)?))
        }
        DevOp::ReadSlots { at } => {
            let at = at
                .into_iter()
                .map(|(mem, s)| m.slot(home, mem, s))
                .collect::<Result<Vec<_>>>()?;
            Ok(Body::Slots(d.read_slots(&at)?))
        }
        DevOp::ResizePageTable { pages } => {
            d.resize_page_table(pages)?;
            Ok(Body::Unit)
        }
        DevOp::SetPage { page, desc } => {
            let desc = PageDescriptor::from_bits(desc)?;
            let desc = match desc.slot_addr() {
                Some(at) => {
                    PageDescriptor::resident(m.slot(home, at.memory, at.slot)?, desc.is_writable())
                }
                None => desc,
            };
            d.set_page(GlobalPage(page), desc)?;
            Ok(Body::Unit)
        }
        DevOp::PageTimes { pages } => Ok(Body::Times(
            d.page_times(&pages.into_iter().map(GlobalPage).collect::<Vec<_>>())?,
        )),
    }
}

/// A device as one home's memory manager sees it: every operation goes to the device's worker,
/// on this node or over the transport, under the home's own memory numbers. Launches are the
/// device's driver's, never a manager's, so a view refuses them.
pub(crate) struct NodeView {
    pub(crate) device: DeviceId,
    pub(crate) home: u16,
    pub(crate) target: Target,
    /// Posted operations for a device on another node, held until the worker job that made
    /// them ends (`end_of_job`) or an operation must wait: one message per job, not per page.
    held: Vec<DevOp>,
}

pub(crate) enum Target {
    Here {
        worker: WorkerHandle,
        map: Arc<Mutex<MemoryMap>>,
    },
    There {
        node: usize,
        link: Arc<Link>,
    },
}

impl NodeView {
    pub(crate) fn new(device: DeviceId, home: u16, target: Target) -> Self {
        NodeView {
            device,
            home,
            target,
            held: Vec::new(),
        }
    }

    /// Sends the held operations as one message (they keep their order: every later message
    /// from this home to that node follows them).
    fn send_held(&mut self) -> Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let ops = std::mem::take(&mut self.held);
        match &self.target {
            Target::There { node, link } => {
                link.check_lost()?;
                link.send(
                    *node,
                    &Msg::DevBatch {
                        device: self.device.0,
                        home: self.home,
                        ops,
                    },
                )
            }
            Target::Here { .. } => Ok(()),
        }
    }

    fn run(&mut self, op: DevOp, wait: bool) -> Result<Body> {
        if let Target::There { .. } = &self.target {
            if !wait {
                self.held.push(op);
                return Ok(Body::Unit);
            }
            self.send_held()?;
        }
        match &self.target {
            Target::Here { worker, map } => {
                let (map, home) = (map.clone(), self.home);
                worker.call(move |d| apply(d, &map, home, op))
            }
            Target::There { node, link } => {
                // Posted operations were held above; only waited ones get here.
                link.call(*node, |id| Msg::Dev {
                    id,
                    device: self.device.0,
                    home: self.home,
                    op,
                })
            }
        }
    }
    fn unit(&mut self, op: DevOp) -> Result<()> {
        match self.run(op, false)? {
            Body::Unit => Ok(()),
            other => Err(unexpected(self.home as usize, &other)),
        }
    }
    fn refuse<T>(&self, what: &str) -> Result<T> {
        Err(RuntimeError::Backend {
            device: self.device,
            message: format!("{what} is the device driver's, not a memory manager's"),
        })
    }
}

impl Device for NodeView {
    fn describe(&self) -> String {
        format!("{} as home {} sees it", self.device, self.home)
    }
    fn create_memory(&mut self, memory: u16, slot_bytes: u64, capacity: u32) -> Result<()> {
        self.unit(DevOp::CreateMemory {
            memory,
            slot_bytes,
            capacity,
        })
    }
    fn write_slot(&mut self, at: SlotAddr, data: &[u8]) -> Result<()> {
        self.unit(DevOp::WriteSlot {
            memory: at.memory,
            slot: at.slot,
            data: data.to_vec(),
        })
    }
    fn read_slot(&mut self, at: SlotAddr) -> Result<Vec<u8>> {
        match self.run(
            DevOp::ReadSlot {
                memory: at.memory,
                slot: at.slot,
            },
            true,
        )? {
            Body::Bytes(b) => Ok(b),
            other => Err(unexpected(self.home as usize, &other)),
        }
    }
    fn read_slots(&mut self, at: &[SlotAddr]) -> Result<Option<Vec<Vec<u8>>>> {
        match self.run(
            DevOp::ReadSlots {
                at: at.iter().map(|a| (a.memory, a.slot)).collect(),
            },
            true,
        )? {
            Body::Slots(s) => Ok(s),
            other => Err(unexpected(self.home as usize, &other)),
        }
    }
    fn resize_page_table(&mut self, pages: u64) -> Result<()> {
        self.unit(DevOp::ResizePageTable { pages })
    }
    fn set_page(&mut self, page: GlobalPage, desc: PageDescriptor) -> Result<()> {
        self.unit(DevOp::SetPage {
            page: page.0,
            desc: desc.0,
        })
    }
    fn page_times(&mut self, pages: &[GlobalPage]) -> Result<Vec<u64>> {
        match self.run(
            DevOp::PageTimes {
                pages: pages.iter().map(|p| p.0).collect(),
            },
            true,
        )? {
            Body::Times(t) => Ok(t),
            other => Err(unexpected(self.home as usize, &other)),
        }
    }
    fn launch(&mut self, _launch: &Launch) -> Result<LaunchOutcome> {
        self.refuse("a launch")
    }
    fn merge(&mut self) -> Result<MergeOutcome> {
        self.refuse("a merge")
    }
    fn discard_temp(&mut self) {}
    fn end_of_job(&mut self) {
        // A failure here is the link's (the node is lost); every later call reports it.
        let _ = self.send_held();
    }
}
