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
    LaunchOutcome, MergeOutcome, Mode, ParamField, PeerCopy, PeerMemory, PendingRead, Queued,
    QueuedOutcome, RemoteBacking, RemoteObject, Result, RuntimeError, Settled, SlotSink,
    WgslKernel, MAX_STORES,
};

use crate::abi::{self, BindInfo, CompactInfo, LaunchInfo, MergeInfo, RequestsHead, Status};
use crate::error::WgpuError;
use crate::gpu::{self, AdapterChoice, Health, Mapping, SharedGpu};
use crate::scratch::{self, Grow, Timestamps, TIMESTAMPS};
use crate::shape::LaunchShape;
use crate::switches::{switch, TilePath, BOUNDS_CHECKS};
use crate::unpaged::fill_params;

mod backend;
mod errors;
mod later;
mod launch;
mod queue;
mod remote;

use launch::*;
use queue::Queue;

pub use crate::abi::MAX_MEMORIES;

/// Slots read back in one batch only while they average at most this many bytes
/// (`Device::read_slots`): larger pages read one at a time were faster on an H100.
const BATCHED_READ_MAX_PAGE: u64 = 64 << 10;
/// Bytes of one chunk of the staging ring slot writes go through: a batch of 64 KiB pages
/// fills a few.
const BELT_CHUNK: u64 = 4 << 20;
/// Launches that carry the stamps back after a `page_times`: an evicting pass asks again
/// within a few launches, and a device that stopped evicting stops paying 4 bytes a page per
/// launch soon after.
const STAMP_LAUNCHES: u32 = 16;
// The prelude's marks sit above every coordinate of a launch domain.
const _: () = assert!(
    crate::abi::SAVED_NOW_BIT < crate::abi::RESUMED_BIT
        && crate::abi::SAVED_NOW_BIT >= tessera_runtime::MAX_DOMAIN_SIDE
);

/// The tile path's workgroup side (`main_tiles`: 8 x 8 tiles).
const TILE: u32 = 8;
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
    /// By kernel name, entry point (`main`, or `main_tiles` for the tile path), whether it
    /// is built for one memory and its bindings' shape (`WgpuDevice::pipeline`).
    kernels: HashMap<PipelineKey, wgpu::ComputePipeline>,
}

type PipelineKey = (&'static str, &'static str, bool, LaunchShape);

/// Pipelines specialized to distinct binding shapes per kernel and entry point. A workload
/// binds a few shapes over and over; one that binds a new shape every launch would otherwise
/// compile every launch.
const MAX_SHAPES: usize = 8;

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
    /// Launches queued on the GPU and not yet settled (`Device::queue_launch`).
    queued: Queue,
    /// The staging ring batches of slot writes go through (`Device::write_slots`).
    belt: wgpu::util::StagingBelt,
    /// Stores in the temporary (`scratch.temp`): this pass's `Mode::Temp` launches append,
    /// the merge consumes. The temporary stays on the device.
    temp_len: u64,
    /// Where the adapter has timestamp queries.
    timestamps: Option<Timestamps>,
    health: Health,
    /// Whether launches take the tile path (see [`TilePath`]).
    tiles: bool,
    /// Whether per-texel launches stamp each page once per workgroup (`stamp_cache.wgsl`)
    /// rather than once per invocation: on GPUs, not on CPU adapters.
    group_stamps: bool,
    /// What `read_back` copies slots, stamps and lists into: kept and grown, not made per read
    /// (write-backs read whole batches of pages through it).
    readback: RefCell<Grow>,
    /// Whether pipelines are built for their launches' binding shapes (`LaunchShape`).
    specialize: bool,
    /// Submissions, waits for the GPU and bytes read back (`HostCounters`).
    counters: Arc<BackendCounters>,
    /// Staging buffers of reads taken in the background, for reuse (`Device::read_slots_later`).
    later_spares: later::Spares,
    /// The stamps last read back of every page: with a launch (`Self::carry_stamps`), a
    /// settle, or a whole read. `None` once the table changes size.
    stamps_seen: Option<Vec<u32>>,
    /// Whether `stamps_seen` is as the last launch left them: false once another launch is
    /// recorded, and after a read by `page_times`. While launches are queued, eviction ranks
    /// pages by stale stamps rather than wait for the queue (docs/WGPU.md, "Stamps while
    /// launches are queued").
    stamps_fresh: bool,
    /// Launches that still carry the stamps back: set by every `page_times`, so a device
    /// whose pages are being evicted answers the next eviction's question without a wait.
    stamps_track: u32,
    /// What launches copy the stamps into for that.
    stamps_back: RefCell<Grow>,
    /// Per kernel and kind of launch (over a list or not), how many of its last launch's
    /// invocations were incomplete, of how many: what the next launch of that kind reads back
    /// ahead (`incomplete_ahead`).
    incomplete_seen: HashMap<(&'static str, bool), (u64, u64)>,
    /// What launches copy their incomplete lists into for that.
    incomplete_back: RefCell<Grow>,
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
        // Refused before anything is built: bounds checks are read again per module.
        switch(BOUNDS_CHECKS)?;
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
                // The kernel's `params`: the first words of the launch uniform (binding 5).
                uniform(18),
                // The queue's gate (abi::GATE_BINDING), shared with the other tessera
                // devices on this wgpu device.
                storage(abi::GATE_BINDING, false),
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
        let scratch = Scratch::new(&device);
        // Launches reset the status themselves; the gate lives on the wgpu device, open.
        queue.write_buffer(&scratch.status, 0, bytemuck::bytes_of(&Status::initial()));
        let queued = Queue::new(&device);
        Ok(WgpuDevice {
            gpu: shared.clone(),
            queued,
            belt: wgpu::util::StagingBelt::new(device.clone(), BELT_CHUNK),
            remote: Vec::new(),
            remote_slots: Vec::new(),
            scratch,
            temp_len: 0,
            timestamps,
            tiles: TilePath::from_env()? == TilePath::On,
            group_stamps: info.device_type != wgpu::DeviceType::Cpu,
            specialize: crate::shape::from_env()?,
            readback: RefCell::new(Grow::new(
                &device,
                "read-back",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )),
            incomplete_seen: HashMap::new(),
            incomplete_back: RefCell::new(Grow::new(
                &device,
                "incomplete read-back",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )),
            stamps_seen: None,
            stamps_fresh: false,
            stamps_track: 0,
            stamps_back: RefCell::new(Grow::new(
                &device,
                "stamps read-back",
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            )),
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
            later_spares: Arc::default(),
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
        self.tiles = t == TilePath::On;
    }

    /// Chooses how per-texel launches stamp pages: once per workgroup and page, or once per
    /// invocation (the default is the first on GPUs, the second on CPU adapters). Both stamp
    /// the same pages.
    pub fn set_group_stamps(&mut self, on: bool) {
        if on != self.group_stamps {
            self.pipes.kernels.clear();
        }
        self.group_stamps = on;
    }

    /// Chooses whether later launches run pipelines built for their bindings' shape (the
    /// default, unless `TESSERA_WGPU_SPECIALIZE=off`) or the generic prelude. Both compute
    /// the same.
    pub fn set_specialize(&mut self, on: bool) {
        self.specialize = on;
    }

    /// Kernel pipelines built so far (each kernel, entry point and specialization once).
    pub fn pipelines_built(&self) -> usize {
        self.pipes.kernels.len()
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

    /// Copies `ranges` (buffer, offset, bytes) into the device's read-back buffer and reads
    /// them back: one submission and one wait.
    fn read_back(&self, ranges: &[(&wgpu::Buffer, u64, u64)]) -> Result<Vec<Vec<u8>>> {
        self.flush_table();
        self.counters.submitted();
        self.counters.waited();
        let total = ranges.iter().map(|r| r.2).sum();
        self.counters.read_back(total);
        let mut staging = self.readback.borrow_mut();
        staging
            .ensure(&self.device, total, self.limits.max_buffer_size)
            .map_err(|e| self.err(e))?;
        gpu::read_back_through(
            &self.device,
            &self.queue,
            &self.health,
            ranges,
            &staging.buf,
        )
        .map_err(|e| self.err(e))
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
        let m = self
            .memories
            .get(at.memory as usize)
            .ok_or_else(|| self.err(WgpuError::NoMemory { memory: at.memory }))?;
        if at.slot >= m.capacity {
            return Err(self.err(WgpuError::SlotOutside {
                memory: at.memory,
                slot: at.slot,
            }));
        }
        Ok((at.slot as u64 * m.slot_words * 4, m.slot_words * 4))
    }

    /// The compute pipeline of a kernel, built once per kernel name, entry point and
    /// specialization: with `one_memory` (a device of one physical memory, a launch that
    /// binds no remote object) every descriptor names memory 0, and the prelude reads and
    /// writes it directly instead of through its switch over eight buffers; `shape` makes
    /// the bindings' shared fields constants (`LaunchShape`), up to [`MAX_SHAPES`] shapes.
    fn pipeline(
        &mut self,
        name: &'static str,
        wgsl: (&str, &[ParamField]),
        entry: &'static str,
        one_memory: bool,
        shape: LaunchShape,
    ) -> Result<wgpu::ComputePipeline> {
        let mut shape = match self.specialize {
            true => shape,
            false => LaunchShape::GENERIC,
        };
        if let Some(p) = self.pipes.kernels.get(&(name, entry, one_memory, shape)) {
            return Ok(p.clone());
        }
        // Past the cap a new shape shares the generic pipeline. Counted only on a miss, which
        // the first launch of a shape pays with a compile.
        let specialized =
            |k: &&PipelineKey| (k.0, k.1) == (name, entry) && k.3 != LaunchShape::GENERIC;
        if shape != LaunchShape::GENERIC
            && self.pipes.kernels.keys().filter(specialized).count() >= MAX_SHAPES
        {
            shape = LaunchShape::GENERIC;
            if let Some(p) = self.pipes.kernels.get(&(name, entry, one_memory, shape)) {
                return Ok(p.clone());
            }
        }
        let stamps = if entry == "main_tiles" {
            crate::STAMP_GROUP
        } else if self.group_stamps {
            crate::STAMP_CACHE
        } else {
            crate::STAMP_EACH
        };
        let memories = if one_memory {
            crate::ONE_MEMORY
        } else {
            crate::ANY_MEMORY
        };
        let (source, fields) = wgsl;
        let bindings = shape.wgsl();
        let code = abi::kernel_shader(
            fields,
            &[memories, &bindings, crate::PRELUDE, stamps, source],
        );
        let p = gpu::compile(
            &self.device,
            &self.pipes.kernel_pipeline_layout,
            name,
            code,
            source,
            entry,
        )
        .map_err(|e| self.err(e))?;
        self.pipes
            .kernels
            .insert((name, entry, one_memory, shape), p.clone());
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
