//! Litmus tests across nodes: each thread of a herd7 test runs on a device of its own, threads
//! dealt to nodes round robin (thread t on node `t % nodes`), each shared variable on a page of
//! its own homed round robin too, every memory operation one request, grant and release
//! through the multi-node protocol. Rank 0 gathers each run's outcome and checks it against
//! tessera-litmus's sequential-consistency oracle.

use std::collections::BTreeMap;

use tessera_litmus::ast::{Addr, Op};
use tessera_litmus::{Outcome, Test};

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
