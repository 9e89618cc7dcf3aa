//! A whole node on wgpu in one call, as `System::cpu` is for the CPU backend, alone or as
//! one node of a cluster.

use std::ops::Range;
use std::sync::Arc;

use tessera_core::{CoreError, DeviceId, MAX_DEVICES};
use tessera_runtime::cluster::Link;
use tessera_runtime::{Device, Result, RuntimeError, System, SystemConfig};

use crate::device::WgpuDevice;
use crate::error::WgpuError;
use crate::gpu::{AdapterChoice, SharedGpu};

/// Why devices or a node could not be made on wgpu: each error as its layer words it.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error(transparent)]
    Wgpu(#[from] WgpuError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// A node of `cfg.devices` tessera devices, all on the adapter `choice` picks and on one wgpu
/// device ([`SharedGpu`]) so that they can all bind a remote object's buffer; each has its own
/// memories and page table, so one GPU (or lavapipe) stands in for several. Where no adapter
/// exists the error says so and how to install one; [`crate::adapters`] tells beforehand.
pub fn system(cfg: &SystemConfig, choice: &AdapterChoice) -> Result<System> {
    // Checked before any device is opened: opening one takes a while on some drivers.
    if cfg.devices == 0 || cfg.devices > MAX_DEVICES {
        return Err(RuntimeError::DeviceCount {
            got: cfg.devices,
            max: MAX_DEVICES,
        });
    }
    let gpu = SharedGpu::open(choice).map_err(|e| e.on(DeviceId(0)))?;
    let mut devices: Vec<Box<dyn Device>> = Vec::with_capacity(cfg.devices);
    for i in 0..cfg.devices {
        let id = DeviceId::new(i)?;
        devices.push(Box::new(WgpuDevice::on(id, &gpu).map_err(|e| e.on(id))?));
    }
    System::with_devices(devices, cfg)
}

/// The tessera devices numbered `ids`, all on `gpu`, each with its own memories and page
/// table.
pub fn devices_on(
    gpu: &SharedGpu,
    ids: Range<usize>,
) -> std::result::Result<Vec<Box<dyn Device>>, NodeError> {
    ids.map(|i| Ok(Box::new(WgpuDevice::on(DeviceId::new(i)?, gpu)?) as Box<dyn Device>))
        .collect()
}

/// Node `link.rank()` of a cluster on wgpu: its `link.devices_per_node()` devices, numbered
/// after the nodes before it, on one wgpu device of the adapter `choice` picks (each node
/// opens its own GPU).
pub fn system_on_cluster(
    cfg: &SystemConfig,
    choice: &AdapterChoice,
    link: Arc<Link>,
) -> std::result::Result<System, NodeError> {
    let gpu = SharedGpu::open(choice)?;
    let k = link.devices_per_node();
    let first = link.rank() * k;
    let devices = devices_on(&gpu, first..first + k)?;
    Ok(System::on_cluster(devices, cfg, link)?)
}
