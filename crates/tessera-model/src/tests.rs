use super::*;
use Endpoint::{Device, Host};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * b.abs().max(1e-9)
}

fn t(from: Endpoint, to: Endpoint, pages: u64, bytes: u64) -> Transfer {
    Transfer {
        from,
        to,
        pages,
        bytes,
        homed: false,
    }
}

#[test]
fn a_move_written_home_crosses_the_sources_host_link_once() {
    // Two devices behind PCIe, no link between them: the write-back (device 0 → host) and
    // a copy of the same page to device 1. Taken from home, the copy adds nothing to
    // device 0's host link; routed device → host → device, it would add the page again.
    let pcie = Topology::preset("pcie1-x16", 2).unwrap();
    let back = t(Device(0), Host, 1, 65536);
    let copy = Transfer {
        homed: true,
        ..t(Device(0), Device(1), 1, 65536)
    };
    let up = pcie.route(Device(0), Host).unwrap()[0];
    let down = pcie.route(Host, Device(1)).unwrap()[0];
    let busy = pcie.link_seconds(&[back, copy]).unwrap();
    let once = pcie.links()[up].seconds(1, 65536);
    assert!(close(busy[up], once), "{} against {once}", busy[up]);
    assert!(close(busy[down], pcie.links()[down].seconds(1, 65536)));
    let unhomed = pcie
        .link_seconds(&[back, t(Device(0), Device(1), 1, 65536)])
        .unwrap();
    assert!(close(unhomed[up], 2.0 * once));
    // With a link of their own the copy takes it, written home or not.
    let nvlink = Topology::preset("nvlink", 2).unwrap();
    let direct = nvlink.route(Device(0), Device(1)).unwrap();
    assert_eq!(nvlink.transfer_route(&copy).unwrap(), direct);
}

fn remote(read: u64, write: u64, batch: u64) -> tessera_core::access::RemoteLink {
    tessera_core::access::RemoteLink {
        read_bytes: read,
        write_bytes: write,
        batch_bytes: batch,
        spread_bytes: read + write - batch,
        batches: 0,
    }
}

/// Without a given remote model, a peer joined by a direct link is read over that link:
/// on `nvlink`, 64 GB/s at GPU-SM's PCIe 3 efficiency (12 of 15.75 GB/s, so 0.76171875 of
/// the link) is 48.75 GB/s, not the 12 GB/s of the host's PCIe link. A GPU-SM preset or a
/// file's `[remote]` keeps the given model for every access.
#[test]
fn a_peer_joined_by_a_direct_link_is_accessed_over_it() {
    let topo = Topology::preset("nvlink", 2).unwrap();
    let uses = [
        // Device 0 reads 4.875e9 batch bytes on device 1: 4.875e9 / 48.75e9 = 0.1 s.
        RemoteUse {
            accessor: 0,
            location: Device(1),
            link: remote(4_875_000_000, 0, 4_875_000_000),
        },
        // Device 1 writes 0.443625e9 spread bytes to device 0: 48.75e9 * 0.91 =
        // 44.3625e9 B/s, 0.01 s.
        RemoteUse {
            accessor: 1,
            location: Device(0),
            link: remote(0, 443_625_000, 0),
        },
        // Device 1 reads 1.2e9 spread bytes of host memory over its PCIe link: 12e9 B/s.
        RemoteUse {
            accessor: 1,
            location: Host,
            link: remote(1_200_000_000, 0, 0),
        },
    ];
    let p = topo.remote_pass_time(&[0.0, 0.0], &uses).unwrap();
    assert!(close(p.batch[0], 0.1) && close(p.spread[0], 0.0), "{p:?}");
    assert!(close(p.spread[1], 0.01 + 0.1), "{p:?}");
    let seg = |n: &str| p.segments.iter().find(|s| s.0 == n).cloned();
    // The link carries both devices' peer bytes at 64e9 * 18 / 15.75 = 73.125e9 B/s;
    // the devices' PCIe links carry only the host read.
    let link = seg("link0-1").expect("the peer link's segment");
    assert_eq!(link.1, 5_318_625_000);
    assert!(close(link.2, 5.318625e9 / 73.125e9), "{p:?}");
    assert_eq!(seg("device0").unwrap().1, 0);
    assert_eq!(seg("device1").unwrap().1, 1_200_000_000);
    assert!(close(p.total, 0.11), "{p:?}");

    // The same read under a given model: a GPU-SM preset, or `[remote]` in a file.
    let read = [uses[0]];
    let gpusm = Topology::preset("gpusm-pcie3", 2).unwrap();
    let p = gpusm.remote_pass_time(&[0.0, 0.0], &read).unwrap();
    assert!(close(p.batch[0], 4.875e9 / 12e9), "{p:?}");
    assert!(p.segments.iter().all(|s| !s.0.starts_with("link")), "{p:?}");
    let file = |remote: &str| {
        format!(
            "[[device]]\nid = 0\n[[device]]\nid = 1\n\
                 [[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 15.75\n\
                 [[link]]\nfrom = \"host\"\nto = \"device1\"\nbandwidth_gb_per_s = 15.75\n\
                 [[link]]\nfrom = \"device1\"\nto = \"device0\"\nbandwidth_gb_per_s = 64\n\
                 duplex = false\n{remote}"
        )
    };
    let plain = Topology::from_toml_str(&file(""), "peer.toml").unwrap();
    let p = plain.remote_pass_time(&[0.0, 0.0], &read).unwrap();
    assert!(close(p.batch[0], 0.1), "{p:?}");
    let given =
        Topology::from_toml_str(&file("[remote]\nread_gb_per_s = 6\n"), "peer.toml").unwrap();
    let p = given.remote_pass_time(&[0.0, 0.0], &read).unwrap();
    // Each device sits behind a switch of its own, so the read crosses them: ×0.8.
    assert!(close(p.batch[0], 4.875e9 / (6e9 * 0.8)), "{p:?}");
}

#[test]
fn gpusm_pcie3_prices_remote_accesses_by_hand() {
    let topo = Topology::preset("gpusm-pcie3", 4).unwrap();
    // Switch 0: devices 0 and 1; switch 1: devices 2 and 3.
    assert_eq!(
        (0..4)
            .map(|d| topo.switch_of(d).unwrap())
            .collect::<Vec<_>>(),
        [0, 0, 1, 1]
    );
    let uses = [
        // Device 0 reads 1.2e9 batch bytes on device 1 (same switch): 1.2e9 / 12e9 = 0.1 s.
        RemoteUse {
            accessor: 0,
            location: Device(1),
            link: remote(1_200_000_000, 0, 1_200_000_000),
        },
        // Device 0 writes 1.092e9 spread bytes to host: 12e9 * 0.91 = 10.92e9 B/s, 0.1 s.
        RemoteUse {
            accessor: 0,
            location: Host,
            link: remote(0, 1_092_000_000, 0),
        },
        // Device 2 reads 0.96e9 batch bytes on device 0, across the switches:
        // 12e9 * 0.8 = 9.6e9 B/s, 0.1 s.
        RemoteUse {
            accessor: 2,
            location: Device(0),
            link: remote(960_000_000, 0, 960_000_000),
        },
    ];
    let p = topo.remote_pass_time(&[0.15, 0.0, 0.05], &uses).unwrap();
    // Device 0: max(work 0.15, spread 0.1) + batch 0.1 = 0.25 s. Device 2: 0.05 + 0.1.
    assert!(close(p.batch[0], 0.1) && close(p.spread[0], 0.1), "{p:?}");
    assert!(close(p.device_total[0], 0.25), "{p:?}");
    assert!(close(p.device_total[2], 0.15), "{p:?}");
    assert!(close(p.device_total[3], 0.0), "{p:?}");
    // Segments: device0's link carries 1.2e9 + 1.092e9 + 0.96e9 = 3.252e9 bytes
    // (3.252e9 / 18e9 = 0.180666… s); switch 0's uplink the host write and the crossing
    // read, 2.052e9; switch 1's the crossing read, 0.96e9; host 1.092e9.
    let seg = |n: &str| p.segments.iter().find(|s| s.0 == n).unwrap().clone();
    assert_eq!(seg("device0").1, 3_252_000_000);
    assert!(close(seg("device0").2, 3.252e9 / 18e9));
    assert_eq!(seg("switch0").1, 2_052_000_000);
    assert_eq!(seg("switch1").1, 960_000_000);
    assert_eq!(seg("host").1, 1_092_000_000);
    assert!(close(p.total, 0.25), "{p:?}");

    // Four devices each read 1.2e9 bytes of host memory at once: each alone would take
    // 0.1 s, but host memory's link carries 4.8e9 bytes at 18e9 B/s: 0.2666… s.
    let uses: Vec<_> = (0..4)
        .map(|d| RemoteUse {
            accessor: d,
            location: Host,
            link: remote(1_200_000_000, 0, 1_200_000_000),
        })
        .collect();
    let p = topo.remote_pass_time(&[0.0; 4], &uses).unwrap();
    assert!(close(p.total, 4.8e9 / 18e9), "{p:?}");
    // A location beyond the topology is an error, not a panic.
    assert!(topo
        .remote_pass_time(
            &[],
            &[RemoteUse {
                accessor: 0,
                location: Device(4),
                link: remote(4, 0, 0),
            }]
        )
        .is_err());
}

#[test]
fn pcie1_x16_charges_the_2007_bus() {
    let topo = Topology::preset("pcie1-x16", 2).unwrap();
    // 100 pages of 64x64 R32Float (16384 bytes each) home -> device0 on a 4 GB/s link
    // with 10 us per move: 100 * 10e-6 + 1_638_400 / 4e9 = 0.001 + 0.0004096 = 0.0014096 s.
    // The devices worked 10 ms and 12 ms: the pass takes 0.012 + 0.0014096 = 0.0134096 s.
    let p = topo
        .pass_time(&[0.010, 0.012], &[t(Host, Device(0), 100, 1_638_400)])
        .unwrap();
    assert!(close(p.transfer_seconds, 0.0014096), "{p:?}");
    assert!(close(p.total(), 0.0134096), "{p:?}");
}

#[test]
fn pcie3_x16_sends_device_to_device_through_host() {
    let topo = Topology::preset("pcie3-x16", 2).unwrap();
    assert_eq!(topo.route(Device(0), Device(1)).unwrap().len(), 2);
    // 10 pages of 65536 bytes device0 -> host -> device1. PCIe 3 x16 moves
    // 16 * 8e9 * 128/130 / 8 bytes/s, so 655360 bytes take 655360 * 130 * 8 / (16 * 8e9 *
    // 128) = 4.16e-5 s; with 10 * 5e-6 of latency each link is busy 9.16e-5 s. The two
    // links run at once: the pass's transfer time is 9.16e-5 s, not twice that.
    let p = topo
        .pass_time(&[0.0, 0.0], &[t(Device(0), Device(1), 10, 655_360)])
        .unwrap();
    assert!(close(p.transfer_seconds, 9.16e-5), "{p:?}");
    assert_eq!(p.link_seconds.iter().filter(|&&s| s > 0.0).count(), 2);
}

#[test]
fn pcie4_x16_overlaps_links_and_serialises_each() {
    let topo = Topology::preset("pcie4-x16", 2).unwrap();
    // PCIe 4 x16: 16 * 16e9 * 128/130 / 8 bytes/s, so 32768 bytes take
    // 32768 * 130 * 8 / (16 * 16e9 * 128) = 1.04e-6 s. Two batches of 4 pages (16384 bytes
    // each) to device0 serialise on host->device0: 8 * 5e-6 + 1.04e-6 = 4.104e-5 s. The
    // same to device1 runs on its own link at the same time.
    let p = topo
        .pass_time(
            &[1e-3, 0.0],
            &[
                t(Host, Device(0), 4, 16_384),
                t(Host, Device(0), 4, 16_384),
                t(Host, Device(1), 8, 32_768),
            ],
        )
        .unwrap();
    assert!(close(p.transfer_seconds, 4.104e-5), "{p:?}");
    assert!(close(p.total(), 1e-3 + 4.104e-5), "{p:?}");
}

#[test]
fn pcie5_x16_write_back_of_one_large_page() {
    let topo = Topology::preset("pcie5-x16", 1).unwrap();
    // One 512x512 R32Float page (1 MiB) device0 -> host on PCIe 5 x16
    // (16 * 32e9 * 128/130 / 8 bytes/s): 1048576 * 130 * 8 / (16 * 32e9 * 128)
    // = 1.664e-5 s, plus 5e-6 latency = 2.164e-5 s.
    let p = topo
        .pass_time(&[0.0], &[t(Device(0), Host, 1, 1_048_576)])
        .unwrap();
    assert!(close(p.transfer_seconds, 2.164e-5), "{p:?}");
}

#[test]
fn nvlink_moves_device_to_device_directly() {
    let topo = Topology::preset("nvlink", 4).unwrap();
    // 4 host links each way plus 4 * 3 directed device links.
    assert_eq!(topo.links().len(), 8 + 12);
    assert_eq!(topo.route(Device(2), Device(3)).unwrap().len(), 1);
    // device0 -> device1: 4 pages, 262144 bytes at 64 GB/s: 4 * 5e-6 + 262144 / 64e9 =
    // 2e-5 + 4.096e-6 = 2.4096e-5 s. At the same time host -> device0 carries 2 pages,
    // 131072 bytes, on PCIe 3 x16: 2 * 5e-6 + 131072 * 130 * 8 / (16 * 8e9 * 128)
    // = 1e-5 + 8.32e-6 = 1.832e-5 s. The busiest link decides: 2.4096e-5 s.
    let p = topo
        .pass_time(
            &[0.0; 4],
            &[
                t(Device(0), Device(1), 4, 262_144),
                t(Host, Device(0), 2, 131_072),
            ],
        )
        .unwrap();
    assert!(close(p.transfer_seconds, 2.4096e-5), "{p:?}");
}

#[test]
fn mcm_presets_are_full_meshes_of_gpu_modules() {
    let topo = Topology::preset("mcm-4", 4).unwrap();
    assert_eq!(topo.name(), "mcm-4");
    assert_eq!(topo.devices(), 4);
    // 4 host links each way plus 4 * 3 directed GPM links.
    assert_eq!(topo.links().len(), 8 + 12);
    let route = topo.route(Device(1), Device(3)).unwrap();
    assert_eq!(route.len(), 1);
    let link = &topo.links()[route[0]];
    assert_eq!((link.from, link.to), (Device(1), Device(3)));
    // GPM1 -> GPM3: 16 pages of 65536 bytes = 1048576 bytes at 64e9 B/s, 5 us per move:
    // 16 * 5e-6 + 1048576 / 64e9 = 8e-5 + 1.6384e-5 = 9.6384e-5 s, alone on its link.
    let p = topo
        .pass_time(&[0.0; 4], &[t(Device(1), Device(3), 16, 1_048_576)])
        .unwrap();
    assert!(close(p.transfer_seconds, 9.6384e-5), "{p:?}");
    // Table 2: 8 ROPs per GPM, 4 pixels per cycle each, at 1 GHz: 3.2e10 pixels/s.
    let gpm = topo.gpm().unwrap();
    assert_eq!(gpm.rop_pixels_per_second, 3.2e10);
    assert_eq!(gpm.local_bandwidth, 1e12);
    // mcm-8: 8 * 2 host links + 8 * 7 GPM links; a run may use fewer devices, not more.
    assert_eq!(Topology::preset("mcm-8", 2).unwrap().links().len(), 16 + 56);
    assert!(matches!(
        Topology::preset("mcm-4", 5),
        Err(TopologyError::TooFewDevices {
            has: 4,
            wanted: 5,
            ..
        })
    ));
    assert_eq!(Topology::preset("nvlink", 4).unwrap().gpm(), None);
}

/// Three devices, each pair joined by a direct link, hand-computed: every number below
/// was worked out on paper from the link figures, not by the code under test.
const THREE_DIRECT: &str = r#"
[[device]]
id = 0
[[device]]
id = 1
[[device]]
id = 2
[[link]]
from = "host"
to = "device0"
bandwidth_gb_per_s = 10
latency_us = 2
[[link]]
from = "host"
to = "device1"
bandwidth_gb_per_s = 10
latency_us = 2
[[link]]
from = "host"
to = "device2"
bandwidth_gb_per_s = 10
latency_us = 2
[[link]]
from = "device0"
to = "device1"
bandwidth_gb_per_s = 50
latency_us = 1
[[link]]
from = "device1"
to = "device2"
bandwidth_gb_per_s = 50
latency_us = 1
[[link]]
from = "device0"
to = "device2"
bandwidth_gb_per_s = 25
latency_us = 1
"#;

#[test]
fn isolated_model_of_three_devices_with_direct_links() {
    let topo = Topology::from_toml_str(THREE_DIRECT, "three.toml").unwrap();
    // Moves of 65536-byte pages:
    // - host -> device1: 10 pages, 655360 B at 10 GB/s + 10 * 2 us
    //   = 65.536 us + 20 us = 85.536 us;
    // - device1 -> host (write-backs): 4 pages, 262144 B: 26.2144 us + 8 us = 34.2144 us;
    // - device0 -> device1: 20 pages, 1310720 B at 50 GB/s + 20 * 1 us
    //   = 26.2144 us + 20 us = 46.2144 us;
    // - device2 -> device1: 30 pages, 1966080 B at 50 GB/s + 30 us
    //   = 39.3216 us + 30 us = 69.3216 us;
    // - device2 -> device0: 10 pages, 655360 B at 25 GB/s + 10 us
    //   = 26.2144 us + 10 us = 36.2144 us.
    // Each source has its own link, so the busiest link is host -> device1: 85.536 us.
    // Had device1's 50 device pages been charged to one source, device2 -> device1 would
    // carry 50 pages: 65.536 us + 50 us = 115.536 us instead.
    // Isolated work 3 ms, 4 ms, 2.5 ms: the slowest is 4 ms. The manager served the
    // devices for 0.1, 0.3 and 0.2 ms: 0.6 ms, summed (one thread).
    // Pass: 4 ms + 0.085536 ms + 0.6 ms = 4.685536 ms.
    let p = topo
        .isolated_pass_time(
            &[3e-3, 4e-3, 2.5e-3],
            &[1e-4, 3e-4, 2e-4],
            &[
                t(Host, Device(1), 10, 655_360),
                t(Device(1), Host, 4, 262_144),
                t(Device(0), Device(1), 20, 1_310_720),
                t(Device(2), Device(1), 30, 1_966_080),
                t(Device(2), Device(0), 10, 655_360),
            ],
        )
        .unwrap();
    assert!(close(p.device_seconds, 4e-3), "{p:?}");
    assert!(close(p.manager_seconds, 6e-4), "{p:?}");
    assert!(close(p.transfer_seconds, 85.536e-6), "{p:?}");
    assert!(close(p.total(), 4.685536e-3), "{p:?}");
    let busy = |from, to| p.link_seconds[topo.route(from, to).unwrap()[0]];
    assert!(close(busy(Device(0), Device(1)), 46.2144e-6), "{p:?}");
    assert!(close(busy(Device(2), Device(1)), 69.3216e-6), "{p:?}");
    assert!(close(busy(Device(2), Device(0)), 36.2144e-6), "{p:?}");
    assert!(close(busy(Device(1), Host), 34.2144e-6), "{p:?}");
    // Nothing crossed host: device moves took their direct links.
    assert_eq!(busy(Host, Device(0)), 0.0);
    assert_eq!(busy(Device(0), Host), 0.0);
}

#[test]
fn moves_made_during_launches_overlap_the_work() {
    let topo = Topology::from_toml_str(THREE_DIRECT, "three.toml").unwrap();
    // Of host -> device1's 10 pages (85.536 us, above), 6 were copied during launches:
    // 393216 B at 10 GB/s + 6 * 2 us = 39.3216 us + 12 us = 51.3216 us beside the work;
    // the other 4: 262144 B: 26.2144 us + 8 us = 34.2144 us after it. The busiest link
    // left is then device2 -> device1, 69.3216 us. Work 4 ms outlasts 51.3216 us, so:
    // 4 ms + 0.0693216 ms + 0.6 ms = 4.6693216 ms.
    let all = [
        t(Host, Device(1), 10, 655_360),
        t(Device(1), Host, 4, 262_144),
        t(Device(0), Device(1), 20, 1_310_720),
        t(Device(2), Device(1), 30, 1_966_080),
        t(Device(2), Device(0), 10, 655_360),
    ];
    let during = [t(Host, Device(1), 6, 393_216)];
    let work = [3e-3, 4e-3, 2.5e-3];
    let manager = [1e-4, 3e-4, 2e-4];
    let p = topo
        .overlapped_pass_time(&work, &manager, &all, &during)
        .unwrap();
    assert!(close(p.device_seconds, 4e-3), "{p:?}");
    assert!(close(p.transfer_seconds, 69.3216e-6), "{p:?}");
    assert!(close(p.total(), 4.6693216e-3), "{p:?}");
    let busy = |from, to| p.link_seconds[topo.route(from, to).unwrap()[0]];
    assert!(close(busy(Host, Device(1)), 85.536e-6), "{p:?}");
    // Work shorter than the moves beside it: 20 us of work, so the device part is the
    // 51.3216 us of moves, plus 69.3216 us after, plus 0.6 ms.
    let p = topo
        .overlapped_pass_time(&[1e-5, 2e-5, 0.0], &manager, &all, &during)
        .unwrap();
    assert!(close(p.device_seconds, 51.3216e-6), "{p:?}");
    assert!(close(p.total(), 51.3216e-6 + 69.3216e-6 + 6e-4), "{p:?}");
    // Nothing during launches: the isolated model's figures.
    let q = topo
        .overlapped_pass_time(&work, &manager, &all, &[])
        .unwrap();
    assert!(close(q.total(), 4.685536e-3), "{q:?}");
}

#[test]
fn unknown_presets_and_device_counts_are_errors() {
    assert!(matches!(
        Topology::preset("pcie2-x16", 2),
        Err(TopologyError::UnknownPreset { .. })
    ));
    assert!(matches!(
        Topology::preset("nvlink", 0),
        Err(TopologyError::DeviceCount(0))
    ));
    let topo = Topology::preset("pcie3-x16", 2).unwrap();
    assert!(topo.check_devices(2).is_ok());
    assert!(topo.check_devices(3).is_err());
    assert!(topo.route(Device(0), Device(5)).is_err());
    assert!(topo.route(Host, Host).is_err());
}

const TWO: &str = r#"
name = "two"
[[device]]
id = 0
[[device]]
id = 1
[[link]]
from = "host"
to = "device0"
bandwidth_gb_per_s = 16
latency_us = 5
[[link]]
from = "host"
to = "device1"
bandwidth_gb_per_s = 8.5
[[link]]
from = "device0"
to = "device1"
bandwidth_gb_per_s = 50
duplex = false
"#;

#[test]
fn a_file_gives_links_both_ways_unless_one_way() {
    let topo = Topology::from_toml_str(TWO, "two.toml").unwrap();
    assert_eq!(topo.name(), "two");
    assert_eq!(topo.devices(), 2);
    assert_eq!(topo.links().len(), 5);
    let l = &topo.links()[topo.route(Device(1), Host).unwrap()[0]];
    assert_eq!((l.bandwidth, l.latency), (8.5e9, 0.0));
    // One way direct, the other way through host.
    assert_eq!(topo.route(Device(0), Device(1)).unwrap().len(), 1);
    assert_eq!(topo.route(Device(1), Device(0)).unwrap().len(), 2);
    // 2 pages of 1000 bytes over the 50 GB/s link: 2000 / 50e9 = 4e-8 s.
    let busy = topo
        .link_seconds(&[t(Device(0), Device(1), 2, 2000)])
        .unwrap();
    assert!(close(busy.iter().sum::<f64>(), 4e-8));
}

fn err(text: &str) -> TopologyError {
    Topology::from_toml_str(text, "t.toml").unwrap_err()
}

/// Four GPUs on two PCIe switches, GPU-SM System A's constants given by hand.
const GPUSM_FILE: &str = r#"
[[device]]
id = 0
switch = 0
[[device]]
id = 1
switch = 0
[[device]]
id = 2
switch = 1
[[device]]
id = 3
[[link]]
from = "host"
to = "device0"
bandwidth_gb_per_s = 8
[[link]]
from = "host"
to = "device1"
bandwidth_gb_per_s = 8
[[link]]
from = "host"
to = "device2"
bandwidth_gb_per_s = 8
[[link]]
from = "host"
to = "device3"
bandwidth_gb_per_s = 8
[remote]
read_gb_per_s = 6
write_penalty = 0.09
switch_read_penalty = 0.2
switch_write_penalty = 0.3
aggregate_gb_per_s = 10
"#;

#[test]
fn a_file_sets_the_remote_model_and_the_switches() {
    let topo = Topology::from_toml_str(GPUSM_FILE, "gpusm.toml").unwrap();
    let m = topo.remote_model();
    assert!(close(m.read_bw, 6e9));
    assert!(close(m.write_factor, 0.91));
    assert!(close(m.switch_read_factor, 0.8));
    assert!(close(m.switch_write_factor, 0.7));
    assert!(close(m.aggregate_bw, 10e9));
    // Device 3 declared no switch: one of its own, after the declared 0 and 1.
    let sw: Vec<_> = (0..4).map(|d| topo.switch_of(d).unwrap()).collect();
    assert_eq!(sw, vec![0, 0, 1, 2]);
    // Device 0 reads 1.2 GB from device 1 (same switch) and 0.96 GB from device 2
    // (crossing: 6e9 * 0.8 = 4.8 GB/s), all spread; writes 0.546 GB to host
    // (6e9 * 0.91 = 5.46 GB/s). By hand: 0.2 + 0.2 + 0.1 = 0.5 s of spread accesses.
    let use_ = |location, read: u64, write: u64| RemoteUse {
        accessor: 0,
        location,
        link: tessera_core::access::RemoteLink {
            read_bytes: read,
            write_bytes: write,
            batch_bytes: 0,
            spread_bytes: read + write,
            batches: 0,
        },
    };
    let p = topo
        .remote_pass_time(
            &[0.1, 0.0, 0.0, 0.0],
            &[
                use_(Device(1), 1_200_000_000, 0),
                use_(Device(2), 960_000_000, 0),
                use_(Host, 0, 546_000_000),
            ],
        )
        .unwrap();
    assert!(close(p.spread[0], 0.5), "{:?}", p.spread);
    // Device 0's own link carries 2.706 GB at 10 GB/s: 0.2706 s, below the 0.5 s.
    assert!(close(p.total, 0.5), "{}", p.total);
    // Without [remote], the model is the one scaled from the host links (8 GB/s).
    let plain = GPUSM_FILE[..GPUSM_FILE.find("[remote]").unwrap()].to_string();
    let t2 = Topology::from_toml_str(&plain, "plain.toml").unwrap();
    assert_eq!(t2.remote_model(), RemoteModel::scaled_to(8e9));
}

/// A run on fewer devices than a file declares reads the file as if the others were not
/// there: the slow host links of two unused devices no longer scale the remote model or
/// appear among the links.
#[test]
fn devices_a_run_does_not_use_change_none_of_its_figures() {
    let link = |d: usize, gb: f64| {
        format!(
                "[[link]]\nfrom = \"host\"\nto = \"device{d}\"\nbandwidth_gb_per_s = {gb}\nlatency_us = 5\n"
            )
    };
    let file = |gbs: &[f64]| -> String {
        let mut t = String::new();
        for d in 0..gbs.len() {
            t += &format!("[[device]]\nid = {d}\n");
        }
        for (d, &gb) in gbs.iter().enumerate() {
            t += &link(d, gb);
        }
        t
    };
    let four = file(&[15.75, 15.75, 0.1575, 0.1575]);
    let two = file(&[15.75, 15.75]);
    let whole = Topology::from_toml_str(&four, "four.toml").unwrap();
    assert_eq!(whole.remote_model(), RemoteModel::scaled_to(0.1575e9));
    let used = Topology::from_toml_for(&four, "four.toml", Some(2)).unwrap();
    let alone = Topology::from_toml_str(&two, "two.toml").unwrap();
    assert_eq!(used.devices(), 2);
    assert_eq!(used.remote_model(), alone.remote_model());
    assert_eq!(used.remote_model(), RemoteModel::scaled_to(15.75e9));
    assert_eq!(used.links(), alone.links());
}

/// A file may not call its topology by a preset's name, or by none: reports name the
/// topology by it, and a file called "nvlink" read as the preset. Nor by one with a control
/// character, which the terminal and the CSVs would read as theirs.
#[test]
fn a_file_needs_a_name_of_its_own() {
    let body = "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 16\n";
    for name in ["nvlink", "pcie3-x16", "", "  ", "two\nlines", "a\tb"] {
        let e = err(&format!("name = {name:?}\n{body}"));
        assert!(matches!(e, TopologyError::BadName { .. }), "{name:?}: {e}");
    }
    let t = Topology::from_toml_str(&format!("name = \"my-box\"\n{body}"), "f.toml").unwrap();
    assert_eq!(t.name(), "my-box");
}

/// A bandwidth given as a string or a boolean is "expected a number" at its place, and a
/// file of 65 devices is refused naming the file.
#[test]
fn a_wrong_type_and_too_many_devices_say_so() {
    for value in ["\"16\"", "true"] {
        let e = err(&format!(
                "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = {value}\n"
            ));
        let said = e.to_string();
        assert!(
            said.contains("expected a number") && said.contains("t.toml"),
            "{said}"
        );
        assert!(!said.contains("untagged"), "{said}");
    }
    let many: String = (0..65).map(|d| format!("[[device]]\nid = {d}\n")).collect();
    let e = err(&many);
    assert!(
        matches!(&e, TopologyError::TooManyDevices { count: 65, .. })
            && e.to_string().starts_with("t.toml"),
        "{e}"
    );
}

#[test]
fn bad_remote_constants_name_the_key_and_the_place() {
    let head = &GPUSM_FILE[..GPUSM_FILE.find("[remote]").unwrap()];
    for (body, key) in [
        ("read_gb_per_s = 0", "read_gb_per_s"),
        ("aggregate_gb_per_s = -3", "aggregate_gb_per_s"),
        ("write_penalty = 1.0", "write_penalty"),
        ("switch_read_penalty = -0.1", "switch_read_penalty"),
        ("switch_write_penalty = nan", "switch_write_penalty"),
    ] {
        let e = err(&format!("{head}[remote]\n{body}\n"));
        assert!(
            matches!(&e, TopologyError::BadRemote { key: k, .. } if *k == key),
            "{body}: {e}"
        );
        assert!(e.to_string().starts_with("t.toml:"), "{e}");
    }
    let e = err(&format!("{head}[remote]\nread_bw = 3\n"));
    assert!(e.to_string().contains("read_bw"), "{e}");
    let e = err(&head.replace("switch = 1", "switch = 99"));
    assert!(
        matches!(
            e,
            TopologyError::BadSwitch {
                device: 2,
                value: 99,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn bad_files_name_the_problem_and_the_place() {
    let base = "[[device]]\nid = 0\n[[device]]\nid = 1\n";
    let link = |from: &str, to: &str, bw: &str| {
        format!("[[link]]\nfrom = \"{from}\"\nto = \"{to}\"\nbandwidth_gb_per_s = {bw}\n")
    };
    let both = format!(
        "{}{}",
        link("host", "device0", "4"),
        link("host", "device1", "4")
    );

    let e = err(&format!("{base}{}", link("host", "device0", "-4")));
    assert!(matches!(e, TopologyError::BadBandwidth { value, .. } if value == -4.0));
    // Line 8 is the bandwidth; its value starts in column 22.
    assert!(e.to_string().starts_with("t.toml:8:22: bandwidth"), "{e}");
    assert!(matches!(
        err(&format!("{base}{}", link("host", "device0", "0"))),
        TopologyError::BadBandwidth { .. }
    ));
    // NaN, and values a frame's modeled time cannot be printed or divided with: a
    // subnormal bandwidth made the transfer time infinite, and a huge one hundreds of
    // digits long.
    for bw in ["nan", "1e-320", "1e-7", "1e7"] {
        assert!(
            matches!(
                err(&format!("{base}{}", link("host", "device0", bw))),
                TopologyError::BadBandwidth { .. }
            ),
            "{bw}"
        );
    }
    for us in ["-1", "1e308", "inf"] {
        assert!(
            matches!(
                err(&format!("{base}{both}latency_us = {us}\n")),
                TopologyError::BadLatency { .. }
            ),
            "{us}"
        );
    }
    let e = err(&format!("{base}{}", link("host", "device2", "4")));
    assert!(
        matches!(&e, TopologyError::UnknownEndpoint { name, .. } if name == "device2"),
        "{e}"
    );
    assert!(e.to_string().contains("device0..device1"), "{e}");
    assert!(matches!(
        err(&format!("{base}{}", link("host", "gpu0", "4"))),
        TopologyError::UnknownEndpoint { .. }
    ));
    assert!(matches!(
        err(&format!("{base}{}", link("device1", "device1", "4"))),
        TopologyError::SelfLink { .. }
    ));
    assert!(matches!(
        err(&format!("{base}{both}{}", link("device0", "host", "4"))),
        TopologyError::DuplicateLink { .. }
    ));
    assert!(matches!(
        err(&format!("{base}{}", link("host", "device0", "4"))),
        TopologyError::Unreachable { device: 1, .. }
    ));
    assert!(matches!(
        err(&format!("{base}[[device]]\nid = 1\n{both}")),
        TopologyError::DuplicateDevice { id: 1, .. }
    ));
    assert!(matches!(
        err(&format!("[[device]]\nid = 0\n[[device]]\nid = 2\n{both}")),
        TopologyError::DeviceGap { missing: 1, .. }
    ));
    assert!(matches!(err(""), TopologyError::NoDevices { .. }));
    // Syntax errors and unknown keys carry toml's own line and column.
    let e = err(&format!("{base}[[link]]\nfrom = host\n"));
    assert!(
        matches!(&e, TopologyError::Parse { message, .. } if message.contains("line 6")),
        "{e}"
    );
    let e = err(&format!("{base}{both}bandwith_gb_per_s = 3\n"));
    assert!(e.to_string().contains("bandwith_gb_per_s"), "{e}");
    assert!(matches!(
        err("[[device]]\nid = -1\n"),
        TopologyError::Parse { .. }
    ));
}

#[test]
fn endpoints_parse_strictly() {
    assert_eq!(Endpoint::parse("host"), Some(Host));
    assert_eq!(Endpoint::parse("device12"), Some(Device(12)));
    for bad in ["device", "device01", "device+1", "Device1", "dev1", " host"] {
        assert_eq!(Endpoint::parse(bad), None, "{bad}");
    }
}

mod network {
    use super::*;

    /// By hand: ib-hdr is 200 Gb/s = 25e9 B/s and 1 µs a message. Node 0 sends 10 messages of
    /// 1 MB in all: 10 µs + 40 µs = 50 µs; node 1 sends 100 messages of 0.5 MB: 100 µs + 20 µs
    /// = 120 µs. The phase takes the busier node's 120 µs.
    #[test]
    fn a_phase_takes_the_busiest_nodes_messages_and_bytes() {
        let n = Network::preset("ib-hdr").unwrap();
        assert!((n.seconds(10, 1_000_000) - 50e-6).abs() < 1e-12);
        let t = n.phase_seconds(&[(10, 1_000_000), (100, 500_000), (0, 0)]);
        assert!((t - 120e-6).abs() < 1e-12, "{t}");
        assert_eq!(n.phase_seconds(&[]), 0.0);
        assert!(matches!(
            Network::preset("carrier-pigeon"),
            Err(TopologyError::UnknownNetwork { .. })
        ));
    }

    #[test]
    fn a_topology_file_declares_its_network() {
        let base = "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 16\nduplex = true\n";
        let t = Topology::from_toml_str(base, "t.toml").unwrap();
        assert!(t.network().is_none());
        let with =
            format!("{base}[network]\nname = \"lab\"\nbandwidth_gb_per_s = 12.5\nlatency_us = 2\n");
        let t = Topology::from_toml_str(&with, "t.toml").unwrap();
        let n = t.network().unwrap();
        assert_eq!(n.name, "lab");
        assert_eq!(n.bandwidth, 12.5e9);
        assert!((n.latency - 2e-6).abs() < 1e-15);
        let bad = format!("{base}[network]\nbandwidth_gb_per_s = 0\n");
        assert!(matches!(
            Topology::from_toml_str(&bad, "t.toml"),
            Err(TopologyError::BadBandwidth { .. })
        ));
        let bad = format!("{base}[network]\nbandwidth_gb_per_s = 1\nlatency_us = -1\n");
        assert!(matches!(
            Topology::from_toml_str(&bad, "t.toml"),
            Err(TopologyError::BadLatency { .. })
        ));
    }
}
