//! Error parity: every way a kernel or a launch can go wrong fails with the same typed
//! `RuntimeError`, field for field, on the CPU device and on the wgpu device, through the
//! `Device` trait. Where several invocations fail, both report the first in launch order
//! (row-major over a rectangle, list order over a list), so the test makes several fail, with
//! different errors, in different CPU tiles and list chunks, and checks which one is reported.
//!
//! Without an adapter the test prints that it skipped and passes, unless
//! `TESSERA_REQUIRE_VULKAN=1`, where a missing adapter fails it.

mod common;

use std::sync::{Arc, OnceLock};

use tessera_core::{
    AddressSpace, CoreError, DeviceId, ObjectDesc, ObjectEntry, ObjectId, PageDescriptor,
    TexelFormat,
};
use tessera_runtime::cpu::CpuDevice;
use tessera_runtime::{
    Bound, Device, Domain, Fault, Invocation, Kernel, KernelParams, Launch, Mode, ParamField,
    RuntimeError, ScalarKind, WgslKernel, MAX_BINDINGS, MAX_PARAMS, MAX_STORES,
};
use tessera_wgpu::WgpuDevice;

/// The launch domain: 2×2 CPU tiles (64×16), 8 list chunks of the CPU backend (1024).
const W: u32 = 128;
const H: u32 = 64;
const SLOT_BYTES: u64 = 256;
const UNBOUND: ObjectId = ObjectId(99);

/// What a failing invocation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    /// Nothing wrong: the control.
    Nothing = 0,
    LoadOutOfRange,
    StoreOutOfRange,
    BufferOutOfRange,
    Rgba8OnR32Float,
    U32OnTexture,
    StoreRgba8OnBuffer,
    StoreU32OnRgba8,
    LoadUnbound,
    StoreUnbound,
    TooManyStores,
}

const OPS: [Op; 11] = [
    Op::Nothing,
    Op::LoadOutOfRange,
    Op::StoreOutOfRange,
    Op::BufferOutOfRange,
    Op::Rgba8OnR32Float,
    Op::U32OnTexture,
    Op::StoreRgba8OnBuffer,
    Op::StoreU32OnRgba8,
    Op::LoadUnbound,
    Op::StoreUnbound,
    Op::TooManyStores,
];

/// The invocations that misbehave, in the order they are listed: (70, 10) is first in a
/// rectangle's order though (3, 12) is in the first CPU tile; over the reversed list,
/// (100, 60) is first.
const BAD: [(u32, u32); 3] = [(70, 10), (3, 12), (100, 60)];

#[derive(Clone, Copy)]
struct Objects {
    tex: ObjectEntry,
    out: ObjectEntry,
    rgba: ObjectEntry,
    buf: ObjectEntry,
}

/// Every invocation loads `tex` and stores the value to `out`; the first `nbad` of [`BAD`]
/// do `op` before that.
struct Misuse {
    o: Objects,
    op: Op,
    nbad: u32,
    /// Parameter words beyond those it reads, to reach the limit.
    extra_params: usize,
}

tessera_runtime::kernel_params! {
    struct MisuseParams {
        op: u32,
        tex: u32,
        out: u32,
        rgba: u32,
        buf: u32,
        nbad: u32,
        bad0_x: u32,
        bad0_y: u32,
        bad1_x: u32,
        bad1_y: u32,
        bad2_x: u32,
        bad2_y: u32,
    }
}

/// `MisuseParams`' fields, then unused ones up to one more word than `MAX_PARAMS`.
fn padded_fields() -> &'static [ParamField] {
    static FIELDS: OnceLock<Vec<ParamField>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let own = MisuseParams::wgsl_fields();
        let pads = (own.len()..=MAX_PARAMS).map(|i| ParamField {
            // Made once per test process: the names live as long as it.
            name: Box::leak(format!("pad{i}").into_boxed_str()),
            kind: ScalarKind::U32,
            offset: 4 * i,
        });
        own.iter().copied().chain(pads).collect()
    })
}

const MISUSE_WGSL: &str = r#"
fn is_bad(x: u32, y: u32) -> bool {
    var bad = array<vec2<u32>, 3>(
        vec2<u32>(params.bad0_x, params.bad0_y),
        vec2<u32>(params.bad1_x, params.bad1_y),
        vec2<u32>(params.bad2_x, params.bad2_y),
    );
    for (var i = 0u; i < params.nbad; i++) {
        if x == bad[i].x && y == bad[i].y {
            return true;
        }
    }
    return false;
}

fn kernel_main(x: u32, y: u32) {
    let tex = params.tex;
    let out = params.out;
    let rgba = params.rgba;
    let buf = params.buf;
    if is_bad(x, y) {
        switch params.op {
            case 1u: { _ = load_f32(tex, x + 1000u, y); }
            case 2u: { store_f32(tex, x, y + 1000u, 1.0); }
            case 3u: { _ = load_u32(buf, 5000u + x + y); }
            case 4u: { _ = load_rgba8(tex, x, y); }
            case 5u: { _ = load_u32(tex, x); }
            case 6u: { store_rgba8(buf, x, 0u, 0x01020304u); }
            case 7u: { store_u32(rgba, x, 7u); }
            case 8u: { _ = load_f32(99u, x, y); }
            case 9u: { store_f32(99u, x, y, 2.0); }
            case 10u: {
                for (var i = 0u; i <= MAX_STORES; i++) {
                    store_f32(out, x, y, f32(i));
                }
            }
            default: {}
        }
    }
    store_f32(out, x, y, load_f32(tex, x, y) + 1.0);
}
"#;

impl Misuse {
    fn bad(&self, x: u32, y: u32) -> bool {
        BAD[..self.nbad as usize].contains(&(x, y))
    }
}

impl Kernel for Misuse {
    fn name(&self) -> &'static str {
        "misuse"
    }
    fn wgsl(&self) -> Option<WgslKernel> {
        let [(bad0_x, bad0_y), (bad1_x, bad1_y), (bad2_x, bad2_y)] = BAD;
        let params = MisuseParams {
            op: self.op as u32,
            tex: self.o.tex.id.0,
            out: self.o.out.id.0,
            rgba: self.o.rgba.id.0,
            buf: self.o.buf.id.0,
            nbad: self.nbad,
            bad0_x,
            bad0_y,
            bad1_x,
            bad1_y,
            bad2_x,
            bad2_y,
        };
        let mut w = WgslKernel::new(MISUSE_WGSL, &params);
        // Unused fields after the struct's own, to reach the limit.
        let n = w.fields.len() + self.extra_params;
        w.params.resize(4 * n, 0);
        w.fields = &padded_fields()[..n];
        Some(w)
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let Objects {
            tex,
            out,
            rgba,
            buf,
        } = self.o;
        let (tex, out, rgba, buf) = (tex.id, out.id, rgba.id, buf.id);
        if self.bad(x, y) {
            match self.op {
                Op::Nothing => {}
                Op::LoadOutOfRange => {
                    inv.load_f32(tex, x + 1000, y)?;
                }
                Op::StoreOutOfRange => inv.store_f32(tex, x, y + 1000, 1.0)?,
                Op::BufferOutOfRange => {
                    inv.load_u32(buf, 5000 + x + y)?;
                }
                Op::Rgba8OnR32Float => {
                    inv.load_rgba8(tex, x, y)?;
                }
                Op::U32OnTexture => {
                    inv.load_u32(tex, x)?;
                }
                Op::StoreRgba8OnBuffer => inv.store_rgba8(buf, x, 0, [4, 3, 2, 1])?,
                Op::StoreU32OnRgba8 => inv.store_u32(rgba, x, 7)?,
                Op::LoadUnbound => {
                    inv.load_f32(UNBOUND, x, y)?;
                }
                Op::StoreUnbound => inv.store_f32(UNBOUND, x, y, 2.0)?,
                Op::TooManyStores => {
                    for i in 0..=MAX_STORES {
                        inv.store_f32(out, x, y, i as f32)?;
                    }
                }
            }
        }
        let v = inv.load_f32(tex, x, y)?;
        inv.store_f32(out, x, y, v + 1.0)
    }
}

/// The objects, every page resident and writable, so that nothing misses and every failure
/// is a kernel error.
fn set_up(d: &mut dyn Device) -> (Objects, u64) {
    let mut space = AddressSpace::new();
    let mut create = |desc| space.create(desc).unwrap();
    let o = Objects {
        tex: create(ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap()),
        out: create(ObjectDesc::texture(W, H, TexelFormat::R32Float, 8).unwrap()),
        rgba: create(ObjectDesc::texture(16, 16, TexelFormat::Rgba8Unorm, 8).unwrap()),
        buf: create(ObjectDesc::buffer(1024, SLOT_BYTES).unwrap()),
    };
    let pages = space.page_count();
    common::map_pages(d, pages, SLOT_BYTES, |_, at| {
        PageDescriptor::resident(at, true)
    });
    (o, pages)
}

fn bound(o: &Objects) -> Vec<Bound> {
    [o.tex, o.out, o.rgba, o.buf]
        .iter()
        .map(Bound::new)
        .collect()
}

/// The error the first misbehaving invocation `(x, y)` must fail with, if any.
fn expected(o: &Objects, op: Op, mode: Mode, (x, y): (u32, u32)) -> Option<RuntimeError> {
    let kernel = "misuse".to_string();
    let out_of_range = |e: &ObjectEntry, x: u32, y: u32| {
        let b = Bound::new(e);
        RuntimeError::Kernel {
            kernel: kernel.clone(),
            source: CoreError::OutOfRange {
                object: e.id,
                x: x as u64,
                y: y as u64,
                width: b.width(),
                height: b.height(),
                buffer: b.is_buffer(),
            },
        }
    };
    let wrong = |e: &ObjectEntry, expected, actual| RuntimeError::Kernel {
        kernel: kernel.clone(),
        source: CoreError::WrongKind {
            object: e.id,
            expected,
            actual,
        },
    };
    let request = mode == Mode::Request;
    match op {
        Op::Nothing => None,
        // A request pass may compute addresses from values it could not load yet, and drops
        // its stores: neither is an error there.
        Op::LoadOutOfRange | Op::StoreOutOfRange | Op::BufferOutOfRange | Op::TooManyStores
            if request =>
        {
            None
        }
        Op::LoadOutOfRange => Some(out_of_range(&o.tex, x + 1000, y)),
        Op::StoreOutOfRange => Some(out_of_range(&o.tex, x, y + 1000)),
        Op::BufferOutOfRange => Some(out_of_range(&o.buf, 5000 + x + y, 0)),
        Op::Rgba8OnR32Float => Some(wrong(&o.tex, "Rgba8Unorm texture", "R32Float texture")),
        Op::U32OnTexture => Some(wrong(&o.tex, "buffer", "R32Float texture")),
        Op::StoreRgba8OnBuffer => Some(wrong(&o.buf, "Rgba8Unorm texture", "buffer")),
        Op::StoreU32OnRgba8 => Some(wrong(&o.rgba, "buffer", "Rgba8Unorm texture")),
        Op::LoadUnbound | Op::StoreUnbound => Some(RuntimeError::Unbound {
            kernel,
            object: UNBOUND,
        }),
        Op::TooManyStores => Some(RuntimeError::TooManyStores {
            kernel,
            max: MAX_STORES,
        }),
    }
}

struct Pair {
    cpu: CpuDevice,
    gpu: WgpuDevice,
    pages: u64,
}

impl Pair {
    /// Runs one launch on both devices; the two results, reduced to the error.
    fn run(
        &mut self,
        kernel: Arc<dyn Kernel>,
        bindings: Vec<Bound>,
        domain: &Domain,
        mode: Mode,
    ) -> (Result<(), RuntimeError>, Result<(), RuntimeError>) {
        let l = Launch {
            kernel,
            bindings: Arc::new(bindings),
            domain: domain.clone(),
            mode,
            pages: self.pages,
            time: 1,
            remote: Default::default(),
        };
        let c = self.cpu.launch(&l).map(|_| ());
        let g = self.gpu.launch(&l).map(|_| ());
        self.cpu.discard_temp();
        self.gpu.discard_temp();
        (c, g)
    }
}

#[test]
fn every_kernel_error_is_the_same_on_both_backends() {
    let Some(mut gpu) = common::gpu() else {
        return;
    };
    let pool = common::pool(4);
    let mut cpu = CpuDevice::new(DeviceId(0), pool);
    let (o, pages) = set_up(&mut cpu);
    let (og, _) = set_up(&mut gpu);
    assert_eq!(o.tex.id, og.tex.id);
    let mut pair = Pair { cpu, gpu, pages };

    let all: Vec<(u32, u32)> = (0..H).flat_map(|y| (0..W).map(move |x| (x, y))).collect();
    let reversed: Vec<(u32, u32)> = all.iter().rev().copied().collect();
    let rect = Domain::Rect {
        x0: 0,
        y0: 0,
        x1: W,
        y1: H,
    };
    let domains = [
        ("rectangle", rect.clone()),
        ("reversed list", Domain::List(Arc::new(reversed))),
    ];
    let mut errors = 0;
    for op in OPS {
        for mode in [Mode::Request, Mode::Direct, Mode::Temp] {
            for (dname, domain) in &domains {
                // One failing invocation, then three racing to report.
                for nbad in [1, 3] {
                    let kernel = Arc::new(Misuse {
                        o,
                        op,
                        nbad,
                        extra_params: 0,
                    });
                    let (c, g) = pair.run(kernel, bound(&o), domain, mode);
                    let what = format!("{op:?} in {mode:?} over the {dname}, {nbad} failing");
                    assert_eq!(c, g, "{what}: CPU (left) and GPU (right) differ");
                    let first = match domain {
                        Domain::List(_) if nbad == 3 => BAD[2],
                        _ => BAD[0],
                    };
                    assert_eq!(c.err(), expected(&o, op, mode, first), "{what}");
                    errors += g.is_err() as usize;
                }
            }
        }
    }
    // Every op but the control fails in compute modes, and some in request mode too.
    assert!(errors > 9 * 2 * 2 * 2, "only {errors} launches failed");

    // Limits checked before anything runs, in every mode.
    let ok = |extra_params| {
        Arc::new(Misuse {
            o,
            op: Op::Nothing,
            nbad: 0,
            extra_params,
        })
    };
    let base_params = ok(0).wgsl().unwrap().param_words();
    let full: Vec<Bound> = bound(&o).into_iter().cycle().take(MAX_BINDINGS).collect();
    let over: Vec<Bound> = bound(&o)
        .into_iter()
        .cycle()
        .take(MAX_BINDINGS + 1)
        .collect();
    for mode in [Mode::Request, Mode::Direct, Mode::Temp] {
        // At the limits: fine on both.
        let (c, g) = pair.run(ok(MAX_PARAMS - base_params), full.clone(), &rect, mode);
        assert_eq!((&c, &g), (&Ok(()), &Ok(())), "{mode:?} at the limits");
        let (c, g) = pair.run(ok(0), over.clone(), &rect, mode);
        assert_eq!(c, g, "{mode:?}: too many bindings");
        assert_eq!(
            c,
            Err(RuntimeError::TooManyBindings {
                kernel: "misuse".into(),
                bindings: MAX_BINDINGS + 1,
                max: MAX_BINDINGS,
            }),
            "{mode:?}"
        );
        let (c, g) = pair.run(ok(MAX_PARAMS - base_params + 1), bound(&o), &rect, mode);
        assert_eq!(c, g, "{mode:?}: too many parameter words");
        assert_eq!(
            c,
            Err(RuntimeError::TooManyParams {
                kernel: "misuse".into(),
                words: MAX_PARAMS + 1,
                max: MAX_PARAMS,
            }),
            "{mode:?}"
        );
    }
}
