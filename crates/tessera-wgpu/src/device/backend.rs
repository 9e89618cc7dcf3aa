//! The `Device` trait on a wgpu device: slots, page tables, peer copies and launches as the
//! runtime sees them, and the sinks the memory manager writes slots through.

use super::*;

impl Device for WgpuDevice {
    fn describe(&self) -> String {
        format!("wgpu ({}, {:?})", self.info.name, self.info.backend)
    }

    fn memory_limits(&self) -> tessera_core::MemoryLimits {
        tessera_core::MemoryLimits {
            max_memories: Some(MAX_MEMORIES as u16),
            max_memory_bytes: gpu::max_storage_bytes(&self.limits),
        }
    }

    fn create_memory(&mut self, memory: u16, slot_bytes: u64, capacity: u32) -> Result<()> {
        self.check()?;
        if memory as usize != self.memories.len()
            || slot_bytes == 0
            || !slot_bytes.is_multiple_of(4)
        {
            return Err(self.err(WgpuError::BadMemory { memory, slot_bytes }));
        }
        if memory as usize >= MAX_MEMORIES {
            return Err(self.err(WgpuError::TooManyMemories {
                memory,
                max: MAX_MEMORIES,
            }));
        }
        let bytes = slot_bytes * capacity as u64;
        let buffer = gpu::buffer(
            &self.device,
            "physical memory",
            bytes,
            scratch::STORAGE,
            gpu::max_storage_bytes(&self.limits),
        )
        .map_err(|e| self.err(e))?;
        self.memories.push(Memory {
            buffer,
            slot_words: slot_bytes / 4,
            capacity,
        });
        Ok(())
    }

    fn write_slot(&mut self, at: SlotAddr, data: &[u8]) -> Result<()> {
        self.check()?;
        let (off, len) = self.slot_range(at)?;
        if data.len() as u64 != len {
            return Err(self.err(WgpuError::SlotSize {
                bytes: data.len() as u64,
                slot_bytes: len,
            }));
        }
        // Slot reuse (docs/WGPU.md, "Slot reuse"): the memory manager gives a slot to another
        // page between launches. This queued write runs at the start of the next submission,
        // after every earlier one (queued launches among them) and before that submission's
        // own commands, so a read of the old data (`read_slot`, which has waited) precedes it
        // and the next launch sees the new data with the new descriptor, written by
        // `set_page` the same way.
        self.queue
            .write_buffer(&self.memories[at.memory as usize].buffer, off, data);
        Ok(())
    }

    fn write_slots(&mut self, writes: &[(SlotAddr, &[u8])]) -> Result<()> {
        if writes.len() < 2 {
            for &(at, data) in writes {
                self.write_slot(at, data)?;
            }
            return Ok(());
        }
        self.check()?;
        // One submission of copies out of a staging ring whose chunks are mapped again, not
        // allocated, batch after batch: a fresh 32 MiB staging buffer per batch spent its time
        // in page faults on the new mapping (docs/EVALUATION.md, `bench page-moves`). Same
        // order as `write_slot` (slot reuse): the copies run after every earlier submission
        // and before any later one.
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("slot writes"),
            });
        for &(at, data) in writes {
            let (off, len) = self.slot_range(at)?;
            let size = match wgpu::BufferSize::new(len) {
                Some(size) if data.len() as u64 == len => size,
                _ => {
                    return Err(self.err(WgpuError::SlotSize {
                        bytes: data.len() as u64,
                        slot_bytes: len,
                    }))
                }
            };
            let buffer = &self.memories[at.memory as usize].buffer;
            self.belt
                .write_buffer(&mut enc, buffer, off, size)
                .copy_from_slice(data);
        }
        self.belt.finish();
        self.submit(enc);
        self.belt.recall();
        Ok(())
    }

    fn read_slot(&mut self, at: SlotAddr) -> Result<Vec<u8>> {
        self.check()?;
        let (off, len) = self.slot_range(at)?;
        let mut out = self.read_back(&[(&self.memories[at.memory as usize].buffer, off, len)])?;
        Ok(out.pop().unwrap_or_default())
    }

    fn read_slots(&mut self, at: &[SlotAddr]) -> Result<Option<Vec<Vec<u8>>>> {
        self.check()?;
        let mut ranges = Vec::with_capacity(at.len());
        for &a in at {
            let (off, len) = self.slot_range(a)?;
            ranges.push((&self.memories[a.memory as usize].buffer, off, len));
        }
        // Measured on an H100 (`bench page-moves --backend wgpu`, write-back + read): one read
        // for all of a batch took 4 KiB pages from 0.10 to 0.35 GB/s and 64 KiB from 1.1–1.2 to
        // 1.4, but 256 KiB and 1 MiB pages from 2.5–3.6 down to 1.5. Not measured why; then
        // each read made a staging buffer of its own and copied a page three times (mapping to
        // one vector, to one per slot, into home). Now the staging buffer is kept and the
        // mapping is copied once per slot (`read_back`); the limit stays until a GPU measures
        // it again.
        let bytes: u64 = ranges.iter().map(|r| r.2).sum();
        if bytes > BATCHED_READ_MAX_PAGE * ranges.len() as u64 {
            return Ok(None);
        }
        self.read_back(&ranges).map(Some)
    }

    fn read_slots_later(&mut self, at: &[SlotAddr]) -> Result<Option<Box<dyn PendingRead>>> {
        self.check()?;
        if at.is_empty() {
            return Ok(None);
        }
        self.read_later(at).map(Some)
    }

    fn resize_page_table(&mut self, pages: u64) -> Result<()> {
        self.check()?;
        if pages > u32::MAX as u64 {
            return Err(self.err(WgpuError::PageTableTooLarge { pages }));
        }
        if pages * 8 > self.limits.max_storage_buffer_binding_size {
            return Err(self.err(WgpuError::OutOfMemory(format!(
                "a page table of {pages} pages does not fit one storage binding"
            ))));
        }
        // The stamps of the pages that stay move to the new buffer; the rest start at zero.
        let keep = (self.table.len() as u64).min(pages) * 4;
        let stamps = Self::stamp_buffer(&self.device, pages);
        if keep > 0 {
            let mut enc = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            enc.copy_buffer_to_buffer(&self.stamps, 0, &stamps, 0, keep);
            // Not waited for (docs/WGPU.md, "Slot reuse"): launches after it bind the new
            // buffer and read-backs of it come later in the queue, launches before it wrote the
            // old one before the copy reads it, and wgpu keeps the old buffer until the copy has
            // run. A resize follows every object created or freed: OO-VR makes two a pass,
            // and waiting here was most of its waits for the GPU.
            self.submit(enc);
        }
        self.stamps = stamps;
        self.stamps_seen = None;
        self.table.resize(pages as usize, 0);
        self.table_buf = Self::table_buffer(&self.device, pages);
        // The whole mirror goes up below: nothing is left to flush into the new buffer.
        self.table_dirty.borrow_mut().clear();
        if !self.table.is_empty() {
            self.queue
                .write_buffer(&self.table_buf, 0, bytemuck::cast_slice(&self.table));
        }
        Ok(())
    }

    fn page_times(&mut self, pages: &[GlobalPage]) -> Result<Vec<u64>> {
        self.check()?;
        let n = self.table.len() as u64;
        if let Some(&p) = pages.iter().find(|p| p.0 >= n) {
            return Err(RuntimeError::Core(CoreError::UnknownPage(p)));
        }
        let (Some(lo), Some(hi)) = (
            pages.iter().map(|p| p.0).min(),
            pages.iter().map(|p| p.0).max(),
        ) else {
            return Ok(Vec::new());
        };
        // Eviction asks again after the next launches: let them bring the stamps back.
        self.stamps_track = STAMP_LAUNCHES;
        // Stale stamps serve while launches are queued since the last read: theirs would cost
        // a wait for all of them, so the ranking is the one they found (docs/WGPU.md, "Stamps
        // while launches are queued"). The next settle carries the stamps back with the
        // launches' results.
        let usable = self.stamps_fresh || self.queued.has_pending();
        if let Some(seen) = self
            .stamps_seen
            .as_ref()
            .filter(|s| usable && s.len() as u64 > hi)
        {
            return Ok(pages
                .iter()
                .map(|p| abi::time_of(seen[p.index()], self.now))
                .collect());
        }
        // One read-back of the span the pages cover: a copy of 4 bytes a page, at most the
        // whole buffer, where a gather of scattered pages would need a kernel of its own.
        let b = self.read_back(&[(&self.stamps, lo * 4, (hi - lo + 1) * 4)])?;
        let stamps: Vec<u32> = words(&b[0]).collect();
        let times = pages
            .iter()
            .map(|p| abi::time_of(stamps[(p.0 - lo) as usize], self.now))
            .collect();
        if lo == 0 && hi + 1 == n {
            self.stamps_seen = Some(stamps);
            self.stamps_fresh = false;
        }
        Ok(times)
    }

    fn set_page(&mut self, page: GlobalPage, desc: PageDescriptor) -> Result<()> {
        self.check()?;
        let slot = self.table.get_mut(page.index()).ok_or(RuntimeError::Core(
            tessera_core::CoreError::UnknownPage(page),
        ))?;
        *slot = desc.0;
        // Goes up with the next submission (`flush_table`), before the next launch's dispatch.
        self.table_dirty.borrow_mut().push(page.0 as u32);
        Ok(())
    }

    fn launch(&mut self, l: &Launch) -> Result<LaunchOutcome> {
        // Its lists would overwrite those a queued launch that faulted left for its settle.
        self.flush_queued()?;
        let Some((wgsl, mut work)) = self.prepare(l)? else {
            return Ok(LaunchOutcome::default());
        };
        // A Temp launch stores once per invocation in the common case; one that stores more
        // is run again with the room per invocation it turned out to need (it wrote no page).
        let mut per_invocation = if l.mode == Mode::Temp { 1 } else { 0 };
        loop {
            match self.launch_once(&mut work, per_invocation)? {
                Ran::Done(out) => return Ok(out),
                Ran::Grow(need) => per_invocation = need,
                Ran::Failed(status) => return Err(self.first_error(l, &wgsl, status)),
            }
        }
    }

    fn queues_launches(&self) -> bool {
        true
    }

    fn queue_launch(&mut self, l: &Launch) -> Result<Queued<LaunchOutcome>> {
        if l.mode == Mode::Request {
            return self.launch(l).map(Queued::Ran);
        }
        self.enqueue(l)
    }

    fn collect_queued(&mut self) -> Result<Vec<QueuedOutcome>> {
        self.collect()
    }

    fn reopen_queue(&mut self) {
        self.reopen();
    }

    fn merge(&mut self) -> Result<MergeOutcome> {
        self.check()?;
        self.flush_queued()?;
        let Some((enc, compact_group, compact_dispatch)) = self.encode_merge(0)? else {
            return Ok(MergeOutcome::default());
        };
        let count = self.temp_len;
        let pages = self.table.len() as u64;
        let head = self.finish(enc, &compact_group, compact_dispatch, 0, pages)?;
        let (out, left) = self.merged(&head, count, pages)?;
        // The stores left over are the temporary of the next merge.
        std::mem::swap(&mut self.scratch.temp, &mut self.scratch.leftover);
        self.temp_len = left;
        Ok(out)
    }

    fn queue_merge(&mut self) -> Result<Queued<MergeOutcome>> {
        self.check()?;
        self.enqueue_merge()
    }

    fn discard_temp(&mut self) {
        self.temp_len = 0;
    }

    fn counters(&self) -> Option<Arc<BackendCounters>> {
        Some(self.counters.clone())
    }

    fn peer_group(&self) -> Option<u64> {
        // `TESSERA_PEER_COPY=off` moves pages through the host as before peer copies, for
        // comparing the two in one run on one machine (docs/EVALUATION.md, "On a real GPU").
        let off = tessera_runtime::env_switch(tessera_runtime::PEER_COPY) == Ok(Some(false));
        (!off).then_some(self.gpu.0.token)
    }

    fn slot_sink(&self, memory: u16) -> Option<Arc<dyn SlotSink>> {
        let m = self.memories.get(memory as usize)?;
        Some(Arc::new(QueueSink {
            queue: self.queue.clone(),
            buffer: m.buffer.clone(),
            slot_bytes: m.slot_words * 4,
            capacity: m.capacity,
        }))
    }

    fn peer_memory(&self, memory: u16) -> Result<PeerMemory> {
        let m = self
            .memories
            .get(memory as usize)
            .ok_or_else(|| self.err(WgpuError::NoMemory { memory }))?;
        Ok(Arc::new(PeerBuffer {
            token: self.gpu.0.token,
            buffer: m.buffer.clone(),
            slot_bytes: m.slot_words * 4,
            capacity: m.capacity,
        }))
    }

    fn time_host_copy(&mut self, bytes: u64) -> Result<Option<f64>> {
        // What is queued already runs first and is not timed.
        self.wait_queued()?;
        let size = bytes.max(4).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        if size > self.device.limits().max_buffer_size {
            return Ok(None);
        }
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("host link probe"),
            size,
            usage: wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let data = vec![1u8; size as usize];
        let t = std::time::Instant::now();
        self.queue.write_buffer(&buffer, 0, &data);
        self.counters.submitted();
        self.queue.submit([]);
        self.wait_idle()?;
        Ok(Some(t.elapsed().as_secs_f64()))
    }

    fn wait_queued(&mut self) -> Result<()> {
        self.check()?;
        // Queued writes (slot uploads, descriptors) run only with a submission: an empty one
        // sends them, and the wait covers them too.
        self.flush_table();
        self.counters.submitted();
        self.queue.submit([]);
        self.wait_idle()
    }

    fn copy_from_peers(&mut self, copies: &[PeerCopy]) -> Result<()> {
        if copies.is_empty() {
            return Ok(());
        }
        self.check()?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("peer copies"),
            });
        for c in copies {
            let (off, len) = self.slot_range(c.at)?;
            let src = c
                .from
                .downcast_ref::<PeerBuffer>()
                .filter(|p| p.token == self.gpu.0.token)
                .ok_or_else(|| self.err(WgpuError::PeerAcrossDevices))?;
            if c.from_slot >= src.capacity || src.slot_bytes != len {
                return Err(self.err(WgpuError::PeerSlot {
                    from_slot: c.from_slot,
                    slot_bytes: src.slot_bytes,
                    capacity: src.capacity,
                    into_bytes: len,
                }));
            }
            enc.copy_buffer_to_buffer(
                &src.buffer,
                c.from_slot as u64 * len,
                &self.memories[c.at.memory as usize].buffer,
                off,
                len,
            );
        }
        // One submission for the batch, not waited for. Peers share one queue, and wgpu runs a
        // queue's work in order with the barriers it needs: the copies read the source slots
        // after every write the queue took before (the source's own uploads included), and
        // whatever the queue takes later (a slot write reusing a source slot, the next launch
        // on either device, a read-back) runs after them. So the memory manager may reuse the
        // source slot once this returns, as the trait asks, with no host wait (docs/WGPU.md,
        // "Slot reuse").
        self.submit(enc);
        Ok(())
    }
}

/// A physical memory as a peer on the same wgpu device copies from it.
/// Writes slots of one memory through the queue from the memory manager's thread while the
/// device's worker waits for a launch (`Device::slot_sink`). `write_buffer` copies the bytes
/// into wgpu's staging memory now, on the calling thread, and the GPU copies them at the start
/// of the next submission: after the running launch, before the descriptors the memory
/// manager queues behind it. So the host side of the upload overlaps the launch, and the slot
/// changes on the GPU only after every launch that may have used it (docs/WGPU.md, "Slot
/// reuse").
pub(super) struct QueueSink {
    queue: wgpu::Queue,
    buffer: wgpu::Buffer,
    slot_bytes: u64,
    capacity: u32,
}

impl SlotSink for QueueSink {
    fn write_slot(&self, slot: u32, data: &[u8]) -> std::result::Result<(), String> {
        if slot >= self.capacity || data.len() as u64 != self.slot_bytes {
            return Err(format!(
                "{} bytes into slot {slot} of {}-byte slots ({} of them)",
                data.len(),
                self.slot_bytes,
                self.capacity
            ));
        }
        self.queue
            .write_buffer(&self.buffer, slot as u64 * self.slot_bytes, data);
        Ok(())
    }
}

pub(super) struct PeerBuffer {
    /// The wgpu device it lives on (`Opened::token`).
    token: u64,
    buffer: wgpu::Buffer,
    slot_bytes: u64,
    capacity: u32,
}
