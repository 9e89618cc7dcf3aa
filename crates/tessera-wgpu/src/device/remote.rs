//! Remote objects on wgpu: their words in one buffer every device of the node binds.

use super::*;

/// A remote object's pages on the GPU: one buffer on the shared wgpu device, bound by every
/// tessera device of the node that accesses the object. Host-visible where the adapter allows
/// storage buffers to be mapped (`MAPPABLE_PRIMARY_BUFFERS`), as GPU-SM's pages in host memory.
pub(super) struct RemoteBuffer {
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
    pub(super) fn bind_remote(&mut self, l: &Launch) -> Result<()> {
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
    pub(super) fn make_remote(&self, w: &[AtomicU32]) -> Result<Arc<dyn RemoteBacking>> {
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
}
