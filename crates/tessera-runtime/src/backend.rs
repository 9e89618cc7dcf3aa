//! The device trait every backend implements, and what a launch is.

use std::sync::Arc;

use tessera_core::{GlobalPage, Location, PageDescriptor, PageRequest, RemoteLink, SlotAddr};

use crate::error::{Result, RuntimeError};
use crate::kernel::{Bound, Kernel, Mode};
use crate::remote::RemoteBindings;

/// The invocations a launch runs.
#[derive(Clone, Debug)]
pub enum Domain {
    /// Every (x, y) with x0 ≤ x < x1, y0 ≤ y < y1.
    Rect { x0: u32, y0: u32, x1: u32, y1: u32 },
    /// Just these invocations: a relaunch of the ones that faulted.
    List(Arc<Vec<(u32, u32)>>),
}

impl Domain {
    pub fn len(&self) -> u64 {
        match self {
            Domain::Rect { x0, y0, x1, y1 } => {
                (x1.saturating_sub(*x0) as u64) * (y1.saturating_sub(*y0) as u64)
            }
            Domain::List(l) => l.len() as u64,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One kernel launch on one device.
#[derive(Clone)]
pub struct Launch {
    pub kernel: Arc<dyn Kernel>,
    pub bindings: Arc<Vec<Bound>>,
    pub domain: Domain,
    pub mode: Mode,
    /// Global pages in the address space: the size of the request bit fields.
    pub pages: u64,
    /// Launch counter, written into the time stamps of the pages the launch touches.
    pub time: u64,
    /// Per binding, its remote object where it is one (`AccessMode::Remote`); empty when the
    /// launch binds none. A backend accesses a remote object's pages in place, never through
    /// its page table (the wgpu backend in a buffer it keeps as the object's
    /// [`RemoteBacking`](crate::RemoteBacking)), or refuses the launch
    /// (`RuntimeError::RemoteNotBuilt`).
    pub remote: RemoteBindings,
}

/// What a launch reports back: its uniquified requests and the invocations to relaunch.
#[derive(Clone, Debug, Default)]
pub struct LaunchOutcome {
    pub requests: Vec<PageRequest>,
    pub incomplete: Vec<(u32, u32)>,
    /// Of `incomplete`, the invocations that saved their state
    /// ([`Fault::Suspend`](crate::Fault::Suspend)): they made progress, so relaunching them
    /// gets further even when their earlier pages were given up.
    pub suspended: u64,
    pub invocations: u64,
    /// Seconds spent turning request bits into the request list.
    pub uniquify_s: f64,
    /// Device time of the launch, from timestamp queries, where the backend has them.
    pub gpu: Option<GpuLaunchTime>,
    /// Remote accesses that left the device, by the location they went to.
    pub remote: Vec<(Location, RemoteLink)>,
}

/// What [`Device::queue_launch`] or [`Device::queue_merge`] did with its work.
#[derive(Clone, Debug)]
pub enum Queued<T> {
    /// The backend ran it at once; here is its outcome.
    Ran(T),
    /// It is on the device's queue, at this place (1, 2, ... since the last settle, in the
    /// order of a queue the devices of one peer group share); [`Device::settle_queued`]
    /// gives its outcome.
    OnDevice(u32),
}

/// The outcome of work left on the device's queue.
#[derive(Clone, Debug)]
pub enum Settled {
    Launch(LaunchOutcome),
    Merge(MergeOutcome),
}

/// The outcome of work left on the device's queue: `Ok(None)` when it did nothing usable: it
/// skipped itself behind earlier queued work that faulted or failed, or it was a `Mode::Temp`
/// launch that needed more room in the temporary than it was given (it wrote no page).
pub type QueuedOutcome = Result<Option<Settled>>;

/// Device time of one launch, measured on the device (timestamp queries), not by the host.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuLaunchTime {
    /// The kernel's dispatch.
    pub kernel_s: f64,
    /// Turning the request bit fields into the request list (the compaction kernel).
    pub uniquify_s: f64,
}

/// What a merge wrote, and the pages it could not write because they are not held writable.
#[derive(Clone, Debug, Default)]
pub struct MergeOutcome {
    pub written: u64,
    pub missing: Vec<GlobalPage>,
    /// Device time of the merge, from timestamp queries, where the backend has them.
    pub gpu_s: Option<f64>,
}

pub use crate::peer::{PeerCopy, PeerMemory, SlotSink};

/// A device: physical memories, page slots, a page table, and kernel launches.
/// Implemented by the CPU backend (`cpu::CpuDevice`, the embedded default) and by the wgpu
/// backend (`tessera_wgpu::WgpuDevice`). A launch that fails fails alike on both: the same
/// [`RuntimeError`], field for field (see `kernel::check_launch` and the
/// first-error rule in [`Device::launch`]).
pub trait Device: Send {
    /// What the device is, for reports.
    fn describe(&self) -> String;
    /// Whether its launches count their accesses to remote pages
    /// ([`LaunchOutcome::remote`]). A backend that does not leaves them out of the traffic
    /// counters and of the modeled time, and reports must say so rather than print zero.
    fn counts_remote(&self) -> bool {
        false
    }
    /// How many physical memories, and how large, the device can have: the memory manager
    /// sizes memories within them. No limit by default.
    fn memory_limits(&self) -> tessera_core::MemoryLimits {
        tessera_core::MemoryLimits::default()
    }
    /// Allocates physical memory `memory` with `capacity` slots of `slot_bytes`.
    fn create_memory(&mut self, memory: u16, slot_bytes: u64, capacity: u32) -> Result<()>;
    fn write_slot(&mut self, at: SlotAddr, data: &[u8]) -> Result<()>;
    /// Writes several slots, in order, as one batch where the backend has something better
    /// than one write per slot; the default writes them one at a time. The wgpu backend
    /// copies a batch out of a staging ring (wgpu's `StagingBelt`, chunks mapped again batch
    /// after batch) in one submission; a fresh staging buffer per batch had moved pages at a
    /// fifth of the rate of a `write_buffer` per page on lavapipe, its time in page faults on
    /// the new mapping (`bench page-moves --backend wgpu`, 64 KiB pages).
    fn write_slots(&mut self, writes: &[(SlotAddr, &[u8])]) -> Result<()> {
        for &(at, data) in writes {
            self.write_slot(at, data)?;
        }
        Ok(())
    }
    fn read_slot(&mut self, at: SlotAddr) -> Result<Vec<u8>>;
    /// Seconds one copy of `bytes` from host memory into this device's memory takes, waited
    /// for and nothing else queued: the host link as one large copy sees it, which
    /// `bench oversubscription` divides the bytes that must cross by for its transfer bound.
    /// `None` (the default) where the backend has no such copy.
    fn time_host_copy(&mut self, _bytes: u64) -> Result<Option<f64>> {
        Ok(None)
    }
    /// Reads a slot into `out`, which must be exactly a slot long. The memory manager reads
    /// pages into buffers it reuses or straight into their home copy, where a fresh vector per
    /// page cost page faults (`tessera bench page-moves`); the default goes through
    /// [`Device::read_slot`] for backends with nothing faster.
    fn read_slot_to(&mut self, at: SlotAddr, out: &mut [u8]) -> Result<()> {
        copy_slot(out, &self.read_slot(at)?)
    }
    /// Reads several slots at once where that saves the backend a wait per slot: `Some` of
    /// each slot's bytes in order, or `None` (the default) for "read them one at a time with
    /// [`Device::read_slot_to`]", which on the CPU backend copies once, straight into the
    /// caller's buffer. On a GPU each separate read is a submission, a map and a wait (a write-back
    /// and read of a 64 KiB page took 45 µs on an H100, docs/EVALUATION.md), so the wgpu backend
    /// reads them in one.
    fn read_slots(&mut self, _at: &[SlotAddr]) -> Result<Option<Vec<Vec<u8>>>> {
        Ok(None)
    }
    /// Starts reading several slots and returns at once: `Some` of a read whose bytes are the
    /// slots' as they are now, whatever is later written to them, or `None` (the default) for
    /// "read them now with [`Device::read_slots`]". The memory manager writes an evicted
    /// page home this way and takes the bytes only when home's copy is needed, so an
    /// eviction costs no wait for the GPU (docs/WGPU.md, "Write-backs in the background").
    fn read_slots_later(&mut self, _at: &[SlotAddr]) -> Result<Option<Box<dyn PendingRead>>> {
        Ok(None)
    }
    /// The page table follows the global address space.
    fn resize_page_table(&mut self, pages: u64) -> Result<()>;
    fn set_page(&mut self, page: GlobalPage, desc: PageDescriptor) -> Result<()>;
    /// The time stamps of these pages: the `Launch::time` of the last launch that touched each
    /// (0 if none has). The memory manager reads them to choose LRU and clock victims. A
    /// device that queues launches (`queues_launches`) may answer, while launches are queued
    /// and not yet read back, with the stamps as they were before them, rather than wait.
    fn page_times(&mut self, pages: &[GlobalPage]) -> Result<Vec<u64>>;
    /// Runs a launch. Where invocations fail (a kernel error, not a miss), the launch fails
    /// with the error of the first failing invocation in launch order: row-major over a
    /// rectangle, list order over a list. Each invocation stops at its own first error.
    fn launch(&mut self, launch: &Launch) -> Result<LaunchOutcome>;
    /// Whether [`Device::queue_launch`] leaves launches on the device for
    /// [`Device::settle_queued`]; asked once, when the device's worker starts.
    fn queues_launches(&self) -> bool {
        false
    }
    /// Queues a `Mode::Direct` or `Mode::Temp` launch behind the work queued since the last
    /// [`Device::settle_queued`] and returns without waiting for it, where the backend can
    /// (deferred execution: Legion/Realm's operations that return before they run). Queued
    /// work checks first, on the device, whether work queued before it faulted, failed, asked
    /// for a page (a `Mode::Temp` store to a page not held writable) or ran out of room in the
    /// temporary, and if so does nothing, not even stamping pages: the caller runs it again
    /// after servicing that, so results never depend on timing. The default runs the launch
    /// at once.
    fn queue_launch(&mut self, launch: &Launch) -> Result<Queued<LaunchOutcome>> {
        self.launch(launch).map(Queued::Ran)
    }
    /// Queues a merge of the temporary behind the queued work, as [`Device::queue_launch`]
    /// queues a launch. The default merges at once.
    fn queue_merge(&mut self) -> Result<Queued<MergeOutcome>> {
        self.merge().map(Queued::Ran)
    }
    /// Waits for every launch and merge left on the device by [`Device::queue_launch`] and
    /// [`Device::queue_merge`] (one wait for all of them) and gives their outcomes in queue
    /// order. Work queued after it starts a fresh queue: nothing in it has faulted. Devices of
    /// one peer group ([`Device::peer_group`]) that queue launches share one queue and its
    /// gate: work one of them queued behind another's fault skips too, and settling one
    /// reopens the gate for all, so every device of the group is settled before any queues
    /// again.
    fn settle_queued(&mut self) -> Result<Vec<QueuedOutcome>> {
        let out = self.collect_queued()?;
        self.reopen_queue();
        Ok(out)
    }
    /// [`Device::settle_queued`]'s first half, for devices that share a queue: waits for the
    /// work queued so far and gives its outcomes, leaving the gate as it is, so that work
    /// another device still queues behind a fault skips too. The node calls
    /// [`Device::reopen_queue`] once every device of the group has collected.
    fn collect_queued(&mut self) -> Result<Vec<QueuedOutcome>> {
        Ok(Vec::new())
    }
    /// Opens the queue's gate again and starts its places from 1, for every device of the
    /// group: called with nothing queued on any of them since they collected.
    fn reopen_queue(&mut self) {}
    /// Merges the temporary of this pass's `Mode::Temp` launches into the pages through its
    /// write mask (paper 3.5, third pass). Stores to pages not held writable stay in the
    /// temporary; their pages are reported so the driver can request them and merge again.
    fn merge(&mut self) -> Result<MergeOutcome>;
    /// Drops the last temporary without merging (a pass that wrote nothing).
    fn discard_temp(&mut self);

    /// Called by the device's worker at the end of every job, before the job's reply: a device
    /// that holds back work it was given (a view of a device on another node sends a job's
    /// slot writes as one message) sends it now, so the job's effects go out before anyone
    /// the reply wakes can act on them.
    fn end_of_job(&mut self) {}

    /// The backend's own host counters (submissions, waits for the device, bytes read
    /// back), asked once when the device's worker starts; `None` where the backend keeps
    /// none (the CPU backend: its worker's own counts say it all).
    fn counters(&self) -> Option<Arc<crate::stats::BackendCounters>> {
        None
    }

    /// Devices that answer the same `Some(group)` copy pages between their memories on the
    /// device itself, with no host round trip (the wgpu devices of one `tessera_wgpu::SharedGpu`:
    /// one wgpu device and queue). The memory manager asks once, at start. `None` (the
    /// default): pages reach this device from another only through the host.
    fn peer_group(&self) -> Option<u64> {
        None
    }
    /// A handle to physical memory `memory` for [`Device::copy_from_peers`] on a device of the
    /// same peer group.
    fn peer_memory(&self, _memory: u16) -> Result<PeerMemory> {
        Err(RuntimeError::NoPeerCopies {
            backend: self.describe(),
        })
    }
    /// Copies the slots, in order, in one submission, and returns when they are done. Every
    /// source must belong to a device of this device's peer group, and the caller must keep
    /// each source slot unchanged until this returns (the memory manager's order: the source
    /// page made read-only first, its slot not reused before the copy is acknowledged).
    /// A handle through which the memory manager writes slots of physical memory `memory`
    /// from its own thread while the device runs a launch (staged pages, copied during the
    /// launch instead of after it). `None` (the default): the device's slots are written only
    /// by its worker, behind its launches.
    fn slot_sink(&self, _memory: u16) -> Option<Arc<dyn SlotSink>> {
        None
    }

    /// Waits until the device has finished all it was given and returned from without
    /// waiting (a batch of peer copies on a GPU). Callers that time page moves, or read
    /// device memory by a path outside the device's queue, call it; the runtime itself never
    /// needs to, because every later use of those slots is queued behind the work. The
    /// default: nothing is ever left running.
    fn wait_queued(&mut self) -> Result<()> {
        Ok(())
    }

    fn copy_from_peers(&mut self, copies: &[PeerCopy]) -> Result<()> {
        if copies.is_empty() {
            return Ok(());
        }
        Err(RuntimeError::NoPeerCopies {
            backend: self.describe(),
        })
    }
}

/// A read started by [`Device::read_slots_later`].
pub trait PendingRead: Send {
    /// The slots' bytes, in the order asked, waiting for them if they are not back yet.
    fn wait(self: Box<Self>) -> Result<Vec<Vec<u8>>>;
}

/// Copies a slot's bytes, read back by the backend, into `out`, which must be as long.
pub(crate) fn copy_slot(out: &mut [u8], data: &[u8]) -> Result<()> {
    if out.len() != data.len() {
        return Err(RuntimeError::Internal(format!(
            "a slot of {} bytes read into {} bytes",
            data.len(),
            out.len()
        )));
    }
    out.copy_from_slice(data);
    Ok(())
}
