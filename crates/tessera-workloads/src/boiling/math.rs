//! Per-texel equations of the boiling coupled map lattice (Harris et al. 2002 / Yanagita;
//! paper 4.1.1, Table 1).
//!
//! The field is a `W×H` grid of temperatures stored row-major from the lower left
//! (`index = y * W + x`, `y = 0` is the bottom row, so "north"/"above" is `y + 1`).
//! Reads outside the grid use clamp-to-edge addressing ([`clamp_coord`]).
//!
//! One frame is four render-to-texture passes, each a pure function of the texels it
//! reads, so the paged CPU kernels and the WGSL shaders evaluate the same expressions:
//!
//! | pass        | reads                                    | function        |
//! |-------------|------------------------------------------|-----------------|
//! | border      | 1 texel of the frame input               | [`border`]      |
//! | diffusion   | 5-point stencil of the border output     | [`diffusion`]   |
//! | buoyancy    | centre, above, below of the diffusion    | [`buoyancy`]    |
//! | latent heat | 3×3 of the border output + 5 of buoyancy | [`latent_heat`] |
//!
//! Bit-identity: every function uses only f32 `+ - * /`, comparisons and `max`/`min`,
//! in the order its documentation gives; Rust never contracts `a * b + c` into an FMA,
//! and the GPU twin must not either. The one transcendental, `tanh` in [`sigma`], comes
//! from the platform maths library on the CPU; a GPU twin may differ from it in the last
//! bits (and, the model being chaotic, diverge visibly after a while), so only CPU paths
//! are expected to agree bit-for-bit.

/// Parameters of the boiling simulation. The defaults keep the proportions of the usual
/// runs of Yanagita's model (`T_c = 10`, heater 9.9, surface 9.2, `α = 10`), shifted
/// down by 9 so that temperatures live in `[0, 1.5]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoilingParams {
    /// Hottest heater temperature, forced onto the bottom row (see [`heater`]).
    pub t_hot: f32,
    /// Temperature forced onto the top row (the free surface, a heat sink).
    pub t_cold: f32,
    /// Phase-transition temperature: a texel above it is vapour, otherwise liquid.
    /// The heater sits below it on purpose: liquid only boils where buoyancy piles
    /// heat up, which is what makes separate bubbles rather than a vapour film.
    pub t_c: f32,
    /// Steepness of the phase indicator `σ(T) = tanh(alpha·(T − t_c))`.
    pub alpha: f32,
    /// Diffusion weight of the 5-point Laplacian; at most 0.25, which keeps the pass a
    /// convex combination of its inputs (the explicit scheme's stability limit).
    pub k_diff: f32,
    /// Buoyancy strength: at most `k_buoy` of heat moves into or out of a texel per frame.
    pub k_buoy: f32,
    /// Latent heat exchanged per phase change (see [`latent_heat`]).
    pub k_latent: f32,
    /// Lower bound every frame's output is clamped to; the dark-blue end of [`display`].
    pub t_min: f32,
    /// Upper bound every frame's output is clamped to; the white end of [`display`].
    pub t_max: f32,
    /// Amplitude of the pseudo-random perturbation of [`initial_value`].
    pub noise: f32,
    /// Depth of the fixed per-column dips in the heater temperature (see [`heater`]).
    pub hot_jitter: f32,
}

impl Default for BoilingParams {
    fn default() -> Self {
        Self {
            t_hot: 0.9,
            t_cold: 0.2,
            t_c: 1.0,
            alpha: 10.0,
            k_diff: 0.125,
            k_buoy: 1.0,
            k_latent: 0.1,
            t_min: 0.0,
            t_max: 1.5,
            noise: 0.2,
            hot_jitter: 0.2,
        }
    }
}

/// Clamp-to-edge addressing: maps a possibly out-of-range coordinate onto `[0, n − 1]`.
/// Returns 0 for an empty axis (`n == 0`) so callers never see an underflow.
#[inline]
pub fn clamp_coord(c: i64, n: u32) -> u32 {
    c.clamp(0, i64::from(n.saturating_sub(1))) as u32
}

/// 32-bit integer hash (lowbias32, Wellons): well mixed, and only wrapping `u32`
/// operations, which WGSL has too.
#[inline]
pub fn hash32(mut v: u32) -> u32 {
    v ^= v >> 16;
    v = v.wrapping_mul(0x7feb_352d);
    v ^= v >> 15;
    v = v.wrapping_mul(0x846c_a68b);
    v ^= v >> 16;
    v
}

/// `hash32(v)` mapped to `[0, 1)` through its top 24 bits, which an f32 holds exactly.
#[inline]
pub fn unit_hash(v: u32) -> f32 {
    (hash32(v) >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Heater temperature under column `x`: `t_hot − hot_jitter·unit_hash(x ^ 0x9e3779b9)`.
/// A perfectly uniform heater boils in flat horizontal sheets; fixed cooler columns act
/// as nucleation sites, so bubbles rise from distinct places, as on a real pan.
#[inline]
pub fn heater(p: &BoilingParams, x: u32) -> f32 {
    p.t_hot - p.hot_jitter * unit_hash(x ^ 0x9e37_79b9)
}

/// Pass 1, boundary conditions: `T' = heater(x)` on the bottom row (`y == 0`), `t_cold`
/// on the top row (`y == h − 1`), otherwise `centre`. A one-row field is all heater.
#[inline]
pub fn border(p: &BoilingParams, x: u32, y: u32, h: u32, centre: f32) -> f32 {
    if y == 0 {
        heater(p, x)
    } else if y + 1 == h {
        p.t_cold
    } else {
        centre
    }
}

/// Pass 2, thermal diffusion: `T' = c + k_diff·∇²T` with the 5-point Laplacian, evaluated
/// as `lap = ((n − c) + (s − c)) + ((e − c) + (w − c)); c + k_diff·lap`, where
/// `n`/`s`/`e`/`w` are the texels at `y + 1`, `y − 1`, `x + 1`, `x − 1`. Differencing
/// before summing makes `lap` exactly 0 on a uniform neighbourhood, so a uniform field is
/// a bit-exact fixed point (`(n + s + e + w) − 4c` leaves a rounding residue for 0.3).
#[inline]
pub fn diffusion(p: &BoilingParams, c: f32, n: f32, s: f32, e: f32, w: f32) -> f32 {
    let lap = ((n - c) + (s - c)) + ((e - c) + (w - c));
    c + p.k_diff * lap
}

/// Phase indicator `σ(T) = tanh(alpha·(T − t_c))`: about −1 for liquid, +1 for vapour.
#[inline]
pub fn sigma(p: &BoilingParams, t: f32) -> f32 {
    (p.alpha * (t - p.t_c)).tanh()
}

/// Pass 3, buoyancy (heat rises): `T' = c + (k_buoy/2)·(σ(below) − σ(above))`, evaluated
/// as `half = k_buoy·0.5; d = σ(below) − σ(above); c + half·d`. Vapour below a texel
/// pushes heat into it and vapour above draws heat out, so a bubble moves up: its cap
/// heats, its wake cools. Inside a uniform phase the terms cancel exactly.
#[inline]
pub fn buoyancy(p: &BoilingParams, c: f32, above: f32, below: f32) -> f32 {
    let half = p.k_buoy * 0.5;
    let d = sigma(p, below) - sigma(p, above);
    c + half * d
}

/// Pass 4, latent heat; its output is the next frame's input.
///
/// * `input`: 3×3 neighbourhood of the frame input (the border-pass output), row-major
///   from the lower left, `index = (dy + 1)·3 + (dx + 1)`: 4 is the centre, 7 north,
///   1 south, 5 east, 3 west.
/// * `b_c, b_n, b_s, b_e, b_w`: the 5-point stencil of the buoyancy output.
///
/// In evaluation order:
/// 1. `cond` = number of edge neighbours, tested n, s, e, w, that condensed this frame
///    (`input > t_c` but buoyancy output `≤ t_c`): each releases its latent heat into
///    this texel, which is Yanagita's latent-heat step.
/// 2. `evap` = 0, unless this texel evaporated (`input[4] ≤ t_c` and `b_c > t_c`); then
///    `evap` = number of `input` texels `≤ t_c`, in index order. A bubble nucleating
///    inside liquid pays the most latent heat; one growing into vapour pays little.
/// 3. `q = cond − evap/9;  T' = b_c + k_latent·q`.
/// 4. `T'' = min(max(T', t_min), t_max)`: buoyancy alone is unbounded, so the clamp is
///    what keeps the iteration in range; NaN maps to `t_min`.
#[inline]
pub fn latent_heat(
    p: &BoilingParams,
    input: [f32; 9],
    b_c: f32,
    b_n: f32,
    b_s: f32,
    b_e: f32,
    b_w: f32,
) -> f32 {
    let mut cond = 0.0f32;
    for (was, now) in [
        (input[7], b_n),
        (input[1], b_s),
        (input[5], b_e),
        (input[3], b_w),
    ] {
        if was > p.t_c && now <= p.t_c {
            cond += 1.0;
        }
    }
    let mut evap = 0.0f32;
    if input[4] <= p.t_c && b_c > p.t_c {
        for t in input {
            if t <= p.t_c {
                evap += 1.0;
            }
        }
    }
    let q = cond - evap / 9.0;
    let t = b_c + p.k_latent * q;
    t.max(p.t_min).min(p.t_max)
}

/// RGBA8 colour map: `u = (t − t_min)/(t_max − t_min)` clamped to `[0, 1]` runs dark blue
/// (0,0,64) → red (255,0,0) → yellow (255,255,0) → white (255,255,255), a third of the
/// range each; channels are `floor(v·255 + 0.5)`; alpha is 255. NaN shows as dark blue.
#[inline]
#[allow(clippy::manual_clamp)] // max-then-min maps NaN to 0, where clamp would keep it
pub fn display(p: &BoilingParams, t: f32) -> [u8; 4] {
    let u = ((t - p.t_min) / (p.t_max - p.t_min)).max(0.0).min(1.0);
    // Segment k's local parameter: `3u − k` clamped to [0, 1].
    let seg = |k: f32| (u * 3.0 - k).clamp(0.0, 1.0);
    let (r, g, w) = (seg(0.0), seg(1.0), seg(2.0));
    let b = (1.0 - r) * (64.0 / 255.0) + w;
    let q = |v: f32| (v * 255.0 + 0.5).floor() as u8;
    [q(r), q(g), q(b), 255]
}

/// Initial field: subcooled liquid at the surface temperature,
/// `t_cold + noise·(2·unit_hash(y·w + x) − 1)` (wrapping u32 index). Seedless on
/// purpose: every device and the reference start from the same bits. `h` is unused but
/// kept so every texel function is addressed the same way.
#[inline]
pub fn initial_value(p: &BoilingParams, x: u32, y: u32, w: u32, _h: u32) -> f32 {
    let r = unit_hash(y.wrapping_mul(w).wrapping_add(x));
    p.t_cold + p.noise * (r * 2.0 - 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamp_coord_clamps_to_edges() {
        assert_eq!(clamp_coord(-1, 8), 0);
        assert_eq!(clamp_coord(3, 8), 3);
        assert_eq!(clamp_coord(8, 8), 7);
        assert_eq!(clamp_coord(5, 0), 0);
    }

    #[test]
    fn border_forces_bottom_and_top_rows() {
        let p = BoilingParams {
            hot_jitter: 0.0,
            ..BoilingParams::default()
        };
        assert_eq!(border(&p, 3, 0, 10, 0.25), p.t_hot);
        assert_eq!(border(&p, 3, 9, 10, 0.25), p.t_cold);
        assert_eq!(border(&p, 3, 5, 10, 0.25), 0.25);
        assert_eq!(border(&p, 0, 0, 1, 0.25), p.t_hot);
        let p = BoilingParams::default();
        let hs: Vec<f32> = (0..64).map(|x| border(&p, x, 0, 10, 0.25)).collect();
        assert!(hs
            .iter()
            .all(|&t| t <= p.t_hot && t > p.t_hot - p.hot_jitter));
        assert!(
            hs.iter().any(|&t| t != hs[0]),
            "heater should vary per column"
        );
    }

    #[test]
    fn diffusion_matches_hand_computation() {
        let p = BoilingParams {
            k_diff: 0.25,
            ..BoilingParams::default()
        };
        // lap = (0 + 1) + (2 + 3) = 6, 1 + 0.25 * 6 = 2.5
        assert_eq!(diffusion(&p, 1.0, 1.0, 2.0, 3.0, 4.0), 2.5);
        // With k = 1/4 the result is the neighbour mean, whatever the centre.
        assert_eq!(diffusion(&p, 100.0, 1.0, 2.0, 3.0, 2.0), 2.0);
    }

    #[test]
    fn buoyancy_carries_heat_upward() {
        let p = BoilingParams::default();
        let (hot, cold) = (p.t_c + 1.0, p.t_c - 1.0);
        assert!(buoyancy(&p, 0.3, cold, hot) > 0.3);
        assert!(buoyancy(&p, 0.3, hot, cold) < 0.3);
        assert_eq!(buoyancy(&p, 0.3, hot, hot), 0.3);
    }

    #[test]
    fn latent_heat_matches_hand_computation() {
        let p = BoilingParams::default();
        let (v, l) = (p.t_c + 0.25, p.t_c - 0.25);
        // All four edge neighbours were vapour and are now liquid: 0.5 + 4 * 0.1.
        assert_eq!(
            latent_heat(&p, [v; 9], 0.5, l, l, l, l),
            0.5 + 4.0 * p.k_latent
        );
        // Nucleation in all-liquid input: q = 0 - 9/9, so 1.25 - 0.1.
        assert_eq!(latent_heat(&p, [l; 9], v, l, l, l, l), v - p.k_latent);
        // Nothing changed phase: untouched.
        assert_eq!(latent_heat(&p, [l; 9], 0.5, l, l, l, l), 0.5);
        assert_eq!(latent_heat(&p, [l; 9], 9.0, 9.0, 9.0, 9.0, 9.0), p.t_max);
        assert_eq!(latent_heat(&p, [l; 9], -3.0, l, l, l, l), p.t_min);
        let nan = f32::NAN;
        assert_eq!(latent_heat(&p, [l; 9], nan, l, l, l, l), p.t_min);
    }

    #[test]
    fn display_endpoints() {
        let p = BoilingParams::default();
        assert_eq!(display(&p, p.t_min), [0, 0, 64, 255]);
        assert_eq!(display(&p, p.t_max), [255, 255, 255, 255]);
        assert_eq!(display(&p, p.t_min + 0.5), [255, 0, 0, 255]);
        assert_eq!(display(&p, f32::NAN), [0, 0, 64, 255]);
    }

    #[test]
    fn initial_value_is_deterministic_and_within_noise() {
        let p = BoilingParams::default();
        let a = initial_value(&p, 5, 7, 64, 64);
        assert_eq!(a, initial_value(&p, 5, 7, 64, 64));
        assert_ne!(a, initial_value(&p, 6, 7, 64, 64));
        assert!((a - p.t_cold).abs() <= p.noise);
    }
}
