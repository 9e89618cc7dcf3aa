//! Alternate frame rendering (OO-VR §4.1, Fig. 6a): frame f, both eyes, entirely on GPM
//! f mod N. Every GPM holds all textures (AFR pre-allocates the memory space in each GPM), so
//! no page crosses a link; the frame latency is one GPM's time for a whole frame, while N
//! frames are in flight at once (the run report gives the throughput figure beside it).
use super::{check_gpms, render_all, Composition, FrameInput, FrameTiming, Piece, Render, Scheme};
use crate::vr::VrError;

pub struct Afr;

impl Scheme for Afr {
    fn name(&self) -> &'static str {
        "afr"
    }
    fn composition(&self) -> Composition {
        Composition::InPlace
    }
    fn replicated(&self) -> bool {
        true
    }
    fn frame(
        &mut self,
        input: &FrameInput<'_>,
        render: &mut Render<'_>,
    ) -> Result<FrameTiming, VrError> {
        check_gpms(input.gpms)?;
        let piece = Piece {
            gpm: (input.index % input.gpms as u64) as usize,
            objects: None,
            region: input.full(),
        };
        render_all(&[piece], input.gpms, render)
    }
}
