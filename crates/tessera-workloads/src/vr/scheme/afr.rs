//! Alternate frame rendering (OO-VR §4.1, Fig. 6a): frame f, both eyes, entirely on GPM
//! f mod N. Every GPM holds all textures (AFR pre-allocates the memory space in each GPM), so
//! no page crosses a link; the frame latency is one GPM's time for a whole frame, while N
//! frames are in flight at once (the run report gives the throughput figure beside it).
use super::{Composition, FrameInput, Piece, Plan, Scheme, Traits};

pub struct Afr;

impl Scheme for Afr {
    fn traits(&self) -> Traits {
        Traits {
            replicated: true,
            ..Traits::new("afr", Composition::InPlace)
        }
    }
    fn plan(&mut self, input: &FrameInput<'_>) -> Plan {
        Plan::of(vec![Piece {
            gpm: (input.index % input.gpms as u64) as usize,
            objects: None,
            region: input.full(),
        }])
    }
}
