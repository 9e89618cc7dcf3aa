//! Passes split across devices on page boundaries: no page of the written texture is written
//! by two devices, so a pass whose pages are resident runs once per device, nothing
//! relaunched, even where the rows do not divide evenly into page rows.
//!
//! Real threads: off under the `shuttle` feature, as the runtime's other thread tests are.
#![cfg(not(feature = "shuttle"))]

use tessera_core::{ObjectDesc, TexelFormat};
use tessera_runtime::{Bound, Domain, Fault, Invocation, Kernel, Partition, System, SystemConfig};

const W: u32 = 64;
/// Five page rows: an even split of two devices cuts the third.
const H: u32 = 80;
const PAGE: u32 = 16;

/// out(x, y) = x + 1000·y, written at the invocation's own texel.
struct Fill {
    output: tessera_core::ObjectId,
}

impl Kernel for Fill {
    fn name(&self) -> &'static str {
        "split_test_fill"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.output, x, y, (x + 1000 * y) as f32)
    }
}

/// A node of two devices, `cfg`'s cut, with the W × H texture the passes write, and how
/// `run_pass` cuts a pass over it.
fn node(cfg: SystemConfig) -> (System, tessera_core::ObjectEntry, Vec<Domain>) {
    let sys = System::cpu(&cfg.threads(2)).unwrap();
    let out = sys
        .create(
            ObjectDesc::texture(W, H, TexelFormat::R32Float, PAGE).unwrap(),
            None,
        )
        .unwrap();
    let regions = sys
        .regions(&[Bound::new(&out)], W, H, Partition::Rows)
        .unwrap();
    (sys, out, regions)
}

#[test]
fn a_pass_whose_rows_do_not_divide_into_page_rows_is_cut_on_a_page_and_relaunches_nothing() {
    let (sys, out, regions) = node(SystemConfig::new(2));
    let rows: Vec<(u32, u32)> = regions
        .iter()
        .map(|d| match d {
            &Domain::Rect { y0, y1, .. } => (y0, y1),
            Domain::List(_) => unreachable!("regions are rectangles"),
        })
        .collect();
    // Three page rows and two: the even cut at 40 would leave rows 32..48 to both devices.
    assert_eq!(rows, [(0, 48), (48, 80)]);
    for pass in 0..3 {
        let stats = sys
            .run_kernel(Fill { output: out.id }, &[&out], W, H)
            .unwrap();
        if pass > 0 {
            for (d, s) in stats.iter().enumerate() {
                assert_eq!(
                    (s.launches, s.relaunched),
                    (1, 0),
                    "pass {pass}, device {d}: {s:?}"
                );
            }
        }
    }
    let want: Vec<f32> = (0..H)
        .flat_map(|y| (0..W).map(move |x| (x + 1000 * y) as f32))
        .collect();
    assert_eq!(sys.read_f32(&out).unwrap(), want);
}

#[test]
fn split_on_pages_off_cuts_evenly_as_the_paper() {
    let (_, _, regions) = node(SystemConfig::new(2).split_on_pages(false));
    assert!(matches!(
        regions[..],
        [
            Domain::Rect { y0: 0, y1: 40, .. },
            Domain::Rect { y0: 40, y1: 80, .. }
        ]
    ));
}

/// a(x, y) = x + 100·y + 10000·pass and b(x, y) its negation, written at the invocation's
/// texel, a first.
struct FillTwo {
    a: tessera_core::ObjectId,
    b: tessera_core::ObjectId,
    pass: u32,
}

impl Kernel for FillTwo {
    fn name(&self) -> &'static str {
        "split_test_fill_two"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = (x + 100 * y + 10_000 * self.pass) as f32;
        inv.store_f32(self.a, x, y, v)?;
        inv.store_f32(self.b, x, y, -v)
    }
}

/// Four devices, each a band of a pass over one page of each of two textures: every device
/// writes both pages in every pass, and a launch that misses one stops there. Asking only for
/// each round's newest miss let the devices take the pages from each other round after round
/// with no launch ever holding both (the game trace on four devices over a screen one page
/// wide stopped with "pass did not converge"); every pass must finish, with the last pass's
/// values in both textures.
#[test]
fn devices_writing_the_same_two_pages_in_one_pass_all_finish() {
    const SIDE: u32 = 16;
    let sys = System::cpu(&SystemConfig::new(4).threads(2)).unwrap();
    let make = || {
        sys.create(
            ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, SIDE).unwrap(),
            None,
        )
        .unwrap()
    };
    let (a, b) = (make(), make());
    const PASSES: u32 = 200;
    for pass in 0..PASSES {
        sys.run_kernel(
            FillTwo {
                a: a.id,
                b: b.id,
                pass,
            },
            &[&a, &b],
            SIDE,
            SIDE,
        )
        .unwrap_or_else(|e| panic!("pass {pass}: {e}"));
    }
    let want: Vec<f32> = (0..SIDE)
        .flat_map(|y| (0..SIDE).map(move |x| (x + 100 * y + 10_000 * (PASSES - 1)) as f32))
        .collect();
    assert_eq!(sys.read_f32(&a).unwrap(), want);
    let negated: Vec<f32> = want.iter().map(|v| -v).collect();
    assert_eq!(sys.read_f32(&b).unwrap(), negated);
}
