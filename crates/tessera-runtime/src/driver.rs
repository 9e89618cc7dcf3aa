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

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tessera_core::{Access, DeviceId, GlobalPage, PageRequest};

use crate::backend::{Domain, Launch, LaunchOutcome, MergeOutcome};
use crate::error::{Result, RuntimeError};
use crate::kernel::{Bound, Kernel, Mode};
use crate::manager::ManagerHandle;
use crate::worker::{Pending, WorkerHandle};

/// How a pass gets its pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Procedure {
    TwoPass,
    Relaunch,
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
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
    /// All of the time as display time.
    pub fn lumped_into_display(&self) -> StageTimes {
        StageTimes {
            display: self.total(),
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
    pub batches: u64,
}

impl PassStats {
    /// A display pass: all its time, wall and device, is the display stage.
    pub fn lump_into_display(&mut self) {
        self.stages = self.stages.lumped_into_display();
        self.gpu_stages = self.gpu_stages.map(|g| g.lumped_into_display());
    }

    pub fn add(&mut self, o: &PassStats) {
        self.stages.add(&o.stages);
        if let Some(g) = &o.gpu_stages {
            self.gpu_stages.get_or_insert_with(Default::default).add(g);
        }
        self.launches += o.launches;
        self.invocations += o.invocations;
        self.relaunched += o.relaunched;
        self.batches += o.batches;
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

/// Relaunch rounds before a pass is declared stuck. Each round completes every invocation
/// whose pages were all granted, so only a chain of this many dependent misses can reach it.
const MAX_ROUNDS: usize = 10_000;

/// A device's command stream: its worker and the memory manager, plus the launch counter.
pub struct DeviceContext {
    pub device: DeviceId,
    pub worker: WorkerHandle,
    pub mm: ManagerHandle,
    time: u64,
    /// Pages granted by the last reply, held under the memory lock until `release`.
    granted: Vec<PageRequest>,
}

impl DeviceContext {
    pub fn new(worker: WorkerHandle, mm: ManagerHandle) -> Self {
        DeviceContext {
            device: worker.device,
            worker,
            mm,
            time: 0,
            granted: Vec::new(),
        }
    }

    pub fn launch(&mut self, spec: &PassSpec, domain: Domain, mode: Mode) -> Result<LaunchOutcome> {
        self.time += 1;
        let launch = Launch {
            kernel: spec.kernel.clone(),
            bindings: spec.bindings.clone(),
            pages: spec.bindings.iter().map(|b| b.pages_end).max().unwrap_or(0),
            domain,
            mode,
            time: self.time,
        };
        self.worker.call(move |d| d.launch(&launch))
    }

    /// Sends a request batch without waiting: a test can interleave other devices' steps.
    pub fn request(&mut self, pages: Vec<PageRequest>) -> Pending<Result<()>> {
        self.granted = pages.clone();
        self.mm.request(self.device, pages)
    }

    /// Requests pages and waits for the grant; the device is then locked until `release`.
    pub fn acquire(&mut self, pages: Vec<PageRequest>) -> Result<()> {
        self.request(pages).wait()?
    }

    pub fn release(&mut self) {
        if !self.granted.is_empty() {
            self.granted.clear();
            self.mm.release(self.device);
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

    fn timed_acquire(&mut self, pages: Vec<PageRequest>, stats: &mut PassStats) -> Result<()> {
        let t = Instant::now();
        let exclusive = pages.iter().any(|p| p.access == Access::Write);
        self.acquire(pages)?;
        let s = t.elapsed().as_secs_f64();
        if exclusive {
            stats.stages.write_requests += s;
        } else {
            stats.stages.read_requests += s;
        }
        stats.batches += 1;
        Ok(())
    }

    fn timed_launch(
        &mut self,
        spec: &PassSpec,
        domain: Domain,
        mode: Mode,
        stats: &mut PassStats,
    ) -> Result<LaunchOutcome> {
        let t = Instant::now();
        let out = self.launch(spec, domain, mode)?;
        let s = t.elapsed().as_secs_f64() - out.uniquify_s;
        match mode {
            Mode::Request => stats.stages.request_pass += s,
            _ => stats.stages.compute += s,
        }
        stats.stages.uniquify += out.uniquify_s;
        if let Some(g) = out.gpu {
            let gs = stats.gpu_stages.get_or_insert_with(Default::default);
            match mode {
                Mode::Request => gs.request_pass += g.kernel_s,
                _ => gs.compute += g.kernel_s,
            }
            gs.uniquify += g.uniquify_s;
        }
        stats.launches += 1;
        stats.invocations += out.invocations;
        Ok(out)
    }

    /// Runs one pass on this device with the chosen procedure; returns with the lock released.
    pub fn run_pass(&mut self, spec: &PassSpec, procedure: Procedure) -> Result<PassStats> {
        let mut stats = PassStats::default();
        let res = match procedure {
            Procedure::Relaunch => self.relaunch(spec, &mut stats),
            Procedure::TwoPass => self.two_pass(spec, &mut stats),
        };
        self.release();
        res?;
        if spec.display {
            stats.lump_into_display();
        }
        Ok(stats)
    }

    /// Runs `Mode` launches, servicing misses and relaunching the invocations that faulted,
    /// until all complete. Returns the write requests the launches recorded (Temp mode).
    fn launch_until_done(
        &mut self,
        spec: &PassSpec,
        mode: Mode,
        stats: &mut PassStats,
    ) -> Result<Vec<PageRequest>> {
        let mut domain = spec.domain.clone();
        let mut writes = Vec::new();
        let mut left = 0;
        for round in 0..MAX_ROUNDS {
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
            if out.incomplete.is_empty() {
                return Ok(writes);
            }
            left = out.incomplete.len();
            if misses.is_empty() {
                // Faulted without asking for anything: relaunching cannot help.
                return Err(RuntimeError::NoProgress {
                    left,
                    rounds: round,
                });
            }
            stats.relaunched += out.incomplete.len() as u64;
            self.timed_acquire(misses, stats)?;
            domain = Domain::List(Arc::new(out.incomplete));
        }
        Err(RuntimeError::NoProgress {
            left,
            rounds: MAX_ROUNDS,
        })
    }

    fn relaunch(&mut self, spec: &PassSpec, stats: &mut PassStats) -> Result<()> {
        self.launch_until_done(spec, Mode::Direct, stats)
            .map(|_| ())
    }

    fn two_pass(&mut self, spec: &PassSpec, stats: &mut PassStats) -> Result<()> {
        // Pass 1 (paper 3.4): record what the invocations read and fetch it in one batch.
        let out = self.timed_launch(spec, spec.domain.clone(), Mode::Request, stats)?;
        if !out.requests.is_empty() {
            self.timed_acquire(out.requests, stats)?;
        }
        // Pass 2 (paper 3.5): compute into the temporary and its write mask.
        let writes = self.compute_to_temp(spec, stats)?;
        // Pass 3: exclusive access to the written pages not held writable, then merge.
        if !writes.is_empty() {
            self.timed_acquire(writes, stats)?;
        }
        self.merge_temp(stats)
    }

    /// Runs the pass into the device's temporary (relaunching invocations whose dependent
    /// loads missed) and returns the sorted write requests for the pages it wrote.
    pub fn compute_to_temp(
        &mut self,
        spec: &PassSpec,
        stats: &mut PassStats,
    ) -> Result<Vec<PageRequest>> {
        let mut writes = self.launch_until_done(spec, Mode::Temp, stats)?;
        writes.sort_unstable();
        writes.dedup();
        Ok(writes)
    }

    /// Merges the temporary into the pages (the third pass). Pages that are not writable and
    /// were not granted are ordinary contention and are requested again; a granted page that
    /// is not writable is a broken grant and fails the pass.
    pub fn merge_temp(&mut self, stats: &mut PassStats) -> Result<()> {
        let mut left = 0;
        for _ in 0..MAX_ROUNDS {
            let t = Instant::now();
            let m = self.merge()?;
            stats.stages.page_writes += t.elapsed().as_secs_f64();
            if let Some(g) = m.gpu_s {
                stats
                    .gpu_stages
                    .get_or_insert_with(Default::default)
                    .page_writes += g;
            }
            if m.missing.is_empty() {
                return Ok(());
            }
            left = m.missing.len();
            let missing: Vec<PageRequest> = m
                .missing
                .into_iter()
                .map(|page: GlobalPage| PageRequest {
                    page,
                    access: Access::Write,
                })
                .collect();
            self.check_grant(&missing)?;
            self.release();
            self.timed_acquire(missing, stats)?;
        }
        Err(RuntimeError::NoProgress {
            left,
            rounds: MAX_ROUNDS,
        })
    }
}
