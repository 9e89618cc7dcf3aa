//! The stencil and the convolution in every version equal their plain single-device
//! reference bit for bit on the CPU backend, for 1–4 devices, every split and a couple of
//! halo and filter sizes, in all three versions (explicit, migrate, remote); bad settings are
//! typed errors; remote traffic matches a hand count.

use tessera_core::AccessMode;
use tessera_runtime::{Procedure, Schedule, System, SystemConfig};
use tessera_workloads::convolution;
use tessera_workloads::decomp::runner::Decomposed;
use tessera_workloads::decomp::{Access, Axis, DecompError};
use tessera_workloads::stencil;

fn sys(devices: usize) -> System {
    System::cpu(&SystemConfig::new(devices).threads(2)).unwrap()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

fn steps(mut d: Decomposed, n: u32, procedure: Procedure) -> Vec<f32> {
    for s in 0..n {
        // Both schedules must give the same field; alternate them.
        let schedule = if s % 2 == 0 {
            Schedule::Concurrent
        } else {
            Schedule::Isolated
        };
        d.step(procedure, schedule).unwrap();
    }
    d.field().unwrap()
}

const N: u32 = 12;
const STEPS: u32 = 3;

#[test]
fn stencil_every_version_split_and_device_count_equals_the_reference() {
    let init = stencil::initial(N);
    for halo in [1, 3] {
        let want = bits(&stencil::reference::run(&init, N, halo, STEPS));
        assert_ne!(want, bits(&init), "the steps must change the field");
        for access in [Access::Explicit, Access::Migrate, Access::Remote] {
            for split in [Axis::X, Axis::Y, Axis::Z] {
                for devices in 1..=4 {
                    // Pages of 4 cut the 12-cell slabs of 3 devices at page boundaries and
                    // 4 devices' 3-cell slabs inside pages (two devices write one page).
                    let d = stencil::decomposed(sys(devices), N, halo, split, access, 4).unwrap();
                    let procedure = if devices % 2 == 0 {
                        Procedure::Relaunch
                    } else {
                        Procedure::TwoPass
                    };
                    let got = bits(&steps(d, STEPS, procedure));
                    assert!(
                        got == want,
                        "stencil differs: halo {halo} {access:?} split {split:?} devices {devices}"
                    );
                }
            }
        }
    }
}

#[test]
fn stencil_paper_halo_on_a_larger_field() {
    // Halo 4, one of GPU-SM's (Table 1), on 16³ split 4 ways: slabs exactly as wide as the halo.
    let n = 16;
    let init = stencil::initial(n);
    let want = bits(&stencil::reference::run(&init, n, 4, 2));
    for access in [Access::Explicit, Access::Migrate, Access::Remote] {
        for split in [Axis::X, Axis::Z] {
            let d = stencil::decomposed(sys(4), n, 4, split, access, 8).unwrap();
            assert!(
                bits(&steps(d, 2, Procedure::Relaunch)) == want,
                "{access:?} {split:?}"
            );
        }
    }
}

#[test]
fn convolution_every_version_split_and_device_count_equals_the_reference() {
    let n = 20;
    let init = convolution::initial(n);
    for f in [3, 7] {
        let w = convolution::filter(f);
        let want = bits(&convolution::reference::run(&init, n, &w, f, STEPS));
        assert_ne!(want, bits(&init));
        for access in [Access::Explicit, Access::Migrate, Access::Remote] {
            for split in [Axis::X, Axis::Y] {
                for devices in [1, 2, 4] {
                    // The filter in each of its modes (the explicit version ignores it).
                    let mode = [
                        AccessMode::Migrate,
                        AccessMode::ReplicateRead,
                        AccessMode::Remote,
                    ][devices % 3];
                    let d =
                        convolution::decomposed_with(sys(devices), n, f, split, access, 4, mode)
                            .unwrap();
                    let got = bits(&steps(d, STEPS, Procedure::Relaunch));
                    assert!(
                        got == want,
                        "convolution differs: filter {f} {access:?} split {split:?} devices {devices}"
                    );
                }
            }
        }
    }
    // Three devices need a side divisible by three.
    let n = 18;
    let init = convolution::initial(n);
    let w = convolution::filter(5);
    let want = bits(&convolution::reference::run(&init, n, &w, 5, 2));
    for access in [Access::Explicit, Access::Migrate, Access::Remote] {
        let d = convolution::decomposed(sys(3), n, 5, Axis::Y, access, 4).unwrap();
        assert!(bits(&steps(d, 2, Procedure::TwoPass)) == want, "{access:?}");
    }
}

#[test]
fn the_filter_sums_to_one_and_is_a_tent() {
    // 3×3 by hand: [1 2 1; 2 4 2; 1 2 1] / 16.
    let w = convolution::filter(3);
    let want: Vec<f32> = [1., 2., 1., 2., 4., 2., 1., 2., 1.]
        .iter()
        .map(|v| v / 16.0)
        .collect();
    assert_eq!(w, want);
}

#[test]
fn the_stencil_reference_matches_a_hand_computation() {
    // A single 1 in the middle of a 5³ zero field, radius 1: the centre keeps w0, each of
    // its six neighbours gets its axis weight, nothing else changes.
    let n = 5;
    let mut f = vec![0.0; 125];
    let at = |x: usize, y: usize, z: usize| (z * 5 + y) * 5 + x;
    f[at(2, 2, 2)] = 1.0;
    let [w0, wx, wy, wz] = stencil::weights(1);
    let out = stencil::reference::run(&f, n, 1, 1);
    assert_eq!(out[at(2, 2, 2)], w0);
    assert_eq!(out[at(1, 2, 2)], wx);
    assert_eq!(out[at(2, 3, 2)], wy);
    assert_eq!(out[at(2, 2, 1)], wz);
    assert_eq!(out.iter().filter(|v| **v != 0.0).count(), 7);
    assert!((w0 + 2.0 * (wx + wy + wz) - 1.0).abs() < 1e-6);
}

#[test]
fn bad_settings_are_typed_errors() {
    // Halo larger than a slab: 12 / 4 = 3 cells per device, halo 4.
    assert!(matches!(
        stencil::decomposed(sys(4), 12, 4, Axis::Z, Access::Migrate, 4),
        Err(DecompError::HaloTooLarge {
            halo: 4,
            slab: 3,
            ..
        })
    ));
    assert!(matches!(
        stencil::decomposed(sys(3), 16, 2, Axis::X, Access::Explicit, 4),
        Err(DecompError::NotDivisible {
            len: 16,
            devices: 3,
            ..
        })
    ));
    for f in [0, 1, 4, 33] {
        assert!(matches!(
            convolution::decomposed(sys(1), 16, f, Axis::X, Access::Migrate, 4),
            Err(DecompError::BadFilter { .. })
        ));
    }
    assert!(matches!(
        convolution::decomposed(sys(2), 16, 3, Axis::Z, Access::Migrate, 4),
        Err(DecompError::FlatAxis { .. })
    ));
}

/// The closed forms of the remote-read fractions against a count of every read.
#[test]
fn remote_read_counts_match_a_brute_force_count() {
    use tessera_workloads::decomp::{square_reads, star_reads, Grid};
    let owner = |g: &Grid, c: [i64; 3]| {
        let per = g.dims[g.axis.index()] as i64 / g.devices as i64;
        c[g.axis.index()] / per
    };
    for (dims, axis, halo, devices) in [
        ([12, 8, 6], Axis::X, 2, 3),
        ([8, 12, 6], Axis::Y, 3, 4),
        ([6, 8, 12], Axis::Z, 1, 2),
        ([8, 8, 8], Axis::Z, 4, 2),
    ] {
        let g = Grid::new(dims, axis, halo, devices).unwrap();
        let (mut remote, mut total) = (0u64, 0u64);
        let inside = |c: [i64; 3]| (0..3).all(|a| c[a] >= 0 && c[a] < dims[a] as i64);
        for z in 0..dims[2] as i64 {
            for y in 0..dims[1] as i64 {
                for x in 0..dims[0] as i64 {
                    let c = [x, y, z];
                    let mut reads = vec![c];
                    for a in 0..3 {
                        for s in 1..=halo as i64 {
                            for sign in [-1, 1] {
                                let mut n = c;
                                n[a] += sign * s;
                                reads.push(n);
                            }
                        }
                    }
                    for n in reads.into_iter().filter(|n| inside(*n)) {
                        total += 1;
                        remote += (owner(&g, n) != owner(&g, c)) as u64;
                    }
                }
            }
        }
        assert_eq!(star_reads(&g), (remote, total), "{dims:?} {axis:?}");
    }
    for (n, axis, halo, devices) in [(12, Axis::X, 1, 3), (16, Axis::Y, 2, 4)] {
        let g = Grid::new([n, n, 1], axis, halo, devices).unwrap();
        let (mut remote, mut total) = (0u64, 0u64);
        let r = halo as i64;
        let cl = |v: i64| v.clamp(0, n as i64 - 1);
        for y in 0..n as i64 {
            for x in 0..n as i64 {
                for j in -r..=r {
                    for i in -r..=r {
                        total += 1;
                        let c = [x, y, 0];
                        let m = [cl(x + i), cl(y + j), 0];
                        remote += (owner(&g, m) != owner(&g, c)) as u64;
                    }
                }
            }
        }
        assert_eq!(square_reads(&g), (remote, total), "{n} {axis:?}");
    }
}

/// In the remote version with slabs on page boundaries, every load of a cell another device
/// owns crosses a link once, 4 bytes, and nothing else does: the remote bytes of a step are 4 ×
/// the closed-form count of remote reads (checked against a brute-force count above), and no
/// store leaves its device. (Batch against spread is the runtime's rule, tested there; here
/// only that they add up.)
#[test]
fn remote_stencil_traffic_matches_the_hand_count() {
    use tessera_workloads::decomp::{star_reads, Grid};
    let n = 16;
    for split in [Axis::X, Axis::Y, Axis::Z] {
        let mut d = stencil::decomposed(sys(4), n, 2, split, Access::Remote, 4).unwrap();
        let before = d.sys.mm.traffic().unwrap();
        d.step(Procedure::Relaunch, Schedule::Concurrent).unwrap();
        let after = d.sys.mm.traffic().unwrap();
        let (mut read, mut write, mut batch, mut spread) = (0, 0, 0, 0);
        for (a, b) in after.iter().zip(&before) {
            let t = a.since(b).remote_total();
            read += t.read_bytes;
            write += t.write_bytes;
            batch += t.batch_bytes;
            spread += t.spread_bytes;
        }
        let (remote, _) = star_reads(&Grid::new([n; 3], split, 2, 4).unwrap());
        assert_eq!(read, 4 * remote, "{split:?}");
        assert_eq!(write, 0, "{split:?}");
        assert_eq!(batch + spread, read, "{split:?}");
    }
}

/// The larger matrix: 24³, halos 2 to 6, both procedures, every version, split and device
/// count (minutes on 2 cores; `cargo test -- --ignored`).
#[test]
#[ignore]
fn stencil_larger_matrix_equals_the_reference() {
    let n = 24;
    let init = stencil::initial(n);
    for halo in [2, 4, 6] {
        let want = bits(&stencil::reference::run(&init, n, halo, 3));
        for access in [Access::Explicit, Access::Migrate, Access::Remote] {
            for split in [Axis::X, Axis::Y, Axis::Z] {
                for devices in 1..=4 {
                    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
                        for page in [4, 8] {
                            let d = stencil::decomposed(sys(devices), n, halo, split, access, page)
                                .unwrap();
                            assert!(
                                bits(&steps(d, 3, procedure)) == want,
                                "halo {halo} {access:?} {split:?} {devices} {procedure:?} page {page}"
                            );
                        }
                    }
                }
            }
        }
    }
}
