//! Tile-level split frame rendering (OO-VR §4.2, Fig. 6b–c): the stereo frame (both eyes side
//! by side) cut into as many strips as GPMs, vertical (`sfr-v`, GPM 0 on the left) or
//! horizontal (`sfr-h`, GPM 0 at the bottom, each strip across both eyes); every GPM draws all
//! objects over its strip, into its own part of the framebuffer.
use super::{
    check_gpms, render_all, spans, Composition, FrameInput, FrameTiming, Piece, Region, Render,
    Scheme,
};
use crate::vr::VrError;

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
    fn name(&self) -> &'static str {
        if self.vertical {
            "sfr-v"
        } else {
            "sfr-h"
        }
    }
    fn composition(&self) -> Composition {
        Composition::InPlace
    }
    fn frame(
        &mut self,
        input: &FrameInput<'_>,
        render: &mut Render<'_>,
    ) -> Result<FrameTiming, VrError> {
        check_gpms(input.gpms)?;
        render_all(&self.pieces(input), input.gpms, render)
    }
}
