//! Write-backs in the background: an evicted modified page is read from the GPU without a
//! wait, and its bytes go home only when something needs them (a reload, a host read). The
//! bytes are the page's as it was evicted, whatever its slot holds next, and a freed object's
//! pending bytes never reach the object that reuses its pages.
//!
//! Without an adapter these tests print that they skipped and pass, unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use common::Bump;

use std::sync::atomic::Ordering::Relaxed;

use tessera_core::{DeviceId, GlobalPage, ObjectDesc, ObjectEntry, SlotAddr, TexelFormat};
use tessera_runtime::{Device, HostCounters, PassSpec, Procedure, System, SystemConfig};

const SIDE: u32 = 32;
const PAGE: u32 = 8;

fn bump(sys: &System, a: &ObjectEntry) {
    let spec = PassSpec::over(Bump { a: a.id }, &[a], SIDE, SIDE);
    sys.on_device(0, move |ctx| ctx.run_pass(&spec, Procedure::Relaunch))
        .unwrap()
        .wait()
        .unwrap()
        .unwrap();
}

fn texture(sys: &System, init: &[f32]) -> ObjectEntry {
    let desc = ObjectDesc::texture(SIDE, SIDE, TexelFormat::R32Float, PAGE).unwrap();
    let bytes: Vec<u8> = init.iter().flat_map(|f| f.to_le_bytes()).collect();
    sys.create(desc, Some(bytes)).unwrap()
}

fn pages(a: &ObjectEntry) -> Vec<GlobalPage> {
    a.pages().map(GlobalPage).collect()
}

/// Evicts all of `a`'s pages from device 0; what that cost the host.
fn evict(sys: &System, a: &ObjectEntry) -> HostCounters {
    let before = sys.host_counters()[0];
    sys.mm.evict(DeviceId(0), pages(a)).unwrap();
    sys.host_counters()[0].since(&before)
}

fn bumped(v: &[f32], times: u32) -> Vec<f32> {
    v.iter()
        .map(|&x| (0..times).fold(x, |x, _| 2.0 * x + 1.0))
        .collect()
}

#[test]
fn an_evicted_page_goes_home_without_a_wait_and_comes_back_right() {
    let Some(sys) = common::system(&SystemConfig::new(1).threads(1)) else {
        return;
    };
    let init: Vec<f32> = (0..SIDE * SIDE).map(|i| i as f32 * 0.25 - 40.0).collect();
    let a = texture(&sys, &init);
    let slot_bytes = (PAGE * PAGE * 4) as u64;
    let n = a.desc.page_count();
    for round in 1..=3 {
        bump(&sys, &a);
        let h = evict(&sys, &a);
        assert_eq!(h.device_waits, 0, "round {round}: evicting waited: {h:?}");
        assert_eq!(h.bytes_read_back, n * slot_bytes, "round {round}: {h:?}");
        assert!(
            !sys.mm.holds(DeviceId(0), pages(&a)).unwrap(),
            "round {round}: the pages stayed"
        );
    }
    // The third eviction's bytes are still in flight: the host read takes them.
    assert_eq!(sys.read_f32(&a).unwrap(), bumped(&init, 3));
    let traffic = sys.mm.traffic().unwrap();
    assert_eq!(traffic[0].eviction_write_backs, 3 * n);
}

#[test]
fn a_freed_objects_pending_bytes_do_not_reach_the_next_object() {
    let Some(sys) = common::system(&SystemConfig::new(1).threads(1)) else {
        return;
    };
    let first: Vec<f32> = (0..SIDE * SIDE).map(|i| i as f32).collect();
    let a = texture(&sys, &first);
    bump(&sys, &a);
    assert_eq!(evict(&sys, &a).device_waits, 0);
    let a_pages = pages(&a);
    sys.mm.free(a.id).unwrap();
    let second: Vec<f32> = (0..SIDE * SIDE).map(|i| -(i as f32) - 7.0).collect();
    let b = texture(&sys, &second);
    assert_eq!(pages(&b), a_pages, "the new object reuses the freed pages");
    assert_eq!(sys.read_f32(&b).unwrap(), second);
    bump(&sys, &b);
    assert_eq!(sys.read_f32(&b).unwrap(), bumped(&second, 1));
}

#[test]
fn a_read_in_the_background_keeps_the_bytes_of_when_it_started() {
    let Some(mut gpu) = common::gpu() else {
        return;
    };
    let slot_bytes = 256u64;
    gpu.create_memory(0, slot_bytes, 4).unwrap();
    let at = |slot| SlotAddr { memory: 0, slot };
    let old: Vec<u8> = (0..slot_bytes).map(|i| i as u8).collect();
    let other: Vec<u8> = (0..slot_bytes).map(|i| (i * 3 + 1) as u8).collect();
    gpu.write_slot(at(1), &old).unwrap();
    gpu.write_slot(at(2), &other).unwrap();
    let read = gpu
        .read_slots_later(&[at(1), at(2)])
        .unwrap()
        .expect("the wgpu device reads in the background");
    // The slot's next page, queued behind the read.
    gpu.write_slot(at(1), &[0xAB; 256]).unwrap();
    // A read that waits for the queue: the background read is done by then.
    assert_eq!(gpu.read_slot(at(1)).unwrap(), vec![0xAB; 256]);
    let c = gpu.counters().unwrap();
    let waits = c.device_waits.load(Relaxed);
    assert_eq!(read.wait().unwrap(), vec![old, other]);
    assert_eq!(
        c.device_waits.load(Relaxed),
        waits,
        "taking a finished read waited"
    );
}
