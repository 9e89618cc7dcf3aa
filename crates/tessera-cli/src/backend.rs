//! Building a node on the chosen backend, and `tessera devices`.

use anyhow::{bail, Result};
use tessera_core::DeviceId;
use tessera_runtime::{Device, System, SystemConfig};
use tessera_wgpu::{AdapterChoice, WgpuDevice};

use crate::BackendKind;

/// `TESSERA_ADAPTER` picks the wgpu adapter by a part of its name; unset, wgpu's default.
pub fn adapter_choice() -> AdapterChoice {
    match std::env::var("TESSERA_ADAPTER") {
        Ok(name) if !name.is_empty() => AdapterChoice::Named(name),
        _ => AdapterChoice::Default,
    }
}

/// A node of `cfg.devices` devices on `kind`, and the name of the wgpu adapter they run on
/// (none on the CPU backend): reports and plot legends name it.
pub fn system(kind: BackendKind, cfg: &SystemConfig) -> Result<(System, Option<String>)> {
    match kind {
        BackendKind::Cpu => Ok((System::cpu(cfg)?, None)),
        BackendKind::Wgpu => {
            if cfg.devices == 0 {
                bail!("device count must be at least 1");
            }
            let choice = adapter_choice();
            let mut devices: Vec<Box<dyn Device>> = Vec::with_capacity(cfg.devices);
            let mut name = None;
            for i in 0..cfg.devices {
                let id = DeviceId::new(i)?;
                let d = WgpuDevice::new(id, &choice)?;
                name.get_or_insert_with(|| d.adapter_info().name.clone());
                devices.push(Box::new(d));
            }
            Ok((System::with_devices(devices, cfg)?, name))
        }
    }
}

/// Lists the adapters wgpu finds, and which one `--backend wgpu` would use.
pub fn devices() -> Result<()> {
    let all = tessera_wgpu::adapters();
    if all.is_empty() {
        println!("no GPU adapter found: `--backend wgpu` cannot run here (on Linux, install mesa-vulkan-drivers for lavapipe)");
        return Ok(());
    }
    for (i, a) in all.iter().enumerate() {
        println!(
            "{i}: {} ({:?}, {:?}, driver {} {})",
            a.name, a.backend, a.device_type, a.driver, a.driver_info
        );
    }
    match WgpuDevice::new(DeviceId(0), &adapter_choice()) {
        Ok(d) => println!(
            "--backend wgpu uses: {} (each tessera device is its own wgpu device on it; set TESSERA_ADAPTER to choose); timestamp queries: {}",
            d.adapter_info().name,
            if d.has_timestamps() {
                "yes (reports give device time per stage)"
            } else {
                "no (reports give wall time only)"
            }
        ),
        Err(e) => println!("--backend wgpu cannot open a device: {e}"),
    }
    Ok(())
}
