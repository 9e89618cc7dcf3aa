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
    pub const ACYCLIC: &str = crate::search::ACYCLIC;
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
    /// another device's store), one eviction per device and one free of the migrate page.
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

pub use crate::search::{CheckReport, Violation};

/// Explores every state reachable in `cfg`'s world and checks every property in each.
/// A world [`ModelConfig::validate`] refuses is an error, not a panic.
pub fn check(cfg: &ModelConfig) -> Result<CheckReport, String> {
    cfg.validate()?;
    // The narrowest key that holds the world: the visited set is most of the memory.
    Ok(match Layout::new(cfg).max_bits() {
        0..=128 => crate::search::search(&ModelWorld::<2>::new(cfg)),
        129..=192 => crate::search::search(&ModelWorld::<3>::new(cfg)),
        _ => crate::search::search(&ModelWorld::<KEY_WORDS>::new(cfg)),
    })
}

mod explore;
mod key;
mod state;

use explore::*;
use key::*;
use state::*;

/// The node checker's batches are the same masks.
pub(crate) use state::Batch;

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
