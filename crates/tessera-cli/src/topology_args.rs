//! `--topology NAME|FILE`: a preset by name, else a TOML file by path.

use std::path::Path;

use anyhow::{Context, Result};
use tessera_model::{Topology, TopologyError, PRESETS};

/// The topology for a run of `devices` devices.
pub fn load(spec: &str, devices: usize) -> Result<Topology> {
    if PRESETS.contains(&spec) {
        return Ok(Topology::preset(spec, devices)?);
    }
    let path = Path::new(spec);
    if !path.exists() {
        // A bare word is most likely a misspelt preset; say so rather than "no such file".
        return Err(TopologyError::UnknownPreset {
            name: spec.to_string(),
        }
        .into());
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read topology file {}", path.display()))?;
    let topo = Topology::from_toml_str(&text, &path.display().to_string())?;
    topo.check_devices(devices)?;
    Ok(topo)
}
