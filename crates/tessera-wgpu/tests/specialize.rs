//! Pipelines built for their launches' binding shapes (docs/WGPU.md, "Specialized per
//! pipeline") against the CPU device: objects of many shapes, past the cap on specialized
//! pipelines, and two bound ids that share a `by_id` slot, so the binding search must go past
//! it. Memory and requests must be the CPU device's, specialized and generic alike.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use std::sync::Arc;

use common::{gpu, SrcDst};
use tessera_core::{
    AddressSpace, DeviceId, ObjectDesc, ObjectEntry, PageDescriptor, SlotAddr, TexelFormat,
};
use tessera_runtime::cpu::CpuDevice;
use tessera_runtime::{Bound, Device, Domain, Fault, Invocation, Kernel, Launch, Mode, WgslKernel};
use tessera_wgpu::abi::BY_ID_SLOTS;

const PAGE: u32 = 8;
const SLOT_BYTES: u64 = (PAGE * PAGE * 4) as u64;
/// Shapes: pairs of objects `PAGE * (k + 1)` texels wide, one pair per width.
const SHAPES: u32 = 11;

/// Reads `src` at (x, y) and at (x / 2, y / 2 + 1), writes `dst` at (x, y).
struct Mix {
    src: u32,
    dst: u32,
}

const MIX_WGSL: &str = r#"
fn kernel_main(x: u32, y: u32) {
    let v = load_f32(params.src, x, y);
    let w = load_f32(params.src, x / 2u, y / 2u + 1u);
    store_f32(params.dst, x, y, v * 3.0 + w);
}
"#;

impl Kernel for Mix {
    fn name(&self) -> &'static str {
        "mix"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            MIX_WGSL,
            &SrcDst {
                src: self.src,
                dst: self.dst,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let src = tessera_core::ObjectId(self.src);
        let v = inv.load_f32(src, x, y)?;
        let w = inv.load_f32(src, x / 2, y / 2 + 1)?;
        inv.store_f32(tessera_core::ObjectId(self.dst), x, y, v * 3.0 + w)
    }
}

/// Pairs of R32Float textures, `PAGE * (k + 1)` wide and `2 * PAGE` high; every page
/// resident and writable but the first page of every second pair, so some launches miss.
fn set_up(d: &mut dyn Device) -> (Vec<ObjectEntry>, u64) {
    let mut space = AddressSpace::new();
    let mut objects = Vec::new();
    for k in 0..SHAPES {
        let desc =
            ObjectDesc::texture(PAGE * (k + 1), 2 * PAGE, TexelFormat::R32Float, PAGE).unwrap();
        objects.push(space.create(desc).unwrap());
        objects.push(space.create(desc).unwrap());
    }
    let pages = space.page_count();
    let missing: Vec<u64> = objects
        .chunks(2)
        .step_by(2)
        .map(|pair| pair[0].page_offset)
        .collect();
    d.create_memory(0, SLOT_BYTES, pages as u32).unwrap();
    common::map_pages_with(
        d,
        pages,
        SLOT_BYTES,
        |p| SlotAddr {
            memory: 0,
            slot: p as u32,
        },
        |p, at| match missing.contains(&p) {
            true => PageDescriptor::NOT_RESIDENT,
            false => PageDescriptor::resident(at, true),
        },
        |p, i| (p * 1000 + i) as f32 * 0.5,
    );
    (objects, pages)
}

fn launch(objects: &[ObjectEntry], src: usize, dst: usize, pages: u64) -> Launch {
    let (s, t) = (&objects[src], &objects[dst]);
    Launch {
        kernel: Arc::new(Mix {
            src: s.id.0,
            dst: t.id.0,
        }),
        bindings: Arc::new(vec![Bound::new(t), Bound::new(s)]),
        domain: Domain::Rect {
            x0: 0,
            y0: 0,
            x1: s.desc.extent().0.min(t.desc.extent().0) as u32,
            y1: PAGE,
        },
        mode: Mode::Direct,
        pages,
        time: 1,
        remote: Default::default(),
    }
}

fn memory(d: &mut dyn Device, pages: u64) -> Vec<Vec<u8>> {
    (0..pages as u32)
        .map(|slot| d.read_slot(SlotAddr { memory: 0, slot }).unwrap())
        .collect()
}

#[test]
fn specialized_and_generic_pipelines_compute_what_the_cpu_device_does() {
    let Some(g) = gpu() else { return };
    eprintln!("adapter: {}", g.describe());
    drop(g);
    // Two bound objects whose ids share a by-id slot, of different widths: the binding the
    // slot does not name is found only by the search past it.
    let mut c = CpuDevice::new(DeviceId(0), common::pool(2));
    let (objects, pages) = set_up(&mut c);
    let (a, b) = (0..objects.len())
        .flat_map(|a| (a + 1..objects.len()).map(move |b| (a, b)))
        .find(|&(a, b)| {
            objects[a].id.0 % BY_ID_SLOTS == objects[b].id.0 % BY_ID_SLOTS
                && objects[a].desc.extent() != objects[b].desc.extent()
        })
        .expect("two ids in one slot");
    // The colliding pair both ways (one shape, specialized), then every pair once, each a
    // shape of its own width.
    let mut order = vec![(a, b), (b, a)];
    order.extend((0..SHAPES as usize).map(|k| (2 * k, 2 * k + 1)));
    let mut want = Vec::new();
    for &(s, t) in &order {
        let out = c.launch(&launch(&objects, s, t, pages)).unwrap();
        want.push((out.requests, out.incomplete.len()));
    }
    assert!(want.iter().any(|w| !w.0.is_empty()), "no launch missed");
    assert!(want.iter().any(|w| w.0.is_empty()), "every launch missed");
    let want_memory = memory(&mut c, pages);
    for specialize in [true, false] {
        let mut g = gpu().unwrap();
        g.set_specialize(specialize);
        let (objects_g, _) = set_up(&mut g);
        for (i, &(s, t)) in order.iter().enumerate() {
            let out = g.launch(&launch(&objects_g, s, t, pages)).unwrap();
            let what = format!("specialize {specialize}, launch {i} ({s} -> {t})");
            assert_eq!(out.requests, want[i].0, "{what}: requests");
            assert_eq!(out.incomplete.len(), want[i].1, "{what}: incomplete");
        }
        assert!(
            memory(&mut g, pages) == want_memory,
            "specialize {specialize}: memory differs from the CPU device's"
        );
        // One generic pipeline without specialization; with it, eight shapes of the
        // SHAPES + 1 the launches bound got pipelines of their own and the rest shared the
        // generic one.
        let built = g.pipelines_built();
        match specialize {
            true => assert_eq!(built, 9, "pipelines built"),
            false => assert_eq!(built, 1, "pipelines built"),
        }
    }
}
