//! Runs a litmus test through the real runtime, many times, under randomised schedules.
//!
//! One node with a device per thread. The shared variables are 32-bit words of one buffer
//! object: with [`Placement::OwnPage`] every variable is its own page (4-byte pages), with
//! [`Placement::SamePage`] they all share one page. Every operation is a pass of its own: a
//! one-invocation kernel over a 1×1 domain, run with the relaunch procedure, so a miss is one
//! request and one reply through the coherence protocol, exactly as any kernel's would be.
//!
//! Each thread's whole program is one closure on its device's driver, so the threads run
//! concurrently. Before a run, every device reads or writes (with the value already there) a
//! random subset of the variables, so that runs start from varied residency: shared copies,
//! modified copies, nothing. A start gate then releases the threads together; each waits a
//! random delay and pauses randomly between operations. All of it is drawn from a seed, but
//! thread timing is still up to the OS, so a seed makes runs alike rather than identical.
//!
//! Fences and acquire/release compile to nothing: each operation already completes (its
//! request granted, its store committed) before the thread's next operation starts, which is
//! stronger than any of them asks for.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tessera_core::{CoreError, ObjectDesc, ObjectEntry, ObjectId, ProtocolVariant};
use tessera_runtime::{
    Bound, DeviceContext, Domain, Fault, Invocation, Kernel, PassSpec, Procedure, RuntimeError,
    System, SystemConfig,
};

use crate::ast::{Op, Outcome, Quantifier, Test, Thread};
use crate::rng::{self, SplitMix};
use crate::sc::{self, TooLarge};

/// Where the shared variables live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Each variable on its own page: every variable has its own directory entry.
    OwnPage,
    /// All variables on one page: false sharing, one directory entry for everything.
    SamePage,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub runs: u64,
    pub placement: Placement,
    /// The protocol the node runs. Only `Correct` is meant for use; the others are broken on
    /// purpose and show that the runner catches a broken protocol.
    pub variant: ProtocolVariant,
    pub seed: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            runs: 1000,
            placement: Placement::OwnPage,
            variant: ProtocolVariant::Correct,
            seed: 1,
        }
    }
}

/// Why a test could not be run at all (a run that fails is counted in the report instead).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] RuntimeError),
}

/// What the runs of one test showed.
#[derive(Clone, Debug)]
pub struct Report {
    pub test: Test,
    pub config: RunConfig,
    /// Every outcome sequential consistency allows.
    pub sc: BTreeSet<Outcome>,
    /// Completed runs per final state.
    pub observed: BTreeMap<Outcome, u64>,
    /// Runs the runtime failed (an error, not an outcome).
    pub failed_runs: u64,
    pub first_failure: Option<String>,
    /// Wall time of the runs, measured.
    pub seconds: f64,
}

impl Report {
    fn new(test: &Test, config: &RunConfig, sc: BTreeSet<Outcome>) -> Self {
        Report {
            test: test.clone(),
            config: config.clone(),
            sc,
            observed: BTreeMap::new(),
            failed_runs: 0,
            first_failure: None,
            seconds: 0.0,
        }
    }

    /// Completed runs.
    pub fn runs(&self) -> u64 {
        self.observed.values().sum()
    }

    /// Observed outcomes that sequential consistency forbids, with their counts.
    pub fn forbidden(&self) -> Vec<(&Outcome, u64)> {
        self.observed
            .iter()
            .filter(|(o, _)| !self.sc.contains(*o))
            .map(|(o, n)| (o, *n))
            .collect()
    }

    /// Runs where the condition's proposition held (herd7 counts the proposition whatever
    /// the quantifier: `exists P`, `~exists P` and `forall P` all count runs satisfying P).
    pub fn positive(&self) -> u64 {
        self.observed
            .iter()
            .filter(|(o, _)| self.test.holds(&self.test.condition.prop, o))
            .map(|(_, n)| n)
            .sum()
    }

    pub fn negative(&self) -> u64 {
        self.runs() - self.positive()
    }

    /// herd7's word: `Never`, `Sometimes` or `Always`, from the counts of the proposition.
    pub fn observation(&self) -> &'static str {
        if self.positive() == 0 {
            "Never"
        } else if self.negative() == 0 {
            "Always"
        } else {
            "Sometimes"
        }
    }

    /// Whether the runs validate the condition, as herd7 judges it.
    pub fn validated(&self) -> bool {
        match self.test.condition.quantifier {
            Quantifier::Exists => self.positive() > 0,
            Quantifier::NotExists => self.positive() == 0,
            Quantifier::Forall => self.negative() == 0,
        }
    }

    /// No forbidden outcome and no failed run.
    pub fn passed(&self) -> bool {
        self.failed_runs == 0 && self.forbidden().is_empty()
    }

    /// The herd7 summary line: `Observation <name> <Never|Sometimes|Always> <pos> <neg>`.
    pub fn observation_line(&self) -> String {
        format!(
            "Observation {} {} {} {}",
            self.test.name,
            self.observation(),
            self.positive(),
            self.negative()
        )
    }

    /// The report in litmus7's layout, plus the oracle's verdict.
    pub fn render(&self) -> String {
        let t = &self.test;
        let q = t.condition.quantifier;
        let mut s = String::new();
        let kind = match q {
            Quantifier::Exists => "Allowed",
            Quantifier::NotExists => "Forbidden",
            Quantifier::Forall => "Required",
        };
        let _ = writeln!(s, "Test {} {kind}", t.name);
        let placement = match self.config.placement {
            Placement::OwnPage => "each variable on its own page",
            Placement::SamePage => "all variables on one page",
        };
        let _ = writeln!(
            s,
            "Runs {} ({placement}; protocol {}; seed {})",
            self.runs() + self.failed_runs,
            variant_name(self.config.variant),
            self.config.seed
        );
        // Outcomes as herd7 shows them: the condition's locations only.
        let shown = t.shown_locs();
        let mut hist: BTreeMap<Vec<i32>, (u64, bool, String)> = BTreeMap::new();
        for (o, n) in &self.observed {
            let key: Vec<i32> = shown.iter().map(|l| t.value(o, *l)).collect();
            let e = hist.entry(key).or_insert_with(|| {
                (
                    0,
                    t.holds(&t.condition.prop, o),
                    t.format_outcome(o, &shown),
                )
            });
            e.0 += n;
        }
        let _ = writeln!(s, "Histogram ({} states)", hist.len());
        for (n, holds, text) in hist.values() {
            let mark = if *holds { "*>" } else { ":>" };
            let _ = writeln!(s, "{n:<6}{mark}{text}");
        }
        let _ = writeln!(s, "{}", if self.validated() { "Ok" } else { "No" });
        let _ = writeln!(s);
        let (wp, wn) = match q {
            Quantifier::NotExists => (self.negative(), self.positive()),
            _ => (self.positive(), self.negative()),
        };
        let _ = writeln!(s, "Witnesses");
        let _ = writeln!(s, "Positive: {wp}, Negative: {wn}");
        let _ = writeln!(
            s,
            "Condition {} is {}validated",
            t.condition_text(),
            if self.validated() { "" } else { "NOT " }
        );
        let _ = writeln!(s, "{}", self.observation_line());
        let seen = self
            .observed
            .keys()
            .filter(|o| self.sc.contains(*o))
            .count();
        let _ = writeln!(
            s,
            "Sequential consistency allows {} outcomes; {seen} of them seen",
            self.sc.len()
        );
        let forbidden = self.forbidden();
        if forbidden.is_empty() {
            let _ = writeln!(s, "Forbidden by sequential consistency: none");
        } else {
            let runs: u64 = forbidden.iter().map(|(_, n)| n).sum();
            let _ = writeln!(
                s,
                "Forbidden by sequential consistency: {} outcomes in {runs} runs",
                forbidden.len()
            );
            let all = t.all_locs();
            for (o, n) in forbidden {
                let _ = writeln!(s, "{n:<6}!>{}", t.format_outcome(o, &all));
            }
        }
        if self.failed_runs > 0 {
            let _ = writeln!(
                s,
                "Failed runs: {} (first: {})",
                self.failed_runs,
                self.first_failure.as_deref().unwrap_or("?")
            );
        }
        let _ = writeln!(s, "Time {} {:.2}", t.name, self.seconds);
        s
    }
}

pub fn variant_name(v: ProtocolVariant) -> &'static str {
    match v {
        ProtocolVariant::Correct => "correct",
        ProtocolVariant::NoMemoryLock => "no-memory-lock",
        ProtocolVariant::SkipInvalidation => "skip-invalidation",
        ProtocolVariant::SkipWriteBackOnDowngrade => "skip-write-back",
        ProtocolVariant::FreeWithoutInvalidation => "free-without-invalidation",
        ProtocolVariant::FreeIgnoringLocks => "free-ignoring-locks",
        ProtocolVariant::EvictWithoutWriteBack => "evict-without-write-back",
        ProtocolVariant::EvictIgnoringLocks => "evict-ignoring-locks",
    }
}

/// Runs `config.runs` runs of `test`.
pub fn run_test(test: &Test, config: &RunConfig) -> Result<Report, RunError> {
    let mut r = Runner::new(test, config)?;
    r.run(config.runs)?;
    Ok(r.into_report())
}

/// Runs one test repeatedly on one node, accumulating a report.
pub struct Runner {
    test: Arc<Test>,
    config: RunConfig,
    /// Built on first use and rebuilt after a failed run, whose node may be left broken.
    sys: Option<System>,
    report: Report,
    rng: SplitMix,
}

impl Runner {
    /// Enumerates the sequentially consistent outcomes and starts a node.
    pub fn new(test: &Test, config: &RunConfig) -> Result<Self, RunError> {
        let sc = sc::sc_outcomes(test)?;
        let mut r = Runner {
            test: Arc::new(test.clone()),
            config: config.clone(),
            sys: None,
            report: Report::new(test, config, sc),
            rng: SplitMix::new(config.seed ^ rng::hash(&test.name)),
        };
        r.system()?;
        Ok(r)
    }

    pub fn report(&self) -> &Report {
        &self.report
    }

    pub fn into_report(self) -> Report {
        self.report
    }

    fn system(&mut self) -> Result<&System, RuntimeError> {
        if self.sys.is_none() {
            self.sys = Some(System::cpu(&SystemConfig {
                devices: self.test.threads.len(),
                variant: self.config.variant,
                cpu_threads: 1,
                ..Default::default()
            })?);
        }
        Ok(self.sys.as_ref().expect("just built"))
    }

    /// `n` more runs. Fails only when the runtime cannot be started again after a failure.
    pub fn run(&mut self, n: u64) -> Result<(), RunError> {
        let t = Instant::now();
        for _ in 0..n {
            let seed = self.rng.next_u64();
            match self.run_once(seed) {
                Ok(o) => *self.report.observed.entry(o).or_insert(0) += 1,
                Err(e) => {
                    self.report.failed_runs += 1;
                    self.report.first_failure.get_or_insert(e.to_string());
                    // The node may be broken half way through an action; start afresh.
                    self.sys = None;
                    self.system()?;
                }
            }
        }
        self.report.seconds += t.elapsed().as_secs_f64();
        Ok(())
    }

    fn run_once(&mut self, seed: u64) -> Result<Outcome, RuntimeError> {
        let test = Arc::clone(&self.test);
        let placement = self.config.placement;
        let sys = self.system()?;
        let words = test.vars.len().max(1) as u64;
        let page_bytes = match placement {
            Placement::OwnPage => 4,
            Placement::SamePage => (4 * words).next_power_of_two(),
        };
        let mut data = vec![0u8; 4 * words as usize];
        for (i, v) in test.init.iter().enumerate() {
            data[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let desc = ObjectDesc::buffer(4 * words, page_bytes).map_err(RuntimeError::Core)?;
        let entry = sys.create(desc, Some(data))?;
        let res = execute(sys, &test, &entry, seed).and_then(|regs| {
            let bytes = sys.mm.read(entry.id)?;
            Ok((regs, bytes))
        });
        let freed = sys.mm.free(entry.id);
        let (regs, bytes) = res?;
        freed?;
        let mem = bytes
            .chunks_exact(4)
            .take(test.vars.len())
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok(Outcome { regs, mem })
    }
}

/// What a device does to a variable before the run starts.
#[derive(Clone, Copy)]
enum Warm {
    Nothing,
    Read,
    /// Writes the value the variable already holds: takes the page exclusively.
    Write,
}

/// One run: every thread's program on its own device, concurrently. Returns each thread's
/// named registers.
fn execute(
    sys: &System,
    test: &Arc<Test>,
    entry: &ObjectEntry,
    seed: u64,
) -> Result<Vec<Vec<i32>>, RuntimeError> {
    let mut rng = SplitMix::new(seed);
    let n = test.threads.len();
    let mem = Memory {
        id: entry.id,
        bindings: Arc::new(vec![Bound::new(entry)]),
    };
    let gate = Arc::new(Gate::new(n));
    // Each run draws how far apart threads start and how long they pause, so that runs
    // cover both lock-step and spread-out schedules.
    let spread_ns = [0, 2_000, 20_000, 100_000][rng.below(4) as usize];
    let pause_ns = [0, 1_000, 10_000][rng.below(3) as usize];
    let mut pending = Vec::with_capacity(n);
    for t in 0..n {
        let warm: Vec<Warm> = (0..test.vars.len())
            .map(|_| match rng.below(8) {
                0..=3 => Warm::Nothing,
                4..=6 => Warm::Read,
                _ => Warm::Write,
            })
            .collect();
        let thread_rng = SplitMix::new(rng.next_u64());
        let (test, mem, gate2) = (Arc::clone(test), mem.clone(), Arc::clone(&gate));
        let job = move |ctx: &mut DeviceContext| {
            run_thread(
                ctx, &test, t, &mem, &warm, &gate2, thread_rng, spread_ns, pause_ns,
            )
        };
        match sys.on_device(t, job) {
            Ok(p) => pending.push(p),
            Err(e) => {
                // The threads already queued wait at the gate; let them go.
                gate.cancel();
                for p in pending {
                    let _ = p.wait();
                }
                return Err(e);
            }
        }
    }
    // Wait for every thread before reporting the first error: the next run must start clean.
    let results: Vec<Result<Vec<i32>, RuntimeError>> = pending
        .into_iter()
        .map(|p| p.wait().and_then(|r| r))
        .collect();
    results.into_iter().collect()
}

#[allow(clippy::too_many_arguments)]
fn run_thread(
    ctx: &mut DeviceContext,
    test: &Test,
    t: usize,
    mem: &Memory,
    warm: &[Warm],
    gate: &Gate,
    mut rng: SplitMix,
    spread_ns: u64,
    pause_ns: u64,
) -> Result<Vec<i32>, RuntimeError> {
    let thread: &Thread = &test.threads[t];
    let warmed = warm.iter().enumerate().try_for_each(|(v, w)| match w {
        Warm::Nothing => Ok(()),
        Warm::Read => mem.load(ctx, v).map(|_| ()),
        Warm::Write => mem.store(ctx, v, test.init[v] as u32),
    });
    // Every thread reaches the gate, even after a failure, or the others would wait forever.
    let go = gate.wait();
    warmed?;
    if !go {
        return Err(RuntimeError::Config("the run was cancelled".into()));
    }
    spin(rng.below(spread_ns + 1));
    let mut regs = thread.initial_regs();
    for op in &thread.ops {
        match op {
            Op::Load { var, dst, .. } => {
                regs[*dst] = mem.load(ctx, *var)? as i32;
                pause(&mut rng, pause_ns);
            }
            Op::Store { var, value, .. } => {
                mem.store(ctx, *var, value.eval(&regs) as u32)?;
                pause(&mut rng, pause_ns);
            }
            Op::Local { dst, value } => regs[*dst] = value.eval(&regs),
            // See the module comment: every operation is already complete before the next.
            Op::Fence(_) => {}
        }
    }
    Ok(thread.visible_values(&regs))
}

fn pause(rng: &mut SplitMix, max_ns: u64) {
    match rng.below(4) {
        0 => {}
        1 => std::thread::yield_now(),
        _ => spin(rng.below(max_ns + 1)),
    }
}

/// Busy-waits, yielding so that a machine with few cores still runs the other threads.
fn spin(ns: u64) {
    if ns == 0 {
        return;
    }
    let until = Instant::now() + Duration::from_nanos(ns);
    while Instant::now() < until {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
}

/// The test's buffer, as the kernels see it.
#[derive(Clone)]
struct Memory {
    id: ObjectId,
    bindings: Arc<Vec<Bound>>,
}

impl Memory {
    fn pass(&self, kernel: Arc<dyn Kernel>) -> PassSpec {
        PassSpec {
            kernel,
            bindings: self.bindings.clone(),
            domain: Domain::Rect {
                x0: 0,
                y0: 0,
                x1: 1,
                y1: 1,
            },
            display: false,
        }
    }

    fn load(&self, ctx: &mut DeviceContext, var: usize) -> Result<u32, RuntimeError> {
        let out = Arc::new(AtomicU32::new(0));
        let kernel = Arc::new(LoadWord {
            id: self.id,
            word: word(var)?,
            out: out.clone(),
        });
        ctx.run_pass(&self.pass(kernel), Procedure::Relaunch)?;
        // The pass's reply channel orders the kernel's store before this load.
        Ok(out.load(Ordering::Relaxed))
    }

    fn store(&self, ctx: &mut DeviceContext, var: usize, value: u32) -> Result<(), RuntimeError> {
        let kernel = Arc::new(StoreWord {
            id: self.id,
            word: word(var)?,
            value,
        });
        ctx.run_pass(&self.pass(kernel), Procedure::Relaunch)?;
        Ok(())
    }
}

fn word(var: usize) -> Result<u32, RuntimeError> {
    u32::try_from(var).map_err(|_| {
        RuntimeError::Core(CoreError::Oversized {
            texels: var as u64,
            limit: u32::MAX as u64,
        })
    })
}

/// One load: the value reaches `out` only when the invocation completes, so a faulting
/// attempt that is relaunched leaves no trace.
pub struct LoadWord {
    pub id: ObjectId,
    pub word: u32,
    pub out: Arc<AtomicU32>,
}

impl Kernel for LoadWord {
    fn name(&self) -> &'static str {
        "litmus_load"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _x: u32, _y: u32) -> Result<(), Fault> {
        let v = inv.load_u32(self.id, self.word)?;
        self.out.store(v, Ordering::Relaxed);
        Ok(())
    }
}

/// One store of `value` to word `word` of buffer `id`.
pub struct StoreWord {
    pub id: ObjectId,
    pub word: u32,
    pub value: u32,
}

impl Kernel for StoreWord {
    fn name(&self) -> &'static str {
        "litmus_store"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _x: u32, _y: u32) -> Result<(), Fault> {
        inv.store_u32(self.id, self.word, self.value)
    }
}

/// A start line for the threads of one run that can be called off: unlike
/// `std::sync::Barrier`, a run that fails to queue every thread can release the ones queued.
struct Gate {
    n: usize,
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Gate {
    fn new(n: usize) -> Self {
        Gate {
            n,
            state: Mutex::new((0, false)),
            cv: Condvar::new(),
        }
    }

    /// Waits for all `n` threads; false if the run was cancelled.
    fn wait(&self) -> bool {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        if g.0 >= self.n {
            self.cv.notify_all();
        }
        while g.0 < self.n && !g.1 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.1
    }

    fn cancel(&self) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.1 = true;
        self.cv.notify_all();
    }
}
