//! The run report: printed as a table and written as report.json. Every time at its top
//! level and per device is measured wall time on this machine (`time_kind`); the `modeled`
//! section alone holds time modeled on a topology, and says so in its own `time_kind`.

use std::path::Path;

use anyhow::{Context, Result};
use tessera_model::Topology;

pub use tessera_workloads::boiling::report::*;

use crate::measure::Run;
use crate::RunOpts;

/// The report of `run`, made with the options `o` it ran with.
pub fn collect(run: &Run, o: &RunOpts, topo: &Topology, field_checksum: String) -> Result<Report> {
    Ok(Report::collect(
        run,
        &crate::measure::settings(o),
        o.size,
        o.node.base.backend.name(),
        &o.node.config(o.devices),
        topo,
        field_checksum,
    )?)
}

/// Writes RGBA8 rows stored from the lower left as a PNG (whose rows run from the top).
pub fn write_png(path: &Path, w: u32, h: u32, rgba_lower_left: &[u8]) -> Result<()> {
    let row = w as usize * 4;
    let flipped: Vec<u8> = rgba_lower_left
        .chunks_exact(row)
        .rev()
        .flatten()
        .copied()
        .collect();
    image::save_buffer(path, &flipped, w, h, image::ExtendedColorType::Rgba8)
        .with_context(|| format!("cannot write {}", path.display()))
}
