//! The built-in topologies (`--topology NAME`).

use crate::{
    Endpoint, Link, RemoteModel, Result, Topology, TopologyError, GPUSM_PCIE2, GPUSM_PCIE3,
    MODERN_LATENCY, NVLINK_BANDWIDTH, OOVR_GPM, PCIE1_LATENCY,
};

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

    pub(crate) fn assemble(name: String, devices: usize, links: Vec<Link>) -> Self {
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
}

/// Nominal per-direction data rate of a PCIe x16 link in bytes per second: lanes × transfer
/// rate × line-code efficiency / 8 bits. Gen 1 uses 8b/10b, gen 3 onwards 128b/130b.
pub(crate) fn pcie_x16(gen: u32) -> f64 {
    let (gt_per_s, code) = match gen {
        1 => (2.5e9, 8.0 / 10.0),
        3 => (8e9, 128.0 / 130.0),
        4 => (16e9, 128.0 / 130.0),
        _ => (32e9, 128.0 / 130.0),
    };
    16.0 * gt_per_s * code / 8.0
}
