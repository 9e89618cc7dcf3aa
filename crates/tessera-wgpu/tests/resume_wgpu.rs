//! The relaunch list's `RESUMED_BIT` on both backends: an invocation that suspended is
//! relaunched with `resumed()` true and reads back what it saved, and one that did not sees
//! false. The kernel gives a different result on each path, so a backend that dropped the mark
//! (or set it on every entry) writes other values than the CPU backend.

mod common;

use std::sync::Arc;

use tessera_core::{ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{
    Bound, Fault, Invocation, Kernel, Partition, PassSpec, Procedure, System, SystemConfig,
};

tessera_runtime::kernel_params! {
    /// What `Resume`'s WGSL twin reads.
    pub struct ResumeParams {
        pub src: u32,
        pub state: u32,
        pub out: u32,
    }
}

/// Texels of `src` the kernel reads only on its first try; `state` is on the device, writable
/// (`Zero` wrote it). A first try that misses on `src` saves 7 and suspends; resumed,
/// an invocation writes what it saved plus 100 and reads `src` no more. An invocation that
/// never suspended copies `src`.
struct Resume {
    src: ObjectId,
    state: ObjectId,
    out: ObjectId,
}

impl Kernel for Resume {
    fn name(&self) -> &'static str {
        "resume"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        if inv.resumed() {
            let s = inv.load_f32(self.state, x, y)?;
            return inv.store_f32(self.out, x, y, s + 100.0);
        }
        match inv.load_f32(self.src, x, y) {
            Ok(v) => inv.store_f32(self.out, x, y, v),
            Err(Fault::Miss) => {
                inv.store_f32(self.state, x, y, 7.0)?;
                Err(Fault::Suspend)
            }
            Err(e) => Err(e),
        }
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                if resumed() {
                    let s = load_f32(params.state, x, y);
                    store_f32(params.out, x, y, s + 100.0);
                    return;
                }
                let v = load_f32(params.src, x, y);
                if faulted() {
                    if suspend() {
                        store_f32(params.state, x, y, 7.0);
                    }
                    return;
                }
                store_f32(params.out, x, y, v);
            }",
            &ResumeParams {
                src: self.src.0,
                state: self.state.0,
                out: self.out.0,
            },
        ))
    }
}

/// Zeros `a`: leaves its pages on the device, writable.
struct Zero {
    a: ObjectId,
}

impl Kernel for Zero {
    fn name(&self) -> &'static str {
        "zero"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.a, x, y, 0.0)
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                store_f32(params.a, x, y, 0.0);
            }",
            &common::One { a: self.a.0 },
        ))
    }
}

const SIDE: u32 = 32;
const PAGE: u32 = 16;

/// `out` after one relaunch pass, and the invocations that suspended.
fn run(sys: &System) -> (Vec<f32>, u64) {
    let tex = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let texels = (SIDE * SIDE) as usize;
    let data: Vec<u8> = (0..texels).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let src = sys.create(tex, Some(data)).unwrap();
    let state = sys.create(tex, None).unwrap();
    let out = sys.create(tex, None).unwrap();
    let zero = PassSpec::new(
        Arc::new(Zero { a: state.id }),
        Arc::new(vec![Bound::new(&state)]),
        0,
        0,
    );
    sys.run_pass(&zero, SIDE, SIDE, Partition::Rows, Procedure::Relaunch)
        .unwrap();
    let kernel = Resume {
        src: src.id,
        state: state.id,
        out: out.id,
    };
    let bindings = vec![Bound::new(&src), Bound::new(&state), Bound::new(&out)];
    let spec = PassSpec::new(Arc::new(kernel), Arc::new(bindings), 0, 0);
    let stats = sys
        .run_pass(&spec, SIDE, SIDE, Partition::Rows, Procedure::Relaunch)
        .unwrap();
    let bytes = sys.mm.read(out.id).unwrap();
    let values = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (values, stats.iter().map(|s| s.suspended).sum())
}

#[test]
fn a_suspended_invocation_is_relaunched_resumed_on_both_backends() {
    let cfg = SystemConfig::new(1);
    let cpu = run(&System::cpu(&cfg).unwrap());
    // Every first try misses on `src` (it is at home), so every invocation suspends once and
    // writes 107 when resumed.
    let texels = (SIDE * SIDE) as usize;
    assert_eq!(cpu, (vec![107.0; texels], texels as u64));
    let Some(sys) = common::system(&cfg) else {
        return;
    };
    assert_eq!(run(&sys), cpu);
}
