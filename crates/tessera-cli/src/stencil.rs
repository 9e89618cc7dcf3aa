//! `tessera run stencil` and `tessera sweep stencil`: GPU-SM's 3D finite-difference stencil
//! (tessera_workloads::stencil) in its access versions; the machinery is [`crate::halo`]'s.

use std::path::PathBuf;
use tessera_core::PageSize;

use anyhow::Result;
use clap::Args;
use tessera_runtime::Procedure;
use tessera_workloads::decomp::{Access, Axis};

use crate::halo::{parse_access, parse_accesses, parse_split, Accesses, Kind, Setup};
use crate::lists::{parse_devices, parse_list_of, List};
use crate::{parse_procedure, NodeOpts};

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
    #[arg(long, default_value = "z", value_parser = parse_split)]
    split: Axis,
    /// Number of devices.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// explicit (private slabs and hand-written halo copies), migrate (one shared field,
    /// demand paging) or remote (needs the runtime's remote access mode).
    #[arg(long, default_value = "migrate", value_parser = parse_access)]
    access: Access,
    /// Measured time steps (run twice in the isolated model: together, then one device at a
    /// time).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Steps run first and counted nowhere (the pages move in on the first).
    #[arg(long, default_value_t = 1)]
    warmup: u32,
    /// Texture page side P: a power of two (the field is N × N² texels, slices stacked).
    #[arg(long, default_value = "32", value_parser = crate::parse_page)]
    page: PageSize,
    /// How passes get their pages; default two-pass for migrate, relaunch for explicit and
    /// remote (docs/EVALUATION.md says why).
    #[arg(long, value_parser = parse_procedure())]
    procedure: Option<Procedure>,
    /// Also run the plain single-device reference and compare the field bit for bit (fails
    /// the command if it differs).
    #[arg(long)]
    verify: bool,
    /// Output directory for report.json.
    #[arg(long, default_value = "out/stencil")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn run(o: &StencilOpts) -> Result<()> {
    let s = Setup {
        kind: Kind::Stencil { halo: o.halo },
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
    /// Device counts, a list such as 1,2,4,8; the first is the speed-ups' base.
    #[arg(long, default_value = "1,2,4,8", value_parser = parse_devices)]
    devices: List,
    /// Access modes, a list of explicit, migrate, remote.
    #[arg(long, default_value = "explicit,migrate", value_parser = parse_accesses)]
    access: Accesses,
    #[arg(long, default_value = "z", value_parser = parse_split)]
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
    #[arg(long, default_value = "out/sweep-stencil")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    node: NodeOpts,
}

pub fn sweep(o: &StencilSweepOpts) -> Result<()> {
    let mut setups = Vec::new();
    for &access in &o.access.0 {
        for &halo in &o.halo.0 {
            for &devices in &o.devices.0 {
                setups.push(Setup {
                    kind: Kind::Stencil { halo },
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
    crate::halo::sweep(setups, &o.node, "halo", &o.out)
}
