//! Stress: 8 devices, tiny pages, random shared reads and random interleaved writes, each
//! device running its own command stream with a random procedure, against a sequential oracle.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{
    Fault, Invocation, Kernel, PassSpec, Procedure, Result, System, SystemConfig,
};

mod common;
use common::mix;

const W: u32 = 16;
const H: u32 = 12;

fn owner(x: u32, y: u32, round: u32, devices: u32) -> u32 {
    mix(x ^ (y << 8) ^ (round << 16)) % devices
}

/// The value written at (x, y) in `round`, from `read(x, y)` of the previous field.
fn step(
    x: u32,
    y: u32,
    round: u32,
    mut read: impl FnMut(u32, u32) -> Result<u32, Fault>,
) -> Result<u32, Fault> {
    let mut v = x.wrapping_mul(31) ^ y.wrapping_mul(17) ^ round;
    for k in 0..4 {
        let h = mix(x ^ (y << 8) ^ (round << 16) ^ (k << 24));
        // A dependent read: where the second load goes depends on the first value.
        let a = read(h % W, (h >> 8) % H)?;
        let b = read(a % W, (a >> 8) % H)?;
        v = v.wrapping_add(a.rotate_left(k)).wrapping_add(b);
    }
    Ok(v)
}

struct Stress {
    src: ObjectId,
    dst: ObjectId,
    round: u32,
    device: u32,
    devices: u32,
}

impl Kernel for Stress {
    fn name(&self) -> &'static str {
        "stress"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        if owner(x, y, self.round, self.devices) != self.device {
            return Ok(());
        }
        let v = step(x, y, self.round, |sx, sy| {
            Ok(inv.load_f32(self.src, sx, sy)?.to_bits())
        })?;
        inv.store_f32(self.dst, x, y, f32::from_bits(v))
    }
}

fn run(devices: u32, page: u32, rounds: u32, seed: u32) -> (Vec<u32>, Vec<u32>) {
    // Sequential oracle.
    let init: Vec<u32> = (0..W * H).map(|i| mix(i ^ seed)).collect();
    let mut field = init.clone();
    for r in 0..rounds {
        let prev = field.clone();
        for y in 0..H {
            for x in 0..W {
                field[(y * W + x) as usize] =
                    step(x, y, r, |sx, sy| Ok(prev[(sy * W + sx) as usize])).unwrap();
            }
        }
    }
    let sys = System::cpu(&SystemConfig::new(devices as usize).threads(2)).unwrap();
    let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, page).unwrap();
    let bytes: Vec<u8> = init.iter().flat_map(|v| v.to_le_bytes()).collect();
    let mut a: ObjectEntry = sys.create(desc, Some(bytes)).unwrap();
    let mut b: ObjectEntry = sys.create(desc, None).unwrap();
    for r in 0..rounds {
        // Every device streams the whole domain and writes the texels it owns this round.
        let pending: Vec<_> = (0..devices)
            .map(|d| {
                let stress = Stress {
                    src: a.id,
                    dst: b.id,
                    round: r,
                    device: d,
                    devices,
                };
                let spec = PassSpec::over(stress, &[&a, &b], W, H);
                let procedure = if mix(seed ^ r ^ (d << 20)).is_multiple_of(2) {
                    Procedure::TwoPass
                } else {
                    Procedure::Relaunch
                };
                sys.on_device(d as usize, move |c| c.run_pass(&spec, procedure))
                    .unwrap()
            })
            .collect();
        for p in pending {
            p.wait().unwrap().unwrap();
        }
        std::mem::swap(&mut a, &mut b);
    }
    let got: Vec<u32> = sys
        .mm
        .read(a.id)
        .unwrap()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (got, field)
}

#[test]
fn eight_devices_tiny_pages_match_the_sequential_oracle() {
    for (page, seed) in [(1, 1), (2, 2), (4, 3)] {
        let (got, want) = run(8, page, 12, seed);
        assert_eq!(got, want, "page {page} seed {seed}");
    }
}

#[test]
#[ignore]
fn stress_many_seeds() {
    for seed in 0..40 {
        for page in [1, 2, 4, 8] {
            let (got, want) = run(8, page, 16, seed);
            assert_eq!(got, want, "page {page} seed {seed}");
        }
    }
}
