//! OO-VR (ISCA 2019, `shared/seeds/002_…`): object-level stereo rendering across the GPU
//! modules (GPMs) of a multi-chip-module GPU, each GPM a tessera device.
//!
//! - [`objects`]: draw objects from a scene (one per BSP surface);
//! - [`tsl`](mod@tsl): the texture-sharing level and OO_APP's batching (§5.1, Eq. 1);
//! - [`predict`]: the batch cost predictor and earliest-available dispatch (§5.2, Eqs. 2–3);
//! - [`scheme`]: the distribution policies, one file each, behind one trait;
//! - [`render`]: the stereo renderer (the quake raster kernel per piece of work, each GPM's
//!   passes run alone and timed) and the modeled frame latency;
//! - [`run`]: a run's frames along a camera path, and their means.
pub mod figures;
pub mod objects;
pub mod predict;
pub mod render;
pub mod report;
pub mod run;
pub mod scheme;
pub mod tsl;

pub use objects::{objects_of, DrawObject, ObjectError};
pub use predict::{
    dispatch, fit, schedule, BatchFeatures, Coefficients, DispatchConfig, PredictError, Schedule,
};
pub use render::{
    eyes, reference_stereo, FrameReport, LinkModel, StereoOptions, StereoRenderer, IPD,
};
pub use scheme::{by_name, Scheme, SchemeError, NAMES};
pub use tsl::{batch, batch_with, tsl, Batch, TextureSet, TRIANGLE_CAP, TSL_THRESHOLD};

/// Everything the VR workload can refuse or meet, typed.
#[derive(Debug, thiserror::Error)]
pub enum VrError {
    #[error(transparent)]
    Scheme(#[from] SchemeError),
    #[error(transparent)]
    Objects(#[from] ObjectError),
    #[error(transparent)]
    Predict(#[from] PredictError),
    #[error(transparent)]
    Quake(#[from] crate::quake::QuakeError),
    #[error(transparent)]
    Runtime(#[from] tessera_runtime::RuntimeError),
    #[error(transparent)]
    Core(#[from] tessera_core::CoreError),
    #[error("{0}")]
    Config(String),
    /// A scheme's pieces of work did not compose every visible pixel exactly once.
    #[error("scheme {scheme} left {uncomposed} pixels uncomposed and composed {overdrawn} twice")]
    Uncovered {
        scheme: String,
        uncomposed: u64,
        overdrawn: u64,
    },
}
