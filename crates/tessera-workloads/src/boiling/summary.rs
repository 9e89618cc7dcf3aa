//! The boiling report as text: what `tessera run boiling` prints.

use tessera_runtime::StageTimes;

use super::report::{RemoteReport, Report};

/// Remote traffic per (accessor, location) pair, bytes and batch/spread, when there is any,
/// as lines of text (any workload's report may show it for its devices' `DeviceTraffic`).
pub fn remote_table(per_device: &[Vec<RemoteReport>]) -> String {
    let mut s = String::new();
    if per_device.iter().all(Vec::is_empty) {
        return s;
    }
    ln!(
        s,
        "remote accesses (in place, never copied; batch = runs of at least {} words per tile):",
        tessera_core::access::BATCH_RUN_WORDS
    );
    ln!(
        s,
        "{:>8} {:>9} {:>12} {:>12} {:>12} {:>12} {:>9}",
        "accessor",
        "location",
        "read KiB",
        "write KiB",
        "batch KiB",
        "spread KiB",
        "batches"
    );
    for (d, links) in per_device.iter().enumerate() {
        for r in links {
            let k = |b: u64| b as f64 / 1024.0;
            ln!(
                s,
                "{:>8} {:>9} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>9}",
                format!("device{d}"),
                r.location,
                k(r.link.read_bytes),
                k(r.link.write_bytes),
                k(r.link.batch_bytes),
                k(r.link.spread_bytes),
                r.link.batches
            );
        }
    }
    s
}

impl Report {
    /// The report as `tessera run boiling` prints it, one line each.
    pub fn summary(&self) -> String {
        let r = self;
        let mut s = String::new();
        ln!(
            s,
            "boiling {s}x{s}, {} device(s) [{}], page {p}x{p}, {}, split {}, {}",
            r.devices,
            r.adapter,
            r.procedure,
            r.partition,
            tessera_runtime::error::count(r.frames as u64, "frame"),
            s = r.size,
            p = r.page_size
        );
        ln!(
            s,
            "frames per second (measured, devices together): {:.2}   wall {:.3} s",
            r.frames_per_second_measured,
            r.wall_seconds
        );
        let e = &r.eviction;
        if e.evictions + e.wave_splits > 0 {
            ln!(
 s,
            "budget {}/device ({}): {} evictions ({} written back), {} refaults, {} thrashing pages ({} pins), {} wave splits",
            crate::budget_text(r.budget_bytes),
            r.policy,
            e.evictions,
            e.write_backs,
            e.refaults,
            e.thrashing_pages,
            e.thrash_pins,
            e.wave_splits
        );
        }
        if e.staged_batches + e.stage_refusals > 0 {
            ln!(
 s,
            "staging: {} batches ({} pages) staged while a band ran, {} refused; {} pages copied during launches",
            e.staged_batches, e.staged_pages, e.stage_refusals, e.copied_during_launch
        );
        }
        if e.prefetched > 0 {
            ln!(
                s,
                "prefetch ({}): {} pages fetched beyond requests, {} used while resident ({:.0}%)",
                r.prefetch,
                e.prefetched,
                e.prefetch_hits,
                100.0 * e.prefetch_hits as f64 / e.prefetched as f64
            );
        }
        // The concurrent model times the devices together: their waits for the manager are
        // left out of their work, the links' modeled time standing for the copies in them,
        // and the model has no manager term.
        let manager = match r.modeled.model {
            tessera_runtime::modeled::Model::Isolated => format!(
                "memory manager {:.3} s (measured; its page copies, {:.3} s, left to the links)",
                r.modeled.manager_seconds_measured, r.modeled.manager_copy_seconds_left_out
            ),
            tessera_runtime::modeled::Model::Concurrent => {
                "no memory manager term (the devices ran together; their waits for it are left out of the device work, the transfers standing for its copies)".to_string()
            }
        };
        ln!(
            s,
            "frames per second (modeled on {}, {} model): {:.2}   device work {:.3} s (measured) + transfers {:.3} s (modeled) + {manager}",
            r.topology,
            serde_json::to_value(r.modeled.model)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            r.frames_per_second_modeled,
            r.modeled.device_seconds_measured,
            r.modeled.transfer_seconds_modeled,
        );
        if let Some(st) = r.modeled.steady_per_frame.filter(|st| st.seconds() > 0.0) {
            ln!(
                s,
                "steady-state estimate (per pass, the slowest device's median over the frames): {:.2} fps, {:.2} ms a frame",
                1.0 / st.seconds(),
                st.seconds() * 1e3
            );
        }
        if r.wall_seconds_devices_one_at_a_time.is_some() {
            ln!(
                s,
                "counters and stage times below: the frames run one device at a time"
            );
        }
        ln!(
            s,
            "{:>6} {:>10} {:>12} {:>12} {:>12} {:>12} {:>12}",
            "device",
            "req/frame",
            "h→d KiB/f",
            "d→h KiB/f",
            "d→d KiB/f",
            "unique KiB",
            "shared KiB"
        );
        for d in &r.per_device {
            ln!(
                s,
                "{:>6} {:>10.1} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>12.1}",
                d.device,
                d.page_requests_per_frame,
                d.host_to_device_per_frame.bytes / 1024.0,
                d.device_to_host_per_frame.bytes / 1024.0,
                d.device_to_device_per_frame.bytes / 1024.0,
                d.memory.unique_bytes as f64 / 1024.0,
                d.memory.shared_bytes as f64 / 1024.0
            );
        }
        let rows: Vec<_> = r.per_device.iter().map(|d| (d.device, d.host)).collect();
        let held = r
            .per_device
            .iter()
            .map(|d| d.bands_launched_held.to_string());
        s += &crate::host_table("host:", &rows, Some(("held bands", held.collect())));
        let w = &r.write_backs_per_frame;
        ln!(
 s,
        "pages to the host per frame ({} coherence): coherence {:.1}, eviction {:.1}, host read {:.1}, free {:.1}, node {:.1}",
        r.coherence, w.coherence, w.eviction, w.host_read, w.free, w.node
    );
        ln!(
 s,
        "memory (all devices): unique {:.1} KiB, shared {:.1} KiB, total {:.1} KiB; texels to devices per frame {:.0}",
        r.memory.unique_bytes as f64 / 1024.0,
        r.memory.shared_bytes as f64 / 1024.0,
        r.memory.total_bytes as f64 / 1024.0,
        r.texels_to_devices_per_frame
    );
        s += &remote_table(
            &r.per_device
                .iter()
                .map(|d| d.remote.clone())
                .collect::<Vec<_>>(),
        );
        if r.procedure == tessera_runtime::Procedure::TwoPass {
            let (run, skipped) = r.per_device.iter().fold((0, 0), |(r, k), d| {
                (r + d.request_passes, k + d.request_passes_skipped)
            });
            ln!(
 s,
            "request passes (all devices, measured frames): {run} launched, {skipped} skipped (every page resident)"
        );
        }
        let st = &r.stage_seconds;
        let p = &r.stage_percent;
        let g = r.gpu_stage_seconds;
        if g.is_some() {
            ln!(
                s,
                "stage (Table 3)               seconds   share   on device (timestamps)"
            );
        } else {
            ln!(s, "stage (Table 3)               seconds   share");
        }
        let names = [
            "page read request pass",
            "request uniquify",
            "non-exclusive request handling",
            "compute (write request pass)",
            "exclusive request handling",
            "page writes (merge)",
            "display",
        ];
        let (secs, pcs) = (in_order(st), in_order(p));
        let devs = g.as_ref().map(in_order);
        for (i, name) in names.iter().enumerate() {
            let (sec, pc) = (secs[i], pcs[i]);
            match devs {
                Some(d) => ln!(s, "{name:<30} {sec:>8.3} {pc:>6.1}%  {:>9.4}", d[i]),
                None => ln!(s, "{name:<30} {sec:>8.3} {pc:>6.1}%"),
            }
        }
        ln!(s, "field_checksum={}", r.field_checksum);
        s
    }
}

/// The stages in Table 3's order.
fn in_order(s: &StageTimes) -> [f64; 7] {
    [
        s.request_pass,
        s.uniquify,
        s.read_requests,
        s.compute,
        s.write_requests,
        s.page_writes,
        s.display,
    ]
}

impl Report {
    /// Draws the time per stage and device at `stem` (.svg, .png); where timestamps timed the
    /// kernels, each device's wall bar has its device-time bar beside it.
    pub fn stage_bars(&self, stem: &std::path::Path) -> Result<(), crate::plot::PlotError> {
        let bars: Vec<_> = self
            .per_device
            .iter()
            .flat_map(|d| match d.gpu_stage_seconds {
                Some(g) => vec![
                    (format!("device {} wall", d.device), d.stage_seconds),
                    (format!("device {} on GPU", d.device), g),
                ],
                None => vec![(format!("device {}", d.device), d.stage_seconds)],
            })
            .collect();
        let title = format!(
            "Time per stage, boiling {s}x{s}, page {p}, {d} device(s)",
            s = self.size,
            p = self.page_size,
            d = self.devices
        );
        crate::plot::stage_bars(stem, &title, "device", &bars, false)
    }
}
