//! The bench on the ray tracer: the working set is measured, the most pages any device holds
//! after a resident frame.

use std::fmt::Write as _;

use tessera_runtime::{Partition, Policy};

use super::{
    host_cells, in_trial, median, run_rounds, Bench, Loads, MakeNode, Outcome, OversubError, Trial,
    HOST_COLUMNS,
};
use crate::boiling::reference::{checksum_hex, fnv1a};
use crate::raytrace::rays::View;
use crate::raytrace::render::{RayRenderer, RenderOptions};
use crate::raytrace::scene::PagedScene;
use crate::raytrace::{check_budget, MIN_BUDGET_PAGES};

/// The scene and the image the bench renders.
pub struct RaytraceScene {
    pub scene: PagedScene,
    pub view: View,
    /// The scene's name in the table.
    pub name: String,
    pub instances: u32,
    pub width: u32,
    pub height: u32,
    pub ao_samples: u32,
    pub ao_radius: f32,
}

fn describe(setting: Option<(f64, Policy)>) -> String {
    match setting {
        None => "the resident run".into(),
        Some((r, p)) => format!("ratio {r} with policy {p}"),
    }
}

pub(super) fn run(
    b: &Bench,
    s: RaytraceScene,
    make: &mut MakeNode,
    mut tick: impl FnMut(),
) -> Result<Outcome, OversubError> {
    let devices = b.node.devices;
    let opts = RenderOptions {
        width: s.width,
        height: s.height,
        page: b.page.get(),
        ao_samples: s.ao_samples,
        ao_radius: s.ao_radius,
        partition: Partition::Rows,
        procedure: b.procedure,
        filter: None,
    };
    let page_bytes = b.page.get() as u64 * b.page.get() as u64 * 4;
    let base_cfg = b.node.clone().record_trace(true).thrashing(b.thrashing);
    // The working set: pages each device holds after a resident frame.
    let ws_pages = {
        let sys = make(&base_cfg).map_err(OversubError::Node)?;
        let mut r = RayRenderer::new(sys, s.scene.clone(), s.view, opts)?;
        r.frame()?;
        let res = r.residency()?;
        (0..devices)
            .map(|d| res.iter().map(|x| x.per_device[d]).sum::<u64>())
            .max()
            .unwrap_or(0)
    };
    if let Some(&ratio) = b
        .ratios
        .iter()
        .find(|&&r| ((ws_pages as f64 / r) as u64) < MIN_BUDGET_PAGES)
    {
        return Err(OversubError::RatioTooLarge {
            ratio,
            working_set: ws_pages,
            least: MIN_BUDGET_PAGES,
            largest: ws_pages as f64 / MIN_BUDGET_PAGES as f64,
        });
    }
    let budget_of = |ratio: f64| (ws_pages as f64 / ratio) as u64 * page_bytes;
    let mut settings: Vec<Option<(f64, Policy)>> = vec![None];
    for &ratio in &b.ratios {
        for &p in &b.policies {
            settings.push(Some((ratio, p)));
        }
    }
    let mut configs = Vec::new();
    for setting in settings {
        let mut cfg = base_cfg.clone();
        if let Some((ratio, policy)) = setting {
            let budget = budget_of(ratio);
            check_budget(budget, b.page.get())?;
            cfg = cfg.budget(budget).memory(budget).policy(policy);
        } else {
            cfg = cfg.memory((ws_pages * page_bytes).max(page_bytes));
        }
        let sys = make(&cfg).map_err(OversubError::Node)?;
        let r = RayRenderer::new(sys, s.scene.clone(), s.view, opts)?;
        configs.push(Trial::new(setting, r));
    }
    let baseline = run_rounds(
        &mut configs,
        b.rounds,
        b.frames,
        |r, setting| in_trial(r.frame(), || describe(setting.copied())),
        |r| &r.sys,
        &mut tick,
    )?;
    let measured = (b.frames * b.rounds) as f64;
    let all_frames = measured + 1.0;
    let resident = median(configs[0].times.clone());
    let want = configs[0].subject.image()?;
    let mut text = String::new();
    writeln!(
        text,
        "raytrace {} x{} ({} triangles), {}x{}, {} AO rays, {} device(s) [{}], page {p}x{p} ({page_bytes} B), {}, working set {ws_pages} pages per device, thrashing {}, median of {} rounds x {} frames (measured)",
        s.name,
        s.instances,
        configs[0].subject.scene.triangle_count,
        s.width,
        s.height,
        s.ao_samples,
        devices,
        configs[0].subject.sys.backend(),
        b.procedure,
        b.thrashing,
        b.rounds,
        b.frames,
        p = b.page.get(),
    )
    .unwrap();
    let resident_host = configs[0].host_per_frame(b.frames * b.rounds);
    writeln!(
        text,
        "resident  {:>9.1} ms/frame, {:.1} blocking waits/frame ({:.1} for the GPU)",
        resident * 1e3,
        resident_host.blocking_waits_per_frame,
        resident_host.device_waits_per_frame
    )
    .unwrap();
    writeln!(
        text,
        "{:>6} {:>7} {:>10} {:>8} {:>11} {:>11} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "ratio",
        "policy",
        "ms/frame",
        "vs res.",
        "relaunch/f",
        "suspend/f",
        "evict/f",
        "MiB mv/f",
        "loads/f",
        "OPT ld/f",
        "OPT res.",
        "waits/f",
        "gpu w/f"
    )
    .unwrap();
    let mut csv = format!("ratio,policy,budget_bytes,wall_ms_per_frame,throughput_vs_resident,relaunched_invocations_per_frame,suspended_per_frame,evictions_per_frame,bytes_moved_per_frame,loads_per_frame,opt_loads_per_frame,opt_throughput_vs_resident_modeled,{HOST_COLUMNS},image_equal,checksum\n");
    let mut mismatched = Vec::new();
    for (c, base) in configs.iter().zip(&baseline).skip(1) {
        let Some((ratio, policy)) = c.setting else {
            continue;
        };
        let t = median(c.times.clone());
        let image = c.subject.image()?;
        let equal = image == want;
        let checksum = checksum_hex(fnv1a(image.iter().copied()));
        if !equal {
            mismatched.push(describe(c.setting));
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
        let host = c.host_per_frame(b.frames * b.rounds);
        writeln!(
            text,
            "{:>6} {:>7} {:>10.1} {:>8.3} {:>11.0} {:>11.0} {:>9.0} {:>10.2} {:>9.0} {:>9.0} {:>9.3} {:>8.1} {:>8.1}",
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
            host.blocking_waits_per_frame,
            host.device_waits_per_frame,
        )
        .unwrap();
        writeln!(
            csv,
            "{ratio},{},{},{:.3},{:.4},{:.1},{:.1},{:.1},{:.0},{:.1},{:.1},{:.4},{},{equal},{checksum}",
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
            host_cells(&host),
        )
        .unwrap();
    }
    Ok(Outcome {
        text,
        csv,
        csv_name: "oversubscription-raytrace.csv",
        chart: None,
        differs: (!mismatched.is_empty()).then(|| {
            format!(
                "oversubscribed images differ from the resident one: {}",
                mismatched.join("; ")
            )
        }),
        agreed: format!(
            "every image equals the resident one: {}",
            checksum_hex(fnv1a(want.iter().copied()))
        ),
    })
}
