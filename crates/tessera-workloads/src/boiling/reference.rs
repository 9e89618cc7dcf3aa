//! Plain, unpaged, single-device boiling simulation: the ground truth that paged runs
//! are checked against. Each pass writes a separate full-size buffer, exactly as the
//! render-to-texture passes do, so no pass ever sees its own partial output.

use super::math::{
    border, buoyancy, clamp_coord, diffusion, display, initial_value, latent_heat, BoilingParams,
};

/// The four intermediate fields of one frame, in pass order.
#[derive(Clone, Debug, PartialEq)]
pub struct FramePasses {
    /// Border pass output `A`; also "the frame input" whose 3×3 the latent pass reads.
    pub border: Vec<f32>,
    /// Diffusion of `A`.
    pub diffusion: Vec<f32>,
    /// Buoyancy of the diffusion output.
    pub buoyancy: Vec<f32>,
    /// Latent-heat output: the next frame's field.
    pub latent: Vec<f32>,
}

/// An unpaged `width × height` boiling field, row-major from the lower left
/// (`index = y * width + x`). A zero-sized field is valid and simply empty.
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceBoiling {
    /// Texels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// Constants of the equations, fixed for the run.
    pub params: BoilingParams,
    /// `width * height` temperatures, the input of the next frame.
    pub field: Vec<f32>,
}

impl ReferenceBoiling {
    /// A field initialised texel by texel with [`initial_value`].
    pub fn new(width: u32, height: u32, params: BoilingParams) -> Self {
        let field = (0..height)
            .flat_map(|y| (0..width).map(move |x| initial_value(&params, x, y, width, height)))
            .collect();
        Self {
            width,
            height,
            params,
            field,
        }
    }

    /// Clamp-to-edge read of `buf` at `(x + dx, y + dy)`.
    fn at(&self, buf: &[f32], x: u32, y: u32, dx: i64, dy: i64) -> f32 {
        let cx = clamp_coord(i64::from(x) + dx, self.width);
        let cy = clamp_coord(i64::from(y) + dy, self.height);
        buf[cy as usize * self.width as usize + cx as usize]
    }

    /// Evaluates `f(x, y)` over the whole field, in index order.
    fn map(&self, f: impl Fn(u32, u32) -> f32) -> Vec<f32> {
        (0..self.height)
            .flat_map(|y| (0..self.width).map(move |x| (x, y)))
            .map(|(x, y)| f(x, y))
            .collect()
    }

    /// Runs the four passes of one frame on the current field without advancing it.
    pub fn frame_passes(&self) -> FramePasses {
        let p = &self.params;
        let h = self.height;
        let a = self.map(|x, y| border(p, x, y, h, self.at(&self.field, x, y, 0, 0)));
        let b = self.map(|x, y| {
            let r = |dx, dy| self.at(&a, x, y, dx, dy);
            diffusion(p, r(0, 0), r(0, 1), r(0, -1), r(1, 0), r(-1, 0))
        });
        let c = self.map(|x, y| {
            let r = |dy| self.at(&b, x, y, 0, dy);
            buoyancy(p, r(0), r(1), r(-1))
        });
        let latent = self.map(|x, y| {
            let mut input = [0.0f32; 9];
            for (i, t) in input.iter_mut().enumerate() {
                let (dx, dy) = ((i % 3) as i64 - 1, (i / 3) as i64 - 1);
                *t = self.at(&a, x, y, dx, dy);
            }
            let r = |dx, dy| self.at(&c, x, y, dx, dy);
            latent_heat(p, input, r(0, 0), r(0, 1), r(0, -1), r(1, 0), r(-1, 0))
        });
        FramePasses {
            border: a,
            diffusion: b,
            buoyancy: c,
            latent,
        }
    }

    /// Advances the field by one frame.
    pub fn step(&mut self) {
        self.field = self.frame_passes().latent;
    }

    /// Advances the field by `frames` frames.
    pub fn run(&mut self, frames: u32) {
        for _ in 0..frames {
            self.step();
        }
    }

    /// The field through [`display`]: RGBA8, 4 bytes per texel, in field order (rows from
    /// the lower left), so an image writer must flip rows for a top-down format.
    pub fn display_rgba(&self) -> Vec<u8> {
        self.field
            .iter()
            .flat_map(|&t| display(&self.params, t))
            .collect()
    }
}

/// 64-bit FNV-1a over a byte stream.
pub fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// FNV-1a 64 over the little-endian bytes of `field`, in order: a platform-independent
/// fingerprint, so runs compare by bits, not by tolerance.
pub fn field_checksum(field: &[f32]) -> u64 {
    fnv1a(field.iter().flat_map(|v| v.to_le_bytes()))
}

/// `c` as exactly 16 lowercase hex digits.
pub fn checksum_hex(c: u64) -> String {
    format!("{c:016x}")
}

#[cfg(test)]
mod tests {
    use super::super::math::heater;
    use super::*;

    #[test]
    fn fnv1a_known_vectors() {
        assert_eq!(fnv1a(*b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(*b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(*b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn checksum_uses_little_endian_f32_bytes() {
        // 1.0f32 is 0x3f800000.
        assert_eq!(field_checksum(&[1.0]), fnv1a([0x00, 0x00, 0x80, 0x3f]));
        assert_eq!(field_checksum(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(checksum_hex(0xaf63_dc4c_8601_ec8c), "af63dc4c8601ec8c");
        assert_eq!(checksum_hex(0x1f), "000000000000001f");
    }

    #[test]
    fn stays_finite_and_bounded_and_boils_within_200_frames() {
        let mut sim = ReferenceBoiling::new(64, 64, BoilingParams::default());
        sim.run(200);
        let p = sim.params;
        assert!(sim
            .field
            .iter()
            .all(|t| t.is_finite() && (p.t_min..=p.t_max).contains(t)));
        // Vapour away from the heater: bubbles formed and rose.
        assert!(sim.field[16 * 64..].iter().any(|&t| t > p.t_c));
    }

    #[test]
    fn uniform_field_without_source_stays_uniform() {
        // Heater and surface at the field's own temperature, i.e. no source at all.
        let p = BoilingParams {
            t_hot: 0.3,
            t_cold: 0.3,
            hot_jitter: 0.0,
            ..BoilingParams::default()
        };
        let mut sim = ReferenceBoiling::new(8, 8, p);
        sim.field = vec![0.3; 64];
        assert!(sim.frame_passes().diffusion.iter().all(|&t| t == 0.3));
        sim.run(10);
        assert!(sim.field.iter().all(|&t| t == 0.3));
    }

    #[test]
    fn border_pass_sets_rows_and_field_evolves() {
        let p = BoilingParams::default();
        let mut sim = ReferenceBoiling::new(32, 16, p);
        let a = sim.frame_passes().border;
        assert!((0..32).all(|x| a[x as usize] == heater(&p, x)));
        assert!(a[15 * 32..].iter().all(|&t| t == p.t_cold));
        let uniform = ReferenceBoiling::new(
            32,
            16,
            BoilingParams {
                hot_jitter: 0.0,
                ..p
            },
        );
        assert!(uniform.frame_passes().border[..32]
            .iter()
            .all(|&t| t == p.t_hot));
        let before = sim.field.clone();
        sim.run(50);
        assert_ne!(field_checksum(&before), field_checksum(&sim.field));
    }

    #[test]
    fn degenerate_sizes_do_not_panic() {
        for (w, h) in [(0, 0), (0, 5), (5, 0), (1, 1), (1, 7), (7, 1)] {
            let mut sim = ReferenceBoiling::new(w, h, BoilingParams::default());
            sim.run(3);
            assert_eq!(sim.field.len(), (w * h) as usize);
            assert_eq!(sim.display_rgba().len(), (w * h * 4) as usize);
        }
    }
}
