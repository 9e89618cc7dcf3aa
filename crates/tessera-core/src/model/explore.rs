//! Breadth-first exploration.

use super::*;

pub(super) struct Explorer<'a, const W: usize> {
    pub(super) cfg: &'a ModelConfig,
    pub(super) layout: Layout,
    pub(super) batches: Vec<Batch>,
    pub(super) visited: HashSet<Key<W>, BuildHasherDefault<WordHasher>>,
    /// Per state, numbered in order of discovery: the state it was first reached from and the
    /// step. A BFS tree, so the path back to the root is a shortest trace.
    pub(super) parents: Vec<(u32, Step)>,
}

impl<'a, const W: usize> Explorer<'a, W> {
    pub(super) fn new(cfg: &'a ModelConfig) -> Self {
        Explorer {
            cfg,
            layout: Layout::new(cfg),
            batches: Batch::all(cfg.pages as usize),
            visited: HashSet::default(),
            parents: Vec::new(),
        }
    }

    pub(super) fn run(mut self) -> CheckReport {
        let cfg = self.cfg;
        let init = State::initial(cfg);
        let mut report = CheckReport {
            states: 1,
            transitions: 0,
            terminal: 0,
            refused_frees: 0,
            refused_evictions: 0,
            refused_stages: 0,
            depth: 0,
            violation: None,
        };
        self.visited.insert(init.key(&self.layout));
        // The root's entry is never read: `violation` stops walking at state 0.
        self.parents.push((u32::MAX, Step::Release { device: 0 }));
        if let Err(f) = init.invariants(cfg) {
            report.violation = Some(self.violation(0, None, f));
            return report;
        }
        let mut queue = VecDeque::from([(0u32, 0u32, init)]);
        let mut steps = Vec::new();
        while let Some((id, depth, s)) = queue.pop_front() {
            report.depth = report.depth.max(depth);
            steps.clear();
            s.enabled(cfg, &self.batches, &mut steps);
            let measure = s.measure(cfg);
            let mut moved = false;
            for &step in &steps {
                let mut t = s.clone();
                match t.apply(cfg, step, None) {
                    Err(f) => {
                        report.violation = Some(self.violation(id, Some(step), f));
                        return report;
                    }
                    Ok(Applied::Refused) => {
                        match step {
                            Step::Evict { .. } => report.refused_evictions += 1,
                            Step::Stage { .. } => report.refused_stages += 1,
                            _ => report.refused_frees += 1,
                        }
                        continue;
                    }
                    Ok(Applied::Done) => {}
                }
                moved = true;
                report.transitions += 1;
                let after = t.measure(cfg);
                if after >= measure {
                    let f = fail(
                        property::ACYCLIC,
                        format!("the progress measure went from {measure} to {after}"),
                    );
                    report.violation = Some(self.violation(id, Some(step), f));
                    return report;
                }
                if !self.visited.insert(t.key(&self.layout)) {
                    continue;
                }
                let next = self.parents.len() as u32;
                self.parents.push((id, step));
                report.states += 1;
                if let Err(f) = t.invariants(cfg) {
                    report.violation = Some(self.violation(next, None, f));
                    return report;
                }
                queue.push_back((next, depth + 1, t));
            }
            if !moved {
                report.terminal += 1;
                if let Err(f) = s.quiescent(cfg) {
                    report.violation = Some(self.violation(id, None, f));
                    return report;
                }
            }
        }
        report
    }

    /// Replays the path to state `id` (then `extra`, the step that failed) with logging on.
    pub(super) fn violation(&self, id: u32, extra: Option<Step>, f: Failure) -> Violation {
        let mut path = Vec::new();
        let mut at = id;
        while at != 0 {
            let (parent, step) = self.parents[at as usize];
            path.push(step);
            at = parent;
        }
        path.reverse();
        path.extend(extra);
        let mut trace = Vec::new();
        let mut s = State::initial(self.cfg);
        for step in path {
            // The last step may fail again here, by design: it is the one being reported.
            let _ = s.apply(self.cfg, step, Some(&mut trace));
        }
        trace.push(format!("VIOLATED {}: {}", f.property, f.detail));
        Violation {
            property: f.property,
            trace,
        }
    }
}
