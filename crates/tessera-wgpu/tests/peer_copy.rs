//! Device → device page moves between tessera devices that share one wgpu device: one
//! `copy_buffer_to_buffer` on the device, no host round trip (docs/PROTOCOL.md, "Peer
//! copies"). The same moves through the runtime must leave exactly the bytes the CPU backend's
//! run leaves, and the traffic counters must show the copies were made on the device.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use common::{Bump, One};

use tessera_core::{DeviceId, ObjectDesc, ObjectEntry, ObjectId, SlotAddr, TexelFormat};
use tessera_runtime::{
    Device, DeviceTraffic, Fault, Invocation, Kernel, PassSpec, PeerCopy, Procedure, RuntimeError,
    System, SystemConfig, WgslKernel,
};
use tessera_wgpu::{AdapterChoice, SharedGpu, WgpuDevice, WgpuError};

/// a = -1 at even x, nothing else: it stores without loading, so its pages are asked for
/// writing only, and the texels it leaves must come with the page.
struct Half {
    a: ObjectId,
}

impl Kernel for Half {
    fn name(&self) -> &'static str {
        "peer_copy_half"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        if x.is_multiple_of(2) {
            inv.store_f32(self.a, x, y, -1.0)?;
        }
        Ok(())
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                if (x % 2u == 0u) {
                    store_f32(params.a, x, y, -1.0);
                }
            }",
            &One { a: self.a.0 },
        ))
    }
}

/// to = from.
struct Copy {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for Copy {
    fn name(&self) -> &'static str {
        "peer_copy_copy"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, x, y)?;
        inv.store_f32(self.to, x, y, v)
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            // Not `from`: a reserved word in WGSL.
            struct Objects {
                src: u32,
                dst: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                store_f32(params.dst, x, y, load_f32(params.src, x, y));
            }",
            &Objects {
                src: self.from.0,
                dst: self.to.0,
            },
        ))
    }
}

const W: u32 = 32;
const H: u32 = 8;

/// A 32×8 R32Float texture of four 8×8 pages.
fn desc() -> ObjectDesc {
    ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap()
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// Runs `kernel` over the whole object on device `d` alone.
fn on(sys: &System, d: usize, kernel: impl Kernel + 'static, objects: &[&ObjectEntry]) {
    let spec = PassSpec::over(kernel, objects, W, H);
    sys.on_device(d, move |ctx| ctx.run_pass(&spec, Procedure::Relaunch))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap();
}

/// What a run leaves: `a`, `b` and `c` as floats, and the traffic per device.
struct Outcome {
    a: Vec<f32>,
    b: Vec<f32>,
    c: Vec<f32>,
    traffic: Vec<DeviceTraffic>,
    /// Devices listing a copy of each page of `a`, and its owner, at the end.
    a_copies: Vec<(u32, bool)>,
}

/// Pages moved device → device in every way the protocol moves them:
/// 1. device 0 modifies all four pages of `a` (from home);
/// 2. device 1 stores into half of each page without loading: the four pages, modified on
///    the source, move 0 → 1 for writing in one batch, with no write-back;
/// 3. device 0 modifies `b` from home: its four pages take the slots `a`'s pages just left;
/// 4. device 0 loads and modifies `a`: pages modified on device 1 move 1 → 0 for reading,
///    written home as well (through the host, not copied on the device), then device 1's
///    copies are invalidated;
/// 5. device 1 reads `a` into `c`: the same, 0 → 1.
fn scenario(sys: &System) -> Outcome {
    let init_a: Vec<f32> = (0..W * H).map(|i| i as f32).collect();
    let init_b: Vec<f32> = (0..W * H).map(|i| 1000.0 + i as f32).collect();
    let a = sys.create(desc(), Some(bytes(&init_a))).unwrap();
    let b = sys.create(desc(), Some(bytes(&init_b))).unwrap();
    let c = sys.create(desc(), None).unwrap();
    on(sys, 0, Bump { a: a.id }, &[&a]);
    on(sys, 1, Half { a: a.id }, &[&a]);
    on(sys, 0, Bump { a: b.id }, &[&b]);
    on(sys, 0, Bump { a: a.id }, &[&a]);
    on(
        sys,
        1,
        Copy {
            from: a.id,
            to: c.id,
        },
        &[&a, &c],
    );
    let (_, directory) = sys.mm.memory().unwrap();
    let pages = a.page_offset as usize..(a.page_offset + a.desc.page_count()) as usize;
    Outcome {
        a: sys.read_f32(&a).unwrap(),
        b: sys.read_f32(&b).unwrap(),
        c: sys.read_f32(&c).unwrap(),
        traffic: sys.mm.traffic().unwrap(),
        a_copies: directory[pages]
            .iter()
            .map(|e| (e.copies.len(), e.owner.is_some()))
            .collect(),
    }
}

#[test]
fn pages_moved_on_the_device_hold_what_the_cpu_backend_moves() {
    moves_match(tessera_core::Coherence::Owned);
}

#[test]
fn pages_moved_on_the_device_hold_what_the_cpu_backend_moves_under_write_home() {
    moves_match(tessera_core::Coherence::WriteHome);
}

fn moves_match(coherence: tessera_core::Coherence) {
    let home_too = coherence == tessera_core::Coherence::WriteHome;
    let cfg = SystemConfig::new(2).threads(1).coherence(coherence);
    let Some(gpu) = common::system(&cfg) else {
        return;
    };
    let got = scenario(&gpu);
    let want = scenario(&System::cpu(&cfg).unwrap());

    // By hand: a is -1 at even x and went through two bumps elsewhere (4i + 3); b went
    // through one (2(1000 + i) + 1).
    let n = (W * H) as usize;
    let a_hand: Vec<f32> = (0..n)
        .map(|i| {
            if (i % W as usize).is_multiple_of(2) {
                -1.0
            } else {
                4.0 * i as f32 + 3.0
            }
        })
        .collect();
    let b_hand: Vec<f32> = (0..n).map(|i| 2.0 * (1000.0 + i as f32) + 1.0).collect();
    for out in [&got, &want] {
        assert_eq!(out.a, a_hand);
        assert_eq!(out.b, b_hand);
        assert_eq!(out.c, a_hand);
        // Step 5 left two copies: clean with home current under write-home, device 0 the
        // owner and home stale under owned pages.
        assert_eq!(out.a_copies, vec![(2, !home_too); 4]);
    }

    const PAGE: u64 = 8 * 8 * 4;
    for d in 0..2 {
        let (g, c) = (&got.traffic[d], &want.traffic[d]);
        // The same moves on both backends, by link and by source.
        assert_eq!(g.host_to_device, c.host_to_device, "device {d}");
        assert_eq!(g.device_to_host, c.device_to_host, "device {d}");
        assert_eq!(g.device_to_device, c.device_to_device, "device {d}");
        assert_eq!(
            g.device_to_device_from, c.device_to_device_from,
            "device {d}"
        );
        assert_eq!(
            g.device_to_device_homed_from, c.device_to_device_homed_from,
            "device {d}"
        );
        // The CPU devices of a process are peers too (one copy between their memories), and
        // the memory manager chooses the same moves for both.
        assert_eq!(
            g.device_to_device_peer, c.device_to_device_peer,
            "device {d}"
        );
    }
    for out in [&got, &want] {
        // Device 1 received a's four pages twice (steps 2 and 5), device 0 once (step 4).
        assert_eq!(out.traffic[1].device_to_device_from[0].pages, 8);
        assert_eq!(out.traffic[0].device_to_device_from[1].pages, 4);
        if home_too {
            // Only step 2's were peer copies: steps 4 and 5 write the pages home as well, so
            // the reader is written from the host copy that write-back reads anyway.
            assert_eq!(out.traffic[1].device_to_device_peer.pages, 4);
            assert_eq!(out.traffic[1].device_to_device_peer.bytes, 4 * PAGE);
            assert_eq!(out.traffic[0].device_to_device_peer.pages, 0);
            // Those are the moves counted as written home too, for the topologies.
            assert_eq!(out.traffic[1].device_to_device_homed_from[0].pages, 4);
            assert_eq!(out.traffic[0].device_to_device_homed_from[1].pages, 4);
            // Steps 4 and 5 wrote the source's four modified pages home; step 2 nothing.
            assert_eq!(out.traffic[0].device_to_host.pages, 4);
            assert_eq!(out.traffic[1].device_to_host.pages, 4);
        } else {
            // Nothing goes home: every move is a peer copy from the owner.
            for t in &out.traffic {
                assert!(t.device_to_device_homed_from.iter().all(|c| c.pages == 0));
            }
            assert_eq!(out.traffic[1].device_to_device_peer.pages, 8);
            assert_eq!(out.traffic[0].device_to_device_peer.pages, 4);
            assert_eq!(out.traffic[0].device_to_host.pages, 0);
            assert_eq!(out.traffic[1].device_to_host.pages, 0);
        }
    }
}

fn slot(slot: u32) -> SlotAddr {
    SlotAddr { memory: 0, slot }
}

#[test]
fn a_peer_copy_moves_exactly_its_slots_and_refuses_another_wgpu_device() {
    let Some(shared) = common::opened(SharedGpu::open(&AdapterChoice::Default), "a wgpu device")
    else {
        return;
    };
    let mut src = WgpuDevice::on(DeviceId(0), &shared).unwrap();
    let mut dst = WgpuDevice::on(DeviceId(1), &shared).unwrap();
    assert!(src.peer_group().is_some());
    assert_eq!(src.peer_group(), dst.peer_group());
    const SLOT: u64 = 64;
    src.create_memory(0, SLOT, 4).unwrap();
    dst.create_memory(0, SLOT, 4).unwrap();
    let page = |k: u8| -> Vec<u8> { (0..SLOT as u8).map(|i| i.wrapping_mul(7) ^ k).collect() };
    for s in 0..4 {
        src.write_slot(slot(s), &page(s as u8)).unwrap();
        dst.write_slot(slot(s), &[0xEE; SLOT as usize]).unwrap();
    }
    let from = src.peer_memory(0).unwrap();
    // Several copies in one call, out of order; dst's slot 1 is left alone.
    let copies = [(3, 0), (0, 2), (2, 3)].map(|(from_slot, to)| PeerCopy {
        from: from.clone(),
        from_slot,
        at: slot(to),
    });
    dst.copy_from_peers(&copies).unwrap();
    // The source's slot is rewritten right after: the copy was taken before.
    src.write_slot(slot(3), &[1; SLOT as usize]).unwrap();
    assert_eq!(dst.read_slot(slot(0)).unwrap(), page(3));
    assert_eq!(dst.read_slot(slot(1)).unwrap(), vec![0xEE; SLOT as usize]);
    assert_eq!(dst.read_slot(slot(2)).unwrap(), page(0));
    assert_eq!(dst.read_slot(slot(3)).unwrap(), page(2));
    assert_eq!(src.read_slot(slot(3)).unwrap(), vec![1; SLOT as usize]);

    // Bad input is a typed error, not a panic: a slot outside the source memory, a memory
    // that does not exist, and a source on another wgpu device.
    let outside = PeerCopy {
        from: from.clone(),
        from_slot: 4,
        at: slot(0),
    };
    assert_eq!(
        wgpu_error(dst.copy_from_peers(&[outside])),
        WgpuError::PeerSlot {
            from_slot: 4,
            slot_bytes: SLOT,
            capacity: 4,
            into_bytes: SLOT,
        }
    );
    assert_eq!(
        wgpu_error(src.peer_memory(1).map(|_| ())),
        WgpuError::NoMemory { memory: 1 }
    );
    let other = SharedGpu::open(&AdapterChoice::Default).unwrap();
    let mut elsewhere = WgpuDevice::on(DeviceId(1), &other).unwrap();
    assert_ne!(elsewhere.peer_group(), src.peer_group());
    elsewhere.create_memory(0, SLOT, 4).unwrap();
    let foreign = PeerCopy {
        from,
        from_slot: 0,
        at: slot(0),
    };
    assert_eq!(
        wgpu_error(elsewhere.copy_from_peers(&[foreign])),
        WgpuError::PeerAcrossDevices
    );
}

/// The wgpu error behind a runtime error: typed through the runtime's boundary.
fn wgpu_error(r: Result<(), RuntimeError>) -> WgpuError {
    match r {
        Err(RuntimeError::Device { error, .. }) => error
            .downcast_ref::<WgpuError>()
            .unwrap_or_else(|| panic!("not a wgpu error: {error}"))
            .clone(),
        other => panic!("expected a device error, got {other:?}"),
    }
}

/// A batch of pages taken device → device on one wgpu device: the copies are queued on the
/// shared queue and the manager reuses nothing before they run, so neither device waits for
/// the GPU or reads a byte back, and the reader's next read sees the moved bytes.
#[test]
fn a_batch_of_peer_copies_costs_no_wait_for_the_gpu() {
    let cfg = SystemConfig::new(2).threads(1);
    let Some(sys) = common::system(&cfg) else {
        return;
    };
    let init: Vec<f32> = (0..W * H).map(|i| 3.0 * i as f32 - 7.0).collect();
    let a = sys.create(desc(), Some(bytes(&init))).unwrap();
    let pages: Vec<tessera_core::PageRequest> = (0..a.desc.page_count())
        .map(|p| tessera_core::PageRequest {
            page: tessera_core::GlobalPage(a.page_offset + p),
            access: tessera_core::Access::Write,
        })
        .collect();
    // Device 0 takes every page for writing (from home), then device 1 takes them from it.
    sys.mm
        .request(DeviceId(0), pages.clone())
        .wait()
        .unwrap()
        .unwrap();
    sys.mm.release(DeviceId(0));
    let before = sys.host_counters();
    sys.mm.request(DeviceId(1), pages).wait().unwrap().unwrap();
    sys.mm.release(DeviceId(1));
    let after = sys.host_counters();
    let traffic = sys.mm.traffic().unwrap();
    assert_eq!(
        traffic[1].device_to_device_peer.pages,
        a.desc.page_count(),
        "every page moved as a peer copy"
    );
    for d in 0..2 {
        let (b, n) = (&before[d], &after[d]);
        assert_eq!(
            n.device_waits, b.device_waits,
            "device {d} waited for the GPU"
        );
        assert_eq!(n.bytes_read_back, b.bytes_read_back, "device {d} read back");
    }
    // The batch is one submission on the reader, its descriptors included; the source's
    // revoked descriptors wait for its own next submission.
    assert_eq!(after[1].submissions - before[1].submissions, 1);
    assert_eq!(after[0].submissions, before[0].submissions);
    // Device 1 owns the pages: the host's read writes them back from its memory.
    assert_eq!(sys.read_f32(&a).unwrap(), init);
}
