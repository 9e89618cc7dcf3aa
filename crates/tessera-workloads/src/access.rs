//! The texel access kernel bodies are written against lives in the runtime's kernel contract
//! ([`tessera_runtime::TexelAccess`]); re-exported here for the workloads' kernels.
pub use tessera_runtime::{Plain, PlainInput, PlainOutput, TexelAccess};
