//! Boiling run frame by frame and pass by pass ([`tessera_workloads::boiling::modeled`]) on
//! nodes built from the options: `run` and both sweeps go through [`run_boiling`], which is
//! why a sweep's CSV row and a `tessera run` report of the same settings hold the same
//! counters.

use anyhow::Result;
use tessera_model::Topology;
use tessera_workloads::boiling::modeled::{self, Settings};
use tessera_workloads::boiling::sim::PagedBoiling;

pub use tessera_workloads::boiling::modeled::Run;

use crate::RunOpts;

/// Builds a node and the simulation for `o` (and, in the isolated model, the second node)
/// and runs them with [`modeled::run_on_nodes`], `after_frame` after every frame.
pub fn run_boiling(
    o: &RunOpts,
    topo: &Topology,
    after_frame: impl FnMut(&PagedBoiling, u32) -> Result<()>,
) -> Result<Run> {
    topo.check_devices(o.devices)?;
    let make = |home| {
        o.node
            .base
            .system(&o.node.config(o.devices).home_file(home))
    };
    let home = o.node.home_file.as_deref();
    modeled::run_on_nodes(make, home, o.size, &settings(o), topo, after_frame)
}

/// The settings of `o` that the runner takes beside its nodes.
pub fn settings(o: &RunOpts) -> Settings {
    Settings {
        devices: o.devices,
        page: o.page.get(),
        partition: o.partition,
        procedure: o.procedure,
        warmup: o.warmup,
        frames: o.frames,
        model: o.node.model.into(),
    }
}

/// Frames of the field `run_boiling` simulates for `o`: what its `after_frame` counts up to.
/// The model never changes it.
pub fn simulated_frames(o: &RunOpts) -> u32 {
    o.warmup + o.frames
}
