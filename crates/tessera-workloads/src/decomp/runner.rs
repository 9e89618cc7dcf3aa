//! The versions of a halo workload on a tessera node, one step at a time (a step is a
//! barrier-separated list of [`Phase`]s; the CLI runs them phase by phase to charge each
//! phase's page moves to a topology).
//!
//! - `migrate`: two shared field objects (ping-pong) covering the whole grid; in each step
//!   every device runs the workload's kernel over its own slab, reading its neighbours'
//!   cells through demand paging. One phase per step.
//! - `remote`: the same two shared fields created in the runtime's remote access mode
//!   (`AccessMode::Remote`, GPU-SM's shared memory), each page placed on the device whose
//!   slab holds its first cell (GPU-SM §6.1, Fig. 11b): a device's own cells are local, its
//!   halo reads go to the neighbour's memory in place, nothing is copied. One phase per step.
//! - `explicit`: what a user without shared memory writes (GPU-SM Listing 2). Each device
//!   has its own two field objects over its slab plus ghost cells, and for each neighbour
//!   pair a small halo buffer per direction. A step is three phases: every device computes
//!   its slab; every device copies its boundary cells into the halo buffers it owns (pack);
//!   every device copies its neighbours' halo buffers into its ghost cells (unpack). The
//!   halo buffers' pages are what moves between devices.
use std::sync::Arc;

use tessera_core::{AccessMode, Location, ObjectDesc, ObjectEntry, ObjectId, TexelFormat};
use tessera_runtime::{Bound, Kernel, PassSpec, PassStats, Procedure, Schedule, System};

use super::halo_copy::{HaloCopy, Side};
use super::{run_phase, Access, Box3, Grid, Phase, Result};

/// What a workload's kernel is built from for one launch.
#[derive(Clone, Copy, Debug)]
pub struct KernelArgs {
    pub input: ObjectId,
    pub output: ObjectId,
    /// The cells both field objects hold (their texture is this box).
    pub bx: Box3,
    /// The workload's extra read-only object (the convolution's filter), if any.
    pub extra: Option<ObjectId>,
}

/// Builds the workload's compute kernel for a launch.
pub type MakeKernel = Arc<dyn Fn(&KernelArgs) -> Arc<dyn Kernel> + Send + Sync>;

/// A read-only object every device's kernel reads whole (the convolution's filter): its
/// bytes and page size. Shared by all devices in the shared versions (read copies by demand
/// paging), one private copy per device in the explicit version (replicated by hand).
#[derive(Clone, Debug)]
pub struct Extra {
    pub bytes: Vec<u8>,
    pub page_bytes: u64,
    /// How the shared versions create it: `Migrate` (demand-paged read copies),
    /// `ReplicateRead` (read-only copies on first touch, never invalidated: what a read-only
    /// cache holds), or `Remote` (in host memory, every access crosses the device's link).
    /// The explicit version ignores it: it replicates by hand.
    pub mode: AccessMode,
}

// host: explicit begin
struct Slab {
    fields: [ObjectEntry; 2],
    bx: Box3,
    owned: Box3,
    extra: Option<ObjectEntry>,
}

struct Halo {
    from: usize,
    to: usize,
    bx: Box3,
    buf: ObjectEntry,
}
// host: explicit end

enum Layout {
    Shared {
        fields: [ObjectEntry; 2],
        extra: Option<ObjectEntry>,
    },
    Explicit {
        slabs: Vec<Slab>,
        halos: Vec<Halo>,
    },
}

/// A halo workload's fields on a node, in one access version.
pub struct Decomposed {
    pub sys: System,
    pub grid: Grid,
    pub access: Access,
    make: MakeKernel,
    layout: Layout,
    /// Which field of each pair holds the current input.
    cur: usize,
    steps: u32,
}

// host: explicit begin
fn texture(sys: &System, bx: Box3, page: u32, data: Vec<u8>) -> Result<ObjectEntry> {
    let (w, h) = bx.texture_size();
    Ok(sys.create(
        ObjectDesc::texture(w, h, TexelFormat::R32Float, page)?,
        Some(data),
    )?)
}
// host: explicit end

/// The bytes of box `bx`'s cells taken from a whole-grid field.
fn cut(field: &[f32], dims: [u32; 3], bx: Box3) -> Vec<u8> {
    let whole = Box3::whole(dims);
    let mut out = Vec::with_capacity(bx.cells() as usize * 4);
    for z in 0..bx.extent[2] {
        for y in 0..bx.extent[1] {
            for x in 0..bx.extent[0] {
                let g = [bx.origin[0] + x, bx.origin[1] + y, bx.origin[2] + z];
                out.extend(field[whole.word(g) as usize].to_le_bytes());
            }
        }
    }
    out
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

// host: explicit begin
/// Buffer pages as large as a texture page (P² words), within the runtime's limits.
fn buffer_page_bytes(page: u32) -> u64 {
    (page as u64 * page as u64 * 4).clamp(4, 1 << 20)
}
// host: explicit end

fn spec(
    kernel: Arc<dyn Kernel>,
    objects: &[&ObjectEntry],
    domain: tessera_runtime::Domain,
) -> PassSpec {
    PassSpec {
        kernel,
        bindings: Arc::new(objects.iter().map(|e| Bound::new(e)).collect()),
        domain,
        display: false,
    }
}

impl Decomposed {
    /// Creates the objects for `access` on `sys`, the field holding `init` (whole grid,
    /// cell (x, y, z) at index (z · ny + y) · nx + x). `page` is the texture page side.
    pub fn new(
        sys: System,
        grid: Grid,
        access: Access,
        page: u32,
        init: &[f32],
        extra: Option<Extra>,
        make: MakeKernel,
    ) -> Result<Self> {
        if sys.devices() != grid.devices {
            return Err(tessera_runtime::RuntimeError::Config(format!(
                "the grid is cut for {} devices but the node has {}",
                grid.devices,
                sys.devices()
            ))
            .into());
        }
        let whole = Box3::whole(grid.dims);
        if init.len() as u64 != whole.cells() {
            return Err(tessera_runtime::RuntimeError::Config(format!(
                "the initial field has {} cells; the grid has {}",
                init.len(),
                whole.cells()
            ))
            .into());
        }
        // host: explicit begin
        let make_extra = |sys: &System| -> Result<Option<ObjectEntry>> {
            extra
                .as_ref()
                .map(|e| {
                    Ok(sys.create(
                        ObjectDesc::buffer(e.bytes.len() as u64, e.page_bytes)?,
                        Some(e.bytes.clone()),
                    )?)
                })
                .transpose()
        };
        // host: explicit end
        let layout = match access {
            // host: shared begin
            Access::Migrate | Access::Remote => {
                // host: remote begin
                let mode = if access == Access::Remote {
                    AccessMode::Remote
                } else {
                    AccessMode::Migrate
                };
                // host: remote end
                let field = |data: Vec<u8>| -> Result<ObjectEntry> {
                    let (w, h) = whole.texture_size();
                    let desc = ObjectDesc::texture(w, h, TexelFormat::R32Float, page)?;
                    let e = sys.create_with(desc, Some(data), mode)?;
                    // host: remote begin
                    if mode == AccessMode::Remote {
                        // Each page on the device whose slab holds its first cell.
                        sys.place(&e, |local, _, _| {
                            let (x, row, _, _) = desc.page_rect(local);
                            let (y, z) = (row % grid.dims[1] as u64, row / grid.dims[1] as u64);
                            let c = [x, y, z][grid.axis.index()] as u32;
                            let per = grid.dims[grid.axis.index()] / grid.devices as u32;
                            Location::Device((c / per) as u8)
                        })?;
                    }
                    // host: remote end
                    Ok(e)
                };
                let a = field(cut(init, grid.dims, whole))?;
                let b = field(vec![0; whole.cells() as usize * 4])?;
                let extra = extra
                    .as_ref()
                    .map(|e| -> Result<ObjectEntry> {
                        Ok(sys.create_with(
                            ObjectDesc::buffer(e.bytes.len() as u64, e.page_bytes)?,
                            Some(e.bytes.clone()),
                            e.mode,
                        )?)
                    })
                    .transpose()?;
                Layout::Shared {
                    fields: [a, b],
                    extra,
                }
            }
            // host: shared end
            // host: explicit begin
            Access::Explicit => {
                let mut slabs = Vec::new();
                for d in 0..grid.devices {
                    let bx = grid.with_ghosts(d);
                    let data = cut(init, grid.dims, bx);
                    let a = texture(&sys, bx, page, data.clone())?;
                    // The ghost cells of the second field start equal to the first's: the
                    // unpack phase refreshes them after every step before they are read.
                    let b = texture(&sys, bx, page, data)?;
                    slabs.push(Slab {
                        fields: [a, b],
                        bx,
                        owned: grid.owned(d),
                        extra: make_extra(&sys)?,
                    });
                }
                let mut halos = Vec::new();
                for d in 0..grid.devices.saturating_sub(1) {
                    for (from, to) in [(d, d + 1), (d + 1, d)] {
                        let bx = grid.halo_box(from, to);
                        let buf = sys.create(
                            ObjectDesc::buffer(bx.cells() * 4, buffer_page_bytes(page))?,
                            None,
                        )?;
                        halos.push(Halo { from, to, bx, buf });
                    }
                }
                Layout::Explicit { slabs, halos }
            } // host: explicit end
        };
        Ok(Decomposed {
            sys,
            grid,
            access,
            make,
            layout,
            cur: 0,
            steps: 0,
        })
    }

    /// Steps run so far.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// The next step's phases, in order (empty phases left out).
    pub fn phases(&self) -> Vec<Phase> {
        let g = &self.grid;
        let order = g.order();
        let (i, o) = (self.cur, 1 - self.cur);
        match &self.layout {
            // host: shared begin
            Layout::Shared { fields, extra } => {
                let whole = Box3::whole(g.dims);
                let args = KernelArgs {
                    input: fields[i].id,
                    output: fields[o].id,
                    bx: whole,
                    extra: extra.as_ref().map(|e| e.id),
                };
                let kernel = (self.make)(&args);
                let mut objects = vec![&fields[i], &fields[o]];
                objects.extend(extra.as_ref());
                let phase = (0..g.devices)
                    .map(|d| {
                        let (lo, hi) = g.slab(d);
                        let domain = whole.launch_slab(order, g.axis, lo, hi);
                        (d, spec(kernel.clone(), &objects, domain))
                    })
                    .collect();
                vec![phase]
            }
            // host: shared end
            // host: explicit begin
            Layout::Explicit { slabs, halos } => {
                let a = g.axis.index();
                let compute: Phase = slabs
                    .iter()
                    .enumerate()
                    .map(|(d, s)| {
                        let args = KernelArgs {
                            input: s.fields[i].id,
                            output: s.fields[o].id,
                            bx: s.bx,
                            extra: s.extra.as_ref().map(|e| e.id),
                        };
                        let mut objects = vec![&s.fields[i], &s.fields[o]];
                        objects.extend(s.extra.as_ref());
                        let lo = s.owned.origin[a] - s.bx.origin[a];
                        let hi = lo + s.owned.extent[a];
                        let domain = s.bx.launch_slab(order, g.axis, lo, hi);
                        (d, spec((self.make)(&args), &objects, domain))
                    })
                    .collect();
                let pack: Phase = halos
                    .iter()
                    .map(|h| {
                        let s = &slabs[h.from];
                        let copy = HaloCopy {
                            src: Side::of(&s.fields[o], s.bx),
                            dst: Side::of(&h.buf, h.bx),
                            region: h.bx,
                        };
                        (h.from, copy.spec(&s.fields[o], &h.buf))
                    })
                    .collect();
                let unpack: Phase = halos
                    .iter()
                    .map(|h| {
                        let s = &slabs[h.to];
                        let copy = HaloCopy {
                            src: Side::of(&h.buf, h.bx),
                            dst: Side::of(&s.fields[o], s.bx),
                            region: h.bx,
                        };
                        (h.to, copy.spec(&h.buf, &s.fields[o]))
                    })
                    .collect();
                [compute, pack, unpack]
                    .into_iter()
                    .filter(|p: &Phase| !p.is_empty())
                    .collect()
            } // host: explicit end
        }
    }

    /// Marks the step whose [`Decomposed::phases`] have all run as done: the fields swap.
    pub fn finish_step(&mut self) {
        self.cur = 1 - self.cur;
        self.steps += 1;
    }

    /// Runs one step; returns each device's stats summed over its phases.
    pub fn step(&mut self, procedure: Procedure, schedule: Schedule) -> Result<Vec<PassStats>> {
        let mut total = vec![PassStats::default(); self.sys.devices()];
        for phase in self.phases() {
            let per = run_phase(&self.sys, &phase, procedure, schedule)?;
            for (t, s) in total.iter_mut().zip(&per) {
                t.add(s);
            }
        }
        self.finish_step();
        Ok(total)
    }

    /// The current field over the whole grid, cell (x, y, z) at (z · ny + y) · nx + x.
    pub fn field(&self) -> Result<Vec<f32>> {
        match &self.layout {
            // host: shared begin
            Layout::Shared { fields, .. } => Ok(floats(&self.sys.mm.read(fields[self.cur].id)?)),
            // host: shared end
            // host: explicit begin
            Layout::Explicit { slabs, .. } => {
                let whole = Box3::whole(self.grid.dims);
                let mut out = vec![0.0; whole.cells() as usize];
                for s in slabs {
                    let data = floats(&self.sys.mm.read(s.fields[self.cur].id)?);
                    let o = s.owned;
                    for z in 0..o.extent[2] {
                        for y in 0..o.extent[1] {
                            for x in 0..o.extent[0] {
                                let g = [o.origin[0] + x, o.origin[1] + y, o.origin[2] + z];
                                let l = [
                                    g[0] - s.bx.origin[0],
                                    g[1] - s.bx.origin[1],
                                    g[2] - s.bx.origin[2],
                                ];
                                out[whole.word(g) as usize] = data[s.bx.word(l) as usize];
                            }
                        }
                    }
                }
                Ok(out)
            } // host: explicit end
        }
    }
}
