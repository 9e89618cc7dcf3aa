//! What both wgpu devices of this crate (the paged `WgpuDevice` and `UnpagedGpu`) do the same
//! way: watch for errors wgpu reports outside any call, compile a kernel, read a buffer back.

use std::borrow::Cow;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::error::WgpuError;

/// What wgpu reports outside any call: the first uncaptured error and why the device was lost.
/// Clones watch the same device (the tessera devices sharing one wgpu device, [`SharedGpu`]).
#[derive(Clone)]
pub(crate) struct Health {
    uncaptured: Arc<Mutex<Option<String>>>,
    lost: Arc<Mutex<Option<String>>>,
}

impl Health {
    pub fn watch(device: &wgpu::Device) -> Self {
        let h = Health {
            uncaptured: Arc::default(),
            lost: Arc::default(),
        };
        let u = h.uncaptured.clone();
        // Without a handler wgpu panics on an error outside an error scope; keep it instead
        // and report it from the next call.
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut g) = u.lock() {
                g.get_or_insert_with(|| e.to_string());
            }
        }));
        let l = h.lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut g) = l.lock() {
                *g = Some(format!("{reason:?} {message}").trim_end().to_string());
            }
        });
        h
    }

    /// Fails with the device-lost reason or an error wgpu reported out of scope.
    pub fn check(&self) -> Result<(), WgpuError> {
        if let Some(m) = self.lost.lock().ok().and_then(|g| g.clone()) {
            return Err(WgpuError::DeviceLost(m));
        }
        match self.uncaptured.lock().ok().and_then(|mut g| g.take()) {
            Some(m) => Err(WgpuError::Uncaptured(m)),
            None => Ok(()),
        }
    }

    /// Waits until the device has run everything submitted.
    pub fn wait(&self, device: &wgpu::Device) -> Result<(), WgpuError> {
        device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| WgpuError::DeviceLost(e.to_string()))?;
        self.check()
    }

    /// Maps the first `bytes` of a staging buffer the queue has been told to fill, and copies
    /// them out.
    pub fn map_read(
        &self,
        device: &wgpu::Device,
        staging: &wgpu::Buffer,
        bytes: u64,
    ) -> Result<Vec<u8>, WgpuError> {
        self.map_read_with(device, staging, bytes, <[u8]>::to_vec)
    }

    /// As [`Health::map_read`], handing the mapped bytes to `take` instead of copying them
    /// into one vector, so that a caller splitting them copies each byte once.
    pub fn map_read_with<R>(
        &self,
        device: &wgpu::Device,
        staging: &wgpu::Buffer,
        bytes: u64,
        take: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, WgpuError> {
        let mapping = Mapping::start(staging, bytes);
        self.finish_map(device, staging, bytes, &mapping, take)
    }

    /// [`Health::finish_map`] of a mapping started a while ago: a poll that does not block
    /// runs its callback if the GPU is done, and only if it is not is `waited` called (a wait
    /// to count) before the blocking one.
    pub fn finish_started<R>(
        &self,
        device: &wgpu::Device,
        staging: &wgpu::Buffer,
        bytes: u64,
        mapping: &Mapping,
        waited: impl FnOnce(),
        take: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, WgpuError> {
        let _ = device.poll(wgpu::PollType::Poll);
        if !mapping.done.0.lock().is_ok_and(|g| g.is_some()) {
            waited();
        }
        self.finish_map(device, staging, bytes, mapping, take)
    }

    /// Waits for `mapping` of `staging`'s first `bytes`, hands them to `take`, and unmaps.
    pub fn finish_map<R>(
        &self,
        device: &wgpu::Device,
        staging: &wgpu::Buffer,
        bytes: u64,
        mapping: &Mapping,
        take: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, WgpuError> {
        // On a shared wgpu device another thread's poll may be the one running the callback,
        // and this poll can return before that thread has: wait for it on the condition
        // variable, which wakes as soon as it has run (a fixed sleep cost every such race a
        // whole sleep), then poll again should it still be missing.
        let (slot, ready) = &*mapping.done;
        // Already mapped (a read started earlier and found done): no wait for the queue.
        let mut result = slot.lock().ok().and_then(|mut g| g.take());
        for _ in 0..MAP_TRIES {
            if result.is_some() {
                break;
            }
            self.wait(device)?;
            result = slot.lock().ok().and_then(|g| {
                ready
                    .wait_timeout_while(g, MAP_RACE, |r| r.is_none())
                    .ok()
                    .and_then(|(mut g, _)| g.take())
            });
        }
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                // A lost device is said as such, whatever its mapping's callback was told
                // (a poll is what learns of the loss).
                self.wait(device)?;
                return Err(WgpuError::ReadBack(e.to_string()));
            }
            None => return Err(WgpuError::ReadBackNeverCompleted),
        }
        let out = staging
            .get_mapped_range(..bytes)
            .map(|v| take(&v))
            .map_err(|e| WgpuError::ReadBack(e.to_string()));
        staging.unmap();
        out
    }
}

/// A `map_async` of a staging buffer, started: its callback's outcome, once it has run.
pub(crate) struct Mapping {
    #[allow(clippy::type_complexity)]
    done: Arc<(Mutex<Option<Result<(), wgpu::BufferAsyncError>>>, Condvar)>,
}

impl Mapping {
    /// Asks wgpu to map `staging`'s first `bytes` for reading once the queue has filled them.
    pub fn start(staging: &wgpu::Buffer, bytes: u64) -> Self {
        let done = Arc::new((Mutex::new(None), Condvar::new()));
        let d = done.clone();
        staging.map_async(wgpu::MapMode::Read, ..bytes, move |r| {
            let (slot, ready) = &*d;
            if let Ok(mut g) = slot.lock() {
                *g = Some(r);
                ready.notify_all();
            }
        });
        Mapping { done }
    }
}

/// `bytes` cut into consecutive pieces of `lens`, each its own vector.
pub(crate) fn split(bytes: &[u8], lens: impl IntoIterator<Item = u64>) -> Vec<Vec<u8>> {
    let mut at = 0usize;
    lens.into_iter()
        .map(|len| {
            let piece = bytes[at..at + len as usize].to_vec();
            at += len as usize;
            piece
        })
        .collect()
}

/// Polls before a read-back is declared lost (each after waiting for the queue to drain).
const MAP_TRIES: u32 = 1000;
/// How long, after a poll, a read-back waits for another thread to run its callback.
const MAP_RACE: Duration = Duration::from_micros(200);

/// Whether shader modules keep wgpu's bounds checks: yes, unless `TESSERA_WGPU_BOUNDS_CHECKS=off`
/// (docs/WGPU.md, "Bounds checks").
pub fn bounds_checks() -> bool {
    // A value other than on or off was refused when the device opened
    // (`WgpuDevice::on`), so one that appears since keeps the checks.
    crate::switches::switch(crate::switches::BOUNDS_CHECKS) != Ok(Some(false))
}

/// Compiles `code` and builds the compute pipeline of its `entry` point; a WGSL or validation
/// error is [`WgpuError::Shader`] naming the kernel. `code` ends with the kernel's own WGSL,
/// `kernel`: a place the error names there is given in that WGSL's lines too.
pub(crate) fn compile(
    device: &wgpu::Device,
    layout: &wgpu::PipelineLayout,
    name: &str,
    code: String,
    kernel: &str,
    entry: &str,
) -> Result<wgpu::ComputePipeline, WgpuError> {
    let first = first_line_of(&code, kernel);
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let desc = wgpu::ShaderModuleDescriptor {
        label: Some(name),
        source: wgpu::ShaderSource::Wgsl(Cow::Owned(code)),
    };
    let module = if bounds_checks() {
        device.create_shader_module(desc)
    } else {
        let mut checks = wgpu::ShaderRuntimeChecks::checked();
        checks.bounds_checks = false;
        // SAFETY: wgpu asks that the shader never index a buffer out of its binding. The
        // prelude checks every object access against the object's extent (`in_range`) and
        // reaches memory only through page-table descriptors the host wrote, within their
        // memory; a kernel's own WGSL (its private arrays) is not checked by tessera. So this
        // is opt-in, for measuring what wgpu's checks cost (`TESSERA_WGPU_BOUNDS_CHECKS=off`),
        // and the person who sets it vouches for the kernels. An out-of-range access then
        // touches whatever else this process's GPU address space holds, or faults the device;
        // no Rust value on the host is reached through it.
        unsafe { device.create_shader_module_trusted(desc, checks) }
    };
    let p = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(name),
        layout: Some(layout),
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    });
    match pollster::block_on(scope.pop()) {
        Some(e) => Err(WgpuError::Shader {
            kernel: name.into(),
            message: in_kernel_lines(&e.to_string(), first),
        }),
        None => Ok(p),
    }
}

/// Which adapter the devices run on.
#[derive(Clone, Debug, Default)]
pub enum AdapterChoice {
    /// wgpu's default choice (a discrete GPU first; lavapipe where nothing else is found).
    #[default]
    Default,
    /// The first adapter whose name contains this (case-insensitive), e.g. "llvmpipe".
    Named(String),
}

impl AdapterChoice {
    /// The adapter `TESSERA_ADAPTER` names (a part of its name, case-insensitive), or wgpu's
    /// default where it is unset or empty: the choice the `tessera` command makes, for a
    /// program of one's own to honour the same variable.
    pub fn from_env() -> Self {
        Self::from_setting(std::env::var("TESSERA_ADAPTER").ok().as_deref())
    }

    fn from_setting(value: Option<&str>) -> Self {
        match value {
            Some(name) if !name.trim().is_empty() => AdapterChoice::Named(name.trim().to_string()),
            _ => AdapterChoice::Default,
        }
    }
}

/// Mesa's Vulkan drivers (lavapipe among them) print "error: XDG_RUNTIME_DIR is invalid or not
/// set in the environment" on every start where it is unset, as in containers and CI jobs,
/// though nothing is wrong and the run succeeds. Where it is unset or not a folder, this
/// process gets a private one (mode 0700) under the temporary folder; nothing is written
/// there. It changes the process's environment, so call it first in `main`, before any thread
/// starts (the `tessera` command and the examples do).
pub fn quiet_mesa() {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_dir()) {
            return;
        }
        let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
        let dir = std::env::temp_dir().join(format!("tessera-runtime-{user}"));
        if std::fs::create_dir_all(&dir).is_ok()
            && std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).is_ok()
        {
            std::env::set_var("XDG_RUNTIME_DIR", &dir);
        }
    }
}

/// The adapters wgpu finds (for `tessera devices`).
pub fn adapters() -> Vec<wgpu::AdapterInfo> {
    pollster::block_on(instance().enumerate_adapters(wgpu::Backends::all()))
        .into_iter()
        .map(|a| a.get_info())
        .collect()
}

/// The one wgpu instance of the process, never dropped.
///
/// Seen on an NVIDIA H100 (Vulkan, driver 580.159.04): when the last instance is destroyed the
/// Vulkan loader unloads the driver, but the driver has registered thread-exit destructors in
/// every thread that called it; a thread that exits afterwards (a test's thread, a device
/// worker) jumps into the unmapped library and dies with SIGSEGV. Keeping one instance alive for
/// the whole process keeps the driver loaded. It also creates the instance once, which NVIDIA's
/// driver needs: instances created on several threads at once race inside it (wgpu's issue #5930).
fn instance() -> &'static wgpu::Instance {
    static INSTANCE: std::sync::OnceLock<wgpu::Instance> = std::sync::OnceLock::new();
    INSTANCE
        .get_or_init(|| wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle()))
}

fn request_adapter(
    instance: &wgpu::Instance,
    choice: &AdapterChoice,
) -> Result<wgpu::Adapter, WgpuError> {
    match choice {
        AdapterChoice::Default => {
            pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .map_err(|e| WgpuError::NoAdapter(e.to_string()))
        }
        AdapterChoice::Named(name) => {
            let want = name.to_lowercase();
            let all = pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
            let names: Vec<String> = all.iter().map(|a| a.get_info().name).collect();
            all.into_iter()
                .find(|a| a.get_info().name.to_lowercase().contains(&want))
                .ok_or_else(|| match names.is_empty() {
                    true => WgpuError::NoAdapter(format!("none is named like {name:?}")),
                    false => WgpuError::NoAdapterNamed {
                        wanted: name.clone(),
                        found: names.join(", "),
                    },
                })
        }
    }
}

/// A wgpu device of its own, on the chosen adapter, with the adapter's own limits (the
/// defaults cap storage buffers per stage at 8 and a storage binding at 128 MiB, below what
/// the preludes bind and what memories need).
pub(crate) struct Opened {
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub health: Health,
    /// Unique per opened device in this process: the peer group of the tessera devices on it
    /// (`Device::peer_group`), which can then copy pages between their memories on the device.
    pub token: u64,
    /// The queued launches' gate, one word every tessera device on this wgpu device binds
    /// (`abi::GATE_BINDING`): a queued launch of any of them that faults closes it at its
    /// place in the queue, and what any of them queued after it skips (docs/WGPU.md, "Queued
    /// launches"). One queue, one order, one gate.
    pub gate: wgpu::Buffer,
    /// The next queued launch's place in that queue (`LaunchInfo::seq`; 1 when settled).
    /// Held while a queued launch is encoded and submitted, so places follow the queue's
    /// order across the tessera devices' threads.
    pub seq: std::sync::Mutex<u32>,
}

/// Hands out `Opened::token`s.
static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One wgpu device (and queue) that several tessera devices share: what lets them all bind one
/// buffer, the remote pool (docs/WGPU.md, "Remote pages on wgpu"). Each tessera device
/// on it still has its own physical memories, page table and scratch buffers; a page moves
/// between two of them as one `copy_buffer_to_buffer` from one's memory into the other's, on
/// the device (docs/PROTOCOL.md, "Peer copies"). Cheap to clone.
#[derive(Clone)]
pub struct SharedGpu(pub(crate) std::sync::Arc<Opened>);

impl SharedGpu {
    /// Opens a wgpu device on the chosen adapter for [`crate::WgpuDevice::on`].
    pub fn open(choice: &AdapterChoice) -> Result<Self, WgpuError> {
        Ok(SharedGpu(std::sync::Arc::new(open(
            choice,
            "tessera",
            crate::abi::STORAGE_BINDINGS,
            wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::MAPPABLE_PRIMARY_BUFFERS,
        )?)))
    }

    /// The adapter it runs on.
    /// Whether the adapter is a CPU (lavapipe): shaders compile slowly there, and the tile
    /// path is off by default.
    pub fn is_cpu(&self) -> bool {
        self.adapter_info().device_type == wgpu::DeviceType::Cpu
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.0.info
    }

    /// Whether remote pages live in host-visible memory (wgpu's `MAPPABLE_PRIMARY_BUFFERS`);
    /// without it they live in the device's own memory, still one buffer every device binds.
    pub fn host_visible_remote(&self) -> bool {
        self.0
            .device
            .features()
            .contains(wgpu::Features::MAPPABLE_PRIMARY_BUFFERS)
    }

    /// Whether this adapter's shader compiler fuses `a * b + c` into one fused multiply-add
    /// (one rounding instead of two), found by running it on inputs where the two differ.
    ///
    /// SPIR-V lets a driver contract unless an operation is decorated `NoContraction`, which
    /// naga does not emit and WGSL cannot ask for. lavapipe does not fuse; NVIDIA's driver does
    /// (seen on an H100). Where it fuses, kernels cannot equal the CPU twins bit for bit; they
    /// still equal each other on any device count and split, since every device runs the same
    /// compiled code (docs/WGPU.md, "Exactness").
    pub fn fuses_multiply_add(&self) -> Result<bool, WgpuError> {
        const PROBE: &str = "@group(0) @binding(0) var<storage, read_write> v: array<f32, 4>;\n\
            @compute @workgroup_size(1) fn main() { v[3] = v[0] * v[1] + v[2]; }";
        let o = &self.0;
        // a = b = 1 + 2^-12: a·b = 1 + 2^-11 + 2^-24 rounds (a tie, to even) to 1 + 2^-11, so
        // with c = -(1 + 2^-11) two roundings give 0 and one gives 2^-24. The inputs come from
        // a buffer, so no compiler can fold them.
        let a = f32::from_bits(0x3F80_0800);
        let c = -f32::from_bits(0x3F80_1000);
        let input: Vec<u8> = [a, a, c, 1.0]
            .iter()
            .flat_map(|f| f.to_le_bytes())
            .collect();
        let buf = buffer(
            &o.device,
            "multiply-add probe",
            16,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
            max_storage_bytes(&o.limits),
        )?;
        o.queue.write_buffer(&buf, 0, &input);
        let scope = o.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = o.device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("multiply-add probe"),
            source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(PROBE)),
        });
        let pipeline = o
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("multiply-add probe"),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(WgpuError::Shader {
                kernel: "multiply-add probe".into(),
                message: e.to_string(),
            });
        }
        let group = o.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: buf.as_entire_binding(),
            }],
        });
        let mut enc = o
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        o.queue.submit([enc.finish()]);
        let out = read_back(&o.device, &o.queue, &o.health, &[(&buf, 12, 4)])?;
        let r = f32::from_le_bytes(out[0][..4].try_into().unwrap_or([0; 4]));
        Ok(r != 0.0)
    }
}

/// Opens a device needing `storage_buffers` storage bindings per stage, with those of
/// `features` the adapter has.
pub(crate) fn open(
    choice: &AdapterChoice,
    label: &str,
    storage_buffers: u32,
    features: wgpu::Features,
) -> Result<Opened, WgpuError> {
    let adapter = request_adapter(instance(), choice)?;
    let info = adapter.get_info();
    let limits = adapter.limits();
    if limits.max_storage_buffers_per_shader_stage < storage_buffers {
        return Err(WgpuError::RequestDevice {
            adapter: info.name.clone(),
            message: format!(
                "it binds {} storage buffers per shader stage; tessera needs {storage_buffers}",
                limits.max_storage_buffers_per_shader_stage
            ),
        });
    }
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: adapter.features() & features,
        required_limits: limits.clone(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }))
    .map_err(|e| WgpuError::RequestDevice {
        adapter: info.name.clone(),
        message: e.to_string(),
    })?;
    let health = Health::watch(&device);
    let gate = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("queue gate"),
        size: 4,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    // Open: lands before the first submission.
    queue.write_buffer(&gate, 0, &crate::abi::NONE.to_le_bytes());
    Ok(Opened {
        info,
        limits,
        device,
        queue,
        health,
        token: TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        gate,
        seq: std::sync::Mutex::new(1),
    })
}

/// The most bytes one storage buffer can hold and still be bound whole on this adapter.
pub(crate) fn max_storage_bytes(limits: &wgpu::Limits) -> u64 {
    limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
}

/// A buffer of `bytes` (at least 16) inside an out-of-memory error scope: one larger than
/// `max` or one the device cannot allocate is [`WgpuError::OutOfMemory`] naming `what`.
pub(crate) fn buffer(
    device: &wgpu::Device,
    what: &str,
    bytes: u64,
    usage: wgpu::BufferUsages,
    max: u64,
) -> Result<wgpu::Buffer, WgpuError> {
    if bytes > max {
        return Err(WgpuError::OutOfMemory(format!(
            "{what} of {bytes} bytes; one storage binding of this adapter holds at most {max}"
        )));
    }
    let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let buf = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(what),
        size: bytes.max(16).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT),
        usage,
        mapped_at_creation: false,
    });
    match pollster::block_on(scope.pop()) {
        Some(e) => Err(WgpuError::OutOfMemory(format!(
            "{what} of {bytes} bytes: {e}"
        ))),
        None => Ok(buf),
    }
}

/// Copies `ranges` (buffer, offset, bytes) into one staging buffer and reads them back.
pub(crate) fn read_back(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    health: &Health,
    ranges: &[(&wgpu::Buffer, u64, u64)],
) -> Result<Vec<Vec<u8>>, WgpuError> {
    let total: u64 = ranges.iter().map(|r| r.2).sum();
    if total == 0 {
        return Ok(ranges.iter().map(|_| Vec::new()).collect());
    }
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("staging"),
        size: total,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    read_back_through(device, queue, health, ranges, &staging)
}

/// [`read_back`] through `staging`, a `MAP_READ | COPY_DST` buffer of at least the ranges'
/// bytes that is not mapped: a device that reads back often keeps one, where a new buffer
/// per read costs an allocation and, on first touch, the operating system's zeroing of every
/// page of it. The mapped bytes are copied once, straight into each range's vector.
pub(crate) fn read_back_through(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    health: &Health,
    ranges: &[(&wgpu::Buffer, u64, u64)],
    staging: &wgpu::Buffer,
) -> Result<Vec<Vec<u8>>, WgpuError> {
    let total: u64 = ranges.iter().map(|r| r.2).sum();
    if total == 0 {
        return Ok(ranges.iter().map(|_| Vec::new()).collect());
    }
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    let mut at = 0;
    for &(buf, off, len) in ranges {
        if len > 0 {
            enc.copy_buffer_to_buffer(buf, off, staging, at, len);
        }
        at += len;
    }
    queue.submit([enc.finish()]);
    health.map_read_with(device, staging, total, |bytes| {
        split(bytes, ranges.iter().map(|r| r.2))
    })
}

#[cfg(test)]
mod adapter_choice_tests {
    use super::AdapterChoice;

    #[test]
    fn an_unset_or_blank_setting_is_wgpus_default_and_a_name_is_trimmed() {
        assert!(matches!(
            AdapterChoice::from_setting(None),
            AdapterChoice::Default
        ));
        assert!(matches!(
            AdapterChoice::from_setting(Some("  ")),
            AdapterChoice::Default
        ));
        match AdapterChoice::from_setting(Some(" llvmpipe ")) {
            AdapterChoice::Named(n) => assert_eq!(n, "llvmpipe"),
            other => panic!("expected a name, got {other:?}"),
        }
    }
}

/// The line of `code` where `kernel`, its tail, begins; `None` where `code` does not end
/// with it.
fn first_line_of(code: &str, kernel: &str) -> Option<usize> {
    let head = code.strip_suffix(kernel)?;
    Some(head.matches('\n').count() + 1)
}

/// `message` with each place `wgsl:LINE:COLUMN` at or past `first` followed by where it is in
/// the kernel's own WGSL: the module compiled is the prelude's thousand lines and then the
/// kernel's, and a line number of the whole would send its author looking in the wrong place.
fn in_kernel_lines(message: &str, first: Option<usize>) -> String {
    let Some(first) = first else {
        return message.to_string();
    };
    let mut out = String::with_capacity(message.len() + 64);
    let mut rest = message;
    while let Some(at) = rest.find("wgsl:") {
        let after = &rest[at + 5..];
        let line_len = after.bytes().take_while(u8::is_ascii_digit).count();
        let column = after[line_len..]
            .strip_prefix(':')
            .map(|c| &c[..c.bytes().take_while(u8::is_ascii_digit).count()]);
        let end = at + 5 + line_len + column.map_or(0, |c| 1 + c.len());
        out.push_str(&rest[..end]);
        if let (Ok(line), Some(column)) = (after[..line_len].parse::<usize>(), column) {
            if line >= first && !column.is_empty() {
                out.push_str(&format!(
                    " (line {}, column {column} of the kernel's WGSL)",
                    line - first + 1
                ));
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_in_the_kernels_wgsl_is_given_in_its_own_lines() {
        let kernel = "fn kernel_main() {\n  oops();\n}\n";
        let code = format!("prelude line 1\nprelude line 2\n{kernel}");
        let first = first_line_of(&code, kernel);
        assert_eq!(first, Some(3));
        let message = "error: no definition in scope for identifier: `oops`\n  ┌─ wgsl:4:3\n  \n4 │   oops();";
        assert_eq!(
            in_kernel_lines(message, first),
            "error: no definition in scope for identifier: `oops`\n  ┌─ wgsl:4:3 (line 2, column 3 of the kernel's WGSL)\n  \n4 │   oops();"
        );
        // A place in the prelude, or a message without a place, is left as it was.
        assert_eq!(in_kernel_lines("at wgsl:2:1", first), "at wgsl:2:1");
        assert_eq!(in_kernel_lines("wgsl: nothing", first), "wgsl: nothing");
        assert_eq!(first_line_of("other", kernel), None);
    }
}
