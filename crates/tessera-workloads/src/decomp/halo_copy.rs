//! The explicit version's copy kernel (twin of `halo_copy.wgsl`): copies the cells of a box
//! from one object to another, each laid out as the module docs say (a texture of the
//! object's box, or a dense buffer of the box's cells). It is the plain copy a user of the
//! runtime writes: the runtime offers no copy call between objects, so a copy is a pass, and
//! its pages move between devices through the ordinary page moves (docs/ARCHITECTURE.md).
use std::sync::Arc;

use tessera_core::{ObjectDesc, ObjectEntry, ObjectId};
use tessera_runtime::{Bound, Fault, Invocation, Kernel, PassSpec, WgslKernel};

use super::Box3;

/// One side of a copy: an object and the box of cells it holds.
#[derive(Clone, Copy, Debug)]
pub struct Side {
    pub id: ObjectId,
    pub bx: Box3,
    /// A dense buffer of the box's cells rather than a texture.
    pub buffer: bool,
}

impl Side {
    pub fn of(e: &ObjectEntry, bx: Box3) -> Self {
        Side {
            id: e.id,
            bx,
            buffer: matches!(e.desc, ObjectDesc::Buffer { .. }),
        }
    }

    #[inline(always)]
    fn load(&self, inv: &mut Invocation<'_>, g: [u32; 3]) -> Result<u32, Fault> {
        let l = local(&self.bx, g);
        if self.buffer {
            inv.load_u32(self.id, self.bx.word(l))
        } else {
            let (x, y) = self.bx.texel(l);
            Ok(inv.load_f32(self.id, x, y)?.to_bits())
        }
    }

    #[inline(always)]
    fn store(&self, inv: &mut Invocation<'_>, g: [u32; 3], v: u32) -> Result<(), Fault> {
        let l = local(&self.bx, g);
        if self.buffer {
            inv.store_u32(self.id, self.bx.word(l), v)
        } else {
            let (x, y) = self.bx.texel(l);
            inv.store_f32(self.id, x, y, f32::from_bits(v))
        }
    }

    fn words(&self) -> Vec<u32> {
        let mut w = vec![self.id.0, self.buffer as u32];
        w.extend(self.bx.words());
        w
    }
}

#[inline(always)]
fn local(b: &Box3, g: [u32; 3]) -> [u32; 3] {
    // Wrapping keeps a cell outside the box out of range (the runtime's bounds check fails
    // the launch) instead of panicking in the kernel.
    [
        g[0].wrapping_sub(b.origin[0]),
        g[1].wrapping_sub(b.origin[1]),
        g[2].wrapping_sub(b.origin[2]),
    ]
}

/// Copies the cells of `region` from `src` to `dst`; invocation (u, v) is the region's cell
/// (u, v mod ny, v / ny).
#[derive(Clone, Copy, Debug)]
pub struct HaloCopy {
    pub src: Side,
    pub dst: Side,
    pub region: Box3,
}

impl HaloCopy {
    /// The pass, with its domain the whole region.
    pub fn spec(self, src: &ObjectEntry, dst: &ObjectEntry) -> PassSpec {
        PassSpec {
            kernel: Arc::new(self),
            bindings: Arc::new(vec![Bound::new(src), Bound::new(dst)]),
            domain: self.region.launch_all(),
            display: false,
        }
    }
}

impl Kernel for HaloCopy {
    fn name(&self) -> &'static str {
        "halo_copy"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        let mut params = self.src.words();
        params.extend(self.dst.words());
        params.extend(self.region.words());
        Some(WgslKernel {
            source: concat!(include_str!("grid.wgsl"), include_str!("halo_copy.wgsl")),
            params,
        })
    }
    #[inline]
    fn invoke(&self, inv: &mut Invocation<'_>, u: u32, v: u32) -> Result<(), Fault> {
        let r = &self.region;
        let l = r.unlaunch(super::Order::Zy, u, v);
        let g = [r.origin[0] + l[0], r.origin[1] + l[1], r.origin[2] + l[2]];
        let w = self.src.load(inv, g)?;
        self.dst.store(inv, g, w)
    }
}
