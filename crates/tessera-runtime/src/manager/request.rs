//! Requests and staging: a device's batch of pages through the protocol, now or ahead of need.

use super::*;

impl Manager {
    pub(super) fn request(
        &mut self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
        reply: Sender<Result<()>>,
    ) {
        if let Some(e) = &self.broken {
            let _ = reply.send(Err(e.clone()));
            return;
        }
        if !self.modes.is_empty() {
            if let Err(e) = self.check_modes(device, &pages) {
                // Refused before anything changed: only this request fails.
                let _ = reply.send(Err(e));
                return;
            }
        }
        let demanded = pages.len();
        let mut pages = pages;
        let extra = match self.prefetch_for(device, &pages) {
            Ok(extra) => extra,
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        };
        let room = if extra.is_empty() {
            self.make_room(device, &pages, demanded, &keep)
        } else {
            let mut all = pages.clone();
            all.extend(extra);
            match self.make_room(device, &all, demanded, &keep) {
                Ok(()) => {
                    pages = all;
                    self.note_prefetched(device, &pages[demanded..])
                }
                // Prefetch is a bet: when it does not fit beside the batch, the batch goes
                // alone (any evictions made for the pair lose nothing).
                Err(RuntimeError::OverBudget { .. }) => {
                    self.make_room(device, &pages, demanded, &keep)
                }
                Err(e) => Err(e),
            }
        };
        match room {
            Ok(()) => {}
            Err(e @ RuntimeError::OverBudget { .. }) | Err(e @ RuntimeError::Core(_)) => {
                // Refused before anything changed (or after whole evictions only, which lose
                // nothing): only this request fails.
                let _ = reply.send(Err(e));
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        if let Some(t) = self.traffic.get_mut(device.index()) {
            t.batches += 1;
            t.page_requests += demanded as u64;
            t.prefetched += (pages.len() - demanded) as u64;
            if let Some(log) = &mut self.request_log {
                // A batch may name pages its device still holds (a relaunch round sends its
                // wave's pages whole once other devices keep taking them back); those cost
                // no move, and a trace replayed without that contention would not ask again.
                let misses = self.held.missing(device, pages[..demanded].to_vec());
                log[device.index()].extend(misses.iter().map(|p| p.page));
            }
            for p in &pages[..demanded] {
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

    /// A staged batch (`Cmd::Stage`): checked against the protocol first, so that a refused
    /// stage evicts nothing; then room is made keeping the pages the device's running
    /// procedure holds, and the batch is granted at once.
    ///
    /// With a `start` (`ManagerHandle::stage_around`) the device's worker is idle while room
    /// is made (time stamps, write-backs, invalidations run at once); then the launch is
    /// queued, and the copies from home go into the device's slots from this thread during
    /// it, only the descriptors queuing behind it. Without one (`ManagerHandle::stage`) every
    /// device job queues on the worker in order behind whatever the caller queued before;
    /// either way the manager waits for the jobs as for any batch.
    pub(super) fn stage(
        &mut self,
        device: DeviceId,
        pages: Vec<PageRequest>,
        start: Option<LaunchStarter>,
        reply: Sender<Result<()>>,
    ) {
        if let Some(e) = &self.broken {
            let _ = reply.send(Err(e.clone()));
            return;
        }
        let refused = |m: &mut Self, e: RuntimeError| {
            if let Some(t) = m.traffic.get_mut(device.index()) {
                t.stage_refusals += 1;
            }
            let _ = reply.send(Err(e));
        };
        if !self.modes.is_empty() {
            if let Err(e) = self.check_modes(device, &pages) {
                refused(self, e);
                return;
            }
        }
        let id = RequestId(self.next_request);
        self.next_request += 1;
        let batch = RequestBatch { id, device, pages };
        if let Err(e) = self.protocol.check_stage(&batch) {
            refused(self, e.into());
            return;
        }
        let keep = self.protocol.held(device).to_vec();
        let demanded = batch.pages.len();
        let mut batch = batch;
        // With `--prefetch tree` the stage takes the tree's choice too (UVM's prefetch, made
        // while the device computes), when the protocol grants the larger stage and it fits;
        // otherwise the stage goes alone, as a request's prefetch does.
        let extra = match self.stage_prefetch(device, &batch, &keep) {
            Ok(extra) => extra,
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        };
        let room = match extra {
            Some(all) => match self.make_room_for(device, &all.pages, demanded, &keep) {
                Ok(()) => {
                    batch = all;
                    self.note_prefetched(device, &batch.pages[demanded..])
                }
                Err(RuntimeError::OverBudget { .. }) => {
                    self.make_room_for(device, &batch.pages, demanded, &keep)
                }
                Err(e) => Err(e),
            },
            None => self.make_room_for(device, &batch.pages, demanded, &keep),
        };
        match room {
            Ok(()) => {}
            Err(e @ RuntimeError::OverBudget { .. }) | Err(e @ RuntimeError::Core(_)) => {
                refused(self, e);
                return;
            }
            Err(e) => {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
        }
        let t = &mut self.traffic[device.index()];
        t.staged_batches += 1;
        t.staged_pages += demanded as u64;
        t.prefetched += (batch.pages.len() - demanded) as u64;
        if let Some(start) = start {
            // The worker is idle until `start`: the sinks are fetched without waiting behind
            // the launch.
            if let Err(e) = self.fetch_sinks(device) {
                let _ = reply.send(Err(e.clone()));
                self.fail_all(e);
                return;
            }
            start.start();
            self.copying_during_launch = Some(device);
        }
        match self.protocol.handle(Message::Stage(batch)) {
            Err(e) => {
                let _ = reply.send(Err(e.into()));
            }
            Ok(actions) => {
                self.waiting.insert(id, reply);
                if let Err(e) = self.execute(actions) {
                    self.fail_all(e);
                }
            }
        }
        self.copying_during_launch = None;
    }

    /// The stage with its tree prefetch added (pages outside the batch and the held pages,
    /// read copies from home), if there is any and the protocol would grant it; `None` to
    /// stage the batch alone.
    pub(super) fn stage_prefetch(
        &self,
        device: DeviceId,
        batch: &RequestBatch,
        held: &[GlobalPage],
    ) -> Result<Option<RequestBatch>> {
        let held: HashSet<GlobalPage> = held.iter().copied().collect();
        let extra: Vec<PageRequest> = self
            .tree_prefetch(device, &batch.pages)?
            .into_iter()
            .filter(|r| !held.contains(&r.page))
            .collect();
        if extra.is_empty() {
            return Ok(None);
        }
        let mut all = batch.clone();
        all.pages.extend(extra);
        Ok(self.protocol.check_stage(&all).is_ok().then_some(all))
    }

    /// Asks `device` for a slot sink of each physical memory it has that the manager has not
    /// asked about yet (`Device::slot_sink`; `None` is remembered too).
    pub(super) fn fetch_sinks(&mut self, device: DeviceId) -> Result<()> {
        let ids: Vec<u16> = self.memories[device.index()]
            .memories()
            .iter()
            // A memory reserved ahead is not on the device until its first slot is handed out.
            .filter(|m| m.announced())
            .map(|m| m.id)
            .filter(|&m| !self.sinks.contains_key(&(device, m)))
            .collect();
        if ids.is_empty() {
            return Ok(());
        }
        let got = self.workers[device.index()].call_here(move |dev| {
            Ok(ids
                .into_iter()
                .map(|m| (m, dev.slot_sink(m)))
                .collect::<Vec<_>>())
        })?;
        for (m, sink) in got {
            self.sinks.insert((device, m), sink);
        }
        Ok(())
    }
}
