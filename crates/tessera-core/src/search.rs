//! The breadth-first search both model checkers run ([`crate::model`] over one protocol,
//! [`crate::model_nodes`] over one protocol per node). A world says what its states and steps
//! are and which properties a state must keep; the search visits every reachable state once,
//! checks the progress measure on every step, and reports the first violation with a shortest
//! trace (the parents form a BFS tree).

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, Hash};

/// The property a step breaks when the progress measure does not fall.
pub(crate) const ACYCLIC: &str = "state graph acyclic";

/// A broken property and the shortest run that breaks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The property's name (the model checkers' `property` constants).
    pub property: &'static str,
    /// The steps from the initial state, one line each; the last line says what was wrong.
    pub trace: Vec<String>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "property violated: {}", self.property)?;
        for (i, line) in self.trace.iter().enumerate() {
            writeln!(f, "  {i:3}. {line}")?;
        }
        Ok(())
    }
}

/// What one exhaustive run saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckReport {
    /// Distinct reachable states visited.
    pub states: u64,
    /// Steps explored (edges of the state graph).
    pub transitions: u64,
    /// States with no step enabled.
    pub terminal: u64,
    /// Frees the protocol refused, as it must, because a page was locked or deferred: offered
    /// steps that changed nothing, so neither transitions nor states.
    pub refused_frees: u64,
    /// Evictions the protocol refused, as it must, because the device was inside its procedure
    /// (`EvictWhileLocked`, or with staging `EvictHeld`); counted like refused frees.
    pub refused_evictions: u64,
    /// Stages the protocol refused because they would have had to wait (`StageWouldWait`);
    /// counted like refused frees.
    pub refused_stages: u64,
    /// Length of the longest shortest path from the initial state (as far as explored).
    pub depth: u32,
    /// The first violation found; exploration stops there.
    pub violation: Option<Violation>,
}

impl fmt::Display for CheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states, {} transitions, {} terminal, {} refused frees, {} refused evictions, \
             {} refused stages, depth {}: ",
            self.states,
            self.transitions,
            self.terminal,
            self.refused_frees,
            self.refused_evictions,
            self.refused_stages,
            self.depth
        )?;
        match &self.violation {
            None => write!(f, "every property holds"),
            Some(v) => write!(f, "{v}"),
        }
    }
}

/// A property a state or a step broke.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) property: &'static str,
    pub(crate) detail: String,
}

pub(crate) fn fail(property: &'static str, detail: String) -> Failure {
    Failure { property, detail }
}

/// What a step offered in a state did.
pub(crate) enum Applied {
    Done,
    /// The protocol refused the step, as it must, changing nothing; counted by kind, neither a
    /// transition nor a state.
    Refused(Refusal),
}

pub(crate) enum Refusal {
    Free,
    Evict,
    Stage,
}

/// A world to explore.
pub(crate) trait World {
    type State: Clone;
    type Step: Copy;
    /// The state's canonical form: two states with one key are one state.
    type Key: Eq + Hash;
    type Hasher: BuildHasher + Default;

    fn initial(&self) -> Result<Self::State, Failure>;
    fn enabled(&self, s: &Self::State, out: &mut Vec<Self::Step>);
    fn apply(&self, s: &mut Self::State, step: Self::Step) -> Result<Applied, Failure>;
    /// What every reachable state keeps.
    fn invariants(&self, s: &Self::State) -> Result<(), Failure>;
    /// What a state with no step left keeps.
    fn quiescent(&self, s: &Self::State) -> Result<(), Failure>;
    /// Falls on every step, so the state graph has no cycle.
    fn measure(&self, s: &Self::State) -> u32;
    fn key(&self, s: &Self::State) -> Self::Key;
    /// The trace of a violation: `path` from the initial state, its last step the one that
    /// failed when the failure is a step's.
    fn trace(&self, path: &[Self::Step], f: &Failure) -> Vec<String>;
}

/// Visits every state reachable in `world` and checks it.
pub(crate) fn search<W: World>(world: &W) -> CheckReport {
    let mut report = CheckReport {
        states: 0,
        transitions: 0,
        terminal: 0,
        refused_frees: 0,
        refused_evictions: 0,
        refused_stages: 0,
        depth: 0,
        violation: None,
    };
    // Per state, numbered in order of discovery: the state it was first reached from and the
    // step (none for the initial state).
    let mut parents: Vec<(u32, Option<W::Step>)> = Vec::new();
    let violation = |parents: &[(u32, Option<W::Step>)], id: u32, extra, f: Failure| {
        let mut path = Vec::new();
        let mut at = id;
        while let (parent, Some(step)) = parents[at as usize] {
            path.push(step);
            at = parent;
        }
        path.reverse();
        path.extend(extra);
        Violation {
            property: f.property,
            trace: world.trace(&path, &f),
        }
    };
    let init = match world.initial() {
        Ok(s) => s,
        Err(f) => {
            report.violation = Some(Violation {
                property: f.property,
                trace: world.trace(&[], &f),
            });
            return report;
        }
    };
    let mut visited: HashSet<W::Key, W::Hasher> = HashSet::default();
    visited.insert(world.key(&init));
    parents.push((0, None));
    report.states = 1;
    if let Err(f) = world.invariants(&init) {
        report.violation = Some(violation(&parents, 0, None, f));
        return report;
    }
    let mut queue = VecDeque::from([(0u32, 0u32, init)]);
    let mut steps = Vec::new();
    while let Some((id, depth, s)) = queue.pop_front() {
        report.depth = report.depth.max(depth);
        steps.clear();
        world.enabled(&s, &mut steps);
        let measure = world.measure(&s);
        let mut moved = false;
        for &step in &steps {
            let mut t = s.clone();
            match world.apply(&mut t, step) {
                Err(f) => {
                    report.violation = Some(violation(&parents, id, Some(step), f));
                    return report;
                }
                Ok(Applied::Refused(r)) => {
                    match r {
                        Refusal::Free => report.refused_frees += 1,
                        Refusal::Evict => report.refused_evictions += 1,
                        Refusal::Stage => report.refused_stages += 1,
                    }
                    continue;
                }
                Ok(Applied::Done) => {}
            }
            moved = true;
            report.transitions += 1;
            let after = world.measure(&t);
            if after >= measure {
                let f = fail(
                    ACYCLIC,
                    format!("the progress measure went from {measure} to {after}"),
                );
                report.violation = Some(violation(&parents, id, Some(step), f));
                return report;
            }
            if !visited.insert(world.key(&t)) {
                continue;
            }
            let next = parents.len() as u32;
            parents.push((id, Some(step)));
            report.states += 1;
            if let Err(f) = world.invariants(&t) {
                report.violation = Some(violation(&parents, next, None, f));
                return report;
            }
            queue.push_back((next, depth + 1, t));
        }
        if !moved {
            report.terminal += 1;
            if let Err(f) = world.quiescent(&s) {
                report.violation = Some(violation(&parents, id, None, f));
                return report;
            }
        }
    }
    report
}
