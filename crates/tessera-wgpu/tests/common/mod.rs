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

/// Whether the default adapter's compiler fuses `a * b + c` (`SharedGpu::fuses_multiply_add`),
/// asked once per test binary and said on stderr. `false` without an adapter.
#[allow(dead_code)]
pub fn fuses() -> bool {
    static FUSES: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FUSES.get_or_init(|| {
        let Ok(gpu) = tessera_wgpu::SharedGpu::open(&tessera_wgpu::AdapterChoice::Default) else {
            return false;
        };
        let f = gpu
            .fuses_multiply_add()
            .unwrap_or_else(|e| panic!("the multiply-add probe failed: {e}"));
        eprintln!(
            "{} fuses multiply-adds: {f}{}",
            gpu.adapter_info().name,
            if f {
                " (GPU results are compared with each other bit for bit and with the CPU within a tolerance)"
            } else {
                ""
            }
        );
        f
    })
}

/// Checks GPU fields against a CPU result. Where the adapter does not fuse multiply-adds every
/// field must equal the CPU's bit for bit. Where it fuses (a real GPU), each must be within
/// `tol` of the CPU's (relative to the largest magnitude) and all fields checked by one
/// `Exactness` must equal each other bit for bit: paging, device count and split never change
/// what one compiled kernel computes.
#[allow(dead_code)]
pub struct Exactness {
    fuses: bool,
    tol: f32,
    first: Option<(Vec<u32>, String)>,
}

#[allow(dead_code)]
impl Exactness {
    pub fn new(tol: f32) -> Self {
        Exactness {
            fuses: fuses(),
            tol,
            first: None,
        }
    }

    pub fn fuses(&self) -> bool {
        self.fuses
    }

    pub fn check(&mut self, got: &[f32], cpu: &[f32], what: &str) {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<u32>>();
        assert_eq!(got.len(), cpu.len(), "{what}: lengths differ");
        if !self.fuses {
            assert!(
                bits(got) == bits(cpu),
                "{what}: differs from the CPU bit for bit"
            );
            return;
        }
        let scale = cpu.iter().fold(1e-30f32, |m, v| m.max(v.abs()));
        let worst = got
            .iter()
            .zip(cpu)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst <= self.tol * scale && got.iter().all(|v| v.is_finite()),
            "{what}: differs from the CPU by {worst} (scale {scale}, tolerance {})",
            self.tol
        );
        match &self.first {
            None => self.first = Some((bits(got), what.to_string())),
            Some((f, w)) => assert!(
                *f == bits(got),
                "{what}: differs bit for bit from {w} on the same GPU"
            ),
        }
    }
}
