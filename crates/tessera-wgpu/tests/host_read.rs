//! The host reads an object whose pages devices modified: each owner's pages come back in
//! one read, one wait for the GPU per owner, not one per page, and the bytes are the
//! devices' latest.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use tessera_core::{ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{
    Fault, Invocation, Kernel, PassSpec, Procedure, System, SystemConfig, WgslKernel,
};

tessera_runtime::kernel_params! {
    struct One {
        a: u32,
        y0: u32,
    }
}

/// a = 2a + 1 on the rows from `y0`.
struct Bump {
    a: ObjectId,
    y0: u32,
}

impl Kernel for Bump {
    fn name(&self) -> &'static str {
        "host_read_bump"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let y = y + self.y0;
        let v = inv.load_f32(self.a, x, y)?;
        inv.store_f32(self.a, x, y, 2.0 * v + 1.0)
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y0: u32) {
                let y = y0 + params.y0;
                let v = load_f32(params.a, x, y);
                store_f32(params.a, x, y, 2.0 * v + 1.0);
            }",
            &One {
                a: self.a.0,
                y0: self.y0,
            },
        ))
    }
}

const SIDE: u32 = 32;
const PAGE: u32 = 8;

/// Bumps rows [y0, y0 + rows) of `a` on device `d` alone.
fn bump(sys: &System, d: usize, a: &ObjectEntry, y0: u32, rows: u32) {
    let spec = PassSpec::over(Bump { a: a.id, y0 }, &[a], SIDE, rows);
    sys.on_device(d, move |ctx| ctx.run_pass(&spec, Procedure::Relaunch))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap();
}

#[test]
fn a_host_read_waits_once_per_owner_not_once_per_page() {
    let Some(sys) = common::system(&SystemConfig::new(2).threads(1)) else {
        return;
    };
    let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let init: Vec<f32> = (0..SIDE * SIDE).map(|i| i as f32 * 0.5 - 9.0).collect();
    let bytes: Vec<u8> = init.iter().flat_map(|f| f.to_le_bytes()).collect();
    let a = sys.create(desc, Some(bytes)).unwrap();
    // Device 0 modifies the top half (8 pages), device 1 the bottom half (8 pages).
    bump(&sys, 0, &a, 0, SIDE / 2);
    bump(&sys, 1, &a, SIDE / 2, SIDE / 2);
    let before = sys.host_counters();
    let got = sys.read_f32(&a).unwrap();
    let after = sys.host_counters();
    let want: Vec<f32> = init.iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(got, want);
    let pages_each = (SIDE / PAGE) * (SIDE / PAGE) / 2;
    let slot_bytes = (PAGE * PAGE * 4) as u64;
    for d in 0..2 {
        let (b, n) = (&before[d], &after[d]);
        assert_eq!(
            n.device_waits - b.device_waits,
            1,
            "device {d}: waits for the GPU to read its {pages_each} pages back"
        );
        assert_eq!(
            n.bytes_read_back - b.bytes_read_back,
            pages_each as u64 * slot_bytes,
            "device {d}: bytes read back"
        );
    }
}

#[test]
fn reading_several_objects_waits_once_per_owner() {
    let Some(sys) = common::system(&SystemConfig::new(2).threads(1)) else {
        return;
    };
    let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let mut objects = Vec::new();
    let mut want = Vec::new();
    for k in 0..3 {
        let init: Vec<f32> = (0..SIDE * SIDE).map(|i| (i + 100 * k) as f32).collect();
        let bytes: Vec<u8> = init.iter().flat_map(|f| f.to_le_bytes()).collect();
        let o = sys.create(desc, Some(bytes)).unwrap();
        // Every object's top half on device 0, its bottom half on device 1.
        bump(&sys, 0, &o, 0, SIDE / 2);
        bump(&sys, 1, &o, SIDE / 2, SIDE / 2);
        want.push(
            init.iter()
                .flat_map(|v| (2.0 * v + 1.0).to_le_bytes())
                .collect::<Vec<u8>>(),
        );
        objects.push(o);
    }
    let ids: Vec<ObjectId> = objects.iter().map(|o| o.id).collect();
    let before = sys.host_counters();
    let got = sys.mm.read_many(&ids).unwrap();
    let after = sys.host_counters();
    assert_eq!(got, want);
    for d in 0..2 {
        assert_eq!(
            after[d].device_waits - before[d].device_waits,
            1,
            "device {d}: waits for the GPU to read three objects' pages back"
        );
    }
    // The same bytes as reading each alone.
    for (o, w) in objects.iter().zip(&want) {
        assert_eq!(&sys.read(o).unwrap(), w);
    }
}
