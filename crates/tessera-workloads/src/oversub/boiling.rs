//! The bench on the boiling simulation: the working set is every texture's share of one
//! device, counted from the field's size.

use std::fmt::Write as _;

use tessera_core::{ObjectDesc, TexelFormat};
use tessera_runtime::{Partition, Policy, Prefetch, StageTimes};

use super::{
    host_cells, host_link, in_trial, median, on_off, run_rounds, transfer_bound, Bench, Loads,
    MakeNode, Outcome, OversubError, Trial, HOST_COLUMNS,
};
use crate::boiling::math::BoilingParams;
use crate::boiling::reference::{checksum_hex, field_checksum};
use crate::boiling::sim::PagedBoiling;
use crate::plot::Series;

/// One oversubscribed configuration: ratio, policy, prefetch, staging.
type Setting = (f64, Policy, Prefetch, bool);

/// Percent of the stage time spent waiting for request batches (read and write).
fn request_pct(s: &StageTimes) -> f64 {
    100.0 * (s.read_requests + s.write_requests) / s.total().max(f64::MIN_POSITIVE)
}

fn describe(setting: Option<Setting>) -> String {
    match setting {
        None => "the resident run".into(),
        Some((r, p, f, st)) => format!(
            "ratio {r} with policy {p}, prefetch {f}, staging {}",
            on_off(st)
        ),
    }
}

pub(super) fn run(
    b: &Bench,
    size: u32,
    make: &mut MakeNode,
    mut tick: impl FnMut(),
) -> Result<Outcome, OversubError> {
    let devices = b.node.devices;
    let desc = ObjectDesc::texture(size, size, TexelFormat::R32Float, b.page.get())?;
    let params = BoilingParams::default();
    // The working set: the bytes the busiest device holds after a resident frame, its band of
    // every texture and the halo it reads from its neighbours, measured as the ray tracer's
    // bench measures its own. A share of the textures (1/devices) left the halo out, so that
    // "ratio 1" on 2 devices was already oversubscribed.
    let ws = {
        let sys = make(&b.node).map_err(OversubError::Node)?;
        let sim = PagedBoiling::new(sys, size, size, b.page.get(), params)?;
        in_trial(sim.frame(Partition::Rows, b.procedure), || {
            "the resident frame that measures the working set".into()
        })?;
        let (memory, _) = sim.sys.mm.memory()?;
        memory
            .iter()
            .map(|m| m.unique_bytes + m.shared_bytes)
            .max()
            .unwrap_or(0)
    };
    let page_bytes = desc.page_bytes();
    if let Some(&ratio) = b.ratios.iter().find(|&&r| budget_for(ws, r) < page_bytes) {
        return Err(OversubError::BudgetUnderAPage {
            ratio,
            working_set: ws,
            page_bytes,
            largest: ws as f64 / page_bytes as f64,
        });
    }
    let mut settings: Vec<Option<Setting>> = vec![None];
    for &r in &b.ratios {
        for &p in &b.policies {
            for &f in &b.prefetch {
                for &st in &b.staging {
                    settings.push(Some((r, p, f, st)));
                }
            }
        }
    }
    let mut configs = Vec::new();
    for setting in settings {
        let mut cfg = b.node.clone().record_trace(true).thrashing(b.thrashing);
        if let Some((ratio, policy, prefetch, staging)) = setting {
            let budget = budget_for(ws, ratio);
            // One memory of exactly the budget: capacity is the budget over the page size,
            // and a wgpu kernel binds at most four memories.
            cfg = cfg
                .budget(budget)
                .policy(policy)
                .prefetch(prefetch)
                .staging(staging)
                .memory(budget.max(1));
        } else {
            // The same layout as the oversubscribed runs: one memory, here of the working set.
            cfg = cfg.memory(ws.max(1));
        }
        let sys = make(&cfg).map_err(OversubError::Node)?;
        let sim = PagedBoiling::new(sys, size, size, b.page.get(), params)?;
        configs.push(Trial::new(setting, sim));
    }
    let baseline = run_rounds(
        &mut configs,
        b.rounds,
        b.frames,
        |sim, setting| {
            in_trial(sim.frame(Partition::Rows, b.procedure), || {
                describe(setting.copied())
            })
        },
        |sim| &sim.sys,
        &mut tick,
    )?;
    let measured_frames = (b.frames * b.rounds) as f64;
    let resident = median(configs[0].times.clone());
    let want = checksum_hex(field_checksum(&configs[0].subject.field()?));
    // The host link, timed on the resident node with one copy of the working set (at most
    // 64 MiB, within a GPU buffer's usual limit).
    let probe = ws.clamp(1, 64 << 20);
    let link = host_link(&configs[0].subject.sys, probe)?;
    let mut text = String::new();
    writeln!(
        text,
        "boiling {s}x{s}, {} device(s) [{}], page {p}x{p}, {}, working set {} KiB per device, thrashing {}, median of {} rounds x {} frames (measured)",
        devices,
        configs[0].subject.sys.backend(),
        b.procedure,
        ws / 1024,
        b.thrashing,
        b.rounds,
        b.frames,
        s = size,
        p = b.page.get(),
    )
    .unwrap();
    let resident_host = configs[0].host_per_frame(b.frames * b.rounds);
    writeln!(
        text,
        "resident  {:>9.3} ms/frame, {:.1}% of stage time waiting for requests, {:.1} blocking waits/frame ({:.1} for the GPU)",
        resident * 1e3,
        request_pct(&configs[0].stats.stages),
        resident_host.blocking_waits_per_frame,
        resident_host.device_waits_per_frame
    )
    .unwrap();
    match link {
        Some(l) => writeln!(
            text,
            "host link: {:.2} GB/s (one copy of {:.1} MiB host to device, the fastest of three); bound = max(resident, (OPT's loads + write-backs) x page / link), the busiest device's",
            l / 1e9,
            probe as f64 / (1 << 20) as f64
        ),
        None => writeln!(text, "host link: this backend cannot time one copy; no bound"),
    }
    .unwrap();
    writeln!(
        text,
        "{:>6} {:>7} {:>8} {:>7} {:>10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6} {:>8} {:>8} {:>8} {:>8}",
        "ratio",
        "policy",
        "prefetch",
        "staging",
        "ms/frame",
        "vs res.",
        "evict/f",
        "refault/f",
        "loads/f",
        "OPT ld/f",
        "OPT res.",
        "vs OPT",
        "bound ms",
        "vs bound",
        "pf hit%",
        "req%",
        "staged/f",
        "during/f",
        "waits/f",
        "gpu w/f"
    )
    .unwrap();
    let mut csv = format!(
        "ratio,policy,prefetch,staging,budget_bytes,wall_ms_per_frame,throughput_vs_resident,evictions_per_frame,eviction_write_backs_per_frame,refaults_per_frame,thrashing_pages,wave_splits_per_frame,loads_per_frame,opt_loads_per_frame,opt_throughput_vs_resident_modeled,throughput_vs_opt_modeled,prefetched_per_frame,prefetch_hits_per_frame,request_wait_pct,staged_batches_per_frame,stage_refusals_per_frame,pages_copied_during_launch_per_frame,transfer_bound_ms_per_frame,time_vs_transfer_bound,{HOST_COLUMNS},checksum\n",
    );
    let mut series: Vec<Series> = b
        .policies
        .iter()
        .flat_map(|p| b.prefetch.iter().map(move |f| (p, f)))
        .flat_map(|(p, f)| b.staging.iter().map(move |&st| (p, f, st)))
        .map(|(p, f, st)| Series {
            name: match (b.prefetch.len() > 1, b.staging.len() > 1) {
                (false, false) => format!("{p} (measured)"),
                (true, false) => format!("{p}, prefetch {f} (measured)"),
                (false, true) => format!("{p}, staging {} (measured)", on_off(st)),
                (true, true) => {
                    format!("{p}, prefetch {f}, staging {} (measured)", on_off(st))
                }
            },
            points: Vec::new(),
            secondary: false,
        })
        .collect();
    let mut opt_series = Series {
        name: String::new(),
        points: Vec::new(),
        secondary: true,
    };
    let mut mismatched = Vec::new();
    let mut above_opt = false;
    for (c, base) in configs.iter().zip(&baseline).skip(1) {
        let Some((ratio, policy, prefetch, staging)) = c.setting else {
            continue;
        };
        let t = median(c.times.clone());
        let host = c.host_per_frame(b.frames * b.rounds);
        let got = checksum_hex(field_checksum(&c.subject.field()?));
        if got != want {
            mismatched.push(format!(
                "{ratio}x {policy} prefetch {prefetch} staging {}: {got} (resident {want})",
                on_off(staging)
            ));
        }
        let traffic: Vec<_> = c
            .subject
            .sys
            .mm
            .traffic()?
            .iter()
            .zip(base)
            .map(|(a, b)| a.since(b))
            .collect();
        let sum = |f: &dyn Fn(&tessera_runtime::DeviceTraffic) -> u64| -> u64 {
            traffic.iter().map(f).sum()
        };
        // OPT and the policy are compared over the whole run, warm-up included: both start
        // from an empty memory, so OPT's count is a lower bound on the policy's. (Over the
        // measured frames alone OPT would start cold while the policy starts warm.)
        let all_frames = measured_frames + 1.0;
        let budget = budget_for(ws, ratio);
        let capacity = (budget / desc.page_bytes()) as usize;
        let opt_dev = Loads::opt_per_device(&c.subject.sys, capacity)?;
        let loads = Loads::with_opt(&c.subject.sys, &opt_dev)?;
        let (loads_all, opt_all) = (loads.loads, loads.opt);
        let t_opt = loads.opt_time(resident, t);
        let per_all = |n: u64| n as f64 / all_frames;
        let per = |n: u64| n as f64 / measured_frames;
        // The busiest device's bytes over its host link a frame: OPT's loads (over the whole
        // run, as above) and the write-backs of the measured frames.
        let busiest = traffic
            .iter()
            .zip(&opt_dev)
            .map(|(t, &o)| per_all(o) + per(t.eviction_write_backs + t.coherence_write_backs))
            .fold(0.0, f64::max);
        let bound = link.map(|l| transfer_bound(resident, busiest * desc.page_bytes() as f64, l));
        // The bound and the frame over it, as cells; none where the link was not timed.
        let cells = bound.map(|b| (format!("{:.3}", b * 1e3), format!("{:.3}", t / b)));
        let (bound_ms, vs_bound) = cells.clone().unwrap_or(("-".into(), "-".into()));
        let (bound_csv, vs_bound_csv) = cells.unwrap_or_default();
        let prefetched = sum(&|t| t.prefetched);
        let hit_pct = if prefetched == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.0}",
                100.0 * sum(&|t| t.prefetch_hits) as f64 / prefetched as f64
            )
        };
        writeln!(
            text,
            "{:>6} {:>7} {:>8} {:>7} {:>10.3} {:>9.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.3} {:>9.3} {:>9} {:>9} {:>8} {:>6.1} {:>8.1} {:>8.1} {:>8.1} {:>8.1}",
            ratio,
            policy.name(),
            prefetch.to_string(),
            on_off(staging),
            t * 1e3,
            resident / t,
            per(sum(&|t| t.evictions)),
            per(sum(&|t| t.refaults)),
            per_all(loads_all),
            per_all(opt_all),
            resident / t_opt,
            t_opt / t,
            bound_ms,
            vs_bound,
            hit_pct,
            request_pct(&c.stats.stages),
            per(sum(&|t| t.staged_batches)),
            per(sum(&|t| t.host_to_device_during_launch.pages)),
            host.blocking_waits_per_frame,
            host.device_waits_per_frame,
        )
        .unwrap();
        writeln!(
            csv,
            "{ratio},{policy},{prefetch},{},{budget},{:.6},{:.6},{:.3},{:.3},{:.3},{},{:.3},{:.3},{:.3},{:.6},{:.6},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{},{got}",
            on_off(staging),
            t * 1e3,
            resident / t,
            per(sum(&|t| t.evictions)),
            per(sum(&|t| t.eviction_write_backs)),
            per(sum(&|t| t.refaults)),
            sum(&|t| t.thrashing_pages),
            per(c.stats.wave_splits),
            per_all(loads_all),
            per_all(opt_all),
            resident / t_opt,
            t_opt / t,
            per(prefetched),
            per(sum(&|t| t.prefetch_hits)),
            request_pct(&c.stats.stages),
            per(sum(&|t| t.staged_batches)),
            per(sum(&|t| t.stage_refusals)),
            per(sum(&|t| t.host_to_device_during_launch.pages)),
            bound_csv,
            vs_bound_csv,
            host_cells(&host),
        )
        .unwrap();
        let pi = b.policies.iter().position(|&p| p == policy);
        let fi = b.prefetch.iter().position(|&f| f == prefetch);
        let si = b.staging.iter().position(|&st| st == staging);
        if let (Some(pi), Some(fi), Some(si)) = (pi, fi, si) {
            series[(pi * b.prefetch.len() + fi) * b.staging.len() + si]
                .points
                .push((ratio, resident / t));
        }
        if policy == b.policies[0] && prefetch == b.prefetch[0] && staging == b.staging[0] {
            opt_series.points.push((ratio, resident / t_opt));
        }
        above_opt |= t_opt / t > 1.0;
    }
    if above_opt {
        // OPT's frame is modeled from the resident frame, which no policy beats: a row above
        // it says how much the measured frames moved between rounds, not that it beat OPT.
        writeln!(
            text,
            "note: a row above 1 in \"vs OPT\" ran faster than OPT's modeled frame, which is this run's noise in the measured frames: give more --rounds or a larger --size"
        )
        .unwrap();
    }
    opt_series.name = format!(
        "OPT bound (modeled from the {}, prefetch {} trace)",
        b.policies[0], b.prefetch[0]
    );
    series.push(opt_series);
    let title = format!(
        "boiling {s}x{s}, page {p}: throughput under oversubscription",
        s = size,
        p = b.page.get()
    );
    Ok(Outcome {
        text,
        csv,
        csv_name: "oversubscription.csv",
        chart: Some((title, series)),
        differs: (!mismatched.is_empty()).then(|| {
            format!(
                "oversubscribed fields differ from the resident run's: {}",
                mismatched.join("; ")
            )
        }),
        agreed: format!("every field checksum equals the resident run's: {want}"),
    })
}

/// The budget of a ratio: the working set's bytes over it.
fn budget_for(working_set: u64, ratio: f64) -> u64 {
    (working_set as f64 / ratio) as u64
}
