//! Mipmapped textures on the CPU backend: every level read through the page table equals a
//! chain built here by a naive box filter; a level's texel lands on the page a naive walk of
//! the chain numbers; samples equal a naive sampler written here from the documented
//! arithmetic (docs/TEXTURES.md), with and without borders;
//! bad inputs are typed errors.
#![cfg(not(feature = "shuttle"))]

#[path = "mip/kernels.rs"]
mod kernels;

use kernels::{
    copy_level, grid, grid_words, level0, level_errors, sample_grid, upload, ADDRESSINGS, FILTERS,
    H, PAGE, W, WINDOWS,
};
use tessera_core::{
    AccessMode, Addressing, CoreError, Filter, ObjectDesc, ObjectEntry, Sampler, TexelFormat,
    Window,
};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, System, SystemConfig};

/// The chain by the rule as written: each texel of level l + 1 the rounded mean of the 2 × 2
/// texels of level l at (2x, 2y), clamped into level l, computed in floating point.
fn naive_chain(w: u32, h: u32, levels: u32) -> Vec<Vec<u32>> {
    let mut out = vec![level0(w, h)];
    let (mut cw, mut ch) = (w, h);
    for _ in 1..levels {
        let (nw, nh) = ((cw / 2).max(1), (ch / 2).max(1));
        let prev = out.last().unwrap();
        let mut next = vec![0u32; (nw * nh) as usize];
        for y in 0..nh {
            for x in 0..nw {
                let mut word = 0u32;
                for k in 0..4 {
                    let mut sum = 0.0f64;
                    for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
                        let sx = (2 * x + dx).min(cw - 1);
                        let sy = (2 * y + dy).min(ch - 1);
                        sum += ((prev[(sy * cw + sx) as usize] >> (8 * k)) & 255) as f64;
                    }
                    word |= ((sum / 4.0 + 0.5).floor() as u32) << (8 * k);
                }
                next[(y * nw + x) as usize] = word;
            }
        }
        out.push(next);
        (cw, ch) = (nw, nh);
    }
    out
}

fn fold(c: i64, n: i64, wrap: bool) -> i64 {
    if wrap {
        ((c % n) + n) % n
    } else {
        c.max(0).min(n - 1)
    }
}

/// One sample, by the documented arithmetic, in i64 and f64, over the chain built above.
fn naive_sample(
    chain: &[Vec<u32>],
    filter: Filter,
    wrap: bool,
    win: (u32, u32, u32, u32),
    (u, v, lod): (f32, f32, f32),
) -> u32 {
    let levels = chain.len() as i64;
    let fixed = |c: f32| -> i64 {
        let f = (c.clamp(-16384.0, 16384.0) as f64 * 65536.0).floor() as i64;
        if wrap {
            f.rem_euclid(65536)
        } else {
            f.clamp(0, 65536)
        }
    };
    let (uf, vf) = (fixed(u), fixed(v));
    let lf = ((lod.clamp(0.0, 64.0) as f64 * 256.0).floor() as i64).min((levels - 1) * 256);
    let level_w = |l: i64| ((W >> l).max(1)) as i64;
    let window = |l: i64| {
        (
            (win.0 >> l) as i64,
            (win.1 >> l) as i64,
            ((win.2 >> l).max(1)) as i64,
            ((win.3 >> l).max(1)) as i64,
        )
    };
    let tap = |l: i64, i: i64, j: i64| -> i64 {
        let (wx, wy, ww, wh) = window(l);
        let (x, y) = (wx + fold(i, ww, wrap), wy + fold(j, wh, wrap));
        chain[l as usize][(y * level_w(l) + x) as usize] as i64
    };
    let ch = |c: i64, k: i64| (c >> (8 * k)) & 255;
    let bilinear = |l: i64| -> i64 {
        let (_, _, ww, wh) = window(l);
        let s = uf * ww / 256 - 128;
        let t = vf * wh / 256 - 128;
        let (i, j) = (s.div_euclid(256), t.div_euclid(256));
        let (a, b) = (s - 256 * i, t - 256 * j);
        let taps = [
            (tap(l, i, j), (256 - a) * (256 - b)),
            (tap(l, i + 1, j), a * (256 - b)),
            (tap(l, i, j + 1), (256 - a) * b),
            (tap(l, i + 1, j + 1), a * b),
        ];
        (0..4)
            .map(|k| {
                let sum: i64 = taps.iter().map(|&(c, wt)| ch(c, k) * wt).sum();
                ((sum + 32768) / 65536) << (8 * k)
            })
            .sum()
    };
    let c = match filter {
        Filter::Nearest => {
            let l = ((lf + 128) / 256).min(levels - 1);
            let (_, _, ww, wh) = window(l);
            tap(
                l,
                (uf * ww / 65536).min(ww - 1),
                (vf * wh / 65536).min(wh - 1),
            )
        }
        Filter::Bilinear => bilinear(((lf + 128) / 256).min(levels - 1)),
        Filter::Trilinear => {
            let (l, f) = (lf / 256, lf % 256);
            if f == 0 {
                bilinear(l)
            } else {
                let (c0, c1) = (bilinear(l), bilinear(l + 1));
                (0..4)
                    .map(|k| ((ch(c0, k) * (256 - f) + ch(c1, k) * f + 128) / 256) << (8 * k))
                    .sum()
            }
        }
    };
    c as u32
}

fn system(devices: usize) -> System {
    System::cpu(&SystemConfig::new(devices)).unwrap()
}

#[test]
fn every_level_reads_back_through_the_page_table() {
    let levels = ObjectDesc::mipmapped(
        W,
        H,
        TexelFormat::Rgba8Unorm,
        PAGE,
        None,
        0,
        Addressing::Wrap,
    )
    .unwrap()
    .mip()
    .unwrap()
    .0
    .levels();
    let want = naive_chain(W, H, levels);
    for addressing in ADDRESSINGS {
        for border in [0, 1, 2] {
            let sys = system(2);
            let (tex, _) = upload(&sys, addressing, border);
            for l in 0..levels {
                let (lw, lh) = ((W >> l).max(1), (H >> l).max(1));
                let (_, got) = copy_level(&sys, &tex, l);
                let level = &want[l as usize];
                for y in 0..H {
                    for x in 0..W {
                        let w = level[(y.min(lh - 1) * lw + x.min(lw - 1)) as usize];
                        assert_eq!(
                            got[(y * W + x) as usize],
                            w,
                            "level {l} at ({x}, {y}), border {border}, {addressing:?}"
                        );
                    }
                }
            }
        }
    }
}

/// The host's short path: `create_mip_rgba8` from level 0 alone, every level read back by
/// the host (`read_mip_rgba8`) and through the page table equal to the naive chain; a
/// description that is not mipmapped, a level 0 of the wrong size and a level past the chain
/// are typed errors.
#[test]
fn the_host_makes_and_reads_a_chain_from_its_level_0() {
    let sys = system(2);
    for border in [0, 1] {
        let desc = ObjectDesc::mipmapped(
            W,
            H,
            TexelFormat::Rgba8Unorm,
            PAGE,
            None,
            border,
            Addressing::Clamp,
        )
        .unwrap();
        let levels = desc.mip().unwrap().0.levels();
        let want = naive_chain(W, H, levels);
        let tex = sys.create_mip_rgba8(desc, &level0(W, H)).unwrap();
        for l in 0..levels {
            assert_eq!(
                sys.read_mip_rgba8(&tex, l).unwrap(),
                want[l as usize],
                "level {l}, border {border}"
            );
        }
        let (lw, lh) = ((W >> 1).max(1), (H >> 1).max(1));
        let (_, got) = copy_level(&sys, &tex, 1);
        assert_eq!(
            got[(3 * W + 2) as usize],
            want[1][(3.min(lh - 1) * lw + 2) as usize]
        );
        assert!(matches!(
            sys.read_mip_rgba8(&tex, levels),
            Err(RuntimeError::Core(CoreError::LevelOutOfRange { .. }))
        ));
        // A new level 0 makes every level again; the old one back gives the old chain.
        let other: Vec<u32> = level0(W, H).iter().map(|w| w ^ 0x00ff_00ff).collect();
        sys.write_mip_rgba8(&tex, &other).unwrap();
        assert_eq!(sys.read_mip_rgba8(&tex, 0).unwrap(), other);
        assert_ne!(sys.read_mip_rgba8(&tex, 1).unwrap(), want[1]);
        sys.write_mip_rgba8(&tex, &level0(W, H)).unwrap();
        for l in 0..levels {
            assert_eq!(sys.read_mip_rgba8(&tex, l).unwrap(), want[l as usize]);
        }
        // A texture relabelled as a chain of one level is not the object it names.
        let plain = sys
            .create(
                ObjectDesc::texture(PAGE, PAGE, TexelFormat::Rgba8Unorm, PAGE).unwrap(),
                Some(vec![3; (PAGE * PAGE * 4) as usize]),
            )
            .unwrap();
        let mut relabelled = plain;
        relabelled.desc = ObjectDesc::mipmapped(
            PAGE,
            PAGE,
            TexelFormat::Rgba8Unorm,
            PAGE,
            Some(1),
            0,
            Addressing::Clamp,
        )
        .unwrap();
        assert!(matches!(
            sys.read_mip_rgba8(&relabelled, 0),
            Err(RuntimeError::NotLive { .. })
        ));
        assert!(matches!(
            sys.create_mip_rgba8(desc, &level0(W, H)[1..]),
            Err(RuntimeError::DataSize { .. })
        ));
    }
    let plain = ObjectDesc::texture(W, H, TexelFormat::Rgba8Unorm, PAGE).unwrap();
    assert!(matches!(
        sys.create_mip_rgba8(plain, &level0(W, H)),
        Err(RuntimeError::Config(_))
    ));
    let flat = sys.create_f32(8, 8, 4, None).unwrap();
    assert!(matches!(
        sys.read_mip_rgba8(&flat, 0),
        Err(RuntimeError::Core(CoreError::WrongKind { .. }))
    ));
}

/// Reads texel (x, y) of one level, from invocation (0, 0).
struct Probe {
    tex: tessera_core::ObjectId,
    level: u32,
    x: u32,
    y: u32,
}

impl Kernel for Probe {
    fn name(&self) -> &'static str {
        "mip_test_probe"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _: u32, _: u32) -> Result<(), Fault> {
        inv.load_rgba8_level(self.tex, self.level, self.x, self.y)
            .map(|_| ())
    }
}

#[test]
fn a_level_texel_is_on_the_page_a_naive_walk_numbers() {
    // Number each page the first time a walk over levels, rows and texels meets it.
    let levels = naive_chain(W, H, 6).len() as u32;
    let mut pages = std::collections::HashMap::new();
    for l in 0..levels {
        for t in 0..(H >> l).max(1) {
            for s in 0..(W >> l).max(1) {
                let n = pages.len() as u64;
                pages.entry((l, s / PAGE, t / PAGE)).or_insert(n);
            }
        }
    }
    for (l, x, y) in [
        (0, 0, 0),
        (0, 36, 20),
        (0, 17, 9),
        (1, 17, 9),
        (2, 8, 4),
        (3, 3, 1),
        (5, 0, 0),
    ] {
        let sys = system(1);
        // Another object first, so that the chain does not start at global page 0.
        let _before = sys
            .create(
                ObjectDesc::texture(20, 20, TexelFormat::R32Float, PAGE).unwrap(),
                None,
            )
            .unwrap();
        let (tex, _) = upload(&sys, Addressing::Clamp, 0);
        assert_eq!(tex.pages().count(), pages.len());
        let k = Probe {
            tex: tex.id,
            level: l,
            x,
            y,
        };
        sys.run_kernel(k, &[&tex], 1, 1).unwrap();
        let (_, dir) = sys.mm.memory().unwrap();
        let held: Vec<u64> = tex
            .pages()
            .filter(|&p| !dir[p as usize].copies.is_empty())
            .map(|p| p - tex.page_offset)
            .collect();
        assert_eq!(
            held,
            vec![pages[&(l, x / PAGE, y / PAGE)]],
            "level {l} texel ({x}, {y})"
        );
    }
}

fn run_samples(
    sys: &System,
    tex: &ObjectEntry,
    sampler: Sampler,
    window: Option<Window>,
    g: &[(f32, f32, f32)],
) -> Vec<u32> {
    let n = g.len() as u32;
    let rows = n / kernels::COLS;
    let coords = sys
        .create(
            ObjectDesc::buffer(4 * 3 * n as u64, 256).unwrap(),
            Some(grid_words(g)),
        )
        .unwrap();
    sample_grid(sys, tex, &coords, rows, sampler, window).1
}

#[test]
fn samples_equal_a_naive_sampler_with_and_without_borders() {
    let sys = system(2);
    let levels = naive_chain(W, H, 6).len() as u32;
    let chain = naive_chain(W, H, levels);
    let g = grid(levels);
    for object in ADDRESSINGS {
        let plain = upload(&sys, object, 0).0;
        let bordered = upload(&sys, object, 1).0;
        for filter in FILTERS {
            for addressing in ADDRESSINGS {
                for window in WINDOWS {
                    let sampler = Sampler { filter, addressing };
                    let a = run_samples(&sys, &plain, sampler, window, &g);
                    let b = run_samples(&sys, &bordered, sampler, window, &g);
                    let win = window.map_or((0, 0, W, H), |w| (w.x, w.y, w.width, w.height));
                    let want: Vec<u32> = g
                        .iter()
                        .map(|&c| {
                            naive_sample(&chain, filter, addressing == Addressing::Wrap, win, c)
                        })
                        .collect();
                    let what = format!(
                        "{filter:?}, object {object:?}, sampler {addressing:?}, window {window:?}"
                    );
                    assert_eq!(a, want, "{what}, no border");
                    assert_eq!(b, a, "{what}: the border changed a sample");
                }
            }
        }
    }
}

#[test]
fn bad_mipmapped_objects_and_accesses_are_typed_errors() {
    let sys = system(1);
    let desc = ObjectDesc::mipmapped(
        W,
        H,
        TexelFormat::Rgba8Unorm,
        PAGE,
        None,
        1,
        Addressing::Wrap,
    )
    .unwrap();
    for mode in [AccessMode::Migrate, AccessMode::Remote] {
        assert!(matches!(
            sys.create_with(desc, None, mode),
            Err(RuntimeError::Core(CoreError::BorderOnWritable { .. }))
        ));
    }
    assert!(matches!(
        ObjectDesc::mipmapped(
            W,
            H,
            TexelFormat::Rgba8Unorm,
            PAGE,
            None,
            3,
            Addressing::Wrap
        ),
        Err(CoreError::BorderTooWide { border: 3, page: 8 })
    ));
    assert!(matches!(
        ObjectDesc::mipmapped(W, H, TexelFormat::R32Float, PAGE, None, 0, Addressing::Wrap),
        Err(CoreError::MipFormat { .. })
    ));
    assert!(matches!(
        ObjectDesc::mipmapped(
            W,
            H,
            TexelFormat::Rgba8Unorm,
            PAGE,
            Some(7),
            0,
            Addressing::Wrap
        ),
        Err(CoreError::LevelCount {
            asked: 7,
            full: 6,
            ..
        })
    ));
    assert!(matches!(
        ObjectDesc::mipmapped(
            1 << 16,
            2,
            TexelFormat::Rgba8Unorm,
            PAGE,
            None,
            0,
            Addressing::Wrap
        ),
        Err(CoreError::MipTooWide { .. })
    ));
    let [level6, texel, kind] = level_errors(&sys);
    let err = level6;
    assert!(
        matches!(
            &err,
            RuntimeError::Kernel {
                source: CoreError::LevelOutOfRange {
                    level: 6,
                    levels: 6
                },
                ..
            }
        ),
        "{err}"
    );
    let err = texel;
    assert!(
        matches!(
            &err,
            RuntimeError::Kernel {
                source: CoreError::TexelOutOfLevel {
                    level: 2,
                    s: 9,
                    width: 9,
                    height: 5,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
    let err = kind;
    assert!(
        matches!(
            &err,
            RuntimeError::Kernel {
                source: CoreError::WrongKind {
                    expected: tessera_runtime::MIPMAPPED,
                    ..
                },
                ..
            }
        ),
        "{err}"
    );
}
