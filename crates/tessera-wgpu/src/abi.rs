//! The ABI between the host and the shaders, declared once, here, in Rust.
//!
//! Every constant and every struct that both the host and a shader read is defined below, and
//! [`header`] writes their WGSL declarations; the device compiles every shader (prelude,
//! compaction, merge, unpaged prelude) after that header, and the hand-written WGSL declares
//! none of them. A field added here is in the shaders at the next compile, under the same
//! name, so the two sides cannot drift apart (vello keeps `config.rs` and `config.wgsl` side by
//! side by hand instead). What the generator cannot make equal by construction is the layout:
//! Rust's `repr(C)` and WGSL's layout rules differ (WGSL aligns a `vec4` to 16 bytes and pads
//! a struct to its alignment). The tests parse the header with naga and compare every
//! member's offset and every struct's size with Rust's.
//!
//! A kernel's own parameters are a struct of its crate ([`tessera_runtime::KernelParams`]);
//! [`params_declaration`] writes its WGSL twin from its field table when the kernel compiles.
//!
//! The limits come from `tessera_runtime::kernel`, where the CPU backend reads them too.

use bytemuck::{Pod, Zeroable};
use tessera_core::TexelFormat;
use tessera_runtime::kernel as limits;
use tessera_runtime::{Mode, ParamField};

/// Physical memories one kernel can bind (the prelude's `switch` has this many arms).
pub const MAX_MEMORIES: usize = 4;

/// Storage buffers the prelude binds (page table, 4 memories, list, bits, status, incomplete,
/// temporary, leftover, time stamps, 4 remote buffers, the queue's gate).
pub(crate) const STORAGE_BINDINGS: u32 = 13 + REMOTE_SLOTS;

/// A Rust type the shaders see, and its WGSL name.
pub trait WgslType {
    fn wgsl_type() -> String;
}

impl WgslType for u32 {
    fn wgsl_type() -> String {
        "u32".into()
    }
}

/// WGSL's `vec4<u32>`: what uniform arrays of words are made of (a uniform array's stride
/// must be a multiple of 16 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Vec4U32(pub [u32; 4]);

impl WgslType for Vec4U32 {
    fn wgsl_type() -> String {
        "vec4<u32>".into()
    }
}

/// WGSL's `atomic<u32>`: the host reads it back as a word.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Atomic(pub u32);

impl WgslType for Atomic {
    fn wgsl_type() -> String {
        "atomic<u32>".into()
    }
}

impl<T: WgslType, const N: usize> WgslType for [T; N] {
    fn wgsl_type() -> String {
        format!("array<{}, {N}>", T::wgsl_type())
    }
}

/// A struct both sides share: its WGSL declaration and Rust's layout of it.
pub trait AbiStruct: Pod {
    const NAME: &'static str;
    fn declaration() -> String;
    /// (member, byte offset) in declaration order.
    fn rust_layout() -> Vec<(&'static str, usize)>;
}

/// Declares a shared struct once: the Rust struct (`repr(C)`, `Pod`) and its WGSL twin.
macro_rules! abi_struct {
    ($(#[doc = $doc:expr])* $name:ident { $($(#[doc = $fdoc:expr])* $field:ident: $ty:ty,)* }) => {
        $(#[doc = $doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
        pub struct $name {
            $($(#[doc = $fdoc])* pub $field: $ty,)*
        }

        impl WgslType for $name {
            fn wgsl_type() -> String {
                stringify!($name).into()
            }
        }

        impl AbiStruct for $name {
            const NAME: &'static str = stringify!($name);
            fn declaration() -> String {
                let mut s = format!("struct {} {{\n", stringify!($name));
                $(s += &format!("    {}: {},\n", stringify!($field), <$ty as WgslType>::wgsl_type());)*
                s + "}\n"
            }
            fn rust_layout() -> Vec<(&'static str, usize)> {
                vec![$((stringify!($field), std::mem::offset_of!($name, $field)),)*]
            }
        }
    };
}

/// Declares shared `u32` constants once: Rust constants and their WGSL twins.
macro_rules! abi_consts {
    ($($(#[doc = $doc:expr])* $name:ident = $value:expr;)*) => {
        $($(#[doc = $doc])* pub const $name: u32 = $value;)*
        /// Every shared constant, for the header.
        const CONSTS: &[(&str, u32)] = &[$((stringify!($name), $name),)*];
    };
}

abi_consts! {
    /// "No binding", "no error": never a valid index.
    NONE = u32::MAX;
    MAX_BINDINGS = limits::MAX_BINDINGS as u32;
    MAX_PARAMS = limits::MAX_PARAMS as u32;
    MAX_STORES = limits::MAX_STORES as u32;
    /// Slots of `LaunchInfo::by_id`: one per id class (id mod BY_ID_SLOTS).
    BY_ID_SLOTS = 16;
    /// `LaunchInfo::mode`: `tessera_runtime::Mode`, see [`mode_code`].
    MODE_REQUEST = 0;
    MODE_DIRECT = 1;
    MODE_TEMP = 2;
    /// `BindInfo::format` and `Status::error_format`: see [`format_code`].
    FORMAT_BUFFER = 0;
    FORMAT_R32_FLOAT = 1;
    FORMAT_RGBA8_UNORM = 2;
    FORMAT_RGBA32_FLOAT = 3;
    /// `Status::error_format` only: a level access or sample expected a mipmapped texture.
    FORMAT_MIPMAPPED = 4;
    /// `Status::error_kind`: what the first failing invocation did wrong.
    ERR_OUT_OF_RANGE = 1;
    ERR_UNBOUND = 2;
    ERR_TOO_MANY_STORES = 3;
    ERR_WRONG_FORMAT = 4;
    /// The merge found a page mapped outside its physical memory (a host bug, not a kernel's).
    ERR_BAD_SLOT = 5;
    /// A level access outside the chain or its level; `Status::error_format` is the level.
    ERR_LEVEL = 6;
    /// `BindInfo::mip`: set for a mipmapped texture, with levels (bits 0-7), border (8-15)
    /// and addressing (bit 16: 0 wrap, 1 clamp).
    MIP_BIT = 0x8000_0000;
    /// The per-texel entry point's workgroup (the prelude's `main`, the unpaged twin's): rows
    /// of 32 invocations, so that a warp reads 128 contiguous bytes of a row.
    GROUP_X = 32;
    GROUP_Y = 8;
    /// Reads of a footprint the tile path keeps windows for.
    FP_MAX = 4;
    /// In y of a relaunch list's entry: the invocation saved its state at an earlier launch
    /// (`tessera_runtime::RESUMED_BIT`; the prelude's `resumed()`).
    RESUMED_BIT = tessera_runtime::RESUMED_BIT;
    /// In y of an incomplete entry: it saved its state at this launch. The host counts the
    /// entries so marked and strips the mark; the list keeps `RESUMED_BIT`.
    SAVED_NOW_BIT = 0x4000_0000;
    /// Remote objects one launch binds (buffers `remote0..3`, memories 4..7 in the prelude).
    REMOTE_SLOTS = 4;
    /// The prelude's memory index of remote buffer 0 (after the MAX_MEMORIES memories).
    REMOTE_MEM0 = 4;
    /// Marks a buffered store to a remote buffer in a Temp launch, which bypasses the
    /// temporary (a remote page is written in place, never merged).
    REMOTE_TAG = 0x8000_0000;
    /// Objects of an unpaged run (ids index its object table).
    UNPAGED_MAX_OBJECTS = 8;
}

const _: () = assert!(limits::MAX_PARAMS.is_multiple_of(4) && BY_ID_SLOTS.is_multiple_of(4));
// The merge's per-memory parameters are one vec4 each, and the prelude's switch has 4 arms.
const _: () = assert!(MAX_MEMORIES == 4 && REMOTE_MEM0 as usize == MAX_MEMORIES);

/// Words of a uniform array of `n` words.
const fn vec4s(n: usize) -> usize {
    n / 4
}

abi_struct! {
    /// One bound object: `tessera_runtime::Bound`'s address constants.
    BindInfo {
        id: u32,
        page_offset: u32,
        width: u32,
        height: u32,
        pages_x: u32,
        shift: u32,
        words_per_texel: u32,
        slot_words: u32,
        format: u32,
        /// 0: the object's pages are translated through the page table; k + 1: the object
        /// is remote and its pages are remote buffer k (memory `MAX_MEMORIES + k`).
        remote: u32,
        /// A mipmapped texture's chain: see `MIP_BIT`; 0 for other objects.
        mip: u32,
        _pad2: u32,
    }
}

/// `BindInfo::mip` of a bound object.
pub fn mip_code(b: &tessera_runtime::Bound) -> u32 {
    match b.mip() {
        None => 0,
        Some((layout, addressing)) => {
            let a = match addressing {
                tessera_core::Addressing::Wrap => 0,
                tessera_core::Addressing::Clamp => 1,
            };
            MIP_BIT | layout.levels() | layout.border() << 8 | a << 16
        }
    }
}

abi_struct! {
    /// The prelude's launch uniform.
    LaunchInfo {
        /// The kernel's parameter struct ([`tessera_runtime::KernelParams`]), first so that
        /// the prelude can bind these words again, at offset 0 of the same buffer, as the
        /// kernel's `params: Params`.
        params: [Vec4U32; vec4s(limits::MAX_PARAMS)],
        mode: u32,
        is_list: u32,
        x0: u32,
        y0: u32,
        x1: u32,
        y1: u32,
        count: u32,
        nbind: u32,
        /// Invocations per dispatch row of a list launch.
        row: u32,
        /// Words of each request bit field (read at [0, n), write at [n, 2n)).
        bit_words: u32,
        /// Mode::Temp: entries of the temporary per invocation; invocation i of the launch
        /// owns [temp_base + i * temp_k, temp_base + (i + 1) * temp_k), earlier launches of
        /// the pass [0, temp_base). Fixed places need no atomic counter, which every storing
        /// invocation of the launch would contend for.
        temp_k: u32,
        temp_base: u32,
        binds: [BindInfo; limits::MAX_BINDINGS],
        /// Binding + 1 of the object whose id is i mod BY_ID_SLOTS (0: none, or look
        /// further): one uniform load finds a binding in the common case.
        by_id: [Vec4U32; vec4s(BY_ID_SLOTS as usize)],
        /// The tile path (`tessera_runtime::Footprint`): per read, (binding, halo, 0, 0);
        /// `fp_n` reads, 0 for the per-texel path.
        fp: [Vec4U32; FP_MAX as usize],
        fp_n: u32,
        /// The launch's time (`Launch::time`) as a 32-bit stamp ([`stamp_of`]): written into
        /// the time stamp of every page the launch translates.
        time: u32,
        /// Place of a queued launch in the wgpu queue its device shares (1, 2, ...; 0: not
        /// queued). The launch does nothing if the queue's gate ([`GATE_BINDING`]) is below it:
        /// a launch queued before it, on this tessera device or another on the same wgpu
        /// device, faulted or failed, so it runs again after the faults are serviced.
        seq: u32,
        /// The tile path in Mode::Direct: binding + 1 of the footprint's written object (0:
        /// none, or remote). Where a workgroup's tile lies in one page of it, that page is
        /// stamped once for the group, not by each invocation's store.
        fp_write: u32,
    }
}

abi_struct! {
    /// What a launch or a merge reports, read back after it.
    Status {
        /// Invocations that failed with an error.
        failed: Atomic,
        /// The lowest launch-order index of a failing invocation (NONE: none failed).
        first: Atomic,
        /// What a failing invocation did wrong (`ERR_*`), on which object, where, and the
        /// format it expected. Written by every failing invocation, so the host trusts them
        /// only where one failed; otherwise it runs the `first` one again alone.
        error_kind: Atomic,
        error_object: Atomic,
        error_x: Atomic,
        error_y: Atomic,
        error_format: Atomic,
        /// Launch: invocations that faulted. Merge: stores written.
        incomplete: Atomic,
        /// Launch (Temp): the most stores an invocation needed. Merge: stores left over.
        temp: Atomic,
        /// In a read-back: the queue's gate as the launch left it ([`GATE_BINDING`]), the
        /// lowest `LaunchInfo::seq` of a queued launch that faulted or failed since the queue
        /// was settled (NONE: none). The prelude does not use this word; the per-launch reset
        /// leaves it alone ([`STATUS_RESET_BYTES`]).
        gate: Atomic,
    }
}

abi_struct! {
    /// The merge's own uniform (it reads `LaunchInfo::bit_words` as `record` does).
    MergeInfo {
        /// Entries of the temporary (empty ones, kind 0, are skipped).
        count: u32,
        /// Entries per dispatch row.
        row: u32,
        /// Physical memories that exist.
        memories: u32,
        _pad: u32,
        /// Words per slot of each physical memory.
        slot_words: Vec4U32,
        /// Slots of each physical memory.
        capacity: Vec4U32,
    }
}

abi_struct! {
    /// The compaction's uniform.
    CompactInfo {
        /// Words of each request bit field.
        words: u32,
        /// Words per dispatch row.
        row: u32,
        _pad0: u32,
        _pad1: u32,
    }
}

abi_struct! {
    /// The head of the compaction's request list; `(page, write)` pairs follow it.
    RequestsHead {
        count: Atomic,
        _pad: u32,
    }
}

abi_struct! {
    /// An object of an unpaged run.
    UnpagedObject {
        /// First word of the object in the word buffer.
        base: u32,
        width: u32,
        height: u32,
        words_per_texel: u32,
    }
}

abi_struct! {
    /// The unpaged prelude's object table, indexed by id.
    UnpagedObjects {
        o: [UnpagedObject; UNPAGED_MAX_OBJECTS as usize],
    }
}

abi_struct! {
    /// The unpaged prelude's launch uniform.
    UnpagedLaunch {
        /// The kernel's parameter struct, bound again as `params` (see `LaunchInfo`).
        params: [Vec4U32; vec4s(limits::MAX_PARAMS)],
        width: u32,
        height: u32,
        _pad0: u32,
        _pad1: u32,
    }
}

/// Every shared struct: name, WGSL declaration, Rust layout and size.
type Described = (&'static str, String, Vec<(&'static str, usize)>, usize);

fn describe<T: AbiStruct>() -> Described {
    (
        T::NAME,
        T::declaration(),
        T::rust_layout(),
        std::mem::size_of::<T>(),
    )
}

fn structs() -> Vec<Described> {
    vec![
        describe::<BindInfo>(),
        describe::<LaunchInfo>(),
        describe::<Status>(),
        describe::<MergeInfo>(),
        describe::<CompactInfo>(),
        describe::<RequestsHead>(),
        describe::<UnpagedObject>(),
        describe::<UnpagedObjects>(),
        describe::<UnpagedLaunch>(),
    ]
}

/// The WGSL declarations of every shared constant and struct, compiled before every shader.
pub fn header() -> String {
    let mut s = String::from("// Generated by tessera_wgpu::abi: edit the Rust, not this.\n");
    for (name, value) in CONSTS {
        s += &format!("const {name}: u32 = {value}u;\n");
    }
    for (_, decl, _, _) in structs() {
        s += &decl;
    }
    s
}

/// A shader as compiled: the generated header, then the hand-written sources.
pub fn shader(sources: &[&str]) -> String {
    let mut s = header();
    for src in sources {
        s.push('\n');
        s += src;
    }
    s
}

/// Bytes a kernel's parameters are bound with: every word a launch may carry, whatever the
/// kernel's own struct (`LaunchInfo::params`).
pub const PARAMS_BYTES: u64 = limits::MAX_PARAMS as u64 * 4;

/// The WGSL declaration of a kernel's parameter struct, `Params`, that the preludes bind as
/// `params`: the Rust struct's fields in order, under their names. Every field is a 4-byte
/// scalar ([`tessera_runtime::ParamScalar`]), so both sides put field i at byte 4i, in a
/// uniform too; the tests check it with naga. WGSL has no empty struct: a kernel with no
/// parameters gets one unused word.
pub fn params_declaration(fields: &[ParamField]) -> String {
    let mut s = String::from("struct Params {\n");
    for f in fields {
        s += &format!("    {}: {},\n", f.name, f.kind.wgsl());
    }
    if fields.is_empty() {
        s += "    _unused: u32,\n";
    }
    s + "}\n"
}

/// A shader that includes a prelude: the header, the kernel's `Params` (see
/// [`params_declaration`]), then the sources.
pub fn kernel_shader(fields: &[ParamField], sources: &[&str]) -> String {
    let mut s = header();
    s += &params_declaration(fields);
    for src in sources {
        s.push('\n');
        s += src;
    }
    s
}

/// `LaunchInfo::mode` of a mode.
pub fn mode_code(mode: Mode) -> u32 {
    match mode {
        Mode::Request => MODE_REQUEST,
        Mode::Direct => MODE_DIRECT,
        Mode::Temp => MODE_TEMP,
    }
}

/// `BindInfo::format` of a texture format, or of a buffer (`None`).
pub fn format_code(format: Option<TexelFormat>) -> u32 {
    match format {
        None => FORMAT_BUFFER,
        Some(TexelFormat::R32Float) => FORMAT_R32_FLOAT,
        Some(TexelFormat::Rgba8Unorm) => FORMAT_RGBA8_UNORM,
        Some(TexelFormat::Rgba32Float) => FORMAT_RGBA32_FLOAT,
    }
}

/// The format a code names; `None` for a code that is not one.
pub fn format_of(code: u32) -> Option<Option<TexelFormat>> {
    [
        None,
        Some(TexelFormat::R32Float),
        Some(TexelFormat::Rgba8Unorm),
        Some(TexelFormat::Rgba32Float),
    ]
    .into_iter()
    .find(|f| format_code(*f) == code)
}

/// Stamps cycle through 1..=STAMP_CYCLE; 0 is "never touched".
const STAMP_CYCLE: u64 = u32::MAX as u64;

/// The 32-bit time stamp the shaders write for a launch at `time`: the launch counter taken
/// through 1..=2^32-1 (0 stays "never", so a launch at a multiple of 2^32 does not read as
/// one that never happened). The host widens it back with [`time_of`].
pub fn stamp_of(time: u64) -> u32 {
    if time == 0 {
        0
    } else {
        ((time - 1) % STAMP_CYCLE + 1) as u32
    }
}

/// The launch time a stamp stands for, given `now`, the latest launch time the device has
/// seen: the latest time at or before `now` with that stamp. Exact for every page touched in
/// the last 2^32-1 launches. An older stamp reads as more recent than it is (by a multiple of
/// 2^32-1); LRU and clock compare stamps to pick the least recently used page, and a page
/// untouched for four billion launches of one device is not a case a run meets.
pub fn time_of(stamp: u32, now: u64) -> u64 {
    if stamp == 0 {
        return 0;
    }
    let behind = (stamp_of(now) as u64 + STAMP_CYCLE - stamp as u64) % STAMP_CYCLE;
    now.saturating_sub(behind)
}

/// The prelude's binding of the queue's gate: one word on the wgpu device, shared by the
/// tessera devices on it (`gpu::Opened::gate`). After a queued launch it is copied into the
/// launch's read-back as [`Status::gate`].
pub const GATE_BINDING: u32 = 19;

/// Bytes of [`Status`] a launch resets before it runs: all but the last word, the gate, which
/// lives as long as the device's queue of launches.
pub const STATUS_RESET_BYTES: u64 = std::mem::size_of::<Status>() as u64 - 4;
const _: () = assert!(std::mem::offset_of!(Status, gate) as u64 == STATUS_RESET_BYTES);

impl Status {
    /// Before a launch: nothing failed.
    pub fn initial() -> Self {
        Status {
            first: Atomic(NONE),
            gate: Atomic(NONE),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A struct as WGSL lays it out: name, (member, offset), size.
    type Laid = (String, Vec<(String, u32)>, u32);

    /// Parses `code` as the device does and lays out its structs by WGSL's rules.
    fn wgsl_layouts(code: &str) -> Vec<Laid> {
        let module = naga::front::wgsl::parse_str(code).expect("the header parses");
        let mut layouter = naga::proc::Layouter::default();
        layouter
            .update(module.to_ctx())
            .expect("the header lays out");
        module
            .types
            .iter()
            .filter_map(|(_, ty)| match &ty.inner {
                naga::TypeInner::Struct { members, span } => Some((
                    ty.name.clone().unwrap_or_default(),
                    members
                        .iter()
                        .map(|m| (m.name.clone().unwrap_or_default(), m.offset))
                        .collect(),
                    *span,
                )),
                _ => None,
            })
            .collect()
    }

    /// The drift test: every shared struct has, in WGSL as compiled, the members Rust has,
    /// at the offsets Rust puts them, and the size Rust gives it; and WGSL has no struct of
    /// its own in the header. A field on one side only, or one that WGSL's alignment rules
    /// place elsewhere, fails here.
    #[test]
    fn wgsl_layout_is_rust_layout() {
        let wgsl = wgsl_layouts(&header());
        let rust = structs();
        for (name, _, fields, size) in &rust {
            let (_, members, span) = wgsl
                .iter()
                .find(|(n, _, _)| n == name)
                .unwrap_or_else(|| panic!("struct {name} is not in the WGSL header"));
            let rust_fields: Vec<(String, u32)> = fields
                .iter()
                .map(|(f, o)| (f.to_string(), *o as u32))
                .collect();
            assert_eq!(
                members, &rust_fields,
                "struct {name}: WGSL members (left) differ from Rust's (right)"
            );
            assert_eq!(
                *span as usize, *size,
                "struct {name}: WGSL size (left) differs from Rust's (right)"
            );
        }
        for (name, _, _) in &wgsl {
            assert!(
                rust.iter().any(|(n, _, _, _)| n == name),
                "struct {name} is in the WGSL header but not in Rust"
            );
        }
    }

    tessera_runtime::kernel_params! {
        /// A parameter struct of every field kind.
        struct Sample {
            out: u32,
            scale: f32,
            shift: i32,
            count: u32,
            last: f32,
        }
    }

    /// A kernel's `Params` as WGSL lays it out in a uniform is the Rust struct's layout:
    /// the same members at the same offsets, and no larger than Rust's (the binding carries
    /// only the Rust struct's bytes).
    #[test]
    fn wgsl_params_layout_is_rust_layout() {
        use tessera_runtime::KernelParams;
        let code = kernel_shader(
            Sample::wgsl_fields(),
            &["@group(0) @binding(0) var<uniform> params: Params;"],
        );
        let wgsl = wgsl_layouts(&code);
        let (_, members, span) = wgsl
            .iter()
            .find(|(n, _, _)| n == "Params")
            .expect("Params is declared");
        let rust: Vec<(String, u32)> = Sample::wgsl_fields()
            .iter()
            .map(|f| (f.name.to_string(), f.offset as u32))
            .collect();
        assert_eq!(
            members, &rust,
            "WGSL members (left) differ from Rust's (right)"
        );
        assert_eq!(*span as usize, std::mem::size_of::<Sample>());
        assert!(PARAMS_BYTES as usize >= std::mem::size_of::<Sample>());
        let empty = wgsl_layouts(&kernel_shader(&[], &[]));
        assert!(empty.iter().any(|(n, _, _)| n == "Params"));
    }

    /// The hand-written shaders compile after the header (naga's full validation, no GPU
    /// needed), so none of them declares again what the header declares, and none uses a
    /// name the header lacks.
    #[test]
    fn shaders_compile_after_the_header() {
        use tessera_runtime::KernelParams;
        let kernel =
            "fn kernel_main(x: u32, y: u32) { store_f32(params.out, x, y, params.scale); }";
        let fields = Sample::wgsl_fields();
        let generic = crate::shape::LaunchShape::GENERIC.wgsl();
        // A launch of one texture: every field a constant, no binding search.
        let mut one = LaunchInfo {
            nbind: 1,
            ..Default::default()
        };
        one.binds[0] = BindInfo {
            id: 5,
            width: 64,
            height: 64,
            pages_x: 1,
            shift: 6,
            words_per_texel: 1,
            slot_words: 4096,
            format: FORMAT_R32_FLOAT,
            ..Default::default()
        };
        one.by_id[1].0[1] = 1;
        let specialized = crate::shape::LaunchShape::of(&one).wgsl();
        assert!(specialized.contains("const EXACT_IDS: bool = true;"));
        assert!(!specialized.contains("launch.binds"), "{specialized}");
        for (what, code) in [
            (
                "prelude",
                kernel_shader(
                    fields,
                    &[
                        crate::ANY_MEMORY,
                        &generic,
                        crate::PRELUDE,
                        crate::STAMP_EACH,
                        kernel,
                    ],
                ),
            ),
            (
                "prelude, tile path, one memory",
                kernel_shader(
                    fields,
                    &[
                        crate::ONE_MEMORY,
                        &generic,
                        crate::PRELUDE,
                        crate::STAMP_GROUP,
                        kernel,
                    ],
                ),
            ),
            (
                "prelude, per texel, stamps once per workgroup, specialized",
                kernel_shader(
                    fields,
                    &[
                        crate::ONE_MEMORY,
                        &specialized,
                        crate::PRELUDE,
                        crate::STAMP_CACHE,
                        kernel,
                    ],
                ),
            ),
            (
                "merge",
                kernel_shader(
                    &[],
                    &[
                        crate::ANY_MEMORY,
                        &generic,
                        crate::PRELUDE,
                        crate::STAMP_EACH,
                        crate::MERGE,
                    ],
                ),
            ),
            ("compact", shader(&[crate::COMPACT])),
            (
                "unpaged",
                kernel_shader(fields, &[crate::UNPAGED_PRELUDE, kernel]),
            ),
        ] {
            let module = naga::front::wgsl::parse_str(&code)
                .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&code)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::default(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{what}: {}", e.emit_to_string(&code)));
        }
    }

    #[test]
    fn stamps_widen_to_the_launch_time() {
        assert_eq!(stamp_of(0), 0);
        assert_eq!(time_of(0, 12), 0);
        let cycle = STAMP_CYCLE;
        for now in [
            1,
            5,
            cycle - 1,
            cycle,
            cycle + 1,
            2 * cycle + 7,
            u64::MAX / 2,
        ] {
            for back in [0, 1, 2, 1000, cycle - 2, cycle - 1] {
                let Some(t) = now.checked_sub(back).filter(|&t| t > 0) else {
                    continue;
                };
                assert_ne!(stamp_of(t), 0, "time {t} stamps as never");
                assert_eq!(time_of(stamp_of(t), now), t, "time {t} at now {now}");
            }
        }
    }

    #[test]
    fn codes_round_trip() {
        for f in [
            None,
            Some(TexelFormat::R32Float),
            Some(TexelFormat::Rgba8Unorm),
            Some(TexelFormat::Rgba32Float),
        ] {
            assert_eq!(format_of(format_code(f)), Some(f));
        }
        assert_eq!(format_of(NONE), None);
        let modes = [Mode::Request, Mode::Direct, Mode::Temp].map(mode_code);
        assert_eq!(modes, [MODE_REQUEST, MODE_DIRECT, MODE_TEMP]);
    }
}
