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
}

super::box_kernel_params! {
    /// What `halo_copy.wgsl` reads as `params`: each side's object, whether it is a buffer
    /// and its box (origin, extent), then the region's box.
    pub struct HaloCopyParams {
        pub src: u32,
        pub src_buffer: u32,
        pub src_ox: u32,
        pub src_oy: u32,
        pub src_oz: u32,
        pub src_ex: u32,
        pub src_ey: u32,
        pub src_ez: u32,
        pub dst: u32,
        pub dst_buffer: u32,
        pub dst_ox: u32,
        pub dst_oy: u32,
        pub dst_oz: u32,
        pub dst_ex: u32,
        pub dst_ey: u32,
        pub dst_ez: u32,
        ..Box3,
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
        let (s, d, r) = (&self.src, &self.dst, &self.region);
        let params = HaloCopyParams {
            src: s.id.0,
            src_buffer: s.buffer as u32,
            src_ox: s.bx.origin[0],
            src_oy: s.bx.origin[1],
            src_oz: s.bx.origin[2],
            src_ex: s.bx.extent[0],
            src_ey: s.bx.extent[1],
            src_ez: s.bx.extent[2],
            dst: d.id.0,
            dst_buffer: d.buffer as u32,
            dst_ox: d.bx.origin[0],
            dst_oy: d.bx.origin[1],
            dst_oz: d.bx.origin[2],
            dst_ex: d.bx.extent[0],
            dst_ey: d.bx.extent[1],
            dst_ez: d.bx.extent[2],
            ..HaloCopyParams::with_box(r)
        };
        Some(WgslKernel::new(
            concat!(include_str!("grid.wgsl"), include_str!("halo_copy.wgsl")),
            &params,
        ))
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
