//! The wgpu backend over nodes (tessera_runtime::cluster; nodes as threads of one process,
//! each opening its own wgpu device on the default adapter, as separate processes would):
//! boiling with exact arithmetic (`alpha = 0`) over 2 nodes of 1–2 wgpu devices ends with the
//! CPU's single-node field, both procedures (bit for bit where the adapter does not fuse
//! multiply-adds; common::Exactness otherwise). Skips without an adapter unless
//! `TESSERA_REQUIRE_VULKAN=1`.

mod common;

use std::thread;
use std::time::Duration;

use tessera_core::DeviceId;
use tessera_mpi::{ForRuntime, InProcess};
use tessera_runtime::cluster::{ClusterConfig, Link};
use tessera_runtime::{Device, Partition, Procedure, System, SystemConfig};
use tessera_wgpu::{AdapterChoice, SharedGpu, WgpuDevice};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::sim::PagedBoiling;

const SIZE: u32 = 48;
const PAGE: u32 = 8;
const FRAMES: u32 = 2;

fn params() -> BoilingParams {
    BoilingParams {
        alpha: 0.0,
        ..BoilingParams::default()
    }
}

fn cfg() -> SystemConfig {
    SystemConfig::new(1).threads(1).memory(1 << 20)
}

fn cpu_field(devices: usize, procedure: Procedure) -> Vec<f32> {
    let sys = System::cpu(&SystemConfig { devices, ..cfg() }).unwrap();
    let sim = PagedBoiling::new(sys, SIZE, SIZE, PAGE, params()).unwrap();
    for _ in 0..FRAMES {
        sim.frame(Partition::Rows, procedure).unwrap();
    }
    sim.field().unwrap()
}

/// Each node's field, or `None` without an adapter.
fn wgpu_nodes(n: usize, k: usize, procedure: Procedure) -> Option<Vec<Vec<f32>>> {
    // Asked once here, so a missing adapter skips before any node starts.
    common::opened(SharedGpu::open(&AdapterChoice::Default), "a wgpu device")?;
    let handles: Vec<_> = InProcess::cluster(n)
        .into_iter()
        .map(|t| {
            thread::spawn(move || {
                let link = Link::start(
                    move || Ok(ForRuntime(t)),
                    ClusterConfig {
                        devices_per_node: k,
                        block_pages: 4,
                        lost_after: Duration::from_secs(60),
                    },
                )
                .unwrap();
                let gpu = SharedGpu::open(&AdapterChoice::Default).unwrap();
                let first = link.rank() * k;
                let devices: Vec<Box<dyn Device>> = (0..k)
                    .map(|i| {
                        Box::new(WgpuDevice::on(DeviceId((first + i) as u8), &gpu).unwrap())
                            as Box<dyn Device>
                    })
                    .collect();
                let sys = System::on_cluster(devices, &cfg(), link).unwrap();
                let sim = PagedBoiling::new(sys, SIZE, SIZE, PAGE, params()).unwrap();
                for _ in 0..FRAMES {
                    sim.frame(Partition::Rows, procedure).unwrap();
                }
                sim.field().unwrap()
            })
        })
        .collect();
    Some(
        handles
            .into_iter()
            .map(|h| h.join().expect("a node thread panicked"))
            .collect(),
    )
}

#[test]
fn two_wgpu_nodes_give_the_single_node_field() {
    let mut exact = common::Exactness::new(1e-4);
    for (k, procedure) in [(1, Procedure::Relaunch), (2, Procedure::TwoPass)] {
        let want = cpu_field(2 * k, procedure);
        let Some(fields) = wgpu_nodes(2, k, procedure) else {
            return;
        };
        for (rank, got) in fields.iter().enumerate() {
            exact.check(
                got,
                &want,
                &format!("node {rank} of 2 × {k} wgpu devices, {procedure:?}"),
            );
        }
    }
}

/// wgpu binds at most four memories to a kernel, and every node's home needs one of its own
/// on each device: five nodes are refused with a clear error before anything runs.
#[test]
fn more_nodes_than_a_wgpu_device_has_memories_is_refused() {
    if common::opened(SharedGpu::open(&AdapterChoice::Default), "a wgpu device").is_none() {
        return;
    }
    let handles: Vec<_> = InProcess::cluster(5)
        .into_iter()
        .map(|t| {
            thread::spawn(move || {
                let link = Link::start(
                    move || Ok(ForRuntime(t)),
                    ClusterConfig {
                        devices_per_node: 1,
                        block_pages: 4,
                        lost_after: Duration::from_secs(5),
                    },
                )
                .unwrap();
                let gpu = SharedGpu::open(&AdapterChoice::Default).unwrap();
                let d = WgpuDevice::on(DeviceId(link.rank() as u8), &gpu).unwrap();
                let err = System::on_cluster(vec![Box::new(d)], &cfg(), link.clone())
                    .err()
                    .expect("five wgpu nodes were accepted");
                link.kill();
                err.to_string()
            })
        })
        .collect();
    for h in handles {
        let e = h.join().unwrap();
        assert!(e.contains("run at most 4 nodes"), "{e}");
    }
}
