//! The wgpu device against the CPU device, launch by launch: the same page tables and slots,
//! the same kernel in every mode over rectangles and lists, then the same requests, the same
//! invocations to relaunch, the same memory and the same merge. Plus the typed errors.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use std::sync::Arc;

use common::{gpu, CpuOnly, SrcDst, World};
use tessera_core::{
    AddressSpace, DeviceId, GlobalPage, ObjectDesc, ObjectId, PageDescriptor, SlotAddr, TexelFormat,
};
use tessera_runtime::cpu::CpuDevice;
use tessera_runtime::{
    Bound, Device, Domain, Fault, Invocation, Kernel, Launch, Mode, RuntimeError, WgslKernel,
};
use tessera_wgpu::{AdapterChoice, MAX_MEMORIES};

/// Stores first, then loads: a fault after the store must drop it. Reads `src` at (x, y) and
/// at (x/2, y/2), so invocations touch pages other than their own.
struct Probe {
    src: ObjectId,
    dst: ObjectId,
}

const PROBE_WGSL: &str = r#"
fn kernel_main(x: u32, y: u32) {
    let src = params.src;
    let dst = params.dst;
    store_f32(dst, x, y, f32(x) + 0.5);
    let v = load_f32(src, x, y);
    let w = load_f32(src, x / 2u, y / 2u);
    store_f32(dst, x, y, v * 2.0 + w);
}
"#;

impl Kernel for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            PROBE_WGSL,
            &SrcDst {
                src: self.src.0,
                dst: self.dst.0,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.dst, x, y, x as f32 + 0.5)?;
        let v = inv.load_f32(self.src, x, y)?;
        let w = inv.load_f32(self.src, x / 2, y / 2)?;
        inv.store_f32(self.dst, x, y, v * 2.0 + w)
    }
}

/// Touches an object it was not given, or one out of range.
struct Bad {
    id: ObjectId,
    x: u32,
}

impl Kernel for Bad {
    fn name(&self) -> &'static str {
        "bad"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Where {
                id: u32,
                x: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) { store_f32(params.id, params.x, y, 1.0); }",
            &Where {
                id: self.id.0,
                x: self.x,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.id, self.x, y, 1.0)
    }
}

const SIDE: u32 = 32;
const PAGE: u32 = 8;
const SLOT_BYTES: u64 = (PAGE * PAGE * 4) as u64;

/// Two 32×32 R32Float textures of 8×8 pages; a mix of read-only, writable and missing pages.
fn set_up(d: &mut dyn Device) -> World {
    let mut space = AddressSpace::new();
    let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let src = space.create(desc).unwrap();
    let dst = space.create(desc).unwrap();
    let pages = space.page_count();
    d.create_memory(0, SLOT_BYTES, 24).unwrap();
    d.create_memory(1, SLOT_BYTES, 24).unwrap();
    common::map_pages_with(
        d,
        pages,
        SLOT_BYTES,
        // Spread over both memories so the prelude's memory switch is exercised.
        |p| SlotAddr {
            memory: (p % 2) as u16,
            slot: (p / 2) as u32,
        },
        // Mod 3, so that some invocations store to a writable page and then miss on a load:
        // their buffered store must be dropped.
        |p, at| match p % 3 {
            0 => PageDescriptor::resident(at, false),
            1 => PageDescriptor::resident(at, true),
            _ => PageDescriptor::NOT_RESIDENT,
        },
        |p, i| (p * 1000 + i) as f32 * 0.25,
    );
    World { src, dst, pages }
}

fn slots(d: &mut dyn Device) -> Vec<Vec<u8>> {
    (0..2u16)
        .flat_map(|memory| (0..24).map(move |slot| SlotAddr { memory, slot }))
        .map(|at| d.read_slot(at).unwrap())
        .collect()
}

fn launch(w: &World, kernel: Arc<dyn Kernel>, domain: Domain, mode: Mode) -> Launch {
    Launch {
        kernel,
        bindings: Arc::new(vec![Bound::new(&w.src), Bound::new(&w.dst)]),
        domain,
        mode,
        pages: w.pages,
        time: 1,
        remote: Default::default(),
    }
}

#[test]
fn launches_match_the_cpu_device_in_every_mode() {
    let Some(g) = gpu() else { return };
    eprintln!("adapter: {}", g.describe());
    drop(g);
    let pool = common::pool(2);
    let list: Vec<(u32, u32)> = (0..SIDE * SIDE)
        .map(|i| ((i * 7) % SIDE, (i * 13 / SIDE) % SIDE))
        .step_by(3)
        .collect();
    let domains = [
        Domain::Rect {
            x0: 0,
            y0: 0,
            x1: SIDE,
            y1: SIDE,
        },
        Domain::Rect {
            x0: 3,
            y0: 5,
            x1: 29,
            y1: 17,
        },
        Domain::List(Arc::new(list)),
    ];
    for mode in [Mode::Request, Mode::Direct, Mode::Temp] {
        for domain in &domains {
            let mut c = CpuDevice::new(DeviceId(0), pool.clone());
            let wc = set_up(&mut c);
            let mut g2 = gpu().unwrap();
            let wg = set_up(&mut g2);
            let kernel: Arc<dyn Kernel> = Arc::new(Probe {
                src: wc.src.id,
                dst: wc.dst.id,
            });
            let mut a = c
                .launch(&launch(&wc, kernel.clone(), domain.clone(), mode))
                .unwrap();
            let mut b = g2
                .launch(&launch(&wg, kernel, domain.clone(), mode))
                .unwrap();
            let what = format!("{mode:?} over {domain:?}");
            assert!(!a.requests.is_empty(), "{what}: the set-up should miss");
            assert_eq!(a.requests, b.requests, "{what}: requests");
            a.incomplete.sort_unstable();
            b.incomplete.sort_unstable();
            assert_eq!(a.incomplete, b.incomplete, "{what}: incomplete");
            assert_eq!(a.invocations, b.invocations);
            if mode == Mode::Temp {
                let (ma, mb) = (c.merge().unwrap(), g2.merge().unwrap());
                assert!(ma.written > 0 && !ma.missing.is_empty(), "{what}");
                assert_eq!(ma.written, mb.written, "{what}: merged stores");
                assert_eq!(ma.missing, mb.missing, "{what}: pages left to merge");
                // Grant the missing pages, as the driver would, and merge what was left.
                for &p in &ma.missing {
                    let at = SlotAddr {
                        memory: (p.0 % 2) as u16,
                        slot: (p.0 / 2) as u32,
                    };
                    let d = PageDescriptor::resident(at, true);
                    c.set_page(p, d).unwrap();
                    g2.set_page(p, d).unwrap();
                }
                let (ma2, mb2) = (c.merge().unwrap(), g2.merge().unwrap());
                assert!(ma2.written > 0 && ma2.missing.is_empty(), "{what}");
                assert_eq!(ma2.written, mb2.written, "{what}: second merge");
                assert!(mb2.missing.is_empty(), "{what}: second merge left pages");
                assert_eq!(g2.merge().unwrap().written, 0, "{what}: merged twice");
            }
            assert!(slots(&mut c) == slots(&mut g2), "{what}: memory differs");
        }
    }
}

#[test]
fn errors_are_typed_not_panics() {
    let Some(mut g) = gpu() else { return };
    let w = set_up(&mut g);
    let rect = Domain::Rect {
        x0: 0,
        y0: 0,
        x1: 4,
        y1: 4,
    };
    // A kernel without a WGSL twin.
    let e = g
        .launch(&launch(&w, Arc::new(CpuOnly), rect.clone(), Mode::Direct))
        .unwrap_err();
    assert!(e.to_string().contains("no WGSL twin"), "{e}");
    // An object the launch does not bind.
    let bad = Arc::new(Bad {
        id: ObjectId(99),
        x: 0,
    });
    let e = g
        .launch(&launch(&w, bad, rect.clone(), Mode::Direct))
        .unwrap_err();
    assert!(matches!(e, RuntimeError::Unbound { .. }), "{e}");
    // Out of range in a compute launch.
    let bad = Arc::new(Bad {
        id: w.dst.id,
        x: SIDE,
    });
    let e = g
        .launch(&launch(&w, bad, rect.clone(), Mode::Direct))
        .unwrap_err();
    assert!(
        matches!(
            e,
            RuntimeError::Kernel {
                source: tessera_core::CoreError::OutOfRange { .. },
                ..
            }
        ),
        "{e}"
    );
    // Physical memories beyond what a kernel can bind, and bad slots.
    for m in 2..MAX_MEMORIES as u16 {
        g.create_memory(m, SLOT_BYTES, 1).unwrap();
    }
    let e = g
        .create_memory(MAX_MEMORIES as u16, SLOT_BYTES, 1)
        .unwrap_err();
    assert!(e.to_string().contains("at most 4 physical memories"), "{e}");
    assert!(g
        .read_slot(SlotAddr {
            memory: 0,
            slot: 24
        })
        .is_err());
    assert!(g.read_slot(SlotAddr { memory: 9, slot: 0 }).is_err());
    assert!(g
        .write_slot(SlotAddr { memory: 0, slot: 0 }, &[0; 4])
        .is_err());
    assert!(g
        .set_page(GlobalPage(w.pages), PageDescriptor::NOT_RESIDENT)
        .is_err());
    // A memory larger than one storage binding is an out-of-memory error, not a panic.
    let mut g = gpu().unwrap();
    let e = g.create_memory(0, 1 << 30, u32::MAX).unwrap_err();
    assert!(e.to_string().contains("out of GPU memory"), "{e}");
    // The device still works after the errors.
    let w = set_up(&mut g);
    assert!(!slots(&mut g).is_empty());
    let _ = w;
}

#[test]
fn a_lost_device_is_an_error_on_every_later_call() {
    let Some(mut g) = gpu() else { return };
    let w = set_up(&mut g);
    g.destroy();
    let e = g.read_slot(SlotAddr { memory: 0, slot: 0 }).unwrap_err();
    eprintln!("after destroy: {e}");
    assert!(e.to_string().contains("device was lost"), "{e}");
    let l = launch(
        &w,
        Arc::new(Probe {
            src: w.src.id,
            dst: w.dst.id,
        }),
        Domain::Rect {
            x0: 0,
            y0: 0,
            x1: 4,
            y1: 4,
        },
        Mode::Direct,
    );
    let e = g.launch(&l).unwrap_err();
    assert!(e.to_string().contains("device was lost"), "{e}");
}

/// The temporary of a pass stays on the device and grows across launches: a small launch,
/// then a larger one that makes it grow (its earlier stores must move along), then one merge.
#[test]
fn the_temporary_grows_across_launches_of_a_pass() {
    let Some(mut g) = gpu() else { return };
    let pool = common::pool(2);
    let mut c = CpuDevice::new(DeviceId(0), pool);
    let (wc, wg) = (set_up(&mut c), set_up(&mut g));
    let kernel: Arc<dyn Kernel> = Arc::new(Probe {
        src: wc.src.id,
        dst: wc.dst.id,
    });
    for domain in [
        Domain::Rect {
            x0: 0,
            y0: 0,
            x1: 2,
            y1: 2,
        },
        Domain::Rect {
            x0: 2,
            y0: 0,
            x1: SIDE,
            y1: SIDE,
        },
    ] {
        let a = c
            .launch(&launch(&wc, kernel.clone(), domain.clone(), Mode::Temp))
            .unwrap();
        let b = g
            .launch(&launch(&wg, kernel.clone(), domain, Mode::Temp))
            .unwrap();
        assert_eq!(a.requests, b.requests);
    }
    let (ma, mb) = (c.merge().unwrap(), g.merge().unwrap());
    assert!(ma.written > 8, "both launches stored");
    assert_eq!(ma.written, mb.written);
    assert_eq!(ma.missing, mb.missing);
    assert!(slots(&mut c) == slots(&mut g), "memory differs");
}

/// Timestamp queries, where the adapter has them, time every launch and merge on the device.
#[test]
fn launches_are_timed_on_the_device_where_timestamps_exist() {
    let Some(mut g) = gpu() else { return };
    let w = set_up(&mut g);
    let kernel: Arc<dyn Kernel> = Arc::new(Probe {
        src: w.src.id,
        dst: w.dst.id,
    });
    let rect = Domain::Rect {
        x0: 0,
        y0: 0,
        x1: SIDE,
        y1: SIDE,
    };
    let out = g.launch(&launch(&w, kernel, rect, Mode::Temp)).unwrap();
    let merged = g.merge().unwrap();
    eprintln!(
        "timestamps: {} launch {:?} merge {:?}",
        g.has_timestamps(),
        out.gpu,
        merged.gpu_s
    );
    if g.has_timestamps() {
        let t = out.gpu.expect("a timed launch");
        assert!(t.kernel_s > 0.0 && t.kernel_s < 10.0, "{t:?}");
        assert!(t.uniquify_s > 0.0 && t.uniquify_s < 10.0, "{t:?}");
        assert!(merged.gpu_s.is_some_and(|s| s > 0.0 && s < 10.0));
    } else {
        assert!(out.gpu.is_none() && merged.gpu_s.is_none());
    }
}

/// The multiply-add probe answers on every adapter, and says "does not fuse" on a CPU adapter
/// (lavapipe), whose LLVM keeps each multiply and add separately rounded: the bit-for-bit tests
/// rely on that there.
#[test]
fn the_multiply_add_probe_answers_and_lavapipe_does_not_fuse() {
    let Some(gpu) = common::opened(
        tessera_wgpu::SharedGpu::open(&AdapterChoice::Default),
        "a wgpu device",
    ) else {
        return;
    };
    let fuses = gpu.fuses_multiply_add().unwrap();
    let info = gpu.adapter_info();
    eprintln!(
        "{} ({:?}) fuses multiply-adds: {fuses}",
        info.name, info.device_type
    );
    if info.device_type == wgpu::DeviceType::Cpu {
        assert!(!fuses, "{} fuses multiply-adds", info.name);
    }
}

/// A wgpu device binds at most four memories; the manager grows them instead of creating a
/// fifth (seen on an H100: boiling 4096² needed more than four 64 MiB memories).
#[test]
fn memory_limits_name_the_binding_limit() {
    let Some(d) = gpu() else {
        return;
    };
    let l = d.memory_limits();
    assert_eq!(l.max_memories, Some(MAX_MEMORIES as u16));
    assert!(l.max_memory_bytes >= 1 << 20, "{l:?}");
}

/// `bench oversubscription` divides by the host link one copy measures: on a wgpu device that
/// is a `write_buffer` into a buffer of its own, waited for, and too large a copy is "cannot
/// tell", not an error.
#[test]
fn one_host_copy_is_timed_and_one_past_the_buffer_limit_is_declined() {
    let Some(mut d) = gpu() else {
        return;
    };
    let s = d
        .time_host_copy(4 << 20)
        .unwrap()
        .expect("a wgpu device times a copy");
    assert!(s > 0.0 && s.is_finite(), "{s}");
    assert_eq!(d.time_host_copy(u64::MAX / 2).unwrap(), None);
}

/// A kernel that leaves many invocations incomplete, launch after launch (the ray tracer under
/// a budget leaves a third to all of them): from its second launch on, the incomplete list
/// comes back with the launch's own read-back, so a launch costs one wait for the GPU, not
/// two, and the lists are still the CPU device's.
#[test]
fn a_kernel_that_leaves_many_incomplete_reads_its_list_back_with_the_launch() {
    let Some(mut g) = gpu() else { return };
    let mut c = CpuDevice::new(DeviceId(0), common::pool(2));
    const BIG: u32 = 128;
    let world = |d: &mut dyn Device| {
        let mut space = AddressSpace::new();
        let desc = ObjectDesc::texture(BIG, BIG, TexelFormat::R32Float, PAGE).unwrap();
        let src = space.create(desc).unwrap();
        let dst = space.create(desc).unwrap();
        let pages = space.page_count();
        // Every other source page missing: about half the invocations fault.
        common::map_pages(d, pages, SLOT_BYTES, |p, at| {
            if p < src.desc.page_count() && p % 2 == 1 {
                PageDescriptor::NOT_RESIDENT
            } else {
                PageDescriptor::resident(at, true)
            }
        });
        World { src, dst, pages }
    };
    let (wc, wg) = (world(&mut c), world(&mut g));
    let counters = g.counters().unwrap();
    let waits = || {
        counters
            .device_waits
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    let rect = Domain::Rect {
        x0: 0,
        y0: 0,
        x1: BIG,
        y1: BIG,
    };
    let mut per_launch = Vec::new();
    for _ in 0..3 {
        let probe = |w: &World| -> Arc<dyn Kernel> {
            Arc::new(Probe {
                src: w.src.id,
                dst: w.dst.id,
            })
        };
        let a = c
            .launch(&launch(&wc, probe(&wc), rect.clone(), Mode::Direct))
            .unwrap();
        let before = waits();
        let b = g
            .launch(&launch(&wg, probe(&wg), rect.clone(), Mode::Direct))
            .unwrap();
        per_launch.push(waits() - before);
        assert!(a.incomplete.len() > 4096, "{}", a.incomplete.len());
        let sorted = |mut v: Vec<(u32, u32)>| {
            v.sort_unstable();
            v
        };
        assert_eq!(sorted(a.incomplete), sorted(b.incomplete));
        assert_eq!(a.requests, b.requests);
    }
    // The first launch has no history: its long list is a second read.
    assert_eq!(per_launch, [2, 1, 1]);
}

/// Stores `x + 64 y` to every texel of `dst`; reads nothing, so a compute pass completes at
/// once and leaves every store to the merge.
struct Fill {
    dst: ObjectId,
}

impl Kernel for Fill {
    fn name(&self) -> &'static str {
        "fill"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) { store_f32(params.dst, x, y, f32(x + 64u * y)); }",
            &SrcDst {
                src: self.dst.0,
                dst: self.dst.0,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.dst, x, y, (x + 64 * y) as f32)
    }
}

/// A merge whose stores are left over for the first page of the address space asks for that
/// page like any other. `record` skips the request bit it set last, held in a private that
/// starts at 0, the key of a read of page 0; the merge's entry point did not reset it, so its
/// stores left over for page 0 asked for nothing, the driver saw no page missing, and they were
/// never merged: `run stencil --backend wgpu --devices 2 --size 32 --halo 2 --page 8
/// --budget-mib 0.05 --frames 2` kept page 0's cells at their initial values. Here the
/// written object holds pages 0..16, all read-only, and each device merges as the driver
/// does: it grants the pages the merge names and merges again until none is named.
#[test]
fn a_merge_left_over_for_page_0_asks_for_page_0() {
    let Some(mut g) = gpu() else { return };
    let pool = common::pool(2);
    let mut c = CpuDevice::new(DeviceId(0), pool);
    let world = |d: &mut dyn Device| -> World {
        let mut space = AddressSpace::new();
        let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
        // Written first: its pages are 0..16.
        let dst = space.create(desc).unwrap();
        let src = space.create(desc).unwrap();
        let pages = space.page_count();
        common::map_pages(d, pages, SLOT_BYTES, |_, at| {
            PageDescriptor::resident(at, false)
        });
        World { src, dst, pages }
    };
    let (wc, wg) = (world(&mut c), world(&mut g));
    let merge_all = |d: &mut dyn Device, w: &World| -> Vec<Vec<GlobalPage>> {
        let kernel: Arc<dyn Kernel> = Arc::new(Fill { dst: w.dst.id });
        let all = Domain::Rect {
            x0: 0,
            y0: 0,
            x1: SIDE,
            y1: SIDE,
        };
        d.launch(&launch(w, kernel, all, Mode::Temp)).unwrap();
        let mut asked = Vec::new();
        for _ in 0..4 {
            let m = d.merge().unwrap();
            if m.missing.is_empty() {
                break;
            }
            for &p in &m.missing {
                let at = SlotAddr {
                    memory: 0,
                    slot: p.0 as u32,
                };
                d.set_page(p, PageDescriptor::resident(at, true)).unwrap();
            }
            asked.push(m.missing);
        }
        asked
    };
    let (ac, ag) = (merge_all(&mut c, &wc), merge_all(&mut g, &wg));
    let dst_pages: Vec<GlobalPage> = (0..16).map(GlobalPage).collect();
    assert_eq!(
        ac,
        [dst_pages],
        "the CPU device asks for every page at once"
    );
    assert_eq!(ag, ac, "pages the merges asked for");
    let slot = |d: &mut dyn Device, slot: u32| d.read_slot(SlotAddr { memory: 0, slot }).unwrap();
    // Page 0 holds the texels (0..8, 0..8).
    let want: Vec<u8> = (0..PAGE * PAGE)
        .flat_map(|i| ((i % PAGE + 64 * (i / PAGE)) as f32).to_le_bytes())
        .collect();
    assert!(slot(&mut g, 0) == want, "page 0 was not merged");
    for s in 0..wg.pages as u32 {
        assert!(slot(&mut c, s) == slot(&mut g, s), "slot {s} differs");
    }
}
