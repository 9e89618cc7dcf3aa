//! `tessera bench overhead`: boiling on one device, paged and unpaged, side by side.
//!
//! Both sides run the same kernel bodies on the same hardware; the paged side goes through
//! page tables, request recording and the memory manager. On the CPU both use the same number
//! of threads; on wgpu the unpaged side is the GPU twin (`UnpagedGpu`: the WGSL bodies on plain
//! arrays) on the paged device's adapter. Measurements of the two alternate so that machine
//! noise hits both; the median of each is compared.

use std::time::Instant;

use anyhow::Result;
use tessera_runtime::{HostCounters, HostReport, Partition, Procedure};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::sim::PagedBoiling;
use tessera_workloads::boiling::unpaged::UnpagedBoiling;
use tessera_workloads::oversub::median;

use crate::backend;
use crate::run::progress;
use crate::unpaged_gpu::GpuBoiling;
use crate::{BackendKind, BenchOpts};

/// The unpaged side's frame, and how the header describes it.
type Unpaged = (Box<dyn FnMut() -> Result<()>>, String);

fn unpaged_side(o: &BenchOpts, params: BoilingParams, threads: usize) -> Result<Unpaged> {
    Ok(match o.node.backend {
        BackendKind::Cpu => {
            let mut u = UnpagedBoiling::new(o.size, o.size, params, threads)?;
            let frame = move || {
                u.frame();
                Ok(())
            };
            (Box::new(frame), format!("{threads} threads"))
        }
        BackendKind::Wgpu => {
            let mut g = GpuBoiling::new(&backend::adapter_choice(), o.size, params)?;
            let what = format!(
                "unpaged: the GPU twin on {} (--threads ignored)",
                g.gpu.adapter_info().name
            );
            (Box::new(move || g.frame()), what)
        }
    })
}

pub fn overhead(o: &BenchOpts) -> Result<()> {
    let params = BoilingParams::default();
    let threads = if o.node.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        o.node.threads
    };
    let cfg = o.node.config(1).threads(threads).deferred(o.deferred);
    let procs = [Procedure::TwoPass, Procedure::Relaunch];
    let mut paged = Vec::new();
    for _ in procs {
        let (sys, _) = o.node.system(&cfg)?;
        paged.push(PagedBoiling::new(
            sys,
            o.size,
            o.size,
            o.page.get(),
            params,
        )?);
    }
    let (mut unpaged, unpaged_desc) = unpaged_side(o, params, threads)?;
    // Warm-up: the first paged frame pages everything in; steady state is what is compared.
    unpaged()?;
    for (sim, p) in paged.iter().zip(procs) {
        sim.frame(Partition::Rows, p)?;
    }
    let bar = progress(o.rounds as u64, "overhead");
    let mut t_unpaged = Vec::new();
    let mut t_paged = vec![Vec::new(); procs.len()];
    let mut host = vec![HostCounters::default(); procs.len()];
    for _ in 0..o.rounds {
        let t = Instant::now();
        for _ in 0..o.frames {
            unpaged()?;
        }
        t_unpaged.push(t.elapsed().as_secs_f64() / o.frames as f64);
        for (((sim, p), times), h) in paged.iter().zip(procs).zip(&mut t_paged).zip(&mut host) {
            let before = sim.sys.host_counters()[0];
            let t = Instant::now();
            for _ in 0..o.frames {
                sim.frame(Partition::Rows, p)?;
            }
            times.push(t.elapsed().as_secs_f64() / o.frames as f64);
            h.add(&sim.sys.host_counters()[0].since(&before));
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let u = median(t_unpaged);
    println!(
        "boiling {s}x{s}, 1 device [{}], page {p}x{p}, {unpaged_desc}, median of {} rounds x {} frames (measured)",
        paged[0].sys.backend(),
        o.rounds,
        o.frames,
        s = o.size,
        p = o.page.get()
    );
    println!("unpaged            {:>9.3} ms/frame", u * 1e3);
    let mut last = 0.0;
    for ((p, times), h) in procs.iter().zip(t_paged).zip(&host) {
        let m = median(times);
        let name = match p {
            Procedure::TwoPass => "paged two-pass",
            Procedure::Relaunch => "paged relaunch",
        };
        println!("{name:<18} {:>9.3} ms/frame  ratio {:.3}", m * 1e3, m / u);
        let h = HostReport::of(h, o.rounds * o.frames);
        println!(
            "{:<18} host per frame: {:.1} submissions, {:.1} blocking waits, {:.1} GPU waits, {:.0} B read back, {:.1} manager messages",
            "",
            h.submissions_per_frame,
            h.blocking_waits_per_frame,
            h.device_waits_per_frame,
            h.bytes_read_back_per_frame,
            h.manager_messages_per_frame
        );
        if *p == o.procedure {
            last = m / u;
        }
    }
    println!("overhead_ratio={last:.3}");
    Ok(())
}
