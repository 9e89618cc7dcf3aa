//! `tessera bench overhead`: boiling on one device, paged and unpaged, side by side.
//!
//! Both sides run the same kernel bodies on the same hardware; the paged side goes through
//! page tables, request recording and the memory manager. On the CPU both use the same number
//! of threads; on wgpu the unpaged side is the GPU twin (`UnpagedGpu`: the WGSL bodies on plain
//! arrays) on the paged device's adapter. Measurements of the two alternate so that machine
//! noise hits both; the median of each is compared.

use anyhow::Result;
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::overhead::measure;
use tessera_workloads::boiling::unpaged::UnpagedBoiling;

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
            let mut g = GpuBoiling::new(&tessera_wgpu::AdapterChoice::from_env(), o.size, params)?;
            let what = format!(
                "unpaged: the GPU twin on {} (--threads ignored)",
                g.gpu.adapter_info().name
            );
            (Box::new(move || g.frame()), what)
        }
    })
}

pub fn overhead(o: &BenchOpts) -> Result<()> {
    crate::run::page_fits(o.size, o.page)?;
    let params = BoilingParams::default();
    let threads = if o.node.threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        o.node.threads
    };
    let cfg = o.node.config(1).threads(threads).deferred(o.deferred);
    let (unpaged, unpaged_desc) = unpaged_side(o, params, threads)?;
    let system = |in_place| {
        let cfg = cfg.clone().held_in_place(in_place);
        o.node.system(&cfg).map(|(sys, _)| sys)
    };
    let bar = progress(o.rounds as u64, "overhead");
    let sizes = (o.size, o.page.get());
    let m = measure(system, sizes, (o.rounds, o.frames), unpaged, || bar.inc(1))?;
    bar.finish_and_clear();
    outln!(
        "boiling {s}x{s}, 1 device [{}], page {p}x{p}, {unpaged_desc}, median of {} rounds x {} frames (measured)",
        m.backend,
        o.rounds,
        o.frames,
        s = o.size,
        p = o.page.get()
    );
    out!("{}", m.table(o.procedure));
    Ok(())
}
