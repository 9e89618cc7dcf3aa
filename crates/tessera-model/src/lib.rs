//! tessera-model: topologies (the devices, the host and the links between them) and the
//! modeled time of the page moves a pass makes. Kept out of tessera-core, whose memory model
//! has no notion of time, no file format and no I/O.
//!
//! A link is one direction of a connection, with a bandwidth (bytes per second) and a
//! latency charged once per page move (a page move is one copy command; small pages pay it
//! many times, which is what makes them slow in the paper's Figure 11). A page move crosses
//! the links of its route: host → device and device → host directly, device → device over a
//! direct link when the topology has one, else through host memory (two links).
//!
//! Time model of one pass (docs/EVALUATION.md has the reasons):
//! - each link's busy time is the sum over the moves routed across it of
//!   `latency + bytes / bandwidth`: moves on one link serialise;
//! - different links run at once, so the pass's transfer time is the busiest link's time (a
//!   move routed over two links is counted on both and pipelined across pages);
//! - devices wait for their pages before they compute (the paper's procedures do, and
//!   overlapping the two is its future work, section 5.1.2), so the pass takes the slowest
//!   device's work plus the transfer time; except the moves the runtime made *while* a device
//!   computed (staged pages copied during a launch, `--staging on`): those run beside the
//!   work, so the pass's device part is the longer of the slowest device's work and the
//!   busiest link's time for those moves ([`Topology::overlapped_pass_time`]);
//! - the memory manager is one thread serving every device's batches in turn, so its own time
//!   (protocol, directory, slot bookkeeping) is summed over devices and added; it overlaps
//!   neither the devices' work nor the links ([`Topology::isolated_pass_time`]).
//!
//! Everything here is pure but [`Topology::load`], which reads a `--topology` file (at most
//! [`MAX_TOPOLOGY_BYTES`]): presets, a TOML description parsed from text, routing and the
//! arithmetic. Measuring device work happens in the caller.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// Host memory, where every page's home copy lives.
    Host,
    /// A device by index.
    Device(usize),
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Host => write!(f, "host"),
            Endpoint::Device(d) => write!(f, "device{d}"),
        }
    }
}

impl Endpoint {
    /// `host` or `device<N>`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        if s == "host" {
            return Some(Endpoint::Host);
        }
        let digits = s.strip_prefix("device")?;
        // `device01` or `device+1` would parse as numbers but are surely typos.
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return None;
        }
        digits.parse().ok().map(Endpoint::Device)
    }
}

/// One direction of a connection.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    pub from: Endpoint,
    pub to: Endpoint,
    /// Bytes per second, positive and finite.
    pub bandwidth: f64,
    /// Seconds charged once per page move, non-negative and finite.
    pub latency: f64,
}

impl Link {
    /// Time for `pages` moves carrying `bytes` in all.
    pub fn seconds(&self, pages: u64, bytes: u64) -> f64 {
        pages as f64 * self.latency + bytes as f64 / self.bandwidth
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}->{}", self.from, self.to)
    }
}

/// Where in a topology file something is: `origin:line:column`, 1-based.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    pub origin: String,
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.origin, self.line, self.column)
    }
}

/// Everything a topology can refuse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TopologyError {
    #[error("unknown topology {name:?} (expected a file or one of: {})", PRESETS.join(", "))]
    UnknownPreset { name: String },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("cannot read topology file {path}: {message}")]
    Read { path: String, message: String },
    #[error("{at}: bandwidth must be a number of GB/s from 1e-6 (1 kB/s) to 1e6 (got {value:?})")]
    BadBandwidth { at: Location, value: f64 },
    #[error("{at}: latency must be a number of microseconds from 0 to 1e9 (got {value:?})")]
    BadLatency { at: Location, value: f64 },
    #[error("{at}: unknown endpoint {name:?} (expected \"host\" or one of the declared devices device0..device{last})")]
    UnknownEndpoint {
        at: Location,
        name: String,
        last: usize,
    },
    #[error("{at}: a link from {endpoint} to itself")]
    SelfLink { at: Location, endpoint: Endpoint },
    #[error("{at}: a second link from {from} to {to} (each direction may be given once)")]
    DuplicateLink {
        at: Location,
        from: Endpoint,
        to: Endpoint,
    },
    #[error("{at}: device {id} declared twice")]
    DuplicateDevice { at: Location, id: u64 },
    #[error("{origin}: device ids must be 0..{count} without gaps; device{missing} is missing")]
    DeviceGap {
        origin: String,
        count: usize,
        missing: usize,
    },
    #[error("{origin}: a topology needs at least one [[device]]")]
    NoDevices { origin: String },
    #[error("{origin}: {count} devices; a topology has at most {max}", max = tessera_core::MAX_DEVICES)]
    TooManyDevices { origin: String, count: usize },
    #[error("{origin}: name = {name:?} {why}; reports name the topology by it, so a file's needs a name of its own")]
    BadName {
        origin: String,
        name: String,
        why: &'static str,
    },
    #[error("{origin}: device{device} has no link {direction} host (every device needs links to and from host, where pages live)")]
    Unreachable {
        origin: String,
        device: usize,
        direction: &'static str,
    },
    #[error("{at}: {key} must be {expected} (got {value:?})")]
    BadRemote {
        at: Location,
        key: &'static str,
        expected: &'static str,
        value: f64,
    },
    #[error("{at}: switch {value} of device {device} is out of range (switch ids are 0..{max})", max = tessera_core::MAX_DEVICES)]
    BadSwitch {
        at: Location,
        device: u64,
        value: u64,
    },
    #[error("device count must be between 1 and {max} (got {0})", max = tessera_core::MAX_DEVICES)]
    DeviceCount(usize),
    #[error("unknown network {name:?} (expected one of: {})", NETWORKS.join(", "))]
    UnknownNetwork { name: String },
    #[error("topology {name} has {has} device(s), but the run uses {wanted}")]
    TooFewDevices {
        name: String,
        has: usize,
        wanted: usize,
    },
    #[error("no route from {from} to {to} in topology {name}")]
    NoRoute {
        name: String,
        from: Endpoint,
        to: Endpoint,
    },
}

pub type Result<T> = std::result::Result<T, TopologyError>;

/// The built-in topologies' names.
pub const PRESETS: &[&str] = &[
    "pcie1-x16",
    "pcie3-x16",
    "pcie4-x16",
    "pcie5-x16",
    "nvlink",
    "gpusm-pcie2",
    "gpusm-pcie3",
    "mcm-4",
    "mcm-8",
];

/// How fast a GPU reaches remote memory in place (`AccessMode::Remote`), from GPU-SM's PCIe
/// measurements (GPGPU-8 2015, §4 "Hypothesis 1", Fig. 4). All bandwidths in bytes per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemoteModel {
    /// One GPU reading remote memory in place, no PCIe switch crossed (a peer on its own
    /// switch, or host memory, which §4 finds as fast as such a peer).
    pub read_bw: f64,
    /// Writes reach this fraction of `read_bw` (§4: "8-10% lower bandwidth than read
    /// accesses"; we take 9%).
    pub write_factor: f64,
    /// Reads that cross a PCIe switch reach this fraction of the same-switch bandwidth (§4:
    /// crossing switches costs ">20%" for reads).
    pub switch_read_factor: f64,
    /// Writes that cross a switch: ">30%" lower (§4), so 0.70 of the same-switch writes.
    pub switch_write_factor: f64,
    /// What one shared PCIe link carries in all when several transfers use it at once (one
    /// GPU reading and writing, or two GPUs accessing alike): §4 measures "over 10 GBps for
    /// PCIe 2.0 and over 18 GBps for PCIe 3.0", more than one GPU's peak but not twice it.
    pub aggregate_bw: f64,
}

/// GPU-SM's System A (PCIe 2.0 x16, K20): a GPU's remote accesses reach ">6 GBps" (§4, Fig. 4,
/// the same as cudaMemcpy's copies), ">10 GBps" aggregated.
pub const GPUSM_PCIE2: RemoteModel = RemoteModel {
    read_bw: 6e9,
    write_factor: 0.91,
    switch_read_factor: 0.80,
    switch_write_factor: 0.70,
    aggregate_bw: 10e9,
};

/// GPU-SM's System B (PCIe 3.0 x16, K40, two GPUs per switch): ">12 GBps" per GPU, ">18
/// GBps" aggregated (§4, Fig. 4).
pub const GPUSM_PCIE3: RemoteModel = RemoteModel {
    read_bw: 12e9,
    write_factor: 0.91,
    switch_read_factor: 0.80,
    switch_write_factor: 0.70,
    aggregate_bw: 18e9,
};

impl RemoteModel {
    /// For a topology whose host links carry `link_bw`: GPU-SM's PCIe 3 efficiencies (12 of
    /// the link's nominal 15.75 GB/s per GPU, 18 aggregated) applied to that link. An
    /// extrapolation for links GPU-SM did not measure (docs/EVALUATION.md says so).
    pub fn scaled_to(link_bw: f64) -> Self {
        let nominal = pcie_x16(3);
        RemoteModel {
            read_bw: link_bw * GPUSM_PCIE3.read_bw / nominal,
            aggregate_bw: link_bw * GPUSM_PCIE3.aggregate_bw / nominal,
            ..GPUSM_PCIE3
        }
    }
}

/// Remote traffic of one accessor to one location in one pass (from `DeviceTraffic`'s
/// remote counters): who accessed, where the pages live, and the bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RemoteUse {
    pub accessor: usize,
    pub location: Endpoint,
    pub link: tessera_core::access::RemoteLink,
}

/// A remote access over a direct device-to-device link ([`Topology::peer_remote`]), in bytes
/// per second.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PeerRemote {
    /// The two devices, lower first: the link's segment.
    pub pair: (usize, usize),
    pub read_bw: f64,
    pub write_bw: f64,
    /// What the link carries in all, both directions and both devices' accesses.
    pub aggregate_bw: f64,
}

/// The modeled time of one pass with remote accesses.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RemotePassTime {
    /// Per device: its work, its batch accesses' time and its spread accesses' time, and its
    /// total `max(work, spread) + batch`.
    pub work: Vec<f64>,
    pub batch: Vec<f64>,
    pub spread: Vec<f64>,
    pub device_total: Vec<f64>,
    /// Bytes over each shared segment, and its time at the aggregate bandwidth, by segment
    /// name (`device<N>`: the GPU's own x16 link, `switch<N>`: a switch's uplink, `host`: host
    /// memory's link, `link<A>-<B>`: a direct link between two devices that carried remote
    /// accesses, [`Topology::peer_remote`]).
    pub segments: Vec<(String, u64, f64)>,
    /// `max(slowest device_total, busiest segment)`.
    pub total: f64,
}

/// Nominal per-direction data rate of a PCIe x16 link in bytes per second: lanes × transfer
/// rate × line-code efficiency / 8 bits. Gen 1 uses 8b/10b, gen 3 onwards 128b/130b.
fn pcie_x16(gen: u32) -> f64 {
    let (gt_per_s, code) = match gen {
        1 => (2.5e9, 8.0 / 10.0),
        3 => (8e9, 128.0 / 130.0),
        4 => (16e9, 128.0 / 130.0),
        _ => (32e9, 128.0 / 130.0),
    };
    16.0 * gt_per_s * code / 8.0
}

/// Per page move on the 2007 machine: a driver call and a DMA set-up per page (an assumption;
/// docs/EVALUATION.md).
pub const PCIE1_LATENCY: f64 = 10e-6;
/// Per page move on current machines, the same on every modern preset so that they differ in
/// bandwidth only (an assumption; docs/EVALUATION.md).
pub const MODERN_LATENCY: f64 = 5e-6;
/// OO-VR's inter-GPU link: 64 GB/s in each direction between every pair (its Table 2).
pub const NVLINK_BANDWIDTH: f64 = 64e9;

/// OO-VR's GPU module (GPM) local DRAM bandwidth, bytes per second (its Table 2: 1 TB/s).
pub const MCM_LOCAL_BANDWIDTH: f64 = 1e12;
/// OO-VR's GPM clock, cycles per second (Table 2: 1 GHz).
pub const MCM_CLOCK_HZ: f64 = 1e9;
/// ROPs per GPM (Table 2: 32 ROPs, 8 per GPM).
pub const MCM_ROPS_PER_GPM: u32 = 8;
/// Pixels one ROP writes per cycle (§3: "each ROP in our simulation outputs 4 pixels per
/// cycle").
pub const MCM_PIXELS_PER_ROP_CYCLE: u32 = 4;

/// What a multi-chip-module preset (`mcm-4`, `mcm-8`) says about each GPU module beyond its
/// links: the figures OO-VR's Table 2 gives, for the VR schemes' cost model. Links carry page
/// moves; local memory and ROPs are not links, so they live here.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpmModel {
    /// Local DRAM bandwidth, bytes per second.
    pub local_bandwidth: f64,
    /// Framebuffer output rate of one GPM's ROPs, pixels per second.
    pub rop_pixels_per_second: f64,
}

/// OO-VR's GPM (Table 2): 1 TB/s local DRAM, 8 ROPs × 4 pixels per cycle × 1 GHz = 3.2e10
/// pixels per second.
pub const OOVR_GPM: GpmModel = GpmModel {
    local_bandwidth: MCM_LOCAL_BANDWIDTH,
    rop_pixels_per_second: MCM_ROPS_PER_GPM as f64 * MCM_PIXELS_PER_ROP_CYCLE as f64 * MCM_CLOCK_HZ,
};

/// A validated topology: devices `0..devices`, and links by direction.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    name: String,
    devices: usize,
    links: Vec<Link>,
    by_ends: HashMap<(Endpoint, Endpoint), usize>,
    /// The PCIe switch each device sits behind (GPU-SM §2, Fig. 1). Devices with their own
    /// link to the host each have their own.
    switch_of: Vec<usize>,
    /// Remote access bandwidths (GPU-SM §4).
    remote: RemoteModel,
    /// Whether `remote` was scaled from the host links rather than given (a GPU-SM preset or a
    /// file's `[remote]`): then an access between two devices joined by a direct link goes
    /// over that link (`remote_pass_time`).
    remote_scaled: bool,
    /// The GPU module figures of the `mcm-*` presets; `None` elsewhere.
    gpm: Option<GpmModel>,
    /// The network between nodes (`[network]` in a file); `None` when not given.
    network: Option<Network>,
}

/// The network between the nodes of a cluster: the link kind that joins machines,
/// not devices. Each node's interface sends its messages one after another, each paying the
/// latency once and its bytes at the bandwidth; the interfaces of different nodes send at
/// once (a non-blocking switch), so a phase of messages takes its busiest node's time.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    pub name: String,
    /// Bytes per second one node's interface sends, positive and finite.
    pub bandwidth: f64,
    /// Seconds per message, non-negative and finite.
    pub latency: f64,
}

/// The named networks `Network::preset` knows.
pub const NETWORKS: &[&str] = &["eth-10g", "eth-100g", "ib-edr", "ib-hdr"];

impl Network {
    /// A named network: `eth-10g` and `eth-100g` (Ethernet with TCP, 10 and 100 Gb/s, tens
    /// of microseconds a message), `ib-edr` and `ib-hdr` (InfiniBand, 100 and 200 Gb/s, about
    /// a microsecond). Line rates, not measured figures.
    pub fn preset(name: &str) -> Result<Self> {
        let (gbit, latency_us) = match name {
            "eth-10g" => (10.0, 50.0),
            "eth-100g" => (100.0, 10.0),
            "ib-edr" => (100.0, 1.0),
            "ib-hdr" => (200.0, 1.0),
            _ => {
                return Err(TopologyError::UnknownNetwork {
                    name: name.to_string(),
                })
            }
        };
        Ok(Network {
            name: name.to_string(),
            bandwidth: gbit * 1e9 / 8.0,
            latency: latency_us * 1e-6,
        })
    }

    /// The `[network]` table of the topology file `spec`, for a run over nodes, which reads
    /// nothing else of it (docs/MPI.md): a file of a network alone needs no device, and one
    /// with devices need not have as many as the nodes together. `None` where the file has no
    /// such table, or `spec` is a preset (none has one).
    pub fn from_topology_file(spec: &str) -> Result<Option<Self>> {
        let Some((text, origin)) = topology_text(spec)? else {
            return Ok(None);
        };
        let file: File = toml::from_str(&text).map_err(|e| TopologyError::Parse {
            origin: origin.clone(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let at = |span: std::ops::Range<usize>| location(&text, &origin, span.start);
        file.network
            .as_ref()
            .map(|n| network_of(n, &at))
            .transpose()
    }

    /// One node's interface sending `messages` messages of `bytes` in all.
    pub fn seconds(&self, messages: u64, bytes: u64) -> f64 {
        messages as f64 * self.latency + bytes as f64 / self.bandwidth
    }

    /// A phase in which node `n` sent `sent[n] = (messages, bytes)`: the busiest node's time.
    pub fn phase_seconds(&self, sent: &[(u64, u64)]) -> f64 {
        sent.iter()
            .map(|&(m, b)| self.seconds(m, b))
            .fold(0.0, f64::max)
    }
}

/// Page moves from one endpoint to another, summed: `pages` moves carrying `bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    pub from: Endpoint,
    pub to: Endpoint,
    pub pages: u64,
    pub bytes: u64,
    /// Device-to-device moves whose source wrote the same pages home for the same grant
    /// (the journal paper's write-home rule). Where no link joins the two devices the bytes
    /// are taken from home ([`Topology::transfer_route`]): they crossed the source's host link
    /// once, as its write-back, not a second time.
    pub homed: bool,
}

/// The modeled time of one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassTime {
    /// The slowest device's work, as given (measured by the caller).
    pub device_seconds: f64,
    /// The busiest link's time (modeled).
    pub transfer_seconds: f64,
    /// The memory manager's own time, summed over the devices it served (measured by the
    /// caller); zero from [`Topology::pass_time`].
    pub manager_seconds: f64,
    /// Each link's busy time in this pass, indexed like [`Topology::links`].
    pub link_seconds: Vec<f64>,
}

impl PassTime {
    pub fn total(&self) -> f64 {
        self.device_seconds + self.transfer_seconds + self.manager_seconds
    }
}

impl Topology {
    /// A built-in topology for `devices` devices.
    ///
    /// - `pcieN-x16`: each device on its own PCIe generation-N x16 link to host, full duplex;
    ///   device-to-device moves go through host memory.
    /// - `nvlink`: a direct 64 GB/s link in each direction between every pair of devices (as
    ///   OO-VR's GPU modules, its Table 2), and a PCIe 3 x16 link from each to host.
    /// - `gpusm-pcie3`, `gpusm-pcie2`: GPU-SM's machines (§3.1, Fig. 1): two GPUs behind each
    ///   PCIe switch (System B has four, 2+2), remote accesses as [`GPUSM_PCIE3`] /
    ///   [`GPUSM_PCIE2`]; page copies at the measured copy bandwidth (§4, Fig. 4: remote
    ///   accesses reach cudaMemcpy's), peers on one switch directly, across switches at the
    ///   switch-crossing read factor.
    /// - `mcm-4`, `mcm-8`: OO-VR's multi-chip-module GPU (Table 2, §3): that many GPU modules
    ///   (GPMs), each pair joined by its own 64 GB/s link in each direction ("each pair of
    ///   ports is used to connect two GPMs", so moves between two GPMs never share a link),
    ///   and [`OOVR_GPM`] per module. The paper gives no host link (its textures start in GPM
    ///   memory); tessera's home copies live in host memory, so we assume a PCIe 3 x16 link
    ///   from the package to host per GPM, as on `nvlink`. Per-move latency as on the other
    ///   modern presets (an assumption). A run may use fewer devices than the preset has, not
    ///   more.
    pub fn preset(name: &str, devices: usize) -> Result<Self> {
        if devices == 0 || devices > tessera_core::MAX_DEVICES {
            return Err(TopologyError::DeviceCount(devices));
        }
        if let Some(gpms) = match name {
            "mcm-4" => Some(4),
            "mcm-8" => Some(8),
            _ => None,
        } {
            if devices > gpms {
                return Err(TopologyError::TooFewDevices {
                    name: name.to_string(),
                    has: gpms,
                    wanted: devices,
                });
            }
            let mut t = Self::preset("nvlink", gpms)?;
            t.name = name.to_string();
            t.gpm = Some(OOVR_GPM);
            return Ok(t);
        }
        if let Some(model) = match name {
            "gpusm-pcie2" => Some(GPUSM_PCIE2),
            "gpusm-pcie3" => Some(GPUSM_PCIE3),
            _ => None,
        } {
            return Ok(Self::gpusm(name, devices, model));
        }
        let (host_bw, latency, mesh) = match name {
            "pcie1-x16" => (pcie_x16(1), PCIE1_LATENCY, None),
            "pcie3-x16" => (pcie_x16(3), MODERN_LATENCY, None),
            "pcie4-x16" => (pcie_x16(4), MODERN_LATENCY, None),
            "pcie5-x16" => (pcie_x16(5), MODERN_LATENCY, None),
            "nvlink" => (pcie_x16(3), MODERN_LATENCY, Some(NVLINK_BANDWIDTH)),
            _ => {
                return Err(TopologyError::UnknownPreset {
                    name: name.to_string(),
                })
            }
        };
        let mut links = Vec::new();
        for d in 0..devices {
            for (from, to) in [
                (Endpoint::Host, Endpoint::Device(d)),
                (Endpoint::Device(d), Endpoint::Host),
            ] {
                links.push(Link {
                    from,
                    to,
                    bandwidth: host_bw,
                    latency,
                });
            }
        }
        if let Some(bw) = mesh {
            for a in 0..devices {
                for b in (0..devices).filter(|&b| b != a) {
                    links.push(Link {
                        from: Endpoint::Device(a),
                        to: Endpoint::Device(b),
                        bandwidth: bw,
                        latency,
                    });
                }
            }
        }
        Ok(Self::assemble(name.to_string(), devices, links))
    }

    fn gpusm(name: &str, devices: usize, model: RemoteModel) -> Self {
        let mut links = Vec::new();
        for d in 0..devices {
            for (from, to) in [
                (Endpoint::Host, Endpoint::Device(d)),
                (Endpoint::Device(d), Endpoint::Host),
            ] {
                links.push(Link {
                    from,
                    to,
                    bandwidth: model.read_bw,
                    latency: MODERN_LATENCY,
                });
            }
        }
        for a in 0..devices {
            for b in (0..devices).filter(|&b| b != a) {
                let factor = if a / 2 == b / 2 {
                    1.0
                } else {
                    model.switch_read_factor
                };
                links.push(Link {
                    from: Endpoint::Device(a),
                    to: Endpoint::Device(b),
                    bandwidth: model.read_bw * factor,
                    latency: MODERN_LATENCY,
                });
            }
        }
        let mut t = Self::assemble(name.to_string(), devices, links);
        t.switch_of = (0..devices).map(|d| d / 2).collect();
        t.remote = model;
        t.remote_scaled = false;
        t
    }

    fn assemble(name: String, devices: usize, links: Vec<Link>) -> Self {
        let by_ends = links
            .iter()
            .enumerate()
            .map(|(i, l)| ((l.from, l.to), i))
            .collect();
        let host_bw = links
            .iter()
            .filter(|l| l.from == Endpoint::Host || l.to == Endpoint::Host)
            .map(|l| l.bandwidth)
            .fold(f64::INFINITY, f64::min);
        Topology {
            name,
            devices,
            links,
            by_ends,
            switch_of: (0..devices).collect(),
            remote: RemoteModel::scaled_to(if host_bw.is_finite() {
                host_bw
            } else {
                pcie_x16(3)
            }),
            remote_scaled: true,
            gpm: None,
            network: None,
        }
    }

    /// The network between nodes, when the topology names one (`[network]`).
    pub fn network(&self) -> Option<&Network> {
        self.network.as_ref()
    }

    /// The GPU module figures (local memory, ROP rate) of an `mcm-*` preset; `None` for
    /// topologies that do not model GPU modules.
    pub fn gpm(&self) -> Option<GpmModel> {
        self.gpm
    }

    /// The remote access model (GPU-SM §4).
    pub fn remote_model(&self) -> RemoteModel {
        self.remote
    }

    /// How accessor `a` reaches `location` in place over a direct device-to-device link, when
    /// the remote model was scaled from the host links and such a link joins them: the
    /// link's bandwidths at GPU-SM's PCIe 3 efficiencies (12 of 15.75 GB/s for one GPU's
    /// reads, writes `write_factor` of that, 18 of 15.75 for the link carrying several
    /// transfers), the same extrapolation the scaled model makes of a host link. Reads come
    /// over the link from `location` to `a`, writes over the one back; a link declared one
    /// way only serves both. `None` where the GPU-SM model applies as given.
    pub fn peer_remote(&self, a: usize, location: Endpoint) -> Option<PeerRemote> {
        let Endpoint::Device(l) = location else {
            return None;
        };
        if !self.remote_scaled || l == a {
            return None;
        }
        let bw = |from: usize, to: usize| {
            self.by_ends
                .get(&(Endpoint::Device(from), Endpoint::Device(to)))
                .map(|&i| self.links[i].bandwidth)
        };
        let (inward, outward) = match (bw(l, a), bw(a, l)) {
            (None, None) => return None,
            (Some(i), Some(o)) => (i, o),
            (Some(x), None) | (None, Some(x)) => (x, x),
        };
        let nominal = pcie_x16(3);
        let read_eff = GPUSM_PCIE3.read_bw / nominal;
        Some(PeerRemote {
            pair: (a.min(l), a.max(l)),
            read_bw: inward * read_eff,
            write_bw: outward * read_eff * self.remote.write_factor,
            aggregate_bw: inward.max(outward) * GPUSM_PCIE3.aggregate_bw / nominal,
        })
    }

    /// The PCIe switch device `d` sits behind.
    pub fn switch_of(&self, d: usize) -> Option<usize> {
        self.switch_of.get(d).copied()
    }

    /// Modeled time of a pass whose devices worked `work` seconds each (measured by the
    /// caller, one entry per device) and made these remote accesses.
    ///
    /// - An accessor's time for its accesses to one location: reads at
    ///   `read_bw`, writes at `read_bw × write_factor`, each times the switch factor when the
    ///   location is a device behind another switch (host memory counts as the same switch,
    ///   GPU-SM §4). Split into batch and spread time in proportion to the bytes.
    /// - Where the model was scaled from the host links (no GPU-SM preset, no `[remote]`), an
    ///   access to a device joined to the accessor by a direct link goes over that link
    ///   instead ([`Topology::peer_remote`]): a peer reads over NVLink, not through the host's
    ///   PCIe switch. The link's own segment carries it, not the two GPUs' host links.
    /// - Spread accesses overlap the device's work (the GPU runs other warps meanwhile,
    ///   GPU-SM §4 Hypothesis 4, Fig. 7b); batch accesses do not (Fig. 7a: the overhead grows
    ///   linearly): a device takes `max(work, spread) + batch`.
    /// - Each shared segment (a GPU's own link, carrying what it accesses and what is accessed
    ///   in its memory; a switch's uplink, carrying what crosses it; host memory's link)
    ///   carries at most `aggregate_bw` in all.
    /// - The pass takes the slowest device or the busiest segment, whichever is longer.
    pub fn remote_pass_time(&self, work: &[f64], uses: &[RemoteUse]) -> Result<RemotePassTime> {
        let n = self.devices;
        let check = |e: Endpoint| match e {
            Endpoint::Device(d) if d >= n => Err(TopologyError::TooFewDevices {
                name: self.name.clone(),
                has: n,
                wanted: d + 1,
            }),
            _ => Ok(()),
        };
        let m = self.remote;
        let mut out = RemotePassTime {
            work: (0..n)
                .map(|d| work.get(d).copied().unwrap_or(0.0))
                .collect(),
            batch: vec![0.0; n],
            spread: vec![0.0; n],
            ..Default::default()
        };
        let mut device_bytes = vec![0u64; n];
        let mut switch_bytes: Vec<u64> = vec![0; self.switch_of.iter().max().map_or(0, |s| s + 1)];
        let mut host_bytes = 0u64;
        let mut peer_bytes: std::collections::BTreeMap<(usize, usize), (u64, f64)> =
            Default::default();
        for u in uses.iter().filter(|u| !u.link.is_empty()) {
            check(Endpoint::Device(u.accessor))?;
            check(u.location)?;
            let a = u.accessor;
            if let Some(p) = self.peer_remote(a, u.location) {
                let secs =
                    u.link.read_bytes as f64 / p.read_bw + u.link.write_bytes as f64 / p.write_bw;
                let bytes = u.link.bytes();
                let batch_share = u.link.batch_bytes as f64 / bytes as f64;
                out.batch[a] += secs * batch_share;
                out.spread[a] += secs * (1.0 - batch_share);
                let e = peer_bytes.entry(p.pair).or_insert((0, p.aggregate_bw));
                e.0 += bytes;
                continue;
            }
            let sa = self.switch_of[a];
            let crosses = match u.location {
                Endpoint::Device(l) => self.switch_of[l] != sa,
                Endpoint::Host => false,
            };
            let (rf, wf) = if crosses {
                (m.switch_read_factor, m.switch_write_factor)
            } else {
                (1.0, 1.0)
            };
            let secs = u.link.read_bytes as f64 / (m.read_bw * rf)
                + u.link.write_bytes as f64 / (m.read_bw * m.write_factor * wf);
            let bytes = u.link.bytes();
            let batch_share = u.link.batch_bytes as f64 / bytes as f64;
            out.batch[a] += secs * batch_share;
            out.spread[a] += secs * (1.0 - batch_share);
            device_bytes[a] += bytes;
            match u.location {
                Endpoint::Device(l) => {
                    device_bytes[l] += bytes;
                    if crosses {
                        switch_bytes[sa] += bytes;
                        switch_bytes[self.switch_of[l]] += bytes;
                    }
                }
                Endpoint::Host => {
                    host_bytes += bytes;
                    switch_bytes[sa] += bytes;
                }
            }
        }
        out.device_total = (0..n)
            .map(|d| out.work[d].max(out.spread[d]) + out.batch[d])
            .collect();
        let seg = |name: String, b: u64| (name, b, b as f64 / m.aggregate_bw);
        out.segments = device_bytes
            .iter()
            .enumerate()
            .map(|(d, &b)| seg(format!("device{d}"), b))
            .chain(
                switch_bytes
                    .iter()
                    .enumerate()
                    .map(|(s, &b)| seg(format!("switch{s}"), b)),
            )
            .chain(std::iter::once(seg("host".into(), host_bytes)))
            .chain(
                peer_bytes
                    .into_iter()
                    .map(|((x, y), (b, agg))| (format!("link{x}-{y}"), b, b as f64 / agg)),
            )
            .collect();
        out.total = out
            .device_total
            .iter()
            .chain(out.segments.iter().map(|s| &s.2))
            .copied()
            .fold(0.0, f64::max);
        Ok(out)
    }

    /// Parses and validates a topology file's text; `origin` (the file's path) names it in
    /// errors and is its name when the file gives none.
    ///
    /// ```toml
    /// name = "two-gpus"          # optional
    /// [[device]]
    /// id = 0
    /// [[device]]
    /// id = 1
    /// [[link]]
    /// from = "host"
    /// to = "device0"
    /// bandwidth_gb_per_s = 16    # 10^9 bytes per second, in each direction when duplex
    /// latency_us = 5             # per page move; optional, 0 when absent
    /// duplex = true              # optional, true when absent: also to -> from
    /// ```
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Self> {
        Self::from_toml_for(text, origin, None)
    }

    /// [`Topology::from_toml_str`] for a run on devices `0..used` alone (`None`: all of
    /// them): the whole file is checked, then the other devices and their links are left
    /// out, so that a device the run does not use changes none of its figures (without
    /// `[remote]`, the remote model scales to the slowest host link, which was an unused
    /// device's in a file of slow spare devices).
    fn from_toml_for(text: &str, origin: &str, used: Option<usize>) -> Result<Self> {
        let file: File = toml::from_str(text).map_err(|e| TopologyError::Parse {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let at = |span: std::ops::Range<usize>| location(text, origin, span.start);

        let mut ids = HashMap::new();
        for d in &file.device {
            let id = *d.id.get_ref();
            if ids.insert(id, ()).is_some() {
                return Err(TopologyError::DuplicateDevice {
                    at: at(d.id.span()),
                    id,
                });
            }
        }
        let count = ids.len();
        if count == 0 {
            return Err(TopologyError::NoDevices {
                origin: origin.to_string(),
            });
        }
        if count > tessera_core::MAX_DEVICES {
            return Err(TopologyError::TooManyDevices {
                origin: origin.to_string(),
                count,
            });
        }
        if let Some(missing) = (0..count).find(|i| !ids.contains_key(&(*i as u64))) {
            return Err(TopologyError::DeviceGap {
                origin: origin.to_string(),
                count,
                missing,
            });
        }

        let mut links: Vec<Link> = Vec::new();
        let mut seen: HashMap<(Endpoint, Endpoint), ()> = HashMap::new();
        for l in &file.link {
            let end = |s: &toml::Spanned<String>| -> Result<Endpoint> {
                match Endpoint::parse(s.get_ref()) {
                    Some(Endpoint::Device(d)) if d >= count => None,
                    e => e,
                }
                .ok_or_else(|| TopologyError::UnknownEndpoint {
                    at: at(s.span()),
                    name: s.get_ref().clone(),
                    last: count - 1,
                })
            };
            let (from, to) = (end(&l.from)?, end(&l.to)?);
            if from == to {
                return Err(TopologyError::SelfLink {
                    at: at(l.to.span()),
                    endpoint: from,
                });
            }
            let gb = l.bandwidth_gb_per_s.get_ref().value();
            if !bandwidth_ok(gb) {
                return Err(TopologyError::BadBandwidth {
                    at: at(l.bandwidth_gb_per_s.span()),
                    value: gb,
                });
            }
            let us = match &l.latency_us {
                Some(v) => {
                    let us = v.get_ref().value();
                    if !latency_ok(us) {
                        return Err(TopologyError::BadLatency {
                            at: at(v.span()),
                            value: us,
                        });
                    }
                    us
                }
                None => 0.0,
            };
            let mut dirs = vec![(from, to)];
            if l.duplex.unwrap_or(true) {
                dirs.push((to, from));
            }
            for (from, to) in dirs {
                if seen.insert((from, to), ()).is_some() {
                    return Err(TopologyError::DuplicateLink {
                        at: at(l.from.span()),
                        from,
                        to,
                    });
                }
                links.push(Link {
                    from,
                    to,
                    bandwidth: gb * 1e9,
                    latency: us * 1e-6,
                });
            }
        }
        for d in 0..count {
            for (ends, direction) in [
                ((Endpoint::Host, Endpoint::Device(d)), "from"),
                ((Endpoint::Device(d), Endpoint::Host), "to"),
            ] {
                if !seen.contains_key(&ends) {
                    return Err(TopologyError::Unreachable {
                        origin: origin.to_string(),
                        device: d,
                        direction,
                    });
                }
            }
        }
        let name = file.name.unwrap_or_else(|| origin.to_string());
        let bad_name = |why| TopologyError::BadName {
            origin: origin.to_string(),
            name: name.clone(),
            why,
        };
        if name.trim().is_empty() {
            return Err(bad_name("is empty"));
        }
        if PRESETS.contains(&name.as_str()) {
            return Err(bad_name("is a preset's"));
        }
        let count = used.map_or(count, |u| u.min(count));
        let unused = |e: Endpoint| matches!(e, Endpoint::Device(d) if d >= count);
        links.retain(|l| !unused(l.from) && !unused(l.to));
        let mut t = Self::assemble(name, count, links);
        // Devices without a `switch` each get a switch of their own, numbered after the
        // declared ones so that none joins a declared switch by accident.
        let mut next = 0;
        for d in &file.device {
            if let Some(sw) = &d.switch {
                let value = *sw.get_ref();
                if value >= tessera_core::MAX_DEVICES as u64 {
                    return Err(TopologyError::BadSwitch {
                        at: at(sw.span()),
                        device: *d.id.get_ref(),
                        value,
                    });
                }
                if let Some(s) = t.switch_of.get_mut(*d.id.get_ref() as usize) {
                    *s = value as usize;
                }
                next = next.max(value as usize + 1);
            }
        }
        let mut ids: Vec<u64> = file.device.iter().map(|d| *d.id.get_ref()).collect();
        ids.sort_unstable();
        for id in ids {
            let d = file.device.iter().find(|d| *d.id.get_ref() == id);
            if d.is_some_and(|d| d.switch.is_none()) {
                if let Some(s) = t.switch_of.get_mut(id as usize) {
                    *s = next;
                }
                next += 1;
            }
        }
        if let Some(r) = &file.remote {
            t.remote_scaled = false;
            let m = &mut t.remote;
            let bandwidth = |v: &toml::Spanned<Number>, key| {
                let gb = v.get_ref().value();
                if bandwidth_ok(gb) {
                    Ok(gb * 1e9)
                } else {
                    Err(TopologyError::BadRemote {
                        at: at(v.span()),
                        key,
                        expected: "a number of GB/s from 1e-6 to 1e6",
                        value: gb,
                    })
                }
            };
            // A penalty is the fraction of bandwidth lost, as GPU-SM §4 states them ("8-10%
            // lower", ">20%", ">30%"): at least 0, below 1.
            let factor = |v: &toml::Spanned<Number>, key| {
                let p = v.get_ref().value();
                if p.is_finite() && (0.0..1.0).contains(&p) {
                    Ok(1.0 - p)
                } else {
                    Err(TopologyError::BadRemote {
                        at: at(v.span()),
                        key,
                        expected: "a fraction at least 0 and below 1",
                        value: p,
                    })
                }
            };
            if let Some(v) = &r.read_gb_per_s {
                m.read_bw = bandwidth(v, "read_gb_per_s")?;
            }
            if let Some(v) = &r.aggregate_gb_per_s {
                m.aggregate_bw = bandwidth(v, "aggregate_gb_per_s")?;
            }
            if let Some(v) = &r.write_penalty {
                m.write_factor = factor(v, "write_penalty")?;
            }
            if let Some(v) = &r.switch_read_penalty {
                m.switch_read_factor = factor(v, "switch_read_penalty")?;
            }
            if let Some(v) = &r.switch_write_penalty {
                m.switch_write_factor = factor(v, "switch_write_penalty")?;
            }
        }
        t.network = file
            .network
            .as_ref()
            .map(|n| network_of(n, &at))
            .transpose()?;
        Ok(t)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn devices(&self) -> usize {
        self.devices
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// `--topology NAME|FILE` for a run of `devices` devices: a preset by name, else a TOML
    /// file by path.
    pub fn load(spec: &str, devices: usize) -> Result<Self> {
        let Some((text, origin)) = topology_text(spec)? else {
            return Topology::preset(spec, devices);
        };
        let topo = Topology::from_toml_str(&text, &origin)?;
        topo.check_devices(devices)?;
        if devices < topo.devices {
            return Topology::from_toml_for(&text, &origin, Some(devices));
        }
        Ok(topo)
    }

    /// Fails unless devices `0..wanted` all exist here.
    pub fn check_devices(&self, wanted: usize) -> Result<()> {
        if wanted > self.devices {
            return Err(TopologyError::TooFewDevices {
                name: self.name.clone(),
                has: self.devices,
                wanted,
            });
        }
        Ok(())
    }

    /// The links a move from `from` to `to` crosses, by index into [`Topology::links`]: the
    /// direct link when there is one, else through host.
    pub fn route(&self, from: Endpoint, to: Endpoint) -> Result<Vec<usize>> {
        let no_route = || TopologyError::NoRoute {
            name: self.name.clone(),
            from,
            to,
        };
        let known = |e: Endpoint| match e {
            Endpoint::Device(d) => d < self.devices,
            Endpoint::Host => true,
        };
        if from == to || !known(from) || !known(to) {
            return Err(no_route());
        }
        if let Some(&i) = self.by_ends.get(&(from, to)) {
            return Ok(vec![i]);
        }
        let up = self.by_ends.get(&(from, Endpoint::Host));
        let down = self.by_ends.get(&(Endpoint::Host, to));
        match (up, down) {
            (Some(&a), Some(&b)) => Ok(vec![a, b]),
            _ => Err(no_route()),
        }
    }

    /// The links `t` crosses: [`Topology::route`], except that a move already written home
    /// ([`Transfer::homed`]) between devices with no link of their own is routed home →
    /// destination.
    pub fn transfer_route(&self, t: &Transfer) -> Result<Vec<usize>> {
        let direct = self.by_ends.contains_key(&(t.from, t.to));
        match (t.homed, t.from, t.to) {
            (true, Endpoint::Device(_), Endpoint::Device(_)) if !direct => {
                self.route(Endpoint::Host, t.to)
            }
            _ => self.route(t.from, t.to),
        }
    }

    /// Each link's busy time for these moves, indexed like [`Topology::links`].
    pub fn link_seconds(&self, transfers: &[Transfer]) -> Result<Vec<f64>> {
        let mut busy = vec![0.0; self.links.len()];
        for t in transfers.iter().filter(|t| t.pages > 0 || t.bytes > 0) {
            for i in self.transfer_route(t)? {
                busy[i] += self.links[i].seconds(t.pages, t.bytes);
            }
        }
        Ok(busy)
    }

    /// The modeled time of one pass: the slowest device's work (`device_seconds`, one entry
    /// per device, measured by the caller) and then the busiest link's time for the moves.
    pub fn pass_time(&self, device_seconds: &[f64], transfers: &[Transfer]) -> Result<PassTime> {
        let link_seconds = self.link_seconds(transfers)?;
        Ok(PassTime {
            device_seconds: device_seconds.iter().copied().fold(0.0, f64::max),
            transfer_seconds: link_seconds.iter().copied().fold(0.0, f64::max),
            manager_seconds: 0.0,
            link_seconds,
        })
    }

    /// The isolated-device model of one pass: the slowest device's work timed alone
    /// (`work`, one entry per device), plus the busiest link's time for the moves, plus the
    /// memory manager's time serving each device (`manager`, one entry per device), summed
    /// because one manager thread serves the batches one after another.
    pub fn isolated_pass_time(
        &self,
        work: &[f64],
        manager: &[f64],
        transfers: &[Transfer],
    ) -> Result<PassTime> {
        self.overlapped_pass_time(work, manager, transfers, &[])
    }

    /// [`Topology::isolated_pass_time`] where `during` of the `transfers` (a part of them, in
    /// the same terms) were made while the devices computed: the runtime copied staged pages
    /// during launches. Those moves overlap the work: the device part is the longer of the
    /// slowest device's work and the busiest link's time for `during`, and the transfer part
    /// is the busiest link's time for the rest. `link_seconds` stays every move's.
    pub fn overlapped_pass_time(
        &self,
        work: &[f64],
        manager: &[f64],
        transfers: &[Transfer],
        during: &[Transfer],
    ) -> Result<PassTime> {
        let mut p = self.pass_time(work, transfers)?;
        p.manager_seconds = manager.iter().sum();
        if during.iter().all(|t| t.pages == 0 && t.bytes == 0) {
            return Ok(p);
        }
        let beside = self.link_seconds(during)?;
        let rest: Vec<f64> = p
            .link_seconds
            .iter()
            .zip(&beside)
            .map(|(all, b)| (all - b).max(0.0))
            .collect();
        p.device_seconds = p
            .device_seconds
            .max(beside.iter().copied().fold(0.0, f64::max));
        p.transfer_seconds = rest.iter().copied().fold(0.0, f64::max);
        Ok(p)
    }
}

/// The bandwidths, in GB/s, a link may have (`bandwidth_ok`).
pub const MIN_GBPS: f64 = 1e-6;
pub const MAX_GBPS: f64 = 1e6;

/// A link's bandwidth in GB/s that the model can divide by and print: NaN, infinities, zero,
/// negatives, and values so small (a subnormal `1e-320`) or large that a frame's transfer time
/// overflows to infinity or prints as hundreds of digits are refused.
pub fn bandwidth_ok(gb: f64) -> bool {
    (MIN_GBPS..=MAX_GBPS).contains(&gb)
}

/// `[network]` as a [`Network`], its figures checked as a link's are.
fn network_of(n: &NetworkDecl, at: &dyn Fn(std::ops::Range<usize>) -> Location) -> Result<Network> {
    let gb = n.bandwidth_gb_per_s.get_ref().value();
    if !bandwidth_ok(gb) {
        return Err(TopologyError::BadBandwidth {
            at: at(n.bandwidth_gb_per_s.span()),
            value: gb,
        });
    }
    let us = n.latency_us.as_ref().map_or(0.0, |v| v.get_ref().value());
    if !latency_ok(us) {
        let span = n.latency_us.as_ref().map_or(0..0, |v| v.span());
        return Err(TopologyError::BadLatency {
            at: at(span),
            value: us,
        });
    }
    Ok(Network {
        name: n.name.clone().unwrap_or_else(|| "network".into()),
        bandwidth: gb * 1e9,
        latency: us * 1e-6,
    })
}

/// A latency in microseconds: from 0 to 1e9 (about 17 minutes), for the same reasons.
fn latency_ok(us: f64) -> bool {
    (0.0..=1e9).contains(&us)
}

/// 1-based line and column of byte `offset` in `text`.
fn location(text: &str, origin: &str, offset: usize) -> Location {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Location {
        origin: origin.to_string(),
        line,
        column,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: Option<String>,
    #[serde(default)]
    device: Vec<DeviceDecl>,
    #[serde(default)]
    link: Vec<LinkDecl>,
    remote: Option<RemoteDecl>,
    network: Option<NetworkDecl>,
}

/// `[network]`: the link kind between nodes ([`Network`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkDecl {
    name: Option<String>,
    bandwidth_gb_per_s: toml::Spanned<Number>,
    latency_us: Option<toml::Spanned<Number>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceDecl {
    id: toml::Spanned<u64>,
    /// The PCIe switch it sits behind (remote accesses between switches pay the crossing);
    /// its own switch when absent.
    switch: Option<toml::Spanned<u64>>,
}

/// `[remote]`: GPU-SM's remote access model (§4, Fig. 4); absent keys keep the model scaled
/// from the host links ([`RemoteModel::scaled_to`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoteDecl {
    read_gb_per_s: Option<toml::Spanned<Number>>,
    write_penalty: Option<toml::Spanned<Number>>,
    switch_read_penalty: Option<toml::Spanned<Number>>,
    switch_write_penalty: Option<toml::Spanned<Number>>,
    aggregate_gb_per_s: Option<toml::Spanned<Number>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkDecl {
    from: toml::Spanned<String>,
    to: toml::Spanned<String>,
    bandwidth_gb_per_s: toml::Spanned<Number>,
    latency_us: Option<toml::Spanned<Number>>,
    duplex: Option<bool>,
}

/// TOML keeps integers and floats apart; a bandwidth of `16` and one of `15.75` are both fine.
/// Anything else is "expected a number" (an untagged enum's error named the enum instead).
#[derive(Clone, Copy)]
struct Number(f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Number;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E>(self, v: i64) -> std::result::Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> std::result::Result<Number, E> {
                Ok(Number(v as f64))
            }
            fn visit_f64<E>(self, v: f64) -> std::result::Result<Number, E> {
                Ok(Number(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Number {
    fn value(self) -> f64 {
        self.0
    }
}

/// `--topology NAME|FILE`'s file text and the name its errors give it; `None` for a preset.
fn topology_text(spec: &str) -> Result<Option<(String, String)>> {
    if PRESETS.contains(&spec) {
        return Ok(None);
    }
    let path = std::path::Path::new(spec);
    if !path.exists() {
        // A bare word is most likely a misspelt preset; say so rather than "no such file".
        return Err(TopologyError::UnknownPreset {
            name: spec.to_string(),
        });
    }
    let text = read_topology(path).map_err(|message| TopologyError::Read {
        path: path.display().to_string(),
        message,
    })?;
    Ok(Some((text, path.display().to_string())))
}

/// A topology file's text, read to at most [`MAX_TOPOLOGY_BYTES`]: an endless file
/// (`/dev/zero`) is refused, not read until memory runs out.
fn read_topology(path: &std::path::Path) -> std::result::Result<String, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_TOPOLOGY_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_TOPOLOGY_BYTES {
        return Err(format!(
            "longer than {} MiB; a topology of 64 devices is a few kilobytes",
            MAX_TOPOLOGY_BYTES >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
}

/// The longest topology file read.
pub const MAX_TOPOLOGY_BYTES: u64 = 16 << 20;

#[cfg(test)]
mod tests {
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
    /// topology by it, and a file called "nvlink" read as the preset.
    #[test]
    fn a_file_needs_a_name_of_its_own() {
        let body = "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 16\n";
        for name in ["nvlink", "pcie3-x16", "", "  "] {
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
}

#[cfg(test)]
mod network_tests {
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
