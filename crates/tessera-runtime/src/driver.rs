//! Drivers: one per device, running that device's command stream (the paper's event handler,
//! 3.7). A driver waits on its device worker and on the memory manager, never the other way
//! round, and sends no request while it holds the memory lock.
//!
//! The two procedures of a pass:
//! - **two-pass** (paper 3.4–3.5): a request pass records the pages each invocation reads; they
//!   are requested in one batch; the compute pass writes into a temporary plus write mask and
//!   records the pages it writes; those are requested exclusively; the merge pass writes the
//!   temporary through the mask. The paper factored each shader by hand; here the same kernel
//!   runs in request-recording mode and in compute mode. Loads that depend on loaded values
//!   cannot be seen by the request pass (it yields zero for a miss), so the compute pass falls
//!   back on fault-and-relaunch for them.
//! - **relaunch** (the patent): the kernel runs; invocations that miss record requests and
//!   stop; the launch's requests are serviced in one batch and only the unfinished invocations
//!   run again, until none remain.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tessera_core::{Access, DeviceId, GlobalPage, ObjectEntry, PageRequest};

use crate::backend::{Domain, Launch, LaunchOutcome, MergeOutcome, Queued, QueuedOutcome, Settled};
use crate::error::{Result, RuntimeError};
use crate::kernel::{Bound, Kernel, Mode, RESUMED_BIT};
use crate::manager::{LaunchStarter, ManagerHandle};
use crate::sync::channel::bounded;
use crate::worker::{Pending, WorkerHandle};

/// How a pass gets its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    TwoPass,
    Relaunch,
}

/// The option's word (`--procedure two-pass`), so that every summary speaks the CLI's
/// vocabulary.
impl std::fmt::Display for Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Procedure::TwoPass => "two-pass",
            Procedure::Relaunch => "relaunch",
        })
    }
}

impl std::str::FromStr for Procedure {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "two-pass" => Ok(Procedure::TwoPass),
            "relaunch" => Ok(Procedure::Relaunch),
            _ => Err(format!(
                "unknown procedure {s:?} (expected two-pass or relaunch)"
            )),
        }
    }
}

/// Seconds per stage, after the paper's Table 3. All measured wall time on this machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimes {
    /// Request-recording launches (two-pass only): Table 3's "page read request pass".
    pub request_pass: f64,
    /// Turning request bit fields into request lists: "read/write request uniquify".
    pub uniquify: f64,
    /// Waiting for read-only batches: "non-exclusive page request handling".
    pub read_requests: f64,
    /// Compute launches and relaunches: "page write request pass".
    pub compute: f64,
    /// Waiting for batches with exclusive pages: "exclusive page request handling".
    pub write_requests: f64,
    /// Merging temporaries through write masks: "page writes".
    pub page_writes: f64,
    /// All the time of display passes.
    pub display: f64,
}

impl StageTimes {
    pub fn add(&mut self, o: &StageTimes) {
        self.request_pass += o.request_pass;
        self.uniquify += o.uniquify;
        self.read_requests += o.read_requests;
        self.compute += o.compute;
        self.write_requests += o.write_requests;
        self.page_writes += o.page_writes;
        self.display += o.display;
    }
    /// The device's own time as display time. Waits for request batches stay request
    /// handling: a display pass asks for its footprint's pages first (`SystemConfig::
    /// footprint_ahead`), and that wait is the memory manager's time, where the isolated
    /// model counts it, not the display's.
    pub fn lumped_into_display(&self) -> StageTimes {
        StageTimes {
            display: self.total() - self.read_requests - self.write_requests,
            read_requests: self.read_requests,
            write_requests: self.write_requests,
            ..Default::default()
        }
    }

    pub fn total(&self) -> f64 {
        self.request_pass
            + self.uniquify
            + self.read_requests
            + self.compute
            + self.write_requests
            + self.page_writes
            + self.display
    }
}

/// What one device did in one pass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PassStats {
    pub stages: StageTimes,
    /// Device time per stage from timestamp queries (GPU backends that have them): the
    /// kernels' own time inside `stages`' wall time. `None` where nothing was timed.
    pub gpu_stages: Option<StageTimes>,
    pub launches: u64,
    pub invocations: u64,
    /// Invocations run again after a fault.
    pub relaunched: u64,
    /// Of those, the ones that had saved their state first (`Fault::Suspend`).
    pub suspended: u64,
    pub batches: u64,
    /// Times a wave's pages did not fit the device's budget and it was split (oversubscription).
    pub wave_splits: u64,
    /// Two-pass request passes launched.
    pub request_passes: u64,
    /// Two-pass request passes not launched because the kernel's footprint showed every page
    /// of the part resident on the device already (the paper's occlusion-query idea), or
    /// named the pages to ask for in its place (`SystemConfig::footprint_ahead`).
    pub request_passes_skipped: u64,
    /// Staged batches granted (`SystemConfig::staging`): a next band's pages fetched while the
    /// current band's launch ran.
    pub staged: u64,
    /// Staged batches refused (nothing changed; the band then asks as usual).
    pub stage_refusals: u64,
    /// Bands of a footprint kernel launched with no request because the device held every
    /// page they name with the rights they need (the steady state, `crate::held`), and
    /// two-pass parts run in place for the same reason (`SystemConfig::held_in_place`).
    pub held_bands: u64,
    /// Pages requested by invocations that completed without them (a degrading sample,
    /// `sampler::sample_degraded`), brought after the pass for a later one.
    pub late_requests: u64,
}

impl PassStats {
    /// A display pass: all its time, wall and device, is the display stage, but for its
    /// waits for request batches ([`StageTimes::lumped_into_display`]).
    pub fn lump_into_display(&mut self) {
        self.stages = self.stages.lumped_into_display();
        self.gpu_stages = self.gpu_stages.map(|g| g.lumped_into_display());
    }

    /// The device-time stages, started at zero the first time a backend reports one.
    fn gpu(&mut self) -> &mut StageTimes {
        self.gpu_stages.get_or_insert_with(Default::default)
    }

    pub fn add(&mut self, o: &PassStats) {
        self.stages.add(&o.stages);
        if let Some(g) = &o.gpu_stages {
            self.gpu_stages.get_or_insert_with(Default::default).add(g);
        }
        self.launches += o.launches;
        self.invocations += o.invocations;
        self.relaunched += o.relaunched;
        self.suspended += o.suspended;
        self.batches += o.batches;
        self.wave_splits += o.wave_splits;
        self.request_passes += o.request_passes;
        self.request_passes_skipped += o.request_passes_skipped;
        self.staged += o.staged;
        self.stage_refusals += o.stage_refusals;
        self.held_bands += o.held_bands;
        self.late_requests += o.late_requests;
    }
}

/// One pass to run: a kernel over a domain with the objects it may touch.
#[derive(Clone)]
pub struct PassSpec {
    pub kernel: Arc<dyn Kernel>,
    pub bindings: Arc<Vec<Bound>>,
    pub domain: Domain,
    /// A display pass: all its time is the display stage.
    pub display: bool,
}

impl PassSpec {
    /// A pass of `kernel` binding `bindings` over the `width` × `height` rectangle at the
    /// origin, not a display pass. A pass split across devices replaces the domain with each
    /// device's band, so there the rectangle may be empty.
    pub fn new(
        kernel: Arc<dyn Kernel>,
        bindings: Arc<Vec<Bound>>,
        width: u32,
        height: u32,
    ) -> Self {
        PassSpec {
            kernel,
            bindings,
            domain: Domain::Rect {
                x0: 0,
                y0: 0,
                x1: width,
                y1: height,
            },
            display: false,
        }
    }

    /// A pass of `kernel` over every texel of the `width` × `height` rectangle at the origin,
    /// binding `objects` in order: the common case of a kernel over a whole object.
    pub fn over(
        kernel: impl Kernel + 'static,
        objects: &[&ObjectEntry],
        width: u32,
        height: u32,
    ) -> Self {
        let bindings = objects.iter().map(|e| Bound::new(e)).collect();
        PassSpec::new(Arc::new(kernel), Arc::new(bindings), width, height)
    }
}

/// The page side a `width` × `height` pass binding `bindings` is cut on
/// (`Partition::regions_on_pages`): the largest of the plain textures it binds that have the
/// pass's size, which the workloads address at the invocation's coordinates (boiling's fields,
/// a frame). Page sides are powers of two, so a cut on the largest is on the others too. 1
/// when none.
pub(crate) fn split_page(bindings: &[Bound], width: u32, height: u32) -> u32 {
    bindings
        .iter()
        .filter(|b| b.format.is_some() && b.mip.is_none())
        .filter(|b| (b.width, b.height) == (width as u64, height as u64))
        .map(|b| 1u32 << b.shift)
        .max()
        .unwrap_or(1)
}

/// Relaunch rounds of one wave before a pass is declared stuck. Each round completes every
/// invocation whose pages were all granted, so only a chain of this many dependent misses can
/// reach it.
const MAX_ROUNDS: usize = 10_000;

/// A device's command stream: its worker and the memory manager, plus the launch counter.
pub struct DeviceContext {
    pub device: DeviceId,
    pub worker: WorkerHandle,
    pub mm: ManagerHandle,
    time: u64,
    /// Pages granted by the last reply, held under the memory lock until `release`.
    granted: Vec<PageRequest>,
    /// Asynchronous staging on (`SystemConfig::staging`).
    staging: bool,
    /// Pages of the next band, staged by the next launch if the device is then locked.
    stage_next: Vec<PageRequest>,
    /// Time the releases since the last pass reported took, after a read-only grant and
    /// after one with writes: the memory manager's time when the release runs on this
    /// thread, charged to the next pass's request stages.
    released_s: [f64; 2],
    /// Relaunch asks for a footprint kernel's pages first (`SystemConfig::footprint_ahead`).
    footprint_ahead: bool,
    /// Two-pass runs a held part in place (`SystemConfig::held_in_place`).
    held_in_place: bool,
    /// Launches of held bands are queued without waiting for their outcome (deferred
    /// execution; on a node of one device, see `set_deferred`, or of devices sharing one
    /// queue, see `set_shared`).
    deferred: bool,
    /// Deferred across the devices of one queue (`set_shared`): bands whose pages must be
    /// asked for are queued too, and only the node settles, all its devices together.
    shared: bool,
    /// What the node's settle found must run again here, in queue order, for the node to run
    /// in the order of the queue the devices share (`settle_collect`, `redo_next`).
    redo_queue: VecDeque<Redo>,
    /// Bands of the last pass that could not be queued (they did not fit the budget whole):
    /// the node settles, then runs them the ordinary way (`run_left`).
    left: Vec<PassSpec>,
    /// Held bands queued and not yet settled, in launch order.
    outstanding: Vec<Outstanding>,
    /// Set by a deferred launch that faulted, inside its job: every deferred launch queued
    /// behind it finds it set and does nothing, so results never depend on timing. Cleared
    /// when the driver settles, before it runs anything again.
    skip: Arc<std::sync::atomic::AtomicBool>,
    /// When the oldest outstanding launch was queued: the wall time up to its settling is
    /// compute time, less the waits for the memory manager in between (`waited_since`).
    outstanding_since: Option<Instant>,
    /// The memory manager's part of the waits since `outstanding_since`, already charged to
    /// the request stages.
    waited_since: f64,
    /// The worker's time in deferred jobs, taken out of the waits for the manager.
    clock: Arc<LaunchClock>,
    /// Stats and the first error of settles that ran outside a pass (before a job of the
    /// host's, at the end of a frame), given back by the next `run_pass` or `take_settled`.
    settled: PassStats,
    settle_error: Option<RuntimeError>,
}

/// Deferred work: what to run again if it faulted or was skipped, and its replies: a
/// relaunch band's launch, or a two-pass part's compute pass and then its merge.
struct Outstanding {
    spec: PassSpec,
    domain: Domain,
    replies: Vec<Pending<Result<Deferred>>>,
}

/// The time a device's worker has spent running this driver's deferred work. A batch the
/// driver asks for while launches are queued waits behind them on the worker (the memory
/// manager's jobs for the device run after what is queued there), and that part of the wait
/// is the launches' time, which the settle already counts as compute: the driver takes it out
/// of the wait before charging the wait to the manager. Without that, a lone device that
/// asks for pages between deferred launches (a cold frame, a budget that evicts) had each
/// launch counted twice, once as compute and once as the manager's time.
#[derive(Default)]
struct LaunchClock(std::sync::Mutex<ClockState>);

#[derive(Default)]
struct ClockState {
    done: std::time::Duration,
    running_since: Option<Instant>,
}

impl LaunchClock {
    /// Runs `f`, the device work of one deferred job, on the clock.
    fn run<R>(&self, f: impl FnOnce() -> R) -> R {
        self.state().running_since = Some(Instant::now());
        let r = f();
        let mut c = self.state();
        if let Some(t) = c.running_since.take() {
            c.done += t.elapsed();
        }
        r
    }
    /// The time spent in deferred jobs so far, the one running included.
    fn busy(&self) -> std::time::Duration {
        let c = self.state();
        c.done
            + c.running_since
                .map_or_else(Default::default, |t| t.elapsed())
    }
    /// The lock is never held across a job, so a poisoned one still holds whole readings.
    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A queue's places count up from 1 until it is reopened, which devices sharing a queue do only
/// after a fault or past this place (`u32` places; 0 means work not queued).
const PLACES_BEFORE_REOPEN: u32 = 1 << 30;

/// What one device's half of the node's settle found (`DeviceContext::settle_collect`).
#[derive(Default)]
pub(crate) struct Collected {
    /// The places in the shared queue of what must run again, in order.
    pub(crate) places: Vec<u32>,
    /// Whether the queue must be reopened before anything queues again.
    pub(crate) reopen: bool,
}

/// What became of deferred work on the worker.
enum Deferred {
    Ran(Settled),
    /// Skipped behind work that faulted: it did nothing.
    Skipped,
    /// Left on the device's queue at this place; the settle's `Device::settle_queued` has its
    /// outcome.
    OnDevice(u32),
}

/// Deferred work that must run again, the ordinary way, once the queue is settled.
enum Redo {
    /// A band's unfinished invocations, or a skipped band.
    Band(PassSpec, Domain),
    /// A two-pass part that faulted or was skipped: its temporary is dropped and it runs
    /// whole again (a compute pass writes no page, so running it again changes nothing).
    Part(PassSpec, Domain),
    /// A two-pass part whose merge found pages it could not write: they are asked for and
    /// the rest of the temporary is merged, as the ordinary merge does.
    Merge(PassSpec, Vec<GlobalPage>),
}

impl DeviceContext {
    pub fn new(worker: WorkerHandle, mm: ManagerHandle) -> Self {
        DeviceContext {
            device: worker.device,
            worker,
            mm,
            time: 0,
            granted: Vec::new(),
            staging: false,
            stage_next: Vec::new(),
            released_s: [0.0; 2],
            footprint_ahead: true,
            held_in_place: true,
            deferred: false,
            shared: false,
            redo_queue: VecDeque::new(),
            left: Vec::new(),
            outstanding: Vec::new(),
            skip: Arc::default(),
            outstanding_since: None,
            waited_since: 0.0,
            clock: Arc::default(),
            settled: PassStats::default(),
            settle_error: None,
        }
    }

    /// Turns deferred execution of held bands on or off. Only sound where no other device
    /// of the node can ask for this device's pages between two settles: with one device per
    /// node, every page change queued on the worker comes from this driver (after a settle)
    /// or from the host, which settles first (`System`'s host handle).
    pub fn set_deferred(&mut self, on: bool) {
        self.deferred = on;
    }

    /// Turns deferred execution across the devices of one queue on or off (docs/PROTOCOL.md,
    /// "Deferred across the devices of one queue"). Sound only where every device of the node
    /// queues its launches on one queue with one gate (`Device::peer_group`, wgpu), and the
    /// node settles all of them together (`settle_collect`, `redo_next`): a fault on any
    /// device makes everything queued behind it, on every device, skip, and what skipped runs
    /// again in the queue's order.
    pub(crate) fn set_shared(&mut self, on: bool) {
        self.shared = on;
        self.deferred = on;
    }

    /// Whether bands that must ask for pages are queued too (see `set_shared`).
    fn across(&self) -> bool {
        self.shared && self.deferred
    }

    /// Whether bands of the last pass wait for the node's settle (`run_left`).
    pub(crate) fn has_left(&self) -> bool {
        !self.left.is_empty()
    }

    /// Runs, the ordinary way, the bands of the last pass that could not be queued; the node
    /// settled first. What they did is reported with the next pass or settle.
    pub(crate) fn run_left(&mut self) {
        let left = std::mem::take(&mut self.left);
        let deferred = std::mem::replace(&mut self.deferred, false);
        let mut stats = std::mem::take(&mut self.settled);
        for spec in left {
            let res = self.relaunch(&spec, &mut stats);
            self.release();
            if let Err(e) = res {
                self.settle_error.get_or_insert(e);
                break;
            }
        }
        self.settled = stats;
        self.deferred = deferred;
    }

    /// The node's settle across the devices of one queue, first half: waits for this
    /// device's deferred work and keeps what must run again, giving back the places in the
    /// queue of each, for the node to run all devices' in the queue's order (`redo_next`).
    /// Stats and the first error go where `settle` puts them.
    pub(crate) fn settle_collect(&mut self) -> Collected {
        if self.outstanding.is_empty() {
            return Collected::default();
        }
        let mut stats = std::mem::take(&mut self.settled);
        let mut last = 0;
        let out = match self.collect(&mut stats, &mut last) {
            Ok(redo) => {
                let places: Vec<u32> = redo.iter().map(|&(place, _)| place).collect();
                self.redo_queue = redo.into_iter().map(|(_, r)| r).collect();
                Collected {
                    // Something faulted, so the gate is closed; or the places have come far.
                    reopen: !places.is_empty() || last > PLACES_BEFORE_REOPEN,
                    places,
                }
            }
            Err(e) => {
                self.settle_error.get_or_insert(e);
                Collected {
                    places: Vec::new(),
                    reopen: true,
                }
            }
        };
        self.settled = stats;
        out
    }

    /// Reopens the queue this device shares with the node's others, once all have collected
    /// (`settle_collect`).
    pub(crate) fn reopen_queue(&mut self) {
        if let Err(e) = self.worker.call(|d| {
            d.reopen_queue();
            Ok(())
        }) {
            self.settle_error.get_or_insert(e);
        }
    }

    /// The node's settle, second half: runs the next thing `settle_collect` kept. False once
    /// an error stopped this device's settle (nothing more runs).
    pub(crate) fn redo_next(&mut self) -> bool {
        if self.settle_error.is_some() {
            self.redo_queue.clear();
            return false;
        }
        let Some(r) = self.redo_queue.pop_front() else {
            return true;
        };
        let mut stats = std::mem::take(&mut self.settled);
        let res = self.redo(r, &mut stats);
        self.settled = stats;
        if let Err(e) = res {
            self.settle_error.get_or_insert(e);
            self.redo_queue.clear();
            return false;
        }
        true
    }

    /// Waits for every deferred launch (one blocking wait, for the last: the worker answers
    /// in order) and finishes what faulted: the faulting band's unfinished invocations and
    /// every band skipped behind it run again, in launch order, the ordinary way. Stats go to
    /// `settled`, an error to `settle_error` (first one wins).
    pub fn settle(&mut self) {
        if self.outstanding.is_empty() {
            return;
        }
        let mut stats = std::mem::take(&mut self.settled);
        if let Err(e) = self.settle_into(&mut stats) {
            self.settle_error.get_or_insert(e);
        }
        self.settled = stats;
    }

    /// Settles, then gives back what settles outside a pass have done since the last call,
    /// or their first error.
    pub fn settle_and_take(&mut self) -> Result<PassStats> {
        self.settle();
        self.take_settled()
    }

    /// The error a settle kept for the next pass, taken: the host reports it instead, before
    /// it reads what the failed pass left. The stats stay for the next pass.
    pub fn take_settle_error(&mut self) -> Option<RuntimeError> {
        self.settle_error.take()
    }

    fn take_settled(&mut self) -> Result<PassStats> {
        let stats = std::mem::take(&mut self.settled);
        match self.settle_error.take() {
            Some(e) => Err(e),
            None => Ok(stats),
        }
    }

    fn settle_into(&mut self, stats: &mut PassStats) -> Result<()> {
        for (_, r) in self.collect(stats, &mut 0)? {
            self.redo(r, stats)?;
        }
        Ok(())
    }

    /// Waits for every deferred launch and accounts for it; gives back what must run again,
    /// in launch order, each with its place in the device's queue (0 where it keeps none).
    fn collect(&mut self, stats: &mut PassStats, last: &mut u32) -> Result<Vec<(u32, Redo)>> {
        let mut outstanding = std::mem::take(&mut self.outstanding);
        // One blocking wait: for the device's queue where it keeps one, else for the last
        // reply. The worker answers in order, so every earlier reply is there by then.
        let mut on_device = None;
        let mut tail = None;
        if self.worker.queues_launches() {
            // Devices that share a queue leave its gate closed: the node reopens it once all
            // of them have collected (`settle_collect`).
            let queued = if self.shared {
                self.worker.submit(|d| d.collect_queued()).wait()
            } else {
                self.worker.submit(|d| d.settle_queued()).wait()
            };
            on_device = Some(queued.and_then(|r| r).map(Vec::into_iter));
        } else if let Some(p) = outstanding.last_mut().and_then(|o| o.replies.pop()) {
            tail = Some(p.wait().and_then(|r| r));
        }
        let n = outstanding.len();
        let mut done = Vec::with_capacity(n);
        for (i, o) in outstanding.into_iter().enumerate() {
            let mut replies: Vec<Result<Deferred>> = o
                .replies
                .into_iter()
                .map(|p| match p.try_take() {
                    Some(r) => r,
                    None => p.wait().and_then(|r| r),
                })
                .collect();
            if i + 1 == n {
                replies.extend(tail.take());
            }
            let mut place = 0;
            let mut outcomes: Vec<QueuedOutcome> = Vec::with_capacity(replies.len());
            for reply in replies {
                outcomes.push(match reply {
                    Err(e) => Err(e),
                    Ok(Deferred::Ran(out)) => Ok(Some(out)),
                    Ok(Deferred::Skipped) => Ok(None),
                    Ok(Deferred::OnDevice(at)) => {
                        if place == 0 {
                            place = at;
                        }
                        *last = (*last).max(at);
                        match on_device.as_mut() {
                            Some(Ok(outcomes)) => outcomes.next().unwrap_or_else(|| {
                                Err(RuntimeError::Internal(
                                    "the device settled less work than it queued".into(),
                                ))
                            }),
                            Some(Err(e)) => Err(e.clone()),
                            None => Err(RuntimeError::Internal(
                                "work left on a device that keeps no queue".into(),
                            )),
                        }
                    }
                });
            }
            done.push((place, o.spec, o.domain, outcomes));
        }
        if let Some(t) = self.outstanding_since.take() {
            let waited = std::mem::take(&mut self.waited_since);
            stats.stages.compute += (t.elapsed().as_secs_f64() - waited).max(0.0);
        }
        let mut first_err = None;
        let mut redo = Vec::new();
        for (place, spec, domain, outcomes) in done {
            match self.account(spec, domain, outcomes, stats) {
                Ok(Some(r)) => redo.push((place, r)),
                Ok(None) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        self.skip.store(false, std::sync::atomic::Ordering::SeqCst);
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(redo)
    }

    /// Runs deferred work that faulted or was skipped again, the ordinary way.
    fn redo(&mut self, r: Redo, stats: &mut PassStats) -> Result<()> {
        match r {
            Redo::Band(spec, domain) => {
                self.launch_until_done(&spec, domain, Vec::new(), Mode::Direct, stats)?;
            }
            Redo::Part(spec, domain) => {
                self.worker.call(|d| {
                    d.discard_temp();
                    Ok(())
                })?;
                self.two_pass_over(&spec, domain, false, stats)?;
            }
            Redo::Merge(spec, missing) => {
                self.timed_acquire(write_requests(missing), Vec::new(), stats)?;
                let merged = self.merge_temp(&spec, stats);
                self.release();
                merged?;
            }
        }
        Ok(())
    }

    /// Adds settled deferred work to the stats; what must run again, if anything.
    fn account(
        &mut self,
        spec: PassSpec,
        domain: Domain,
        outcomes: Vec<QueuedOutcome>,
        stats: &mut PassStats,
    ) -> Result<Option<Redo>> {
        let mut outcomes = outcomes.into_iter();
        let two_pass = outcomes.len() == 2;
        let launch = match outcomes.next().transpose()? {
            Some(Some(Settled::Launch(out))) => out,
            // Skipped behind work that faulted (or, a compute pass, out of room): nothing done.
            Some(None) if two_pass => return Ok(Some(Redo::Part(spec, domain))),
            Some(None) => return Ok(Some(Redo::Band(spec, domain))),
            _ => {
                return Err(RuntimeError::Internal(
                    "deferred work settled as something it was not".into(),
                ))
            }
        };
        let merge = outcomes.next().transpose()?;
        stats.launches += 1;
        stats.invocations += launch.invocations;
        if let Some(g) = launch.gpu {
            let gs = stats.gpu();
            gs.compute += g.kernel_s;
            gs.uniquify += g.uniquify_s;
        }
        self.mm.count_remote(self.device, launch.remote);
        if !two_pass {
            if launch.incomplete.is_empty() {
                return Ok(None);
            }
            stats.relaunched += launch.incomplete.len() as u64;
            let rest = Domain::List(Arc::new(launch.incomplete));
            return Ok(Some(Redo::Band(spec, rest)));
        }
        match merge {
            Some(Some(Settled::Merge(m))) => {
                if let Some(g) = m.gpu_s {
                    stats.gpu().page_writes += g;
                }
                if m.missing.is_empty() {
                    Ok(None)
                } else {
                    Ok(Some(Redo::Merge(spec, m.missing)))
                }
            }
            // The compute pass faulted or asked for pages, so its merge was skipped.
            _ => Ok(Some(Redo::Part(spec, domain))),
        }
    }

    /// Queues a held band's launch without waiting for it; the launch does nothing if
    /// deferred work before it faulted (`skip`).
    fn defer_launch(&mut self, spec: &PassSpec, domain: Domain) {
        let launch = self.next_launch(spec, domain.clone(), Mode::Direct);
        let reply = self.queue_job(launch);
        self.push_outstanding(spec, domain, vec![reply]);
    }

    /// Queues a held two-pass part, its compute pass into the temporary and its merge,
    /// without waiting for either. A compute pass that faults or asks for a page it cannot
    /// write stops everything behind it, its own merge included (`skip`); the part then runs
    /// again whole at the settle.
    fn defer_part(&mut self, spec: &PassSpec, domain: Domain) {
        use std::sync::atomic::Ordering::SeqCst;
        let launch = self.next_launch(spec, domain.clone(), Mode::Temp);
        let compute = self.queue_job(launch);
        let skip = self.skip.clone();
        let clock = self.clock.clone();
        let merge = self.worker.submit(move |d| {
            if skip.load(SeqCst) {
                return Ok(Deferred::Skipped);
            }
            match clock.run(|| d.queue_merge())? {
                Queued::Ran(m) => {
                    if !m.missing.is_empty() {
                        skip.store(true, SeqCst);
                    }
                    Ok(Deferred::Ran(Settled::Merge(m)))
                }
                Queued::OnDevice(at) => Ok(Deferred::OnDevice(at)),
            }
        });
        self.push_outstanding(spec, domain, vec![compute, merge]);
    }

    /// The worker's job for a deferred launch: nothing if deferred work before it stopped
    /// (`skip`); else the launch, queued on the device where it keeps a queue (which then
    /// skips behind a fault itself), or run at once, stopping what follows if it faulted or
    /// asked for a page.
    fn queue_job(&self, launch: Launch) -> Pending<Result<Deferred>> {
        use std::sync::atomic::Ordering::SeqCst;
        let skip = self.skip.clone();
        let clock = self.clock.clone();
        self.worker.submit(move |d| {
            if skip.load(SeqCst) {
                return Ok(Deferred::Skipped);
            }
            match clock.run(|| d.queue_launch(&launch))? {
                Queued::Ran(out) => {
                    if !out.incomplete.is_empty() || !out.requests.is_empty() {
                        skip.store(true, SeqCst);
                    }
                    Ok(Deferred::Ran(Settled::Launch(out)))
                }
                Queued::OnDevice(at) => Ok(Deferred::OnDevice(at)),
            }
        })
    }

    fn push_outstanding(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        replies: Vec<Pending<Result<Deferred>>>,
    ) {
        self.outstanding_since.get_or_insert_with(Instant::now);
        self.outstanding.push(Outstanding {
            spec: spec.clone(),
            domain,
            replies,
        });
    }

    /// Turns asynchronous staging on or off; the memory manager must have been built with it
    /// (`ManagerConfig::staging`), or every stage is refused.
    pub fn set_staging(&mut self, on: bool) {
        self.staging = on;
    }

    /// Whether the relaunch procedure asks for a kernel's footprint pages before its first
    /// launch also when the device is not evicting (`SystemConfig::footprint_ahead`).
    pub fn set_footprint_ahead(&mut self, on: bool) {
        self.footprint_ahead = on;
    }

    /// Runs a two-pass part the device holds whole in place, with no temporary and no merge
    /// (`SystemConfig::held_in_place`).
    pub fn set_held_in_place(&mut self, on: bool) {
        self.held_in_place = on;
    }

    pub fn launch(&mut self, spec: &PassSpec, domain: Domain, mode: Mode) -> Result<LaunchOutcome> {
        let out = self.submit_launch(spec, domain, mode).wait()??;
        self.mm.count_remote(self.device, out.remote.clone());
        Ok(out)
    }

    /// Queues a launch on the device's worker without waiting for it.
    fn submit_launch(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        mode: Mode,
    ) -> Pending<Result<LaunchOutcome>> {
        let launch = self.next_launch(spec, domain, mode);
        self.worker.submit(move |d| d.launch(&launch))
    }

    fn next_launch(&mut self, spec: &PassSpec, domain: Domain, mode: Mode) -> Launch {
        self.time += 1;
        Launch {
            kernel: spec.kernel.clone(),
            bindings: spec.bindings.clone(),
            pages: spec.bindings.iter().map(|b| b.pages_end).max().unwrap_or(0),
            domain,
            mode,
            time: self.time,
            remote: self.mm.remote_bindings(&spec.bindings),
        }
    }

    /// Queues a launch, around which the pages set aside for staging (`stage_next`) go as a
    /// `Stage` batch when staging is on and the device holds the lock (otherwise they wait
    /// for a launch that does: a two-pass part's request pass runs unlocked, its compute pass
    /// locked), less the pages the lock covers (the protocol refuses those, and they are
    /// resident anyway). The memory manager makes room for the stage first, then queues the
    /// launch, then copies the pages during it (`ManagerHandle::stage_around`). Returns the
    /// launch's reply and, with a stage, its reply and whether it asks for exclusive pages.
    #[allow(clippy::type_complexity)]
    fn launch_staging(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        mode: Mode,
    ) -> Result<(
        Pending<Result<LaunchOutcome>>,
        Option<(Pending<Result<()>>, bool)>,
    )> {
        let Some(pages) = self.stage_pages() else {
            return Ok((self.submit_launch(spec, domain, mode), None));
        };
        let launch = self.next_launch(spec, domain, mode);
        let worker = self.worker.clone();
        let (tx, rx) = bounded(1);
        let start = LaunchStarter::new(move || {
            let _ = tx.send(worker.submit(move |d| d.launch(&launch)));
        });
        let exclusive = pages.iter().any(|p| p.access == Access::Write);
        let staged = self.mm.stage_around(self.device, pages, start);
        let launched = rx
            .recv()
            .map_err(|_| RuntimeError::ThreadGone("memory manager"))?;
        Ok((launched, Some((staged, exclusive))))
    }

    fn stage_pages(&mut self) -> Option<Vec<PageRequest>> {
        if !self.staging || self.granted.is_empty() || self.stage_next.is_empty() {
            return None;
        }
        let next = std::mem::take(&mut self.stage_next);
        let pages: Vec<PageRequest> = next
            .into_iter()
            .filter(|r| {
                self.granted
                    .binary_search_by_key(&r.page, |g| g.page)
                    .is_err()
            })
            .collect();
        let pages = self.mm.missing(self.device, pages);
        if pages.is_empty() {
            return None;
        }
        Some(pages)
    }

    /// Sends a request batch without waiting: a test can interleave other devices' steps.
    pub fn request(&mut self, pages: Vec<PageRequest>) -> Pending<Result<()>> {
        self.granted = pages.clone();
        self.mm.request(self.device, pages)
    }

    /// Requests pages and waits for the grant; the device is then locked until `release`.
    pub fn acquire(&mut self, pages: Vec<PageRequest>) -> Result<()> {
        self.acquire_keeping(pages, Vec::new())
    }

    /// Like `acquire`, without evicting `keep` to make room. A refused request leaves the
    /// device unlocked, so there is nothing to release.
    pub fn acquire_keeping(
        &mut self,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
    ) -> Result<()> {
        self.granted = pages.clone();
        let res = self.mm.acquire_keeping(self.device, pages, keep);
        if res.is_err() {
            self.granted.clear();
        }
        res
    }

    pub fn release(&mut self) {
        if !self.granted.is_empty() {
            let exclusive = self.granted.iter().any(|p| p.access == Access::Write);
            self.granted.clear();
            let t = Instant::now();
            self.mm.release(self.device);
            let s = self.waited(t.elapsed().as_secs_f64());
            self.released_s[exclusive as usize] += s;
        }
    }

    pub fn merge(&mut self) -> Result<MergeOutcome> {
        self.worker.call(|d| d.merge())
    }

    /// A granted page missing again before the release means the memory lock did not hold.
    fn check_grant(&self, misses: &[PageRequest]) -> Result<()> {
        for m in misses {
            if let Ok(i) = self.granted.binary_search_by_key(&m.page, |g| g.page) {
                if self.granted[i].access >= m.access {
                    return Err(RuntimeError::GrantViolated {
                        device: self.device,
                        page: m.page,
                    });
                }
            }
        }
        Ok(())
    }

    /// The seconds since `t` that were not the worker running deferred work (`busy` is the
    /// clock as it read at `t`): the memory manager's part of a wait.
    fn manager_part(&mut self, t: Instant, busy: std::time::Duration) -> f64 {
        let queued = self.clock.busy().saturating_sub(busy);
        self.waited(t.elapsed().saturating_sub(queued).as_secs_f64())
    }

    /// `s` seconds of the manager's, charged to the request stages: while launches are
    /// outstanding, kept out of their compute time too.
    fn waited(&mut self, s: f64) -> f64 {
        if self.outstanding_since.is_some() {
            self.waited_since += s;
        }
        s
    }

    fn timed_acquire(
        &mut self,
        pages: Vec<PageRequest>,
        keep: Vec<GlobalPage>,
        stats: &mut PassStats,
    ) -> Result<()> {
        let t = Instant::now();
        let busy = self.clock.busy();
        let exclusive = pages.iter().any(|p| p.access == Access::Write);
        self.acquire_keeping(pages, keep)?;
        let s = self.manager_part(t, busy);
        if exclusive {
            stats.stages.write_requests += s;
        } else {
            stats.stages.read_requests += s;
        }
        stats.batches += 1;
        Ok(())
    }

    /// [`Self::timed_acquire`] for pages named ahead of a launch (a footprint, a request
    /// pass, a compute pass's writes), less those the device already holds with their
    /// rights: each costs the memory manager a lookup and changes nothing, and a band that
    /// lacks one boundary page would otherwise send its whole footprint. Pages a launch
    /// faulted on are always sent whole, so a stale look can never hide a miss.
    fn timed_acquire_ahead(
        &mut self,
        pages: Vec<PageRequest>,
        stats: &mut PassStats,
    ) -> Result<()> {
        let pages = self.mm.missing(self.device, pages);
        if pages.is_empty() {
            return Ok(());
        }
        self.timed_acquire(pages, Vec::new(), stats)
    }

    fn timed_launch(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        mode: Mode,
        stats: &mut PassStats,
    ) -> Result<LaunchOutcome> {
        let t = Instant::now();
        // With a stage, the memory manager queues the launch once the stage's evictions are
        // done, and copies the stage's pages while it runs (docs/PROTOCOL.md,
        // "Asynchronous staging").
        let (pending, staged) = self.launch_staging(spec, domain, mode)?;
        let out = pending.wait()??;
        self.mm.count_remote(self.device, out.remote.clone());
        let s = t.elapsed().as_secs_f64() - out.uniquify_s;
        match mode {
            Mode::Request => stats.stages.request_pass += s,
            _ => stats.stages.compute += s,
        }
        stats.stages.uniquify += out.uniquify_s;
        if let Some(g) = out.gpu {
            let gs = stats.gpu();
            match mode {
                Mode::Request => gs.request_pass += g.kernel_s,
                _ => gs.compute += g.kernel_s,
            }
            gs.uniquify += g.uniquify_s;
        }
        stats.launches += 1;
        stats.invocations += out.invocations;
        if let Some((reply, exclusive)) = staged {
            // What is left of the stage's work after the launch is request time, as it would
            // have been without staging.
            let t = Instant::now();
            let busy = self.clock.busy();
            let res = reply.wait()?;
            let s = self.manager_part(t, busy);
            if exclusive {
                stats.stages.write_requests += s;
            } else {
                stats.stages.read_requests += s;
            }
            match res {
                Ok(()) => stats.staged += 1,
                // Refused with nothing changed: the band asks for its pages as usual.
                Err(RuntimeError::OverBudget { .. }) | Err(RuntimeError::Core(_)) => {
                    stats.stage_refusals += 1
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Runs one pass on this device with the chosen procedure; returns with the lock released.
    pub fn run_pass(&mut self, spec: &PassSpec, procedure: Procedure) -> Result<PassStats> {
        self.run_pass_deferring(spec, procedure, true)
    }

    /// [`Self::run_pass`], with deferred execution left off for this pass where `defer` is
    /// false (the node settled first: a pass its devices cannot queue across one queue, or
    /// one timed device by device).
    pub(crate) fn run_pass_deferring(
        &mut self,
        spec: &PassSpec,
        procedure: Procedure,
        defer: bool,
    ) -> Result<PassStats> {
        let deferred = self.deferred;
        self.deferred &= defer;
        let res = self.run_pass_now(spec, procedure);
        self.deferred = deferred;
        res
    }

    fn run_pass_now(&mut self, spec: &PassSpec, procedure: Procedure) -> Result<PassStats> {
        // What earlier settles outside a pass did belongs to the pass that reports next.
        let mut stats = self.take_settled()?;
        // A device past the last row of a short pass sits it out: nothing to ask for or run.
        if spec.domain.is_empty() {
            if spec.display {
                stats.lump_into_display();
            }
            return Ok(stats);
        }
        let res = match procedure {
            Procedure::Relaunch => self.relaunch(spec, &mut stats),
            Procedure::TwoPass => self.two_pass_over(spec, spec.domain.clone(), true, &mut stats),
        };
        // A stage no launch sent (the last band's, or one whose launches ran unlocked) is
        // not for the next pass.
        self.stage_next.clear();
        self.release();
        let [read, write] = std::mem::take(&mut self.released_s);
        stats.stages.read_requests += read;
        stats.stages.write_requests += write;
        res?;
        if spec.display {
            stats.lump_into_display();
        }
        Ok(stats)
    }

    /// Runs `mode` launches over `domain`, servicing misses and relaunching the invocations
    /// that faulted, until all complete. Returns the write requests the launches recorded
    /// (Temp mode). `held` are pages the device was granted for this domain already.
    ///
    /// Waves: each round's batch is requested together with every page the wave was granted
    /// before (`keep`), so the memory manager never evicts a page the wave still needs to make
    /// room for another. When the two do not fit the device's budget
    /// ([`RuntimeError::OverBudget`]), the wave's unfinished invocations are split, in launch
    /// order, into enough waves that each should fit (twice the overflow ratio, at least two),
    /// and they run one after another, each from an empty `keep`. A wave of one invocation
    /// that does not fit is [`RuntimeError::BudgetTooSmall`], naming the pages it needed.
    fn launch_until_done(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        held: Vec<GlobalPage>,
        mode: Mode,
        stats: &mut PassStats,
    ) -> Result<Vec<PageRequest>> {
        // Each wave: its domain, the pages it holds, and whether it is a lone invocation's
        // second try with nothing kept (after which it is too big for the budget).
        let mut waves = VecDeque::from([(domain, held, false)]);
        let mut writes = Vec::new();
        let mut late = Vec::new();
        let mut left = 0;
        let late_pages = late_pages(spec);
        'waves: while let Some((mut domain, mut held, mut retried)) = waves.pop_front() {
            // Every page this wave has asked for, sorted by page.
            let mut wave_asked: Vec<PageRequest> = Vec::new();
            // Rounds of this wave that missed a page it was granted before.
            let mut taken_rounds = 0;
            if self.staging {
                if let Some((next, _, _)) = waves.front() {
                    // Sent by this wave's first launch under the lock (its second round: a
                    // wave starts unlocked, from an empty `keep`).
                    self.stage_next = wave_pages(spec, next);
                }
            }
            // Per wave: a pass split into many small waves (a budget of a few pages) may take
            // many rounds in all while each wave takes few.
            let mut rounds = 0;
            loop {
                rounds += 1;
                if rounds > MAX_ROUNDS {
                    return Err(RuntimeError::NoProgress {
                        left,
                        rounds: MAX_ROUNDS,
                    });
                }
                let out = self.timed_launch(spec, domain, mode, stats)?;
                let misses: Vec<PageRequest> = match mode {
                    Mode::Temp => {
                        let (w, r): (Vec<_>, Vec<_>) = out
                            .requests
                            .into_iter()
                            .partition(|r| r.access == Access::Write);
                        writes.extend(w);
                        r
                    }
                    _ => out.requests,
                };
                self.check_grant(&misses)?;
                self.release();
                if out.suspended > 0 {
                    // Invocations saved their state: the next retry with nothing kept starts
                    // from further on, so it is not the last chance `retried` marks.
                    retried = false;
                }
                if out.incomplete.is_empty() {
                    late.extend(misses);
                    continue 'waves;
                }
                left = out.incomplete.len();
                if misses.is_empty() {
                    // Faulted without asking for anything: relaunching cannot help.
                    return Err(RuntimeError::FaultWithoutMiss {
                        kernel: spec.kernel.name().to_string(),
                        left,
                    });
                }
                // What degrading samples asked for waits for the end of the pass
                // (`Kernel::late_objects`), unless nothing else stopped an invocation (an
                // exact read of such an object faulted), when it is brought as ever.
                let (later, now): (Vec<_>, Vec<_>) = misses
                    .iter()
                    .partition(|r| late_pages.iter().any(|p| p.contains(&r.page.0)));
                let misses = match now.is_empty() {
                    true => misses,
                    false => {
                        late.extend(later);
                        now
                    }
                };
                stats.relaunched += out.incomplete.len() as u64;
                stats.suspended += out.suspended;
                let misses = self.with_taken(&mut wave_asked, &mut taken_rounds, misses);
                let asked: Vec<GlobalPage> = misses.iter().map(|r| r.page).collect();
                match self.timed_acquire(misses, held.clone(), stats) {
                    Ok(()) => {
                        held.extend(asked);
                        held.sort_unstable();
                        held.dedup();
                        domain = Domain::List(Arc::new(out.incomplete));
                    }
                    Err(RuntimeError::OverBudget {
                        pages,
                        capacity,
                        page_bytes,
                        budget_bytes,
                        ..
                    }) => {
                        let list = Domain::List(Arc::new(out.incomplete));
                        let parts = split(&list, wave_count(pages, capacity));
                        if parts.len() < 2 {
                            if !retried {
                                // What the wave kept may belong to invocations that finished:
                                // the last one tries again keeping nothing but its own pages.
                                waves.push_front((list, Vec::new(), true));
                                continue 'waves;
                            }
                            return Err(self.too_small(spec, pages, page_bytes, budget_bytes));
                        }
                        stats.wave_splits += 1;
                        for p in parts.into_iter().rev() {
                            waves.push_front((p, Vec::new(), false));
                        }
                        continue 'waves;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        self.bring_late(late, stats)?;
        Ok(writes)
    }

    /// What a wave asks for after a launch missed `misses`: those, and, where one of them was
    /// granted to the wave before (another device has taken it since), the pages the wave has
    /// been granted that the device no longer holds. Devices writing the same pages in one
    /// pass would otherwise take them from each other round after round, each granted only
    /// its newest miss, with no launch ever holding them all: a livelock, which the game trace
    /// on four devices over a screen one page wide showed. Pages granted together are held
    /// together through the launch, under the memory lock, so such a round completes every
    /// invocation that needs only pages the wave has seen, and the wave's set only grows.
    ///
    /// Which pages the device still holds is looked up before the request, so another device
    /// may take one in between; from the third such round on the wave's pages are sent whole,
    /// which closes that gap. Not from the first: pages sent again count as requests, and a
    /// recorded game trace must hold the requests a replay makes (`trace replay`).
    fn with_taken(
        &self,
        wave: &mut Vec<PageRequest>,
        taken_rounds: &mut u32,
        misses: Vec<PageRequest>,
    ) -> Vec<PageRequest> {
        let taken = misses
            .iter()
            .any(|m| wave.binary_search_by_key(&m.page, |a| a.page).is_ok());
        wave.extend_from_slice(&misses);
        *wave = strongest_per_page(std::mem::take(wave));
        if !taken {
            return misses;
        }
        *taken_rounds += 1;
        if *taken_rounds >= 3 {
            return wave.clone();
        }
        let mut ask = self.mm.missing(self.device, wave.clone());
        ask.extend_from_slice(&misses);
        strongest_per_page(ask)
    }

    /// Brings the pages that invocations asked for and completed without (degrading
    /// samples): nothing runs again, a later pass finds them. Pages that do not fit the
    /// device's budget are left out; they will be asked for again.
    fn bring_late(&mut self, mut late: Vec<PageRequest>, stats: &mut PassStats) -> Result<()> {
        if late.is_empty() {
            return Ok(());
        }
        late.sort_unstable_by_key(|r| (r.page, r.access));
        late.dedup();
        stats.late_requests += late.len() as u64;
        let res = self.timed_acquire_ahead(late, stats);
        self.release();
        match res {
            Ok(()) | Err(RuntimeError::OverBudget { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn too_small(
        &self,
        spec: &PassSpec,
        pages: u64,
        page_bytes: u64,
        budget_bytes: u64,
    ) -> RuntimeError {
        let min_bytes = pages * page_bytes;
        // The footprint's pages where it has one, else the kernel's own bound on its pages,
        // each counted at the size of the largest page among the bound objects.
        let largest = spec.bindings.iter().map(|b| b.slot_words * 4).max();
        let enough_bytes = spec
            .kernel
            .footprint()
            .and_then(|fp| invocation_need(&spec.bindings, &fp))
            .map(|(_, bytes)| bytes)
            .or_else(|| Some(spec.kernel.pages_per_invocation()? * largest?));
        RuntimeError::BudgetTooSmall {
            device: self.device,
            kernel: spec.kernel.name().to_string(),
            pages,
            page_bytes,
            min_bytes,
            budget_bytes,
            enough_bytes,
        }
    }

    fn relaunch(&mut self, spec: &PassSpec, stats: &mut PassStats) -> Result<()> {
        let footprint = spec.kernel.footprint();
        match (&spec.domain, footprint) {
            (&Domain::Rect { x0, y0, x1, y1 }, Some(fp))
                if self.footprint_ahead || self.mm.under_pressure(self.device) =>
            {
                self.relaunch_by_footprint(spec, &fp, (x0, y0, x1, y1), stats)
            }
            _ => {
                self.settle_now(stats)?;
                self.launch_until_done(spec, spec.domain.clone(), Vec::new(), Mode::Direct, stats)
                    .map(|_| ())
            }
        }
    }

    /// Settles before this pass does anything but queue a held band.
    fn settle_now(&mut self, stats: &mut PassStats) -> Result<()> {
        if self.outstanding.is_empty() {
            return Ok(());
        }
        if self.shared {
            // Only the node settles devices that share a queue; it does before any pass they
            // cannot queue.
            return Err(RuntimeError::Internal(
                "deferred work left on a device of a shared queue before a pass that cannot be \
                 queued"
                    .into(),
            ));
        }
        self.settle_into(stats)
    }

    /// Relaunch asking first for what the kernel's footprint says a band of rows needs, so the
    /// band runs once on the tile path. Used on a device whose budget is evicting (pages come
    /// and go every pass, so the first launch of a pass would mostly fault: every invocation
    /// per texel, up to its first miss, then again), and by default everywhere
    /// (`SystemConfig::footprint_ahead`): with several devices, a neighbour's read of a
    /// boundary page leaves the owner's copy read-only, so the owner's next write to that
    /// page row faults and relaunches every invocation writing it, a whole page row per
    /// boundary per pass (docs/EVALUATION.md, "`bench scaling`"). Bands that do not fit the
    /// budget are split as waves are. Anything the footprint missed (a wrong footprint, a page
    /// taken by another device) faults and relaunches as always, so the footprint changes the
    /// cost, never the result.
    fn relaunch_by_footprint(
        &mut self,
        spec: &PassSpec,
        fp: &crate::kernel::Footprint,
        rect: (u32, u32, u32, u32),
        stats: &mut PassStats,
    ) -> Result<()> {
        let mut bands = VecDeque::from([rect]);
        while let Some((x0, y0, x1, y1)) = bands.pop_front() {
            let domain = Domain::Rect { x0, y0, x1, y1 };
            let pages = footprint_pages(&spec.bindings, fp, (x0, y0, x1, y1)).unwrap_or_default();
            if pages.is_empty() {
                if self.across() {
                    // Queued all the same: what it misses faults, the gate stops everything
                    // behind it on every device of the queue, and the node's settle runs it
                    // again the ordinary way.
                    self.defer_launch(spec, domain);
                    continue;
                }
                self.settle_now(stats)?;
                self.launch_until_done(spec, domain, Vec::new(), Mode::Direct, stats)?;
                continue;
            }
            let held: Vec<GlobalPage> = pages.iter().map(|r| r.page).collect();
            if self.mm.covers(self.device, &pages) {
                // The steady state: the device holds the band's pages with the rights it
                // needs, so it launches with no message, no lock and no wait for the memory
                // manager. A page taken meanwhile faults and is asked for as always.
                stats.held_bands += 1;
                if self.deferred {
                    self.defer_launch(spec, domain);
                } else {
                    self.launch_until_done(spec, domain, held, Mode::Direct, stats)?;
                }
                continue;
            }
            // Across one queue the node settles, not the device; a lone device that queues
            // what it is granted settles at the end of the pass.
            let queue_granted = self.across() || (self.deferred && !self.staging);
            if !queue_granted {
                self.settle_now(stats)?;
            }
            match self.timed_acquire_ahead(pages, stats) {
                // Granted, queued, released: the launch is on the device's queue before the
                // release lets another device's request change a page here, and what that
                // request does to this device queues behind it, so the launch finds its pages
                // as granted (docs/PROTOCOL.md, "Deferred across the devices of one queue").
                // On a lone device the same holds for its own next batch: the evictions that
                // make room for it are jobs behind this launch.
                Ok(()) if queue_granted => {
                    self.defer_launch(spec, domain);
                    self.release();
                }
                Ok(()) => {
                    if self.staging {
                        // The next band's pages, staged while this band's launch runs.
                        self.stage_next = bands
                            .front()
                            .and_then(|&next| footprint_pages(&spec.bindings, fp, next))
                            .unwrap_or_default();
                    }
                    self.launch_until_done(spec, domain, held, Mode::Direct, stats)?;
                }
                Err(RuntimeError::OverBudget {
                    pages, capacity, ..
                }) if y1 - y0 >= 2 => {
                    stats.wave_splits += 1;
                    let parts = split(&domain, wave_count(pages, capacity));
                    for p in parts.into_iter().rev() {
                        if let Domain::Rect { x0, y0, x1, y1 } = p {
                            bands.push_front((x0, y0, x1, y1));
                        }
                    }
                }
                // A single row that does not fit needs the ordinary waves, which wait for
                // their launches: across one queue it and the bands after it wait for the
                // node's settle.
                Err(RuntimeError::OverBudget { .. }) if self.across() => {
                    self.left = std::iter::once((x0, y0, x1, y1))
                        .chain(bands.drain(..))
                        .map(|(x0, y0, x1, y1)| PassSpec {
                            domain: Domain::Rect { x0, y0, x1, y1 },
                            ..spec.clone()
                        })
                        .collect();
                    return Ok(());
                }
                Err(RuntimeError::OverBudget { .. }) => {
                    self.settle_now(stats)?;
                    self.launch_until_done(spec, domain, Vec::new(), Mode::Direct, stats)?;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Two-pass over the whole domain, or, when its pages do not fit the budget, over parts of
    /// it one after another (each part its own request, compute and merge passes).
    /// Held parts are deferred where `defer` allows it and deferred execution is on.
    fn two_pass_over(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        defer: bool,
        stats: &mut PassStats,
    ) -> Result<()> {
        let mut parts = VecDeque::from([domain]);
        while let Some(domain) = parts.pop_front() {
            if self.staging {
                // The next part's pages, staged while this part's compute pass runs (when its
                // read batch holds the lock; a part whose request pass was skipped holds none).
                self.stage_next = match (parts.front(), spec.kernel.footprint()) {
                    (Some(&Domain::Rect { x0, y0, x1, y1 }), Some(fp)) => {
                        footprint_pages(&spec.bindings, &fp, (x0, y0, x1, y1)).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
            }
            match self.two_pass_part(spec, domain.clone(), defer, stats) {
                // The merge's grant is held until the part is done; the next part requests.
                Ok(()) => self.release(),
                Err(RuntimeError::OverBudget {
                    pages,
                    capacity,
                    page_bytes,
                    budget_bytes,
                    ..
                }) => {
                    // Nothing of this part was merged yet: drop its temporary and split it.
                    self.release();
                    self.worker.call(|d| {
                        d.discard_temp();
                        Ok(())
                    })?;
                    let split_parts = split(&domain, wave_count(pages, capacity));
                    if split_parts.len() < 2 {
                        return Err(self.too_small(spec, pages, page_bytes, budget_bytes));
                    }
                    stats.wave_splits += 1;
                    for p in split_parts.into_iter().rev() {
                        parts.push_front(p);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn two_pass_part(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        defer: bool,
        stats: &mut PassStats,
    ) -> Result<()> {
        // A part whose pages the device holds with the rights it needs, writes included, has
        // nothing to ask for before its compute pass or after it: the temporary would only
        // copy what the launch stores. It runs in place, as a held relaunch band does. What
        // it misses (a page taken meanwhile, a load the footprint does not name) faults and
        // relaunches, so this changes the cost, never the result.
        if self.held_in_place {
            if let Some(held) = self.held_footprint(spec, &domain) {
                stats.request_passes_skipped += 1;
                stats.held_bands += 1;
                if defer && self.deferred {
                    self.defer_launch(spec, domain);
                } else {
                    self.settle_now(stats)?;
                    self.launch_until_done(spec, domain, held, Mode::Direct, stats)?;
                }
                return Ok(());
            }
        }
        // Pass 1 (paper 3.4): record what the invocations read and fetch it in one batch;
        // pointless when the footprint shows every page resident, since it would ask for
        // nothing (a single device's steady state).
        let resident = self.resident_footprint(spec, &domain)?;
        // A held part is queued whole, compute pass and merge, unless it binds a remote
        // object: a compute pass stores to those in place, so it could not run again whole.
        if resident.is_some()
            && defer
            && self.deferred
            && !self.shared
            && self
                .mm
                .remote_bindings(&spec.bindings)
                .iter()
                .all(Option::is_none)
        {
            stats.request_passes_skipped += 1;
            self.defer_part(spec, domain);
            return Ok(());
        }
        self.settle_now(stats)?;
        // The written pages the footprint was granted, when it was asked for.
        let mut granted_writes = Vec::new();
        let reads = match resident {
            Some(pages) => {
                stats.request_passes_skipped += 1;
                pages
            }
            // The footprint names what the request pass would find, and the written pages:
            // asked for first (`SystemConfig::footprint_ahead`), as relaunch's bands are, the
            // part then holds them all, so it runs in place where held parts do. What the
            // footprint missed faults and relaunches (in place) or is asked for after the
            // compute pass (into the temporary), so this changes the cost, never the result.
            // A footprint that does not fit the budget (it may name more than the invocations
            // read) leaves the part to its request pass, which finds what they do read.
            None if self.footprint_ahead => match self.footprint_requests(spec, &domain) {
                Some(pages) => {
                    let held: Vec<GlobalPage> = pages.iter().map(|r| r.page).collect();
                    granted_writes = pages
                        .iter()
                        .filter(|r| r.access == Access::Write)
                        .copied()
                        .collect();
                    match self.timed_acquire_ahead(pages, stats) {
                        Ok(()) => {
                            stats.request_passes_skipped += 1;
                            if self.held_in_place {
                                stats.held_bands += 1;
                                self.launch_until_done(spec, domain, held, Mode::Direct, stats)?;
                                return Ok(());
                            }
                            held
                        }
                        Err(RuntimeError::OverBudget { .. }) => {
                            self.release();
                            granted_writes.clear();
                            self.request_pass(spec, &domain, stats)?
                        }
                        Err(e) => return Err(e),
                    }
                }
                None => self.request_pass(spec, &domain, stats)?,
            },
            None => self.request_pass(spec, &domain, stats)?,
        };
        // Pass 2 (paper 3.5): compute into the temporary and its write mask.
        let writes = self.compute_to_temp(spec, domain, reads, stats)?;
        // Pass 3: exclusive access to the written pages not held writable, then merge. Pages
        // that do not fit together are merged in parts (`merge_temp`).
        //
        // Where the footprint's written pages were granted before the compute pass, they are
        // asked for again, whole: that pass's launch released the lock, so another device may
        // have taken them since, and the held set, looked at first, can still list them. The
        // merge then ran without a grant, racing the other device's copy of the page: on wgpu,
        // with two devices writing one page, one device's half of the field was lost (`run
        // boiling --procedure two-pass --held-in-place off --backend wgpu`, every run).
        let res = if !granted_writes.is_empty() {
            let all = strongest_per_page([writes, granted_writes].concat());
            self.timed_acquire(all, Vec::new(), stats)
        } else if !writes.is_empty() {
            self.timed_acquire_ahead(writes, stats)
        } else {
            Ok(())
        };
        match res {
            Ok(()) | Err(RuntimeError::OverBudget { .. }) => {}
            Err(e) => return Err(e),
        }
        self.merge_temp(spec, stats)
    }

    /// The pages the kernel's footprint names for `domain`, when the device holds every one
    /// with the access the footprint asks (the written ones writable); `None` when it does
    /// not, or there is no footprint to ask about. A hint, as [`ManagerHandle::covers`] is.
    fn held_footprint(&self, spec: &PassSpec, domain: &Domain) -> Option<Vec<GlobalPage>> {
        let pages = self.footprint_requests(spec, domain)?;
        self.mm
            .covers(self.device, &pages)
            .then(|| pages.iter().map(|r| r.page).collect())
    }

    /// What the kernel's footprint names for a rectangle `domain`, reads and writes; `None`
    /// without a footprint, for a list, or when it names nothing.
    fn footprint_requests(&self, spec: &PassSpec, domain: &Domain) -> Option<Vec<PageRequest>> {
        let (&Domain::Rect { x0, y0, x1, y1 }, Some(fp)) = (domain, spec.kernel.footprint()) else {
            return None;
        };
        footprint_pages(&spec.bindings, &fp, (x0, y0, x1, y1)).filter(|p| !p.is_empty())
    }

    /// Pass 1 (paper 3.4): the kernel in request-recording mode over `domain`; what it read is
    /// asked for in one batch. Returns the pages it read.
    fn request_pass(
        &mut self,
        spec: &PassSpec,
        domain: &Domain,
        stats: &mut PassStats,
    ) -> Result<Vec<GlobalPage>> {
        stats.request_passes += 1;
        let out = self.timed_launch(spec, domain.clone(), Mode::Request, stats)?;
        let reads: Vec<GlobalPage> = out.requests.iter().map(|r| r.page).collect();
        if !out.requests.is_empty() {
            self.timed_acquire_ahead(out.requests, stats)?;
        }
        Ok(reads)
    }

    /// The pages the kernel's footprint names for `domain`, when the device holds every one
    /// of them now; `None` when it does not, or there is no footprint to ask about. Skipping
    /// the request pass on this answer is safe even if the footprint is wrong or a page is
    /// taken before the compute pass: the compute pass faults and relaunches for any page it
    /// misses, so the answer changes the cost, never the result.
    fn resident_footprint(
        &self,
        spec: &PassSpec,
        domain: &Domain,
    ) -> Result<Option<Vec<GlobalPage>>> {
        let (&Domain::Rect { x0, y0, x1, y1 }, Some(fp)) = (domain, spec.kernel.footprint()) else {
            return Ok(None);
        };
        let Some(requests) = footprint_pages(&spec.bindings, &fp, (x0, y0, x1, y1)) else {
            return Ok(None);
        };
        if requests.is_empty() {
            return Ok(None);
        }
        let pages: Vec<GlobalPage> = requests.iter().map(|r| r.page).collect();
        // Any access will do: the compute pass asks for the written pages it cannot write.
        let read: Vec<PageRequest> = pages
            .iter()
            .map(|&page| PageRequest {
                page,
                access: Access::Read,
            })
            .collect();
        if self.mm.covers(self.device, &read) {
            return Ok(Some(pages));
        }
        // On a cluster the other homes publish nothing here: ask them all.
        if self.mm.is_on_cluster() {
            return Ok(self.mm.holds(self.device, pages.clone())?.then_some(pages));
        }
        Ok(None)
    }

    /// Runs the pass into the device's temporary (relaunching invocations whose dependent
    /// loads missed) and returns the sorted write requests for the pages it wrote.
    pub fn compute_to_temp(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        held: Vec<GlobalPage>,
        stats: &mut PassStats,
    ) -> Result<Vec<PageRequest>> {
        let mut writes = self.launch_until_done(spec, domain, held, Mode::Temp, stats)?;
        writes.sort_unstable();
        writes.dedup();
        Ok(writes)
    }

    /// Merges the temporary into the pages (the third pass). Pages that are not writable and
    /// were not granted are ordinary contention and are requested again; a granted page that
    /// is not writable is a broken grant and fails the pass. Pages that do not fit the budget
    /// together are requested and merged a budget's worth at a time.
    pub fn merge_temp(&mut self, spec: &PassSpec, stats: &mut PassStats) -> Result<()> {
        let mut left = 0;
        for _ in 0..MAX_ROUNDS {
            let t = Instant::now();
            let m = self.merge()?;
            stats.stages.page_writes += t.elapsed().as_secs_f64();
            if let Some(g) = m.gpu_s {
                stats.gpu().page_writes += g;
            }
            if m.missing.is_empty() {
                return Ok(());
            }
            left = m.missing.len();
            let missing = write_requests(m.missing);
            self.check_grant(&missing)?;
            self.release();
            let mut take = missing.len();
            loop {
                match self.timed_acquire(missing[..take].to_vec(), Vec::new(), stats) {
                    Ok(()) => break,
                    Err(RuntimeError::OverBudget {
                        capacity,
                        page_bytes,
                        budget_bytes,
                        ..
                    }) => {
                        if capacity == 0 {
                            return Err(self.too_small(spec, 1, page_bytes, budget_bytes));
                        }
                        take = (capacity as usize).min(take - 1).max(1);
                        stats.wave_splits += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Err(RuntimeError::NoProgress {
            left,
            rounds: MAX_ROUNDS,
        })
    }
}

/// One request per page, sorted by page, with the strongest access asked for it.
fn strongest_per_page(mut pages: Vec<PageRequest>) -> Vec<PageRequest> {
    pages.sort_unstable_by_key(|r| (r.page, std::cmp::Reverse(r.access)));
    pages.dedup_by_key(|r| r.page);
    pages
}

/// The global pages of the objects `spec`'s kernel serves late (`Kernel::late_objects`).
fn late_pages(spec: &PassSpec) -> Vec<std::ops::Range<u64>> {
    let objects = spec.kernel.late_objects();
    spec.bindings
        .iter()
        .filter(|b| objects.contains(&b.id))
        .map(|b| b.page_offset..b.pages_end)
        .collect()
}

/// Pages a merge could not write, asked for exclusively.
fn write_requests(pages: Vec<GlobalPage>) -> Vec<PageRequest> {
    pages
        .into_iter()
        .map(|page| PageRequest {
            page,
            access: Access::Write,
        })
        .collect()
}

/// The pages a footprint says a rectangle of invocations touches: every page of each read
/// object under the rectangle widened by its halo (shared), and every page of the written
/// object under the rectangle (exclusive), sorted by page. `None` when an object of the
/// footprint is not bound or is a buffer (no rectangles there).
fn footprint_pages(
    bindings: &[Bound],
    fp: &crate::kernel::Footprint,
    (x0, y0, x1, y1): (u32, u32, u32, u32),
) -> Option<Vec<PageRequest>> {
    let mut out: Vec<PageRequest> = Vec::new();
    let mut add = |id, halo: u32, access| -> Option<()> {
        let b = bindings.iter().find(|b| b.id == id)?;
        b.format?;
        let (w, h) = (b.width, b.height);
        let clamp = |v: u64, hi: u64| v.min(hi);
        let (ax, ay) = (
            (x0.saturating_sub(halo)) as u64,
            (y0.saturating_sub(halo)) as u64,
        );
        let (bx, by) = (
            clamp(x1 as u64 + halo as u64, w),
            clamp(y1 as u64 + halo as u64, h),
        );
        if ax >= bx || ay >= by {
            return Some(());
        }
        for py in (ay >> b.shift)..=((by - 1) >> b.shift) {
            for px in (ax >> b.shift)..=((bx - 1) >> b.shift) {
                out.push(PageRequest {
                    page: GlobalPage(b.page_offset + py * b.pages_x + px),
                    access,
                });
            }
        }
        Some(())
    };
    for &(id, halo) in &fp.reads {
        add(id, halo, Access::Read)?;
    }
    add(fp.write, 0, Access::Write)?;
    // A page both read and written is asked for once, exclusively.
    Some(strongest_per_page(out))
}

/// The most pages the footprint `fp` names for one invocation, and their bytes: those of the
/// invocations at the last texel of a page, whose haloed reads reach into the neighbouring
/// pages. An upper bound (a footprint may name pages a kernel does not read),
/// where the pages a budget ran out on are a lower bound: an invocation reveals its pages one
/// miss at a time, so a run given only that many failed again asking for more, step after step
/// (boiling on 8 × 8 pages: 256 bytes, then 512, 768 and on to 2,048).
fn invocation_need(bindings: &[Bound], fp: &crate::kernel::Footprint) -> Option<(u64, u64)> {
    let mut sides: Vec<u32> = bindings
        .iter()
        .filter(|b| b.format.is_some())
        .map(|b| 1u32 << b.shift)
        .collect();
    sides.sort_unstable();
    sides.dedup();
    let bytes_of = |r: &PageRequest| {
        bindings
            .iter()
            .find(|b| (b.page_offset..b.pages_end).contains(&r.page.0))
            .map_or(0, |b| b.slot_words * 4)
    };
    let mut most: Option<(u64, u64)> = None;
    // The last texel of a page, where a footprint reaches into the next pages: of the first
    // page, and of later ones, since near the object's corner the footprint is clipped (at
    // pages of one texel boiling's kernels said 5 pages were enough for one invocation and
    // needed 9). Pages past the object's sides are clipped away and count no more.
    for s in sides {
        for at in [1, 2, 4, 8, 16].map(|k| k * s - 1) {
            let pages = footprint_pages(bindings, fp, (at, at, at + 1, at + 1))?;
            let need = (pages.len() as u64, pages.iter().map(bytes_of).sum::<u64>());
            if most.is_none_or(|m| need.1 > m.1) {
                most = Some(need);
            }
        }
    }
    most
}

/// The pages the kernel's footprint names for a wave: for a list of invocations, those of
/// its bounding rectangle (a superset; a stage too big for the budget is refused, which
/// changes nothing). Empty without a footprint.
fn wave_pages(spec: &PassSpec, domain: &Domain) -> Vec<PageRequest> {
    let Some(fp) = spec.kernel.footprint() else {
        return Vec::new();
    };
    let rect = match domain {
        &Domain::Rect { x0, y0, x1, y1 } => (x0, y0, x1, y1),
        Domain::List(l) => {
            let Some(&(fx, fy)) = l.first() else {
                return Vec::new();
            };
            let end = |v: u32| v.saturating_add(1);
            let fy = fy & !RESUMED_BIT;
            l.iter()
                .fold((fx, fy, end(fx), end(fy)), |(x0, y0, x1, y1), &(x, y)| {
                    let y = y & !RESUMED_BIT;
                    (x0.min(x), y0.min(y), x1.max(end(x)), y1.max(end(y)))
                })
        }
    };
    footprint_pages(&spec.bindings, &fp, rect).unwrap_or_default()
}

/// How many waves a wave of `pages` should become when `capacity` of them fit: twice the
/// overflow, so that each part's own misses, which come page by page, still fit.
fn wave_count(pages: u64, capacity: u64) -> usize {
    (pages.saturating_mul(2).div_ceil(capacity.max(1))).clamp(2, 1 << 20) as usize
}

/// Splits a domain into up to `parts` pieces in launch order: bands of rows of a rectangle
/// (columns when it is a single row), runs of a list. Fewer come back when it is smaller.
pub(crate) fn split(domain: &Domain, parts: usize) -> Vec<Domain> {
    match domain {
        Domain::Rect { x0, y0, x1, y1 } => {
            let (w, h) = (x1.saturating_sub(*x0), y1.saturating_sub(*y0));
            let cut = |len: u32| -> Vec<(u32, u32)> {
                let n = (parts as u32).clamp(1, len.max(1));
                (0..n).map(|i| (len * i / n, len * (i + 1) / n)).collect()
            };
            if h >= 2 {
                cut(h)
                    .into_iter()
                    .map(|(a, b)| Domain::Rect {
                        x0: *x0,
                        y0: y0 + a,
                        x1: *x1,
                        y1: y0 + b,
                    })
                    .collect()
            } else {
                cut(w)
                    .into_iter()
                    .map(|(a, b)| Domain::Rect {
                        x0: x0 + a,
                        y0: *y0,
                        x1: x0 + b,
                        y1: *y1,
                    })
                    .collect()
            }
        }
        Domain::List(l) => {
            let n = parts.clamp(1, l.len().max(1));
            (0..n)
                .map(|i| {
                    let (a, b) = (l.len() * i / n, l.len() * (i + 1) / n);
                    Domain::List(Arc::new(l[a..b].to_vec()))
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Footprint;
    use tessera_core::{AddressSpace, ObjectDesc, TexelFormat};

    /// Copies `from` into `to` texel by texel and says so in its footprint.
    #[cfg(not(feature = "shuttle"))]
    struct Copy2d {
        from: tessera_core::ObjectId,
        to: tessera_core::ObjectId,
    }

    #[cfg(not(feature = "shuttle"))]
    impl Kernel for Copy2d {
        fn name(&self) -> &'static str {
            "copy2d"
        }
        fn invoke(
            &self,
            inv: &mut crate::Invocation<'_>,
            x: u32,
            y: u32,
        ) -> std::result::Result<(), crate::Fault> {
            let v = inv.load_f32(self.from, x, y)?;
            inv.store_f32(self.to, x, y, v)
        }
        fn footprint(&self) -> Option<Footprint> {
            Some(Footprint {
                reads: vec![(self.from, 0)],
                write: self.to,
            })
        }
    }

    // Runs a real node, whose threads and channels are shuttle's under that feature and
    // work only inside a shuttle test.
    #[cfg(not(feature = "shuttle"))]
    #[test]
    fn a_request_pass_is_skipped_only_when_every_page_is_resident() {
        // The paper's request pass: the footprint does not stand in for it.
        let cfg = crate::SystemConfig::new(1)
            .threads(1)
            .footprint_ahead(false);
        let sys = crate::System::cpu(&cfg).unwrap();
        // Two 8×8 pages each; `a` holds 0, 1, 2, … so a copy from the wrong place shows.
        let desc = ObjectDesc::texture(16, 8, TexelFormat::R32Float, 8).unwrap();
        let data: Vec<u8> = (0..128).flat_map(|i| (i as f32).to_le_bytes()).collect();
        let a = sys.create(desc, Some(data.clone())).unwrap();
        let c = sys.create(desc, Some(vec![0; 512])).unwrap();
        let b = sys.create(desc, None).unwrap();
        let pass = |from: &tessera_core::ObjectEntry| {
            let spec = PassSpec {
                kernel: Arc::new(Copy2d {
                    from: from.id,
                    to: b.id,
                }),
                bindings: Arc::new(vec![Bound::new(from), Bound::new(&b)]),
                domain: Domain::Rect {
                    x0: 0,
                    y0: 0,
                    x1: 16,
                    y1: 8,
                },
                display: false,
            };
            let s = sys
                .run_pass(&spec, 16, 8, crate::Partition::Rows, Procedure::TwoPass)
                .unwrap();
            (s[0].request_passes, s[0].request_passes_skipped)
        };
        // Nothing resident yet: the request pass runs.
        assert_eq!(pass(&a), (1, 0));
        // `a` read-only and `b` owned, all four pages: nothing to ask for.
        assert_eq!(pass(&a), (0, 1));
        assert_eq!(sys.mm.read(b.id).unwrap(), data);
        let page = |e: &tessera_core::ObjectEntry, i| GlobalPage(e.page_offset + i);
        assert!(sys
            .mm
            .holds(DeviceId(0), vec![page(&a, 0), page(&b, 1)])
            .unwrap());
        assert!(!sys
            .mm
            .holds(DeviceId(0), vec![page(&a, 0), page(&c, 0)])
            .unwrap());
        assert!(!sys.mm.holds(DeviceId(0), vec![GlobalPage(999)]).unwrap());
        // `c` was never fetched: the request pass runs again, and the copy is `c`'s zeros.
        assert_eq!(pass(&c), (1, 0));
        assert_eq!(sys.mm.read(b.id).unwrap(), vec![0; 512]);
    }

    /// With the footprint ahead (the default) no request pass runs: the first pass asks for
    /// what the footprint names and runs in place; the copy is right either way.
    #[cfg(not(feature = "shuttle"))]
    #[test]
    fn the_footprint_stands_in_for_the_request_pass() {
        for in_place in [true, false] {
            let cfg = crate::SystemConfig::new(1)
                .threads(1)
                .held_in_place(in_place);
            let sys = crate::System::cpu(&cfg).unwrap();
            let desc = ObjectDesc::texture(16, 8, TexelFormat::R32Float, 8).unwrap();
            let data: Vec<u8> = (0..128).flat_map(|i| (i as f32).to_le_bytes()).collect();
            let a = sys.create(desc, Some(data.clone())).unwrap();
            let b = sys.create(desc, None).unwrap();
            let spec = PassSpec::over(
                Copy2d {
                    from: a.id,
                    to: b.id,
                },
                &[&a, &b],
                16,
                8,
            );
            let s = sys
                .run_pass(&spec, 16, 8, crate::Partition::Rows, Procedure::TwoPass)
                .unwrap();
            assert_eq!(s[0].request_passes, 0, "in place {in_place}: {:?}", s[0]);
            assert_eq!(s[0].request_passes_skipped, 1, "{:?}", s[0]);
            assert_eq!(s[0].held_bands, u64::from(in_place), "{:?}", s[0]);
            assert_eq!(sys.mm.read(b.id).unwrap(), data, "in place {in_place}");
        }
    }

    #[test]
    fn footprint_pages_cover_the_haloed_reads_and_the_written_rectangle() {
        let mut space = AddressSpace::new();
        // 4×3 pages of 8×8 each, then a 2×2-page output.
        let a = space
            .create(ObjectDesc::texture(32, 24, TexelFormat::R32Float, 8).unwrap())
            .unwrap();
        let b = space
            .create(ObjectDesc::texture(16, 16, TexelFormat::R32Float, 8).unwrap())
            .unwrap();
        let bindings = [Bound::new(&a), Bound::new(&b)];
        let fp = Footprint {
            reads: vec![(a.id, 1)],
            write: b.id,
        };
        let got = footprint_pages(&bindings, &fp, (8, 8, 16, 16)).unwrap();
        let page = |e: &tessera_core::ObjectEntry, px: u64, py: u64, pages_x: u64| {
            GlobalPage(e.page_offset + py * pages_x + px)
        };
        let mut want: Vec<PageRequest> = Vec::new();
        // Texels 7..17 in x and y touch pages 0..=2 of `a` both ways.
        for py in 0..=2 {
            for px in 0..=2 {
                want.push(PageRequest {
                    page: page(&a, px, py, 4),
                    access: Access::Read,
                });
            }
        }
        want.push(PageRequest {
            page: page(&b, 1, 1, 2),
            access: Access::Write,
        });
        want.sort();
        assert_eq!(got, want);
        // The halo is clamped at the edges, and an unbound object gives no set.
        let edge = footprint_pages(&bindings, &fp, (0, 0, 1, 1)).unwrap();
        assert_eq!(edge.len(), 2);
        let unbound = Footprint {
            reads: vec![(tessera_core::ObjectId(99), 0)],
            write: b.id,
        };
        assert!(footprint_pages(&bindings, &unbound, (0, 0, 1, 1)).is_none());
    }
}
