//! The kernels the mip tests run, with both twins, shared by the CPU test (`tests/mip.rs`)
//! and the lavapipe one (tessera-wgpu's `tests/mip_wgpu.rs`).

use tessera_core::mip::{bytes_to_words, chain_rgba8, slots, words_to_bytes};
use tessera_core::{
    AccessMode, Addressing, Filter, ObjectDesc, ObjectEntry, ObjectId, Sampler, TexelFormat, Window,
};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, System, WgslKernel};

/// The test texture's sides and page: odd sides, so every level has a ragged edge.
pub const W: u32 = 37;
pub const H: u32 = 21;
pub const PAGE: u32 = 8;

/// A mipmapped W × H texture with `border`, uploaded from the chain the runtime's host code
/// builds (read-only where bordered, as it must be).
pub fn upload(sys: &System, addressing: Addressing, border: u32) -> (ObjectEntry, ObjectDesc) {
    let desc = ObjectDesc::mipmapped(
        W,
        H,
        TexelFormat::Rgba8Unorm,
        PAGE,
        None,
        border,
        addressing,
    )
    .unwrap();
    let (layout, _) = desc.mip().unwrap();
    let data = words_to_bytes(&slots(
        &layout,
        &chain_rgba8(&layout, level0(W, H)),
        addressing,
    ));
    let mode = if border > 0 {
        AccessMode::ReplicateRead
    } else {
        AccessMode::Migrate
    };
    (sys.create_with(desc, Some(data), mode).unwrap(), desc)
}

/// out(x, y) = texel (min(x, w - 1), min(y, h - 1)) of level `level` of `tex`, whose extent
/// the kernel is told as (w, h): the domain can stay wide enough to split over devices.
pub struct LevelCopy {
    pub tex: ObjectId,
    pub out: ObjectId,
    pub level: u32,
    pub extent: (u32, u32),
}

impl Kernel for LevelCopy {
    fn name(&self) -> &'static str {
        "mip_test_level_copy"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        tessera_runtime::kernel_params! {
            struct Params {
                tex: u32,
                out: u32,
                level: u32,
                w: u32,
                h: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let c = load_rgba8_level(params.tex, params.level, min(x, params.w - 1u), min(y, params.h - 1u));
                store_rgba8(params.out, x, y, c);
            }",
            &Params {
                tex: self.tex.0,
                out: self.out.0,
                level: self.level,
                w: self.extent.0,
                h: self.extent.1,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let (w, h) = self.extent;
        let c = inv.load_rgba8_level(self.tex, self.level, x.min(w - 1), y.min(h - 1))?;
        inv.store_rgba8(self.out, x, y, c)
    }
}

/// Runs the kernel `kernel` makes for a new `w × h` RGBA8 texture `out` over `out`'s
/// texels, with `inputs` bound before it: that texture, for the caller to free or keep, and
/// its words.
fn run_into<K: Kernel + 'static>(
    sys: &System,
    inputs: &[&ObjectEntry],
    (w, h): (u32, u32),
    kernel: impl FnOnce(ObjectId) -> K,
) -> (ObjectEntry, Vec<u32>) {
    let out = sys
        .create(
            ObjectDesc::texture(w, h, TexelFormat::Rgba8Unorm, PAGE).unwrap(),
            None,
        )
        .unwrap();
    let mut bound = inputs.to_vec();
    bound.push(&out);
    sys.run_kernel(kernel(out.id), &bound, w, h).unwrap();
    let words = bytes_to_words(&sys.read(&out).unwrap());
    (out, words)
}

/// Level `level` of `tex`, read through the page table by [`LevelCopy`] into a new W × H
/// texture over the whole domain (the level's last row and column repeated past its extent):
/// that texture, for the caller to free or keep, and its words.
pub fn copy_level(sys: &System, tex: &ObjectEntry, level: u32) -> (ObjectEntry, Vec<u32>) {
    run_into(sys, &[tex], (W, H), |out| LevelCopy {
        tex: tex.id,
        out,
        level,
        extent: ((W >> level).max(1), (H >> level).max(1)),
    })
}

/// The errors of three bad level copies on `sys`, in order: level 6 of the 6-level chain, a
/// texel beyond level 2's 9 × 5, and a level read of a plain texture (which stores plainly to
/// the mipmapped one).
pub fn level_errors(sys: &System) -> [RuntimeError; 3] {
    let (tex, _) = upload(sys, Addressing::Clamp, 0);
    let out = sys
        .create(
            ObjectDesc::texture(W, H, TexelFormat::Rgba8Unorm, PAGE).unwrap(),
            None,
        )
        .unwrap();
    [
        (&tex, &out, 6, (1, 1), 1),
        (&tex, &out, 2, (10, 5), 10),
        (&out, &tex, 0, (1, 1), 1),
    ]
    .map(|(from, to, level, extent, w)| {
        let k = LevelCopy {
            tex: from.id,
            out: to.id,
            level,
            extent,
        };
        sys.run_kernel(k, &[&tex, &out], w, 1).unwrap_err()
    })
}

/// Where [`Samples`] runs: the whole texture, and a window inside it.
pub const WINDOWS: [Option<Window>; 2] = [
    None,
    Some(Window {
        x: 8,
        y: 4,
        width: 16,
        height: 8,
    }),
];

/// out(x, y) = the sample of `tex` at (u, v, lod) = words 3i..3i+3 of the buffer `coords`
/// (f32 bits) with i = y * COLS + x, over the whole texture or `window`.
pub struct Samples {
    pub tex: ObjectId,
    pub coords: ObjectId,
    pub out: ObjectId,
    pub sampler: Sampler,
    pub window: Option<Window>,
}

impl Kernel for Samples {
    fn name(&self) -> &'static str {
        "mip_test_samples"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        let w = self.window.unwrap_or(Window {
            x: 0,
            y: 0,
            width: 0,
            height: 0,
        });
        tessera_runtime::kernel_params! {
            struct Params {
                tex: u32,
                coords: u32,
                out: u32,
                filter_code: u32,
                clamped: u32,
                windowed: u32,
                wx: u32,
                wy: u32,
                ww: u32,
                wh: u32,
            }
        }
        Some(WgslKernel::new(
            "fn kernel_main(x: u32, y: u32) {
                let i = y * 64u + x;
                let u = bitcast<f32>(load_u32(params.coords, 3u * i));
                let v = bitcast<f32>(load_u32(params.coords, 3u * i + 1u));
                let lod = bitcast<f32>(load_u32(params.coords, 3u * i + 2u));
                var c = 0u;
                if params.windowed == 0u {
                    c = sample_rgba8(params.tex, params.filter_code, params.clamped, u, v, lod);
                } else {
                    let win = vec4<u32>(params.wx, params.wy, params.ww, params.wh);
                    c = sample_rgba8_window(params.tex, params.filter_code, params.clamped, win, u, v, lod);
                }
                store_rgba8(params.out, x, y, c);
            }",
            &Params {
                tex: self.tex.0,
                coords: self.coords.0,
                out: self.out.0,
                filter_code: self.sampler.filter.code(),
                clamped: match self.sampler.addressing {
                    Addressing::Wrap => 0,
                    Addressing::Clamp => 1,
                },
                windowed: self.window.is_some() as u32,
                wx: w.x,
                wy: w.y,
                ww: w.width,
                wh: w.height,
            },
        ))
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let i = y * COLS + x;
        let u = f32::from_bits(inv.load_u32(self.coords, 3 * i)?);
        let v = f32::from_bits(inv.load_u32(self.coords, 3 * i + 1)?);
        let lod = f32::from_bits(inv.load_u32(self.coords, 3 * i + 2)?);
        let c = match self.window {
            None => inv.sample_rgba8(self.tex, self.sampler, u, v, lod)?,
            Some(w) => inv.sample_rgba8_window(self.tex, self.sampler, w, u, v, lod)?,
        };
        inv.store_rgba8(self.out, x, y, c)
    }
}

/// The samples by [`Samples`] of `tex` at the `rows` rows of COLS coordinates of `coords`,
/// into a new texture: that texture, for the caller to free or keep, and its words.
pub fn sample_grid(
    sys: &System,
    tex: &ObjectEntry,
    coords: &ObjectEntry,
    rows: u32,
    sampler: Sampler,
    window: Option<Window>,
) -> (ObjectEntry, Vec<u32>) {
    run_into(sys, &[tex, coords], (COLS, rows), |out| Samples {
        tex: tex.id,
        coords: coords.id,
        out,
        sampler,
        window,
    })
}

/// Samples per row of the `Samples` domain (the WGSL twin spells it out).
pub const COLS: u32 = 64;

/// A level 0 with detail at every scale: no two neighbours alike, channels independent.
pub fn level0(w: u32, h: u32) -> Vec<u32> {
    (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            let r = (x * 37 + y * 11) % 256;
            let g = (x * x + 3 * y * y + 7) % 256;
            let b = ((x ^ y) * 29) % 256;
            let a = 255 - (x * 5 + y * 17) % 64;
            r | g << 8 | b << 16 | a << 24
        })
        .collect()
}

/// (u, v, lod) over a grid that runs past the texture on every side, through texel centres,
/// edges and between them, and over every level and past the last.
pub fn grid(levels: u32) -> Vec<(f32, f32, f32)> {
    let mut out = Vec::new();
    for i in 0..13 {
        for j in 0..11 {
            for k in 0..(levels * 3 + 2) {
                let u = -1.27 + i as f32 * 0.291;
                let v = -0.61 + j as f32 * 0.233;
                let lod = -0.4 + k as f32 * 0.37;
                out.push((u, v, lod));
            }
        }
    }
    // Whole rows of COLS, so that the domain splits over devices by rows.
    while !out.len().is_multiple_of(COLS as usize) {
        out.push((0.5, 0.5, 0.0));
    }
    out
}

pub fn grid_words(g: &[(f32, f32, f32)]) -> Vec<u8> {
    g.iter()
        .flat_map(|&(u, v, l)| [u.to_bits(), v.to_bits(), l.to_bits()])
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

pub const FILTERS: [Filter; 3] = Filter::ALL;
pub const ADDRESSINGS: [Addressing; 2] = [Addressing::Wrap, Addressing::Clamp];
