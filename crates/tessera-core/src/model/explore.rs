//! The world the shared search explores ([`crate::search`]): the model's state, its steps and
//! its compact key.

use super::*;
use crate::search::{self, Refusal, World};

pub(super) struct ModelWorld<'a, const W: usize> {
    pub(super) cfg: &'a ModelConfig,
    pub(super) layout: Layout,
    pub(super) batches: Vec<Batch>,
}

impl<'a, const W: usize> ModelWorld<'a, W> {
    pub(super) fn new(cfg: &'a ModelConfig) -> Self {
        ModelWorld {
            cfg,
            layout: Layout::new(cfg),
            batches: Batch::all(cfg.pages as usize),
        }
    }
}

impl<const W: usize> World for ModelWorld<'_, W> {
    type State = State;
    type Step = Step;
    type Key = Key<W>;
    type Hasher = BuildHasherDefault<WordHasher>;

    fn initial(&self) -> Result<State, Failure> {
        Ok(State::initial(self.cfg))
    }
    fn enabled(&self, s: &State, out: &mut Vec<Step>) {
        s.enabled(self.cfg, &self.batches, out)
    }
    fn apply(&self, s: &mut State, step: Step) -> Result<search::Applied, Failure> {
        Ok(match s.apply(self.cfg, step, None)? {
            Applied::Done => search::Applied::Done,
            Applied::Refused => search::Applied::Refused(match step {
                Step::Evict { .. } => Refusal::Evict,
                Step::Stage { .. } => Refusal::Stage,
                _ => Refusal::Free,
            }),
        })
    }
    fn invariants(&self, s: &State) -> Result<(), Failure> {
        s.invariants(self.cfg)
    }
    fn quiescent(&self, s: &State) -> Result<(), Failure> {
        s.quiescent(self.cfg)
    }
    fn measure(&self, s: &State) -> u32 {
        s.measure(self.cfg)
    }
    fn key(&self, s: &State) -> Key<W> {
        s.key(&self.layout)
    }
    /// Replays the path with logging on, so the trace shows every action and value.
    fn trace(&self, path: &[Step], f: &Failure) -> Vec<String> {
        let mut trace = Vec::new();
        let mut s = State::initial(self.cfg);
        for &step in path {
            // The last step may fail again here, by design: it is the one being reported.
            let _ = s.apply(self.cfg, step, Some(&mut trace));
        }
        trace.push(format!("VIOLATED {}: {}", f.property, f.detail));
        trace
    }
}
