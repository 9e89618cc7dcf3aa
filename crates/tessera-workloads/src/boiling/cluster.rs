//! Boiling over the nodes of a cluster (`tessera_runtime::cluster`): every node runs the same
//! frames on its devices, and the traffic between nodes is counted and modeled on a network.
//! The times are measured only: the topology model of a single node's run charges links
//! between devices of one machine, and the traffic between nodes is counted instead.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tessera_model::Network;
use tessera_runtime::cluster::{Link, NodeCounters};
use tessera_runtime::{
    HostCounters, HostReport, Partition, Procedure, RuntimeError, StageTimes, System,
};

use super::math::BoilingParams;
use super::reference::{checksum_hex, field_checksum};
use super::sim::PagedBoiling;

/// A cluster run's settings beside its node.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// The backend's name in reports: `cpu` or `wgpu`.
    pub backend: &'static str,
    pub size: u32,
    pub page: u32,
    pub partition: Partition,
    pub procedure: Procedure,
    /// Frames run first, counted nowhere.
    pub warmup: u32,
    /// Measured frames.
    pub frames: u32,
    /// Pages in a block of homes (`ClusterConfig::block_pages`), for the report.
    pub home_block_pages: u64,
}

/// What rank 0 writes to report.json: the core every run's report starts with
/// (docs/report.schema.json), then the cluster's own keys.
#[derive(Clone, Debug, Serialize)]
pub struct NodesReport {
    pub schema_version: u32,
    pub workload: &'static str,
    /// `cpu` or `wgpu`.
    pub backend: &'static str,
    /// Rank 0's devices, as the backend describes them.
    pub adapter: String,
    pub devices: usize,
    pub page_size: u32,
    pub frames: u32,
    pub warmup_frames: u32,
    pub procedure: Procedure,
    pub split: Partition,
    /// The field's after the last frame (`checksum_kind`: "field").
    pub checksum: String,
    pub checksum_kind: &'static str,
    /// `Some(true)` once `--verify` found the field equal to the unpaged reference's (a
    /// difference fails the run, which then writes no report); `None` where it was not asked.
    pub verified: Option<bool>,
    /// Always "measured": no topology model runs across nodes.
    pub time_kind: &'static str,
    /// Summed over every node's devices and the measured frames.
    pub stages: StageTimes,
    /// Every device of every node, in device order.
    pub per_device: Vec<NodeDeviceReport>,
    pub nodes: usize,
    pub devices_per_node: usize,
    pub size: u32,
    pub home_block_pages: u64,
    pub ms_per_frame_measured: f64,
    /// All nodes together, over the measured frames.
    pub inter_node_bytes_per_frame: f64,
    pub inter_node_page_bytes_per_frame: f64,
    pub inter_node_messages_per_frame: f64,
    /// The network the time below is modeled on, its bandwidth and per-message latency.
    pub network: String,
    pub network_bandwidth_gb_per_s: f64,
    pub network_latency_us: f64,
    /// Modeled: each node's interface sends its frame's messages one after another
    /// (latency each, bytes at the bandwidth), the nodes at once; the busiest node's time.
    /// The frame is taken as one phase, so this is a lower bound of the sum over its passes.
    pub network_seconds_per_frame_modeled: f64,
    /// Bytes each node sent to the others per measured frame.
    pub bytes_sent_per_frame_by_node: Vec<f64>,
}

/// One device of a cluster run, as its node counted it.
#[derive(Clone, Debug, Serialize)]
pub struct NodeDeviceReport {
    pub device: usize,
    /// The host's work for it per measured frame, on its own node.
    pub host: HostReport,
    /// Its stage times over the measured frames, seconds: `stages`, as in every report.
    pub stages: StageTimes,
}

/// Builds the field on `sys`, this node of the cluster behind `link`, and runs `s` on it as
/// [`run`] does; the split is checked against every node's devices first.
pub fn run_node<E: From<RuntimeError>>(
    sys: System,
    link: &Arc<Link>,
    s: &Settings,
    network: &Network,
    after_frame: impl FnMut(u32, bool) -> Result<(), E>,
) -> Result<(NodesReport, PagedBoiling), E> {
    let devices = (link.size() * link.devices_per_node()) as u32;
    s.partition.regions(s.size, s.size, devices)?;
    let sim = PagedBoiling::new(sys, s.size, s.size, s.page, BoilingParams::default())?;
    run(sim, link, s, network, after_frame)
}

/// Runs `s` on `sim`, this node's part of the cluster behind `link`, and models the traffic
/// between nodes on `network`; every node returns the same report (rank 0's clock).
/// `after_frame` is called with the number of the frame just run, warm-up frames first
/// (numbered from 1 too), and whether it was one.
pub fn run<E: From<RuntimeError>>(
    sim: PagedBoiling,
    link: &Arc<Link>,
    s: &Settings,
    network: &Network,
    mut after_frame: impl FnMut(u32, bool) -> Result<(), E>,
) -> Result<(NodesReport, PagedBoiling), E> {
    let o = s;
    let nodes = link.size();
    let k = link.devices_per_node();
    for n in 1..=o.warmup {
        sim.frame(o.partition, o.procedure)?;
        after_frame(n, true)?;
    }
    let before = link.gather_counters()?;
    let host_before = sim.sys.host_counters();
    let mut stages = vec![StageTimes::default(); k];
    let t = Instant::now();
    for n in 1..=o.frames {
        // Each pass ends at a barrier of every node, so this is the cluster's time.
        for (into, d) in stages.iter_mut().zip(sim.frame(o.partition, o.procedure)?) {
            into.add(&d.stages);
        }
        after_frame(n, false)?;
    }
    let wall = t.elapsed().as_secs_f64();
    let after = link.gather_counters()?;
    let host: Vec<HostCounters> = sim
        .sys
        .host_counters()
        .iter()
        .zip(&host_before)
        .map(|(a, b)| a.since(b))
        .collect();
    let mut per_device = Vec::new();
    let mut all_stages = StageTimes::default();
    // Each node's devices' host counts and stage times, to every node.
    let mine: Vec<(HostCounters, StageTimes)> = host.into_iter().zip(stages).collect();
    let mine = serde_json::to_vec(&mine).map_err(|e| RuntimeError::Config(e.to_string()))?;
    for (node, bytes) in link.all_gather(mine)?.iter().enumerate() {
        let theirs: Vec<(HostCounters, StageTimes)> = serde_json::from_slice(bytes)
            .map_err(|e| RuntimeError::Config(format!("node {node}'s device figures: {e}")))?;
        for (h, st) in theirs {
            all_stages.add(&st);
            per_device.push(NodeDeviceReport {
                device: per_device.len(),
                host: HostReport::of(&h, o.frames),
                stages: st,
            });
        }
    }
    let per_frame = |v: u64| v as f64 / o.frames as f64;
    let mut total = NodeCounters::default();
    let mut by_node = Vec::new();
    let mut sent = Vec::new();
    for (a, b) in after.iter().zip(&before) {
        let d = NodeCounters {
            bytes: a.bytes - b.bytes,
            page_bytes: a.page_bytes - b.page_bytes,
            messages: a.messages - b.messages,
        };
        by_node.push(per_frame(d.bytes));
        sent.push((d.messages, d.bytes));
        total.add(&d);
    }
    let field = sim.field()?;
    let report = NodesReport {
        schema_version: crate::SCHEMA_VERSION,
        workload: "boiling",
        backend: o.backend,
        adapter: sim.sys.backend().to_string(),
        devices: nodes * k,
        page_size: o.page,
        frames: o.frames,
        warmup_frames: o.warmup,
        procedure: o.procedure,
        split: o.partition,
        checksum: checksum_hex(field_checksum(&field)),
        checksum_kind: "field",
        verified: None,
        time_kind: "measured",
        stages: all_stages,
        per_device,
        nodes,
        devices_per_node: k,
        size: o.size,
        home_block_pages: o.home_block_pages,
        ms_per_frame_measured: wall * 1e3 / o.frames as f64,
        inter_node_bytes_per_frame: per_frame(total.bytes),
        inter_node_page_bytes_per_frame: per_frame(total.page_bytes),
        inter_node_messages_per_frame: per_frame(total.messages),
        network: network.name.clone(),
        network_bandwidth_gb_per_s: network.bandwidth / 1e9,
        network_latency_us: network.latency * 1e6,
        network_seconds_per_frame_modeled: network.phase_seconds(&sent) / o.frames as f64,
        bytes_sent_per_frame_by_node: by_node,
    };
    Ok((report, sim))
}

impl NodesReport {
    /// Rank 0's summary as `tessera run boiling --devices-per-node` prints it.
    pub fn summary(&self) -> String {
        let r = self;
        let mut s = String::new();
        ln!(
 s,
        "boiling {s}x{s}, page {p}, {n} node(s) x {k} device(s) [{be}] = {d} devices, {proc}, homes in blocks of {b} pages, {f} frame(s) after {w} warm-up (measured)",
        s = r.size,
        p = r.page_size,
        n = r.nodes,
        k = r.devices_per_node,
        d = r.devices,
        be = r.adapter,
        proc = r.procedure,
        b = r.home_block_pages,
        f = r.frames,
        w = r.warmup_frames
    );
        ln!(s, "ms_per_frame_measured={:.3}", r.ms_per_frame_measured);
        ln!(
            s,
            "inter_node_bytes_per_frame={:.0} (page data {:.0}, {:.1} messages)",
            r.inter_node_bytes_per_frame,
            r.inter_node_page_bytes_per_frame,
            r.inter_node_messages_per_frame
        );
        ln!(
 s,
        "network_seconds_per_frame_modeled={:.6} (on {}: {:.2} GB/s, {:.1} us a message; each node's messages one after another, the nodes at once)",
        r.network_seconds_per_frame_modeled,
        r.network,
        r.network_bandwidth_gb_per_s,
        r.network_latency_us
    );
        ln!(s, "field_checksum={}", r.checksum);
        s.pop();
        s
    }
}
