//! Exhaustive model checking of several nodes, each the home of part of the pages
//! ([`crate::nodes`]), with messages between them delivered in any order.
//!
//! The world: `nodes` nodes of `devices_per_node` devices each (devices numbered globally,
//! device `d` on node `d / devices_per_node`), `pages` pages dealt out one per node round
//! robin (`HomeMap::Blocked { block_pages: 1 }`). Every node runs the real [`Protocol`] for the
//! pages it is home to and keeps their home copies. A state is every node's protocol and home
//! values, every device's local copies and phase, the ghost latest value per page, and the
//! network: the multiset of messages sent and not yet delivered.
//!
//! # Steps
//!
//! - An idle device with request budget left chooses a batch (any non-empty choice of
//!   none/read/write per page), splits it by home and sends the first part (in node order) as
//!   a request message to that home: [`SplitVariant::Ordered`], the design.
//! - Any message in the network is delivered, in any order:
//!   - a request to its home, which hands it to [`Protocol::handle`] and carries out the
//!     returned actions on the devices of any node; a `Complete` becomes a message to the
//!     device;
//!   - a `Complete` to its device, which sends its next part, or, with every part in, starts
//!     its procedure;
//!   - a `Release` to its home, whose protocol unlocks the device and may grant deferred parts.
//! - A device inside its procedure reads a granted page or writes any value to a page granted
//!   for writing (once per page), or ends its procedure by sending `Release` to every home that
//!   granted it a part. It is idle again once all of them are delivered (it waits for their
//!   acknowledgements).
//! - An idle device with eviction budget left evicts a page it holds; the page's home handles
//!   it in the same step (the device waits for the answer).
//!
//! # Why a home's step may be atomic
//!
//! A home's actions touch only its own pages, so two homes' action lists commute: they touch
//! disjoint page table entries and home copies. Within one home the argument of
//! [`crate::model`] holds: no action touches a page a device holds under a grant, which the
//! checker verifies at every action ([`property::MEMORY_LOCK`], per page: a device may be
//! inside its acquisition, locked at one home, while another home's actions touch its other
//! pages; that is allowed, it does not run yet).
//!
//! # Properties
//!
//! Those of [`crate::model`] that apply (no create, free, capacity or remote pages here):
//! single writer, data value, no lost write, every request eventually completes (every
//! terminal state quiescent: no message in flight, no device waiting or locked anywhere),
//! protocol error, acyclic (a progress measure falls on every step), directory agreement (each
//! page's entry *at its home* matches the page tables), grant, data moves only from valid
//! copies, memory lock; and one of its own, [`ONLY_HOME_ANSWERS`]: a node's directory lists no
//! copy or owner of a page it is not home to.

use std::fmt;

use crate::directory::{DeviceSet, Directory, HomeMap};
use crate::model::{property, Batch, CheckReport};
use crate::nodes::split_by_home;
use crate::protocol::{
    Access, Action, Coherence, Message, PageRequest, Protocol, ProtocolVariant, RequestBatch,
    RequestId, Source,
};
use crate::search::{fail, search, Applied, Failure, World};
use crate::{DeviceId, GlobalPage};

/// A node's directory lists no copy or owner of a page it is not home to.
pub const ONLY_HOME_ANSWERS: &str = "a node answers only for pages it is home to";

/// How a device's batch reaches the homes: the design, or a deliberately broken one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SplitVariant {
    /// Split by home, parts acquired one at a time in increasing node order.
    #[default]
    Ordered,
    /// Broken on purpose: every part sent at once. Two devices can each be granted (and
    /// locked) at one home and deferred at the other: a deadlock.
    Parallel,
    /// Broken on purpose: the whole batch goes to the device's own node, whose manager then
    /// answers for pages it is not home to.
    NoSplit,
}

/// The multi-node world to explore.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodesConfig {
    pub nodes: usize,
    pub devices_per_node: usize,
    pub pages: u64,
    pub values: u8,
    pub requests_per_device: u8,
    pub evictions_per_device: u8,
    pub variant: SplitVariant,
    /// What a read of a modified page does: under owned pages, a page homed on one node may
    /// be owned by a device of another and shared from there without going home.
    pub coherence: Coherence,
}

impl NodesConfig {
    /// The two-node world: 2 nodes × 2 devices × 2 pages (one homed on each node), two values,
    /// one request per device, no eviction (the suite's run; evictions are explored by the
    /// longer, ignored runs).
    pub fn two_nodes() -> Self {
        NodesConfig {
            nodes: 2,
            devices_per_node: 2,
            pages: 2,
            values: 2,
            requests_per_device: 1,
            evictions_per_device: 0,
            variant: SplitVariant::Ordered,
            coherence: Coherence::Owned,
        }
    }

    pub fn with_coherence(self, coherence: Coherence) -> Self {
        NodesConfig { coherence, ..self }
    }

    pub fn with_variant(self, variant: SplitVariant) -> Self {
        NodesConfig { variant, ..self }
    }

    fn devices(&self) -> usize {
        self.nodes * self.devices_per_node
    }

    fn homes(&self) -> HomeMap {
        HomeMap::Blocked {
            nodes: self.nodes as u16,
            block_pages: 1,
        }
    }

    fn home(&self, page: usize) -> usize {
        self.homes().home(GlobalPage(page as u64)).0 as usize
    }

    /// Refuses worlds the state encoding cannot hold.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=8).contains(&self.nodes) {
            return Err(format!("nodes must be 1..=8, got {}", self.nodes));
        }
        if !(1..=3).contains(&self.devices_per_node) || self.devices() > 8 {
            return Err(format!(
                "1 to 3 devices per node and 8 in all, got {} per node",
                self.devices_per_node
            ));
        }
        if !(1..=8).contains(&self.pages) {
            return Err(format!("pages must be 1..=8, got {}", self.pages));
        }
        if !(1..=15).contains(&self.values) {
            return Err(format!("values must be 1..=15, got {}", self.values));
        }
        if self.requests_per_device > 15 || self.evictions_per_device > 15 {
            return Err("budgets must be at most 15".into());
        }
        Ok(())
    }
}

/// Explores every state reachable in `cfg`'s world, breadth first, and checks every property.
pub fn check_nodes(cfg: &NodesConfig) -> Result<CheckReport, String> {
    cfg.validate()?;
    Ok(search(&NodesWorld {
        cfg,
        batches: Batch::all(cfg.pages as usize),
        perms: node_preserving_perms(cfg),
    }))
}

// ---------------------------------------------------------------------------------------------
// The state.

/// A device's copy of one page. An invalidation clears the flags and keeps the value, so a
/// device that trusts an old grant reads a stale slot, as a GPU pass would.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    value: u8,
    /// A `Copy` filled it; an `Install` may map it.
    filled: bool,
    valid: bool,
    writable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    /// Parts sent (`sent`, node mask) and answered (`received`).
    Acquiring {
        batch: Batch,
        sent: u8,
        received: u8,
    },
    Running {
        batch: Batch,
    },
    /// `Release`s not yet delivered, per node.
    Releasing {
        pending: u8,
    },
}

#[derive(Clone, Debug)]
struct Dev {
    slots: Vec<Slot>,
    requests_left: u8,
    evictions_left: u8,
    /// Requests sent so far, to name each batch.
    sent: u8,
    phase: Phase,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Msg {
    Request { node: u8, device: u8 },
    Release { node: u8, device: u8 },
}

impl fmt::Display for Msg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Msg::Request { node, device } => write!(f, "device{device}'s request to node{node}"),
            Msg::Release { node, device } => write!(f, "device{device}'s Release to node{node}"),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Send {
        device: u8,
        batch: Batch,
    },
    Deliver(Msg),
    /// Ends the procedure: per page a nibble, 0 for no write, `v + 1` to write `v`.
    Release {
        device: u8,
        writes: u32,
    },
    Evict {
        device: u8,
        page: u8,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Step::Send { device, batch } => write!(f, "device{device} requests {batch}"),
            Step::Deliver(m) => write!(f, "deliver {m}"),
            Step::Release { device, writes } => {
                write!(f, "device{device} reads its pages")?;
                for p in 0..8 {
                    let w = (writes >> (4 * p)) & 0xf;
                    if w != 0 {
                        write!(f, ", writes {} to page{p}", w - 1)?;
                    }
                }
                write!(f, " and releases")
            }
            Step::Evict { device, page } => write!(f, "device{device} evicts page{page}"),
        }
    }
}

#[derive(Clone, Debug)]
struct State {
    homes: Vec<Protocol>,
    /// Home copy per node and page; only the page's home uses its own.
    home_values: Vec<Vec<u8>>,
    latest: Vec<u8>,
    devs: Vec<Dev>,
    /// Sorted: a multiset.
    net: Vec<Msg>,
}

fn bits(mask: u8) -> impl Iterator<Item = usize> {
    (0..8).filter(move |i| mask & (1 << i) != 0)
}

impl State {
    fn initial(cfg: &NodesConfig) -> Result<State, String> {
        let homes = (0..cfg.nodes)
            .map(|_| {
                Protocol::new(
                    Directory::new(cfg.pages, cfg.homes()),
                    cfg.devices(),
                    ProtocolVariant::Correct,
                )
                .map(|p| p.with_coherence(cfg.coherence))
                .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(State {
            homes,
            home_values: vec![vec![0; cfg.pages as usize]; cfg.nodes],
            latest: vec![0; cfg.pages as usize],
            devs: (0..cfg.devices())
                .map(|_| Dev {
                    slots: vec![Slot::default(); cfg.pages as usize],
                    requests_left: cfg.requests_per_device,
                    evictions_left: cfg.evictions_per_device,
                    sent: 0,
                    phase: Phase::Idle,
                })
                .collect(),
            net: Vec::new(),
        })
    }

    /// The node a device's request for `page` goes to.
    fn part_node(&self, cfg: &NodesConfig, device: usize, page: usize) -> usize {
        match cfg.variant {
            SplitVariant::NoSplit => device / cfg.devices_per_node,
            _ => cfg.home(page),
        }
    }

    fn parts(&self, cfg: &NodesConfig, device: usize, batch: Batch) -> u8 {
        bits(batch.pages()).fold(0, |m, p| m | 1 << self.part_node(cfg, device, p))
    }

    /// Whether `device` holds `page` under a grant it has not released.
    fn holds_grant(&self, cfg: &NodesConfig, device: usize, page: usize) -> bool {
        let node = self.part_node(cfg, device, page);
        match self.devs[device].phase {
            Phase::Idle => false,
            Phase::Acquiring {
                batch, received, ..
            } => batch.pages() & (1 << page) != 0 && received & (1 << node) != 0,
            Phase::Running { batch, .. } => batch.pages() & (1 << page) != 0,
            // Releasing: the pages of a part whose Release is not yet delivered.
            Phase::Releasing { pending } => pending & (1 << node) != 0,
        }
    }

    fn send(&mut self, msg: Msg) {
        let at = self.net.partition_point(|m| *m < msg);
        self.net.insert(at, msg);
    }

    fn enabled(&self, cfg: &NodesConfig, batches: &[Batch], out: &mut Vec<Step>) {
        out.clear();
        let mut last = None;
        for &m in &self.net {
            if last != Some(m) {
                out.push(Step::Deliver(m));
                last = Some(m);
            }
        }
        for (d, dev) in self.devs.iter().enumerate() {
            let device = d as u8;
            match dev.phase {
                Phase::Idle => {
                    if dev.requests_left > 0 {
                        out.extend(batches.iter().map(|&batch| Step::Send { device, batch }));
                    }
                    if dev.evictions_left > 0 {
                        for (p, s) in dev.slots.iter().enumerate() {
                            if s.valid {
                                out.push(Step::Evict {
                                    device,
                                    page: p as u8,
                                });
                            }
                        }
                    }
                }
                // Inside its grant nobody else changes its pages (the memory lock, checked at
                // every action), so when it reads them does not matter, and only the last value
                // it writes to each is seen: one step reads every page, writes some and releases.
                Phase::Running { batch } => {
                    let mut choices = vec![0u32];
                    for p in bits(batch.write) {
                        choices = choices
                            .iter()
                            .flat_map(|&c| (0..=cfg.values as u32).map(move |w| c | w << (4 * p)))
                            .collect();
                    }
                    out.extend(
                        choices
                            .into_iter()
                            .map(|writes| Step::Release { device, writes }),
                    );
                }
                Phase::Acquiring { .. } | Phase::Releasing { .. } => {}
            }
        }
    }

    /// The request message for the lowest part not yet sent, if any.
    fn send_next_part(&mut self, cfg: &NodesConfig, d: usize) -> Result<(), Failure> {
        let Phase::Acquiring {
            batch,
            sent,
            received,
        } = self.devs[d].phase
        else {
            return Ok(());
        };
        let parts = self.parts(cfg, d, batch);
        let unsent = parts & !sent;
        let to_send = match cfg.variant {
            SplitVariant::Parallel => unsent,
            // One at a time, lowest node first, once the previous answer is in.
            _ if sent == received && unsent != 0 => unsent & unsent.wrapping_neg(),
            _ => 0,
        };
        self.devs[d].phase = Phase::Acquiring {
            batch,
            sent: sent | to_send,
            received,
        };
        // A device's only message in flight, its first, is the same as the device sending
        // later: it does nothing meanwhile. So it is delivered at once, which saves states.
        // Later parts and parallel ones stay in flight: a home may see others' messages
        // between one home's grant and the next part.
        if sent == 0 && to_send.count_ones() == 1 {
            return self.deliver(
                cfg,
                Msg::Request {
                    node: to_send.trailing_zeros() as u8,
                    device: d as u8,
                },
            );
        }
        for n in bits(to_send) {
            self.send(Msg::Request {
                node: n as u8,
                device: d as u8,
            });
        }
        Ok(())
    }

    fn apply(&mut self, cfg: &NodesConfig, step: Step) -> Result<(), Failure> {
        match step {
            Step::Send { device, batch } => {
                let d = device as usize;
                let dev = &mut self.devs[d];
                dev.requests_left -= 1;
                dev.sent += 1;
                dev.phase = Phase::Acquiring {
                    batch,
                    sent: 0,
                    received: 0,
                };
                self.send_next_part(cfg, d)?;
            }
            Step::Deliver(msg) => {
                let at = self.net.binary_search(&msg).expect("a message in flight");
                self.net.remove(at);
                self.deliver(cfg, msg)?;
            }
            Step::Release { device, writes } => {
                let d = device as usize;
                let Phase::Running { batch } = self.devs[d].phase else {
                    unreachable!("only a running device releases");
                };
                self.read_all(d, batch)?;
                for p in bits(batch.write) {
                    let w = (writes >> (4 * p)) & 0xf;
                    if w != 0 {
                        // The device trusts its grant: the write lands in its slot whatever
                        // happened to it.
                        self.devs[d].slots[p].value = w as u8 - 1;
                        self.latest[p] = w as u8 - 1;
                    }
                }
                let pending = self.parts(cfg, d, batch);
                for n in bits(pending) {
                    self.send(Msg::Release {
                        node: n as u8,
                        device,
                    });
                }
                self.devs[d].phase = Phase::Releasing { pending };
            }
            Step::Evict { device, page } => {
                let (d, p) = (device as usize, page as usize);
                self.devs[d].evictions_left -= 1;
                let home = cfg.home(p);
                let actions = self.homes[home]
                    .handle(Message::Evict {
                        device: DeviceId(device),
                        pages: vec![GlobalPage(p as u64)],
                    })
                    .map_err(|e| {
                        fail(
                            property::PROTOCOL_ERROR,
                            format!("node{home} refused device{d}'s eviction of page{p}: {e}"),
                        )
                    })?;
                self.carry_out_all(cfg, home, actions)?;
            }
        }
        Ok(())
    }

    /// The device reads every page of its batch: each must give the latest value.
    fn read_all(&self, d: usize, batch: Batch) -> Result<(), Failure> {
        for p in bits(batch.pages()) {
            let got = self.devs[d].slots[p].value;
            if got != self.latest[p] {
                return Err(fail(
                    property::DATA_VALUE,
                    format!(
                        "device{d} read {got} from page{p}, the latest write was {}",
                        self.latest[p]
                    ),
                ));
            }
        }
        Ok(())
    }

    fn deliver(&mut self, cfg: &NodesConfig, msg: Msg) -> Result<(), Failure> {
        match msg {
            Msg::Request { node, device } => {
                let (n, d) = (node as usize, device as usize);
                let Phase::Acquiring { batch, .. } = self.devs[d].phase else {
                    unreachable!("a request in flight belongs to an acquiring device");
                };
                let whole = RequestBatch {
                    id: RequestId(d as u64 * 16 + self.devs[d].sent as u64),
                    device: DeviceId(device),
                    pages: bits(batch.pages())
                        .map(|p| PageRequest {
                            page: GlobalPage(p as u64),
                            access: batch.access(p).expect("a page of the batch"),
                        })
                        .collect(),
                };
                let part = match cfg.variant {
                    SplitVariant::NoSplit => whole,
                    _ => split_by_home(&whole, &cfg.homes())
                        .into_iter()
                        .find(|(h, _)| h.0 as usize == n)
                        .map(|(_, b)| b)
                        .expect("a part for the node it was sent to"),
                };
                let actions = self.homes[n].handle(Message::Request(part)).map_err(|e| {
                    fail(
                        property::PROTOCOL_ERROR,
                        format!("node{n} refused device{d}'s request: {e}"),
                    )
                })?;
                self.carry_out_all(cfg, n, actions)?;
            }
            Msg::Release { node, device } => {
                let (n, d) = (node as usize, device as usize);
                let actions = self.homes[n]
                    .handle(Message::Release(DeviceId(device)))
                    .map_err(|e| {
                        fail(
                            property::PROTOCOL_ERROR,
                            format!("node{n} refused device{d}'s release: {e}"),
                        )
                    })?;
                if let Phase::Releasing { pending } = self.devs[d].phase {
                    let pending = pending & !(1 << n);
                    self.devs[d].phase = if pending == 0 {
                        Phase::Idle
                    } else {
                        Phase::Releasing { pending }
                    };
                }
                self.carry_out_all(cfg, n, actions)?;
            }
        }
        Ok(())
    }

    /// A home's `Complete` reaches the device. Delivered in the home's step: a reply in flight
    /// is the same as a device that has it and does nothing yet (its next part stays in flight,
    /// its procedure may wait).
    fn complete(&mut self, cfg: &NodesConfig, n: usize, d: usize) -> Result<(), Failure> {
        let Phase::Acquiring {
            batch,
            sent,
            received,
        } = self.devs[d].phase
        else {
            return Err(fail(
                property::PROTOCOL_ERROR,
                format!("node{n} answered device{d}, which was not waiting"),
            ));
        };
        if sent & !received & (1 << n) == 0 {
            return Err(fail(
                property::PROTOCOL_ERROR,
                format!("node{n} answered device{d} for a part not outstanding"),
            ));
        }
        let received = received | 1 << n;
        self.devs[d].phase = Phase::Acquiring {
            batch,
            sent,
            received,
        };
        if received != self.parts(cfg, d, batch) {
            return self.send_next_part(cfg, d);
        }
        for p in bits(batch.pages()) {
            let s = self.devs[d].slots[p];
            let want_write = batch.access(p) == Some(Access::Write);
            if !s.valid || (want_write && !s.writable) {
                return Err(fail(
                    property::GRANT,
                    format!(
                        "device{d} starts without page{p} {}",
                        if want_write { "writable" } else { "resident" }
                    ),
                ));
            }
        }
        self.read_all(d, batch)?;
        self.devs[d].phase = Phase::Running { batch };
        Ok(())
    }

    fn carry_out_all(
        &mut self,
        cfg: &NodesConfig,
        node: usize,
        actions: Vec<Action>,
    ) -> Result<(), Failure> {
        for a in actions {
            self.carry_out(cfg, node, a)?;
        }
        Ok(())
    }

    fn carry_out(&mut self, cfg: &NodesConfig, node: usize, action: Action) -> Result<(), Failure> {
        let page = match action {
            Action::Copy { page, .. }
            | Action::WriteBack { page, .. }
            | Action::Invalidate { page, .. }
            | Action::Install { page, .. }
            | Action::GrantWrite { page, .. }
            | Action::Downgrade { page, .. } => Some(page.index()),
            Action::Complete { .. } => None,
        };
        if let Some(p) = page {
            let x = action.device().index();
            if self.holds_grant(cfg, x, p) {
                return Err(fail(
                    property::MEMORY_LOCK,
                    format!("node{node}'s {action:?} touches device{x}, which holds page{p} under a grant"),
                ));
            }
        }
        let dead = |what: &str, d: DeviceId, p: usize| {
            fail(
                property::LIVE_SOURCE,
                format!(
                    "node{node}: {what} device{}'s page{p}, which is not valid",
                    d.0
                ),
            )
        };
        match action {
            Action::Copy { page, from, to } => {
                let p = page.index();
                let value = match from {
                    Source::Home => self.home_values[node][p],
                    Source::Device(o) => {
                        let s = self.devs[o.index()].slots[p];
                        if !s.valid {
                            return Err(dead("copy from", o, p));
                        }
                        s.value
                    }
                };
                let s = &mut self.devs[to.index()].slots[p];
                s.value = value;
                s.filled = true;
            }
            Action::WriteBack { page, from } => {
                let p = page.index();
                let s = self.devs[from.index()].slots[p];
                if !s.valid {
                    return Err(dead("write back", from, p));
                }
                self.home_values[node][p] = s.value;
            }
            Action::Invalidate { page, device } => {
                let s = &mut self.devs[device.index()].slots[page.index()];
                s.valid = false;
                s.writable = false;
                s.filled = false;
            }
            Action::Install {
                page,
                device,
                writable,
            } => {
                let s = &mut self.devs[device.index()].slots[page.index()];
                if !s.filled && !s.valid {
                    return Err(dead("install", device, page.index()));
                }
                s.valid = true;
                s.writable = writable;
            }
            Action::GrantWrite { page, device } => {
                let s = &mut self.devs[device.index()].slots[page.index()];
                if !s.valid {
                    return Err(dead("grant write to", device, page.index()));
                }
                s.writable = true;
            }
            Action::Downgrade { page, device } => {
                self.devs[device.index()].slots[page.index()].writable = false;
            }
            Action::Complete { device, .. } => self.complete(cfg, node, device.index())?,
        }
        Ok(())
    }

    fn invariants(&self, cfg: &NodesConfig) -> Result<(), Failure> {
        for p in 0..cfg.pages as usize {
            let page = GlobalPage(p as u64);
            let home = cfg.home(p);
            for (n, proto) in self.homes.iter().enumerate() {
                let e = proto.directory().entry(page).expect("every page is live");
                if n != home && (!e.copies.is_empty() || e.owner.is_some()) {
                    return Err(fail(
                        ONLY_HOME_ANSWERS,
                        format!(
                            "node{n}'s directory lists copies {:#b} of page{p}, whose home is node{home}",
                            e.copies.0
                        ),
                    ));
                }
            }
            let writers: Vec<usize> = (0..self.devs.len())
                .filter(|&d| self.devs[d].slots[p].valid && self.devs[d].slots[p].writable)
                .collect();
            let valid: Vec<usize> = (0..self.devs.len())
                .filter(|&d| self.devs[d].slots[p].valid)
                .collect();
            if writers.len() > 1 || (writers.len() == 1 && valid.len() > 1) {
                return Err(fail(
                    property::SINGLE_WRITER,
                    format!("page{p}: writable on {writers:?}, valid on {valid:?}"),
                ));
            }
            let e = self.homes[home]
                .directory()
                .entry(page)
                .expect("every page is live");
            let mut table = DeviceSet::EMPTY;
            for &d in &valid {
                table.insert(DeviceId(d as u8));
            }
            let table_owner = writers.first().map(|&d| DeviceId(d as u8));
            let shared_owner_ok = e.owner.is_none_or(|o| e.copies.contains(o))
                && (!e.writable || e.owner.is_some_and(|o| e.copies == DeviceSet::only(o)));
            if e.copies != table
                || e.owner.filter(|_| e.writable) != table_owner
                || !shared_owner_ok
            {
                return Err(fail(
                    property::DIRECTORY_AGREEMENT,
                    format!(
                        "page{p}: node{home} says copies {:#b} owner {:?}, page tables say {:#b} owner {:?}",
                        e.copies.0, e.owner, table.0, table_owner
                    ),
                ));
            }
            let latest = self.latest[p];
            let held = match e.owner {
                Some(o) => self.devs[o.index()].slots[p].value,
                None => self.home_values[home][p],
            };
            if held != latest || valid.iter().any(|&d| self.devs[d].slots[p].value != latest) {
                return Err(fail(
                    property::NO_LOST_WRITE,
                    format!("page{p}: the latest write {latest} is not where the directory says"),
                ));
            }
        }
        Ok(())
    }

    fn quiescent(&self) -> Result<(), Failure> {
        if let Some(m) = self.net.first() {
            return Err(fail(
                property::EVENTUAL_COMPLETION,
                format!("stuck with {m} in flight"),
            ));
        }
        for (d, dev) in self.devs.iter().enumerate() {
            if dev.phase != Phase::Idle {
                return Err(fail(
                    property::EVENTUAL_COMPLETION,
                    format!("stuck with device{d} {:?}", dev.phase),
                ));
            }
        }
        for (n, proto) in self.homes.iter().enumerate() {
            if !proto.locked().is_empty() || proto.deferred().next().is_some() {
                return Err(fail(
                    property::EVENTUAL_COMPLETION,
                    format!(
                        "stuck with node{n} locking {:#b}, {} requests deferred",
                        proto.locked().0,
                        proto.deferred().count()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Falls on every step (see the module's liveness argument in [`crate::model`]).
    fn measure(&self, cfg: &NodesConfig) -> u32 {
        let mut m = 0u32;
        for (d, dev) in self.devs.iter().enumerate() {
            m += 256 * (dev.requests_left as u32 + dev.evictions_left as u32);
            m += match dev.phase {
                Phase::Idle | Phase::Releasing { .. } => 0,
                // More than any running weight, which it turns into.
                Phase::Acquiring { batch, sent, .. } => {
                    4 * (self.parts(cfg, d, batch) & !sent).count_ones() + cfg.nodes as u32 + 10
                }
                // More than the Releases it turns into.
                Phase::Running { .. } => cfg.nodes as u32 + 1,
            };
        }
        for m2 in &self.net {
            m += match m2 {
                Msg::Request { .. } => 3,
                Msg::Release { .. } => 1,
            };
        }
        for proto in &self.homes {
            m += 2 * proto.deferred().count() as u32;
        }
        m
    }

    /// The smallest of the state's encodings over every renaming of devices within a node.
    /// Devices of one node are interchangeable names to the protocol and to the world (a
    /// device's node decides only where its requests go, the same for both), so two states
    /// that differ by such a renaming have the same futures, renamed: sound to visit once.
    fn key(&self, perms: &[Vec<u8>]) -> Box<[u8]> {
        let mut best: Option<Vec<u8>> = None;
        for perm in perms {
            let k = self.key_with(perm);
            if best.as_ref().is_none_or(|b| k < *b) {
                best = Some(k);
            }
        }
        best.expect("at least the identity").into_boxed_slice()
    }

    /// The encoding with device `i` renamed `perm[i]`.
    fn key_with(&self, perm: &[u8]) -> Vec<u8> {
        let set = |s: DeviceSet| s.iter().fold(0u8, |m, d| m | 1 << perm[d.index()]);
        let mut k = Vec::with_capacity(64);
        for proto in &self.homes {
            for e in proto.directory().entries() {
                k.push(set(e.copies));
                k.push(e.owner.map_or(0xff, |o| perm[o.index()]));
                k.push(e.writable as u8);
            }
            k.push(set(proto.locked()));
            for b in proto.deferred() {
                k.push(0xfe);
                k.push(perm[b.device.index()]);
                for r in &b.pages {
                    k.push(r.page.0 as u8 | if r.access == Access::Write { 0x80 } else { 0 });
                }
            }
            k.push(0xfd);
        }
        for hv in &self.home_values {
            k.extend_from_slice(hv);
        }
        k.extend_from_slice(&self.latest);
        let mut order = vec![0usize; perm.len()];
        for (old, &new) in perm.iter().enumerate() {
            order[new as usize] = old;
        }
        for &old in &order {
            let dev = &self.devs[old];
            for s in &dev.slots {
                k.push(
                    s.value << 3 | (s.filled as u8) << 2 | (s.valid as u8) << 1 | s.writable as u8,
                );
            }
            k.push(dev.requests_left << 4 | dev.evictions_left);
            match dev.phase {
                Phase::Idle => k.push(0),
                Phase::Acquiring {
                    batch,
                    sent,
                    received,
                } => k.extend_from_slice(&[1, batch.read, batch.write, sent, received]),
                Phase::Running { batch } => k.extend_from_slice(&[2, batch.read, batch.write]),
                Phase::Releasing { pending } => k.extend_from_slice(&[3, pending]),
            }
        }
        let mut net: Vec<[u8; 3]> = self
            .net
            .iter()
            .map(|m| match *m {
                Msg::Request { node, device } => [0, node, perm[device as usize]],
                Msg::Release { node, device } => [2, node, perm[device as usize]],
            })
            .collect();
        net.sort_unstable();
        net.iter().for_each(|m| k.extend_from_slice(m));
        k
    }
}

/// Every renaming of devices that keeps each on its node: `perm[old] = new`.
fn node_preserving_perms(cfg: &NodesConfig) -> Vec<Vec<u8>> {
    let k = cfg.devices_per_node;
    let mut within: Vec<Vec<u8>> = vec![Vec::new()];
    for _ in 0..k {
        within = within
            .into_iter()
            .flat_map(|p| {
                (0..k as u8)
                    .filter(|i| !p.contains(i))
                    .map(|i| {
                        let mut q = p.clone();
                        q.push(i);
                        q
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    let mut perms: Vec<Vec<u8>> = vec![Vec::new()];
    for node in 0..cfg.nodes {
        let base = (node * k) as u8;
        perms = perms
            .into_iter()
            .flat_map(|p| {
                within.iter().map(move |w| {
                    let mut q = p.clone();
                    q.extend(w.iter().map(|&i| base + i));
                    q
                })
            })
            .collect();
    }
    perms
}

// ---------------------------------------------------------------------------------------------
// The search.

struct NodesWorld<'a> {
    cfg: &'a NodesConfig,
    batches: Vec<Batch>,
    perms: Vec<Vec<u8>>,
}

impl World for NodesWorld<'_> {
    type State = State;
    type Step = Step;
    type Key = Box<[u8]>;
    type Hasher = std::collections::hash_map::RandomState;

    fn initial(&self) -> Result<State, Failure> {
        State::initial(self.cfg).map_err(|e| fail(property::PROTOCOL_ERROR, e))
    }
    fn enabled(&self, s: &State, out: &mut Vec<Step>) {
        s.enabled(self.cfg, &self.batches, out)
    }
    fn apply(&self, s: &mut State, step: Step) -> Result<Applied, Failure> {
        s.apply(self.cfg, step).map(|()| Applied::Done)
    }
    fn invariants(&self, s: &State) -> Result<(), Failure> {
        s.invariants(self.cfg)
    }
    fn quiescent(&self, s: &State) -> Result<(), Failure> {
        s.quiescent()
    }
    fn measure(&self, s: &State) -> u32 {
        s.measure(self.cfg)
    }
    fn key(&self, s: &State) -> Box<[u8]> {
        s.key(&self.perms)
    }
    fn trace(&self, path: &[Step], f: &Failure) -> Vec<String> {
        let mut trace: Vec<String> = path.iter().map(|s| s.to_string()).collect();
        trace.push(format!("VIOLATED: {}", f.detail));
        trace
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_cover_every_non_empty_choice() {
        assert_eq!(Batch::all(2).len(), 8);
    }

    #[test]
    fn a_tiny_two_node_world_passes() {
        let cfg = NodesConfig {
            devices_per_node: 1,
            evictions_per_device: 0,
            ..NodesConfig::two_nodes()
        };
        let r = check_nodes(&cfg).unwrap();
        assert!(r.violation.is_none(), "{r}");
        assert!(r.states > 100 && r.terminal > 0, "{r}");
    }

    #[test]
    fn renamings_keep_devices_on_their_nodes() {
        let perms = node_preserving_perms(&NodesConfig::two_nodes());
        assert_eq!(
            perms,
            [[0, 1, 2, 3], [0, 1, 3, 2], [1, 0, 2, 3], [1, 0, 3, 2]]
        );
    }

    #[test]
    fn oversized_worlds_are_refused() {
        let cfg = NodesConfig {
            devices_per_node: 5,
            ..NodesConfig::two_nodes()
        };
        assert!(check_nodes(&cfg).is_err());
    }
}
