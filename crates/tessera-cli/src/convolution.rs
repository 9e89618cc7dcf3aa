//! `tessera run convolution` and `tessera sweep convolution`: GPU-SM's image filtering
//! (tessera_workloads::convolution) in its access versions; the machinery is
//! [`crate::halo`]'s.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use tessera_core::AccessMode;
use tessera_workloads::decomp::Axis;

use crate::halo::{HaloRunOpts, HaloSweepOpts, Kind};
use crate::lists::{parse_list_of, List};

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
    #[arg(long, default_value = "y", value_parser = image_axis)]
    split: Axis,
    /// Measured filter applications, the convolution's frames (ping-pong between two
    /// images). `--steps` is the older name.
    #[arg(long = "frames", visible_alias = "steps", value_name = "FRAMES", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Output directory for report.json.
    #[arg(long, default_value = "out/convolution")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    common: HaloRunOpts,
}

pub fn run(o: &ConvolutionOpts) -> Result<()> {
    let kind = Kind::Convolution {
        filter: o.filter,
        filter_mode: o.filter_access.mode(),
    };
    o.common.run(kind, o.size, o.split, o.steps, &o.out)
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
    #[arg(long, default_value = "y", value_parser = image_axis)]
    split: Axis,
    /// Output directory: sweep.csv, reports.json, speedup.svg/png.
    #[arg(long, default_value = "out/sweep-convolution")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    common: HaloSweepOpts,
}

pub fn sweep(o: &ConvolutionSweepOpts) -> Result<()> {
    let kind = |filter| Kind::Convolution {
        filter,
        filter_mode: AccessMode::Migrate,
    };
    o.common
        .sweep(o.size, o.split, &o.filter, kind, "filter", &o.out)
}

/// `--split` of a 2D image: x or y; z, a stencil's third axis, is refused as such.
fn image_axis(s: &str) -> Result<Axis, String> {
    match s {
        "x" => Ok(Axis::X),
        "y" => Ok(Axis::Y),
        "z" => Err(
            "an image has no z axis: the convolution splits along x (columns) or y (rows)".into(),
        ),
        _ => Err(format!("unknown split {s:?} (expected x or y)")),
    }
}
