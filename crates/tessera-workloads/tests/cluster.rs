//! Boiling over the nodes of a cluster, the nodes as threads of one process.

use std::time::Duration;

use tessera_model::Network;
use tessera_mpi::{ForRuntime, InProcess};
use tessera_runtime::cluster::{ClusterConfig, Link};
use tessera_runtime::{Partition, Procedure, RuntimeError, System, SystemConfig};
use tessera_workloads::boiling::cluster::{run_node, NodesReport, Settings};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum};
use tessera_workloads::boiling::sim::PagedBoiling;

const SETTINGS: Settings = Settings {
    backend: "cpu",
    size: 64,
    page: 16,
    partition: Partition::Rows,
    procedure: Procedure::Relaunch,
    warmup: 0,
    frames: 2,
    home_block_pages: 16,
};

/// Two nodes of two devices as threads: every node reports the same field as four devices on
/// one node, and page data crossed nodes.
#[test]
fn two_nodes_report_the_one_node_field_and_their_traffic() {
    let s = SETTINGS;
    let single = {
        let sys = System::cpu(&SystemConfig::new(4).threads(1)).unwrap();
        let sim = PagedBoiling::new(sys, s.size, s.size, s.page, BoilingParams::default()).unwrap();
        for _ in 0..s.warmup + s.frames {
            sim.frame(s.partition, s.procedure).unwrap();
        }
        checksum_hex(field_checksum(&sim.field().unwrap()))
    };
    let reports: Vec<NodesReport> = InProcess::cluster(2)
        .into_iter()
        .map(|t| {
            std::thread::spawn(move || {
                let link = Link::start(
                    move || Ok(ForRuntime(t)),
                    ClusterConfig {
                        devices_per_node: 2,
                        block_pages: 4,
                        lost_after: Duration::from_secs(20),
                    },
                )
                .unwrap();
                let cfg = SystemConfig::new(2).threads(1);
                let sys = System::cpu_on_cluster(&cfg, link.clone()).unwrap();
                let network = Network::preset("ib-hdr").unwrap();
                run_node(sys, &link, &s, &network, |_, _| Ok::<_, RuntimeError>(()))
                    .unwrap()
                    .0
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    for r in &reports {
        assert_eq!(r.checksum, single);
        assert_eq!((r.nodes, r.devices_per_node, r.devices), (2, 2, 4));
        // Every node's devices, each with the host's work its node counted: every device
        // was handed work and its driver asked the manager for pages, every frame.
        assert_eq!(r.per_device.len(), 4);
        for (d, e) in r.per_device.iter().enumerate() {
            assert_eq!(e.device, d);
            assert!(e.host.submissions_per_frame > 0.0, "device {d}: {e:?}");
            assert!(e.host.manager_messages_per_frame > 0.0, "device {d}: {e:?}");
            assert!(e.stages.compute > 0.0, "device {d}: {e:?}");
        }
        assert!(r.stages.compute > 0.0);
    }
    // Every node reports the same devices' counts: they were gathered, not each node's own.
    assert_eq!(
        format!("{:?}", reports[0].per_device),
        format!("{:?}", reports[1].per_device)
    );
    let r = &reports[0];
    assert!(r.inter_node_page_bytes_per_frame > 0.0);
    assert!(r.inter_node_bytes_per_frame > r.inter_node_page_bytes_per_frame);
    assert_eq!(r.bytes_sent_per_frame_by_node.len(), 2);
    let sum: f64 = r.bytes_sent_per_frame_by_node.iter().sum();
    assert!((sum - r.inter_node_bytes_per_frame).abs() < 1e-6);
    // ib-hdr: at least the bytes of the busier node at 25 GB/s.
    assert_eq!(r.network, "ib-hdr");
    let busiest = r
        .bytes_sent_per_frame_by_node
        .iter()
        .fold(0.0f64, |a, &b| a.max(b));
    assert!(r.network_seconds_per_frame_modeled >= busiest / 25e9);
    assert!(r.network_seconds_per_frame_modeled > 0.0);
}
