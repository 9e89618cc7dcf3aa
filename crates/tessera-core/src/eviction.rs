//! Which resident pages a device gives up when a batch needs slots its budget lacks.
//!
//! Pure bookkeeping: the runtime's memory manager keeps one [`Resident`] set per device, tells it
//! when a page arrives or leaves, and asks it for victims, passing the pages that may not go
//! (the batch being granted, the wave it serves, pinned objects) and, for the policies that use
//! them, the device's per-page time stamps. Nothing here moves data: the victims are released
//! through the protocol's `Evict` message, which writes a modified page home first.
//!
//! Policies:
//! - `lru` (the patent): each launch writes its counter into the time stamp of every page it
//!   touches, once per page; the victims are the eligible pages with the oldest stamps, found
//!   by sorting (ties broken by arrival, oldest first).
//! - `clock` (second chance, as OptiX Demand Loading stages stale pages): a hand sweeps the
//!   pages in arrival order; a page whose stamp moved since the hand last passed it is spared
//!   once and its stamp remembered; a page whose stamp did not move goes. A page that has just
//!   arrived has not been passed yet, so it is always spared once.
//! - `fifo`: the eligible page that arrived first.
//! - `random`: uniformly among the eligible pages, from a seeded generator (runs repeat).

// Keyed by page numbers, not by anything an attacker chooses: a fast unkeyed hash serves.
use rustc_hash::FxHashMap as HashMap;
use std::fmt;
use std::str::FromStr;

use crate::GlobalPage;

/// An eviction policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    #[default]
    Lru,
    Clock,
    Fifo,
    Random,
}

impl Policy {
    pub const ALL: [Policy; 4] = [Policy::Lru, Policy::Clock, Policy::Fifo, Policy::Random];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Lru => "lru",
            Policy::Clock => "clock",
            Policy::Fifo => "fifo",
            Policy::Random => "random",
        }
    }

    /// Whether choosing needs the device's time stamps (one read from the device per choice).
    pub fn uses_stamps(self) -> bool {
        matches!(self, Policy::Lru | Policy::Clock)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!("unknown eviction policy {s:?} (expected lru, clock, fifo or random)")
            })
    }
}

/// The pages resident on one device, in arrival order, with what the policies remember.
#[derive(Clone, Debug)]
pub struct Resident {
    policy: Policy,
    /// The FIFO order and the clock's ring: the page that arrived with sequence number `i` is
    /// at index `i`, and a page that left leaves a hole there. A reader's copy of a boundary
    /// page leaves (invalidated) and comes back every frame in boiling, which a B-tree served
    /// with a search and a rebalance each way; here both are O(1), and `compact` renumbers
    /// once holes (`order.len() - pages.len()`) outnumber pages.
    order: Vec<Option<GlobalPage>>,
    /// Page → (arrival sequence, stamp the clock hand last saw; `None` until it passes).
    pages: HashMap<GlobalPage, (u64, Option<u64>)>,
    /// The clock hand: the arrival sequence it points at.
    hand: u64,
    rng: u64,
}

impl Resident {
    pub fn new(policy: Policy, seed: u64) -> Self {
        Resident {
            policy,
            order: Vec::new(),
            pages: HashMap::default(),
            hand: 0,
            // xorshift must not start at zero.
            rng: seed ^ 0x9E37_79B9_7F4A_7C15 | 1,
        }
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }
    pub fn len(&self) -> usize {
        self.pages.len()
    }
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }
    pub fn contains(&self, page: GlobalPage) -> bool {
        self.pages.contains_key(&page)
    }
    /// Resident pages in arrival order.
    pub fn iter(&self) -> impl Iterator<Item = GlobalPage> + '_ {
        self.order.iter().flatten().copied()
    }

    /// A page arrived (a no-op for one already here: an upgrade keeps its slot).
    pub fn insert(&mut self, page: GlobalPage) {
        if self.pages.contains_key(&page) {
            return;
        }
        let seq = self.order.len() as u64;
        self.order.push(Some(page));
        self.pages.insert(page, (seq, None));
    }

    /// A page left (evicted, invalidated by another device's write, or freed).
    pub fn remove(&mut self, page: GlobalPage) {
        if let Some((seq, _)) = self.pages.remove(&page) {
            self.order[seq as usize] = None;
            let holes = self.order.len() - self.pages.len();
            if holes > 64 && holes > self.pages.len() {
                self.compact();
            }
        }
    }

    /// Renumbers the pages 0.. in arrival order, without the holes; the clock hand moves to
    /// the first page at or after it.
    fn compact(&mut self) {
        let mut hand = None;
        let mut kept = Vec::with_capacity(self.pages.len());
        for (old, slot) in self.order.iter().enumerate() {
            let Some(p) = *slot else { continue };
            let new = kept.len() as u64;
            if hand.is_none() && old as u64 >= self.hand {
                hand = Some(new);
            }
            if let Some(e) = self.pages.get_mut(&p) {
                e.0 = new;
            }
            kept.push(Some(p));
        }
        self.hand = hand.unwrap_or(kept.len() as u64);
        self.order = kept;
    }

    /// The resident pages with their arrival sequence numbers, in arrival order.
    fn arrivals(&self) -> impl Iterator<Item = (u64, GlobalPage)> + '_ {
        self.order
            .iter()
            .enumerate()
            .filter_map(|(seq, p)| p.map(|p| (seq as u64, p)))
    }

    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// Chooses up to `n` victims among the pages `eligible` accepts. `stamp` gives a page's
    /// time stamp (asked only by the policies that use them, for eligible pages). Fewer than
    /// `n` come back only when fewer are eligible. The victims stay in the set: the caller
    /// removes each as the protocol releases it.
    pub fn choose(
        &mut self,
        n: usize,
        eligible: impl Fn(GlobalPage) -> bool,
        stamp: impl Fn(GlobalPage) -> u64,
    ) -> Vec<GlobalPage> {
        if n == 0 {
            return Vec::new();
        }
        match self.policy {
            Policy::Fifo => self.iter().filter(|&p| eligible(p)).take(n).collect(),
            Policy::Lru => {
                let mut c: Vec<(u64, u64, GlobalPage)> = self
                    .arrivals()
                    .filter(|&(_, p)| eligible(p))
                    .map(|(seq, p)| (stamp(p), seq, p))
                    .collect();
                let n = n.min(c.len());
                if n < c.len() {
                    c.select_nth_unstable(n);
                }
                c.truncate(n);
                c.sort_unstable();
                c.into_iter().map(|(_, _, p)| p).collect()
            }
            Policy::Random => {
                let mut c: Vec<GlobalPage> = self.iter().filter(|&p| eligible(p)).collect();
                let n = n.min(c.len());
                for i in 0..n {
                    let j = i + (self.random() % (c.len() - i) as u64) as usize;
                    c.swap(i, j);
                }
                c.truncate(n);
                c
            }
            Policy::Clock => self.clock(n, eligible, stamp),
        }
    }

    fn clock(
        &mut self,
        n: usize,
        eligible: impl Fn(GlobalPage) -> bool,
        stamp: impl Fn(GlobalPage) -> u64,
    ) -> Vec<GlobalPage> {
        let mut out = Vec::new();
        // Two sweeps suffice: the first remembers every stamp it passes, so in the second only
        // pages touched in between are spared, and nothing touches pages while we choose.
        let hand = self.hand;
        let ring: Vec<(u64, GlobalPage)> = self
            .arrivals()
            .filter(|&(s, _)| s >= hand)
            .chain(self.arrivals().filter(|&(s, _)| s < hand))
            .collect();
        'sweeps: for _ in 0..2 {
            for &(seq, p) in &ring {
                if out.len() == n {
                    break 'sweeps;
                }
                if !eligible(p) || out.contains(&p) {
                    continue;
                }
                let now = stamp(p);
                let seen = &mut self.pages.get_mut(&p).expect("ring and map agree").1;
                if *seen == Some(now) {
                    out.push(p);
                    self.hand = seq + 1;
                } else {
                    *seen = Some(now);
                    self.hand = seq + 1;
                }
            }
        }
        out
    }
}

/// One event of a device's trace, the input of [`belady_loads`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A set of pages that had to be resident together (a granted batch and the pages its
    /// wave kept).
    Step(Vec<GlobalPage>),
    /// The device's copy of a page was dropped by something no eviction policy chooses:
    /// another device's write invalidated it, or its object was freed. Every policy must
    /// load the page again before its next use.
    Lost(GlobalPage),
}

/// Belady's OPT: the fewest page loads any policy could make serving `trace` (each step a set
/// of pages that must be resident together, each loss a copy taken away whatever the policy)
/// with `capacity` slots, evicting the page whose next use is farthest away. An offline bound,
/// computed from a recorded trace; not a policy. Steps larger than `capacity` cannot be served
/// by anyone and count every missing page.
///
/// A page lost before its next use has no next use as far as the copy held is concerned, so it
/// is the first to go: Belady's rule over the trace with each page renamed at every loss (a
/// lost copy is never used again), which keeps the rule optimal.
pub fn belady_loads(trace: &[TraceEvent], capacity: usize) -> u64 {
    // next_use[i][k]: the event after i whose step uses step i's k-th page with the copy it
    // holds then (usize::MAX if the page is lost first, or never used again).
    let mut next_seen: HashMap<GlobalPage, usize> = HashMap::default();
    let mut next_use: Vec<Vec<usize>> = vec![Vec::new(); trace.len()];
    for i in (0..trace.len()).rev() {
        match &trace[i] {
            TraceEvent::Step(step) => {
                next_use[i] = step
                    .iter()
                    .map(|p| next_seen.get(p).copied().unwrap_or(usize::MAX))
                    .collect();
                for &p in step {
                    next_seen.insert(p, i);
                }
            }
            TraceEvent::Lost(p) => {
                next_seen.insert(*p, usize::MAX);
            }
        }
    }
    // Resident page → its next use; ordered set of (next use, page) to find the farthest.
    // A step's own pages are needed now, so they leave the ordered set while the step makes
    // room and come back with their new next use: each eviction is then the set's last entry,
    // where skipping them in place cost a scan of the step per eviction (a 64² field in pages
    // of 1 texel took minutes).
    let mut resident: HashMap<GlobalPage, usize> = HashMap::default();
    let mut by_next: std::collections::BTreeSet<(usize, GlobalPage)> = Default::default();
    let mut loads = 0;
    for (i, event) in trace.iter().enumerate() {
        let step = match event {
            TraceEvent::Step(step) => step,
            TraceEvent::Lost(p) => {
                if let Some(next) = resident.remove(p) {
                    by_next.remove(&(next, *p));
                }
                continue;
            }
        };
        for (k, &p) in step.iter().enumerate() {
            match resident.insert(p, next_use[i][k]) {
                Some(old) => {
                    by_next.remove(&(old, p));
                }
                None => loads += 1,
            }
        }
        while resident.len() > capacity {
            let Some((_, p)) = by_next.pop_last() else {
                break;
            };
            resident.remove(&p);
        }
        for (k, &p) in step.iter().enumerate() {
            by_next.insert((next_use[i][k], p));
        }
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(v: &[u64]) -> Vec<GlobalPage> {
        v.iter().map(|&p| GlobalPage(p)).collect()
    }

    fn filled(policy: Policy, n: u64) -> Resident {
        let mut r = Resident::new(policy, 7);
        for p in 0..n {
            r.insert(GlobalPage(p));
        }
        r
    }

    #[test]
    fn fifo_takes_the_oldest_eligible() {
        let mut r = filled(Policy::Fifo, 5);
        assert_eq!(
            r.choose(2, |p| p.0 != 0, |_| unreachable!()),
            pages(&[1, 2])
        );
        r.remove(GlobalPage(1));
        r.insert(GlobalPage(1));
        assert_eq!(r.choose(5, |_| true, |_| 0), pages(&[0, 2, 3, 4, 1]));
    }

    #[test]
    fn lru_sorts_by_stamp_then_arrival() {
        let mut r = filled(Policy::Lru, 5);
        let stamps = [9u64, 3, 3, 1, 7];
        assert_eq!(
            r.choose(3, |_| true, |p| stamps[p.index()]),
            pages(&[3, 1, 2])
        );
        assert_eq!(
            r.choose(2, |p| p.0 != 3, |p| stamps[p.index()]),
            pages(&[1, 2])
        );
    }

    #[test]
    fn clock_spares_a_touched_page_once() {
        let mut r = filled(Policy::Clock, 3);
        let mut stamps = [5u64, 5, 5];
        // Nobody has been passed yet: the first sweep spares all, the second takes page 0.
        assert_eq!(r.choose(1, |_| true, |p| stamps[p.index()]), pages(&[0]));
        r.remove(GlobalPage(0));
        // Page 1 is touched again; the hand (past 0) spares it and takes 2.
        stamps[1] = 6;
        assert_eq!(r.choose(1, |_| true, |p| stamps[p.index()]), pages(&[2]));
    }

    /// The clock over a plain list in arrival order, with sequence numbers never reused: the
    /// reference `Resident`'s renumbering must agree with.
    #[derive(Default)]
    struct PlainClock {
        pages: Vec<(u64, u64, Option<u64>)>,
        next: u64,
        hand: u64,
    }

    impl PlainClock {
        fn choose(&mut self, n: usize, stamp: impl Fn(u64) -> u64) -> Vec<u64> {
            let mut ring: Vec<usize> = (0..self.pages.len()).collect();
            ring.rotate_left(self.pages.iter().take_while(|e| e.0 < self.hand).count());
            let mut out = Vec::new();
            'sweeps: for _ in 0..2 {
                for &i in &ring {
                    if out.len() == n {
                        break 'sweeps;
                    }
                    let (seq, page, seen) = &mut self.pages[i];
                    if out.contains(page) {
                        continue;
                    }
                    let now = stamp(*page);
                    if *seen == Some(now) {
                        out.push(*page);
                    } else {
                        *seen = Some(now);
                    }
                    self.hand = *seq + 1;
                }
            }
            out
        }
    }

    #[test]
    fn arrival_order_survives_many_departures() {
        // Through enough departures to renumber many times: the arrival order, FIFO's choice
        // and the clock's (its hand carried across the renumbering) against plain lists.
        let mut fifo = Resident::new(Policy::Fifo, 1);
        let mut clock = Resident::new(Policy::Clock, 1);
        let mut plain = PlainClock::default();
        let mut x = 12345u64;
        let mut rand = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for step in 0..5000u64 {
            let page = rand() % 300;
            if plain.pages.iter().any(|e| e.1 == page) {
                fifo.remove(GlobalPage(page));
                clock.remove(GlobalPage(page));
                plain.pages.retain(|e| e.1 != page);
            } else {
                fifo.insert(GlobalPage(page));
                clock.insert(GlobalPage(page));
                plain.pages.push((plain.next, page, None));
                plain.next += 1;
            }
            let want: Vec<u64> = plain.pages.iter().map(|e| e.1).collect();
            assert_eq!(
                fifo.iter().map(|p| p.0).collect::<Vec<_>>(),
                want,
                "step {step}"
            );
            if step % 7 == 0 {
                let n = want.len().min(3);
                assert_eq!(fifo.choose(3, |_| true, |_| 0), pages(&want[..n]));
                let salt = rand();
                let stamp = move |p: u64| (p ^ salt) % 2;
                let got = clock.choose(2, |_| true, |p| stamp(p.0));
                assert_eq!(got, pages(&plain.choose(2, stamp)), "step {step}");
            }
        }
        assert!(
            fifo.order.len() <= 2 * fifo.len() + 65,
            "renumbered as it went"
        );
    }

    #[test]
    fn random_is_seeded_and_eligible_only() {
        let a = filled(Policy::Random, 50).choose(10, |p| p.0 % 2 == 0, |_| 0);
        let b = filled(Policy::Random, 50).choose(10, |p| p.0 % 2 == 0, |_| 0);
        assert_eq!(a, b);
        assert!(a.iter().all(|p| p.0 % 2 == 0));
        let mut s = a.clone();
        s.sort();
        s.dedup();
        assert_eq!(s.len(), 10);
        assert_eq!(
            filled(Policy::Random, 3).choose(9, |_| true, |_| 0).len(),
            3
        );
    }

    #[test]
    fn policies_parse_and_reject_unknown_names() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        assert!("mru".parse::<Policy>().unwrap_err().contains("mru"));
    }

    /// Brute force over every eviction choice: the least loads any policy can make.
    fn brute(trace: &[TraceEvent], cap: usize) -> u64 {
        fn go(trace: &[TraceEvent], i: usize, cap: usize, res: Vec<GlobalPage>) -> u64 {
            let Some(event) = trace.get(i) else { return 0 };
            let mut res = res;
            let step = match event {
                TraceEvent::Step(step) => step,
                TraceEvent::Lost(p) => {
                    res.retain(|r| r != p);
                    return go(trace, i + 1, cap, res);
                }
            };
            let mut loads = 0;
            for p in step {
                if !res.contains(p) {
                    res.push(*p);
                    loads += 1;
                }
            }
            if res.len() <= cap {
                return loads + go(trace, i + 1, cap, res);
            }
            // Drop any set of non-step pages bringing it down to cap.
            let extra = res.len() - cap;
            let others: Vec<GlobalPage> =
                res.iter().copied().filter(|p| !step.contains(p)).collect();
            let mut best = u64::MAX;
            for mask in 0u32..(1 << others.len()) {
                if mask.count_ones() as usize != extra {
                    continue;
                }
                let kept: Vec<GlobalPage> = res
                    .iter()
                    .copied()
                    .filter(|p| {
                        others
                            .iter()
                            .position(|o| o == p)
                            .is_none_or(|k| mask & (1 << k) == 0)
                    })
                    .collect();
                best = best.min(go(trace, i + 1, cap, kept));
            }
            loads + best
        }
        go(trace, 0, cap, Vec::new())
    }

    /// A copy another device's write took away is loaded again by every policy, even with
    /// room to spare; and Belady's rule sends a page that will be lost before its next use
    /// out first.
    #[test]
    fn belady_loads_a_lost_page_again_and_evicts_it_first() {
        let step = |v: &[u64]| TraceEvent::Step(pages(v));
        let lost = |p: u64| TraceEvent::Lost(GlobalPage(p));
        assert_eq!(belady_loads(&[step(&[1]), step(&[1])], 4), 1);
        assert_eq!(belady_loads(&[step(&[1]), lost(1), step(&[1])], 4), 2);
        // Losing a page not held changes nothing.
        assert_eq!(belady_loads(&[step(&[1]), lost(2), step(&[1])], 4), 1);
        // With 2 slots: keeping 2 (used again, lost first) instead of 1 would cost a load
        // more; evicting 2 loses nothing, since it is lost before its next use either way.
        let trace = [step(&[1, 2]), step(&[3]), lost(2), step(&[1]), step(&[2])];
        assert_eq!(belady_loads(&trace, 2), 4);
        assert_eq!(belady_loads(&trace, 2), brute(&trace, 2));
    }

    #[test]
    fn belady_matches_brute_force_on_small_traces() {
        let mut seed = 12345u64;
        for _ in 0..300 {
            let mut rnd = |m: u64| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (seed >> 33) % m
            };
            let cap = 1 + rnd(3) as usize;
            let steps = 1 + rnd(7) as usize;
            // About one event in four a loss, as another device's write or a free makes.
            let trace: Vec<TraceEvent> = (0..steps)
                .map(|_| {
                    if rnd(4) == 0 {
                        return TraceEvent::Lost(GlobalPage(rnd(5)));
                    }
                    let mut s: Vec<GlobalPage> = (0..1 + rnd(cap as u64))
                        .map(|_| GlobalPage(rnd(5)))
                        .collect();
                    s.sort();
                    s.dedup();
                    TraceEvent::Step(s)
                })
                .collect();
            assert_eq!(
                belady_loads(&trace, cap),
                brute(&trace, cap),
                "{trace:?} cap {cap}"
            );
        }
    }
}
