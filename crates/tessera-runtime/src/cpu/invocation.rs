//! The CPU twin of a kernel invocation (`shader/invocation.wgsl` in tessera-wgpu is the GPU
//! twin): translation through the device's page table, request recording and store buffering.
//! Inside a kernel's Rust twin every texel access goes through here; a miss is
//! `Err(Fault::Miss)`, which `?` propagates, after recording a request bit. Stores are
//! buffered and committed only when the invocation completes, so a faulting invocation leaves
//! no side effect and can be relaunched.
//!
//! A tiny TLB per worker task (the last page translated per bound object) keeps the page table
//! walk off the hot path: a stencil touches the same page for most of its neighbours.

use std::sync::atomic::{AtomicU32, Ordering};

use tessera_core::access::{classify_keys, RemoteAccess};
use tessera_core::sampler::{self, Sampler, Shape, Texels, Window};
use tessera_core::{
    Access, Addressing, CoreError, DeviceId, GlobalPage, Location, MipLayout, ObjectId, PageTable,
    RemoteLink, TexelFormat,
};

use super::compact::RequestBits;
use crate::contract::{
    kind_name, Bound, Fault, Mode, TempStore, MAX_BINDINGS, MAX_STORES, RESUMED_BIT,
};
use crate::error::RuntimeError;
use crate::remote::RemoteObject;

/// The loop behind [`Kernel::run_span`](crate::Kernel::run_span), generic over the
/// invocation body.
#[inline(always)]
pub fn run_span_with(
    inv: &mut Invocation<'_>,
    y: u32,
    xs: std::ops::Range<u32>,
    incomplete: &mut Vec<(u32, u32)>,
    mut body: impl FnMut(&mut Invocation<'_>, u32, u32) -> Result<(), Fault>,
) -> Result<(), RuntimeError> {
    // A resumed invocation that faults again still has the state it saved.
    let kept = if inv.resumed { RESUMED_BIT } else { 0 };
    for x in xs {
        match body(inv, x, y) {
            Ok(()) => inv.finish(true),
            Err(Fault::Miss) => {
                inv.finish(false);
                incomplete.push((x, y | kept));
            }
            Err(Fault::Suspend) => {
                let saved = inv.mode == Mode::Direct;
                inv.finish(saved);
                inv.suspended += saved as u64;
                incomplete.push((x, y | if saved { RESUMED_BIT } else { kept }));
            }
            Err(Fault::Error(e)) => {
                // Discarded like a fault's; the backend needs the place to pick the launch's
                // first error as the GPU does.
                inv.finish(false);
                inv.failed_at = Some((x, y));
                return Err(*e);
            }
        }
    }
    Ok(())
}

/// One pending store: a word of a page, kept until the invocation completes.
#[derive(Clone, Copy, Debug)]
struct Store<'a> {
    memory: &'a [AtomicU32],
    word: usize,
    value: u32,
}

/// The last page translated for one binding, kept as the texel rectangle it covers (clipped
/// to the object) so that a hit costs two subtractions and two compares, with the bounds
/// check folded in.
#[derive(Clone, Copy)]
struct TlbEntry<'a> {
    x0: u64,
    y0: u64,
    w: u64,
    h: u64,
    shift: u32,
    words_per_texel: u64,
    memory: &'a [AtomicU32],
    base: usize,
    writable: bool,
}

const TLB_EMPTY: TlbEntry<'static> = TlbEntry {
    x0: 0,
    y0: 0,
    w: 0,
    h: 0,
    shift: 0,
    words_per_texel: 0,
    memory: &[],
    base: 0,
    writable: false,
};

/// The CPU twin's view of the device during one launch: translation, request recording and
/// store buffering. One per worker task; reused across the invocations the task runs.
pub struct Invocation<'a> {
    memories: &'a [std::sync::Arc<super::memory::Memory>],
    table: &'a PageTable,
    bindings: &'a [Bound],
    /// The bound ids, packed: the lookup every access starts with scans one cache line.
    ids: [u32; MAX_BINDINGS],
    bits: &'a RequestBits,
    kernel: &'static str,
    mode: Mode,
    tlb: [TlbEntry<'a>; MAX_BINDINGS],
    stores: Vec<Store<'a>>,
    temp_stores: Vec<TempStore>,
    /// Committed temporary stores of all invocations this task ran.
    pub(crate) temp: Vec<TempStore>,
    /// Pages translated through the table (TLB misses): their time stamps are updated.
    pub(crate) touched: Vec<GlobalPage>,
    /// The invocation whose kernel error stopped the span (see `run_span_with`).
    pub(crate) failed_at: Option<(u32, u32)>,
    /// Invocations this task ran that saved their state (`Fault::Suspend` in Direct mode).
    pub(crate) suspended: u64,
    /// The invocations being run saved their state at an earlier launch ([`RESUMED_BIT`]).
    pub(crate) resumed: bool,
    /// Per binding, the remote object it is (`None`: migrate or replicate-read). A remote
    /// binding never fills the TLB, so every access to it takes the slow path, where it is
    /// counted; the fast path of other bindings is unchanged.
    remote: [Option<&'a RemoteObject>; MAX_BINDINGS],
    device: DeviceId,
    /// Remote accesses that left this device, of the invocations this task completed (loads
    /// of faulting invocations too: they crossed the link).
    /// As [`RemoteAccess::key`]s, which sort faster than the structs.
    remote_log: Vec<u64>,
    /// The current invocation's remote stores, counted when it completes.
    remote_pending: Vec<u64>,
    /// Inside a degrading sample's probe (`sampler::Probe`): a missing page yields zeros
    /// instead of faulting, recording its request where `Some(true)`.
    probe: Option<bool>,
    probe_missed: bool,
}

impl<'a> Invocation<'a> {
    // One argument per thing a task shares with its invocations; a struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        memories: &'a [std::sync::Arc<super::memory::Memory>],
        table: &'a PageTable,
        bindings: &'a [Bound],
        bits: &'a RequestBits,
        kernel: &'static str,
        mode: Mode,
        remote: &'a [Option<std::sync::Arc<RemoteObject>>],
        device: DeviceId,
    ) -> Self {
        // `kernel::check_launch` has refused a launch with more bindings than there is room.
        let mut ids = [u32::MAX; MAX_BINDINGS];
        for (slot, b) in ids.iter_mut().zip(bindings) {
            *slot = b.id.0;
        }
        let mut remote_refs = [None; MAX_BINDINGS];
        for (slot, r) in remote_refs.iter_mut().zip(remote) {
            *slot = r.as_deref();
        }
        Invocation {
            memories,
            table,
            bindings,
            ids,
            bits,
            kernel,
            mode,
            tlb: [TLB_EMPTY; MAX_BINDINGS],
            stores: Vec::new(),
            temp_stores: Vec::new(),
            temp: Vec::new(),
            touched: Vec::new(),
            failed_at: None,
            suspended: 0,
            resumed: false,
            remote: remote_refs,
            device,
            remote_log: Vec::new(),
            remote_pending: Vec::new(),
            probe: None,
            probe_missed: false,
        }
    }

    /// Whether this invocation saved its state at an earlier launch of the pass
    /// ([`Fault::Suspend`]): only then has it a state to read back.
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Called by the backend after `invoke` returned: commit on success, discard on fault.
    #[inline]
    pub(crate) fn finish(&mut self, completed: bool) {
        if self.stores.is_empty() && self.temp_stores.is_empty() && self.remote_pending.is_empty() {
            return;
        }
        if completed {
            for s in self.stores.drain(..) {
                s.memory[s.word].store(s.value, Ordering::Relaxed);
            }
            self.temp.append(&mut self.temp_stores);
            self.remote_log.append(&mut self.remote_pending);
        } else {
            self.stores.clear();
            self.temp_stores.clear();
            self.remote_pending.clear();
        }
    }

    fn fail(&self, e: CoreError) -> Fault {
        Fault::Error(Box::new(RuntimeError::Kernel {
            kernel: self.kernel.to_string(),
            source: e,
        }))
    }

    #[inline(always)]
    fn binding(&self, id: ObjectId) -> Result<usize, Fault> {
        // Only the slots of bound objects: the padding after them is `u32::MAX`, which is
        // also an id a kernel may name.
        let bound = &self.ids[..self.bindings.len()];
        bound.iter().position(|&b| b == id.0).ok_or_else(|| {
            Fault::Error(Box::new(RuntimeError::Unbound {
                kernel: self.kernel.to_string(),
                object: id,
            }))
        })
    }

    /// Translates (x, y) of a bound object to (memory, word). `Ok(None)` only in request mode,
    /// where a miss is recorded and the access yields zero. The TLB hit is the whole fast
    /// path; everything else is out of line.
    #[inline(always)]
    fn translate(
        &mut self,
        id: ObjectId,
        x: u32,
        y: u32,
        access: Access,
        i: usize,
    ) -> Result<Option<(&'a [AtomicU32], usize)>, Fault> {
        let bi = self.binding(id)?;
        let e = &self.tlb[bi];
        let (x, y) = (x as u64, y as u64);
        let (dx, dy) = (x.wrapping_sub(e.x0), y.wrapping_sub(e.y0));
        if dx < e.w
            && dy < e.h
            && (e.writable || access == Access::Read || self.mode != Mode::Direct)
        {
            let word = ((dy << e.shift) | dx) * e.words_per_texel;
            return Ok(Some((e.memory, e.base + word as usize)));
        }
        self.translate_slow(bi, x, y, access, i)
    }

    #[inline(never)]
    fn translate_slow(
        &mut self,
        bi: usize,
        x: u64,
        y: u64,
        access: Access,
        i: usize,
    ) -> Result<Option<(&'a [AtomicU32], usize)>, Fault> {
        let b = self.bindings[bi];
        if b.mip.is_some() {
            return Err(self.fail(CoreError::WrongKind {
                object: b.id,
                expected: kind_name(b.format),
                actual: MIPMAPPED,
            }));
        }
        if x >= b.width || y >= b.height {
            if self.mode == Mode::Request {
                // A request pass may compute addresses from values it could not load yet.
                return Ok(None);
            }
            return Err(self.fail(CoreError::OutOfRange {
                object: b.id,
                x,
                y,
                width: b.width,
                height: b.height,
                buffer: b.is_buffer(),
            }));
        }
        let (page, off) = b.locate(x, y);
        if let Some(r) = self.remote[bi] {
            return Ok(Some(self.remote_word(r, page, off, access, i)));
        }
        let d = self.table.get(GlobalPage(page)).map_err(|e| self.fail(e))?;
        self.touched.push(GlobalPage(page));
        let needs_write = access == Access::Write && self.mode == Mode::Direct;
        let at = match d.slot_addr() {
            Some(at) if d.is_writable() || !needs_write => at,
            _ => {
                self.bits.record(GlobalPage(page), access);
                return match self.mode {
                    Mode::Request => Ok(None),
                    _ => Err(Fault::Miss),
                };
            }
        };
        let side = b.mask + 1;
        let (x0, y0) = (
            x & !b.mask,
            if b.format.is_some() { y & !b.mask } else { 0 },
        );
        let memory = &self.memories[at.memory as usize];
        let base = (at.slot as u64 * b.slot_words) as usize;
        self.tlb[bi] = TlbEntry {
            x0,
            y0,
            w: side.min(b.width - x0),
            h: if b.format.is_some() {
                side.min(b.height - y0)
            } else {
                1
            },
            shift: b.shift,
            words_per_texel: b.words_per_texel,
            memory,
            base,
            writable: d.is_writable(),
        };
        Ok(Some((memory, base + off as usize)))
    }

    /// A remote page's word, in place: no page table, no request, never a miss. Counted
    /// when it leaves this device: a load now, a store when its invocation completes.
    fn remote_word(
        &mut self,
        r: &'a RemoteObject,
        page: u64,
        off: u64,
        access: Access,
        i: usize,
    ) -> (&'a [AtomicU32], usize) {
        let word = ((page - r.page_offset) * r.page_words + off) as usize;
        if r.location(GlobalPage(page)).is_remote_to(self.device) {
            let a = RemoteAccess {
                write: access == Access::Write,
                page,
                word: (off as usize + i) as u32,
            };
            if a.write {
                self.remote_pending.push(a.key());
            } else {
                self.remote_log.push(a.key());
            }
        }
        (r.words(), word)
    }

    /// This task's remote traffic by location, under the batch/spread rule of
    /// [`classify_keys`](tessera_core::access::classify_keys) (the task is one tile of invocations, or one chunk of a list).
    pub(crate) fn remote_counts(&mut self) -> Vec<(Location, RemoteLink)> {
        let mut out: Vec<(Location, RemoteLink)> = Vec::new();
        if self.remote_log.is_empty() {
            return out;
        }
        let remote = self.remote;
        classify_keys(&mut self.remote_log, |page, link| {
            let loc = remote
                .iter()
                .flatten()
                .find(|r| (r.page_offset..r.page_offset + r.pages()).contains(&page))
                .map(|r| r.location(GlobalPage(page)))
                .unwrap_or_default();
            match out.iter_mut().find(|(l, _)| *l == loc) {
                Some((_, acc)) => acc.add(&link),
                None => out.push((loc, link)),
            }
        });
        self.remote_log.clear();
        out
    }

    #[inline(always)]
    fn load_word(&mut self, id: ObjectId, x: u32, y: u32, i: usize) -> Result<u32, Fault> {
        Ok(match self.translate(id, x, y, Access::Read, i)? {
            Some((m, w)) => m[w + i].load(Ordering::Relaxed),
            None => 0,
        })
    }

    #[inline(always)]
    fn store_word(
        &mut self,
        id: ObjectId,
        x: u32,
        y: u32,
        i: usize,
        value: u32,
    ) -> Result<(), Fault> {
        match self.mode {
            // Dropped, but a store to an object the launch does not bind is a bug in any mode.
            Mode::Request => self.binding(id).map(|_| ()),
            Mode::Direct => {
                if let Some((memory, word)) = self.translate(id, x, y, Access::Write, i)? {
                    self.check_room()?;
                    self.stores.push(Store {
                        memory,
                        word: word + i,
                        value,
                    });
                }
                Ok(())
            }
            Mode::Temp => {
                let bi = self.binding(id)?;
                let b = self.bindings[bi];
                if b.mip.is_some() {
                    return Err(self.fail(CoreError::WrongKind {
                        object: id,
                        expected: kind_name(b.format),
                        actual: MIPMAPPED,
                    }));
                }
                if x as u64 >= b.width || y as u64 >= b.height {
                    return Err(self.fail(CoreError::OutOfRange {
                        object: id,
                        x: x as u64,
                        y: y as u64,
                        width: b.width,
                        height: b.height,
                        buffer: b.is_buffer(),
                    }));
                }
                if self.remote[bi].is_some() {
                    // A remote page needs no write copy and no merge: the store goes to its
                    // one location when the invocation completes, as in Direct mode.
                    let Some((memory, word)) =
                        self.translate_slow(bi, x as u64, y as u64, Access::Write, i)?
                    else {
                        return Ok(());
                    };
                    self.check_room()?;
                    self.stores.push(Store {
                        memory,
                        word: word + i,
                        value,
                    });
                    return Ok(());
                }
                let (page, off) = b.locate(x as u64, y as u64);
                let writable = self
                    .table
                    .get(GlobalPage(page))
                    .map(|d| d.is_writable())
                    .unwrap_or(false);
                if !writable {
                    self.bits.record(GlobalPage(page), Access::Write);
                }
                self.check_room()?;
                self.temp_stores.push(TempStore {
                    page: GlobalPage(page),
                    word: off as u32 + i as u32,
                    value,
                });
                Ok(())
            }
        }
    }

    /// The GPU twin holds at most MAX_STORES stores of an invocation; so does this one.
    #[inline(always)]
    fn check_room(&self) -> Result<(), Fault> {
        if self.stores.len() + self.temp_stores.len() >= MAX_STORES {
            return Err(Fault::Error(Box::new(RuntimeError::TooManyStores {
                kernel: self.kernel.to_string(),
                max: MAX_STORES,
            })));
        }
        Ok(())
    }

    /// Checks that `id` is a texture of format `want`, or a buffer where `want` is `None`.
    fn check_format(&self, id: ObjectId, want: Option<TexelFormat>) -> Result<(), Fault> {
        let b = self.bindings[self.binding(id)?];
        if b.mip.is_some() {
            return Err(self.fail(CoreError::WrongKind {
                object: id,
                expected: kind_name(want),
                actual: MIPMAPPED,
            }));
        }
        if b.format != want {
            return Err(self.fail(CoreError::WrongKind {
                object: id,
                expected: kind_name(want),
                actual: kind_name(b.format),
            }));
        }
        Ok(())
    }

    /// Loads an R32Float texel. The object's kind is not checked (this is the hot path of
    /// every stencil, on both backends): on another object of one word a texel, a buffer or
    /// an Rgba8Unorm texture, it reads that word's bits as an f32, and on an Rgba32Float
    /// texture its first word, the red channel (`load_rgba32f` reads all four).
    #[inline(always)]
    pub fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        Ok(f32::from_bits(self.load_word(id, x, y, 0)?))
    }

    /// Stores an R32Float texel (buffered until the invocation completes). As with
    /// [`Invocation::load_f32`], the object's kind is not checked: on another object of one
    /// word a texel it writes the f32's bits, and on an Rgba32Float texture its red channel.
    #[inline(always)]
    pub fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        self.store_word(id, x, y, 0, v.to_bits())
    }

    pub fn load_rgba8(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault> {
        self.check_format(id, Some(TexelFormat::Rgba8Unorm))?;
        Ok(self.load_word(id, x, y, 0)?.to_le_bytes())
    }

    pub fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        self.check_format(id, Some(TexelFormat::Rgba8Unorm))?;
        self.store_word(id, x, y, 0, u32::from_le_bytes(v))
    }

    pub fn load_rgba32f(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[f32; 4], Fault> {
        self.check_format(id, Some(TexelFormat::Rgba32Float))?;
        let mut v = [0.0; 4];
        for (i, c) in v.iter_mut().enumerate() {
            *c = f32::from_bits(self.load_word(id, x, y, i)?);
        }
        Ok(v)
    }

    pub fn store_rgba32f(
        &mut self,
        id: ObjectId,
        x: u32,
        y: u32,
        v: [f32; 4],
    ) -> Result<(), Fault> {
        self.check_format(id, Some(TexelFormat::Rgba32Float))?;
        for (i, c) in v.iter().enumerate() {
            self.store_word(id, x, y, i, c.to_bits())?;
        }
        Ok(())
    }

    /// Loads word `index` of a buffer.
    pub fn load_u32(&mut self, id: ObjectId, index: u32) -> Result<u32, Fault> {
        self.check_format(id, None)?;
        self.load_word(id, index, 0, 0)
    }

    /// Stores word `index` of a buffer.
    pub fn store_u32(&mut self, id: ObjectId, index: u32, v: u32) -> Result<(), Fault> {
        self.check_format(id, None)?;
        self.store_word(id, index, 0, 0, v)
    }
}

impl crate::contract::TexelAccess for Invocation<'_> {
    #[inline(always)]
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        Invocation::load_f32(self, id, x, y)
    }
    #[inline(always)]
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        Invocation::store_f32(self, id, x, y, v)
    }
    #[inline(always)]
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        Invocation::store_rgba8(self, id, x, y, v)
    }
}

/// A rectangle of texels, [x0, x1) × [y0, y1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

impl Rect {
    pub fn w(&self) -> u32 {
        self.x1 - self.x0
    }
    pub fn h(&self) -> u32 {
        self.y1 - self.y0
    }
}

/// One page's part of a rectangle: the page, its slot's first word, and the texels it covers.
struct PagePart {
    page: GlobalPage,
    desc: tessera_core::PageDescriptor,
    part: Rect,
}

/// The tile path (see `Kernel::footprint`): whole rectangles, each page translated once.
/// Nothing here records a request: a rectangle that is not all resident sends the tile back to
/// the per-texel path, which records exactly the requests it always did.
impl<'a> Invocation<'a> {
    pub(crate) fn binding_of(&self, id: ObjectId) -> Option<usize> {
        let bound = &self.ids[..self.bindings.len()];
        bound.iter().position(|&b| b == id.0)
    }

    /// The bound object's extent, for a texture of one word per texel; `None` otherwise.
    pub(crate) fn plain_extent(&self, bi: usize) -> Option<(u32, u32, TexelFormat)> {
        let b = &self.bindings[bi];
        match b.format {
            Some(f) if b.words_per_texel == 1 && b.mip.is_none() => {
                Some((b.width as u32, b.height as u32, f))
            }
            _ => None,
        }
    }
}

/// Calls `f` with each page of `b` covering `r` (inside the object), stopping at the first
/// `false`; a page beyond the page table is `false`.
fn each_page(table: &PageTable, b: &Bound, r: Rect, mut f: impl FnMut(PagePart) -> bool) -> bool {
    let s = b.shift;
    if r.x0 >= r.x1 || r.y0 >= r.y1 {
        return true;
    }
    for py in (r.y0 >> s)..=((r.y1 - 1) >> s) {
        for px in (r.x0 >> s)..=((r.x1 - 1) >> s) {
            let page = GlobalPage(b.page_offset + px as u64 + py as u64 * b.pages_x);
            let Ok(desc) = table.get(page) else {
                return false;
            };
            let part = Rect {
                x0: r.x0.max(px << s),
                y0: r.y0.max(py << s),
                x1: r.x1.min((px + 1) << s),
                y1: r.y1.min((py + 1) << s),
            };
            if !f(PagePart { page, desc, part }) {
                return false;
            }
        }
    }
    true
}

impl Invocation<'_> {
    /// Copies rectangle `r` of binding `bi` into `buf` (row-major) when every page it covers
    /// is resident.
    pub(crate) fn copy_rect(&mut self, bi: usize, r: Rect, buf: &mut Vec<u32>) -> bool {
        let b = self.bindings[bi];
        let (w, mask) = (r.w() as usize, b.mask as u32);
        buf.clear();
        buf.resize(w * r.h() as usize, 0);
        let (memories, touched) = (self.memories, &mut self.touched);
        let slot_words = b.slot_words as usize;
        each_page(self.table, &b, r, |p| {
            let Some(at) = p.desc.slot_addr() else {
                return false;
            };
            touched.push(p.page);
            let memory = &memories[at.memory as usize];
            let base = at.slot as usize * slot_words;
            let n = p.part.w() as usize;
            for y in p.part.y0..p.part.y1 {
                let src = base + ((((y & mask) << b.shift) | (p.part.x0 & mask)) as usize);
                let dst = (y - r.y0) as usize * w + (p.part.x0 - r.x0) as usize;
                for (d, s) in buf[dst..dst + n].iter_mut().zip(&memory[src..src + n]) {
                    *d = s.load(Ordering::Relaxed);
                }
            }
            true
        })
    }

    /// Whether every page covering `r` is held writable (what a direct store needs).
    pub(crate) fn rect_writable(&mut self, bi: usize, r: Rect) -> bool {
        let touched = &mut self.touched;
        each_page(self.table, &self.bindings[bi], r, |p| {
            touched.push(p.page);
            p.desc.is_writable()
        })
    }

    /// Commits the stored texels of rectangle `r` (`written` marks them) as the launch's mode
    /// wants: into the pages (Direct, after [`Self::rect_writable`]), into the temporary with
    /// a write request for each page not held writable (Temp), or nowhere (Request).
    pub(crate) fn commit_rect(&mut self, bi: usize, r: Rect, data: &[u32], written: &[u8]) {
        let b = self.bindings[bi];
        let (w, mask, mode) = (r.w() as usize, b.mask as u32, self.mode);
        if mode == Mode::Request {
            return;
        }
        let (memories, temp, bits) = (self.memories, &mut self.temp, self.bits);
        let slot_words = b.slot_words as usize;
        each_page(self.table, &b, r, |p| {
            // The slot is looked up once per page, and a row whose texels were all stored
            // (every row, for kernels that write their own texel) is copied without looking
            // at the mask texel by texel: this loop is most of the tile path's cost.
            let slot = match (mode, p.desc.slot_addr()) {
                (Mode::Direct, Some(at)) => {
                    let base = at.slot as usize * slot_words;
                    Some(&memories[at.memory as usize][base..base + slot_words])
                }
                _ => None,
            };
            let n = p.part.w() as usize;
            let mut any = false;
            for y in p.part.y0..p.part.y1 {
                let i0 = (y - r.y0) as usize * w + (p.part.x0 - r.x0) as usize;
                let word0 = (((y & mask) << b.shift) | (p.part.x0 & mask)) as usize;
                let (values, marks) = (&data[i0..i0 + n], &written[i0..i0 + n]);
                match slot {
                    Some(memory) => {
                        let row = &memory[word0..word0 + n];
                        if marks.iter().all(|&m| m != 0) {
                            for (d, &v) in row.iter().zip(values) {
                                d.store(v, Ordering::Relaxed);
                            }
                        } else {
                            for ((d, &v), &m) in row.iter().zip(values).zip(marks) {
                                if m != 0 {
                                    d.store(v, Ordering::Relaxed);
                                }
                            }
                        }
                    }
                    None if mode == Mode::Temp => {
                        for (k, (&v, &m)) in values.iter().zip(marks).enumerate() {
                            if m != 0 {
                                temp.push(TempStore {
                                    page: p.page,
                                    word: (word0 + k) as u32,
                                    value: v,
                                });
                                any = true;
                            }
                        }
                    }
                    None => {}
                }
            }
            if any && !p.desc.is_writable() {
                bits.record(p.page, Access::Write);
            }
            true
        });
    }
}

/// Mipmapped textures (`ObjectDesc::Mipmapped`): texels by level, and the samplers of
/// `tessera_core::sampler` over them. Each access translates its page through the table (no
/// TLB: a sample's taps spread over levels); a quad of a bordered texture is one page.
impl<'a> Invocation<'a> {
    fn mip_binding(&self, id: ObjectId) -> Result<(usize, MipLayout, Addressing), Fault> {
        let bi = self.binding(id)?;
        let b = self.bindings[bi];
        match b.mip {
            Some((layout, addressing)) => Ok((bi, layout, addressing)),
            None => Err(self.fail(CoreError::WrongKind {
                object: id,
                expected: MIPMAPPED,
                actual: kind_name(b.format),
            })),
        }
    }

    /// Texels `at` (indices in the slot) of local page `local` of binding `bi`; zeros after a
    /// miss in request mode.
    fn slot_texels<const N: usize>(
        &mut self,
        bi: usize,
        local: u64,
        at: [u64; N],
    ) -> Result<[u32; N], Fault> {
        let b = self.bindings[bi];
        let page = b.page_offset + local;
        if let Some(r) = self.remote[bi] {
            let mut out = [0; N];
            for (o, &i) in out.iter_mut().zip(&at) {
                let (m, w) = self.remote_word(r, page, i * b.words_per_texel, Access::Read, 0);
                *o = m[w].load(Ordering::Relaxed);
            }
            return Ok(out);
        }
        let d = self.table.get(GlobalPage(page)).map_err(|e| self.fail(e))?;
        // Stamped once per run of accesses to the page, not once per texel.
        if self.touched.last() != Some(&GlobalPage(page)) {
            self.touched.push(GlobalPage(page));
        }
        let Some(slot) = d.slot_addr() else {
            if let Some(record) = self.probe {
                self.probe_missed = true;
                if record {
                    self.bits.record(GlobalPage(page), Access::Read);
                }
                return Ok([0; N]);
            }
            self.bits.record(GlobalPage(page), Access::Read);
            return match self.mode {
                Mode::Request => Ok([0; N]),
                _ => Err(Fault::Miss),
            };
        };
        let memory = &self.memories[slot.memory as usize];
        let base = slot.slot as u64 * b.slot_words;
        Ok(at.map(|i| memory[(base + i * b.words_per_texel) as usize].load(Ordering::Relaxed)))
    }

    fn level_texel(
        &mut self,
        bi: usize,
        layout: &MipLayout,
        l: u32,
        x: u64,
        y: u64,
    ) -> Result<u32, Fault> {
        match layout.locate(l, x, y) {
            Ok((local, at)) => Ok(self.slot_texels(bi, local, [at])?[0]),
            // A request pass may compute addresses from values it could not load yet.
            Err(_) if self.mode == Mode::Request => Ok(0),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Loads texel (x, y) of level `level` of a mipmapped RGBA8 texture.
    pub fn load_rgba8_level(
        &mut self,
        id: ObjectId,
        level: u32,
        x: u32,
        y: u32,
    ) -> Result<[u8; 4], Fault> {
        let (bi, layout, _) = self.mip_binding(id)?;
        Ok(self
            .level_texel(bi, &layout, level, x as u64, y as u64)?
            .to_le_bytes())
    }

    /// Samples a mipmapped RGBA8 texture at (u, v) (the texture spans [0, 1)²) and level of
    /// detail `lod` (`tessera_core::sampler`).
    pub fn sample_rgba8(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        u: f32,
        v: f32,
        lod: f32,
    ) -> Result<[u8; 4], Fault> {
        let (bi, layout, addressing) = self.mip_binding(id)?;
        let shape = shape_of(&layout, addressing);
        self.sample_in(bi, layout, shape, sampler, shape.whole(), (u, v, lod))
    }

    /// Samples the window `window` (level-0 texels) of a mipmapped RGBA8 texture, (u, v)
    /// spanning the window and addressing within it: one texture of an atlas.
    pub fn sample_rgba8_window(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        u: f32,
        v: f32,
        lod: f32,
    ) -> Result<[u8; 4], Fault> {
        let (bi, layout, addressing) = self.mip_binding(id)?;
        let shape = shape_of(&layout, addressing);
        self.check_window(id, shape, window)?;
        self.sample_in(bi, layout, shape, sampler, window, (u, v, lod))
    }

    /// [`Self::sample_rgba8_window`] that never faults on a missing page
    /// (`sampler::sample_degraded`): the pages the exact sample misses are requested (the
    /// driver brings them after the launch) and the finest resident coarser level serves it.
    /// Also returns how many levels coarser than wanted the sample was served (0: exact).
    pub fn sample_rgba8_window_degraded(
        &mut self,
        id: ObjectId,
        sampler: Sampler,
        window: Window,
        u: f32,
        v: f32,
        lod: f32,
    ) -> Result<([u8; 4], u32), Fault> {
        let (bi, layout, addressing) = self.mip_binding(id)?;
        let shape = shape_of(&layout, addressing);
        self.check_window(id, shape, window)?;
        let mut t = PagedTexels {
            inv: self,
            bi,
            layout,
        };
        let (c, coarser) = sampler::sample_degraded(&mut t, shape, sampler, window, (u, v, lod))?;
        Ok((c.to_le_bytes(), coarser))
    }

    fn check_window(&self, id: ObjectId, shape: Shape, window: Window) -> Result<(), Fault> {
        if window.width == 0
            || window.height == 0
            || window.x as u64 + window.width as u64 > shape.width as u64
            || window.y as u64 + window.height as u64 > shape.height as u64
        {
            return Err(self.fail(CoreError::OutOfRange {
                object: id,
                x: window.x as u64 + window.width as u64,
                y: window.y as u64 + window.height as u64,
                width: shape.width as u64,
                height: shape.height as u64,
                buffer: false,
            }));
        }
        Ok(())
    }

    fn sample_in(
        &mut self,
        bi: usize,
        layout: MipLayout,
        shape: Shape,
        sampler: Sampler,
        window: Window,
        uvl: (f32, f32, f32),
    ) -> Result<[u8; 4], Fault> {
        let mut t = PagedTexels {
            inv: self,
            bi,
            layout,
        };
        Ok(sampler::sample(&mut t, shape, sampler, window, uvl)?.to_le_bytes())
    }
}

/// What `kind_name` calls a mipmapped texture in a `WrongKind` error.
pub const MIPMAPPED: &str = "mipmapped Rgba8Unorm texture";

fn shape_of(layout: &MipLayout, addressing: Addressing) -> Shape {
    let (w, h) = layout.extent(0).unwrap_or((1, 1));
    Shape {
        width: w as u32,
        height: h as u32,
        levels: layout.levels(),
        addressing,
    }
}

/// The sampler's view of a bound mipmapped texture.
struct PagedTexels<'i, 'a> {
    inv: &'i mut Invocation<'a>,
    bi: usize,
    layout: MipLayout,
}

impl sampler::Probe for PagedTexels<'_, '_> {
    fn begin(&mut self, record: bool) {
        self.inv.probe = Some(record);
        self.inv.probe_missed = false;
    }
    fn end(&mut self) -> bool {
        self.inv.probe = None;
        self.inv.probe_missed
    }
}

impl Texels for PagedTexels<'_, '_> {
    type Error = Fault;
    fn texel(&mut self, level: u32, x: u32, y: u32) -> Result<u32, Fault> {
        self.inv
            .level_texel(self.bi, &self.layout, level, x as u64, y as u64)
    }

    fn quad(&mut self, level: u32, x0: i32, y0: i32) -> Result<[u32; 4], Fault> {
        let m = &self.layout;
        let border = m.border() as i64;
        let (w, h) = m.extent(level).map_err(|e| self.inv.fail(e))?;
        if border == 0 {
            let a = self.inv.bindings[self.bi]
                .mip
                .map(|(_, a)| a)
                .unwrap_or(Addressing::Clamp);
            let xs = [x0, x0 + 1].map(|x| a.apply(x as i64, w));
            let ys = [y0, y0 + 1].map(|y| a.apply(y as i64, h));
            return Ok([
                self.inv.level_texel(self.bi, m, level, xs[0], ys[0])?,
                self.inv.level_texel(self.bi, m, level, xs[1], ys[0])?,
                self.inv.level_texel(self.bi, m, level, xs[0], ys[1])?,
                self.inv.level_texel(self.bi, m, level, xs[1], ys[1])?,
            ]);
        }
        // The page of the quad's first tap inside the level holds all four taps: its border
        // reaches one texel below and one beyond, where the others can lie.
        let (ax, ay) = (
            (x0 as i64).clamp(0, w as i64 - 1),
            (y0 as i64).clamp(0, h as i64 - 1),
        );
        let (local, _) = m
            .locate(level, ax as u64, ay as u64)
            .map_err(|e| self.inv.fail(e))?;
        let p = m.page().get() as i64;
        let xs = (x0 as i64 - ax / p * p + border) as u64;
        let ys = (y0 as i64 - ay / p * p + border) as u64;
        let side = m.slot_side();
        self.inv.slot_texels(
            self.bi,
            local,
            [
                ys * side + xs,
                ys * side + xs + 1,
                (ys + 1) * side + xs,
                (ys + 1) * side + xs + 1,
            ],
        )
    }
}
