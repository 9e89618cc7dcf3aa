//! Topology files (`--topology FILE`): TOML read, checked and built into a [`Topology`].

use std::collections::HashMap;

use serde::Deserialize;

use crate::{Endpoint, Link, Location, Network, Result, Topology, TopologyError, PRESETS};

impl Topology {
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
    pub(crate) fn from_toml_for(text: &str, origin: &str, used: Option<usize>) -> Result<Self> {
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
        // Printed on the terminal and in CSVs: an escape or a line break would rewrite either.
        if name.chars().any(char::is_control) {
            return Err(bad_name("holds a control character"));
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

    /// `--topology NAME|FILE` for a run of `devices` devices: a preset by name, else a TOML
    /// file by path.
    pub fn load(spec: &str, devices: usize) -> Result<Self> {
        let Some((text, origin)) = topology_text(spec)? else {
            return Topology::preset(spec, devices);
        };
        let topo = Topology::from_toml_str(&text, &origin)?;
        // Named by the file too: the name inside it may say nothing of where it is.
        topo.check_devices(devices).map_err(|e| match e {
            TopologyError::TooFewDevices { name, has, wanted } => TopologyError::TooFewDevices {
                name: format!("{name} (from {origin})"),
                has,
                wanted,
            },
            e => e,
        })?;
        if devices < topo.devices {
            return Topology::from_toml_for(&text, &origin, Some(devices));
        }
        Ok(topo)
    }
}

impl Network {
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
