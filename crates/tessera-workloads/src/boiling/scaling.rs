//! `tessera bench scaling`'s figures: the median run of each device count, and the tables
//! that split its modeled frame time into work, link and manager.

use super::modeled::Figures;

/// Runs every count `rounds` times, interleaved (round 1 runs every count, then round 2 ...):
/// `run(round, count, write_home)` for each of the `counts` counts and, where
/// `against_write_home`, each again under the write-home rule after them. Each count's runs,
/// and its write-home runs (none where not asked for).
#[allow(clippy::type_complexity)]
pub fn run_rounds<E>(
    counts: usize,
    rounds: u32,
    against_write_home: bool,
    mut run: impl FnMut(u32, usize, bool) -> Result<Figures, E>,
) -> Result<(Vec<Vec<Figures>>, Vec<Vec<Figures>>), E> {
    let mut runs: [Vec<Vec<Figures>>; 2] = Default::default();
    let rules = if against_write_home { 2 } else { 1 };
    for rule in runs.iter_mut().take(rules) {
        rule.resize_with(counts, Vec::new);
    }
    for r in 1..=rounds {
        for (rule, counts) in runs.iter_mut().enumerate() {
            for (i, v) in counts.iter_mut().enumerate() {
                v.push(run(r, i, rule == 1)?);
            }
        }
    }
    let [runs, home_runs] = runs;
    Ok((runs, home_runs))
}

/// Each count's run of median modeled time, and the range of the modeled times it was chosen
/// from. Its steady-state estimate is the median one of the count's runs, whichever run that
/// came from.
pub fn medians(runs: Vec<Vec<Figures>>) -> (Vec<Figures>, Vec<(f64, f64)>) {
    let mut ranges = Vec::new();
    let out = runs
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| a.steady.seconds().total_cmp(&b.steady.seconds()));
            let steady = v.get(v.len() / 2).map(|p| p.steady).unwrap_or_default();
            for p in &mut v {
                p.steady = steady;
            }
            v.sort_by(|a, b| a.modeled.total_cmp(&b.modeled));
            let lo = v.first().map_or(0.0, |p| p.modeled);
            let hi = v.last().map_or(0.0, |p| p.modeled);
            ranges.push((lo, hi));
            v.swap_remove(v.len() / 2)
        })
        .collect();
    (out, ranges)
}

fn ms_list(v: &[f64]) -> String {
    v.iter()
        .map(|s| format!("{:.1}", s * 1e3))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where the runs of one count differ by more than this (slowest modeled frame over fastest),
/// the speed-ups divide figures that the machine's other work moved.
const NOISY_SPREAD: f64 = 1.25;

/// A warning when the modeled frames of some count varied between runs by more than
/// [`NOISY_SPREAD`]: each speed-up is a ratio of two such medians, so it moves by as much, and
/// a figure above its ideal says nothing about the devices.
fn noise_warning(out: &[Figures], ranges: &[(f64, f64)]) -> Option<String> {
    let (devices, spread) = out
        .iter()
        .zip(ranges)
        .filter(|(_, &(lo, _))| lo > 0.0)
        .map(|(p, &(lo, hi))| (p.devices, hi / lo))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    (spread > NOISY_SPREAD).then(|| {
        format!(
            "warning: the modeled frame of {devices} device(s) varied {spread:.2}× between runs \
             (slowest over fastest): this machine's other work moved the timings, and the \
             speed-ups above move with them; rerun on an idle machine, or with more --rounds"
        )
    })
}

/// The tables of `out` (each count's median run, `ranges` their spread over `rounds` runs)
/// and, where the write-home rule ran too, of `home_out` beside it; None when no count ran.
/// `isolated`: the isolated-device model made the figures (else the concurrent one, whose
/// work is timed with the devices together and has no manager term).
pub fn table(
    out: &[Figures],
    ranges: &[(f64, f64)],
    home_out: &[Figures],
    rounds: u32,
    isolated: bool,
) -> Option<String> {
    let base = out.first().map(|p| (p.devices as f64, p.modeled))?;
    let steady_base = out.first().map(|p| p.steady.seconds())?;
    let mut s = String::new();
    if isolated {
        ln!(s, "modeled ms/frame = slowest device's work alone + busiest link + memory manager (all per frame)");
    } else {
        ln!(s, "modeled ms/frame = slowest device's work with all devices together (their waits for the memory manager inside it) + busiest link (all per frame)");
    }
    ln!(s, "(copies: the manager's page copies, timed and left out of its time: the links charge those moves)");
    ln!(s, "(steady: per pass the slowest device's median over the frames, the manager's medians; docs/EVALUATION.md)");
    ln!(
        s,
        "{:>7} {:>11} {:>9} {:>6} {:>10} {:>9} {:>8} {:>9} {:>8} {:>10} {:>7} {:>9} {:>9} {:>13}",
        "devices",
        "modeled ms",
        "speed-up",
        "ideal",
        "efficiency",
        "work ms",
        "link ms",
        "manager",
        "copies",
        "steady ms",
        "steady",
        "req/f",
        "MiB/f",
        "fps together"
    );
    for p in out {
        let speedup = base.1 / p.modeled;
        let ideal = p.devices as f64 / base.0;
        ln!(
 s,
            "{:>7} {:>11.2} {:>9.2} {:>6.1} {:>9.0}% {:>9.2} {:>8.3} {:>9.2} {:>8.2} {:>10.2} {:>7.2} {:>9.1} {:>9.2} {:>13.2}",
            p.devices,
            p.modeled * 1e3,
            speedup,
            ideal,
            100.0 * speedup / ideal,
            p.work * 1e3,
            p.link * 1e3,
            p.manager * 1e3,
            p.copies * 1e3,
            p.steady.seconds() * 1e3,
            steady_base / p.steady.seconds().max(f64::MIN_POSITIVE),
            p.requests,
            p.moved_mib,
            p.measured_fps
        );
    }
    ln!(s, "(fps together: measured wall time with the devices sharing this machine; not a multi-GPU figure)");
    if rounds > 1 {
        let spread: Vec<String> = out
            .iter()
            .zip(ranges)
            .map(|(p, (lo, hi))| format!("{}: {:.1}–{:.1}", p.devices, lo * 1e3, hi * 1e3))
            .collect();
        ln!(
            s,
            "modeled ms/frame over the runs, min–max: {}",
            spread.join(", ")
        );
        if let Some(w) = noise_warning(out, ranges) {
            ln!(s, "{w}");
        }
    }
    if isolated {
        ln!(
            s,
            "work per device, ms/frame: alone (the model's) | with all devices together (measured)"
        );
        for p in out {
            let alone: f64 = p.per_device_work.iter().sum();
            ln!(
                s,
                "{:>7}: {} | {}   (sum alone {:.1})",
                p.devices,
                ms_list(&p.per_device_work),
                ms_list(&p.concurrent_work),
                alone * 1e3
            );
        }
    } else {
        // One set of figures: the model's work is the one timed with the devices together.
        ln!(
            s,
            "work per device, ms/frame, with all devices together (measured; the model's)"
        );
        for p in out {
            ln!(s, "{:>7}: {}", p.devices, ms_list(&p.concurrent_work));
        }
    }
    ln!(
        s,
        "host work per device and frame (mean over the devices of the modeled frames):"
    );
    let host: Vec<_> = out.iter().map(|p| (p.devices, p.host)).collect();
    s += &crate::host_table("devices", &host, None);
    if let Some(home_base) = home_out.first().map(|p| p.modeled) {
        ln!(
 s,
            "owned pages against the paper's write-home rule, same rounds (busiest link and modeled ms per frame):"
        );
        // Two header lines: each quantity over its two rules, so no heading runs into the next.
        let over = format!(
            "{:>7}  {:^22}  {:^22}  {:^22}",
            "", "busiest link, ms", "modeled, ms/frame", "speed-up"
        );
        ln!(s, "{}", over.trim_end());
        ln!(
            s,
            "{:>7}  {:>12} {:>9}  {:>12} {:>9}  {:>12} {:>9}",
            "devices",
            "write-home",
            "owned",
            "write-home",
            "owned",
            "write-home",
            "owned"
        );
        for (h, p) in home_out.iter().zip(out) {
            ln!(
                s,
                "{:>7}  {:>12.3} {:>9.3}  {:>12.2} {:>9.2}  {:>12.2} {:>9.2}",
                p.devices,
                h.link * 1e3,
                p.link * 1e3,
                h.modeled * 1e3,
                p.modeled * 1e3,
                home_base / h.modeled,
                base.1 / p.modeled
            );
        }
        for h in home_out {
            ln!(
                s,
                "speedup_write_home_{}={:.3} link_ms_write_home_{}={:.4}",
                h.devices,
                home_base / h.modeled,
                h.devices,
                h.link * 1e3
            );
        }
    }
    for p in out {
        ln!(s, "link_ms_{}={:.4}", p.devices, p.link * 1e3);
    }
    for p in out {
        ln!(
            s,
            "speedup_{}={:.3} ideal_{}={:.3} speedup_steady_{}={:.3}",
            p.devices,
            base.1 / p.modeled,
            p.devices,
            p.devices as f64 / base.0,
            p.devices,
            steady_base / p.steady.seconds().max(f64::MIN_POSITIVE)
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(devices: &[usize]) -> Vec<Figures> {
        devices
            .iter()
            .map(|&devices| Figures {
                devices,
                modeled: 0.1 / devices as f64,
                ..Figures::default()
            })
            .collect()
    }

    #[test]
    fn runs_that_differ_by_more_than_a_quarter_are_said_to_be_noisy() {
        let out = counts(&[1, 2, 4]);
        // 1.20 at most: quiet enough.
        let quiet = [(0.100, 0.120), (0.050, 0.055), (0.025, 0.026)];
        assert_eq!(noise_warning(&out, &quiet), None);
        let t = table(&out, &quiet, &[], 3, true).unwrap();
        assert!(!t.contains("warning"), "{t}");
        // The 2-device runs: 41.8 to 58.1 ms, 1.39×, the widest, is the one named.
        let noisy = [(0.100, 0.120), (0.0418, 0.0581), (0.025, 0.030)];
        let w = noise_warning(&out, &noisy).unwrap();
        assert!(w.contains("of 2 device(s) varied 1.39×"), "{w}");
        let t = table(&out, &noisy, &[], 3, true).unwrap();
        assert!(t.contains(&w), "{t}");
        // One run has no spread to speak of.
        assert!(!table(&out, &noisy, &[], 1, true)
            .unwrap()
            .contains("warning"));
    }

    /// Under the concurrent model nothing is timed alone and the manager has no term of its
    /// own: the table says what its figures are, where it printed the isolated model's labels
    /// over two copies of one list.
    #[test]
    fn the_concurrent_models_table_speaks_of_work_together() {
        let out = counts(&[1, 2]);
        let ranges = [(0.1, 0.1), (0.05, 0.05)];
        let t = table(&out, &ranges, &[], 1, false).unwrap();
        assert!(!t.contains("alone"), "{t}");
        assert!(
            t.contains("with all devices together (measured; the model's)"),
            "{t}"
        );
        assert!(table(&out, &ranges, &[], 1, true)
            .unwrap()
            .contains("work alone"));
    }
}
