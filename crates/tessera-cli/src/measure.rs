//! Runs boiling frame by frame and pass by pass, so that each pass's page moves can be charged
//! to a topology: `run` and both sweeps go through [`run_boiling`], which is why a sweep's CSV
//! row and a `tessera run` report of the same settings hold the same counters.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use tessera_core::topology::{Endpoint, Topology, Transfer};
use tessera_core::{ObjectDesc, TexelFormat};
use tessera_runtime::{DeviceTraffic, PassStats, StageTimes, SystemConfig};
use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::sim::PagedBoiling;

use crate::RunOpts;

/// One texture of the run: its name, global page range and description.
#[derive(Clone, Debug)]
pub struct TextureInfo {
    pub name: &'static str,
    pub pages: std::ops::Range<u64>,
    pub desc: ObjectDesc,
}

/// Modeled time summed over the measured frames' passes.
#[derive(Clone, Debug, Default)]
pub struct Modeled {
    /// Σ over passes of the slowest device's work (measured).
    pub device_seconds: f64,
    /// Σ over passes of the busiest link's time (modeled).
    pub transfer_seconds: f64,
    /// Each link's busy time over the measured frames, indexed like `Topology::links`.
    pub link_seconds: Vec<f64>,
}

impl Modeled {
    pub fn seconds(&self) -> f64 {
        self.device_seconds + self.transfer_seconds
    }
}

/// What a run leaves behind for its report.
pub struct Run {
    pub sim: PagedBoiling,
    /// The wgpu adapter the devices ran on; none on the CPU backend.
    pub adapter_name: Option<String>,
    pub textures: Vec<TextureInfo>,
    /// Each device's stats summed over the measured frames (warm-up frames excluded).
    pub per_device: Vec<PassStats>,
    /// Measured wall time of the measured frames.
    pub wall: f64,
    /// Traffic counters when the measured frames began.
    pub baseline: Vec<DeviceTraffic>,
    pub modeled: Modeled,
}

/// Builds a node and the simulation for `o`, runs `o.warmup` frames and then `o.frames`
/// measured ones, calling `after_frame` with the simulation and the number of frames run so
/// far (warm-up included) after every frame.
///
/// `after_frame`'s time is left out of the measured wall time: it is the caller's progress bar
/// and animation sampling, not the memory's work.
pub fn run_boiling(
    o: &RunOpts,
    topo: &Topology,
    mut after_frame: impl FnMut(&PagedBoiling, u32) -> Result<()>,
) -> Result<Run> {
    topo.check_devices(o.devices)?;
    let (sys, adapter_name) = crate::backend::system(
        o.node.backend,
        &SystemConfig {
            devices: o.devices,
            cpu_threads: o.node.threads,
            budget_bytes: crate::budget_bytes(o.node.budget_mib),
            policy: o.node.policy,
            thrashing: o.node.thrashing,
            prefetch: o.node.prefetch,
            home_file: o.node.home_file.clone(),
            ..Default::default()
        },
    )?;
    // Validate the partition before creating textures so the error names the real problem.
    o.partition.regions(o.size, o.size, o.devices as u32)?;
    let sim = PagedBoiling::new(sys, o.size, o.size, o.page, BoilingParams::default())?;
    let textures = textures(&sim, o.page)?;
    let mut modeled = Modeled {
        link_seconds: vec![0.0; topo.links().len()],
        ..Default::default()
    };
    for n in 1..=o.warmup {
        frame(&sim, o, topo, &mut Modeled::default())?;
        after_frame(&sim, n)?;
    }
    let baseline = sim.sys.mm.traffic()?;
    let mut per_device = vec![PassStats::default(); o.devices];
    let mut wall = 0.0;
    for n in 1..=o.frames {
        let t = Instant::now();
        let stats = frame(&sim, o, topo, &mut modeled)?;
        wall += t.elapsed().as_secs_f64();
        for (a, s) in per_device.iter_mut().zip(&stats) {
            a.add(s);
        }
        after_frame(&sim, o.warmup + n)?;
    }
    Ok(Run {
        sim,
        adapter_name,
        textures,
        per_device,
        wall,
        baseline,
        modeled,
    })
}

/// One frame, pass by pass: the same passes in the same order as `PagedBoiling::frame`, with
/// the traffic counters read around each pass to model it.
fn frame(
    sim: &PagedBoiling,
    o: &RunOpts,
    topo: &Topology,
    modeled: &mut Modeled,
) -> Result<Vec<PassStats>> {
    let (w, h) = (sim.ctx.width, sim.ctx.height);
    let mut total = vec![PassStats::default(); sim.sys.devices()];
    for spec in sim.passes() {
        // A display pass reports all its time as display; run it as an ordinary pass to keep
        // its device work apart from its waiting, then lump it as the runtime would.
        let mut plain = spec.clone();
        plain.display = false;
        let before = sim.sys.mm.traffic()?;
        let mut per = sim.sys.run_pass(&plain, w, h, o.partition, o.procedure)?;
        let after = sim.sys.mm.traffic()?;
        let busy: Vec<f64> = per.iter().map(|s| device_work(&s.stages)).collect();
        let moves = transfers(topo, &before, &after)?;
        let pass = topo.pass_time(&busy, &moves)?;
        if modeled.link_seconds.len() == pass.link_seconds.len() {
            for (a, s) in modeled.link_seconds.iter_mut().zip(&pass.link_seconds) {
                *a += s;
            }
        }
        modeled.device_seconds += pass.device_seconds;
        modeled.transfer_seconds += pass.transfer_seconds;
        if spec.display {
            for s in &mut per {
                s.lump_into_display();
            }
        }
        for (t, s) in total.iter_mut().zip(&per) {
            t.add(s);
        }
    }
    Ok(total)
}

/// A device's own work in a pass: every stage but the waits for request batches, whose
/// measured time on the CPU backend is the memory manager copying bytes in host memory; the
/// topology model replaces it.
pub fn device_work(s: &StageTimes) -> f64 {
    s.request_pass + s.uniquify + s.compute + s.page_writes + s.display
}

/// The page moves between two traffic snapshots, as transfers a topology can route.
///
/// The counters name a device-to-device move's destination only. With two devices the source
/// is the other one; with more, the move is charged as coming from the source whose route is
/// slowest, so the model errs towards too slow (docs/EVALUATION.md).
pub fn transfers(
    topo: &Topology,
    before: &[DeviceTraffic],
    after: &[DeviceTraffic],
) -> Result<Vec<Transfer>> {
    let n = after.len();
    let mut out = Vec::new();
    for (d, &a) in after.iter().enumerate() {
        let b = before.get(d).copied().unwrap_or_default();
        let dev = Endpoint::Device(d);
        let h2d = a.host_to_device.since(b.host_to_device);
        let d2h = a.device_to_host.since(b.device_to_host);
        let d2d = a.device_to_device.since(b.device_to_device);
        out.push(Transfer {
            from: Endpoint::Host,
            to: dev,
            pages: h2d.pages,
            bytes: h2d.bytes,
        });
        out.push(Transfer {
            from: dev,
            to: Endpoint::Host,
            pages: d2h.pages,
            bytes: d2h.bytes,
        });
        if d2d.pages > 0 {
            let mut worst: Option<(f64, usize)> = None;
            for s in (0..n).filter(|&s| s != d) {
                let t = Transfer {
                    from: Endpoint::Device(s),
                    to: dev,
                    pages: d2d.pages,
                    bytes: d2d.bytes,
                };
                let secs: f64 = topo.link_seconds(&[t])?.iter().sum();
                match worst {
                    Some((w, _)) if w >= secs => {}
                    _ => worst = Some((secs, s)),
                }
            }
            let Some((_, s)) = worst else {
                bail!("device{d} received pages from another device in a one-device run");
            };
            out.push(Transfer {
                from: Endpoint::Device(s),
                to: dev,
                pages: d2d.pages,
                bytes: d2d.bytes,
            });
        }
    }
    Ok(out)
}

/// The simulation's textures with their page ranges, from the passes' bindings.
fn textures(sim: &PagedBoiling, page: u32) -> Result<Vec<TextureInfo>> {
    let t = sim.ctx.tex;
    let (w, h) = (sim.ctx.width, sim.ctx.height);
    let named = [
        ("field", t.field, TexelFormat::R32Float),
        ("border", t.border, TexelFormat::R32Float),
        ("diffusion", t.diffusion, TexelFormat::R32Float),
        ("buoyancy", t.buoyancy, TexelFormat::R32Float),
        ("display", t.display, TexelFormat::Rgba8Unorm),
    ];
    named
        .into_iter()
        .map(|(name, id, format)| {
            let b = sim
                .passes()
                .iter()
                .flat_map(|p| p.bindings.iter())
                .find(|b| b.id == id)
                .with_context(|| format!("no pass binds the {name} texture"))?;
            let desc = ObjectDesc::texture(w, h, format, page)?;
            let pages = b.page_offset..b.pages_end;
            if pages.end - pages.start != desc.page_count() {
                bail!(
                    "the {name} texture spans {} pages, expected {}",
                    pages.end - pages.start,
                    desc.page_count()
                );
            }
            Ok(TextureInfo { name, pages, desc })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_runtime::LinkCounters;

    fn traffic(h2d: (u64, u64), d2h: (u64, u64), d2d: (u64, u64)) -> DeviceTraffic {
        let c = |(pages, bytes)| LinkCounters { pages, bytes };
        DeviceTraffic {
            host_to_device: c(h2d),
            device_to_host: c(d2h),
            device_to_device: c(d2d),
            ..Default::default()
        }
    }

    #[test]
    fn counters_become_routed_transfers() {
        let topo = Topology::preset("pcie3-x16", 2).unwrap();
        let before = vec![traffic((1, 100), (0, 0), (0, 0)); 2];
        let after = vec![
            traffic((4, 400), (2, 200), (0, 0)),
            traffic((1, 100), (0, 0), (3, 300)),
        ];
        let t = transfers(&topo, &before, &after).unwrap();
        let find = |from, to| t.iter().find(|t| t.from == from && t.to == to).copied();
        let (h, d0, d1) = (Endpoint::Host, Endpoint::Device(0), Endpoint::Device(1));
        assert_eq!(find(h, d0).map(|t| (t.pages, t.bytes)), Some((3, 300)));
        assert_eq!(find(d0, h).map(|t| (t.pages, t.bytes)), Some((2, 200)));
        assert_eq!(find(h, d1).map(|t| (t.pages, t.bytes)), Some((0, 0)));
        // With two devices a move into device1 can only come from device0.
        assert_eq!(find(d0, d1).map(|t| (t.pages, t.bytes)), Some((3, 300)));
    }

    #[test]
    fn an_unknown_source_is_charged_to_the_slowest_route() {
        // device1 has a fast direct link to device0; device2 must go through host.
        let topo = Topology::from_toml_str(
            r#"
[[device]]
id = 0
[[device]]
id = 1
[[device]]
id = 2
[[link]]
from = "host"
to = "device0"
bandwidth_gb_per_s = 10
[[link]]
from = "host"
to = "device1"
bandwidth_gb_per_s = 10
[[link]]
from = "host"
to = "device2"
bandwidth_gb_per_s = 10
[[link]]
from = "device1"
to = "device0"
bandwidth_gb_per_s = 100
"#,
            "three.toml",
        )
        .unwrap();
        let zero = vec![DeviceTraffic::default(); 3];
        let mut after = zero.clone();
        after[0] = traffic((0, 0), (0, 0), (1, 1000));
        let t = transfers(&topo, &zero, &after).unwrap();
        let d2d: Vec<_> = t
            .iter()
            .filter(|t| t.pages > 0 && t.to == Endpoint::Device(0))
            .collect();
        assert_eq!(d2d.len(), 1);
        assert_eq!(d2d[0].from, Endpoint::Device(2));
    }

    #[test]
    fn device_work_leaves_out_the_waits() {
        let s = StageTimes {
            request_pass: 1.0,
            uniquify: 2.0,
            read_requests: 100.0,
            compute: 4.0,
            write_requests: 200.0,
            page_writes: 8.0,
            display: 16.0,
        };
        assert_eq!(device_work(&s), 31.0);
    }
}
