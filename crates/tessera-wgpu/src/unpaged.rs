//! `UnpagedGpu`: kernels' WGSL twins on plain GPU arrays, with no paging at all.
//!
//! This is the "unpaged original" of the paper's overhead measurement on a GPU: the same kernel
//! bodies as a paged run, compiled after `unpaged.wgsl` instead of `invocation.wgsl`, on objects
//! that sit whole in one storage buffer. Passes are encoded back to back and submitted once per
//! [`UnpagedGpu::finish`]; nothing is read back in between. A paged frame against an unpaged
//! one therefore differs only in paging: translation, request recording, the memory manager and
//! the read-backs it needs.

use std::collections::HashMap;
use std::num::NonZeroU64;

use tessera_core::{ObjectId, TexelFormat};
use tessera_runtime::{Kernel, WgslKernel};

use crate::abi::{self, UnpagedLaunch, UnpagedObject, UnpagedObjects, Vec4U32};
use crate::error::WgpuError;
use crate::gpu::AdapterChoice;
use crate::gpu::{self, Health};

/// Objects an unpaged run holds; ids must be below it (the prelude indexes its object table
/// by id).
pub const UNPAGED_MAX_OBJECTS: usize = abi::UNPAGED_MAX_OBJECTS as usize;
/// Launch uniforms queued between two submissions; more passes than this submit early.
const LAUNCH_SLOTS: u64 = 64;

/// Where an object lives in the word buffer.
#[derive(Clone, Copy)]
struct Placement {
    base: u64,
    width: u32,
    height: u32,
    format: TexelFormat,
}

impl Placement {
    fn bytes(&self) -> u64 {
        self.width as u64 * self.height as u64 * self.format.bytes() as u64
    }
}

/// Objects as plain row-major arrays on one wgpu device, and kernels run on them directly.
pub struct UnpagedGpu {
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    device: wgpu::Device,
    queue: wgpu::Queue,
    objects: HashMap<ObjectId, Placement>,
    words: wgpu::Buffer,
    launch: wgpu::Buffer,
    launch_stride: u64,
    /// Launch slots written since the last submission.
    launches: u64,
    group: wgpu::BindGroup,
    pipeline_layout: wgpu::PipelineLayout,
    pipelines: HashMap<&'static str, wgpu::ComputePipeline>,
    /// Passes encoded and not yet submitted.
    pending: Option<wgpu::CommandEncoder>,
    health: Health,
}

fn entry(binding: u32, ty: wgpu::BufferBindingType, dynamic: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty,
            has_dynamic_offset: dynamic,
            min_binding_size: None,
        },
        count: None,
    }
}

impl UnpagedGpu {
    /// Opens a device on the chosen adapter and lays out `objects` (id, width, height,
    /// format), zero-filled, one after the other in one storage buffer.
    pub fn new(
        choice: &AdapterChoice,
        objects: &[(ObjectId, u32, u32, TexelFormat)],
    ) -> Result<Self, WgpuError> {
        let mut placed = HashMap::new();
        let mut words = 0u64;
        for &(id, width, height, format) in objects {
            if id.0 as usize >= UNPAGED_MAX_OBJECTS {
                return Err(WgpuError::UnpagedId {
                    object: id,
                    max: UNPAGED_MAX_OBJECTS,
                });
            }
            let p = Placement {
                base: words,
                width,
                height,
                format,
            };
            if placed.insert(id, p).is_some() {
                return Err(WgpuError::ObjectTwice { object: id });
            }
            words += p.bytes() / 4;
        }
        // The prelude addresses words with u32 arithmetic.
        if words > u32::MAX as u64 {
            return Err(WgpuError::OutOfMemory(format!(
                "{words} words of objects; an unpaged run addresses at most 2^32"
            )));
        }

        let gpu::Opened {
            info,
            limits,
            device,
            queue,
            health,
            ..
        } = gpu::open(choice, "tessera unpaged", 1, wgpu::Features::empty())?;

        let words_buf = gpu::buffer(
            &device,
            "unpaged objects",
            words * 4,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            gpu::max_storage_bytes(&limits),
        )?;

        // The object table, indexed by id; an id with no object keeps width 0.
        let mut table = UnpagedObjects::default();
        for (id, p) in &placed {
            table.o[id.0 as usize] = UnpagedObject {
                base: p.base as u32,
                width: p.width,
                height: p.height,
                words_per_texel: p.format.bytes() / 4,
            };
        }
        let table_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("unpaged object table"),
            size: std::mem::size_of_val(&table) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        queue.write_buffer(&table_buf, 0, bytemuck::bytes_of(&table));

        let launch_bytes = std::mem::size_of::<UnpagedLaunch>() as u64;
        let launch_stride =
            launch_bytes.next_multiple_of(limits.min_uniform_buffer_offset_alignment as u64);
        let launch = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("unpaged launches"),
            size: launch_stride * LAUNCH_SLOTS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });

        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("tessera unpaged"),
            entries: &[
                entry(
                    0,
                    wgpu::BufferBindingType::Storage { read_only: false },
                    false,
                ),
                entry(1, wgpu::BufferBindingType::Uniform, false),
                // One launch uniform per pass, chosen by a dynamic offset, so that a frame's
                // passes can be encoded together without a buffer or bind group each.
                entry(2, wgpu::BufferBindingType::Uniform, true),
                // The kernel's `params`: the first words of the same launch uniform.
                entry(3, wgpu::BufferBindingType::Uniform, true),
            ],
        });
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("tessera unpaged"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("tessera unpaged"),
            layout: &layout,
            entries: &[
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: words_buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: table_buf.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &launch,
                        offset: 0,
                        size: NonZeroU64::new(launch_bytes),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &launch,
                        offset: 0,
                        size: NonZeroU64::new(abi::PARAMS_BYTES),
                    }),
                },
            ],
        });
        let gpu = UnpagedGpu {
            info,
            limits,
            device,
            queue,
            objects: placed,
            words: words_buf,
            launch,
            launch_stride,
            launches: 0,
            group,
            pipeline_layout,
            pipelines: HashMap::new(),
            pending: None,
            health,
        };
        gpu.health.check()?;
        Ok(gpu)
    }

    /// The adapter this runs on.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    fn placement(&self, id: ObjectId) -> Result<Placement, WgpuError> {
        self.objects
            .get(&id)
            .copied()
            .ok_or(WgpuError::NoObject { object: id })
    }

    /// Submits the passes encoded so far, without waiting for them.
    fn flush(&mut self) {
        if let Some(enc) = self.pending.take() {
            self.queue.submit([enc.finish()]);
        }
        // Queued writes land after every earlier submission, so the slots are free again.
        self.launches = 0;
    }

    /// Replaces the whole contents of an object: row-major from texel (0, 0), in its format.
    /// Ordered after the passes run so far and before those run later.
    pub fn write_object(&mut self, id: ObjectId, data: &[u8]) -> Result<(), WgpuError> {
        self.health.check()?;
        let p = self.placement(id)?;
        if data.len() as u64 != p.bytes() {
            return Err(WgpuError::ObjectSize {
                object: id,
                want: p.bytes(),
                got: data.len() as u64,
            });
        }
        // A queued write runs before the next submission, so passes already encoded go first.
        self.flush();
        if !data.is_empty() {
            self.queue.write_buffer(&self.words, p.base * 4, data);
        }
        Ok(())
    }

    /// The whole contents of an object after every pass run so far (waits for them).
    pub fn read_object(&mut self, id: ObjectId) -> Result<Vec<u8>, WgpuError> {
        self.health.check()?;
        let p = self.placement(id)?;
        self.flush();
        let mut out = gpu::read_back(
            &self.device,
            &self.queue,
            &self.health,
            &[(&self.words, p.base * 4, p.bytes())],
        )?;
        Ok(out.pop().unwrap_or_default())
    }

    /// The compute pipeline of a kernel, built once per kernel name.
    fn pipeline(
        &mut self,
        name: &'static str,
        wgsl: &WgslKernel,
    ) -> Result<wgpu::ComputePipeline, WgpuError> {
        if let Some(p) = self.pipelines.get(name) {
            return Ok(p.clone());
        }
        let code = abi::kernel_shader(wgsl.fields, &[crate::UNPAGED_PRELUDE, wgsl.source]);
        let p = gpu::compile(
            &self.device,
            &self.pipeline_layout,
            name,
            code,
            wgsl.source,
            "main",
        )?;
        self.pipelines.insert(name, p.clone());
        Ok(p)
    }

    /// Encodes one pass of `kernel`'s WGSL twin over texels `(0, 0)..size`. It runs at the
    /// next [`finish`](Self::finish) (or read or write), after every pass encoded before it.
    pub fn run(&mut self, kernel: &dyn Kernel, size: (u32, u32)) -> Result<(), WgpuError> {
        self.health.check()?;
        let name = kernel.name();
        let wgsl = kernel.wgsl().ok_or_else(|| WgpuError::NoWgsl {
            kernel: name.into(),
        })?;
        if wgsl.param_words() > tessera_runtime::MAX_PARAMS {
            return Err(tessera_runtime::RuntimeError::TooManyParams {
                kernel: name.into(),
                words: wgsl.param_words(),
                max: tessera_runtime::MAX_PARAMS,
            }
            .into());
        }
        let (gx, gy) = (size.0.div_ceil(abi::GROUP_X), size.1.div_ceil(abi::GROUP_Y));
        let max = self.limits.max_compute_workgroups_per_dimension;
        if gx > max || gy > max {
            return Err(WgpuError::DispatchTooLarge {
                kernel: name.into(),
                width: size.0,
                height: size.1,
            });
        }
        let pipeline = self.pipeline(name, &wgsl)?;
        if gx == 0 || gy == 0 {
            return Ok(());
        }
        if self.launches == LAUNCH_SLOTS {
            self.flush();
        }
        let mut launch = UnpagedLaunch {
            width: size.0,
            height: size.1,
            ..Default::default()
        };
        fill_params(&mut launch.params, &wgsl.params);
        let offset = self.launches * self.launch_stride;
        self.queue
            .write_buffer(&self.launch, offset, bytemuck::bytes_of(&launch));
        self.launches += 1;
        let enc = self.pending.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("unpaged passes"),
                })
        });
        // One compute pass per kernel: the next pass reads what this one wrote.
        let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(name),
            timestamp_writes: None,
        });
        pass.set_pipeline(&pipeline);
        // Offsets below LAUNCH_SLOTS * stride: well inside u32.
        // Both launch bindings (the prelude's and the kernel's `params`) start at the slot.
        pass.set_bind_group(0, &self.group, &[offset as u32, offset as u32]);
        pass.dispatch_workgroups(gx, gy, 1);
        Ok(())
    }

    /// Submits the passes encoded so far and waits until the GPU has run them, so that the
    /// time up to here counts their execution (a paged frame waits on its read-backs).
    pub fn finish(&mut self) -> Result<(), WgpuError> {
        self.health.check()?;
        self.flush();
        self.wait()
    }

    fn wait(&self) -> Result<(), WgpuError> {
        self.health.wait(&self.device)
    }

    /// Destroys the wgpu device, as a driver reset would; lets tests reach the device-lost path.
    pub fn destroy(&mut self) {
        self.device.destroy();
    }
}

/// Lays a kernel's parameter bytes into a uniform's words, from the first. The caller has
/// checked that they fit.
pub(crate) fn fill_params(to: &mut [Vec4U32], bytes: &[u8]) {
    bytemuck::cast_slice_mut::<Vec4U32, u8>(to)[..bytes.len()].copy_from_slice(bytes);
}
