//! Before a run the ranks agree that each was given the same run, so that a rank started
//! with other options is named at once instead of found later as a lost node or an
//! inconsistent state.

use std::time::{Duration, Instant};

use crate::transport::Transport;
use crate::NodeError;

/// How long a rank waits for the others' digests before a run: MPI starts its processes one
/// after another, and a rank that never starts is a lost node.
const AGREE_WITHIN: Duration = Duration::from_secs(120);

/// Why the ranks did not agree on their run ([`agree`]).
#[derive(Debug, thiserror::Error)]
pub enum AgreeError {
    /// mpirun's `:` gives each rank its own command line: ranks given other runs disagree on
    /// every message after this. A run of another `--rounds` had waited out `--lost-after` and
    /// then blamed a lost node; another `--block` had been found only as an inconsistent state.
    #[error("rank {rank} was given other options than rank {other}: give every rank the same command line")]
    Disagree { rank: usize, other: usize },
    #[error("rank {rank}: {error}")]
    Node { rank: usize, error: NodeError },
}

/// Every rank sends every other `digest` (what its run is made of) and compares what it gets
/// with its own, then waits at a barrier. Each rank takes exactly one message from every
/// other, so nothing of this is left for the run after it. Equality is transitive, so where
/// any two ranks disagree, rank 0 disagrees with one of them and can say so.
pub fn agree<T: Transport>(t: &T, digest: u64) -> Result<(), AgreeError> {
    let me = t.rank();
    let fail = |error| AgreeError::Node { rank: me, error };
    for to in (0..t.size()).filter(|&r| r != me) {
        t.send(to, digest.to_le_bytes().to_vec()).map_err(fail)?;
    }
    let mut heard = vec![false; t.size()];
    heard[me] = true;
    let start = Instant::now();
    while heard.iter().any(|h| !h) {
        let left = AGREE_WITHIN.saturating_sub(start.elapsed());
        let Some((from, bytes)) = t.recv(left).map_err(fail)? else {
            let node = heard.iter().position(|h| !h).unwrap_or(0);
            return Err(fail(NodeError::Lost {
                node,
                how: format!(
                    "it sent nothing in {} s before the run",
                    AGREE_WITHIN.as_secs()
                ),
            }));
        };
        if let Some(seen) = heard.get_mut(from) {
            *seen = true;
        }
        if bytes[..] != digest.to_le_bytes()[..] {
            let (rank, other) = if from > me { (from, me) } else { (me, from) };
            return Err(AgreeError::Disagree { rank, other });
        }
    }
    t.barrier();
    Ok(())
}
