//! The sequential-consistency oracle, independent of the runtime: every interleaving of the
//! threads' operations that respects program order, run on one flat memory. The set of final
//! states it reaches is exactly what a sequentially consistent machine may produce (Lamport
//! 1979); anything else a run shows is a bug in the memory system.
//!
//! The search is a depth-first walk over states (program counters, registers, memory) with a
//! visited set, so interleavings that reach the same state are explored once. Register-only
//! steps, branches and fences commute with every other thread's steps, so they are taken
//! eagerly right after the preceding memory operation and never branch the search. A
//! read-modify-write is one step, so nothing comes between its read and its write.
//!
//! Spin loops (a lock found taken, a grace period waiting for a reader) need no special
//! case: a retry that finds memory unchanged reaches a state already visited, so the walk
//! ends there; executions in which a thread spins forever end in no final state.

use std::collections::{BTreeSet, HashSet};

use crate::ast::{Addr, Op, Outcome, Test};

/// Why the oracle gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScError {
    #[error(transparent)]
    TooLarge(#[from] TooLarge),
    /// herd7 rejects such a test too; the runner would fail the run.
    #[error("P{thread} dereferences {value}, which points at no shared variable")]
    BadPointer { thread: usize, value: i32 },
    /// An array index or pointer offset computed at run time fell outside its object.
    #[error("P{thread}, line {line}, column {col}: element {index} is out of bounds of an object of {len}")]
    OutOfBounds {
        thread: usize,
        line: u32,
        col: u32,
        index: i32,
        len: usize,
    },
}

/// Distinct states explored before giving up; the shipped tests need at most a few hundred.
pub const MAX_STATES: usize = 4_000_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the test has too many interleavings to enumerate: more than {limit} distinct states")]
pub struct TooLarge {
    pub limit: usize,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    pcs: Vec<usize>,
    regs: Vec<Vec<i32>>,
    mem: Vec<i32>,
}

/// Every final state a sequentially consistent execution of `test` can reach.
pub fn sc_outcomes(test: &Test) -> Result<BTreeSet<Outcome>, ScError> {
    sc_outcomes_limited(test, MAX_STATES)
}

/// As [`sc_outcomes`], exploring at most `limit` distinct states.
pub fn sc_outcomes_limited(test: &Test, limit: usize) -> Result<BTreeSet<Outcome>, ScError> {
    let n = test.threads.len();
    let mut start = State {
        pcs: vec![0; n],
        regs: test.threads.iter().map(|t| t.initial_regs()).collect(),
        mem: test.init.clone(),
    };
    for t in 0..n {
        settle(test, &mut start, t);
    }
    let mut seen = HashSet::new();
    seen.insert(start.clone());
    let mut stack = vec![start];
    let mut out = BTreeSet::new();
    while let Some(s) = stack.pop() {
        let mut finished = true;
        for t in 0..n {
            if s.pcs[t] == test.threads[t].ops.len() {
                continue;
            }
            finished = false;
            let mut next = s.clone();
            step(test, &mut next, t)?;
            settle(test, &mut next, t);
            if !seen.contains(&next) {
                if seen.len() >= limit {
                    return Err(TooLarge { limit }.into());
                }
                seen.insert(next.clone());
                stack.push(next);
            }
        }
        if finished {
            out.insert(Outcome {
                regs: test
                    .threads
                    .iter()
                    .zip(&s.regs)
                    .map(|(t, r)| t.visible_values(r))
                    .collect(),
                mem: s.mem,
            });
        }
    }
    Ok(out)
}

/// Runs thread `t`'s memory operation at its program counter.
fn step(test: &Test, s: &mut State, t: usize) -> Result<(), ScError> {
    let nvars = s.mem.len();
    let regs = &mut s.regs[t];
    let op = &test.threads[t].ops[s.pcs[t]];
    let var = |addr: &Addr, regs: &[i32]| {
        addr.resolve(regs, nvars).ok_or_else(|| match *addr {
            Addr::Elem {
                len, index, pos, ..
            } => ScError::OutOfBounds {
                thread: t,
                line: pos.line,
                col: pos.col,
                index: regs[index],
                len,
            },
            Addr::Reg(r) => ScError::BadPointer {
                thread: t,
                value: regs[r],
            },
            Addr::Var(v) => ScError::BadPointer {
                thread: t,
                value: v as i32,
            },
        })
    };
    match op {
        Op::Load { addr, dst, .. } => {
            let v = var(addr, regs)?;
            regs[*dst] = s.mem[v];
        }
        Op::Store { addr, value, .. } => {
            let v = var(addr, regs)?;
            s.mem[v] = value.eval(regs);
        }
        Op::Rmw { addr, dst, rmw } => {
            let v = var(addr, regs)?;
            let (new, ret) = rmw.apply(s.mem[v], regs);
            if let Some(n) = new {
                s.mem[v] = n;
            }
            regs[*dst] = ret;
        }
        // `settle` has already taken every non-memory step.
        Op::Local { .. } | Op::Fence(_) | Op::Branch { .. } => {}
    }
    s.pcs[t] += 1;
    Ok(())
}

/// Takes thread `t`'s register-only steps, branches and fences up to its next memory
/// operation. Branches go forward except a spin's, which goes back to a memory operation, so
/// this ends.
fn settle(test: &Test, s: &mut State, t: usize) {
    let ops = &test.threads[t].ops;
    while let Some(op) = ops.get(s.pcs[t]) {
        match op {
            Op::Local { dst, value } => {
                let v = value.eval(&s.regs[t]);
                s.regs[t][*dst] = v;
            }
            Op::Branch { cond, target, .. } => {
                if cond.eval(&s.regs[t]) != 0 {
                    s.pcs[t] = (*target).min(ops.len());
                    continue;
                }
            }
            Op::Fence(_) => {}
            Op::Load { .. } | Op::Store { .. } | Op::Rmw { .. } => return,
        }
        s.pcs[t] += 1;
    }
}
