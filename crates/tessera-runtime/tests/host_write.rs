//! The host replaces an object's data between passes (`System::write`): every device's copy,
//! modified ones owned under owned pages included, gives way to the new bytes, which the next
//! pass reads on every device; under a budget and with deferred launches alike. What cannot
//! be written is a typed error that changes nothing.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{AccessMode, ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, System, SystemConfig};

const N: u32 = 32;

/// `to(x, y) = from(x, N-1-y) + 1`: every device reads rows another device wrote, so after a
/// pass the pages of `to` are modified and shared across devices.
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
}

fn field(f: impl Fn(u32, u32) -> f32) -> Vec<f32> {
    (0..N * N).map(|i| f(i % N, i / N)).collect()
}

fn mirrored(src: &[f32]) -> Vec<f32> {
    field(|x, y| src[((N - 1 - y) * N + x) as usize] + 1.0)
}

/// Passes a → b and b → a, the host writing `a` (whose pages the devices then own, modified)
/// and `b` between them; every read equals the plain computation from what was written.
fn run(cfg: SystemConfig) {
    let what = format!("{cfg:?}");
    let sys = System::cpu(&cfg).unwrap();
    let first = field(|x, y| (x * 100 + y) as f32);
    let a = sys.create_f32(N, N, 8, Some(&first)).unwrap();
    let b = sys.create_f32(N, N, 8, None).unwrap();
    let pass = |from: &tessera_core::ObjectEntry, to: &tessera_core::ObjectEntry| {
        let k = Mirror {
            from: from.id,
            to: to.id,
        };
        sys.run_kernel(k, &[from, to], N, N).unwrap();
    };
    pass(&a, &b);
    pass(&b, &a);
    assert_eq!(
        sys.read_f32(&a).unwrap(),
        mirrored(&mirrored(&first)),
        "{what}"
    );
    for round in 0..3u32 {
        // `a` is modified on the devices that wrote it: the host's bytes replace them.
        let new = field(|x, y| (round * 7 + x * 3 + y * 5) as f32 - 0.5);
        sys.write_f32(&a, &new).unwrap();
        assert_eq!(sys.read_f32(&a).unwrap(), new, "{what}, round {round}");
        pass(&a, &b);
        assert_eq!(
            sys.read_f32(&b).unwrap(),
            mirrored(&new),
            "{what}, round {round}"
        );
        // And `b`, which every device holds: read on every device in the next pass.
        let other = field(|x, y| (x ^ y) as f32 + round as f32);
        sys.write_f32(&b, &other).unwrap();
        pass(&b, &a);
        assert_eq!(
            sys.read_f32(&a).unwrap(),
            mirrored(&other),
            "{what}, round {round}"
        );
    }
}

#[test]
fn a_host_write_replaces_every_copy() {
    for devices in [1, 2, 3] {
        run(SystemConfig::new(devices));
        run(SystemConfig::new(devices).coherence(tessera_core::Coherence::WriteHome));
        // 8 × 8 pages of 256 bytes: 16 of each texture's 16 pages fit, not both textures.
        run(SystemConfig::new(devices).budget(24 * 256));
        run(SystemConfig::new(devices).deferred(true));
    }
}

#[test]
fn what_cannot_be_written_is_a_typed_error_that_changes_nothing() {
    let sys = System::cpu(&SystemConfig::new(2)).unwrap();
    let data = field(|x, y| (x + y) as f32);
    let t = sys.create_f32(N, N, 8, Some(&data)).unwrap();
    // The wrong size.
    assert!(matches!(
        sys.write_f32(&t, &data[1..]),
        Err(RuntimeError::DataSize { .. })
    ));
    assert!(matches!(
        sys.write(&t, vec![0; 3]),
        Err(RuntimeError::DataSize { .. })
    ));
    // The wrong kind.
    assert!(matches!(
        sys.write_u32(&t, &[0; (N * N) as usize]),
        Err(RuntimeError::Core(
            tessera_core::CoreError::WrongKind { .. }
        ))
    ));
    assert_eq!(sys.read_f32(&t).unwrap(), data);
    // A remote object's pages live where they were placed.
    let desc = ObjectDesc::texture(N, N, TexelFormat::R32Float, 8).unwrap();
    let r = sys.create_with(desc, None, AccessMode::Remote).unwrap();
    for len in [N * N * 4, 3] {
        assert!(matches!(
            sys.write(&r, vec![0; len as usize]),
            Err(RuntimeError::Config(_))
        ));
    }
    // A freed object.
    sys.free(&t).unwrap();
    assert!(matches!(
        sys.write_f32(&t, &data),
        Err(RuntimeError::NotLive { .. })
    ));
    // The system goes on.
    let u = sys.create_u32(&[1, 2, 3, 4], 8).unwrap();
    sys.write_u32(&u, &[5, 6, 7, 8]).unwrap();
    assert_eq!(sys.read_u32(&u).unwrap(), [5, 6, 7, 8]);
}
