//! OO-VR (ISCA 2019, `shared/seeds/002_…`): object-level stereo rendering across the GPU
//! modules of a multi-chip-module GPU. These are its pure building blocks, without rendering
//! or threads: draw objects from a scene ([`objects`]), the texture-sharing level and OO_APP's
//! batching ([`tsl`], §5.1, Eq. 1), and the batch cost predictor with earliest-available
//! dispatch ([`predict`], §5.2, Eqs. 2–3).
pub mod objects;
pub mod predict;
pub mod scheme;
pub mod tsl;

pub use objects::{objects_of, DrawObject, ObjectError};
pub use predict::{
    dispatch, fit, schedule, BatchFeatures, Coefficients, DispatchConfig, PredictError, Schedule,
};
pub use tsl::{batch, batch_with, tsl, Batch, TextureSet, TRIANGLE_CAP, TSL_THRESHOLD};
