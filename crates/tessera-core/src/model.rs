//! Exhaustive explicit-state model checking of the coherence protocol.
//!
//! The checker drives the real [`Protocol`] (the same state machine the runtime's memory manager
//! drives) inside a small closed world of devices, pages and data values, and visits every state
//! that world can reach, breadth first, so a violation comes with a shortest trace. A state is
//!
//! - the protocol: directory, memory locks and deferred requests;
//! - per device and page, the device's local copy: a value, whether its page table entry is
//!   valid and whether it is writable. An invalidation clears the flags but keeps the value, so a
//!   device that still trusts an old grant reads a stale slot, as a real GPU pass would;
//! - the home value of every page, and a ghost *latest value* per page: the last value written by
//!   anyone, in the one global order the model's interleaving defines;
//! - per device a phase (idle, request in the inbox, deferred, granted) and what is left of its
//!   budgets.
//!
//! # Steps
//!
//! - An idle device with request budget left sends a batch: any non-empty choice of
//!   none/read/write per page that fits its slot capacity beside the copies it holds (every
//!   batch, with no capacity). The request sits in the device's inbox.
//! - The memory manager takes a request out of one device's inbox, hands it to
//!   [`Protocol::handle`] and carries out every returned [`Action`] at once (see below why that
//!   is enough). Taking requests in any order is what explores arrival orders.
//! - A device inside its procedure reads a granted page, or writes any value to a page it was
//!   granted for writing: one operation per page and procedure.
//! - The host frees the object of a live page (each page is an object of its own) while the
//!   world's free budget lasts, or creates a new object over a freed page. Both go to the
//!   protocol as [`Message::Free`] and [`Message::Create`] in the step that makes them. A free
//!   the protocol refuses because a page is locked or named by a deferred request changes
//!   nothing and is no transition (the host retries, which is the same free offered later);
//!   the checker confirms that the refusal names a device that is inside its procedure holding
//!   the page, or waiting with a request for it. A request sent before its page was freed and
//!   delivered after is refused and the device goes back to idle; devices send requests only
//!   for live pages.
//! - A device inside its procedure releases its memory lock; an idle device with eviction
//!   budget left evicts one page its page table holds. The memory manager handles these two
//!   messages in the same step they are sent: a device does nothing between sending either and
//!   the memory manager seeing it, so a run in which the message waits in an inbox is the same
//!   run with the device idling (or, for a release, doing no more operations) until then.
//! - Under a capacity, an idle device with request budget left evicts a page it holds to make
//!   room, without spending eviction budget, whenever more pages are live than it has slots
//!   (exactly when some batch needs that page gone: see `enabled`). The room is made by
//!   separate steps before the request, so other devices' steps interleave with them.
//! - A device inside its procedure, with eviction budget left, is asked to evict a page of its
//!   batch: a memory manager evicting a page in use. The protocol must refuse
//!   ([`CoreError::EvictWhileLocked`]); a refusal changes nothing and is no transition, like a
//!   refused free.
//!
//! Device operations trust the grant, as the paper's GPU pass does (its page table was set up at
//! grant time): a read returns the local value even if the copy was invalidated meanwhile, and a
//! write lands in the local slot even if the slot was dropped (the write is then lost). That is
//! exactly what the memory lock must make impossible, so the checker sees its absence.
//!
//! # Why the memory manager's step may be atomic
//!
//! In the runtime, actions are carried out one after another while other devices run their
//! passes. The model applies all of one message's actions in one step. That loses no behaviour as
//! long as no action touches a device that is inside a procedure (its copies are then frozen while
//! it runs, and the others do nothing with memory), so for every protocol that keeps memory locks
//! the checker verifies that side condition ([`property::MEMORY_LOCK`]) at every action. For
//! [`ProtocolVariant::NoMemoryLock`] the atomic step only under-approximates the interleavings,
//! which is enough for finding its bugs: a bug found in fewer interleavings is still a bug.
//!
//! # Reductions
//!
//! The visited set stores a compact key per state, not the state. Two states share a key when
//! one is the other with devices and pages renamed (both are interchangeable names to the
//! protocol), or when they differ only in values left in dropped slots that nobody may read
//! again. Both are sound; the reasons are at the key's definition. On the minimum world, renaming
//! pages and forgetting dead values cut 30.4 million states (with devices renamed only) to 3.1
//! million.
//!
//! # Properties
//!
//! Checked in every reachable state (or at the step that breaks them), each under a name in
//! [`property`], with a shortest counterexample trace when violated:
//!
//! 1. single writer / multiple readers, in the directory and in the devices' page tables;
//! 2. data value: every read returns the latest value written;
//! 3. no lost write: the latest value sits in the owner's copy if there is an owner, else at home,
//!    and every valid copy holds it;
//! 4. every request eventually completes: see below; and [`Protocol::handle`] never refuses a
//!    message the model sends, but for the refusals above;
//! 5. no stale mapping: no device holds a valid copy of a freed page;
//! 6. slot capacity: no device holds more valid copies than its capacity. Only a device's own
//!    grant adds copies to it, and its batch fit beside what it held when it sent it; until
//!    the grant, even one deferred to another device's release, others' steps only invalidate
//!    its copies, which frees slots. The checker verifies that argument in every state.
//!
//! Besides: the directory agrees with the page tables and with the world on which pages are live, a `Complete` finds every page of its batch
//! resident with the access asked for, data moves only out of valid copies, and (for locking
//! variants) no action touches a device inside its procedure.
//!
//! # Liveness, and its limit
//!
//! Every step consumes budget, moves a device forward in its cycle (idle → request in the inbox
//! → deferred → granted with fewer pages left to use → idle), drops a copy (an eviction that
//! makes room) or creates an object over a freed page (a free costs more than the create it
//! enables), so a natural-number progress measure falls on every step; the checker asserts
//! that on every transition it explores. The state graph is therefore finite and acyclic,
//! every run ends in a terminal state (no step enabled, or only refused frees and evictions),
//! and "every request eventually completes" becomes: every terminal state is quiescent (no
//! request in an inbox or deferred, no device granted or locked).
//!
//! The limit: runs are bounded by the budgets. Starvation, a request overtaken forever by an
//! unbounded stream of others, is out of reach; the checker shows that no request is stuck once
//! the others stop. The protocol's fairness rule (a request that an older deferred one needs is
//! deferred too) is what argues for the unbounded case.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::rc::Rc;

use crate::directory::{DeviceSet, Directory, HomeMap};
use crate::protocol::{
    Access, Action, Coherence, Message, PageRequest, Protocol, ProtocolVariant, RequestBatch,
    RequestId, Source,
};
use crate::{CoreError, DeviceId, GlobalPage, NodeId};

/// Most devices a model may have: keeps every per-device array fixed-size.
pub const MAX_MODEL_DEVICES: usize = 8;
/// Most pages a model may have.
pub const MAX_MODEL_PAGES: usize = 8;
/// Most data values a model may write.
pub const MAX_MODEL_VALUES: u8 = 16;

/// The names under which [`Violation`]s are reported.
pub mod property {
    /// At most one device holds a page writable, and then nobody else holds it at all.
    pub const SINGLE_WRITER: &str = "single writer / multiple readers";
    /// Every read returns the latest value written to the page.
    pub const DATA_VALUE: &str = "data value";
    /// The latest value is in the owner's copy (or at home without an owner); valid copies hold
    /// it. This is also what a host read sees: the runtime reads a page from its owner, else
    /// from home, never asking the protocol.
    pub const NO_LOST_WRITE: &str = "no lost write";
    /// Every terminal state is quiescent: each request was answered and released.
    pub const EVENTUAL_COMPLETION: &str = "every request eventually completes";
    /// The protocol never returned `Err`, nor a `Complete` for a request not outstanding.
    pub const PROTOCOL_ERROR: &str = "protocol error";
    /// The progress measure fell on every step, so the state graph is acyclic.
    pub const ACYCLIC: &str = "state graph acyclic";
    /// The directory's copy sets and owners match the devices' page tables.
    pub const DIRECTORY_AGREEMENT: &str = "directory agrees with page tables";
    /// A `Complete` finds every page of its batch resident with the access asked for.
    pub const GRANT: &str = "grant honours the request";
    /// Data moves only out of valid copies: no copy from, write-back of or install of a dropped
    /// or never-filled slot.
    pub const LIVE_SOURCE: &str = "data moves only from valid copies";
    /// No action touches a device inside its procedure (the side condition that makes the
    /// memory manager's atomic step sound; checked only for variants that keep memory locks).
    pub const MEMORY_LOCK: &str = "memory lock";
    /// No device maps a page of a freed object: a later object over the page would find it.
    pub const NO_STALE_MAPPING: &str = "no stale mapping of a freed page";
    /// No device holds more valid copies than its slot capacity.
    pub const CAPACITY: &str = "slot capacity";
    /// A remote page (`AccessMode::Remote`) is never copied: no device's page table holds it
    /// and the directory lists no copy or owner of it.
    pub const REMOTE_NEVER_COPIED: &str = "a remote page is never copied";
}

/// Most remote pages a model may have.
pub const MAX_MODEL_REMOTE_PAGES: usize = 2;

/// How the world's devices reach remote pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RemoteVariant {
    /// At the page's one location, in place (docs/PROTOCOL.md, "Access modes").
    #[default]
    InPlace,
    /// Broken on purpose: a reader keeps what it first read of a remote page in a cache of
    /// its own and serves later reads from it, so a remote write it never hears of leaves it
    /// reading a stale value.
    CachedOnReader,
    /// Broken on purpose: a remote load also installs the page in the reader's page table, as
    /// a migrate read would; the page is then copied, which remote mode forbids.
    CopiedOnRead,
}

/// How a device's operations outside its procedure (the steady state's launches from the
/// held set, `ModelConfig::held_ops_per_device`) reach their pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HeldVariant {
    /// Each access checks the page table at the moment it runs, as every launch does: a
    /// page not valid (or not writable, for a store) faults and the operation does nothing.
    #[default]
    Checked,
    /// Broken on purpose: a store checks that the page is resident but not that it is
    /// writable (a kernel specialized past the writable bit), so a device holding a read
    /// copy writes it with no request: its copy and the others' now differ.
    StoreIgnoresWritable,
}

/// The closed world to explore. Budgets bound every run, which keeps the state graph finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModelConfig {
    pub devices: usize,
    pub pages: u64,
    /// Writes choose among values `0..values`; every page starts as 0 at home.
    pub values: u8,
    pub requests_per_device: u8,
    pub evictions_per_device: u8,
    /// Objects the host may free in one run, whole world (each page is an object of its own).
    /// A freed page may be created again, any number of times.
    pub frees: u8,
    /// Slots per device, the same on every device; `None` is unbounded. A device sends only a
    /// batch that fits beside the copies it holds, evicting first to make room (such an
    /// eviction costs no eviction budget, so a full device is never kept from requesting).
    pub capacity: Option<u8>,
    pub variant: ProtocolVariant,
    /// Remote pages, global pages `pages..pages + remote_pages`: created with the rest, never
    /// requested, never freed; a granted device loads and stores them at their one location.
    pub remote_pages: u8,
    /// Remote loads and stores each device may make in one run, whole run.
    pub remote_ops_per_device: u8,
    pub remote_variant: RemoteVariant,
    /// Asynchronous staging ([`Protocol::with_staging`]): a device inside its procedure, with
    /// request budget left, may stage any batch of pages outside its own (`Message::Stage`,
    /// one request's budget), and may evict any page outside its batch with eviction budget.
    pub staging: bool,
    /// Operations each idle device may make with no request and no memory lock, on the pages
    /// its page table holds (the steady state's launches, `tessera_runtime`'s held set): a
    /// read of a valid page, a write of a writable one. Interleaved with every other step.
    pub held_ops_per_device: u8,
    pub held_variant: HeldVariant,
    /// What a read of a modified page does ([`Coherence`]): the runtime's default, owned
    /// pages, in every world unless a world says otherwise.
    pub coherence: Coherence,
}

impl ModelConfig {
    /// The world the test suite checks: three devices (so a request can wait behind an older
    /// deferred one, the protocol's fairness rule), two pages (batches that mix pages and
    /// accesses), two values (a write is visible), two requests per device (a device can read a
    /// page and then upgrade it) and one eviction per device (a write-back that no reader caused).
    pub fn minimum() -> Self {
        ModelConfig {
            devices: 3,
            pages: 2,
            values: 2,
            requests_per_device: 2,
            evictions_per_device: 1,
            frees: 1,
            capacity: None,
            variant: ProtocolVariant::Correct,
            remote_pages: 0,
            remote_ops_per_device: 0,
            remote_variant: RemoteVariant::InPlace,
            staging: false,
            held_ops_per_device: 0,
            held_variant: HeldVariant::Checked,
            coherence: Coherence::Owned,
        }
    }

    /// The held world: the minimum world's two pages, two values and budgets on two devices,
    /// each of which may also make two operations outside any procedure on the pages its page
    /// table holds (the steady state launches with no message and no lock).
    pub fn held() -> Self {
        ModelConfig {
            devices: 2,
            held_ops_per_device: 2,
            ..Self::minimum()
        }
    }

    /// The remote world: two devices, one migrate page and one remote page, two values, two
    /// requests per device and two remote operations each (a load, then a load or store after
    /// another device's store), no eviction and one free of the migrate page.
    pub fn remote() -> Self {
        ModelConfig {
            devices: 2,
            pages: 1,
            values: 2,
            requests_per_device: 2,
            evictions_per_device: 1,
            frees: 1,
            capacity: None,
            variant: ProtocolVariant::Correct,
            remote_pages: 1,
            remote_ops_per_device: 2,
            remote_variant: RemoteVariant::InPlace,
            staging: false,
            held_ops_per_device: 0,
            held_variant: HeldVariant::Checked,
            coherence: Coherence::Owned,
        }
    }

    pub fn with_coherence(self, coherence: Coherence) -> Self {
        ModelConfig { coherence, ..self }
    }

    pub fn with_variant(self, variant: ProtocolVariant) -> Self {
        ModelConfig { variant, ..self }
    }

    /// Refuses worlds the fixed-size state encoding cannot hold.
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=MAX_MODEL_DEVICES).contains(&self.devices) {
            return Err(format!(
                "devices must be 1..={MAX_MODEL_DEVICES}, got {}",
                self.devices
            ));
        }
        if !(1..=MAX_MODEL_PAGES as u64).contains(&self.pages) {
            return Err(format!(
                "pages must be 1..={MAX_MODEL_PAGES}, got {}",
                self.pages
            ));
        }
        if !(1..=MAX_MODEL_VALUES).contains(&self.values) {
            return Err(format!(
                "values must be 1..={MAX_MODEL_VALUES}, got {}",
                self.values
            ));
        }
        if self.requests_per_device > 15 || self.evictions_per_device > 15 || self.frees > 15 {
            return Err("budgets must be at most 15".into());
        }
        if self.remote_pages as usize > MAX_MODEL_REMOTE_PAGES
            || self.pages + self.remote_pages as u64 > MAX_MODEL_PAGES as u64
        {
            return Err(format!(
                "remote pages must be at most {MAX_MODEL_REMOTE_PAGES}, and all pages at most {MAX_MODEL_PAGES}"
            ));
        }
        if self.remote_ops_per_device > 15 || self.held_ops_per_device > 15 {
            return Err("budgets must be at most 15".into());
        }
        if self.staging && self.variant == ProtocolVariant::NoMemoryLock {
            return Err("staging needs the memory lock: it stages from inside a procedure".into());
        }
        if self.capacity == Some(0) {
            return Err("capacity must be at least 1 slot: a device must fit a batch".into());
        }
        let bits = Layout::new(self).max_bits();
        if bits > KEY_BITS {
            return Err(format!(
                "a state of this world needs up to {bits} bits, the encoding holds {KEY_BITS}"
            ));
        }
        Ok(())
    }
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self::minimum()
    }
}

/// A broken property and the shortest run that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// One of the names in [`property`].
    pub property: &'static str,
    /// The steps from the initial state, one line each; the last line says what was wrong.
    pub trace: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "property violated: {}", self.property)?;
        for (i, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {i:3}. {line}")?;
        }
        Ok(())
    }
}

/// What one exhaustive run saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Distinct reachable states visited.
    pub states: u64,
    /// Steps explored (edges of the state graph).
    pub transitions: u64,
    /// States with no step enabled.
    pub terminal: u64,
    /// Frees the protocol refused, as it must, because a page was locked or deferred: offered
    /// steps that changed nothing, so neither transitions nor states.
    pub refused_frees: u64,
    /// Evictions the protocol refused, as it must, because the device was inside its procedure
    /// (`EvictWhileLocked`, or with staging `EvictHeld`); counted like refused frees.
    pub refused_evictions: u64,
    /// Stages the protocol refused because they would have had to wait (`StageWouldWait`);
    /// counted like refused frees.
    pub refused_stages: u64,
    /// Length of the longest shortest path from the initial state (as far as explored).
    pub depth: u32,
    /// The first violation found; exploration stops there.
    pub violation: Option<Violation>,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states, {} transitions, {} terminal, {} refused frees, {} refused evictions, \
             {} refused stages, depth {}: ",
            self.states,
            self.transitions,
            self.terminal,
            self.refused_frees,
            self.refused_evictions,
            self.refused_stages,
            self.depth
        )?;
        match &self.violation {
            None => write!(f, "every property holds"),
            Some(v) => write!(f, "{v}"),
        }
    }
}

/// Explores every state reachable in `cfg`'s world and checks every property in each.
/// A world [`ModelConfig::validate`] refuses is an error, not a panic.
pub fn check(cfg: &ModelConfig) -> Result<CheckReport, String> {
    cfg.validate()?;
    // The narrowest key that holds the world: the visited set is most of the memory.
    Ok(match Layout::new(cfg).max_bits() {
        0..=128 => Explorer::<2>::new(cfg).run(),
        129..=192 => Explorer::<3>::new(cfg).run(),
        _ => Explorer::<KEY_WORDS>::new(cfg).run(),
    })
}

// ---------------------------------------------------------------------------------------------
// The state.

/// One request batch as two page masks; a page is in at most one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Batch {
    read: u8,
    write: u8,
}

impl Batch {
    fn pages(self) -> u8 {
        self.read | self.write
    }

    fn access(self, page: usize) -> Option<Access> {
        if self.write & (1 << page) != 0 {
            Some(Access::Write)
        } else if self.read & (1 << page) != 0 {
            Some(Access::Read)
        } else {
            None
        }
    }

    /// Every non-empty batch over `pages` pages: each page none, read or write.
    fn all(pages: usize) -> Vec<Batch> {
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

    fn to_requests(self, pages: usize) -> Vec<PageRequest> {
        (0..pages)
            .filter_map(|p| {
                self.access(p).map(|access| PageRequest {
                    page: GlobalPage(p as u64),
                    access,
                })
            })
            .collect()
    }

    fn from_requests(reqs: &[PageRequest]) -> Batch {
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
enum Phase {
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
struct Slot(u8);

impl Slot {
    const VALID: u8 = 1 << 6;
    const WRITABLE: u8 = 1 << 7;
    const VALUE: u8 = Self::VALID - 1;

    fn filled(value: u8) -> Slot {
        Slot(value | Self::VALID)
    }
    fn value(self) -> u8 {
        self.0 & Self::VALUE
    }
    fn valid(self) -> bool {
        self.0 & Self::VALID != 0
    }
    fn writable(self) -> bool {
        self.0 & Self::WRITABLE != 0
    }
    fn set_value(&mut self, v: u8) {
        self.0 = (self.0 & !Self::VALUE) | v;
    }
    fn set_writable(&mut self, w: bool) {
        self.0 = if w {
            self.0 | Self::WRITABLE
        } else {
            self.0 & !Self::WRITABLE
        };
    }
    /// Invalidation: the page table entry goes, the stale value stays in the slot.
    fn drop_copy(&mut self) {
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
struct Dev {
    phase: Phase,
    /// Requests sent so far; also names the next request (see `request_id`).
    issued: u8,
    evicted: u8,
    slots: [Slot; MAX_MODEL_PAGES],
    /// Remote loads and stores made so far.
    remote_ops: u8,
    /// `RemoteVariant::CachedOnReader` only: the value cached per remote page, if any.
    cache: [Option<u8>; MAX_MODEL_REMOTE_PAGES],
    /// Operations made outside a procedure on held pages so far.
    held_ops: u8,
}

impl Dev {
    /// The pages whose copy the device's page table holds valid, as a mask.
    fn held(&self, cfg: &ModelConfig) -> u8 {
        (0..cfg.pages as usize)
            .filter(|&p| self.slots[p].valid())
            .fold(0, |m, p| m | 1 << p)
    }
}

/// The page numbers in `mask`, lowest first.
fn bits(mask: u8) -> impl Iterator<Item = u8> {
    (0..8).filter(move |p| mask & (1 << p) != 0)
}

#[derive(Clone, Debug)]
struct State {
    /// Shared between a state and its successors until a step hands the protocol a message:
    /// most steps (sending a request, reading, writing) leave it alone, and cloning its
    /// allocations on every step would dominate the run time.
    proto: Rc<Protocol>,
    home: [u8; MAX_MODEL_PAGES],
    latest: [u8; MAX_MODEL_PAGES],
    /// The world's own record of which pages belong to a live object (the protocol's is
    /// checked against it); a freed page's home and latest value are dead and kept at 0.
    live: u8,
    /// Objects freed so far.
    freed: u8,
    devs: [Dev; MAX_MODEL_DEVICES],
    /// Each remote page's one location, and (a ghost) its latest value written.
    remote: [u8; MAX_MODEL_REMOTE_PAGES],
    remote_latest: [u8; MAX_MODEL_REMOTE_PAGES],
}

/// Whether a step happened. A free the protocol refuses (a page of it is locked or deferred)
/// changes nothing; the host retries later, which is the same free offered in a later state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Applied {
    Done,
    Refused,
}

/// Request ids follow from the device and its request count, so they add no states.
fn request_id(device: usize, index: u8) -> RequestId {
    RequestId(((device as u64) << 8) | index as u64)
}

/// One step of the world. An `Evict` with `room` makes room for a batch under the capacity
/// and costs no eviction budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
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
enum Sent {
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

struct Failure {
    property: &'static str,
    detail: String,
}

fn fail(property: &'static str, detail: String) -> Failure {
    Failure { property, detail }
}

fn refused(what: Sent, e: CoreError) -> Failure {
    fail(
        property::PROTOCOL_ERROR,
        format!("Protocol::handle refused {what}: {e}"),
    )
}

fn set_to_string(s: DeviceSet) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("{{{}}}", v.join(", "))
}

impl State {
    fn initial(cfg: &ModelConfig) -> State {
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

    fn enabled(&self, cfg: &ModelConfig, batches: &[Batch], out: &mut Vec<Step>) {
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
    fn apply(
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

    fn mark_done(&mut self, d: usize, p: usize) {
        if let Phase::Granted { done, .. } = &mut self.devs[d].phase {
            *done |= 1 << p;
        }
    }

    /// The memory manager hands `msg` to the protocol and carries out every action it returns.
    fn handle(
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
    fn submit(
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

    fn carry_out_all(&mut self, cfg: &ModelConfig, actions: Vec<Action>) -> Result<(), Failure> {
        let locking = cfg.variant != ProtocolVariant::NoMemoryLock;
        for action in actions {
            if locking {
                self.check_lock(cfg, action)?;
            }
            self.carry_out(cfg, action)?;
        }
        Ok(())
    }

    fn check_lock(&self, cfg: &ModelConfig, action: Action) -> Result<(), Failure> {
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

    fn carry_out(&mut self, cfg: &ModelConfig, action: Action) -> Result<(), Failure> {
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
    fn check_resident(
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
    fn live_value(&self, d: DeviceId, p: usize, action: Action) -> Result<u8, Failure> {
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
    fn invariants(&self, cfg: &ModelConfig) -> Result<(), Failure> {
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
    fn quiescent(&self, cfg: &ModelConfig) -> Result<(), Failure> {
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
    fn measure(&self, cfg: &ModelConfig) -> u32 {
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

// ---------------------------------------------------------------------------------------------
// The compact key: the visited set holds only these, never whole states.
//
// Two reductions make the key smaller than the state it names, and both are sound only because
// of checks made elsewhere:
//
// - Symmetry. Devices are interchangeable, and so are pages: the protocol uses their numbers
//   only as names (sets, arrival order, the order of actions inside one atomic step, which touch
//   disjoint data per page), so renaming maps reachable states to reachable states and keeps
//   every property. The key renames pages, then devices, in the order of a label-free summary of
//   each; ties keep their numbers, which may leave some symmetric states apart. That costs
//   states, never soundness: two states share a key only if one is a renaming of the other.
// - Dead values. The value left in a dropped slot matters only to a device that still trusts a
//   grant for that page (it may read or write it). Elsewhere it is dead, and the key writes it as
//   0. The protocol itself could still read it if it copied from a dropped copy, installed a
//   slot it never filled or wrote a dropped copy back; `carry_out` reports each of those as a
//   violation, so no run the key merges can tell the merged states apart unnoticed.

/// Most words a key may take.
const KEY_WORDS: usize = 4;
const KEY_BITS: u32 = 64 * KEY_WORDS as u32;

#[derive(Clone, Copy, PartialEq, Eq)]
struct Key<const W: usize>([u64; W]);

impl<const W: usize> Hash for Key<W> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for w in self.0 {
            h.write_u64(w);
        }
    }
}

/// Field widths of the encoding, fixed per world.
struct Layout {
    devices: u32,
    pages: u32,
    value_bits: u32,
    device_bits: u32,
    owner_bits: u32,
    index_bits: u32,
    issued_bits: u32,
    evicted_bits: u32,
    freed_bits: u32,
    len_bits: u32,
    remote_pages: u32,
    remote_ops_bits: u32,
    held_ops_bits: u32,
}

/// Bits to hold every number in `0..=max`.
fn bits_for(max: u32) -> u32 {
    32 - max.leading_zeros()
}

impl Layout {
    fn new(cfg: &ModelConfig) -> Layout {
        let devices = cfg.devices as u32;
        Layout {
            devices,
            pages: cfg.pages as u32,
            value_bits: bits_for(cfg.values.saturating_sub(1) as u32),
            device_bits: bits_for(devices.saturating_sub(1)),
            owner_bits: bits_for(devices),
            index_bits: bits_for(cfg.requests_per_device.saturating_sub(1) as u32),
            issued_bits: bits_for(cfg.requests_per_device as u32),
            evicted_bits: bits_for(cfg.evictions_per_device as u32),
            freed_bits: bits_for(cfg.frees as u32),
            len_bits: bits_for(cfg.pages as u32 + cfg.remote_pages as u32),
            remote_pages: cfg.remote_pages as u32,
            remote_ops_bits: bits_for(cfg.remote_ops_per_device as u32),
            held_ops_bits: bits_for(cfg.held_ops_per_device as u32),
        }
    }

    /// Bits of one device's own part (see `own_part`).
    fn device_bits_total(&self) -> u32 {
        2 + 3 * self.pages
            + self.issued_bits
            + self.evicted_bits
            + self.pages * (self.value_bits + 2)
            + self.remote_ops_bits
            + self.remote_pages * (self.value_bits + 1)
            + self.held_ops_bits
    }

    fn max_bits(&self) -> u32 {
        let per_page = 2 + 2 * self.value_bits + self.devices + self.owner_bits;
        // At most one outstanding request per device, so at most `devices` deferred.
        let deferred = self.devices * (1 + self.device_bits + self.index_bits + 2 * self.pages) + 1;
        self.pages * per_page
            + self.devices
            + self.freed_bits
            + self.len_bits
            + deferred
            + self.devices * self.device_bits_total()
            + self.remote_pages * 2 * self.value_bits
    }
}

/// Appends fixed-width fields to a little-endian bit string of `N` words.
struct Bits<const N: usize> {
    words: [u64; N],
    pos: u32,
}

impl<const N: usize> Bits<N> {
    fn new() -> Self {
        Bits {
            words: [0; N],
            pos: 0,
        }
    }

    #[inline]
    fn push(&mut self, value: u64, bits: u32) {
        if bits == 0 {
            return;
        }
        debug_assert!(
            bits == 64 || value < 1 << bits,
            "{value} does not fit {bits} bits"
        );
        let (w, off) = ((self.pos / 64) as usize, self.pos % 64);
        self.words[w] |= value << off;
        if off + bits > 64 {
            self.words[w + 1] |= value >> (64 - off);
        }
        self.pos += bits;
    }

    fn push_batch(&mut self, b: Batch, pages: u32) {
        self.push(b.read as u64, pages);
        self.push(b.write as u64, pages);
    }
}

/// A renaming of devices and pages: `x_from[new] = old`, `x_to[old] = new`.
struct Renaming {
    dev_to: [u8; MAX_MODEL_DEVICES],
    page_to: [u8; MAX_MODEL_PAGES],
    page_from: [u8; MAX_MODEL_PAGES],
}

impl Renaming {
    fn devices(&self, set: DeviceSet) -> u64 {
        set.iter()
            .fold(0, |acc, d| acc | 1 << self.dev_to[d.index()])
    }
    fn pages(&self, mask: u8) -> u8 {
        let mut out = 0;
        let mut m = mask;
        while m != 0 {
            let p = m.trailing_zeros() as usize;
            out |= 1 << self.page_to[p];
            m &= m - 1;
        }
        out
    }
    fn batch(&self, b: Batch) -> Batch {
        Batch {
            read: self.pages(b.read),
            write: self.pages(b.write),
        }
    }
}

/// Pages the device may still read or write under its grant: only there does a dropped slot's
/// value stay live.
fn live_pages(dev: &Dev) -> u8 {
    match dev.phase {
        Phase::Granted { batch, done } => batch.pages() & !done,
        _ => 0,
    }
}

fn slot_bits(dev: &Dev, p: usize, value_bits: u32) -> u64 {
    let s = dev.slots[p];
    let dead = !s.valid() && live_pages(dev) & (1 << p) == 0;
    let value = if dead { 0 } else { s.value() as u64 };
    value | (s.valid() as u64) << value_bits | (s.writable() as u64) << (value_bits + 1)
}

/// Mixes one feature into a label-free (order-independent) sum.
fn mix(x: u64) -> u64 {
    let mut h = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl State {
    /// A device's own part of the key, pages renamed: everything that names no other device.
    fn own_part(&self, l: &Layout, r: &Renaming, dev: &Dev) -> Bits<2> {
        let mut w = Bits::<2>::new();
        match dev.phase {
            Phase::Idle => w.push(0, 2),
            Phase::Requested(b) => {
                w.push(1, 2);
                w.push_batch(r.batch(b), l.pages);
            }
            Phase::Waiting(b) => {
                w.push(2, 2);
                w.push_batch(r.batch(b), l.pages);
            }
            Phase::Granted { batch, done } => {
                w.push(3, 2);
                w.push_batch(r.batch(batch), l.pages);
                w.push(r.pages(done) as u64, l.pages);
            }
        }
        w.push(dev.issued as u64, l.issued_bits);
        w.push(dev.evicted as u64, l.evicted_bits);
        for &old in &r.page_from[..l.pages as usize] {
            w.push(slot_bits(dev, old as usize, l.value_bits), l.value_bits + 2);
        }
        // Remote pages are not renamed (the renaming covers migrate pages only).
        w.push(dev.remote_ops as u64, l.remote_ops_bits);
        for c in &dev.cache[..l.remote_pages as usize] {
            w.push(c.map_or(0, |v| v as u64 + 1), l.value_bits + 1);
        }
        w.push(dev.held_ops as u64, l.held_ops_bits);
        w
    }

    /// The key of one renaming of the state (see the section comment).
    fn key<const W: usize>(&self, l: &Layout) -> Key<W> {
        let (nd, np) = (l.devices as usize, l.pages as usize);
        let devs = &self.devs[..nd];
        let directory = self.proto.directory();
        // A freed page's entry is unknown to the directory and home-only by construction.
        let entry = |p: usize| {
            directory
                .entry(GlobalPage(p as u64))
                .copied()
                .unwrap_or_default()
        };

        let mut pages = [(0u64, 0u8); MAX_MODEL_PAGES];
        for (p, sig) in pages[..np].iter_mut().enumerate() {
            let e = entry(p);
            let mut h = mix(self.home[p] as u64
                | (self.latest[p] as u64) << 8
                | (e.owner.is_some() as u64) << 16
                | (e.copies.len() as u64) << 17
                | ((self.live >> p) as u64 & 1) << 25
                | (e.writable as u64) << 26);
            for (d, dev) in devs.iter().enumerate() {
                let id = DeviceId(d as u8);
                let (tag, access, done) = match dev.phase {
                    Phase::Idle => (0, None, false),
                    Phase::Requested(b) => (1, b.access(p), false),
                    Phase::Waiting(b) => (2, b.access(p), false),
                    Phase::Granted { batch, done } => (3, batch.access(p), done & (1 << p) != 0),
                };
                let access = match access {
                    None => 0,
                    Some(Access::Read) => 1,
                    Some(Access::Write) => 2,
                };
                h = h.wrapping_add(mix(slot_bits(dev, p, l.value_bits)
                    | tag << 8
                    | access << 10
                    | (done as u64) << 12
                    | (e.copies.contains(id) as u64) << 13
                    | ((e.owner == Some(id)) as u64) << 14
                    | (self.proto.locked().contains(id) as u64) << 15));
            }
            *sig = (h, p as u8);
        }
        pages[..np].sort_unstable();
        let mut r = Renaming {
            dev_to: [0; MAX_MODEL_DEVICES],
            page_to: [0; MAX_MODEL_PAGES],
            page_from: [0; MAX_MODEL_PAGES],
        };
        for (new, &(_, old)) in pages[..np].iter().enumerate() {
            r.page_to[old as usize] = new as u8;
            r.page_from[new] = old;
        }

        let mut own = [([0u64; 2], 0u8); MAX_MODEL_DEVICES];
        for (d, dev) in devs.iter().enumerate() {
            // Most significant word first, so the sort compares whole bit strings.
            let w = self.own_part(l, &r, dev).words;
            own[d] = ([w[1], w[0]], d as u8);
        }
        own[..nd].sort_unstable();
        for (new, &(_, old)) in own[..nd].iter().enumerate() {
            r.dev_to[old as usize] = new as u8;
        }

        let mut w = Bits::<W>::new();
        for &old in &r.page_from[..np] {
            let e = entry(old as usize);
            w.push((self.live >> old) as u64 & 1, 1);
            w.push(self.home[old as usize] as u64, l.value_bits);
            w.push(self.latest[old as usize] as u64, l.value_bits);
            w.push(r.devices(e.copies), l.devices);
            let owner = e.owner.map_or(0, |o| r.dev_to[o.index()] as u64 + 1);
            w.push(owner, l.owner_bits);
            w.push(e.writable as u64, 1);
        }
        w.push(r.devices(self.proto.locked()), l.devices);
        w.push(self.freed as u64, l.freed_bits);
        // Not renamed: which page ends the space decides whether a free shrinks the directory
        // and a create grows it. The protocol behaves alike either way, so leaving it out would
        // be sound too, but would explore growth only when a free of the last page happened to
        // be reached first.
        w.push(directory.len(), l.len_bits);
        for b in self.proto.deferred() {
            w.push(1, 1);
            w.push(r.dev_to[b.device.index()] as u64, l.device_bits);
            w.push(b.id.0 & 0xff, l.index_bits);
            w.push_batch(r.batch(Batch::from_requests(&b.pages)), l.pages);
        }
        w.push(0, 1);
        for r in 0..l.remote_pages as usize {
            w.push(self.remote[r] as u64, l.value_bits);
            w.push(self.remote_latest[r] as u64, l.value_bits);
        }
        let bits = l.device_bits_total();
        for &([hi, lo], _) in &own[..nd] {
            w.push(lo, bits.min(64));
            w.push(hi, bits.saturating_sub(64));
        }
        Key(w.words)
    }
}

/// FxHash-style word hasher with a final mix: the keys are already dense bit fields, so SipHash's
/// DoS resistance buys nothing here and costs a large share of the run time.
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^ (h >> 33)
    }
}

// ---------------------------------------------------------------------------------------------
// Breadth-first exploration.

struct Explorer<'a, const W: usize> {
    cfg: &'a ModelConfig,
    layout: Layout,
    batches: Vec<Batch>,
    visited: HashSet<Key<W>, BuildHasherDefault<WordHasher>>,
    /// Per state, numbered in order of discovery: the state it was first reached from and the
    /// step. A BFS tree, so the path back to the root is a shortest trace.
    parents: Vec<(u32, Step)>,
}

impl<'a, const W: usize> Explorer<'a, W> {
    fn new(cfg: &'a ModelConfig) -> Self {
        Explorer {
            cfg,
            layout: Layout::new(cfg),
            batches: Batch::all(cfg.pages as usize),
            visited: HashSet::default(),
            parents: Vec::new(),
        }
    }

    fn run(mut self) -> CheckReport {
        let cfg = self.cfg;
        let init = State::initial(cfg);
        let mut report = CheckReport {
            states: 1,
            transitions: 0,
            terminal: 0,
            refused_frees: 0,
            refused_evictions: 0,
            refused_stages: 0,
            depth: 0,
            violation: None,
        };
        self.visited.insert(init.key(&self.layout));
        // The root's entry is never read: `violation` stops walking at state 0.
        self.parents.push((u32::MAX, Step::Release { device: 0 }));
        if let Err(f) = init.invariants(cfg) {
            report.violation = Some(self.violation(0, None, f));
            return report;
        }
        let mut queue = VecDeque::from([(0u32, 0u32, init)]);
        let mut steps = Vec::new();
        while let Some((id, depth, s)) = queue.pop_front() {
            report.depth = report.depth.max(depth);
            steps.clear();
            s.enabled(cfg, &self.batches, &mut steps);
            let measure = s.measure(cfg);
            let mut moved = false;
            for &step in &steps {
                let mut t = s.clone();
                match t.apply(cfg, step, None) {
                    Err(f) => {
                        report.violation = Some(self.violation(id, Some(step), f));
                        return report;
                    }
                    Ok(Applied::Refused) => {
                        match step {
                            Step::Evict { .. } => report.refused_evictions += 1,
                            Step::Stage { .. } => report.refused_stages += 1,
                            _ => report.refused_frees += 1,
                        }
                        continue;
                    }
                    Ok(Applied::Done) => {}
                }
                moved = true;
                report.transitions += 1;
                let after = t.measure(cfg);
                if after >= measure {
                    let f = fail(
                        property::ACYCLIC,
                        format!("the progress measure went from {measure} to {after}"),
                    );
                    report.violation = Some(self.violation(id, Some(step), f));
                    return report;
                }
                if !self.visited.insert(t.key(&self.layout)) {
                    continue;
                }
                let next = self.parents.len() as u32;
                self.parents.push((id, step));
                report.states += 1;
                if let Err(f) = t.invariants(cfg) {
                    report.violation = Some(self.violation(next, None, f));
                    return report;
                }
                queue.push_back((next, depth + 1, t));
            }
            if !moved {
                report.terminal += 1;
                if let Err(f) = s.quiescent(cfg) {
                    report.violation = Some(self.violation(id, None, f));
                    return report;
                }
            }
        }
        report
    }

    /// Replays the path to state `id` (then `extra`, the step that failed) with logging on.
    fn violation(&self, id: u32, extra: Option<Step>, f: Failure) -> Violation {
        let mut path = Vec::new();
        let mut at = id;
        while at != 0 {
            let (parent, step) = self.parents[at as usize];
            path.push(step);
            at = parent;
        }
        path.reverse();
        path.extend(extra);
        let mut trace = Vec::new();
        let mut s = State::initial(self.cfg);
        for step in path {
            // The last step may fail again here, by design: it is the one being reported.
            let _ = s.apply(self.cfg, step, Some(&mut trace));
        }
        trace.push(format!("VIOLATED {}: {}", f.property, f.detail));
        Violation {
            property: f.property,
            trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(variant: ProtocolVariant) -> ModelConfig {
        ModelConfig {
            devices: 2,
            pages: 1,
            values: 2,
            requests_per_device: 1,
            evictions_per_device: 1,
            frees: 1,
            capacity: None,
            variant,
            remote_pages: 0,
            remote_ops_per_device: 0,
            remote_variant: RemoteVariant::InPlace,
            staging: false,
            held_ops_per_device: 0,
            held_variant: HeldVariant::Checked,
            coherence: Coherence::Owned,
        }
    }

    #[test]
    fn batches_cover_every_non_empty_choice() {
        let all = Batch::all(2);
        assert_eq!(all.len(), 8);
        assert!(all.iter().all(|b| b.pages() != 0 && b.read & b.write == 0));
        let mut seen: Vec<(u8, u8)> = all.iter().map(|b| (b.read, b.write)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 8);
    }

    #[test]
    fn keys_tell_states_apart() {
        let cfg = ModelConfig::minimum();
        let l = Layout::new(&cfg);
        let a = State::initial(&cfg);
        let mut b = a.clone();
        b.devs[2].slots[1].set_writable(true);
        let mut c = a.clone();
        c.latest[1] = 1;
        assert!(
            a.key::<4>(&l) != b.key::<4>(&l)
                && a.key::<4>(&l) != c.key::<4>(&l)
                && b.key::<4>(&l) != c.key::<4>(&l)
        );
        assert!(a.key::<4>(&l) == a.clone().key::<4>(&l));
    }

    /// `device` holds a read-only copy of `page`, in the directory and its page table.
    fn with_copy(mut s: State, device: u8, page: u64) -> State {
        let e = Rc::make_mut(&mut s.proto)
            .directory_mut()
            .entry_mut(GlobalPage(page))
            .unwrap();
        e.copies.insert(DeviceId(device));
        s.devs[device as usize].slots[page as usize] = Slot::filled(0);
        s
    }

    #[test]
    fn renamed_states_share_a_key() {
        let cfg = ModelConfig::minimum();
        let l = Layout::new(&cfg);
        let a = with_copy(State::initial(&cfg), 0, 0);
        let b = with_copy(State::initial(&cfg), 2, 1);
        assert!(a.key::<4>(&l) == b.key::<4>(&l));
        // Two copies of one page are not a renaming of copies of two pages.
        let one_page = with_copy(with_copy(State::initial(&cfg), 0, 0), 1, 0);
        let two_pages = with_copy(with_copy(State::initial(&cfg), 0, 0), 1, 1);
        assert!(one_page.key::<4>(&l) != two_pages.key::<4>(&l));
    }

    #[test]
    fn only_dead_values_are_forgotten() {
        let cfg = ModelConfig::minimum();
        let l = Layout::new(&cfg);
        let a = State::initial(&cfg);
        let mut stale = a.clone();
        stale.devs[1].slots[0].set_value(1);
        assert!(
            a.key::<4>(&l) == stale.key::<4>(&l),
            "nobody may read device1's dropped slot"
        );
        let granted = Phase::Granted {
            batch: Batch { read: 1, write: 0 },
            done: 0,
        };
        let (mut a, mut stale) = (a, stale);
        a.devs[1].phase = granted;
        stale.devs[1].phase = granted;
        assert!(
            a.key::<4>(&l) != stale.key::<4>(&l),
            "device1 trusts its grant and may read the slot"
        );
    }

    #[test]
    fn oversized_worlds_are_refused() {
        let mut cfg = ModelConfig::minimum();
        cfg.devices = 8;
        cfg.pages = 8;
        assert!(cfg.validate().is_err());
        cfg.devices = 0;
        assert!(cfg.validate().is_err());
        assert!(ModelConfig::minimum().validate().is_ok());
        let no_slots = ModelConfig {
            capacity: Some(0),
            ..ModelConfig::minimum()
        };
        assert!(no_slots.validate().is_err());
    }

    #[test]
    fn a_stale_read_is_a_data_value_violation() {
        let cfg = tiny(ProtocolVariant::Correct);
        let mut s = State::initial(&cfg);
        s.devs[0].phase = Phase::Granted {
            batch: Batch { read: 1, write: 0 },
            done: 0,
        };
        s.latest[0] = 1;
        let err = s
            .apply(&cfg, Step::Read { device: 0, page: 0 }, None)
            .expect_err("slot holds 0, latest is 1");
        assert_eq!(err.property, property::DATA_VALUE);
    }

    #[test]
    fn a_stuck_request_is_not_quiescent() {
        let cfg = tiny(ProtocolVariant::Correct);
        let mut s = State::initial(&cfg);
        assert!(s.quiescent(&cfg).is_ok());
        s.devs[1].phase = Phase::Waiting(Batch { read: 1, write: 0 });
        let err = s.quiescent(&cfg).expect_err("device1 waits forever");
        assert_eq!(err.property, property::EVENTUAL_COMPLETION);
    }

    #[test]
    fn tiny_world_passes_and_counts_add_up() {
        let r = check(&tiny(ProtocolVariant::Correct)).unwrap();
        assert!(r.violation.is_none(), "{r}");
        assert!(
            r.states > 10 && r.transitions >= r.states - 1 && r.terminal >= 1,
            "{r}"
        );
    }

    #[test]
    fn freeing_the_last_page_shrinks_the_directory_and_creating_grows_it() {
        let cfg = ModelConfig::minimum();
        let l = Layout::new(&cfg);
        let mut s = State::initial(&cfg);
        assert_eq!(
            s.apply(&cfg, Step::Free { page: 1 }, None).ok(),
            Some(Applied::Done)
        );
        assert_eq!((s.proto.directory().len(), s.live), (1, 0b01));
        let mut hole = State::initial(&cfg);
        assert!(hole.apply(&cfg, Step::Free { page: 0 }, None).is_ok());
        assert_eq!(hole.proto.directory().len(), 2);
        assert!(
            s.key::<4>(&l) != hole.key::<4>(&l),
            "a shrunk directory is kept apart from one with a hole"
        );
        assert_eq!(
            s.apply(&cfg, Step::Create { page: 1 }, None).ok(),
            Some(Applied::Done)
        );
        assert_eq!((s.proto.directory().len(), s.live), (2, 0b11));
        assert!(s.invariants(&cfg).is_ok());
    }

    #[test]
    fn a_request_whose_page_was_freed_in_the_inbox_is_refused() {
        let cfg = ModelConfig::minimum();
        let mut s = State::initial(&cfg);
        let batch = Batch {
            read: 0b10,
            write: 0,
        };
        s.apply(&cfg, Step::Request { device: 0, batch }, None).ok();
        s.apply(&cfg, Step::Free { page: 1 }, None).ok();
        assert_eq!(
            s.apply(&cfg, Step::Deliver { device: 0 }, None).ok(),
            Some(Applied::Done)
        );
        assert_eq!(s.devs[0].phase, Phase::Idle);
        // Refused only because the page is gone: the same request for a live page is served.
        let mut s = State::initial(&cfg);
        s.apply(&cfg, Step::Request { device: 0, batch }, None).ok();
        s.apply(&cfg, Step::Deliver { device: 0 }, None).ok();
        assert!(matches!(s.devs[0].phase, Phase::Granted { .. }));
    }

    #[test]
    fn a_free_of_a_locked_page_is_refused_and_changes_nothing() {
        let cfg = ModelConfig::minimum();
        let mut s = State::initial(&cfg);
        let batch = Batch {
            read: 0,
            write: 0b01,
        };
        s.apply(&cfg, Step::Request { device: 2, batch }, None).ok();
        s.apply(&cfg, Step::Deliver { device: 2 }, None).ok();
        let before = s.key::<4>(&Layout::new(&cfg));
        assert_eq!(
            s.apply(&cfg, Step::Free { page: 0 }, None).ok(),
            Some(Applied::Refused)
        );
        assert!(before == s.key::<4>(&Layout::new(&cfg)));
        assert_eq!(
            s.apply(&cfg, Step::Free { page: 1 }, None).ok(),
            Some(Applied::Done)
        );
    }

    #[test]
    fn a_mapped_freed_page_is_a_stale_mapping() {
        let cfg = ModelConfig::minimum();
        let mut s = State::initial(&cfg);
        s.apply(&cfg, Step::Free { page: 0 }, None).ok();
        s.devs[1].slots[0] = Slot::filled(0);
        let err = s.invariants(&cfg).expect_err("device1 maps a freed page");
        assert_eq!(err.property, property::NO_STALE_MAPPING);
    }

    #[test]
    fn more_copies_than_slots_is_a_capacity_violation() {
        let cfg = ModelConfig {
            capacity: Some(1),
            ..ModelConfig::minimum()
        };
        let s = with_copy(with_copy(State::initial(&cfg), 1, 0), 1, 1);
        let err = s
            .invariants(&cfg)
            .expect_err("device1 holds two pages in one slot");
        assert_eq!(err.property, property::CAPACITY);
        let unbounded = ModelConfig::minimum();
        assert!(s.invariants(&unbounded).is_ok());
    }

    #[test]
    fn a_full_device_requests_only_what_fits_and_evicts_to_make_room_for_free() {
        let cfg = ModelConfig {
            capacity: Some(1),
            ..ModelConfig::minimum()
        };
        let mut s = with_copy(State::initial(&cfg), 0, 0);
        s.devs[0].evicted = cfg.evictions_per_device;
        let mut steps = Vec::new();
        s.enabled(&cfg, &Batch::all(cfg.pages as usize), &mut steps);
        let mine: Vec<Step> = steps
            .into_iter()
            .filter(|st| {
                matches!(
                    st,
                    Step::Request { device: 0, .. } | Step::Evict { device: 0, .. }
                )
            })
            .collect();
        let only = |read, write| Step::Request {
            device: 0,
            batch: Batch { read, write },
        };
        assert_eq!(
            mine,
            [
                only(0b01, 0),
                only(0, 0b01),
                Step::Evict {
                    device: 0,
                    page: 0,
                    room: true
                }
            ],
            "page1 does not fit beside page0; evicting page0 is free, the budget is spent"
        );
        let before = s.measure(&cfg);
        let evict = Step::Evict {
            device: 0,
            page: 0,
            room: true,
        };
        assert_eq!(s.apply(&cfg, evict, None).ok(), Some(Applied::Done));
        assert!(s.measure(&cfg) < before);
        assert_eq!(s.devs[0].held(&cfg), 0);
        // With one page freed every batch fits: nothing is evicted to make room.
        let mut s = with_copy(State::initial(&cfg), 0, 0);
        s.apply(&cfg, Step::Free { page: 1 }, None).ok();
        let mut steps = Vec::new();
        s.enabled(&cfg, &Batch::all(cfg.pages as usize), &mut steps);
        assert!(
            !steps
                .iter()
                .any(|st| matches!(st, Step::Evict { room: true, .. })),
            "{steps:?}"
        );
    }

    #[test]
    fn a_refused_world_is_an_error() {
        let cfg = ModelConfig {
            devices: 0,
            ..tiny(ProtocolVariant::Correct)
        };
        assert!(check(&cfg).is_err());
    }
}
