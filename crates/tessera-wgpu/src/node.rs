//! A whole node on wgpu in one call, as `System::cpu` is for the CPU backend.

use tessera_core::{DeviceId, MAX_DEVICES};
use tessera_runtime::{Device, Result, RuntimeError, System, SystemConfig};

use crate::device::WgpuDevice;
use crate::gpu::{AdapterChoice, SharedGpu};

/// A node of `cfg.devices` tessera devices, all on the adapter `choice` picks and on one wgpu
/// device ([`SharedGpu`]) so that they can all bind a remote object's buffer; each has its own
/// memories and page table, so one GPU (or lavapipe) stands in for several. Where no adapter
/// exists the error says so and how to install one; [`crate::adapters`] tells beforehand.
pub fn system(cfg: &SystemConfig, choice: &AdapterChoice) -> Result<System> {
    // Checked before any device is opened: opening one takes a while on some drivers.
    if cfg.devices == 0 || cfg.devices > MAX_DEVICES {
        return Err(RuntimeError::Config(format!(
            "device count must be between 1 and {MAX_DEVICES} (got {})",
            cfg.devices
        )));
    }
    let gpu = SharedGpu::open(choice).map_err(|e| e.on(DeviceId(0)))?;
    let mut devices: Vec<Box<dyn Device>> = Vec::with_capacity(cfg.devices);
    for i in 0..cfg.devices {
        let id = DeviceId::new(i)?;
        devices.push(Box::new(WgpuDevice::on(id, &gpu).map_err(|e| e.on(id))?));
    }
    System::with_devices(devices, cfg)
}
