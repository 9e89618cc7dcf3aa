//! The race of paper 3.8: two devices take the same page exclusively, back to back. Device 1's
//! request arrives after device 0's grant but before device 0 has written. With the memory
//! lock it waits; without it, device 1 gets the page as it was before device 0's write and
//! device 0's write has nowhere to go.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use std::sync::Arc;

use tessera_core::{ObjectDesc, ProtocolVariant, TexelFormat};
use tessera_runtime::{
    Bound, Domain, Fault, Invocation, Kernel, PassSpec, PassStats, Result, RuntimeError, System,
    SystemConfig,
};

/// Writes `value` at every invocation.
struct Fill {
    id: tessera_core::ObjectId,
    value: f32,
}

impl Kernel for Fill {
    fn name(&self) -> &'static str {
        "fill"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.id, x, y, self.value)
    }
}

type Step = Box<dyn FnOnce(&mut tessera_runtime::DeviceContext) -> Result<()> + Send>;

struct Outcome {
    /// Whether device 1's request was answered before device 0 released.
    answered_early: bool,
    result: Result<Vec<f32>>,
}

fn scenario(variant: ProtocolVariant) -> Outcome {
    let sys = System::cpu(&SystemConfig::new(2).variant(variant).threads(1)).unwrap();
    // One 8×8 page; device 0 writes the left half, device 1 the right half.
    let t = sys
        .create(
            ObjectDesc::texture(8, 8, TexelFormat::R32Float, 8).unwrap(),
            None,
        )
        .unwrap();
    let spec = |x0, x1, value| PassSpec {
        kernel: Arc::new(Fill { id: t.id, value }),
        bindings: Arc::new(vec![Bound::new(&t)]),
        domain: Domain::Rect {
            x0,
            y0: 0,
            x1,
            y1: 8,
        },
        display: false,
    };
    let (s0, s1) = (spec(0, 4, 1.0), spec(4, 8, 2.0));
    let (m0, m1) = (s0.clone(), s1.clone());
    let on = |d: usize, f: Step| sys.on_device(d, f).unwrap().wait().unwrap();
    // Second pass of the write procedure on both devices: values into their temporaries.
    let to_temp = |d, s: PassSpec| {
        sys.on_device(d, move |c| {
            c.compute_to_temp(&s, s.domain.clone(), Vec::new(), &mut PassStats::default())
        })
        .unwrap()
        .wait()
        .unwrap()
        .unwrap()
    };
    let (w0, w1) = (to_temp(0, s0), to_temp(1, s1));
    assert_eq!((w0.len(), w1.len()), (1, 1), "both write the one page");
    // Device 0's exclusive request is granted.
    on(0, Box::new(move |c| c.acquire(w0))).unwrap();
    // Device 1's exclusive request for the same page arrives before device 0 has merged.
    let pending = sys
        .on_device(1, move |c| c.request(w1))
        .unwrap()
        .wait()
        .unwrap();
    // The manager handles commands in order: once this returns, it has seen the request.
    sys.mm.traffic().unwrap();
    let early = pending.try_take();
    let answered_early = early.is_some();
    // Device 0's third pass: merge through the write mask, then release.
    let r0 = on(
        0,
        Box::new(move |c| {
            let r = c.merge_temp(&m0, &mut PassStats::default());
            c.release();
            r
        }),
    );
    let g1 = match early {
        Some(r) => r,
        None => pending.wait().unwrap(),
    };
    let r1 = g1.and_then(|()| {
        on(
            1,
            Box::new(move |c| {
                let r = c.merge_temp(&m1, &mut PassStats::default());
                c.release();
                r
            }),
        )
    });
    let result = r0.and(r1).and_then(|()| {
        let bytes = sys.mm.read(t.id)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect())
    });
    Outcome {
        answered_early,
        result,
    }
}

fn expected() -> Vec<f32> {
    (0..64).map(|i| if i % 8 < 4 { 1.0 } else { 2.0 }).collect()
}

#[test]
fn memory_lock_defers_the_second_exclusive_request() {
    let o = scenario(ProtocolVariant::Correct);
    assert!(
        !o.answered_early,
        "device 1 must wait for device 0's release"
    );
    assert_eq!(o.result.unwrap(), expected());
}

#[test]
fn without_the_memory_lock_the_race_loses_a_write() {
    let o = scenario(ProtocolVariant::NoMemoryLock);
    assert!(
        o.answered_early,
        "without the lock the request is answered at once"
    );
    match o.result {
        Err(RuntimeError::GrantViolated { .. }) => {}
        Ok(data) => assert_ne!(data, expected(), "the race must show"),
        Err(e) => panic!("unexpected error {e}"),
    }
}
