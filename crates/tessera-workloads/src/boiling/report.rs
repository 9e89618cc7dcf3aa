//! Boiling's run report: the counters, stage times and modeled time of a modeled run
//! ([`super::modeled::run`]). Every time at its top level and per device is measured wall time
//! (`time_kind`); the `modeled` section alone holds time modeled on a topology, and says so in
//! its own `time_kind`.

use serde::Serialize;
use tessera_model::Topology;
use tessera_runtime::modeled::{Model, Steady};
use tessera_runtime::{
    DeviceMemoryUse, HostReport, LinkCounters, RuntimeError, StageTimes, SystemConfig,
};

use super::modeled::{Run, Settings};

#[derive(Serialize, Default, Clone, Copy)]
pub struct PerFrame {
    pub pages: f64,
    pub bytes: f64,
}

impl PerFrame {
    fn of(c: LinkCounters, frames: u32) -> Self {
        PerFrame {
            pages: c.pages as f64 / frames as f64,
            bytes: c.bytes as f64 / frames as f64,
        }
    }
    fn add(&mut self, o: PerFrame) {
        self.pages += o.pages;
        self.bytes += o.bytes;
    }
}

#[derive(Serialize)]
pub struct DeviceReport {
    pub device: usize,
    pub page_requests_per_frame: f64,
    pub read_requests_per_frame: f64,
    pub write_requests_per_frame: f64,
    pub request_batches_per_frame: f64,
    /// Batches that waited on a memory lock, over the whole run.
    pub deferred_batches: u64,
    pub host_to_device_per_frame: PerFrame,
    pub device_to_host_per_frame: PerFrame,
    /// Every device → device move, through the host or not (on a shared wgpu device some of
    /// these are copies on the device, `device_to_device_peer_per_frame`).
    pub device_to_device_per_frame: PerFrame,
    /// Of those, the ones copied on the device without the host (docs/PROTOCOL.md, "Peer
    /// copies").
    pub device_to_device_peer_per_frame: PerFrame,
    /// At the end of the run.
    pub memory: DeviceMemoryUse,
    /// Seconds per stage, as the report's `stages` sums them.
    #[serde(rename = "stages")]
    pub stage_seconds: StageTimes,
    /// Device time per stage from timestamp queries; absent where the backend has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_stage_seconds: Option<StageTimes>,
    pub launches: u64,
    pub relaunched_invocations: u64,
    /// Two-pass request passes launched, and skipped because every page was resident or the
    /// kernel's footprint named the pages (`--footprint-ahead on`).
    pub request_passes: u64,
    pub request_passes_skipped: u64,
    /// Bands launched with no request, the device holding every page they name (relaunch),
    /// and two-pass parts run in place for that reason.
    pub bands_launched_held: u64,
    /// The host's work for this device per frame, counted (`HostCounters`).
    pub host: HostReport,
    /// Pages that left this device for the host per frame, by why they had to.
    pub write_backs_per_frame: WriteBacks,
    /// Eviction over the measured frames (all zero while everything fits the budget).
    pub eviction: EvictionReport,
    /// Remote accesses (`AccessMode::Remote`) by location, the locations reached only.
    pub remote: Vec<RemoteReport>,
}

/// Pages a device's copy gave up to the host per frame, by cause. Under owned pages
/// (`--coherence owned`) a page another device reads is served from its owner and does not go
/// home, so `coherence` is 0; `free` and `node` are 0 under both rules, counted so that a
/// change that made them nonzero shows.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct WriteBacks {
    /// Written home because another device read the page (`--coherence write-home`).
    pub coherence: f64,
    /// Written home because the owner's last copy was evicted.
    pub eviction: f64,
    /// Read by the host from the owner's copy (an object read: the frame, the GIF, a
    /// checksum), counted on the node whose field the run shows, so alike in either model;
    /// not written home (`device_to_host` leaves them out).
    pub host_read: f64,
    /// Freeing an object never writes its pages home: the data dies with it.
    pub free: f64,
    /// Across nodes an owned page is served from its owner like any other (the protocol runs
    /// over every device of the cluster), so no node boundary writes a page home.
    pub node: f64,
}

impl WriteBacks {
    /// `host_reads`: the pages read for the run's own output ([`Run::shown_reads`]), the
    /// same in either model.
    fn of(t: &tessera_runtime::DeviceTraffic, host_reads: u64, frames: u32) -> Self {
        let f = frames.max(1) as f64;
        WriteBacks {
            coherence: t.coherence_write_backs as f64 / f,
            eviction: t.eviction_write_backs as f64 / f,
            host_read: host_reads as f64 / f,
            free: 0.0,
            node: 0.0,
        }
    }
    fn add(&mut self, o: &WriteBacks) {
        self.coherence += o.coherence;
        self.eviction += o.eviction;
        self.host_read += o.host_read;
        self.free += o.free;
        self.node += o.node;
    }
}

/// Remote accesses between one accessor and one location, over the measured frames.
#[derive(Clone, Serialize)]
pub struct RemoteReport {
    /// Where the pages live: `host` or `device<N>`.
    pub location: String,
    #[serde(flatten)]
    pub link: tessera_core::RemoteLink,
}

impl RemoteReport {
    pub fn of(t: &tessera_runtime::DeviceTraffic) -> Vec<RemoteReport> {
        t.remote_links()
            .into_iter()
            .map(|(l, link)| RemoteReport {
                location: l.to_string(),
                link,
            })
            .collect()
    }
}

/// What the budget's page cache did on one device, over the measured frames.
#[derive(Serialize, Clone, Copy, Default)]
pub struct EvictionReport {
    pub evictions: u64,
    /// Modified pages written home before they were evicted.
    pub write_backs: u64,
    /// Pages requested again after the device evicted them.
    pub refaults: u64,
    /// Pages refaulted 3 times within 16 batches of their eviction.
    pub thrashing_pages: u64,
    /// Times a thrashing page was pinned in response (`--thrashing pin`); a page may be
    /// pinned again after its pin ran out.
    pub thrash_pins: u64,
    /// Waves split because their pages did not fit the budget at once.
    pub wave_splits: u64,
    /// Pages fetched beyond those asked for (`--prefetch tree`).
    pub prefetched: u64,
    /// Of those, pages a launch was seen using while they were resident.
    pub prefetch_hits: u64,
    /// Staged batches granted (`--staging on`): a next band's pages fetched while the
    /// current band ran.
    pub staged_batches: u64,
    /// Pages in those batches.
    pub staged_pages: u64,
    /// Staged batches refused, changing nothing.
    pub stage_refusals: u64,
    /// Of the staged pages, those copied from home into the device while it ran a launch
    /// (the CPU backend; on wgpu they are copied after it).
    pub copied_during_launch: u64,
}

#[derive(Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub workload: &'static str,
    pub backend: &'static str,
    /// The devices as the backend describes them: `cpu (2 threads)`, or the wgpu adapter's
    /// name.
    pub adapter: String,
    pub devices: usize,
    pub size: u32,
    pub page_size: u32,
    pub procedure: tessera_runtime::Procedure,
    #[serde(rename = "split")]
    pub partition: tessera_runtime::Partition,
    pub frames: u32,
    /// Frames run before the measured ones; nothing in this report counts them.
    pub warmup_frames: u32,
    /// Frames of the field: the warm-up and `frames`, in either model (the isolated model's
    /// second node runs the same frames beside them). The field checksum is after all.
    pub simulated_frames: u32,
    pub time_kind: &'static str,
    /// Measured wall time of `frames` frames with the devices running together.
    pub wall_seconds: f64,
    pub frames_per_second_measured: f64,
    /// Measured wall time of the frames run one device at a time (isolated model only): the
    /// devices' turns one after another, not a multi-device time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_seconds_devices_one_at_a_time: Option<f64>,
    /// The topology the modeled time is for.
    pub topology: String,
    /// Same as `modeled.frames_per_second`, beside the measured one.
    pub frames_per_second_modeled: f64,
    pub modeled: ModeledReport,
    pub page_requests_per_frame: f64,
    pub host_to_device_per_frame: PerFrame,
    pub device_to_host_per_frame: PerFrame,
    /// Every device → device move (see the per-device field of the same name).
    pub device_to_device_per_frame: PerFrame,
    /// Of those, the ones copied on the device without the host.
    pub device_to_device_peer_per_frame: PerFrame,
    /// Texels in the pages moved to devices (from home or another device): the paper's
    /// Figure 10.
    pub texels_to_devices_per_frame: f64,
    /// Texels in the pages written back to home.
    pub texels_to_host_per_frame: f64,
    /// Memory over all devices at the end of the run: the paper's Figure 8.
    pub memory: MemorySummary,
    /// Summed over devices, seconds.
    #[serde(rename = "stages")]
    pub stage_seconds: StageTimes,
    /// Share of the summed stage time, percent, as in the paper's Table 3.
    pub stage_percent: StageTimes,
    /// Summed over devices, seconds of device time per stage measured by timestamp queries
    /// (kernels, request compaction, merge); part of `stage_seconds`. Absent on the CPU
    /// backend and on adapters without timestamp queries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_stage_seconds: Option<StageTimes>,
    pub per_device: Vec<DeviceReport>,
    /// The field's checksum after the last frame (`checksum_kind`: "field").
    #[serde(rename = "checksum")]
    pub field_checksum: String,
    pub checksum_kind: &'static str,
    /// `Some(true)` once `--verify` found the field equal to the unpaged reference's (a
    /// difference fails the run, which then writes no report); `None` where it was not asked.
    pub verified: Option<bool>,
    /// Per device budget, bytes: the page cache's size.
    pub budget_bytes: u64,
    pub policy: tessera_runtime::Policy,
    pub thrashing: tessera_runtime::Thrashing,
    pub prefetch: tessera_runtime::Prefetch,
    /// Asynchronous staging (`--staging`).
    pub staging: bool,
    /// The relaunch procedure asks for footprint pages first (`--footprint-ahead`).
    pub footprint_ahead: bool,
    /// Deferred execution (one device, or devices sharing one queue: wgpu on one GPU).
    pub deferred: bool,
    /// Two-pass runs held parts in place (`--held-in-place`).
    pub held_in_place: bool,
    /// Passes are cut on page boundaries where the bands stay near even (`--split-on-pages`).
    pub split_on_pages: bool,
    /// What a read of a modified page does: `owned` or `write-home` (`--coherence`).
    pub coherence: String,
    /// Summed over devices.
    pub write_backs_per_frame: WriteBacks,
    /// Summed over devices.
    pub eviction: EvictionReport,
}

/// Memory over all devices, each page counted once.
#[derive(Serialize, Clone, Copy, Default)]
pub struct MemorySummary {
    /// Pages held by exactly one device.
    pub unique_bytes: u64,
    /// Pages held by two or more devices, counted once.
    pub shared_bytes: u64,
    /// Pages held by any device, counted once: unique + shared.
    pub total_bytes: u64,
}

/// Time modeled on a topology (docs/EVALUATION.md): per pass, the slowest device's measured
/// work, then the page moves charged to the links, the busiest link deciding, then (isolated
/// model) the memory manager's time summed over the devices it served.
#[derive(Serialize)]
pub struct ModeledReport {
    pub time_kind: &'static str,
    /// `isolated` (each device's work timed alone) or `concurrent` (timed while all devices
    /// shared the machine).
    pub model: Model,
    pub topology: String,
    pub seconds: f64,
    pub frames_per_second: f64,
    /// Of `seconds`: the slowest device's work in each pass, measured on this machine.
    pub device_seconds_measured: f64,
    /// Of `seconds`: the busiest link's time in each pass, modeled.
    pub transfer_seconds_modeled: f64,
    /// Of `seconds`: the memory manager's time serving the devices' batches, measured with
    /// each device alone and summed over devices (zero in the concurrent model).
    pub manager_seconds_measured: f64,
    /// The page copies made during the devices' waits for the manager, timed and left out of
    /// `manager_seconds_measured`: the links charge those moves (isolated model only).
    pub manager_copy_seconds_left_out: f64,
    /// Per device, its own work summed over the modeled frames (measured; alone in the
    /// isolated model).
    pub work_seconds_per_device: Vec<f64>,
    /// Per device, the manager's time serving it over the modeled frames (measured): in the
    /// concurrent model its waits for the manager, which that model charges nowhere.
    pub manager_seconds_per_device: Vec<f64>,
    /// Per device, its work in the `frames` frames run with all devices together (measured):
    /// beside `work_seconds_per_device`, how much sharing the machine slowed each device.
    pub concurrent_work_seconds_per_device: Vec<f64>,
    /// One frame in the steady state (docs/EVALUATION.md, "The steady-state estimate"): per
    /// pass, the slowest device's median work over the frames, the links' median and the
    /// manager's medians. Beside `seconds ÷ frames`, which takes each frame's slowest device
    /// as measured.
    pub steady_per_frame: Option<Steady>,
    pub links: Vec<LinkReport>,
}

#[derive(Serialize)]
pub struct LinkReport {
    pub link: String,
    pub gb_per_s: f64,
    pub latency_us: f64,
    /// Modeled busy time over the measured frames.
    pub busy_seconds: f64,
}

impl Report {
    /// The report of `run`, made with `s` on nodes configured as `cfg` (the options every
    /// node shares: budget, policy, …) on the `backend` (`cpu` or `wgpu`), of a `size`²
    /// field whose checksum is `field_checksum`.
    pub fn collect(
        run: &Run,
        s: &Settings,
        size: u32,
        backend: &'static str,
        cfg: &SystemConfig,
        topo: &Topology,
        field_checksum: String,
    ) -> Result<Self, RuntimeError> {
        let o = s;
        let sys = &run.modeled_sim().sys;
        let (wall, passes) = (run.wall, &run.per_device);
        let traffic: Vec<_> = sys
            .mm
            .traffic()?
            .iter()
            .zip(&run.baseline)
            .map(|(a, b)| a.since(b))
            .collect();
        let shown_reads = run.shown_reads()?;
        let (memory, directory) = sys.mm.memory()?;
        let mut summary = MemorySummary::default();
        for t in &run.textures {
            let bytes = t.desc.page_bytes();
            for p in t.pages.clone() {
                match directory.get(p as usize).map_or(0, |e| e.copies.len()) {
                    0 => {}
                    1 => summary.unique_bytes += bytes,
                    _ => summary.shared_bytes += bytes,
                }
            }
        }
        summary.total_bytes = summary.unique_bytes + summary.shared_bytes;
        let f = o.frames;
        let per_frame = |n: u64| n as f64 / f as f64;
        let per_device: Vec<DeviceReport> = (0..sys.devices())
            .map(|d| {
                let t = &traffic[d];
                DeviceReport {
                    device: d,
                    page_requests_per_frame: per_frame(t.page_requests),
                    read_requests_per_frame: per_frame(t.read_requests),
                    write_requests_per_frame: per_frame(t.write_requests),
                    request_batches_per_frame: per_frame(t.batches),
                    deferred_batches: t.deferred,
                    host_to_device_per_frame: PerFrame::of(t.host_to_device, f),
                    device_to_host_per_frame: PerFrame::of(t.device_to_host, f),
                    device_to_device_per_frame: PerFrame::of(t.device_to_device, f),
                    device_to_device_peer_per_frame: PerFrame::of(t.device_to_device_peer, f),
                    memory: memory[d],
                    stage_seconds: passes[d].stages,
                    gpu_stage_seconds: passes[d].gpu_stages,
                    launches: passes[d].launches,
                    relaunched_invocations: passes[d].relaunched,
                    request_passes: passes[d].request_passes,
                    request_passes_skipped: passes[d].request_passes_skipped,
                    bands_launched_held: passes[d].held_bands,
                    host: HostReport::of(&run.host[d], f),
                    write_backs_per_frame: WriteBacks::of(t, shown_reads[d], f),
                    eviction: EvictionReport {
                        evictions: t.evictions,
                        write_backs: t.eviction_write_backs,
                        refaults: t.refaults,
                        thrashing_pages: t.thrashing_pages,
                        thrash_pins: t.thrash_pins,
                        wave_splits: passes[d].wave_splits,
                        prefetched: t.prefetched,
                        prefetch_hits: t.prefetch_hits,
                        staged_batches: t.staged_batches,
                        staged_pages: t.staged_pages,
                        stage_refusals: t.stage_refusals,
                        copied_during_launch: t.host_to_device_during_launch.pages,
                    },
                    remote: RemoteReport::of(t),
                }
            })
            .collect();
        let mut stages = StageTimes::default();
        let (mut h2d, mut d2h, mut d2d, mut d2d_gpu) = (
            PerFrame::default(),
            PerFrame::default(),
            PerFrame::default(),
            PerFrame::default(),
        );
        let mut gpu_stages: Option<StageTimes> = None;
        let mut write_backs = WriteBacks::default();
        for d in &per_device {
            write_backs.add(&d.write_backs_per_frame);
            stages.add(&d.stage_seconds);
            if let Some(g) = &d.gpu_stage_seconds {
                gpu_stages.get_or_insert_with(Default::default).add(g);
            }
            h2d.add(d.host_to_device_per_frame);
            d2h.add(d.device_to_host_per_frame);
            d2d.add(d.device_to_device_per_frame);
            d2d_gpu.add(d.device_to_device_peer_per_frame);
        }
        let total = stages.total().max(f64::MIN_POSITIVE);
        let pct = |s: f64| 100.0 * s / total;
        let texels_per_page = (o.page as f64) * (o.page as f64);
        let m = &run.modeled;
        let modeled = ModeledReport {
            time_kind: "modeled",
            model: o.model,
            topology: topo.name().to_string(),
            seconds: m.seconds(),
            frames_per_second: f as f64 / m.seconds().max(f64::MIN_POSITIVE),
            device_seconds_measured: m.device_seconds,
            transfer_seconds_modeled: m.transfer_seconds,
            manager_seconds_measured: m.manager_seconds,
            manager_copy_seconds_left_out: m.copy_seconds,
            work_seconds_per_device: m.work_per_device.clone(),
            manager_seconds_per_device: m.manager_per_device.clone(),
            concurrent_work_seconds_per_device: run.concurrent_work_per_device.clone(),
            steady_per_frame: m.steady(),
            links: topo
                .links()
                .iter()
                .zip(&m.link_seconds)
                .map(|(l, s)| LinkReport {
                    link: l.to_string(),
                    gb_per_s: l.bandwidth / 1e9,
                    latency_us: l.latency * 1e6,
                    busy_seconds: *s,
                })
                .collect(),
        };
        Ok(Report {
            schema_version: crate::SCHEMA_VERSION,
            workload: "boiling",
            backend,
            // The adapter's own name on wgpu, as every other workload's report gives it.
            adapter: run
                .adapter_name
                .clone()
                .unwrap_or_else(|| sys.backend().to_string()),
            devices: sys.devices(),
            size,
            page_size: o.page,
            procedure: o.procedure,
            partition: o.partition,
            frames: f,
            warmup_frames: o.warmup,
            simulated_frames: o.warmup + o.frames,
            time_kind: "measured",
            wall_seconds: wall,
            frames_per_second_measured: f as f64 / wall,
            wall_seconds_devices_one_at_a_time: run.wall_isolated,
            topology: topo.name().to_string(),
            frames_per_second_modeled: modeled.frames_per_second,
            modeled,
            page_requests_per_frame: per_device.iter().map(|d| d.page_requests_per_frame).sum(),
            host_to_device_per_frame: h2d,
            device_to_host_per_frame: d2h,
            device_to_device_per_frame: d2d,
            device_to_device_peer_per_frame: d2d_gpu,
            texels_to_devices_per_frame: (h2d.pages + d2d.pages) * texels_per_page,
            texels_to_host_per_frame: d2h.pages * texels_per_page,
            memory: summary,
            stage_percent: StageTimes {
                request_pass: pct(stages.request_pass),
                uniquify: pct(stages.uniquify),
                read_requests: pct(stages.read_requests),
                compute: pct(stages.compute),
                write_requests: pct(stages.write_requests),
                page_writes: pct(stages.page_writes),
                display: pct(stages.display),
            },
            stage_seconds: stages,
            gpu_stage_seconds: gpu_stages,
            eviction: per_device.iter().fold(EvictionReport::default(), |a, d| {
                let e = d.eviction;
                EvictionReport {
                    evictions: a.evictions + e.evictions,
                    write_backs: a.write_backs + e.write_backs,
                    refaults: a.refaults + e.refaults,
                    thrashing_pages: a.thrashing_pages + e.thrashing_pages,
                    thrash_pins: a.thrash_pins + e.thrash_pins,
                    wave_splits: a.wave_splits + e.wave_splits,
                    prefetched: a.prefetched + e.prefetched,
                    prefetch_hits: a.prefetch_hits + e.prefetch_hits,
                    staged_batches: a.staged_batches + e.staged_batches,
                    staged_pages: a.staged_pages + e.staged_pages,
                    stage_refusals: a.stage_refusals + e.stage_refusals,
                    copied_during_launch: a.copied_during_launch + e.copied_during_launch,
                }
            }),
            per_device,
            field_checksum,
            checksum_kind: "field",
            verified: None,
            budget_bytes: cfg.budget_bytes,
            policy: cfg.policy,
            thrashing: cfg.thrashing,
            prefetch: cfg.prefetch,
            staging: cfg.staging,
            footprint_ahead: cfg.footprint_ahead,
            deferred: cfg.deferred,
            held_in_place: cfg.held_in_place,
            split_on_pages: cfg.split_on_pages,
            coherence: cfg.coherence.to_string(),
            write_backs_per_frame: write_backs,
        })
    }

    /// What ran the measured frames, for plot legends: `cpu`, or `wgpu: <adapter name>`.
    pub fn ran_on(&self) -> String {
        match self.backend {
            "wgpu" => format!("wgpu: {}", self.adapter),
            other => other.to_string(),
        }
    }
}
