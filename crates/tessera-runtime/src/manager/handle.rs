//! The handle every other thread holds: the commands it sends and the replies it waits on.

use super::*;

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
    Write(ObjectId, Vec<u8>, Sender<Result<()>>),
    Read(ObjectId, Sender<Result<Vec<u8>>>),
    ReadMany(Vec<ObjectId>, Sender<Result<Vec<Vec<u8>>>>),
    ReadPacked(ObjectId, Sender<Result<(ObjectEntry, Vec<u8>)>>),
    Request(
        DeviceId,
        Vec<PageRequest>,
        Vec<GlobalPage>,
        Sender<Result<()>>,
    ),
    Evictable(ObjectId, bool, Sender<Result<()>>),
    Trace(Sender<Vec<Vec<TraceEvent>>>),
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
    pub(super) fn start(mut self) {
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

/// The other homes of a cluster, as a handle routed over it reaches them (implemented by the
/// cluster's link, crate::cluster). A trait, so that the manager, which the cluster is built
/// from, does not depend on it.
pub(crate) trait Homes: Send + Sync {
    /// Waits until every node has come here.
    fn barrier(&self) -> Result<()>;
    /// The object's pages, packed, each from its home; `local` is this node's manager alone.
    fn read_packed(&self, local: &ManagerHandle, id: ObjectId) -> Result<(ObjectEntry, Vec<u8>)>;
    /// A batch split by home, each part granted by its home, in the homes' order.
    fn request(
        &self,
        local: &ManagerHandle,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
    ) -> Result<()>;
    /// Whether every home says `device` holds its part of `pages`.
    fn holds(
        &self,
        local: &ManagerHandle,
        device: DeviceId,
        pages: Vec<GlobalPage>,
    ) -> Result<bool>;
    /// Releases `device`'s lock at every home that granted it one.
    fn release(&self, local: &ManagerHandle, device: DeviceId);
}

/// The command side of the memory manager; cheap to clone.
#[derive(Clone)]
pub struct ManagerHandle {
    pub(super) inbox: Inbox,
    /// Per device: whether the manager has ever evicted one of its pages. A hint the drivers
    /// read without waiting (it only chooses how they fetch pages, never what is right).
    pub(super) pressed: Arc<Vec<AtomicBool>>,
    pub(super) remote: RemoteRegistry,
    /// On a node of a cluster: the other homes, which get their parts of every batch.
    pub(super) cluster: Option<Arc<dyn Homes>>,
    /// What each device's page table grants, published by the manager (`crate::held`).
    pub(super) held: Arc<HeldPages>,
    /// Per device, the messages its driver sent the manager (requests, stages, releases,
    /// `holds`, remote counts, evictions): the steady state sends none.
    pub(super) messages: Arc<Vec<AtomicU64>>,
    /// The host's handle only: settles the drivers' deferred launches before the host reads,
    /// frees, evicts or places (`System`, `SystemConfig::deferred`).
    pub(super) settle: Option<SettleHook>,
    /// The objects created through this node's handles and not freed, as `create` returned
    /// them: a pass checks its bindings here without a message to the manager.
    pub(super) live: LiveObjects,
}

/// The live objects of a node, by id ([`ManagerHandle::check_bound`]).
pub(crate) type LiveObjects = Arc<RwLock<HashMap<ObjectId, ObjectEntry>>>;

/// Settles every driver of the node; see [`ManagerHandle::settling_first`].
pub(crate) type SettleHook = Arc<dyn Fn() -> Result<()> + Send + Sync>;

/// Where commands for the memory manager go: its queue, or, for a caller about to wait for
/// the answer while the manager is idle, the caller's own thread (`Inbox::ask`). A command
/// handed to the manager's thread costs a wake-up there and another for the answer, tens of
/// microseconds each; a steady frame of many devices sends dozens of batches.
#[derive(Clone)]
pub(crate) struct Inbox {
    tx: Sender<Cmd>,
    /// None for a handle to nothing (`ManagerHandle::detached`).
    shared: Option<Arc<Shared>>,
}

impl Inbox {
    pub(super) fn new(tx: Sender<Cmd>, shared: Option<Arc<Shared>>) -> Self {
        Inbox { tx, shared }
    }
    /// Queues a command for the manager's thread, in order behind those queued before.
    fn post(&self, cmd: Cmd) {
        if let Some(s) = &self.shared {
            s.queued.fetch_add(1, Ordering::SeqCst);
        }
        // A send fails only when the manager is gone; a reply channel then reports it.
        let _ = self.tx.send(cmd);
    }
    /// Queues a command whose answer comes on a fresh channel.
    fn call<R>(&self, make: impl FnOnce(Sender<R>) -> Cmd) -> Pending<R> {
        let (rtx, rrx) = bounded(1);
        self.post(make(rtx));
        Pending::new(rrx, "memory manager")
    }
    /// Runs a command nobody waits for on this thread when the manager is idle, else queues
    /// it.
    fn run_or_post(&self, cmd: Cmd) {
        match &self.shared {
            Some(s) => s.run_or_post(cmd, |cmd| self.post(cmd)),
            None => self.post(cmd),
        }
    }
    /// [`Inbox::call`] for a caller that waits for the answer at once: run on this thread
    /// when nothing is queued for the manager or running on it, which is the order the queue
    /// would give (nothing is ahead). A request the protocol defers is answered later all the
    /// same, by whichever thread carries out the release that grants it.
    fn ask<R>(&self, make: impl FnOnce(Sender<R>) -> Cmd) -> Pending<R> {
        let (rtx, rrx) = bounded(1);
        self.run_or_post(make(rtx));
        Pending::new(rrx, "memory manager")
    }
}

impl ManagerHandle {
    /// A handle to nothing: every call reports the manager gone. Lets `System::drop` let go
    /// of its real handle before joining the threads.
    pub(crate) fn detached(tx: Sender<Cmd>) -> Self {
        ManagerHandle {
            inbox: Inbox::new(tx, None),
            pressed: Arc::new(Vec::new()),
            remote: RemoteRegistry::default(),
            cluster: None,
            held: Arc::new(HeldPages::new(0)),
            messages: Arc::new(Vec::new()),
            settle: None,
            live: LiveObjects::default(),
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
    /// The part of a batch worth sending: `pages` less what `device` already holds with the
    /// access asked for. The whole batch under budget pressure, where a request also keeps
    /// the pages it names from being evicted for the rest of the batch, and on a cluster,
    /// whose other homes publish nothing here. Like [`ManagerHandle::covers`], a hint: a page
    /// left out and taken meanwhile faults and is asked for then.
    pub fn missing(&self, device: DeviceId, pages: Vec<PageRequest>) -> Vec<PageRequest> {
        if self.cluster.is_some() || self.under_pressure(device) {
            return pages;
        }
        self.held.missing(device, pages)
    }
    /// This handle routed over a cluster: batches, releases, `holds` and reads reach every
    /// home (crate::cluster).
    pub(crate) fn on_cluster(mut self, link: Arc<dyn Homes>) -> Self {
        self.cluster = Some(link);
        self
    }
    /// Fails every request waiting here, and every later command that moves data, with `e`:
    /// a request deferred for a lost node's release would otherwise wait forever.
    pub(crate) fn fail(&self, e: RuntimeError) {
        self.inbox.post(Cmd::Fail(e));
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
            return Err(RuntimeError::RemoteAcrossNodes);
        }
        let e = self
            .inbox
            .ask(|r| Cmd::Create(desc, data, mode, r))
            .wait()?;
        // Every node creates the object before any device asks a home for its pages.
        if let Some(link) = &self.cluster {
            link.barrier()?;
        }
        if let Ok(e) = &e {
            self.live_objects().insert(e.id, *e);
        }
        e
    }
    fn live_objects(&self) -> crate::sync::RwLockWriteGuard<'_, HashMap<ObjectId, ObjectEntry>> {
        // The map is only ever inserted into or removed from whole; a writer that panicked
        // left it as it was.
        self.live.write().unwrap_or_else(|p| p.into_inner())
    }
    /// Refuses a launch's bindings that are not live objects of this node as their entries
    /// describe them: an object freed since, one of another system, or an entry changed by
    /// hand. Its pages would be another object's, written without a word.
    pub fn check_bound(&self, bindings: &[crate::kernel::Bound]) -> Result<()> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner());
        for b in bindings {
            match live.get(&b.id) {
                Some(e) if crate::kernel::Bound::new(e).same_object(b) => {}
                _ => return Err(RuntimeError::NotLive { object: b.id }),
            }
        }
        Ok(())
    }
    /// [`ManagerHandle::check_bound`] for one entry.
    pub fn check_entry(&self, entry: &ObjectEntry) -> Result<()> {
        self.check_bound(&[crate::kernel::Bound::new(entry)])
    }
    /// Sets where each page of a remote object lives, `locations[local page]`. Between
    /// passes only. Refused for an object that is not remote, a list of the wrong length, or
    /// a device that does not exist.
    pub fn place(&self, id: ObjectId, locations: Vec<Location>) -> Result<()> {
        self.settle_first()?;
        self.inbox.ask(|r| Cmd::Place(id, locations, r)).wait()?
    }
    /// The object's access mode.
    pub fn access(&self, id: ObjectId) -> Result<AccessMode> {
        self.inbox.ask(|r| Cmd::Access(id, r)).wait()?
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
            self.inbox.post(Cmd::Remote(device, counts));
        }
    }
    /// Drops every copy of the object and frees its pages.
    pub fn free(&self, id: ObjectId) -> Result<()> {
        self.settle_first()?;
        // Every node is done with the object before any home forgets it.
        if let Some(link) = &self.cluster {
            link.barrier()?;
        }
        self.inbox.ask(|r| Cmd::Free(id, r)).wait()??;
        self.live_objects().remove(&id);
        Ok(())
    }
    /// Replaces the object's data with `data` (its whole size, as `create` takes it): every
    /// device's copy is dropped and home holds the new bytes. Call between passes.
    pub fn write(&self, id: ObjectId, data: Vec<u8>) -> Result<()> {
        self.settle_first()?;
        if self.cluster.is_some() {
            return Err(RuntimeError::Config(
                "a host write is not built across nodes, where each node is the home of part of the pages: free the object and create it again".into(),
            ));
        }
        self.inbox.ask(|r| Cmd::Write(id, data, r)).wait()?
    }
    /// The object's latest data, row-major from the lower left. Call between passes.
    pub fn read(&self, id: ObjectId) -> Result<Vec<u8>> {
        self.settle_first()?;
        match &self.cluster {
            None => self.inbox.ask(|r| Cmd::Read(id, r)).wait()?,
            Some(link) => {
                let (e, pages) = link.read_packed(&self.here(), id)?;
                let mut out = vec![0u8; host_len(&e.desc) as usize];
                unpack(&e.desc, &pages, &mut out);
                Ok(out)
            }
        }
    }
    /// Several objects' latest data, as [`ManagerHandle::read`] gives each, in `ids`' order:
    /// the pages their owners modified come back in one read per owner for all of them (on a
    /// GPU, one wait per owner, not one per object).
    pub fn read_many(&self, ids: &[ObjectId]) -> Result<Vec<Vec<u8>>> {
        self.settle_first()?;
        match &self.cluster {
            None => self.inbox.ask(|r| Cmd::ReadMany(ids.to_vec(), r)).wait()?,
            Some(_) => ids.iter().map(|&id| self.read(id)).collect(),
        }
    }
    /// The object's pages, packed, as this node's manager knows them: right for the pages it
    /// is home to.
    pub(crate) fn read_packed_here(&self, id: ObjectId) -> Result<(ObjectEntry, Vec<u8>)> {
        self.inbox.ask(|r| Cmd::ReadPacked(id, r)).wait()?
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
            return self.inbox.call(|r| Cmd::Request(device, pages, keep, r));
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
            let _ = etx.send(Err(RuntimeError::Spawn {
                what: "a thread",
                message: e.to_string(),
            }));
            return Pending::new(erx, "memory manager");
        }
        Pending::new(rrx, "memory manager")
    }
    /// [`ManagerHandle::request_keeping`] and the wait for its grant: on the calling thread
    /// when the manager is idle (`Inbox::ask`).
    pub fn acquire_keeping(
        &self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
    ) -> Result<()> {
        if self.cluster.is_some() {
            return self.request_keeping(device, pages, keep).wait()?;
        }
        self.sent(device);
        self.inbox
            .ask(|r| Cmd::Request(device, pages, keep, r))
            .wait()?
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
        self.inbox.call(|r| Cmd::Stage(device, pages, start, r))
    }
    /// Marks an object's pages as never evicted (`false`) or evictable again (`true`, the
    /// default). A non-evictable object's resident pages take their share of every device's
    /// budget for good. Deferred work settles first: a pass queued before the change, and run
    /// again at a settle after it, would otherwise find less room than it was issued with.
    pub fn set_evictable(&self, id: ObjectId, evictable: bool) -> Result<()> {
        self.settle_first()?;
        self.inbox
            .ask(|r| Cmd::Evictable(id, evictable, r))
            .wait()?
    }
    /// Per device, in order, every batch's pages together with the pages its wave kept (the
    /// sets that had to be resident at once) and every copy lost to another device's write
    /// or a free (recorded when `ManagerConfig::record_trace`). The input of Belady's OPT
    /// (`tessera_core::eviction::belady_loads`).
    pub fn trace(&self) -> Result<Vec<Vec<TraceEvent>>> {
        self.inbox.ask(Cmd::Trace).wait()
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
        self.inbox.ask(|r| Cmd::Holds(device, pages, r)).wait()
    }
    /// Releases the device's memory lock.
    pub fn release(&self, device: DeviceId) {
        self.sent(device);
        match &self.cluster {
            // On this thread when the manager is idle: the driver's next batch would
            // otherwise find the release still queued and queue behind it, waiting for the
            // manager's thread to wake. A release that grants deferred requests carries out
            // their actions here, as that thread would.
            None => self.inbox.run_or_post(Cmd::Release(device)),
            Some(link) => link.release(&self.here(), device),
        }
    }
    /// [`ManagerHandle::release`] always through the manager's queue, for a thread that must
    /// never do the manager's work: the cluster's router, which the manager's jobs on other
    /// nodes' devices wait on for their replies.
    pub(crate) fn release_queued(&self, device: DeviceId) {
        self.sent(device);
        self.inbox.post(Cmd::Release(device));
    }
    pub fn traffic(&self) -> Result<Vec<DeviceTraffic>> {
        self.inbox.ask(Cmd::Traffic).wait()
    }
    /// Drops `device`'s copies of `pages` now (a modified one is written home first), as an
    /// eviction does; pages it does not hold are left alone. Refused while the device is
    /// locked. The game trace uses it to empty texture memory between frames and to keep a
    /// page on a device only while the device uses it (paper Figs 12–13).
    pub fn evict(&self, device: DeviceId, pages: Vec<GlobalPage>) -> Result<()> {
        self.settle_first()?;
        self.sent(device);
        self.inbox.ask(|r| Cmd::Evict(device, pages, r)).wait()?
    }
    /// Starts (`true`) or stops keeping, per device, every page each of its request batches
    /// asked for that the device did not hold with the access asked for, in order: the pages
    /// `DeviceTraffic::page_requests` counts, less those a batch named again while its device
    /// held them (a relaunch round sends its wave's pages whole once other devices keep
    /// taking them back, docs/PROTOCOL.md). Off by default. A workload that shares a node
    /// between objects of several kinds (the game trace's texture atlas beside its per-frame
    /// buffers) counts the requests of one object from it, which the per-device totals cannot
    /// tell apart.
    pub fn log_requests(&self, on: bool) {
        self.inbox.post(Cmd::LogRequests(on));
    }
    /// The pages logged since the last take (see [`ManagerHandle::log_requests`]), per device;
    /// the log starts empty again.
    pub fn take_requests(&self) -> Result<Vec<Vec<GlobalPage>>> {
        self.inbox.ask(Cmd::TakeRequests).wait()
    }
    /// Memory per device and the directory, as they stand.
    pub fn memory(&self) -> Result<(Vec<DeviceMemoryUse>, Vec<DirEntry>)> {
        self.inbox.ask(Cmd::Memory).wait()
    }
}
