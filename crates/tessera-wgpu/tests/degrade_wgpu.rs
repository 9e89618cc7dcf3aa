//! Degrading samples (`sample_rgba8_window_degraded`, `sampler::sample_degraded`) on
//! lavapipe against the CPU twin, bit for bit: a chain of which only the coarse levels are on
//! the device is sampled over a grid of (u, v, lod) by every filter; both twins give the same
//! colours, the same levels-coarser counts and ask for the same pages, and a second launch,
//! once those pages are there, is exact on both.
//!
//! Without an adapter the test prints that it skipped and passes, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails it.

mod common;

use tessera_core::mip::{chain_rgba8, slots, words_to_bytes};
use tessera_core::{
    Access, AccessMode, Addressing, Filter, GlobalPage, ObjectDesc, ObjectEntry, ObjectId,
    PageRequest, Sampler, TexelFormat, Window,
};
use tessera_runtime::{Fault, Invocation, Kernel, System, SystemConfig, WgslKernel};

const W: u32 = 37;
const H: u32 = 21;
const PAGE: u32 = 8;
const COLS: u32 = 32;
/// The first level replicated before the first launch: levels 2 and beyond (10 × 5 texels
/// and smaller, one page each).
const TAIL: u32 = 2;

/// Per sample: its colour into `out`, how many levels coarser it was served into `coarser`.
struct Degraded {
    tex: ObjectId,
    coords: ObjectId,
    out: ObjectId,
    coarser: ObjectId,
    filter: Filter,
}

const WINDOW: Window = Window {
    x: 8,
    y: 4,
    width: 16,
    height: 8,
};

impl Kernel for Degraded {
    fn name(&self) -> &'static str {
        "degrade_test_samples"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Params {
                tex: u32,
                coords: u32,
                out: u32,
                coarser: u32,
                filter_code: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let i = y * 32u + x;
                let u = bitcast<f32>(load_u32(params.coords, 3u * i));
                let v = bitcast<f32>(load_u32(params.coords, 3u * i + 1u));
                let lod = bitcast<f32>(load_u32(params.coords, 3u * i + 2u));
                let win = vec4<u32>(8u, 4u, 16u, 8u);
                let c = sample_rgba8_window_degraded(params.tex, params.filter_code, 0u, win, u, v, lod);
                store_rgba8(params.out, x, y, c.x);
                store_rgba8(params.coarser, x, y, c.y);
            }",
            &Params {
                tex: self.tex.0,
                coords: self.coords.0,
                out: self.out.0,
                coarser: self.coarser.0,
                filter_code: self.filter.code(),
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let i = y * COLS + x;
        let u = f32::from_bits(inv.load_u32(self.coords, 3 * i)?);
        let v = f32::from_bits(inv.load_u32(self.coords, 3 * i + 1)?);
        let lod = f32::from_bits(inv.load_u32(self.coords, 3 * i + 2)?);
        let s = Sampler {
            filter: self.filter,
            addressing: Addressing::Wrap,
        };
        let (c, k) = inv.sample_rgba8_window_degraded(self.tex, s, WINDOW, u, v, lod)?;
        inv.store_rgba8(self.out, x, y, c)?;
        inv.store_rgba8(self.coarser, x, y, k.to_le_bytes())
    }
}

fn level0() -> Vec<u32> {
    (0..W * H)
        .map(|i| {
            let (x, y) = (i % W, i / W);
            let (r, g, b) = (
                (x * 37 + y * 11) % 256,
                (x * x + 3 * y * y + 7) % 256,
                ((x ^ y) * 29) % 256,
            );
            r | (g << 8) | (b << 16)
        })
        .collect()
}

fn grid() -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..8 {
        for j in 0..4 {
            for k in 0..16 {
                let (u, v, lod) = (
                    -0.3 + i as f32 * 0.191,
                    0.1 + j as f32 * 0.233,
                    -0.4 + k as f32 * 0.37,
                );
                for f in [u, v, lod] {
                    out.extend(f.to_bits().to_le_bytes());
                }
            }
        }
    }
    out
}

fn upload(sys: &System, border: u32) -> (ObjectEntry, Vec<GlobalPage>) {
    let desc = ObjectDesc::mipmapped(
        W,
        H,
        TexelFormat::Rgba8Unorm,
        PAGE,
        None,
        border,
        Addressing::Wrap,
    )
    .unwrap();
    let (layout, _) = desc.mip().unwrap();
    let data = words_to_bytes(&slots(
        &layout,
        &chain_rgba8(&layout, level0()),
        Addressing::Wrap,
    ));
    let mode = if border > 0 {
        AccessMode::ReplicateRead
    } else {
        AccessMode::Migrate
    };
    let e = sys.create_with(desc, Some(data), mode).unwrap();
    let tail = (layout.level_offset(TAIL).unwrap()..layout.page_count())
        .map(|p| GlobalPage(e.page_offset + p))
        .collect();
    (e, tail)
}

/// Per border and filter: (colours, levels coarser) of a cold launch, then of a second one.
fn run_all(sys: &System) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let rows = 8 * 4 * 16 / COLS;
    for border in [0, 1] {
        for filter in [Filter::Nearest, Filter::Bilinear, Filter::Trilinear] {
            let (tex, tail) = upload(sys, border);
            let coords = sys
                .create(
                    ObjectDesc::buffer(4 * 3 * (COLS * rows) as u64, 256).unwrap(),
                    Some(grid()),
                )
                .unwrap();
            let screen = ObjectDesc::texture(COLS, rows, TexelFormat::Rgba8Unorm, PAGE).unwrap();
            let (o, c) = (
                sys.create(screen, None).unwrap(),
                sys.create(screen, None).unwrap(),
            );
            // Everything but the texture's finer levels is on the device, so that the first
            // launch faults on nothing and every miss it meets is a degrading sample's.
            let mut req: Vec<PageRequest> = tail
                .iter()
                .chain(&coords.pages().map(GlobalPage).collect::<Vec<_>>())
                .map(|&page| PageRequest {
                    page,
                    access: Access::Read,
                })
                .collect();
            for e in [&o, &c] {
                req.extend(e.pages().map(|p| PageRequest {
                    page: GlobalPage(p),
                    access: Access::Write,
                }));
            }
            sys.on_device(0, move |ctx| {
                let r = ctx.acquire(req);
                ctx.release();
                r
            })
            .unwrap()
            .wait()
            .unwrap()
            .unwrap();
            for round in 0..2 {
                let k = Degraded {
                    tex: tex.id,
                    coords: coords.id,
                    out: o.id,
                    coarser: c.id,
                    filter,
                };
                let stats = sys
                    .run_kernel(k, &[&tex, &coords, &o, &c], COLS, rows)
                    .unwrap();
                let what = format!("border {border}, {filter:?}, round {round}");
                let late: u64 = stats.iter().map(|s| s.late_requests).sum();
                let relaunched: u64 = stats.iter().map(|s| s.relaunched).sum();
                assert_eq!(relaunched, 0, "{what}");
                let coarser = sys.read(&c).unwrap();
                let served_coarser = coarser.chunks(4).filter(|w| w != &[0, 0, 0, 0]).count();
                if round == 0 {
                    assert!(late > 0, "{what}: nothing asked for");
                    assert!(served_coarser > 0, "{what}: nothing served coarser");
                } else {
                    assert_eq!(late, 0, "{what}");
                    assert_eq!(served_coarser, 0, "{what}");
                }
                out.push((format!("{what}: colours"), sys.read(&o).unwrap()));
                out.push((format!("{what}: coarser"), coarser));
                out.push((
                    format!("{what}: late requests"),
                    late.to_le_bytes().to_vec(),
                ));
            }
            for e in [tex, coords, o, c] {
                sys.mm.free(e.id).unwrap();
            }
        }
    }
    out
}

#[test]
fn degrading_samples_on_lavapipe_equal_the_cpu_twin() {
    let cfg = SystemConfig {
        devices: 1,
        ..Default::default()
    };
    let Some(gpu) = common::system(&cfg) else {
        return;
    };
    let cpu = System::cpu(&cfg).unwrap();
    let (a, b) = (run_all(&cpu), run_all(&gpu));
    assert_eq!(a.len(), b.len());
    for ((what, x), (_, y)) in a.iter().zip(&b) {
        let first = x.iter().zip(y).position(|(p, q)| p != q);
        assert!(
            first.is_none(),
            "{what}: CPU and wgpu differ first at byte {first:?}"
        );
    }
}
