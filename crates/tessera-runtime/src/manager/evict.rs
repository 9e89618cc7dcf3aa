//! Making room: choosing victims under the policy, evicting them, and noticing thrashing.

use super::*;

impl Manager {
    /// Evicts enough of `device`'s pages that the batch fits its budget, never a page of the
    /// batch, of `keep`, or of a non-evictable object; thrashing pages that are pinned go only
    /// when nothing else can. Also counts refaults and thrashing, and records the trace.
    /// `pages[..demanded]` were asked for; the rest are prefetched, which are not faults (no
    /// refaults counted) and not steps of the trace (OPT needs only what had to be resident).
    pub(super) fn make_room(
        &mut self,
        device: DeviceId,
        pages: &[PageRequest],
        demanded: usize,
        keep: &[GlobalPage],
    ) -> Result<()> {
        if device.index() >= self.workers.len() || self.protocol.locked().contains(device) {
            // The protocol refuses these, with its own error, before anything changes.
            return Ok(());
        }
        self.make_room_for(device, pages, demanded, keep)
    }

    /// `make_room` for a device that is unlocked, or locked and staging, whose `keep` then
    /// holds every page its running procedure holds (the protocol refuses to evict those).
    pub(super) fn make_room_for(
        &mut self,
        device: DeviceId,
        pages: &[PageRequest],
        demanded: usize,
        keep: &[GlobalPage],
    ) -> Result<()> {
        let d = device.index();
        // Per page size: (bytes, pages asked, pages not resident). A batch has one or two
        // sizes, so a list searched in place beats a map built per batch.
        let mut sizes: Vec<(u64, u64, u64)> = Vec::new();
        for r in pages {
            let (_, _, bytes) = self.page_bytes(r.page)?;
            let i = match sizes.iter().position(|s| s.0 == bytes) {
                Some(i) => i,
                None => {
                    sizes.push((bytes, 0, 0));
                    sizes.len() - 1
                }
            };
            sizes[i].1 += 1;
            if self.slots[d]
                .get(r.page.index())
                .copied()
                .flatten()
                .is_none()
            {
                sizes[i].2 += 1;
            }
        }
        let now = self.traffic[d].batches;
        let mark = self.memories[d].mark();
        if let Err(e) = self.make_room_by_size(device, pages, keep, &sizes, now) {
            self.memories[d].unreserve_to(mark);
            return Err(e);
        }
        // Counted once room is made: a refused batch (retried alone after its prefetch did
        // not fit) must not count its refaults twice.
        self.count_refaults(device, &pages[..demanded], now);
        // Only batches that are granted are steps of the trace: a refused one needed nothing.
        if let Some(t) = &mut self.trace {
            let mut step: Vec<GlobalPage> = pages[..demanded]
                .iter()
                .map(|r| r.page)
                .chain(keep.iter().copied())
                .collect();
            step.sort_unstable();
            step.dedup();
            t[d].push(TraceEvent::Step(step));
        }
        Ok(())
    }

    /// `make_room_for`, size by size. Each size's shortfall first takes new memories from the
    /// unreserved budget, reserved at once, so that the next size counts only what is left;
    /// the rest is evicted from that size's own pages, since eviction frees slots, not budget.
    fn make_room_by_size(
        &mut self,
        device: DeviceId,
        pages: &[PageRequest],
        keep: &[GlobalPage],
        sizes: &[(u64, u64, u64)],
        now: u64,
    ) -> Result<()> {
        let d = device.index();
        for &(bytes, count, need) in sizes {
            let free = self.memories[d].free_slots(bytes);
            if need <= free {
                continue;
            }
            let room = free + self.memories[d].reserve(bytes, need - free);
            if need <= room {
                continue;
            }
            let requested: HashSet<GlobalPage> = pages.iter().map(|r| r.page).collect();
            let kept_set: HashSet<GlobalPage> = keep.iter().copied().collect();
            let k = (need - room) as usize;
            // Resident pages of this size by what may happen to them.
            let mut free_to_go = Vec::new();
            let mut pinned_now = 0u64;
            let mut kept = 0u64;
            for p in self.evictors[d].resident.iter() {
                let Ok((obj, _, b)) = self.page_bytes(p) else {
                    continue;
                };
                if b != bytes {
                    continue;
                }
                if requested.contains(&p) {
                    // Stays, and is already counted in the batch.
                    continue;
                }
                if kept_set.contains(&p) {
                    kept += 1;
                } else if self.pinned.contains(&obj) {
                    pinned_now += 1;
                } else {
                    free_to_go.push(p);
                }
            }
            let capacity = self.memories[d].capacity(bytes).saturating_sub(pinned_now);
            if (free_to_go.len() as u64) < k as u64 {
                return Err(RuntimeError::OverBudget {
                    device,
                    pages: count + kept,
                    capacity,
                    page_bytes: bytes,
                    budget_bytes: self.memories[d].budget_bytes,
                });
            }
            let stamps: HashMap<GlobalPage, u64> =
                if self.evictors[d].resident.policy().uses_stamps() {
                    let ask = free_to_go.clone();
                    let times = self.workers[d].call_here(move |dev| dev.page_times(&ask))?;
                    free_to_go.iter().copied().zip(times).collect()
                } else {
                    HashMap::default()
                };
            let go: HashSet<GlobalPage> = free_to_go.into_iter().collect();
            self.resolve_prefetched(device, go.iter().copied(), &stamps)?;
            let ev = &mut self.evictors[d];
            let pins = &ev.pins;
            let stamp = |p: GlobalPage| stamps.get(&p).copied().unwrap_or(0);
            let spared = |p: GlobalPage| pins.get(&p).is_some_and(|&until| until > now);
            let mut victims = ev
                .resident
                .choose(k, |p| go.contains(&p) && !spared(p), stamp);
            if victims.len() < k {
                let more = ev.resident.choose(
                    k - victims.len(),
                    |p| go.contains(&p) && !victims.contains(&p),
                    stamp,
                );
                victims.extend(more);
            }
            self.evict(device, victims)?;
        }
        Ok(())
    }

    pub(super) fn count_refaults(&mut self, device: DeviceId, pages: &[PageRequest], now: u64) {
        let d = device.index();
        let ev = &mut self.evictors[d];
        let t = &mut self.traffic[d];
        let cap_pins = (ev.resident.len() as u64).max(2) / 2;
        ev.pins.retain(|_, until| *until > now);
        for r in pages {
            if ev.resident.contains(r.page) {
                continue;
            }
            let Some(at) = ev.evicted.remove(&r.page) else {
                continue;
            };
            t.refaults += 1;
            if now.saturating_sub(at) > THRASH_WINDOW {
                ev.events.remove(&r.page);
                continue;
            }
            let n = ev.events.entry(r.page).or_default();
            *n += 1;
            if *n == THRASH_EVENTS {
                t.thrashing_pages += 1;
            }
            if *n >= THRASH_EVENTS
                && self.thrashing == Thrashing::Pin
                && (ev.pins.len() as u64) < cap_pins
                && ev.pins.insert(r.page, now + PIN_BATCHES).is_none()
            {
                t.thrash_pins += 1;
            }
        }
    }

    /// Releases the pages through the protocol: a modified one is written home first.
    pub(super) fn evict(&mut self, device: DeviceId, victims: Vec<GlobalPage>) -> Result<()> {
        if victims.is_empty() {
            return Ok(());
        }
        let actions = self.protocol.handle(Message::Evict {
            device,
            pages: victims,
        })?;
        self.evicting = true;
        if let Some(p) = self.pressed.get(device.index()) {
            p.store(true, Ordering::Relaxed);
        }
        let res = self.execute(actions);
        self.evicting = false;
        res
    }
}
