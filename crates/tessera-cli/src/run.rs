//! `tessera run boiling`, and boiling run frame by frame and pass by pass
//! ([`tessera_workloads::boiling::modeled`]) on nodes built from the options: `run` and both
//! sweeps go through [`run_boiling`], which is why a sweep's CSV row and a `tessera run`
//! report of the same settings hold the same counters.

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
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

pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:40}] {pos}/{len} {msg} ({elapsed}, eta {eta})",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    bar
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
    modeled::run_on_nodes(make, home, o.size, &settings(o), topo, after_frame)
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
