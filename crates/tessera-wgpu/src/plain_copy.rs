//! `PlainCopies`: the same bytes moved with wgpu alone, no paging, as the yardstick for
//! `tessera bench page-moves --backend wgpu`.
//!
//! The runtime's home → device move on a wgpu device is a `queue.write_buffer` per page into
//! its slot (`WgpuDevice::write_slot`). A device → device move between tessera devices on one
//! wgpu device (`SharedGpu`, as the CLI opens a node) is a `copy_buffer_to_buffer` per page from
//! the owner's memory into the reader's, a batch's copies in one submission
//! (`WgpuDevice::copy_from_peers`); between devices on different wgpu devices it is still a
//! read-back from the owner followed by a `write_buffer` on the reader. This measures, on a
//! wgpu device of its own on the same adapter, what plain wgpu does with the same pages: the
//! `write_buffer` calls alone (queued: wgpu copies the bytes into its staging memory and runs
//! the upload at the next submission), the same followed by a submission and a wait (the
//! upload done), and a `copy_buffer_to_buffer` per page inside one device, submitted and
//! waited for: what a peer copy costs with no paging around it.

use std::time::Instant;

use crate::error::WgpuError;
use crate::gpu::{self, AdapterChoice, Health};

/// Two buffers of the same size on a wgpu device of their own.
pub struct PlainCopies {
    info: wgpu::AdapterInfo,
    device: wgpu::Device,
    queue: wgpu::Queue,
    health: Health,
    src: wgpu::Buffer,
    dst: wgpu::Buffer,
    bytes: u64,
}

/// Seconds of one round of plain moves of every page.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainTimes {
    /// `queue.write_buffer` of every page, queued only.
    pub write_queued: f64,
    /// The same, then a submission and a wait until the device has run it.
    pub write_done: f64,
    /// `copy_buffer_to_buffer` of every page in one encoder, submitted and waited for.
    pub copy_done: f64,
}

impl PlainCopies {
    /// Opens a device on the chosen adapter with two buffers of `bytes` each.
    pub fn new(choice: &AdapterChoice, bytes: u64) -> Result<Self, WgpuError> {
        let gpu::Opened {
            info,
            limits,
            device,
            queue,
            health,
            ..
        } = gpu::open(choice, "tessera plain copies", 0, wgpu::Features::empty())?;
        let usage = wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST;
        let max = limits.max_buffer_size;
        let src = gpu::buffer(&device, "plain copy source", bytes, usage, max)?;
        let dst = gpu::buffer(&device, "plain copy target", bytes, usage, max)?;
        Ok(PlainCopies {
            info,
            device,
            queue,
            health,
            src,
            dst,
            bytes,
        })
    }

    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// Moves `data` (as long as the buffers, a whole number of pages of `page_bytes`, itself a
    /// multiple of 4) page by page, each way.
    pub fn round(&self, data: &[u8], page_bytes: u64) -> Result<PlainTimes, WgpuError> {
        if data.len() as u64 != self.bytes
            || page_bytes == 0
            || !page_bytes.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT)
            || !self.bytes.is_multiple_of(page_bytes)
        {
            return Err(WgpuError::PlainCopies {
                bytes: data.len() as u64,
                page_bytes,
                buffer_bytes: self.bytes,
            });
        }
        self.health.check()?;
        let pb = page_bytes as usize;
        let mut t = PlainTimes::default();
        let start = Instant::now();
        for (i, page) in data.chunks_exact(pb).enumerate() {
            self.queue
                .write_buffer(&self.src, i as u64 * page_bytes, page);
        }
        t.write_queued = start.elapsed().as_secs_f64();
        self.queue.submit([]);
        self.health.wait(&self.device)?;
        t.write_done = start.elapsed().as_secs_f64();

        let start = Instant::now();
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("plain copies"),
            });
        for i in 0..self.bytes / page_bytes {
            let off = i * page_bytes;
            enc.copy_buffer_to_buffer(&self.src, off, &self.dst, off, page_bytes);
        }
        self.queue.submit([enc.finish()]);
        self.health.wait(&self.device)?;
        t.copy_done = start.elapsed().as_secs_f64();
        Ok(t)
    }
}
