//! Prefetch: the pages added to a request, and whether they were used.

use super::*;

impl Manager {
    /// The pages `Prefetch::Tree` adds to a batch for `device`: per object the batch touches,
    /// the bitmap tree's choice, kept to pages no device has modified (a read copy from home,
    /// which disturbs no other device and so can never be deferred behind a lock).
    pub(super) fn prefetch_for(
        &self,
        device: DeviceId,
        pages: &[PageRequest],
    ) -> Result<Vec<PageRequest>> {
        if self.protocol.locked().contains(device) {
            return Ok(Vec::new());
        }
        self.tree_prefetch(device, pages)
    }

    /// `prefetch_for` without its lock rule: a stage comes from a locked device, and its
    /// prefetch goes into the stage.
    pub(super) fn tree_prefetch(
        &self,
        device: DeviceId,
        pages: &[PageRequest],
    ) -> Result<Vec<PageRequest>> {
        let d = device.index();
        if self.prefetch == Prefetch::Off || d >= self.workers.len() {
            return Ok(Vec::new());
        }
        let asked: HashSet<GlobalPage> = pages.iter().map(|r| r.page).collect();
        // On a cluster this manager is asked only about the pages it is home to (a batch is
        // split by home), and only it may grant them: a region's other pages belong to other
        // homes, whose directories would never learn of a copy granted here (the device was
        // later told to write a page its home thought it did not hold).
        let homes = self.protocol.directory().home;
        let here = pages.first().map(|r| homes.home(r.page));
        let mut by_object: HashMap<ObjectId, (ObjectEntry, Vec<u64>)> = HashMap::default();
        for r in pages {
            // Unknown pages: the protocol refuses the batch with its own error.
            let Some((e, local)) = self.space.object_of(r.page) else {
                return Ok(Vec::new());
            };
            by_object
                .entry(e.id)
                .or_insert_with(|| (*e, Vec::new()))
                .1
                .push(local);
        }
        let mut out = Vec::new();
        for (id, (e, locals)) in by_object {
            if self.pinned.contains(&id) {
                continue;
            }
            let first = e.pages().start;
            let resident = |local: u64| {
                self.slots[d]
                    .get((first + local) as usize)
                    .copied()
                    .flatten()
                    .is_some()
            };
            let more = tessera_core::prefetch::tree_prefetch(
                e.desc.page_count(),
                PREFETCH_REGION,
                tessera_core::prefetch::DEFAULT_THRESHOLD_PCT,
                resident,
                &locals,
            );
            for local in more {
                let page = GlobalPage(first + local);
                if asked.contains(&page) || Some(homes.home(page)) != here {
                    continue;
                }
                if self.protocol.directory().entry(page)?.owner.is_none() {
                    out.push(PageRequest {
                        page,
                        access: tessera_core::Access::Read,
                    });
                }
            }
        }
        out.sort_unstable_by_key(|r| r.page);
        Ok(out)
    }

    /// Remembers the time stamps of pages about to be prefetched, so that a later, newer
    /// stamp shows a launch used one (a prefetch hit).
    pub(super) fn note_prefetched(
        &mut self,
        device: DeviceId,
        extra: &[PageRequest],
    ) -> Result<()> {
        if extra.is_empty() {
            return Ok(());
        }
        let ask: Vec<GlobalPage> = extra.iter().map(|r| r.page).collect();
        let times = {
            let ask = ask.clone();
            self.workers[device.index()].call_here(move |dev| dev.page_times(&ask))?
        };
        let ev = &mut self.evictors[device.index()];
        for (p, t) in ask.into_iter().zip(times) {
            ev.prefetched.insert(p, t);
        }
        Ok(())
    }

    /// Counts, among `pages`, the prefetched ones a launch has touched since they came (a
    /// newer time stamp). Stamps in `known`, already read for the policy, are reused; the
    /// rest are asked of the device.
    pub(super) fn resolve_prefetched(
        &mut self,
        device: DeviceId,
        pages: impl IntoIterator<Item = GlobalPage>,
        known: &HashMap<GlobalPage, u64>,
    ) -> Result<()> {
        let d = device.index();
        let open: Vec<GlobalPage> = pages
            .into_iter()
            .filter(|p| self.evictors[d].prefetched.contains_key(p))
            .collect();
        if open.is_empty() {
            return Ok(());
        }
        let missing: Vec<GlobalPage> = open
            .iter()
            .copied()
            .filter(|p| !known.contains_key(p))
            .collect();
        let mut now: HashMap<GlobalPage, u64> = HashMap::default();
        if !missing.is_empty() {
            let ask = missing.clone();
            let times = self.workers[d].call_here(move |dev| dev.page_times(&ask))?;
            now.extend(missing.into_iter().zip(times));
        }
        let ev = &mut self.evictors[d];
        for p in open {
            let t = known.get(&p).or_else(|| now.get(&p)).copied().unwrap_or(0);
            if ev.prefetched.get(&p).is_some_and(|&at| t > at) {
                ev.prefetched.remove(&p);
                self.traffic[d].prefetch_hits += 1;
            }
        }
        Ok(())
    }

    /// Settles the hits of every device's prefetched pages that are still resident, before
    /// the counters are read.
    pub(super) fn count_prefetch_hits(&mut self) -> Result<()> {
        for d in 0..self.workers.len() {
            let open: Vec<GlobalPage> = self.evictors[d].prefetched.keys().copied().collect();
            self.resolve_prefetched(DeviceId(d as u8), open, &HashMap::default())?;
        }
        Ok(())
    }
}
