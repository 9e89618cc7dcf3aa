//! Per-page time stamps on the wgpu device against the CPU device: the same launches at the
//! same launch times give the same `page_times` (untouched pages 0), on the per-texel path and
//! the tile path, in every mode, with every page resident and with a mix of missing and
//! read-only pages. Then a slot given to another page between launches: the next launch sees
//! the new page's data under the new mapping, and the old page's data was read out intact.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use common::{gpu, SrcDst, World};
use tessera_core::{
    AddressSpace, DeviceId, GlobalPage, ObjectDesc, ObjectEntry, ObjectId, PageDescriptor,
    PageRequest, SlotAddr, TexelFormat,
};
use tessera_runtime::cpu::CpuDevice;
use tessera_runtime::{
    Bound, Device, Domain, Fault, Footprint, Invocation, Kernel, Launch, Mode, Plain, TexelAccess,
    WgslKernel,
};
use tessera_wgpu::TilePath;

fn cpu() -> CpuDevice {
    CpuDevice::new(DeviceId(0), common::pool(2))
}

/// A 3×3 box sum of `src` (coordinates clamped to the texture) into `dst`: a footprint of
/// halo 1, so it takes the tile path where a device has one.
struct BoxSum {
    src: ObjectId,
    dst: ObjectId,
    side: u32,
}

const BOX_WGSL: &str = r#"
fn kernel_main(x: u32, y: u32) {
    let src = params.src;
    let dst = params.dst;
    let last = params.side - 1u;
    var s = 0.0;
    for (var dy = 0u; dy < 3u; dy++) {
        for (var dx = 0u; dx < 3u; dx++) {
            let cx = min(max(x + dx, 1u) - 1u, last);
            let cy = min(max(y + dy, 1u) - 1u, last);
            s += load_f32(src, cx, cy);
        }
    }
    store_f32(dst, x, y, s);
}
"#;

impl BoxSum {
    /// The WGSL twin's body, in the same order of loads (a fault stops an invocation at the
    /// same load on both devices, so both touch the same pages).
    fn body<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        let last = self.side - 1;
        let mut s = 0.0f32;
        for dy in 0..3 {
            for dx in 0..3 {
                let cx = ((x + dx).max(1) - 1).min(last);
                let cy = ((y + dy).max(1) - 1).min(last);
                s += a.load_f32(self.src, cx, cy)?;
            }
        }
        a.store_f32(self.dst, x, y, s)
    }
}

impl Kernel for BoxSum {
    fn name(&self) -> &'static str {
        "page-times-box"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Params {
                src: u32,
                dst: u32,
                side: u32,
            }
        }
        Some(WgslKernel::new(
            BOX_WGSL,
            &Params {
                src: self.src.0,
                dst: self.dst.0,
                side: self.side,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        self.body(inv, x, y)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.src, 1)],
            write: self.dst,
        })
    }
    fn run_plain(
        &self,
        plain: &mut Plain<'_>,
        xs: std::ops::Range<u32>,
        ys: std::ops::Range<u32>,
    ) -> Result<(), Fault> {
        for y in ys {
            for x in xs.clone() {
                self.body(plain, x, y)?;
            }
        }
        Ok(())
    }
}

/// Reads `src` at (x, y) and at (x/2, y/2), so an invocation touches a page other than its
/// own; no footprint, so per texel on both devices.
struct Pair {
    src: ObjectId,
    dst: ObjectId,
}

const PAIR_WGSL: &str = r#"
fn kernel_main(x: u32, y: u32) {
    let v = load_f32(params.src, x, y) + load_f32(params.src, x / 2u, y / 2u);
    store_f32(params.dst, x, y, v);
}
"#;

impl Kernel for Pair {
    fn name(&self) -> &'static str {
        "page-times-pair"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            PAIR_WGSL,
            &SrcDst {
                src: self.src.0,
                dst: self.dst.0,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.src, x, y)? + inv.load_f32(self.src, x / 2, y / 2)?;
        inv.store_f32(self.dst, x, y, v)
    }
}

/// 48×48 textures of 8×8 pages: 6×6 pages, so a launch's rectangle leaves pages untouched,
/// and the CPU's tiles (64×16) and the GPU's (8×8) cut the launches differently.
const SIDE: u32 = 48;
const PAGE: u32 = 8;
const SLOT_BYTES: u64 = (PAGE * PAGE * 4) as u64;

/// Three textures (`src`, `dst`, and one no launch binds), each page in its own slot; with
/// `mixed`, every fifth page is missing and some others are read-only.
fn set_up(d: &mut dyn Device, mixed: bool) -> World {
    let mut space = AddressSpace::new();
    let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let src = space.create(desc).unwrap();
    let dst = space.create(desc).unwrap();
    space.create(desc).unwrap();
    let pages = space.page_count();
    common::map_pages(d, pages, SLOT_BYTES, |p, at| match (mixed, p % 5) {
        (true, 3) => PageDescriptor::NOT_RESIDENT,
        (true, 1) => PageDescriptor::resident(at, false),
        _ => PageDescriptor::resident(at, true),
    });
    World { src, dst, pages }
}

/// The launches both devices run, with their times (not consecutive, and one page range
/// touched twice, so that a stamp that is not the last launch's shows).
fn launches(w: &World, mode: Mode) -> Vec<Launch> {
    let bindings = Arc::new(vec![Bound::new(&w.src), Bound::new(&w.dst)]);
    let boxed: Arc<dyn Kernel> = Arc::new(BoxSum {
        src: w.src.id,
        dst: w.dst.id,
        side: SIDE,
    });
    let pair: Arc<dyn Kernel> = Arc::new(Pair {
        src: w.src.id,
        dst: w.dst.id,
    });
    let rect = |x0, y0, x1, y1| Domain::Rect { x0, y0, x1, y1 };
    let list = Domain::List(Arc::new(vec![(1, 1), (47, 0), (25, 40), (9, 33), (30, 17)]));
    [
        (boxed.clone(), rect(0, 0, 13, 20), 1),
        (pair, rect(20, 9, 37, 30), 2),
        (boxed.clone(), list, 4),
        (boxed.clone(), rect(30, 29, 48, 48), 7),
        // Ends inside a GPU tile: the tile's window must stop at the rectangle (plus halo), or
        // it stamps a page (x 32..40) that no invocation reads.
        (boxed.clone(), rect(17, 1, 26, 2), 8),
        (boxed, rect(3, 5, 11, 9), 9),
    ]
    .into_iter()
    .map(|(kernel, domain, time)| Launch {
        kernel,
        bindings: bindings.clone(),
        domain,
        mode,
        pages: w.pages,
        time,
        remote: Default::default(),
    })
    .collect()
}

fn all_pages(n: u64) -> Vec<GlobalPage> {
    (0..n).map(GlobalPage).collect()
}

#[test]
fn page_times_match_the_cpu_device_on_both_paths_in_every_mode() {
    let Some(g) = gpu() else { return };
    eprintln!("adapter: {}", g.describe());
    drop(g);
    // The per-texel path with each stamp variant (once per invocation, once per workgroup
    // and page), and the tile path.
    for (tiles, group_stamps) in [
        (TilePath::Off, false),
        (TilePath::Off, true),
        (TilePath::On, false),
    ] {
        for mixed in [false, true] {
            for mode in [Mode::Request, Mode::Direct, Mode::Temp] {
                let what = format!(
                    "{tiles:?}, group stamps: {group_stamps}, {mode:?}, mixed pages: {mixed}"
                );
                let mut c = cpu();
                let mut g = gpu().unwrap();
                g.set_tile_path(tiles);
                g.set_group_stamps(group_stamps);
                assert_eq!(g.tile_path(), tiles == TilePath::On, "{what}");
                let (wc, wg) = (set_up(&mut c, mixed), set_up(&mut g, mixed));
                let pages = all_pages(wc.pages);
                assert_eq!(g.page_times(&pages).unwrap(), vec![0; pages.len()]);
                for (lc, lg) in launches(&wc, mode).iter().zip(launches(&wg, mode)) {
                    let (a, b) = (c.launch(lc).unwrap(), g.launch(&lg).unwrap());
                    assert_eq!(a.requests, b.requests, "{what}: requests");
                }
                let times = c.page_times(&pages).unwrap();
                assert_eq!(times, g.page_times(&pages).unwrap(), "{what}: page times");
                // The test means something: every launch shows, and the unbound object's
                // pages and some of the bound ones were never touched.
                for t in [1, 2, 4, 7, 8, 9] {
                    assert!(
                        times.contains(&t),
                        "{what}: no page has time {t}: {times:?}"
                    );
                }
                let third = 2 * wc.pages as usize / 3;
                assert!(times[third..].iter().all(|&t| t == 0), "{what}");
                assert!(times[..third].contains(&0), "{what}");
                // A merge touches no page's stamp, on either device.
                if mode == Mode::Temp {
                    let (ma, mb) = (c.merge().unwrap(), g.merge().unwrap());
                    assert_eq!(ma.written, mb.written, "{what}: merge");
                }
                // A subset, in any order, reads the same as from the whole.
                let some = [GlobalPage(30), GlobalPage(2), GlobalPage(17), GlobalPage(2)];
                let expect: Vec<u64> = some.iter().map(|p| times[p.0 as usize]).collect();
                assert_eq!(g.page_times(&some).unwrap(), expect, "{what}: subset");
                // The table grows: the stamps stay, the new pages were never touched.
                c.resize_page_table(wc.pages + 40).unwrap();
                let counters = g.counters().unwrap();
                let waits = counters
                    .device_waits
                    .load(std::sync::atomic::Ordering::Relaxed);
                g.resize_page_table(wg.pages + 40).unwrap();
                let after = counters
                    .device_waits
                    .load(std::sync::atomic::Ordering::Relaxed);
                assert_eq!(after, waits, "{what}: growing waited for the GPU");
                let grown = all_pages(wc.pages + 40);
                let tc = c.page_times(&grown).unwrap();
                assert_eq!(tc, g.page_times(&grown).unwrap(), "{what}: after growing");
                assert_eq!(&tc[..pages.len()], &times[..], "{what}: growing kept them");
            }
        }
    }
}

/// An evicting device is asked for stamps after launch after launch. Once asked, its next
/// launches copy every stamp back with their own read-back, and the question is answered from
/// that copy with no wait for the GPU, the same as the CPU device's answer after every launch.
#[test]
fn once_asked_the_launches_bring_the_stamps_back_and_no_question_waits() {
    let Some(mut g) = gpu() else { return };
    let mut c = cpu();
    let (wc, wg) = (set_up(&mut c, true), set_up(&mut g, true));
    let pages = all_pages(wc.pages);
    let counters = g.counters().unwrap();
    let waits = || counters.device_waits.load(Relaxed);
    let w = waits();
    assert_eq!(g.page_times(&pages).unwrap(), vec![0; pages.len()]);
    assert_eq!(waits() - w, 1, "the first question reads the stamps");
    for (k, (lc, lg)) in launches(&wc, Mode::Direct)
        .iter()
        .zip(launches(&wg, Mode::Direct))
        .enumerate()
    {
        c.launch(lc).unwrap();
        g.launch(&lg).unwrap();
        let w = waits();
        let times = g.page_times(&pages).unwrap();
        assert_eq!(waits(), w, "launch {k}: the question waited");
        assert_eq!(
            times,
            c.page_times(&pages).unwrap(),
            "launch {k}: page times"
        );
    }
    // A table that changed size: the copy no longer covers it, so it is read again.
    let more = wc.pages + 4;
    c.resize_page_table(more).unwrap();
    g.resize_page_table(more).unwrap();
    let w = waits();
    let times = g.page_times(&all_pages(more)).unwrap();
    assert_eq!(waits() - w, 1, "after a resize");
    assert_eq!(times, c.page_times(&all_pages(more)).unwrap());
}

#[test]
fn page_times_of_unknown_pages_are_errors_on_both_devices() {
    let Some(mut g) = gpu() else { return };
    let mut c = cpu();
    let (wc, _) = (set_up(&mut c, false), set_up(&mut g, false));
    let beyond = [GlobalPage(0), GlobalPage(wc.pages)];
    let (a, b) = (c.page_times(&beyond), g.page_times(&beyond));
    assert_eq!(a.unwrap_err().to_string(), b.unwrap_err().to_string());
    assert!(g.page_times(&[]).unwrap().is_empty());
}

/// What the memory manager does when it evicts a page and gives its slot to another: reads
/// the victim's slot out, unmaps it, writes the new page's data into the slot and maps the new
/// page there. The launch before sees the old page, the launch after the new one, and the
/// victim's data read out is what the launch before saw.
#[test]
fn a_reused_slot_holds_the_new_page_at_the_next_launch() {
    let Some(mut g) = gpu() else { return };
    let mut c = cpu();
    for d in [&mut c as &mut dyn Device, &mut g] {
        let mut space = AddressSpace::new();
        let desc = ObjectDesc::texture(PAGE, PAGE, TexelFormat::R32Float, PAGE).unwrap();
        let (old, new, dst) = (
            space.create(desc).unwrap(),
            space.create(desc).unwrap(),
            space.create(desc).unwrap(),
        );
        let pages = space.page_count();
        let (shared, out) = (
            SlotAddr { memory: 0, slot: 0 },
            SlotAddr { memory: 0, slot: 1 },
        );
        d.create_memory(0, SLOT_BYTES, 2).unwrap();
        d.resize_page_table(pages).unwrap();
        let fill = |v: f32| -> Vec<u8> {
            (0..SLOT_BYTES / 4)
                .flat_map(|i| (v + i as f32).to_le_bytes())
                .collect()
        };
        d.set_page(
            GlobalPage(old.page_offset),
            PageDescriptor::resident(shared, false),
        )
        .unwrap();
        d.set_page(
            GlobalPage(dst.page_offset),
            PageDescriptor::resident(out, true),
        )
        .unwrap();
        d.write_slot(shared, &fill(1000.0)).unwrap();
        let copy = |src: &ObjectEntry, time| Launch {
            kernel: Arc::new(Pair {
                src: src.id,
                dst: dst.id,
            }),
            bindings: Arc::new(vec![Bound::new(src), Bound::new(&dst)]),
            domain: Domain::Rect {
                x0: 0,
                y0: 0,
                x1: PAGE,
                y1: PAGE,
            },
            mode: Mode::Direct,
            pages,
            time,
            remote: Default::default(),
        };
        let expect = |base: f32| -> Vec<u8> {
            let mut v = Vec::new();
            for y in 0..PAGE {
                for x in 0..PAGE {
                    let at = |x: u32, y: u32| base + (y * PAGE + x) as f32;
                    v.extend((at(x, y) + at(x / 2, y / 2)).to_le_bytes());
                }
            }
            v
        };
        let r = d.launch(&copy(&old, 1)).unwrap();
        assert!(r.requests.is_empty() && r.incomplete.is_empty());
        assert_eq!(
            d.read_slot(out).unwrap(),
            expect(1000.0),
            "{}",
            d.describe()
        );
        // Evict `old`, give its slot to `new`.
        assert_eq!(
            d.read_slot(shared).unwrap(),
            fill(1000.0),
            "{}",
            d.describe()
        );
        d.set_page(GlobalPage(old.page_offset), PageDescriptor::NOT_RESIDENT)
            .unwrap();
        d.write_slot(shared, &fill(2000.0)).unwrap();
        d.set_page(
            GlobalPage(new.page_offset),
            PageDescriptor::resident(shared, false),
        )
        .unwrap();
        let r = d.launch(&copy(&new, 2)).unwrap();
        assert!(r.requests.is_empty() && r.incomplete.is_empty());
        assert_eq!(
            d.read_slot(out).unwrap(),
            expect(2000.0),
            "{}",
            d.describe()
        );
        // The victim is gone from this device: reading it misses.
        let r = d.launch(&copy(&old, 3)).unwrap();
        assert_eq!(
            r.requests,
            vec![PageRequest {
                page: GlobalPage(old.page_offset),
                access: tessera_core::Access::Read,
            }],
            "{}",
            d.describe()
        );
        let times = d
            .page_times(&[old, new, dst].map(|o| GlobalPage(o.page_offset)))
            .unwrap();
        // `dst` was last touched at 2: at 3 the load before the store missed.
        assert_eq!(times, vec![3, 2, 2], "{}", d.describe());
    }
}
