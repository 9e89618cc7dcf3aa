//! OO_APP (OO-VR §6's "(v)"): the object-oriented programming model alone, i.e. TSL batching
//! (Eq. 1, [`crate::vr::tsl::batch`]) with the batches dealt to GPMs round robin in the order
//! they are issued, composed on the root. No predictor, no pre-allocation and no distributed
//! composition: those are OO-VR's hardware (§5.2–5.3). The round-robin dealing is our reading:
//! §6 says OO_APP is the programming model only, and round robin is the paper's distribution
//! for batches before its predictor is fitted (§5.2).
use super::{merged, Composition, Eyes, FrameInput, Plan, Scheme, Traits};
use crate::vr::objects::DrawObject;
use crate::vr::tsl::batch;

pub struct OoApp;

/// The batches of `objects`, batch j (both views: OO_APP combines the two views of an object,
/// §6.1) on GPM j mod `gpms`.
pub fn deal(objects: &[DrawObject], gpms: usize) -> Vec<(usize, Eyes, Vec<usize>)> {
    batch(objects)
        .into_iter()
        .enumerate()
        .map(|(j, b)| (j % gpms, Eyes::Both, b.objects))
        .collect()
}

impl Scheme for OoApp {
    fn traits(&self) -> Traits {
        Traits::new("oo-app", Composition::Root)
    }
    fn plan(&mut self, input: &FrameInput<'_>) -> Plan {
        let groups = deal(input.objects, input.gpms);
        let batches = Some(groups.len());
        Plan {
            pieces: merged(input, groups),
            batches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(surface: u32, texture: u32) -> DrawObject {
        DrawObject {
            surface,
            triangles: vec![surface],
            textures: [(texture, 64)].into_iter().collect(),
        }
    }

    #[test]
    fn batches_by_texture_dealt_round_robin_by_hand() {
        // Textures A, B, A, C, B: batches {0, 2} (A), {1, 4} (B), {3} (C), each TSL 1 within
        // a batch and 0 across; dealt over 2 GPMs: 0, 1, 0.
        let objs = [obj(0, 1), obj(1, 2), obj(2, 1), obj(3, 3), obj(4, 2)];
        let b = Eyes::Both;
        assert_eq!(
            deal(&objs, 2),
            [(0, b, vec![0, 2]), (1, b, vec![1, 4]), (0, b, vec![3])]
        );
    }
}
