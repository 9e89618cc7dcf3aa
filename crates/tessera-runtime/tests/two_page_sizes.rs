//! A pass over objects of two page sizes under a budget: the room each size needs is counted
//! against the budget together, so the pass evicts (or is refused with a typed error) instead
//! of running out of budget halfway through a batch, which had left the memory manager broken
//! for every later call.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{ObjectDesc, ObjectId};
use tessera_runtime::{Fault, Invocation, Kernel, System, SystemConfig};

const N: u32 = 64;

/// `out[y·N + x] = bits(src(x, y))`: a texture of 16×16 pages (1 KiB) read, a buffer of
/// 64-byte pages written, so each batch asks for pages of both sizes.
struct Spill {
    src: ObjectId,
    out: ObjectId,
}

impl Kernel for Spill {
    fn name(&self) -> &'static str {
        "spill"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.src, x, y)?;
        inv.store_u32(self.out, y * N + x, v.to_bits())
    }
}

fn field(x: u32, y: u32) -> f32 {
    (x * 1000 + y) as f32 + 0.25
}

/// Runs the kernel twice on `devices` devices under `budget` bytes, memories of `memory`
/// bytes, and checks the buffer each time, and a host read of the texture after.
fn run(devices: usize, budget: u64, memory: u64) {
    let sys = System::cpu(&SystemConfig::new(devices).budget(budget).memory(memory)).unwrap();
    let data: Vec<f32> = (0..N * N).map(|i| field(i % N, i / N)).collect();
    let src = sys.create_f32(N, N, 16, Some(&data)).unwrap();
    let out = sys
        .create(
            ObjectDesc::buffer(N as u64 * N as u64 * 4, 64).unwrap(),
            None,
        )
        .unwrap();
    for round in 0..2 {
        let k = Spill {
            src: src.id,
            out: out.id,
        };
        sys.run_kernel(k, &[&src, &out], N, N).unwrap_or_else(|e| {
            panic!("budget {budget}, memory {memory}, {devices} device(s), round {round}: {e}")
        });
        let words = sys.read_u32(&out).unwrap();
        for (i, w) in words.iter().enumerate() {
            let (x, y) = (i as u32 % N, i as u32 / N);
            assert_eq!(
                f32::from_bits(*w),
                field(x, y),
                "budget {budget}, memory {memory}: word {i}"
            );
        }
    }
    assert_eq!(sys.read_f32(&src).unwrap(), data);
}

/// Memories as large as one texture page: a memory of 64-byte slots made for the buffer
/// takes budget the texture's next page had counted on. Budgets of 10, 24 and 26 KiB had
/// failed with "out of its memory budget" and left the system unusable.
#[test]
fn two_page_sizes_share_the_budget_they_count() {
    for budget in [10_240, 24_576, 26_624, 98_304] {
        run(1, budget, 1024);
    }
    run(2, 24_576, 1024);
    run(3, 10_240, 1024);
}
