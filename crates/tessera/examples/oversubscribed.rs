//! A buffer object through device memories smaller than the working set: every device's budget
//! holds a quarter of the pages its kernel touches, so pages are evicted (least recently used
//! first) while the kernel runs, and invocations that miss are relaunched once their pages are
//! back. The result is checked against a plain loop.
//!
//! ```text
//! cargo run --release --example oversubscribed
//! cargo run --release --example oversubscribed -- 8     # MiB per buffer
//! ```

use anyhow::{bail, Context};
use tessera::{Fault, Invocation, Kernel, ObjectDesc, ObjectId, System, SystemConfig};

/// Bytes per page of the buffers.
const PAGE: u64 = 4096;

/// `dst[i] = src[i] + src[n - 1 - i]`: each invocation reads a page near its own and one at the
/// mirrored end of the buffer, so a band of invocations touches twice its share of pages.
struct Mirror {
    src: ObjectId,
    dst: ObjectId,
    n: u32,
}

/// Invocations per row of the domain: word `y * ROW + x` is invocation (x, y), so the rows
/// split between devices as bands of the buffer.
const ROW: u32 = 1024;

impl Kernel for Mirror {
    fn name(&self) -> &'static str {
        "mirror"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let i = y * ROW + x;
        let a = inv.load_u32(self.src, i)?;
        let b = inv.load_u32(self.src, self.n - 1 - i)?;
        inv.store_u32(self.dst, i, a.wrapping_add(b))
    }
}

/// Runs the mirror over buffers of `mib` MiB; fails where a word differs from the plain loop.
/// Returns each device's pages evicted.
pub fn run(mib: u64) -> anyhow::Result<Vec<u64>> {
    let bytes = mib << 20;
    let n = (bytes / 4) as u32;
    let devices = 2;
    // A device's band is half the indices: it reads all of `src` (its half and the mirrored
    // one) and writes half of `dst`. Its budget is a quarter of that.
    let touched = bytes + bytes / 2;
    let sys = System::cpu(&SystemConfig::new(devices).budget(touched / 4))?;
    let values: Vec<u32> = (0..n).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let src = sys.create_u32(&values, PAGE)?;
    let dst = sys.create(ObjectDesc::buffer(bytes, PAGE)?, None)?;
    let stats = sys.run_kernel(
        Mirror {
            src: src.id,
            dst: dst.id,
            n,
        },
        &[&src, &dst],
        ROW,
        n / ROW,
    )?;
    let got = sys.read_u32(&dst)?;
    let want = |i: usize| values[i].wrapping_add(values[n as usize - 1 - i]);
    if let Some(i) = (0..n as usize).find(|&i| got[i] != want(i)) {
        bail!("word {i} is {}; the plain loop says {}", got[i], want(i));
    }
    println!(
        "{mib} MiB buffers in {PAGE}-byte pages on {devices} devices with {} KiB each: all {n} words match the plain loop",
        (touched / 4) >> 10
    );
    let traffic = sys.traffic()?;
    for (d, (t, s)) in traffic.iter().zip(&stats).enumerate() {
        println!(
            "device {d}: {} launches, {} pages in from home, {} evicted",
            s.launches, t.host_to_device.pages, t.evictions
        );
    }
    Ok(traffic.iter().map(|t| t.evictions).collect())
}

const USAGE: &str =
    "usage: oversubscribed [MIB]   (the buffer's size, 1 to 1024 MiB; 4 if not given)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let res = match args.as_slice() {
        [_, _, ..] => Err(anyhow::anyhow!("one argument at most\n{USAGE}")),
        [a] => a
            .parse()
            .ok()
            .filter(|&m| (1..=1024).contains(&m))
            .with_context(|| {
                format!("the buffer size in MiB must be 1 to 1024 (got {a})\n{USAGE}")
            }),
        [] => Ok(4),
    };
    // As the blur example and the CLI say it: `error: …`, exit status 1.
    if let Err(e) = res.and_then(run) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
