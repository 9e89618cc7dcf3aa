//! `tessera run boiling`.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tessera_runtime::{PassStats, System, SystemConfig};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum};
use tessera_workloads::boiling::sim::PagedBoiling;

use crate::report::{write_png, Report};
use crate::{RunOpts, MAX_SIZE};

pub fn check_size(size: u32) -> Result<()> {
    if size == 0 || size > MAX_SIZE {
        bail!("--size must be between 1 and {MAX_SIZE} (got {size})");
    }
    Ok(())
}

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

pub fn boiling(o: &RunOpts) -> Result<()> {
    check_size(o.size)?;
    if o.frames == 0 {
        bail!("--frames must be at least 1");
    }
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create output directory {}", o.out.display()))?;
    let sys = System::cpu(&SystemConfig {
        devices: o.devices,
        cpu_threads: o.threads,
        budget_bytes: o.budget_mib.saturating_mul(1 << 20),
        ..Default::default()
    })?;
    // Validate the partition before creating textures so the error names the real problem.
    o.partition.regions(o.size, o.size, o.devices as u32)?;
    let sim = PagedBoiling::new(sys, o.size, o.size, o.page, BoilingParams::default())?;
    let bar = progress(o.frames as u64, "boiling");
    let mut per_device = vec![PassStats::default(); o.devices];
    let t = Instant::now();
    for _ in 0..o.frames {
        let stats = sim.frame(o.partition, o.procedure)?;
        for (a, s) in per_device.iter_mut().zip(&stats) {
            a.add(s);
        }
        bar.inc(1);
    }
    let wall = t.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let field = sim.field()?;
    let checksum = checksum_hex(field_checksum(&field));
    let report = Report::collect(&sim.sys, o, wall, &per_device, checksum)?;
    report.print();
    let json = o.out.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    let png = o.out.join("frame.png");
    write_png(&png, o.size, o.size, &sim.display_rgba()?)?;
    println!("wrote {} and {}", json.display(), png.display());
    Ok(())
}
