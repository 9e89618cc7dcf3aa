//! `tessera run boiling`.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tessera_model::Topology;
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum, ReferenceBoiling};
use tessera_workloads::boiling::sim::PagedBoiling;

use tessera_workloads::boiling::animation::{sampled, Animation};

use crate::measure::{run_boiling, Run};
use crate::report::{write_png, Report};
use crate::BackendKind;
use crate::{topology_args, RunOpts};
use tessera_workloads::boiling::residency;

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
    let report = crate::report::collect(&run, o, topo, checksum)?;
    Ok((run, report))
}

pub fn write_report(report: &Report, dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let json = dir.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    Ok(json)
}

pub fn boiling(o: &RunOpts) -> Result<()> {
    let topo = topology_args::load(&o.node.topology, o.devices)?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create output directory {}", o.out.display()))?;
    let total = crate::measure::simulated_frames(o);
    let bar = progress(total as u64, "boiling");
    let mut gif = match o.gif_every {
        0 => None,
        _ => Some(Animation::create(&o.out.join("frames.gif"))?),
    };
    let (run, report) = execute(o, &topo, |sim, n| {
        if let Some(gif) = gif.as_mut().filter(|_| sampled(n, total, o.gif_every)) {
            gif.push(o.size, o.size, &sim.display_rgba()?)?;
        }
        bar.inc(1);
        Ok(())
    })?;
    bar.finish_and_clear();
    print!("{}", report.summary());
    if o.verify {
        // On wgpu the reference is the unpaged GPU twin on the same adapter: the kernels'
        // tanh is the GPU's maths library, which differs from the CPU's libm in the last
        // bits, and the chaotic field amplifies that over frames.
        let want = match o.node.base.backend {
            BackendKind::Cpu => {
                let mut reference = ReferenceBoiling::new(o.size, o.size, BoilingParams::default());
                reference.run(total);
                reference.field
            }
            BackendKind::Wgpu => {
                let choice = crate::backend::adapter_choice();
                let mut twin =
                    crate::unpaged_gpu::GpuBoiling::new(&choice, o.size, BoilingParams::default())?;
                for _ in 0..total {
                    twin.frame()?;
                }
                twin.field()?
            }
        };
        crate::verify::require_field(o.node.base.backend, &want, &run.sim.field()?, total)?;
    }
    let json = write_report(&report, &o.out)?;
    let png = o.out.join("frame.png");
    write_png(&png, o.size, o.size, &run.sim.display_rgba()?)?;
    println!(
        "wrote {} and {}",
        crate::output::shown(&json).display(),
        crate::output::shown(&png).display()
    );
    if let Some(gif) = gif {
        let (path, frames) = gif.finish()?;
        println!(
            "wrote {} ({frames} frame(s), one every {} frames)",
            crate::output::shown(&path).display(),
            o.gif_every
        );
    }
    let stages = o.out.join("stages");
    report.stage_bars(&stages)?;
    println!(
        "wrote {}.svg and {}.png",
        crate::output::shown(&stages).display(),
        crate::output::shown(&stages).display()
    );
    if o.residency_png {
        for path in residency::write_all(
            &run,
            o.size,
            o.page.get(),
            crate::measure::simulated_frames(o),
            o.partition,
            &o.out,
        )? {
            println!("wrote {}", crate::output::shown(&path).display());
        }
    }
    Ok(())
}
