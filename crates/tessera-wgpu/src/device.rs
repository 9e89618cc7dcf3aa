//! `WgpuDevice`: one tessera device on one wgpu device.

use std::any::Any;
use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tessera_core::{
    Access, CoreError, DeviceId, GlobalPage, ObjectId, PageDescriptor, PageRequest, SlotAddr,
};
use tessera_runtime::{
    kind_name, BackendCounters, Bound, Device, Domain, Footprint, GpuLaunchTime, Launch,
    LaunchOutcome, MergeOutcome, Mode, PeerCopy, PeerMemory, RemoteBacking, RemoteObject, Result,
    RuntimeError, SlotSink, WgslKernel, MAX_STORES,
};

use crate::abi::{self, BindInfo, CompactInfo, LaunchInfo, MergeInfo, RequestsHead, Status};
use crate::error::WgpuError;
use crate::gpu::{self, AdapterChoice, Health, SharedGpu};
use crate::scratch::{self, Grow, Timestamps, TIMESTAMPS};
use crate::unpaged::fill_params;

/// Physical memories one kernel can bind (the prelude's `switch` has this many arms).
pub const MAX_MEMORIES: usize = 4;

/// Slots read back in one batch only while they average at most this many bytes
/// (`Device::read_slots`): larger pages read one at a time were faster on an H100.
const BATCHED_READ_MAX_PAGE: u64 = 64 << 10;
/// The prelude's mark, in y, on an incomplete invocation that saved its state (`suspend()`).
const SUSPENDED_BIT: u32 = 0x8000_0000;

/// Storage buffers the prelude binds (page table, 4 memories, list, bits, status, incomplete,
/// temporary, leftover, time stamps, 4 remote buffers).
pub(crate) const STORAGE_BINDINGS: u32 = 12 + abi::REMOTE_SLOTS;
/// Invocations per list-launch dispatch row and per workgroup side of a rectangle.
const GROUP: u32 = 8;
const MAX_GROUPS: u32 = 65_535;

struct Memory {
    buffer: wgpu::Buffer,
    slot_words: u64,
    capacity: u32,
}

struct Pipelines {
    kernel_layout: wgpu::BindGroupLayout,
    kernel_pipeline_layout: wgpu::PipelineLayout,
    compact_layout: wgpu::BindGroupLayout,
    compact: wgpu::ComputePipeline,
    /// By kernel name and entry point (`main`, or `main_tiles` for the tile path).
    kernels: HashMap<(&'static str, &'static str), wgpu::ComputePipeline>,
}

/// A tessera device on a wgpu device.
pub struct WgpuDevice {
    id: DeviceId,
    /// The wgpu device this one runs on, maybe shared with the node's other tessera devices.
    gpu: SharedGpu,
    /// The current launch's remote buffers, by `BindInfo::remote` order.
    remote: Vec<wgpu::Buffer>,
    /// Per binding of the current launch, its `BindInfo::remote` (0: not remote).
    remote_slots: Vec<u32>,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    device: wgpu::Device,
    queue: wgpu::Queue,
    memories: Vec<Memory>,
    /// Bound in place of memories that do not exist (yet).
    spare: wgpu::Buffer,
    /// Host mirror of the page table: the merge reads it, and a resize re-uploads it.
    table: Vec<u64>,
    table_buf: wgpu::Buffer,
    /// Entries of `table` changed since the last submission, not yet in `table_buf`. A
    /// `write_buffer` per descriptor cost a staging allocation each (a batch of 128 peer copies
    /// queued 384 of them); they go up as a few runs just before the next submission, which is
    /// the first thing that can read them.
    table_dirty: RefCell<Vec<u32>>,
    /// Per global page, the 32-bit stamp (`abi::stamp_of`) of the last launch that translated
    /// it, written by the shaders, read back by `page_times`. Sized with the page table.
    stamps: wgpu::Buffer,
    /// The latest `Launch::time` this device ran: what `page_times` widens the stamps against.
    now: u64,
    pipes: Pipelines,
    scratch: Scratch,
    /// Stores in the temporary (`scratch.temp`): this pass's `Mode::Temp` launches append,
    /// the merge consumes. The temporary stays on the device.
    temp_len: u64,
    /// Where the adapter has timestamp queries.
    timestamps: Option<Timestamps>,
    health: Health,
    /// Whether launches take the tile path (see [`TilePath`]).
    tiles: bool,
    /// Submissions, waits for the GPU and bytes read back (`HostCounters`).
    counters: Arc<BackendCounters>,
}

/// Whether kernels with a footprint run through the prelude's tile path (windows in workgroup
/// memory, one barrier per workgroup) or per texel. Both give the same results and requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TilePath {
    /// On, except on a CPU adapter (lavapipe), where the barrier and workgroup memory made
    /// boiling's paged frame about 3x slower than per texel (docs/EVALUATION.md).
    #[default]
    Auto,
    On,
    Off,
}

impl TilePath {
    /// From `TESSERA_WGPU_TILES` (`on`, `off`, anything else `auto`).
    pub fn from_env() -> Self {
        match std::env::var("TESSERA_WGPU_TILES").as_deref() {
            Ok("on") => TilePath::On,
            Ok("off") => TilePath::Off,
            _ => TilePath::Auto,
        }
    }

    fn enabled(self, info: &wgpu::AdapterInfo) -> bool {
        match self {
            TilePath::On => true,
            TilePath::Off => false,
            TilePath::Auto => info.device_type != wgpu::DeviceType::Cpu,
        }
    }
}

fn storage(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

fn uniform(binding: u32) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// Dispatch size covering `n` items of `per_group` in rows of at most MAX_GROUPS groups:
/// (groups x, groups y, items per row).
fn spread(n: u64, per_group: u32) -> (u32, u32, u32) {
    let groups = n.div_ceil(per_group as u64).max(1);
    let gx = groups.min(MAX_GROUPS as u64) as u32;
    let gy = groups.div_ceil(gx as u64) as u32;
    (gx, gy, gx * per_group)
}

impl WgpuDevice {
    /// Opens a device on the chosen adapter. Every call gets its own wgpu device (and queue),
    /// so several calls on one adapter emulate several GPUs; such devices cannot share remote
    /// objects (a buffer binds only on its own wgpu device): a node that uses remote mode
    /// opens its devices with [`WgpuDevice::on`] on one [`SharedGpu`].
    pub fn new(id: DeviceId, choice: &AdapterChoice) -> Result<Self, WgpuError> {
        Self::on(id, &SharedGpu::open(choice)?)
    }

    /// A tessera device on `gpu`, which other tessera devices may share: each keeps its own
    /// physical memories, page table and scratch buffers, and all can bind one remote buffer.
    pub fn on(id: DeviceId, shared: &SharedGpu) -> Result<Self, WgpuError> {
        let gpu::Opened {
            info,
            limits,
            device,
            queue,
            health,
            ..
        } = &*shared.0;
        let (info, limits, device, queue, health) = (
            info.clone(),
            limits.clone(),
            device.clone(),
            queue.clone(),
            health.clone(),
        );

        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let kernel_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("tessera kernel"),
            entries: &[
                storage(0, true),
                storage(1, false),
                storage(2, false),
                storage(3, false),
                storage(4, false),
                uniform(5),
                storage(6, true),
                storage(7, false),
                storage(8, false),
                storage(9, false),
                storage(10, false),
                storage(11, false),
                // The merge's own parameters (MergeInfo); kernels do not declare it.
                uniform(12),
                storage(13, false),
                storage(14, false),
                storage(15, false),
                storage(16, false),
                storage(17, false),
            ],
        });
        let kernel_pipeline_layout =
            device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("tessera kernel"),
                bind_group_layouts: &[Some(&kernel_layout)],
                immediate_size: 0,
            });
        let compact_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("tessera compact"),
            entries: &[uniform(0), storage(1, false), storage(2, false)],
        });
        let compact_pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("tessera compact"),
            bind_group_layouts: &[Some(&compact_layout)],
            immediate_size: 0,
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("compact"),
            source: wgpu::ShaderSource::Wgsl(Cow::Owned(abi::shader(&[crate::COMPACT]))),
        });
        let compact = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("compact"),
            layout: Some(&compact_pl),
            module: &module,
            entry_point: Some("compact"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Shader {
                kernel: "compact".into(),
                message: e.to_string(),
            });
        }
        let spare = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("spare memory"),
            size: 16,
            usage: wgpu::BufferUsages::STORAGE,
            mapped_at_creation: false,
        });
        let table_buf = Self::table_buffer(&device, 1);
        let stamps = Self::stamp_buffer(&device, 1);
        let timestamps = device
            .features()
            .contains(wgpu::Features::TIMESTAMP_QUERY)
            .then(|| Timestamps::new(&device, &queue));
        Ok(WgpuDevice {
            gpu: shared.clone(),
            remote: Vec::new(),
            remote_slots: Vec::new(),
            scratch: Scratch::new(&device),
            temp_len: 0,
            timestamps,
            tiles: TilePath::from_env().enabled(&info),
            id,
            info,
            limits,
            device,
            queue,
            memories: Vec::new(),
            spare,
            table: Vec::new(),
            table_buf,
            table_dirty: RefCell::default(),
            stamps,
            now: 0,
            pipes: Pipelines {
                kernel_layout,
                kernel_pipeline_layout,
                compact_layout,
                compact,
                kernels: HashMap::new(),
            },
            health,
            counters: Arc::default(),
        })
    }

    /// Destroys the wgpu device, as a driver reset or unplugged GPU would: every later call
    /// fails with [`WgpuError::DeviceLost`]. Lets tests reach the device-lost path. On a
    /// [`SharedGpu`] every tessera device on it is lost with it.
    pub fn destroy(&mut self) {
        self.device.destroy();
    }

    /// Chooses the tile path for later launches (the default is [`TilePath::from_env`]).
    pub fn set_tile_path(&mut self, t: TilePath) {
        self.tiles = t.enabled(&self.info);
    }

    /// Whether launches with a footprint take the tile path.
    pub fn tile_path(&self) -> bool {
        self.tiles
    }

    /// Whether launches are timed on the device (timestamp queries).
    pub fn has_timestamps(&self) -> bool {
        self.timestamps.is_some()
    }

    /// The adapter this device runs on.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    fn table_buffer(device: &wgpu::Device, pages: u64) -> wgpu::Buffer {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("page table"),
            size: pages.max(1) * 8,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Zero at creation (wgpu clears new buffers): a new page was never touched.
    fn stamp_buffer(device: &wgpu::Device, pages: u64) -> wgpu::Buffer {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("page time stamps"),
            size: pages.max(1) * 4,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    fn err(&self, e: WgpuError) -> RuntimeError {
        e.on(self.id)
    }

    /// Fails with the device-lost reason or an error wgpu reported out of scope.
    fn check(&self) -> Result<()> {
        self.health.check().map_err(|e| self.err(e))
    }

    /// Copies `ranges` (buffer, offset, bytes) into one staging buffer and reads them back:
    /// one submission and one wait.
    fn read_back(&self, ranges: &[(&wgpu::Buffer, u64, u64)]) -> Result<Vec<Vec<u8>>> {
        self.flush_table();
        self.counters.submitted();
        self.counters.waited();
        self.counters.read_back(ranges.iter().map(|r| r.2).sum());
        gpu::read_back(&self.device, &self.queue, &self.health, ranges).map_err(|e| self.err(e))
    }

    /// Submits one command buffer, counted.
    fn submit(&self, enc: wgpu::CommandEncoder) {
        self.flush_table();
        self.counters.submitted();
        self.queue.submit([enc.finish()]);
    }

    /// Queues the page-table entries changed since the last submission, as runs of the host
    /// mirror: entries a few apart go in one write, so a batch's descriptors cost a handful of
    /// writes, not one each. Queued writes run at the start of the next submission, before its
    /// commands, which is why every submission calls this first.
    fn flush_table(&self) {
        let mut dirty = self.table_dirty.borrow_mut();
        if dirty.is_empty() {
            return;
        }
        dirty.sort_unstable();
        dirty.dedup();
        // Rewriting a few unchanged entries between two changed ones is cheaper than a second
        // write: 32 entries are 256 bytes.
        const GAP: u32 = 32;
        let mut i = 0;
        while i < dirty.len() {
            let lo = dirty[i];
            let mut hi = lo;
            i += 1;
            while i < dirty.len() && dirty[i] - hi <= GAP {
                hi = dirty[i];
                i += 1;
            }
            let run = &self.table[lo as usize..=hi as usize];
            self.queue
                .write_buffer(&self.table_buf, lo as u64 * 8, bytemuck::cast_slice(run));
        }
        dirty.clear();
    }

    /// Waits until the GPU has run everything submitted, counted.
    fn wait_idle(&self) -> Result<()> {
        self.counters.waited();
        self.health.wait(&self.device).map_err(|e| self.err(e))
    }

    fn slot_range(&self, at: SlotAddr) -> Result<(u64, u64)> {
        let m = self.memories.get(at.memory as usize).ok_or_else(|| {
            self.err(WgpuError::Invalid(format!(
                "no physical memory {}",
                at.memory
            )))
        })?;
        if at.slot >= m.capacity {
            return Err(self.err(WgpuError::Invalid(format!(
                "slot {} outside physical memory {}",
                at.slot, at.memory
            ))));
        }
        Ok((at.slot as u64 * m.slot_words * 4, m.slot_words * 4))
    }

    /// The compute pipeline of a kernel, built once per kernel name.
    fn pipeline(
        &mut self,
        name: &'static str,
        source: &str,
        entry: &'static str,
    ) -> Result<wgpu::ComputePipeline> {
        if let Some(p) = self.pipes.kernels.get(&(name, entry)) {
            return Ok(p.clone());
        }
        let code = abi::shader(&[crate::PRELUDE, source]);
        let p = gpu::compile(
            &self.device,
            &self.pipes.kernel_pipeline_layout,
            name,
            code,
            entry,
        )
        .map_err(|e| self.err(e))?;
        self.pipes.kernels.insert((name, entry), p.clone());
        Ok(p)
    }
}

/// Writes the footprint's reads as (binding, halo) words for the prelude's tile path; returns
/// how many (0: the launch takes the per-texel path only). Only textures of one word per texel
/// get a window.
fn fp_reads(
    fp: &Footprint,
    bindings: &[Bound],
    remote: &[Option<Arc<RemoteObject>>],
    out: &mut [abi::Vec4U32],
) -> u32 {
    if fp.reads.len() > out.len() {
        return 0;
    }
    for (k, &(id, halo)) in fp.reads.iter().enumerate() {
        let Some(bi) = bindings.iter().position(|b| b.id == id) else {
            return 0;
        };
        let b = &bindings[bi];
        if halo > FP_MAX_HALO || b.format().is_none() || b.words_per_texel() != 1 {
            return 0;
        }
        // A remote object's texels are read in place, never through a window (as on the CPU).
        if remote.get(bi).is_some_and(Option::is_some) {
            return 0;
        }
        out[k].0 = [bi as u32, halo, 0, 0];
    }
    fp.reads.len() as u32
}

fn words(bytes: &[u8]) -> impl Iterator<Item = u32> + '_ {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl Device for WgpuDevice {
    fn describe(&self) -> String {
        format!("wgpu ({}, {:?})", self.info.name, self.info.backend)
    }

    fn memory_limits(&self) -> tessera_core::MemoryLimits {
        tessera_core::MemoryLimits {
            max_memories: Some(MAX_MEMORIES as u16),
            max_memory_bytes: gpu::max_storage_bytes(&self.limits),
        }
    }

    fn create_memory(&mut self, memory: u16, slot_bytes: u64, capacity: u32) -> Result<()> {
        self.check()?;
        if memory as usize != self.memories.len()
            || slot_bytes == 0
            || !slot_bytes.is_multiple_of(4)
        {
            return Err(self.err(WgpuError::Invalid(format!(
                "bad physical memory {memory} of {slot_bytes}-byte slots"
            ))));
        }
        if memory as usize >= MAX_MEMORIES {
            return Err(self.err(WgpuError::TooManyMemories {
                memory,
                max: MAX_MEMORIES,
            }));
        }
        let bytes = slot_bytes * capacity as u64;
        let buffer = gpu::buffer(
            &self.device,
            "physical memory",
            bytes,
            scratch::STORAGE,
            gpu::max_storage_bytes(&self.limits),
        )
        .map_err(|e| self.err(e))?;
        self.memories.push(Memory {
            buffer,
            slot_words: slot_bytes / 4,
            capacity,
        });
        Ok(())
    }

    fn write_slot(&mut self, at: SlotAddr, data: &[u8]) -> Result<()> {
        self.check()?;
        let (off, len) = self.slot_range(at)?;
        if data.len() as u64 != len {
            return Err(self.err(WgpuError::Invalid(format!(
                "slot write of {} bytes into a {len}-byte slot",
                data.len()
            ))));
        }
        // Slot reuse (docs/WGPU.md, "Slot reuse"): the memory manager gives a slot to another
        // page between launches. No launch still runs on the old mapping, because every call
        // that submits work waits for it before returning (`finish`, `read_back`); and this
        // queued write runs at the start of the next submission, after every earlier one and
        // before that submission's own commands, so a read of the old data (`read_slot`, which
        // has waited) precedes it and the next launch sees the new data with the new
        // descriptor, written by `set_page` the same way.
        self.queue
            .write_buffer(&self.memories[at.memory as usize].buffer, off, data);
        Ok(())
    }

    fn read_slot(&mut self, at: SlotAddr) -> Result<Vec<u8>> {
        self.check()?;
        let (off, len) = self.slot_range(at)?;
        let mut out = self.read_back(&[(&self.memories[at.memory as usize].buffer, off, len)])?;
        Ok(out.pop().unwrap_or_default())
    }

    fn read_slots(&mut self, at: &[SlotAddr]) -> Result<Option<Vec<Vec<u8>>>> {
        self.check()?;
        let mut ranges = Vec::with_capacity(at.len());
        for &a in at {
            let (off, len) = self.slot_range(a)?;
            ranges.push((&self.memories[a.memory as usize].buffer, off, len));
        }
        // Measured on an H100 (`bench page-moves --backend wgpu`, write-back + read): one read
        // for all of a batch took 4 KiB pages from 0.10 to 0.35 GB/s and 64 KiB from 1.1–1.2 to
        // 1.4, but 256 KiB and 1 MiB pages from 2.5–3.6 down to 1.5. Not measured why; the
        // likely cost is copying the one large mapping out (three copies a page: mapping to
        // one vector, to one per slot, into home), which grows with bytes while the waits saved
        // grow with pages.
        let bytes: u64 = ranges.iter().map(|r| r.2).sum();
        if bytes > BATCHED_READ_MAX_PAGE * ranges.len() as u64 {
            return Ok(None);
        }
        self.read_back(&ranges).map(Some)
    }

    fn resize_page_table(&mut self, pages: u64) -> Result<()> {
        self.check()?;
        if pages > u32::MAX as u64 {
            return Err(self.err(WgpuError::Invalid(format!(
                "{pages} pages: the GPU page table addresses at most 2^32"
            ))));
        }
        if pages * 8 > self.limits.max_storage_buffer_binding_size {
            return Err(self.err(WgpuError::OutOfMemory(format!(
                "a page table of {pages} pages does not fit one storage binding"
            ))));
        }
        // The stamps of the pages that stay move to the new buffer; the rest start at zero.
        let keep = (self.table.len() as u64).min(pages) * 4;
        let stamps = Self::stamp_buffer(&self.device, pages);
        if keep > 0 {
            let mut enc = self
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            enc.copy_buffer_to_buffer(&self.stamps, 0, &stamps, 0, keep);
            self.submit(enc);
            // Like every call that submits work, return with none in flight (slot reuse,
            // docs/WGPU.md). A resize follows objects being created or freed: rare.
            self.wait_idle()?;
        }
        self.stamps = stamps;
        self.table.resize(pages as usize, 0);
        self.table_buf = Self::table_buffer(&self.device, pages);
        // The whole mirror goes up below: nothing is left to flush into the new buffer.
        self.table_dirty.borrow_mut().clear();
        if !self.table.is_empty() {
            self.queue
                .write_buffer(&self.table_buf, 0, bytemuck::cast_slice(&self.table));
        }
        Ok(())
    }

    fn page_times(&mut self, pages: &[GlobalPage]) -> Result<Vec<u64>> {
        self.check()?;
        let n = self.table.len() as u64;
        if let Some(&p) = pages.iter().find(|p| p.0 >= n) {
            return Err(RuntimeError::Core(CoreError::UnknownPage(p)));
        }
        let (Some(lo), Some(hi)) = (
            pages.iter().map(|p| p.0).min(),
            pages.iter().map(|p| p.0).max(),
        ) else {
            return Ok(Vec::new());
        };
        // One read-back of the span the pages cover: a copy of 4 bytes a page, at most the
        // whole buffer, where a gather of scattered pages would need a kernel of its own.
        let b = self.read_back(&[(&self.stamps, lo * 4, (hi - lo + 1) * 4)])?;
        let stamps: Vec<u32> = words(&b[0]).collect();
        Ok(pages
            .iter()
            .map(|p| abi::time_of(stamps[(p.0 - lo) as usize], self.now))
            .collect())
    }

    fn set_page(&mut self, page: GlobalPage, desc: PageDescriptor) -> Result<()> {
        self.check()?;
        let slot = self.table.get_mut(page.index()).ok_or(RuntimeError::Core(
            tessera_core::CoreError::UnknownPage(page),
        ))?;
        *slot = desc.0;
        // Goes up with the next submission (`flush_table`), before the next launch's dispatch.
        self.table_dirty.borrow_mut().push(page.0 as u32);
        Ok(())
    }

    fn launch(&mut self, l: &Launch) -> Result<LaunchOutcome> {
        self.check()?;
        tessera_runtime::check_launch(&*l.kernel, &l.bindings)?;
        let name = l.kernel.name();
        let wgsl = l.kernel.wgsl().ok_or_else(|| {
            self.err(WgpuError::NoWgsl {
                kernel: name.into(),
            })
        })?;
        if l.pages > self.table.len() as u64 {
            return Err(self.err(WgpuError::Invalid(format!(
                "launch over {} pages; the page table has {}",
                l.pages,
                self.table.len()
            ))));
        }
        if l.domain.is_empty() {
            // Compiled all the same, so that a kernel that does not compile fails alike.
            self.pipeline(name, wgsl.source, "main")?;
            return Ok(LaunchOutcome::default());
        }
        // Before it runs: a launch that fails has stamped pages all the same.
        self.now = self.now.max(l.time);
        self.bind_remote(l)?;
        let mut work = self.work(l, &l.domain, &wgsl)?;
        // A Temp launch stores once per invocation in the common case; one that stores more
        // is run again with the room per invocation it turned out to need (it wrote no page).
        let mut per_invocation = if l.mode == Mode::Temp { 1 } else { 0 };
        loop {
            match self.launch_once(&mut work, per_invocation)? {
                Ran::Done(out) => return Ok(out),
                Ran::Grow(need) => per_invocation = need,
                Ran::Failed(status) => return Err(self.first_error(l, &wgsl, status)),
            }
        }
    }

    fn merge(&mut self) -> Result<MergeOutcome> {
        self.check()?;
        let count = self.temp_len;
        if count == 0 {
            return Ok(MergeOutcome::default());
        }
        let pipeline = self.pipeline("tessera merge", crate::MERGE, "merge")?;
        let pages = self.table.len() as u64;
        let bit_words = pages.div_ceil(32).max(1);
        let max = gpu::max_storage_bytes(&self.limits);
        self.scratch
            .leftover
            .ensure(&self.device, count * 16, max)
            .map_err(|e| self.err(e))?;
        self.ensure_lists(0, 0, bit_words, pages)?;
        let (gx, gy, row) = spread(count, 64);
        // `record` reads the bit fields' size from the launch uniform.
        let info = LaunchInfo {
            bit_words: bit_words as u32,
            ..Default::default()
        };
        let mut merge = MergeInfo {
            count: count as u32,
            row,
            memories: self.memories.len() as u32,
            ..Default::default()
        };
        for (i, m) in self.memories.iter().enumerate() {
            merge.slot_words.0[i] = m.slot_words as u32;
            merge.capacity.0[i] = m.capacity;
        }
        self.queue
            .write_buffer(&self.scratch.launch, 0, bytemuck::bytes_of(&info));
        self.queue
            .write_buffer(&self.scratch.merge, 0, bytemuck::bytes_of(&merge));
        let group = self.kernel_group("tessera merge");
        let (mut enc, compact_group, compact_dispatch) = self.begin(bit_words);
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("merge"),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(0)),
            });
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        let head = self.finish(enc, &compact_group, compact_dispatch, 0, pages)?;
        if head.status.failed.0 != 0 {
            return Err(self.err(WgpuError::Invalid(format!(
                "merge: page {} maps outside its physical memory",
                head.status.error_object.0
            ))));
        }
        let (written, left) = (head.status.incomplete.0 as u64, head.status.temp.0 as u64);
        if written + left > count || head.requests > pages {
            return Err(self.err(WgpuError::Wgpu(format!(
                "merge: inconsistent counts (written {written}, left {left} of {count}, pages {})",
                head.requests
            ))));
        }
        let missing = self.request_list(&head, pages)?;
        // The stores left over are the temporary of the next merge.
        std::mem::swap(&mut self.scratch.temp, &mut self.scratch.leftover);
        self.temp_len = left;
        Ok(MergeOutcome {
            written,
            missing: missing.into_iter().map(|r| r.page).collect(),
            gpu_s: head.gpu.map(|[a, b]| a + b),
        })
    }

    fn discard_temp(&mut self) {
        self.temp_len = 0;
    }

    fn counters(&self) -> Option<Arc<BackendCounters>> {
        Some(self.counters.clone())
    }

    fn peer_group(&self) -> Option<u64> {
        // `TESSERA_PEER_COPY=off` moves pages through the host as before peer copies, for
        // comparing the two in one run on one machine (docs/EVALUATION.md, "On a real GPU").
        let off = std::env::var("TESSERA_PEER_COPY").is_ok_and(|v| v == "off");
        (!off).then_some(self.gpu.0.token)
    }

    fn slot_sink(&self, memory: u16) -> Option<Arc<dyn SlotSink>> {
        let m = self.memories.get(memory as usize)?;
        Some(Arc::new(QueueSink {
            queue: self.queue.clone(),
            buffer: m.buffer.clone(),
            slot_bytes: m.slot_words * 4,
            capacity: m.capacity,
        }))
    }

    fn peer_memory(&self, memory: u16) -> Result<PeerMemory> {
        let m = self.memories.get(memory as usize).ok_or_else(|| {
            self.err(WgpuError::Invalid(format!(
                "no physical memory {memory} to copy from"
            )))
        })?;
        Ok(Arc::new(PeerBuffer {
            token: self.gpu.0.token,
            buffer: m.buffer.clone(),
            slot_bytes: m.slot_words * 4,
            capacity: m.capacity,
        }))
    }

    fn wait_queued(&mut self) -> Result<()> {
        self.check()?;
        // Queued writes (slot uploads, descriptors) run only with a submission: an empty one
        // sends them, and the wait covers them too.
        self.flush_table();
        self.counters.submitted();
        self.queue.submit([]);
        self.wait_idle()
    }

    fn copy_from_peers(&mut self, copies: &[PeerCopy]) -> Result<()> {
        if copies.is_empty() {
            return Ok(());
        }
        self.check()?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("peer copies"),
            });
        for c in copies {
            let (off, len) = self.slot_range(c.at)?;
            let src = c
                .from
                .downcast_ref::<PeerBuffer>()
                .filter(|p| p.token == self.gpu.0.token)
                .ok_or_else(|| {
                    self.err(WgpuError::Invalid(
                        "a peer copy from a memory on another wgpu device".into(),
                    ))
                })?;
            if c.from_slot >= src.capacity || src.slot_bytes != len {
                return Err(self.err(WgpuError::Invalid(format!(
                    "a peer copy from slot {} of {}-byte slots ({} of them) into a {len}-byte slot",
                    c.from_slot, src.slot_bytes, src.capacity
                ))));
            }
            enc.copy_buffer_to_buffer(
                &src.buffer,
                c.from_slot as u64 * len,
                &self.memories[c.at.memory as usize].buffer,
                off,
                len,
            );
        }
        // One submission for the batch, not waited for. Peers share one queue, and wgpu runs a
        // queue's work in order with the barriers it needs: the copies read the source slots
        // after every write the queue took before (the source's own uploads included), and
        // whatever the queue takes later (a slot write reusing a source slot, the next launch
        // on either device, a read-back) runs after them. So the memory manager may reuse the
        // source slot once this returns, as the trait asks, with no host wait (docs/WGPU.md,
        // "Slot reuse").
        self.submit(enc);
        Ok(())
    }
}

/// A physical memory as a peer on the same wgpu device copies from it.
/// Writes slots of one memory through the queue from the memory manager's thread while the
/// device's worker waits for a launch (`Device::slot_sink`). `write_buffer` copies the bytes
/// into wgpu's staging memory now, on the calling thread, and the GPU copies them at the start
/// of the next submission: after the running launch, before the descriptors the memory
/// manager queues behind it. So the host side of the upload overlaps the launch, and the slot
/// changes on the GPU only after every launch that may have used it (docs/WGPU.md, "Slot
/// reuse").
struct QueueSink {
    queue: wgpu::Queue,
    buffer: wgpu::Buffer,
    slot_bytes: u64,
    capacity: u32,
}

impl SlotSink for QueueSink {
    fn write_slot(&self, slot: u32, data: &[u8]) -> std::result::Result<(), String> {
        if slot >= self.capacity || data.len() as u64 != self.slot_bytes {
            return Err(format!(
                "{} bytes into slot {slot} of {}-byte slots ({} of them)",
                data.len(),
                self.slot_bytes,
                self.capacity
            ));
        }
        self.queue
            .write_buffer(&self.buffer, slot as u64 * self.slot_bytes, data);
        Ok(())
    }
}

struct PeerBuffer {
    /// The wgpu device it lives on (`Opened::token`).
    token: u64,
    buffer: wgpu::Buffer,
    slot_bytes: u64,
    capacity: u32,
}

/// Widest halo whose window (8 + 2 halo texels a side) fits the prelude's 16x16 windows.
const FP_MAX_HALO: u32 = 4;
/// List entries read back with the counts, before knowing them: a launch that faults on fewer
/// pages and invocations than this needs one read-back, not two.
const SPECULATIVE: u64 = 1024;
/// Read-back layout: status, the request list's head, timestamps (32 bytes), then the first
/// SPECULATIVE entries of the incomplete list and of the request list.
const STATUS_BYTES: u64 = std::mem::size_of::<Status>() as u64;
const REQUESTS_HEAD: u64 = std::mem::size_of::<RequestsHead>() as u64;
const HEAD_REQ: u64 = STATUS_BYTES;
const HEAD_TS: u64 = HEAD_REQ + REQUESTS_HEAD;
const HEAD_INC: u64 = HEAD_TS + TIMESTAMPS as u64 * 8;
const HEAD_LIST: u64 = HEAD_INC + SPECULATIVE * 8;
const HEAD_BYTES: u64 = HEAD_LIST + SPECULATIVE * 8;

/// A kernel launch being prepared.
struct Work {
    label: &'static str,
    pipeline: wgpu::ComputePipeline,
    dispatch: (u32, u32),
    invocations: u64,
    pages: u64,
    bit_words: u64,
    list: Vec<u32>,
    info: LaunchInfo,
}

/// How one run of a launch went.
enum Ran {
    Done(LaunchOutcome),
    /// An invocation stored this many words: run again with that much room.
    Grow(u64),
    /// Invocations failed with a kernel error.
    Failed(Status),
}

/// What a submission's first read-back says.
struct Head {
    status: Status,
    requests: u64,
    gpu: Option<[f64; 2]>,
    bytes: Vec<u8>,
}

/// Buffers kept from launch to launch (see scratch.rs).
pub(crate) struct Scratch {
    launch: wgpu::Buffer,
    merge: wgpu::Buffer,
    compact: wgpu::Buffer,
    status: wgpu::Buffer,
    head: wgpu::Buffer,
    list: Grow,
    bits: Grow,
    incomplete: Grow,
    requests: Grow,
    temp: Grow,
    leftover: Grow,
}

impl Scratch {
    fn new(device: &wgpu::Device) -> Self {
        let fixed = |label, size, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let uniform = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
        Scratch {
            launch: fixed("launch", size_of::<LaunchInfo>() as u64, uniform),
            merge: fixed("merge", size_of::<MergeInfo>() as u64, uniform),
            compact: fixed("compact", size_of::<CompactInfo>() as u64, uniform),
            status: fixed("status", STATUS_BYTES, scratch::STORAGE),
            head: fixed(
                "read-back",
                HEAD_BYTES,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            list: Grow::new(device, "domain list", scratch::STORAGE),
            // Zero at creation, and the compaction clears every word it reads.
            bits: Grow::new(device, "request bits", scratch::STORAGE),
            incomplete: Grow::new(device, "incomplete", scratch::STORAGE),
            requests: Grow::new(device, "requests", scratch::STORAGE),
            temp: Grow::new(device, "temporary", scratch::STORAGE),
            leftover: Grow::new(device, "leftover", scratch::STORAGE),
        }
    }
}

impl WgpuDevice {
    /// Grows the per-launch lists; `Err` names the list that does not fit one binding.
    fn ensure_lists(&mut self, list_bytes: u64, n: u64, bit_words: u64, pages: u64) -> Result<()> {
        let max = gpu::max_storage_bytes(&self.limits);
        let s = &mut self.scratch;
        let d = &self.device;
        let r = s
            .list
            .ensure(d, list_bytes, max)
            .and_then(|_| s.incomplete.ensure(d, n * 8, max))
            .and_then(|_| s.bits.ensure(d, bit_words * 8, max))
            .and_then(|_| s.requests.ensure(d, 8 + pages * 8, max));
        r.map(|_| ()).map_err(|e| self.err(e))
    }

    /// Runs a prepared launch with room for `per_invocation` stores of each invocation in the
    /// temporary. `Ok(Err(k))`: an invocation stored `k` words, so the launch must run again.
    fn launch_once(&mut self, w: &mut Work, per_invocation: u64) -> Result<Ran> {
        let n = w.invocations;
        let max_temp = n * per_invocation;
        self.ensure_lists(w.list.len() as u64 * 4, n, w.bit_words, w.pages)?;
        let max = gpu::max_storage_bytes(&self.limits);
        let old = self
            .scratch
            .temp
            .ensure(&self.device, (self.temp_len + max_temp) * 16, max)
            .map_err(|e| self.err(e))?;
        if self.temp_len + max_temp > u32::MAX as u64 {
            return Err(self.err(WgpuError::OutOfMemory(
                "a temporary of more than 2^32 stores".into(),
            )));
        }
        w.info.temp_k = per_invocation as u32;
        w.info.temp_base = self.temp_len as u32;
        self.queue
            .write_buffer(&self.scratch.launch, 0, bytemuck::bytes_of(&w.info));
        if !w.list.is_empty() {
            self.queue
                .write_buffer(&self.scratch.list.buf, 0, bytemuck::cast_slice(&w.list));
        }
        let group = self.kernel_group(w.label);
        let (mut enc, compact_group, compact_dispatch) = self.begin(w.bit_words);
        if let Some(old) = old {
            // The temporary grew: the stores of the pass's earlier launches move along.
            if self.temp_len > 0 {
                enc.copy_buffer_to_buffer(&old, 0, &self.scratch.temp.buf, 0, self.temp_len * 16);
            }
        }
        if max_temp > 0 {
            // Entries of invocations that fault or store less stay empty (kind 0).
            enc.clear_buffer(
                &self.scratch.temp.buf,
                self.temp_len * 16,
                Some(max_temp * 16),
            );
        }
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(w.label),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(0)),
            });
            pass.set_pipeline(&w.pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(w.dispatch.0, w.dispatch.1, 1);
        }
        let head = self.finish(enc, &compact_group, compact_dispatch, n, w.pages)?;
        let st = head.status;
        if st.failed.0 != 0 {
            return Ok(Ran::Failed(st));
        }
        let (ninc, need) = (st.incomplete.0 as u64, st.temp.0 as u64);
        if need > per_invocation {
            return Ok(Ran::Grow(need));
        }
        if ninc > n || head.requests > w.pages {
            return Err(self.err(WgpuError::Wgpu(format!(
                "kernel {}: inconsistent counts (incomplete {ninc}, requests {})",
                w.label, head.requests
            ))));
        }
        let incomplete: Vec<u32> = if ninc <= SPECULATIVE {
            words(&head.bytes[HEAD_INC as usize..(HEAD_INC + ninc * 8) as usize]).collect()
        } else {
            let b = self.read_back(&[(&self.scratch.incomplete.buf, 0, ninc * 8)])?;
            words(&b[0]).collect()
        };
        let t = Instant::now();
        let mut requests = self.request_list(&head, w.pages)?;
        // The CPU backend's order: by page.
        requests.sort_unstable_by_key(|r| r.page);
        self.temp_len += max_temp;
        // The prelude marks the invocations that saved their state (`suspend()`) in y.
        let suspended = incomplete
            .chunks_exact(2)
            .filter(|c| c[1] & SUSPENDED_BIT != 0)
            .count() as u64;
        Ok(Ran::Done(LaunchOutcome {
            requests,
            incomplete: incomplete
                .chunks_exact(2)
                .map(|c| (c[0], c[1] & !SUSPENDED_BIT))
                .collect(),
            suspended,
            invocations: n,
            uniquify_s: t.elapsed().as_secs_f64(),
            gpu: head.gpu.map(|[k, u]| GpuLaunchTime {
                kernel_s: k,
                uniquify_s: u,
            }),
            remote: Vec::new(),
        }))
    }

    /// The request list a submission's compaction wrote (from the read-back where it fitted).
    fn request_list(&self, head: &Head, pages: u64) -> Result<Vec<PageRequest>> {
        let nreq = head.requests.min(pages);
        let w: Vec<u32> = if nreq <= SPECULATIVE {
            words(&head.bytes[HEAD_LIST as usize..(HEAD_LIST + nreq * 8) as usize]).collect()
        } else {
            let b = self.read_back(&[(&self.scratch.requests.buf, REQUESTS_HEAD, nreq * 8)])?;
            words(&b[0]).collect()
        };
        Ok(w.chunks_exact(2)
            .map(|c| PageRequest {
                page: GlobalPage(c[0] as u64),
                access: if c[1] == 1 {
                    Access::Write
                } else {
                    Access::Read
                },
            })
            .collect())
    }

    /// The bind group of a kernel or the merge over the current buffers.
    fn kernel_group(&self, label: &str) -> wgpu::BindGroup {
        let s = &self.scratch;
        let mem = |i: usize| {
            self.memories
                .get(i)
                .map(|m| &m.buffer)
                .unwrap_or(&self.spare)
                .as_entire_binding()
        };
        let remote = |k: usize| {
            self.remote
                .get(k)
                .unwrap_or(&self.spare)
                .as_entire_binding()
        };
        let entries = [
            self.table_buf.as_entire_binding(),
            mem(0),
            mem(1),
            mem(2),
            mem(3),
            s.launch.as_entire_binding(),
            s.list.buf.as_entire_binding(),
            s.bits.buf.as_entire_binding(),
            s.status.as_entire_binding(),
            s.incomplete.buf.as_entire_binding(),
            s.temp.buf.as_entire_binding(),
            s.leftover.buf.as_entire_binding(),
            s.merge.as_entire_binding(),
            self.stamps.as_entire_binding(),
            remote(0),
            remote(1),
            remote(2),
            remote(3),
        ];
        let entries: Vec<wgpu::BindGroupEntry> = entries
            .into_iter()
            .enumerate()
            .map(|(i, resource)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource,
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.pipes.kernel_layout,
            entries: &entries,
        })
    }

    /// An encoder that starts with the counts cleared, and the compaction of `bit_words`
    /// request words that [`Self::finish`] runs after the caller's pass.
    fn begin(&self, bit_words: u64) -> (wgpu::CommandEncoder, wgpu::BindGroup, (u32, u32)) {
        let (cgx, cgy, row) = spread(bit_words, 64);
        let info = CompactInfo {
            words: bit_words as u32,
            row,
            ..Default::default()
        };
        self.queue
            .write_buffer(&self.scratch.compact, 0, bytemuck::bytes_of(&info));
        // Queued writes land before the submission's commands.
        self.queue.write_buffer(
            &self.scratch.status,
            0,
            bytemuck::bytes_of(&Status::initial()),
        );
        let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("compact"),
            layout: &self.pipes.compact_layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: self.scratch.compact.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: self.scratch.bits.buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: self.scratch.requests.buf.as_entire_binding(),
                },
            ],
        });
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        enc.clear_buffer(&self.scratch.requests.buf, 0, Some(REQUESTS_HEAD));
        (enc, group, (cgx, cgy))
    }

    /// Runs the compaction after the caller's pass, submits, and reads back the counts, the
    /// timestamps and the first entries of the lists in one go.
    fn finish(
        &self,
        mut enc: wgpu::CommandEncoder,
        compact_group: &wgpu::BindGroup,
        dispatch: (u32, u32),
        invocations: u64,
        pages: u64,
    ) -> Result<Head> {
        let s = &self.scratch;
        {
            // A pass of its own: its dispatch sees every bit the previous pass recorded.
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("compact"),
                timestamp_writes: self.timestamps.as_ref().map(|t| t.writes(1)),
            });
            pass.set_pipeline(&self.pipes.compact);
            pass.set_bind_group(0, compact_group, &[]);
            pass.dispatch_workgroups(dispatch.0, dispatch.1, 1);
        }
        enc.copy_buffer_to_buffer(&s.status, 0, &s.head, 0, STATUS_BYTES);
        enc.copy_buffer_to_buffer(&s.requests.buf, 0, &s.head, HEAD_REQ, REQUESTS_HEAD);
        if let Some(t) = &self.timestamps {
            enc.resolve_query_set(&t.set, 0..TIMESTAMPS, &t.resolve, 0);
            enc.copy_buffer_to_buffer(&t.resolve, 0, &s.head, HEAD_TS, TIMESTAMPS as u64 * 8);
        }
        let inc = invocations.min(SPECULATIVE) * 8;
        if inc > 0 {
            enc.copy_buffer_to_buffer(&s.incomplete.buf, 0, &s.head, HEAD_INC, inc);
        }
        let req = pages.min(SPECULATIVE) * 8;
        if req > 0 {
            enc.copy_buffer_to_buffer(&s.requests.buf, REQUESTS_HEAD, &s.head, HEAD_LIST, req);
        }
        self.submit(enc);
        // Waits until the device has run this submission (and so every earlier one): a launch
        // or merge returns with nothing in flight, which is what lets `write_slot` reuse a
        // slot at once.
        let bytes = self.map_read(&s.head)?;
        let status: Status = bytemuck::pod_read_unaligned(&bytes[..STATUS_BYTES as usize]);
        let head: RequestsHead =
            bytemuck::pod_read_unaligned(&bytes[HEAD_REQ as usize..HEAD_TS as usize]);
        let gpu = self.timestamps.as_ref().and_then(|t| {
            let ticks: Vec<u64> = bytes[HEAD_TS as usize..HEAD_INC as usize]
                .chunks_exact(8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
                .collect();
            t.seconds(&ticks)
        });
        Ok(Head {
            status,
            requests: head.count.0 as u64,
            gpu,
            bytes,
        })
    }

    fn map_read(&self, staging: &wgpu::Buffer) -> Result<Vec<u8>> {
        self.counters.waited();
        self.counters.read_back(staging.size());
        self.health
            .map_read(&self.device, staging)
            .map_err(|e| self.err(e))
    }
}

/// A remote object's pages on the GPU: one buffer on the shared wgpu device, bound by every
/// tessera device of the node that accesses the object. Host-visible where the adapter allows
/// storage buffers to be mapped (`MAPPABLE_PRIMARY_BUFFERS`), as GPU-SM's pages in host memory.
struct RemoteBuffer {
    gpu: SharedGpu,
    buffer: wgpu::Buffer,
    bytes: u64,
    /// The device that made it, to name in errors of a later read-back.
    made_by: DeviceId,
}

impl RemoteBacking for RemoteBuffer {
    fn pull(&self, into: &[AtomicU32]) -> Result<()> {
        let g = &self.gpu.0;
        let b = gpu::read_back(
            &g.device,
            &g.queue,
            &g.health,
            &[(&self.buffer, 0, self.bytes)],
        )
        .map_err(|e| e.on(self.made_by))?;
        for (w, v) in into.iter().zip(words(&b[0])) {
            w.store(v, Ordering::Relaxed);
        }
        Ok(())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl WgpuDevice {
    /// Finds (or makes, on first use) the buffer of each remote object `l` binds, and sets
    /// `remote` and `remote_slots` for the launch's bind group and `BindInfo`s.
    fn bind_remote(&mut self, l: &Launch) -> Result<()> {
        self.remote.clear();
        self.remote_slots.clear();
        if l.remote.iter().all(Option::is_none) {
            return Ok(());
        }
        let mut ids: Vec<ObjectId> = Vec::new();
        for (b, r) in l.bindings.iter().zip(l.remote.iter()) {
            let Some(r) = r else {
                self.remote_slots.push(0);
                continue;
            };
            if let Some(k) = ids.iter().position(|&id| id == b.id) {
                self.remote_slots.push(k as u32 + 1);
                continue;
            }
            if ids.len() as u32 >= abi::REMOTE_SLOTS {
                return Err(self.err(WgpuError::TooManyRemote {
                    kernel: l.kernel.name().into(),
                    max: abi::REMOTE_SLOTS,
                }));
            }
            let backing = r.backing_or_init(|w| self.make_remote(w))?;
            let buffer = match backing.as_any().downcast_ref::<RemoteBuffer>() {
                // By the shared device's identity: `wgpu::Device`s of separate instances can
                // compare equal (their ids are per instance).
                Some(rb) if Arc::ptr_eq(&rb.gpu.0, &self.gpu.0) => rb.buffer.clone(),
                _ => return Err(self.err(WgpuError::RemoteAcrossDevices { object: b.id })),
            };
            ids.push(b.id);
            self.remote.push(buffer);
            self.remote_slots.push(ids.len() as u32);
        }
        Ok(())
    }

    /// A remote object's buffer, holding the pool's words `w`.
    fn make_remote(&self, w: &[AtomicU32]) -> Result<Arc<dyn RemoteBacking>> {
        let bytes = w.len() as u64 * 4;
        let mut usage = scratch::STORAGE;
        if self.gpu.host_visible_remote() {
            usage |= wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::MAP_WRITE;
        }
        let buffer = gpu::buffer(
            &self.device,
            "remote pages",
            bytes,
            usage,
            gpu::max_storage_bytes(&self.limits),
        )
        .map_err(|e| self.err(e))?;
        let data: Vec<u32> = w.iter().map(|v| v.load(Ordering::Relaxed)).collect();
        if !data.is_empty() {
            // Queued: lands before any submission that binds the buffer.
            self.queue
                .write_buffer(&buffer, 0, bytemuck::cast_slice(&data));
        }
        Ok(Arc::new(RemoteBuffer {
            gpu: self.gpu.clone(),
            buffer,
            bytes,
            made_by: self.id,
        }))
    }

    /// Prepares a launch of `l` over `domain` (the launch's own, or one invocation of it).
    fn work(&mut self, l: &Launch, domain: &Domain, wgsl: &WgslKernel) -> Result<Work> {
        let name = l.kernel.name();
        // The tile path: rectangles of a kernel with a footprint, on a device that takes it.
        let mut fp = [abi::Vec4U32::default(); abi::FP_MAX as usize];
        let fp_n = match (self.tiles, l.kernel.footprint(), domain) {
            (true, Some(f), Domain::Rect { .. }) => fp_reads(&f, &l.bindings, &l.remote, &mut fp),
            _ => 0,
        };
        let entry = if fp_n > 0 { "main_tiles" } else { "main" };
        let pipeline = self.pipeline(name, wgsl.source, entry)?;
        let n = domain.len();
        if n > u32::MAX as u64 {
            return Err(self.err(WgpuError::OutOfMemory(format!(
                "kernel {name}: a launch of {n} invocations; split the pass or use more devices"
            ))));
        }
        let bit_words = l.pages.div_ceil(32).max(1);
        let mut info = LaunchInfo {
            mode: abi::mode_code(l.mode),
            count: n as u32,
            nbind: l.bindings.len() as u32,
            bit_words: bit_words as u32,
            fp,
            fp_n,
            time: abi::stamp_of(l.time),
            ..Default::default()
        };
        let (dispatch, list) = match domain {
            Domain::Rect { x0, y0, x1, y1 } => {
                (info.x0, info.y0, info.x1, info.y1) = (*x0, *y0, *x1, *y1);
                let gx = (x1 - x0).div_ceil(GROUP);
                let gy = (y1 - y0).div_ceil(GROUP);
                if gx > MAX_GROUPS || gy > MAX_GROUPS {
                    return Err(self.err(WgpuError::Invalid(format!(
                        "domain of {}x{} is too large for one dispatch",
                        x1 - x0,
                        y1 - y0
                    ))));
                }
                ((gx, gy), Vec::new())
            }
            Domain::List(items) => {
                // Rows of `row` invocations; each workgroup covers 8 of a row and 8 rows.
                let rows_needed = n.div_ceil(GROUP as u64 * MAX_GROUPS as u64).max(1);
                let (gx, _, row) = spread(n.div_ceil(rows_needed), GROUP);
                let rows = n.div_ceil(row as u64);
                let gy = rows.div_ceil(GROUP as u64) as u32;
                info.is_list = 1;
                info.row = row;
                let flat: Vec<u32> = items.iter().flat_map(|&(x, y)| [x, y]).collect();
                ((gx, gy), flat)
            }
        };
        let by_id = abi::BY_ID_SLOTS;
        for (i, (b, to)) in l.bindings.iter().zip(&mut info.binds).enumerate() {
            if b.pages_end > u32::MAX as u64 {
                return Err(self.err(WgpuError::Invalid("object beyond global page 2^32".into())));
            }
            *to = BindInfo {
                id: b.id.0,
                page_offset: b.page_offset as u32,
                width: b.width() as u32,
                height: b.height() as u32,
                pages_x: b.pages_x() as u32,
                shift: b.shift(),
                words_per_texel: b.words_per_texel() as u32,
                slot_words: b.slot_words() as u32,
                format: abi::format_code(b.format()),
                remote: self.remote_slots.get(i).copied().unwrap_or(0),
                ..Default::default()
            };
            // The first binding of each id class wins; the prelude searches for the others.
            let slot = b.id.0 % by_id;
            let h = &mut info.by_id[(slot / 4) as usize].0[(slot % 4) as usize];
            if *h == 0 {
                *h = i as u32 + 1;
            }
        }
        fill_params(&mut info.params, &wgsl.params);
        Ok(Work {
            label: name,
            pipeline,
            dispatch,
            invocations: n,
            pages: l.pages,
            bit_words,
            list,
            info,
        })
    }

    /// The error of the launch's first failing invocation (launch order), as the CPU backend
    /// reports it. The status words hold it exactly where one invocation failed; where several
    /// did, they raced for the words, so the first one is run again alone.
    fn first_error(&mut self, l: &Launch, wgsl: &WgslKernel, status: Status) -> RuntimeError {
        if status.failed.0 == 1 {
            return self.kernel_error(l, status);
        }
        let i = status.first.0 as u64;
        let at = match &l.domain {
            Domain::Rect { x0, y0, x1, .. } => {
                let w = (x1 - x0) as u64;
                Some((x0 + (i % w) as u32, y0 + (i / w) as u32))
            }
            Domain::List(items) => items.get(i as usize).copied(),
        };
        let Some(at) = at else {
            return self.kernel_error(l, status);
        };
        let temp_len = self.temp_len;
        let alone = Domain::List(std::sync::Arc::new(vec![at]));
        let again = self
            .work(l, &alone, wgsl)
            .and_then(|mut w| self.launch_once(&mut w, MAX_STORES as u64));
        // It wrote no page (it fails before committing) and leaves the temporary as it was.
        self.temp_len = temp_len;
        match again {
            Ok(Ran::Failed(alone)) if alone.failed.0 == 1 => self.kernel_error(l, alone),
            // Not failing alone: it read what another invocation of the launch wrote, a race
            // the program must avoid; any failing invocation's error is then as good.
            Ok(_) => self.kernel_error(l, status),
            Err(e) => e,
        }
    }

    /// The typed error a failing invocation's status words describe.
    fn kernel_error(&self, l: &Launch, st: Status) -> RuntimeError {
        let kernel = l.kernel.name().to_string();
        let object = ObjectId(st.error_object.0);
        let bound = l.bindings.iter().find(|b| b.id == object);
        match (st.error_kind.0, bound) {
            (abi::ERR_UNBOUND, _) => RuntimeError::Unbound { kernel, object },
            (abi::ERR_TOO_MANY_STORES, _) => RuntimeError::TooManyStores {
                kernel,
                max: MAX_STORES,
            },
            (abi::ERR_OUT_OF_RANGE, Some(b)) => RuntimeError::Kernel {
                kernel,
                source: CoreError::OutOfRange {
                    object,
                    x: st.error_x.0 as u64,
                    y: st.error_y.0 as u64,
                    width: b.width(),
                    height: b.height(),
                },
            },
            (abi::ERR_WRONG_FORMAT, Some(b)) => match abi::format_of(st.error_format.0) {
                Some(expected) => RuntimeError::Kernel {
                    kernel,
                    source: CoreError::WrongKind {
                        object,
                        expected: kind_name(expected),
                        actual: kind_name(b.format()),
                    },
                },
                None => self.err(WgpuError::Wgpu(format!(
                    "kernel {kernel}: unknown format code {} in the status",
                    st.error_format.0
                ))),
            },
            (kind, _) => self.err(WgpuError::Wgpu(format!(
                "kernel {kernel}: error {kind} on object {object} that the host cannot decode"
            ))),
        }
    }
}
