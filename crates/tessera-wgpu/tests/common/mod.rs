//! What every wgpu test does when it opens a device.

use tessera_wgpu::WgpuError;

/// Whether the environment says a Vulkan adapter must exist (CI, after installing lavapipe).
pub fn require_vulkan() -> bool {
    std::env::var("TESSERA_REQUIRE_VULKAN").is_ok_and(|v| v == "1")
}

/// The opened device, or `None` (after saying so) where no adapter exists and none is
/// required; any other failure, or a missing adapter when one is required, fails the test.
pub fn opened<T>(r: Result<T, WgpuError>, what: &str) -> Option<T> {
    match r {
        Ok(d) => Some(d),
        Err(e @ WgpuError::NoAdapter(_)) if !require_vulkan() => {
            eprintln!("SKIPPED: {e} (set TESSERA_REQUIRE_VULKAN=1 to fail instead)");
            None
        }
        Err(e) => panic!("cannot open {what}: {e}"),
    }
}

/// A node of `cfg.devices` wgpu devices sharing one wgpu device on the default adapter (named
/// once on stderr), as `tessera_wgpu::system` opens it, or `None` as [`opened`] says. Not every
/// test file builds a node, hence the allow.
#[allow(dead_code)]
pub fn system(cfg: &tessera_runtime::SystemConfig) -> Option<tessera_runtime::System> {
    let gpu = opened(
        tessera_wgpu::SharedGpu::open(&tessera_wgpu::AdapterChoice::Default),
        "a wgpu device",
    )?;
    eprintln!("wgpu adapter: {}", gpu.adapter_info().name);
    let mut out: Vec<Box<dyn tessera_runtime::Device>> = Vec::new();
    for i in 0..cfg.devices {
        let d = opened(
            tessera_wgpu::WgpuDevice::on(tessera_core::DeviceId(i as u8), &gpu),
            "a wgpu device",
        )?;
        out.push(Box::new(d));
    }
    Some(tessera_runtime::System::with_devices(out, cfg).unwrap())
}
