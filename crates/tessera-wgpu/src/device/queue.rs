//! Launches queued on the GPU without a wait (`Device::queue_launch`): each is submitted
//! behind the one before, copies its status into its own place of one staging buffer, and the
//! host reads them all back with one wait when the runtime settles the queue.
//!
//! A launch that faults or fails closes the gate in the status buffer (`Status::gate`) at its
//! own place in the queue; every launch queued after it finds the gate closed below its place
//! and does nothing (the prelude's `admitted`). Its fault lists stay in their buffers, which
//! no later launch of the queue writes, and are read back only then.

use super::*;

/// Launches one queue holds before it is read back early to make room.
const QUEUE_MAX: usize = 256;
/// Bytes of a queued launch's read-back: a [`Head`] without its lists.
const QUEUED_HEAD: u64 = HEAD_INC;

struct Entry {
    launch: Launch,
    wgsl: WgslKernel,
    seq: u32,
    invocations: u64,
    pages: u64,
}

pub(super) struct Queue {
    /// Per queued launch, its status, request count and timestamps.
    heads: wgpu::Buffer,
    /// Submitted, not read back, in queue order (entry i copies to `heads` at i).
    pending: Vec<Entry>,
    /// Read back early (the staging buffer was full, or a list had to grow), not yet given to
    /// the runtime.
    resolved: Vec<QueuedOutcome>,
    /// The next launch's place (`LaunchInfo::seq`); 1 when the queue is empty.
    next_seq: u32,
}

impl Queue {
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
            next_seq: 1,
        }
    }
}

impl WgpuDevice {
    /// Submits a `Mode::Direct` launch behind the queued ones without waiting for it.
    pub(super) fn enqueue(&mut self, l: &Launch) -> Result<Queued> {
        // Growing a list replaces its buffer, and with it the lists a queued launch that
        // faulted left there; a full staging buffer has no room: read the queue back first.
        if self.queued.pending.len() == QUEUE_MAX || !self.lists_fit(l) {
            self.flush_queued()?;
        }
        let Some((wgsl, mut work)) = self.prepare(l)? else {
            return Ok(Queued::Ran(LaunchOutcome::default()));
        };
        let seq = self.queued.next_seq;
        work.info.seq = seq;
        let (mut enc, group, dispatch) = self.encode_launch(&mut work, 0)?;
        let at = self.queued.pending.len() as u64 * QUEUED_HEAD;
        self.compact_and_copy(&mut enc, &group, dispatch, &self.queued.heads, at);
        self.submit(enc);
        self.queued.next_seq += 1;
        self.queued.pending.push(Entry {
            launch: l.clone(),
            wgsl,
            seq,
            invocations: work.invocations,
            pages: work.pages,
        });
        Ok(Queued::OnDevice)
    }

    /// Reads every queued launch back (one wait) and gives their outcomes in queue order;
    /// the next launch queued starts a queue of its own, with the gate open.
    pub(super) fn settle(&mut self) -> Result<Vec<QueuedOutcome>> {
        self.flush_queued()?;
        if self.queued.next_seq != 1 {
            // Lands before the next submission's commands, after every queued launch.
            self.queue.write_buffer(
                &self.scratch.status,
                abi::STATUS_RESET_BYTES,
                &abi::NONE.to_le_bytes(),
            );
            self.queued.next_seq = 1;
        }
        Ok(std::mem::take(&mut self.queued.resolved))
    }

    /// Reads the submitted queued launches back into `resolved`, keeping the gate as it is:
    /// launches queued later in the same queue still skip behind a fault.
    pub(super) fn flush_queued(&mut self) -> Result<()> {
        if self.queued.pending.is_empty() {
            return Ok(());
        }
        let entries = std::mem::take(&mut self.queued.pending);
        let bytes = self.map_read(&self.queued.heads, entries.len() as u64 * QUEUED_HEAD)?;
        for (e, b) in entries
            .into_iter()
            .zip(bytes.chunks_exact(QUEUED_HEAD as usize))
        {
            let head = self.head(b.to_vec(), false);
            let outcome = if head.status.gate.0 < e.seq {
                Ok(None)
            } else {
                let name = e.launch.kernel.name();
                match self.ran(name, e.invocations, e.pages, 0, &head) {
                    Ok(Ran::Done(out)) => Ok(Some(out)),
                    Ok(Ran::Failed(st)) => {
                        // The first failing invocation may run again alone, with this
                        // launch's remote objects.
                        match self.bind_remote(&e.launch) {
                            Ok(()) => Err(self.first_error(&e.launch, &e.wgsl, st)),
                            Err(err) => Err(err),
                        }
                    }
                    Ok(Ran::Grow(_)) => Err(self.err(WgpuError::Wgpu(format!(
                        "kernel {name}: a queued launch asked for room in the temporary"
                    )))),
                    Err(err) => Err(err),
                }
            };
            self.queued.resolved.push(outcome);
        }
        Ok(())
    }

    /// Whether a launch's fault lists fit the buffers as they are.
    fn lists_fit(&self, l: &Launch) -> bool {
        let s = &self.scratch;
        s.incomplete.bytes >= l.domain.len() * 8 && s.requests.bytes >= REQUESTS_HEAD + l.pages * 8
    }
}
