//! `UnpagedGpu`, the unpaged original of the overhead benchmark on wgpu: boiling's WGSL bodies
//! after `unpaged.wgsl` against the CPU reference and against the paged wgpu run, plus its
//! typed errors.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails them.

mod common;

use common::CpuOnly;
use tessera_core::{DeviceId, ObjectId, TexelFormat};
use tessera_runtime::{Device, WgslKernel};
use tessera_runtime::{Fault, Invocation, Kernel, Partition, Procedure, System, SystemConfig};
use tessera_wgpu::{AdapterChoice, UnpagedGpu, WgpuDevice, WgpuError, UNPAGED_MAX_OBJECTS};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::ReferenceBoiling;
use tessera_workloads::boiling::sim::PagedBoiling;
use tessera_workloads::boiling::{frame_kernels, Ctx, Textures};

fn open(objects: &[(ObjectId, u32, u32, TexelFormat)]) -> Option<UnpagedGpu> {
    common::opened(
        UnpagedGpu::new(&AdapterChoice::Default, objects),
        "an unpaged wgpu device",
    )
}

fn f32_bits(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The field (as bits) and the display image after `frames` frames.
type Run = (Vec<u32>, Vec<u8>);

/// Boiling's five passes per frame on `UnpagedGpu`, started from the reference's field.
fn unpaged(size: (u32, u32), params: BoilingParams, frames: u32) -> Option<Run> {
    let tex = Textures::NUMBERED;
    let objects: Vec<_> = tex
        .formats()
        .iter()
        .map(|&(id, f)| (id, size.0, size.1, f))
        .collect();
    let mut gpu = open(&objects)?;
    let start = ReferenceBoiling::new(size.0, size.1, params).field;
    let bytes: Vec<u8> = start.iter().flat_map(|v| v.to_le_bytes()).collect();
    gpu.write_object(tex.field, &bytes).unwrap();
    let ctx = Ctx {
        tex,
        width: size.0,
        height: size.1,
        params,
    };
    for _ in 0..frames {
        for k in frame_kernels(ctx) {
            gpu.run(&*k, size).unwrap();
        }
        gpu.finish().unwrap();
    }
    let field = f32_bits(&gpu.read_object(tex.field).unwrap());
    Some((field, gpu.read_object(tex.display).unwrap()))
}

fn reference(size: (u32, u32), params: BoilingParams, frames: u32) -> Run {
    let mut r = ReferenceBoiling::new(size.0, size.1, params);
    r.run(frames);
    (
        r.field.iter().map(|f| f.to_bits()).collect(),
        r.display_rgba(),
    )
}

/// `tanh(0) = 0` on both sides, so all that is left is exact IEEE f32 arithmetic.
fn exact_params() -> BoilingParams {
    BoilingParams {
        alpha: 0.0,
        ..BoilingParams::default()
    }
}

#[test]
fn unpaged_gpu_equals_reference_bit_for_bit_when_arithmetic_is_exact() {
    for size in [(40, 40), (96, 64)] {
        let want = reference(size, exact_params(), 3);
        // The comparison means something only if the frames change the field.
        assert!(want.0 != reference(size, exact_params(), 0).0);
        let Some(got) = unpaged(size, exact_params(), 3) else {
            return;
        };
        // Where the GPU fuses multiply-adds it cannot match the CPU bit for bit
        // (common::Exactness); each size is then its own check.
        let f32s = |v: &[u32]| v.iter().map(|b| f32::from_bits(*b)).collect::<Vec<f32>>();
        let mut exact = common::Exactness::new(1e-4);
        exact.check(&f32s(&got.0), &f32s(&want.0), &format!("field at {size:?}"));
        if !exact.fuses() {
            assert!(got.1 == want.1, "display differs at {size:?}");
        }
    }
}

/// With the GPU's own `tanh` the unpaged twin computes exactly what the paged wgpu device
/// does: the benchmark compares the same work.
#[test]
fn unpaged_gpu_equals_paged_gpu_bit_for_bit() {
    let params = BoilingParams::default();
    for (size, page) in [((40, 40), 8), ((96, 64), 16)] {
        let Some(got) = unpaged(size, params, 3) else {
            return;
        };
        let device = WgpuDevice::new(DeviceId(0), &AdapterChoice::Default).unwrap();
        let devices: Vec<Box<dyn Device>> = vec![Box::new(device)];
        let cfg = SystemConfig::new(1);
        let sys = System::with_devices(devices, &cfg).unwrap();
        let sim = PagedBoiling::new(sys, size.0, size.1, page, params).unwrap();
        for _ in 0..3 {
            sim.frame(Partition::Rows, Procedure::Relaunch).unwrap();
        }
        let field: Vec<u32> = sim.field().unwrap().iter().map(|f| f.to_bits()).collect();
        assert!(got.0 == field, "field differs at {size:?}");
        assert!(
            got.1 == sim.display_rgba().unwrap(),
            "display differs at {size:?}"
        );
    }
}

/// After one frame with `tanh` the field is within its last-bit error of the reference (see
/// boiling_wgpu.rs for the bound).
#[test]
fn unpaged_gpu_matches_reference_within_tanh_tolerance() {
    let size = (48, 40);
    let want = reference(size, BoilingParams::default(), 1);
    let Some(got) = unpaged(size, BoilingParams::default(), 1) else {
        return;
    };
    let worst = got
        .0
        .iter()
        .zip(&want.0)
        .map(|(a, b)| (f32::from_bits(*a) - f32::from_bits(*b)).abs())
        .fold(0.0f32, f32::max);
    assert!(worst <= 1e-5, "difference {worst}");
}

/// Writes `x + 0.5` at (x + shift, y) of object `dst`, plus what it loads from object `src`.
struct Shifted {
    name: &'static str,
    src: u32,
    dst: u32,
    shift: u32,
    source: &'static str,
}

impl Kernel for Shifted {
    fn name(&self) -> &'static str {
        self.name
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Params {
                src: u32,
                dst: u32,
                shift: u32,
            }
        }
        Some(WgslKernel::new(
            self.source,
            &Params {
                src: self.src,
                dst: self.dst,
                shift: self.shift,
            },
        ))
    }
    fn invoke(&self, _: &mut Invocation<'_>, _: u32, _: u32) -> Result<(), Fault> {
        Ok(())
    }
}

const SHIFTED: &str = "fn kernel_main(x: u32, y: u32) {
    store_f32(params.dst, x + params.shift, y, f32(x) + 0.5 + load_f32(params.src, x, y));
}";

#[test]
fn out_of_range_and_unknown_objects_touch_nothing() {
    let (a, b) = (ObjectId(1), ObjectId(3));
    let objects = [
        (a, 8, 4, TexelFormat::R32Float),
        (b, 8, 4, TexelFormat::R32Float),
    ];
    let Some(mut g) = open(&objects) else { return };
    let ones: Vec<u8> = [1.0f32; 32].iter().flat_map(|v| v.to_le_bytes()).collect();
    g.write_object(a, &ones).unwrap();
    let run = |g: &mut UnpagedGpu, src: u32, dst: u32, shift: u32| {
        let k = Shifted {
            name: "shifted",
            src,
            dst,
            shift,
            source: SHIFTED,
        };
        g.run(&k, (8, 4)).unwrap();
        g.finish().unwrap();
    };
    // In range: b = x + 0.5 + a.
    run(&mut g, a.0, b.0, 0);
    let want: Vec<f32> = (0..32).map(|i| (i % 8) as f32 + 1.5).collect();
    let got = f32_bits(&g.read_object(b).unwrap());
    assert_eq!(got, want.iter().map(|f| f.to_bits()).collect::<Vec<_>>());
    // Every store lands past a's rows (in b's words, were it not checked): dropped.
    run(&mut g, a.0, a.0, 8);
    assert_eq!(g.read_object(a).unwrap(), ones);
    assert_eq!(f32_bits(&g.read_object(b).unwrap()), f32_bits(&f32s(&want)));
    // An id with no object, and one past the table, load zero and store nothing.
    run(&mut g, 0, b.0, 0);
    let base: Vec<f32> = (0..32).map(|i| (i % 8) as f32 + 0.5).collect();
    assert_eq!(g.read_object(b).unwrap(), f32s(&base));
    run(&mut g, a.0, 9, 0);
    run(&mut g, a.0, 2, 0);
    assert_eq!(g.read_object(a).unwrap(), ones);
    assert_eq!(g.read_object(b).unwrap(), f32s(&base));
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn errors_are_typed() {
    let tex = (ObjectId(0), 4, 4, TexelFormat::R32Float);
    // Checked before any adapter is asked for.
    let past = (
        ObjectId(UNPAGED_MAX_OBJECTS as u32),
        4,
        4,
        TexelFormat::R32Float,
    );
    let e = UnpagedGpu::new(&AdapterChoice::Default, &[tex, past]).err();
    assert!(matches!(e, Some(WgpuError::UnpagedId { .. })), "{e:?}");
    let e = UnpagedGpu::new(&AdapterChoice::Default, &[tex, tex]).err();
    assert!(
        matches!(
            e,
            Some(WgpuError::ObjectTwice {
                object: ObjectId(0)
            })
        ),
        "{e:?}"
    );
    let e = UnpagedGpu::new(&AdapterChoice::Named("no such adapter".into()), &[tex]).err();
    // With adapters here, the error lists them: the name was wrong, not the machine.
    match e {
        Some(WgpuError::NoAdapter(_)) => assert!(tessera_wgpu::adapters().is_empty()),
        Some(WgpuError::NoAdapterNamed { wanted, found }) => {
            assert_eq!(wanted, "no such adapter");
            assert!(!found.is_empty());
        }
        e => panic!("{e:?}"),
    }

    let Some(mut g) = open(&[tex]) else { return };
    let e = g.write_object(ObjectId(0), &[0; 12]).unwrap_err();
    assert_eq!(
        e,
        WgpuError::ObjectSize {
            object: ObjectId(0),
            want: 64,
            got: 12
        }
    );
    let e = g.read_object(ObjectId(1)).unwrap_err();
    assert_eq!(
        e,
        WgpuError::NoObject {
            object: ObjectId(1)
        }
    );
    let e = g.run(&CpuOnly, (4, 4)).unwrap_err();
    assert!(matches!(e, WgpuError::NoWgsl { .. }), "{e}");
    let broken = Shifted {
        name: "broken",
        src: 0,
        dst: 0,
        shift: 0,
        source: "fn kernel_main(x: u32, y: u32) { no_such_function(); }",
    };
    let e = g.run(&broken, (4, 4)).unwrap_err();
    assert!(matches!(e, WgpuError::Shader { .. }), "{e}");
    // The error's place is given in the kernel's own lines, past the prelude's.
    assert!(
        e.to_string()
            .contains("(line 1, column 34 of the kernel's WGSL)"),
        "{e}"
    );
    // Still usable after the errors.
    g.write_object(ObjectId(0), &[0; 64]).unwrap();
    g.finish().unwrap();
    g.destroy();
    let e = g.read_object(ObjectId(0)).unwrap_err();
    assert!(e.to_string().contains("device was lost"), "{e}");
}
