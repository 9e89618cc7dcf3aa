//! The oversubscription harness every workload's bench shares: trials of one workload, the
//! resident run and runs whose device budget is a fraction of the working set, measured side
//! by side in one process, and Belady's OPT over the recorded trace as a bound.
//!
//! Every trial is built up front and warmed up by one frame; then, round after round, each
//! runs its frames in turn (the resident run too), so machine noise hits all of them alike,
//! and the median of the rounds is compared.
//!
//! OPT: each device's trace is the sequence of page sets its granted batches needed resident
//! at once (the batch and the pages its wave kept). Loads and OPT's loads are counted over the
//! whole run, warm-up frame included, since both start from an empty memory. Belady's rule
//! over that trace gives the fewest loads any policy could make for the same sequence of
//! waves. Turning loads into time is a model: the policy's time above resident, scaled by
//! OPT's loads over the policy's.

mod boiling;
mod raytrace;

use std::time::Instant;

use tessera_core::eviction::belady_loads;
use tessera_core::{CoreError, PageSize};
use tessera_runtime::{
    DeviceTraffic, HostCounters, HostReport, PassStats, Policy, Prefetch, Procedure, RuntimeError,
    System, SystemConfig, Thrashing,
};

use crate::plot::{line_chart, LineChart, PlotError, Series};

pub use raytrace::RaytraceScene;

/// Why the bench could not run, or why it failed.
#[derive(Debug, thiserror::Error)]
pub enum OversubError {
    #[error("give at least one {0}")]
    Empty(&'static str),
    #[error("--staging on applies to boiling only (the ray kernel has no footprint)")]
    StagingWithoutFootprint,
    /// A ratio whose budget would fall under the ray tracer's least (it used to be raised to
    /// that least without a word, so that rows of different ratios were one run).
    #[error("ratio {ratio}: a working set of {working_set} pages over {ratio} is under the ray tracer's least budget of {least} pages; the largest ratio this scene takes is {largest:.2}")]
    RatioTooLarge {
        ratio: f64,
        working_set: u64,
        least: u64,
        largest: f64,
    },
    /// A ratio whose budget would not hold one page of boiling's textures.
    #[error("ratio {ratio}: a working set of {working_set} bytes over {ratio} is under one page of {page_bytes} bytes; the largest ratio this field takes is below {largest:.0}")]
    BudgetUnderAPage {
        ratio: f64,
        working_set: u64,
        page_bytes: u64,
        largest: f64,
    },
    /// A trial's frame failed; `trial` names its setting.
    #[error("{trial}")]
    Trial {
        trial: String,
        #[source]
        source: Box<OversubError>,
    },
    /// The caller's node factory refused a configuration.
    #[error(transparent)]
    Node(Box<dyn std::error::Error + Send + Sync>),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
    #[error(transparent)]
    Raytrace(#[from] crate::raytrace::RaytraceError),
}

/// What the bench runs, besides the workload: the settings it compares and how it measures.
pub struct Bench {
    /// Working set divided by budget, each at least 1.
    pub ratios: Vec<f64>,
    pub policies: Vec<Policy>,
    pub prefetch: Vec<Prefetch>,
    pub staging: Vec<bool>,
    /// The node every trial starts from (devices, threads); the bench sets the budget, the
    /// memories, the policy and the trace recording.
    pub node: SystemConfig,
    pub thrashing: Thrashing,
    pub procedure: Procedure,
    pub page: PageSize,
    pub frames: u32,
    pub rounds: u32,
}

/// The workload whose working set is oversubscribed.
pub enum Subject {
    /// The boiling simulation on a `size` × `size` field.
    Boiling {
        size: u32,
    },
    Raytrace(Box<RaytraceScene>),
}

/// Makes a node of a configuration on the caller's backend.
pub type MakeNode<'a> =
    dyn FnMut(&SystemConfig) -> Result<System, Box<dyn std::error::Error + Send + Sync>> + 'a;

/// What the bench found, for the caller to print and write.
pub struct Outcome {
    /// The table, as printed.
    pub text: String,
    pub csv: String,
    /// The CSV's file name.
    pub csv_name: &'static str,
    /// A plot of throughput against the ratio (title, series), where the workload has one.
    pub chart: Option<(String, Vec<Series>)>,
    /// Set when a trial's result differs from the resident run's: the failure's message.
    pub differs: Option<String>,
    /// The line that says every result agreed.
    pub agreed: String,
}

/// Draws an outcome's chart, `title` and `series`, as `stem`.svg and `stem`.png:
/// throughput relative to resident against the ratio.
pub fn ratio_chart(
    stem: &std::path::Path,
    title: &str,
    series: Vec<Series>,
) -> Result<(), PlotError> {
    let chart = LineChart {
        title,
        x_label: "working set / budget",
        y_label: "throughput relative to resident",
        x_log2: true,
        y_log: false,
        series,
    };
    line_chart(stem, &chart)
}

/// Runs the bench on `subject`; `tick` is called after each warm-up frame and each trial's
/// round, [`ticks`] times in all.
pub fn run(
    bench: &Bench,
    subject: Subject,
    make: &mut MakeNode,
    tick: impl FnMut(),
) -> Result<Outcome, OversubError> {
    let none = bench.policies.is_empty() || bench.ratios.is_empty();
    match subject {
        Subject::Boiling { size } => {
            if none || bench.prefetch.is_empty() || bench.staging.is_empty() {
                return Err(OversubError::Empty(
                    "--policy, --ratios, --prefetch and --staging value",
                ));
            }
            boiling::run(bench, size, make, tick)
        }
        Subject::Raytrace(scene) => {
            if bench.staging.iter().any(|&s| s) {
                // The ray kernel declares no footprint, so there is no next band to stage.
                return Err(OversubError::StagingWithoutFootprint);
            }
            if none {
                return Err(OversubError::Empty("--policy and --ratios value"));
            }
            raytrace::run(bench, *scene, make, tick)
        }
    }
}

/// How many times [`run`] ticks: a warm-up frame and `rounds` rounds per trial.
pub fn ticks(bench: &Bench, subject: &Subject) -> u64 {
    let settings = match subject {
        Subject::Boiling { .. } => {
            bench.ratios.len() * bench.policies.len() * bench.prefetch.len() * bench.staging.len()
        }
        Subject::Raytrace(_) => bench.ratios.len() * bench.policies.len(),
    };
    (settings as u64 + 1) * (bench.rounds as u64 + 1)
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Wraps a trial's frame error with the setting it ran.
fn in_trial<T, E: Into<OversubError>>(
    r: Result<T, E>,
    trial: impl FnOnce() -> String,
) -> Result<T, OversubError> {
    r.map_err(|e| OversubError::Trial {
        trial: trial(),
        source: Box::new(e.into()),
    })
}

/// One configuration of the bench: a workload on its own node.
pub struct Trial<S, K> {
    /// The oversubscribed setting (ratio, policy, …); `None`: the resident run.
    pub setting: Option<K>,
    pub subject: S,
    /// Seconds per frame, one entry per round.
    pub times: Vec<f64>,
    /// The measured frames' stats, summed over devices and frames.
    pub stats: PassStats,
    /// The host's work over the measured frames, summed over devices.
    pub host: HostCounters,
}

impl<S, K> Trial<S, K> {
    pub fn new(setting: Option<K>, subject: S) -> Self {
        Trial {
            setting,
            subject,
            times: Vec::new(),
            stats: PassStats::default(),
            host: HostCounters::default(),
        }
    }

    /// The host's work per measured frame, all devices together.
    pub fn host_per_frame(&self, measured_frames: u32) -> HostReport {
        HostReport::of(&self.host, measured_frames)
    }
}

/// The CSV columns of [`host_cells`].
pub const HOST_COLUMNS: &str =
    "submissions_per_frame,blocking_waits_per_frame,device_waits_per_frame,bytes_read_back_per_frame,manager_messages_per_frame";

/// A trial's host work per frame as CSV cells, in the order of [`HOST_COLUMNS`].
pub fn host_cells(h: &HostReport) -> String {
    format!(
        "{:.3},{:.3},{:.3},{:.0},{:.3}",
        h.submissions_per_frame,
        h.blocking_waits_per_frame,
        h.device_waits_per_frame,
        h.bytes_read_back_per_frame,
        h.manager_messages_per_frame
    )
}

/// Runs every trial's warm-up frame, then `rounds` rounds of `frames` frames each, the trials
/// interleaved; `tick` is called after each warm-up frame and each trial's round. Returns each
/// trial's traffic counters after its warm-up, which the measured frames' counters are
/// taken against.
pub fn run_rounds<S, K, E: From<RuntimeError>>(
    trials: &mut [Trial<S, K>],
    rounds: u32,
    frames: u32,
    mut frame: impl FnMut(&mut S, Option<&K>) -> Result<Vec<PassStats>, E>,
    system: impl Fn(&S) -> &System,
    mut tick: impl FnMut(),
) -> Result<Vec<Vec<DeviceTraffic>>, E> {
    // Warm-up: the first frame pages everything in (and, oversubscribed, starts evicting).
    for t in trials.iter_mut() {
        frame(&mut t.subject, t.setting.as_ref())?;
        tick();
    }
    let baseline = trials
        .iter()
        .map(|t| system(&t.subject).mm.traffic())
        .collect::<Result<Vec<_>, _>>()?;
    let n = trials.len();
    for round in 0..rounds as usize {
        // Each round starts one trial later, so no trial always runs first (the first of a
        // round ran measurably slower, round after round).
        for i in 0..n {
            let t = &mut trials[(round + i) % n];
            let before = system(&t.subject).host_counters();
            let start = Instant::now();
            for _ in 0..frames {
                for s in frame(&mut t.subject, t.setting.as_ref())? {
                    t.stats.add(&s);
                }
            }
            t.times.push(start.elapsed().as_secs_f64() / frames as f64);
            for (now, was) in system(&t.subject).host_counters().iter().zip(&before) {
                t.host.add(&now.since(was));
            }
            tick();
        }
    }
    Ok(baseline)
}

/// The median of `v`; NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Pages a node loaded over its whole run (from home and from other devices), and the
/// fewest Belady's OPT would have loaded for the same waves with `capacity` slots a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loads {
    pub loads: u64,
    pub opt: u64,
}

impl Loads {
    /// Counts `sys`'s loads and replays its recorded trace (`SystemConfig::record_trace`)
    /// under OPT.
    pub fn of(sys: &System, capacity: usize) -> Result<Self, RuntimeError> {
        Self::with_opt(sys, &Self::opt_per_device(sys, capacity)?)
    }

    /// Counts `sys`'s loads beside OPT's per device, replayed already
    /// ([`Loads::opt_per_device`]): the replay is the costly part.
    pub fn with_opt(sys: &System, opt_per_device: &[u64]) -> Result<Self, RuntimeError> {
        let loads = sys
            .mm
            .traffic()?
            .iter()
            .map(|t| t.host_to_device.pages + t.device_to_device.pages)
            .sum();
        Ok(Loads {
            loads,
            opt: opt_per_device.iter().sum(),
        })
    }

    /// Belady's OPT's loads over `sys`'s recorded trace, per device.
    pub fn opt_per_device(sys: &System, capacity: usize) -> Result<Vec<u64>, RuntimeError> {
        Ok(sys
            .mm
            .trace()?
            .iter()
            .map(|t| belady_loads(t, capacity))
            .collect())
    }

    /// The modeled time of a frame had the policy made OPT's loads: the time above
    /// `resident`, scaled by OPT's loads over the policy's.
    pub fn opt_time(&self, resident: f64, t: f64) -> f64 {
        resident + (t - resident).max(0.0) * (self.opt as f64 / self.loads.max(1) as f64)
    }
}

/// Bytes per second of one copy of `bytes` from host memory into device 0 of `sys`, the
/// fastest of three (`Device::time_host_copy`); `None` where the backend cannot time one.
pub fn host_link(sys: &System, bytes: u64) -> Result<Option<f64>, RuntimeError> {
    let mut best: Option<f64> = None;
    for _ in 0..3 {
        let s = sys
            .on_device(0, move |ctx| {
                ctx.worker.call(move |d| d.time_host_copy(bytes))
            })?
            .wait()??;
        match s {
            Some(s) if s > 0.0 => best = Some(best.map_or(s, |b: f64| b.min(s))),
            _ => return Ok(None),
        }
    }
    Ok(best.map(|s| bytes as f64 / s))
}

/// The transfer bound of a frame (the GPU-speed goal for oversubscription): the resident
/// frame, or the time the busiest device's host link needs for the bytes that must cross
/// it in a frame, whichever is longer. Those bytes are the pages Belady's OPT loads and the
/// pages written back, per frame; `link` is bytes per second.
pub fn transfer_bound(resident: f64, bytes_per_frame: f64, link: f64) -> f64 {
    resident.max(bytes_per_frame / link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_transfer_bound_is_the_resident_frame_or_the_link_time_whichever_is_longer() {
        // 10 MB a frame over 1 GB/s is 10 ms; a resident frame of 4 ms is shorter.
        assert_eq!(transfer_bound(0.004, 10e6, 1e9), 0.01);
        // Over 10 GB/s it is 1 ms: the resident frame bounds it.
        assert_eq!(transfer_bound(0.004, 10e6, 10e9), 0.004);
    }

    #[test]
    fn median_takes_the_upper_middle_and_none_is_nan() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn opt_time_scales_the_time_above_resident() {
        let l = Loads {
            loads: 100,
            opt: 25,
        };
        assert_eq!(l.opt_time(1.0, 5.0), 2.0);
        // Faster than resident: nothing to scale.
        assert_eq!(l.opt_time(1.0, 0.5), 1.0);
        assert_eq!(Loads { loads: 0, opt: 0 }.opt_time(1.0, 3.0), 1.0);
    }
}
