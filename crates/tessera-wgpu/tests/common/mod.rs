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
