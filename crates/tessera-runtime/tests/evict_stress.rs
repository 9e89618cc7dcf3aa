//! Eviction stress: 4–8 devices whose budgets hold only a few pages each, random operations
//! on small objects that oversubscribe every device many times over, checked against a shadow
//! memory (a plain `Vec<u32>` per object, updated sequentially by the test).
//!
//! Each run draws from its seed: the device count, the budget (2–6 slots), the physical memory
//! size (1–3 slots, so budgets are not rounded up to one big allocation), the eviction policy
//! (all four), the thrashing response, and the page size (2×2 or 4×4 texels of 4 bytes, with
//! buffers of the same page bytes, so every slot has one size); odd seeds also prefetch
//! (`Prefetch::Tree`), and seeds 2 and 3 modulo 4 stage (`SystemConfig::staging`), their
//! kernels declaring a footprint (a deliberately rough hint: every texture read, with a halo,
//! and the first written texture, over the task grid) so that bands and waves are staged and
//! the footprint paths run under pressure too. Then steps, each one of:
//! - a **pass**: tasks spread over the devices, each task one invocation that reads 0–3 texels
//!   (every address after the first computed from the value loaded before it: dependent loads)
//!   and writes one texel; each written texel has one task, and no object is both read and
//!   written in one pass, so a pass has no race (docs/ARCHITECTURE.md, "Semantics we
//!   promise"). Each device runs its part with a random procedure (relaunch or two-pass);
//! - a **single** invocation on one device (the same kind of task);
//! - a **probe**: one invocation reads texels and stores what it loaded into a probe buffer,
//!   which the host reads back at once, so a wrong read is seen as such;
//! - a **host read** of whole objects;
//! - between passes: **create** an object, **free** one (after reading it back), mark one
//!   non-evictable or evictable again (the non-evictable pages leave every device room for the
//!   largest invocation).
//!
//! Operations are counted as texel loads by invocations + texel stores by invocations + host
//! reads (one per object read back), each counted once however often a fault relaunched its
//! invocation. A mismatch between an object read back and the shadow is a **lost write** when
//! the texel holds a value it had before its latest write, and a **wrong read** otherwise (a
//! device or the host read something that was never the latest value; a device's wrong read
//! shows in the value it wrote). Every run must end with none of either, with evictions and
//! wave splits having happened. A failure prints the seed: `EVICT_STRESS_SEED=<seed>` reruns
//! that one run.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use std::collections::HashSet;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use tessera_core::{ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{
    Bound, Domain, Fault, Footprint, Invocation, Kernel, PassSpec, Policy, Prefetch, Procedure,
    RuntimeError, System, SystemConfig, Thrashing,
};

mod common;
use common::mix;

/// splitmix64: small, seeded, and good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.next() as usize % items.len()]
    }
}

/// An object as a kernel sees it: a texture of one 32-bit word per texel, or a buffer of words
/// (`h` is 1; `x` is the word index).
#[derive(Clone, Copy, Debug)]
struct Target {
    id: ObjectId,
    buffer: bool,
    w: u32,
    h: u32,
}

impl Target {
    /// The texel a hash names.
    fn at(&self, h: u32) -> (u32, u32) {
        (h % self.w, (h >> 16) % self.h)
    }
    fn index(&self, x: u32, y: u32) -> usize {
        (y * self.w + x) as usize
    }
}

fn load(inv: &mut Invocation<'_>, t: &Target, x: u32, y: u32) -> Result<u32, Fault> {
    if t.buffer {
        inv.load_u32(t.id, x)
    } else {
        Ok(inv.load_f32(t.id, x, y)?.to_bits())
    }
}

fn store(inv: &mut Invocation<'_>, t: &Target, x: u32, y: u32, v: u32) -> Result<(), Fault> {
    if t.buffer {
        inv.store_u32(t.id, x, v)
    } else {
        inv.store_f32(t.id, x, y, f32::from_bits(v))
    }
}

/// One invocation's work: loads from `reads` in order (each address from the value loaded
/// before it), then a store of a value made from all of them at (x, y) of `to`. An `echo`
/// task (a probe) also stores each loaded value at words 0, 1, … of `to`, a buffer, and its
/// result at word `reads.len()`.
#[derive(Clone, Debug)]
struct Task {
    to: Target,
    x: u32,
    y: u32,
    seed: u32,
    reads: Vec<Target>,
    echo: bool,
}

impl Task {
    /// Runs the task's loads through `load`; returns the loaded values and the result. The
    /// kernel and the shadow both call it.
    fn compute<E>(
        &self,
        mut load: impl FnMut(&Target, u32, u32) -> Result<u32, E>,
    ) -> Result<(Vec<u32>, u32), E> {
        let mut v = self.seed;
        let mut loaded = Vec::with_capacity(self.reads.len());
        for (k, t) in self.reads.iter().enumerate() {
            let (x, y) = t.at(mix(v ^ (k as u32).wrapping_mul(0x9E37_79B9)));
            let r = load(t, x, y)?;
            loaded.push(r);
            v = mix(v.rotate_left(7) ^ r);
        }
        Ok((loaded, v))
    }

    /// The stores: (texel, value).
    fn stores(&self, loaded: &[u32], v: u32) -> Vec<((u32, u32), u32)> {
        if self.echo {
            let mut s: Vec<_> = loaded
                .iter()
                .enumerate()
                .map(|(i, &r)| ((i as u32, 0), r))
                .collect();
            s.push(((loaded.len() as u32, 0), v));
            s
        } else {
            vec![((self.x, self.y), v)]
        }
    }
}

/// A device's tasks, laid out row by row over a `width`-wide domain.
struct Tasks {
    tasks: Vec<Task>,
    width: u32,
    /// A hint only (staging runs): a wrong footprint costs speed, never a result.
    footprint: Option<Footprint>,
}

impl Kernel for Tasks {
    fn name(&self) -> &'static str {
        "evict-stress"
    }
    fn footprint(&self) -> Option<Footprint> {
        self.footprint.clone()
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let Some(task) = self.tasks.get((y * self.width + x) as usize) else {
            return Ok(());
        };
        let (loaded, v) = task.compute(|t, x, y| load(inv, t, x, y))?;
        for ((x, y), s) in task.stores(&loaded, v) {
            store(inv, &task.to, x, y, s)?;
        }
        Ok(())
    }
}

/// An object of the run with its shadow.
struct Obj {
    entry: ObjectEntry,
    target: Target,
    shadow: Vec<u32>,
    /// Each texel's earlier values, oldest first: tells a lost write from a wrong read.
    old: Vec<Vec<u32>>,
    pinned: bool,
}

impl Obj {
    fn pages(&self) -> u64 {
        self.entry.desc.page_count()
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    runs: u64,
    passes: u64,
    texel_reads: u64,
    texel_writes: u64,
    host_reads: u64,
    texels_checked: u64,
    creates: u64,
    frees: u64,
    pin_changes: u64,
    evictions: u64,
    eviction_write_backs: u64,
    refaults: u64,
    thrashing_pages: u64,
    thrash_pins: u64,
    prefetched: u64,
    prefetch_hits: u64,
    staged_batches: u64,
    /// Pages the memory manager copied into a device while it ran a launch.
    during_launch: u64,
    wave_splits: u64,
    lost_writes: u64,
    wrong_reads: u64,
    /// Bit sets of the policies (in `Policy::ALL` order) and thrashing responses run.
    policies: u8,
    thrashing: u8,
}

impl Totals {
    fn operations(&self) -> u64 {
        self.texel_reads + self.texel_writes + self.host_reads
    }
    fn add(&mut self, o: &Totals) {
        self.runs += o.runs;
        self.passes += o.passes;
        self.texel_reads += o.texel_reads;
        self.texel_writes += o.texel_writes;
        self.host_reads += o.host_reads;
        self.texels_checked += o.texels_checked;
        self.creates += o.creates;
        self.frees += o.frees;
        self.pin_changes += o.pin_changes;
        self.evictions += o.evictions;
        self.eviction_write_backs += o.eviction_write_backs;
        self.refaults += o.refaults;
        self.thrashing_pages += o.thrashing_pages;
        self.thrash_pins += o.thrash_pins;
        self.prefetched += o.prefetched;
        self.prefetch_hits += o.prefetch_hits;
        self.staged_batches += o.staged_batches;
        self.during_launch += o.during_launch;
        self.wave_splits += o.wave_splits;
        self.lost_writes += o.lost_writes;
        self.wrong_reads += o.wrong_reads;
        self.policies |= o.policies;
        self.thrashing |= o.thrashing;
    }
}

/// The most objects alive at once besides the probe buffer (a pass binds at most 6 of them).
const MAX_LIVE: usize = 7;
const MIN_LIVE: usize = 3;

struct Run {
    rng: Rng,
    sys: System,
    devices: usize,
    /// Budget in slots; every object's pages are `slot_bytes`.
    slots: u64,
    slot_bytes: u64,
    /// Texture page side.
    page: u32,
    config: String,
    staging: bool,
    /// One device with deferred execution: under a budget it queues the bands it is granted.
    deferred: bool,
    objs: Vec<Obj>,
    probe: Obj,
    totals: Totals,
}

impl Run {
    fn new(seed: u64) -> Run {
        let mut rng = Rng(seed);
        let drawn = rng.range(4, 8) as usize;
        // Every eighth seed from the fifth is one device that defers (staging off, as on these
        // seeds), with footprints: under its budget it queues the bands it is granted while the
        // next batch evicts, and the host's calls settle first.
        let deferred = seed % 8 == 4;
        let devices = if deferred { 1 } else { drawn };
        let slots = rng.range(2, 6);
        let page = rng.pick(&[2u32, 4]);
        let slot_bytes = (page * page * 4) as u64;
        let memory_slots = rng.range(1, 3);
        let policy = rng.pick(&Policy::ALL);
        let thrashing = rng.pick(&[Thrashing::Off, Thrashing::Pin]);
        // From the seed, not the generator, so the other draws of a seed stay as they were.
        let prefetch = if seed % 2 == 1 {
            Prefetch::Tree
        } else {
            Prefetch::Off
        };
        let staging = (seed / 2) % 2 == 1;
        let config = format!(
            "seed {seed} (EVICT_STRESS_SEED={seed}): {devices} devices, {slots} slots of \
             {slot_bytes} bytes each ({memory_slots} per physical memory), policy {policy}, \
             thrashing {thrashing:?}, prefetch {prefetch}, staging {staging}, deferred {deferred}, \
             {page}×{page} pages"
        );
        let sys = System::cpu(&SystemConfig {
            devices,
            cpu_threads: 1,
            budget_bytes: slots * slot_bytes,
            memory_bytes: memory_slots * slot_bytes,
            policy,
            seed,
            thrashing,
            prefetch,
            staging,
            deferred,
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("{config}: {e}"));
        // Room for a probe's echoes (3 loads and a result) in one page.
        let probe_words = (slot_bytes / 4) as u32;
        let probe = Self::make(&sys, &config, true, probe_words, 1, page, slot_bytes, None);
        let mut run = Run {
            rng,
            sys,
            devices,
            slots,
            slot_bytes,
            page,
            config,
            staging,
            deferred,
            objs: Vec::new(),
            probe,
            totals: Totals {
                runs: 1,
                policies: 1 << Policy::ALL.iter().position(|&p| p == policy).unwrap(),
                thrashing: 1 << (thrashing == Thrashing::Pin) as u8,
                ..Default::default()
            },
        };
        while run.objs.len() < MAX_LIVE - 1 {
            run.create();
        }
        run
    }

    #[allow(clippy::too_many_arguments)]
    fn make(
        sys: &System,
        config: &str,
        buffer: bool,
        w: u32,
        h: u32,
        page: u32,
        slot_bytes: u64,
        data: Option<Vec<u32>>,
    ) -> Obj {
        let desc = if buffer {
            ObjectDesc::buffer(w as u64 * 4, slot_bytes)
        } else {
            ObjectDesc::texture(w, h, TexelFormat::R32Float, page)
        }
        .unwrap_or_else(|e| panic!("{config}: {e}"));
        let bytes = data
            .as_ref()
            .map(|d| d.iter().flat_map(|v| v.to_le_bytes()).collect());
        let entry = sys
            .create(desc, bytes)
            .unwrap_or_else(|e| panic!("{config}: create: {e}"));
        let shadow = data.unwrap_or_else(|| vec![0; (w * h) as usize]);
        Obj {
            entry,
            target: Target {
                id: entry.id,
                buffer,
                w,
                h,
            },
            old: vec![Vec::new(); shadow.len()],
            shadow,
            pinned: false,
        }
    }

    fn fail(&self, what: &str) -> ! {
        panic!("{}: {what}", self.config)
    }

    /// Pages of non-evictable objects: each device may hold all of them for good.
    fn pinned_pages(&self) -> u64 {
        self.objs
            .iter()
            .filter(|o| o.pinned)
            .map(|o| o.pages())
            .sum()
    }

    /// Loads one invocation may make: its pages (loads + the store, + the probe page) must
    /// fit beside every non-evictable page, or the pass is `BudgetTooSmall`.
    fn max_reads(&self) -> u64 {
        (self.slots - self.pinned_pages() - 1).min(3)
    }

    fn create(&mut self) {
        let r = &mut self.rng;
        let buffer = r.percent(30);
        let (w, h) = if buffer {
            (r.range(1, 64) as u32, 1)
        } else {
            (r.range(1, 12) as u32, r.range(1, 12) as u32)
        };
        let data = r
            .percent(70)
            .then(|| (0..w * h).map(|_| r.next() as u32).collect());
        let o = Self::make(
            &self.sys,
            &self.config,
            buffer,
            w,
            h,
            self.page,
            self.slot_bytes,
            data,
        );
        self.objs.push(o);
        self.totals.creates += 1;
    }

    /// Reads an object back and compares it with its shadow; a mismatch is counted, reported,
    /// and taken into the shadow so that it is not counted again.
    fn check(&mut self, which: Option<usize>) {
        let o = match which {
            Some(i) => &mut self.objs[i],
            None => &mut self.probe,
        };
        let bytes = self
            .sys
            .mm
            .read(o.entry.id)
            .unwrap_or_else(|e| panic!("{}: read {}: {e}", self.config, o.entry.id));
        let got: Vec<u32> = bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        self.totals.host_reads += 1;
        self.totals.texels_checked += got.len() as u64;
        for (i, (&g, want)) in got.iter().zip(o.shadow.iter_mut()).enumerate() {
            if g == *want {
                continue;
            }
            let lost = o.old[i].contains(&g);
            if lost {
                self.totals.lost_writes += 1;
            } else {
                self.totals.wrong_reads += 1;
            }
            if self.totals.lost_writes + self.totals.wrong_reads <= 10 {
                eprintln!(
                    "{}: {} of {} (texel {}, {}) is {g:#010x}, want {:#010x}",
                    self.config,
                    if lost { "lost write" } else { "wrong value" },
                    o.entry.id,
                    i as u32 % o.target.w,
                    i as u32 / o.target.w,
                    *want
                );
            }
            *want = g;
        }
    }

    fn obj(&self, id: ObjectId) -> &Obj {
        if id == self.probe.entry.id {
            return &self.probe;
        }
        self.objs.iter().find(|o| o.entry.id == id).unwrap()
    }

    fn obj_mut(&mut self, id: ObjectId) -> &mut Obj {
        if id == self.probe.entry.id {
            return &mut self.probe;
        }
        self.objs.iter_mut().find(|o| o.entry.id == id).unwrap()
    }

    /// A task writing a texel of one of `to` (not yet written in this pass) from `reads`.
    fn task(
        &mut self,
        to: &[usize],
        reads: &[usize],
        written: &mut HashSet<(u32, u32, u32)>,
    ) -> Option<Task> {
        let max_reads = self.max_reads();
        let o = &self.objs[self.rng.pick(to)];
        let (w, h) = (o.target.w, o.target.h);
        let target = o.target;
        let (x, y) = (
            self.rng.range(0, w as u64 - 1) as u32,
            self.rng.range(0, h as u64 - 1) as u32,
        );
        if !written.insert((target.id.0, x, y)) {
            return None;
        }
        let n = self.rng.range(0, max_reads) as usize;
        Some(Task {
            to: target,
            x,
            y,
            seed: self.rng.next() as u32,
            reads: (0..n)
                .map(|_| self.objs[self.rng.pick(reads)].target)
                .collect(),
            echo: false,
        })
    }

    /// Chooses the objects a pass writes and the (other) objects it reads.
    fn split_objects(&mut self) -> (Vec<usize>, Vec<usize>) {
        let mut idx: Vec<usize> = (0..self.objs.len()).collect();
        for i in (1..idx.len()).rev() {
            let j = self.rng.range(0, i as u64) as usize;
            idx.swap(i, j);
        }
        let writes = self.rng.range(1, (idx.len() as u64 - 1).min(3)) as usize;
        let reads = self.rng.range(1, ((idx.len() - writes) as u64).min(3)) as usize;
        (idx[..writes].to_vec(), idx[writes..writes + reads].to_vec())
    }

    /// Runs the devices' tasks as one pass (each device's part with a random procedure),
    /// checks every device succeeded, and applies the tasks to the shadow.
    fn pass(&mut self, per_device: Vec<Vec<Task>>) {
        let mut bound: Vec<ObjectId> = per_device
            .iter()
            .flatten()
            .flat_map(|t| std::iter::once(t.to.id).chain(t.reads.iter().map(|r| r.id)))
            .collect();
        bound.sort_unstable();
        bound.dedup();
        let bindings: Arc<Vec<Bound>> = Arc::new(
            bound
                .iter()
                .map(|&id| Bound::new(&self.obj(id).entry))
                .collect(),
        );
        // The shadow's values, from the state before the pass: no task reads what another
        // writes, so the order does not matter.
        let mut writes = Vec::new();
        for t in per_device.iter().flatten() {
            let (loaded, v) = t
                .compute(|r, x, y| Ok::<_, ()>(self.obj(r.id).shadow[r.index(x, y)]))
                .unwrap();
            self.totals.texel_reads += loaded.len() as u64;
            for ((x, y), s) in t.stores(&loaded, v) {
                writes.push((t.to, t.to.index(x, y), s));
            }
        }
        let mut pending = Vec::new();
        for (d, tasks) in per_device.into_iter().enumerate() {
            if tasks.is_empty() {
                continue;
            }
            let n = tasks.len() as u64;
            let width = self.rng.range(1, n.min(8)) as u32;
            let height = (n as u32).div_ceil(width);
            let procedure = self.rng.pick(&[Procedure::Relaunch, Procedure::TwoPass]);
            let footprint = (self.staging || self.deferred)
                .then(|| rough_footprint(&tasks))
                .flatten();
            let spec = PassSpec {
                kernel: Arc::new(Tasks {
                    tasks,
                    width,
                    footprint,
                }),
                bindings: bindings.clone(),
                domain: Domain::Rect {
                    x0: 0,
                    y0: 0,
                    x1: width,
                    y1: height,
                },
                display: false,
            };
            let p = self
                .sys
                .on_device(d, move |c| c.run_pass(&spec, procedure))
                .unwrap_or_else(|e| self.fail(&e.to_string()));
            pending.push((d, procedure, p));
        }
        // Every device finishes before a failure is reported: the barrier holds.
        let results: Vec<_> = pending
            .into_iter()
            .map(|(d, procedure, p)| (d, procedure, p.wait().and_then(|r| r)))
            .collect();
        for (d, procedure, r) in results {
            match r {
                Ok(stats) => self.totals.wave_splits += stats.wave_splits,
                Err(e) => self.fail(&format!(
                    "pass {} on device {d} ({procedure:?}): {e}",
                    self.totals.passes
                )),
            }
        }
        self.totals.passes += 1;
        self.totals.texel_writes += writes.len() as u64;
        for (t, i, v) in writes {
            let o = self.obj_mut(t.id);
            o.old[i].push(o.shadow[i]);
            o.shadow[i] = v;
        }
    }

    /// A pass with tasks spread over every device.
    fn many(&mut self) {
        let (to, reads) = self.split_objects();
        let texels: u64 = to.iter().map(|&i| self.objs[i].shadow.len() as u64).sum();
        let n = self.rng.range(1, texels.min(96));
        let mut written = HashSet::new();
        let mut per_device = vec![Vec::new(); self.devices];
        for _ in 0..n {
            if let Some(t) = self.task(&to, &reads, &mut written) {
                let d = self.rng.range(0, self.devices as u64 - 1) as usize;
                per_device[d].push(t);
            }
        }
        self.pass(per_device);
    }

    /// One invocation on one device.
    fn single(&mut self) {
        let (to, reads) = self.split_objects();
        let t = self.task(&to, &reads, &mut HashSet::new()).unwrap();
        let mut per_device = vec![Vec::new(); self.devices];
        per_device[self.rng.range(0, self.devices as u64 - 1) as usize].push(t);
        self.pass(per_device);
    }

    /// One invocation loads texels and stores them in the probe buffer, read back at once.
    fn probe(&mut self) {
        let n = self.rng.range(1, self.max_reads()) as usize;
        let t = Task {
            to: self.probe.target,
            x: 0,
            y: 0,
            seed: self.rng.next() as u32,
            reads: (0..n)
                .map(|_| self.objs[self.rng.range(0, self.objs.len() as u64 - 1) as usize].target)
                .collect(),
            echo: true,
        };
        let mut per_device = vec![Vec::new(); self.devices];
        per_device[self.rng.range(0, self.devices as u64 - 1) as usize].push(t);
        self.pass(per_device);
        self.check(None);
    }

    fn step(&mut self) {
        match self.rng.range(0, 99) {
            0..=54 => self.many(),
            55..=69 => self.single(),
            70..=79 => self.probe(),
            80..=89 => {
                for _ in 0..self.rng.range(1, 3) {
                    let i = self.rng.range(0, self.objs.len() as u64 - 1) as usize;
                    self.check(Some(i));
                }
            }
            90..=94 => {
                if self.objs.len() > MIN_LIVE && self.rng.percent(60) {
                    let i = self.rng.range(0, self.objs.len() as u64 - 1) as usize;
                    // What it held must have survived until now.
                    self.check(Some(i));
                    let o = self.objs.swap_remove(i);
                    self.sys
                        .mm
                        .free(o.entry.id)
                        .unwrap_or_else(|e| self.fail(&format!("free {}: {e}", o.entry.id)));
                    self.totals.frees += 1;
                }
                if self.objs.len() < MAX_LIVE {
                    self.create();
                }
            }
            _ => self.toggle_pin(),
        }
    }

    /// Makes a non-evictable object evictable again, or marks a small object non-evictable
    /// when its pages leave room for every invocation (two pages: a load and a store).
    fn toggle_pin(&mut self) {
        let room = self.slots - self.pinned_pages();
        let candidates: Vec<usize> = (0..self.objs.len())
            .filter(|&i| self.objs[i].pinned || self.objs[i].pages() + 2 <= room)
            .collect();
        if candidates.is_empty() {
            return;
        }
        let i = self.rng.pick(&candidates);
        let o = &mut self.objs[i];
        o.pinned = !o.pinned;
        let (id, evictable) = (o.entry.id, !o.pinned);
        self.sys
            .mm
            .set_evictable(id, evictable)
            .unwrap_or_else(|e| self.fail(&format!("set_evictable {id}: {e}")));
        self.totals.pin_changes += 1;
    }

    /// Reads every object back and gathers the memory manager's eviction counters.
    fn finish(mut self) -> Totals {
        for i in 0..self.objs.len() {
            self.check(Some(i));
        }
        self.check(None);
        let traffic = self
            .sys
            .mm
            .traffic()
            .unwrap_or_else(|e| self.fail(&e.to_string()));
        for t in traffic {
            self.totals.evictions += t.evictions;
            self.totals.eviction_write_backs += t.eviction_write_backs;
            self.totals.refaults += t.refaults;
            self.totals.thrashing_pages += t.thrashing_pages;
            self.totals.thrash_pins += t.thrash_pins;
            self.totals.prefetched += t.prefetched;
            self.totals.prefetch_hits += t.prefetch_hits;
            self.totals.staged_batches += t.staged_batches;
            self.totals.during_launch += t.host_to_device_during_launch.pages;
        }
        self.totals
    }
}

/// Aborts the process, naming the seed, if `f` takes longer than `limit`: a hang in the
/// runtime must fail the test, not stall it.
fn watchdog<R>(seed: u64, limit: Duration, f: impl FnOnce() -> R) -> R {
    let (tx, rx) = mpsc::channel::<()>();
    let dog = std::thread::spawn(move || {
        if rx.recv_timeout(limit) == Err(mpsc::RecvTimeoutError::Timeout) {
            eprintln!("evict_stress: seed {seed} still running after {limit:?}: a hang?");
            std::process::abort();
        }
    });
    let r = f();
    drop(tx);
    let _ = dog.join();
    r
}

/// A footprint for a device's tasks that is only roughly right: the textures they read
/// (halo 2) and the first texture they write, as if invocation (x, y) touched texel (x, y).
/// `None` when they write no texture.
fn rough_footprint(tasks: &[Task]) -> Option<Footprint> {
    let write = tasks.iter().find(|t| !t.to.buffer)?.to.id;
    let mut reads: Vec<(ObjectId, u32)> = tasks
        .iter()
        .flat_map(|t| t.reads.iter())
        .filter(|r| !r.buffer)
        .map(|r| (r.id, 2))
        .collect();
    reads.sort_unstable();
    reads.dedup();
    Some(Footprint { reads, write })
}

/// One run of `steps` steps from `seed`.
fn run(seed: u64, steps: u64) -> Totals {
    watchdog(seed, Duration::from_secs(600), || {
        let mut run = Run::new(seed);
        for _ in 0..steps {
            run.step();
        }
        let config = run.config.clone();
        let t = run.finish();
        if t.lost_writes + t.wrong_reads > 0 {
            report(&t, 0.0);
        }
        assert_eq!(
            (t.lost_writes, t.wrong_reads),
            (0, 0),
            "{config}: lost writes, wrong reads"
        );
        t
    })
}

fn seeds(default: impl Iterator<Item = u64>) -> Vec<u64> {
    match std::env::var("EVICT_STRESS_SEED") {
        Ok(s) => vec![s.parse().expect("EVICT_STRESS_SEED is a number")],
        Err(_) => default.collect(),
    }
}

fn report(t: &Totals, secs: f64) {
    println!(
        "evict_stress: {} runs, {} passes, {} operations ({} texel reads + {} texel writes + {} \
         host reads; {} texels checked), {} creates, {} frees, {} evictability changes; \
         {} evictions, {} eviction write-backs, {} refaults, {} thrashing pages ({} pinned), \
         {} prefetched ({} used), {} staged batches ({} pages copied during launches), \
         {} wave splits; {} lost writes, {} wrong reads; {secs:.1} s",
        t.runs,
        t.passes,
        t.operations(),
        t.texel_reads,
        t.texel_writes,
        t.host_reads,
        t.texels_checked,
        t.creates,
        t.frees,
        t.pin_changes,
        t.evictions,
        t.eviction_write_backs,
        t.refaults,
        t.thrashing_pages,
        t.thrash_pins,
        t.prefetched,
        t.prefetch_hits,
        t.staged_batches,
        t.during_launch,
        t.wave_splits,
        t.lost_writes,
        t.wrong_reads,
    );
}

fn assert_not_vacuous(t: &Totals) {
    assert!(t.evictions > 0, "no page was evicted: {t:?}");
    assert!(t.eviction_write_backs > 0, "no eviction wrote back: {t:?}");
    assert!(t.wave_splits > 0, "no wave was split: {t:?}");
    assert!(t.refaults > 0, "no page was faulted again: {t:?}");
    assert!(t.prefetched > 0, "no page was prefetched: {t:?}");
}

#[test]
fn random_operations_under_tiny_budgets_match_the_shadow() {
    let start = Instant::now();
    let mut total = Totals::default();
    let seeds = seeds(0..12);
    for &seed in &seeds {
        total.add(&run(seed, 100));
    }
    report(&total, start.elapsed().as_secs_f64());
    assert_not_vacuous(&total);
    if seeds.len() > 1 {
        assert!(total.staged_batches > 0, "nothing was staged: {total:?}");
        assert!(
            total.during_launch > 0,
            "no staged page was copied during a launch: {total:?}"
        );
        // These seeds draw every policy and both thrashing responses.
        assert_eq!(
            (total.policies, total.thrashing),
            (0b1111, 0b11),
            "{total:?}"
        );
    }
}

#[test]
#[ignore]
fn a_million_operations_under_tiny_budgets_match_the_shadow() {
    let start = Instant::now();
    let mut total = Totals::default();
    let mut seed = 1000;
    while total.operations() < 1_000_000 {
        for s in seeds(seed..seed + 1) {
            let t = run(s, 400);
            total.add(&t);
        }
        seed += 1;
        if std::env::var("EVICT_STRESS_SEED").is_ok() {
            break;
        }
    }
    report(&total, start.elapsed().as_secs_f64());
    assert_not_vacuous(&total);
}

/// Loads `reads` texels of `from`, each on its own page (or, `dependent`, each at an address
/// made from the value loaded before it), and stores their sum at (0, 0) of `to`.
struct Wide {
    from: ObjectId,
    to: ObjectId,
    reads: u32,
    page: u32,
    dependent: bool,
}

impl Kernel for Wide {
    fn name(&self) -> &'static str {
        "wide"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, _x: u32, _y: u32) -> Result<(), Fault> {
        let mut sum = 0u32;
        let mut at = 0;
        for k in 0..self.reads {
            let v = inv.load_f32(self.from, at * self.page, 0)?.to_bits();
            sum = sum.wrapping_add(v);
            // The next page: k + 1, or, dependent, named by the value just loaded (the data
            // holds k + 1 at page k).
            at = if self.dependent { v } else { k + 1 };
        }
        inv.store_f32(self.to, 0, 0, f32::from_bits(sum))
    }
}

/// An 8 × 2 texture of `bytes` read from and a 2 × 2 one written to, both in pages of 2 × 2.
fn from_to(sys: &System, bytes: Vec<u8>) -> (ObjectEntry, ObjectEntry) {
    let texture = |w| ObjectDesc::texture(w, 2, TexelFormat::R32Float, 2).unwrap();
    let from = sys.create(texture(8), Some(bytes)).unwrap();
    (from, sys.create(texture(2), None).unwrap())
}

fn one_invocation(
    sys: &System,
    kernel: Wide,
    bound: &[&ObjectEntry],
    procedure: Procedure,
) -> Result<(), RuntimeError> {
    let spec = PassSpec::new(
        Arc::new(kernel),
        Arc::new(bound.iter().map(|e| Bound::new(e)).collect()),
        1,
        1,
    );
    sys.on_device(0, move |c| c.run_pass(&spec, procedure))?
        .wait()?
        .map(|_| ())
}

/// One invocation needing more pages at once than the budget holds is `BudgetTooSmall`, for
/// both procedures, with independent and dependent loads, and when non-evictable pages take
/// the room; the system goes on working afterwards.
#[test]
fn an_invocation_larger_than_the_budget_is_budget_too_small() {
    watchdog(0, Duration::from_secs(120), || {
        for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
            for dependent in [false, true] {
                for policy in Policy::ALL {
                    let what = format!("{procedure:?}, dependent {dependent}, {policy}");
                    // Two slots of one 2×2 page each.
                    let sys = System::cpu(
                        &SystemConfig::new(1)
                            .threads(1)
                            .budget(2 * 16)
                            .memory(16)
                            .policy(policy),
                    )
                    .unwrap();
                    // A row of 4 pages; page k holds k + 1 at its first texel.
                    let mut data = vec![0u32; 8 * 2];
                    for k in 0..4 {
                        data[2 * k] = k as u32 + 1;
                    }
                    let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
                    let (from, to) = from_to(&sys, bytes);
                    let wide = |reads| Wide {
                        from: from.id,
                        to: to.id,
                        reads,
                        page: 2,
                        dependent,
                    };
                    // Three loads on three pages and a store on a fourth: 4 pages, 2 slots.
                    match one_invocation(&sys, wide(3), &[&from, &to], procedure) {
                        Err(RuntimeError::BudgetTooSmall {
                            pages,
                            min_bytes,
                            budget_bytes,
                            ..
                        }) => {
                            assert!(
                                pages >= 3 && min_bytes == pages * 16 && budget_bytes == 32,
                                "{what}: {pages} pages, {min_bytes} bytes"
                            );
                        }
                        other => panic!("{what}: {other:?}"),
                    }
                    // One load and the store fit, and nothing was lost on the way.
                    one_invocation(&sys, wide(1), &[&from, &to], procedure)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(sys.read_f32(&to).unwrap()[0].to_bits(), 1, "{what}");
                    assert_eq!(
                        sys.read_f32(&from)
                            .unwrap()
                            .iter()
                            .map(|f| f.to_bits())
                            .collect::<Vec<_>>(),
                        data,
                        "{what}"
                    );
                }
            }
        }
    });
}

/// Non-evictable pages leave an invocation no room: `BudgetTooSmall`, and room again once
/// the object is evictable.
#[test]
fn non_evictable_pages_that_leave_no_room_are_budget_too_small() {
    watchdog(0, Duration::from_secs(120), || {
        for procedure in [Procedure::Relaunch, Procedure::TwoPass] {
            let sys =
                System::cpu(&SystemConfig::new(1).threads(1).budget(4 * 16).memory(16)).unwrap();
            let data: Vec<u32> = (0..16).collect();
            let bytes = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            let (from, to) = from_to(&sys, bytes);
            sys.mm.set_evictable(from.id, false).unwrap();
            // Four loads make all of `from` resident, for good; the store has no slot left.
            let four = || Wide {
                from: from.id,
                to: to.id,
                reads: 4,
                page: 2,
                dependent: false,
            };
            match one_invocation(&sys, four(), &[&from, &to], procedure) {
                Err(RuntimeError::BudgetTooSmall { .. }) => {}
                other => panic!("{procedure:?}: {other:?}"),
            }
            sys.mm.set_evictable(from.id, true).unwrap();
            // Evictable, the four loads and the store are 5 pages for 4 slots: too many at
            // once for relaunch, while two-pass holds the loads, then the store, and fits.
            let got = one_invocation(&sys, four(), &[&from, &to], procedure);
            match (procedure, got) {
                (Procedure::Relaunch, Err(RuntimeError::BudgetTooSmall { pages: 5, .. })) => {}
                (Procedure::TwoPass, Ok(())) => {
                    assert_eq!(sys.read_f32(&to).unwrap()[0].to_bits(), 2 + 4 + 6);
                }
                (_, other) => panic!("{procedure:?}: {other:?}"),
            }
            let three = Wide { reads: 3, ..four() };
            one_invocation(&sys, three, &[&from, &to], procedure)
                .unwrap_or_else(|e| panic!("{procedure:?}: {e}"));
            assert_eq!(
                sys.read_f32(&to).unwrap()[0].to_bits(),
                2 + 4,
                "{procedure:?}"
            );
        }
    });
}
