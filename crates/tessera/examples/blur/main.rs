//! Your own kernel on tessera: a 3×3 box blur of an R32Float image, written as twins (`Blur`
//! below for the CPU backend, `blur.wgsl` beside it for wgpu), run a few times over several
//! devices, read back and checked against a plain loop.
//!
//! ```text
//! cargo run --release --example blur                            # CPU backend
//! cargo run --release --example blur -- --backend wgpu          # GPU, or lavapipe
//! cargo run --release --example blur -- --devices 4 --size 1024 --page 64 --passes 8
//! ```

use anyhow::{bail, Context};
use tessera::{
    DeviceTraffic, Fault, Invocation, Kernel, ObjectId, System, SystemConfig, WgslKernel,
};

tessera::kernel_params! {
    /// One texel of the blur: the mean of the 3×3 texels of `src` around (x, y), clamped to
    /// the edge, into `dst`. The struct is the kernel's parameters too: `blur.wgsl` reads the
    /// same fields as `params.src`, `params.width`, …
    struct Blur {
        src: u32,
        dst: u32,
        width: u32,
        height: u32,
    }
}

impl Kernel for Blur {
    fn name(&self) -> &'static str {
        "blur"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        Some(WgslKernel::new(include_str!("blur.wgsl"), self))
    }
    /// A load of a page this device does not hold yet is `Err(Fault::Miss)`; `?` hands it to
    /// the runtime, which fetches the page and runs the texel again.
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let (src, dst) = (ObjectId(self.src), ObjectId(self.dst));
        let mut sum = 0.0;
        for dy in -1..=1 {
            for dx in -1..=1 {
                let (cx, cy) = (clamp(x, dx, self.width), clamp(y, dy, self.height));
                sum += inv.load_f32(src, cx, cy)?;
            }
        }
        inv.store_f32(dst, x, y, sum * (1.0 / 9.0))
    }
}

fn clamp(v: u32, d: i32, len: u32) -> u32 {
    v.saturating_add_signed(d).min(len - 1)
}

/// The same blur as a plain loop over a row-major array: what the paged runs must match.
fn blur_plain(img: &[f32], w: u32, h: u32) -> Vec<f32> {
    let at = |x: u32, y: u32| img[(y * w + x) as usize];
    let texel = |x: u32, y: u32| {
        let mut sum = 0.0;
        for dy in -1..=1 {
            for dx in -1..=1 {
                sum += at(clamp(x, dx, w), clamp(y, dy, h));
            }
        }
        sum * (1.0 / 9.0)
    };
    (0..h)
        .flat_map(|y| (0..w).map(move |x| texel(x, y)))
        .collect()
}

pub struct Options {
    pub wgpu: bool,
    pub devices: usize,
    pub size: u32,
    pub page: u32,
    pub passes: u32,
}

/// Blurs a checkerboard `passes` times, ping-ponging between two textures; fails where a texel
/// differs from the plain loop's. Returns each device's page traffic.
pub fn run(o: &Options) -> anyhow::Result<Vec<DeviceTraffic>> {
    let cfg = SystemConfig::new(o.devices);
    let sys = if o.wgpu {
        gpus(&cfg)?
    } else {
        System::cpu(&cfg)?
    };
    let (w, h) = (o.size, o.size);
    let checker = |x: u32, y: u32| ((x / 8 + y / 8) % 2) as f32;
    let mut want: Vec<f32> = (0..h)
        .flat_map(|y| (0..w).map(move |x| checker(x, y)))
        .collect();
    let mut src = sys.create_f32(w, h, o.page, Some(&want))?;
    let mut dst = sys.create_f32(w, h, o.page, None)?;
    for _ in 0..o.passes {
        let blur = Blur {
            src: src.id.0,
            dst: dst.id.0,
            width: w,
            height: h,
        };
        sys.run_kernel(blur, &[&src, &dst], w, h)?;
        std::mem::swap(&mut src, &mut dst);
        want = blur_plain(&want, w, h);
    }
    let got = sys.read_f32(&src)?;
    // Adds and multiplies are correctly rounded on both backends: the results agree exactly.
    if got.len() != want.len() {
        bail!("read back {} texels; {} expected", got.len(), want.len());
    }
    if let Some(i) = (0..want.len()).find(|&i| got[i] != want[i]) {
        let (x, y) = (i as u32 % w, i as u32 / w);
        bail!(
            "texel ({x}, {y}) is {} on {}; the plain loop says {}",
            got[i],
            sys.backend(),
            want[i]
        );
    }
    println!(
        "{} passes of blur on {} devices ({}): all {} texels match the plain loop",
        o.passes,
        o.devices,
        sys.backend(),
        want.len()
    );
    let traffic = sys.traffic()?;
    for (d, t) in traffic.iter().enumerate() {
        println!(
            "device {d}: {} page requests in {} batches; pages in from host {}, from other devices {}; written back {}",
            t.page_requests, t.batches, t.host_to_device.pages, t.device_to_device.pages, t.device_to_host.pages
        );
    }
    Ok(traffic)
}

const MAX_SIZE: u32 = 8192;
const USAGE: &str =
    "usage: blur [--backend cpu|wgpu] [--devices N] [--size S] [--page P] [--passes K]";

pub fn parse(mut args: impl Iterator<Item = String>) -> anyhow::Result<Options> {
    let mut o = Options {
        wgpu: false,
        devices: 2,
        size: 256,
        page: 32,
        passes: 4,
    };
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        // The value is taken only for a known option, so an unknown one is named alone.
        let mut value = || {
            args.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--backend" => match value()?.as_str() {
                "cpu" => o.wgpu = false,
                "wgpu" => o.wgpu = true,
                v => bail!("--backend {v}: expected cpu or wgpu"),
            },
            "--devices" => o.devices = number(&flag, &value()?)?,
            "--size" => o.size = number(&flag, &value()?)?,
            "--page" => o.page = number(&flag, &value()?)?,
            "--passes" => o.passes = number(&flag, &value()?)?,
            _ => bail!("unknown option {flag}\n{USAGE}"),
        }
    }
    // The plain loop keeps whole images in host memory: stay well inside it.
    if o.size > MAX_SIZE {
        bail!("--size {}: at most {MAX_SIZE}", o.size);
    }
    Ok(o)
}

fn number<T: std::str::FromStr>(flag: &str, v: &str) -> anyhow::Result<T> {
    v.parse()
        .ok()
        .with_context(|| format!("{flag} {v}: not a number\n{USAGE}"))
}

#[cfg(feature = "wgpu")]
fn gpus(cfg: &SystemConfig) -> anyhow::Result<System> {
    Ok(tessera::wgpu::system(
        cfg,
        &tessera::wgpu::AdapterChoice::from_env(),
    )?)
}

// A program for the CPU backend alone builds tessera without wgpu (`default-features = false`).
#[cfg(not(feature = "wgpu"))]
fn gpus(_: &SystemConfig) -> anyhow::Result<System> {
    bail!("--backend wgpu: this tessera was built without its `wgpu` feature")
}

fn main() {
    #[cfg(feature = "wgpu")]
    tessera::wgpu::quiet_mesa();
    if let Err(e) = parse(std::env::args().skip(1)).and_then(|o| run(&o)) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
