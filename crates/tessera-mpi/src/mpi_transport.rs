//! The MPI transport (feature `mpi`): rsmpi over the system's MPI library, one rank per node,
//! `MPI_COMM_WORLD`. Each message is one byte vector sent with a standard blocking send; the
//! engine's messages are small (a page is at most a few KiB), which MPI libraries deliver
//! eagerly, so a send does not wait for the receiver to post a receive.

use std::time::{Duration, Instant};

use mpi::environment::Universe;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::topology::{Communicator, SimpleCommunicator};

use crate::transport::Transport;
use crate::NodeError;

pub struct Mpi {
    // Finalizes MPI when dropped, after the world below.
    _universe: Universe,
    world: SimpleCommunicator,
}

impl Mpi {
    /// Initializes MPI; `None` when it was initialized already.
    pub fn init() -> Option<Mpi> {
        let universe = mpi::initialize()?;
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
        self.world.process_at_rank(to as i32).send(&bytes[..]);
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
}
