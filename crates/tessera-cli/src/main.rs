//! `tessera`: run workloads on a distributed, demand-paged texture memory.

/// `println!` through [`output::say`]: a closed or full standard output is not a panic.
macro_rules! outln {
    () => {
        $crate::output::say("\n")
    };
    ($($t:tt)*) => {
        $crate::output::say(&format!("{}\n", format_args!($($t)*)))
    };
}

/// A "wrote ..." line, said only once the files it names are in `--out` ([`output::wrote`]).
macro_rules! wrote {
    ($($t:tt)*) => {
        $crate::output::wrote(format!($($t)*))
    };
}

/// `print!` through [`output::say`].
macro_rules! out {
    ($($t:tt)*) => {
        $crate::output::say(&format!($($t)*))
    };
}

/// A usage error found once the options are parsed: a value, or a combination of options, the
/// command cannot honour. The command exits with 2, as it does for what clap refuses, and
/// writes nothing.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Whether an error in a failed command's chain is a usage error: a [`Usage`], a topology
/// that is neither a preset nor a file, a preset with fewer devices than `--devices`, or more
/// devices over mpirun's processes than one address space holds (found only once the
/// processes know how many they are). (A library error wrapped `transparent` by another is not
/// in the chain, so the checks that must exit 2 are made up front as [`Usage`].)
/// The runtime's refusals that follow from the process count and the options alone: too many
/// devices in all, and more nodes than a wgpu device has memories for (which had exited 1).
fn runtime_usage(e: &tessera_runtime::RuntimeError) -> bool {
    matches!(
        e,
        tessera_runtime::RuntimeError::ClusterTooLarge { .. }
            | tessera_runtime::RuntimeError::TooManyHomes { .. }
    )
}

fn is_usage(e: &(dyn std::error::Error + 'static)) -> bool {
    e.is::<Usage>()
        || match e.downcast_ref::<tessera_model::TopologyError>() {
            Some(tessera_model::TopologyError::UnknownPreset { .. }) => true,
            // A preset's device count is in the options; a file's is found in the file, a
            // failed run as a scene's contents are (CLI.md, "Exit status").
            Some(tessera_model::TopologyError::TooFewDevices { name, .. }) => {
                tessera_model::PRESETS.contains(&name.as_str())
            }
            _ => false,
        }
        || e
            .downcast_ref::<tessera_runtime::RuntimeError>()
            .is_some_and(runtime_usage)
        // A wgpu node's error is transparent: its chain goes on past the runtime's error.
        || matches!(
            e.downcast_ref::<tessera_wgpu::NodeError>(),
            Some(tessera_wgpu::NodeError::Runtime(r)) if runtime_usage(r)
        )
        // The ray tracer's minimum budget follows from `--page` and `--budget-mib` alone.
        || matches!(
            e.downcast_ref::<tessera_workloads::raytrace::RaytraceError>(),
            Some(tessera_workloads::raytrace::RaytraceError::BudgetTooSmall { .. })
        )
}

/// A failure every rank of an mpirun job reaches alike, which rank 0 has printed already:
/// every rank exits with the same status and says nothing more, so the job's stderr has the
/// line once.
#[derive(Debug)]
pub struct SaidByRankZero(pub String);

impl std::fmt::Display for SaidByRankZero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SaidByRankZero {}

/// Says `warning` on stderr, so that stdout stays the run's own (a scene of placeholder
/// textures).
pub fn warn(warning: Option<String>) {
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
}

/// `--home-file PATH`: refused (exit 2, before anything runs) where PATH exists, since tessera
/// never overwrites a home file, or where its folder does not exist, as every file option's
/// is. Boiling's isolated model, the one user of a second file (`PATH.isolated`), checks that
/// one before it runs ([`home_file_taken`]).
fn fresh_home_file(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err(
            "an empty path names no file; give the path of a file for tessera to create".into(),
        );
    }
    let path = PathBuf::from(s);
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    if !folder.is_dir() {
        let why = match folder.exists() {
            true => "is not a folder",
            false => "does not exist",
        };
        return Err(format!(
            "its folder {} {why}; tessera creates the file, not the folders above it",
            folder.display()
        ));
    }
    match home_file_taken(&path) {
        Some(why) => Err(why),
        None => Ok(path),
    }
}

/// Why tessera cannot create its home file at `p`: a directory or any file is there already.
pub fn home_file_taken(p: &std::path::Path) -> Option<String> {
    if p.is_dir() {
        return Some(format!(
            "{} is a directory; give the path of a file for tessera to create",
            p.display()
        ));
    }
    p.symlink_metadata().is_ok().then(|| {
        format!(
            "{} already exists; tessera creates its home file fresh and never overwrites one \
             (a run that was killed, not interrupted, leaves its file behind): remove it if no \
             tessera is running with it, or choose another path",
            p.display()
        )
    })
}

/// [`Usage`] from any error's text.
pub fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    Usage(e.to_string()).into()
}

mod backend;
mod bench;
mod bench_gpu;
mod convolution;
mod halo;
mod lists;
mod litmus;
mod nodes;
mod output;
mod oversub;
mod page_moves;
mod quake;
mod raytrace;
mod run;
mod scaling;
mod scene;
mod stencil;
mod sweep;
mod unpaged_gpu;
mod verify;
mod vr;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use tessera_core::PageSize;
use tessera_runtime::{Partition, Policy, Prefetch, Procedure, Thrashing};

#[derive(Parser)]
#[command(
    name = "tessera",
    version,
    about = "One shared, demand-paged texture memory across devices",
    after_help = "Exit status: 0 when the command succeeded; 1 when the run failed; 2 for a usage \
                  error (an unknown option, a bad option value, options that do not go \
                  together); 130 when interrupted. A command that did not succeed writes \
                  nothing into --out."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// For commands that write an `--out` folder: replace the results already there, once the
    /// new run has succeeded. Without it such a command refuses an `--out` that holds
    /// anything. Commands without `--out` accept it and ignore it.
    #[arg(long, global = true)]
    force: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run a workload and write a report.
    Run {
        #[command(subcommand)]
        which: RunKind,
    },
    /// Benchmarks that print ratios measured side by side in one run.
    Bench {
        #[command(subcommand)]
        which: BenchKind,
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
    /// Quake 3 / OpenArena scenes (pk3 + BSP): `scene info --map oa_dm1`.
    Scene {
        #[command(subcommand)]
        which: scene::SceneKind,
    },
    /// Work with trace files (`tessera run quake --trace FILE`).
    Trace {
        #[command(subcommand)]
        which: TraceKind,
    },
}

#[derive(Subcommand)]
enum TraceKind {
    /// Drive the memory manager from a trace's texture blocks, without rendering: requests per
    /// frame and device at any page size and device count.
    Replay(quake::ReplayOpts),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// The boiling simulation of paper 4.1.1.
    Boiling,
    /// The out-of-core ray tracer (`run raytrace`): rays fault, save their state and resume.
    Raytrace,
}

/// The workloads `tessera run` knows, each with its own options: a new workload is one more
/// variant here and one module beside `run.rs`.
#[derive(Subcommand)]
enum RunKind {
    /// The boiling simulation of paper 4.1.1.
    Boiling(RunOpts),
    /// The game trace of paper 4.1.2: a textured scene rendered split-screen, every texel
    /// fetched through the paged memory; requests per frame and device.
    Quake(quake::QuakeOpts),
    /// OO-VR's stereo rendering across the GPU modules of an mcm topology with one
    /// distribution scheme: modeled frame latency, inter-GPM traffic, a stereo PNG.
    Vr(vr::VrOpts),
    /// GPU-SM's 3D finite-difference stencil (N³, star of radius --halo), split along X, Y
    /// or Z, in an access version: explicit halo copies, migrate or remote.
    Stencil(stencil::StencilOpts),
    /// GPU-SM's 2D image convolution (N², F × F filter in a buffer object), split along X
    /// or Y, in an access version.
    Convolution(convolution::ConvolutionOpts),
    /// Out-of-core ray tracing: a scene (an OpenArena map or a generated one, instanced) in
    /// paged buffers and textures, rendered by rays that fault, save their state and resume;
    /// the image split across devices.
    Raytrace(raytrace::RaytraceOpts),
}

#[derive(Subcommand)]
enum BenchKind {
    /// Boiling on one device, paged vs unpaged: the cost of paging.
    Overhead(BenchOpts),
    /// A workload with budgets below its working set, per ratio and eviction policy, against
    /// the resident run and Belady's OPT.
    Oversubscription(oversub::OversubOpts),
    /// Boiling's modeled speed-up at several device counts, beside the ideal, with each
    /// device's work timed alone (the isolated-device model).
    Scaling(scaling::ScalingOpts),
    /// Page moves through the runtime (home to device, device to device, write-back) per page
    /// size, beside a plain memcpy of the same bytes.
    PageMoves(page_moves::PageMovesOpts),
    /// Every workload (boiling, the game trace, the ray tracer under a budget, the stencil,
    /// vr) on the GPU and on the CPU backend of the same machine, side by side, and the ratio.
    Gpu(bench_gpu::GpuBenchOpts),
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum BackendKind {
    /// Software devices on the CPU: needs nothing installed.
    Cpu,
    /// GPUs through wgpu (Vulkan, Metal, DX12; lavapipe on a machine without one). The
    /// devices share one wgpu device, each with its own memories and page table; several on
    /// one adapter emulate a multi-GPU machine.
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

/// The most frames of a camera path (`run quake --frames`/`--path-frames`, `run vr`'s frames
/// and warm-up): the path's cameras are made before the first frame, and four billion of
/// them asked for 96 GB and aborted the process.
pub const MAX_PATH_FRAMES: u32 = 1_000_000;

/// The most boiling frames, measured or warm-up, one option takes: both together still count
/// in 32 bits.
pub const MAX_FRAMES: u32 = i32::MAX as u32;

/// The backend and threads of a command's node: every command that runs one flattens it.
#[derive(Args, Clone)]
pub struct NodeOpts {
    /// Device backend.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: BackendKind,
    /// CPU threads for the software devices (0: one per core). Accepts at most 8 per core or 64,
    /// whichever is more: more threads only add switching, and tens of thousands take minutes
    /// just to start.
    #[arg(long, default_value_t = 0, value_parser = parse_threads)]
    pub threads: usize,
}

impl NodeOpts {
    /// The defaults on `devices` devices with these threads; the command adds what it honours.
    pub fn config(&self, devices: usize) -> tessera_runtime::SystemConfig {
        tessera_runtime::SystemConfig::new(devices).threads(self.threads)
    }

    /// A node of `cfg` on the backend, and its adapter's name (crate::backend::system).
    pub fn system(
        &self,
        cfg: &tessera_runtime::SystemConfig,
    ) -> anyhow::Result<(tessera_runtime::System, Option<String>)> {
        backend::system(self.backend, cfg)
    }
}

/// A device's page cache: the commands whose pages may not all fit flatten it.
#[derive(Args, Clone)]
pub struct CacheOpts {
    /// Per-device memory budget in MiB (fractions allowed, e.g. 0.75). It is a page cache:
    /// when a batch needs more slots than it has left, pages are evicted (`--policy`), and a
    /// pass whose pages do not fit at once runs in waves. Too small for one invocation's pages
    /// is an error naming the bytes of the pages it had asked for (a lower bound: pages show
    /// one miss at a time) and, for a kernel with a footprint, the bytes that are enough for
    /// any invocation of it.
    #[arg(long, default_value = "4096", value_parser = parse_budget)]
    pub budget_mib: f64,
    /// Which pages a device gives up when its budget is full: lru (the patent's time stamps),
    /// clock (second chance), fifo or random.
    #[arg(long, default_value = "lru", value_parser = parse_policy())]
    pub policy: Policy,
}

impl CacheOpts {
    pub fn budget_bytes(&self) -> u64 {
        budget_bytes(self.budget_mib)
    }
}

/// What the node of `run boiling`, `sweep` and the halo workloads runs on: every paging
/// option of the runtime, since all of them settle their frames before timing.
#[derive(Args, Clone)]
pub struct PagingOpts {
    #[command(flatten)]
    pub base: NodeOpts,
    #[command(flatten)]
    pub cache: CacheOpts,
    /// What to do about pages evicted and faulted again in quick succession: pin them for a
    /// while (up to half of the resident pages), or only count them.
    #[arg(long, default_value = "pin", value_parser = parse_thrashing())]
    thrashing: Thrashing,
    /// Fetch more pages than a batch asks for: tree (CUDA UVM's bitmap tree over regions of
    /// 32 pages, read copies of unmodified pages, only when they fit beside the batch) or off.
    #[arg(long, default_value = "off", value_parser = parse_prefetch())]
    prefetch: Prefetch,
    /// Asynchronous staging (on or off): under oversubscription, the memory manager copies the
    /// next band's pages into the device while the current band runs. Refused stages change
    /// nothing; the band then asks as usual.
    #[arg(long, default_value = "off", value_parser = on_off(), action = clap::ArgAction::Set)]
    staging: bool,
    /// Whether the relaunch procedure asks for the pages a kernel's footprint names before a
    /// band's first launch (on), or launches, faults and relaunches as the paper's relaunch
    /// does (off). Kernels without a footprint always relaunch on faults. With two-pass, on
    /// asks for those pages in place of the request pass; off runs the request pass.
    #[arg(long, default_value = "on", value_parser = on_off(), action = clap::ArgAction::Set)]
    footprint_ahead: bool,
    /// Deferred execution (on or off): a band whose pages the device holds is queued without
    /// waiting for its outcome, and the host waits once a frame. It applies to one device, and
    /// to several wgpu devices on one GPU (one queue); other devices wait per pass.
    #[arg(long, default_value = "on", value_parser = on_off(), action = clap::ArgAction::Set)]
    deferred: bool,
    /// Whether the two-pass procedure runs a part whose pages the device holds with the rights
    /// it needs in place, one launch storing into the pages (on), or computes it into the
    /// temporary and merges it, as the paper's third pass does (off).
    #[arg(long, default_value = "on", value_parser = on_off(), action = clap::ArgAction::Set)]
    held_in_place: bool,
    /// Whether each pass is cut across devices on page boundaries where every band stays
    /// within a quarter of an even share (on), so that no page a pass writes is written by two
    /// devices, or evenly, as the paper's partitioning does (off).
    #[arg(long, default_value = "on", value_parser = on_off(), action = clap::ArgAction::Set)]
    split_on_pages: bool,
    /// What a read of a page another device modified does: owned (MOESI's owned state: the
    /// owner keeps the page and serves readers from it; it goes home only when evicted) or
    /// write-home (the journal paper's rule: home is updated on every such read).
    #[arg(long, default_value = "owned", value_parser = parse_coherence())]
    coherence: tessera_core::Coherence,
    /// Interconnect for the modeled time: a preset (pcie1-x16, pcie3-x16, pcie4-x16,
    /// pcie5-x16, nvlink, gpusm-pcie2, gpusm-pcie3, mcm-4, mcm-8) or a TOML file
    /// (docs/EVALUATION.md).
    #[arg(long, default_value = "pcie3-x16")]
    topology: String,
    /// Keep the objects' home copies in a memory-mapped file at PATH instead of host memory,
    /// so they may exceed RAM. PATH must not exist: tessera creates it fresh, never overwrites
    /// an existing file (the run is refused), and removes it when the run ends. Boiling's
    /// isolated model runs a second node, which keeps its own in `PATH.isolated`, under the
    /// same rules.
    #[arg(long, value_name = "PATH", value_parser = fresh_home_file)]
    home_file: Option<PathBuf>,
    /// How the modeled time is made. `isolated`: the measured frames also run with the devices
    /// one at a time, each with the whole machine (boiling: on a second node beside the first,
    /// whose devices run together for the measured wall time and the field; the stencil and
    /// the convolution: after the measured steps, on the same node); the model takes the
    /// slowest device's work alone, the links and the memory manager's time, and the counters
    /// and stage times come from those frames. Neither model changes the field.
    /// `concurrent`: the older model, from the work measured while all devices shared the
    /// machine, which makes more devices look slower on a machine with few cores.
    #[arg(long, value_enum, default_value = "isolated")]
    model: ModelKind,
    /// Testing: a protocol broken on purpose (as `litmus --protocol`), so that tests can see
    /// `--verify` catch a wrong field.
    #[arg(long, default_value = "correct", value_parser = litmus::parse_protocol(), hide = true)]
    protocol: tessera_core::ProtocolVariant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Each device's work timed alone (docs/EVALUATION.md, "The isolated-device model").
    Isolated,
    /// Each device's work timed while all of them ran together.
    Concurrent,
}

impl PagingOpts {
    /// The configuration of a node of `devices` devices with these options: every option a
    /// boiling run honours.
    pub fn config(&self, devices: usize) -> tessera_runtime::SystemConfig {
        self.base
            .config(devices)
            .budget(self.cache.budget_bytes())
            .policy(self.cache.policy)
            .thrashing(self.thrashing)
            .prefetch(self.prefetch)
            .staging(self.staging)
            .footprint_ahead(self.footprint_ahead)
            .home_file(self.home_file.clone())
            .deferred(self.deferred)
            .held_in_place(self.held_in_place)
            .split_on_pages(self.split_on_pages)
            .coherence(self.coherence)
            .variant(self.protocol)
    }

    /// `--topology` for a run of `devices` devices.
    pub fn topology(&self, devices: usize) -> anyhow::Result<tessera_model::Topology> {
        Ok(tessera_model::Topology::load(&self.topology, devices)?)
    }
}

impl From<ModelKind> for tessera_runtime::modeled::Model {
    fn from(m: ModelKind) -> Self {
        match m {
            ModelKind::Isolated => Self::Isolated,
            ModelKind::Concurrent => Self::Concurrent,
        }
    }
}

#[derive(Args, Clone)]
pub struct RunOpts {
    /// Number of devices.
    #[arg(long, default_value_t = 2, value_parser = parse_device_count)]
    devices: usize,
    /// Field side in texels (the field is size × size).
    #[arg(long, default_value_t = 512, value_parser = parse_size)]
    size: u32,
    /// Page side P in texels: a power of two from 1 to 512.
    #[arg(long, default_value = "64", value_parser = crate::parse_page)]
    page: PageSize,
    /// Frames measured, after the `--warmup` frames (the field is after both).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=crate::MAX_FRAMES as i64))]
    frames: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    /// How each pass's domain is split across devices.
    #[arg(long = "split", alias = "partition", value_name = "SPLIT", default_value = "rows", value_parser = parse_partition())]
    partition: Partition,
    /// Output directory for report.json, frame.png and frames.gif.
    #[arg(long, default_value = "out/boiling")]
    out: PathBuf,
    #[command(flatten)]
    node: PagingOpts,
    /// Frames run before the measured ones; the report counts none of them.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=crate::MAX_FRAMES as i64))]
    warmup: u32,
    /// Also write residency-<texture>.png: where each page lives at the end of the run.
    #[arg(long)]
    residency_png: bool,
    /// Add the display to frames.gif every K frames (warm-up included) and after the last
    /// one; 0 writes no GIF. Sampling reads the display back to the host; its time is not in
    /// the measured wall time.
    #[arg(long, value_name = "K", default_value_t = 10)]
    gif_every: u32,
    /// Also run the plain single-device reference (unpaged) and compare the field bit for bit;
    /// a difference fails the command and writes nothing.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    cluster: ClusterOpts,
}

/// `run boiling` over MPI processes (crate::nodes).
#[derive(Args, Clone)]
pub struct ClusterOpts {
    /// Run over MPI processes, one node each, with K devices per node (`--backend cpu`, or
    /// `wgpu` with each process opening its own GPU, at most 4 processes):
    /// `mpirun -np N tessera run boiling --devices-per-node K` simulates one field over N × K
    /// devices, each node home to a share of the pages (`--devices` is then refused: the
    /// device count is N × K; the report is measured only). Needs a tessera built with
    /// `--features mpi` (README.md, "Multi-node").
    #[arg(long, value_name = "K", value_parser = parse_device_count)]
    devices_per_node: Option<usize>,
    /// On several nodes: pages are dealt to the nodes' homes in blocks of this many, round
    /// robin.
    #[arg(long, default_value_t = 16, value_parser = parse_count)]
    home_block_pages: u64,
    /// On several nodes: a node silent for this many seconds is lost, and the others stop
    /// with an error naming it. At least 0.1 (nodes send heartbeats every 10 ms at the most
    /// often).
    #[arg(long, default_value_t = 10.0, value_parser = parse_lost_after)]
    lost_after_s: f64,
    /// On several nodes: the network that models the inter-node traffic's time: eth-10g,
    /// eth-100g, ib-edr or ib-hdr. Unset: the `[network]` of a `--topology` file, else ib-hdr.
    #[arg(long, value_name = "NAME", value_parser = clap::builder::PossibleValuesParser::new(tessera_model::NETWORKS))]
    network: Option<String>,
    /// Testing (.ci/mpi_check): this rank aborts, as if killed, after `--abort-after-frames`
    /// measured frames.
    #[arg(long, hide = true)]
    abort_rank: Option<usize>,
    #[arg(long, hide = true, default_value_t = 1)]
    abort_after_frames: u32,
}

impl Default for ClusterOpts {
    fn default() -> Self {
        ClusterOpts {
            devices_per_node: None,
            home_block_pages: 16,
            lost_after_s: 10.0,
            network: None,
            abort_rank: None,
            abort_after_frames: 1,
        }
    }
}

#[derive(Args, Clone)]
pub struct BenchOpts {
    /// Field side in texels.
    #[arg(long, default_value_t = 1024, value_parser = parse_size)]
    size: u32,
    /// Page side P in texels.
    #[arg(long, default_value = "64", value_parser = crate::parse_page)]
    page: PageSize,
    /// Frames per measurement.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    frames: u32,
    /// Measurements of each side, interleaved; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// The procedure whose ratio is the last line.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    procedure: Procedure,
    #[command(flatten)]
    node: NodeOpts,
    /// Deferred execution of held bands (on or off), as on `run`.
    #[arg(long, default_value = "on", value_parser = on_off(), action = clap::ArgAction::Set)]
    deferred: bool,
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `--page`: a page side tessera can page by, checked where the option is read so that a bad
/// one is a usage error (exit 2) like any other bad option value.
pub fn parse_page(s: &str) -> Result<PageSize, String> {
    let p: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a page side in texels"))?;
    PageSize::new(p).map_err(|e| e.to_string())
}

/// `--size` of a boiling field: 1 to [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_SIZE).contains(&n) => Ok(n),
        _ => Err(format!(
            "{s:?} is not a field side between 1 and {MAX_SIZE}"
        )),
    }
}

/// A count of one or more (runs, pages).
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        Err(e) if *e.kind() == std::num::IntErrorKind::PosOverflow => {
            Err(format!("{s:?} is more than {}, the most counted", u64::MAX))
        }
        _ => Err(format!("{s:?} is not a whole number of 1 or more")),
    }
}

/// A positive, finite number (seconds, GB/s).
pub fn parse_positive(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// A link's bandwidth in GB/s, within what the topology model takes from a file
/// (`tessera_model::bandwidth_ok`): 1e300 overflowed to an infinite bandwidth, written as
/// `null` in report.json, and 1e-300 printed a latency of hundreds of digits.
pub fn parse_gbps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if tessera_model::bandwidth_ok(v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a bandwidth from {} to {} GB/s",
            tessera_model::MIN_GBPS,
            tessera_model::MAX_GBPS
        )),
    }
}

/// `--lost-after-s`: at least [`MIN_LOST_AFTER_S`], and at most a day, which a duration holds
/// (1e20 seconds made every rank panic converting it) and no real run waits out.
fn parse_lost_after(s: &str) -> Result<f64, String> {
    match parse_positive(s) {
        Ok(v) if v > 86_400.0 => Err(format!("{s:?} seconds is more than a day")),
        Ok(v) if v < MIN_LOST_AFTER_S => Err(format!(
            "{s:?} seconds is less than {MIN_LOST_AFTER_S}: nodes send heartbeats at most every \
             10 ms, so a shorter silence is every node's between two of them, and each would \
             count the others lost"
        )),
        r => r,
    }
}

/// The shortest `--lost-after-s`: ten of the router's shortest heartbeat intervals
/// (tessera-runtime's `cluster`, 10 ms), so a node is called lost only after missing several.
const MIN_LOST_AFTER_S: f64 = 0.1;

/// A device count of one node: 1 to `MAX_DEVICES`, read as `--page` is.
pub fn parse_device_count(s: &str) -> Result<usize, String> {
    let max = tessera_core::MAX_DEVICES;
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{s:?} is not a device count between 1 and {max}")),
    }
}

pub fn parse_threads(s: &str) -> Result<usize, String> {
    let s = s.trim();
    // The runtime's own bound on the CPU devices' pool, refused here as a usage error.
    let max = tessera_runtime::max_cpu_threads();
    let too_many = || {
        format!(
            "{s} threads is more than this machine can sensibly run: at most {max} \
             ({} per core on {} core(s), or {}, whichever is more); 0 means one per core",
            tessera_runtime::CPU_THREADS_PER_CORE,
            cores(),
            tessera_runtime::CPU_THREADS_FLOOR,
        )
    };
    match s.parse::<usize>() {
        Ok(n) if n > max => Err(too_many()),
        Ok(n) => Ok(n),
        // Digits that overflow are a count too large, not a malformed one.
        Err(_) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => Err(too_many()),
        Err(_) => Err(format!("{s:?} is not a whole number of threads")),
    }
}

/// Budgets are given in MiB; the largest accepted is 1 PiB (2^30 MiB).
pub const MAX_BUDGET_MIB: f64 = (1u64 << 30) as f64;

fn parse_budget(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a number of MiB"))?;
    if !v.is_finite() {
        return Err(format!("{s:?} is not a finite number of MiB"));
    }
    if v <= 0.0 {
        return Err(format!(
            "the budget must be more than 0 MiB (got {s}): a device needs room for at least one invocation's pages"
        ));
    }
    if v > MAX_BUDGET_MIB {
        return Err(format!(
            "{s} MiB is more than the largest budget accepted, {MAX_BUDGET_MIB} MiB"
        ));
    }
    // A budget under a byte (1e-9 MiB) is 0 bytes: refused here as 0 is, not by the run.
    if budget_bytes(v) == 0 {
        return Err(format!(
            "the budget must be at least a byte (got {s} MiB): a device needs room for at least one invocation's pages"
        ));
    }
    Ok(v)
}

/// Bytes of a budget given in MiB.
pub fn budget_bytes(mib: f64) -> u64 {
    (mib * (1u64 << 20) as f64) as u64
}

/// A value among `names`, listed in `--help` and in the error for anything else, then read
/// with the type's own `FromStr`.
fn one_of<T>(names: &'static [&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(names).try_map(|s: String| s.parse::<T>())
}

/// One of `values`, by the names `name` gives them (the library's own, as its reports print
/// them), listed in `--help` and in the error for anything else.
pub fn named<T: Copy + Send + Sync + 'static>(
    values: &'static [T],
    name: fn(T) -> &'static str,
) -> impl clap::builder::TypedValueParser<Value = T> {
    use clap::builder::TypedValueParser;
    let names = values.iter().map(move |&v| name(v));
    clap::builder::PossibleValuesParser::new(names).try_map(move |s: String| {
        let found = values.iter().copied().find(|&v| name(v) == s);
        found.ok_or("not one of the possible values")
    })
}

/// `on` or `off`.
pub fn on_off() -> impl clap::builder::TypedValueParser<Value = bool> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["on", "off"]).map(|s: String| s == "on")
}

pub fn parse_policy() -> impl clap::builder::TypedValueParser<Value = Policy> {
    one_of(&["lru", "clock", "fifo", "random"])
}
pub fn parse_thrashing() -> impl clap::builder::TypedValueParser<Value = Thrashing> {
    one_of(&["pin", "off"])
}
pub fn parse_prefetch() -> impl clap::builder::TypedValueParser<Value = Prefetch> {
    one_of(&["off", "tree"])
}
pub fn parse_coherence() -> impl clap::builder::TypedValueParser<Value = tessera_core::Coherence> {
    one_of(&["owned", "write-home"])
}
pub fn parse_procedure() -> impl clap::builder::TypedValueParser<Value = Procedure> {
    one_of(&["relaunch", "two-pass"])
}
pub fn parse_partition() -> impl clap::builder::TypedValueParser<Value = Partition> {
    one_of(&["rows", "cols", "tiles"])
}

fn replay_out(o: &mut quake::ReplayOpts) -> &mut PathBuf {
    o.out.get_or_insert_with(|| PathBuf::from("out/replay"))
}

/// Options that parse but cannot apply to the command as given: usage errors (exit 2), as a
/// bad value is, rather than options silently ignored.
fn refuse_inapplicable(cli: &Cli, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
    if let Command::Bench {
        which: BenchKind::Oversubscription(o),
    } = &cli.command
    {
        return refuse_other_workloads(o, matches);
    }
    // Litmus across processes runs its threads free on the multi-node engine, which has one
    // protocol and no schedule: these were accepted and ignored, and a broken protocol
    // reported 0 forbidden outcomes.
    if let Some(m) = matches.subcommand_matches("litmus") {
        let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        if given("devices_per_node") {
            for (id, option) in [
                ("schedule", "--schedule"),
                ("same_page", "--same-page"),
                ("protocol", "--protocol"),
                ("coherence", "--coherence"),
                ("seed", "--seed"),
            ] {
                if given(id) {
                    return Err(conflict(
                        &["litmus"],
                        &format!("{option} does not apply with --devices-per-node: across processes the threads run free on the multi-node engine, with its own protocol (docs/MPI.md)"),
                    ));
                }
            }
        }
        return Ok(());
    }
    // The slab decompositions place their slabs themselves, on each device, so the cut of a
    // 2D partition on page boundaries has nothing to cut.
    for (group, name) in [
        ("run", "stencil"),
        ("run", "convolution"),
        ("sweep", "stencil"),
        ("sweep", "convolution"),
    ] {
        let m = matches
            .subcommand_matches(group)
            .and_then(|m| m.subcommand_matches(name));
        if m.is_some_and(|m| {
            m.value_source("split_on_pages") == Some(clap::parser::ValueSource::CommandLine)
        }) {
            return Err(conflict(
                &[group, name],
                "--split-on-pages applies to 2D partitions (boiling, the ray tracer, the game trace): a slab decomposition places its slabs itself",
            ));
        }
    }
    let Command::Run {
        which: RunKind::Boiling(o),
    } = &cli.command
    else {
        return Ok(());
    };
    let m = matches
        .subcommand_matches("run")
        .and_then(|m| m.subcommand_matches("boiling"));
    let Some(m) = m else {
        return Ok(());
    };
    let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    if o.cluster.devices_per_node.is_none() {
        // Options of runs over nodes: on one node they would be ignored.
        let one_node = [
            ("network", "--network applies with --devices-per-node only: one node sends nothing over a network"),
            ("home_block_pages", "--home-block-pages applies with --devices-per-node only: one node is home to every page"),
            ("lost_after_s", "--lost-after-s applies with --devices-per-node only: one process has no other node to lose"),
        ];
        return match one_node.into_iter().find(|(id, _)| given(id)) {
            Some((_, why)) => Err(conflict(&["run", "boiling"], why)),
            None => Ok(()),
        };
    }
    // The runtime defers launches on a node of one device or of devices sharing one queue,
    // never across nodes, and every rank would create the same home file.
    let refused = [
        (given("deferred"), "--deferred does not apply with --devices-per-node: launches are never deferred across nodes"),
        (given("home_file"), "--home-file does not apply with --devices-per-node: every node would create the same file"),
        // It had been ignored: the devices are the processes times --devices-per-node.
        (given("devices"), "--devices does not apply with --devices-per-node: the devices are mpirun's processes times --devices-per-node"),
        (o.node.staging, "--staging on is not built across nodes (--devices-per-node)"),
        // Rank 0 writes report.json and frame.png only (docs/MPI.md).
        (given("gif_every") && o.gif_every > 0, "--gif-every is not written across nodes (--devices-per-node): rank 0 writes report.json and frame.png"),
        (o.residency_png, "--residency-png is not drawn across nodes (--devices-per-node): rank 0 writes report.json and frame.png"),
        // A run over nodes is measured, not modeled (docs/MPI.md): the options of the model
        // had been accepted and ignored.
        (given("model"), "--model does not apply with --devices-per-node: a run over nodes is measured, not modeled"),
        (given("topology") && tessera_model::PRESETS.contains(&o.node.topology.as_str()), "--topology takes a file with a [network] table with --devices-per-node (a run over nodes reads only its network, and a preset has none); name the network with --network"),
    ];
    match refused.into_iter().find(|(applies, _)| *applies) {
        Some((_, why)) => Err(conflict(&["run", "boiling"], why)),
        None => Ok(()),
    }
}

/// `bench oversubscription`'s options for the other workload than the one it runs: a field
/// side given to the ray tracer, a scene given to boiling, were measured as if never given.
fn refuse_other_workloads(
    o: &oversub::OversubOpts,
    matches: &clap::ArgMatches,
) -> Result<(), clap::Error> {
    let Some(m) = matches
        .subcommand_matches("bench")
        .and_then(|m| m.subcommand_matches("oversubscription"))
    else {
        return Ok(());
    };
    let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
    let (others, workload, other): (&[&str], _, _) = match o.workload {
        Workload::Boiling => (
            &[
                "scene",
                "map",
                "pak_dir",
                "instances",
                "width",
                "height",
                "ao_samples",
                "ao_radius",
            ],
            "boiling",
            "raytrace",
        ),
        // The ray kernel has no footprint to stage by, and its harness runs no prefetch; its
        // waves wait for each launch's faults, so nothing is deferred (`run raytrace` has no
        // --deferred either).
        Workload::Raytrace => (
            &["size", "prefetch", "staging", "deferred"],
            "raytrace",
            "boiling",
        ),
    };
    match others.iter().find(|id| given(id)) {
        Some(id) => Err(conflict(
            &["bench", "oversubscription"],
            &format!(
                "--{} applies to --workload {other} only, not to {workload}",
                id.replace('_', "-")
            ),
        )),
        None => Ok(()),
    }
}

/// Options of the subcommand `path` names that cannot go together: clap's error, with that
/// subcommand's usage line (the top level's would send the user to the wrong `--help`).
fn conflict(path: &[&str], why: &str) -> clap::Error {
    let mut cmd = cli_command();
    // Gives every subcommand its full name ("tessera run boiling") for the usage line.
    cmd.build();
    for name in path {
        match cmd.find_subcommand(name) {
            Some(sub) => cmd = sub.clone(),
            None => break,
        }
    }
    cmd.error(clap::error::ErrorKind::ArgumentConflict, why)
}

/// The command line, with what the derived one cannot say: `--split-on-pages` is shared with
/// boiling's options but refused by the slab decompositions, so their help does not offer it.
fn cli_command() -> clap::Command {
    let mut cmd = Cli::command();
    for (group, name) in [
        ("run", "stencil"),
        ("run", "convolution"),
        ("sweep", "stencil"),
        ("sweep", "convolution"),
    ] {
        cmd = cmd.mut_subcommand(group, |g| {
            g.mut_subcommand(name, |c| c.mut_arg("split_on_pages", |a| a.hide(true)))
        });
    }
    negative_numbers_are_values(cmd)
}

/// A negative number after an option is that option's value, refused by the option's own
/// parser with its own message, not taken for an unknown flag ("unexpected argument '-3'").
fn negative_numbers_are_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| match a.get_action().takes_values() {
        true => a.allow_negative_numbers(true),
        false => a,
    })
    .mut_subcommands(negative_numbers_are_values)
}

/// Prints a clap error (or the help and version clap answers with) and exits with its status.
/// An error is written to stderr in one call: clap writes its styled pieces one call each, and
/// under mpirun, where every rank refuses the same options, two ranks' lines interleaved
/// ("error:error: --deferred does not apply …").
fn exit_with(e: clap::Error) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let code = ExitCode::from(e.exit_code().clamp(0, 255) as u8);
    if !e.use_stderr() {
        // Help and the version go to standard output, whose failure (`> /dev/full`) fails
        // the command as it does every other command's output.
        if let Err(io) = e.print() {
            eprintln!("error: cannot write to standard output: {io}");
            return ExitCode::from(1);
        }
        return code;
    }
    let stderr = std::io::stderr();
    let text = if stderr.is_terminal() {
        e.render().ansi().to_string()
    } else {
        e.render().to_string()
    };
    let _ = stderr.lock().write_all(text.as_bytes());
    code
}

/// The number of processes mpirun (or another MPI launcher) started this one among, from the
/// variables it sets: Open MPI's, else the PMI ones MPICH's and Slurm's launchers set. None
/// outside such a launcher.
pub(crate) fn mpi_processes() -> Option<u64> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.trim().parse().ok())
}

/// Why `cli` must not run as one of several MPI processes: a command of one process would run
/// whole on every rank, each writing the same `--out` (the ranks raced on it, and the loser was
/// told the folder it had just seen empty "already holds results"). Only `run boiling` and
/// `litmus` with `--devices-per-node` run across processes; `devices` and `scene` write
/// nothing and tell each rank about its own machine.
fn alone_under_mpirun(cli: &Cli) -> Option<String> {
    let n = mpi_processes().filter(|&n| n > 1)?;
    let across = match &cli.command {
        Command::Run {
            which: RunKind::Boiling(o),
        } => o.cluster.devices_per_node.is_some(),
        Command::Litmus(o) => o.devices_per_node.is_some(),
        Command::Devices | Command::Scene { .. } => true,
        _ => false,
    };
    (!across).then(|| {
        format!(
            "this command runs in one process, but it was started as one of {n} MPI processes, \
             each of which would run it whole; give `run boiling` or `litmus` \
             --devices-per-node K to run across the processes (docs/MPI.md), or run the \
             command without mpirun"
        )
    })
}

/// The environment's on/off switches, each `on`, `off` or unset.
fn check_switches() -> anyhow::Result<()> {
    for name in [
        tessera_runtime::PEER_COPY,
        tessera_wgpu::TILES,
        tessera_wgpu::SPECIALIZE,
        tessera_wgpu::BOUNDS_CHECKS,
    ] {
        tessera_runtime::env_switch(name)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    tessera_wgpu::quiet_mesa();
    let matches = match cli_command().try_get_matches() {
        Ok(m) => m,
        Err(e) => return exit_with(e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return exit_with(e),
    };
    if let Err(e) = refuse_inapplicable(&cli, &matches) {
        return exit_with(e);
    }
    // Every switch is read before any command, whichever backend it runs on: a misspelt one
    // is refused where it would not apply too, as docs/CLI.md ("Environment") says.
    if let Err(e) = check_switches() {
        let line = format!("error: {e:#}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        return ExitCode::FAILURE;
    }
    if let Some(problem) = alone_under_mpirun(&cli) {
        let line = format!("error: {problem}\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        return ExitCode::from(2);
    }
    let force = cli.force;
    output::remove_partial_on_interrupt();
    use output::staged;
    let res = match cli.command {
        Command::Run { which } => match which {
            RunKind::Boiling(opts) => match opts.cluster.devices_per_node {
                // Under mpirun every rank runs this; rank 0 writes the report (`nodes::boiling`).
                Some(k) => nodes::boiling(&opts, k, force),
                None => staged(opts, force, |o| &mut o.out, run::boiling),
            },
            RunKind::Quake(opts) => {
                if let Some(problem) = opts.usage_problem() {
                    return exit_with(conflict(&["run", "quake"], &problem));
                }
                match &opts.trace {
                    Some(t) => output::check_on_commit(
                        "--trace",
                        t,
                        Some(&opts.out),
                        &[opts.pak_dir()],
                        force,
                    ),
                    None => Ok(()),
                }
                .and_then(|()| staged(opts, force, |o| &mut o.out, quake::run_quake))
            }
            RunKind::Vr(opts) => staged(opts, force, |o| &mut o.out, vr::run),
            RunKind::Stencil(opts) => staged(opts, force, |o| &mut o.out, stencil::run),
            RunKind::Convolution(opts) => staged(opts, force, |o| &mut o.out, convolution::run),
            RunKind::Raytrace(opts) => staged(opts, force, |o| &mut o.out, raytrace::run),
        },
        Command::Sweep { which } => match which {
            sweep::SweepKind::PageSize(opts) => {
                staged(opts, force, |o| &mut o.common.out, sweep::page_size)
            }
            sweep::SweepKind::Devices(opts) => {
                staged(opts, force, |o| &mut o.common.out, sweep::devices)
            }
            sweep::SweepKind::Stencil(opts) => staged(opts, force, |o| &mut o.out, stencil::sweep),
            sweep::SweepKind::Convolution(opts) => {
                staged(opts, force, |o| &mut o.out, convolution::sweep)
            }
            sweep::SweepKind::Vr(opts) => staged(opts, force, |o| &mut o.out, vr::sweep),
        },
        Command::Trace {
            which: TraceKind::Replay(opts),
        } => {
            // A sweep (`--pages`) always writes a folder, out/replay unless told; a single
            // replay only when `--out` names one. Either way it appears only on success.
            match &opts.csv {
                Some(csv) => {
                    output::check_on_commit("--csv", csv, opts.out.as_deref(), &[&opts.file], force)
                }
                None => Ok(()),
            }
            .and_then(|()| {
                if opts.out.is_some() || opts.pages.is_some() {
                    staged(opts, force, replay_out, quake::trace_replay)
                } else {
                    output::unstaged(|| quake::trace_replay(&opts))
                }
            })
        }
        Command::Bench { which } => match which {
            BenchKind::Overhead(opts) => bench::overhead(&opts),
            BenchKind::Oversubscription(opts) => {
                staged(opts, force, |o| &mut o.out, oversub::oversubscription)
            }
            BenchKind::Scaling(opts) => scaling::scaling(&opts),
            BenchKind::PageMoves(opts) => page_moves::page_moves(&opts),
            BenchKind::Gpu(opts) => bench_gpu::gpu(&opts),
        },
        Command::Litmus(opts) => litmus::litmus(&opts),
        Command::Devices => backend::devices(),
        Command::Scene { which } => scene::scene(&which),
    };
    // A command that printed its results to a standard output that failed did not succeed.
    let res = res.and_then(|()| output::stdout_failure());
    output::wait_if_interrupted();
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One write: under mpirun several ranks share stderr, and `eprintln!`'s pieces
            // could interleave with another rank's mid-line.
            if !e.chain().any(|c| c.is::<SaidByRankZero>()) {
                let line = format!("error: {e:#}\n");
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            }
            if e.chain().any(is_usage) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_usage;
    use tessera_runtime::RuntimeError;

    /// More nodes than a wgpu device has memories for follows from the process count alone:
    /// a usage error (exit 2) whether the runtime's error reaches the CLI bare or inside a
    /// wgpu node's error, whose transparent wording hides it from the chain.
    #[test]
    fn too_many_homes_is_a_usage_error_through_a_wgpu_node() {
        let homes = || RuntimeError::TooManyHomes {
            backend: "wgpu".into(),
            max: 4,
            nodes: 5,
        };
        let bare = anyhow::Error::new(homes()).context("node 3");
        assert!(bare.chain().any(is_usage));
        let wrapped =
            anyhow::Error::new(tessera_wgpu::NodeError::Runtime(homes())).context("node 3");
        assert!(wrapped.chain().any(is_usage));
        let other = anyhow::Error::new(tessera_wgpu::NodeError::Runtime(RuntimeError::Config(
            "x".into(),
        )));
        assert!(!other.chain().any(is_usage));
    }
}
