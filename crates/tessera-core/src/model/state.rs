//! The state of the model's world and its transitions: what each step does to it and which
//! properties it must keep.

use super::*;

/// One request batch as two page masks; a page is in at most one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Batch {
    pub(crate) read: u8,
    pub(crate) write: u8,
}

impl Batch {
    pub(crate) fn pages(self) -> u8 {
        self.read | self.write
    }

    pub(crate) fn access(self, page: usize) -> Option<Access> {
        if self.write & (1 << page) != 0 {
            Some(Access::Write)
        } else if self.read & (1 << page) != 0 {
            Some(Access::Read)
        } else {
            None
        }
    }

    /// Every non-empty batch over `pages` pages: each page none, read or write.
    pub(crate) fn all(pages: usize) -> Vec<Batch> {
        let count = 3usize.pow(pages as u32);
        (1..count)
            .map(|mut code| {
                let mut b = Batch { read: 0, write: 0 };
                for p in 0..pages {
                    match code % 3 {
                        1 => b.read |= 1 << p,
                        2 => b.write |= 1 << p,
                        _ => {}
                    }
                    code /= 3;
                }
                b
            })
            .collect()
    }

    pub(super) fn to_requests(self, pages: usize) -> Vec<PageRequest> {
        (0..pages)
            .filter_map(|p| {
                self.access(p).map(|access| PageRequest {
                    page: GlobalPage(p as u64),
                    access,
                })
            })
            .collect()
    }

    pub(super) fn from_requests(reqs: &[PageRequest]) -> Batch {
        let mut b = Batch { read: 0, write: 0 };
        for r in reqs {
            match r.access {
                Access::Read => b.read |= 1 << r.page.0,
                Access::Write => b.write |= 1 << r.page.0,
            }
        }
        b
    }
}

impl fmt::Display for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = (0..MAX_MODEL_PAGES)
            .filter_map(|p| {
                self.access(p).map(|a| {
                    format!(
                        "page{p}: {}",
                        if a == Access::Write { "write" } else { "read" }
                    )
                })
            })
            .collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    Idle,
    /// The request is in the inbox, not yet seen by the memory manager.
    Requested(Batch),
    /// The memory manager deferred the request.
    Waiting(Batch),
    /// Inside the procedure; `done` marks the pages already used.
    Granted {
        batch: Batch,
        done: u8,
    },
}

/// One device's copy of one page, as its page table and slot see it: the slot's value, and the
/// page table's valid and writable bits. One byte, because states are cloned on every step.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Slot(u8);

impl Slot {
    const VALID: u8 = 1 << 6;
    const WRITABLE: u8 = 1 << 7;
    const VALUE: u8 = Self::VALID - 1;

    pub(super) fn filled(value: u8) -> Slot {
        Slot(value | Self::VALID)
    }
    pub(super) fn value(self) -> u8 {
        self.0 & Self::VALUE
    }
    pub(super) fn valid(self) -> bool {
        self.0 & Self::VALID != 0
    }
    pub(super) fn writable(self) -> bool {
        self.0 & Self::WRITABLE != 0
    }
    pub(super) fn set_value(&mut self, v: u8) {
        self.0 = (self.0 & !Self::VALUE) | v;
    }
    pub(super) fn set_writable(&mut self, w: bool) {
        self.0 = if w {
            self.0 | Self::WRITABLE
        } else {
            self.0 & !Self::WRITABLE
        };
    }
    /// Invalidation: the page table entry goes, the stale value stays in the slot.
    pub(super) fn drop_copy(&mut self) {
        self.0 &= Self::VALUE;
    }
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{ value: {}, valid: {}, writable: {} }}",
            self.value(),
            self.valid(),
            self.writable()
        )
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Dev {
    pub(super) phase: Phase,
    /// Requests sent so far; also names the next request (see `request_id`).
    pub(super) issued: u8,
    pub(super) evicted: u8,
    pub(super) slots: [Slot; MAX_MODEL_PAGES],
    /// Remote loads and stores made so far.
    pub(super) remote_ops: u8,
    /// `RemoteVariant::CachedOnReader` only: the value cached per remote page, if any.
    pub(super) cache: [Option<u8>; MAX_MODEL_REMOTE_PAGES],
    /// Operations made outside a procedure on held pages so far.
    pub(super) held_ops: u8,
}

impl Dev {
    /// The pages whose copy the device's page table holds valid, as a mask.
    pub(super) fn held(&self, cfg: &ModelConfig) -> u8 {
        (0..cfg.pages as usize)
            .filter(|&p| self.slots[p].valid())
            .fold(0, |m, p| m | 1 << p)
    }
}

/// The page numbers in `mask`, lowest first.
pub(super) fn bits(mask: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |p| mask & (1 << p) != 0)
}

#[derive(Clone, Debug)]
pub(super) struct State {
    /// Shared between a state and its successors until a step hands the protocol a message:
    /// most steps (sending a request, reading, writing) leave it alone, and cloning its
    /// allocations on every step would dominate the run time.
    pub(super) proto: Rc<Protocol>,
    pub(super) home: [u8; MAX_MODEL_PAGES],
    pub(super) latest: [u8; MAX_MODEL_PAGES],
    /// The world's own record of which pages belong to a live object (the protocol's is
    /// checked against it); a freed page's home and latest value are dead and kept at 0.
    pub(super) live: u8,
    /// Objects freed so far.
    pub(super) freed: u8,
    pub(super) devs: [Dev; MAX_MODEL_DEVICES],
    /// Each remote page's one location, and (a ghost) its latest value written.
    pub(super) remote: [u8; MAX_MODEL_REMOTE_PAGES],
    pub(super) remote_latest: [u8; MAX_MODEL_REMOTE_PAGES],
}

/// Whether a step happened. A free the protocol refuses (a page of it is locked or deferred)
/// changes nothing; the host retries later, which is the same free offered in a later state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Applied {
    Done,
    Refused,
}

/// Request ids follow from the device and its request count, so they add no states.
pub(super) fn request_id(device: usize, index: u8) -> RequestId {
    RequestId(((device as u64) << 8) | index as u64)
}

/// One step of the world. An `Evict` with `room` makes room for a batch under the capacity
/// and costs no eviction budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Request {
        device: u8,
        batch: Batch,
    },
    Evict {
        device: u8,
        page: u8,
        room: bool,
    },
    Deliver {
        device: u8,
    },
    Read {
        device: u8,
        page: u8,
    },
    Write {
        device: u8,
        page: u8,
        value: u8,
    },
    Release {
        device: u8,
    },
    /// A device inside its procedure stages a batch for its next one.
    Stage {
        device: u8,
        batch: Batch,
    },
    Free {
        page: u8,
    },
    Create {
        page: u8,
    },
    /// Remote page `remote` (global page `pages + remote`), at its location.
    RemoteRead {
        device: u8,
        remote: u8,
    },
    RemoteWrite {
        device: u8,
        remote: u8,
        value: u8,
    },
    /// An idle device reads a page outside any procedure, trusting its page table.
    HeldRead {
        device: u8,
        page: u8,
    },
    /// An idle device writes a page outside any procedure.
    HeldWrite {
        device: u8,
        page: u8,
        value: u8,
    },
}

/// What a message was, for traces: built on every step, formatted only for a trace.
#[derive(Clone, Copy)]
pub(super) enum Sent {
    Request { device: u8, index: u8, batch: Batch },
    Release { device: u8 },
    Stage { device: u8, index: u8, batch: Batch },
    Evict { device: u8, page: u8, room: bool },
    Free { page: u8 },
    Create { page: u8 },
}

impl fmt::Display for Sent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Sent::Request {
                device,
                index,
                batch,
            } => write!(f, "device{device}'s request #{index} {batch}"),
            Sent::Release { device } => write!(f, "device{device}'s release"),
            Sent::Stage {
                device,
                index,
                batch,
            } => write!(f, "device{device}'s staged request #{index} {batch}"),
            Sent::Evict { device, page, room } => write!(
                f,
                "device{device}'s eviction of page{page}{}",
                if room { " to make room" } else { "" }
            ),
            Sent::Free { page } => write!(f, "the free of page{page}'s object"),
            Sent::Create { page } => write!(f, "a new object over page{page}"),
        }
    }
}

pub(super) use crate::search::{fail, Failure};

pub(super) fn refused(what: Sent, e: CoreError) -> Failure {
    fail(
        property::PROTOCOL_ERROR,
        format!("Protocol::handle refused {what}: {e}"),
    )
}

pub(super) fn set_to_string(s: DeviceSet) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", v.join(", "))
}

impl State {
    pub(super) fn initial(cfg: &ModelConfig) -> State {
        let directory = Directory::new(
            cfg.pages + cfg.remote_pages as u64,
            HomeMap::Single(NodeId(0)),
        );
        let proto = Protocol::new(directory, cfg.devices, cfg.variant)
            .expect("validate() bounds the device count")
            .with_coherence(cfg.coherence);
        let proto = if cfg.staging {
            proto.with_staging()
        } else {
            proto
        };
        let dev = Dev {
            phase: Phase::Idle,
            issued: 0,
            evicted: 0,
            slots: [Slot::default(); MAX_MODEL_PAGES],
            remote_ops: 0,
            cache: [None; MAX_MODEL_REMOTE_PAGES],
            held_ops: 0,
        };
        State {
            proto: Rc::new(proto),
            home: [0; MAX_MODEL_PAGES],
            latest: [0; MAX_MODEL_PAGES],
            live: ((1u16 << cfg.pages) - 1) as u8,
            freed: 0,
            devs: [dev; MAX_MODEL_DEVICES],
            remote: [0; MAX_MODEL_REMOTE_PAGES],
            remote_latest: [0; MAX_MODEL_REMOTE_PAGES],
        }
    }

    pub(super) fn enabled(&self, cfg: &ModelConfig, batches: &[Batch], out: &mut Vec<Step>) {
        let capacity = cfg.capacity.map_or(u32::MAX, u32::from);
        for (d, dev) in self.devs[..cfg.devices].iter().enumerate() {
            let device = d as u8;
            let held = dev.held(cfg);
            match dev.phase {
                Phase::Idle => {
                    let requesting = dev.issued < cfg.requests_per_device;
                    if requesting {
                        // A request for a freed page is refused like one for a page that never
                        // existed; what is worth exploring is the request already sent when
                        // its page is freed, which the inbox covers.
                        out.extend(
                            batches
                                .iter()
                                .filter(|b| b.pages() & !self.live == 0)
                                .filter(|b| (held | b.pages()).count_ones() <= capacity)
                                .map(|&batch| Step::Request { device, batch }),
                        );
                    }
                    // Evicting a held page p makes room for some batch exactly when more pages
                    // are live than fit: the batch of every other live page then does not fit
                    // beside p (p is live, as held pages are), and some batch of them fits
                    // without it. Such an eviction costs no budget, so the budget bounds only
                    // the evictions nothing asked for; where both would be offered, the free
                    // one reaches everything the paid one does, with more budget left.
                    // The steady state: a launch from the held set, no message, no lock. With
                    // the page table checked, only valid pages (writable ones for a store)
                    // run; a fault does nothing, so it is no step.
                    if dev.held_ops < cfg.held_ops_per_device {
                        for page in 0..cfg.pages as u8 {
                            let slot = dev.slots[page as usize];
                            let (read, write) = match cfg.held_variant {
                                HeldVariant::Checked => (slot.valid(), slot.writable()),
                                HeldVariant::StoreIgnoresWritable => (slot.valid(), slot.valid()),
                            };
                            if read {
                                out.push(Step::HeldRead { device, page });
                            }
                            if write {
                                out.extend((0..cfg.values).map(|value| Step::HeldWrite {
                                    device,
                                    page,
                                    value,
                                }));
                            }
                        }
                    }
                    let room = requesting && self.live.count_ones() > capacity;
                    if room || dev.evicted < cfg.evictions_per_device {
                        out.extend(bits(held).map(|page| Step::Evict { device, page, room }));
                    }
                }
                Phase::Requested(_) => out.push(Step::Deliver { device }),
                Phase::Waiting(_) => {}
                Phase::Granted { batch, done } => {
                    for p in 0..cfg.pages as u8 {
                        if done & (1 << p) != 0 {
                            continue;
                        }
                        match batch.access(p as usize) {
                            None => {}
                            Some(Access::Read) => out.push(Step::Read { device, page: p }),
                            Some(Access::Write) => {
                                out.push(Step::Read { device, page: p });
                                out.extend((0..cfg.values).map(|value| Step::Write {
                                    device,
                                    page: p,
                                    value,
                                }));
                            }
                        }
                    }
                    // A memory manager that tries to evict a page in use: the protocol must
                    // refuse it (`EvictWhileLocked`, `EvictHeld`) unless the variant is broken.
                    // With staging, pages outside the batch may go (making room for a stage).
                    if dev.evicted < cfg.evictions_per_device {
                        let offered = if cfg.staging {
                            held
                        } else {
                            held & batch.pages()
                        };
                        out.extend(bits(offered).map(|page| Step::Evict {
                            device,
                            page,
                            room: false,
                        }));
                    }
                    // Staging the next wave's pages while this one runs: live pages outside
                    // the batch that fit beside what the device holds.
                    if cfg.staging && dev.issued < cfg.requests_per_device {
                        out.extend(
                            batches
                                .iter()
                                .filter(|b| b.pages() & (!self.live | batch.pages()) == 0)
                                .filter(|b| (held | b.pages()).count_ones() <= capacity)
                                .map(|&b| Step::Stage { device, batch: b }),
                        );
                    }
                    // Remote pages need no grant: inside its procedure a device loads and stores
                    // them in place, any number of times within its budget.
                    if dev.remote_ops < cfg.remote_ops_per_device {
                        for remote in 0..cfg.remote_pages {
                            out.push(Step::RemoteRead { device, remote });
                            out.extend((0..cfg.values).map(|value| Step::RemoteWrite {
                                device,
                                remote,
                                value,
                            }));
                        }
                    }
                    out.push(Step::Release { device });
                }
            }
        }
        for page in 0..cfg.pages as u8 {
            if self.live & (1 << page) == 0 {
                out.push(Step::Create { page });
            } else if self.freed < cfg.frees {
                out.push(Step::Free { page });
            }
        }
    }

    /// Carries out one step. With `log`, appends the step's description (for traces).
    pub(super) fn apply(
        &mut self,
        cfg: &ModelConfig,
        step: Step,
        log: Option<&mut Vec<String>>,
    ) -> Result<Applied, Failure> {
        match step {
            Step::Request { device, batch } => {
                let dev = &mut self.devs[device as usize];
                if let Some(log) = log {
                    log.push(format!(
                        "device{device} sends request #{} {batch}",
                        dev.issued
                    ));
                }
                dev.phase = Phase::Requested(batch);
                dev.issued += 1;
            }
            Step::Evict { device, page, room } => {
                let d = device as usize;
                let msg = Message::Evict {
                    device: DeviceId(device),
                    pages: vec![GlobalPage(page as u64)],
                };
                let sent = Sent::Evict { device, page, room };
                match self.submit(msg, sent, log) {
                    Ok(actions) => {
                        if !room {
                            self.devs[d].evicted += 1;
                        }
                        self.carry_out_all(cfg, actions)?;
                    }
                    Err(CoreError::EvictWhileLocked(at))
                        if at.index() == d
                            && !cfg.staging
                            && matches!(self.devs[d].phase, Phase::Granted { .. }) =>
                    {
                        return Ok(Applied::Refused)
                    }
                    Err(CoreError::EvictHeld {
                        device: at,
                        page: p,
                    }) if at.index() == d
                        && p.index() == page as usize
                        && cfg.staging
                        && matches!(self.devs[d].phase,
                                Phase::Granted { batch, .. } if batch.access(page as usize).is_some()) =>
                    {
                        return Ok(Applied::Refused)
                    }
                    Err(e) => return Err(refused(sent, e)),
                }
            }
            Step::Read { device, page } => {
                let (d, p) = (device as usize, page as usize);
                let got = self.devs[d].slots[p].value();
                if let Some(log) = log {
                    log.push(format!("device{device} reads page{page} = {got}"));
                }
                self.mark_done(d, p);
                if got != self.latest[p] {
                    return Err(fail(
                        property::DATA_VALUE,
                        format!(
                            "device{device} read {got} from page{page}, whose latest value is {}",
                            self.latest[p]
                        ),
                    ));
                }
            }
            Step::Write {
                device,
                page,
                value,
            } => {
                if let Some(log) = log {
                    log.push(format!("device{device} writes page{page} := {value}"));
                }
                let (d, p) = (device as usize, page as usize);
                self.devs[d].slots[p].set_value(value);
                // Under a grant the page cannot have been freed unless the memory lock is off;
                // then the write went to a dead object, and only a later object over the page
                // can be hurt, which its own latest value shows.
                if self.live & (1 << p) != 0 {
                    self.latest[p] = value;
                }
                self.mark_done(d, p);
            }
            Step::RemoteRead { device, remote } => {
                let (d, r) = (device as usize, remote as usize);
                let dev = &mut self.devs[d];
                dev.remote_ops += 1;
                let (got, from) = match (cfg.remote_variant, dev.cache[r]) {
                    (RemoteVariant::CachedOnReader, Some(v)) => (v, "from its cache"),
                    (RemoteVariant::CachedOnReader, None) => {
                        dev.cache[r] = Some(self.remote[r]);
                        (self.remote[r], "in place, and caches it")
                    }
                    (RemoteVariant::CopiedOnRead, _) => {
                        dev.slots[cfg.pages as usize + r] = Slot::filled(self.remote[r]);
                        (self.remote[r], "and installs a copy")
                    }
                    (RemoteVariant::InPlace, _) => (self.remote[r], "in place"),
                };
                let page = cfg.pages as usize + r;
                if let Some(log) = log {
                    log.push(format!(
                        "device{device} loads remote page{page} = {got} {from}"
                    ));
                }
                if got != self.remote_latest[r] {
                    return Err(fail(
                        property::DATA_VALUE,
                        format!(
                            "device{device} read {got} from remote page{page}, whose latest value is {}",
                            self.remote_latest[r]
                        ),
                    ));
                }
            }
            Step::RemoteWrite {
                device,
                remote,
                value,
            } => {
                let (d, r) = (device as usize, remote as usize);
                if let Some(log) = log {
                    log.push(format!(
                        "device{device} stores remote page{} := {value} in place",
                        cfg.pages as usize + r
                    ));
                }
                let dev = &mut self.devs[d];
                dev.remote_ops += 1;
                if dev.cache[r].is_some() {
                    dev.cache[r] = Some(value);
                }
                self.remote[r] = value;
                self.remote_latest[r] = value;
            }
            Step::HeldRead { device, page } => {
                let (d, p) = (device as usize, page as usize);
                self.devs[d].held_ops += 1;
                let got = self.devs[d].slots[p].value();
                if let Some(log) = log {
                    log.push(format!(
                        "device{device} reads page{page} = {got} outside a procedure (held)"
                    ));
                }
                if got != self.latest[p] {
                    return Err(fail(
                        property::DATA_VALUE,
                        format!(
                            "device{device} read {got} from page{page} outside a procedure, whose latest value is {}",
                            self.latest[p]
                        ),
                    ));
                }
            }
            Step::HeldWrite {
                device,
                page,
                value,
            } => {
                let (d, p) = (device as usize, page as usize);
                if let Some(log) = log {
                    log.push(format!(
                        "device{device} writes page{page} := {value} outside a procedure (held)"
                    ));
                }
                self.devs[d].held_ops += 1;
                self.devs[d].slots[p].set_value(value);
                if self.live & (1 << p) != 0 {
                    self.latest[p] = value;
                }
            }
            Step::Stage { device, batch } => {
                let d = device as usize;
                let index = self.devs[d].issued;
                let msg = Message::Stage(RequestBatch {
                    id: request_id(d, index),
                    device: DeviceId(device),
                    pages: batch.to_requests(cfg.pages as usize),
                });
                let sent = Sent::Stage {
                    device,
                    index,
                    batch,
                };
                match self.submit(msg, sent, log) {
                    Ok(actions) => {
                        self.carry_out_all(cfg, actions)?;
                        self.devs[d].issued += 1;
                        self.check_resident(cfg, d, batch, || "a staged batch's reply".into())?;
                    }
                    // It would have had to wait: the device goes on without it, as if it had
                    // not asked, so nothing changes.
                    Err(CoreError::StageWouldWait(at)) if at.index() == d => {
                        return Ok(Applied::Refused)
                    }
                    Err(e) => return Err(refused(sent, e)),
                }
            }
            Step::Release { device } => {
                self.devs[device as usize].phase = Phase::Idle;
                let msg = Message::Release(DeviceId(device));
                self.handle(cfg, msg, Sent::Release { device }, log)?;
            }
            Step::Deliver { device } => {
                let d = device as usize;
                let dev = &mut self.devs[d];
                let Phase::Requested(batch) = dev.phase else {
                    unreachable!("enabled() offers delivery only with a request in the inbox")
                };
                let index = dev.issued - 1;
                dev.phase = Phase::Waiting(batch);
                let msg = Message::Request(RequestBatch {
                    id: request_id(d, index),
                    device: DeviceId(device),
                    pages: batch.to_requests(cfg.pages as usize),
                });
                let sent = Sent::Request {
                    device,
                    index,
                    batch,
                };
                match self.submit(msg, sent, log) {
                    Ok(actions) => self.carry_out_all(cfg, actions)?,
                    // Its page was freed while the request sat in the inbox: the device gets
                    // the error and goes back to idle.
                    Err(CoreError::UnknownPage(page))
                        if batch.access(page.index()).is_some()
                            && self.live & (1 << page.0) == 0 =>
                    {
                        self.devs[d].phase = Phase::Idle;
                    }
                    Err(e) => return Err(refused(sent, e)),
                }
            }
            Step::Free { page } => {
                let p = page as usize;
                let msg = Message::Free {
                    pages: page as u64..page as u64 + 1,
                };
                let sent = Sent::Free { page };
                match self.submit(msg, sent, log) {
                    Ok(actions) => {
                        self.freed += 1;
                        self.live &= !(1 << p);
                        self.home[p] = 0;
                        self.latest[p] = 0;
                        self.carry_out_all(cfg, actions)?;
                    }
                    Err(CoreError::FreeWhileLocked { page: at, device })
                        if at.index() == p
                            && matches!(self.devs[device.index()].phase, Phase::Granted { .. })
                            && self.devs[device.index()].slots[p].valid() =>
                    {
                        return Ok(Applied::Refused)
                    }
                    Err(CoreError::FreeWhileDeferred { page: at, device })
                        if at.index() == p
                            && matches!(self.devs[device.index()].phase,
                                Phase::Waiting(b) if b.access(p).is_some()) =>
                    {
                        return Ok(Applied::Refused)
                    }
                    Err(e) => return Err(refused(sent, e)),
                }
            }
            Step::Create { page } => {
                let p = page as usize;
                let msg = Message::Create {
                    pages: page as u64..page as u64 + 1,
                };
                // The new object's data is zeros, as the runtime's without initial data.
                self.live |= 1 << p;
                self.home[p] = 0;
                self.latest[p] = 0;
                self.handle(cfg, msg, Sent::Create { page }, log)?;
            }
        }
        Ok(Applied::Done)
    }

    pub(super) fn mark_done(&mut self, d: usize, p: usize) {
        if let Phase::Granted { done, .. } = &mut self.devs[d].phase {
            *done |= 1 << p;
        }
    }

    /// The memory manager hands `msg` to the protocol and carries out every action it returns.
    pub(super) fn handle(
        &mut self,
        cfg: &ModelConfig,
        msg: Message,
        what: Sent,
        log: Option<&mut Vec<String>>,
    ) -> Result<(), Failure> {
        let actions = self.submit(msg, what, log).map_err(|e| refused(what, e))?;
        self.carry_out_all(cfg, actions)
    }

    /// Hands `msg` to the protocol; the caller decides whether a refusal is expected.
    pub(super) fn submit(
        &mut self,
        msg: Message,
        what: Sent,
        log: Option<&mut Vec<String>>,
    ) -> Result<Vec<Action>, CoreError> {
        let result = Rc::make_mut(&mut self.proto).handle(msg);
        if let Some(log) = log {
            log.push(format!("memory manager handles {what} -> {result:?}"));
        }
        result
    }

    pub(super) fn carry_out_all(
        &mut self,
        cfg: &ModelConfig,
        actions: Vec<Action>,
    ) -> Result<(), Failure> {
        let locking = cfg.variant != ProtocolVariant::NoMemoryLock;
        for action in actions {
            if locking {
                self.check_lock(cfg, action)?;
            }
            self.carry_out(cfg, action)?;
        }
        Ok(())
    }

    pub(super) fn check_lock(&self, cfg: &ModelConfig, action: Action) -> Result<(), Failure> {
        // Without staging a procedure's whole device is off limits; with it, the pages of its
        // batch (the procedure reads and writes nothing else, so actions on its other pages
        // commute with its steps and the atomic step stays sound).
        let in_procedure = |d: DeviceId, page: GlobalPage| match self.devs[d.index()].phase {
            Phase::Granted { batch, .. } => !cfg.staging || batch.access(page.index()).is_some(),
            _ => false,
        };
        let page = match action {
            Action::Copy { page, .. }
            | Action::WriteBack { page, .. }
            | Action::Invalidate { page, .. }
            | Action::Install { page, .. }
            | Action::GrantWrite { page, .. }
            | Action::Downgrade { page, .. } => page,
            Action::Complete { .. } => return Ok(()),
        };
        let touched = match action {
            Action::Copy {
                from: Source::Device(o),
                ..
            } if in_procedure(o, page) => Some(o),
            _ => Some(action.device()).filter(|&d| in_procedure(d, page)),
        };
        match touched {
            Some(d) => Err(fail(
                property::MEMORY_LOCK,
                format!("{action:?} touches {d}, which is inside its procedure"),
            )),
            None => Ok(()),
        }
    }

    pub(super) fn carry_out(&mut self, cfg: &ModelConfig, action: Action) -> Result<(), Failure> {
        match action {
            Action::Copy { page, from, to } => {
                let p = page.index();
                let value = match from {
                    Source::Home => self.home[p],
                    Source::Device(o) => self.live_value(o, p, action)?,
                };
                self.devs[to.index()].slots[p] = Slot::filled(value);
            }
            Action::WriteBack { page, from } => {
                self.home[page.index()] = self.live_value(from, page.index(), action)?;
            }
            Action::Invalidate { page, device } => {
                self.devs[device.index()].slots[page.index()].drop_copy();
            }
            Action::Install {
                page,
                device,
                writable,
            } => {
                self.live_value(device, page.index(), action)?;
                self.devs[device.index()].slots[page.index()].set_writable(writable);
            }
            Action::GrantWrite { page, device } => {
                self.devs[device.index()].slots[page.index()].set_writable(true);
            }
            Action::Downgrade { page, device } => {
                self.devs[device.index()].slots[page.index()].set_writable(false);
            }
            Action::Complete { request, device } => {
                let d = device.index();
                let dev = &mut self.devs[d];
                let batch = match dev.phase {
                    Phase::Waiting(batch) if request == request_id(d, dev.issued - 1) => batch,
                    // A staged batch's reply (`issued` counts it only after the protocol
                    // accepted it): the procedure goes on, and `apply` checks the pages.
                    Phase::Granted { .. }
                        if cfg.staging && request == request_id(d, dev.issued) =>
                    {
                        return Ok(())
                    }
                    _ => {
                        return Err(fail(
                            property::PROTOCOL_ERROR,
                            format!("{action:?} answers no outstanding request"),
                        ))
                    }
                };
                dev.phase = Phase::Granted { batch, done: 0 };
                self.check_resident(cfg, d, batch, || format!("{action:?}"))?;
            }
        }
        Ok(())
    }

    /// Every page of `batch` is resident on device `d` with the access asked for.
    pub(super) fn check_resident(
        &self,
        cfg: &ModelConfig,
        d: usize,
        batch: Batch,
        what: impl Fn() -> String,
    ) -> Result<(), Failure> {
        for p in 0..cfg.pages as usize {
            let s = self.devs[d].slots[p];
            let ok = match batch.access(p) {
                None => true,
                Some(Access::Read) => s.valid(),
                Some(Access::Write) => s.valid() && s.writable(),
            };
            if !ok {
                return Err(fail(
                    property::GRANT,
                    format!("{} finds page{p} on device{d} as {s:?}", what()),
                ));
            }
        }
        Ok(())
    }

    /// The value of `d`'s copy of page `p`, which `action` moves: refused if the copy was dropped
    /// (its value is dead, see the key's section comment).
    pub(super) fn live_value(&self, d: DeviceId, p: usize, action: Action) -> Result<u8, Failure> {
        let s = self.devs[d.index()].slots[p];
        if !s.valid() {
            return Err(fail(
                property::LIVE_SOURCE,
                format!("{action:?} uses {d}'s copy of page{p}, which is not valid"),
            ));
        }
        Ok(s.value())
    }

    /// The safety properties that are a function of one state.
    pub(super) fn invariants(&self, cfg: &ModelConfig) -> Result<(), Failure> {
        let devs = &self.devs[..cfg.devices];
        let directory = self.proto.directory();
        for r in 0..cfg.remote_pages as usize {
            let page = cfg.pages as usize + r;
            let e = directory
                .entry(GlobalPage(page as u64))
                .copied()
                .unwrap_or_default();
            let held: Vec<usize> = (0..cfg.devices)
                .filter(|&d| devs[d].slots[page].valid())
                .collect();
            if !e.copies.is_empty() || e.owner.is_some() || !held.is_empty() {
                return Err(fail(
                    property::REMOTE_NEVER_COPIED,
                    format!(
                        "remote page{page}: the directory lists copies {} (owner {:?}), page tables of devices {held:?} hold it",
                        set_to_string(e.copies),
                        e.owner
                    ),
                ));
            }
            if cfg.remote_variant == RemoteVariant::InPlace
                && self.remote[r] != self.remote_latest[r]
            {
                return Err(fail(
                    property::NO_LOST_WRITE,
                    format!(
                        "remote page{page} holds {} at its location, its latest value is {}",
                        self.remote[r], self.remote_latest[r]
                    ),
                ));
            }
        }
        if let Some(capacity) = cfg.capacity {
            for (d, dev) in devs.iter().enumerate() {
                let held = dev.held(cfg);
                if held.count_ones() > capacity as u32 {
                    return Err(fail(
                        property::CAPACITY,
                        format!(
                            "device{d} holds valid copies of pages {{{}}}, more than its {capacity} slot(s)",
                            bits(held).map(|p| format!("page{p}")).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
        }
        for p in 0..cfg.pages as usize {
            let holders = |f: fn(&Slot) -> bool| {
                let mut s = DeviceSet::EMPTY;
                for (d, dev) in devs.iter().enumerate() {
                    if f(&dev.slots[p]) {
                        s.insert(DeviceId(d as u8));
                    }
                }
                s
            };
            let valid = holders(|s| s.valid());
            let writable = holders(|s| s.valid() && s.writable());

            let live = self.live & (1 << p) != 0;
            let e = match directory.entry(GlobalPage(p as u64)) {
                Ok(&e) if live => e,
                Err(_) if !live => {
                    if !valid.is_empty() {
                        return Err(fail(
                            property::NO_STALE_MAPPING,
                            format!(
                                "page{p} belongs to no object, yet {} still map it",
                                set_to_string(valid)
                            ),
                        ));
                    }
                    continue;
                }
                _ => {
                    return Err(fail(
                        property::DIRECTORY_AGREEMENT,
                        format!(
                            "page{p} is {} in the world but not in the directory",
                            if live { "live" } else { "freed" }
                        ),
                    ))
                }
            };

            // Modified: the owner's is the only copy. Owned and shared: the owner is one of
            // the copies, and under `WriteHome` an owner never shares.
            let exclusive = e.writable || cfg.coherence == Coherence::WriteHome;
            if let Some(o) = e.owner {
                let ok = if exclusive {
                    e.copies == DeviceSet::only(o)
                } else {
                    e.copies.contains(o)
                };
                if !ok {
                    return Err(fail(
                        property::SINGLE_WRITER,
                        format!(
                            "directory: page{p} is owned by {o}{} but copies are {}",
                            if e.writable {
                                " (writable)"
                            } else {
                                " (shared)"
                            },
                            set_to_string(e.copies)
                        ),
                    ));
                }
            } else if e.writable {
                return Err(fail(
                    property::SINGLE_WRITER,
                    format!("directory: page{p} is writable with no owner"),
                ));
            }
            if writable.len() > 1 || (writable.len() == 1 && valid.len() > 1) {
                return Err(fail(
                    property::SINGLE_WRITER,
                    format!(
                        "page tables: page{p} is writable on {} and valid on {}",
                        set_to_string(writable),
                        set_to_string(valid)
                    ),
                ));
            }

            let latest = self.latest[p];
            match e.owner {
                Some(o) => {
                    let s = self.devs[o.index()].slots[p];
                    if !s.valid() || s.value() != latest {
                        return Err(fail(
                            property::NO_LOST_WRITE,
                            format!(
                                "page{p}'s owner {o} holds {s:?}, the latest value is {latest}"
                            ),
                        ));
                    }
                }
                None => {
                    if self.home[p] != latest {
                        return Err(fail(
                            property::NO_LOST_WRITE,
                            format!(
                                "page{p} has no owner and home holds {}, the latest value is {latest}",
                                self.home[p]
                            ),
                        ));
                    }
                }
            }
            for d in valid.iter() {
                let v = self.devs[d.index()].slots[p].value();
                if v != latest {
                    return Err(fail(
                        property::NO_LOST_WRITE,
                        format!(
                            "{d} holds a valid copy of page{p} = {v}, the latest value is {latest}"
                        ),
                    ));
                }
            }

            let writer = writable.iter().next();
            if e.copies != valid || e.owner.filter(|_| e.writable) != writer {
                return Err(fail(
                    property::DIRECTORY_AGREEMENT,
                    format!(
                        "page{p}: directory says copies {} owner {:?}, page tables say valid {} writable {:?}",
                        set_to_string(e.copies),
                        e.owner,
                        set_to_string(valid),
                        writer
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checked in terminal states only: nothing may be left waiting.
    pub(super) fn quiescent(&self, cfg: &ModelConfig) -> Result<(), Failure> {
        let busy: Vec<String> = self.devs[..cfg.devices]
            .iter()
            .enumerate()
            .filter(|(_, dev)| dev.phase != Phase::Idle)
            .map(|(d, dev)| format!("device{d} is {:?}", dev.phase))
            .collect();
        let deferred = self.proto.deferred().count();
        let locked = self.proto.locked();
        if busy.is_empty() && deferred == 0 && locked.is_empty() {
            return Ok(());
        }
        Err(fail(
            property::EVENTUAL_COMPLETION,
            format!(
                "no step is enabled, yet {}; {deferred} request(s) deferred; locked {}",
                if busy.is_empty() {
                    "every device is idle".to_string()
                } else {
                    busy.join(", ")
                },
                set_to_string(locked)
            ),
        ))
    }

    /// Falls on every step (see the module docs): budgets weigh more than any phase, and a
    /// free more than the one page it leaves to be created again. Copies held count too, so an
    /// eviction that makes room falls without spending budget; the waiting phases outweigh a
    /// granted one by more than the copies a grant adds.
    pub(super) fn measure(&self, cfg: &ModelConfig) -> u32 {
        const MAX: u32 = MAX_MODEL_PAGES as u32;
        const BUDGET: u32 = 2 * MAX + 4;
        let pages = ((1u16 << cfg.pages) - 1) as u8;
        let host = (cfg.frees - self.freed) as u32 * 2 + (pages & !self.live).count_ones();
        host + self.devs[..cfg.devices]
            .iter()
            .map(|dev| {
                let left = (cfg.requests_per_device - dev.issued) as u32
                    + (cfg.evictions_per_device - dev.evicted) as u32
                    + (cfg.remote_ops_per_device - dev.remote_ops) as u32
                    + (cfg.held_ops_per_device - dev.held_ops) as u32;
                let rank = match dev.phase {
                    Phase::Idle => 0,
                    Phase::Granted { batch, done } => 1 + (batch.pages() & !done).count_ones(),
                    Phase::Waiting(_) => 2 * MAX + 2,
                    Phase::Requested(_) => 2 * MAX + 3,
                };
                left * BUDGET + rank + dev.held(cfg).count_ones()
            })
            .sum::<u32>()
    }
}
