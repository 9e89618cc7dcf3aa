//! `tessera run convolution` and `tessera sweep convolution`: GPU-SM's image filtering
//! (tessera_workloads::convolution) in its access versions; the machinery is
//! [`crate::halo`]'s.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use tessera_runtime::Procedure;
use tessera_workloads::decomp::{Access, Axis};

use crate::halo::{parse_access, parse_accesses, parse_split, Accesses, Kind, Setup};
use crate::sweep::{parse_devices, parse_list_of, List};
use crate::{parse_procedure, NodeOpts};

/// Where the filter matrix lives (GPU-SM 6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FilterAccess {
    /// Read copies on every device: a private copy per device in the explicit version,
    /// demand-paged read copies of one shared buffer in migrate.
    Replicate,
    /// One copy read remotely by every device (needs the remote access mode).
    Remote,
    /// Remote with a read-only cache on each device (needs the remote access mode).
    RemoteCached,
}

fn check_filter_access(f: FilterAccess) -> Result<()> {
    if f != FilterAccess::Replicate {
        bail!("--filter-access {}: remote filter access needs the runtime's remote access mode (AccessMode::Remote, the `remote` branch), which this build does not have; use replicate", match f {
            FilterAccess::Remote => "remote",
            _ => "remote-cached",
        });
    }
    Ok(())
}

#[derive(Args, Clone)]
pub struct ConvolutionOpts {
    /// Image side N: the image is N × N f32 pixels (at most 16384).
    #[arg(long, default_value_t = 1024)]
    size: u32,
    /// Filter side F: odd, 3 to 31 (GPU-SM: 3 and 5; the issue: up to 11).
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
    #[arg(long, default_value_t = 2)]
    devices: usize,
    /// explicit, migrate or remote (needs the runtime's remote access mode).
    #[arg(long, default_value = "migrate", value_parser = parse_access)]
    access: Access,
    /// Measured filter applications (ping-pong between two images).
    #[arg(long, default_value_t = 2)]
    steps: u32,
    /// Applications run first and counted nowhere.
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Texture page side P: a power of two.
    #[arg(long, default_value_t = 32)]
    page: u32,
    /// How passes get their pages.
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure)]
    procedure: Procedure,
    /// Also run the plain single-device reference and compare bit for bit.
    #[arg(long)]
    verify: bool,
    /// Output directory for report.json.
    #[arg(long, default_value = "out-convolution")]
    out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn run(o: &ConvolutionOpts) -> Result<()> {
    check_filter_access(o.filter_access)?;
    let s = Setup {
        kind: Kind::Convolution { filter: o.filter },
        size: o.size,
        split: o.split,
        devices: o.devices,
        access: o.access,
        page: o.page,
        steps: o.steps,
        warmup: o.warmup,
        procedure: o.procedure,
        node: o.node.clone(),
    };
    crate::halo::run_one(&s, &o.out, o.verify)
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
    #[arg(long, default_value_t = 2)]
    steps: u32,
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    #[arg(long, default_value_t = 32)]
    page: u32,
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure)]
    procedure: Procedure,
    /// Output directory: sweep.csv, reports.json, speedup.svg/png.
    #[arg(long, default_value = "sweep-convolution")]
    out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn sweep(o: &ConvolutionSweepOpts) -> Result<()> {
    let mut setups = Vec::new();
    for &access in &o.access.0 {
        for &filter in &o.filter.0 {
            for &devices in &o.devices.0 {
                setups.push(Setup {
                    kind: Kind::Convolution { filter },
                    size: o.size,
                    split: o.split,
                    devices: devices as usize,
                    access,
                    page: o.page,
                    steps: o.steps,
                    warmup: o.warmup,
                    procedure: o.procedure,
                    node: o.node.clone(),
                });
            }
        }
    }
    crate::halo::sweep(setups, "filter", &o.out)
}
