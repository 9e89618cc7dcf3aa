//! tessera's runtime over nodes (crates/tessera-runtime/src/cluster.rs), the nodes as threads
//! of one process (no MPI needed): boiling over 2 and 4 nodes of 1–2 devices ends with the
//! same field, bit for bit, as the same devices on one node, for both procedures; a node that
//! stops answering makes the others fail with an error naming it instead of hanging.

use std::thread;
use std::time::Duration;

use tessera_mpi::{ForRuntime, InProcess};
use tessera_runtime::cluster::{ClusterConfig, Link};
use tessera_runtime::{Partition, Procedure, RuntimeError, System, SystemConfig};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::sim::PagedBoiling;

const SIZE: u32 = 64;
const PAGE: u32 = 8;
const FRAMES: u32 = 2;

fn config() -> SystemConfig {
    SystemConfig::new(1).threads(1)
}

fn field_bits(sim: &PagedBoiling) -> Vec<u32> {
    sim.field().unwrap().iter().map(|v| v.to_bits()).collect()
}

fn one_node(devices: usize, procedure: Procedure) -> Vec<u32> {
    one_node_of(devices, procedure, config(), (SIZE, PAGE))
}

/// `one_node` with a system configuration, a field side and a page side.
fn one_node_of(
    devices: usize,
    procedure: Procedure,
    cfg: SystemConfig,
    (size, page): (u32, u32),
) -> Vec<u32> {
    let sys = System::cpu(&SystemConfig { devices, ..cfg }).unwrap();
    let sim = PagedBoiling::new(sys, size, size, page, BoilingParams::default()).unwrap();
    for _ in 0..FRAMES {
        sim.frame(Partition::Rows, procedure).unwrap();
    }
    field_bits(&sim)
}

/// Each node's field and the bytes it sent to the others.
fn nodes(n: usize, k: usize, block_pages: u64, procedure: Procedure) -> Vec<(Vec<u32>, u64)> {
    nodes_with(n, k, block_pages, procedure, config())
        .into_iter()
        .map(|(f, sent, _)| (f, sent))
        .collect()
}

/// `nodes` with a system configuration; also the evictions each node's manager made.
fn nodes_with(
    n: usize,
    k: usize,
    block_pages: u64,
    procedure: Procedure,
    cfg: SystemConfig,
) -> Vec<(Vec<u32>, u64, u64)> {
    nodes_of(n, k, block_pages, procedure, cfg, (SIZE, PAGE))
}

/// `nodes_with` at a field side and a page side.
fn nodes_of(
    n: usize,
    k: usize,
    block_pages: u64,
    procedure: Procedure,
    cfg: SystemConfig,
    (size, page): (u32, u32),
) -> Vec<(Vec<u32>, u64, u64)> {
    let handles: Vec<_> = InProcess::cluster(n)
        .into_iter()
        .map(|t| {
            let cfg = cfg.clone();
            thread::spawn(move || {
                let link = Link::start(
                    move || Ok(ForRuntime(t)),
                    ClusterConfig {
                        devices_per_node: k,
                        block_pages,
                        lost_after: Duration::from_secs(20),
                    },
                )
                .unwrap();
                let sys = System::cpu_on_cluster(&cfg, link.clone()).unwrap();
                assert_eq!(sys.devices(), k);
                assert_eq!(sys.all_devices(), n * k);
                let sim =
                    PagedBoiling::new(sys, size, size, page, BoilingParams::default()).unwrap();
                for _ in 0..FRAMES {
                    let stats = sim.frame(Partition::Rows, procedure).unwrap();
                    assert_eq!(stats.len(), k);
                }
                let field = field_bits(&sim);
                let sent = link.counters().bytes;
                let evictions = sim
                    .sys
                    .mm
                    .traffic()
                    .unwrap()
                    .iter()
                    .map(|t| t.evictions)
                    .sum();
                drop(sim);
                (field, sent, evictions)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a node thread panicked"))
        .collect()
}

fn same_field_as_one_node(n: usize, k: usize, procedure: Procedure) {
    let want = one_node(n * k, procedure);
    // The first frame changes the field: the comparison is not between two initial fields.
    let initial = {
        let sys = System::cpu(&config()).unwrap();
        let sim = PagedBoiling::new(sys, SIZE, SIZE, PAGE, BoilingParams::default()).unwrap();
        field_bits(&sim)
    };
    assert_ne!(want, initial);
    for (rank, (field, sent)) in nodes(n, k, 4, procedure).into_iter().enumerate() {
        assert!(
            field == want,
            "node {rank} of {n} × {k} devices ({procedure:?}): the field differs from one node's"
        );
        assert!(sent > 0, "node {rank} sent nothing: no page crossed nodes");
    }
}

#[test]
fn two_nodes_of_one_device_relaunch() {
    same_field_as_one_node(2, 1, Procedure::Relaunch);
}

#[test]
fn two_nodes_of_two_devices_two_pass() {
    same_field_as_one_node(2, 2, Procedure::TwoPass);
}

#[test]
fn four_nodes_of_one_device_two_pass() {
    same_field_as_one_node(4, 1, Procedure::TwoPass);
}

#[test]
fn four_nodes_of_two_devices_relaunch() {
    same_field_as_one_node(4, 2, Procedure::Relaunch);
}

/// Budgets below each device's working set: every home evicts its share of the device's pages
/// (the budget is split between the homes), a remote home's refusal splits waves as a local
/// one does, and the field is still one node's.
#[test]
fn two_nodes_under_oversubscription_both_procedures() {
    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
        let want = one_node(2, procedure);
        // A device touches five 64 × 32 textures of 4-byte texels: 40 KiB; 24 KiB is 1.7×
        // too small, and each of the two homes manages 12 KiB of it.
        let cfg = SystemConfig {
            budget_bytes: 24 << 10,
            memory_bytes: 24 << 10,
            ..config()
        };
        for (rank, (field, _, evictions)) in
            nodes_with(2, 1, 4, procedure, cfg).into_iter().enumerate()
        {
            assert!(
                field == want,
                "node {rank} ({procedure:?}): the field differs"
            );
            assert!(evictions > 0, "node {rank} ({procedure:?}) evicted nothing");
        }
    }
}

/// CUDA UVM's tree prefetch over regions of 32 pages, which span several homes' blocks: each
/// home prefetches only its own pages (a read copy granted by a home that is not the page's
/// left the page's home unaware, and a later write was refused as ungranted), and the field
/// is one node's.
#[test]
fn two_nodes_with_tree_prefetch() {
    // A side that is not a multiple of the page (the case that failed every time).
    let shape = (130, 16);
    for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
        let cfg = SystemConfig {
            prefetch: tessera_runtime::Prefetch::Tree,
            ..config()
        };
        let want = one_node_of(2, procedure, cfg.clone(), shape);
        for (rank, (field, _, _)) in nodes_of(2, 1, 16, procedure, cfg, shape)
            .into_iter()
            .enumerate()
        {
            assert!(
                field == want,
                "node {rank} ({procedure:?}): the field differs"
            );
        }
    }
}

/// Node 1 builds its part and then stops answering (its router ends without a word, as a
/// killed process's would): node 0's next pass must fail naming node 1 within the timeout.
#[test]
fn a_silent_node_is_named_by_the_others() {
    let mut ends = InProcess::cluster(2).into_iter();
    let (t0, t1) = (ends.next().unwrap(), ends.next().unwrap());
    let cfg = ClusterConfig {
        devices_per_node: 1,
        block_pages: 1,
        lost_after: Duration::from_millis(1500),
    };
    let c1 = cfg.clone();
    let quiet = thread::spawn(move || {
        let link = Link::start(move || Ok(ForRuntime(t1)), c1).unwrap();
        let sys = System::cpu_on_cluster(&config(), link.clone()).unwrap();
        // Builds the same textures, then goes silent for good: the link is leaked, its router
        // thread stopped by `kill`, the process "dead" to node 0.
        let sim = PagedBoiling::new(sys, SIZE, SIZE, PAGE, BoilingParams::default()).unwrap();
        link.kill();
        std::mem::forget(sim);
    });
    let link = Link::start(move || Ok(ForRuntime(t0)), cfg).unwrap();
    let sys = System::cpu_on_cluster(&config(), link).unwrap();
    let sim = PagedBoiling::new(sys, SIZE, SIZE, PAGE, BoilingParams::default()).unwrap();
    quiet.join().unwrap();
    let started = std::time::Instant::now();
    let err = loop {
        match sim.frame(Partition::Rows, Procedure::Relaunch) {
            Err(e) => break e,
            Ok(_) => assert!(
                started.elapsed() < Duration::from_secs(30),
                "node 0 kept running without node 1"
            ),
        }
    };
    assert!(
        matches!(err, RuntimeError::NodeLost { node: 1, .. }),
        "wrong error: {err}"
    );
    assert!(err.to_string().contains("node 1 was lost"), "{err}");
    std::mem::forget(sim);
}
