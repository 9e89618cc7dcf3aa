//! Launches and merges queued on the GPU without a wait (`Device::queue_launch`,
//! `Device::queue_merge`): each is submitted behind the one before, copies its status into its
//! own place of one staging buffer, and the host reads them all back with one wait when the
//! runtime settles the queue.
//!
//! Queued work that faults, fails, asks for a page or runs out of room in the temporary closes
//! the queue's gate (`abi::GATE_BINDING`, one word on the wgpu device) at its own place in the
//! queue; everything queued after it, by this tessera device or another on the same wgpu
//! device, finds the gate closed below its place and does nothing (the prelude's `admitted`).
//! Its fault lists stay in their buffers, which nothing later in the queue writes, and are read
//! back only then.

use super::*;

/// Launches and merges one queue holds before it is read back early to make room.
const QUEUE_MAX: usize = 256;
/// Bytes of a queued launch's read-back: a [`Head`] without its lists.
const QUEUED_HEAD: u64 = HEAD_INC;

struct Entry {
    seq: u32,
    pages: u64,
    kind: Kind,
}

enum Kind {
    Launch {
        launch: Launch,
        wgsl: WgslKernel,
        invocations: u64,
        /// Room in the temporary per invocation (`Mode::Temp`; 0 otherwise).
        room: u64,
    },
    /// A merge of this many stores of the temporary.
    Merge { count: u64 },
}

pub(super) struct Queue {
    /// Per queued launch or merge, its status, request count and timestamps.
    heads: wgpu::Buffer,
    /// Submitted, not read back, in queue order (entry i copies to `heads` at i).
    pending: Vec<Entry>,
    /// Read back early (the staging buffer was full, or a list had to grow), not yet given to
    /// the runtime.
    resolved: Vec<QueuedOutcome>,
    /// Per kernel, the room in the temporary its queued `Mode::Temp` launches get: the most
    /// stores an invocation of it has needed, so that only its first launch runs short.
    room: HashMap<&'static str, u64>,
}

impl Queue {
    /// Whether launches or merges were submitted and not yet read back.
    pub(super) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    pub(super) fn new(device: &wgpu::Device) -> Self {
        Queue {
            heads: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("queued read-back"),
                size: QUEUE_MAX as u64 * QUEUED_HEAD,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            pending: Vec::new(),
            resolved: Vec::new(),
            room: HashMap::new(),
        }
    }
}

/// The wgpu device's next place in its queue, held while a queued launch or merge is encoded
/// and submitted.
fn lock_seq(gpu: &SharedGpu) -> Result<std::sync::MutexGuard<'_, u32>> {
    gpu.0
        .seq
        .lock()
        .map_err(|_| RuntimeError::Internal("a thread panicked while queuing a launch".into()))
}

impl WgpuDevice {
    /// Submits a `Mode::Direct` or `Mode::Temp` launch behind the queued work without
    /// waiting for it.
    pub(super) fn enqueue(&mut self, l: &Launch) -> Result<Queued<LaunchOutcome>> {
        self.make_room(l.domain.len(), l.pages)?;
        let Some((wgsl, mut work)) = self.prepare(l)? else {
            return Ok(Queued::Ran(LaunchOutcome::default()));
        };
        let room = match l.mode {
            Mode::Temp => self.queued.room.get(work.label).copied().unwrap_or(1),
            _ => 0,
        };
        let Some(seq) = self.submit_at_next_place(|d, seq| {
            work.info.seq = seq;
            d.encode_launch(&mut work, room).map(Some)
        })?
        else {
            return Ok(Queued::Ran(LaunchOutcome::default()));
        };
        self.temp_len += work.invocations * room;
        self.queued.pending.push(Entry {
            seq,
            pages: work.pages,
            kind: Kind::Launch {
                launch: l.clone(),
                wgsl,
                invocations: work.invocations,
                room,
            },
        });
        Ok(Queued::OnDevice(seq))
    }

    /// Submits a merge of the temporary behind the queued work without waiting for it.
    pub(super) fn enqueue_merge(&mut self) -> Result<Queued<MergeOutcome>> {
        let pages = self.table.len() as u64;
        self.make_room(0, pages)?;
        let count = self.temp_len;
        let Some(seq) = self.submit_at_next_place(|d, seq| d.encode_merge(seq))? else {
            return Ok(Queued::Ran(MergeOutcome::default()));
        };
        // A merge that runs leaves nothing over: its compute pass asked for no page, or the
        // gate would have stopped it (`outcome` checks).
        self.temp_len = 0;
        self.queued.pending.push(Entry {
            seq,
            pages,
            kind: Kind::Merge { count },
        });
        Ok(Queued::OnDevice(seq))
    }

    /// Takes the next place in the wgpu device's queue, encodes with it (`None`: nothing to
    /// queue, no place taken), records the copy of the status into the entry's read-back place
    /// and submits, all under one lock, so places follow the queue's order across the tessera
    /// devices sharing it.
    fn submit_at_next_place(
        &mut self,
        encode: impl FnOnce(&mut Self, u32) -> Result<Option<Encoded>>,
    ) -> Result<Option<u32>> {
        let gpu = self.gpu.clone();
        let mut next = lock_seq(&gpu)?;
        let seq = *next;
        let Some((mut enc, group, dispatch)) = encode(self, seq)? else {
            return Ok(None);
        };
        let at = self.queued.pending.len() as u64 * QUEUED_HEAD;
        self.compact_and_copy(&mut enc, &group, dispatch, &self.queued.heads, at);
        self.submit(enc);
        *next += 1;
        Ok(Some(seq))
    }

    /// Reads every queued launch and merge back (one wait) and gives their outcomes in queue
    /// order, keeping the gate as it is (`Device::collect_queued`).
    pub(super) fn collect(&mut self) -> Result<Vec<QueuedOutcome>> {
        self.flush_queued()?;
        Ok(std::mem::take(&mut self.queued.resolved))
    }

    /// Opens the gate and starts the places from 1 again, for every tessera device on the
    /// wgpu device (`Device::reopen_queue`): the runtime calls it once all of them have
    /// collected, and before any queues again.
    pub(super) fn reopen(&mut self) {
        let gpu = self.gpu.clone();
        // A poisoned lock means a thread panicked while queuing: nothing to reopen for.
        let Ok(mut next) = lock_seq(&gpu) else {
            return;
        };
        if *next != 1 {
            // Lands before the next submission's commands, after all the queued work of every
            // tessera device on the wgpu device: what they queued behind a fault has found the
            // gate closed already.
            self.queue
                .write_buffer(&gpu.0.gate, 0, &abi::NONE.to_le_bytes());
            *next = 1;
        }
    }

    /// Reads the submitted queued work back into `resolved`, keeping the gate as it is: work
    /// queued later in the same queue still skips behind a fault.
    pub(super) fn flush_queued(&mut self) -> Result<()> {
        if self.queued.pending.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut self.queued.pending);
        // While eviction asks for stamps, they come back in the same wait.
        let mut carried = None;
        if self.stamps_track > 0 {
            let mut enc = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            carried = self.carry_stamps(&mut enc)?;
            if carried.is_some() {
                self.submit(enc);
            }
        }
        let bytes = self.map_read(&self.queued.heads, entries.len() as u64 * QUEUED_HEAD)?;
        if let Some(b) = carried {
            self.take_stamps(b)?;
        }
        for (e, b) in entries
            .into_iter()
            .zip(bytes.chunks_exact(QUEUED_HEAD as usize))
        {
            let head = self.head(b.to_vec(), false);
            let outcome = if head.status.gate.0 < e.seq {
                Ok(None)
            } else {
                self.outcome(e, &head)
            };
            self.queued.resolved.push(outcome);
        }
        Ok(())
    }

    /// What one queued launch or merge that ran did.
    fn outcome(&mut self, e: Entry, head: &Head) -> QueuedOutcome {
        let (launch, wgsl, invocations, room) = match e.kind {
            Kind::Merge { count } => {
                let (out, left) = self.merged(head, count, e.pages)?;
                if left > 0 || !out.missing.is_empty() {
                    return Err(self.err(WgpuError::QueuedMergeLeftStores { left }));
                }
                return Ok(Some(Settled::Merge(out)));
            }
            Kind::Launch {
                launch,
                wgsl,
                invocations,
                room,
            } => (launch, wgsl, invocations, room),
        };
        let name = launch.kernel.name();
        match self.ran(name, invocations, e.pages, room, head)? {
            Ran::Done(out) => Ok(Some(Settled::Launch(out))),
            Ran::Failed(st) => {
                // The first failing invocation may run again alone, with this launch's remote
                // objects.
                self.bind_remote(&launch)?;
                Err(self.first_error(&launch, &wgsl, st))
            }
            // It wrote no page, and the gate stopped its merge: it runs again with the room it
            // turned out to need, and later launches of the kernel get that room.
            Ran::Grow(need) => {
                self.queued.room.insert(name, need);
                Ok(None)
            }
        }
    }

    /// Reads the queue back first where the next launch or merge would overwrite what a
    /// queued launch that faulted left for its settle: growing a list replaces its buffer. A
    /// full staging buffer has no room either.
    fn make_room(&mut self, invocations: u64, pages: u64) -> Result<()> {
        let s = &self.scratch;
        let fits =
            s.incomplete.bytes >= invocations * 8 && s.requests.bytes >= REQUESTS_HEAD + pages * 8;
        if self.queued.pending.len() == QUEUE_MAX || !fits {
            self.flush_queued()?;
        }
        Ok(())
    }
}
