//! The CPU backend: a software GPU that needs nothing installed.
//!
//! Each device owns its physical memories and its page table. Kernels run on a rayon pool,
//! rows split into tasks; each task has its own [`Invocation`] (translation, TLB, store
//! buffer). Memory words are `AtomicU32` accessed with relaxed ordering: on the targets we run
//! on that compiles to plain loads and stores, and it keeps two invocations writing one texel
//! in one pass (allowed by the semantics, paper 3.1, with an undefined winner) free of
//! undefined behaviour. Other threads reach a device's memories too, word by word through
//! the same atomics: another CPU device's worker reading a slot for a peer copy, and the
//! memory manager writing a staged page during a launch; the device's own slot copies are
//! bulk copies under a per-slot lease (`memory.rs` says why that is sound).

use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;
use tessera_core::{
    DeviceId, GlobalPage, Location, PageDescriptor, PageTable, RemoteLink, SlotAddr,
};

mod compact;
pub(crate) mod invocation;
mod memory;
mod merge;
pub(crate) mod unpaged;

pub use compact::RequestBits;
pub use invocation::{run_span_with, Invocation, MIPMAPPED};
use memory::{Memory, SharedMemory};
pub use unpaged::{Plain, PlainInput, PlainOutput};

use invocation::Rect;

use crate::backend::{
    Device, Domain, Launch, LaunchOutcome, MergeOutcome, PeerCopy, PeerMemory, SlotSink,
};
use crate::error::{Result, RuntimeError};
use crate::kernel::{TempStore, RESUMED_BIT};

pub struct CpuDevice {
    id: DeviceId,
    memories: Vec<Arc<Memory>>,
    table: PageTable,
    temp: Vec<TempStore>,
    pool: Arc<rayon::ThreadPool>,
}

impl CpuDevice {
    pub fn new(id: DeviceId, pool: Arc<rayon::ThreadPool>) -> Self {
        CpuDevice {
            id,
            memories: Vec::new(),
            table: PageTable::default(),
            temp: Vec::new(),
            pool,
        }
    }

    fn memory(&self, memory: u16) -> Result<&Memory> {
        self.memories
            .get(memory as usize)
            .map(|m| &**m)
            .ok_or_else(|| self.err(format!("no physical memory {memory}")))
    }

    fn slot_err(&self, what: &str, at: SlotAddr, e: memory::SlotError) -> RuntimeError {
        self.err(format!("slot {what} in physical memory {}: {e}", at.memory))
    }

    fn err(&self, message: String) -> RuntimeError {
        RuntimeError::Backend {
            device: self.id,
            message,
        }
    }
}

/// Invocations per rayon task for a rectangle: a tile of this many columns and rows. Square
/// tiles of the default page's side copy the fewest halo texels per texel on the tile path
/// (a 64×16 tile copied 16% more than it computed, a 64×64 one 6%), and a 1024² pass still
/// splits into 256 tasks.
const TILE_W: u32 = 64;
const TILE_H: u32 = 64;
const LIST_PER_TASK: usize = 1024;

/// The tiles of a rectangle, in the order threads take them: whole `TILE_W × TILE_H` tiles
/// row by row, and the last `2 × threads` of them cut into rows of `TILE_H / 4`, so that the
/// last pieces the threads take are a quarter of a tile. A launch ends when its slowest thread
/// does: with whole tiles to the end, one thread sat idle for up to a tile (150–240 µs at
/// 1024²) while the other finished its last, a fixed cost of every launch that a device's band
/// of few tiles (8 devices) pays as one of many does.
///
/// With `keep_whole`, no tile is cut: a launch that touches remote objects classifies its remote
/// accesses per task (PROTOCOL.md, "The counting rule"), and a cut that depended on the
/// thread count made the batch and spread bytes, and so the modeled time, depend on it too.
fn tiles(
    (x0, y0, x1, y1): (u32, u32, u32, u32),
    threads: usize,
    keep_whole: bool,
) -> Vec<(u32, u32, u32, u32)> {
    let whole: Vec<(u32, u32, u32, u32)> = (y0..y1)
        .step_by(TILE_H as usize)
        .flat_map(|ty| {
            (x0..x1)
                .step_by(TILE_W as usize)
                .map(move |tx| (tx, ty, (tx + TILE_W).min(x1), (ty + TILE_H).min(y1)))
        })
        .collect();
    let cut = if keep_whole {
        0
    } else {
        (2 * threads).min(whole.len())
    };
    let (first, last) = whole.split_at(whole.len() - cut);
    let quarter = (TILE_H / 4).max(1);
    let mut out = first.to_vec();
    for &(tx, ty, xe, ye) in last {
        out.extend(
            (ty..ye)
                .step_by(quarter as usize)
                .map(|y| (tx, y, xe, (y + quarter).min(ye))),
        );
    }
    out
}

struct TaskResult {
    incomplete: Vec<(u32, u32)>,
    suspended: u64,
    temp: Vec<TempStore>,
    touched: Vec<GlobalPage>,
    /// The task's first kernel error, with the failing invocation's place in launch order.
    error: Option<(u64, RuntimeError)>,
    /// Remote traffic by location (see `Invocation::remote_counts`).
    remote: Vec<(Location, RemoteLink)>,
}

/// What every task of one launch shares.
struct Task<'a> {
    memories: &'a [Arc<Memory>],
    table: &'a PageTable,
    bindings: &'a [crate::kernel::Bound],
    bits: &'a RequestBits,
    kernel: &'a dyn crate::kernel::Kernel,
    mode: crate::kernel::Mode,
    footprint: Option<crate::kernel::Footprint>,
    remote: &'a [Option<Arc<crate::remote::RemoteObject>>],
    device: DeviceId,
}

/// A worker thread's buffers for the tile path, kept from tile to tile.
#[derive(Default)]
struct TileBuffers {
    inputs: Vec<Vec<u32>>,
    out: Vec<u32>,
    written: Vec<u8>,
}

impl Task<'_> {
    fn invocation(&self) -> Invocation<'_> {
        Invocation::new(
            self.memories,
            self.table,
            self.bindings,
            self.bits,
            self.kernel.name(),
            self.mode,
            self.remote,
            self.device,
        )
    }

    fn result(
        inv: Invocation<'_>,
        incomplete: Vec<(u32, u32)>,
        error: Option<(u64, RuntimeError)>,
    ) -> TaskResult {
        let mut inv = inv;
        TaskResult {
            incomplete,
            suspended: inv.suspended,
            temp: std::mem::take(&mut inv.temp),
            touched: std::mem::take(&mut inv.touched),
            error,
            remote: inv.remote_counts(),
        }
    }

    /// Runs `run`, a task of the user's kernel, turning a panic in it into the launch's error
    /// at `rank`. Uncaught, the panic would end the device's worker thread, and with it every
    /// later pass of the system; caught, the pass fails as it does when a kernel returns an
    /// error, and the next pass runs.
    fn guarded(&self, rank: u64, run: impl FnOnce() -> TaskResult) -> TaskResult {
        // The task's state is its own result and the scratch buffers, which the failed launch
        // drops; what the invocations committed before the panic stays, as after a kernel error.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic with no message".to_string());
            TaskResult {
                incomplete: Vec::new(),
                suspended: 0,
                temp: Vec::new(),
                touched: Vec::new(),
                error: Some((
                    rank,
                    RuntimeError::KernelPanicked {
                        kernel: self.kernel.name().to_string(),
                        message,
                    },
                )),
                remote: Vec::new(),
            }
        })
    }

    /// Runs a tile: over plain windows where the kernel has a footprint and its pages are
    /// there, else row by row through the kernel's span loop.
    /// `rank` gives an invocation's place in launch order.
    fn run_tile(
        &self,
        xs: std::ops::Range<u32>,
        ys: std::ops::Range<u32>,
        bufs: &mut TileBuffers,
        rank: impl Fn(u32, u32) -> u64,
    ) -> TaskResult {
        let mut inv = self.invocation();
        let mut incomplete = Vec::new();
        if self.run_plain_tile(&mut inv, &xs, &ys, bufs) {
            return Self::result(inv, incomplete, None);
        }
        // Row by row, so the first error met is the tile's first in launch order.
        for y in ys {
            if let Err(e) = self
                .kernel
                .run_span(&mut inv, y, xs.clone(), &mut incomplete)
            {
                let (fx, fy) = inv.failed_at.unwrap_or((xs.start, y));
                return Self::result(inv, incomplete, Some((rank(fx, fy), e)));
            }
        }
        Self::result(inv, incomplete, None)
    }

    /// The tile path: translates each page of the footprint's rectangles once, runs the tile
    /// over plain copies and commits its stores. `false` (nothing committed, nothing
    /// recorded) sends the tile to the per-texel path.
    fn run_plain_tile(
        &self,
        inv: &mut Invocation<'_>,
        xs: &std::ops::Range<u32>,
        ys: &std::ops::Range<u32>,
        bufs: &mut TileBuffers,
    ) -> bool {
        let Some(fp) = &self.footprint else {
            return false;
        };
        let Some(wi) = inv.binding_of(fp.write) else {
            return false;
        };
        let Some((ow, oh, format)) = inv.plain_extent(wi) else {
            return false;
        };
        let out = Rect {
            x0: xs.start,
            y0: ys.start,
            x1: xs.end,
            y1: ys.end,
        };
        if out.x1 > ow || out.y1 > oh || out.x0 >= out.x1 || out.y0 >= out.y1 {
            return false;
        }
        bufs.inputs.resize_with(fp.reads.len(), Vec::new);
        let mut rects = [out; crate::kernel::MAX_BINDINGS];
        for (k, &(id, halo)) in fp.reads.iter().enumerate() {
            let Some(bi) = inv.binding_of(id) else {
                return false;
            };
            let Some((w, h, _)) = inv.plain_extent(bi) else {
                return false;
            };
            let r = Rect {
                x0: out.x0.saturating_sub(halo).min(w),
                y0: out.y0.saturating_sub(halo).min(h),
                x1: out.x1.saturating_add(halo).min(w),
                y1: out.y1.saturating_add(halo).min(h),
            };
            if k >= rects.len() || !inv.copy_rect(bi, r, &mut bufs.inputs[k]) {
                return false;
            }
            rects[k] = r;
        }
        if inv.mode() == crate::kernel::Mode::Direct && !inv.rect_writable(wi, out) {
            return false;
        }
        let n = (out.w() * out.h()) as usize;
        bufs.out.clear();
        bufs.out.resize(n, 0);
        bufs.written.clear();
        bufs.written.resize(n, 0);
        let inputs: Vec<PlainInput<'_>> = fp
            .reads
            .iter()
            .zip(&rects)
            .zip(&bufs.inputs)
            .map(|((&(id, _), r), data)| PlainInput {
                id,
                x0: r.x0,
                y0: r.y0,
                w: r.w(),
                h: r.h(),
                data,
            })
            .collect();
        let mut plain = Plain {
            inputs: &inputs,
            output: PlainOutput {
                id: fp.write,
                format,
                x0: out.x0,
                y0: out.y0,
                w: out.w(),
                h: out.h(),
                data: &mut bufs.out,
                written: Some(&mut bufs.written),
            },
        };
        if self
            .kernel
            .run_plain(&mut plain, xs.clone(), ys.clone())
            .is_err()
        {
            return false;
        }
        inv.commit_rect(wi, out, &bufs.out, &bufs.written);
        true
    }

    /// Runs a list of invocations (a relaunch); `first` is the place of `items[0]` in the list.
    ///
    /// A relaunch list is mostly whole rows and rectangles (the tiles and waves whose pages
    /// were missing), in launch order. Runs of it that form a rectangle, row-major, go through
    /// the tile path like a rectangle launch, and rows through the span loop, so a relaunch
    /// after oversubscription's evictions is not a texel-by-texel crawl. The order, the
    /// requests and the first error are those of running the items one by one.
    fn run_list(&self, items: &[(u32, u32)], first: u64, bufs: &mut TileBuffers) -> TaskResult {
        let mut inv = self.invocation();
        let mut incomplete = Vec::new();
        let mut i = 0;
        while i < items.len() {
            // Runs are of entries alike in `RESUMED_BIT` too, since they differ in y.
            let (xa, ya_bit) = items[i];
            let ya = ya_bit & !RESUMED_BIT;
            inv.resumed = ya_bit != ya;
            let mut w = 1;
            while i + w < items.len() && items[i + w] == (xa.wrapping_add(w as u32), ya_bit) {
                w += 1;
            }
            let mut h = 1;
            'rows: loop {
                let s = i + h * w;
                if s + w > items.len() {
                    break;
                }
                for k in 0..w {
                    if items[s + k] != (xa.wrapping_add(k as u32), ya_bit.wrapping_add(h as u32)) {
                        break 'rows;
                    }
                }
                h += 1;
            }
            let (xs, ys) = (xa..xa + w as u32, ya..ya + h as u32);
            // Plain windows have no saved state to offer: resumed runs take the spans.
            if w * h >= MIN_LIST_RECT
                && !inv.resumed
                && self.run_plain_tile(&mut inv, &xs, &ys, bufs)
            {
                i += w * h;
                continue;
            }
            for y in ys {
                if let Err(e) = self
                    .kernel
                    .run_span(&mut inv, y, xs.clone(), &mut incomplete)
                {
                    let (fx, fy) = inv.failed_at.unwrap_or((xa, y));
                    let rank = first + (i + (fy - ya) as usize * w + (fx - xa) as usize) as u64;
                    return Self::result(inv, incomplete, Some((rank, e)));
                }
            }
            i += w * h;
        }
        Self::result(inv, incomplete, None)
    }
}

/// Rectangles of a relaunch list smaller than this run through the span loop: the tile path's
/// fixed cost (translating and copying whole windows) pays only over enough invocations.
const MIN_LIST_RECT: usize = 64;

impl Device for CpuDevice {
    fn counts_remote(&self) -> bool {
        true
    }

    fn describe(&self) -> String {
        format!("cpu ({} threads)", self.pool.current_num_threads())
    }

    fn create_memory(&mut self, memory: u16, slot_bytes: u64, capacity: u32) -> Result<()> {
        if memory as usize != self.memories.len() || !slot_bytes.is_multiple_of(4) {
            return Err(self.err(format!(
                "bad physical memory {memory} of {slot_bytes}-byte slots"
            )));
        }
        let m = Memory::new((slot_bytes / 4) as usize, capacity).ok_or_else(|| {
            self.err(format!(
                "cannot allocate physical memory {memory}: {capacity} slots of {slot_bytes} bytes"
            ))
        })?;
        self.memories.push(Arc::new(m));
        Ok(())
    }

    fn write_slot(&mut self, at: SlotAddr, data: &[u8]) -> Result<()> {
        // A bulk copy (`Memory::owner_write`): an atomic store per word ran at half of
        // memcpy's speed (`tessera bench page-moves`).
        self.memory(at.memory)?
            .owner_write(at.slot, data)
            .map_err(|e| self.slot_err("write", at, e))
    }

    fn read_slot(&mut self, at: SlotAddr) -> Result<Vec<u8>> {
        let mut out = vec![0u8; self.memory(at.memory)?.slot_bytes()];
        self.read_slot_to(at, &mut out)?;
        Ok(out)
    }

    fn read_slot_to(&mut self, at: SlotAddr, out: &mut [u8]) -> Result<()> {
        self.memory(at.memory)?
            .owner_read(at.slot, out)
            .map_err(|e| self.slot_err("read", at, e))
    }

    fn resize_page_table(&mut self, pages: u64) -> Result<()> {
        self.table.resize(pages);
        Ok(())
    }

    fn set_page(&mut self, page: GlobalPage, desc: PageDescriptor) -> Result<()> {
        Ok(self.table.set(page, desc)?)
    }

    fn time_host_copy(&mut self, bytes: u64) -> Result<Option<f64>> {
        // A software device's memory is host memory: its link is memcpy. Both buffers are
        // written first, so the copy is timed and not the first touch of fresh pages.
        let src = vec![1u8; bytes as usize];
        let mut dst = vec![2u8; bytes as usize];
        let t = Instant::now();
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
        Ok(Some(t.elapsed().as_secs_f64()))
    }

    fn page_times(&mut self, pages: &[GlobalPage]) -> Result<Vec<u64>> {
        Ok(pages
            .iter()
            .map(|&p| self.table.stamp(p))
            .collect::<Result<_, _>>()?)
    }

    fn launch(&mut self, l: &Launch) -> Result<LaunchOutcome> {
        crate::kernel::check_launch(&*l.kernel, &l.bindings)?;
        let mut bits = RequestBits::new(l.pages);
        let (memories, table, bindings) = (&self.memories, &self.table, &l.bindings[..]);
        let kernel = &*l.kernel;
        // The tile path copies windows of resident slots; a remote object has none, and its
        // accesses are counted one by one, so a footprint that names one is not used.
        let is_remote = |id: tessera_core::ObjectId| {
            bindings
                .iter()
                .zip(l.remote.iter())
                .any(|(b, r)| b.id == id && r.is_some())
        };
        let task = Task {
            memories,
            table,
            bindings,
            bits: &bits,
            kernel,
            mode: l.mode,
            footprint: kernel.footprint().filter(|f| {
                f.reads.len() <= crate::kernel::MAX_BINDINGS
                    && !is_remote(f.write)
                    && !f.reads.iter().any(|&(id, _)| is_remote(id))
            }),
            remote: &l.remote,
            device: self.id,
        };
        let threads = self.pool.current_num_threads().max(1);
        let results: Vec<TaskResult> = self.pool.install(|| match &l.domain {
            Domain::Rect { x0, y0, x1, y1 } => {
                // Tasks are tiles, walked row by row inside: a tile stays on a few pages, so
                // the TLB hits and the page slots stream through the cache like a GPU's
                // tiled rasterisation order.
                let (x0, y0, x1, y1) = (*x0, *y0, *x1, *y1);
                let remote = l.remote.iter().any(Option::is_some);
                let tiles = tiles((x0, y0, x1, y1), threads, remote);
                let rank = |x: u32, y: u32| (y - y0) as u64 * (x1 - x0) as u64 + (x - x0) as u64;
                // Each thread takes the next tile in order until none is left, so the last
                // ones taken are the small ones `tiles` put at the end (see there).
                let next = std::sync::atomic::AtomicUsize::new(0);
                let mut done: Vec<(usize, TaskResult)> = (0..threads)
                    .into_par_iter()
                    .with_max_len(1)
                    .flat_map_iter(|_| {
                        let mut bufs = TileBuffers::default();
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&(tx, ty, xe, ye)) = tiles.get(i) else {
                                break;
                            };
                            let r = task.guarded(rank(tx, ty), || {
                                task.run_tile(tx..xe, ty..ye, &mut bufs, rank)
                            });
                            mine.push((i, r));
                        }
                        mine
                    })
                    .collect();
                // In the tiles' order, as one job per tile gave them.
                done.sort_unstable_by_key(|&(i, _)| i);
                done.into_iter().map(|(_, r)| r).collect()
            }
            Domain::List(list) => list
                .par_chunks(LIST_PER_TASK)
                .enumerate()
                .map_init(TileBuffers::default, |bufs, (i, c)| {
                    let first = (i * LIST_PER_TASK) as u64;
                    task.guarded(first, || task.run_list(c, first, bufs))
                })
                .collect(),
        });
        let mut out = LaunchOutcome {
            invocations: l.domain.len(),
            ..Default::default()
        };
        // Tasks run at once, each up to its own first error: the launch's error is the one of
        // the first failing invocation in launch order, the one the GPU backend reports too.
        if let Some((_, e)) = results
            .iter()
            .filter_map(|r| r.error.as_ref())
            .min_by_key(|(rank, _)| *rank)
        {
            return Err(e.clone());
        }
        // Temporaries accumulate across the relaunches of one pass until merged or discarded.
        for r in results {
            for (loc, link) in r.remote {
                match out.remote.iter_mut().find(|(l, _)| *l == loc) {
                    Some((_, acc)) => acc.add(&link),
                    None => out.remote.push((loc, link)),
                }
            }
            out.incomplete.extend(r.incomplete);
            out.suspended += r.suspended;
            if self.temp.is_empty() {
                self.temp = r.temp;
            } else {
                self.temp.extend(r.temp);
            }
            for p in r.touched {
                self.table.touch(p, l.time)?;
            }
        }
        let t = Instant::now();
        out.requests = bits.uniquify();
        out.uniquify_s = t.elapsed().as_secs_f64();
        Ok(out)
    }

    fn merge(&mut self) -> Result<MergeOutcome> {
        let temp = std::mem::take(&mut self.temp);
        let (out, kept) = self
            .pool
            .install(|| merge::merge(&self.table, &self.memories, &temp));
        self.temp = kept;
        Ok(out)
    }

    fn discard_temp(&mut self) {
        self.temp.clear();
    }

    fn peer_group(&self) -> Option<u64> {
        // Every CPU device of the process reaches every other's memory, so all are one group.
        // `TESSERA_PEER_COPY=off` moves pages through the host as before, as on wgpu.
        let off = crate::env_switch(crate::PEER_COPY) == Ok(Some(false));
        (!off).then_some(CPU_PEER_GROUP)
    }

    fn peer_memory(&self, memory: u16) -> Result<PeerMemory> {
        let m = self
            .memories
            .get(memory as usize)
            .ok_or_else(|| self.err(format!("no physical memory {memory} to copy from")))?;
        Ok(SharedMemory::peer(m))
    }

    fn copy_from_peers(&mut self, copies: &[PeerCopy]) -> Result<()> {
        for c in copies {
            let from = c
                .from
                .downcast_ref::<SharedMemory>()
                .ok_or_else(|| self.err("a peer copy from a memory of another backend".into()))?;
            self.memory(c.at.memory)?
                .owner_copy_from(c.at.slot, &from.0, c.from_slot)
                .map_err(|e| self.slot_err("peer copy", c.at, e))?;
        }
        Ok(())
    }

    fn slot_sink(&self, memory: u16) -> Option<Arc<dyn SlotSink>> {
        let m = self.memories.get(memory as usize)?;
        Some(Arc::new(SharedMemory(m.clone())))
    }
}

/// The CPU devices' peer group ([`Device::peer_group`]). wgpu's groups count up from 0, one
/// per wgpu device opened, and never come near it.
const CPU_PEER_GROUP: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::{tiles, TILE_H, TILE_W};

    /// Every texel of the rectangle is in exactly one piece; the pieces before the last
    /// `2 × threads` tiles are whole tiles (clipped at the rectangle's edges), and those after
    /// are no taller than a quarter tile, rectangles of fewer tiles than that included.
    #[test]
    fn the_tiles_cover_the_rectangle_once_and_only_the_last_are_quarters() {
        for &(rect, threads) in &[
            ((0, 0, 256, 256), 2usize),
            ((3, 5, 200, 131), 2),
            ((0, 0, 64, 10), 4),
            ((7, 0, 8, 1), 1),
            ((0, 0, 1024, 128), 2),
        ] {
            let (x0, y0, x1, y1) = rect;
            let got = tiles(rect, threads, false);
            assert_eq!(
                tiles(rect, threads, true).len(),
                (rect.2 - rect.0).div_ceil(TILE_W) as usize
                    * (rect.3 - rect.1).div_ceil(TILE_H) as usize
            );
            let mut hits = vec![0u8; ((x1 - x0) * (y1 - y0)) as usize];
            for &(tx, ty, xe, ye) in &got {
                assert!(
                    tx < xe && ty < ye && xe <= x1 && ye <= y1,
                    "{rect:?}: {got:?}"
                );
                for y in ty..ye {
                    for x in tx..xe {
                        hits[((y - y0) * (x1 - x0) + (x - x0)) as usize] += 1;
                    }
                }
            }
            assert!(
                hits.iter().all(|&h| h == 1),
                "{rect:?}: a texel not covered once"
            );
            let whole = (x1 - x0).div_ceil(TILE_W) as usize * (y1 - y0).div_ceil(TILE_H) as usize;
            let cut = (2 * threads).min(whole);
            let (firsts, lasts) = got.split_at(whole - cut);
            assert!(
                firsts
                    .iter()
                    .all(|&(tx, ty, xe, ye)| (xe - tx == TILE_W || xe == x1)
                        && (ye - ty == TILE_H || ye == y1)),
                "{rect:?}: a piece before the last {cut} tiles is not a whole tile"
            );
            assert!(
                lasts.iter().all(|&(_, ty, _, ye)| ye - ty <= TILE_H / 4),
                "{rect:?}: a piece among the last {cut} tiles is more than a quarter: {lasts:?}"
            );
            assert!(lasts.len() >= cut, "{rect:?}");
        }
    }
}
