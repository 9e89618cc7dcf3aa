//! Access modes on the CPU backend: remote objects give migrate's results without ever being
//! copied, their traffic matches a hand count, and replicate-read objects refuse stores.
//!
//! Real threads: off under the `shuttle` feature, as the runtime's other thread tests are.
#![cfg(not(feature = "shuttle"))]

use std::sync::Arc;
use tessera_core::{AccessMode, Location, ObjectDesc, RemoteLink, TexelFormat};

use tessera_runtime::{
    Bound, Domain, Fault, Invocation, Kernel, Partition, PassSpec, Procedure, RuntimeError, System,
    SystemConfig,
};

const W: u32 = 16;
const H: u32 = 16;
const PAGE: u32 = 8;

/// out(x, y) = in(x, y) + in(x, min(y + 1, H - 1)) / 2: one row of halo above.
struct Halo {
    input: tessera_core::ObjectId,
    output: tessera_core::ObjectId,
}

impl Kernel for Halo {
    fn name(&self) -> &'static str {
        "remote_test_halo"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let a = inv.load_f32(self.input, x, y)?;
        let b = inv.load_f32(self.input, x, (y + 1).min(H - 1))?;
        inv.store_f32(self.output, x, y, a + b * 0.5)
    }
}

fn input() -> Vec<f32> {
    (0..W * H).map(|i| (i % 37) as f32 - 11.0).collect()
}

/// The plain loop the kernel must match.
fn reference() -> Vec<f32> {
    let v = input();
    let mut out = vec![0.0; (W * H) as usize];
    for y in 0..H {
        for x in 0..W {
            let b = v[((y + 1).min(H - 1) * W + x) as usize];
            out[(y * W + x) as usize] = v[(y * W + x) as usize] + b * 0.5;
        }
    }
    out
}

fn desc() -> ObjectDesc {
    ObjectDesc::texture(W, H, TexelFormat::R32Float, PAGE).unwrap()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

struct Run {
    out: Vec<f32>,
    sys: System,
    objects: [tessera_core::ObjectEntry; 2],
}

fn run(devices: usize, mode: AccessMode, place: Option<Partition>) -> Run {
    let sys = System::cpu(&SystemConfig::new(devices).threads(2)).unwrap();
    let i = sys
        .create_with(desc(), Some(bytes(&input())), mode)
        .unwrap();
    let o = sys.create_with(desc(), None, mode).unwrap();
    if let Some(p) = place {
        sys.place_by(&i, p).unwrap();
        sys.place_by(&o, p).unwrap();
    }
    assert_eq!(sys.access(&i).unwrap(), mode);
    sys.run_kernel(
        Halo {
            input: i.id,
            output: o.id,
        },
        &[&i, &o],
        W,
        H,
    )
    .unwrap();
    Run {
        out: sys.read_f32(&o).unwrap(),
        sys,
        objects: [i, o],
    }
}

#[test]
fn remote_gives_migrates_result_and_no_device_ever_holds_a_remote_page() {
    let want = reference();
    for devices in [1, 2, 4] {
        let migrate = run(devices, AccessMode::Migrate, None);
        assert_eq!(migrate.out, want, "migrate, {devices} devices");
        for place in [None, Some(Partition::Rows), Some(Partition::Cols)] {
            let r = run(devices, AccessMode::Remote, place);
            assert_eq!(r.out, want, "remote {place:?}, {devices} devices");
            // The directory lists no copy of any remote page, and no device's page table maps
            // one (a request for one is refused, so none was granted).
            let (_, dir) = r.sys.mm.memory().unwrap();
            for e in &r.objects {
                for p in e.pages() {
                    assert!(dir[p as usize].copies.is_empty(), "page {p} copied");
                    assert_eq!(dir[p as usize].owner, None);
                }
            }
            let traffic = r.sys.mm.traffic().unwrap();
            for t in &traffic {
                assert_eq!(t.page_requests, 0);
                assert_eq!(t.host_to_device.pages + t.device_to_device.pages, 0);
            }
        }
    }
}

fn link(read: u64, write: u64, batch: u64, spread: u64, batches: u64) -> RemoteLink {
    RemoteLink {
        read_bytes: read,
        write_bytes: write,
        batch_bytes: batch,
        spread_bytes: spread,
        batches,
    }
}

#[test]
fn the_two_pass_procedure_gives_the_same_field_with_remote_and_migrate_objects_mixed() {
    // Input remote (placed in column bands), output migrate: the compute pass's stores go
    // through the temporary and the merge, its remote loads in place.
    let sys = System::cpu(&SystemConfig::new(3).threads(2)).unwrap();
    let i = sys
        .create_with(desc(), Some(bytes(&input())), AccessMode::Remote)
        .unwrap();
    sys.place_by(&i, Partition::Cols).unwrap();
    let o = sys.create(desc(), None).unwrap();
    let spec = PassSpec {
        kernel: Arc::new(Halo {
            input: i.id,
            output: o.id,
        }),
        bindings: Arc::new(vec![Bound::new(&i), Bound::new(&o)]),
        domain: Domain::Rect {
            x0: 0,
            y0: 0,
            x1: 0,
            y1: 0,
        },
        display: false,
    };
    for procedure in [Procedure::TwoPass, Procedure::Relaunch] {
        sys.run_pass(&spec, W, H, Partition::Rows, procedure)
            .unwrap();
        assert_eq!(sys.read_f32(&o).unwrap(), reference(), "{procedure:?}");
    }
    let (_, dir) = sys.mm.memory().unwrap();
    assert!(i.pages().all(|p| dir[p as usize].copies.is_empty()));
    assert!(o.pages().any(|p| !dir[p as usize].copies.is_empty()));
}

#[test]
fn remote_traffic_matches_a_hand_count() {
    // 16×16 texels in 8×8 pages: pages 0 1 (rows 0..8) and 2 3 (rows 8..16). Two devices in
    // row bands: device 0 runs rows 0..8, device 1 rows 8..16, each one 64×16 tile.
    //
    // All pages in host memory. Device 0 loads in(x, y) for y 0..8 (128 loads) and
    // in(x, y+1) (128 loads: rows 1..8, row 8 being page 2 and 3's first row). Pages 0 and 1:
    // every one of their 64 words touched, a run of 64 ≥ 32, so batch: 128 + 112 = 240 loads,
    // 960 bytes, 2 batches. Pages 2 and 3: row 0 only, 8 words each, spread: 16 loads, 64
    // bytes. Stores: 128 to pages 0 and 1, all 64 words each: 512 bytes, 2 batches.
    // Device 0: read 1024, write 512, batch 960 + 512 = 1472, spread 64, 4 batches.
    // Device 1 loads rows 8..16 and rows 9..16 plus row 15 again (clamped): 256 loads, all in
    // pages 2 and 3 with every word touched: batch 1024 bytes, 2 batches; stores 512, 2
    // batches. Device 1: read 1024, write 512, batch 1536, spread 0, 4 batches.
    let r = run(2, AccessMode::Remote, None);
    let t = r.sys.mm.traffic().unwrap();
    assert_eq!(t[0].remote_host, link(1024, 512, 1472, 64, 4));
    assert_eq!(t[1].remote_host, link(1024, 512, 1536, 0, 4));
    assert!(t
        .iter()
        .all(|t| t.remote_device.iter().all(|l| l.is_empty())));
    // Priced on GPU-SM's machine with no device work: each device alone would take
    // 1024 / 12e9 + 512 / (12e9 × 0.91) s = 1.322e-7 s, but both use host memory's link,
    // which carries 2 × 1536 = 3072 bytes at 18e9 B/s: 1.707e-7 s.
    let topo = tessera_model::Topology::preset("gpusm-pcie3", 2).unwrap();
    let uses: Vec<_> = t
        .iter()
        .enumerate()
        .flat_map(|(d, t)| t.remote_uses(d))
        .collect();
    let p = topo.remote_pass_time(&[0.0, 0.0], &uses).unwrap();
    let alone = 1024.0 / 12e9 + 512.0 / (12e9 * 0.91);
    assert!((p.device_total[0] - alone).abs() < 1e-18, "{p:?}");
    assert!((p.total - 3072.0 / 18e9).abs() < 1e-18, "{p:?}");

    // Pages placed in row bands (pages 0 1 on device 0, 2 3 on device 1): only device 0's
    // loads of row 8 leave it, to device 1: 16 loads of 8-word runs, 64 bytes, spread.
    let r = run(2, AccessMode::Remote, Some(Partition::Rows));
    let t = r.sys.mm.traffic().unwrap();
    assert_eq!(t[0].remote_host, RemoteLink::default());
    assert_eq!(
        t[0].remote_device,
        vec![RemoteLink::default(), link(64, 0, 0, 64, 0)]
    );
    assert_eq!(t[1].remote_total(), RemoteLink::default());
}

/// Writes 1 to every texel of its object.
struct Fill(tessera_core::ObjectId);

impl Kernel for Fill {
    fn name(&self) -> &'static str {
        "remote_test_fill"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        inv.store_f32(self.0, x, y, 1.0)
    }
}

#[test]
fn replicate_read_objects_are_read_everywhere_and_refuse_stores() {
    let sys = System::cpu(&SystemConfig::new(2).threads(2)).unwrap();
    let i = sys
        .create_with(desc(), Some(bytes(&input())), AccessMode::ReplicateRead)
        .unwrap();
    let o = sys.create(desc(), None).unwrap();
    assert_eq!(sys.access(&o).unwrap(), AccessMode::Migrate);
    sys.run_kernel(
        Halo {
            input: i.id,
            output: o.id,
        },
        &[&i, &o],
        W,
        H,
    )
    .unwrap();
    assert_eq!(sys.read_f32(&o).unwrap(), reference());
    let err = sys.run_kernel(Fill(i.id), &[&i], W, H).unwrap_err();
    assert!(
        matches!(err, RuntimeError::ReadOnlyObject { object, .. } if object == i.id),
        "{err}"
    );
    // The object is unchanged.
    assert_eq!(sys.read_f32(&i).unwrap(), input());
    // Only a remote object's pages are placed, one location per page, on devices that exist.
    assert!(matches!(
        sys.place(&i, |_, _, _| Location::Host),
        Err(RuntimeError::NotRemote { object, .. }) if object == i.id
    ));
    let r = sys.create_with(desc(), None, AccessMode::Remote).unwrap();
    assert!(sys.place(&r, |_, _, _| Location::Device(2)).is_err());
    assert!(matches!(
        sys.mm.place(r.id, vec![Location::Host]),
        Err(RuntimeError::Locations { given: 1, .. })
    ));
}
