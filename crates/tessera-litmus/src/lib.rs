//! tessera-litmus: litmus tests in the herd7 C format, run through tessera's runtime.
//!
//! The source paper (3.1) claims sequential consistency for single operations. This crate
//! checks the claim the way memory-model people do:
//!
//! - [`parse()`] reads herd7's C litmus format, as used by the Linux kernel memory model's
//!   `tools/memory-model/litmus-tests`, into a [`Test`]: per thread, memory operations
//!   (loads, stores, read-modify-writes), register steps and branches, and a final condition;
//!   locks, RCU and control flow are lowered to these (docs/LITMUS.md);
//! - [`sc`] enumerates, on its own, every outcome a sequentially consistent machine allows;
//! - [`run`] runs the test thousands of times on a node with one device per thread, every
//!   operation a pass through the coherence protocol, under random, PCT or exhaustive
//!   schedules, and reports
//!   what it saw in litmus7's layout, with any outcome the oracle forbids.
//!
//! See docs/PROTOCOL.md, "Memory model we promise".

pub mod ast;
mod files;
pub mod parse;
mod rng;
pub mod run;
pub mod sc;

use std::path::Path;

pub use ast::{Loc, Op, Outcome, Prop, Quantifier, Test, Thread};
pub use files::{expand_folders, run_files, FileOutcome, Tally};
pub use parse::{parse, parse_bytes, ErrorKind, ParseError};
pub use run::{covers, run_test, Placement, Report, RunConfig, RunError, Runner, Schedule};
pub use sc::{sc_outcomes, ScError};

/// Why a litmus file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: cannot read the file: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse { path: String, source: ParseError },
}

/// The longest litmus file read: the kernel's tests are under 2 KiB each.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Reads and parses one litmus file.
pub fn load(path: &Path) -> Result<Test, LoadError> {
    use std::io::Read;
    let name = path.display().to_string();
    let io = |source| LoadError::Io {
        path: name.clone(),
        source,
    };
    // A folder reaches here only when `expand_folders` found no test in it.
    if path.is_dir() {
        return Err(io(std::io::Error::other(
            "a folder holding no .litmus file, or one that cannot be listed",
        )));
    }
    // Read at most one byte past the bound: an endless file (`/dev/zero`) is refused, not
    // read until memory runs out.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(io(std::io::Error::other(format!(
            "longer than {} MiB; litmus tests are a few kilobytes",
            MAX_FILE_BYTES >> 20
        ))));
    }
    parse_bytes(&bytes).map_err(|source| LoadError::Parse { path: name, source })
}
