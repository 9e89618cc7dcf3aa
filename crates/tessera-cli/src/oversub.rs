//! `tessera bench oversubscription`: a workload with each device's budget a fraction of its
//! working set, per ratio and eviction policy, against the fully resident run, side by side in
//! one run; plus Belady's OPT over the recorded trace as a bound.
//!
//! The ratio is the working set divided by the budget: 2 means half of what the device touches
//! fits. The trials run side by side in [`tessera_workloads::oversub`]'s harness, which also
//! says how OPT is counted; OPT's time is printed as modeled. The fields (the ray tracer's
//! images) must all end equal to the resident run's, or the bench fails.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use tessera_core::PageSize;
use tessera_runtime::{Policy, Prefetch, Procedure, Thrashing};
use tessera_workloads::oversub::{ratio_chart, run, ticks, Bench, RaytraceScene, Subject};
use tessera_workloads::quake::atlas::Packing;

use crate::output::{create_dir, shown};
use crate::run::progress;
use crate::{parse_policy, parse_prefetch, parse_procedure, parse_thrashing, NodeOpts, Workload};

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
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) rounds: u32,
    #[arg(long, default_value = "relaunch", value_parser = parse_procedure())]
    pub(crate) procedure: Procedure,
    /// Devices. Each device's budget is the working set divided by the ratio, where the
    /// working set is the most any one device touches (the busiest device's pages).
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
    #[arg(long, default_value = "off", value_delimiter = ',', value_parser = crate::on_off())]
    pub(crate) staging: Vec<bool>,
    #[command(flatten)]
    pub(crate) node: NodeOpts,
    /// Deferred execution (on or off), as on `run`: on one device, a band whose pages the
    /// device holds or was just granted is queued without waiting for its outcome.
    #[arg(long, default_value = "on", value_parser = crate::on_off(), action = clap::ArgAction::Set)]
    pub(crate) deferred: bool,
    /// Output directory: oversubscription.csv and oversubscription.{svg,png} for boiling,
    /// oversubscription-raytrace.csv for the ray tracer.
    #[arg(long, default_value = "out/oversubscription")]
    pub(crate) out: PathBuf,
    /// Raytrace: `openarena:MAP` or `generated[:N]`.
    #[arg(long, default_value = "generated:3")]
    pub(crate) scene: tessera_workloads::raytrace::SceneSpec,
    /// Raytrace: shorthand for `--scene openarena:NAME`, as on `run raytrace`.
    #[arg(long, value_name = "NAME", conflicts_with = "scene")]
    pub(crate) map: Option<String>,
    /// Raytrace: where the map's pk3 files are.
    #[arg(long, value_name = "DIR", default_value = tessera_scene::DEFAULT_PAK_DIR)]
    pub(crate) pak_dir: PathBuf,
    /// Raytrace: copies of the scene on a grid.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=tessera_workloads::raytrace::scene::MAX_INSTANCES as i64))]
    pub(crate) instances: u32,
    /// Raytrace: image width.
    #[arg(long, default_value_t = 160, value_parser = crate::raytrace::image_side())]
    pub(crate) width: u32,
    /// Raytrace: image height.
    #[arg(long, default_value_t = 120, value_parser = crate::raytrace::image_side())]
    pub(crate) height: u32,
    /// Raytrace: AO rays per pixel.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=tessera_workloads::raytrace::render::MAX_AO_SAMPLES as i64))]
    pub(crate) ao_samples: u32,
    /// Raytrace: AO ray length, world units.
    #[arg(long, default_value_t = 96.0, value_parser = crate::raytrace::ao_radius)]
    pub(crate) ao_radius: f32,
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a ratio"))?;
    if !v.is_finite() {
        return Err(format!("ratio {s} is not a finite number"));
    }
    if v < 1.0 {
        return Err(format!(
            "ratio {s} is below 1: the ratio is the working set over the budget, and a budget above the working set is just resident"
        ));
    }
    Ok(v)
}

/// A list of settings to compare that names one twice: a usage error, since each setting is
/// measured once.
fn named_once<T: PartialEq>(flag: &str, values: &[T], name: impl Fn(&T) -> String) -> Result<()> {
    match crate::lists::repeated(values) {
        Some(v) => Err(crate::usage(format!(
            "{flag} names {} twice: each setting is measured once",
            name(v)
        ))),
        None => Ok(()),
    }
}

/// Runs the bench and writes its CSV (and plot); fails after writing when a trial's result
/// differs from the resident run's.
pub fn oversubscription(o: &OversubOpts) -> Result<()> {
    named_once("--ratios", &o.ratios, |r| format!("ratio {r}"))?;
    named_once("--policy", &o.policy, |p| p.name().to_string())?;
    named_once("--prefetch", &o.prefetch, |p| p.to_string())?;
    named_once("--staging", &o.staging, |&on| {
        if on { "on" } else { "off" }.to_string()
    })?;
    if o.workload == Workload::Boiling {
        // As on `run boiling`; the harness splits the field in rows.
        crate::run::field_fits(o.size, o.page, tessera_runtime::Partition::Rows, o.devices)?;
    } else {
        // As on `run raytrace`: more devices than rows is a usage error before anything runs.
        tessera_runtime::Partition::Rows
            .regions(o.width, o.height, o.devices as u32)
            .map_err(crate::usage)?;
    }
    let subject = match o.workload {
        Workload::Boiling => Subject::Boiling { size: o.size },
        Workload::Raytrace => {
            let spec = match &o.map {
                Some(m) => tessera_workloads::raytrace::SceneSpec::OpenArena(m.clone()),
                None => o.scene.clone(),
            };
            let (scene, view, name, warning) = spec.paged(
                &o.pak_dir,
                o.instances,
                o.page,
                Packing::Pages,
                o.width,
                o.height,
            )?;
            crate::warn(warning);
            Subject::Raytrace(Box::new(RaytraceScene {
                scene,
                view,
                name,
                instances: o.instances,
                width: o.width,
                height: o.height,
                ao_samples: o.ao_samples,
                ao_radius: o.ao_radius,
            }))
        }
    };
    let bench = Bench {
        ratios: o.ratios.clone(),
        policies: o.policy.clone(),
        prefetch: o.prefetch.clone(),
        staging: o.staging.clone(),
        node: o.node.config(o.devices).deferred(o.deferred),
        thrashing: o.thrashing,
        procedure: o.procedure,
        page: o.page,
        frames: o.frames,
        rounds: o.rounds,
    };
    let name = match o.workload {
        Workload::Boiling => "oversubscription",
        Workload::Raytrace => "oversubscription raytrace",
    };
    let bar = progress(ticks(&bench, &subject), name);
    let mut make = |cfg: &tessera_runtime::SystemConfig| {
        o.node.system(cfg).map(|(sys, _)| sys).map_err(Into::into)
    };
    let outcome = run(&bench, subject, &mut make, || bar.inc(1))?;
    bar.finish_and_clear();
    out!("{}", outcome.text);
    create_dir(&o.out)?;
    let csv_path = o.out.join(outcome.csv_name);
    crate::output::write(&csv_path, &outcome.csv)?;
    let csv = shown(&csv_path);
    match outcome.chart {
        Some((title, series)) => {
            let stem = o.out.join("oversubscription");
            ratio_chart(&stem, &title, series)?;
            let stem = shown(&stem);
            wrote!("wrote {csv}, {stem}.svg and {stem}.png");
        }
        None => wrote!("wrote {csv}"),
    }
    if let Some(differs) = outcome.differs {
        bail!(differs);
    }
    outln!("{}", outcome.agreed);
    Ok(())
}
