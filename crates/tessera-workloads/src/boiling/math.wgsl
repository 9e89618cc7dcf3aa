// WGSL twin of math.rs: the per-texel equations of the boiling coupled map lattice.
// Same expressions in the same order as math.rs (see its documentation for the derivation),
// so every function but `sigma` (tanh) is bit-identical to the CPU twin.
//
// `params` is `BoilingKernelParams` (mod.rs): the texture ids, the field size and the
// BoilingParams constants, under their Rust names.

// Clamp-to-edge addressing; 0 for an empty axis.
fn clamp_coord(c: i32, n: u32) -> u32 {
    let hi = i32(max(n, 1u) - 1u);
    return u32(clamp(c, 0, hi));
}

// Clamp-to-edge neighbour read (Ctx::at).
fn at(id: u32, x: u32, y: u32, dx: i32, dy: i32) -> f32 {
    let cx = clamp_coord(i32(x) + dx, params.width);
    let cy = clamp_coord(i32(y) + dy, params.height);
    return load_f32(id, cx, cy);
}

// The 5-point stencil of `id` at (x, y): centre, north, south, east, west, read in that order
// (arguments are evaluated left to right), as `Ctx::five_point` reads them.
fn five_point(id: u32, x: u32, y: u32) -> array<f32, 5> {
    return array<f32, 5>(
        at(id, x, y, 0, 0),
        at(id, x, y, 0, 1),
        at(id, x, y, 0, -1),
        at(id, x, y, 1, 0),
        at(id, x, y, -1, 0),
    );
}

// lowbias32: WGSL u32 arithmetic wraps, as Rust's wrapping_mul does.
fn hash32(v0: u32) -> u32 {
    var v = v0;
    v ^= v >> 16u;
    v = v * 0x7feb352du;
    v ^= v >> 15u;
    v = v * 0x846ca68bu;
    v ^= v >> 16u;
    return v;
}

fn unit_hash(v: u32) -> f32 {
    return f32(hash32(v) >> 8u) * (1.0f / 16777216.0f);
}

fn heater(x: u32) -> f32 {
    return params.t_hot - params.hot_jitter * unit_hash(x ^ 0x9e3779b9u);
}

fn border_value(x: u32, y: u32, h: u32, centre: f32) -> f32 {
    if y == 0u {
        return heater(x);
    } else if y + 1u == h {
        return params.t_cold;
    }
    return centre;
}

fn diffusion_value(c: f32, n: f32, s: f32, e: f32, w: f32) -> f32 {
    let lap = ((n - c) + (s - c)) + ((e - c) + (w - c));
    return c + params.k_diff * lap;
}

// The one transcendental: WGSL's tanh may differ from the CPU's libm in the last bits.
fn sigma(t: f32) -> f32 {
    return tanh(params.alpha * (t - params.t_c));
}

fn buoyancy_value(c: f32, above: f32, below: f32) -> f32 {
    let half = params.k_buoy * 0.5f;
    let d = sigma(below) - sigma(above);
    return c + half * d;
}

fn latent_heat_value(input: array<f32, 9>, b_c: f32, b_n: f32, b_s: f32, b_e: f32, b_w: f32) -> f32 {
    let tc = params.t_c;
    let was = array<f32, 4>(input[7], input[1], input[5], input[3]);
    let now = array<f32, 4>(b_n, b_s, b_e, b_w);
    var cond = 0.0f;
    for (var i = 0u; i < 4u; i++) {
        if was[i] > tc && now[i] <= tc {
            cond += 1.0f;
        }
    }
    var evap = 0.0f;
    if input[4] <= tc && b_c > tc {
        for (var i = 0u; i < 9u; i++) {
            if input[i] <= tc {
                evap += 1.0f;
            }
        }
    }
    let q = cond - evap / 9.0f;
    let t = b_c + params.k_latent * q;
    return min(max(t, params.t_min), params.t_max);
}

fn seg(u: f32, k: f32) -> f32 {
    return clamp(u * 3.0f - k, 0.0f, 1.0f);
}

fn quantise(v: f32) -> u32 {
    return u32(floor(v * 255.0f + 0.5f));
}

// RGBA8 colour map, packed little-endian (r in the low byte) as the CPU twin stores it.
fn display_value(t: f32) -> u32 {
    let u = min(max((t - params.t_min) / (params.t_max - params.t_min), 0.0f), 1.0f);
    let r = seg(u, 0.0f);
    let g = seg(u, 1.0f);
    let w = seg(u, 2.0f);
    let b = (1.0f - r) * (64.0f / 255.0f) + w;
    return quantise(r) | (quantise(g) << 8u) | (quantise(b) << 16u) | (255u << 24u);
}
