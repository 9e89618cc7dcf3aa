//! `tessera run stencil` and `tessera sweep stencil`: GPU-SM's 3D finite-difference stencil
//! (tessera_workloads::stencil) in its access versions; the machinery is [`crate::halo`]'s.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tessera_workloads::decomp::Axis;

use crate::halo::{HaloRunOpts, HaloSweepOpts, Kind};
use crate::lists::{parse_list_of, List};

#[derive(Args, Clone)]
pub struct StencilOpts {
    /// Field side N: the field is N³ f32 cells (at most 512).
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Stencil radius, the halo width (GPU-SM: 2, 4, 8, 16). At most a device's slab.
    #[arg(long, default_value_t = 4)]
    halo: u32,
    /// The axis the field is cut along, one slab per device: x, y or z. N must be a multiple
    /// of the device count.
    #[arg(long, default_value = "z")]
    split: Axis,
    /// Measured time steps, the stencil's frames (run twice in the isolated model: together,
    /// then one device at a time). `--steps` is the older name.
    #[arg(long = "frames", visible_alias = "steps", value_name = "FRAMES", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Output directory for report.json.
    #[arg(long, default_value = "out/stencil")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    common: HaloRunOpts,
}

pub fn run(o: &StencilOpts) -> Result<()> {
    let kind = Kind::Stencil { halo: o.halo };
    o.common.run(kind, o.size, o.split, o.steps, &o.out)
}

fn parse_halos(s: &str) -> Result<List, String> {
    parse_list_of(s, "halo", |h| {
        if h == 0 {
            Err("halo 0 is no stencil: at least 1".into())
        } else {
            Ok(())
        }
    })
}

#[derive(Args, Clone)]
pub struct StencilSweepOpts {
    /// Field side N.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Halo widths, a list such as 2,4,8,16.
    #[arg(long, default_value = "2,4,8,16", value_parser = parse_halos)]
    halo: List,
    #[arg(long, default_value = "z")]
    split: Axis,
    /// Output directory: sweep.csv, reports.json, speedup.svg/png.
    #[arg(long, default_value = "out/sweep-stencil")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    common: HaloSweepOpts,
}

pub fn sweep(o: &StencilSweepOpts) -> Result<()> {
    let kind = |halo| Kind::Stencil { halo };
    o.common
        .sweep(o.size, o.split, &o.halo, kind, "halo", &o.out)
}
