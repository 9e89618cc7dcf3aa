//! The memory manager: one thread per node that owns the directory (through the protocol),
//! the home copies in host memory and the slot allocators of every device.
//!
//! It runs the sans-IO protocol and carries out its actions by sending jobs to device workers,
//! waiting only on them (paper 3.7–3.8). A request the protocol defers under the memory lock
//! just keeps its reply channel here; nothing blocks. Replies travel on per-request channels,
//! separate from the command queue.

use std::collections::HashMap;
use std::path::PathBuf;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use tessera_core::protocol::Source;
use tessera_core::{
    Action, AddressSpace, DeviceId, DeviceMemory, DirEntry, Directory, GlobalPage, HomeMap,
    Message, NodeId, ObjectDesc, ObjectEntry, ObjectId, PageDescriptor, PageRequest, Policy,
    Protocol, ProtocolVariant, RequestBatch, RequestId, SlotAddr,
};

use crate::error::{Result, RuntimeError};
use crate::home::HomeStore;
use crate::stats::{DeviceMemoryUse, DeviceTraffic};
use crate::worker::{Pending, WorkerHandle};

pub(crate) enum Cmd {
    Create(ObjectDesc, Option<Vec<u8>>, Sender<Result<ObjectEntry>>),
    Free(ObjectId, Sender<Result<()>>),
    Read(ObjectId, Sender<Result<Vec<u8>>>),
    Request(DeviceId, Vec<PageRequest>, Sender<Result<()>>),
    Release(DeviceId),
    Traffic(Sender<Vec<DeviceTraffic>>),
    Memory(Sender<(Vec<DeviceMemoryUse>, Vec<DirEntry>)>),
}

/// The command side of the memory manager; cheap to clone.
#[derive(Clone)]
pub struct ManagerHandle {
    tx: Sender<Cmd>,
}

fn call<R>(tx: &Sender<Cmd>, make: impl FnOnce(Sender<R>) -> Cmd) -> Pending<R> {
    let (rtx, rrx) = bounded(1);
    let _ = tx.send(make(rtx));
    Pending::new(rrx, "memory manager")
}

impl ManagerHandle {
    /// A handle to nothing: every call reports the manager gone. Lets `System::drop` let go
    /// of its real handle before joining the threads.
    pub(crate) fn detached(tx: Sender<Cmd>) -> Self {
        ManagerHandle { tx }
    }
    /// Creates an object; `data` (row-major from the lower left, texels tightly packed)
    /// becomes its home copy, zeros when absent.
    pub fn create(&self, desc: ObjectDesc, data: Option<Vec<u8>>) -> Result<ObjectEntry> {
        call(&self.tx, |r| Cmd::Create(desc, data, r)).wait()?
    }
    /// Drops every copy of the object and frees its pages.
    pub fn free(&self, id: ObjectId) -> Result<()> {
        call(&self.tx, |r| Cmd::Free(id, r)).wait()?
    }
    /// The object's latest data, row-major from the lower left. Call between passes.
    pub fn read(&self, id: ObjectId) -> Result<Vec<u8>> {
        call(&self.tx, |r| Cmd::Read(id, r)).wait()?
    }
    /// Sends a request batch; the reply arrives when it is granted (the device is then locked).
    pub fn request(&self, device: DeviceId, pages: Vec<PageRequest>) -> Pending<Result<()>> {
        call(&self.tx, |r| Cmd::Request(device, pages, r))
    }
    /// Releases the device's memory lock.
    pub fn release(&self, device: DeviceId) {
        let _ = self.tx.send(Cmd::Release(device));
    }
    pub fn traffic(&self) -> Result<Vec<DeviceTraffic>> {
        call(&self.tx, Cmd::Traffic).wait()
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
    /// Per device byte budget for physical memories.
    pub budget_bytes: u64,
    /// Bytes per physical memory (a new one is created when all are full).
    pub memory_bytes: u64,
    pub policy: Policy,
    pub seed: u64,
    /// Keep the home copies in a memory-mapped file created fresh at this path (an existing
    /// path is refused) and removed when the manager stops; in host memory when None.
    pub home_file: Option<PathBuf>,
}

struct Manager {
    protocol: Protocol,
    space: AddressSpace,
    /// Home copies, per object, page after page (each page a whole slot's worth of bytes),
    /// in host memory or a memory-mapped file.
    home: HomeStore,
    memories: Vec<DeviceMemory>,
    /// Per device, the slot holding each resident global page, indexed by global page.
    slots: Vec<Vec<Option<SlotAddr>>>,
    workers: Vec<WorkerHandle>,
    waiting: HashMap<RequestId, Sender<Result<()>>>,
    next_request: u64,
    traffic: Vec<DeviceTraffic>,
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
    let protocol = Protocol::new(
        Directory::new(0, HomeMap::Single(NodeId(0))),
        n,
        cfg.variant,
    )?;
    let mut m = Manager {
        protocol,
        space: AddressSpace::new(),
        home,
        memories: workers
            .iter()
            .map(|w| DeviceMemory::new(w.device, cfg.budget_bytes, cfg.memory_bytes))
            .collect(),
        slots: vec![Vec::new(); n],
        workers,
        waiting: HashMap::new(),
        next_request: 0,
        traffic: vec![DeviceTraffic::default(); n],
        broken: None,
    };
    let (tx, rx) = unbounded();
    let join = std::thread::Builder::new()
        .name("tessera-memory-manager".into())
        .spawn(move || m.run(rx))
        .map_err(|e| RuntimeError::Config(format!("cannot start a thread: {e}")))?;
    Ok((ManagerHandle { tx }, join))
}

impl Manager {
    fn run(&mut self, rx: Receiver<Cmd>) {
        while let Ok(cmd) = rx.recv() {
            match cmd {
                Cmd::Create(desc, data, r) => {
                    let _ = r.send(self.guarded(|m| m.create(desc, data)));
                }
                Cmd::Free(id, r) => {
                    let _ = r.send(self.guarded(|m| m.free(id)));
                }
                Cmd::Read(id, r) => {
                    let _ = r.send(self.guarded(|m| m.read(id)));
                }
                Cmd::Request(device, pages, r) => self.request(device, pages, r),
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
                    let _ = r.send(self.traffic.clone());
                }
                Cmd::Memory(r) => {
                    let _ = r.send(self.memory_use());
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

    fn request(&mut self, device: DeviceId, pages: Vec<PageRequest>, reply: Sender<Result<()>>) {
        if let Some(e) = &self.broken {
            let _ = reply.send(Err(e.clone()));
            return;
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        if let Some(t) = self.traffic.get_mut(device.index()) {
            t.batches += 1;
            t.page_requests += pages.len() as u64;
            for p in &pages {
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
        let mut out = Outbox::new(self.workers.len());
        for a in actions {
            match a {
                Action::Copy { page, from, to } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    let data = match from {
                        Source::Home => {
                            self.traffic[to.index()].host_to_device.add(bytes);
                            self.home.page(obj, local, bytes)?.to_vec()
                        }
                        Source::Device(o) => {
                            self.traffic[to.index()].device_to_device.add(bytes);
                            self.revoke_and_read(&mut out, o, page)?
                        }
                    };
                    let (at, created) = self.memories[to.index()].alloc(bytes)?;
                    if let Some(m) = created {
                        out.push(to, DeviceOp::Create(m.id, m.slot_bytes, m.capacity));
                    }
                    out.push(to, DeviceOp::Write(at, data));
                    self.slots[to.index()][page.index()] = Some(at);
                }
                Action::WriteBack { page, from } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    let data = self.revoke_and_read(&mut out, from, page)?;
                    self.traffic[from.index()].device_to_host.add(bytes);
                    debug_assert_eq!(data.len() as u64, bytes);
                    self.home.write_page(obj, local, &data)?;
                }
                Action::Invalidate { page, device } => {
                    let at = self.slot(device, page)?;
                    self.slots[device.index()][page.index()] = None;
                    self.memories[device.index()].free(at)?;
                    self.traffic[device.index()].invalidations += 1;
                    out.push(device, DeviceOp::Set(page, PageDescriptor::NOT_RESIDENT));
                }
                Action::Install {
                    page,
                    device,
                    writable,
                } => self.set_page(&mut out, device, page, writable)?,
                Action::GrantWrite { page, device } => {
                    self.set_page(&mut out, device, page, true)?
                }
                Action::Downgrade { page, device } => {
                    self.set_page(&mut out, device, page, false)?
                }
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

    fn create(&mut self, desc: ObjectDesc, data: Option<Vec<u8>>) -> Result<ObjectEntry> {
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
        let home = match self
            .home
            .create(e.id, desc.page_count() * desc.page_bytes())
        {
            Ok(home) => home,
            Err(err) => {
                // No room for its home copy (a full disk under a home file): the object must
                // not half exist. No device holds a page of it yet, so freeing moves nothing.
                let actions = self.protocol.handle(Message::Free { pages: e.pages() })?;
                self.execute(actions)?;
                self.space.free(e.id)?;
                return Err(err);
            }
        };
        if let Some(d) = data {
            pack(&desc, &d, home);
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
        self.home.remove(id)?;
        self.resize_tables()
    }

    fn read(&mut self, id: ObjectId) -> Result<Vec<u8>> {
        let e = *self.space.get(id)?;
        let bytes = e.desc.page_bytes() as usize;
        let mut pages = self.home.object(id)?.to_vec();
        // Modified pages come from their owners: one job per device, not one per page.
        let mut by_owner: Vec<Vec<(usize, SlotAddr)>> = vec![Vec::new(); self.workers.len()];
        for (local, page) in e.pages().enumerate() {
            if let Some(o) = self.protocol.directory().entry(GlobalPage(page))?.owner {
                by_owner[o.index()].push((local, self.slot(o, GlobalPage(page))?));
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
        let mut out = vec![0u8; host_len(&e.desc) as usize];
        unpack(&e.desc, &pages, &mut out);
        Ok(out)
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
    Write(SlotAddr, Vec<u8>),
    Set(GlobalPage, PageDescriptor),
}

/// Per-device queues of collected work and the acknowledgements still to come.
struct Outbox {
    ops: Vec<Vec<DeviceOp>>,
    acks: Vec<Pending<Result<()>>>,
}

impl Outbox {
    fn new(devices: usize) -> Self {
        Outbox {
            ops: (0..devices).map(|_| Vec::new()).collect(),
            acks: Vec::new(),
        }
    }

    fn push(&mut self, d: DeviceId, op: DeviceOp) {
        self.ops[d.index()].push(op);
    }

    /// Sends device `d`'s collected work as one job.
    fn flush(&mut self, workers: &[WorkerHandle], d: DeviceId) {
        let ops = std::mem::take(&mut self.ops[d.index()]);
        if ops.is_empty() {
            return;
        }
        self.acks.push(workers[d.index()].submit(move |dev| {
            for op in ops {
                match op {
                    DeviceOp::Create(id, bytes, cap) => dev.create_memory(id, bytes, cap)?,
                    DeviceOp::Write(at, data) => dev.write_slot(at, &data)?,
                    DeviceOp::Set(page, desc) => dev.set_page(page, desc)?,
                }
            }
            Ok(())
        }));
    }

    /// Sends everything and waits for every acknowledgement; the first error wins.
    fn finish(&mut self, workers: &[WorkerHandle]) -> Result<()> {
        for d in 0..self.ops.len() {
            self.flush(workers, DeviceId(d as u8));
        }
        let mut res = Ok(());
        for p in self.acks.drain(..) {
            let r = p.wait().and_then(|r| r);
            if res.is_ok() {
                res = r;
            }
        }
        res
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tessera_core::{
        Access, CoreError, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, ObjectId, PageRequest,
        ProtocolVariant, TexelFormat,
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
}
