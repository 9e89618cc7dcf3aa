//! `tessera bench oversubscription`: a workload with each device's budget a fraction of its
//! working set, per ratio and eviction policy, against the fully resident run, side by side in
//! one run; plus Belady's OPT over the recorded trace as a bound.
//!
//! The ratio is the working set divided by the budget: 2 means half of what the device touches
//! fits. The trials run side by side in [`tessera_workloads::oversub`]'s harness, which also
//! says how OPT is counted; OPT's time is printed as modeled. The fields (the ray tracer's
//! images) must all end equal to the resident run's, or the bench fails.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tessera_core::PageSize;

use anyhow::{bail, Context, Result};
use clap::Args;
use tessera_core::{ObjectDesc, TexelFormat};
use tessera_runtime::{
    Partition, Policy, Prefetch, Procedure, StageTimes, SystemConfig, Thrashing,
};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::field_checksum;
use tessera_workloads::boiling::sim::PagedBoiling;
use tessera_workloads::oversub::{median, run_rounds, Loads, Trial};
use tessera_workloads::raytrace::check_budget;
use tessera_workloads::raytrace::render::{RayRenderer, RenderOptions};

use crate::run::progress;
use crate::{
    backend, parse_policy, parse_prefetch, parse_procedure, parse_thrashing, BackendKind, Workload,
};
use tessera_workloads::plot::{line_chart, LineChart, Series};

/// One oversubscribed configuration: ratio, policy, prefetch, staging.
type Setting = (f64, Policy, Prefetch, bool);

#[derive(Args, Clone)]
pub struct OversubOpts {
    /// The workload whose working set is oversubscribed.
    #[arg(long, value_enum, default_value = "boiling")]
    pub(crate) workload: Workload,
    /// Working set divided by budget, comma-separated; each at least 1.
    #[arg(long, default_value = "1,1.25,1.5,2,4", value_delimiter = ',', value_parser = parse_ratio)]
    pub(crate) ratios: Vec<f64>,
    /// Eviction policies to compare, comma-separated.
    #[arg(long, default_value = "lru,clock,fifo,random", value_delimiter = ',', value_parser = parse_policy())]
    pub(crate) policy: Vec<Policy>,
    /// Boiling: field side in texels.
    #[arg(long, default_value_t = 256, value_parser = crate::parse_size)]
    pub(crate) size: u32,
    /// Page side P in texels.
    #[arg(long, default_value = "16", value_parser = crate::parse_page)]
    pub(crate) page: PageSize,
    /// Frames per measurement.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) frames: u32,
    /// Measurements of each configuration, interleaved; the median is reported.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) rounds: u32,
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    pub(crate) procedure: Procedure,
    /// Devices; each gets the ratio of its share (1/devices) of the working set.
    #[arg(long, default_value_t = 1, value_parser = crate::parse_device_count)]
    pub(crate) devices: usize,
    /// Thrashing response for every oversubscribed configuration.
    #[arg(long, default_value = "pin", value_parser = parse_thrashing())]
    pub(crate) thrashing: Thrashing,
    /// Prefetch settings to compare, comma-separated (off, tree): each ratio and policy runs
    /// with each, side by side.
    #[arg(long, default_value = "off", value_delimiter = ',', value_parser = parse_prefetch())]
    pub(crate) prefetch: Vec<Prefetch>,
    /// Asynchronous staging settings to compare, comma-separated (off, on): each ratio,
    /// policy and prefetch setting runs with each, side by side.
    #[arg(long, default_value = "off", value_delimiter = ',', value_parser = crate::parse_staging())]
    pub(crate) staging: Vec<bool>,
    #[arg(long, value_enum, default_value = "cpu")]
    pub(crate) backend: BackendKind,
    /// CPU threads (0: one per core).
    #[arg(long, default_value_t = 0, value_parser = crate::parse_threads)]
    pub(crate) threads: usize,
    /// Output directory: oversubscription.csv and oversubscription.{svg,png}.
    #[arg(long, default_value = "out/oversubscription")]
    pub(crate) out: PathBuf,
    /// Raytrace: `openarena:MAP` or `generated[:N]`.
    #[arg(long, default_value = "generated:3", value_parser = parse_scene)]
    pub(crate) scene: tessera_workloads::raytrace::SceneSpec,
    /// Raytrace: where the map's pk3 files are.
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pub(crate) pak_dir: PathBuf,
    /// Raytrace: copies of the scene on a grid.
    #[arg(long, default_value_t = 1)]
    pub(crate) instances: u32,
    /// Raytrace: image width.
    #[arg(long, default_value_t = 160, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) width: u32,
    /// Raytrace: image height.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) height: u32,
    /// Raytrace: AO rays per pixel.
    #[arg(long, default_value_t = 4)]
    pub(crate) ao_samples: u32,
    /// Raytrace: AO ray length, world units.
    #[arg(long, default_value_t = 96.0)]
    pub(crate) ao_radius: f32,
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a ratio"))?;
    if !v.is_finite() || v < 1.0 {
        return Err(format!(
            "ratio {s} is below 1: the ratio is the working set over the budget, and a budget above the working set is just resident"
        ));
    }
    Ok(v)
}

fn parse_scene(s: &str) -> Result<tessera_workloads::raytrace::SceneSpec, String> {
    s.parse()
}

/// Textures of the boiling simulation (field, border, diffusion, buoyancy, display), each
/// with four bytes a texel.
const BOILING_TEXTURES: u64 = 5;

/// Bytes of the pages one device touches: its share of every texture.
fn working_set(o: &OversubOpts) -> Result<u64> {
    let desc = ObjectDesc::texture(o.size, o.size, TexelFormat::R32Float, o.page.get())?;
    Ok(BOILING_TEXTURES * desc.page_count() * desc.page_bytes() / o.devices as u64)
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Percent of the stage time spent waiting for request batches (read and write).
fn request_pct(s: &StageTimes) -> f64 {
    100.0 * (s.read_requests + s.write_requests) / s.total().max(f64::MIN_POSITIVE)
}

pub fn oversubscription(o: &OversubOpts) -> Result<()> {
    if o.policy.is_empty() || o.ratios.is_empty() || o.prefetch.is_empty() || o.staging.is_empty() {
        bail!("give at least one --policy, --ratios, --prefetch and --staging value");
    }
    if let Workload::Raytrace = o.workload {
        if o.staging.iter().any(|&s| s) {
            // The ray kernel declares no footprint, so there is no next band to stage.
            bail!("--staging on applies to boiling only (the ray kernel has no footprint)");
        }
        return raytrace(o);
    }
    let ws = working_set(o)?;
    let params = BoilingParams::default();
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let mut settings: Vec<Option<Setting>> = vec![None];
    for &r in &o.ratios {
        for &p in &o.policy {
            for &f in &o.prefetch {
                for &st in &o.staging {
                    settings.push(Some((r, p, f, st)));
                }
            }
        }
    }
    let mut configs = Vec::new();
    for setting in settings {
        let mut cfg = SystemConfig {
            devices: o.devices,
            cpu_threads: o.threads,
            record_trace: true,
            thrashing: o.thrashing,
            ..Default::default()
        };
        if let Some((ratio, policy, prefetch, staging)) = setting {
            cfg.budget_bytes = (ws as f64 / ratio) as u64;
            cfg.policy = policy;
            cfg.prefetch = prefetch;
            cfg.staging = staging;
            // One memory of exactly the budget: capacity is the budget over the page size,
            // and a wgpu kernel binds at most four memories.
            cfg.memory_bytes = cfg.budget_bytes.max(1);
        } else {
            // The same layout as the oversubscribed runs: one memory, here of the working set.
            cfg.memory_bytes = ws.max(1);
        }
        let (sys, _) = backend::system(o.backend, &cfg)?;
        let sim = PagedBoiling::new(sys, o.size, o.size, o.page.get(), params)?;
        configs.push(Trial::new(setting, sim));
    }
    let bar = progress(
        (configs.len() as u64) * (o.rounds as u64 + 1),
        "oversubscription",
    );
    let baseline = run_rounds(
        &mut configs,
        o.rounds,
        o.frames,
        |sim, setting| {
            sim.frame(Partition::Rows, o.procedure)
                .with_context(|| describe(setting.copied()))
        },
        |sim| &sim.sys,
        || bar.inc(1),
    )?;
    bar.finish_and_clear();
    let measured_frames = (o.frames * o.rounds) as f64;
    let resident = median(configs[0].times.clone());
    let want = field_checksum(&configs[0].subject.field()?);
    println!(
        "{:?} {s}x{s}, {} device(s) [{}], page {p}x{p}, {:?}, working set {} KiB per device, thrashing {:?}, median of {} rounds x {} frames (measured)",
        o.workload,
        o.devices,
        configs[0].subject.sys.backend(),
        o.procedure,
        ws / 1024,
        o.thrashing,
        o.rounds,
        o.frames,
        s = o.size,
        p = o.page.get(),
    );
    println!(
        "resident  {:>9.3} ms/frame, {:.1}% of stage time waiting for requests",
        resident * 1e3,
        request_pct(&configs[0].stats.stages)
    );
    println!(
        "{:>6} {:>7} {:>8} {:>7} {:>10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8} {:>6} {:>8} {:>8}",
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
        "pf hit%",
        "req%",
        "staged/f",
        "during/f"
    );
    let mut csv = String::from(
        "ratio,policy,prefetch,staging,budget_bytes,ms_per_frame,throughput_vs_resident,evictions_per_frame,write_backs_per_frame,refaults_per_frame,thrashing_pages,wave_splits_per_frame,loads_per_frame,opt_loads_per_frame,opt_throughput_vs_resident_modeled,throughput_vs_opt_modeled,prefetched_per_frame,prefetch_hits_per_frame,request_wait_pct,staged_batches_per_frame,stage_refusals_per_frame,pages_copied_during_launch_per_frame,field_checksum\n",
    );
    let mut series: Vec<Series> = o
        .policy
        .iter()
        .flat_map(|p| o.prefetch.iter().map(move |f| (p, f)))
        .flat_map(|(p, f)| o.staging.iter().map(move |&st| (p, f, st)))
        .map(|(p, f, st)| Series {
            name: match (o.prefetch.len() > 1, o.staging.len() > 1) {
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
        name: "OPT bound (modeled from the lru trace)".into(),
        points: Vec::new(),
        secondary: true,
    };
    let mut mismatched = Vec::new();
    for (c, base) in configs.iter().zip(&baseline).skip(1) {
        let Some((ratio, policy, prefetch, staging)) = c.setting else {
            continue;
        };
        let t = median(c.times.clone());
        let got = field_checksum(&c.subject.field()?);
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
        let budget = (ws as f64 / ratio) as u64;
        let page_bytes =
            ObjectDesc::texture(o.size, o.size, TexelFormat::R32Float, o.page.get())?.page_bytes();
        let capacity = (budget / page_bytes) as usize;
        let loads = Loads::of(&c.subject.sys, capacity)?;
        let (loads_all, opt_all) = (loads.loads, loads.opt);
        let t_opt = loads.opt_time(resident, t);
        let per_all = |n: u64| n as f64 / all_frames;
        let per = |n: u64| n as f64 / measured_frames;
        let prefetched = sum(&|t| t.prefetched);
        let hit_pct = if prefetched == 0 {
            "-".to_string()
        } else {
            format!(
                "{:.0}",
                100.0 * sum(&|t| t.prefetch_hits) as f64 / prefetched as f64
            )
        };
        println!(
            "{:>6} {:>7} {:>8} {:>7} {:>10.3} {:>9.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.3} {:>9.3} {:>8} {:>6.1} {:>8.1} {:>8.1}",
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
            hit_pct,
            request_pct(&c.stats.stages),
            per(sum(&|t| t.staged_batches)),
            per(sum(&|t| t.host_to_device_during_launch.pages)),
        );
        writeln!(
            csv,
            "{ratio},{policy},{prefetch},{},{budget},{:.6},{:.6},{:.3},{:.3},{:.3},{},{:.3},{:.3},{:.3},{:.6},{:.6},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{got}",
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
        )?;
        let pi = o.policy.iter().position(|&p| p == policy);
        let fi = o.prefetch.iter().position(|&f| f == prefetch);
        let si = o.staging.iter().position(|&st| st == staging);
        if let (Some(pi), Some(fi), Some(si)) = (pi, fi, si) {
            series[(pi * o.prefetch.len() + fi) * o.staging.len() + si]
                .points
                .push((ratio, resident / t));
        }
        if policy == o.policy[0] && prefetch == o.prefetch[0] && staging == o.staging[0] {
            opt_series.points.push((ratio, resident / t_opt));
        }
    }
    opt_series.name = format!(
        "OPT bound (modeled from the {}, prefetch {} trace)",
        o.policy[0], o.prefetch[0]
    );
    let csv_path = o.out.join("oversubscription.csv");
    std::fs::write(&csv_path, csv)
        .with_context(|| format!("cannot write {}", csv_path.display()))?;
    series.push(opt_series);
    let stem = o.out.join("oversubscription");
    line_chart(
        &stem,
        &LineChart {
            title: &format!(
                "{:?} {s}x{s}, page {p}: throughput under oversubscription",
                o.workload,
                s = o.size,
                p = o.page.get()
            ),
            x_label: "working set / budget",
            y_label: "throughput relative to resident",
            x_log2: true,
            y_log: false,
            series,
        },
    )?;
    println!(
        "wrote {}, {}",
        crate::output::shown(&csv_path).display(),
        display_stem(&crate::output::shown(&stem))
    );
    if !mismatched.is_empty() {
        bail!(
            "oversubscribed fields differ from the resident run's: {}",
            mismatched.join("; ")
        );
    }
    println!("every field checksum equals the resident run's: {want}");
    Ok(())
}

fn display_stem(stem: &Path) -> String {
    format!("{}.{{svg,png}}", stem.display())
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

/// `tessera bench oversubscription --workload raytrace`: as for boiling, with the working set
/// measured: the most pages any device holds after a resident frame.
fn raytrace(o: &OversubOpts) -> Result<()> {
    if o.policy.is_empty() || o.ratios.is_empty() {
        bail!("give at least one --policy and --ratios value");
    }
    let (scene, view, name) =
        crate::raytrace::load(&o.scene, &o.pak_dir, o.instances, o.page, o.width, o.height)?;
    let opts = RenderOptions {
        width: o.width,
        height: o.height,
        page: o.page.get(),
        ao_samples: o.ao_samples,
        ao_radius: o.ao_radius,
        partition: Partition::Rows,
        procedure: o.procedure,
        filter: None,
    };
    let page_bytes = o.page.get() as u64 * o.page.get() as u64 * 4;
    let base_cfg = SystemConfig {
        devices: o.devices,
        cpu_threads: o.threads,
        record_trace: true,
        thrashing: o.thrashing,
        ..Default::default()
    };
    // The working set: pages each device holds after a resident frame.
    let ws_pages = {
        let (sys, _) = backend::system(o.backend, &base_cfg)?;
        let mut r = RayRenderer::new(sys, scene.clone(), view, opts)?;
        r.frame()?;
        let res = r.residency()?;
        (0..o.devices)
            .map(|d| res.iter().map(|x| x.per_device[d]).sum::<u64>())
            .max()
            .unwrap_or(0)
    };
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let budget_of = |ratio: f64| {
        ((ws_pages as f64 / ratio) as u64).max(tessera_workloads::raytrace::MIN_BUDGET_PAGES)
            * page_bytes
    };
    let mut settings: Vec<Option<(f64, Policy)>> = vec![None];
    for &ratio in &o.ratios {
        for &p in &o.policy {
            settings.push(Some((ratio, p)));
        }
    }
    let mut configs = Vec::new();
    for setting in settings {
        let mut cfg = base_cfg.clone();
        if let Some((ratio, policy)) = setting {
            let budget = budget_of(ratio);
            check_budget(budget, o.page.get())?;
            cfg.budget_bytes = budget;
            cfg.memory_bytes = budget;
            cfg.policy = policy;
        } else {
            cfg.memory_bytes = (ws_pages * page_bytes).max(page_bytes);
        }
        let (sys, _) = backend::system(o.backend, &cfg)?;
        let r = RayRenderer::new(sys, scene.clone(), view, opts)?;
        configs.push(Trial::new(setting, r));
    }
    let bar = progress(
        configs.len() as u64 * (o.rounds as u64 + 1),
        "oversubscription raytrace",
    );
    let baseline = run_rounds(
        &mut configs,
        o.rounds,
        o.frames,
        |r, setting| {
            r.frame()
                .with_context(|| describe_raytrace(setting.copied()))
        },
        |r| &r.sys,
        || bar.inc(1),
    )?;
    bar.finish_and_clear();
    let measured = (o.frames * o.rounds) as f64;
    let all_frames = measured + 1.0;
    let resident = median(configs[0].times.clone());
    let want = configs[0].subject.image()?;
    println!(
        "raytrace {name} x{} ({} triangles), {}x{}, {} AO rays, {} device(s) [{}], page {p}x{p} ({page_bytes} B), {:?}, working set {ws_pages} pages per device, thrashing {:?}, median of {} rounds x {} frames (measured)",
        o.instances,
        configs[0].subject.scene.triangle_count,
        o.width,
        o.height,
        o.ao_samples,
        o.devices,
        configs[0].subject.sys.backend(),
        o.procedure,
        o.thrashing,
        o.rounds,
        o.frames,
        p = o.page.get(),
    );
    println!("resident  {:>9.1} ms/frame", resident * 1e3);
    println!(
        "{:>6} {:>7} {:>10} {:>8} {:>11} {:>11} {:>9} {:>10} {:>9} {:>9} {:>9}",
        "ratio",
        "policy",
        "ms/frame",
        "vs res.",
        "relaunch/f",
        "suspend/f",
        "evict/f",
        "MiB in/f",
        "loads/f",
        "OPT ld/f",
        "OPT res."
    );
    let mut csv = String::from("ratio,policy,budget_bytes,ms_per_frame,throughput_vs_resident,relaunched_per_frame,suspended_per_frame,evictions_per_frame,bytes_moved_per_frame,loads_per_frame,opt_loads_per_frame,opt_throughput_vs_resident_modeled,image_equal\n");
    let mut mismatched = Vec::new();
    for (c, base) in configs.iter().zip(&baseline).skip(1) {
        let Some((ratio, policy)) = c.setting else {
            continue;
        };
        let t = median(c.times.clone());
        let equal = c.subject.image()? == want;
        if !equal {
            mismatched.push(describe_raytrace(c.setting));
        }
        let now = c.subject.sys.mm.traffic()?;
        let since: u64 = now
            .iter()
            .zip(base)
            .map(|(a, b)| {
                a.host_to_device.since(b.host_to_device).bytes
                    + a.device_to_device.since(b.device_to_device).bytes
                    + a.device_to_host.since(b.device_to_host).bytes
            })
            .sum();
        let evictions: u64 = now
            .iter()
            .zip(base)
            .map(|(a, b)| a.evictions - b.evictions)
            .sum();
        let budget = budget_of(ratio);
        let loads = Loads::of(&c.subject.sys, (budget / page_bytes) as usize)?;
        let (loads_all, opt_all) = (loads.loads, loads.opt);
        let t_opt = loads.opt_time(resident, t);
        println!(
            "{:>6} {:>7} {:>10.1} {:>8.3} {:>11.0} {:>11.0} {:>9.0} {:>10.2} {:>9.0} {:>9.0} {:>9.3}",
            ratio,
            policy.name(),
            t * 1e3,
            resident / t,
            c.stats.relaunched as f64 / measured,
            c.stats.suspended as f64 / measured,
            evictions as f64 / measured,
            since as f64 / measured / 1048576.0,
            loads_all as f64 / all_frames,
            opt_all as f64 / all_frames,
            resident / t_opt,
        );
        csv.push_str(&format!(
            "{ratio},{},{},{:.3},{:.4},{:.1},{:.1},{:.1},{:.0},{:.1},{:.1},{:.4},{equal}\n",
            policy.name(),
            budget,
            t * 1e3,
            resident / t,
            c.stats.relaunched as f64 / measured,
            c.stats.suspended as f64 / measured,
            evictions as f64 / measured,
            since as f64 / measured,
            loads_all as f64 / all_frames,
            opt_all as f64 / all_frames,
            resident / t_opt,
        ));
    }
    let path = o.out.join("oversubscription-raytrace.csv");
    std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
    println!("wrote {}", crate::output::shown(&path).display());
    if !mismatched.is_empty() {
        bail!(
            "oversubscribed images differ from the resident one: {}",
            mismatched.join("; ")
        );
    }
    println!(
        "every image equals the resident one: {}",
        crate::report::fnv1a_hex(&want)
    );
    Ok(())
}

fn describe_raytrace(setting: Option<(f64, Policy)>) -> String {
    match setting {
        None => "the resident run".into(),
        Some((r, p)) => format!("ratio {r} with policy {p}"),
    }
}
