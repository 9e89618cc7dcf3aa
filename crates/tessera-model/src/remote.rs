//! Remote access in place (GPU-SM §4): how fast a device reaches memory it does not hold,
//! and the modeled time of a pass with such accesses.

use crate::presets::pcie_x16;
use crate::{Endpoint, Result, Topology, TopologyError};

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

impl Topology {
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
}
