// tessera unpaged prelude: the twin of the prelude (invocation.wgsl) without paging, for the
// "unpaged original" the overhead benchmark compares against.
//
// The same kernel bodies compile after it: it binds `params`, defines `load_f32` / `store_f32` /
// `load_rgba8` / `store_rgba8` / `load_u32` / `store_u32` with the paged prelude's signatures
// and calls `kernel_main(x, y)` over a rectangle. Every object is a plain row-major array in
// one storage buffer of words, so an access is a range check, an address and a load or a
// store: no page table, no request bits, no store buffer, no fault. Stores write directly, so
// a pass that reads texels it also writes sees them change under it; that is a race on the
// paged devices too (a pass is a barrier, within one it is undefined), and no boiling pass
// does it.
//
// Objects are looked up by indexing a table with the object id (ids below
// UNPAGED_MAX_OBJECTS): one uniform load, cheaper than the paged prelude's linear search over the bindings. An id with no
// object has width 0, so the range check rejects it with no extra test. Out-of-range and
// unknown accesses load zero and drop the store instead of flagging an error: nothing is read
// back per pass (the host checks ids and sizes when it lays the objects out). Formats are not
// checked either (the host knows them; an RGBA8 texel is one word as in the paged prelude).

// UnpagedObjects, UnpagedLaunch, UNPAGED_MAX_OBJECTS and NONE come from the header
// tessera_wgpu::abi generates.

@group(0) @binding(0) var<storage, read_write> words: array<u32>;
@group(0) @binding(1) var<uniform> objects: UnpagedObjects;
@group(0) @binding(2) var<uniform> launch: UnpagedLaunch;
// The kernel's parameters: UnpagedLaunch::params as the kernel's own struct (abi::params_declaration).
@group(0) @binding(3) var<uniform> params: Params;

// Word of texel (x, y) of object `id`, or NONE outside it.
fn address(id: u32, x: u32, y: u32) -> u32 {
    let o = objects.o[min(id, UNPAGED_MAX_OBJECTS - 1u)];
    if id >= UNPAGED_MAX_OBJECTS || x >= o.width || y >= o.height {
        return NONE;
    }
    return o.base + (y * o.width + x) * o.words_per_texel;
}

fn load_word(id: u32, x: u32, y: u32) -> u32 {
    let a = address(id, x, y);
    if a == NONE {
        return 0u;
    }
    return words[a];
}

fn store_word(id: u32, x: u32, y: u32, v: u32) {
    let a = address(id, x, y);
    if a != NONE {
        words[a] = v;
    }
}

fn load_f32(id: u32, x: u32, y: u32) -> f32 {
    return bitcast<f32>(load_word(id, x, y));
}
fn store_f32(id: u32, x: u32, y: u32, v: f32) {
    store_word(id, x, y, bitcast<u32>(v));
}
// RGBA8 texels as one little-endian word (r in the low byte).
fn load_rgba8(id: u32, x: u32, y: u32) -> u32 {
    return load_word(id, x, y);
}
fn store_rgba8(id: u32, x: u32, y: u32, v: u32) {
    store_word(id, x, y, v);
}
fn load_u32(id: u32, index: u32) -> u32 {
    return load_word(id, index, 0u);
}
fn store_u32(id: u32, index: u32, v: u32) {
    store_word(id, index, 0u, v);
}

// The paged prelude's per-texel shape, so that both read memory the same way.
@compute @workgroup_size(GROUP_X, GROUP_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= launch.width || gid.y >= launch.height {
        return;
    }
    kernel_main(gid.x, gid.y);
}
