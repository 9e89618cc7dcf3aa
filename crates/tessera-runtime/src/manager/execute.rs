//! Carrying out the protocol's actions: copies, write-backs and page-table updates sent to
//! the device workers in order.

use super::*;

/// The sets `Manager::read_ahead` fills for one action list, emptied before the next.
#[derive(Default)]
pub(super) struct AheadSets {
    changed: HashSet<(DeviceId, GlobalPage)>,
    from_home: HashSet<GlobalPage>,
    wanted: HashSet<(DeviceId, GlobalPage)>,
    peer_wanted: HashSet<(DeviceId, GlobalPage)>,
    homebound: HashSet<(DeviceId, GlobalPage)>,
}

impl AheadSets {
    fn clear(&mut self) {
        self.changed.clear();
        self.from_home.clear();
        self.wanted.clear();
        self.peer_wanted.clear();
        self.homebound.clear();
    }
}

impl Manager {
    /// Reads, before carrying out `actions`, every page they will read from a device (write-backs
    /// and device-to-device copies): per source device, one job revokes write access to all of
    /// them and reads them, where reading them one at a time cost a round trip to the worker
    /// per page (most of an oversubscribed run's request time, and of a multi-device pass's
    /// boundary pages). A page written back is read by the worker straight into its home copy
    /// (one copy; `written_home`), the others into pooled buffers (`read_ahead`), which
    /// `execute` then hands on. A page copied to a device of the source's peer group, and not
    /// written home by the same list, is not read at all: it is only made read-only here (`peer_ahead`), and `carry_out` queues a
    /// copy on the device (`DeviceOp::PeerCopy`) reading the source's slot, which the list
    /// does not overwrite before that copy is acknowledged (`Outbox::peer_sources`).
    ///
    /// Reading early is the same as reading in order unless an earlier action in the list
    /// copies to, installs on or invalidates that (device, page) first; those are left to be
    /// read in order. Likewise a write-back is done early only if no earlier action in the list
    /// copies that page from home (which must see the older home value). (Under the memory lock
    /// neither can happen: a device granted a page is locked, so no later grant in the same
    /// list takes it from it.)
    pub(super) fn read_ahead(&mut self, actions: &[Action]) -> Result<()> {
        let mut sets = std::mem::take(&mut self.ahead_sets);
        sets.clear();
        let AheadSets {
            changed,
            from_home,
            wanted,
            peer_wanted,
            homebound,
        } = &mut sets;
        let n = self.workers.len();
        let mut reads: Vec<Vec<(GlobalPage, SlotAddr)>> = vec![Vec::new(); n];
        let mut backs: Vec<Vec<HomeBound>> = vec![Vec::new(); n];
        let mut peer: Vec<Vec<(GlobalPage, SlotAddr)>> = vec![Vec::new(); n];
        // A page this list also writes home is read back to the host anyway; the reader is
        // then written from there (one wait), not copied on the device as well (two waits:
        // on the H100, boiling 1024² on 2 devices spent 12.8–13.5 ms a frame in the manager
        // with such pages copied on the device, 9.0–9.7 without; docs/EVALUATION.md).
        homebound.extend(actions.iter().filter_map(|a| match *a {
            Action::WriteBack { page, from } => Some((from, page)),
            _ => None,
        }));
        for a in actions {
            match *a {
                Action::WriteBack { page, from } => {
                    let key = (from, page);
                    if !changed.contains(&key) && !from_home.contains(&page) && wanted.insert(key) {
                        let at = self.slot(from, page)?;
                        let (obj, local, bytes) = self.page_bytes(page)?;
                        backs[from.index()].push((page, at, obj, local, bytes));
                    }
                }
                Action::Copy {
                    page,
                    from: Source::Device(o),
                    to,
                } => {
                    changed.insert((to, page));
                    let key = (o, page);
                    if self.peers(o, to) && !homebound.contains(&key) {
                        // Only made read-only now; copied on the device in order (`carry_out`),
                        // while the source slot still holds what it holds now.
                        if !changed.contains(&key) && peer_wanted.insert(key) {
                            let at = self.slot(o, page)?;
                            peer[o.index()].push((page, at));
                        }
                    } else if !changed.contains(&key) && wanted.insert(key) {
                        let at = self.slot(o, page)?;
                        reads[o.index()].push((page, at));
                    }
                }
                Action::Copy { page, to, .. } => {
                    changed.insert((to, page));
                    from_home.insert(page);
                }
                Action::Invalidate { page, device } | Action::Install { page, device, .. } => {
                    changed.insert((device, page));
                }
                _ => {}
            }
        }
        self.ahead_sets = sets;
        let mut out = self.outbox();
        let mut jobs = Vec::new();
        for (d, ((list, back), peer)) in reads.into_iter().zip(backs).zip(peer).enumerate() {
            if list.is_empty() && back.is_empty() && peer.is_empty() {
                continue;
            }
            let device = DeviceId(d as u8);
            let revoked = list
                .iter()
                .map(|&(page, at)| (page, at))
                .chain(back.iter().map(|&(page, at, ..)| (page, at)))
                .chain(peer.iter().copied());
            for (page, at) in revoked {
                out.push(
                    device,
                    DeviceOp::Set(page, PageDescriptor::resident(at, false)),
                );
            }
            out.flush(&self.workers, device);
            let mut bufs = Vec::with_capacity(list.len());
            for &(page, _) in &list {
                let (_, _, bytes) = self.page_bytes(page)?;
                bufs.push(self.buffer(bytes));
            }
            let slots: Vec<SlotAddr> = list.iter().map(|&(_, at)| at).collect();
            let home_slots: Vec<_> = back
                .iter()
                .map(|&(_, at, obj, local, bytes)| (at, obj, local, bytes))
                .collect();
            // Whatever is pending for these pages is older than what goes home now.
            for &(page, ..) in &back {
                self.later.forget(page);
            }
            // An eviction's write-backs are read in the background where the backend can: no
            // copy from home in the same list reads them (a victim is never asked for), and
            // anything later that needs home's bytes takes them first (`Manager::settle_home`).
            let background = self.evicting && !back.is_empty();
            let mut mems: Vec<u16> = peer
                .iter()
                .map(|&(_, at)| at.memory)
                .filter(|&m| !self.peer_memories.contains_key(&(device, m)))
                .collect();
            mems.sort_unstable();
            mems.dedup();
            let home = self.home.clone();
            // Behind the revocations in the worker's queue: once it answers, every launch that
            // could still store into the pages has run (and, on a shared queue, was submitted
            // before any peer copy of this list will be).
            let job = self.workers[d].submit_here(move |dev| {
                let t = std::time::Instant::now();
                let mut bufs = bufs;
                let later = if background {
                    let at: Vec<SlotAddr> = home_slots.iter().map(|h| h.0).collect();
                    dev.read_slots_later(&at)?
                } else {
                    None
                };
                let home_slots = if later.is_some() {
                    Vec::new()
                } else {
                    home_slots
                };
                // All of the job's slots in one read where the backend batches reads, else
                // each straight into its buffer.
                let all: Vec<SlotAddr> = slots
                    .iter()
                    .copied()
                    .chain(home_slots.iter().map(|h| h.0))
                    .collect();
                if let Some(data) = read_batched(dev, &all)? {
                    let mut data = data.into_iter();
                    for (buf, d) in bufs.iter_mut().zip(data.by_ref()) {
                        copy_slot(buf, &d)?;
                    }
                    for ((_, obj, local, bytes), d) in home_slots.into_iter().zip(data) {
                        let mut h = write_home(&home)?;
                        copy_slot(h.page_mut(obj, local, bytes)?, &d)?;
                    }
                } else {
                    for (at, buf) in slots.into_iter().zip(bufs.iter_mut()) {
                        dev.read_slot_to(at, buf)?;
                    }
                    // One page per lock, so workers writing back at once interleave.
                    for (at, obj, local, bytes) in home_slots {
                        let mut h = write_home(&home)?;
                        dev.read_slot_to(at, h.page_mut(obj, local, bytes)?)?;
                    }
                }
                let nanos = t.elapsed().as_nanos() as u64;
                let handles = mems
                    .into_iter()
                    .map(|m| dev.peer_memory(m).map(|h| (m, h)))
                    .collect::<Result<Vec<_>>>()?;
                Ok((bufs, handles, nanos, later))
            });
            jobs.push((device, list, back, peer, job));
        }
        let sent = out.finish(&self.workers);
        self.copy_nanos += out.copy_nanos;
        self.recycle(out.take_spent());
        self.keep_outbox(out);
        // Every job is waited for before any error goes out, so none is still writing home
        // when the manager carries on.
        let done: Vec<_> = jobs
            .into_iter()
            .map(|(device, list, back, peer, job)| {
                (device, list, back, peer, job.wait().and_then(|r| r))
            })
            .collect();
        sent?;
        for (device, list, back, peer, res) in done {
            let (bufs, handles, nanos, later) = res?;
            self.copy_nanos += nanos;
            for (m, h) in handles {
                self.peer_memories.insert((device, m), h);
            }
            for (page, at) in peer {
                self.peer_ahead.insert((device, page), at);
            }
            for ((page, _), data) in list.into_iter().zip(bufs) {
                self.read_ahead.insert((device, page), data);
            }
            for &(page, ..) in &back {
                self.written_home.insert((device, page));
            }
            if let Some(read) = later {
                let dests = back
                    .into_iter()
                    .map(|(page, _, obj, local, bytes)| (page, obj, local, bytes))
                    .collect();
                self.later.add(read, dests);
            }
        }
        self.bound_later()
    }

    /// A page buffer of `bytes` from the pool, or a fresh one.
    pub(super) fn buffer(&mut self, bytes: u64) -> Vec<u8> {
        match self.pool.pop() {
            Some(mut b) => {
                b.resize(bytes as usize, 0);
                b
            }
            None => vec![0; bytes as usize],
        }
    }

    /// Returns spent page buffers to the pool, up to `POOL_BYTES`.
    pub(super) fn recycle(&mut self, spent: Vec<Vec<u8>>) {
        let mut held: usize = self.pool.iter().map(Vec::capacity).sum();
        for b in spent {
            if held + b.capacity() > POOL_BYTES {
                break;
            }
            held += b.capacity();
            self.pool.push(b);
        }
    }

    /// Whether a page moves from device `from` to device `to` as a copy on the device.
    pub(super) fn peers(&self, from: DeviceId, to: DeviceId) -> bool {
        let g = |d: DeviceId| self.peer_groups.get(d.index()).copied().flatten();
        from != to && g(from).is_some() && g(from) == g(to)
    }

    pub(super) fn page_bytes(&self, page: GlobalPage) -> Result<(ObjectId, u64, u64)> {
        let (e, local) = self
            .space
            .object_of(page)
            .ok_or(tessera_core::CoreError::UnknownPage(page))?;
        Ok((e.id, local, e.desc.page_bytes()))
    }

    pub(super) fn slot(&self, d: DeviceId, page: GlobalPage) -> Result<SlotAddr> {
        self.slots[d.index()]
            .get(page.index())
            .copied()
            .flatten()
            .ok_or_else(|| RuntimeError::Backend {
                device: d,
                message: format!("directory lists a copy of {page} the device does not hold"),
            })
    }

    /// The slot's bytes, the time the read took added to `copy_nanos`.
    pub(super) fn read_slot(&mut self, d: DeviceId, at: SlotAddr) -> Result<Vec<u8>> {
        let (data, nanos) = self.workers[d.index()].call_here(move |dev| {
            let mut nanos = 0;
            let data = copied(&mut nanos, || dev.read_slot(at))?;
            Ok((data, nanos))
        })?;
        self.copy_nanos += nanos;
        Ok(data)
    }

    /// Carries out actions in order. Slot writes and descriptor updates are collected per
    /// device and sent as one job per device (a worker runs its queue in order, and a driver
    /// launches only after the reply), so a batch of a thousand pages costs a few channel
    /// round trips, not thousands. A device's collected work is sent before any read from it,
    /// and every acknowledgement is in before a request's reply goes out.
    pub(super) fn execute(&mut self, actions: Vec<Action>) -> Result<()> {
        let res = self
            .read_ahead(&actions)
            .and_then(|()| self.execute_in_order(actions));
        let left: Vec<Vec<u8>> = self.read_ahead.drain().map(|(_, b)| b).collect();
        self.recycle(left);
        self.written_home.clear();
        self.peer_ahead.clear();
        res
    }

    pub(super) fn execute_in_order(&mut self, actions: Vec<Action>) -> Result<()> {
        let mut out = self.outbox();
        let res = self.carry_out(&mut out, actions);
        // After an error too: no job of this list is still running when the manager goes on.
        let res = res.and(out.finish(&self.workers));
        self.copy_nanos += out.copy_nanos;
        let spent = out.take_spent();
        self.recycle(spent);
        self.keep_outbox(out);
        res
    }

    /// An idle outbox: the one kept from the last action list, or a new one.
    pub(super) fn outbox(&mut self) -> Outbox {
        match self.spare_outbox.take() {
            Some(out) => out,
            None => Outbox::new(self.workers.len(), self.home.clone(), self.held.clone()),
        }
    }

    /// Keeps a finished outbox for the next action list, its copy time already taken.
    pub(super) fn keep_outbox(&mut self, mut out: Outbox) {
        if out.is_idle() {
            out.copy_nanos = 0;
            self.spare_outbox = Some(out);
        }
    }

    pub(super) fn carry_out(&mut self, out: &mut Outbox, actions: Vec<Action>) -> Result<()> {
        // Pages this list wrote home from a device, for the copies of them that follow.
        let mut homed: HashSet<(DeviceId, GlobalPage)> = HashSet::default();
        for a in actions {
            match a {
                Action::Copy { page, from, to } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    // The bytes are in the source's slot on a device both share (copied there),
                    // at home (the worker copies them into the slot itself: one copy), read
                    // ahead from the source, or (rarely) read from it now.
                    let fill = match from {
                        Source::Home => {
                            self.traffic[to.index()].host_to_device.add(bytes);
                            Fill::Home
                        }
                        Source::Device(o) => {
                            let t = &mut self.traffic[to.index()];
                            if homed.contains(&(o, page)) || self.written_home.contains(&(o, page))
                            {
                                t.add_from_device_homed(o.index(), bytes);
                            } else {
                                t.add_from_device(o.index(), bytes);
                            }
                            if let Some(src) = self.peer_ahead.remove(&(o, page)) {
                                self.traffic[to.index()].device_to_device_peer.add(bytes);
                                Fill::Peer(o, src)
                            } else if self.written_home.contains(&(o, page)) {
                                Fill::Home
                            } else if let Some(d) = self.read_ahead.remove(&(o, page)) {
                                Fill::Bytes(d)
                            } else {
                                Fill::Bytes(self.revoke_and_read(out, o, page)?)
                            }
                        }
                    };
                    if matches!(fill, Fill::Home) {
                        self.settle_home([page])?;
                    }
                    let (at, created) = self.memories[to.index()].alloc(bytes)?;
                    // The slot was freed earlier in this list and a queued peer copy still
                    // reads it: that copy must be done before anything overwrites the slot.
                    if out.peer_sources.contains(&(to, at)) {
                        out.finish(&self.workers)?;
                    }
                    let fresh_memory = created.is_some();
                    if let Some(m) = created {
                        out.push(to, DeviceOp::Create(m.id, m.slot_bytes, m.capacity));
                    }
                    if matches!(fill, Fill::Home)
                        && !fresh_memory
                        && self.copy_during_launch(out, to, at, obj, local, bytes)?
                    {
                        self.slots[to.index()][page.index()] = Some(at);
                        self.evictors[to.index()].resident.insert(page);
                        continue;
                    }
                    let op = match fill {
                        Fill::Bytes(d) => DeviceOp::Write(at, d),
                        Fill::Home => DeviceOp::WriteFromHome {
                            at,
                            obj,
                            local,
                            bytes,
                        },
                        Fill::Peer(o, src) => {
                            let from = self
                                .peer_memories
                                .get(&(o, src.memory))
                                .cloned()
                                .ok_or_else(|| RuntimeError::Backend {
                                    device: o,
                                    message: format!(
                                        "no handle to physical memory {} for a peer copy",
                                        src.memory
                                    ),
                                })?;
                            out.peer_sources.insert((o, src));
                            DeviceOp::PeerCopy(PeerCopy {
                                from,
                                from_slot: src.slot,
                                at,
                            })
                        }
                    };
                    out.push(to, op);
                    self.slots[to.index()][page.index()] = Some(at);
                    self.evictors[to.index()].resident.insert(page);
                }
                Action::WriteBack { page, from } => {
                    let (obj, local, bytes) = self.page_bytes(page)?;
                    self.traffic[from.index()].device_to_host.add(bytes);
                    homed.insert((from, page));
                    if self.evicting {
                        self.traffic[from.index()].eviction_write_backs += 1;
                    } else {
                        self.traffic[from.index()].coherence_write_backs += 1;
                    }
                    if self.written_home.contains(&(from, page)) {
                        // The source's worker wrote it home during `read_ahead`.
                        continue;
                    }
                    // Left in `read_ahead`, not taken: a read of a modified page copies the
                    // same data on to the reader next, and must not read the owner twice.
                    let read;
                    let data = match self.read_ahead.get(&(from, page)) {
                        Some(d) => d,
                        None => {
                            read = self.revoke_and_read(out, from, page)?;
                            &read
                        }
                    };
                    debug_assert_eq!(data.len() as u64, bytes);
                    // Copies from home queued before this write must read the value before it.
                    if out.reads_home {
                        out.finish(&self.workers)?;
                    }
                    self.later.forget(page);
                    let home = &self.home;
                    copied(&mut self.copy_nanos, || {
                        write_home(home)?.write_page(obj, local, data)
                    })?;
                }
                Action::Invalidate { page, device } => {
                    let at = self.slot(device, page)?;
                    self.slots[device.index()][page.index()] = None;
                    self.memories[device.index()].free(at)?;
                    out.freed.insert((device, at));
                    let ev = &mut self.evictors[device.index()];
                    ev.resident.remove(page);
                    // Leaving before a launch was seen using it: not a hit (eviction settles
                    // its candidates' hits before choosing; another device's write does not).
                    ev.prefetched.remove(&page);
                    if self.evicting {
                        let t = &mut self.traffic[device.index()];
                        t.evictions += 1;
                        ev.evicted.insert(page, t.batches);
                    } else {
                        self.traffic[device.index()].invalidations += 1;
                        // Not the policy's choice: every policy would load it again.
                        if let Some(t) = &mut self.trace {
                            t[device.index()].push(TraceEvent::Lost(page));
                        }
                    }
                    out.push(device, DeviceOp::Set(page, PageDescriptor::NOT_RESIDENT));
                }
                Action::Install {
                    page,
                    device,
                    writable,
                } => self.set_page(out, device, page, writable)?,
                Action::GrantWrite { page, device } => self.set_page(out, device, page, true)?,
                Action::Downgrade { page, device } => self.set_page(out, device, page, false)?,
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

    /// Copies a page from home into `to`'s slot `at` on this thread, now, while `to` may be
    /// running a launch (`stage_around`), where that is safe and the device takes such writes:
    /// `false` leaves the copy to the worker, behind the launch. A slot freed by this list's
    /// own invalidations may still be mapped by the running launch until the worker runs them
    /// (the quarantine), so it is filled on the worker.
    pub(super) fn copy_during_launch(
        &mut self,
        out: &Outbox,
        to: DeviceId,
        at: SlotAddr,
        obj: ObjectId,
        local: u64,
        bytes: u64,
    ) -> Result<bool> {
        if self.copying_during_launch != Some(to) || out.freed.contains(&(to, at)) {
            return Ok(false);
        }
        let Some(Some(sink)) = self.sinks.get(&(to, at.memory)) else {
            return Ok(false);
        };
        // Not timed into `copy_nanos`: this copy runs beside the launch, not in the device's
        // wait for the manager, and the model already overlaps it with the work.
        sink.write_slot(at.slot, read_home(&self.home)?.page(obj, local, bytes)?)
            .map_err(|message| RuntimeError::Backend {
                device: to,
                message: format!("staged copy into physical memory {}: {message}", at.memory),
            })?;
        self.traffic[to.index()]
            .host_to_device_during_launch
            .add(bytes);
        Ok(true)
    }

    /// Reads the owner's copy of a page it is about to lose write access to. The owner need
    /// not be locked, so a launch of its own could store into the page between our read and
    /// a later downgrade, and that store would be lost (found by the litmus runner). Making
    /// the page read-only on the owner's worker first, in the same queue as the read, closes
    /// the window: launches before it are in the data we read, launches after it fault and
    /// ask the memory manager, which answers only after this batch.
    pub(super) fn revoke_and_read(
        &mut self,
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

    pub(super) fn set_page(
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
    pub(super) fn resize_tables(&mut self) -> Result<()> {
        let pages = self.space.page_count();
        for s in &mut self.slots {
            s.resize(pages as usize, None);
        }
        let acks: Vec<_> = self
            .workers
            .iter()
            .map(|w| w.submit_here(move |d| d.resize_page_table(pages)))
            .collect();
        acks.into_iter().try_for_each(|p| p.wait()?)
    }
}

/// The slots `at` in one read where the backend batches reads (a GPU: one wait instead of one
/// per slot); `None` for a single slot or where the backend declines, and the caller reads
/// them one by one.
pub(super) fn read_batched(dev: &mut dyn Device, at: &[SlotAddr]) -> Result<Option<Vec<Vec<u8>>>> {
    if at.len() < 2 {
        return Ok(None);
    }
    match dev.read_slots(at)? {
        Some(data) if data.len() != at.len() => Err(RuntimeError::Internal(format!(
            "{} slots read back for {} asked",
            data.len(),
            at.len()
        ))),
        batched => Ok(batched),
    }
}
