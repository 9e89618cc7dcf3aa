//! What a kernel's invocation is given and may do, whichever backend runs it: the objects a
//! launch binds and their address constants, the modes, the faults, the limits, the texel
//! access a body is written against, the footprint hint and the WGSL twin's description. The
//! [`Kernel`](crate::Kernel) trait (kernel.rs) and both twins' contexts build on it; it builds
//! on nothing of the runtime but its error.

use tessera_core::{
    Addressing, GlobalPage, MipLayout, ObjectDesc, ObjectEntry, ObjectId, TexelFormat,
};

use crate::error::RuntimeError;

/// How many objects one launch may bind.
pub const MAX_BINDINGS: usize = 8;
/// 32-bit words a kernel's parameter struct may take ([`KernelParams`]).
pub const MAX_PARAMS: usize = 64;
/// Stores one invocation may make. A GPU keeps an invocation's stores in registers until it
/// completes (that is what makes a faulting invocation side-effect free), so the room is
/// fixed; the CPU twin enforces the same limit so that a kernel fails alike on both.
pub const MAX_STORES: usize = 8;

/// What an object is, as [`CoreError::WrongKind`](tessera_core::CoreError::WrongKind) names
/// it: a texture of a format, or (`None`) a buffer. Both backends name the expected and the
/// actual kind with it, so their errors compare equal.
pub fn kind_name(format: Option<TexelFormat>) -> &'static str {
    match format {
        None => "buffer",
        Some(TexelFormat::R32Float) => "R32Float texture",
        Some(TexelFormat::Rgba8Unorm) => "Rgba8Unorm texture",
        Some(TexelFormat::Rgba32Float) => "Rgba32Float texture",
    }
}

/// In a relaunch list ([`crate::Domain::List`]), the top bit of an entry's y: the invocation
/// saved its state ([`Fault::Suspend`]) at an earlier launch of the pass, and
/// [`Invocation::resumed`](crate::Invocation::resumed) says so, so that only such invocations
/// read a saved state (a kernel that reads it unconditionally touches the state's every page at
/// every launch). A backend strips it from the coordinate, and sets it on the invocation's
/// entry in the incomplete list when it suspends or, resumed, faults again. A pass is at most
/// [`MAX_DOMAIN_SIDE`] on a side (`Partition::regions` refuses a larger one), so none of its
/// coordinates has it; a caller of `DeviceContext::launch` keeps its own domains as small.
pub const RESUMED_BIT: u32 = 0x8000_0000;

/// The most invocations a pass's domain has on a side: 2³⁰, leaving the top two bits of a
/// coordinate to a relaunch list's marks ([`RESUMED_BIT`], and one a GPU backend keeps to
/// itself).
pub const MAX_DOMAIN_SIDE: u32 = 1 << 30;

/// Why an invocation stopped early.
#[derive(Debug)]
pub enum Fault {
    /// A page was not resident (or not writable for a store); its request bit is recorded and
    /// the invocation will be relaunched after the requests are serviced.
    Miss,
    /// The invocation met a miss after making progress, stored its state, and asks to be
    /// relaunched from it (the patent's "thread state saved"): in [`Mode::Direct`] its stores
    /// are committed, as if it had completed, and it is relaunched like a faulting one once
    /// its requests are serviced. A kernel returns it only after a load gave
    /// `Err(Fault::Miss)`, so a request is recorded. In the other modes it is a plain miss
    /// (stores dropped): a request pass writes nothing, and a Temp pass's stores reach the
    /// pages only at the merge, after its relaunches, so a relaunch could not read them.
    Suspend,
    /// A bug in the kernel or its inputs; the launch fails with this error. Boxed so that
    /// every load's `Result` stays two words wide on the hot path.
    Error(Box<RuntimeError>),
}

/// The texel access a kernel body is written against, so that one body runs paged (through
/// [`Invocation`](crate::Invocation)), over plain windows of resident pages (the CPU backend's
/// tile path), and on plain arrays (the unpaged original of `tessera bench overhead`). Writing
/// the body once, generic over this trait, is also what makes "paged vs unpaged" measure
/// paging alone.
pub trait TexelAccess {
    fn load_f32(&mut self, id: ObjectId, x: u32, y: u32) -> Result<f32, Fault>;
    fn store_f32(&mut self, id: ObjectId, x: u32, y: u32, v: f32) -> Result<(), Fault>;
    fn store_rgba8(&mut self, id: ObjectId, x: u32, y: u32, v: [u8; 4]) -> Result<(), Fault>;
}

/// What the invocation at (x, y) touches: each object of `reads` within `halo` texels of
/// (x, y) (coordinates clamped to the object), and `write` at (x, y) alone. Objects must be
/// textures of one 32-bit word per texel (R32Float, Rgba8Unorm); others take the per-texel
/// path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub reads: Vec<(ObjectId, u32)>,
    pub write: ObjectId,
}

/// A kernel's WGSL twin: the body (a WGSL source defining `fn kernel_main(x: u32, y: u32)`,
/// written against the backend's prelude: `load_f32`, `store_f32`, `store_rgba8`, …) and
/// its parameters, a [`KernelParams`] struct the body reads as `params.<field>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WgslKernel {
    pub source: &'static str,
    /// The parameter struct's bytes (`bytemuck::bytes_of`).
    pub params: Vec<u8>,
    /// Its fields, from which the backend declares the WGSL `struct Params`.
    pub fields: &'static [ParamField],
}

impl WgslKernel {
    pub fn new<P: KernelParams>(source: &'static str, params: &P) -> Self {
        WgslKernel {
            source,
            params: bytemuck::bytes_of(params).to_vec(),
            fields: P::wgsl_fields(),
        }
    }

    /// The 32-bit words the parameters take in a launch (at most [`MAX_PARAMS`]).
    pub fn param_words(&self) -> usize {
        self.params.len().div_ceil(4)
    }
}

/// The WGSL scalar type of a parameter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarKind {
    U32,
    I32,
    F32,
}

impl ScalarKind {
    pub fn wgsl(self) -> &'static str {
        match self {
            ScalarKind::U32 => "u32",
            ScalarKind::I32 => "i32",
            ScalarKind::F32 => "f32",
        }
    }
}

/// A field of a kernel's parameter struct: its name (the same in Rust and WGSL), its type,
/// and its byte offset in the Rust struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamField {
    pub name: &'static str,
    pub kind: ScalarKind,
    pub offset: usize,
}

/// A type a parameter field may have: a 4-byte scalar WGSL has too. Sealed, so that every
/// field of a [`KernelParams`] struct is 4 bytes wide and 4-aligned, and the struct has no
/// padding and the same layout in Rust's `repr(C)` as in a WGSL uniform.
pub trait ParamScalar: sealed::Sealed {
    const KIND: ScalarKind;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u32 {}
    impl Sealed for i32 {}
    impl Sealed for f32 {}
}

impl ParamScalar for u32 {
    const KIND: ScalarKind = ScalarKind::U32;
}
impl ParamScalar for i32 {
    const KIND: ScalarKind = ScalarKind::I32;
}
impl ParamScalar for f32 {
    const KIND: ScalarKind = ScalarKind::F32;
}

/// A kernel's parameters: one `#[repr(C)]` struct both twins read, the CPU twin as a Rust
/// value and the WGSL twin as `params`, whose `struct Params` the backend declares from
/// [`KernelParams::wgsl_fields`]. Declare it with [`kernel_params!`](crate::kernel_params),
/// which writes the struct and its field table together, so that they cannot disagree.
pub trait KernelParams: bytemuck::Pod {
    fn wgsl_fields() -> &'static [ParamField];
}

/// A kernel with no parameters.
impl KernelParams for () {
    fn wgsl_fields() -> &'static [ParamField] {
        &[]
    }
}

/// Declares a kernel's parameter struct and its [`KernelParams`](crate::KernelParams) field
/// table in one place. Fields are `u32`, `i32` or `f32`; the WGSL twin reads field `f` as
/// `params.f`, so a name WGSL reserves (`filter`, `from`, …) fails to compile here, not on
/// the GPU, and so does a raw identifier (`r#type`: WGSL has none, and the Rust keywords it
/// would spell are WGSL's too). The crate using it needs no dependency of its own: the
/// struct's `bytemuck` traits come through this crate, and the `tessera` crate re-exports it.
///
/// ```
/// # extern crate tessera_runtime as tessera;
/// tessera::kernel_params! {
///     /// What the blur reads.
///     pub struct BlurParams {
///         pub src: u32,
///         pub dst: u32,
///         pub weight: f32,
///     }
/// }
/// ```
///
/// ```compile_fail,E0080
/// # extern crate tessera_runtime as tessera;
/// tessera::kernel_params! {
///     struct Copy2 {
///         from: u32, // reserved in WGSL
///     }
/// }
/// ```
///
/// ```compile_fail,E0080
/// # extern crate tessera_runtime as tessera;
/// tessera::kernel_params! {
///     struct Typed {
///         r#type: u32, // a raw identifier: WGSL would read `r#type`
///     }
/// }
/// ```
#[macro_export]
macro_rules! kernel_params {
    ($(#[$meta:meta])* $vis:vis struct $name:ident {
        $($(#[$fmeta:meta])* $fvis:vis $field:ident: $ty:ty),* $(,)?
    }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        $vis struct $name {
            $($(#[$fmeta])* $fvis $field: $ty,)*
        }

        // SAFETY: a `repr(C)` struct whose fields are all `ParamScalar`s (`wgsl_fields` below
        // does not compile otherwise), a sealed trait of `u32`, `i32` and `f32` alone: every
        // bit pattern of each is a valid value, zero included, and the assertion under these
        // checks that four-byte fields left no padding. These are what bytemuck's derives
        // check; written out, the user's crate needs no bytemuck of its own.
        unsafe impl $crate::__bytemuck::Zeroable for $name {}
        // SAFETY: as above; the struct is `Copy` and owns no reference.
        unsafe impl $crate::__bytemuck::Pod for $name {}
        const _: () = assert!(
            ::std::mem::size_of::<$name>() == 0 $(+ ::std::mem::size_of::<$ty>())*,
            "a kernel parameter struct has no padding",
        );

        $(const _: () = assert!(
            $crate::wgsl_name_ok(stringify!($field)),
            concat!(
                "kernel parameter `",
                stringify!($field),
                "` is a reserved word in WGSL, or a raw identifier, which WGSL has none of"
            ),
        );)*

        impl $crate::KernelParams for $name {
            fn wgsl_fields() -> &'static [$crate::ParamField] {
                &[$($crate::ParamField {
                    name: stringify!($field),
                    kind: <$ty as $crate::ParamScalar>::KIND,
                    offset: ::std::mem::offset_of!($name, $field),
                },)*]
            }
        }
    };
}

/// How a launch treats misses and stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Request-recording pass (paper 3.4): a missing load records a read request and yields
    /// zero so the invocation goes on to record its other requests; stores are dropped.
    Request,
    /// Compute with faults (the patent): misses fault; stores go straight to the pages.
    Direct,
    /// Compute into a temporary (paper 3.5, second pass): misses fault on loads; stores go to
    /// a temporary with their write mask, and stores to pages not held writable record write
    /// requests. A later merge writes the temporary into the pages.
    Temp,
}

/// A bound object with its address constants precomputed for the hot path.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub id: ObjectId,
    /// The address space of the entry it was bound from (`ObjectEntry::space`).
    pub space: u64,
    pub page_offset: u64,
    /// One past the object's last global page.
    pub pages_end: u64,
    pub(crate) width: u64,
    pub(crate) height: u64,
    pub(crate) pages_x: u64,
    pub(crate) shift: u32,
    pub(crate) mask: u64,
    pub(crate) words_per_texel: u64,
    pub(crate) slot_words: u64,
    pub(crate) format: Option<TexelFormat>,
    /// A mipmapped texture's chain layout and addressing: its texels are read by level
    /// (`load_rgba8_level`, `sample_rgba8`), never by the plain accesses.
    pub(crate) mip: Option<(MipLayout, Addressing)>,
}

impl Bound {
    /// Whether both describe the same pages with the same shape, mip chain included (a
    /// texture relabelled a chain of one level had the same pages and sides).
    pub(crate) fn same_object(&self, other: &Bound) -> bool {
        (
            self.id,
            self.space,
            self.page_offset,
            self.pages_end,
            self.width,
            self.height,
        ) == (
            other.id,
            other.space,
            other.page_offset,
            other.pages_end,
            other.width,
            other.height,
        ) && (self.words_per_texel, self.slot_words, self.format, self.mip)
            == (
                other.words_per_texel,
                other.slot_words,
                other.format,
                other.mip,
            )
    }

    pub fn new(e: &ObjectEntry) -> Self {
        let (width, height) = e.desc.extent();
        let (pages_x, _) = e.desc.pages_xy();
        match e.desc {
            ObjectDesc::Texture { format, page, .. } => Bound {
                id: e.id,
                space: e.space,
                page_offset: e.page_offset,
                pages_end: e.pages().end,
                width,
                height,
                pages_x,
                shift: page.shift(),
                mask: page.get() as u64 - 1,
                words_per_texel: format.bytes() as u64 / 4,
                slot_words: page.texels() * format.bytes() as u64 / 4,
                format: Some(format),
                mip: None,
            },
            // Buffers are addressed in 32-bit words: "x" is the word index.
            ObjectDesc::Buffer { len, page_bytes } => Bound {
                id: e.id,
                space: e.space,
                page_offset: e.page_offset,
                pages_end: e.pages().end,
                width: len / 4,
                height: 1,
                pages_x,
                shift: (page_bytes / 4).trailing_zeros(),
                mask: page_bytes / 4 - 1,
                words_per_texel: 1,
                slot_words: page_bytes / 4,
                format: None,
                mip: None,
            },
            ObjectDesc::Mipmapped {
                layout,
                format,
                addressing,
            } => {
                let (w, h) = layout.extent(0).unwrap_or((1, 1));
                let (px, _) = layout.pages_xy(0).unwrap_or((1, 1));
                Bound {
                    id: e.id,
                    space: e.space,
                    page_offset: e.page_offset,
                    pages_end: e.pages().end,
                    width: w,
                    height: h,
                    pages_x: px,
                    shift: layout.page().shift(),
                    mask: layout.page().get() as u64 - 1,
                    words_per_texel: format.bytes() as u64 / 4,
                    slot_words: layout.slot_texels() * format.bytes() as u64 / 4,
                    format: Some(format),
                    mip: Some((layout, addressing)),
                }
            }
        }
    }

    /// Whether it is a buffer, addressed by word.
    pub fn is_buffer(&self) -> bool {
        self.format.is_none() && self.mip.is_none()
    }
    /// Width in texels (in words for a buffer).
    pub fn width(&self) -> u64 {
        self.width
    }
    /// Height in texels (1 for a buffer).
    pub fn height(&self) -> u64 {
        self.height
    }
    /// Pages per row of the object.
    pub fn pages_x(&self) -> u64 {
        self.pages_x
    }
    /// log2 of the page side (of the page's words, for a buffer).
    pub fn shift(&self) -> u32 {
        self.shift
    }
    pub fn words_per_texel(&self) -> u64 {
        self.words_per_texel
    }
    /// 32-bit words per page slot.
    pub fn slot_words(&self) -> u64 {
        self.slot_words
    }
    /// A mipmapped texture's layout and addressing; `None` for other objects.
    pub fn mip(&self) -> Option<(MipLayout, Addressing)> {
        self.mip
    }
    /// The texel format; `None` for a buffer.
    pub fn format(&self) -> Option<TexelFormat> {
        self.format
    }

    /// Global page and word offset inside the page's slot of texel (x, y).
    #[inline]
    pub(crate) fn locate(&self, x: u64, y: u64) -> (u64, u64) {
        if self.format.is_none() {
            return (self.page_offset + (x >> self.shift), x & self.mask);
        }
        let local = (x >> self.shift) + (y >> self.shift) * self.pages_x;
        let off = (((y & self.mask) << self.shift) | (x & self.mask)) * self.words_per_texel;
        (self.page_offset + local, off)
    }
}

/// A store kept in the launch's temporary for the merge pass: page, word in the page, value.
/// Its presence is the write mask.
#[derive(Clone, Copy, Debug)]
pub struct TempStore {
    pub page: GlobalPage,
    pub word: u32,
    pub value: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::kernel_params! {
        struct Sample {
            id: u32,
            scale: f32,
            shift: i32,
        }
    }

    /// The field table is the struct's fields in order, each 4 bytes after the last, and the
    /// bytes a kernel carries are the struct's own.
    #[test]
    fn params_carry_the_struct_and_its_fields() {
        let p = Sample {
            id: 7,
            scale: 0.5,
            shift: -3,
        };
        let w = WgslKernel::new("", &p);
        let table: Vec<_> = w
            .fields
            .iter()
            .map(|f| (f.name, f.kind, f.offset))
            .collect();
        assert_eq!(
            table,
            [
                ("id", ScalarKind::U32, 0),
                ("scale", ScalarKind::F32, 4),
                ("shift", ScalarKind::I32, 8),
            ]
        );
        assert_eq!(w.param_words(), 3);
        let words: Vec<u32> = w
            .params
            .chunks_exact(4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        assert_eq!(words, [7, 0.5f32.to_bits(), (-3i32) as u32]);
        assert_eq!(WgslKernel::new("", &()).param_words(), 0);
    }
}
