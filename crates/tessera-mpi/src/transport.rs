//! How nodes reach each other: a [`Transport`] moves opaque byte messages between ranks. The
//! engine ([`crate::node`]) is written against it alone, so the same code runs with nodes as
//! threads of one process ([`InProcess`], the tests) or as MPI processes
//! (`crate::mpi_transport::Mpi`, feature `mpi`).

use std::sync::{Arc, Barrier};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::NodeError;

/// Point-to-point messages between `size` ranks. Messages from one rank to another arrive in
/// the order sent (MPI's non-overtaking rule); messages from different ranks interleave in any
/// order.
pub trait Transport {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Sends without waiting for the receiver to take the message.
    fn send(&self, to: usize, bytes: Vec<u8>) -> Result<(), NodeError>;
    /// The next message from any rank, waiting at most `timeout`; `None` when none came.
    fn recv(&self, timeout: Duration) -> Result<Option<(usize, Vec<u8>)>, NodeError>;
    /// Returns once every rank has called it. Runs on the same ranks one after another need
    /// it between them: messages carry no run, so a rank still finishing one run would take
    /// a faster rank's first messages of the next (its `Done` of round 0, say) as its own, and
    /// the next run would wait for them forever.
    fn barrier(&self);
}

/// Nodes as threads of one process: crossbeam channels, one inbox per rank.
pub struct InProcess {
    rank: usize,
    inbox: Receiver<(usize, Vec<u8>)>,
    peers: Vec<Sender<(usize, Vec<u8>)>>,
    barrier: Arc<Barrier>,
}

impl InProcess {
    /// One endpoint per rank, to be moved to each node's thread.
    pub fn cluster(size: usize) -> Vec<InProcess> {
        let (txs, rxs): (Vec<_>, Vec<_>) =
            (0..size).map(|_| crossbeam_channel::unbounded()).unzip();
        let barrier = Arc::new(Barrier::new(size));
        rxs.into_iter()
            .enumerate()
            .map(|(rank, inbox)| InProcess {
                rank,
                inbox,
                peers: txs.clone(),
                barrier: barrier.clone(),
            })
            .collect()
    }
}

impl Transport for InProcess {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.peers.len()
    }
    fn send(&self, to: usize, bytes: Vec<u8>) -> Result<(), NodeError> {
        let peer = self.peers.get(to).ok_or(NodeError::NoSuchNode(to))?;
        // A node whose thread ended dropped its inbox: that is a lost node.
        peer.send((self.rank, bytes)).map_err(|_| NodeError::Lost {
            node: to,
            how: "its inbox is closed".into(),
        })
    }
    fn recv(&self, timeout: Duration) -> Result<Option<(usize, Vec<u8>)>, NodeError> {
        match self.inbox.recv_timeout(timeout) {
            Ok(m) => Ok(Some(m)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            // Unreachable while this endpoint holds a sender to itself.
            Err(RecvTimeoutError::Disconnected) => Ok(None),
        }
    }
    fn barrier(&self) {
        self.barrier.wait();
    }
}

/// Any of these transports as the runtime's (`tessera_runtime::cluster`): the runtime cannot
/// depend on this crate (the litmus runner, which this crate uses, depends on the runtime), so
/// it names its own trait and this adapter carries a transport across.
pub struct ForRuntime<T>(pub T);

impl<T: Transport> tessera_runtime::cluster::Transport for ForRuntime<T> {
    fn rank(&self) -> usize {
        self.0.rank()
    }
    fn size(&self) -> usize {
        self.0.size()
    }
    fn send(
        &self,
        to: usize,
        bytes: Vec<u8>,
    ) -> Result<(), tessera_runtime::cluster::TransportError> {
        self.0.send(to, bytes).map_err(runtime_error)
    }
    fn recv(
        &self,
        timeout: Duration,
    ) -> Result<Option<(usize, Vec<u8>)>, tessera_runtime::cluster::TransportError> {
        self.0.recv(timeout).map_err(runtime_error)
    }
}

fn runtime_error(e: NodeError) -> tessera_runtime::cluster::TransportError {
    tessera_runtime::cluster::TransportError {
        node: match &e {
            NodeError::Lost { node, .. } | NodeError::NoSuchNode(node) => Some(*node),
            _ => None,
        },
        how: match e {
            NodeError::Lost { how, .. } => how,
            other => other.to_string(),
        },
    }
}
