//! Litmus tests across nodes: each thread of a herd7 test runs on a device of its own, threads
//! dealt to nodes round robin (thread t on node `t % nodes`), each shared variable on a page of
//! its own homed round robin too, every memory operation one request, grant and release
//! through the multi-node protocol. Rank 0 gathers each run's outcome and checks it against
//! tessera-litmus's sequential-consistency oracle.

use std::collections::BTreeMap;

use tessera_litmus::ast::{Addr, Op};
use tessera_litmus::{Outcome, Tally, Test};

/// Most operations one thread may run in one run (spin loops included) before the run is
/// called stuck.
pub const MAX_STEPS: u32 = 100_000;

/// One thread's progress through its program.
#[derive(Clone, Debug)]
pub struct ThreadRun {
    pub thread: usize,
    pub pc: usize,
    pub regs: Vec<i32>,
    steps: u32,
}

/// The next memory operation of a thread: the variable and whether it writes.
pub type MemOp = (usize, bool);

impl ThreadRun {
    pub fn new(test: &Test, thread: usize) -> Self {
        ThreadRun {
            thread,
            pc: 0,
            regs: test.threads[thread].initial_regs(),
            steps: 0,
        }
    }

    /// Runs register steps, branches and fences up to the next memory operation; `None` at
    /// the end of the program.
    pub fn next_memory(&mut self, test: &Test) -> Result<Option<MemOp>, String> {
        let ops = &test.threads[self.thread].ops;
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(format!(
                    "thread P{} ran {MAX_STEPS} steps without ending",
                    self.thread
                ));
            }
            let Some(op) = ops.get(self.pc) else {
                return Ok(None);
            };
            match op {
                Op::Branch { cond, target, .. } => {
                    self.pc = if cond.eval(&self.regs) != 0 {
                        *target
                    } else {
                        self.pc + 1
                    };
                }
                Op::Local { dst, value } => {
                    self.regs[*dst] = value.eval(&self.regs);
                    self.pc += 1;
                }
                Op::Fence(_) => self.pc += 1,
                Op::Load { addr, .. } => {
                    return self.resolve(test, *addr).map(|v| Some((v, false)))
                }
                Op::Store { addr, .. } | Op::Rmw { addr, .. } => {
                    return self.resolve(test, *addr).map(|v| Some((v, true)))
                }
            }
        }
    }

    fn resolve(&self, test: &Test, addr: Addr) -> Result<usize, String> {
        addr.resolve(&self.regs, test.vars.len()).ok_or_else(|| {
            format!(
                "thread P{} dereferences a word that points at no variable",
                self.thread
            )
        })
    }

    /// Carries out the memory operation at `pc` on `word` (the thread holds its page) and
    /// moves past it.
    pub fn perform(&mut self, test: &Test, word: &mut i32) {
        match &test.threads[self.thread].ops[self.pc] {
            Op::Load { dst, .. } => self.regs[*dst] = *word,
            Op::Store { value, .. } => *word = value.eval(&self.regs),
            Op::Rmw { dst, rmw, .. } => {
                let (new, ret) = rmw.apply(*word, &self.regs);
                if let Some(n) = new {
                    *word = n;
                }
                self.regs[*dst] = ret;
            }
            Op::Branch { .. } | Op::Local { .. } | Op::Fence(_) => {}
        }
        self.pc += 1;
    }
}

/// What rank 0 saw over every run of a test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LitmusReport {
    pub runs: u64,
    /// Each outcome seen and how often.
    pub outcomes: BTreeMap<Outcome, u64>,
    /// Runs whose outcome the SC oracle forbids (must be 0).
    pub forbidden: u64,
    /// Outcomes SC allows that were seen, and how many it allows.
    pub allowed_seen: usize,
    pub allowed: usize,
}

impl LitmusReport {
    pub fn new(test: &Test, outcomes: BTreeMap<Outcome, u64>) -> Result<Self, String> {
        let allowed = tessera_litmus::sc_outcomes(test).map_err(|e| e.to_string())?;
        let forbidden = outcomes
            .iter()
            .filter(|(o, _)| !allowed.contains(o))
            .map(|(_, n)| n)
            .sum();
        Ok(LitmusReport {
            runs: outcomes.values().sum(),
            allowed_seen: outcomes.keys().filter(|o| allowed.contains(o)).count(),
            allowed: allowed.len(),
            forbidden,
            outcomes,
        })
    }
}

impl LitmusReport {
    /// What rank 0 prints of `test` run on `nodes` processes of `k` devices: the counts, then
    /// each outcome seen and how often, then herd7's `Observation` line.
    pub fn render(&self, test: &Test, nodes: usize, k: usize) -> String {
        let mut s = format!(
            "{}: {} runs on {nodes} processes x {k} devices, {} outcomes, {} of {} SC outcomes seen, {} forbidden\n",
            test.name,
            self.runs,
            self.outcomes.len(),
            self.allowed_seen,
            self.allowed,
            self.forbidden
        );
        for (o, n) in &self.outcomes {
            s += &format!("  {n:>6}  {}\n", test.format_outcome(o, &test.shown_locs()));
        }
        s += &test.observation_line(&self.outcomes);
        s.push('\n');
        s
    }
}

/// Why a run over litmus files stopped.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// Worded as one line, the node's error included, as every rank reports it.
    #[error("rank {rank}: {test}: {error}")]
    Node {
        rank: usize,
        test: String,
        error: crate::NodeError,
    },
    /// mpirun's `:` gives each rank its own command line: ranks that would run other tests,
    /// or the same ones another number of times, disagree on every message after this, and
    /// had hung or indexed out of range.
    #[error("rank {rank} was given other litmus files or options than rank {other}: give every rank the same command line")]
    Disagree { rank: usize, other: usize },
    #[error("rank {rank}: {error}")]
    Agreement {
        rank: usize,
        error: crate::NodeError,
    },
}

/// Every rank sends every other the digest of its run (the files' bytes, `runs`, the devices
/// per node) and compares what it gets with its own, before any file runs
/// ([`crate::agree::agree`]).
fn agree<T: crate::Transport>(
    t: &T,
    files: &[std::path::PathBuf],
    base: &crate::NodeConfig,
    runs: u32,
) -> Result<(), FilesError> {
    use std::hash::{Hash, Hasher};
    // The standard library's hasher with its fixed keys: every rank runs the same binary, so
    // equal runs give equal digests.
    let mut hasher = std::hash::DefaultHasher::new();
    (runs, base.devices_per_node, files.len()).hash(&mut hasher);
    for f in files {
        // An unreadable file counts by its name; loading it fails on every rank later.
        std::fs::read(f)
            .unwrap_or_else(|_| f.display().to_string().into_bytes())
            .hash(&mut hasher);
    }
    crate::agree::agree(t, hasher.finish()).map_err(|e| match e {
        crate::agree::AgreeError::Disagree { rank, other } => FilesError::Disagree { rank, other },
        crate::agree::AgreeError::Node { rank, error } => FilesError::Agreement { rank, error },
    })
}

/// The end of a run over litmus files on every rank: what went wrong, if anything, handed to
/// `say` on rank 0 alone, then a barrier every rank meets whatever its own tally. mpirun ends
/// the job at the first rank to exit non-zero, rank 0 included, so the others wait for rank 0
/// to have said it; and only rank 0 counts forbidden outcomes, so another rank may have
/// nothing to report and must wait all the same. Returns this rank's problems (its exit
/// status).
pub fn conclude<T: crate::Transport>(
    t: &T,
    tally: &Tally,
    say: impl FnOnce(&str),
) -> Option<String> {
    let problems = tally.problems();
    if let (0, Some(p)) = (t.rank(), &problems) {
        say(p);
    }
    t.barrier();
    problems
}

/// What rank 0 hears of one file of a run across processes.
pub enum FileRun {
    /// It ran: its report as rank 0 prints it ([`LitmusReport::render`]).
    Ran(String),
    /// It could not be run, and why: it could not be loaded (every rank reads the same bytes,
    /// so every rank skips it), or its test has more threads than the ranks have devices.
    Skipped(String),
}

/// Runs the test of each of `files` `runs` times on the multi-node engine over `t`, with
/// `base` (its `litmus` replaced) and at most `jitter_us` of random delay before each memory
/// operation; the threads are dealt round robin to the `base.devices_per_node` devices of every
/// node. On rank 0 alone, `each` gets each file's outcome as it completes (the other ranks
/// hold no report, and one rank says why a file was skipped). A file that cannot be loaded is
/// skipped, as the one-process runner does; a run that fails stops the others, since the
/// ranks may no longer agree on what comes next. The tally counts what rank 0 saw (the other
/// ranks count only the files).
pub fn run_files<T: crate::Transport>(
    t: &T,
    files: &[std::path::PathBuf],
    base: &crate::NodeConfig,
    runs: u32,
    jitter_us: u32,
    mut each: impl FnMut(FileRun),
) -> Result<Tally, FilesError> {
    agree(t, files, base, runs)?;
    let mut tally = Tally {
        files: files.len(),
        ..Tally::default()
    };
    let mut first = true;
    for path in files {
        // The files agreed by their bytes, so every rank loads each alike and skips alike.
        let test = match tessera_litmus::load(path) {
            Ok(test) => test,
            Err(e) => {
                if t.rank() == 0 {
                    each(FileRun::Skipped(e.to_string()));
                }
                tally.unreadable.push(path.display().to_string());
                continue;
            }
        };
        // Each thread needs a device of its own. A test with more stopped the whole suite
        // (`run_node`'s configuration error on every rank), leaving the files after it unrun;
        // it is skipped alike on every rank instead, as the one-process runner skips what it
        // cannot run.
        let devices = t.size() * base.devices_per_node;
        if test.threads.len() > devices {
            if t.rank() == 0 {
                each(FileRun::Skipped(format!(
                    "{}: {} has {} threads, more than the {devices} devices of {} processes; \
                     give it more processes or --devices-per-node",
                    path.display(),
                    test.name,
                    test.threads.len(),
                    t.size()
                )));
            }
            tally.unreadable.push(path.display().to_string());
            continue;
        }
        // One run per file on the same ranks (`Transport::barrier`).
        if !first {
            t.barrier();
        }
        first = false;
        let cfg = crate::NodeConfig {
            litmus: Some(std::sync::Arc::new(crate::LitmusJob {
                test: test.clone(),
                runs,
                jitter_us,
                seed: 0x5eed ^ runs as u64,
            })),
            ..base.clone()
        };
        let r = crate::run_node(t, &cfg).map_err(|error| FilesError::Node {
            rank: t.rank(),
            test: test.name.clone(),
            error,
        })?;
        if let Some(l) = &r.litmus {
            each(FileRun::Ran(l.render(
                &test,
                r.nodes,
                base.devices_per_node,
            )));
            tally.ran += 1;
            if tessera_litmus::covers(l.allowed_seen, l.allowed) {
                tally.covered += 1;
            }
            match l.forbidden {
                0 => tally.passed += 1,
                _ => tally.failed.push(test.name.clone()),
            }
        }
    }
    Ok(tally)
}
