//! What every wgpu test does when it opens a device, and what the device-level tests (a wgpu
//! device beside a CPU device, launch by launch) set up alike.

use tessera_runtime::{Fault, Invocation, Kernel};
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

/// Device 0 on the default adapter, alone, or `None` as [`opened`] says: the device-level tests
/// drive it launch by launch beside a CPU device.
#[allow(dead_code)]
pub fn gpu() -> Option<tessera_wgpu::WgpuDevice> {
    opened(
        tessera_wgpu::WgpuDevice::new(
            tessera_core::DeviceId(0),
            &tessera_wgpu::AdapterChoice::Default,
        ),
        "a wgpu device",
    )
}

/// A pool of `threads` threads for the CPU devices the device-level tests compare with.
#[allow(dead_code)]
pub fn pool(threads: usize) -> std::sync::Arc<rayon::ThreadPool> {
    std::sync::Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap(),
    )
}

/// A kernel without a WGSL twin, which a wgpu device must refuse with a typed error.
#[allow(dead_code)]
pub struct CpuOnly;

impl Kernel for CpuOnly {
    fn name(&self) -> &'static str {
        "cpu-only"
    }
    fn invoke(&self, _: &mut Invocation<'_>, _: u32, _: u32) -> Result<(), Fault> {
        Ok(())
    }
}

tessera_runtime::kernel_params! {
    /// The parameters of a kernel of one object.
    #[allow(dead_code)]
    pub struct One {
        pub a: u32,
    }
}

/// a = 2a + 1, in place: every run changes every texel, so stale bytes show.
#[allow(dead_code)]
pub struct Bump {
    pub a: tessera_core::ObjectId,
}

impl Kernel for Bump {
    fn name(&self) -> &'static str {
        "bump"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.a, x, y)?;
        inv.store_f32(self.a, x, y, 2.0 * v + 1.0)
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        Some(tessera_runtime::WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let v = load_f32(params.a, x, y);
                store_f32(params.a, x, y, 2.0 * v + 1.0);
            }",
            &One { a: self.a.0 },
        ))
    }
}

tessera_runtime::kernel_params! {
    /// The parameters of a kernel from `src` into `dst`.
    #[allow(dead_code)]
    pub struct SrcDst {
        pub src: u32,
        pub dst: u32,
    }
}

/// A source and a destination texture in an address space of `pages` pages, which the
/// device-level tests bind in that order.
#[allow(dead_code)]
pub struct World {
    pub src: tessera_core::ObjectEntry,
    pub dst: tessera_core::ObjectEntry,
    pub pages: u64,
}

/// [`map_pages_with`] in one memory made here: page p in slot p of memory 0, its words i
/// p · 100 + i.
#[allow(dead_code)]
pub fn map_pages(
    d: &mut dyn tessera_runtime::Device,
    pages: u64,
    slot_bytes: u64,
    desc: impl Fn(u64, tessera_core::SlotAddr) -> tessera_core::PageDescriptor,
) {
    d.create_memory(0, slot_bytes, pages as u32).unwrap();
    map_pages_with(
        d,
        pages,
        slot_bytes,
        |p| tessera_core::SlotAddr {
            memory: 0,
            slot: p as u32,
        },
        desc,
        |p, i| (p * 100 + i) as f32,
    );
}

/// Gives `d` a page table of `pages` pages, page p at slot `at(p)` of the memories the caller
/// made, described by `desc(p, at(p))`, and fills each slot's words i with `value(p, i)`.
#[allow(dead_code)]
pub fn map_pages_with(
    d: &mut dyn tessera_runtime::Device,
    pages: u64,
    slot_bytes: u64,
    at: impl Fn(u64) -> tessera_core::SlotAddr,
    desc: impl Fn(u64, tessera_core::SlotAddr) -> tessera_core::PageDescriptor,
    value: impl Fn(u64, u64) -> f32,
) {
    d.resize_page_table(pages).unwrap();
    for p in 0..pages {
        let at = at(p);
        d.set_page(tessera_core::GlobalPage(p), desc(p, at))
            .unwrap();
        let data: Vec<u8> = (0..slot_bytes / 4)
            .flat_map(|i| value(p, i).to_le_bytes())
            .collect();
        d.write_slot(at, &data).unwrap();
    }
}
