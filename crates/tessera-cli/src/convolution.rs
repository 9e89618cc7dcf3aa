//! `tessera run convolution` and `tessera sweep convolution`: GPU-SM's image filtering
//! (tessera_workloads::convolution) in its access versions; the machinery is
//! [`crate::halo`]'s.

use std::path::PathBuf;
use tessera_core::PageSize;

use anyhow::Result;
use clap::{Args, ValueEnum};
use tessera_core::AccessMode;
use tessera_runtime::Procedure;
use tessera_workloads::decomp::{Access, Axis};

use crate::halo::{parse_access, parse_accesses, parse_split, Accesses, Kind, Setup};
use crate::lists::{parse_devices, parse_list_of, List};
use crate::{parse_procedure, NodeOpts};

/// Where the filter matrix lives (GPU-SM 6.2). The explicit version always keeps a private
/// copy per device (replicate).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FilterAccess {
    /// Read copies on every device: demand-paged read copies of one shared buffer
    /// (`AccessMode::Migrate`).
    Replicate,
    /// One copy in host memory that every device reads in place (`AccessMode::Remote`):
    /// every one of the F² loads per pixel crosses the device's link.
    Remote,
    /// Remote with a read-only cache: `AccessMode::ReplicateRead`, a read-only copy made on
    /// first touch and never invalidated, which is what GPU-SM's L1 read-only cache holds.
    RemoteCached,
}

impl FilterAccess {
    fn mode(self) -> AccessMode {
        match self {
            FilterAccess::Replicate => AccessMode::Migrate,
            FilterAccess::Remote => AccessMode::Remote,
            FilterAccess::RemoteCached => AccessMode::ReplicateRead,
        }
    }
}

#[derive(Args, Clone)]
pub struct ConvolutionOpts {
    /// Image side N: the image is N × N f32 pixels (at most 16384).
    #[arg(long, default_value_t = 1024)]
    size: u32,
    /// Filter side F: odd, 3 to 31 (GPU-SM used 3 and 5).
    #[arg(long, default_value_t = 5)]
    filter: u32,
    /// Where the filter matrix lives.
    #[arg(long, value_enum, default_value = "replicate")]
    filter_access: FilterAccess,
    /// The axis the image is cut along: x (columns) or y (rows). N must be a multiple of the
    /// device count.
    #[arg(long, default_value = "y", value_parser = parse_split)]
    split: Axis,
    /// Number of devices.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// explicit, migrate or remote (needs the runtime's remote access mode).
    #[arg(long, default_value = "migrate", value_parser = parse_access)]
    access: Access,
    /// Measured filter applications (ping-pong between two images).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Applications run first and counted nowhere.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Texture page side P: a power of two.
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How passes get their pages; default two-pass for migrate, relaunch for explicit and
    /// remote (docs/EVALUATION.md says why).
    #[arg(long, value_parser = parse_procedure())]
    procedure: Option<Procedure>,
    /// Also run the plain single-device reference and compare bit for bit.
    #[arg(long)]
    verify: bool,
    /// Output directory for report.json.
    #[arg(long, default_value = "out/convolution")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn run(o: &ConvolutionOpts) -> Result<()> {
    let s = Setup {
        kind: Kind::Convolution {
            filter: o.filter,
            filter_mode: o.filter_access.mode(),
        },
        size: o.size,
        split: o.split,
        devices: o.devices,
        access: o.access,
        page: o.page.get(),
        steps: o.steps,
        warmup: o.warmup,
        procedure: o.procedure,
        model: o.node.model.into(),
    };
    crate::halo::run_one(&s, &o.node, &o.out, o.verify)
}

fn parse_filters(s: &str) -> Result<List, String> {
    parse_list_of(s, "filter size", |f| {
        tessera_workloads::convolution::check_filter(f).map_err(|e| e.to_string())
    })
}

#[derive(Args, Clone)]
pub struct ConvolutionSweepOpts {
    /// Image side N.
    #[arg(long, default_value_t = 512)]
    size: u32,
    /// Filter sides, a list such as 3,5,7,9,11 (each odd).
    #[arg(long, default_value = "3,5,7,9,11", value_parser = parse_filters)]
    filter: List,
    /// Device counts, a list such as 1,2,4,8; the first is the speed-ups' base.
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Access modes, a list of explicit, migrate, remote.
    #[arg(long, default_value = "explicit,migrate", value_parser = parse_accesses)]
    access: Accesses,
    #[arg(long, default_value = "y", value_parser = parse_split)]
    split: Axis,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How passes get their pages; default two-pass for migrate, relaunch otherwise.
    #[arg(long, value_parser = parse_procedure())]
    procedure: Option<Procedure>,
    /// Output directory: sweep.csv, reports.json, speedup.svg/png.
    #[arg(long, default_value = "out/sweep-convolution")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn sweep(o: &ConvolutionSweepOpts) -> Result<()> {
    let mut setups = Vec::new();
    for &access in &o.access.0 {
        for &filter in &o.filter.0 {
            for &devices in &o.devices.0 {
                setups.push(Setup {
                    kind: Kind::Convolution {
                        filter,
                        filter_mode: AccessMode::Migrate,
                    },
                    size: o.size,
                    split: o.split,
                    devices: devices as usize,
                    access,
                    page: o.page.get(),
                    steps: o.steps,
                    warmup: o.warmup,
                    procedure: o.procedure,
                    model: o.node.model.into(),
                });
            }
        }
    }
    crate::halo::sweep(setups, &o.node, "filter", &o.out)
}
