//! Runs a litmus test through the real runtime, many times, under a chosen schedule.
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
//! modified copies, nothing. A start gate then releases the threads together. Under
//! [`Schedule::Random`] each waits a random delay and pauses randomly between operations, and
//! thread timing is up to the OS, so a seed makes runs alike rather than identical. Under
//! [`Schedule::Pct`] and [`Schedule::Exhaustive`] a `Scheduler` lets one thread at a time
//! take its next memory operation, so the interleaving is the policy's alone.
//!
//! A read-modify-write is one invocation that loads and stores its word ([`RmwWord`]);
//! spinlocks and grace periods are loops of such operations and loads in the thread's own
//! program, so everything a test does to memory goes through the coherence protocol.
//!
//! Fences and acquire/release compile to nothing: each operation already completes (its
//! request granted, its store committed) before the thread's next operation starts, which is
//! stronger than any of them asks for.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tessera_core::{Coherence, CoreError, ObjectDesc, ObjectEntry, ObjectId, ProtocolVariant};
use tessera_runtime::{
    Bound, DeviceContext, Fault, Invocation, Kernel, PassSpec, Procedure, RuntimeError, System,
    SystemConfig,
};

use crate::ast::{Addr, Op, Outcome, Quantifier, Rmw, Test, Thread};
use crate::rng::{self, SplitMix};
use crate::sc::{self, ScError};

/// Where the shared variables live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Each variable on its own page: every variable has its own directory entry.
    OwnPage,
    /// All variables on one page: false sharing, one directory entry for everything.
    SamePage,
}

/// How the threads of a run are interleaved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Free-running threads with random start spreads and pauses; the OS interleaves them.
    Random,
    /// Probabilistic concurrency testing (Burckhardt et al. 2010): one thread at a time
    /// takes its next operation, the enabled one of highest priority; priorities are a
    /// random permutation, and at `depth - 1` random steps the running thread drops below all
    /// others. `depth` is drawn per run from 1 to 3.
    Pct,
    /// Every interleaving of the threads' operations, one per run, in depth-first order,
    /// until all are done or the run count is reached.
    Exhaustive,
}

impl Schedule {
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Random => "random",
            Schedule::Pct => "pct",
            Schedule::Exhaustive => "exhaustive",
        }
    }
}

/// Failed attempts in a row after which a free-running spin gives up: a lock that is never
/// released (or a broken protocol that never shows the release) must end the run, not hang.
const SPIN_LIMIT: u64 = 20_000;

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub runs: u64,
    pub schedule: Schedule,
    pub placement: Placement,
    /// The protocol the node runs. Only `Correct` is meant for use; the others are broken on
    /// purpose and show that the runner catches a broken protocol.
    pub variant: ProtocolVariant,
    /// What a read of a modified page does: owned pages (the runtime's default) or the
    /// paper's write-home rule.
    pub coherence: Coherence,
    pub seed: u64,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            runs: 1000,
            // PCT reaches every outcome SC allows in all the tests we have (random: 49 of 68
            // tests), and still shows the broken protocols: docs/LITMUS.md.
            schedule: Schedule::Pct,
            placement: Placement::OwnPage,
            variant: ProtocolVariant::Correct,
            coherence: Coherence::Owned,
            seed: 1,
        }
    }
}

/// Why a test could not be run at all (a run that fails is counted in the report instead).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Oracle(#[from] ScError),
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
    /// With [`Schedule::Exhaustive`]: whether every interleaving was run.
    pub exhausted: Option<bool>,
}

/// Whether `seen` of `allowed` outcomes is coverage: all of them, and at least one
/// ([`Report::covered`]; the runs across processes count theirs the same way).
pub fn covers(seen: usize, allowed: usize) -> bool {
    allowed > 0 && seen == allowed
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
            exhausted: None,
        }
    }

    /// Whether a final state passes the test's `filter` (every state does without one).
    pub fn kept(&self, o: &Outcome) -> bool {
        self.test.kept(o)
    }

    /// Completed runs the `filter` kept.
    pub fn kept_runs(&self) -> u64 {
        self.observed
            .iter()
            .filter(|(o, _)| self.kept(o))
            .map(|(_, n)| n)
            .sum()
    }

    /// Sequentially consistent outcomes seen, and how many there are (after the filter).
    pub fn coverage(&self) -> (usize, usize) {
        let allowed: Vec<&Outcome> = self.sc.iter().filter(|o| self.kept(o)).collect();
        let seen = allowed
            .iter()
            .filter(|o| self.observed.contains_key(**o))
            .count();
        (seen, allowed.len())
    }

    /// Whether every outcome sequential consistency allows was seen, of at least one: a test
    /// whose runs all deadlocked, or whose filter keeps nothing, allows none, and seeing "all"
    /// of none covers nothing.
    pub fn covered(&self) -> bool {
        let (seen, allowed) = self.coverage();
        covers(seen, allowed)
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

    /// Runs where the condition's proposition held ([`Test::witnesses`]).
    pub fn positive(&self) -> u64 {
        self.test.witnesses(&self.observed).0
    }

    pub fn negative(&self) -> u64 {
        self.test.witnesses(&self.observed).1
    }

    /// herd7's word: `Never`, `Sometimes` or `Always`, from the counts of the proposition.
    pub fn observation(&self) -> &'static str {
        let (pos, neg) = self.test.witnesses(&self.observed);
        crate::ast::observation_word(pos, neg)
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
        self.test.observation_line(&self.observed)
    }

    /// Outcomes as herd7 shows them, the condition's locations only, in their order: runs,
    /// whether the condition holds, the outcome's text.
    fn histogram(&self) -> Vec<(u64, bool, String)> {
        let t = &self.test;
        let shown = t.shown_locs();
        let mut hist: BTreeMap<Vec<i32>, (u64, bool, String)> = BTreeMap::new();
        for (o, n) in self.observed.iter().filter(|(o, _)| self.kept(o)) {
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
        hist.into_values().collect()
    }

    /// herd7's word for the test's quantifier.
    fn kind(&self) -> &'static str {
        match self.test.condition.quantifier {
            Quantifier::Exists => "Allowed",
            Quantifier::NotExists => "Forbidden",
            Quantifier::Forall => "Required",
        }
    }

    /// The outcomes sequential consistency allows (those the filter keeps) that no run showed.
    fn unseen(&self) -> Vec<&Outcome> {
        self.sc
            .iter()
            .filter(|o| self.kept(o) && !self.observed.contains_key(*o))
            .collect()
    }

    /// The report as one JSON object, for scripts: what [`Report::render`] prints, with
    /// outcomes in the same text (`:>`/`*>` histogram lines without their marks), counts as
    /// numbers and the verdict as `passed`.
    pub fn json(&self) -> serde_json::Value {
        use serde_json::json;
        let t = &self.test;
        let all = t.all_locs();
        let hist = self.histogram();
        let (seen, allowed) = self.coverage();
        json!({
            "test": t.name,
            "kind": self.kind(),
            "condition": t.condition_text(),
            "runs": self.runs() + self.failed_runs,
            "placement": match self.config.placement {
                Placement::OwnPage => "own-page",
                Placement::SamePage => "same-page",
            },
            "protocol": variant_name(self.config.variant),
            "coherence": self.config.coherence.to_string(),
            "schedule": self.config.schedule.name(),
            "seed": self.config.seed,
            "every_interleaving_run": self.exhausted,
            "histogram": hist.iter().map(|(n, holds, text)| json!({
                "outcome": text, "count": n, "condition_holds": holds,
            })).collect::<Vec<_>>(),
            "validated": self.validated(),
            "positive": self.positive(),
            "negative": self.negative(),
            "observation": self.observation(),
            "sc_allowed": allowed,
            "sc_seen": seen,
            "sc_not_seen": self
                .unseen()
                .iter()
                .map(|o| t.format_outcome(o, &all))
                .collect::<Vec<_>>(),
            "filtered_out": self.test.filter.is_some().then(|| self.runs() - self.kept_runs()),
            "forbidden": self.forbidden().iter().map(|(o, n)| json!({
                "outcome": t.format_outcome(o, &all), "count": n,
            })).collect::<Vec<_>>(),
            "failed_runs": self.failed_runs,
            "first_failure": self.first_failure,
            "seconds": self.seconds,
            "passed": self.passed(),
        })
    }

    /// The report in litmus7's layout, plus the oracle's verdict.
    pub fn render(&self) -> String {
        let t = &self.test;
        let q = t.condition.quantifier;
        let mut s = String::new();
        let _ = writeln!(s, "Test {} {}", t.name, self.kind());
        let placement = match self.config.placement {
            Placement::OwnPage => "each variable on its own page",
            Placement::SamePage => "all variables on one page",
        };
        let _ = writeln!(
            s,
            "Runs {} ({placement}; protocol {}; coherence {}; schedule {}; seed {})",
            self.runs() + self.failed_runs,
            variant_name(self.config.variant),
            self.config.coherence,
            self.config.schedule.name(),
            self.config.seed
        );
        match self.exhausted {
            Some(true) => {
                let _ = writeln!(s, "Every interleaving run");
            }
            Some(false) => {
                let _ = writeln!(
                    s,
                    "Interleavings left unrun: the run count ended the search"
                );
            }
            None => {}
        }
        let hist = self.histogram();
        let _ = writeln!(s, "Histogram ({} states)", hist.len());
        for (n, holds, text) in &hist {
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
        let (seen, allowed) = self.coverage();
        let _ = writeln!(
            s,
            "Sequential consistency allows {}; {seen} of them seen",
            count(allowed, "outcome", "outcomes")
        );
        // What the oracle says of the condition, beside what the runs showed: a condition
        // never seen may still be one sequential consistency allows, not yet met.
        let kept: Vec<&Outcome> = self.sc.iter().filter(|o| self.kept(o)).collect();
        let holds = kept
            .iter()
            .filter(|o| t.holds(&t.condition.prop, o))
            .count();
        let _ = writeln!(
            s,
            "Under sequential consistency the condition holds in {holds} of them ({})",
            crate::ast::observation_word(holds as u64, (kept.len() - holds) as u64)
        );
        let unseen = self.unseen();
        if !unseen.is_empty() {
            let all = t.all_locs();
            let _ = writeln!(s, "Allowed, not seen:");
            for o in unseen.iter().take(UNSEEN_SHOWN) {
                let mark = if t.holds(&t.condition.prop, o) {
                    "*>"
                } else {
                    ":>"
                };
                let _ = writeln!(s, "      {mark}{}", t.format_outcome(o, &all));
            }
            if unseen.len() > UNSEEN_SHOWN {
                let _ = writeln!(s, "      and {} more", unseen.len() - UNSEEN_SHOWN);
            }
        }
        if self.test.filter.is_some() {
            let _ = writeln!(s, "Filtered out: {} runs", self.runs() - self.kept_runs());
        }
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
        ProtocolVariant::StageIgnoringLocks => "stage-ignoring-locks",
        ProtocolVariant::EvictOwnerWithoutHandover => "evict-owner-without-handover",
        ProtocolVariant::WriteCopiesFromHome => "write-copies-from-home",
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
    /// With [`Schedule::Exhaustive`]: the choices of the next interleaving to run, `None`
    /// once every one has run.
    next_prefix: Option<Vec<usize>>,
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
            next_prefix: Some(Vec::new()),
        };
        if config.schedule == Schedule::Exhaustive {
            r.report.exhausted = Some(false);
        }
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
            self.sys = Some(System::cpu(
                &SystemConfig::new(self.test.threads.len())
                    .variant(self.config.variant)
                    .coherence(self.config.coherence)
                    .threads(1),
            )?);
        }
        Ok(self.sys.as_ref().expect("just built"))
    }

    /// `n` more runs (fewer when an exhaustive search ends). Fails only when the runtime
    /// cannot be started again after a failure.
    pub fn run(&mut self, n: u64) -> Result<(), RunError> {
        let t = Instant::now();
        for _ in 0..n {
            let seed = self.rng.next_u64();
            let policy = match self.config.schedule {
                Schedule::Random => None,
                Schedule::Pct => Some(Policy::pct(&self.test, seed)),
                Schedule::Exhaustive => match &self.next_prefix {
                    None => break,
                    Some(p) => Some(Policy::Exhaustive {
                        prefix: p.clone(),
                        trace: Vec::new(),
                    }),
                },
            };
            let mut trace = None;
            let result = self.run_once(seed, policy, &mut trace);
            // A failed run's choices up to the failure still move the search on, so that a
            // failing interleaving is not run again and again.
            if let Some(trace) = trace {
                self.next_prefix = next_prefix(&trace);
                if self.next_prefix.is_none() {
                    self.report.exhausted = Some(true);
                }
            }
            match result {
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

    fn run_once(
        &mut self,
        seed: u64,
        policy: Option<Policy>,
        trace: &mut Option<Trace>,
    ) -> Result<Outcome, RuntimeError> {
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
        let res = execute(sys, &test, &entry, seed, policy, trace).and_then(|regs| {
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

/// An exhaustive run's choices: per step, the thread index picked among the enabled ones and
/// how many were enabled.
type Trace = Vec<(usize, usize)>;

/// The interleaving after `trace` (each step's choice and how many threads could take it) in
/// depth-first order: the last step with an untried choice takes its next one.
fn next_prefix(trace: &[(usize, usize)]) -> Option<Vec<usize>> {
    let j = trace.iter().rposition(|(c, n)| c + 1 < *n)?;
    let mut p: Vec<usize> = trace[..j].iter().map(|(c, _)| *c).collect();
    p.push(trace[j].0 + 1);
    Some(p)
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
    policy: Option<Policy>,
    trace: &mut Option<Trace>,
) -> Result<Vec<Vec<i32>>, RuntimeError> {
    let mut rng = SplitMix::new(seed);
    let n = test.threads.len();
    let sched = policy.map(|p| Arc::new(Scheduler::new(n, p)));
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
        let sched2 = sched.clone();
        let job = move |ctx: &mut DeviceContext| {
            let env = ThreadEnv {
                test: &test,
                t,
                mem: &mem,
                gate: &gate2,
                sched: sched2.as_deref(),
                spread_ns,
                pause_ns,
            };
            let r = run_thread(ctx, &env, &warm, thread_rng);
            if let Some(s) = &sched2 {
                match &r {
                    Ok(_) => s.finish(t),
                    // The others must not wait for a turn this thread will never take.
                    Err(_) => s.cancel(),
                }
            }
            r
        };
        match sys.on_device(t, job) {
            Ok(p) => pending.push(p),
            Err(e) => {
                // The threads already queued wait at the gate; let them go.
                gate.cancel();
                if let Some(s) = &sched {
                    s.cancel();
                }
                for p in pending {
                    let _ = p.wait();
                }
                *trace = sched.and_then(|s| s.trace());
                return Err(e);
            }
        }
    }
    // Wait for every thread before reporting the first error: the next run must start clean.
    let results: Vec<Result<Vec<i32>, RuntimeError>> = pending
        .into_iter()
        .map(|p| p.wait().and_then(|r| r))
        .collect();
    *trace = sched.and_then(|s| s.trace());
    results.into_iter().collect()
}

/// What one thread of a run needs besides its device.
struct ThreadEnv<'a> {
    test: &'a Test,
    t: usize,
    mem: &'a Memory,
    gate: &'a Gate,
    sched: Option<&'a Scheduler>,
    spread_ns: u64,
    pause_ns: u64,
}

fn run_thread(
    ctx: &mut DeviceContext,
    env: &ThreadEnv<'_>,
    warm: &[Warm],
    mut rng: SplitMix,
) -> Result<Vec<i32>, RuntimeError> {
    let (test, t, mem) = (env.test, env.t, env.mem);
    let thread: &Thread = &test.threads[t];
    let warmed = warm.iter().enumerate().try_for_each(|(v, w)| match w {
        Warm::Nothing => Ok(()),
        Warm::Read => mem.load(ctx, v).map(|_| ()),
        Warm::Write => mem.store(ctx, v, test.init[v] as u32),
    });
    // Every thread reaches the gate, even after a failure, or the others would wait forever.
    let go = env.gate.wait();
    warmed?;
    if !go {
        return Err(RuntimeError::KernelFailed("the run was cancelled".into()));
    }
    if env.sched.is_none() {
        spin(rng.below(env.spread_ns + 1));
    }
    let mut regs = thread.initial_regs();
    let ops = &thread.ops;
    let nvars = test.vars.len();
    let mut pc = 0;
    // Whether the thread's last memory operation was a failed attempt of a spin loop, and
    // whether it could have changed memory (a store or a read-modify-write).
    let mut spun = false;
    let mut wrote = false;
    let mut spins = 0u64;
    while let Some(op) = ops.get(pc) {
        match op {
            Op::Local { dst, value } => {
                regs[*dst] = value.eval(&regs);
                pc += 1;
                continue;
            }
            // See the module comment: every operation is already complete before the next.
            Op::Fence(_) => {
                pc += 1;
                continue;
            }
            Op::Branch { cond, target, spin } => {
                if cond.eval(&regs) == 0 {
                    pc += 1;
                    continue;
                }
                if *spin {
                    spun = true;
                    spins += 1;
                    if spins > SPIN_LIMIT {
                        return Err(RuntimeError::KernelFailed(format!(
                            "P{t} retried a lock or a grace period {SPIN_LIMIT} times"
                        )));
                    }
                }
                pc = (*target).min(ops.len());
                continue;
            }
            Op::Load { .. } | Op::Store { .. } | Op::Rmw { .. } => {}
        }
        if let Some(s) = env.sched {
            if !s.begin_op(t, spun, wrote) {
                return Err(RuntimeError::KernelFailed(
                    format!("P{t}'s run was called off: another thread failed, or every unfinished thread waits on a lock or a grace period that only another waiting thread could end (a deadlock, such as a lock taken twice)"),
                ));
            }
        }
        if !spun {
            spins = 0;
        }
        spun = false;
        match op {
            Op::Load { addr, dst, .. } => {
                let v = resolve(addr, &regs, nvars, t)?;
                regs[*dst] = mem.load(ctx, v)? as i32;
            }
            Op::Store { addr, value, .. } => {
                let v = resolve(addr, &regs, nvars, t)?;
                mem.store(ctx, v, value.eval(&regs) as u32)?;
            }
            Op::Rmw { addr, dst, rmw } => {
                let v = resolve(addr, &regs, nvars, t)?;
                regs[*dst] = mem.rmw(ctx, v, rmw, &regs)?;
            }
            _ => {}
        }
        wrote = matches!(op, Op::Store { .. } | Op::Rmw { .. });
        if env.sched.is_none() {
            pause(&mut rng, env.pause_ns);
        }
        pc += 1;
    }
    Ok(thread.visible_values(&regs))
}

fn resolve(addr: &Addr, regs: &[i32], nvars: usize, t: usize) -> Result<usize, RuntimeError> {
    addr.resolve(regs, nvars).ok_or_else(|| match *addr {
        Addr::Elem {
            len, index, pos, ..
        } => RuntimeError::KernelFailed(format!(
            "P{t}, line {}, column {}: element {} is out of bounds of an object of {len}",
            pos.line, pos.col, regs[index]
        )),
        Addr::Reg { reg, pos } => RuntimeError::KernelFailed(format!(
            "P{t}, line {}, column {}: dereferences {}, which is no shared variable's address",
            pos.line, pos.col, regs[reg]
        )),
        Addr::Var(_) => RuntimeError::KernelFailed(format!(
            "P{t} dereferences a value that points at no shared variable"
        )),
    })
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
        PassSpec::new(kernel, self.bindings.clone(), 1, 1)
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

    /// One read-modify-write as one invocation: see [`RmwWord`].
    fn rmw(
        &self,
        ctx: &mut DeviceContext,
        var: usize,
        rmw: &Rmw,
        regs: &[i32],
    ) -> Result<i32, RuntimeError> {
        let out = Arc::new(AtomicU32::new(0));
        let (rmw, regs) = (rmw.clone(), regs.to_vec());
        let kernel = Arc::new(RmwWord {
            id: self.id,
            word: word(var)?,
            apply: Box::new(move |old| rmw.apply(old, &regs)),
            out: out.clone(),
        });
        ctx.run_pass(&self.pass(kernel), Procedure::Relaunch)?;
        Ok(out.load(Ordering::Relaxed) as i32)
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

/// What a read-modify-write does to the word it finds: the word to store (`None`: leave
/// it) and the value the operation returns.
pub type RmwFn = Box<dyn Fn(i32) -> (Option<i32>, i32) + Send + Sync>;

/// One read-modify-write in one invocation: it loads the word and stores it, so the relaunch
/// procedure gives it the page writable (exclusive) before the invocation can complete, and
/// both accesses happen in that one completed invocation, with no other device holding a
/// copy in between. A cmpxchg that fails stores back the word it found, so that it too runs
/// holding the page exclusively, as a locked instruction does on a CPU; the value is
/// unchanged. Stores are buffered until the invocation completes, and the result reaches
/// `out` only then, so a faulting attempt leaves no trace.
pub struct RmwWord {
    pub id: ObjectId,
    pub word: u32,
    pub apply: RmwFn,
    pub out: Arc<AtomicU32>,
}

impl Kernel for RmwWord {
    fn name(&self) -> &'static str {
        "litmus_rmw"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _x: u32, _y: u32) -> Result<(), Fault> {
        let old = inv.load_u32(self.id, self.word)?;
        let (new, ret) = (self.apply)(old as i32);
        inv.store_u32(self.id, self.word, new.map_or(old, |n| n as u32))?;
        self.out.store(ret as u32, Ordering::Relaxed);
        Ok(())
    }
}

/// How a gated schedule picks the next thread.
enum Policy {
    Pct {
        /// Higher runs first; the initial ones are above every change point's.
        prio: Vec<i64>,
        /// Steps at which the running thread drops to priority `i` (its index here).
        changes: Vec<u64>,
    },
    Exhaustive {
        /// Choices to replay; past its end, the first enabled thread.
        prefix: Vec<usize>,
        /// Each step's choice and how many threads were enabled.
        trace: Vec<(usize, usize)>,
    },
}

impl Policy {
    fn pct(test: &Test, seed: u64) -> Policy {
        let mut rng = SplitMix::new(seed ^ 0x5043_5400);
        let n = test.threads.len();
        let depth = 1 + rng.below(3) as usize;
        // Steps in a run: each memory operation once.
        let k: u64 = test
            .threads
            .iter()
            .map(|t| t.ops.iter().filter(|o| o.is_memory()).count() as u64)
            .sum::<u64>()
            .max(1);
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let mut prio = vec![0; n];
        for (rank, t) in order.into_iter().enumerate() {
            prio[t] = (depth + rank) as i64;
        }
        let changes = (1..depth).map(|_| rng.below(k)).collect();
        Policy::Pct { prio, changes }
    }

    /// Picks one of `enabled` (thread numbers, ascending, never empty) at step `step`.
    fn choose(&mut self, enabled: &[usize], step: u64) -> usize {
        match self {
            Policy::Pct { prio, changes } => {
                let top = |prio: &[i64]| {
                    enabled
                        .iter()
                        .copied()
                        .max_by_key(|t| prio[*t])
                        .unwrap_or(enabled[0])
                };
                let mut c = top(prio);
                for (i, at) in changes.iter().enumerate() {
                    if *at == step {
                        prio[c] = i as i64;
                        c = top(prio);
                    }
                }
                c
            }
            Policy::Exhaustive { prefix, trace } => {
                let i = trace.len();
                let pick = prefix.get(i).copied().unwrap_or(0).min(enabled.len() - 1);
                trace.push((pick, enabled.len()));
                enabled[pick]
            }
        }
    }
}

/// Lets one thread at a time take its next memory operation. A thread asks for its turn at
/// each memory operation; once every unfinished thread has asked, the policy picks one among
/// those that can progress, and it keeps the turn until it asks again or ends. A thread
/// whose last operation was a failed spin attempt (a lock found taken, a reader still inside)
/// cannot progress until another thread writes memory (a store or a read-modify-write: a load
/// changes nothing the attempt read, so a retry after it fails the same way), so it is not
/// picked until then; if no thread can progress, the run is called off. Waking waiters on
/// writes only keeps an exhaustive search from spending its runs on retries that repeat.
struct Scheduler {
    state: Mutex<SchedState>,
    cv: Condvar,
}

struct SchedState {
    asked: Vec<bool>,
    finished: Vec<bool>,
    waiting: Vec<bool>,
    turn: Option<usize>,
    cancelled: bool,
    step: u64,
    policy: Policy,
}

impl Scheduler {
    fn new(n: usize, policy: Policy) -> Self {
        Scheduler {
            state: Mutex::new(SchedState {
                asked: vec![false; n],
                finished: vec![false; n],
                waiting: vec![false; n],
                turn: None,
                cancelled: false,
                step: 0,
                policy,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SchedState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for thread `t`'s turn; `spun` says its last operation was a failed attempt,
    /// `wrote` that it was a store or a read-modify-write. False if the run was called off.
    fn begin_op(&self, t: usize, spun: bool, wrote: bool) -> bool {
        let mut g = self.lock();
        Self::progressed(&mut g, t, !spun && wrote);
        g.asked[t] = true;
        g.waiting[t] = spun;
        self.pick(&mut g);
        while g.turn != Some(t) && !g.cancelled {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.cancelled
    }

    fn finish(&self, t: usize) {
        let mut g = self.lock();
        Self::progressed(&mut g, t, true);
        g.finished[t] = true;
        self.pick(&mut g);
    }

    fn cancel(&self) {
        let mut g = self.lock();
        g.cancelled = true;
        self.cv.notify_all();
    }

    /// `t` gives back its turn; if its operation may have changed memory (`wakes`), waiting
    /// threads may retry.
    fn progressed(g: &mut SchedState, t: usize, wakes: bool) {
        if g.turn == Some(t) {
            g.turn = None;
        }
        if wakes {
            for (u, w) in g.waiting.iter_mut().enumerate() {
                if u != t {
                    *w = false;
                }
            }
        }
    }

    fn pick(&self, g: &mut SchedState) {
        if g.turn.is_some() || g.cancelled {
            return;
        }
        let n = g.asked.len();
        let live: Vec<usize> = (0..n).filter(|u| !g.finished[*u]).collect();
        if live.is_empty() || live.iter().any(|u| !g.asked[*u]) {
            return;
        }
        let enabled: Vec<usize> = live.into_iter().filter(|u| !g.waiting[*u]).collect();
        if enabled.is_empty() {
            g.cancelled = true;
        } else {
            let step = g.step;
            let c = g.policy.choose(&enabled, step);
            g.step += 1;
            g.asked[c] = false;
            g.turn = Some(c);
        }
        self.cv.notify_all();
    }

    fn trace(&self) -> Option<Trace> {
        match &self.lock().policy {
            Policy::Exhaustive { trace, .. } => Some(trace.clone()),
            Policy::Pct { .. } => None,
        }
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

/// The allowed outcomes a report lists as not seen, at most: a wide test allows thousands.
const UNSEEN_SHOWN: usize = 8;

/// `n` and the noun that goes with it: "1 file", "2 files".
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
