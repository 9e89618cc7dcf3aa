//! Buffers a device keeps from launch to launch, so that a launch allocates nothing in the
//! steady state: the per-launch lists grow to the largest launch seen, and the read-backs of
//! every launch go through one staging buffer that stays allocated.

use crate::error::WgpuError;
use crate::gpu;

/// A buffer that grows (to a power of two) and never shrinks.
pub(crate) struct Grow {
    pub buf: wgpu::Buffer,
    pub bytes: u64,
    label: &'static str,
    usage: wgpu::BufferUsages,
}

impl Grow {
    pub fn new(device: &wgpu::Device, label: &'static str, usage: wgpu::BufferUsages) -> Self {
        Grow {
            buf: create(device, label, 16, usage),
            bytes: 16,
            label,
            usage,
        }
    }

    /// Makes the buffer at least `bytes` long; returns the old buffer when it had to grow (its
    /// contents are not carried over: callers that need them copy them).
    pub fn ensure(
        &mut self,
        device: &wgpu::Device,
        bytes: u64,
        max: u64,
    ) -> Result<Option<wgpu::Buffer>, WgpuError> {
        if bytes <= self.bytes {
            return Ok(None);
        }
        // Beyond `max` the size stays `bytes`, which `gpu::buffer` refuses with a clear error.
        let size = bytes.next_power_of_two().min(max).max(bytes);
        let buf = gpu::buffer(device, self.label, size, self.usage, max)?;
        self.bytes = size;
        Ok(Some(std::mem::replace(&mut self.buf, buf)))
    }
}

fn create(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: size.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT),
        usage,
        mapped_at_creation: false,
    })
}

pub(crate) const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

/// Timestamp queries around the two compute passes of a submission (kernel or merge, then
/// compaction): four timestamps, resolved into a buffer that is copied with the read-back.
pub(crate) struct Timestamps {
    pub set: wgpu::QuerySet,
    pub resolve: wgpu::Buffer,
    /// Nanoseconds per timestamp tick.
    pub period_ns: f64,
}

pub(crate) const TIMESTAMPS: u32 = 4;

impl Timestamps {
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Self {
        Timestamps {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("tessera timestamps"),
                ty: wgpu::QueryType::Timestamp,
                count: TIMESTAMPS,
            }),
            resolve: create(
                device,
                "timestamp resolve",
                TIMESTAMPS as u64 * 8,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            period_ns: queue.get_timestamp_period() as f64,
        }
    }

    /// The writes of compute pass `i` (0 or 1) of a submission.
    pub fn writes(&self, i: u32) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.set,
            beginning_of_pass_write_index: Some(2 * i),
            end_of_pass_write_index: Some(2 * i + 1),
        }
    }

    /// Seconds of each of the two passes from the resolved ticks; `None` where the device
    /// wrote no usable pair (a counter that wrapped, or timestamps the driver ignores).
    pub fn seconds(&self, ticks: &[u64]) -> Option<[f64; 2]> {
        let pass = |i: usize| {
            let (a, b) = (*ticks.get(2 * i)?, *ticks.get(2 * i + 1)?);
            (b >= a && a != 0).then(|| (b - a) as f64 * self.period_ns * 1e-9)
        };
        Some([pass(0)?, pass(1)?])
    }
}
