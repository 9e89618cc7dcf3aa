// tessera prelude: the GPU twin of tessera_runtime::kernel::Invocation.
//
// Included before every kernel body, which defines `fn kernel_main(x: u32, y: u32)` and reads
// and writes objects only through `load_f32` / `store_f32` / `load_rgba8` / `store_rgba8` /
// `load_u32` / `store_u32`, by object id and texel coordinates, as the CPU twin does:
// - a load of a page that is not resident records a read request bit (atomicOr) and faults;
// - in Mode::Direct a store to a page not held writable records a write bit and faults;
// - in Mode::Request a miss records its bit and yields zero, and stores are dropped;
// - in Mode::Temp stores go to the temporary list with their page (the write mask), and a
//   store to a page not held writable records a write bit;
// - after a miss, a kernel that made progress may call `suspend()` and store its state: in
//   Mode::Direct its stores are then committed and it is relaunched (the CPU twin's
//   `Err(Fault::Suspend)`); its entry in the incomplete list has RESUMED_BIT (the runtime's)
//   and SAVED_NOW_BIT set in y. Relaunched, it sees `resumed()`, and if it faults again its
//   entry keeps RESUMED_BIT;
// - once an invocation has faulted, later accesses yield zero and record nothing (the CPU twin
//   has returned at the fault), and its buffered stores are dropped, so a faulting invocation
//   leaves no side effect and can be relaunched.
// The bindings' fields are read through `bind_<field>(bi)`, which the host generates per
// pipeline (`LaunchShape`): a field every binding of the launches it serves shares is a constant
// there, so the compiler folds the address arithmetic and the checks that depend on it.
//
// WGSL cannot index separate buffers dynamically, so a fixed number of physical memories is
// bound and selected with a switch.
//
// Remote objects (AccessMode::Remote, BindInfo::remote != 0) are not paged: each is one buffer
// of its pages back to back that every device of the node binds (remote0..3, memories 4..7 of
// the switch). Their accesses skip the page table, never miss, record no request and stamp no
// page; their stores are buffered like any other and written in place when the invocation
// completes, in Temp mode too (a remote page has no write copy to merge).

// The constants (MODE_*, ERR_*, FORMAT_*, MAX_*, NONE) and the structs shared with the host
// (LaunchInfo, BindInfo, Status) are declared by the header tessera_wgpu::abi generates, which
// is compiled before this file.

@group(0) @binding(0) var<storage, read> page_table: array<vec2<u32>>;
@group(0) @binding(1) var<storage, read_write> mem0: array<u32>;
@group(0) @binding(2) var<storage, read_write> mem1: array<u32>;
@group(0) @binding(3) var<storage, read_write> mem2: array<u32>;
@group(0) @binding(4) var<storage, read_write> mem3: array<u32>;
@group(0) @binding(5) var<uniform> launch: LaunchInfo;
@group(0) @binding(6) var<storage, read> domain_list: array<vec2<u32>>;
@group(0) @binding(7) var<storage, read_write> bits: array<atomic<u32>>;
@group(0) @binding(8) var<storage, read_write> status: Status;
@group(0) @binding(9) var<storage, read_write> incomplete: array<vec2<u32>>;
// Mode::Temp stores: (page, word in the page's slot, value, kind): kind 0 is an empty entry
// (cleared by the host; an invocation that stored less or faulted), 1 a store, 2 a store a
// later store of the same invocation to the same word overwrites.
@group(0) @binding(10) var<storage, read_write> temp: array<vec4<u32>>;
// The merge's output: the stores it could not write (their pages are not held writable).
@group(0) @binding(11) var<storage, read_write> leftover: array<vec4<u32>>;
// Per global page, the stamp (abi::stamp_of) of the last launch that translated it: LRU and
// clock choose victims by it. Binding 12 is the merge's uniform.
@group(0) @binding(13) var<storage, read_write> page_stamps: array<atomic<u32>>;
// The remote objects of the launch, in BindInfo::remote order (a spare buffer where unused).
@group(0) @binding(14) var<storage, read_write> remote0: array<u32>;
@group(0) @binding(15) var<storage, read_write> remote1: array<u32>;
@group(0) @binding(16) var<storage, read_write> remote2: array<u32>;
@group(0) @binding(17) var<storage, read_write> remote3: array<u32>;
// The kernel's parameters: LaunchInfo::params (the first bytes of `launch`) as the kernel's own
// struct, which the host declares from its Rust twin's (abi::params_declaration).
@group(0) @binding(18) var<uniform> params: Params;
// The queue's gate, one word shared by every tessera device on this wgpu device.
@group(0) @binding(19) var<storage, read_write> queue_gate: atomic<u32>;

var<private> g_faulted: bool;
// Set by `fail`: an invocation with an error cannot suspend.
var<private> g_error: bool;
// Set by `suspend`: commit the stores and relaunch.
var<private> g_suspended: bool;
// The invocation saved its state at an earlier launch of the pass (RESUMED_BIT on its list
// entry): `resumed()`.
var<private> g_resumed: bool;
// The invocation's index in launch order: of failing invocations the lowest is reported.
var<private> g_idx: u32;
var<private> g_nst: u32;
// The last request bit this invocation recorded, as (page << 1 | write).
var<private> g_rec: u32;
// The last page this invocation stamped.
var<private> g_stamped: u32;
// Inside a degrading sample's probe (`sample_rgba8_window_degraded`): 0 none; 1 a missing
// page yields zeros and records its request; 2 it yields zeros and records nothing. Either
// sets g_missed instead of faulting.
var<private> g_probe: u32;
var<private> g_missed: bool;
// The tile path: the page of the written object under this workgroup's tile (NONE elsewhere).
var<private> g_tile_write: u32;
// Direct: (memory, word, value). Temp: (page, word in page, value). The first store is kept
// apart, where the compiler can hold it in registers: most kernels store once, and an array
// indexed by a variable lives in memory (on an H200, buffering through the array alone cost
// 8% of boiling's paged frame).
var<private> g_st0: vec3<u32>;
// Stores 1.. of the invocation (entry 0 unused).
var<private> g_st: array<vec3<u32>, MAX_STORES>;

fn buffered(i: u32) -> vec3<u32> {
    if i == 0u {
        return g_st0;
    }
    return g_st[i];
}

// ONE_MEMORY (a constant the host compiles in per pipeline): every descriptor names memory 0.
fn mem_load(m: u32, i: u32) -> u32 {
    if ONE_MEMORY {
        return mem0[i];
    }
    switch m {
        case 0u: { return mem0[i]; }
        case 1u: { return mem1[i]; }
        case 2u: { return mem2[i]; }
        case 3u: { return mem3[i]; }
        case 4u: { return remote0[i]; }
        case 5u: { return remote1[i]; }
        case 6u: { return remote2[i]; }
        default: { return remote3[i]; }
    }
}

fn mem_store(m: u32, i: u32, v: u32) {
    if ONE_MEMORY {
        mem0[i] = v;
        return;
    }
    switch m {
        case 0u: { mem0[i] = v; }
        case 1u: { mem1[i] = v; }
        case 2u: { mem2[i] = v; }
        case 3u: { mem3[i] = v; }
        case 4u: { remote0[i] = v; }
        case 5u: { remote1[i] = v; }
        case 6u: { remote2[i] = v; }
        default: { remote3[i] = v; }
    }
}

// The memory (4 + k) and word of a remote binding's texel at `loc` (page, word in page).
fn remote_at(bi: u32, loc: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(
        REMOTE_MEM0 + bind_remote(bi) - 1u,
        (loc.x - bind_page_offset(bi)) * bind_slot_words(bi) + loc.y,
    );
}

// An error stops the invocation, as `?` does in the CPU twin. The host reports the error of
// the lowest failing invocation: exact from here where one failed, by running that one again
// alone where several raced for these words.
fn fail(kind: u32, object: u32, x: u32, y: u32, format: u32) {
    atomicAdd(&status.failed, 1u);
    atomicMin(&status.first, g_idx);
    atomicStore(&status.error_kind, kind);
    atomicStore(&status.error_object, object);
    atomicStore(&status.error_x, x);
    atomicStore(&status.error_y, y);
    atomicStore(&status.error_format, format);
    g_faulted = true;
    g_error = true;
}

// Whether a load or store of this invocation has missed (later ones yield zero): the kernel
// checks it where the CPU twin's `?` would have returned.
fn faulted() -> bool {
    return g_faulted;
}

// Whether this invocation saved its state at an earlier launch of the pass: only then has it
// a state to read back (the CPU twin's `Invocation::resumed`).
fn resumed() -> bool {
    return g_resumed;
}

// The CPU twin's `Err(Fault::Suspend)`: after a miss, the invocation goes on only to store its
// state, then is relaunched. False (a plain fault: stores dropped) outside Mode::Direct, after
// an error, or without a miss.
fn suspend() -> bool {
    if !g_faulted || g_error || launch_mode() != MODE_DIRECT {
        return false;
    }
    g_faulted = false;
    g_suspended = true;
    return true;
}

fn record(page: u32, write: bool) {
    // A stencil's misses are mostly on one page: skip the bit this invocation just set.
    let key = (page << 1u) | u32(write);
    if key == g_rec {
        return;
    }
    g_rec = key;
    // A queued launch that asks for a page stops the work behind it: in Mode::Temp its merge
    // must not run before the page is writable (in Mode::Direct the miss faults as well).
    close_gate();
    var w = page / 32u;
    if write {
        w += launch.bit_words;
    }
    let b = 1u << (page % 32u);
    // Most misses of a launch are on a few pages: look before writing, so that thousands of
    // invocations do not all contend for the same word.
    if (atomicLoad(&bits[w]) & b) == 0u {
        atomicOr(&bits[w], b);
    }
}

// The CPU twin stamps every page it translates (its TLB misses) once per task; here each
// invocation skips the page it stamped last (a stencil's loads fall mostly on one page) and
// looks before it stores, so that the thousands of invocations on one page do not all write
// its word: one store per page per launch, give or take the invocations that look at once.
// Every writer of a launch writes the same value, so their order does not matter.
fn stamp(page: u32) {
    if page == g_stamped {
        return;
    }
    g_stamped = page;
    if !first_in_group(page) {
        return;
    }
    if atomicLoad(&page_stamps[page]) != launch.time {
        atomicStore(&page_stamps[page], launch.time);
    }
}

fn binding_of(id: u32) -> u32 {
    let slot = id % BY_ID_SLOTS;
    let h = launch.by_id[slot / 4u][slot % 4u];
    if h != 0u && bind_id(h - 1u) == id {
        return h - 1u;
    }
    // EXACT_IDS (compiled in per pipeline): every bound id sits in its own slot, so an id
    // not found there is not bound.
    let n = select(launch.nbind, 0u, EXACT_IDS);
    for (var i = 0u; i < n; i++) {
        if bind_id(i) == id {
            return i;
        }
    }
    fail(ERR_UNBOUND, id, 0u, 0u, 0u);
    return NONE;
}

// Global page (x) and word offset in the page's slot (y) of texel (x, y) of binding bi.
fn locate(bi: u32, x: u32, y: u32) -> vec2<u32> {
    let shift = bind_shift(bi);
    let mask = (1u << shift) - 1u;
    let base = bind_page_offset(bi);
    if bind_format(bi) == FORMAT_BUFFER {
        return vec2<u32>(base + (x >> shift), x & mask);
    }
    let local = (x >> shift) + (y >> shift) * bind_pages_x(bi);
    let off = (((y & mask) << shift) | (x & mask)) * bind_words_per_texel(bi);
    return vec2<u32>(base + local, off);
}

// Checks an access's format and range; false (after flagging an error where one is due).
fn in_range(bi: u32, id: u32, x: u32, y: u32, format: u32) -> bool {
    if (bind_mip(bi) & MIP_BIT) != 0u {
        // Its texels are read by level (load_rgba8_level, sample_rgba8), as on the CPU.
        fail(ERR_WRONG_FORMAT, id, x, y, select(format, bind_format(bi), format == NONE));
        return false;
    }
    if format != NONE && bind_format(bi) != format {
        fail(ERR_WRONG_FORMAT, id, x, y, format);
        return false;
    }
    if x >= bind_width(bi) || y >= bind_height(bi) {
        // A request pass may compute addresses from values it could not load yet.
        if launch_mode() != MODE_REQUEST {
            fail(ERR_OUT_OF_RANGE, id, x, y, 0u);
        }
        return false;
    }
    return true;
}

struct Tr {
    ok: bool,
    mem: u32,
    word: u32,
}

// Translation: the CPU twin's translate_slow without the TLB.
fn translate(id: u32, x: u32, y: u32, write: bool, format: u32) -> Tr {
    var r = Tr(false, 0u, 0u);
    if g_faulted {
        return r;
    }
    let bi = binding_of(id);
    if bi == NONE {
        return r;
    }
    if !in_range(bi, id, x, y, format) {
        return r;
    }
    let loc = locate(bi, x, y);
    if bind_remote(bi) != 0u {
        // In place, as the CPU twin's remote_word: no page table, no stamp, never a miss.
        let at = remote_at(bi, loc);
        return Tr(true, at.x, at.y);
    }
    // Before the residency check, as the CPU twin: a miss touches the page too.
    stamp(loc.x);
    let d = page_table[loc.x];
    let needs_write = write && launch_mode() == MODE_DIRECT;
    if (d.x & 1u) == 0u || (needs_write && (d.x & 2u) == 0u) {
        record(loc.x, write);
        if launch_mode() != MODE_REQUEST {
            g_faulted = true;
        }
        return r;
    }
    r.ok = true;
    r.mem = d.x >> 16u;
    r.word = d.y * bind_slot_words(bi) + loc.y;
    return r;
}

// The tile path: each workgroup copies, once, the texels its 8x8 tile reads (the tile grown
// by the footprint's halo, clipped to the object) into workgroup memory, translating each
// texel's page there instead of at every one of the kernel's loads. A window with a page that
// is not resident is not used, so such loads take the per-texel path and record exactly the
// requests they always did. The windows stop at the launch's rectangle grown by the halo, as
// the CPU twin's tiles do, so both stamp the same pages.
const WIN_SIDE: u32 = 16u;
var<workgroup> wg_win: array<array<u32, 256>, FP_MAX>;
var<workgroup> wg_bad: array<atomic<u32>, FP_MAX>;
// Per read: object id, window origin (x0, y0), and width | height << 16; w = 0: no window.
var<private> g_win: array<vec4<u32>, FP_MAX>;
var<private> g_nwin: u32;

// Sets up and fills this workgroup's windows (every invocation of the group calls it, then a
// barrier; `lid` is the local invocation index).
fn fill_windows(tile: vec2<u32>, lid: u32) {
    g_nwin = min(launch.fp_n, FP_MAX);
    for (var k = 0u; k < g_nwin; k++) {
        let bi = launch.fp[k].x;
        let h = launch.fp[k].y;
        let x0 = select(0u, tile.x - h, tile.x > h);
        let y0 = select(0u, tile.y - h, tile.y > h);
        let x1 = min(min(tile.x + 8u, launch.x1) + h, bind_width(bi));
        let y1 = min(min(tile.y + 8u, launch.y1) + h, bind_height(bi));
        if x1 <= x0 || y1 <= y0 || x1 - x0 > WIN_SIDE || y1 - y0 > WIN_SIDE {
            g_win[k] = vec4<u32>(bind_id(bi), 0u, 0u, 0u);
            continue;
        }
        let w = x1 - x0;
        let n = w * (y1 - y0);
        g_win[k] = vec4<u32>(bind_id(bi), x0, y0, w | ((y1 - y0) << 16u));
        let mask = (1u << bind_shift(bi)) - 1u;
        for (var j = lid; j < n; j += 64u) {
            let tx = x0 + j % w;
            let ty = y0 + j / w;
            let loc = locate(bi, tx, ty);
            let d = page_table[loc.x];
            if (d.x & 1u) == 0u {
                atomicStore(&wg_bad[k], 1u);
            } else {
                wg_win[k][j] = mem_load(d.x >> 16u, d.y * bind_slot_words(bi) + loc.y);
                // Once per page of the window: at the first texel of its part. Resident pages
                // only, as the CPU twin's tile copies; a page that is not resident is stamped
                // by the per-texel loads that then miss on it.
                if (tx == x0 || (tx & mask) == 0u) && (ty == y0 || (ty & mask) == 0u) {
                    stamp(loc.x);
                }
            }
        }
    }
}

// After the barrier: drop the windows that are not whole.
fn check_windows() {
    for (var k = 0u; k < g_nwin; k++) {
        if atomicLoad(&wg_bad[k]) != 0u {
            g_win[k].w = 0u;
        }
    }
}

struct Hit {
    ok: bool,
    v: u32,
}

fn window_load(id: u32, x: u32, y: u32) -> Hit {
    for (var k = 0u; k < g_nwin; k++) {
        let g = g_win[k];
        if g.x == id {
            let w = g.w & 0xffffu;
            let dx = x - g.y;
            let dy = y - g.z;
            if dx < w && dy < (g.w >> 16u) {
                return Hit(true, wg_win[k][dy * w + dx]);
            }
            return Hit(false, 0u);
        }
    }
    return Hit(false, 0u);
}

fn load_word(id: u32, x: u32, y: u32, i: u32, format: u32) -> u32 {
    if g_nwin != 0u && format == NONE && i == 0u && !g_faulted {
        let h = window_load(id, x, y);
        if h.ok {
            return h.v;
        }
    }
    let t = translate(id, x, y, false, format);
    if !t.ok {
        return 0u;
    }
    return mem_load(t.mem, t.word + i);
}

fn buffer_store(a: u32, b: u32, v: u32) {
    if g_nst >= MAX_STORES {
        fail(ERR_TOO_MANY_STORES, 0u, 0u, 0u, 0u);
        return;
    }
    if g_nst == 0u {
        g_st0 = vec3<u32>(a, b, v);
    } else {
        g_st[g_nst] = vec3<u32>(a, b, v);
    }
    g_nst += 1u;
}

fn store_word(id: u32, x: u32, y: u32, i: u32, v: u32, format: u32) {
    if g_faulted {
        return;
    }
    if launch_mode() == MODE_REQUEST {
        // Dropped, but a store to an object not bound or in the wrong format is a bug in any
        // mode (the CPU twin checks it too).
        let bi = binding_of(id);
        if bi != NONE && format != NONE && bind_format(bi) != format {
            fail(ERR_WRONG_FORMAT, id, x, y, format);
        }
        return;
    }
    if launch_mode() == MODE_DIRECT {
        let t = translate(id, x, y, true, format);
        if t.ok {
            buffer_store(t.mem, t.word + i, v);
        }
        return;
    }
    // Temp: no translation, the page and its word go to the temporary with the value.
    let bi = binding_of(id);
    if bi == NONE {
        return;
    }
    if !in_range(bi, id, x, y, format) {
        return;
    }
    let loc = locate(bi, x, y);
    if bind_remote(bi) != 0u {
        let at = remote_at(bi, loc);
        buffer_store(REMOTE_TAG | at.x, at.y + i, v);
        return;
    }
    if (page_table[loc.x].x & 2u) == 0u {
        record(loc.x, true);
    }
    buffer_store(loc.x, loc.y + i, v);
}

fn load_f32(id: u32, x: u32, y: u32) -> f32 {
    return bitcast<f32>(load_word(id, x, y, 0u, NONE));
}
fn store_f32(id: u32, x: u32, y: u32, v: f32) {
    store_word(id, x, y, 0u, bitcast<u32>(v), NONE);
}
// RGBA8 texels as one little-endian word (r in the low byte).
fn load_rgba8(id: u32, x: u32, y: u32) -> u32 {
    return load_word(id, x, y, 0u, FORMAT_RGBA8_UNORM);
}
fn store_rgba8(id: u32, x: u32, y: u32, v: u32) {
    store_word(id, x, y, 0u, v, FORMAT_RGBA8_UNORM);
}
fn load_u32(id: u32, index: u32) -> u32 {
    return load_word(id, index, 0u, 0u, FORMAT_BUFFER);
}
fn store_u32(id: u32, index: u32, v: u32) {
    store_word(id, index, 0u, 0u, v, FORMAT_BUFFER);
}

// Mipmapped textures (BindInfo::mip != 0), the twin of the CPU's `load_rgba8_level` and
// `sample_rgba8*`: level l is max(1, W >> l) x max(1, H >> l) texels on pages of P x P after
// the pages of the levels before it; a page's slot is (P + 2B)^2 texels, its own at (B, B).
// The samplers' integer arithmetic is tessera_core::sampler's, line for line.
fn mip_levels(bi: u32) -> u32 {
    return bind_mip(bi) & 0xffu;
}
fn mip_border(bi: u32) -> u32 {
    return (bind_mip(bi) >> 8u) & 0xffu;
}
fn mip_addressing(bi: u32) -> u32 {
    return (bind_mip(bi) >> 16u) & 1u;
}
fn level_extent(bi: u32, l: u32) -> vec2<u32> {
    return max(vec2<u32>(1u), vec2<u32>(bind_width(bi) >> l, bind_height(bi) >> l));
}
fn level_pages(bi: u32, l: u32) -> vec2<u32> {
    let s = bind_shift(bi);
    return (level_extent(bi, l) + vec2<u32>((1u << s) - 1u)) >> vec2<u32>(s);
}
fn slot_side(bi: u32) -> u32 {
    return (1u << bind_shift(bi)) + 2u * mip_border(bi);
}

// Whether binding bi is mipmapped; flags the error where it is not.
fn mip_check(bi: u32, id: u32) -> bool {
    if (bind_mip(bi) & MIP_BIT) == 0u {
        fail(ERR_WRONG_FORMAT, id, 0u, 0u, FORMAT_MIPMAPPED);
        return false;
    }
    return true;
}

struct Mt {
    ok: bool,
    page: u32,
    at: u32,
}

// Global page and slot index of texel (x, y) of level l (the error flagged outside it).
fn mip_locate(bi: u32, id: u32, l: u32, x: u32, y: u32) -> Mt {
    var m = Mt(false, 0u, 0u);
    let e = level_extent(bi, min(l, 31u));
    if l >= mip_levels(bi) || x >= e.x || y >= e.y {
        if launch_mode() != MODE_REQUEST {
            fail(ERR_LEVEL, id, x, y, l);
        }
        return m;
    }
    var offset = 0u;
    for (var k = 0u; k < l; k++) {
        let n = level_pages(bi, k);
        offset += n.x * n.y;
    }
    let s = bind_shift(bi);
    let mask = (1u << s) - 1u;
    let b = mip_border(bi);
    m.ok = true;
    m.page = bind_page_offset(bi) + offset + (x >> s) + (y >> s) * level_pages(bi, l).x;
    m.at = ((y & mask) + b) * slot_side(bi) + (x & mask) + b;
    return m;
}

// A page translated for reading: its memory and the first word of its slot.
fn mip_page(bi: u32, page: u32) -> Tr {
    var r = Tr(false, 0u, 0u);
    if g_faulted {
        return r;
    }
    if bind_remote(bi) != 0u {
        return Tr(true, REMOTE_MEM0 + bind_remote(bi) - 1u, (page - bind_page_offset(bi)) * bind_slot_words(bi));
    }
    stamp(page);
    let d = page_table[page];
    if (d.x & 1u) == 0u && g_probe != 0u {
        g_missed = true;
        if g_probe == 1u {
            record(page, false);
        }
        return r;
    }
    if (d.x & 1u) == 0u {
        record(page, false);
        if launch_mode() != MODE_REQUEST {
            g_faulted = true;
        }
        return r;
    }
    return Tr(true, d.x >> 16u, d.y * bind_slot_words(bi));
}

fn mip_texel(bi: u32, id: u32, l: u32, x: u32, y: u32) -> u32 {
    let m = mip_locate(bi, id, l, x, y);
    if !m.ok {
        return 0u;
    }
    let t = mip_page(bi, m.page);
    if !t.ok {
        return 0u;
    }
    return mem_load(t.mem, t.word + m.at);
}

// Texel (x, y) of level l of a mipmapped RGBA8 texture.
fn load_rgba8_level(id: u32, l: u32, x: u32, y: u32) -> u32 {
    if g_faulted {
        return 0u;
    }
    let bi = binding_of(id);
    if bi == NONE || !mip_check(bi, id) {
        return 0u;
    }
    return mip_texel(bi, id, l, x, y);
}

// Coordinate c (which may be outside 0..n) brought into it: 0 wrap, 1 clamp.
fn address(a: u32, c: i32, n: u32) -> u32 {
    if a == 0u {
        return u32(((c % i32(n)) + i32(n)) % i32(n));
    }
    return u32(clamp(c, 0, i32(n) - 1));
}

// The 2x2 quad at (x0, y0) of level l of a bordered texture, from the one page that holds
// (x0, y0) clamped to the level: its border holds the taps past the page's edge.
fn border_quad(bi: u32, id: u32, l: u32, x0: i32, y0: i32) -> array<u32, 4> {
    var q = array<u32, 4>(0u, 0u, 0u, 0u);
    let e = level_extent(bi, l);
    let b = mip_border(bi);
    let ax = u32(clamp(x0, 0, i32(e.x) - 1));
    let ay = u32(clamp(y0, 0, i32(e.y) - 1));
    let m = mip_locate(bi, id, l, ax, ay);
    if !m.ok {
        return q;
    }
    let t = mip_page(bi, m.page);
    if !t.ok {
        return q;
    }
    let p = 1u << bind_shift(bi);
    let xs = u32(x0 - i32(ax / p * p) + i32(b));
    let ys = u32(y0 - i32(ay / p * p) + i32(b));
    let side = slot_side(bi);
    q[0] = mem_load(t.mem, t.word + ys * side + xs);
    q[1] = mem_load(t.mem, t.word + ys * side + xs + 1u);
    q[2] = mem_load(t.mem, t.word + (ys + 1u) * side + xs);
    q[3] = mem_load(t.mem, t.word + (ys + 1u) * side + xs + 1u);
    return q;
}

fn uv_fixed(c: f32, a: u32) -> u32 {
    let f = i32(floor(clamp(c, -16384.0, 16384.0) * 65536.0));
    if a == 0u {
        return u32(f & 0xffff);
    }
    return u32(clamp(f, 0, 65536));
}

fn window_at(win: vec4<u32>, l: u32) -> vec4<u32> {
    return vec4<u32>(win.x >> l, win.y >> l, max(1u, win.z >> l), max(1u, win.w >> l));
}

fn channel(c: u32, k: u32) -> u32 {
    return (c >> (8u * k)) & 255u;
}

// The quad weighted by the fractions a (x) and b (y), in 1/256ths.
fn blend_quad(q: array<u32, 4>, a: u32, b: u32) -> u32 {
    let wt = array<u32, 4>((256u - a) * (256u - b), a * (256u - b), (256u - a) * b, a * b);
    var out = 0u;
    for (var k = 0u; k < 4u; k++) {
        let sum = channel(q[0], k) * wt[0] + channel(q[1], k) * wt[1]
            + channel(q[2], k) * wt[2] + channel(q[3], k) * wt[3];
        out |= ((sum + 32768u) >> 16u) << (8u * k);
    }
    return out;
}

// One level's sample, nearest (fmode 0) or bilinear (else), with tessera_core::sampler's
// integer arithmetic. Every tap goes through the one `mip_texel` of the tap loop, whose trip
// count (1 or 4) is known only at run time: a shader compiler inlines every call, and the
// four calls per quad of a plain WGSL twin, times every level and every sampler entry, made
// the game trace's raster kernel a function that software Vulkan (lavapipe) took minutes to
// compile. The taps run in the sampler's order, so they request the same pages and fault
// at the same one.
fn level_sample(bi: u32, id: u32, win: vec4<u32>, fmode: u32, sa: u32, l: u32, uf: u32, vf: u32) -> u32 {
    let w = window_at(win, l);
    var xs: vec2<u32>;
    var ys: vec2<u32>;
    var taps = 1u;
    var a = 0u;
    var b = 0u;
    if fmode == 0u {
        let x = w.x + min((uf * w.z) >> 16u, w.z - 1u);
        let y = w.y + min((vf * w.w) >> 16u, w.w - 1u);
        xs = vec2<u32>(x, x);
        ys = vec2<u32>(y, y);
    } else {
        let s = i32((uf * w.z) >> 8u) - 128;
        let r = i32((vf * w.w) >> 8u) - 128;
        a = u32(s & 255);
        b = u32(r & 255);
        let x0 = s >> 8u;
        let y0 = r >> 8u;
        let inside = x0 >= 0 && y0 >= 0 && x0 + 1 < i32(w.z) && y0 + 1 < i32(w.w);
        let e = level_extent(bi, l);
        let whole = w.x == 0u && w.y == 0u && w.z == e.x && w.w == e.y;
        // Where the quad is addressed by the object's own rule, a bordered texture serves it
        // from one page; an unbordered one's taps are the object's addresses, which the
        // window's rule gives as well.
        if mip_border(bi) != 0u && (inside || (whole && sa == mip_addressing(bi))) {
            return blend_quad(border_quad(bi, id, l, i32(w.x) + x0, i32(w.y) + y0), a, b);
        }
        xs = vec2<u32>(w.x + address(sa, x0, w.z), w.x + address(sa, x0 + 1, w.z));
        ys = vec2<u32>(w.y + address(sa, y0, w.w), w.y + address(sa, y0 + 1, w.w));
        taps = 4u;
    }
    var q = array<u32, 4>(0u, 0u, 0u, 0u);
    for (var k = 0u; k < taps; k++) {
        q[k] = mip_texel(bi, id, l, select(xs.x, xs.y, (k & 1u) != 0u), select(ys.x, ys.y, k >= 2u));
    }
    if fmode == 0u {
        return q[0];
    }
    return blend_quad(q, a, b);
}

// Trilinear blends two levels' bilinear samples; the loop over them keeps one level_sample
// (see there).
fn sample_in(bi: u32, id: u32, fmode: u32, sa: u32, win: vec4<u32>, u: f32, v: f32, lod: f32) -> u32 {
    let uf = uv_fixed(u, sa);
    let vf = uv_fixed(v, sa);
    let levels = mip_levels(bi);
    let lf = min(u32(floor(clamp(lod, 0.0, 64.0) * 256.0)), (levels - 1u) * 256u);
    var l = min((lf + 128u) >> 8u, levels - 1u);
    let f = lf & 255u;
    var n = 1u;
    if fmode == 2u {
        l = lf >> 8u;
        if f != 0u {
            n = 2u;
        }
    }
    var c = array<u32, 2>(0u, 0u);
    for (var i = 0u; i < n; i++) {
        c[i] = level_sample(bi, id, win, min(fmode, 1u), sa, l + i, uf, vf);
    }
    if n == 1u {
        return c[0];
    }
    var out = 0u;
    for (var k = 0u; k < 4u; k++) {
        out |= ((channel(c[0], k) * (256u - f) + channel(c[1], k) * f + 128u) >> 8u) << (8u * k);
    }
    return out;
}

// A sample of a mipmapped RGBA8 texture at (u, v) over [0, 1)^2 and level of detail lod;
// filter 0 nearest, 1 bilinear, 2 trilinear; addressing 0 wrap, 1 clamp.
fn sample_rgba8(id: u32, fmode: u32, addressing: u32, u: f32, v: f32, lod: f32) -> u32 {
    if g_faulted {
        return 0u;
    }
    let bi = binding_of(id);
    if bi == NONE || !mip_check(bi, id) {
        return 0u;
    }
    let win = vec4<u32>(0u, 0u, bind_width(bi), bind_height(bi));
    return sample_in(bi, id, fmode, addressing, win, u, v, lod);
}

// As sample_rgba8 over the window (x, y, width, height) of level 0: one texture of an atlas.
fn sample_rgba8_window(id: u32, fmode: u32, addressing: u32, win: vec4<u32>, u: f32, v: f32, lod: f32) -> u32 {
    if g_faulted {
        return 0u;
    }
    let bi = binding_of(id);
    if bi == NONE || !mip_check(bi, id) {
        return 0u;
    }
    if win.z == 0u || win.w == 0u || win.x + win.z > bind_width(bi) || win.y + win.w > bind_height(bi) {
        fail(ERR_OUT_OF_RANGE, id, win.x + win.z, win.y + win.w, 0u);
        return 0u;
    }
    return sample_in(bi, id, fmode, addressing, win, u, v, lod);
}

// As sample_rgba8_window, but a missing page never faults (tessera_core::sampler::
// sample_degraded, line for line): the exact sample's misses are requested, and the finest
// level coarser than the finest wanted one whose taps are all resident serves it, probed
// without requesting. Returns (colour, levels coarser than wanted; 0: exact).
fn sample_rgba8_window_degraded(id: u32, fmode: u32, addressing: u32, win: vec4<u32>, u: f32, v: f32, lod: f32) -> vec2<u32> {
    if g_faulted {
        return vec2<u32>(0u, 0u);
    }
    let bi = binding_of(id);
    if bi == NONE || !mip_check(bi, id) {
        return vec2<u32>(0u, 0u);
    }
    if win.z == 0u || win.w == 0u || win.x + win.z > bind_width(bi) || win.y + win.w > bind_height(bi) {
        fail(ERR_OUT_OF_RANGE, id, win.x + win.z, win.y + win.w, 0u);
        return vec2<u32>(0u, 0u);
    }
    g_probe = 1u;
    g_missed = false;
    let c = sample_in(bi, id, fmode, addressing, win, u, v, lod);
    g_probe = 0u;
    if !g_missed {
        return vec2<u32>(c, 0u);
    }
    let uf = uv_fixed(u, addressing);
    let vf = uv_fixed(v, addressing);
    let levels = mip_levels(bi);
    let lf = min(u32(floor(clamp(lod, 0.0, 64.0) * 256.0)), (levels - 1u) * 256u);
    var wanted = min((lf + 128u) >> 8u, levels - 1u);
    if fmode == 2u {
        wanted = lf >> 8u;
    }
    for (var k = wanted + 1u; k < levels; k++) {
        g_probe = 2u;
        g_missed = false;
        let ck = level_sample(bi, id, win, min(fmode, 1u), addressing, k, uf, vf);
        g_probe = 0u;
        if !g_missed {
            return vec2<u32>(ck, k - wanted);
        }
    }
    return vec2<u32>(0u, levels - wanted);
}

// The per-texel entry point, over workgroups of GROUP_X x GROUP_Y invocations: a warp then
// reads whole rows of a page's slot (on an H200, boiling's paged frame took 5.4 ms at 32 x 8
// against 7.1-7.6 at 8 x 8, and the unpaged one 1.1 against 1.5). Its only workgroup memory
// is the stamp variant's (`stamp_cache.wgsl`, GPUs only).
@compute @workgroup_size(GROUP_X, GROUP_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if !admitted() {
        return;
    }
    g_nwin = 0u;
    g_stamped = NONE;
    g_tile_write = NONE;
    invocation(gid);
}

// Whether this launch runs: false for a queued launch behind one that faulted or failed since
// the queue was last settled (`queue_gate`, on this tessera device or another on the same wgpu
// device). Such a launch leaves no trace, not even page
// stamps, and runs again once the faults are serviced, so results never depend on timing.
// Within a launch the answer is the same for every invocation: only a launch queued earlier
// (a lower seq) can close the gate below this one's seq.
fn admitted() -> bool {
    return launch.seq == 0u || atomicLoad(&queue_gate) >= launch.seq;
}

// An invocation of a queued launch faulted or failed: the launches queued after it skip.
fn close_gate() {
    if launch.seq != 0u {
        atomicMin(&queue_gate, launch.seq);
    }
}

// The tile path's entry point: the windows first, then each invocation as in `main`.
@compute @workgroup_size(8, 8, 1)
fn main_tiles(
    @builtin(global_invocation_id) gid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    g_nwin = 0u;
    g_stamped = NONE;
    g_tile_write = NONE;
    let run = admitted();
    if run {
        fill_windows(vec2<u32>(launch.x0 + wid.x * 8u, launch.y0 + wid.y * 8u), lid);
    }
    // Uniform: every invocation of the group reaches the barrier.
    workgroupBarrier();
    if !run {
        return;
    }
    check_windows();
    g_tile_write = tile_write_page(vec2<u32>(launch.x0 + wid.x * 8u, launch.y0 + wid.y * 8u));
    invocation(gid);
}

// The page of the written object under the tile's first texel (NONE: no written object on the
// tile path, or outside it): stamped by the first invocation of the group that translates it
// (`first_in_group`, the tile variant), not by every invocation.
fn tile_write_page(tile: vec2<u32>) -> u32 {
    if launch.fp_write == 0u {
        return NONE;
    }
    let bi = launch.fp_write - 1u;
    if tile.x >= bind_width(bi) || tile.y >= bind_height(bi) {
        return NONE;
    }
    return locate(bi, tile.x, tile.y).x;
}

fn invocation(gid: vec3<u32>) {
    var x: u32;
    var y: u32;
    var idx: u32;
    if launch_is_list() != 0u {
        idx = gid.y * launch.row + gid.x;
        if gid.x >= launch.row || idx >= launch.count {
            return;
        }
        let xy = domain_list[idx];
        x = xy.x;
        y = xy.y & ~RESUMED_BIT;
        g_resumed = y != xy.y;
    } else {
        g_resumed = false;
        x = launch.x0 + gid.x;
        y = launch.y0 + gid.y;
        if x >= launch.x1 || y >= launch.y1 {
            return;
        }
        idx = gid.y * (launch.x1 - launch.x0) + gid.x;
    }
    g_faulted = false;
    g_error = false;
    g_suspended = false;
    g_probe = 0u;
    g_idx = idx;
    g_nst = 0u;
    g_rec = NONE;
    kernel_main(x, y);
    if g_faulted {
        close_gate();
        let k = atomicAdd(&status.incomplete, 1u);
        if k < arrayLength(&incomplete) {
            incomplete[k] = vec2<u32>(x, y | select(0u, RESUMED_BIT, g_resumed));
        }
        return;
    }
    // Commit: the invocation completed.
    if launch_mode() == MODE_TEMP {
        if g_nst > launch.temp_k {
            // No room: the host grows the temporary to the most any invocation needed and
            // runs the launch again, which a Temp launch allows (it writes no page).
            atomicMax(&status.temp, g_nst);
            close_gate();
            return;
        }
        let at = launch.temp_base + idx * launch.temp_k;
        for (var i = 0u; i < g_nst; i++) {
            let s = buffered(i);
            if (s.x & REMOTE_TAG) != 0u {
                // In place, in program order; its temporary entry stays empty (kind 0).
                mem_store(s.x & ~REMOTE_TAG, s.y, s.z);
                continue;
            }
            // The merge writes a pass's stores in parallel, so of this invocation's stores to
            // one word only the last is written (program order, as on the CPU); the others
            // are kept, marked superseded, so that the merge counts them as the CPU does.
            var kind = 1u;
            for (var j = i + 1u; j < g_nst; j++) {
                let t = buffered(j);
                if t.x == s.x && t.y == s.y {
                    kind = 2u;
                }
            }
            temp[at + i] = vec4<u32>(s.x, s.y, s.z, kind);
        }
        return;
    }
    for (var i = 0u; i < g_nst; i++) {
        let s = buffered(i);
        mem_store(s.x, s.y, s.z);
    }
    if g_suspended {
        close_gate();
        let k = atomicAdd(&status.incomplete, 1u);
        if k < arrayLength(&incomplete) {
            incomplete[k] = vec2<u32>(x, y | RESUMED_BIT | SAVED_NOW_BIT);
        }
    }
}
