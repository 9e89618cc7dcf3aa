//! Domain decomposition for the halo workloads (GPU-SM section 3.3 and 6: the 3D
//! finite-difference stencil and 2D image convolution): a grid of up to three dimensions laid
//! out on one tessera texture, cut into slabs along one axis, one slab per device, and run
//! in one of the access versions GPU-SM compares.
//!
//! Layout: a box of `nx × ny × nz` cells is an R32Float texture of width `nx` and height
//! `ny · nz`, cell (x, y, z) at texel (x, z · ny + y): the z slices stacked in one tall
//! texture. A 2D image is the case `nz = 1`. tessera's pages stay square 2D tiles: a page
//! holds P rows of P cells of one slice (when P divides `ny`), so the geometry needs no 3D
//! page shape.
//!
//! Launch domain: a kernel's invocation (u, v) is the cell (u, y, z) of the box it runs over,
//! with v = z · ny + y, or v = y · nz + z when the grid is split along Y. The split axis is
//! therefore always the launch's u (X) or the outer part of v, so every device's slab is one
//! rectangle of the launch domain.
//!
//! - [`runner`]: the versions: `migrate` (one shared object per field, demand paging) and
//!   `explicit` (private slab objects with ghost cells and hand-written halo copies).
//! - [`halo_copy`]: the copy kernel of the explicit version (twin of `halo_copy.wgsl`).

/// Declares a kernel's parameter struct (`tessera_runtime::kernel_params!`) with a box between
/// the fields before and after `..Box3`: the six fields `ox, oy, oz, ex, ey, ez` that
/// `grid.wgsl` reads as a box. `with_box` gives the box's fields with every other field zero,
/// for a struct literal to take the box from with `..`; such a literal compiles even when it
/// leaves another field out (that field is zero), so each kernel's tests against its
/// reference are what catch a missing one.
macro_rules! box_kernel_params {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(pub $pre:ident: $pty:ty,)*
            ..Box3,
            $(pub $post:ident: $qty:ty),* $(,)?
        }
    ) => {
        tessera_runtime::kernel_params! {
            $(#[$meta])*
            pub struct $name {
                $(pub $pre: $pty,)*
                pub ox: u32,
                pub oy: u32,
                pub oz: u32,
                pub ex: u32,
                pub ey: u32,
                pub ez: u32,
                $(pub $post: $qty,)*
            }
        }

        impl $name {
            /// `bx` as the box fields, every other field zero.
            pub fn with_box(bx: &$crate::decomp::Box3) -> Self {
                let [ox, oy, oz] = bx.origin;
                let [ex, ey, ez] = bx.extent;
                $name {
                    ox,
                    oy,
                    oz,
                    ex,
                    ey,
                    ez,
                    ..Default::default()
                }
            }
        }
    };
}
pub(crate) use box_kernel_params;

pub mod halo_copy;
pub mod runner;

use tessera_runtime::error::count;
use tessera_runtime::{Domain, PassSpec, PassStats, Procedure, Schedule, System};

/// An axis of the grid; the one the slabs are cut along.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    X,
    Y,
    Z,
}

impl Axis {
    pub fn index(self) -> usize {
        match self {
            Axis::X => 0,
            Axis::Y => 1,
            Axis::Z => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Axis::X => "x",
            Axis::Y => "y",
            Axis::Z => "z",
        }
    }
}

impl std::str::FromStr for Axis {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "x" => Ok(Axis::X),
            "y" => Ok(Axis::Y),
            "z" => Ok(Axis::Z),
            _ => Err(format!("unknown split {s:?} (expected x, y or z)")),
        }
    }
}

/// How the devices reach the data they share (GPU-SM's versions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// The "CUDA copies" baseline: private slab objects plus hand-written halo copies.
    Explicit,
    /// One shared object per field; tessera's demand paging moves the pages.
    Migrate,
    /// One shared object per field in the runtime's remote access mode.
    Remote,
}

impl Access {
    pub fn name(self) -> &'static str {
        match self {
            Access::Explicit => "explicit",
            Access::Migrate => "migrate",
            Access::Remote => "remote",
        }
    }
}

impl std::str::FromStr for Access {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "explicit" => Ok(Access::Explicit),
            "migrate" => Ok(Access::Migrate),
            "remote" => Ok(Access::Remote),
            _ => Err(format!(
                "unknown access mode {s:?} (expected explicit, migrate or remote)"
            )),
        }
    }
}

/// The text of a halo too large for its slabs. One device's slab is the whole grid, so at one
/// device the advice does not offer fewer devices.
fn too_large(what: String, smaller: &str, slab: u32, axis: &str, devices: usize) -> String {
    let slab = count(slab.into(), "cell");
    if devices <= 1 {
        return format!(
            "{what} is more than the grid's {slab} along {axis} (use a larger grid or {smaller})"
        );
    }
    format!(
        "{what} is larger than a device's slab of {slab} along {axis}: a slab's halo must come from its immediate neighbours (use fewer devices, a larger grid or {smaller})"
    )
}

/// What can be wrong with a decomposition or a workload's settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecompError {
    #[error("the grid is empty: every side must be at least 1 (got {0:?})")]
    Empty([u32; 3]),
    #[error("cannot split {len} cells along {axis} between {devices} devices evenly: the side must be a multiple of the device count")]
    NotDivisible {
        axis: &'static str,
        len: u32,
        devices: usize,
    },
    #[error("{}", too_large(format!("halo {halo}"), "a smaller halo", *slab, axis, *devices))]
    HaloTooLarge {
        halo: u32,
        slab: u32,
        axis: &'static str,
        devices: usize,
    },
    /// [`DecompError::HaloTooLarge`] where the halo is a filter's reach (`filter / 2`).
    #[error("{}", too_large(format!("a {filter}x{filter} filter's reach of {}", count((filter / 2).into(), "cell")), "a smaller filter", *slab, axis, *devices))]
    FilterTooLarge {
        filter: u32,
        slab: u32,
        axis: &'static str,
        devices: usize,
    },
    #[error("halo must be at least 1 (got 0)")]
    ZeroHalo,
    #[error("a {axis} split needs a grid with more than one cell along {axis}")]
    FlatAxis { axis: &'static str },
    #[error("the filter size must be odd (a centre and the same reach each side), from 3 to {max}; got {size}")]
    BadFilter { size: u32, max: u32 },
    #[error(transparent)]
    Runtime(#[from] tessera_runtime::RuntimeError),
    #[error(transparent)]
    Core(#[from] tessera_core::CoreError),
}

pub type Result<T, E = DecompError> = std::result::Result<T, E>;

/// A box of cells: `origin` in grid coordinates and `extent` cells along each axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Box3 {
    pub origin: [u32; 3],
    pub extent: [u32; 3],
}

impl Box3 {
    pub fn whole(dims: [u32; 3]) -> Self {
        Box3 {
            origin: [0; 3],
            extent: dims,
        }
    }

    pub fn cells(&self) -> u64 {
        self.extent.iter().map(|&e| e as u64).product()
    }

    /// The texture's size: `nx × (ny · nz)`.
    pub fn texture_size(&self) -> (u32, u32) {
        (self.extent[0], self.extent[1] * self.extent[2])
    }

    /// Texel of the cell at box-local (x, y, z).
    #[inline(always)]
    pub fn texel(&self, l: [u32; 3]) -> (u32, u32) {
        (l[0], l[2] * self.extent[1] + l[1])
    }

    /// Word of the cell at box-local (x, y, z) in a dense buffer of the box's cells.
    #[inline(always)]
    pub fn word(&self, l: [u32; 3]) -> u32 {
        (l[2] * self.extent[1] + l[1]) * self.extent[0] + l[0]
    }

    /// The box-local cell of invocation (u, v) (see the module's launch domain).
    #[inline(always)]
    pub fn unlaunch(&self, order: Order, u: u32, v: u32) -> [u32; 3] {
        match order {
            Order::Zy => [u, v % self.extent[1], v / self.extent[1]],
            Order::Yz => [u, v / self.extent[2], v % self.extent[2]],
        }
    }

    /// The launch rectangle of the cells of `self` whose coordinate along `axis` lies in
    /// `lo..hi` (box-local), all of the other two axes.
    pub fn launch_slab(&self, order: Order, axis: Axis, lo: u32, hi: u32) -> Domain {
        let [nx, ny, nz] = self.extent;
        let (x0, x1, y0, y1) = match (axis, order) {
            (Axis::X, _) => (lo, hi, 0, ny * nz),
            (Axis::Y, Order::Yz) => (0, nx, lo * nz, hi * nz),
            (Axis::Z, Order::Zy) => (0, nx, lo * ny, hi * ny),
            // A slab across the inner part of v is not one rectangle; the runners never ask.
            (Axis::Y, Order::Zy) | (Axis::Z, Order::Yz) => {
                unreachable!("launch order {order:?} does not make a {axis:?} slab a rectangle")
            }
        };
        Domain::Rect { x0, y0, x1, y1 }
    }

    /// The whole box as a launch rectangle.
    pub fn launch_all(&self) -> Domain {
        let (w, h) = self.texture_size();
        Domain::Rect {
            x0: 0,
            y0: 0,
            x1: w,
            y1: h,
        }
    }
}

/// How an invocation's v coordinate is made of y and z (module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// v = z · ny + y: the texture's own rows.
    Zy,
    /// v = y · nz + z: y outer, so a slab along Y is a band of launch rows.
    Yz,
}

impl Order {
    pub fn for_split(axis: Axis) -> Self {
        if axis == Axis::Y {
            Order::Yz
        } else {
            Order::Zy
        }
    }
    pub fn word(self) -> u32 {
        match self {
            Order::Zy => 0,
            Order::Yz => 1,
        }
    }
}

/// A grid cut into equal slabs along `axis`, one per device, each reading `halo` cells of
/// its neighbours on either side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    pub dims: [u32; 3],
    pub axis: Axis,
    pub halo: u32,
    pub devices: usize,
}

impl Grid {
    /// Checks the decomposition: a non-empty grid, a side the device count divides, and a
    /// halo no larger than a slab (a ghost region is filled from the immediate neighbour
    /// only, as in GPU-SM's Listing 2).
    pub fn new(dims: [u32; 3], axis: Axis, halo: u32, devices: usize) -> Result<Self> {
        if dims.contains(&0) {
            return Err(DecompError::Empty(dims));
        }
        if halo == 0 {
            return Err(DecompError::ZeroHalo);
        }
        let len = dims[axis.index()];
        if len == 1 && devices > 1 {
            return Err(DecompError::FlatAxis { axis: axis.name() });
        }
        if devices == 0 || !(len as usize).is_multiple_of(devices) {
            return Err(DecompError::NotDivisible {
                axis: axis.name(),
                len,
                devices,
            });
        }
        let slab = len / devices as u32;
        if halo > slab {
            return Err(DecompError::HaloTooLarge {
                halo,
                slab,
                axis: axis.name(),
                devices,
            });
        }
        Ok(Grid {
            dims,
            axis,
            halo,
            devices,
        })
    }

    pub fn order(&self) -> Order {
        Order::for_split(self.axis)
    }

    /// Device `d`'s cells along the split axis.
    pub fn slab(&self, d: usize) -> (u32, u32) {
        let len = self.dims[self.axis.index()];
        let per = len / self.devices as u32;
        (per * d as u32, per * (d as u32 + 1))
    }

    /// The box of device `d`'s own cells.
    pub fn owned(&self, d: usize) -> Box3 {
        let (lo, hi) = self.slab(d);
        let a = self.axis.index();
        let mut b = Box3::whole(self.dims);
        b.origin[a] = lo;
        b.extent[a] = hi - lo;
        b
    }

    /// The box device `d` reads: its slab and `halo` cells each side, inside the grid.
    pub fn with_ghosts(&self, d: usize) -> Box3 {
        let (lo, hi) = self.slab(d);
        let a = self.axis.index();
        let lo = lo.saturating_sub(self.halo);
        let hi = (hi + self.halo).min(self.dims[a]);
        let mut b = Box3::whole(self.dims);
        b.origin[a] = lo;
        b.extent[a] = hi - lo;
        b
    }

    /// The cells of device `to`'s ghost region that device `from` (a neighbour) owns.
    pub fn halo_box(&self, from: usize, to: usize) -> Box3 {
        let (lo, hi) = self.slab(to);
        let a = self.axis.index();
        let (h0, h1) = if from < to {
            (lo.saturating_sub(self.halo), lo)
        } else {
            (hi, (hi + self.halo).min(self.dims[a]))
        };
        let mut b = Box3::whole(self.dims);
        b.origin[a] = h0;
        b.extent[a] = h1 - h0;
        b
    }
}

/// One barrier's worth of launches: each device's passes (domains set), run in order on
/// that device; the phase ends when every device's have.
pub type Phase = Vec<(usize, PassSpec)>;

/// Runs one phase on `sys` and waits for all of it: the devices together
/// ([`Schedule::Concurrent`]) or one after another ([`Schedule::Isolated`], the
/// isolated-device model's turns). Returns each device's stats summed over its launches.
pub fn run_phase(
    sys: &System,
    phase: &[(usize, PassSpec)],
    procedure: Procedure,
    schedule: Schedule,
) -> tessera_runtime::Result<Vec<PassStats>> {
    let mut total = vec![PassStats::default(); sys.devices()];
    let start = |d: usize, spec: &PassSpec| {
        let spec = spec.clone();
        sys.on_device(d, move |ctx| ctx.run_pass(&spec, procedure))
    };
    match schedule {
        Schedule::Concurrent => {
            let pending: Vec<_> = phase
                .iter()
                .map(|(d, s)| Ok((*d, start(*d, s)?)))
                .collect::<tessera_runtime::Result<_>>()?;
            // Wait for every launch before reporting the first error: the barrier holds.
            let results: Vec<_> = pending.into_iter().map(|(d, p)| (d, p.wait())).collect();
            for (d, r) in results {
                total[d].add(&r??);
            }
        }
        Schedule::Isolated => {
            for (d, t) in total.iter_mut().enumerate() {
                let pending: Vec<_> = phase
                    .iter()
                    .filter(|(e, _)| *e == d)
                    .map(|(_, s)| start(d, s))
                    .collect::<tessera_runtime::Result<_>>()?;
                let results: Vec<_> = pending.into_iter().map(|p| p.wait()).collect();
                for r in results {
                    t.add(&r??);
                }
            }
        }
    }
    Ok(total)
}

/// Reads of a star stencil of radius `halo` (GPU-SM's finite difference) over the whole
/// grid: (reads of a cell another device owns, all reads inside the grid). Counted in closed
/// form: along an axis of length L, offset ±s stays inside for 2 · (L − s) cells of a line;
/// across each of the D − 1 slab boundaries, offset s reaches the neighbour from s cells on
/// each side (slabs are at least `halo` thick), so r(r + 1) reads per line cross.
pub fn star_reads(g: &Grid) -> (u64, u64) {
    let cells = Box3::whole(g.dims).cells();
    let r = g.halo as u64;
    let mut total = cells;
    for &l in &g.dims {
        let l = l as u64;
        let inside: u64 = (1..=r).map(|s| 2 * l.saturating_sub(s)).sum();
        total += inside * (cells / l);
    }
    let lines = cells / g.dims[g.axis.index()] as u64;
    let remote = (g.devices as u64 - 1) * r * (r + 1) * lines;
    (remote, total)
}

/// Image reads of an F × F convolution (F = 2 · halo + 1) with clamp to edge over the whole
/// grid, as [`star_reads`]: every pixel reads F² pixels; across each slab boundary, each of
/// the F offsets along the other axis crosses r(r + 1) times per line.
pub fn square_reads(g: &Grid) -> (u64, u64) {
    let cells = Box3::whole(g.dims).cells();
    let r = g.halo as u64;
    let f = 2 * r + 1;
    let lines = cells / g.dims[g.axis.index()] as u64;
    let remote = (g.devices as u64 - 1) * r * (r + 1) * f * lines;
    (remote, cells * f * f)
}
