//! The launch engine: a kernel launch prepared, submitted, read back and run again until
//! nothing is missing, with the buffers it keeps from launch to launch.

use super::*;

/// Widest halo whose window (8 + 2 halo texels a side) fits the prelude's 16x16 windows.
pub(super) const FP_MAX_HALO: u32 = 4;
/// List entries read back with the counts, before knowing them: a launch that faults on fewer
/// pages and invocations than this needs one read-back, not two.
pub(super) const SPECULATIVE: u64 = 1024;
/// The most incomplete entries read back with a launch beyond its read-back's own (8 bytes
/// each: 4 MiB).
pub(super) const INCOMPLETE_AHEAD_MAX: u64 = 1 << 19;
/// Read-back layout: status, the request list's head, timestamps (32 bytes), then the first
/// SPECULATIVE entries of the incomplete list and of the request list.
pub(super) const STATUS_BYTES: u64 = std::mem::size_of::<Status>() as u64;
pub(super) const REQUESTS_HEAD: u64 = std::mem::size_of::<RequestsHead>() as u64;
pub(super) const HEAD_REQ: u64 = STATUS_BYTES;
pub(super) const HEAD_TS: u64 = HEAD_REQ + REQUESTS_HEAD;
pub(super) const HEAD_INC: u64 = HEAD_TS + TIMESTAMPS as u64 * 8;
pub(super) const HEAD_LIST: u64 = HEAD_INC + SPECULATIVE * 8;
pub(super) const HEAD_BYTES: u64 = HEAD_LIST + SPECULATIVE * 8;

/// A recorded launch or merge waiting for its compaction: the encoder, and the compaction's
/// bind group and dispatch for [`WgpuDevice::finish`] or [`WgpuDevice::compact_and_copy`].
pub(super) type Encoded = (wgpu::CommandEncoder, wgpu::BindGroup, (u32, u32));

/// A kernel launch being prepared.
pub(super) struct Work {
    pub(super) label: &'static str,
    pub(super) pipeline: wgpu::ComputePipeline,
    pub(super) dispatch: (u32, u32),
    pub(super) invocations: u64,
    pub(super) pages: u64,
    pub(super) bit_words: u64,
    pub(super) list: Vec<u32>,
    pub(super) info: LaunchInfo,
}

/// How one run of a launch went.
pub(super) enum Ran {
    Done(LaunchOutcome),
    /// An invocation stored this many words: run again with that much room.
    Grow(u64),
    /// Invocations failed with a kernel error.
    Failed(Status),
}

/// What a submission's first read-back says.
pub(super) struct Head {
    pub(super) status: Status,
    pub(super) requests: u64,
    pub(super) gpu: Option<[f64; 2]>,
    pub(super) bytes: Vec<u8>,
    /// Whether `bytes` holds the first SPECULATIVE entries of the lists (a queued launch's
    /// does not: its lists are read from their buffers, and only if it faulted).
    pub(super) lists: bool,
    /// The first entries of the incomplete list beyond what `bytes` holds, read back with the
    /// launch where its kernel's last launches left many (`WgpuDevice::incomplete_ahead`).
    pub(super) incomplete: Vec<u8>,
}

/// Buffers kept from launch to launch (see scratch.rs).
pub(crate) struct Scratch {
    pub(super) launch: wgpu::Buffer,
    pub(super) merge: wgpu::Buffer,
    pub(super) compact: wgpu::Buffer,
    pub(super) status: wgpu::Buffer,
    pub(super) head: wgpu::Buffer,
    pub(super) list: Grow,
    pub(super) bits: Grow,
    pub(super) incomplete: Grow,
    pub(super) requests: Grow,
    pub(super) temp: Grow,
    pub(super) leftover: Grow,
}

impl Scratch {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let fixed = |label, size, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
        Scratch {
            launch: fixed("launch", size_of::<LaunchInfo>() as u64, uniform),
            merge: fixed("merge", size_of::<MergeInfo>() as u64, uniform),
            compact: fixed("compact", size_of::<CompactInfo>() as u64, uniform),
            status: fixed("status", STATUS_BYTES, scratch::STORAGE),
            head: fixed(
                "read-back",
                HEAD_BYTES,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            list: Grow::new(device, "domain list", scratch::STORAGE),
            // Zero at creation, and the compaction clears every word it reads.
            bits: Grow::new(device, "request bits", scratch::STORAGE),
            incomplete: Grow::new(device, "incomplete", scratch::STORAGE),
            requests: Grow::new(device, "requests", scratch::STORAGE),
            temp: Grow::new(device, "temporary", scratch::STORAGE),
            leftover: Grow::new(device, "leftover", scratch::STORAGE),
        }
    }
}

impl WgpuDevice {
    /// Grows the per-launch lists; `Err` names the list that does not fit one binding.
    pub(super) fn ensure_lists(
        &mut self,
        list_bytes: u64,
        n: u64,
        bit_words: u64,
        pages: u64,
    ) -> Result<()> {
        let max = gpu::max_storage_bytes(&self.limits);
        let s = &mut self.scratch;
        let d = &self.device;
        let r = s
            .list
            .ensure(d, list_bytes, max)
            .and_then(|_| s.incomplete.ensure(d, n * 8, max))
            .and_then(|_| s.bits.ensure(d, bit_words * 8, max))
            .and_then(|_| s.requests.ensure(d, 8 + pages * 8, max));
        r.map(|_| ()).map_err(|e| self.err(e))
    }

    /// Runs a prepared launch with room for `per_invocation` stores of each invocation in the
    /// temporary. `Ok(Err(k))`: an invocation stored `k` words, so the launch must run again.
    pub(super) fn launch_once(&mut self, w: &mut Work, per_invocation: u64) -> Result<Ran> {
        let (mut enc, compact_group, compact_dispatch) = self.encode_launch(w, per_invocation)?;
        let carried = self.carry_stamps(&mut enc)?;
        let kind = (w.label, !w.list.is_empty());
        let ahead = self.incomplete_ahead(&mut enc, kind, w.invocations)?;
        let mut head = self.finish(
            enc,
            &compact_group,
            compact_dispatch,
            w.invocations,
            w.pages,
        )?;
        if let Some(bytes) = carried {
            self.take_stamps(bytes)?;
        }
        if let Some(bytes) = ahead {
            let back = self.incomplete_back.borrow();
            head.incomplete = self.take_mapped(&back.buf, bytes, <[u8]>::to_vec)?;
        }
        let ran = self.ran(w.label, w.invocations, w.pages, per_invocation, &head)?;
        let ninc = (head.status.incomplete.0 as u64).min(w.invocations);
        self.incomplete_seen.insert(kind, (ninc, w.invocations));
        if let Ran::Done(_) = ran {
            self.temp_len += w.invocations * per_invocation;
        }
        Ok(ran)
    }

    /// Records a prepared launch, its compaction not yet: the encoder, with the compaction's
    /// bind group and dispatch for [`Self::finish`] or [`Self::finish_queued`].
    pub(super) fn encode_launch(&mut self, w: &mut Work, per_invocation: u64) -> Result<Encoded> {
        // The launch stamps pages: what was read back before no longer says what it left.
        self.stamps_fresh = false;
        let n = w.invocations;
        let max_temp = n * per_invocation;
        self.ensure_lists(w.list.len() as u64 * 4, n, w.bit_words, w.pages)?;
        let max = gpu::max_storage_bytes(&self.limits);
        let old = self
            .scratch
            .temp
            .ensure(&self.device, (self.temp_len + max_temp) * 16, max)
            .map_err(|e| self.err(e))?;
        if self.temp_len + max_temp > u32::MAX as u64 {
            return Err(self.err(WgpuError::OutOfMemory(
                "a temporary of more than 2^32 stores".into(),
            )));
        }
        w.info.temp_k = per_invocation as u32;
        w.info.temp_base = self.temp_len as u32;
        self.queue
            .write_buffer(&self.scratch.launch, 0, bytemuck::bytes_of(&w.info));
        if !w.list.is_empty() {
            self.queue
                .write_buffer(&self.scratch.list.buf, 0, bytemuck::cast_slice(&w.list));
        }
        let group = self.kernel_group(w.label);
        let (mut enc, compact_group, compact_dispatch) = self.begin(w.bit_words);
        if let Some(old) = old {
            // The temporary grew: the stores of the pass's earlier launches move along.
            if self.temp_len > 0 {
                enc.copy_buffer_to_buffer(&old, 0, &self.scratch.temp.buf, 0, self.temp_len * 16);
            }
        }
        if max_temp > 0 {
            // Entries of invocations that fault or store less stay empty (kind 0).
            enc.clear_buffer(
                &self.scratch.temp.buf,
                self.temp_len * 16,
                Some(max_temp * 16),
            );
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(w.label),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(0)),
            });
            pass.set_pipeline(&w.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(w.dispatch.0, w.dispatch.1, 1);
        }
        Ok((enc, compact_group, compact_dispatch))
    }

    /// What a launch of `n` invocations over `pages` pages did, from its read-back.
    pub(super) fn ran(
        &mut self,
        label: &str,
        n: u64,
        pages: u64,
        per_invocation: u64,
        head: &Head,
    ) -> Result<Ran> {
        let st = head.status;
        if st.failed.0 != 0 {
            return Ok(Ran::Failed(st));
        }
        let (ninc, need) = (st.incomplete.0 as u64, st.temp.0 as u64);
        if need > per_invocation {
            return Ok(Ran::Grow(need));
        }
        if ninc > n || head.requests > pages {
            return Err(self.err(WgpuError::InconsistentLaunch {
                kernel: label.to_string(),
                incomplete: ninc,
                invocations: n,
                requests: head.requests,
                pages,
            }));
        }
        let incomplete: Vec<u32> = if ninc == 0 {
            Vec::new()
        } else if head.lists && ninc <= SPECULATIVE {
            words(&head.bytes[HEAD_INC as usize..(HEAD_INC + ninc * 8) as usize]).collect()
        } else if ninc * 8 <= head.incomplete.len() as u64 {
            words(&head.incomplete[..(ninc * 8) as usize]).collect()
        } else {
            let b = self.read_back(&[(&self.scratch.incomplete.buf, 0, ninc * 8)])?;
            words(&b[0]).collect()
        };
        let t = Instant::now();
        let mut requests = self.request_list(head, pages)?;
        // The CPU backend's order: by page.
        requests.sort_unstable_by_key(|r| r.page);
        // The prelude marks the invocations that saved their state at this launch
        // (`suspend()`) in y, beside the runtime's `RESUMED_BIT`, which the list keeps.
        let suspended = incomplete
            .chunks_exact(2)
            .filter(|c| c[1] & crate::abi::SAVED_NOW_BIT != 0)
            .count() as u64;
        Ok(Ran::Done(LaunchOutcome {
            requests,
            incomplete: incomplete
                .chunks_exact(2)
                .map(|c| (c[0], c[1] & !crate::abi::SAVED_NOW_BIT))
                .collect(),
            suspended,
            invocations: n,
            uniquify_s: t.elapsed().as_secs_f64(),
            gpu: head.gpu.map(|[k, u]| GpuLaunchTime {
                kernel_s: k,
                uniquify_s: u,
            }),
            remote: Vec::new(),
        }))
    }

    /// The request list a submission's compaction wrote (from the read-back where it fitted).
    pub(super) fn request_list(&self, head: &Head, pages: u64) -> Result<Vec<PageRequest>> {
        let nreq = head.requests.min(pages);
        let w: Vec<u32> = if nreq == 0 {
            Vec::new()
        } else if head.lists && nreq <= SPECULATIVE {
            words(&head.bytes[HEAD_LIST as usize..(HEAD_LIST + nreq * 8) as usize]).collect()
        } else {
            let b = self.read_back(&[(&self.scratch.requests.buf, REQUESTS_HEAD, nreq * 8)])?;
            words(&b[0]).collect()
        };
        Ok(w.chunks_exact(2)
            .map(|c| PageRequest {
                page: GlobalPage(c[0] as u64),
                access: if c[1] == 1 {
                    Access::Write
                } else {
                    Access::Read
                },
            })
            .collect())
    }

    /// The bind group of a kernel or the merge over the current buffers.
    pub(super) fn kernel_group(&self, label: &str) -> wgpu::BindGroup {
        let s = &self.scratch;
        let mem = |i: usize| {
            self.memories
                .get(i)
                .map(|m| &m.buffer)
                .unwrap_or(&self.spare)
                .as_entire_binding()
        };
        let remote = |k: usize| {
            self.remote
                .get(k)
                .unwrap_or(&self.spare)
                .as_entire_binding()
        };
        let params = wgpu::BindingResource::Buffer(wgpu::BufferBinding {
            buffer: &s.launch,
            offset: 0,
            size: std::num::NonZeroU64::new(abi::PARAMS_BYTES),
        });
        let entries = [
            self.table_buf.as_entire_binding(),
            mem(0),
            mem(1),
            mem(2),
            mem(3),
            s.launch.as_entire_binding(),
            s.list.buf.as_entire_binding(),
            s.bits.buf.as_entire_binding(),
            s.status.as_entire_binding(),
            s.incomplete.buf.as_entire_binding(),
            s.temp.buf.as_entire_binding(),
            s.leftover.buf.as_entire_binding(),
            s.merge.as_entire_binding(),
            self.stamps.as_entire_binding(),
            remote(0),
            remote(1),
            remote(2),
            remote(3),
            params,
            self.gpu.0.gate.as_entire_binding(),
        ];
        let entries: Vec<wgpu::BindGroupEntry> = entries
            .into_iter()
            .enumerate()
            .map(|(i, resource)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource,
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.pipes.kernel_layout,
            entries: &entries,
        })
    }

    /// An encoder that starts with the counts cleared, and the compaction of `bit_words`
    /// request words that [`Self::finish`] runs after the caller's pass.
    pub(super) fn begin(
        &self,
        bit_words: u64,
    ) -> (wgpu::CommandEncoder, wgpu::BindGroup, (u32, u32)) {
        let (cgx, cgy, row) = spread(bit_words, 64);
        let info = CompactInfo {
            words: bit_words as u32,
            row,
            ..Default::default()
        };
        self.queue
            .write_buffer(&self.scratch.compact, 0, bytemuck::bytes_of(&info));
        // Queued writes land before the submission's commands. The gate is not in the
        // status: it spans the launches queued since the last settle, on every tessera device
        // of the wgpu device.
        self.queue.write_buffer(
            &self.scratch.status,
            0,
            &bytemuck::bytes_of(&Status::initial())[..abi::STATUS_RESET_BYTES as usize],
        );
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("compact"),
            layout: &self.pipes.compact_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: self.scratch.compact.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: self.scratch.bits.buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: self.scratch.requests.buf.as_entire_binding(),
                },
            ],
        });
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.clear_buffer(&self.scratch.requests.buf, 0, Some(REQUESTS_HEAD));
        (enc, group, (cgx, cgy))
    }

    /// Runs the compaction after the caller's pass, submits, and reads back the counts, the
    /// timestamps and the first entries of the lists in one go.
    pub(super) fn finish(
        &self,
        mut enc: wgpu::CommandEncoder,
        compact_group: &wgpu::BindGroup,
        dispatch: (u32, u32),
        invocations: u64,
        pages: u64,
    ) -> Result<Head> {
        let s = &self.scratch;
        self.compact_and_copy(&mut enc, compact_group, dispatch, &s.head, 0);
        let inc = invocations.min(SPECULATIVE) * 8;
        if inc > 0 {
            enc.copy_buffer_to_buffer(&s.incomplete.buf, 0, &s.head, HEAD_INC, inc);
        }
        let req = pages.min(SPECULATIVE) * 8;
        if req > 0 {
            enc.copy_buffer_to_buffer(&s.requests.buf, REQUESTS_HEAD, &s.head, HEAD_LIST, req);
        }
        self.submit(enc);
        // Waits until the device has run this submission (and so every earlier one): a launch
        // or merge returns with nothing in flight, which is what lets `write_slot` reuse a
        // slot at once.
        let bytes = self.map_read(&s.head, HEAD_BYTES)?;
        Ok(self.head(bytes, true))
    }

    /// Records the compaction after the caller's pass, then copies the status, the request
    /// list's head and the timestamps to `dst` at `at` (the layout of [`Head`] up to its
    /// lists).
    pub(super) fn compact_and_copy(
        &self,
        enc: &mut wgpu::CommandEncoder,
        compact_group: &wgpu::BindGroup,
        dispatch: (u32, u32),
        dst: &wgpu::Buffer,
        at: u64,
    ) {
        let s = &self.scratch;
        {
            // A pass of its own: its dispatch sees every bit the previous pass recorded.
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compact"),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(1)),
            });
            pass.set_pipeline(&self.pipes.compact);
            pass.set_bind_group(0, compact_group, &[]);
            pass.dispatch_workgroups(dispatch.0, dispatch.1, 1);
        }
        enc.copy_buffer_to_buffer(&s.status, 0, dst, at, STATUS_BYTES);
        // The gate as this launch left it, in the status's last word: whether the launch was
        // admitted, for a queued one.
        enc.copy_buffer_to_buffer(&self.gpu.0.gate, 0, dst, at + abi::STATUS_RESET_BYTES, 4);
        enc.copy_buffer_to_buffer(&s.requests.buf, 0, dst, at + HEAD_REQ, REQUESTS_HEAD);
        if let Some(t) = &self.timestamps {
            enc.resolve_query_set(&t.set, 0..TIMESTAMPS, &t.resolve, 0);
            enc.copy_buffer_to_buffer(&t.resolve, 0, dst, at + HEAD_TS, TIMESTAMPS as u64 * 8);
        }
    }

    /// A read-back in [`Head`]'s layout, with the lists' first entries or without.
    pub(super) fn head(&self, bytes: Vec<u8>, lists: bool) -> Head {
        let status: Status = bytemuck::pod_read_unaligned(&bytes[..STATUS_BYTES as usize]);
        let head: RequestsHead =
            bytemuck::pod_read_unaligned(&bytes[HEAD_REQ as usize..HEAD_TS as usize]);
        let gpu = self.timestamps.as_ref().and_then(|t| {
            let ticks: Vec<u64> = bytes[HEAD_TS as usize..HEAD_INC as usize]
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            t.seconds(&ticks)
        });
        Head {
            status,
            requests: head.count.0 as u64,
            gpu,
            bytes,
            lists,
            incomplete: Vec::new(),
        }
    }

    /// Records a copy of every page's stamp behind the launch in `enc`, while the memory
    /// manager is asking for stamps (`stamps_track`): the bytes copied, for
    /// [`Self::take_stamps`] once the launch's read-back has waited.
    pub(super) fn carry_stamps(&mut self, enc: &mut wgpu::CommandEncoder) -> Result<Option<u64>> {
        let bytes = self.table.len() as u64 * 4;
        if self.stamps_track == 0 || bytes == 0 {
            return Ok(None);
        }
        self.stamps_track -= 1;
        let mut back = self.stamps_back.borrow_mut();
        back.ensure(&self.device, bytes, self.limits.max_buffer_size)
            .map_err(|e| self.err(e))?;
        enc.copy_buffer_to_buffer(&self.stamps, 0, &back.buf, 0, bytes);
        self.counters.read_back(bytes);
        Ok(Some(bytes))
    }

    /// Keeps the stamps [`Self::carry_stamps`] copied, after the launch's read-back waited for
    /// the queue: the mapping is then done at the next poll, which does not block.
    pub(super) fn take_stamps(&mut self, bytes: u64) -> Result<()> {
        let back = self.stamps_back.borrow();
        let stamps = self.take_mapped(&back.buf, bytes, |b| words(b).collect::<Vec<u32>>())?;
        drop(back);
        self.stamps_seen = Some(stamps);
        self.stamps_fresh = true;
        Ok(())
    }

    /// Records a copy of the incomplete list's first entries behind the launch in `enc`, as
    /// many as the kernel's last launch of the same kind (over a rectangle, or a list: a
    /// relaunch) on this device left incomplete for its size, and a quarter more, where that
    /// is more than the launch's read-back holds: a relaunching kernel (the ray tracer under a
    /// budget leaves a third to all of a launch incomplete, launch after launch) then reads
    /// its list back with the launch, not in a second wait. The bytes copied, for the caller
    /// to take once the launch has waited.
    pub(super) fn incomplete_ahead(
        &mut self,
        enc: &mut wgpu::CommandEncoder,
        kind: (&'static str, bool),
        invocations: u64,
    ) -> Result<Option<u64>> {
        let Some(&(ninc, n)) = self.incomplete_seen.get(&kind) else {
            return Ok(None);
        };
        let expect = (ninc as f64 / n.max(1) as f64 * 1.25 * invocations as f64).ceil() as u64;
        let entries = expect.min(invocations).min(INCOMPLETE_AHEAD_MAX);
        if entries <= SPECULATIVE {
            return Ok(None);
        }
        let bytes = entries * 8;
        let mut back = self.incomplete_back.borrow_mut();
        back.ensure(&self.device, bytes, self.limits.max_buffer_size)
            .map_err(|e| self.err(e))?;
        enc.copy_buffer_to_buffer(&self.scratch.incomplete.buf, 0, &back.buf, 0, bytes);
        self.counters.read_back(bytes);
        Ok(Some(bytes))
    }

    /// The first `bytes` of a staging buffer a launch copied into, after the launch's own
    /// read-back waited for the queue: the mapping is done at a poll that does not block
    /// (counted as a wait only should it not be).
    pub(super) fn take_mapped<R>(
        &self,
        staging: &wgpu::Buffer,
        bytes: u64,
        take: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        let mapping = Mapping::start(staging, bytes);
        self.health
            .finish_started(
                &self.device,
                staging,
                bytes,
                &mapping,
                || self.counters.waited(),
                take,
            )
            .map_err(|e| self.err(e))
    }

    /// Maps the first `bytes` of a staging buffer and copies them out: one wait, counted.
    pub(super) fn map_read(&self, staging: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        self.counters.waited();
        self.counters.read_back(bytes);
        self.health
            .map_read(&self.device, staging, bytes)
            .map_err(|e| self.err(e))
    }
}

impl WgpuDevice {
    /// Records a merge of the temporary (paper 3.5, third pass) as a queued launch at place
    /// `seq` (0: not queued), its compaction not yet; `None` when the temporary is empty.
    pub(super) fn encode_merge(&mut self, seq: u32) -> Result<Option<Encoded>> {
        let count = self.temp_len;
        if count == 0 {
            return Ok(None);
        }
        let one_memory = self.memories.len() <= 1;
        let pipeline = self.pipeline(
            "tessera merge",
            (crate::MERGE, &[]),
            "merge",
            one_memory,
            LaunchShape::GENERIC,
        )?;
        let pages = self.table.len() as u64;
        let bit_words = pages.div_ceil(32).max(1);
        let max = gpu::max_storage_bytes(&self.limits);
        self.scratch
            .leftover
            .ensure(&self.device, count * 16, max)
            .map_err(|e| self.err(e))?;
        self.ensure_lists(0, 0, bit_words, pages)?;
        let (gx, gy, row) = spread(count, 64);
        // `record` reads the bit fields' size from the launch uniform.
        let info = LaunchInfo {
            bit_words: bit_words as u32,
            seq,
            ..Default::default()
        };
        let mut merge = MergeInfo {
            count: count as u32,
            row,
            memories: self.memories.len() as u32,
            ..Default::default()
        };
        for (i, m) in self.memories.iter().enumerate() {
            merge.slot_words.0[i] = m.slot_words as u32;
            merge.capacity.0[i] = m.capacity;
        }
        self.queue
            .write_buffer(&self.scratch.launch, 0, bytemuck::bytes_of(&info));
        self.queue
            .write_buffer(&self.scratch.merge, 0, bytemuck::bytes_of(&merge));
        let group = self.kernel_group("tessera merge");
        let (mut enc, compact_group, compact_dispatch) = self.begin(bit_words);
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("merge"),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(0)),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        Ok(Some((enc, compact_group, compact_dispatch)))
    }

    /// What a merge of `count` stores over `pages` pages did, from its read-back, and how many
    /// stores it left over.
    pub(super) fn merged(
        &self,
        head: &Head,
        count: u64,
        pages: u64,
    ) -> Result<(MergeOutcome, u64)> {
        if head.status.failed.0 != 0 {
            return Err(self.err(WgpuError::MergeOutside {
                page: head.status.error_object.0 as u64,
            }));
        }
        let (written, left) = (head.status.incomplete.0 as u64, head.status.temp.0 as u64);
        // Every store left over asks for its page: stores left with no page asked for would
        // stay in the temporary, unmerged, once the driver saw nothing missing.
        if written + left > count || head.requests > pages || (left > 0 && head.requests == 0) {
            return Err(self.err(WgpuError::InconsistentMerge {
                written,
                left,
                count,
                requests: head.requests,
                pages,
            }));
        }
        let missing = self.request_list(head, pages)?;
        let out = MergeOutcome {
            written,
            missing: missing.into_iter().map(|r| r.page).collect(),
            gpu_s: head.gpu.map(|[a, b]| a + b),
        };
        Ok((out, left))
    }

    /// Checks a launch as every backend does and prepares it over its domain; `None` for an
    /// empty domain, which runs nothing (its kernel is compiled all the same, so that a kernel
    /// that does not compile fails alike).
    pub(super) fn prepare(&mut self, l: &Launch) -> Result<Option<(WgslKernel, Work)>> {
        self.check()?;
        tessera_runtime::check_launch(&*l.kernel, &l.bindings)?;
        let name = l.kernel.name();
        let wgsl = l.kernel.wgsl().ok_or_else(|| {
            self.err(WgpuError::NoWgsl {
                kernel: name.into(),
            })
        })?;
        if l.pages > self.table.len() as u64 {
            return Err(self.err(WgpuError::LaunchPastTable {
                pages: l.pages,
                table: self.table.len() as u64,
            }));
        }
        if l.domain.is_empty() {
            let one_memory = self.memories.len() <= 1 && l.remote.iter().all(Option::is_none);
            let mut info = LaunchInfo {
                mode: abi::mode_code(l.mode),
                is_list: matches!(l.domain, Domain::List(_)) as u32,
                ..Default::default()
            };
            self.fill_binds(l, &mut info)?;
            let shape = LaunchShape::of(&info);
            self.pipeline(name, (wgsl.source, wgsl.fields), "main", one_memory, shape)?;
            return Ok(None);
        }
        // Before it runs: a launch that fails has stamped pages all the same.
        self.now = self.now.max(l.time);
        self.bind_remote(l)?;
        let work = self.work(l, &l.domain, &wgsl)?;
        Ok(Some((wgsl, work)))
    }

    /// Prepares a launch of `l` over `domain` (the launch's own, or one invocation of it).
    pub(super) fn work(&mut self, l: &Launch, domain: &Domain, wgsl: &WgslKernel) -> Result<Work> {
        let name = l.kernel.name();
        // The tile path: rectangles of a kernel with a footprint, on a device that takes it.
        let mut fp = [abi::Vec4U32::default(); abi::FP_MAX as usize];
        let mut fp_write = 0;
        let fp_n = match (self.tiles, l.kernel.footprint(), domain) {
            (true, Some(f), Domain::Rect { .. }) => {
                let n = fp_reads(&f, &l.bindings, &l.remote, &mut fp);
                let written = l.bindings.iter().position(|b| b.id == f.write);
                if let Some(bi) = written.filter(|_| n > 0 && l.mode == Mode::Direct) {
                    let remote = l.remote.get(bi).is_some_and(Option::is_some);
                    if l.bindings[bi].format().is_some() && !remote {
                        fp_write = bi as u32 + 1;
                    }
                }
                n
            }
            _ => 0,
        };
        let entry = if fp_n > 0 { "main_tiles" } else { "main" };
        let n = domain.len();
        if n > u32::MAX as u64 {
            return Err(self.err(WgpuError::OutOfMemory(format!(
                "kernel {name}: a launch of {n} invocations; split the pass or use more devices"
            ))));
        }
        let bit_words = l.pages.div_ceil(32).max(1);
        let mut info = LaunchInfo {
            mode: abi::mode_code(l.mode),
            count: n as u32,
            bit_words: bit_words as u32,
            fp,
            fp_n,
            fp_write,
            time: abi::stamp_of(l.time),
            ..Default::default()
        };
        let (dispatch, list) = match domain {
            Domain::Rect { x0, y0, x1, y1 } => {
                (info.x0, info.y0, info.x1, info.y1) = (*x0, *y0, *x1, *y1);
                let (wx, wy) = group(entry);
                let gx = (x1 - x0).div_ceil(wx);
                let gy = (y1 - y0).div_ceil(wy);
                if gx > MAX_GROUPS || gy > MAX_GROUPS {
                    return Err(self.err(WgpuError::DispatchTooLarge {
                        kernel: l.kernel.name().into(),
                        width: x1 - x0,
                        height: y1 - y0,
                    }));
                }
                ((gx, gy), Vec::new())
            }
            Domain::List(items) => {
                // Rows of `row` invocations; each workgroup covers wx of a row and wy rows.
                let (wx, wy) = group(entry);
                let rows_needed = n.div_ceil(wx as u64 * MAX_GROUPS as u64).max(1);
                let (gx, _, row) = spread(n.div_ceil(rows_needed), wx);
                let rows = n.div_ceil(row as u64);
                let gy = rows.div_ceil(wy as u64) as u32;
                info.is_list = 1;
                info.row = row;
                let flat: Vec<u32> = items.iter().flat_map(|&(x, y)| [x, y]).collect();
                ((gx, gy), flat)
            }
        };
        self.fill_binds(l, &mut info)?;
        fill_params(&mut info.params, &wgsl.params);
        // `bind_remote` has run for this launch.
        let one_memory = self.memories.len() <= 1 && self.remote.is_empty();
        let shape = LaunchShape::of(&info);
        let pipeline = self.pipeline(name, (wgsl.source, wgsl.fields), entry, one_memory, shape)?;
        Ok(Work {
            label: name,
            pipeline,
            dispatch,
            invocations: n,
            pages: l.pages,
            bit_words,
            list,
            info,
        })
    }

    /// Writes the launch's bindings and their by-id slots into `info`.
    fn fill_binds(&self, l: &Launch, info: &mut LaunchInfo) -> Result<()> {
        info.nbind = l.bindings.len() as u32;
        let by_id = abi::BY_ID_SLOTS;
        for (i, (b, to)) in l.bindings.iter().zip(&mut info.binds).enumerate() {
            if b.pages_end > u32::MAX as u64 {
                return Err(self.err(WgpuError::PageBeyond32Bits));
            }
            *to = BindInfo {
                id: b.id.0,
                page_offset: b.page_offset as u32,
                width: b.width() as u32,
                height: b.height() as u32,
                pages_x: b.pages_x() as u32,
                shift: b.shift(),
                words_per_texel: b.words_per_texel() as u32,
                slot_words: b.slot_words() as u32,
                format: abi::format_code(b.format()),
                remote: self.remote_slots.get(i).copied().unwrap_or(0),
                mip: abi::mip_code(b),
                ..Default::default()
            };
            // The first binding of each id class wins; the prelude searches for the others.
            let slot = b.id.0 % by_id;
            let h = &mut info.by_id[(slot / 4) as usize].0[(slot % 4) as usize];
            if *h == 0 {
                *h = i as u32 + 1;
            }
        }
        Ok(())
    }
}

/// The workgroup of an entry point: the tile path's 8 x 8 tiles, or the per-texel shape.
fn group(entry: &str) -> (u32, u32) {
    if entry == "main_tiles" {
        (TILE, TILE)
    } else {
        (abi::GROUP_X, abi::GROUP_Y)
    }
}
