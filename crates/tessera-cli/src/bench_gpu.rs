//! `tessera bench gpu`: every workload on the wgpu backend and on the CPU backend of the same
//! machine, side by side, and the ratio. Each run is this binary's own `run` command, as a user
//! would type it, in a folder of its own; the time per frame is read from its report.json and
//! leaves out what a first frame adds (the GPU compiles its kernels on their first launch): the
//! workloads with a warm-up run one, the others report each frame and the first is dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;

use tessera_workloads::{
    gpu_seconds_per_frame, gpu_vs_cpu_table, mean_host, seconds_per_frame, GpuVsCpu,
};

use crate::output::create_dir;
use crate::run::progress;

/// The workloads, in the order they run.
const WORKLOADS: [&str; 6] = [
    "boiling",
    "quake",
    "raytrace",
    "stencil",
    "convolution",
    "vr",
];

#[derive(Args, Clone)]
pub struct GpuBenchOpts {
    /// Workloads to run, comma-separated: boiling, quake, raytrace (under a budget), stencil,
    /// convolution, vr. The convolution is not in the default list: it is GPU-SM's second
    /// halo workload beside the stencil, and the default list is what scripts/gpu-check.sh
    /// runs in its few minutes.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "boiling,quake,raytrace,stencil,vr",
        value_parser = clap::builder::PossibleValuesParser::new(WORKLOADS)
    )]
    workloads: Vec<String>,
    /// Measured frames of each run (stencil and convolution: steps).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    frames: u32,
    /// Devices of each run.
    #[arg(long, default_value_t = 2, value_parser = crate::parse_device_count)]
    devices: usize,
    /// Small sizes (a few seconds a run, even on lavapipe): for trying the command out.
    #[arg(long)]
    quick: bool,
}

/// `tessera run WORKLOAD` arguments for `o`, without the backend and `--out`.
fn args(workload: &str, o: &GpuBenchOpts) -> Vec<String> {
    let (f, d) = (o.frames, o.devices);
    // One more frame than measured where the first is dropped.
    let f1 = f + 1;
    let q = |quick: &'static str, full: &'static str| if o.quick { quick } else { full };
    // Boiling and the stencil time their frames with the devices together; `--model
    // concurrent` leaves out the isolated model's second node, whose frames run one device at
    // a time, so that the host counters printed are those of the frames timed. The stencil
    // warms up a step for each of the two fields a step swaps, so that none is touched first
    // in a timed step.
    let line = match workload {
        "boiling" => format!(
            "--size {} --page 64 --frames {f} --warmup 1 --gif-every 0 --devices {d} --model concurrent",
            q("128", "2048")
        ),
        "quake" => format!(
            "--scene generated --width {} --height {} --page 32 --devices {d} --frames {f1}",
            q("160", "640"),
            q("120", "480")
        ),
        // Under a budget: 1 MiB a device, the out-of-core case.
        "raytrace" => format!(
            "--scene {} --width {} --height {} --budget-mib 1 --devices {d} --frames {f1}",
            q("generated:1", "generated:3"),
            q("64", "320"),
            q("48", "240")
        ),
        "stencil" => format!(
            "--size {} --halo 2 --devices {d} --frames {f} --warmup 2 --model concurrent",
            q("32", "128")
        ),
        // GPU-SM's 5 × 5 filter, read from replicated copies.
        "convolution" => format!(
            "--size {} --filter 5 --devices {d} --frames {f} --warmup 2 --model concurrent",
            q("128", "2048")
        ),
        "vr" => format!(
            "--scene {} --width {} --height {} --frames {f} --warmup 1 --devices {d}",
            q("generated:1", "generated:4"),
            q("64", "320"),
            q("48", "240")
        ),
        _ => String::new(),
    };
    line.split_whitespace().map(String::from).collect()
}

/// Runs `tessera run WORKLOAD ARGS --backend BACKEND --out DIR`; its report.
fn run(exe: &Path, workload: &str, args: &[String], backend: &str, dir: &Path) -> Result<Value> {
    let out = dir.join(format!("{workload}-{backend}"));
    let o = crate::output::child_output(
        Command::new(exe)
            .arg("run")
            .arg(workload)
            .args(args)
            .args(["--backend", backend, "--out"])
            .arg(&out),
    )
    .with_context(|| format!("cannot run {}", exe.display()))?;
    if !o.status.success() {
        // The run's own error lines, not the notes printed before them (a first launch's
        // "compiling kernels ..."); all of its standard error where it said none.
        let err = String::from_utf8_lossy(&o.stderr);
        let said: Vec<&str> = err
            .lines()
            .filter_map(|l| l.strip_prefix("error: "))
            .collect();
        let why = match said.is_empty() {
            true => err.trim().to_string(),
            false => said.join("; "),
        };
        let message = format!("run {workload} --backend {backend} failed: {why}");
        // Options the run refused are this command's options refused: a usage error.
        if o.status.code() == Some(2) {
            return Err(crate::usage(message));
        }
        bail!(message);
    }
    let path = out.join("report.json");
    let text = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(serde_json::from_slice(&text)?)
}

/// A scratch folder for the runs, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        crate::output::forget_scratch(&self.0);
    }
}

pub fn gpu(o: &GpuBenchOpts) -> Result<()> {
    if let Some(w) = crate::lists::repeated(&o.workloads) {
        return Err(crate::usage(format!(
            "--workloads names {w} twice: each workload runs once"
        )));
    }
    if tessera_wgpu::adapters().is_empty() {
        bail!("no GPU adapter found: `bench gpu` needs one (see `tessera devices`)");
    }
    let exe = std::env::current_exe().context("cannot find this binary")?;
    let scratch =
        Scratch(std::env::temp_dir().join(format!("tessera-bench-gpu-{}", std::process::id())));
    crate::output::scratch(&scratch.0);
    create_dir(&scratch.0)?;
    let bar = progress(2 * o.workloads.len() as u64, "gpu");
    let mut rows = Vec::new();
    let (mut adapter, mut cpu_adapter) = (String::new(), String::new());
    for w in &o.workloads {
        let a = args(w, o);
        let cpu = run(&exe, w, &a, "cpu", &scratch.0)?;
        bar.inc(1);
        let gpu = run(&exe, w, &a, "wgpu", &scratch.0)?;
        bar.inc(1);
        if gpu["checksum"] != cpu["checksum"] && gpu["checksum_kind"] == "field" {
            // Fields agree bit for bit where the adapter does not fuse multiply-adds, and
            // within a tolerance where it does (docs/WGPU.md, "Exactness"): a note, not a stop.
            // Not `bar.println`: a bar drawn nowhere (output not a terminal) drops its lines.
            let text = |r: &Value| r["checksum"].as_str().unwrap_or("none").to_string();
            // Boiling's always differs: its kernels' tanh is the GPU's maths library's.
            let why = match w.as_str() {
                "boiling" => ": expected, the GPU's tanh is not the CPU's (WGPU.md, \"Exactness\")",
                _ => "",
            };
            bar.suspend(|| {
                eprintln!(
                    "{w}: the field differs between the backends ({} on the CPU, {} on the GPU){why}",
                    text(&cpu),
                    text(&gpu)
                )
            });
        }
        adapter = gpu["adapter"].as_str().unwrap_or_default().to_string();
        cpu_adapter = cpu["adapter"].as_str().unwrap_or_default().to_string();
        let per_frame = |r: &Value| {
            seconds_per_frame(w, r).context("report.json lacks the times this bench reads")
        };
        rows.push(GpuVsCpu {
            workload: w.clone(),
            cpu: per_frame(&cpu)?,
            gpu: per_frame(&gpu)?,
            gpu_busy: gpu_seconds_per_frame(w, &gpu),
            gpu_host: mean_host(&gpu),
        });
    }
    bar.finish_and_clear();
    outln!(
        "each workload on {} device(s), the CPU backend ({}) against wgpu on {adapter}; measured ms per frame, first frame or warm-up left out",
        o.devices, cpu_adapter,
    );
    out!("{}", gpu_vs_cpu_table(&rows));
    Ok(())
}
