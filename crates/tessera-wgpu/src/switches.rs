//! The environment's switches of the wgpu backend (docs/CLI.md, "Environment"): a leaf that
//! the device, the adapter's module set-up and the launch shapes read alike.

use crate::error::WgpuError;

/// Whether kernels with a footprint run through the prelude's tile path (windows in workgroup
/// memory, one barrier per workgroup) or per texel. Both give the same results and requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TilePath {
    /// Per texel. On lavapipe the tile path's barrier and workgroup memory made boiling's paged
    /// frame about 3x slower; on an H200 the per-texel path, in rows of 32 with stamps once
    /// per workgroup and page, took 3.5 ms against the tile path's 5.9 (docs/EVALUATION.md).
    #[default]
    Off,
    On,
}

impl TilePath {
    /// From `TESSERA_WGPU_TILES` (`on` or `off`; unset is off). Any other value is refused.
    pub fn from_env() -> Result<Self, WgpuError> {
        Ok(match switch(TILES)? {
            Some(true) => TilePath::On,
            _ => TilePath::Off,
        })
    }
}

/// The variables that hold the switches.
pub const TILES: &str = "TESSERA_WGPU_TILES";
pub const SPECIALIZE: &str = "TESSERA_WGPU_SPECIALIZE";
pub const BOUNDS_CHECKS: &str = "TESSERA_WGPU_BOUNDS_CHECKS";

/// [`tessera_runtime::env_switch`] as a wgpu error.
pub(crate) fn switch(name: &str) -> Result<Option<bool>, WgpuError> {
    tessera_runtime::env_switch(name).map_err(|e| WgpuError::Switch(e.to_string()))
}
