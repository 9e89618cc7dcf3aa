//! `tessera bench overhead`'s measurement: boiling on one device, paged under each procedure
//! and unpaged, side by side. Rounds alternate the sides so that machine noise hits all of
//! them; the medians are compared.

use std::time::Instant;

use tessera_runtime::{HostCounters, HostReport, Partition, Procedure, RuntimeError, System};

use super::math::BoilingParams;
use super::sim::PagedBoiling;
use crate::oversub::median;

/// The paged sides measured, in the order they are printed: a procedure, and whether
/// two-pass runs the parts the device holds in place (`SystemConfig::held_in_place`; the
/// paper's two-pass, which merges every part, beside it).
pub const SIDES: [(Procedure, bool); 3] = [
    (Procedure::TwoPass, true),
    (Procedure::TwoPass, false),
    (Procedure::Relaunch, true),
];

/// Median seconds per frame of each side.
pub struct Overhead {
    pub unpaged: f64,
    /// Per side of [`SIDES`], in its order, with the host's work per paged frame.
    pub paged: Vec<((Procedure, bool), f64, HostReport)>,
    /// The paged node's backend, as it describes itself.
    pub backend: String,
}

/// Measures `rounds` rounds of `frames` frames of each side on a `size`² field of `page`²
/// pages: `system` makes the node of each side (given whether two-pass runs held parts in
/// place), `unpaged` runs one unpaged frame, and
/// `tick` is called after every round. Each side runs uncounted frames first (the paged ones
/// two, the first of which pages everything in): the steady state is what is compared.
pub fn measure<E: From<RuntimeError>>(
    mut system: impl FnMut(bool) -> Result<System, E>,
    (size, page): (u32, u32),
    (rounds, frames): (u32, u32),
    mut unpaged: impl FnMut() -> Result<(), E>,
    mut tick: impl FnMut(),
) -> Result<Overhead, E> {
    let params = BoilingParams::default();
    let mut paged = Vec::new();
    for (_, in_place) in SIDES {
        paged.push(PagedBoiling::new(
            system(in_place)?,
            size,
            size,
            page,
            params,
        )?);
    }
    unpaged()?;
    // Two uncounted frames: the first pages everything in, and its launches may take other
    // paths than a steady frame's (relaunches over lists of invocations, a request pass);
    // the second is the first steady one, so any pipeline only it takes is compiled, on a
    // GPU, before the clock starts.
    for (sim, (p, _)) in paged.iter().zip(SIDES) {
        sim.frame(Partition::Rows, p)?;
        sim.frame(Partition::Rows, p)?;
    }
    let per_frame = |t: Instant| t.elapsed().as_secs_f64() / frames as f64;
    let mut t_unpaged = Vec::new();
    let mut t_paged = vec![Vec::new(); SIDES.len()];
    let mut host = vec![HostCounters::default(); SIDES.len()];
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..frames {
            unpaged()?;
        }
        t_unpaged.push(per_frame(t));
        for (((sim, (p, _)), times), h) in paged.iter().zip(SIDES).zip(&mut t_paged).zip(&mut host)
        {
            let before = sim.sys.host_counters()[0];
            let t = Instant::now();
            for _ in 0..frames {
                sim.frame(Partition::Rows, p)?;
            }
            times.push(per_frame(t));
            h.add(&sim.sys.host_counters()[0].since(&before));
        }
        tick();
    }
    Ok(Overhead {
        unpaged: median(t_unpaged),
        paged: SIDES
            .into_iter()
            .zip(t_paged.into_iter().map(median))
            .zip(&host)
            .map(|((p, t), h)| (p, t, HostReport::of(h, rounds * frames)))
            .collect(),
        backend: paged[0].sys.backend().to_string(),
    })
}

impl Overhead {
    /// The table as `bench overhead` prints it under its header: each side's time per frame
    /// and its ratio to the unpaged one, each paged side's host work per frame, then
    /// `overhead_ratio=` of `procedure` (two-pass: held parts in place, the default).
    pub fn table(&self, procedure: Procedure) -> String {
        let u = self.unpaged;
        let mut s = format!("unpaged                      {:>9.3} ms/frame\n", u * 1e3);
        let mut last = 0.0;
        for &((p, in_place), m, h) in &self.paged {
            let name = match (p, in_place) {
                (Procedure::TwoPass, true) => "paged two-pass",
                (Procedure::TwoPass, false) => "paged two-pass, merge always",
                (Procedure::Relaunch, _) => "paged relaunch",
            };
            s += &format!("{name:<28} {:>9.3} ms/frame  ratio {:.3}\n", m * 1e3, m / u);
            s += &format!(
                "{:<28} host per frame: {:.1} submissions, {:.1} blocking waits, {:.1} GPU waits, {:.0} B read back, {:.1} manager messages\n",
                "",
                h.submissions_per_frame,
                h.blocking_waits_per_frame,
                h.device_waits_per_frame,
                h.bytes_read_back_per_frame,
                h.manager_messages_per_frame
            );
            if p == procedure && in_place {
                last = m / u;
            }
        }
        s + &format!("overhead_ratio={last:.3}\n")
    }
}
