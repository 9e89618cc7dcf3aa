//! What the litmus tests that walk the Linux kernel's tests share.

use std::path::{Path, PathBuf};

/// Where the Linux kernel's tests sit: beside the worktrees, in `../shared/litmus/lkmm`
/// (`TESSERA_LKMM` overrides); they are not part of this repository, so the folder may be
/// missing.
pub fn lkmm_path() -> PathBuf {
    std::env::var_os("TESSERA_LKMM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/litmus/lkmm")
        })
}

/// Appends every `.litmus` file below `dir` to `out`, then sorts `out`.
pub fn litmus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            litmus_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "litmus") {
            out.push(p);
        }
    }
    out.sort();
}
