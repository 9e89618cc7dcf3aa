//! The sequential-consistency oracle, independent of the runtime: every interleaving of the
//! threads' operations that respects program order, run on one flat memory. The set of final
//! states it reaches is exactly what a sequentially consistent machine may produce (Lamport
//! 1979); anything else a run shows is a bug in the memory system.
//!
//! The search is a depth-first walk over states (program counters, registers, memory) with a
//! visited set, so interleavings that reach the same state are explored once. Register-only
//! steps and fences commute with every other thread's steps, so they are taken eagerly right
//! after the preceding memory operation and never branch.

use std::collections::{BTreeSet, HashSet};

use crate::ast::{Op, Outcome, Test};

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
pub fn sc_outcomes(test: &Test) -> Result<BTreeSet<Outcome>, TooLarge> {
    sc_outcomes_limited(test, MAX_STATES)
}

/// As [`sc_outcomes`], exploring at most `limit` distinct states.
pub fn sc_outcomes_limited(test: &Test, limit: usize) -> Result<BTreeSet<Outcome>, TooLarge> {
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
            step(test, &mut next, t);
            settle(test, &mut next, t);
            if !seen.contains(&next) {
                if seen.len() >= limit {
                    return Err(TooLarge { limit });
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
fn step(test: &Test, s: &mut State, t: usize) {
    let regs = &mut s.regs[t];
    match &test.threads[t].ops[s.pcs[t]] {
        Op::Load { var, dst, .. } => regs[*dst] = s.mem[*var],
        Op::Store { var, value, .. } => s.mem[*var] = value.eval(regs),
        // `settle` has already taken every non-memory step.
        Op::Local { .. } | Op::Fence(_) => {}
    }
    s.pcs[t] += 1;
}

/// Takes thread `t`'s register-only steps and fences up to its next memory operation.
fn settle(test: &Test, s: &mut State, t: usize) {
    let ops = &test.threads[t].ops;
    while let Some(op) = ops.get(s.pcs[t]) {
        match op {
            Op::Local { dst, value } => {
                let v = value.eval(&s.regs[t]);
                s.regs[t][*dst] = v;
            }
            Op::Fence(_) => {}
            Op::Load { .. } | Op::Store { .. } => return,
        }
        s.pcs[t] += 1;
    }
}
