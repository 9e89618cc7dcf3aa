//! The kernels of the deferred-execution tests, with their WGSL twins: included by the CPU
//! backend's test (`tests/deferred.rs`) and by the wgpu backend's (`deferred_wgpu.rs` in
//! tessera-wgpu), so that both run the very same passes.

use tessera_core::{GlobalPage, ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{Fault, Footprint, Invocation, Kernel, PassSpec, System, WgslKernel};

pub const W: u32 = 32;
pub const H: u32 = 16;

/// The objects of `b += a + e; c += b` on a system, and its two passes.
pub struct Scene {
    pub a_vals: Vec<f32>,
    pub e_vals: Vec<f32>,
    pub e: ObjectEntry,
    /// Read by the wgpu test's pass across two devices only.
    #[allow(dead_code)]
    pub b: ObjectEntry,
    pub c: ObjectEntry,
    pub passes: [PassSpec; 2],
}

impl Scene {
    pub fn new(sys: &System) -> Self {
        let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap();
        let n = (W * H) as usize;
        let a_vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let e_vals: Vec<f32> = (0..n).map(|i| 1000.0 + (i % 7) as f32).collect();
        let bytes = |v: &[f32]| v.iter().flat_map(|f| f.to_le_bytes()).collect::<Vec<u8>>();
        let a = sys.create(desc, Some(bytes(&a_vals))).unwrap();
        let e = sys.create(desc, Some(bytes(&e_vals))).unwrap();
        let b = sys.create(desc, None).unwrap();
        let c = sys.create(desc, None).unwrap();
        let sum = Sum {
            a: a.id,
            e: e.id,
            b: b.id,
        };
        let passes = [
            PassSpec::over(sum, &[&a, &e, &b], W, H),
            PassSpec::over(Accumulate { b: b.id, c: c.id }, &[&b, &c], W, H),
        ];
        Scene {
            a_vals,
            e_vals,
            e,
            b,
            c,
            passes,
        }
    }

    /// The first `n` pages of `e`, for the host to take away.
    pub fn e_pages(&self, n: u64) -> Vec<GlobalPage> {
        (0..n).map(|p| GlobalPage(self.e.page_offset + p)).collect()
    }
}

/// `b += a + e`, whose footprint leaves `e` out: a miss on `e` is a fault the footprint did
/// not foresee.
pub struct Sum {
    pub a: ObjectId,
    pub e: ObjectId,
    pub b: ObjectId,
}

impl Kernel for Sum {
    fn name(&self) -> &'static str {
        "deferred_sum"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.b, x, y)?
            + (inv.load_f32(self.a, x, y)? + inv.load_f32(self.e, x, y)?);
        inv.store_f32(self.b, x, y, v)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.a, 0), (self.b, 0)],
            write: self.b,
        })
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Objects {
                a: u32,
                e: u32,
                b: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let b = load_f32(params.b, x, y);
                let s = load_f32(params.a, x, y) + load_f32(params.e, x, y);
                store_f32(params.b, x, y, b + s);
            }",
            &Objects {
                a: self.a.0,
                e: self.e.0,
                b: self.b.0,
            },
        ))
    }
}

/// `c += b`: run on stale or partial `b`, run twice or not at all, and `c` shows it.
pub struct Accumulate {
    pub b: ObjectId,
    pub c: ObjectId,
}

impl Kernel for Accumulate {
    fn name(&self) -> &'static str {
        "deferred_accumulate"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.c, x, y)? + inv.load_f32(self.b, x, y)?;
        inv.store_f32(self.c, x, y, v)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.b, 0), (self.c, 0)],
            write: self.c,
        })
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Objects {
                b: u32,
                c: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let c = load_f32(params.c, x, y);
                store_f32(params.c, x, y, c + load_f32(params.b, x, y));
            }",
            &Objects {
                b: self.b.0,
                c: self.c.0,
            },
        ))
    }
}

pub fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
