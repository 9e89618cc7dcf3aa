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

mod file;
mod presets;
mod remote;
#[cfg(test)]
mod tests;

pub use file::{bandwidth_ok, MAX_GBPS, MAX_TOPOLOGY_BYTES, MIN_GBPS};
pub use remote::{PeerRemote, RemoteModel, RemotePassTime, RemoteUse, GPUSM_PCIE2, GPUSM_PCIE3};

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
    /// The network between nodes, when the topology names one (`[network]`).
    pub fn network(&self) -> Option<&Network> {
        self.network.as_ref()
    }

    /// The GPU module figures (local memory, ROP rate) of an `mcm-*` preset; `None` for
    /// topologies that do not model GPU modules.
    pub fn gpm(&self) -> Option<GpmModel> {
        self.gpm
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
