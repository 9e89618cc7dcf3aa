//! Tile-level split frame rendering (OO-VR §4.2, Fig. 6b–c): the stereo frame (both eyes side
//! by side) cut into as many strips as GPMs, vertical (`sfr-v`, GPM 0 on the left) or
//! horizontal (`sfr-h`, GPM 0 at the bottom, each strip across both eyes); every GPM draws all
//! objects over its strip, into its own part of the framebuffer.
use super::{spans, Composition, FrameInput, Piece, Plan, Region, Scheme, Traits};

pub struct Sfr {
    vertical: bool,
}

impl Sfr {
    pub fn vertical() -> Self {
        Sfr { vertical: true }
    }
    pub fn horizontal() -> Self {
        Sfr { vertical: false }
    }

    /// Each GPM's strip.
    pub fn pieces(&self, input: &FrameInput<'_>) -> Vec<Piece> {
        let full = input.full();
        let along = if self.vertical { full.x1 } else { full.y1 };
        spans(along, input.gpms)
            .into_iter()
            .enumerate()
            .filter(|(_, (a, b))| a < b)
            .map(|(gpm, (a, b))| Piece {
                gpm,
                objects: None,
                region: if self.vertical {
                    Region {
                        x0: a,
                        x1: b,
                        ..full
                    }
                } else {
                    Region {
                        y0: a,
                        y1: b,
                        ..full
                    }
                },
            })
            .collect()
    }
}

impl Scheme for Sfr {
    fn traits(&self) -> Traits {
        let name = if self.vertical { "sfr-v" } else { "sfr-h" };
        Traits::new(name, Composition::InPlace)
    }
    fn plan(&mut self, input: &FrameInput<'_>) -> Plan {
        Plan::of(self.pieces(input))
    }
}
