// rays: the WGSL twin of rays.rs (the design, the state words and the exactness argument are
// there). A primary ray, its albedo, then AO rays; on a miss after progress the ray's state
// is stored and the invocation suspends (`suspend()`), to be relaunched from that state.
// Where the CPU twin's `?` returns at a miss, this twin checks `faulted()` before it changes
// the state. Constants are bit patterns, as in the CPU twin.

const R_NODE_WORDS: u32 = 8u;
const R_TRI_WORDS: u32 = 9u;
const R_ATTR_WORDS: u32 = 8u;
const R_STATE_WORDS: u32 = 8u;
const R_START: u32 = 0u;
const R_PRIMARY: u32 = 1u;
const R_SHADE: u32 = 2u;
const R_AO: u32 = 3u;
const R_IN_LEAF: u32 = 256u;
const R_SAMPLE_SHIFT: u32 = 16u;
const R_NONE: u32 = 0xffffffffu;
const R_SKY: u32 = 0xffb08060u;
const R_BAD_STATE: u32 = 0xffff00ffu;
const R_COORD_LIMIT: f32 = 16777216.0;

var<private> rs: array<u32, 7>;

struct Ray {
    o: vec3<f32>,
    d: vec3<f32>,
    inv: vec3<f32>,
}

fn r_ray(o: vec3<f32>, d: vec3<f32>) -> Ray {
    let tiny = bitcast<f32>(0x1f800000u);
    var s = d;
    if s.x == 0.0 { s.x = tiny; }
    if s.y == 0.0 { s.y = tiny; }
    if s.z == 0.0 { s.z = tiny; }
    return Ray(o, d, vec3<f32>(1.0 / s.x, 1.0 / s.y, 1.0 / s.z));
}

// Written out, not the builtins, so the operations are the CPU twin's in its order.
fn r_cross(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
fn r_dot(a: vec3<f32>, b: vec3<f32>) -> f32 {
    return a.x * b.x + a.y * b.y + a.z * b.z;
}

fn r_hash(v: u32) -> u32 {
    let s = v * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

fn r_wrap(t: f32, size: u32) -> u32 {
    let i = i32(clamp(floor(t), -R_COORD_LIMIT, R_COORD_LIMIT));
    let n = i32(max(size, 1u));
    return u32(((i % n) + n) % n);
}

fn r_box(r: Ray, mn: vec3<f32>, mx: vec3<f32>, t_max: f32) -> bool {
    let a = (mn - r.o) * r.inv;
    let b = (mx - r.o) * r.inv;
    var near = 0.0;
    var far = t_max;
    near = max(near, min(a.x, b.x));
    far = min(far, max(a.x, b.x));
    near = max(near, min(a.y, b.y));
    far = min(far, max(a.y, b.y));
    near = max(near, min(a.z, b.z));
    far = min(far, max(a.z, b.z));
    return near <= far;
}

fn r_escape(escape: u32, node: u32, end: u32) -> u32 {
    if escape > node {
        return escape;
    }
    return end;
}

// A record's words `at..at + n` (n ≤ 9) into `g_words`, in order, from one `load_u32` call
// site: a shader compiler inlines every call of the prelude's translation, so each load
// written out is another copy of it. Callers read the words as the CPU twin does, in its
// order, so the loads fault at the same page.
var<private> g_words: array<u32, 9>;

fn r_words(id: u32, at: u32, n: u32) {
    for (var k = 0u; k < n; k++) {
        g_words[k] = load_u32(id, at + k);
    }
}

fn r_vec3_at(k: u32) -> vec3<f32> {
    return vec3<f32>(bitcast<f32>(g_words[k]), bitcast<f32>(g_words[k + 1u]), bitcast<f32>(g_words[k + 2u]));
}

fn r_primary(x: u32, y: u32) -> Ray {
    let eye = vec3<f32>(params.eye_x, params.eye_y, params.eye_z);
    let fwd = vec3<f32>(params.forward_x, params.forward_y, params.forward_z);
    let right = vec3<f32>(params.right_x, params.right_y, params.right_z);
    let up = vec3<f32>(params.up_x, params.up_y, params.up_z);
    let sx = (f32(x) + 0.5) * (2.0 / f32(params.width)) - 1.0;
    let sy = (f32(y) + 0.5) * (2.0 / f32(params.height)) - 1.0;
    return r_ray(eye, fwd + right * sx + up * sy);
}

struct RHit {
    ok: bool,
    t: f32,
    u: f32,
    v: f32,
}

// Möller–Trumbore: the hit with t > t_min, if any; the caller checks `faulted()`.
fn r_triangle(r: Ray, tri: u32, t_min: f32) -> RHit {
    let h = r_on_plane(r, tri);
    if !h.ok || !(h.u >= 0.0 && h.u <= 1.0) || h.v < 0.0 || h.u + h.v > 1.0 || !(h.t > t_min) {
        return RHit(false, 0.0, 0.0, 0.0);
    }
    return h;
}

// The CPU twin's `walk`; the caller checks `faulted()`.
fn r_walk(r: Ray, any: bool, skip: u32) -> bool {
    let nodes = params.nodes;
    let end = params.node_count;
    loop {
        if rs[1] >= end {
            break;
        }
        let node = rs[1];
        let at = node * R_NODE_WORDS;
        // Escape and leaf first, then (outside a leaf) the box, as the CPU twin reads them.
        let in_leaf = (rs[0] & R_IN_LEAF) != 0u;
        var node_words = array<u32, 8>(6u, 7u, 0u, 1u, 2u, 3u, 4u, 5u);
        var box = array<f32, 6>(0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
        var escape = 0u;
        var leaf = 0u;
        for (var k = 0u; k < 8u; k++) {
            if k == 2u && (in_leaf || faulted()) {
                break;
            }
            let w = load_u32(nodes, at + node_words[k]);
            if k == 0u {
                escape = w;
            } else if k == 1u {
                leaf = w;
            } else {
                box[k - 2u] = bitcast<f32>(w);
            }
        }
        if faulted() {
            return false;
        }
        if !in_leaf {
            let mn = vec3<f32>(box[0], box[1], box[2]);
            let mx = vec3<f32>(box[3], box[4], box[5]);
            var t_max = bitcast<f32>(rs[2]);
            if any {
                t_max = 1.0;
            }
            if !r_box(r, mn, mx, t_max) {
                rs[1] = r_escape(escape, node, end);
                continue;
            }
            if leaf == 0u {
                rs[1] = node + 1u;
                continue;
            }
            rs[0] |= R_IN_LEAF;
            rs[6] = leaf & 0xffffffu;
        }
        let first = leaf & 0xffffffu;
        let last = first + (leaf >> 24u);
        for (var t = rs[6]; t < last; t++) {
            var t_min = 0.0;
            if any {
                t_min = bitcast<f32>(0x3a800000u);
            }
            let h = r_triangle(r, t, t_min);
            if faulted() {
                return false;
            }
            if h.ok {
                if any {
                    if t != skip && h.t <= 1.0 {
                        rs[0] &= ~R_IN_LEAF;
                        return true;
                    }
                } else if h.t < bitcast<f32>(rs[2]) {
                    rs[2] = bitcast<u32>(h.t);
                    rs[3] = t;
                }
            }
            rs[6] = t + 1u;
        }
        rs[0] &= ~R_IN_LEAF;
        rs[1] = r_escape(escape, node, end);
    }
    return false;
}

// The CPU twin's `on_plane`: where the ray meets the triangle's plane, inside it or not
// (`ok` false when parallel to it); the caller checks `faulted()`.
fn r_on_plane(r: Ray, tri: u32) -> RHit {
    let tris = params.tris;
    r_words(tris, tri * R_TRI_WORDS, 9u);
    if faulted() {
        return RHit(false, 0.0, 0.0, 0.0);
    }
    let v0 = r_vec3_at(0u);
    let e1 = r_vec3_at(3u);
    let e2 = r_vec3_at(6u);
    let p = r_cross(r.d, e2);
    let det = r_dot(e1, p);
    if det == 0.0 {
        return RHit(false, 0.0, 0.0, 0.0);
    }
    let inv = 1.0 / det;
    let s = r.o - v0;
    let q = r_cross(s, e1);
    return RHit(true, r_dot(e2, q) * inv, r_dot(s, p) * inv, r_dot(r.d, q) * inv);
}

fn r_tex(uv: array<f32, 6>, u: f32, v: f32) -> vec2<f32> {
    let w0 = 1.0 - u - v;
    return vec2<f32>(uv[0] * w0 + uv[2] * u + uv[4] * v, uv[1] * w0 + uv[3] * u + uv[5] * v);
}

// The CPU twin's `albedo`: `params.filter_code` is the filter's code + 1 (0: the nearest
// texel of a plain atlas); a filtered sample's level is the pixel's footprint through the neighbours' rays.
fn r_albedo(x: u32, y: u32, r: Ray) -> u32 {
    let tri = rs[3];
    let h = r_triangle(r, tri, 0.0);
    if faulted() {
        return 0u;
    }
    var u = 0.0;
    var v = 0.0;
    if h.ok {
        u = h.u;
        v = h.v;
    }
    let o = params.attrs;
    let at = tri * R_ATTR_WORDS;
    r_words(o, at, 8u);
    if faulted() {
        return 0u;
    }
    var uv: array<f32, 6>;
    for (var k = 0u; k < 6u; k++) {
        uv[k] = bitcast<f32>(g_words[k]);
    }
    let rect = g_words[6];
    let size = g_words[7];
    let t = r_tex(uv, u, v);
    let sw = size & 0xffffu;
    let sh = size >> 16u;
    let fcode = params.filter_code;
    if fcode == 0u {
        let tx = (rect & 0xffffu) + r_wrap(t.x * f32(sw), sw);
        let ty = (rect >> 16u) + r_wrap(t.y * f32(sh), sh);
        return load_rgba8(params.atlas, tx, ty);
    }
    if sw == 0u || sh == 0u {
        return 0u;
    }
    var rho2 = 0.0;
    for (var k = 0u; k < 2u; k++) {
        var n = r_primary(x + 1u, y);
        if k == 1u {
            n = r_primary(x, y + 1u);
        }
        let b = r_on_plane(n, tri);
        if faulted() {
            return 0u;
        }
        var d2 = bitcast<f32>(0x7f800000u);
        if b.ok {
            let nt = r_tex(uv, b.u, b.v);
            let du = (nt.x - t.x) * f32(sw);
            let dv = (nt.y - t.y) * f32(sh);
            d2 = du * du + dv * dv;
        }
        rho2 = max(rho2, d2);
    }
    let lod_raw = f32((bitcast<i32>(rho2) - 0x3f800000) >> 16u) / 256.0;
    let cap = countTrailingZeros((rect & 0xffffu) | (rect >> 16u) | (size & 0xffffu) | (size >> 16u));
    let lod = min(lod_raw, f32(cap));
    let win = vec4<u32>(rect & 0xffffu, rect >> 16u, sw, sh);
    return sample_rgba8_window(params.atlas, fcode - 1u, 0u, win, t.x, t.y, lod);
}

fn r_ao_ray(primary: Ray, pixel: u32, k: u32) -> Ray {
    let tris = params.tris;
    r_words(tris, rs[3] * R_TRI_WORDS + 3u, 6u);
    let e1 = r_vec3_at(0u);
    let e2 = r_vec3_at(3u);
    var n = r_cross(e1, e2);
    if r_dot(n, primary.d) > 0.0 {
        n = -n;
    }
    let m = max(max(abs(n.x), abs(n.y)), abs(n.z));
    n = n / m;
    let h = r_hash(pixel * 16u + k);
    let step = bitcast<f32>(0x3ac00000u);
    let off = vec3<f32>(
        (f32(h & 1023u) - 511.5) * step,
        (f32((h >> 10u) & 1023u) - 511.5) * step,
        (f32((h >> 20u) & 1023u) - 511.5) * step,
    );
    var d = n + off;
    if r_dot(d, n) <= 0.0 {
        d = n - off;
    }
    let t = bitcast<f32>(rs[2]) * bitcast<f32>(0x3f7fc000u);
    let o = primary.o + primary.d * t;
    return r_ray(o, d * params.ao_radius);
}

// The CPU twin's `advance`: the pixel's colour, or (after a miss, `faulted()`) 0 with `rs`
// saying how far the ray got.
fn r_advance(x: u32, y: u32) -> u32 {
    let primary = r_primary(x, y);
    let samples = params.ao_samples;
    loop {
        let phase = rs[0] & 0xffu;
        if phase == R_START {
            rs = array<u32, 7>(R_PRIMARY, 0u, 0x7f800000u, R_NONE, 0u, 0u, 0u);
        } else if phase == R_SHADE {
            let c = r_albedo(x, y, primary);
            if faulted() {
                return 0u;
            }
            rs[4] = c;
            rs[0] = R_AO;
            rs[1] = 0u;
            rs[5] = 0u;
        } else if phase == R_PRIMARY || phase == R_AO {
            // The primary ray and the occlusion rays share this one call of `r_walk`: a shader
            // compiler inlines every call, and the walk (its loads and page-table lookups) is
            // most of the kernel, so two calls made lavapipe compile it twice.
            let ao = phase == R_AO;
            let k = rs[0] >> R_SAMPLE_SHIFT;
            if ao && k >= samples {
                let n = max(samples, 1u);
                let lit = n + 3u * (n - min(rs[5], n));
                let c = rs[4];
                let r = (c & 0xffu) * lit / (4u * n);
                let g = ((c >> 8u) & 0xffu) * lit / (4u * n);
                let b = ((c >> 16u) & 0xffu) * lit / (4u * n);
                return r | (g << 8u) | (b << 16u) | 0xff000000u;
            }
            var ray = primary;
            var skip = R_NONE;
            if ao {
                ray = r_ao_ray(primary, y * params.width + x, k);
                if faulted() {
                    return 0u;
                }
                skip = rs[3];
            }
            let hit = r_walk(ray, ao, skip);
            if faulted() {
                return 0u;
            }
            if ao {
                if hit {
                    rs[5] += 1u;
                }
                rs[0] = R_AO | ((k + 1u) << R_SAMPLE_SHIFT);
                rs[1] = 0u;
            } else {
                if rs[3] == R_NONE {
                    return R_SKY;
                }
                rs[0] = R_SHADE;
            }
        } else {
            return R_BAD_STATE;
        }
    }
    return 0u;
}

fn kernel_main(x: u32, y: u32) {
    let state = params.state;
    let base = (y * params.width + x) * R_STATE_WORDS;
    // Only a ray that suspended has a state other than START (zeros) to read (rays.rs).
    for (var i = 0u; i < 7u; i++) {
        rs[i] = 0u;
        if resumed() {
            rs[i] = load_u32(state, base + i);
        }
    }
    if faulted() {
        return;
    }
    let saved = rs;
    let c = r_advance(x, y);
    if faulted() {
        var progress = false;
        for (var i = 0u; i < 7u; i++) {
            if rs[i] != saved[i] {
                progress = true;
            }
        }
        if progress && suspend() {
            for (var i = 0u; i < 7u; i++) {
                store_u32(state, base + i, rs[i]);
            }
        }
        return;
    }
    store_rgba8(params.image, x, y, c);
}
