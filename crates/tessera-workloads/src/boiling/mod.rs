//! The boiling simulation of paper 4.1.1 (Harris et al. 2002, a coupled map lattice after
//! Yanagita): four render-to-texture passes and a display pass per frame (paper Table 1).
//!
//! `math` holds the per-texel equations; each kernel file (`border.rs`, `diffusion.rs`, …)
//! is the CPU twin of the WGSL shader of the same name; `reference` is the plain, unpaged,
//! single-device version; `sim` runs it paged on a tessera node; `unpaged` runs the same
//! kernel bodies on plain arrays for the overhead benchmark.
/// A boiling pass: its struct over the shared [`Ctx`], its name and WGSL twin (`NAME.wgsl`
/// after `math.wgsl`), the texture it writes and those it reads with their reach, and then
/// its body, `texel`, written in the pass's own file.
macro_rules! boiling_pass {
    ($ty:ident, $name:literal, writes $out:ident, reads [$(($read:ident, $reach:expr)),*], $($texel:tt)*) => {
        pub struct $ty(pub $crate::boiling::Ctx);

        impl $crate::boiling::BoilingPass for $ty {
            const NAME: &'static str = $name;
            const WGSL: &'static str =
                concat!(include_str!("math.wgsl"), include_str!(concat!($name, ".wgsl")));
            fn ctx(&self) -> &$crate::boiling::Ctx {
                &self.0
            }
            fn output(&self) -> tessera_core::ObjectId {
                self.0.tex.$out
            }
            fn reads(&self) -> Vec<(tessera_core::ObjectId, u32)> {
                vec![$((self.0.tex.$read, $reach)),*]
            }
            $($texel)*
        }
    };
}

pub mod animation;
pub mod border;
pub mod buoyancy;
pub mod cluster;
pub mod diffusion;
pub mod display;
pub mod latent_heat;
pub mod math;
pub mod modeled;
pub mod overhead;
pub mod reference;
pub mod report;
pub mod scaling;
pub use summary::remote_table;
pub mod residency;
pub mod sim;
mod summary;
pub mod sweep;
pub mod unpaged;

use tessera_core::{ObjectId, TexelFormat};

use crate::access::TexelAccess;
use math::BoilingParams;

/// The textures of one simulation: the frame input and the three intermediate fields
/// (R32Float), and the display image (RGBA8Unorm).
#[derive(Clone, Copy, Debug)]
pub struct Textures {
    /// Frame input; the latent-heat pass writes the next frame's input here.
    pub field: ObjectId,
    pub border: ObjectId,
    pub diffusion: ObjectId,
    pub buoyancy: ObjectId,
    pub display: ObjectId,
}

impl Textures {
    /// Ids 0..4 in field order, for runs with no memory manager to hand out ids.
    pub const NUMBERED: Textures = Textures {
        field: ObjectId(0),
        border: ObjectId(1),
        diffusion: ObjectId(2),
        buoyancy: ObjectId(3),
        display: ObjectId(4),
    };

    /// Every texture with its texel format.
    pub fn formats(&self) -> [(ObjectId, TexelFormat); 5] {
        let f = TexelFormat::R32Float;
        [
            (self.field, f),
            (self.border, f),
            (self.diffusion, f),
            (self.buoyancy, f),
            (self.display, TexelFormat::Rgba8Unorm),
        ]
    }
}

/// A frame's five passes in order as runtime kernels, for runners that drive a backend
/// without the runtime (the unpaged GPU twin of `tessera bench overhead`).
pub fn frame_kernels(ctx: Ctx) -> [Box<dyn tessera_runtime::Kernel>; 5] {
    [
        Box::new(Paged(border::Border(ctx))),
        Box::new(Paged(diffusion::Diffusion(ctx))),
        Box::new(Paged(buoyancy::Buoyancy(ctx))),
        Box::new(Paged(latent_heat::LatentHeat(ctx))),
        Box::new(Paged(display::Display(ctx))),
    ]
}

/// What every boiling kernel knows: its textures, the field size and the constants.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub tex: Textures,
    pub width: u32,
    pub height: u32,
    pub params: BoilingParams,
}

impl Ctx {
    /// Clamp-to-edge neighbour read, as the reference does.
    #[inline(always)]
    pub fn at<A: TexelAccess>(
        &self,
        a: &mut A,
        id: ObjectId,
        x: u32,
        y: u32,
        dx: i64,
        dy: i64,
    ) -> Result<f32, tessera_runtime::Fault> {
        let cx = math::clamp_coord(x as i64 + dx, self.width);
        let cy = math::clamp_coord(y as i64 + dy, self.height);
        a.load_f32(id, cx, cy)
    }

    /// The 5-point stencil of `id` at (x, y): centre, north, south, east, west, read in that
    /// order, as `five_point` in `math.wgsl` reads them (a fault stops both twins at the same
    /// load).
    #[inline(always)]
    pub fn five_point<A: TexelAccess>(
        &self,
        a: &mut A,
        id: ObjectId,
        x: u32,
        y: u32,
    ) -> Result<[f32; 5], tessera_runtime::Fault> {
        Ok([
            self.at(a, id, x, y, 0, 0)?,
            self.at(a, id, x, y, 0, 1)?,
            self.at(a, id, x, y, 0, -1)?,
            self.at(a, id, x, y, 1, 0)?,
            self.at(a, id, x, y, -1, 0)?,
        ])
    }
}

/// Declares [`BoilingKernelParams`] and [`Ctx::wgsl_params`] from one list of the
/// [`Textures`] fields and one of the [`BoilingParams`] fields: the lists destructure both, so
/// that a field added there and not here is a compile error, and the same lists lay out the
/// WGSL struct and fill it.
macro_rules! boiling_kernel_params {
    (textures: $($t:ident),*; params: $($p:ident),* $(,)?) => {
        tessera_runtime::kernel_params! {
            /// What the boiling WGSL twins read as `params` (`math.wgsl`): a [`Ctx`] flattened,
            /// the texture ids, the field size and the [`BoilingParams`] fields in declaration
            /// order.
            pub struct BoilingKernelParams {
                $(pub $t: u32,)*
                pub width: u32,
                pub height: u32,
                $(pub $p: f32,)*
            }
        }

        impl Ctx {
            /// The parameters of the WGSL twins.
            pub fn wgsl_params(&self) -> BoilingKernelParams {
                let Textures { $($t),* } = self.tex;
                let BoilingParams { $($p),* } = self.params;
                BoilingKernelParams {
                    $($t: $t.0,)*
                    width: self.width,
                    height: self.height,
                    $($p),*
                }
            }
        }
    };
}

boiling_kernel_params!(
    textures: field, border, diffusion, buoyancy, display;
    params: t_hot, t_cold, t_c, alpha, k_diff, k_buoy, k_latent, t_min, t_max, noise, hot_jitter,
);

/// A boiling pass: one texel's work, generic over paged or plain access.
pub trait BoilingPass: Send + Sync + 'static {
    const NAME: &'static str;
    /// The WGSL twin (`<NAME>.wgsl`, after the shared `math.wgsl`), for GPU backends.
    const WGSL: &'static str;
    fn ctx(&self) -> &Ctx;
    /// The texture it writes, at the invocation's own texel.
    fn output(&self) -> ObjectId;
    /// The textures it reads, each with how far from the invocation's texel it reads
    /// (coordinates clamped to the field): the pass's footprint.
    fn reads(&self) -> Vec<(ObjectId, u32)>;
    fn texel<A: TexelAccess>(
        &self,
        a: &mut A,
        x: u32,
        y: u32,
    ) -> Result<(), tessera_runtime::Fault>;
}

/// Every boiling pass is a runtime kernel through the paged translation API.
pub struct Paged<P>(pub P);

impl<P: BoilingPass> tessera_runtime::Kernel for Paged<P> {
    fn name(&self) -> &'static str {
        P::NAME
    }
    fn wgsl(&self) -> Option<tessera_runtime::WgslKernel> {
        Some(tessera_runtime::WgslKernel::new(
            P::WGSL,
            &self.0.ctx().wgsl_params(),
        ))
    }
    #[inline]
    fn invoke(
        &self,
        inv: &mut tessera_runtime::Invocation<'_>,
        x: u32,
        y: u32,
    ) -> Result<(), tessera_runtime::Fault> {
        self.0.texel(inv, x, y)
    }
    fn footprint(&self) -> Option<tessera_runtime::Footprint> {
        Some(tessera_runtime::Footprint {
            reads: self.0.reads(),
            write: self.0.output(),
        })
    }
    fn run_plain(
        &self,
        plain: &mut tessera_runtime::Plain<'_>,
        xs: std::ops::Range<u32>,
        ys: std::ops::Range<u32>,
    ) -> Result<(), tessera_runtime::Fault> {
        for y in ys {
            for x in xs.clone() {
                self.0.texel(plain, x, y)?;
            }
        }
        Ok(())
    }
}
