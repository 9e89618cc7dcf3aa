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
    #[error("P{thread}, line {line}, column {col}: dereferences {value}, which is no shared variable's address")]
    BadPointer {
        thread: usize,
        line: u32,
        col: u32,
        value: i32,
    },
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

/// The visited set's memory before giving up, whatever the state count: a wide test (eight
/// threads of four operations) reached 3 GiB of states as separate vectors before the count
/// stopped it.
pub const MAX_STATE_BYTES: usize = 512 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the test has too many interleavings to enumerate: more than {limit} distinct states, the most the oracle keeps for it (at most {MAX_STATES} states, fewer where the test's states are so large that more would take over {} MiB)", MAX_STATE_BYTES >> 20)]
pub struct TooLarge {
    pub limit: usize,
}

/// A state as one flat array, so the visited set holds one allocation a state: each
/// thread's program counter, then each thread's registers, then memory.
type State = Box<[i32]>;

/// Where a state's parts lie in its array.
struct Layout {
    threads: usize,
    /// Thread `t`'s registers are `regs[t]..regs[t + 1]`; memory starts at `regs[threads]`.
    regs: Vec<usize>,
}

impl Layout {
    fn pc(&self, s: &[i32], t: usize) -> usize {
        s[t] as usize
    }

    /// Thread `t`'s registers and memory, apart.
    fn split<'s>(&self, s: &'s mut [i32], t: usize) -> (&'s mut [i32], &'s mut [i32]) {
        let (head, mem) = s.split_at_mut(self.regs[self.threads]);
        (&mut head[self.regs[t]..self.regs[t + 1]], mem)
    }

    fn regs<'s>(&self, s: &'s [i32], t: usize) -> &'s [i32] {
        &s[self.regs[t]..self.regs[t + 1]]
    }

    fn mem<'s>(&self, s: &'s [i32]) -> &'s [i32] {
        &s[self.regs[self.threads]..]
    }
}

/// Every final state a sequentially consistent execution of `test` can reach.
pub fn sc_outcomes(test: &Test) -> Result<BTreeSet<Outcome>, ScError> {
    sc_outcomes_limited(test, MAX_STATES)
}

/// As [`sc_outcomes`], exploring at most `limit` distinct states (fewer where that many
/// would not fit [`MAX_STATE_BYTES`]).
pub fn sc_outcomes_limited(test: &Test, limit: usize) -> Result<BTreeSet<Outcome>, ScError> {
    sc_outcomes_within(test, limit, MAX_STATE_BYTES)
}

/// As [`sc_outcomes`], exploring at most `limit` distinct states and at most as many as
/// `bytes` holds.
pub fn sc_outcomes_within(
    test: &Test,
    limit: usize,
    bytes: usize,
) -> Result<BTreeSet<Outcome>, ScError> {
    let n = test.threads.len();
    let mut regs = vec![n];
    let mut words: Vec<i32> = vec![0; n];
    for t in &test.threads {
        words.extend(t.initial_regs());
        regs.push(words.len());
    }
    words.extend(&test.init);
    let layout = Layout { threads: n, regs };
    // A state's array, its box and the set's slot: a bound, not a measurement of the
    // allocator.
    let per_state = words.len() * 4 + 2 * std::mem::size_of::<State>() + 16;
    let limit = limit.min(bytes / per_state);
    let mut start: State = words.into_boxed_slice();
    for t in 0..n {
        settle(test, &layout, &mut start, t);
    }
    let mut seen = HashSet::new();
    seen.insert(start.clone());
    let mut stack = vec![start];
    let mut out = BTreeSet::new();
    while let Some(s) = stack.pop() {
        let mut finished = true;
        for t in 0..n {
            if layout.pc(&s, t) == test.threads[t].ops.len() {
                continue;
            }
            finished = false;
            let mut next = s.clone();
            step(test, &layout, &mut next, t)?;
            settle(test, &layout, &mut next, t);
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
                    .enumerate()
                    .map(|(t, th)| th.visible_values(layout.regs(&s, t)))
                    .collect(),
                mem: layout.mem(&s).to_vec(),
            });
        }
    }
    Ok(out)
}

/// Runs thread `t`'s memory operation at its program counter.
fn step(test: &Test, layout: &Layout, s: &mut [i32], t: usize) -> Result<(), ScError> {
    let op = &test.threads[t].ops[layout.pc(s, t)];
    let (regs, mem) = layout.split(s, t);
    let nvars = mem.len();
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
            Addr::Reg { reg, pos } => ScError::BadPointer {
                thread: t,
                line: pos.line,
                col: pos.col,
                value: regs[reg],
            },
            // A variable named in the source always resolves.
            Addr::Var(v) => ScError::BadPointer {
                thread: t,
                line: 0,
                col: 0,
                value: v as i32,
            },
        })
    };
    match op {
        Op::Load { addr, dst, .. } => {
            let v = var(addr, regs)?;
            regs[*dst] = mem[v];
        }
        Op::Store { addr, value, .. } => {
            let v = var(addr, regs)?;
            mem[v] = value.eval(regs);
        }
        Op::Rmw { addr, dst, rmw } => {
            let v = var(addr, regs)?;
            let (new, ret) = rmw.apply(mem[v], regs);
            if let Some(n) = new {
                mem[v] = n;
            }
            regs[*dst] = ret;
        }
        // `settle` has already taken every non-memory step.
        Op::Local { .. } | Op::Fence(_) | Op::Branch { .. } => {}
    }
    s[t] += 1;
    Ok(())
}

/// Takes thread `t`'s register-only steps, branches and fences up to its next memory
/// operation. Branches go forward except a spin's, which goes back to a memory operation, so
/// this ends.
fn settle(test: &Test, layout: &Layout, s: &mut [i32], t: usize) {
    let ops = &test.threads[t].ops;
    while let Some(op) = ops.get(layout.pc(s, t)) {
        match op {
            Op::Local { dst, value } => {
                let (regs, _) = layout.split(s, t);
                regs[*dst] = value.eval(regs);
            }
            Op::Branch { cond, target, .. } => {
                if cond.eval(layout.regs(s, t)) != 0 {
                    s[t] = (*target).min(ops.len()) as i32;
                    continue;
                }
            }
            Op::Fence(_) => {}
            Op::Load { .. } | Op::Store { .. } | Op::Rmw { .. } => return,
        }
        s[t] += 1;
    }
}
