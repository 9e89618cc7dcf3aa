//! Mipmapped textures on lavapipe against the CPU backend: every level read through the page
//! table, and every sampler (filter × sampler addressing × object addressing × border ×
//! window) over a grid of (u, v, lod), give the same bits on both. The CPU side is itself
//! checked against a naive chain and a naive sampler (tessera-runtime's `tests/mip.rs`).
//!
//! Without an adapter the test prints that it skipped and passes, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails it.

mod common;

#[path = "../../tessera-runtime/tests/mip/kernels.rs"]
mod kernels;

use kernels::{
    copy_level, grid, grid_words, level_errors, sample_grid, upload, ADDRESSINGS, COLS, FILTERS, H,
    W, WINDOWS,
};
use tessera_core::{Addressing, ObjectDesc, Sampler};
use tessera_runtime::{System, SystemConfig};

fn cfg() -> SystemConfig {
    SystemConfig::new(2)
}

/// Everything the test reads back from one system, in one order: for each (object addressing,
/// border) of `objects`, every level, then every filter over both sampler addressings, with and
/// without a window.
fn run_all(sys: &System, objects: &[(Addressing, u32)]) -> Vec<(String, Vec<u32>)> {
    let mut out = Vec::new();
    let levels = MipLevels::of();
    for &(addressing, border) in objects {
        {
            let (tex, _) = upload(sys, addressing, border);
            for l in 0..levels {
                let (o, words) = copy_level(sys, &tex, l);
                out.push((format!("level {l}, border {border}, {addressing:?}"), words));
                sys.mm.free(o.id).unwrap();
            }
            let g = grid(levels);
            let rows = g.len() as u32 / COLS;
            let coords = sys
                .create(
                    ObjectDesc::buffer(4 * 3 * g.len() as u64, 256).unwrap(),
                    Some(grid_words(&g)),
                )
                .unwrap();
            for filter in FILTERS {
                for sa in ADDRESSINGS {
                    for window in WINDOWS {
                        let sampler = Sampler {
                            filter,
                            addressing: sa,
                        };
                        let (o, words) = sample_grid(sys, &tex, &coords, rows, sampler, window);
                        out.push((
                            format!(
                                "{filter:?}, sampler {sa:?}, object {addressing:?}, border {border}, window {window:?}"
                            ),
                            words,
                        ));
                        sys.mm.free(o.id).unwrap();
                    }
                }
            }
        }
    }
    out
}

struct MipLevels;
impl MipLevels {
    fn of() -> u32 {
        tessera_core::MipLayout::full_levels(W, H)
    }
}

/// Every object addressing, border and sampler addressing: seconds on lavapipe, since every
/// tap goes through one loop (invocation.wgsl, `level_sample`). The CPU twin runs the same
/// matrix against a naive sampler in tessera-runtime's `tests/mip.rs`.
#[test]
fn every_level_and_sample_on_lavapipe_equals_the_cpu_twin() {
    let objects: Vec<(Addressing, u32)> =
        ADDRESSINGS.iter().flat_map(|&a| [(a, 0), (a, 1)]).collect();
    compare(&objects);
}

fn compare(objects: &[(Addressing, u32)]) {
    let Some(gpu) = common::system(&cfg()) else {
        return;
    };
    let cpu = System::cpu(&cfg()).unwrap();
    let (a, b) = (run_all(&cpu, objects), run_all(&gpu, objects));
    assert!(!a.is_empty());
    assert_eq!(a.len(), b.len());
    for ((what, x), (_, y)) in a.iter().zip(&b) {
        let first = x.iter().zip(y).position(|(p, q)| p != q);
        assert!(
            first.is_none(),
            "{what}: CPU and wgpu differ first at sample {first:?}"
        );
    }
}

#[test]
fn level_errors_on_lavapipe_are_the_cpu_twins() {
    let Some(gpu) = common::system(&SystemConfig::default()) else {
        return;
    };
    let cpu = System::cpu(&SystemConfig::default()).unwrap();
    let errors = |sys: &System| level_errors(sys).map(|e| e.to_string());
    let (a, b) = (errors(&cpu), errors(&gpu));
    assert_eq!(a, b);
    assert!(a[0].contains("mip level 6 does not exist"), "{}", a[0]);
    assert!(a[1].contains("outside mip level 2 of 9x5"), "{}", a[1]);
    assert!(a[2].contains(tessera_runtime::MIPMAPPED), "{}", a[2]);
}
