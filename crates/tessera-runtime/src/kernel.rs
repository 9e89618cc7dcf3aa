//! Kernels and the CPU twin's translation API.
//!
//! A kernel is written once per backend: a Rust twin run by the CPU backend through
//! [`Invocation`], and (later) a WGSL twin of the same name. Inside the Rust twin every texel
//! access goes through the device's page table; a miss is `Err(Fault::Miss)`, which `?`
//! propagates, after recording a request bit. Stores are buffered and committed only when the
//! invocation completes, so a faulting invocation leaves no side effect and can be relaunched.
//!
//! A tiny TLB per worker task (the last page translated per bound object) keeps the page table
//! walk off the hot path: a stencil touches the same page for most of its neighbours.

use std::sync::atomic::{AtomicU32, Ordering};

use tessera_core::{
    Access, CoreError, GlobalPage, ObjectDesc, ObjectEntry, ObjectId, PageTable, RequestBits,
    TexelFormat,
};

use crate::error::RuntimeError;

/// How many objects one launch may bind.
pub const MAX_BINDINGS: usize = 8;

/// Why an invocation stopped early.
#[derive(Debug)]
pub enum Fault {
    /// A page was not resident (or not writable for a store); its request bit is recorded and
    /// the invocation will be relaunched after the requests are serviced.
    Miss,
    /// A bug in the kernel or its inputs; the launch fails with this error. Boxed so that
    /// every load's `Result` stays two words wide on the hot path.
    Error(Box<RuntimeError>),
}

/// One kernel: the CPU twin of a compute pass.
pub trait Kernel: Send + Sync {
    /// Names the kernel and its WGSL twin (`<name>.wgsl`).
    fn name(&self) -> &'static str;
    /// The WGSL twin, for GPU backends; `None` for a kernel with a CPU twin only.
    fn wgsl(&self) -> Option<WgslKernel> {
        None
    }
    /// Runs the invocation at (x, y) of the launch domain.
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault>;

    /// Runs the invocations (x0..x1, y), committing each that completes and listing each that
    /// faulted. Kernels override it with `run_span_with(…, Self::body)` so that the row loop
    /// is compiled with the body inlined instead of one dynamic call per invocation.
    fn run_span(
        &self,
        inv: &mut Invocation<'_>,
        y: u32,
        xs: std::ops::Range<u32>,
        incomplete: &mut Vec<(u32, u32)>,
    ) -> Result<(), RuntimeError> {
        run_span_with(inv, y, xs, incomplete, |inv, x, y| self.invoke(inv, x, y))
    }
}

/// A kernel's WGSL twin: the body (a WGSL source defining `fn kernel_main(x: u32, y: u32)`,
/// written against the backend's prelude: `load_f32`, `store_f32`, `store_rgba8`, `param`)
/// and the parameter words it reads with `param(i)` (ids, sizes, constants as bits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgslKernel {
    pub source: &'static str,
    pub params: Vec<u32>,
}

/// The loop behind [`Kernel::run_span`], generic over the invocation body.
#[inline(always)]
pub fn run_span_with(
    inv: &mut Invocation<'_>,
    y: u32,
    xs: std::ops::Range<u32>,
    incomplete: &mut Vec<(u32, u32)>,
    mut body: impl FnMut(&mut Invocation<'_>, u32, u32) -> Result<(), Fault>,
) -> Result<(), RuntimeError> {
    for x in xs {
        match body(inv, x, y) {
            Ok(()) => inv.finish(true),
            Err(Fault::Miss) => {
                inv.finish(false);
                incomplete.push((x, y));
            }
            Err(Fault::Error(e)) => return Err(*e),
        }
    }
    Ok(())
}

/// How a launch treats misses and stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Request-recording pass (paper 3.4): a missing load records a read request and yields
    /// zero so the invocation goes on to record its other requests; stores are dropped.
    Request,
    /// Compute with faults (the patent): misses fault; stores go straight to the pages.
    Direct,
    /// Compute into a temporary (paper 3.5, second pass): misses fault on loads; stores go to
    /// a temporary with their write mask, and stores to pages not held writable record write
    /// requests. A later merge writes the temporary into the pages.
    Temp,
}

/// A bound object with its address constants precomputed for the hot path.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub id: ObjectId,
    pub page_offset: u64,
    /// One past the object's last global page.
    pub pages_end: u64,
    width: u64,
    height: u64,
    pages_x: u64,
    shift: u32,
    mask: u64,
    words_per_texel: u64,
    slot_words: u64,
    format: Option<TexelFormat>,
}

impl Bound {
    pub fn new(e: &ObjectEntry) -> Self {
        let (width, height) = e.desc.extent();
        let (pages_x, _) = e.desc.pages_xy();
        match e.desc {
            ObjectDesc::Texture { format, page, .. } => Bound {
                id: e.id,
                page_offset: e.page_offset,
                pages_end: e.pages().end,
                width,
                height,
                pages_x,
                shift: page.shift(),
                mask: page.get() as u64 - 1,
                words_per_texel: format.bytes() as u64 / 4,
                slot_words: page.texels() * format.bytes() as u64 / 4,
                format: Some(format),
            },
            // Buffers are addressed in 32-bit words: "x" is the word index.
            ObjectDesc::Buffer { len, page_bytes } => Bound {
                id: e.id,
                page_offset: e.page_offset,
                pages_end: e.pages().end,
                width: len / 4,
                height: 1,
                pages_x,
                shift: (page_bytes / 4).trailing_zeros(),
                mask: page_bytes / 4 - 1,
                words_per_texel: 1,
                slot_words: page_bytes / 4,
                format: None,
            },
        }
    }

    /// Width in texels (in words for a buffer).
    pub fn width(&self) -> u64 {
        self.width
    }
    /// Height in texels (1 for a buffer).
    pub fn height(&self) -> u64 {
        self.height
    }
    /// Pages per row of the object.
    pub fn pages_x(&self) -> u64 {
        self.pages_x
    }
    /// log2 of the page side (of the page's words, for a buffer).
    pub fn shift(&self) -> u32 {
        self.shift
    }
    pub fn words_per_texel(&self) -> u64 {
        self.words_per_texel
    }
    /// 32-bit words per page slot.
    pub fn slot_words(&self) -> u64 {
        self.slot_words
    }
    /// The texel format; `None` for a buffer.
    pub fn format(&self) -> Option<TexelFormat> {
        self.format
    }

    /// Global page and word offset inside the page's slot of texel (x, y).
    #[inline]
    fn locate(&self, x: u64, y: u64) -> (u64, u64) {
        if self.format.is_none() {
            return (self.page_offset + (x >> self.shift), x & self.mask);
        }
        let local = (x >> self.shift) + (y >> self.shift) * self.pages_x;
        let off = (((y & self.mask) << self.shift) | (x & self.mask)) * self.words_per_texel;
        (self.page_offset + local, off)
    }
}

/// One pending store: a word of a page, kept until the invocation completes.
#[derive(Clone, Copy, Debug)]
struct Store<'a> {
    memory: &'a [AtomicU32],
    word: usize,
    value: u32,
}

/// A store kept in the launch's temporary for the merge pass: page, word in the page, value.
/// Its presence is the write mask.
#[derive(Clone, Copy, Debug)]
pub struct TempStore {
    pub page: GlobalPage,
    pub word: u32,
    pub value: u32,
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
    memories: &'a [Vec<AtomicU32>],
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
}

impl<'a> Invocation<'a> {
    pub(crate) fn new(
        memories: &'a [Vec<AtomicU32>],
        table: &'a PageTable,
        bindings: &'a [Bound],
        bits: &'a RequestBits,
        kernel: &'static str,
        mode: Mode,
    ) -> Self {
        let mut ids = [u32::MAX; MAX_BINDINGS];
        for (i, b) in bindings.iter().take(MAX_BINDINGS).enumerate() {
            ids[i] = b.id.0;
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
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Called by the backend after `invoke` returned: commit on success, discard on fault.
    #[inline]
    pub(crate) fn finish(&mut self, completed: bool) {
        if self.stores.is_empty() && self.temp_stores.is_empty() {
            return;
        }
        if completed {
            for s in self.stores.drain(..) {
                s.memory[s.word].store(s.value, Ordering::Relaxed);
            }
            self.temp.append(&mut self.temp_stores);
        } else {
            self.stores.clear();
            self.temp_stores.clear();
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
        self.ids.iter().position(|&b| b == id.0).ok_or_else(|| {
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
        self.translate_slow(bi, x, y, access)
    }

    #[inline(never)]
    fn translate_slow(
        &mut self,
        bi: usize,
        x: u64,
        y: u64,
        access: Access,
    ) -> Result<Option<(&'a [AtomicU32], usize)>, Fault> {
        let b = self.bindings[bi];
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
            }));
        }
        let (page, off) = b.locate(x, y);
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

    #[inline(always)]
    fn load_word(&mut self, id: ObjectId, x: u32, y: u32, i: usize) -> Result<u32, Fault> {
        Ok(match self.translate(id, x, y, Access::Read)? {
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
            Mode::Request => Ok(()),
            Mode::Direct => {
                if let Some((memory, word)) = self.translate(id, x, y, Access::Write)? {
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
                if x as u64 >= b.width || y as u64 >= b.height {
                    return Err(self.fail(CoreError::OutOfRange {
                        object: id,
                        x: x as u64,
                        y: y as u64,
                        width: b.width,
                        height: b.height,
                    }));
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
                self.temp_stores.push(TempStore {
                    page: GlobalPage(page),
                    word: off as u32 + i as u32,
                    value,
                });
                Ok(())
            }
        }
    }

    fn check_format(&self, id: ObjectId, want: TexelFormat) -> Result<(), Fault> {
        let b = self.bindings[self.binding(id)?];
        if b.format != Some(want) {
            return Err(self.fail(CoreError::WrongKind {
                object: id,
                expected: match want {
                    TexelFormat::R32Float => "R32Float texture",
                    TexelFormat::Rgba8Unorm => "Rgba8Unorm texture",
                    TexelFormat::Rgba32Float => "Rgba32Float texture",
                },
                actual: match b.format {
                    Some(_) => "texture of another format",
                    None => "buffer",
                },
            }));
        }
        Ok(())
    }

    /// Loads an R32Float texel.
    #[inline(always)]
    pub fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault> {
        Ok(f32::from_bits(self.load_word(id, x, y, 0)?))
    }

    /// Stores an R32Float texel (buffered until the invocation completes).
    #[inline(always)]
    pub fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault> {
        self.store_word(id, x, y, 0, v.to_bits())
    }

    pub fn load_rgba8(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[u8; 4], Fault> {
        self.check_format(id, TexelFormat::Rgba8Unorm)?;
        Ok(self.load_word(id, x, y, 0)?.to_le_bytes())
    }

    pub fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault> {
        self.check_format(id, TexelFormat::Rgba8Unorm)?;
        self.store_word(id, x, y, 0, u32::from_le_bytes(v))
    }

    pub fn load_rgba32f(&mut self, id: ObjectId, x: u32, y: u32) -> Result<[f32; 4], Fault> {
        self.check_format(id, TexelFormat::Rgba32Float)?;
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
        self.check_format(id, TexelFormat::Rgba32Float)?;
        for (i, c) in v.iter().enumerate() {
            self.store_word(id, x, y, i, c.to_bits())?;
        }
        Ok(())
    }

    /// Loads word `index` of a buffer.
    pub fn load_u32(&mut self, id: ObjectId, index: u32) -> Result<u32, Fault> {
        self.load_word(id, index, 0, 0)
    }

    /// Stores word `index` of a buffer.
    pub fn store_u32(&mut self, id: ObjectId, index: u32, v: u32) -> Result<(), Fault> {
        self.store_word(id, index, 0, 0, v)
    }
}
