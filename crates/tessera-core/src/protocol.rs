//! The coherence protocol as a sans-IO state machine.
//!
//! `(directory, message) → (new directory, ordered actions)`. The protocol never moves a byte:
//! the runtime's memory manager carries out the [`Action`]s in order, waiting for each device
//! worker's acknowledgement, and sends the [`Action::Complete`] reply only after every action
//! before it is done. The model checker ([`crate::model`]) drives the same state machine.
//!
//! Requests are read (shared) or write (exclusive), in batches from one device (paper 3.4–3.5).
//! The memory lock (paper 3.8): after a device's batch is answered, the device stays locked
//! until it sends [`Message::Release`]; any later request that needs data from it, a downgrade
//! of it or an invalidation on it is deferred (kept in a queue here, never a blocked thread)
//! and retried when the lock is released. A locked device must not send a request.
//!
//! Objects come and go through the protocol too ([`Message::Create`], [`Message::Free`]), so
//! the directory has no other writer and the model checker explores creation and freeing
//! interleaved with requests. Freeing waits for nothing: it is refused, changing nothing, while
//! a page of the object is held by a locked device or named by a deferred request (the caller
//! frees between passes, or retries), and otherwise drops every device's copy, so no device
//! maps a page that a later object reuses.
//!
//! The specification, with the model checker's measured state counts, is docs/PROTOCOL.md.

use std::collections::VecDeque;
use std::ops::Range;

use crate::directory::{DeviceSet, Directory};
use crate::error::{CoreError, Result};
use crate::{DeviceId, GlobalPage};

/// Shared (read) or exclusive (write) access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Access {
    Read,
    Write,
}

/// One page of a request batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageRequest {
    pub page: GlobalPage,
    pub access: Access,
}

/// Names a batch so its reply can be matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// A batch of page requests from one device, answered all at once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RequestBatch {
    pub id: RequestId,
    pub device: DeviceId,
    pub pages: Vec<PageRequest>,
}

/// What the memory manager feeds the protocol.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    Request(RequestBatch),
    /// The device finished the procedure its last reply started: its memory lock is released.
    Release(DeviceId),
    /// The device drops its copies of these pages (eviction, or freeing an object).
    Evict {
        device: DeviceId,
        pages: Vec<GlobalPage>,
    },
    /// An object was created over `pages`, which must not be live: they become live and
    /// home-only (the caller has put the object's initial data at home), and the directory
    /// grows when they reach past its end. Yields no actions: no device can hold a copy of a
    /// page that is not live, since `Free` dropped them all.
    Create {
        pages: Range<u64>,
    },
    /// The object over `pages` (all live) is freed. Every device's copy is invalidated, the
    /// owner's without a write-back since the data dies with the object, and the pages become
    /// holes; the directory shrinks past holes that end it. Refused with
    /// [`CoreError::FreeWhileLocked`] or [`CoreError::FreeWhileDeferred`], changing nothing,
    /// while a locked device holds one of the pages (it may be inside a pass that uses it) or a
    /// deferred request names one (granting it later would hand out a page of no object, or of
    /// the next object over the range).
    Free {
        pages: Range<u64>,
    },
    /// Asynchronous staging (only under [`Protocol::with_staging`]): a device inside its
    /// procedure asks for pages of its next wave or pass while the current one runs. Granted at
    /// once, ending in a `Complete` that leaves the device's lock as it was, or refused
    /// ([`CoreError::StageWouldWait`]) changing nothing; never deferred, so the device's
    /// driver never waits on another device's release while it holds its own lock, and no
    /// wait-for cycle can close. The batch must name no page the running procedure holds
    /// ([`CoreError::StageHeld`]), so a grant never changes what that procedure sees.
    Stage(RequestBatch),
}

/// Where a page's data comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    Home,
    /// The device holding the modified copy (for a read, the owner just downgraded). Counted
    /// as a move from that device, so a topology charges the owner-to-reader link.
    Device(DeviceId),
}

/// One step for the runtime to carry out, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Copy the page's data into a fresh slot on `to`.
    Copy {
        page: GlobalPage,
        from: Source,
        to: DeviceId,
    },
    /// Write `from`'s modified copy back to home.
    WriteBack { page: GlobalPage, from: DeviceId },
    /// Drop `device`'s copy: clear its page table entry and free the slot.
    Invalidate { page: GlobalPage, device: DeviceId },
    /// Point `device`'s page table entry at the slot the preceding `Copy` filled.
    Install {
        page: GlobalPage,
        device: DeviceId,
        writable: bool,
    },
    /// `device` already holds a valid copy; make it writable.
    GrantWrite { page: GlobalPage, device: DeviceId },
    /// `device` keeps its copy read-only (after its write-back).
    Downgrade { page: GlobalPage, device: DeviceId },
    /// Reply to `device`: every page of the batch is now resident with the access asked for.
    /// The device is locked from here until it sends `Release` (a `Stage` reply leaves the
    /// lock, held by the procedure still running, as it was).
    Complete {
        request: RequestId,
        device: DeviceId,
    },
}

impl Action {
    /// The device whose worker carries the action out (and whose acknowledgement the memory
    /// manager waits for before going on); `Complete` goes to that device's driver instead.
    pub fn device(&self) -> DeviceId {
        match *self {
            Action::Copy { to, .. } => to,
            Action::WriteBack { from, .. } => from,
            Action::Invalidate { device, .. }
            | Action::Install { device, .. }
            | Action::GrantWrite { device, .. }
            | Action::Downgrade { device, .. }
            | Action::Complete { device, .. } => device,
        }
    }
}

fn check_range(pages: &Range<u64>) -> Result<()> {
    if pages.is_empty() {
        return Err(CoreError::EmptyPageRange {
            start: pages.start,
            end: pages.end,
        });
    }
    Ok(())
}

/// What happens to a modified page when another device reads it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Coherence {
    /// The journal paper's rule (3.2.3): the owner's copy goes home as well as to the reader,
    /// so home is current whenever a page is shared. Kept for comparison and the paper's
    /// figures.
    WriteHome,
    /// MOESI's owned state: the owner keeps the only copy home lacks, read-only, and serves
    /// readers from it; the page goes home only when it must (the owner's last copy is
    /// evicted). An owner evicted while readers remain hands ownership to one of them, with
    /// no bytes moved: their copies hold the same bytes.
    #[default]
    Owned,
}

impl std::str::FromStr for Coherence {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "owned" => Ok(Coherence::Owned),
            "write-home" => Ok(Coherence::WriteHome),
            _ => Err(format!(
                "unknown coherence `{s}` (owned: a modified page is shared without going home; write-home: the paper's rule, home updated on every read of a modified page)"
            )),
        }
    }
}

impl std::fmt::Display for Coherence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Coherence::Owned => "owned",
            Coherence::WriteHome => "write-home",
        })
    }
}

/// The correct protocol, or a deliberately broken one. The broken ones exist so that the
/// model checker, the runtime's tests and the litmus runner can show that they catch bugs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProtocolVariant {
    #[default]
    Correct,
    /// Paper 3.8 without its fix: requests are never deferred behind a locked device.
    NoMemoryLock,
    /// Exclusive requests leave other devices' copies valid.
    SkipInvalidation,
    /// Downgrading a modified copy for a reader does not write it back home first.
    SkipWriteBackOnDowngrade,
    /// Freeing an object forgets its pages in the directory but leaves the devices' copies
    /// mapped, so a device keeps a stale mapping of a page the next object reuses.
    FreeWithoutInvalidation,
    /// Freeing an object does not wait for the memory lock or deferred requests.
    FreeIgnoringLocks,
    /// Evicting a modified (owned) copy drops it without writing it back home: the last write
    /// to the page is lost, and the next reader gets home's older value.
    EvictWithoutWriteBack,
    /// Eviction does not refuse a locked device, so a page can be taken away from under the
    /// procedure that was granted it (evicting a page in use); the procedure's later writes
    /// land in a dropped slot.
    EvictIgnoringLocks,
    /// Staging grants a batch that needs a locked device instead of refusing it (it may not
    /// wait), so it takes or downgrades a page another device's running procedure holds.
    StageIgnoringLocks,
    /// Owned pages: an owner evicted while readers remain drops its copy and ownership
    /// without writing home or handing ownership on, so home, stale, is taken as the latest.
    EvictOwnerWithoutHandover,
    /// Owned pages: a device with no copy that writes a page another device owns takes the
    /// page from home, which is stale, instead of from the owner.
    WriteCopiesFromHome,
}

/// The protocol state: the directory plus the memory locks and the deferred requests.
/// Private, so that every change goes through [`Protocol::handle`].
#[derive(Clone, Debug)]
pub struct Protocol {
    directory: Directory,
    variant: ProtocolVariant,
    locked: DeviceSet,
    deferred: VecDeque<RequestBatch>,
    devices: usize,
    /// Asynchronous staging on: `Message::Stage` is accepted, and a locked device may evict
    /// pages outside its held set.
    staging: bool,
    /// Per device, the pages its running procedure was granted (its last `Request`'s batch),
    /// while it is locked: the memory lock covers these pages. Empty while unlocked.
    held: Vec<Vec<GlobalPage>>,
    coherence: Coherence,
}

impl Protocol {
    pub fn new(directory: Directory, devices: usize, variant: ProtocolVariant) -> Result<Self> {
        if devices > crate::MAX_DEVICES {
            return Err(CoreError::TooManyDevices(devices));
        }
        Ok(Protocol {
            directory,
            variant,
            locked: DeviceSet::EMPTY,
            deferred: VecDeque::new(),
            devices,
            staging: false,
            held: vec![Vec::new(); devices],
            coherence: Coherence::WriteHome,
        })
    }

    /// Chooses what a read of a modified page does ([`Coherence`]); `WriteHome` unless set.
    /// Model-checked both ways (`model::ModelConfig::coherence`).
    pub fn with_coherence(mut self, c: Coherence) -> Self {
        self.coherence = c;
        self
    }

    pub fn coherence(&self) -> Coherence {
        self.coherence
    }

    /// Turns asynchronous staging on ([`Message::Stage`]): the memory lock then covers the
    /// pages a procedure was granted rather than its whole device, as far as the device's own
    /// staging and eviction go. Requests from other devices still wait for the whole device.
    /// Model-checked (`model::ModelConfig::staging`); the runtime uses it under
    /// `SystemConfig::staging`.
    pub fn with_staging(mut self) -> Self {
        self.staging = true;
        self
    }

    pub fn staging(&self) -> bool {
        self.staging
    }

    /// The pages `d`'s running procedure holds (empty while it is unlocked).
    pub fn held(&self, d: DeviceId) -> &[GlobalPage] {
        self.held.get(d.index()).map_or(&[], Vec::as_slice)
    }

    pub fn variant(&self) -> ProtocolVariant {
        self.variant
    }
    pub fn directory(&self) -> &Directory {
        &self.directory
    }
    /// For the model checker's tests, which build states no run reaches directly.
    #[cfg(test)]
    pub(crate) fn directory_mut(&mut self) -> &mut Directory {
        &mut self.directory
    }
    pub fn locked(&self) -> DeviceSet {
        self.locked
    }
    /// Requests waiting for a memory lock to be released, oldest first.
    pub fn deferred(&self) -> impl Iterator<Item = &RequestBatch> {
        self.deferred.iter()
    }

    /// Handles one message; returns the actions to carry out, in order. A deferred request
    /// yields no actions now; its actions come out of the `Release` that unblocks it.
    pub fn handle(&mut self, msg: Message) -> Result<Vec<Action>> {
        let mut out = Vec::new();
        match msg {
            Message::Request(batch) => {
                self.check_device(batch.device)?;
                if batch.pages.is_empty() {
                    return Err(CoreError::EmptyRequest(batch.device));
                }
                for r in &batch.pages {
                    self.directory.entry(r.page)?;
                }
                if self.locking() && self.locked.contains(batch.device) {
                    return Err(CoreError::RequestWhileLocked(batch.device));
                }
                if self.blocked(&batch) {
                    self.deferred.push_back(batch);
                } else {
                    // At most a copy, an install and a downgrade or invalidation per page, most
                    // often: a boundary batch's list grew one push at a time.
                    out.reserve(3 * batch.pages.len() + 1);
                    self.grant(&batch, &mut out)?;
                }
            }
            Message::Release(d) => {
                self.check_device(d)?;
                if self.locking() {
                    if !self.locked.contains(d) {
                        return Err(CoreError::NotLocked(d));
                    }
                    self.locked.remove(d);
                    self.held[d.index()].clear();
                    self.retry_deferred(&mut out)?;
                }
            }
            Message::Evict { device, pages } => {
                self.check_device(device)?;
                // Evicting a page of the batch a locked device is working on would drop its
                // grant under it and lose its writes (found by the model checker); a locked
                // device evicts nothing until it releases.
                // With staging, the lock covers the procedure's held pages only: the rest of the
                // device may be evicted to make room for the next wave.
                if self.locking()
                    && self.variant != ProtocolVariant::EvictIgnoringLocks
                    && self.locked.contains(device)
                {
                    if !self.staging {
                        return Err(CoreError::EvictWhileLocked(device));
                    }
                    if let Some(&page) =
                        pages.iter().find(|p| self.held[device.index()].contains(p))
                    {
                        return Err(CoreError::EvictHeld { device, page });
                    }
                }
                // All checked before any change, so a refusal leaves the state as it was.
                for &page in &pages {
                    self.directory.entry(page)?;
                }
                let variant = self.variant;
                for page in pages {
                    let e = self.directory.entry_mut(page)?;
                    if e.owner == Some(device) {
                        // Readers hold the owner's bytes (it is read-only while they do):
                        // one of them takes ownership and home stays as it is.
                        let heir = e.copies.without(device).iter().next();
                        match heir {
                            Some(r) if variant != ProtocolVariant::EvictOwnerWithoutHandover => {
                                e.owner = Some(r);
                            }
                            Some(_) => e.owner = None,
                            None => {
                                if variant != ProtocolVariant::EvictWithoutWriteBack {
                                    out.push(Action::WriteBack { page, from: device });
                                }
                                e.owner = None;
                            }
                        }
                        e.writable = false;
                    }
                    if e.copies.contains(device) {
                        e.copies.remove(device);
                        out.push(Action::Invalidate { page, device });
                    }
                }
            }
            Message::Stage(batch) => {
                self.check_stage(&batch)?;
                self.grant_pages(&batch, &mut out)?;
                out.push(Action::Complete {
                    request: batch.id,
                    device: batch.device,
                });
            }
            Message::Create { pages } => {
                check_range(&pages)?;
                if pages.end > crate::address::DEFAULT_PAGE_LIMIT {
                    return Err(CoreError::AddressSpaceExhausted {
                        requested: pages.end.saturating_sub(self.directory.len()),
                    });
                }
                // Pages past the end are not live: only the ones inside need looking at.
                if let Some(p) = (pages.start..pages.end.min(self.directory.len()))
                    .map(GlobalPage)
                    .find(|&p| self.directory.is_live(p))
                {
                    return Err(CoreError::PageInUse(p));
                }
                self.directory.create(pages);
            }
            Message::Free { pages } => {
                check_range(&pages)?;
                for p in pages.clone() {
                    self.directory.entry(GlobalPage(p))?;
                }
                if self.variant != ProtocolVariant::FreeIgnoringLocks {
                    self.check_free(&pages)?;
                }
                if self.variant != ProtocolVariant::FreeWithoutInvalidation {
                    for p in pages.clone() {
                        let page = GlobalPage(p);
                        for device in self.directory.entry(page)?.copies.iter() {
                            out.push(Action::Invalidate { page, device });
                        }
                    }
                }
                self.directory.free(pages);
            }
        }
        Ok(out)
    }

    /// Whether `Message::Stage(batch)` would be granted now, changing nothing: the error it
    /// would be refused with otherwise. The runtime asks before it makes room for a staged
    /// batch, so that a refused stage evicts nothing either.
    pub fn check_stage(&self, batch: &RequestBatch) -> Result<()> {
        self.check_device(batch.device)?;
        if !self.staging {
            return Err(CoreError::StagingOff);
        }
        if batch.pages.is_empty() {
            return Err(CoreError::EmptyRequest(batch.device));
        }
        for r in &batch.pages {
            self.directory.entry(r.page)?;
        }
        let d = batch.device;
        if !self.locked.contains(d) {
            return Err(CoreError::StageWhileUnlocked(d));
        }
        if let Some(r) = batch
            .pages
            .iter()
            .find(|r| self.held[d.index()].contains(&r.page))
        {
            return Err(CoreError::StageHeld {
                device: d,
                page: r.page,
            });
        }
        // `blocked` is false for the requester's own lock, so this asks exactly whether
        // another device's lock or an older deferred request stands in the way.
        if self.variant != ProtocolVariant::StageIgnoringLocks && self.blocked(batch) {
            return Err(CoreError::StageWouldWait(d));
        }
        Ok(())
    }

    /// Refuses a free while a page of it may still be used under a grant, now or later.
    fn check_free(&self, pages: &Range<u64>) -> Result<()> {
        if !self.locking() {
            return Ok(());
        }
        for p in pages.clone() {
            let page = GlobalPage(p);
            let held = DeviceSet(self.directory.entry(page)?.copies.0 & self.locked.0);
            if let Some(device) = held.iter().next() {
                return Err(CoreError::FreeWhileLocked { page, device });
            }
        }
        for b in &self.deferred {
            if let Some(r) = b.pages.iter().find(|r| pages.contains(&r.page.0)) {
                return Err(CoreError::FreeWhileDeferred {
                    page: r.page,
                    device: b.device,
                });
            }
        }
        Ok(())
    }

    fn locking(&self) -> bool {
        self.variant != ProtocolVariant::NoMemoryLock
    }

    fn check_device(&self, d: DeviceId) -> Result<()> {
        if d.index() >= self.devices {
            return Err(CoreError::UnknownDevice(d));
        }
        Ok(())
    }

    /// The devices other than the requester that granting `batch` would touch.
    fn touched(&self, batch: &RequestBatch) -> DeviceSet {
        let mut s = DeviceSet::EMPTY;
        for r in &batch.pages {
            let Ok(e) = self.directory.entry(r.page) else {
                continue;
            };
            match r.access {
                Access::Read if !e.copies.contains(batch.device) => {
                    if let Some(o) = e.owner {
                        s.insert(o);
                    }
                }
                Access::Write => s.0 |= e.copies.0,
                Access::Read => {}
            }
        }
        s.without(batch.device)
    }

    /// Deferred while it needs a locked device. Also deferred, for fairness, when an older
    /// deferred request needs the requester: granting would lock the requester again and could
    /// starve the older one forever.
    fn blocked(&self, batch: &RequestBatch) -> bool {
        if !self.locking() {
            return false;
        }
        self.touched(batch).intersects(self.locked)
            || self
                .deferred
                .iter()
                .any(|older| self.touched(older).contains(batch.device))
    }

    fn retry_deferred(&mut self, out: &mut Vec<Action>) -> Result<()> {
        let mut waiting = std::mem::take(&mut self.deferred);
        while let Some(batch) = waiting.pop_front() {
            // Re-evaluated against the requests still deferred ahead of it, in arrival order.
            if self.blocked(&batch) {
                self.deferred.push_back(batch);
            } else {
                self.grant(&batch, out)?;
            }
        }
        Ok(())
    }

    fn grant(&mut self, batch: &RequestBatch, out: &mut Vec<Action>) -> Result<()> {
        let d = batch.device;
        self.grant_pages(batch, out)?;
        out.push(Action::Complete {
            request: batch.id,
            device: d,
        });
        if self.locking() {
            self.locked.insert(d);
            let held = &mut self.held[d.index()];
            held.clear();
            held.extend(batch.pages.iter().map(|r| r.page));
        }
        Ok(())
    }

    /// The data moves and table changes that give `batch.device` its pages.
    fn grant_pages(&mut self, batch: &RequestBatch, out: &mut Vec<Action>) -> Result<()> {
        let d = batch.device;
        let variant = self.variant;
        let owned = self.coherence == Coherence::Owned;
        for r in &batch.pages {
            let page = r.page;
            let e = self.directory.entry_mut(page)?;
            match r.access {
                Access::Read => {
                    if e.copies.contains(d) {
                        continue;
                    }
                    // A modified copy goes straight from its owner to the reader (one link,
                    // device to device). Under `WriteHome` it goes home too, and every copy is
                    // then clean; under `Owned` the owner keeps it, read-only, and home stays
                    // stale until the owner's copy must leave.
                    let from = match e.owner {
                        Some(o) if owned => {
                            if e.writable {
                                out.push(Action::Downgrade { page, device: o });
                                e.writable = false;
                            }
                            Source::Device(o)
                        }
                        Some(o) => {
                            if variant != ProtocolVariant::SkipWriteBackOnDowngrade {
                                out.push(Action::WriteBack { page, from: o });
                            }
                            out.push(Action::Downgrade { page, device: o });
                            e.owner = None;
                            e.writable = false;
                            Source::Device(o)
                        }
                        None => Source::Home,
                    };
                    out.push(Action::Copy { page, from, to: d });
                    out.push(Action::Install {
                        page,
                        device: d,
                        writable: false,
                    });
                    e.copies.insert(d);
                }
                Access::Write => {
                    if e.owner == Some(d) && e.writable {
                        continue;
                    }
                    let had_copy = e.copies.contains(d);
                    // A reader of an owned page holds the owner's bytes already: it takes
                    // ownership with no copy. Anyone else takes them from the owner.
                    let from_owner = e
                        .owner
                        .filter(|_| !had_copy)
                        .filter(|_| variant != ProtocolVariant::WriteCopiesFromHome);
                    if let Some(o) = from_owner {
                        out.push(Action::Copy {
                            page,
                            from: Source::Device(o),
                            to: d,
                        });
                    } else if !had_copy {
                        out.push(Action::Copy {
                            page,
                            from: Source::Home,
                            to: d,
                        });
                    }
                    if variant != ProtocolVariant::SkipInvalidation {
                        for s in e.copies.without(d).iter() {
                            out.push(Action::Invalidate { page, device: s });
                        }
                        e.copies = DeviceSet::only(d);
                    } else {
                        e.copies.insert(d);
                    }
                    out.push(if had_copy {
                        Action::GrantWrite { page, device: d }
                    } else {
                        Action::Install {
                            page,
                            device: d,
                            writable: true,
                        }
                    });
                    e.owner = Some(d);
                    e.writable = true;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::directory::HomeMap;
    use crate::NodeId;

    fn proto(devices: usize) -> Protocol {
        Protocol::new(
            Directory::new(4, HomeMap::Single(NodeId(0))),
            devices,
            ProtocolVariant::Correct,
        )
        .unwrap()
    }

    fn req(id: u64, d: u8, pages: &[(u64, Access)]) -> Message {
        Message::Request(RequestBatch {
            id: RequestId(id),
            device: DeviceId(d),
            pages: pages
                .iter()
                .map(|&(p, access)| PageRequest {
                    page: GlobalPage(p),
                    access,
                })
                .collect(),
        })
    }

    const P: GlobalPage = GlobalPage(1);

    #[test]
    fn read_then_exclusive_then_read() {
        let mut p = proto(3);
        let a = p.handle(req(1, 0, &[(1, Access::Read)])).unwrap();
        assert_eq!(
            a,
            [
                Action::Copy {
                    page: P,
                    from: Source::Home,
                    to: DeviceId(0)
                },
                Action::Install {
                    page: P,
                    device: DeviceId(0),
                    writable: false
                },
                Action::Complete {
                    request: RequestId(1),
                    device: DeviceId(0)
                },
            ]
        );
        p.handle(Message::Release(DeviceId(0))).unwrap();
        let a = p.handle(req(2, 1, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            a,
            [
                Action::Copy {
                    page: P,
                    from: Source::Home,
                    to: DeviceId(1)
                },
                Action::Invalidate {
                    page: P,
                    device: DeviceId(0)
                },
                Action::Install {
                    page: P,
                    device: DeviceId(1),
                    writable: true
                },
                Action::Complete {
                    request: RequestId(2),
                    device: DeviceId(1)
                },
            ]
        );
        p.handle(Message::Release(DeviceId(1))).unwrap();
        let a = p.handle(req(3, 2, &[(1, Access::Read)])).unwrap();
        assert_eq!(
            a,
            [
                Action::WriteBack {
                    page: P,
                    from: DeviceId(1)
                },
                Action::Downgrade {
                    page: P,
                    device: DeviceId(1)
                },
                Action::Copy {
                    page: P,
                    from: Source::Device(DeviceId(1)),
                    to: DeviceId(2)
                },
                Action::Install {
                    page: P,
                    device: DeviceId(2),
                    writable: false
                },
                Action::Complete {
                    request: RequestId(3),
                    device: DeviceId(2)
                },
            ]
        );
        let e = p.directory().entry(P).unwrap();
        assert_eq!((e.copies.0, e.owner), (0b110, None));
    }

    #[test]
    fn memory_lock_defers_until_release() {
        // Paper 3.8: two devices take the same page exclusively, back to back.
        let mut p = proto(2);
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert!(p
            .handle(req(2, 1, &[(1, Access::Write)]))
            .unwrap()
            .is_empty());
        assert_eq!(p.deferred().count(), 1);
        let a = p.handle(Message::Release(DeviceId(0))).unwrap();
        assert_eq!(
            a,
            [
                Action::Copy {
                    page: P,
                    from: Source::Device(DeviceId(0)),
                    to: DeviceId(1)
                },
                Action::Invalidate {
                    page: P,
                    device: DeviceId(0)
                },
                Action::Install {
                    page: P,
                    device: DeviceId(1),
                    writable: true
                },
                Action::Complete {
                    request: RequestId(2),
                    device: DeviceId(1)
                },
            ]
        );
        // Without the lock the second request is answered at once, from a copy device 0 may
        // not have written yet: the race the paper describes.
        let mut p = proto(2);
        p.variant = ProtocolVariant::NoMemoryLock;
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(p.handle(req(2, 1, &[(1, Access::Write)])).unwrap().len(), 4);
    }

    #[test]
    fn upgrade_and_eviction() {
        let mut p = proto(2);
        p.handle(req(1, 0, &[(1, Access::Read), (2, Access::Read)]))
            .unwrap();
        p.handle(Message::Release(DeviceId(0))).unwrap();
        let a = p.handle(req(2, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            a[0],
            Action::GrantWrite {
                page: P,
                device: DeviceId(0)
            }
        );
        p.handle(Message::Release(DeviceId(0))).unwrap();
        let a = p
            .handle(Message::Evict {
                device: DeviceId(0),
                pages: vec![P, GlobalPage(2), GlobalPage(3)],
            })
            .unwrap();
        assert_eq!(
            a,
            [
                Action::WriteBack {
                    page: P,
                    from: DeviceId(0)
                },
                Action::Invalidate {
                    page: P,
                    device: DeviceId(0)
                },
                Action::Invalidate {
                    page: GlobalPage(2),
                    device: DeviceId(0)
                },
            ]
        );
        assert!(p
            .directory()
            .entries()
            .iter()
            .all(|e| e.copies.is_empty() && e.owner.is_none()));
    }

    fn evict(p: &mut Protocol, d: u8, page: u64) -> Result<Vec<Action>> {
        p.handle(Message::Evict {
            device: DeviceId(d),
            pages: vec![GlobalPage(page)],
        })
    }

    #[test]
    fn evicting_without_write_back_drops_the_modified_copy() {
        for (variant, write_back) in [
            (ProtocolVariant::Correct, true),
            (ProtocolVariant::EvictWithoutWriteBack, false),
        ] {
            let mut p = proto(2);
            p.variant = variant;
            p.handle(req(1, 0, &[(1, Access::Write), (2, Access::Read)]))
                .unwrap();
            p.handle(Message::Release(DeviceId(0))).unwrap();
            let invalidate = Action::Invalidate {
                page: P,
                device: DeviceId(0),
            };
            let expected: &[Action] = if write_back {
                &[
                    Action::WriteBack {
                        page: P,
                        from: DeviceId(0),
                    },
                    invalidate,
                ]
            } else {
                &[invalidate]
            };
            assert_eq!(evict(&mut p, 0, 1).unwrap(), expected, "{variant:?}");
            let e = p.directory().entry(P).unwrap();
            assert_eq!((e.copies, e.owner), (DeviceSet::EMPTY, None), "{variant:?}");
            // A clean copy has nothing to write back in either variant.
            assert_eq!(
                evict(&mut p, 0, 2).unwrap(),
                [Action::Invalidate {
                    page: GlobalPage(2),
                    device: DeviceId(0)
                }],
                "{variant:?}"
            );
        }
    }

    #[test]
    fn evicting_ignoring_locks_takes_a_page_from_a_locked_device() {
        let mut p = proto(2);
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            evict(&mut p, 0, 1),
            Err(CoreError::EvictWhileLocked(DeviceId(0)))
        );
        let mut p = proto(2);
        p.variant = ProtocolVariant::EvictIgnoringLocks;
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            evict(&mut p, 0, 1).unwrap(),
            [
                Action::WriteBack {
                    page: P,
                    from: DeviceId(0)
                },
                Action::Invalidate {
                    page: P,
                    device: DeviceId(0)
                },
            ]
        );
        assert!(
            p.locked().contains(DeviceId(0)),
            "only eviction ignores the lock: the device is still inside its procedure"
        );
        assert_eq!(
            p.handle(req(2, 0, &[(2, Access::Read)])),
            Err(CoreError::RequestWhileLocked(DeviceId(0)))
        );
    }

    fn create(p: &mut Protocol, pages: Range<u64>) -> Result<Vec<Action>> {
        p.handle(Message::Create { pages })
    }
    fn free(p: &mut Protocol, pages: Range<u64>) -> Result<Vec<Action>> {
        p.handle(Message::Free { pages })
    }

    #[test]
    fn create_grows_and_free_shrinks_the_directory() {
        let mut p = Protocol::new(
            Directory::new(0, HomeMap::Single(NodeId(0))),
            2,
            ProtocolVariant::Correct,
        )
        .unwrap();
        assert_eq!(create(&mut p, 0..2), Ok(vec![]));
        assert_eq!(create(&mut p, 2..5), Ok(vec![]));
        assert_eq!(p.directory().len(), 5);
        assert_eq!(
            create(&mut p, 4..6),
            Err(CoreError::PageInUse(GlobalPage(4)))
        );
        assert_eq!(p.directory().len(), 5, "a refused create grows nothing");
        // A hole in the middle stays; holes that end the space go.
        free(&mut p, 0..2).unwrap();
        assert_eq!(p.directory().len(), 5);
        assert!(!p.directory().is_live(GlobalPage(1)) && p.directory().is_live(GlobalPage(2)));
        free(&mut p, 2..5).unwrap();
        assert!(p.directory().is_empty());
        create(&mut p, 0..1).unwrap();
        assert_eq!(p.directory().len(), 1);
    }

    #[test]
    fn free_drops_every_copy_without_writing_back() {
        let mut p = proto(3);
        p.handle(req(1, 0, &[(1, Access::Read), (2, Access::Read)]))
            .unwrap();
        p.handle(Message::Release(DeviceId(0))).unwrap();
        p.handle(req(2, 1, &[(1, Access::Read)])).unwrap();
        p.handle(Message::Release(DeviceId(1))).unwrap();
        p.handle(req(3, 2, &[(2, Access::Write)])).unwrap();
        p.handle(Message::Release(DeviceId(2))).unwrap();
        let inv = |page, d| Action::Invalidate {
            page: GlobalPage(page),
            device: DeviceId(d),
        };
        assert_eq!(
            free(&mut p, 1..3),
            Ok(vec![inv(1, 0), inv(1, 1), inv(2, 2)])
        );
        assert_eq!(
            p.handle(req(4, 0, &[(1, Access::Read)])),
            Err(CoreError::UnknownPage(P)),
            "a freed page is requested no more"
        );
        // The next object over the pages starts home-only, with nobody holding a copy.
        assert_eq!(create(&mut p, 1..3), Ok(vec![]));
        let e = p.directory().entry(GlobalPage(2)).unwrap();
        assert_eq!((e.copies, e.owner), (DeviceSet::EMPTY, None));
    }

    #[test]
    fn free_waits_for_locks_and_deferred_requests() {
        let mut p = proto(2);
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            free(&mut p, 0..4),
            Err(CoreError::FreeWhileLocked {
                page: P,
                device: DeviceId(0)
            })
        );
        // Deferred behind page 1; page 3 is held by nobody but would be granted later.
        assert!(p
            .handle(req(2, 1, &[(1, Access::Read), (3, Access::Write)]))
            .unwrap()
            .is_empty());
        assert_eq!(
            free(&mut p, 3..4),
            Err(CoreError::FreeWhileDeferred {
                page: GlobalPage(3),
                device: DeviceId(1)
            })
        );
        assert!(
            p.directory().is_live(GlobalPage(3)),
            "a refused free changes nothing"
        );
        assert_eq!(free(&mut p, 2..3), Ok(vec![]));
        p.handle(Message::Release(DeviceId(0))).unwrap();
        p.handle(Message::Release(DeviceId(1))).unwrap();
        // Device 0 was downgraded for device 1's read: both copies go.
        assert_eq!(free(&mut p, 1..2).map(|a| a.len()), Ok(2));
        // The broken variant frees under the lock.
        let mut p = proto(2);
        p.variant = ProtocolVariant::FreeIgnoringLocks;
        p.handle(req(1, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(free(&mut p, 1..2).map(|a| a.len()), Ok(1));
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        let mut p = proto(2);
        assert_eq!(
            p.handle(req(1, 5, &[(1, Access::Read)])),
            Err(CoreError::UnknownDevice(DeviceId(5)))
        );
        assert_eq!(
            p.handle(req(1, 0, &[])),
            Err(CoreError::EmptyRequest(DeviceId(0)))
        );
        assert_eq!(
            p.handle(req(1, 0, &[(9, Access::Read)])),
            Err(CoreError::UnknownPage(GlobalPage(9)))
        );
        assert_eq!(
            p.handle(Message::Release(DeviceId(1))),
            Err(CoreError::NotLocked(DeviceId(1)))
        );
        p.handle(req(1, 0, &[(1, Access::Read)])).unwrap();
        assert_eq!(
            p.handle(req(2, 0, &[(2, Access::Read)])),
            Err(CoreError::RequestWhileLocked(DeviceId(0)))
        );
        assert_eq!(
            p.handle(Message::Evict {
                device: DeviceId(0),
                pages: vec![P]
            }),
            Err(CoreError::EvictWhileLocked(DeviceId(0)))
        );
        assert_eq!(
            free(&mut p, 2..2),
            Err(CoreError::EmptyPageRange { start: 2, end: 2 })
        );
        assert_eq!(
            free(&mut p, 3..9),
            Err(CoreError::UnknownPage(GlobalPage(4)))
        );
        assert_eq!(
            p.handle(Message::Evict {
                device: DeviceId(1),
                pages: vec![GlobalPage(0), GlobalPage(7)]
            }),
            Err(CoreError::UnknownPage(GlobalPage(7)))
        );
        assert!(matches!(
            create(&mut p, 4..u64::MAX),
            Err(CoreError::AddressSpaceExhausted { .. })
        ));
        assert!(Protocol::new(
            Directory::new(1, HomeMap::Single(NodeId(0))),
            65,
            ProtocolVariant::Correct
        )
        .is_err());
    }

    fn stage(id: u64, d: u8, pages: &[(u64, Access)]) -> Message {
        match req(id, d, pages) {
            Message::Request(b) => Message::Stage(b),
            _ => unreachable!(),
        }
    }

    #[test]
    fn staging_is_refused_unless_on_locked_and_outside_the_held_pages() {
        let mut off = proto(2);
        off.handle(req(1, 0, &[(1, Access::Read)])).unwrap();
        assert_eq!(
            off.handle(stage(2, 0, &[(2, Access::Read)])),
            Err(CoreError::StagingOff)
        );
        let mut p = proto(2).with_staging();
        assert_eq!(
            p.handle(stage(1, 0, &[(2, Access::Read)])),
            Err(CoreError::StageWhileUnlocked(DeviceId(0)))
        );
        p.handle(req(2, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(p.held(DeviceId(0)), [P]);
        assert_eq!(
            p.handle(stage(3, 0, &[(1, Access::Read)])),
            Err(CoreError::StageHeld {
                device: DeviceId(0),
                page: P
            })
        );
        // Device 1 locked holding page 2: a stage of it from device 0 may not wait, so it is
        // refused, changing nothing.
        p.handle(req(4, 1, &[(2, Access::Write)])).unwrap();
        let before = p.directory().clone();
        assert_eq!(
            p.handle(stage(5, 0, &[(2, Access::Read)])),
            Err(CoreError::StageWouldWait(DeviceId(0)))
        );
        assert_eq!(
            p.directory().entry(GlobalPage(2)),
            before.entry(GlobalPage(2))
        );
        // Page 3 is free: granted at once, and the lock stays as it was.
        let a = p.handle(stage(6, 0, &[(3, Access::Read)])).unwrap();
        assert_eq!(
            a,
            [
                Action::Copy {
                    page: GlobalPage(3),
                    from: Source::Home,
                    to: DeviceId(0)
                },
                Action::Install {
                    page: GlobalPage(3),
                    device: DeviceId(0),
                    writable: false
                },
                Action::Complete {
                    request: RequestId(6),
                    device: DeviceId(0)
                },
            ]
        );
        assert!(p.locked().contains(DeviceId(0)));
        assert_eq!(p.held(DeviceId(0)), [P]);
    }

    #[test]
    fn with_staging_a_locked_device_evicts_only_pages_outside_its_batch() {
        let mut p = proto(1).with_staging();
        p.handle(req(1, 0, &[(0, Access::Write)])).unwrap();
        p.handle(stage(2, 0, &[(1, Access::Write)])).unwrap();
        assert_eq!(
            p.handle(Message::Evict {
                device: DeviceId(0),
                pages: vec![GlobalPage(1), GlobalPage(0)],
            }),
            Err(CoreError::EvictHeld {
                device: DeviceId(0),
                page: GlobalPage(0)
            })
        );
        // The staged page goes, written back first.
        let a = p
            .handle(Message::Evict {
                device: DeviceId(0),
                pages: vec![GlobalPage(1)],
            })
            .unwrap();
        assert_eq!(
            a,
            [
                Action::WriteBack {
                    page: GlobalPage(1),
                    from: DeviceId(0)
                },
                Action::Invalidate {
                    page: GlobalPage(1),
                    device: DeviceId(0)
                },
            ]
        );
        // Released, nothing is held any more.
        p.handle(Message::Release(DeviceId(0))).unwrap();
        assert!(p.held(DeviceId(0)).is_empty());
    }
}
