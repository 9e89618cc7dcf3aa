// WGSL twin of math.rs: the per-texel equations of the boiling coupled map lattice.
// Same expressions in the same order as math.rs (see its documentation for the derivation),
// so every function but `sigma` (tanh) is bit-identical to the CPU twin.
//
// Parameter words (`param(i)`, filled by `Ctx::wgsl_params` in mod.rs):
// 0..4 texture ids (field, border, diffusion, buoyancy, display), 5 width, 6 height,
// 7.. the BoilingParams fields as f32 bits in declaration order.

fn p_field() -> u32 { return param(0u); }
fn p_border() -> u32 { return param(1u); }
fn p_diffusion() -> u32 { return param(2u); }
fn p_buoyancy() -> u32 { return param(3u); }
fn p_display() -> u32 { return param(4u); }
fn p_width() -> u32 { return param(5u); }
fn p_height() -> u32 { return param(6u); }
fn p_t_hot() -> f32 { return bitcast<f32>(param(7u)); }
fn p_t_cold() -> f32 { return bitcast<f32>(param(8u)); }
fn p_t_c() -> f32 { return bitcast<f32>(param(9u)); }
fn p_alpha() -> f32 { return bitcast<f32>(param(10u)); }
fn p_k_diff() -> f32 { return bitcast<f32>(param(11u)); }
fn p_k_buoy() -> f32 { return bitcast<f32>(param(12u)); }
fn p_k_latent() -> f32 { return bitcast<f32>(param(13u)); }
fn p_t_min() -> f32 { return bitcast<f32>(param(14u)); }
fn p_t_max() -> f32 { return bitcast<f32>(param(15u)); }
fn p_hot_jitter() -> f32 { return bitcast<f32>(param(17u)); }

// Clamp-to-edge addressing; 0 for an empty axis.
fn clamp_coord(c: i32, n: u32) -> u32 {
    let hi = i32(max(n, 1u) - 1u);
    return u32(clamp(c, 0, hi));
}

// Clamp-to-edge neighbour read (Ctx::at).
fn at(id: u32, x: u32, y: u32, dx: i32, dy: i32) -> f32 {
    let cx = clamp_coord(i32(x) + dx, p_width());
    let cy = clamp_coord(i32(y) + dy, p_height());
    return load_f32(id, cx, cy);
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
    return p_t_hot() - p_hot_jitter() * unit_hash(x ^ 0x9e3779b9u);
}

fn border_value(x: u32, y: u32, h: u32, centre: f32) -> f32 {
    if y == 0u {
        return heater(x);
    } else if y + 1u == h {
        return p_t_cold();
    }
    return centre;
}

fn diffusion_value(c: f32, n: f32, s: f32, e: f32, w: f32) -> f32 {
    let lap = ((n - c) + (s - c)) + ((e - c) + (w - c));
    return c + p_k_diff() * lap;
}

// The one transcendental: WGSL's tanh may differ from the CPU's libm in the last bits.
fn sigma(t: f32) -> f32 {
    return tanh(p_alpha() * (t - p_t_c()));
}

fn buoyancy_value(c: f32, above: f32, below: f32) -> f32 {
    let half = p_k_buoy() * 0.5f;
    let d = sigma(below) - sigma(above);
    return c + half * d;
}

fn latent_heat_value(input: array<f32, 9>, b_c: f32, b_n: f32, b_s: f32, b_e: f32, b_w: f32) -> f32 {
    let tc = p_t_c();
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
    let t = b_c + p_k_latent() * q;
    return min(max(t, p_t_min()), p_t_max());
}

fn seg(u: f32, k: f32) -> f32 {
    return clamp(u * 3.0f - k, 0.0f, 1.0f);
}

fn quantise(v: f32) -> u32 {
    return u32(floor(v * 255.0f + 0.5f));
}

// RGBA8 colour map, packed little-endian (r in the low byte) as the CPU twin stores it.
fn display_value(t: f32) -> u32 {
    let u = min(max((t - p_t_min()) / (p_t_max() - p_t_min()), 0.0f), 1.0f);
    let r = seg(u, 0.0f);
    let g = seg(u, 1.0f);
    let w = seg(u, 2.0f);
    let b = (1.0f - r) * (64.0f / 255.0f) + w;
    return quantise(r) | (quantise(g) << 8u) | (quantise(b) << 16u) | (255u << 24u);
}
