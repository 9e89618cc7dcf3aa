//! Remote mode on wgpu: a remote object's pages live in one buffer on the node's shared wgpu
//! device, which every device binds; loads and stores reach it in place and never fault. On
//! devices that do not share a wgpu device the launch is refused with a typed error.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use tessera_core::{AccessMode, DeviceId, ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{Device, Fault, Invocation, Kernel, RuntimeError, System, SystemConfig};
use tessera_wgpu::{AdapterChoice, WgpuDevice, WgpuError};

/// out = a + 1 (migrate), b = 2a (remote), a read from a remote object.
struct Step {
    a: ObjectId,
    b: ObjectId,
    out: ObjectId,
}

impl Kernel for Step {
    fn name(&self) -> &'static str {
        "remote_wgpu_step"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.a, x, y)?;
        inv.store_f32(self.out, x, y, v + 1.0)?;
        inv.store_f32(self.b, x, y, v * 2.0)
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Objects {
                a: u32,
                b: u32,
                out: u32,
            }
        }
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let v = load_f32(params.a, x, y);
                store_f32(params.out, x, y, v + 1.0);
                store_f32(params.b, x, y, v * 2.0);
            }",
            &Objects {
                a: self.a.0,
                b: self.b.0,
                out: self.out.0,
            },
        ))
    }
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn remote_objects_are_read_and_written_in_place_on_wgpu() {
    let Some(sys) = common::system(&SystemConfig::new(2)) else {
        return;
    };
    let desc = ObjectDesc::texture(8, 8, TexelFormat::R32Float, 4).unwrap();
    let init: Vec<f32> = (0..64).map(|i| i as f32).collect();
    let a = sys
        .create_with(desc, Some(bytes(&init)), AccessMode::Remote)
        .unwrap();
    let b = sys.create_with(desc, None, AccessMode::Remote).unwrap();
    let out = sys.create(desc, None).unwrap();
    // Pages of `a` on both devices' sides: each device reads some pages remotely.
    sys.place(&a, |local, _, _| {
        tessera_core::Location::Device((local % 2) as u8)
    })
    .unwrap();
    for _ in 0..2 {
        sys.run_kernel(
            Step {
                a: a.id,
                b: b.id,
                out: out.id,
            },
            &[&a, &b, &out],
            8,
            8,
        )
        .unwrap();
    }
    // By hand: out = i + 1, b = 2i, a unchanged.
    let want_out: Vec<f32> = (0..64).map(|i| i as f32 + 1.0).collect();
    let want_b: Vec<f32> = (0..64).map(|i| 2.0 * i as f32).collect();
    assert_eq!(sys.read_f32(&out).unwrap(), want_out);
    assert_eq!(sys.read_f32(&b).unwrap(), want_b);
    assert_eq!(sys.read_f32(&a).unwrap(), init);
}

#[test]
fn remote_objects_on_separate_wgpu_devices_are_a_typed_error() {
    let mut devices: Vec<Box<dyn Device>> = Vec::new();
    for i in 0..2 {
        let Some(d) = common::opened(
            WgpuDevice::new(DeviceId(i), &AdapterChoice::Default),
            "a wgpu device",
        ) else {
            return;
        };
        devices.push(Box::new(d));
    }
    let sys = System::with_devices(devices, &SystemConfig::new(2)).unwrap();
    let desc = ObjectDesc::texture(8, 8, TexelFormat::R32Float, 4).unwrap();
    let a = sys.create_with(desc, None, AccessMode::Remote).unwrap();
    let b = sys.create_with(desc, None, AccessMode::Remote).unwrap();
    let out = sys.create(desc, None).unwrap();
    let err = sys
        .run_kernel(
            Step {
                a: a.id,
                b: b.id,
                out: out.id,
            },
            &[&a, &b, &out],
            8,
            8,
        )
        .unwrap_err();
    match &err {
        RuntimeError::Device { error, .. } => assert!(
            matches!(
                error.downcast_ref::<WgpuError>(),
                Some(WgpuError::RemoteAcrossDevices { .. })
            ),
            "{error}"
        ),
        e => panic!("expected the remote-across-devices error, got {e:?}"),
    }
}
