//! tessera across nodes (the journal paper, 5.4.2–5.4.3).
//!
//! One process per node. Each node is the home of part of the pages (`HomeMap::Blocked`) and
//! runs the real coherence protocol (`tessera_core::Protocol`) for them; its devices' page
//! copies live on the node. A device's request batch is split by home and acquired in node
//! order (`tessera_core::nodes`, model-checked in `tessera_core::model_nodes`). Protocol
//! messages and page data travel as postcard-encoded messages over a [`Transport`]: MPI
//! point-to-point sends under the `mpi` feature, channels between threads otherwise.
//!
//! What this crate holds: [`node::run_node`] is the multi-node memory system with a synthetic
//! workload (rounds of race-free read/write batches over word pages, checked against a
//! sequential reference) and the litmus runner across processes; [`ForRuntime`] carries the
//! runtime's own cluster (`tessera run boiling --devices-per-node K` under mpirun, one node
//! of the runtime per process; docs/MPI.md).

pub mod agree;
pub mod litmus;
pub mod node;
pub mod transport;
mod wire;
pub mod workload;

#[cfg(feature = "mpi")]
pub mod mpi_transport;

pub use litmus::LitmusReport;
pub use node::{run_node, LitmusJob, NodeConfig, NodeReport};
pub use transport::{ForRuntime, InProcess, Transport};

/// Why a node stopped.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("node {node} was lost ({how}); with homes split and no replication its pages are gone, and the run cannot finish")]
    Lost { node: usize, how: String },
    #[error("node {0} does not exist")]
    NoSuchNode(usize),
    #[error("a message from node {from} could not be decoded: {why}")]
    Decode { from: usize, why: String },
    #[error("protocol refused a message at node {node}: {why}")]
    Protocol { node: usize, why: String },
    #[error("node {node} stopped after round {round}, as asked")]
    Stopped { node: usize, round: u32 },
    #[error("bad configuration: {0}")]
    Config(String),
    #[error("inconsistent state at node {node}: {why}")]
    Broken { node: usize, why: String },
}
