//! The baseline (OO-VR §2, §6 "(i)"): the GPMs programmed as one GPU. The two eyes are drawn
//! one after the other (no multi-view sharing), and the hardware deals each eye's screen
//! tiles to the GPMs round robin, as one GPU deals raster tiles to its raster engines; a
//! texture page lives where it was first touched (the paper's FT policy, §3). Table 2's
//! rasterizer tile is 16×16; we deal [`BASELINE_TILE`]-pixel tiles, since each tile is a pass
//! here and a pass has a fixed cost on the software devices.
use super::{Composition, FrameInput, Piece, Plan, Region, Scheme, Traits};

/// The side of the screen tiles the baseline deals, in pixels.
pub const BASELINE_TILE: u32 = 64;

pub struct Baseline;

impl Baseline {
    /// Left eye's tiles row by row from the bottom, then the right eye's; tile k on GPM k mod N.
    pub fn pieces(input: &FrameInput<'_>) -> Vec<Piece> {
        let (w, h) = (input.width, input.height);
        let mut out = Vec::new();
        for eye in 0..2u32 {
            for y0 in (0..h).step_by(BASELINE_TILE as usize) {
                for x0 in (0..w).step_by(BASELINE_TILE as usize) {
                    out.push(Piece {
                        gpm: out.len() % input.gpms,
                        objects: None,
                        region: Region {
                            x0: eye * w + x0,
                            y0,
                            x1: eye * w + (x0 + BASELINE_TILE).min(w),
                            y1: (y0 + BASELINE_TILE).min(h),
                        },
                    });
                }
            }
        }
        out
    }
}

impl Scheme for Baseline {
    fn traits(&self) -> Traits {
        Traits::new("baseline", Composition::InPlace)
    }
    fn plan(&mut self, input: &FrameInput<'_>) -> Plan {
        Plan::of(Self::pieces(input))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_both_eyes_once_dealt_round_robin() {
        // 100x70 per eye: 2x2 tiles per eye (64 + 36, 64 + 6), 8 tiles over 3 GPMs.
        let input = FrameInput {
            index: 0,
            objects: &[],
            features: &[],
            gpms: 3,
            width: 100,
            height: 70,
        };
        let p = Baseline::pieces(&input);
        assert_eq!(p.len(), 8);
        let gpms: Vec<usize> = p.iter().map(|p| p.gpm).collect();
        assert_eq!(gpms, [0, 1, 2, 0, 1, 2, 0, 1]);
        assert_eq!(
            p[1].region,
            Region {
                x0: 64,
                y0: 0,
                x1: 100,
                y1: 64
            }
        );
        assert_eq!(
            p[7].region,
            Region {
                x0: 164,
                y0: 64,
                x1: 200,
                y1: 70
            }
        );
        let area: u32 = p
            .iter()
            .map(|p| (p.region.x1 - p.region.x0) * (p.region.y1 - p.region.y0))
            .sum();
        assert_eq!(area, 2 * 100 * 70);
    }
}
