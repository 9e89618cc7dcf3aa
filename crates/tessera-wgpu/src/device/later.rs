//! Slots read back in the background (`Device::read_slots_later`): the copy into a staging
//! buffer is submitted and its mapping asked for at once, and the host waits only when the
//! bytes are taken, which the memory manager does when home's copy of an evicted page is
//! needed. By then the GPU has usually long finished, and taking them costs no wait.

use std::sync::{Arc, Mutex};

use tessera_core::{DeviceId, SlotAddr};
use tessera_runtime::{BackendCounters, PendingRead, Result};

use super::WgpuDevice;
use crate::gpu::{self, Health, Mapping};

/// Staging buffers kept for reuse once their bytes were taken. A few suffice: reads are
/// taken long before many more are started, and an evicting run starts one per batch.
const SPARE_BUFFERS: usize = 4;

/// Spare staging buffers, shared with the reads that hand them back.
pub(super) type Spares = Arc<Mutex<Vec<wgpu::Buffer>>>;

struct LaterRead {
    device: wgpu::Device,
    health: Health,
    staging: wgpu::Buffer,
    mapping: Mapping,
    lens: Vec<u64>,
    total: u64,
    counters: Arc<BackendCounters>,
    spares: Spares,
    id: DeviceId,
}

impl PendingRead for LaterRead {
    fn wait(self: Box<Self>) -> Result<Vec<Vec<u8>>> {
        let r = *self;
        let out = r
            .health
            .finish_started(
                &r.device,
                &r.staging,
                r.total,
                &r.mapping,
                || r.counters.waited(),
                |bytes| gpu::split(bytes, r.lens.iter().copied()),
            )
            .map_err(|e| e.on(r.id))?;
        if let Ok(mut s) = r.spares.lock() {
            if s.len() < SPARE_BUFFERS {
                s.push(r.staging);
            }
        }
        Ok(out)
    }
}

impl WgpuDevice {
    /// Copies the slots into a staging buffer (a spare one big enough, else a new one),
    /// submits, and asks for the mapping without waiting.
    pub(super) fn read_later(&mut self, at: &[SlotAddr]) -> Result<Box<dyn PendingRead>> {
        let mut ranges = Vec::with_capacity(at.len());
        for &a in at {
            let (off, len) = self.slot_range(a)?;
            ranges.push((a.memory as usize, off, len));
        }
        let total: u64 = ranges.iter().map(|r| r.2).sum();
        let spare = self.later_spares.lock().ok().and_then(|mut s| {
            let i = s.iter().position(|b| b.size() >= total)?;
            Some(s.swap_remove(i))
        });
        let staging = match spare {
            Some(b) => b,
            None => gpu::buffer(
                &self.device,
                "write-back",
                total,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                self.limits.max_buffer_size,
            )
            .map_err(|e| self.err(e))?,
        };
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let mut to = 0;
        for &(m, off, len) in &ranges {
            enc.copy_buffer_to_buffer(&self.memories[m].buffer, off, &staging, to, len);
            to += len;
        }
        self.submit(enc);
        self.counters.read_back(total);
        let mapping = Mapping::start(&staging, total);
        Ok(Box::new(LaterRead {
            device: self.device.clone(),
            health: self.health.clone(),
            staging,
            mapping,
            lens: ranges.iter().map(|r| r.2).collect(),
            total,
            counters: self.counters.clone(),
            spares: self.later_spares.clone(),
            id: self.id,
        }))
    }
}
