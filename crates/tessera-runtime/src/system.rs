//! A running tessera node: device workers, one memory manager, one driver per device.
//!
//! Wait-for graph (who may block waiting on whom): driver → device worker, driver → memory
//! manager, memory manager → device worker. Device workers wait on nobody. The graph has no
//! cycle, so the threads cannot deadlock (paper 3.8); docs/ARCHITECTURE.md has the argument.

use std::path::PathBuf;
use std::sync::Arc;

use tessera_core::{
    AccessMode, Coherence, CoreError, DeviceId, Location, ObjectDesc, ObjectEntry, Policy,
    ProtocolVariant, TexelFormat, MAX_DEVICES,
};

use crate::backend::Device;
use crate::backend::Domain;
use crate::cluster::{Link, MemoryMap, NodeView, Target};
use crate::cpu::CpuDevice;
use crate::driver::{DeviceContext, PassSpec, PassStats, Procedure};
use crate::error::{Result, RuntimeError};
use crate::kernel::{check_launch, Bound, Kernel};
use crate::manager::{self, ManagerConfig, ManagerHandle, Prefetch, Thrashing};
use crate::partition::Partition;
use crate::sync::channel::{bounded, unbounded, Sender};
use crate::sync::{Builder, JoinHandle};
use crate::worker::{self, Pending, WorkerHandle};

/// How to build a node.
#[derive(Clone, Debug)]
pub struct SystemConfig {
    /// Devices of the node, 1 to [`tessera_core::MAX_DEVICES`] (64).
    pub devices: usize,
    /// The coherence protocol: [`ProtocolVariant::Correct`] but for the model checker's and
    /// the litmus runner's deliberately broken variants, which exist to be caught.
    pub variant: ProtocolVariant,
    /// What a read of a page another device modified does: served from the owner, which keeps
    /// it (owned pages, the default), or written home as well (the journal paper's rule).
    pub coherence: Coherence,
    /// Per device budget for physical memories, in bytes.
    pub budget_bytes: u64,
    /// Bytes per physical memory; another is created when all are full (paper 3.2.2).
    pub memory_bytes: u64,
    /// Worker threads shared by the CPU devices' kernels (0: one per core).
    pub cpu_threads: usize,
    /// Which pages a device gives up when a batch needs more slots than its budget has left.
    pub policy: Policy,
    /// Seeds the `random` policy, so runs repeat.
    pub seed: u64,
    /// What the memory manager does about pages evicted and faulted again in quick succession.
    pub thrashing: Thrashing,
    /// Keep every batch's pages for Belady's OPT ([`ManagerHandle::trace`]).
    pub record_trace: bool,
    /// Fetch more pages than a batch asks for (`Prefetch::Tree`: UVM's bitmap tree).
    pub prefetch: Prefetch,
    /// Keep the home copies in a memory-mapped file at this path instead of host memory, so
    /// objects may together exceed host RAM. The file is created fresh: an existing path is
    /// refused, never overwritten (`RuntimeError::HomeFileExists`). It is scratch space for
    /// this node, removed when the `System` is dropped; another process changing it meanwhile
    /// is undefined behaviour.
    pub home_file: Option<PathBuf>,
    /// Run each pass's devices one at a time instead of together ([`Schedule::Isolated`]).
    pub isolated: bool,
    /// Asynchronous staging: under oversubscription a driver stages its next band's
    /// footprint pages (`Message::Stage`) around the current band's launch: room is made
    /// before the launch is queued, and the memory manager copies the pages into the device
    /// while it runs where the backend takes such writes (docs/PROTOCOL.md, "Asynchronous
    /// staging"). Off by default.
    pub staging: bool,
    /// The relaunch procedure asks for the pages a kernel's footprint names before a band's
    /// first launch, on every device, instead of only on devices that evict: one request
    /// batch in place of a pass of faults and a relaunch (a neighbour's read of a boundary
    /// page leaves the owner's copy read-only, so otherwise every pass rewrites a faulted page
    /// row per boundary twice). On by default; off is the paper's relaunch as it stands (3.6):
    /// launch, fault, request, relaunch. Kernels without a footprint relaunch as before. It
    /// serves two-pass too: a part whose pages the device lacks asks for what the footprint
    /// names, in place of its request pass (which runs every invocation a second time), and
    /// then runs in place where [`SystemConfig::held_in_place`] says so; off, the request pass
    /// runs as the paper's (3.4).
    pub footprint_ahead: bool,
    /// Deferred execution (on a node of one device, or of devices that share one queue: the
    /// wgpu devices of one GPU, which also queue the bands whose pages they must ask for, and
    /// settle together): a band whose pages the device holds is
    /// queued without waiting for its outcome, and the driver waits once, when it settles:
    /// before anything else it must do, before a job of the host's on the device
    /// ([`System::on_device`]), before the host reads, frees, evicts or places an object, and
    /// at [`System::settle`], which a caller timing frames calls at the end of each. A
    /// deferred launch that faults makes the ones queued behind it do nothing; settling runs
    /// them again in order, so results never depend on it. Off by default: a caller that
    /// times its passes must call [`System::settle`] before it stops the clock.
    pub deferred: bool,
    /// The two-pass procedure runs a part whose pages the device holds with the rights it
    /// needs, writes included, in place: one launch that stores into the pages, as a held
    /// relaunch band does, instead of a compute pass into the temporary and a merge. Such a
    /// part has nothing to ask for before its compute pass or after it, so the temporary
    /// would only copy what the launch stores (docs/PROTOCOL.md, "Procedures"). On by
    /// default; off is the paper's two-pass as it stands (3.5), which `--held-in-place off`
    /// keeps for its stage figures.
    pub held_in_place: bool,
    /// Passes are cut across devices on the pages of the pass-sized textures they bind, where
    /// every band stays within a quarter of an even share (`System::regions`,
    /// docs/PROTOCOL.md "Bands on page boundaries"). On by default; off cuts evenly, as the
    /// paper's partitioning does (3.6), which its page-size figures show.
    pub split_on_pages: bool,
}

/// How [`System::run_pass`] runs the devices of one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// All devices at once, as a multi-GPU machine runs them.
    #[default]
    Concurrent,
    /// One device after another, each with the whole machine to itself: the next device's
    /// turn starts when the previous one's pass has returned. On a machine whose software
    /// devices share a few cores this is how a device's own work is timed without the others'
    /// work in it (docs/EVALUATION.md, "The isolated-device model"). The result is the same as
    /// a concurrent pass's: within a pass no device reads what another writes (paper 3.1).
    Isolated,
}

impl Default for SystemConfig {
    fn default() -> Self {
        SystemConfig {
            devices: 1,
            variant: ProtocolVariant::Correct,
            coherence: Coherence::Owned,
            budget_bytes: 4 << 30,
            memory_bytes: 64 << 20,
            cpu_threads: 0,
            policy: Policy::Lru,
            seed: 1,
            thrashing: Thrashing::Pin,
            record_trace: false,
            prefetch: Prefetch::Off,
            home_file: None,
            isolated: false,
            staging: false,
            footprint_ahead: true,
            deferred: false,
            held_in_place: true,
            split_on_pages: true,
        }
    }
}

/// A builder over the defaults, so that a caller names only what it changes and a field added
/// later needs no edit at every call site:
/// `SystemConfig::new(2).threads(1).budget(1 << 20).policy(Policy::Clock)`.
impl SystemConfig {
    /// The defaults, on `devices` devices.
    pub fn new(devices: usize) -> Self {
        SystemConfig {
            devices,
            ..Default::default()
        }
    }
    /// Threads of the pool the CPU devices share (0: one per core; at most
    /// [`max_cpu_threads`]).
    pub fn threads(mut self, cpu_threads: usize) -> Self {
        self.cpu_threads = cpu_threads;
        self
    }
    /// Per device budget, bytes.
    pub fn budget(mut self, bytes: u64) -> Self {
        self.budget_bytes = bytes;
        self
    }
    /// Bytes per physical memory.
    pub fn memory(mut self, bytes: u64) -> Self {
        self.memory_bytes = bytes;
        self
    }
    /// Which page a full device evicts first (`SystemConfig::policy`).
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }
    /// What the memory manager does about pages evicted and asked for again
    /// (`SystemConfig::thrashing`).
    pub fn thrashing(mut self, thrashing: Thrashing) -> Self {
        self.thrashing = thrashing;
        self
    }
    /// Pages fetched beside those asked for (`SystemConfig::prefetch`).
    pub fn prefetch(mut self, prefetch: Prefetch) -> Self {
        self.prefetch = prefetch;
        self
    }
    /// Stages the next band's pages during the current band's launch under a budget
    /// (`SystemConfig::staging`).
    pub fn staging(mut self, on: bool) -> Self {
        self.staging = on;
        self
    }
    /// Relaunch asks first for the pages a kernel's footprint names
    /// (`SystemConfig::footprint_ahead`).
    pub fn footprint_ahead(mut self, on: bool) -> Self {
        self.footprint_ahead = on;
        self
    }
    /// Cuts the devices' bands on page boundaries where that keeps them near even
    /// (`SystemConfig::split_on_pages`).
    pub fn split_on_pages(mut self, on: bool) -> Self {
        self.split_on_pages = on;
        self
    }
    /// Queues launches without waiting for them where the devices allow it
    /// (`SystemConfig::deferred`).
    pub fn deferred(mut self, on: bool) -> Self {
        self.deferred = on;
        self
    }
    /// Runs a two-pass part whose pages the device holds in place (`SystemConfig::held_in_place`).
    pub fn held_in_place(mut self, on: bool) -> Self {
        self.held_in_place = on;
        self
    }
    /// The coherence rule: owned pages (the default) or the paper's write-home
    /// (`SystemConfig::coherence`).
    pub fn coherence(mut self, coherence: Coherence) -> Self {
        self.coherence = coherence;
        self
    }
    /// Keeps home in a file at `path` instead of host memory (`SystemConfig::home_file`).
    pub fn home_file(mut self, path: Option<PathBuf>) -> Self {
        self.home_file = path;
        self
    }
    /// Records each device's requests, for a trace (`SystemConfig::record_trace`).
    pub fn record_trace(mut self, on: bool) -> Self {
        self.record_trace = on;
        self
    }
    /// Runs the devices one at a time, for the isolated model's timings (`SystemConfig::isolated`).
    pub fn isolated(mut self, on: bool) -> Self {
        self.isolated = on;
        self
    }
    /// A protocol variant: a deliberately broken one, for checking that the checks catch it
    /// (`SystemConfig::variant`).
    pub fn variant(mut self, variant: ProtocolVariant) -> Self {
        self.variant = variant;
        self
    }
}

type DriverJob = Box<dyn FnOnce(&mut DeviceContext) + Send>;

/// A node of devices sharing one demand-paged address space: the objects created here live at
/// home, in host memory, and each device holds the pages its kernels touch. Built by
/// [`System::cpu`] (software devices) or a backend's constructor (`tessera_wgpu`); objects are
/// made with [`System::create`] and its typed helpers, kernels run with
/// [`System::run_kernel`] (or [`System::run_pass`] for a pass spelled out), results come back
/// with [`System::read`], and [`System::free`] gives an object's memory back. Dropping the
/// system stops its threads.
pub struct System {
    /// The handle to the memory manager, for what the methods here do not cover (reading
    /// and freeing by id, traffic, eviction settings).
    pub mm: ManagerHandle,
    drivers: Arc<Vec<Sender<DriverJob>>>,
    backend: String,
    /// Whether every device counts its remote accesses (`Device::counts_remote`).
    counts_remote: bool,
    joins: Vec<JoinHandle<()>>,
    schedule: Schedule,
    /// On a node of a cluster: the link to the others (crate::cluster).
    link: Option<Arc<Link>>,
    /// This node's device workers, for their host counters.
    workers: Vec<WorkerHandle>,
    /// Deferred execution across the node's devices, which share one queue
    /// (`DeviceContext::set_shared`): the node settles them all together.
    shared: bool,
    /// Relaunch asks for a footprint kernel's pages first (`SystemConfig::footprint_ahead`).
    footprint_ahead: bool,
    /// `SystemConfig::split_on_pages`.
    split_on_pages: bool,
}

impl System {
    /// A node of CPU devices (the embedded default backend).
    pub fn cpu(cfg: &SystemConfig) -> Result<Self> {
        if cfg.devices == 0 || cfg.devices > MAX_DEVICES {
            return Err(RuntimeError::DeviceCount {
                got: cfg.devices,
                max: MAX_DEVICES,
            });
        }
        let pool = cpu_pool(cfg.cpu_threads)?;
        let devices: Vec<Box<dyn Device>> = (0..cfg.devices)
            .map(|i| Box::new(CpuDevice::new(DeviceId(i as u8), pool.clone())) as Box<dyn Device>)
            .collect();
        Self::with_devices(devices, cfg)
    }

    /// A node over any backend's devices.
    pub fn with_devices(devices: Vec<Box<dyn Device>>, cfg: &SystemConfig) -> Result<Self> {
        env_switch(PEER_COPY)?;
        check_sizes(cfg)?;
        let backend = devices.first().map(|d| d.describe()).unwrap_or_default();
        let counts_remote = devices.iter().all(|d| d.counts_remote());
        let memory_limits = devices.iter().map(|d| d.memory_limits()).collect();
        let mut joins = Vec::new();
        let mut workers = Vec::new();
        for (i, d) in devices.into_iter().enumerate() {
            let (h, j) = worker::spawn(DeviceId::new(i)?, d)?;
            workers.push(h);
            joins.push(j);
        }
        let (mm, j) = manager::spawn(
            workers.clone(),
            &ManagerConfig {
                variant: cfg.variant,
                coherence: cfg.coherence,
                budget_bytes: cfg.budget_bytes,
                memory_bytes: cfg.memory_bytes,
                memory_limits,
                policy: cfg.policy,
                seed: cfg.seed,
                thrashing: cfg.thrashing,
                record_trace: cfg.record_trace,
                prefetch: cfg.prefetch,
                home_file: cfg.home_file.clone(),
                homes: tessera_core::HomeMap::Single(tessera_core::NodeId(0)),
                staging: cfg.staging,
            },
        )?;
        joins.push(j);
        let shared = cfg.deferred && workers.len() > 1 && one_queue(&workers)?;
        let drivers = Arc::new(spawn_drivers(
            workers.clone(),
            &mm,
            cfg,
            shared,
            &mut joins,
        )?);
        // Only a node that defers needs the host's calls to settle first.
        let mm = if cfg.deferred && (drivers.len() == 1 || shared) {
            mm.settling_first(settle_hook(&drivers, shared))
        } else {
            mm
        };
        Ok(System {
            shared,
            footprint_ahead: cfg.footprint_ahead,
            split_on_pages: cfg.split_on_pages,
            mm,
            drivers,
            backend,
            counts_remote,
            joins,
            workers,
            schedule: if cfg.isolated {
                Schedule::Isolated
            } else {
                Schedule::Concurrent
            },
            link: None,
        })
    }

    /// This node's part of a system over a cluster of nodes (crate::cluster): `cfg.devices`
    /// is ignored; the node runs `link.devices_per_node()` CPU devices, numbered after the
    /// lower nodes' ones, and a memory manager home to its share of the pages. Every node must
    /// build its part and then make the same calls (create, passes, reads) in the same order.
    /// Returns once every node has built its part.
    pub fn cpu_on_cluster(cfg: &SystemConfig, link: Arc<Link>) -> Result<Self> {
        let pool = cpu_pool(cfg.cpu_threads)?;
        let first = link.rank() * link.devices_per_node();
        let devices = (0..link.devices_per_node())
            .map(|i| {
                let id = DeviceId::new(first + i)?;
                Ok(Box::new(CpuDevice::new(id, pool.clone())) as Box<dyn Device>)
            })
            .collect::<Result<Vec<_>>>()?;
        Self::on_cluster(devices, cfg, link)
    }

    /// [`System::cpu_on_cluster`] over any backend's devices: `devices` are this node's
    /// `link.devices_per_node()`, numbered after the lower nodes' ones (every node must run
    /// the same backend). Where a backend limits a device's memories (wgpu binds four), each
    /// home may create its share of them, so a cluster has at most that many nodes.
    pub fn on_cluster(
        devices: Vec<Box<dyn Device>>,
        cfg: &SystemConfig,
        link: Arc<Link>,
    ) -> Result<Self> {
        check_sizes(cfg)?;
        let k = link.devices_per_node();
        let (rank, nodes) = (link.rank(), link.size());
        let all = nodes * k;
        if devices.len() != k {
            return Err(RuntimeError::NodeDevices {
                rank,
                got: devices.len(),
                per_node: k,
            });
        }
        let backend = devices.first().map(|d| d.describe()).unwrap_or_default();
        let counts_remote = devices.iter().all(|d| d.counts_remote());
        let limits = devices
            .first()
            .map(|d| d.memory_limits())
            .unwrap_or_default();
        let per_home = match limits.max_memories {
            None => limits,
            Some(m) => {
                let share = m as usize / nodes;
                if share == 0 {
                    return Err(RuntimeError::TooManyHomes {
                        backend,
                        max: m,
                        nodes,
                    });
                }
                tessera_core::MemoryLimits {
                    max_memories: Some(share as u16),
                    max_memory_bytes: limits.max_memory_bytes,
                }
            }
        };
        let mut joins = Vec::new();
        let mut workers = Vec::new();
        let mut maps = Vec::new();
        for (i, d) in devices.into_iter().enumerate() {
            let id = DeviceId::new(rank * k + i)?;
            let (h, j) = worker::spawn(id, d)?;
            workers.push(h);
            joins.push(j);
            maps.push(Arc::new(std::sync::Mutex::new(MemoryMap::default())));
        }
        let mut views = Vec::new();
        for g in 0..all {
            let id = DeviceId::new(g)?;
            let node = g / k;
            let target = if node == rank {
                Target::Here {
                    worker: workers[g - rank * k].clone(),
                    map: maps[g - rank * k].clone(),
                }
            } else {
                Target::There {
                    node,
                    link: link.clone(),
                }
            };
            let view = NodeView::new(id, rank as u16, target);
            let (h, j) = worker::spawn(id, Box::new(view))?;
            views.push(h);
            joins.push(j);
        }
        let share = nodes as u64;
        let (mm, j) = manager::spawn(
            views,
            &ManagerConfig {
                variant: cfg.variant,
                coherence: cfg.coherence,
                budget_bytes: cfg.budget_bytes / share,
                memory_bytes: (cfg.memory_bytes / share).max(1 << 16),
                memory_limits: vec![per_home; all],
                policy: cfg.policy,
                seed: cfg.seed,
                thrashing: cfg.thrashing,
                record_trace: cfg.record_trace,
                prefetch: cfg.prefetch,
                home_file: cfg.home_file.clone(),
                homes: link.homes(),
                staging: cfg.staging,
            },
        )?;
        joins.push(j);
        link.serve(workers.clone(), maps, mm.clone());
        let mm = mm.on_cluster(link.clone());
        // Staging stays off: a stage is one manager's answer, and batches here span homes.
        let drivers = Arc::new(spawn_drivers(
            workers.clone(),
            &mm,
            &SystemConfig {
                staging: false,
                ..cfg.clone()
            },
            false,
            &mut joins,
        )?);
        // No node may reach another before that one serves its devices and pages.
        link.barrier()?;
        Ok(System {
            mm,
            drivers,
            backend: format!("{backend}, node {rank} of {nodes}"),
            counts_remote,
            joins,
            schedule: if cfg.isolated {
                Schedule::Isolated
            } else {
                Schedule::Concurrent
            },
            link: Some(link),
            workers,
            shared: false,
            footprint_ahead: cfg.footprint_ahead,
            split_on_pages: cfg.split_on_pages,
        })
    }

    /// Per device of this node, the host's work for it so far (`HostCounters`): submissions,
    /// blocking waits, bytes read back and the driver's messages to the memory manager. Read
    /// without a job or a message, so reading changes no count.
    pub fn host_counters(&self) -> Vec<crate::stats::HostCounters> {
        self.workers
            .iter()
            .map(|w| {
                let mut h = w.counters();
                h.manager_messages = self.mm.messages(w.device);
                h
            })
            .collect()
    }

    /// Adds to `into`, per device of this node, the host's work since `before` (an earlier
    /// [`System::host_counters`]): how a run sums the frames it measures and skips the rest.
    pub fn add_host_since(
        &self,
        into: &mut [crate::stats::HostCounters],
        before: &[crate::stats::HostCounters],
    ) {
        for ((h, now), was) in into.iter_mut().zip(self.host_counters()).zip(before) {
            h.add(&now.since(was));
        }
    }

    /// The cluster this node is part of, if any.
    pub fn link(&self) -> Option<&Arc<Link>> {
        self.link.as_ref()
    }

    /// Devices of the whole system: this node's on one node, every node's on a cluster. A
    /// pass's domain is split across all of them.
    pub fn all_devices(&self) -> usize {
        match &self.link {
            Some(l) => l.size() * l.devices_per_node(),
            None => self.drivers.len(),
        }
    }

    /// The global index of this node's first device.
    fn first_device(&self) -> usize {
        self.link
            .as_ref()
            .map_or(0, |l| l.rank() * l.devices_per_node())
    }

    /// This node's devices: the ones `on_device` reaches and whose stats `run_pass` returns.
    pub fn devices(&self) -> usize {
        self.drivers.len()
    }

    /// What the devices are, for reports.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// Whether the devices count their accesses to remote pages: the CPU backend does, wgpu
    /// does not, so its traffic counters and modeled time leave them out.
    pub fn counts_remote(&self) -> bool {
        self.counts_remote
    }

    /// Creates an object at home, on no device yet, holding `data` (zeros where `None`):
    /// its texels row by row from `y = 0`, each in its format's bytes (little-endian for
    /// R32Float and Rgba32Float), or a buffer's bytes, which kernels address as
    /// little-endian 32-bit words. `data` must be the object's whole size
    /// ([`RuntimeError::DataSize`] otherwise).
    pub fn create(&self, desc: ObjectDesc, data: Option<Vec<u8>>) -> Result<ObjectEntry> {
        self.mm.create(desc, data)
    }

    /// Frees an object: every device's copy is dropped with no write-back and its pages
    /// leave home. After it, the entry is refused wherever it is given
    /// ([`RuntimeError::NotLive`]), and a second free is an error.
    pub fn free(&self, object: &ObjectEntry) -> Result<()> {
        self.mm.check_entry(object)?;
        self.mm.free(object.id)
    }

    /// Replaces an object's data from the host, between passes: `data` is its whole size, as
    /// [`System::create`] takes it (for a mipmapped texture, its slots; from a level 0,
    /// [`System::write_mip_rgba8`]). Every device's copy is dropped with no write-back (the new
    /// bytes replace them all) and the next pass fetches the pages anew, as after a create.
    /// Refused for a remote object and across nodes.
    pub fn write(&self, object: &ObjectEntry, data: Vec<u8>) -> Result<()> {
        self.mm.check_entry(object)?;
        self.mm.write(object.id, data)
    }

    /// Creates an object reached in `mode` (docs/PROTOCOL.md, "Access modes"):
    /// [`AccessMode::Migrate`] is [`System::create`]; a [`AccessMode::ReplicateRead`] object
    /// refuses stores ([`RuntimeError::ReadOnlyObject`]); a [`AccessMode::Remote`] object's
    /// pages are never copied, all in host memory until [`System::place`] says otherwise.
    pub fn create_with(
        &self,
        desc: ObjectDesc,
        data: Option<Vec<u8>>,
        mode: AccessMode,
    ) -> Result<ObjectEntry> {
        self.mm.create_with(desc, data, mode)
    }

    /// Places each page of a remote object: `location(local page, page column, page row)`.
    /// Between passes. Which accesses cross a link, and which link, follows from it.
    pub fn place(
        &self,
        object: &ObjectEntry,
        location: impl Fn(u64, u64, u64) -> Location,
    ) -> Result<()> {
        let (px, _) = object.desc.pages_xy();
        let locations = (0..object.desc.page_count())
            .map(|p| location(p, p % px, p / px))
            .collect();
        self.mm.place(object.id, locations)
    }

    /// Places a remote object's pages as `partition` splits a domain of the object's size
    /// across this node's devices: each page lives on the device whose region holds its first
    /// texel, so with the same partition for the passes only accesses across a region's edge
    /// are remote (GPU-SM §6.1, Fig. 11b: each GPU's domain in its own memory, halos remote).
    pub fn place_by(&self, object: &ObjectEntry, partition: Partition) -> Result<()> {
        let (w, h) = object.desc.extent();
        let (w, h) = (w as u32, h as u32);
        // Cut where a pass of the object's size cuts it (`System::regions`).
        let page = self.cut_page(&[Bound::new(object)], w, h);
        let regions = partition.regions_on_pages(w, h, self.devices() as u32, page)?;
        self.place(object, |local, _, _| {
            let (x, y, _, _) = object.desc.page_rect(local);
            let d = regions
                .iter()
                .position(|r| match *r {
                    Domain::Rect { x0, y0, x1, y1 } => {
                        (x0 as u64..x1 as u64).contains(&x) && (y0 as u64..y1 as u64).contains(&y)
                    }
                    Domain::List(_) => false,
                })
                .unwrap_or(0);
            Location::Device(d as u8)
        })
    }

    /// The object's access mode.
    pub fn access(&self, object: &ObjectEntry) -> Result<AccessMode> {
        self.mm.access(object.id)
    }

    /// Runs `f` in device `d`'s driver, after everything queued there before.
    pub fn on_device<R: Send + 'static>(
        &self,
        d: usize,
        f: impl FnOnce(&mut DeviceContext) -> R + Send + 'static,
    ) -> Result<Pending<R>> {
        // The caller's job sees the device as the passes before it left it. Devices that
        // share a queue settle together.
        if self.shared {
            settle_node(&self.drivers, true)?;
        }
        self.on_driver(d, move |ctx| {
            ctx.settle();
            f(ctx)
        })
    }

    /// Waits until every device has run what it was given (deferred launches settled, and
    /// any that faulted finished), and returns per device what settling did: the work of
    /// the last passes that the pass stats did not hold yet. A caller timing frames calls it
    /// before stopping the clock ([`SystemConfig::deferred`]).
    pub fn settle(&self) -> Result<Vec<PassStats>> {
        if self.shared {
            settle_node(&self.drivers, true)?;
        }
        let pending = (0..self.drivers.len())
            .map(|d| self.on_driver(d, |ctx| ctx.settle_and_take()))
            .collect::<Result<Vec<_>>>()?;
        let results: Vec<Result<PassStats>> = pending.into_iter().map(|p| p.wait()?).collect();
        results.into_iter().collect()
    }

    /// Runs `f` in device `d`'s driver after everything queued there, deferred launches
    /// left as they are.
    fn on_driver<R: Send + 'static>(
        &self,
        d: usize,
        f: impl FnOnce(&mut DeviceContext) -> R + Send + 'static,
    ) -> Result<Pending<R>> {
        let tx = self.drivers.get(d).ok_or(RuntimeError::Core(
            tessera_core::CoreError::UnknownDevice(DeviceId(d as u8)),
        ))?;
        send_to_driver(tx, f)
    }
}

/// Queues `f` on a driver; its result comes back on a fresh reply channel.
fn send_to_driver<R: Send + 'static>(
    tx: &Sender<DriverJob>,
    f: impl FnOnce(&mut DeviceContext) -> R + Send + 'static,
) -> Result<Pending<R>> {
    let (rtx, rrx) = bounded(1);
    tx.send(Box::new(move |ctx: &mut DeviceContext| {
        let _ = rtx.send(f(ctx));
    }))
    .map_err(|_| RuntimeError::ThreadGone("driver"))?;
    Ok(Pending::new(rrx, "driver"))
}

impl System {
    /// How [`System::run_pass`] runs a pass's devices (from [`SystemConfig::isolated`]).
    pub fn schedule(&self) -> Schedule {
        self.schedule
    }

    /// Whether passes are cut on page boundaries (`SystemConfig::split_on_pages`).
    pub fn split_on_pages(&self) -> bool {
        self.split_on_pages
    }

    /// The page side a `width` × `height` pass binding `bindings` is cut on: 1 (an even cut)
    /// with `SystemConfig::split_on_pages` off.
    fn cut_page(&self, bindings: &[Bound], width: u32, height: u32) -> u32 {
        match self.split_on_pages {
            true => crate::driver::split_page(bindings, width, height),
            false => 1,
        }
    }

    /// How [`System::run_pass`] splits a `width` × `height` pass binding `bindings` across
    /// the devices (a cluster's, all of them, in rank order): `partition`'s bands, cut on
    /// the pages of the pass-sized textures it binds where that keeps them near even
    /// ([`Partition::regions_on_pages`]).
    pub fn regions(
        &self,
        bindings: &[Bound],
        width: u32,
        height: u32,
        partition: Partition,
    ) -> Result<Vec<Domain>> {
        let page = self.cut_page(bindings, width, height);
        partition.regions_on_pages(width, height, self.all_devices() as u32, page)
    }

    /// Runs one pass over `width × height`, split across the devices, and waits for all of
    /// them: the barrier between passes. Returns each device's stats. The devices run as
    /// [`System::schedule`] says.
    pub fn run_pass(
        &self,
        spec: &PassSpec,
        width: u32,
        height: u32,
        partition: Partition,
        procedure: Procedure,
    ) -> Result<Vec<PassStats>> {
        self.run_pass_scheduled(spec, width, height, partition, procedure, self.schedule)
    }

    /// [`System::run_pass`] with the devices run as `schedule` says, whatever the node's
    /// default. With [`Schedule::Isolated`] each device's stats are its work alone.
    pub fn run_pass_scheduled(
        &self,
        spec: &PassSpec,
        width: u32,
        height: u32,
        partition: Partition,
        procedure: Procedure,
        schedule: Schedule,
    ) -> Result<Vec<PassStats>> {
        self.mm.check_bound(&spec.bindings)?;
        let page = self.cut_page(&spec.bindings, width, height);
        let regions = partition.regions_for_pass(width, height, self.all_devices() as u32, page)?;
        let first = self.first_device();
        let mine: Vec<Domain> = regions
            .into_iter()
            .skip(first)
            .take(self.devices())
            .collect();
        // Across one queue a pass is queued, and its barrier is its devices having queued
        // it, where every device can queue it; otherwise the node settles first and the pass
        // runs as below, its barrier its devices having run it.
        let defer = self.shared
            && schedule == Schedule::Concurrent
            && procedure == Procedure::Relaunch
            && self.footprint_ahead
            && spec.kernel.footprint().is_some()
            && mine.iter().all(|d| matches!(d, Domain::Rect { .. }));
        if self.shared && !defer {
            settle_node(&self.drivers, true)?;
        }
        // A node of one device decides for itself, pass by pass.
        let defer = defer || !self.shared;
        let start = |d: usize, domain: Domain| {
            let spec = PassSpec {
                domain,
                ..spec.clone()
            };
            self.on_driver(d, move |ctx| {
                let stats = ctx.run_pass_deferring(&spec, procedure, defer);
                (stats, ctx.has_left())
            })
        };
        let res = match schedule {
            Schedule::Concurrent => {
                let pending: Vec<_> = mine
                    .into_iter()
                    .enumerate()
                    .map(|(d, domain)| start(d, domain))
                    .collect::<Result<_>>()?;
                // Wait for every device before reporting the first error: the barrier must
                // hold.
                let results: Vec<(Result<PassStats>, bool)> = pending
                    .into_iter()
                    .map(|p| p.wait())
                    .collect::<Result<_>>()?;
                let left: Vec<usize> = (0..results.len()).filter(|&d| results[d].1).collect();
                if !left.is_empty() {
                    // Bands that could not be queued run once everything queued has.
                    settle_node(&self.drivers, true)?;
                    let runs = left
                        .into_iter()
                        .map(|d| self.on_driver(d, |ctx| ctx.run_left()))
                        .collect::<Result<Vec<_>>>()?;
                    for r in runs {
                        r.wait()?;
                    }
                }
                results.into_iter().map(|(r, _)| r).collect()
            }
            // The turn passes when a device's pass has returned, its lock released included,
            // so no two devices' work overlaps. A failed turn ends the pass: nothing else is
            // running, so the barrier holds. On a cluster the nodes take turns too.
            Schedule::Isolated => {
                let mut out = Ok(Vec::new());
                let turns = self.link.as_ref().map_or(1, |l| l.size());
                let me = self.link.as_ref().map_or(0, |l| l.rank());
                for turn in 0..turns {
                    if turn == me {
                        out = mine
                            .iter()
                            .cloned()
                            .enumerate()
                            .map(|(d, domain)| start(d, domain)?.wait()?.0)
                            .collect();
                    }
                    if turn + 1 < turns {
                        if let Some(l) = &self.link {
                            l.barrier()?;
                        }
                    }
                }
                out
            }
        };
        // The pass barrier across nodes: no node starts the next pass before every node's
        // devices have finished this one.
        if let Some(l) = &self.link {
            l.barrier()?;
        }
        res
    }
}

/// A mipmapped RGBA8 texture's host bytes (its slots in page order) from its level 0, and its
/// border.
fn mip_bytes(desc: &ObjectDesc, level0: &[u32]) -> Result<(Vec<u8>, u32)> {
    desc.validate()?;
    let Some((layout, addressing)) = desc.mip() else {
        return Err(RuntimeError::Config(format!(
            "a mipmapped description (ObjectDesc::mipmapped) is needed, not {desc:?}"
        )));
    };
    let (w, h) = layout.extent(0)?;
    let want = w as usize * h as usize;
    if level0.len() != want {
        return Err(RuntimeError::DataSize {
            object: format!("level 0 of a {w}x{h} mipmapped texture"),
            got: level0.len() * 4,
            want: want * 4,
        });
    }
    let chain = tessera_core::mip::chain_rgba8(&layout, level0.to_vec());
    let data =
        tessera_core::mip::words_to_bytes(&tessera_core::mip::slots(&layout, &chain, addressing));
    Ok((data, layout.border()))
}

/// Refuses an object that is not of the kind `format` names (`None`: a buffer), for the
/// typed reads, whose element type follows from the kind.
fn expect_kind(object: &ObjectEntry, format: Option<TexelFormat>) -> Result<()> {
    let actual = match object.desc {
        ObjectDesc::Texture { format: f, .. } => Some(f),
        ObjectDesc::Buffer { .. } => None,
        ObjectDesc::Mipmapped { .. } => {
            return Err(wrong_kind(object, format, "mipmapped texture"));
        }
    };
    if actual == format {
        return Ok(());
    }
    Err(wrong_kind(object, format, crate::kernel::kind_name(actual)))
}

fn wrong_kind(
    object: &ObjectEntry,
    format: Option<TexelFormat>,
    actual: &'static str,
) -> RuntimeError {
    RuntimeError::Core(CoreError::WrongKind {
        object: object.id,
        expected: crate::kernel::kind_name(format),
        actual,
    })
}

/// The short path for a program's own kernels (`crates/tessera/examples/blur`): an R32Float
/// texture from a slice, one pass of a kernel over every device, the texture back as floats.
/// Everything else (formats, partitions, procedures) stays reachable through
/// [`System::create`] and [`System::run_pass`].
impl System {
    /// Creates a `width × height` R32Float texture in `page × page` pages, holding `data`
    /// (row-major, row `y = 0` first: the bottom row, as textures count rows) or zeros.
    pub fn create_f32(
        &self,
        width: u32,
        height: u32,
        page: u32,
        data: Option<&[f32]>,
    ) -> Result<ObjectEntry> {
        let desc = ObjectDesc::texture(width, height, TexelFormat::R32Float, page)?;
        let bytes = data.map(|d| d.iter().flat_map(|v| v.to_le_bytes()).collect());
        self.create(desc, bytes)
    }

    /// Replaces an R32Float texture's texels, as [`System::create_f32`] takes them.
    pub fn write_f32(&self, object: &ObjectEntry, data: &[f32]) -> Result<()> {
        self.mm.check_entry(object)?;
        expect_kind(object, Some(TexelFormat::R32Float))?;
        self.mm.write(
            object.id,
            data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        )
    }

    /// The latest texels of an R32Float texture, row-major, row `y = 0` (the bottom) first.
    pub fn read_f32(&self, object: &ObjectEntry) -> Result<Vec<f32>> {
        self.read_as(object, Some(TexelFormat::R32Float), |w: [[u8; 4]; 1]| {
            f32::from_le_bytes(w[0])
        })
    }

    /// Creates a buffer of `words`, in pages of `page_bytes` (a power of two from 4 to 1 MiB):
    /// word `i` is what [`Invocation::load_u32`](crate::Invocation::load_u32) reads at index
    /// `i`. A buffer of floats is their bits (`f32::to_bits`), as a kernel's `load_u32`
    /// and `f32::from_bits` read them back.
    pub fn create_u32(&self, words: &[u32], page_bytes: u64) -> Result<ObjectEntry> {
        let desc = ObjectDesc::buffer(words.len() as u64 * 4, page_bytes)?;
        self.create(
            desc,
            Some(words.iter().flat_map(|w| w.to_le_bytes()).collect()),
        )
    }

    /// The latest texels of an Rgba8Unorm texture, `[r, g, b, a]`, row `y = 0` first.
    pub fn read_rgba8(&self, object: &ObjectEntry) -> Result<Vec<[u8; 4]>> {
        self.read_as(object, Some(TexelFormat::Rgba8Unorm), |w: [[u8; 4]; 1]| {
            w[0]
        })
    }

    /// The latest texels of an Rgba32Float texture, `[r, g, b, a]`, row `y = 0` first.
    pub fn read_rgba32f(&self, object: &ObjectEntry) -> Result<Vec<[f32; 4]>> {
        self.read_as(object, Some(TexelFormat::Rgba32Float), |w: [[u8; 4]; 4]| {
            w.map(f32::from_le_bytes)
        })
    }

    /// The latest texels (or words) of an object of the kind `format` names, each made by
    /// `texel` from its `N` little-endian words.
    fn read_as<const N: usize, T>(
        &self,
        object: &ObjectEntry,
        format: Option<TexelFormat>,
        texel: impl Fn([[u8; 4]; N]) -> T,
    ) -> Result<Vec<T>> {
        self.mm.check_entry(object)?;
        expect_kind(object, format)?;
        let bytes = self.mm.read(object.id)?;
        Ok(bytes
            .chunks_exact(4 * N)
            .map(|t| {
                texel(std::array::from_fn(|w| {
                    std::array::from_fn(|b| t[4 * w + b])
                }))
            })
            .collect())
    }

    /// Replaces a buffer's words, as [`System::create_u32`] takes them.
    pub fn write_u32(&self, object: &ObjectEntry, words: &[u32]) -> Result<()> {
        self.mm.check_entry(object)?;
        expect_kind(object, None)?;
        self.mm.write(
            object.id,
            words.iter().flat_map(|w| w.to_le_bytes()).collect(),
        )
    }

    /// The latest words of a buffer, by index.
    pub fn read_u32(&self, object: &ObjectEntry) -> Result<Vec<u32>> {
        self.read_as(object, None, |w: [[u8; 4]; 1]| u32::from_le_bytes(w[0]))
    }

    /// Creates a mipmapped RGBA8 texture (`desc` from [`ObjectDesc::mipmapped`]) from its level
    /// 0: `width × height` texels packed as `u32`, red in the low byte, row `y = 0` first. The
    /// other levels are made by the 2 × 2 box filter and the pages' borders by `desc`'s
    /// addressing (docs/TEXTURES.md). A chain with borders is read-only
    /// ([`AccessMode::ReplicateRead`], as borders need); one without migrates.
    pub fn create_mip_rgba8(&self, desc: ObjectDesc, level0: &[u32]) -> Result<ObjectEntry> {
        let (data, border) = mip_bytes(&desc, level0)?;
        let mode = if border > 0 {
            AccessMode::ReplicateRead
        } else {
            AccessMode::Migrate
        };
        self.create_with(desc, Some(data), mode)
    }

    /// Replaces a mipmapped RGBA8 texture's chain from a new level 0, packed as
    /// [`System::create_mip_rgba8`] takes it: every level is made again.
    pub fn write_mip_rgba8(&self, object: &ObjectEntry, level0: &[u32]) -> Result<()> {
        self.mm.check_entry(object)?;
        let (data, _) = mip_bytes(&object.desc, level0)?;
        self.mm.write(object.id, data)
    }

    /// One level of a mipmapped RGBA8 texture as the host holds it (its latest pages), packed
    /// as [`System::create_mip_rgba8`] takes level 0, row `y = 0` first.
    pub fn read_mip_rgba8(&self, object: &ObjectEntry, level: u32) -> Result<Vec<u32>> {
        self.mm.check_entry(object)?;
        let Some((layout, _)) = object.desc.mip() else {
            return Err(RuntimeError::Core(CoreError::WrongKind {
                object: object.id,
                expected: "mipmapped texture",
                actual: crate::kernel::kind_name(match object.desc {
                    ObjectDesc::Texture { format, .. } => Some(format),
                    _ => None,
                }),
            }));
        };
        let bytes = self.mm.read(object.id)?;
        Ok(tessera_core::mip::level_from_slots(
            &layout,
            &tessera_core::mip::bytes_to_words(&bytes),
            level,
        )?)
    }

    /// The latest bytes of any object: what the last writer stored, wherever it lives.
    pub fn read(&self, object: &ObjectEntry) -> Result<Vec<u8>> {
        self.mm.check_entry(object)?;
        self.mm.read(object.id)
    }

    /// Each device's page traffic so far: requests, batches, and pages moved from home, from
    /// other devices and back home.
    pub fn traffic(&self) -> Result<Vec<crate::stats::DeviceTraffic>> {
        self.mm.traffic()
    }

    /// Runs `kernel` once at every (x, y) of `width × height`, the domain split into bands of
    /// rows, one per device, with `objects` bound (every object it touches), and waits for all
    /// devices. Misses fault and relaunch (the patent's procedure), so a kernel whose loads
    /// depend on loaded values needs nothing more. Returns each device's stats.
    ///
    /// A pass of fewer rows than devices leaves the devices past the last row idle for that
    /// pass. A kernel over a buffer lays its words out as rows (`examples/oversubscribed`).
    /// The entries must be this system's live objects as `create` returned them
    /// ([`RuntimeError::NotLive`] otherwise).
    ///
    /// Within one pass no invocation may read a texel that another invocation writes (the
    /// pass's devices run at once, and a device's invocations in any order: paper 3.1): a
    /// kernel that reads neighbours reads one object and writes another, and the next pass
    /// swaps them (`examples/blur`). Nothing detects such a read; its values are undefined.
    ///
    /// A kernel that panics on the CPU backend fails the pass with
    /// [`RuntimeError::KernelPanicked`], as an error it returns does, and the next pass runs.
    /// Of a failed pass, the stores of launches that completed stay and the stores of the
    /// launch that failed are dropped (each device's band may be one launch or several), so
    /// what a failed pass leaves is unspecified: run it again from its inputs.
    pub fn run_kernel(
        &self,
        kernel: impl Kernel + 'static,
        objects: &[&ObjectEntry],
        width: u32,
        height: u32,
    ) -> Result<Vec<PassStats>> {
        let bindings: Vec<Bound> = objects.iter().map(|e| Bound::new(e)).collect();
        // The limit every backend checks, refused before any device starts.
        check_launch(&kernel, &bindings)?;
        let spec = PassSpec::new(Arc::new(kernel), Arc::new(bindings), 0, 0);
        self.run_pass(&spec, width, height, Partition::Rows, Procedure::Relaunch)
    }
}

/// The switch that sends device → device moves through the host (both backends'
/// `Device::peer_group`), for comparing the two paths on one machine.
pub const PEER_COPY: &str = "TESSERA_PEER_COPY";

/// An `on`/`off` switch from the environment: `None` where it is unset. Anything else is
/// refused, naming the variable: a misspelt `TESSERA_PEER_COPY=of` would otherwise measure
/// the path it was set to avoid, without a word.
pub fn env_switch(name: &str) -> Result<Option<bool>> {
    let Some(v) = std::env::var_os(name) else {
        return Ok(None);
    };
    match v.to_str() {
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        _ => Err(RuntimeError::Config(format!(
            "{name}={v:?} in the environment: expected on or off"
        ))),
    }
}

/// Threads a core the CPU devices' pool may have at most. The kernels are compute-bound, so
/// more only add switching, and building a pool costs more the more threads it has (a pool of
/// 1000 took seconds to start on two cores, one of 4000 more than a minute); eight leave room
/// for experiments with oversubscription.
pub const CPU_THREADS_PER_CORE: usize = 8;
/// The pool may have this many threads whatever the cores: a 1- or 2-core machine (CI's) can
/// still run many, which is how scheduling races are shaken out.
pub const CPU_THREADS_FLOOR: usize = 64;

/// The most threads the CPU devices' pool may have on this machine:
/// [`CPU_THREADS_PER_CORE`] a core, or [`CPU_THREADS_FLOOR`], whichever is more.
pub fn max_cpu_threads() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores
        .saturating_mul(CPU_THREADS_PER_CORE)
        .max(CPU_THREADS_FLOOR)
}

/// A node's memory sizes that can hold no page, refused when it is built rather than at its
/// first launch.
fn check_sizes(cfg: &SystemConfig) -> Result<()> {
    if cfg.memory_bytes == 0 {
        return Err(RuntimeError::Config(
            "a physical memory of 0 bytes (`SystemConfig::memory`) holds no page".into(),
        ));
    }
    if cfg.budget_bytes == 0 {
        return Err(RuntimeError::Config(
            "a budget of 0 bytes per device (`SystemConfig::budget`) holds no page".into(),
        ));
    }
    Ok(())
}

/// The rayon pool the CPU devices' kernels share.
fn cpu_pool(threads: usize) -> Result<Arc<rayon::ThreadPool>> {
    let max = max_cpu_threads();
    if threads > max {
        return Err(RuntimeError::Config(format!(
            "{threads} CPU threads: at most {max} on this machine ({CPU_THREADS_PER_CORE} a core, or {CPU_THREADS_FLOOR}); 0 gives one a core"
        )));
    }
    Ok(Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tessera-cpu-{i}"))
            .build()
            .map_err(|e| RuntimeError::Spawn {
                what: "CPU threads",
                message: e.to_string(),
            })?,
    ))
}

/// What the host's handle to the memory manager runs before a read, free, eviction or
/// placement: every driver settles its deferred launches, so the host sees every pass it
/// ran. Holds the drivers weakly, so handles the host keeps do not keep them alive.
fn settle_hook(drivers: &Arc<Vec<Sender<DriverJob>>>, shared: bool) -> crate::manager::SettleHook {
    let weak = Arc::downgrade(drivers);
    Arc::new(move || {
        let Some(drivers) = weak.upgrade() else {
            return Ok(());
        };
        settle_node(&drivers, shared)?;
        // A deferred pass that failed has not said so yet (its error waits for the next
        // pass): the host is about to read what that pass left, so it hears of it now.
        let errors = drivers
            .iter()
            .map(|tx| send_to_driver(tx, |ctx| ctx.take_settle_error()))
            .collect::<Result<Vec<_>>>()?;
        let mut first = None;
        for e in errors {
            if let Some(e) = e.wait()? {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    })
}

/// Settles every driver's deferred work. Devices that share a queue (`shared`) settle in two
/// steps: each waits for its queued work and keeps what faulted or was skipped, then what
/// they kept runs again one item at a time in the order of the queue they share, so a band
/// that read another device's page runs after the band that wrote it, as queued. Each
/// driver's stats and first error wait in it for the next pass or `settle_and_take`.
fn settle_node(drivers: &[Sender<DriverJob>], shared: bool) -> Result<()> {
    if !shared {
        let replies = drivers
            .iter()
            .map(|tx| send_to_driver(tx, |ctx| ctx.settle()))
            .collect::<Result<Vec<_>>>()?;
        for r in replies {
            r.wait()?;
        }
        return Ok(());
    }
    let replies = drivers
        .iter()
        .map(|tx| send_to_driver(tx, |ctx| ctx.settle_collect()))
        .collect::<Result<Vec<_>>>()?;
    let mut order = Vec::new();
    let mut reopen = false;
    for (d, r) in replies.into_iter().enumerate() {
        let c = r.wait()?;
        reopen |= c.reopen;
        order.extend(c.places.into_iter().map(|place| (place, d)));
    }
    // Every device has read back all it queued: what any of them queued behind a fault has
    // found the gate closed, so it may open now, before anything runs again.
    if reopen {
        if let Some(tx) = drivers.first() {
            send_to_driver(tx, |ctx| ctx.reopen_queue())?.wait()?;
        }
    }
    // Within one device its items are in queue order already; the sort is stable.
    order.sort_by_key(|&(place, _)| place);
    for (_, d) in order {
        if !send_to_driver(&drivers[d], |ctx| ctx.redo_next())?.wait()? {
            break;
        }
    }
    Ok(())
}

/// Whether every device queues its launches on one queue with one gate: all queue launches
/// and all answer the same peer group (the wgpu devices of one `SharedGpu`).
fn one_queue(workers: &[WorkerHandle]) -> Result<bool> {
    let mut group = None;
    for w in workers {
        if !w.queues_launches() {
            return Ok(false);
        }
        let g = w.call_here(|d| Ok(d.peer_group()))?;
        if g.is_none() || (group.is_some() && group != g) {
            return Ok(false);
        }
        group = g;
    }
    Ok(true)
}

/// One driver thread per device worker, each running the jobs `System::on_device` queues.
fn spawn_drivers(
    workers: Vec<WorkerHandle>,
    mm: &ManagerHandle,
    cfg: &SystemConfig,
    shared: bool,
    joins: &mut Vec<JoinHandle<()>>,
) -> Result<Vec<Sender<DriverJob>>> {
    let mut drivers = Vec::new();
    let single = workers.len() == 1 && !mm.is_on_cluster();
    for w in workers {
        let (tx, rx) = unbounded::<DriverJob>();
        let mut ctx = DeviceContext::new(w, mm.clone());
        ctx.set_staging(cfg.staging);
        ctx.set_footprint_ahead(cfg.footprint_ahead);
        ctx.set_held_in_place(cfg.held_in_place);
        // With one device no other device's request can reach its pages between two settles
        // (`DeviceContext::set_deferred`); devices that share a queue settle together
        // (`DeviceContext::set_shared`). Never across nodes.
        ctx.set_deferred(cfg.deferred && single);
        if shared {
            ctx.set_shared(true);
        }
        let j = Builder::new()
            .name(format!("tessera-driver-{}", ctx.device.0))
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job(&mut ctx);
                }
            })
            .map_err(|e| RuntimeError::Spawn {
                what: "a thread",
                message: e.to_string(),
            })?;
        drivers.push(tx);
        joins.push(j);
    }
    Ok(drivers)
}

impl Drop for System {
    fn drop(&mut self) {
        if let Some(l) = self.link.take() {
            // Every node is done with every other before any stops serving.
            l.shut_down();
        }
        self.drivers = Arc::new(Vec::new());
        self.workers.clear();
        // The drivers hold the last handles to the memory manager and the workers; once they
        // finish, every queue closes and every thread returns.
        let (tx, _) = unbounded();
        self.mm = ManagerHandle::detached(tx);
        for j in self.joins.drain(..) {
            let _ = j.join();
        }
    }
}

// With `shuttle` the runtime's threads exist only inside a shuttle run (tests/shuttle.rs).
#[cfg(all(test, not(feature = "shuttle")))]
mod tests {
    use super::*;

    #[test]
    fn f32_textures_round_trip_and_misuse_is_an_error() {
        let sys = System::cpu(&SystemConfig::default()).unwrap();
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        let t = sys.create_f32(6, 4, 2, Some(&data)).unwrap();
        assert_eq!(sys.read_f32(&t).unwrap(), data);
        assert!(matches!(
            sys.create_f32(6, 4, 2, Some(&data[1..])),
            Err(RuntimeError::DataSize { .. })
        ));
        let rgba = sys
            .create(
                ObjectDesc::texture(6, 4, TexelFormat::Rgba8Unorm, 2).unwrap(),
                None,
            )
            .unwrap();
        assert!(matches!(
            sys.read_f32(&rgba),
            Err(RuntimeError::Core(CoreError::WrongKind { .. }))
        ));
    }
}
