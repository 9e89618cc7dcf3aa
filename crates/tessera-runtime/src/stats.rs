//! Counters every run keeps: requests, pages and bytes per link kind, memory per device.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use serde::{Deserialize, Serialize};
use tessera_core::{Location, RemoteLink};

/// Pages and bytes that crossed one kind of link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LinkCounters {
    pub pages: u64,
    pub bytes: u64,
}

impl LinkCounters {
    pub fn add(&mut self, bytes: u64) {
        self.pages += 1;
        self.bytes += bytes;
    }
}

/// The host's work for one device, counted rather than timed: what the steady state ("no
/// host work when nothing faults", docs/PROTOCOL.md) is checked by. Read at any time
/// without disturbing the device; subtract two readings for an interval.
// Deserialize: a cluster's nodes send theirs to each other for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostCounters {
    /// Work handed to the device: queue submissions on a GPU backend; on the CPU backend,
    /// jobs queued on its worker (the CPU device's queue).
    pub submissions: u64,
    /// Times a driver or the memory manager waited for the device's worker to answer a job
    /// (a launch's outcome, a page move's acknowledgement): the host blocked on the device.
    pub blocking_waits: u64,
    /// Inside a GPU backend's jobs: waits for the GPU to drain its queue (a poll, a mapped
    /// read-back). Zero on the CPU backend, whose jobs run on the worker itself.
    pub device_waits: u64,
    /// Bytes copied from device memory back to the host (GPU backends).
    pub bytes_read_back: u64,
    /// Messages the device's driver sent the memory manager (requests, stages, releases,
    /// residency questions, remote counts, evictions).
    pub manager_messages: u64,
}

impl HostCounters {
    pub fn add(&mut self, o: &HostCounters) {
        self.submissions += o.submissions;
        self.blocking_waits += o.blocking_waits;
        self.device_waits += o.device_waits;
        self.bytes_read_back += o.bytes_read_back;
        self.manager_messages += o.manager_messages;
    }
    /// The counts since `before`.
    pub fn since(&self, before: &HostCounters) -> HostCounters {
        HostCounters {
            submissions: self.submissions.saturating_sub(before.submissions),
            blocking_waits: self.blocking_waits.saturating_sub(before.blocking_waits),
            device_waits: self.device_waits.saturating_sub(before.device_waits),
            bytes_read_back: self.bytes_read_back.saturating_sub(before.bytes_read_back),
            manager_messages: self
                .manager_messages
                .saturating_sub(before.manager_messages),
        }
    }
}

/// The host's work for one device, per frame of a run: what every report's `per_device[].host`
/// holds, so that "no host work when nothing faults" can be read off any workload's run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HostReport {
    /// Work handed to the device: queue submissions (wgpu), jobs on its worker (CPU).
    pub submissions_per_frame: f64,
    /// Times a driver or the memory manager blocked on the device's answer.
    pub blocking_waits_per_frame: f64,
    /// Inside the wgpu backend's jobs: waits for the GPU to drain (0 on the CPU backend).
    pub device_waits_per_frame: f64,
    pub bytes_read_back_per_frame: f64,
    /// Messages the device's driver sent the memory manager.
    pub manager_messages_per_frame: f64,
}

impl HostReport {
    /// `h`, counted over `frames` frames, per frame.
    pub fn of(h: &HostCounters, frames: u32) -> Self {
        let f = frames.max(1) as f64;
        HostReport {
            submissions_per_frame: h.submissions as f64 / f,
            blocking_waits_per_frame: h.blocking_waits as f64 / f,
            device_waits_per_frame: h.device_waits as f64 / f,
            bytes_read_back_per_frame: h.bytes_read_back as f64 / f,
            manager_messages_per_frame: h.manager_messages as f64 / f,
        }
    }
}

/// A backend's own host counters, kept by the device and read by anyone (atomics: reading
/// them is no job on the device, so it changes no count).
#[derive(Debug, Default)]
pub struct BackendCounters {
    pub submissions: AtomicU64,
    pub device_waits: AtomicU64,
    pub bytes_read_back: AtomicU64,
}

impl BackendCounters {
    pub fn submitted(&self) {
        self.submissions.fetch_add(1, Relaxed);
    }
    pub fn waited(&self) {
        self.device_waits.fetch_add(1, Relaxed);
    }
    pub fn read_back(&self, bytes: u64) {
        self.bytes_read_back.fetch_add(bytes, Relaxed);
    }
}

/// Traffic the memory manager caused for one device (as requester or as data source).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceTraffic {
    /// Request batches the device sent.
    pub batches: u64,
    /// Page requests in them (each batch is uniquified, so a page counts once per batch).
    pub page_requests: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    /// Requests that waited on a memory lock (paper 3.8).
    pub deferred: u64,
    /// Home → this device.
    pub host_to_device: LinkCounters,
    /// Of `host_to_device`, the staged pages the memory manager copied into the device's
    /// slots while the device ran a launch (`ManagerHandle::stage_around`): transfers that
    /// overlapped compute.
    pub host_to_device_during_launch: LinkCounters,
    /// This device → home (write-backs).
    pub device_to_host: LinkCounters,
    /// Another device → this device (all sources together).
    pub device_to_device: LinkCounters,
    /// `device_to_device` by source: entry `s` is device `s` → this device. A topology with
    /// direct links charges each move to the link it crosses, so the source must be known;
    /// shorter than the device count where the later sources sent nothing.
    pub device_to_device_from: Vec<LinkCounters>,
    /// Of `device_to_device_from`, by source, the moves whose source wrote the same page home
    /// for the same grant (the write-home rule's reads: `WriteBack`, then `Copy`). The bytes
    /// reach home once for both, so where no link joins the two devices a topology charges
    /// the move home → this device alone, not the source's host link a second time.
    pub device_to_device_homed_from: Vec<LinkCounters>,
    /// Of `device_to_device`, the pages copied straight from the source's memory, with no
    /// host buffer between (devices of one peer group, `Device::peer_group`: the wgpu
    /// devices sharing one wgpu device, on the device; the CPU devices of a process, one
    /// copy between their memories).
    pub device_to_device_peer: LinkCounters,
    /// Copies of this device's that were invalidated.
    pub invalidations: u64,
    /// Pages this device gave up to make room (LRU, clock, FIFO or random victims).
    pub evictions: u64,
    /// Of those, modified pages written home first (also counted in `device_to_host`).
    pub eviction_write_backs: u64,
    /// Pages this device wrote home because another device read them: the journal paper's
    /// write-home rule (`Coherence::WriteHome`); never under owned pages, which serve the
    /// reader from the owner and leave home stale. Also counted in `device_to_host`.
    pub coherence_write_backs: u64,
    /// Pages the host read from this device's copy because the device owned them (an object
    /// read: a frame, a GIF, a checksum). Read into the host's result, not written home, and
    /// not counted in `device_to_host`.
    pub host_reads: u64,
    /// Pages requested again after this device evicted them.
    pub refaults: u64,
    /// Distinct pages seen thrashing: refaulted `THRASH_EVENTS` times, each within
    /// `THRASH_WINDOW` batches of its eviction.
    pub thrashing_pages: u64,
    /// Times a thrashing page was pinned in response (spared by eviction for a while); a page
    /// whose pin ran out and that thrashed again is pinned again.
    pub thrash_pins: u64,
    /// Pages fetched beyond those asked for (`Prefetch::Tree`); also counted in the links.
    pub prefetched: u64,
    /// Of those, pages a launch was seen touching (its time stamp newer than at the fetch)
    /// while still resident.
    pub prefetch_hits: u64,
    /// Staged batches granted (`SystemConfig::staging`): pages of a next band fetched while
    /// the current one ran. Not counted in `batches`.
    pub staged_batches: u64,
    /// Pages in those batches (the ones moved are also counted in the links).
    pub staged_pages: u64,
    /// Staged batches refused, changing nothing (another device's lock in the way, or no
    /// room beside the pages the running band holds).
    pub stage_refusals: u64,
    /// Remote accesses (`AccessMode::Remote`) this device made to pages located in host
    /// memory, in place, over its host link.
    pub remote_host: RemoteLink,
    /// Remote accesses to pages located on other devices: entry `s` is this device ↔ device
    /// `s`'s memory; shorter than the device count where the later ones saw none.
    pub remote_device: Vec<RemoteLink>,
    /// Host time, in nanoseconds, that the page copies made for this device's batches and
    /// stages took (slot reads and writes, copies between devices' memories, home's pages
    /// written; not a stage's copies made beside the launch, which no wait contains): the
    /// part of the device's wait for the memory manager that moves bytes,
    /// which the isolated-device model charges to the links instead (`crate::modeled`).
    pub copy_nanos: u64,
}

impl LinkCounters {
    pub fn since(self, before: LinkCounters) -> LinkCounters {
        LinkCounters {
            pages: self.pages.saturating_sub(before.pages),
            bytes: self.bytes.saturating_sub(before.bytes),
        }
    }
}

impl DeviceTraffic {
    /// What happened after `before` was taken (counters only grow).
    pub fn since(&self, before: &DeviceTraffic) -> DeviceTraffic {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        DeviceTraffic {
            batches: d(self.batches, before.batches),
            page_requests: d(self.page_requests, before.page_requests),
            read_requests: d(self.read_requests, before.read_requests),
            write_requests: d(self.write_requests, before.write_requests),
            deferred: d(self.deferred, before.deferred),
            host_to_device: self.host_to_device.since(before.host_to_device),
            host_to_device_during_launch: self
                .host_to_device_during_launch
                .since(before.host_to_device_during_launch),
            device_to_host: self.device_to_host.since(before.device_to_host),
            device_to_device: self.device_to_device.since(before.device_to_device),
            device_to_device_from: self
                .device_to_device_from
                .iter()
                .enumerate()
                .map(|(s, &c)| {
                    c.since(
                        before
                            .device_to_device_from
                            .get(s)
                            .copied()
                            .unwrap_or_default(),
                    )
                })
                .collect(),
            device_to_device_homed_from: self
                .device_to_device_homed_from
                .iter()
                .enumerate()
                .map(|(s, &c)| {
                    c.since(
                        before
                            .device_to_device_homed_from
                            .get(s)
                            .copied()
                            .unwrap_or_default(),
                    )
                })
                .collect(),
            device_to_device_peer: self
                .device_to_device_peer
                .since(before.device_to_device_peer),
            invalidations: d(self.invalidations, before.invalidations),
            evictions: d(self.evictions, before.evictions),
            eviction_write_backs: d(self.eviction_write_backs, before.eviction_write_backs),
            coherence_write_backs: d(self.coherence_write_backs, before.coherence_write_backs),
            host_reads: d(self.host_reads, before.host_reads),
            refaults: d(self.refaults, before.refaults),
            thrashing_pages: d(self.thrashing_pages, before.thrashing_pages),
            thrash_pins: d(self.thrash_pins, before.thrash_pins),
            prefetched: d(self.prefetched, before.prefetched),
            prefetch_hits: d(self.prefetch_hits, before.prefetch_hits),
            staged_batches: d(self.staged_batches, before.staged_batches),
            staged_pages: d(self.staged_pages, before.staged_pages),
            stage_refusals: d(self.stage_refusals, before.stage_refusals),
            remote_host: self.remote_host.since(&before.remote_host),
            remote_device: self
                .remote_device
                .iter()
                .enumerate()
                .map(|(s, l)| l.since(&before.remote_device.get(s).copied().unwrap_or_default()))
                .collect(),
            copy_nanos: d(self.copy_nanos, before.copy_nanos),
        }
    }
}

impl DeviceTraffic {
    /// Adds remote traffic between this device and `location`.
    pub fn add_remote(&mut self, location: Location, link: &RemoteLink) {
        match location {
            Location::Host => self.remote_host.add(link),
            Location::Device(s) => {
                let s = s as usize;
                if self.remote_device.len() <= s {
                    self.remote_device.resize(s + 1, RemoteLink::default());
                }
                self.remote_device[s].add(link);
            }
        }
    }

    /// This device's remote traffic per location, only the locations it reached.
    pub fn remote_links(&self) -> Vec<(Location, RemoteLink)> {
        std::iter::once((Location::Host, self.remote_host))
            .chain(
                self.remote_device
                    .iter()
                    .enumerate()
                    .map(|(s, l)| (Location::Device(s as u8), *l)),
            )
            .filter(|(_, l)| !l.is_empty())
            .collect()
    }

    /// This device's remote traffic as the topology prices it
    /// (`Topology::remote_pass_time`), `accessor` being this device's index.
    pub fn remote_uses(&self, accessor: usize) -> Vec<tessera_model::RemoteUse> {
        use tessera_model::{Endpoint, RemoteUse};
        self.remote_links()
            .into_iter()
            .map(|(l, link)| RemoteUse {
                accessor,
                location: match l {
                    Location::Host => Endpoint::Host,
                    Location::Device(d) => Endpoint::Device(d as usize),
                },
                link,
            })
            .collect()
    }

    /// All remote traffic of this device, whatever the location.
    pub fn remote_total(&self) -> RemoteLink {
        let mut t = self.remote_host;
        for l in &self.remote_device {
            t.add(l);
        }
        t
    }

    /// Counts one page of `bytes` moved from device `source` to this device.
    pub fn add_from_device(&mut self, source: usize, bytes: u64) {
        self.device_to_device.add(bytes);
        if self.device_to_device_from.len() <= source {
            self.device_to_device_from
                .resize(source + 1, LinkCounters::default());
        }
        self.device_to_device_from[source].add(bytes);
    }

    /// [`DeviceTraffic::add_from_device`] for a move whose source wrote the page home for the
    /// same grant (`device_to_device_homed_from`).
    pub fn add_from_device_homed(&mut self, source: usize, bytes: u64) {
        self.add_from_device(source, bytes);
        if self.device_to_device_homed_from.len() <= source {
            self.device_to_device_homed_from
                .resize(source + 1, LinkCounters::default());
        }
        self.device_to_device_homed_from[source].add(bytes);
    }
}

/// Memory one device holds, split into pages only it holds and pages other devices hold too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceMemoryUse {
    pub unique_pages: u64,
    pub unique_bytes: u64,
    pub shared_pages: u64,
    pub shared_bytes: u64,
    /// Bytes reserved in physical memories (whole memories, as a GPU allocates them).
    pub reserved_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_moves_are_counted_by_source_and_in_all() {
        let mut t = DeviceTraffic::default();
        t.add_from_device(2, 100);
        let before = t.clone();
        t.add_from_device(0, 10);
        t.add_from_device(2, 100);
        assert_eq!(
            t.device_to_device,
            LinkCounters {
                pages: 3,
                bytes: 210
            }
        );
        let d = t.since(&before);
        assert_eq!(
            d.device_to_device,
            LinkCounters {
                pages: 2,
                bytes: 110
            }
        );
        assert_eq!(
            d.device_to_device_from,
            vec![
                LinkCounters {
                    pages: 1,
                    bytes: 10
                },
                LinkCounters::default(),
                LinkCounters {
                    pages: 1,
                    bytes: 100
                },
            ]
        );
    }
}
