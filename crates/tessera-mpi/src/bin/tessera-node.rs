//! `mpirun -np N tessera-node [options]`: one node of the multi-node memory system per MPI
//! rank (docs/MPI.md). Rank 0 prints the run's report as one JSON line.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tessera_mpi::agree::AgreeError;
use tessera_mpi::litmus::{conclude, run_files, FileRun, FilesError};
use tessera_mpi::mpi_transport::Mpi;
use tessera_mpi::{run_node, NodeConfig, NodeError, Transport};

/// Writes one line to stderr in a single `write` call. Several ranks share mpirun's stderr, and
/// `eprintln!` writes its pieces one call each, so two ranks' lines could interleave mid-line
/// (seen in CI: "rank rank 0: … 2: …"); a line of one write under the pipe's atomic size stays whole.
macro_rules! say {
    ($($arg:tt)*) => {{
        let line = format!("{}\n", format_args!($($arg)*));
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }};
}

#[derive(Parser)]
#[command(about = "one node of tessera's multi-node memory system, one per MPI rank")]
struct Args {
    #[arg(long, default_value_t = 1)]
    devices_per_node: usize,
    #[arg(long, default_value_t = 64)]
    pages: u64,
    /// 32-bit words per page (at most 1024).
    #[arg(long, default_value_t = 64)]
    words: usize,
    #[arg(long, default_value_t = 8)]
    rounds: u32,
    /// Pages dealt to homes in blocks of this many, round robin.
    #[arg(long, default_value_t = 4)]
    block: u64,
    /// Seconds of silence after which a node is lost.
    #[arg(long, default_value_t = 10.0)]
    lost_after: f64,
    /// Testing: this rank aborts (as if killed) after finishing round `--kill-after-round`.
    #[arg(long)]
    kill_rank: Option<usize>,
    #[arg(long, default_value_t = 1)]
    kill_after_round: u32,
    /// Run these herd7 litmus tests instead (threads dealt to ranks round robin); rank 0
    /// prints each test's outcomes and any the SC oracle forbids.
    #[arg(long, num_args = 1..)]
    litmus: Vec<std::path::PathBuf>,
    /// Runs per litmus test.
    #[arg(long, default_value_t = 100)]
    runs: u32,
    /// Random delay before each litmus memory operation, at most this many microseconds.
    #[arg(long, default_value_t = 300)]
    jitter_us: u32,
}

/// A usage error every rank meets alike: rank 0 says it, and every rank waits for that at a
/// barrier before exiting with 2 (mpirun stops the others when one exits, and had killed rank 0
/// before its line, or let every rank print its own).
fn refuse(mpi: &Mpi, what: impl std::fmt::Display) -> ExitCode {
    if mpi.rank() == 0 {
        say!("tessera-node: error: {what}");
    }
    mpi.barrier();
    ExitCode::from(2)
}

/// What an engine run is made of, for the ranks to compare before it (`tessera_mpi::agree::agree`).
fn digest(args: &Args) -> u64 {
    use std::hash::{Hash, Hasher};
    // The standard library's hasher with its fixed keys: every rank runs the same binary.
    let mut h = std::hash::DefaultHasher::new();
    (
        args.devices_per_node,
        args.pages,
        args.words,
        args.rounds,
        args.block,
        args.lost_after.to_bits(),
        args.kill_rank,
        args.kill_after_round,
    )
        .hash(&mut h);
    h.finish()
}

fn main() -> ExitCode {
    let args = Args::parse();
    let Some(mpi) = Mpi::init() else {
        say!("tessera-node: MPI could not be initialized");
        return ExitCode::FAILURE;
    };
    let rank = mpi.rank();
    if !(args.lost_after > 0.0 && args.lost_after.is_finite()) {
        return refuse(&mpi, "--lost-after must be a positive number of seconds");
    }
    // A rank that does not exist would never abort, and the test meant to see one lost would
    // pass having tested nothing.
    if let Some(k) = args.kill_rank.filter(|&k| k >= mpi.size()) {
        return refuse(
            &mpi,
            format!(
                "--kill-rank {k}: there are ranks 0 to {} only",
                mpi.size() - 1
            ),
        );
    }
    let cfg = NodeConfig {
        devices_per_node: args.devices_per_node,
        pages: args.pages,
        words: args.words,
        rounds: args.rounds,
        block_pages: args.block,
        lost_after: Duration::from_secs_f64(args.lost_after),
        stop_after_round: (args.kill_rank == Some(rank)).then_some(args.kill_after_round),
        litmus: None,
        ..NodeConfig::default()
    };
    if !args.litmus.is_empty() {
        return litmus(&mpi, &cfg, &args);
    }
    match tessera_mpi::agree::agree(&mpi, digest(&args)) {
        Ok(()) => {}
        Err(e @ AgreeError::Disagree { .. }) => return refuse(&mpi, e),
        Err(e @ AgreeError::Node { .. }) => {
            say!("tessera-node: {e}");
            return ExitCode::from(3);
        }
    }
    match run_node(&mpi, &cfg) {
        Ok(r) => {
            if rank == 0 {
                let rounds = cfg.rounds.max(1) as u64;
                println!(
                    "{{\"nodes\": {}, \"devices\": {}, \"pages\": {}, \"words\": {}, \"rounds\": {}, \"checksum\": \"{:016x}\", \"reference_checksum\": \"{:016x}\", \"mismatched_pages\": {}, \"inter_node_bytes_per_round\": {}, \"inter_node_page_bytes_per_round\": {}}}",
                    r.nodes,
                    r.devices,
                    cfg.pages,
                    cfg.words,
                    cfg.rounds,
                    r.checksum,
                    r.reference_checksum,
                    r.mismatches,
                    r.inter_node_bytes / rounds,
                    r.inter_node_page_bytes / rounds
                );
                if r.mismatches > 0 || r.checksum != r.reference_checksum {
                    say!("tessera-node: the result differs from the sequential reference");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        // The ranks agreed on their options, so each meets the same refusal before the run.
        Err(NodeError::Config(e)) => refuse(&mpi, e),
        Err(NodeError::Stopped { node, round }) => {
            say!("tessera-node: rank {node} aborts after round {round}, as asked (--kill-rank)");
            std::process::abort();
        }
        Err(e) => {
            say!("tessera-node: rank {rank}: error: {e}");
            // Not MPI_Abort: that would take the other ranks down before they say what they saw.
            std::process::exit(3);
        }
    }
}

/// Each litmus file in turn, one cluster run per file (`litmus::run_files`); the exit status is
/// non-zero when a test shows an outcome SC forbids or a file cannot be run.
fn litmus(mpi: &Mpi, cfg: &NodeConfig, args: &Args) -> ExitCode {
    let rank = mpi.rank();
    let res = run_files(
        mpi,
        &args.litmus,
        cfg,
        args.runs,
        args.jitter_us,
        |file| match file {
            FileRun::Ran(report) => print!("{report}"),
            FileRun::Skipped(e) => say!("tessera-node: {e}"),
        },
    );
    match res {
        Ok(tally) => {
            if rank == 0 {
                println!("{}", tally.summary());
            }
            match conclude(mpi, &tally, |p| say!("tessera-node: {p}")) {
                None => ExitCode::SUCCESS,
                Some(_) => ExitCode::FAILURE,
            }
        }
        Err(e @ (FilesError::Node { .. } | FilesError::Agreement { .. })) => {
            say!("tessera-node: {e}");
            ExitCode::from(3)
        }
        Err(e @ FilesError::Disagree { .. }) => refuse(mpi, e),
    }
}
