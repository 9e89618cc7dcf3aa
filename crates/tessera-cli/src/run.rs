//! `tessera run boiling`, and boiling run frame by frame and pass by pass
//! ([`tessera_workloads::boiling::modeled`]) on nodes built from the options: `run` and both
//! sweeps go through [`run_boiling`], which is why a sweep's CSV row and a `tessera run`
//! report of the same settings hold the same counters.

use anyhow::Result;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use tessera_model::Topology;
use tessera_workloads::boiling::animation::{sampled, Animation};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::modeled::{self, Run, Settings};
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum, ReferenceBoiling};
use tessera_workloads::boiling::report::Report;
use tessera_workloads::boiling::residency;
use tessera_workloads::boiling::sim::PagedBoiling;

use crate::output::{create_dir, shown, write_json, write_png};
use crate::{BackendKind, RunOpts};

/// A progress bar on a terminal; where stderr is a log file or a pipe, a line now and then
/// (`LogLines`), so a long run left to itself still says how far it got.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let log = !std::io::stderr().is_terminal();
    let template = if log {
        "{prefix}: {pos}/{len} ({elapsed_precise}, eta {eta_precise}) {msg}"
    } else {
        "{prefix} [{bar:40}] {pos}/{len} {msg} ({elapsed}, eta {eta})"
    };
    let bar = if log {
        ProgressBar::with_draw_target(
            Some(len),
            ProgressDrawTarget::term_like_with_hz(Box::new(LogLines::new(LOG_EVERY)), 1),
        )
    } else {
        ProgressBar::new(len)
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .expect("static template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    if log {
        // A step may take longer than the interval (a benchmark's round, a slow frame): the
        // ticks keep the lines coming while the count stands still.
        bar.enable_steady_tick(Duration::from_secs(5));
    }
    bar
}

/// How often a run whose stderr is not a terminal says how far it got; the first line comes
/// after as long, so short runs print none.
const LOG_EVERY: Duration = Duration::from_secs(30);

/// Draws a progress bar as whole lines, at most one every `every`: what a log file or a CI
/// job shows of a long run. Cursor moves and clears, which only a terminal can act on, are
/// dropped.
struct LogLines {
    every: Duration,
    /// When the last line was written (the bar's start, at first), and where lines go.
    state: Mutex<(Instant, Box<dyn Write + Send>)>,
}

impl std::fmt::Debug for LogLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogLines")
            .field("every", &self.every)
            .finish()
    }
}

impl LogLines {
    fn new(every: Duration) -> Self {
        Self::to(every, Box::new(std::io::stderr()))
    }
    fn to(every: Duration, out: Box<dyn Write + Send>) -> Self {
        LogLines {
            every,
            state: Mutex::new((Instant::now(), out)),
        }
    }
    fn line(&self, s: &str) -> std::io::Result<()> {
        if s.trim().is_empty() {
            return Ok(());
        }
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (last, out) = &mut *state;
        if last.elapsed() < self.every {
            return Ok(());
        }
        *last = Instant::now();
        writeln!(out, "{}", s.trim_end())
    }
}

impl TermLike for LogLines {
    fn width(&self) -> u16 {
        200
    }
    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.line(s)
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.line(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&self) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.1.flush()
    }
}

/// Runs boiling with `o` on `topo` and builds its report; shared by `run` and the sweeps.
/// `after_frame` is called as [`run_boiling`] says.
pub fn execute(
    o: &RunOpts,
    topo: &Topology,
    after_frame: impl FnMut(&PagedBoiling, u32) -> Result<()>,
) -> Result<(Run, Report)> {
    let run = run_boiling(o, topo, after_frame)?;
    let field = run.sim.field()?;
    let checksum = checksum_hex(field_checksum(&field));
    let report = Report::collect(
        &run,
        &settings(o),
        o.size,
        o.node.base.backend.name(),
        &o.node.config(o.devices),
        topo,
        checksum,
    )?;
    Ok((run, report))
}

pub fn write_report(report: &Report, dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let json = dir.join("report.json");
    write_json(&json, report)?;
    Ok(json)
}

/// A page no larger than the field: a usage error before anything runs.
pub fn page_fits(size: u32, page: tessera_core::PageSize) -> Result<()> {
    if page.get() > size {
        return Err(crate::usage(format!(
            "--page {} is larger than the {size}x{size} field",
            page.get()
        )));
    }
    Ok(())
}

/// `--verify`: `got`, the field after `total` simulated frames, against the unpaged reference's.
pub fn verify_field(o: &RunOpts, total: u32, got: &[f32]) -> Result<()> {
    // On wgpu the reference is the unpaged GPU twin on the same adapter: the kernels' tanh is
    // the GPU's maths library, which differs from the CPU's libm in the last bits, and the
    // chaotic field amplifies that over frames.
    let want = match o.node.base.backend {
        BackendKind::Cpu => {
            let mut reference = ReferenceBoiling::new(o.size, o.size, BoilingParams::default());
            reference.run(total);
            reference.field
        }
        BackendKind::Wgpu => {
            let choice = tessera_wgpu::AdapterChoice::from_env();
            let mut twin =
                crate::unpaged_gpu::GpuBoiling::new(&choice, o.size, BoilingParams::default())?;
            for _ in 0..total {
                twin.frame()?;
            }
            twin.field()?
        }
    };
    crate::verify::require_field(o.node.base.backend, &want, got, total)
}

/// A boiling field of side `size` in pages of `page`, split `partition` over `devices`: a
/// page larger than the field, or more devices than rows (or columns) to split, is a usage
/// error before anything runs.
pub fn field_fits(
    size: u32,
    page: tessera_core::PageSize,
    partition: tessera_runtime::Partition,
    devices: usize,
) -> Result<()> {
    page_fits(size, page)?;
    partition
        .regions(size, size, devices as u32)
        .map_err(crate::usage)?;
    Ok(())
}

pub fn boiling(o: &RunOpts) -> Result<()> {
    field_fits(o.size, o.page, o.partition, o.devices)?;
    let topo = o.node.topology(o.devices)?;
    create_dir(&o.out)?;
    let total = simulated_frames(o);
    let bar = progress(total as u64, "boiling");
    let mut gif = match o.gif_every {
        0 => None,
        _ => Some(Animation::create(&o.out.join("frames.gif"))?),
    };
    let (run, mut report) = execute(o, &topo, |sim, n| {
        if let Some(gif) = gif.as_mut().filter(|_| sampled(n, total, o.gif_every)) {
            gif.push(o.size, o.size, &sim.display_rgba()?)?;
        }
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    out!("{}", report.summary());
    if o.verify {
        verify_field(o, total, &run.sim.field()?)?;
        report.verified = Some(true);
    }
    let json = write_report(&report, &o.out)?;
    let png = o.out.join("frame.png");
    write_png(&png, o.size, o.size, &run.sim.display_rgba()?)?;
    wrote!("wrote {} and {}", shown(&json), shown(&png));
    if let Some(gif) = gif {
        let (path, frames) = gif.finish()?;
        wrote!(
            "wrote {} ({frames} frame(s), one every {} frames)",
            shown(&path),
            o.gif_every
        );
    }
    let stages = o.out.join("stages");
    report.stage_bars(&stages)?;
    wrote!("wrote {}.svg and {}.png", shown(&stages), shown(&stages));
    if o.residency_png {
        for path in residency::write_all(
            &run,
            o.size,
            o.page.get(),
            simulated_frames(o),
            o.partition,
            &o.out,
        )? {
            wrote!("wrote {}", shown(&path));
        }
    }
    Ok(())
}

/// Builds a node and the simulation for `o` (and, in the isolated model, the second node)
/// and runs them with [`modeled::run_on_nodes`], `after_frame` after every frame.
pub fn run_boiling(
    o: &RunOpts,
    topo: &Topology,
    after_frame: impl FnMut(&PagedBoiling, u32) -> Result<()>,
) -> Result<Run> {
    topo.check_devices(o.devices)?;
    let make = |home| {
        o.node
            .base
            .system(&o.node.config(o.devices).home_file(home))
    };
    let home = o.node.home_file.as_deref();
    let settings = settings(o);
    if let (Some(path), tessera_runtime::modeled::Model::Isolated) = (home, settings.model) {
        if let Some(why) = crate::home_file_taken(&modeled::isolated_home(path)) {
            return Err(crate::usage(format!("--home-file: {why}")));
        }
    }
    modeled::run_on_nodes(make, home, o.size, &settings, topo, after_frame)
}

/// The settings of `o` that the runner takes beside its nodes.
pub fn settings(o: &RunOpts) -> Settings {
    Settings {
        devices: o.devices,
        page: o.page.get(),
        partition: o.partition,
        procedure: o.procedure,
        warmup: o.warmup,
        frames: o.frames,
        model: o.node.model.into(),
    }
}

/// Frames of the field `run_boiling` simulates for `o`: what its `after_frame` counts up to.
/// The model never changes it.
pub fn simulated_frames(o: &RunOpts) -> u32 {
    o.warmup + o.frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn drawn(every: Duration) -> String {
        let out = Shared::default();
        let bar = ProgressBar::with_draw_target(
            Some(3),
            ProgressDrawTarget::term_like(Box::new(LogLines::to(every, Box::new(out.clone())))),
        );
        bar.set_style(ProgressStyle::with_template("{prefix}: {pos}/{len} {msg}").unwrap());
        bar.set_prefix("sweep");
        for k in 0..3 {
            bar.set_message(format!("page {k}"));
            bar.inc(1);
            std::thread::sleep(Duration::from_millis(60));
        }
        bar.finish_and_clear();
        let s = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        s
    }

    /// Where stderr is no terminal, progress comes as whole lines without cursor codes, and
    /// none before the first interval has passed.
    #[test]
    fn progress_in_a_log_is_whole_lines_and_none_for_a_short_run() {
        let every = drawn(Duration::ZERO);
        assert!(every.lines().count() >= 2, "{every:?}");
        for line in every.lines() {
            let rest = line
                .strip_prefix("sweep: ")
                .unwrap_or_else(|| panic!("{every:?}"));
            let (pos, msg) = rest.split_once("/3").unwrap_or_else(|| panic!("{every:?}"));
            assert!(pos.parse::<u32>().is_ok_and(|p| p <= 3), "{every:?}");
            assert!(msg.is_empty() || msg.starts_with(" page "), "{every:?}");
        }
        assert!(every.contains("sweep: 3/3 page 2\n"), "{every:?}");
        assert!(every.ends_with('\n'), "{every:?}");
        assert_eq!(drawn(Duration::from_secs(3600)), "");
    }
}
