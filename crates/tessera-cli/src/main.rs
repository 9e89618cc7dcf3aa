//! `tessera`: run workloads on a distributed, demand-paged texture memory.

mod backend;
mod bench;
mod litmus;
mod measure;
mod plot;
mod report;
mod residency;
mod run;
mod sweep;
mod topology_args;
mod unpaged_gpu;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use tessera_runtime::{Partition, Procedure};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "One shared, demand-paged texture memory across devices"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workload and write a report.
    Run {
        #[arg(value_enum)]
        workload: Workload,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Benchmarks that print ratios measured side by side in one run.
    Bench {
        #[arg(value_enum)]
        which: BenchKind,
        #[command(flatten)]
        opts: BenchOpts,
    },
    /// Many runs, one CSV and the paper's evaluation figures as plots.
    Sweep {
        #[command(subcommand)]
        which: sweep::SweepKind,
    },
    /// Run litmus tests (herd7 C format) and check every outcome against sequential consistency.
    Litmus(litmus::LitmusOpts),
    /// List the GPU adapters the wgpu backend can run on.
    Devices,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Workload {
    /// The boiling simulation of paper 4.1.1.
    Boiling,
}

#[derive(Clone, Copy, ValueEnum)]
enum BenchKind {
    /// Boiling on one device, paged vs unpaged: the cost of paging.
    Overhead,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendKind {
    /// Software devices on the CPU: needs nothing installed.
    Cpu,
    /// GPUs through wgpu (Vulkan, Metal, DX12; lavapipe on a machine without one). Every
    /// device is its own wgpu device; several on one adapter emulate a multi-GPU machine.
    /// `TESSERA_ADAPTER=<name part>` picks the adapter (see `tessera devices`).
    Wgpu,
}

impl BackendKind {
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Wgpu => "wgpu",
        }
    }
}

/// The largest field side accepted: five textures of 8192² floats already take 1.3 GiB.
pub const MAX_SIZE: u32 = 8192;

/// What the node runs on, shared by `run` and `sweep`.
#[derive(Args, Clone)]
pub struct NodeOpts {
    /// Device backend.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendKind,
    /// CPU threads for the software devices (0: one per core).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Per-device memory budget in MiB.
    #[arg(long, default_value_t = 4096)]
    budget_mib: u64,
    /// Interconnect for the modeled time: a preset (pcie1-x16, pcie3-x16, pcie4-x16,
    /// pcie5-x16, nvlink) or a TOML file (docs/EVALUATION.md).
    #[arg(long, default_value = "pcie3-x16")]
    topology: String,
}

#[derive(Args, Clone)]
pub struct RunOpts {
    /// Number of devices.
    #[arg(long, default_value_t = 2)]
    devices: usize,
    /// Field side in texels (the field is size × size).
    #[arg(long, default_value_t = 512)]
    size: u32,
    /// Page side P in texels: a power of two from 1 to 512.
    #[arg(long, default_value_t = 64)]
    page: u32,
    /// Frames to simulate.
    #[arg(long, default_value_t = 20)]
    frames: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure)]
    procedure: Procedure,
    /// How each pass's domain is split across devices.
    #[arg(long, default_value = "rows", value_parser = parse_partition)]
    partition: Partition,
    /// Output directory for report.json and frame.png.
    #[arg(long, default_value = "out")]
    out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
    /// Frames run before the measured ones; the report counts none of them.
    #[arg(long, default_value_t = 0)]
    warmup: u32,
    /// Also write residency-<texture>.png: where each page lives at the end of the run.
    #[arg(long)]
    residency_png: bool,
}

#[derive(Args, Clone)]
pub struct BenchOpts {
    /// Field side in texels.
    #[arg(long, default_value_t = 1024)]
    size: u32,
    /// Page side P in texels.
    #[arg(long, default_value_t = 64)]
    page: u32,
    /// Frames per measurement.
    #[arg(long, default_value_t = 5)]
    frames: u32,
    /// Measurements of each side, interleaved; the median is reported.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// The procedure whose ratio is the last line.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure)]
    procedure: Procedure,
    /// Device backend.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendKind,
    /// CPU threads for both sides (0: one per core). The wgpu backend ignores it: both of
    /// its sides run on the GPU.
    #[arg(long, default_value_t = 0)]
    threads: usize,
}

fn parse_procedure(s: &str) -> Result<Procedure, String> {
    s.parse()
}
fn parse_partition(s: &str) -> Result<Partition, String> {
    s.parse()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.command {
        Command::Run {
            workload: Workload::Boiling,
            opts,
        } => run::boiling(&opts),
        Command::Bench {
            which: BenchKind::Overhead,
            opts,
        } => bench::overhead(&opts),
        Command::Litmus(opts) => litmus::litmus(&opts),
        Command::Devices => backend::devices(),
        Command::Sweep {
            which: sweep::SweepKind::PageSize(opts),
        } => sweep::page_size(&opts),
        Command::Sweep {
            which: sweep::SweepKind::Devices(opts),
        } => sweep::devices(&opts),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
