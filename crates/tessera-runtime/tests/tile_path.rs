//! The CPU backend's tile path (a kernel with a footprint runs over plain copies of its
//! pages, and the tile's stores are committed afterwards) keeps a texel that no invocation
//! stored: the commit copies only what was written, in both procedures, across page edges.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use tessera_core::{ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{
    Fault, Footprint, Invocation, Kernel, Partition, PassSpec, Plain, Procedure, System,
    SystemConfig, TexelAccess,
};

const W: u32 = 96;
const H: u32 = 40;

/// `to = from + 0.5` on the texels where x + y is even; the others keep what `to` held.
struct Checker {
    from: ObjectId,
    to: ObjectId,
}

impl Checker {
    fn body<A: TexelAccess>(&self, a: &mut A, x: u32, y: u32) -> Result<(), Fault> {
        if (x + y) % 2 == 1 {
            return Ok(());
        }
        let v = a.load_f32(self.from, x, y)?;
        a.store_f32(self.to, x, y, v + 0.5)
    }
}

impl Kernel for Checker {
    fn name(&self) -> &'static str {
        "checker"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        self.body(inv, x, y)
    }
    fn footprint(&self) -> Option<Footprint> {
        Some(Footprint {
            reads: vec![(self.from, 0)],
            write: self.to,
        })
    }
    fn run_plain(
        &self,
        plain: &mut Plain<'_>,
        xs: std::ops::Range<u32>,
        ys: std::ops::Range<u32>,
    ) -> Result<(), Fault> {
        for y in ys {
            for x in xs.clone() {
                self.body(plain, x, y)?;
            }
        }
        Ok(())
    }
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

#[test]
fn a_tile_commits_only_the_texels_its_invocations_stored() {
    let n = (W * H) as usize;
    let from: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let old: Vec<f32> = (0..n).map(|i| -1.0 - i as f32).collect();
    let want: Vec<f32> = (0..n)
        .map(|i| {
            let (x, y) = (i as u32 % W, i as u32 / W);
            if (x + y) % 2 == 0 {
                i as f32 + 0.5
            } else {
                -1.0 - i as f32
            }
        })
        .collect();
    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
        let sys = System::cpu(&SystemConfig::new(1).threads(2)).unwrap();
        // 16-texel pages: every 64-wide tile straddles pages, and the field's right and
        // bottom edges cut its last tiles short.
        let desc = ObjectDesc::texture(W, H, TexelFormat::R32Float, 16).unwrap();
        let a = sys.create(desc, Some(bytes(&from))).unwrap();
        let b = sys.create(desc, Some(bytes(&old))).unwrap();
        let checker = Checker {
            from: a.id,
            to: b.id,
        };
        let spec = PassSpec::over(checker, &[&a, &b], W, H);
        // Twice: the first run pages in (and may take the per-texel path), the second runs
        // on resident pages, where the tile path serves.
        for round in 0..2 {
            sys.run_pass(&spec, W, H, Partition::Rows, procedure)
                .unwrap();
            sys.settle().unwrap();
            let got: Vec<f32> = sys
                .mm
                .read(b.id)
                .unwrap()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            let wrong = (0..n).find(|&i| got[i] != want[i]);
            assert_eq!(
                wrong.map(|i| (i as u32 % W, i as u32 / W, got[i], want[i])),
                None,
                "{procedure:?}, round {round}: the first wrong texel (x, y, got, want)"
            );
        }
    }
}
