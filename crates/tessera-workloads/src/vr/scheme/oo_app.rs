//! OO_APP (OO-VR §6's "(v)"): the object-oriented programming model alone, i.e. TSL batching
//! (Eq. 1, [`crate::vr::tsl::batch`]) with the batches dealt to GPMs round robin in the order
//! they are issued. No predictor and no pre-allocation: those are OO-VR's hardware (§5.2). The
//! round-robin dealing is our reading: §6 says OO_APP is the programming model only, and
//! round robin is the paper's baseline distribution for batches (its warm-up, §5.2).
use super::{DrawObject, Scheme, SchemeError, Work};
use crate::vr::tsl::batch;

pub struct OoApp;

impl Scheme for OoApp {
    fn name(&self) -> &'static str {
        "oo-app"
    }

    fn plan(&mut self, objects: &[DrawObject], gpms: usize) -> Result<Vec<Work>, SchemeError> {
        if gpms == 0 {
            return Err(SchemeError::NoGpms);
        }
        Ok(batch(objects)
            .into_iter()
            .enumerate()
            .map(|(j, b)| Work {
                gpm: j % gpms,
                objects: b.objects,
            })
            .collect())
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
        let plan = OoApp.plan(&objs, 2).unwrap();
        let got: Vec<(usize, Vec<usize>)> = plan.into_iter().map(|w| (w.gpm, w.objects)).collect();
        assert_eq!(got, [(0, vec![0, 2]), (1, vec![1, 4]), (0, vec![3])]);
    }
}
