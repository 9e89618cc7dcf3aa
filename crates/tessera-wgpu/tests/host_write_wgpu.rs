//! The host replaces an object's data between passes on wgpu devices (`System::write`): the
//! devices' copies, modified ones included, give way to the new bytes, which the next pass
//! reads on every device.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use tessera_core::{ObjectEntry, ObjectId};
use tessera_runtime::{Fault, Invocation, Kernel, System, SystemConfig, WgslKernel};

tessera_runtime::kernel_params! {
    struct Two {
        src: u32,
        dst: u32,
    }
}

const N: u32 = 32;

/// `to(x, y) = from(x, N-1-y) + 1`: each device reads rows another device wrote.
struct Mirror {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for Mirror {
    fn name(&self) -> &'static str {
        "host_write_mirror"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, x, N - 1 - y)?;
        inv.store_f32(self.to, x, y, v + 1.0)
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let v = load_f32(params.src, x, 31u - y);
                store_f32(params.dst, x, y, v + 1.0);
            }",
            &Two {
                src: self.from.0,
                dst: self.to.0,
            },
        ))
    }
}

fn field(f: impl Fn(u32, u32) -> f32) -> Vec<f32> {
    (0..N * N).map(|i| f(i % N, i / N)).collect()
}

fn mirrored(src: &[f32]) -> Vec<f32> {
    field(|x, y| src[((N - 1 - y) * N + x) as usize] + 1.0)
}

fn pass(sys: &System, from: &ObjectEntry, to: &ObjectEntry) {
    let k = Mirror {
        from: from.id,
        to: to.id,
    };
    sys.run_kernel(k, &[from, to], N, N).unwrap();
}

#[test]
fn a_host_write_replaces_every_copy_on_wgpu() {
    let Some(sys) = common::system(&SystemConfig::new(2)) else {
        return;
    };
    let first = field(|x, y| (x * 100 + y) as f32);
    let a = sys.create_f32(N, N, 8, Some(&first)).unwrap();
    let b = sys.create_f32(N, N, 8, None).unwrap();
    pass(&sys, &a, &b);
    pass(&sys, &b, &a);
    assert_eq!(sys.read_f32(&a).unwrap(), mirrored(&mirrored(&first)));
    for round in 0..2u32 {
        let new = field(|x, y| (round * 7 + x * 3 + y * 5) as f32 - 0.5);
        sys.write_f32(&a, &new).unwrap();
        pass(&sys, &a, &b);
        assert_eq!(sys.read_f32(&b).unwrap(), mirrored(&new), "round {round}");
        let other = field(|x, y| (x ^ y) as f32 + round as f32);
        sys.write_f32(&b, &other).unwrap();
        pass(&sys, &b, &a);
        assert_eq!(sys.read_f32(&a).unwrap(), mirrored(&other), "round {round}");
    }
}
