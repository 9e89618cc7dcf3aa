//! Building a node on the chosen backend, and `tessera devices`.

use anyhow::{bail, Result};
use tessera_core::DeviceId;
use tessera_runtime::{System, SystemConfig};
use tessera_wgpu::{AdapterChoice, SharedGpu, WgpuDevice};

use crate::BackendKind;

/// A node of `cfg.devices` devices on `kind`, and the name of the wgpu adapter they run on
/// (none on the CPU backend): reports and plot legends name it.
pub fn system(kind: BackendKind, cfg: &SystemConfig) -> Result<(System, Option<String>)> {
    match kind {
        BackendKind::Cpu => Ok((System::cpu(cfg)?, None)),
        BackendKind::Wgpu => {
            if cfg.devices == 0 {
                bail!("device count must be at least 1");
            }
            // One wgpu device for the node, so that remote objects' buffers bind on every
            // tessera device (docs/WGPU.md, "Remote pages on wgpu").
            let gpu = SharedGpu::open(&AdapterChoice::from_env())?;
            warn_cpu_adapter(&gpu);
            let devices = tessera_wgpu::devices_on(&gpu, 0..cfg.devices)?;
            let name = Some(gpu.adapter_info().name.clone());
            Ok((System::with_devices(devices, cfg)?, name))
        }
    }
}

/// On a CPU adapter (lavapipe) a kernel's shader compiles on its first launch and can take
/// minutes (the ray tracer's took 85 s on 2 cores) with nothing else to show: say so first,
/// once per process, on stderr so that stdout stays the run's own.
fn warn_cpu_adapter(gpu: &SharedGpu) {
    static SAID: std::sync::Once = std::sync::Once::new();
    if gpu.is_cpu() {
        SAID.call_once(|| {
            eprintln!(
                "compiling kernels for {} (a CPU adapter) on their first launch: this can take minutes",
                gpu.adapter_info().name
            )
        });
    }
}

/// Lists the adapters wgpu finds, and which one `--backend wgpu` would use.
pub fn devices() -> Result<()> {
    let all = tessera_wgpu::adapters();
    // Without an adapter the command fails (exit 1), so that a script can ask it whether
    // `--backend wgpu` can run before it runs anything.
    if all.is_empty() {
        anyhow::bail!("no GPU adapter found: `--backend wgpu` cannot run here (on Linux, install mesa-vulkan-drivers for lavapipe)");
    }
    for (i, a) in all.iter().enumerate() {
        outln!(
            "{i}: {} ({:?}, {:?}, driver {} {})",
            a.name,
            a.backend,
            a.device_type,
            a.driver,
            a.driver_info
        );
    }
    match WgpuDevice::new(DeviceId(0), &AdapterChoice::from_env()) {
        Ok(d) => outln!(
            "--backend wgpu uses: {} (the tessera devices of a node share one wgpu device on it, each with its own memories and page table; set TESSERA_ADAPTER to choose); timestamp queries: {}",
            d.adapter_info().name,
            if d.has_timestamps() {
                "yes (reports give device time per stage)"
            } else {
                "no (reports give wall time only)"
            }
        ),
        Err(e) => anyhow::bail!("--backend wgpu cannot open a device: {e}"),
    }
    Ok(())
}
