//! Modeled time: a pass's measured device work, the page moves the memory manager counted
//! around it and the topology's links, charged together into one modeled time. Every
//! workload's runner charges its passes (or phases) here, so every workload is modeled alike
//! (docs/EVALUATION.md, "Timing devices alone").

use std::collections::VecDeque;

use tessera_model::{Endpoint, RemoteUse, Topology, TopologyError, Transfer};

use crate::driver::{PassStats, StageTimes};
use crate::stats::DeviceTraffic;
use crate::system::Schedule;

/// How a run's modeled time is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Model {
    /// Each device's work timed alone, the devices run one at a time by a second pass over
    /// the same frames or steps (docs/EVALUATION.md, "The isolated-device model").
    Isolated,
    /// Each device's work timed while all of them ran together.
    Concurrent,
}

/// Why traffic counters could not be charged to a topology.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModeledError {
    /// The memory manager counted a device-to-device move whose source is the device itself.
    #[error("device{device} counted a page move from itself")]
    SelfMove { device: usize },
    /// The pages a device received from other devices do not add up to those counted per
    /// source, so they cannot be routed.
    #[error("device{device} received {received} pages from other devices but {counted} were counted by source")]
    Uncounted {
        device: usize,
        received: u64,
        counted: u64,
    },
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// The frames [`Modeled::steady`] takes its medians over, the latest ones: enough for a
/// median to pass over a machine's disturbances, and a bound on what a long run keeps (each
/// frame's passes are a few hundred bytes, which a run of a million frames would otherwise
/// hold to its end).
pub const STEADY_WINDOW: u32 = 1000;

/// Modeled time summed over the modeled frames' passes.
#[derive(Clone, Debug, Default)]
pub struct Modeled {
    /// Σ over passes of the slowest device's work (measured; alone, in the isolated model).
    pub device_seconds: f64,
    /// Σ over passes of the busiest link's time (modeled).
    pub transfer_seconds: f64,
    /// Σ over passes of the memory manager's time serving the devices' batches, summed over
    /// devices (measured; zero in the concurrent model, which leaves it out).
    pub manager_seconds: f64,
    /// Each link's busy time over the modeled frames, indexed like `Topology::links`.
    pub link_seconds: Vec<f64>,
    /// Per device, Σ over passes of its own work (measured).
    pub work_per_device: Vec<f64>,
    /// Per device, Σ over passes of the manager's time serving it (measured): in the
    /// concurrent model its waits for the manager, which that model charges nowhere.
    pub manager_per_device: Vec<f64>,
    /// Σ over passes of the host's page copies made during the devices' waits for the
    /// manager (measured; isolated model only): taken out of `manager_seconds`, because the
    /// links charge those moves already.
    pub copy_seconds: f64,
    /// Σ over passes of what remote accesses (`AccessMode::Remote`) add to the slowest
    /// device's work (modeled by `Topology::remote_pass_time`; included in
    /// `device_seconds`).
    pub remote_seconds: f64,
    /// The figures of every pass charged in the last [`STEADY_WINDOW`] frames marked with
    /// [`Modeled::next_frame`], for [`Modeled::steady`]; older frames' passes are dropped as
    /// frames begin, so a run of any length keeps a bounded record.
    pub samples: VecDeque<PassSample>,
    /// Frames begun with [`Modeled::next_frame`].
    pub frames: u32,
    /// The position in its frame of the next pass charged.
    pub position: usize,
}

/// One charged pass, as [`Modeled::steady`] takes it: its position in its frame, each
/// device's work and the memory manager's time serving it, and the rest of the pass.
#[derive(Clone, Debug, Default)]
pub struct PassSample {
    /// The frame it was charged in ([`Modeled::frames`] at the time).
    pub frame: u32,
    pub position: usize,
    pub work: Vec<f64>,
    pub manager: Vec<f64>,
    /// What the pass's device part adds to the slowest device's bare work (remote accesses,
    /// moves during launches).
    pub beyond_work: f64,
    pub transfer_seconds: f64,
}

/// [`Modeled::steady`]'s estimate of one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Steady {
    /// Σ over a frame's passes of the slowest device's median work.
    pub device_seconds: f64,
    pub transfer_seconds: f64,
    pub manager_seconds: f64,
}

impl Steady {
    pub fn seconds(&self) -> f64 {
        self.device_seconds + self.transfer_seconds + self.manager_seconds
    }
}

impl Modeled {
    pub fn seconds(&self) -> f64 {
        self.device_seconds + self.transfer_seconds + self.manager_seconds
    }

    /// Marks the start of a frame: the passes charged from here on are that frame's, in order.
    pub fn next_frame(&mut self) {
        self.frames += 1;
        self.position = 0;
        let first = self.first_kept_frame();
        while self.samples.front().is_some_and(|p| p.frame < first) {
            self.samples.pop_front();
        }
    }

    /// The earliest frame whose passes [`Modeled::steady`] still takes.
    fn first_kept_frame(&self) -> u32 {
        self.frames.saturating_sub(STEADY_WINDOW - 1).max(1)
    }

    /// One frame in the steady state, from frames that repeat the same passes over the same
    /// bands (callers mark them with [`Modeled::next_frame`]): per pass position, each device's
    /// median work and median manager time over the frames (the last [`STEADY_WINDOW`] of
    /// them), then the slowest device's median, the links' median and the manager's medians
    /// summed, as [`charge`] combines one pass.
    ///
    /// The sum over passes of the slowest device's measured work is an upward-biased estimate
    /// when each device is timed once per pass on a shared machine: the maximum of several
    /// noisy timings exceeds the maximum of their typical values, more so with more devices
    /// (docs/EVALUATION.md, "The steady-state estimate"). A pass position seen in only some
    /// frames counts in proportion. `None` before any frame was marked.
    pub fn steady(&self) -> Option<Steady> {
        if self.frames == 0 || self.samples.is_empty() {
            return None;
        }
        let positions = self.samples.iter().map(|p| p.position).max().unwrap_or(0) + 1;
        let mut out = Steady::default();
        for position in 0..positions {
            let at: Vec<&PassSample> = self
                .samples
                .iter()
                .filter(|p| p.position == position)
                .collect();
            if at.is_empty() {
                continue;
            }
            let frames = self.frames - self.first_kept_frame() + 1;
            let share = at.len() as f64 / frames as f64;
            let devices = at.iter().map(|p| p.work.len()).max().unwrap_or(0);
            let per_device = |f: fn(&PassSample) -> &Vec<f64>| -> Vec<f64> {
                (0..devices)
                    .map(|d| median(at.iter().map(|p| f(p).get(d).copied().unwrap_or(0.0))))
                    .collect()
            };
            let work = per_device(|p| &p.work).into_iter().fold(0.0, f64::max);
            let beyond = median(at.iter().map(|p| p.beyond_work));
            out.device_seconds += share * (work + beyond);
            out.transfer_seconds += share * median(at.iter().map(|p| p.transfer_seconds));
            out.manager_seconds += share * per_device(|p| &p.manager).iter().sum::<f64>();
        }
        Some(out)
    }
}

/// The median of `v` (the mean of the middle two of an even count); 0 for none.
fn median(v: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = v.collect();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Charges one pass (or one phase of passes between two barriers) to `modeled`: `per` is
/// each device's stats in it and `before`/`after` the traffic counters around it. With
/// `Schedule::Isolated` (the devices ran one at a time) by the isolated-device model, with
/// `Schedule::Concurrent` by the older one.
pub fn charge(
    topo: &Topology,
    modeled: &mut Modeled,
    per: &[PassStats],
    before: &[DeviceTraffic],
    after: &[DeviceTraffic],
    schedule: Schedule,
) -> Result<(), ModeledError> {
    let busy: Vec<f64> = per.iter().map(|s| device_work(&s.stages)).collect();
    let moves = transfers(before, after)?;
    let mut copies = vec![0.0; per.len()];
    let serving: Vec<f64> = per
        .iter()
        .enumerate()
        .map(|(d, s)| {
            let waited = manager_time(&s.stages);
            if schedule == Schedule::Concurrent {
                return waited;
            }
            let b = before.get(d).map_or(0, |t| t.copy_nanos);
            let copied = after.get(d).map_or(0, |t| t.copy_nanos).saturating_sub(b) as f64 * 1e-9;
            // Never more than the wait it was part of: the clocks differ.
            copies[d] = copied.min(waited);
            waited - copies[d]
        })
        .collect();
    let mut pass = match schedule {
        Schedule::Isolated => {
            topo.overlapped_pass_time(&busy, &serving, &moves, &during_launches(before, after))?
        }
        Schedule::Concurrent => topo.pass_time(&busy, &moves)?,
    };
    let uses = remote_uses(before, after);
    if !uses.is_empty() {
        // The devices' work with their remote accesses (GPU-SM §4: spread accesses overlap
        // the work, batches add to it; shared segments' aggregate limits) replaces the
        // slowest device's bare work.
        let remote = topo.remote_pass_time(&busy, &uses)?;
        modeled.remote_seconds += (remote.total - pass.device_seconds).max(0.0);
        pass.device_seconds = pass.device_seconds.max(remote.total);
    }
    if modeled.link_seconds.len() == pass.link_seconds.len() {
        for (a, s) in modeled.link_seconds.iter_mut().zip(&pass.link_seconds) {
            *a += s;
        }
    }
    for (a, s) in modeled.work_per_device.iter_mut().zip(&busy) {
        *a += s;
    }
    for (a, s) in modeled.manager_per_device.iter_mut().zip(&serving) {
        *a += s;
    }
    // Passes outside marked frames (a runner that never calls `next_frame`) have no place in
    // a frame, and the estimate would never use them.
    if modeled.frames > 0 {
        modeled.samples.push_back(PassSample {
            frame: modeled.frames,
            position: modeled.position,
            beyond_work: pass.device_seconds - busy.iter().copied().fold(0.0, f64::max),
            work: busy,
            // The concurrent model has no manager term.
            manager: match schedule {
                Schedule::Isolated => serving,
                Schedule::Concurrent => Vec::new(),
            },
            transfer_seconds: pass.transfer_seconds,
        });
    }
    modeled.position += 1;
    modeled.device_seconds += pass.device_seconds;
    modeled.transfer_seconds += pass.transfer_seconds;
    modeled.manager_seconds += pass.manager_seconds;
    if schedule == Schedule::Isolated {
        modeled.copy_seconds += copies.iter().sum::<f64>();
    }
    Ok(())
}

/// The remote accesses between two traffic snapshots, per accessor and location, as the
/// topology prices them.
pub fn remote_uses(before: &[DeviceTraffic], after: &[DeviceTraffic]) -> Vec<RemoteUse> {
    after
        .iter()
        .enumerate()
        .flat_map(|(d, a)| {
            a.since(&before.get(d).cloned().unwrap_or_default())
                .remote_uses(d)
        })
        .collect()
}

/// A device's own work in a pass: every stage but the waits for request batches, whose
/// measured time on the CPU backend is the memory manager copying bytes in host memory; the
/// topology model replaces it.
pub fn device_work(s: &StageTimes) -> f64 {
    s.request_pass + s.uniquify + s.compute + s.page_writes + s.display
}

/// The memory manager's time serving a device's batches in a pass: the device's waits for
/// them. Measured with the device alone (isolated model), nothing else queues at the manager,
/// so the wait is the manager's protocol and bookkeeping plus the page copies, which the link
/// model charges as transfers: `charge` takes the copies' measured time
/// (`DeviceTraffic::copy_nanos`) out (docs/EVALUATION.md).
pub fn manager_time(s: &StageTimes) -> f64 {
    s.read_requests + s.write_requests
}

/// Of the page moves between two traffic snapshots, those the memory manager made while the
/// device computed (staged pages copied during its launch): home to each device.
pub fn during_launches(before: &[DeviceTraffic], after: &[DeviceTraffic]) -> Vec<Transfer> {
    after
        .iter()
        .enumerate()
        .map(|(d, a)| {
            let moved = a.host_to_device_during_launch.since(
                before
                    .get(d)
                    .cloned()
                    .unwrap_or_default()
                    .host_to_device_during_launch,
            );
            Transfer {
                from: Endpoint::Host,
                to: Endpoint::Device(d),
                pages: moved.pages,
                bytes: moved.bytes,
                homed: false,
            }
        })
        .collect()
}

/// The page moves between two traffic snapshots, as transfers a topology can route: home to
/// each device, each device home, and each (source, destination) pair of devices as the
/// memory manager counted them.
pub fn transfers(
    before: &[DeviceTraffic],
    after: &[DeviceTraffic],
) -> Result<Vec<Transfer>, ModeledError> {
    let mut out = Vec::new();
    for (d, a) in after.iter().enumerate() {
        let b = before.get(d).cloned().unwrap_or_default();
        let moved = a.since(&b);
        let dev = Endpoint::Device(d);
        out.push(Transfer {
            from: Endpoint::Host,
            to: dev,
            pages: moved.host_to_device.pages,
            bytes: moved.host_to_device.bytes,
            homed: false,
        });
        out.push(Transfer {
            from: dev,
            to: Endpoint::Host,
            pages: moved.device_to_host.pages,
            bytes: moved.device_to_host.bytes,
            homed: false,
        });
        let mut counted = 0;
        for (s, c) in moved.device_to_device_from.iter().enumerate() {
            if c.pages == 0 {
                continue;
            }
            if s == d {
                return Err(ModeledError::SelfMove { device: d });
            }
            counted += c.pages;
            let homed = moved
                .device_to_device_homed_from
                .get(s)
                .copied()
                .unwrap_or_default();
            for (pages, bytes, homed) in [
                (c.pages - homed.pages, c.bytes - homed.bytes, false),
                (homed.pages, homed.bytes, true),
            ] {
                if pages > 0 {
                    out.push(Transfer {
                        from: Endpoint::Device(s),
                        to: dev,
                        pages,
                        bytes,
                        homed,
                    });
                }
            }
        }
        if counted != moved.device_to_device.pages {
            return Err(ModeledError::Uncounted {
                device: d,
                received: moved.device_to_device.pages,
                counted,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::LinkCounters;

    fn traffic(h2d: (u64, u64), d2h: (u64, u64), from: &[(usize, u64, u64)]) -> DeviceTraffic {
        let c = |(pages, bytes)| LinkCounters { pages, bytes };
        let mut t = DeviceTraffic {
            host_to_device: c(h2d),
            device_to_host: c(d2h),
            ..Default::default()
        };
        for &(s, pages, bytes) in from {
            for _ in 0..pages {
                t.add_from_device(s, bytes / pages);
            }
        }
        t
    }

    #[test]
    fn counters_become_routed_transfers_by_source() {
        let before = vec![traffic((1, 100), (0, 0), &[]); 3];
        let after = vec![
            traffic((4, 400), (2, 200), &[(2, 1, 100)]),
            traffic((1, 100), (0, 0), &[(0, 3, 300), (2, 2, 200)]),
            traffic((1, 100), (0, 0), &[]),
        ];
        let t = transfers(&before, &after).unwrap();
        let find = |from, to| {
            t.iter()
                .find(|t| t.from == from && t.to == to)
                .map(|t| (t.pages, t.bytes))
        };
        let (h, d0, d1, d2) = (
            Endpoint::Host,
            Endpoint::Device(0),
            Endpoint::Device(1),
            Endpoint::Device(2),
        );
        assert_eq!(find(h, d0), Some((3, 300)));
        assert_eq!(find(d0, h), Some((2, 200)));
        assert_eq!(find(h, d1), Some((0, 0)));
        // Each pair as counted, not all of device1's moves from one source.
        assert_eq!(find(d0, d1), Some((3, 300)));
        assert_eq!(find(d2, d1), Some((2, 200)));
        assert_eq!(find(d2, d0), Some((1, 100)));
        assert_eq!(find(d1, d0), None);
    }

    #[test]
    fn moves_not_counted_by_source_are_an_error() {
        let zero = vec![DeviceTraffic::default(); 2];
        let mut after = zero.clone();
        after[1].device_to_device = LinkCounters {
            pages: 1,
            bytes: 10,
        };
        assert!(transfers(&zero, &after).is_err());
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
        assert_eq!(manager_time(&s), 300.0);
    }

    #[test]
    fn the_isolated_model_leaves_the_managers_page_copies_to_the_links() {
        let topo = Topology::preset("pcie3-x16", 2).unwrap();
        let stats = |wait: f64| {
            let mut s = PassStats::default();
            s.stages.compute = 1.0;
            s.stages.read_requests = wait;
            s
        };
        let per = [stats(0.5), stats(0.25)];
        let before = vec![DeviceTraffic::default(); 2];
        let mut after = before.clone();
        after[0].copy_nanos = 200_000_000;
        // Copies timed longer than the wait they were part of take the whole wait, no more.
        after[1].copy_nanos = 900_000_000;
        let mut isolated = Modeled {
            manager_per_device: vec![0.0; 2],
            work_per_device: vec![0.0; 2],
            ..Default::default()
        };
        charge(
            &topo,
            &mut isolated,
            &per,
            &before,
            &after,
            Schedule::Isolated,
        )
        .unwrap();
        assert!(
            (isolated.manager_seconds - 0.3).abs() < 1e-9,
            "{isolated:?}"
        );
        assert!((isolated.copy_seconds - 0.45).abs() < 1e-9, "{isolated:?}");
        assert!(
            (isolated.manager_per_device[1]).abs() < 1e-9,
            "{isolated:?}"
        );
        // The concurrent model has no manager term, and takes nothing out of the waits.
        let mut concurrent = isolated.clone();
        concurrent.copy_seconds = 0.0;
        concurrent.manager_seconds = 0.0;
        concurrent.manager_per_device = vec![0.0; 2];
        charge(
            &topo,
            &mut concurrent,
            &per,
            &before,
            &after,
            Schedule::Concurrent,
        )
        .unwrap();
        assert_eq!(concurrent.copy_seconds, 0.0);
        assert_eq!(concurrent.manager_per_device, vec![0.5, 0.25]);
    }

    #[test]
    fn the_steady_estimate_takes_each_devices_median_before_the_slowest() {
        let topo = Topology::preset("pcie3-x16", 2).unwrap();
        let stats = |work: f64, wait: f64| {
            let mut s = PassStats::default();
            s.stages.compute = work;
            s.stages.read_requests = wait;
            s
        };
        let none = vec![DeviceTraffic::default(); 2];
        let mut m = Modeled {
            manager_per_device: vec![0.0; 2],
            work_per_device: vec![0.0; 2],
            ..Default::default()
        };
        assert_eq!(m.steady(), None);
        // Three frames of two passes; device 1 is slow once in the first pass (a timing
        // disturbed by the machine), and the third frame has a third pass.
        for f in 0..3 {
            m.next_frame();
            let slow = if f == 1 { 5.0 } else { 1.0 };
            for per in [
                [stats(1.0, 0.1), stats(slow, 0.2)],
                [stats(2.0, 0.0), stats(3.0, 0.0)],
            ] {
                charge(&topo, &mut m, &per, &none, &none, Schedule::Isolated).unwrap();
            }
            if f == 2 {
                let per = [stats(3.0, 0.0), stats(0.0, 0.0)];
                charge(&topo, &mut m, &per, &none, &none, Schedule::Isolated).unwrap();
            }
        }
        // As measured: (1 + 5 + 1) + 3·3 + 3 over three frames.
        assert!((m.device_seconds - 19.0).abs() < 1e-9, "{m:?}");
        let s = m.steady().unwrap();
        // Medians 1 and 1, then 3, then 3 in one frame of three.
        assert!((s.device_seconds - (1.0 + 3.0 + 1.0)).abs() < 1e-9, "{s:?}");
        assert!((s.manager_seconds - 0.3).abs() < 1e-9, "{s:?}");
        assert_eq!(s.transfer_seconds, 0.0);
        // The concurrent model has no manager term, in either estimate.
        let mut c = Modeled::default();
        c.next_frame();
        let per = [stats(1.0, 0.1), stats(2.0, 0.2)];
        charge(&topo, &mut c, &per, &none, &none, Schedule::Concurrent).unwrap();
        assert_eq!(c.manager_seconds, 0.0);
        assert_eq!(c.steady().unwrap().manager_seconds, 0.0);
        assert!((c.steady().unwrap().device_seconds - 2.0).abs() < 1e-9);
    }

    #[test]
    fn the_steady_estimate_keeps_only_the_last_window_of_frames() {
        let topo = Topology::preset("pcie3-x16", 2).unwrap();
        let none = vec![DeviceTraffic::default(); 2];
        let pass = |work: f64| {
            let mut s = PassStats::default();
            s.stages.compute = work;
            [s, s]
        };
        let mut m = Modeled {
            manager_per_device: vec![0.0; 2],
            work_per_device: vec![0.0; 2],
            ..Default::default()
        };
        // Passes charged outside any marked frame (the halo runners) are kept nowhere.
        for _ in 0..10 {
            charge(&topo, &mut m, &pass(1.0), &none, &none, Schedule::Isolated).unwrap();
        }
        assert!(m.samples.is_empty());
        // A window of slow frames, then a window of fast ones, two passes a frame: over all of
        // them the median would fall between the two (5 a pass); over the last window it is
        // the fast frames' 1.
        let window = STEADY_WINDOW as usize;
        for f in 0..2 * window {
            m.next_frame();
            let work = if f < window { 9.0 } else { 1.0 };
            for _ in 0..2 {
                charge(&topo, &mut m, &pass(work), &none, &none, Schedule::Isolated).unwrap();
            }
        }
        assert_eq!(m.samples.len(), 2 * window);
        let s = m.steady().unwrap();
        assert!((s.device_seconds - 2.0).abs() < 1e-9, "{s:?}");
        // The summed modeled time still covers every pass charged.
        let all = 10.0 + 2.0 * 9.0 * window as f64 + 2.0 * window as f64;
        assert!(
            (m.device_seconds - all).abs() < 1e-6,
            "{}",
            m.device_seconds
        );
    }
}
