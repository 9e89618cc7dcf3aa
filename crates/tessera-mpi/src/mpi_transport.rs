//! The MPI transport (feature `mpi`): rsmpi over the system's MPI library, one rank per node,
//! `MPI_COMM_WORLD`. Each message is one byte vector sent with a *buffered* send (`MPI_Bsend`
//! into a buffer attached at start): a standard send of a message above the library's eager
//! limit (4 KiB pages in Open MPI's shared memory) waits until the receiver posts a matching
//! receive, and two nodes each sending a page to the other then wait forever, neither
//! probing. A buffered send copies the message and returns, so a node's event loop never
//! blocks on another node (docs/PROTOCOL.md, "Several nodes").

use std::time::{Duration, Instant};

use mpi::collective::CommunicatorCollectives;
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::transport::Transport;
use crate::NodeError;

/// Room for the messages a node has sent and its peers not yet received. A node has at most a
/// few messages in flight per device and home (a part, a command, a release), each at most a
/// page of 1024 words plus a header; this is thousands of times that.
const SEND_BUFFER_BYTES: usize = 64 << 20;

pub struct Mpi {
    // Finalizes MPI when dropped, after the world below.
    _universe: Universe,
    world: SimpleCommunicator,
}

impl Mpi {
    /// Initializes MPI; `None` when it was initialized already.
    pub fn init() -> Option<Mpi> {
        let mut universe = mpi::initialize()?;
        universe.set_buffer_size(SEND_BUFFER_BYTES);
        let world = universe.world();
        Some(Mpi {
            _universe: universe,
            world,
        })
    }
}

impl Transport for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn send(&self, to: usize, bytes: Vec<u8>) -> Result<(), NodeError> {
        if to >= self.size() {
            return Err(NodeError::NoSuchNode(to));
        }
        self.world
            .process_at_rank(to as i32)
            .buffered_send(&bytes[..]);
        Ok(())
    }
    fn recv(&self, timeout: Duration) -> Result<Option<(usize, Vec<u8>)>, NodeError> {
        // MPI has no receive with a timeout: probe without blocking until one arrives.
        let start = Instant::now();
        loop {
            if let Some(probed) = self.world.any_process().immediate_matched_probe() {
                let (bytes, status) = probed.matched_receive_vec::<u8>();
                return Ok(Some((status.source_rank() as usize, bytes)));
            }
            if start.elapsed() >= timeout {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    fn barrier(&self) {
        self.world.barrier();
    }
}
