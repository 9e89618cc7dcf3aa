//! Object-level SFR (OO-VR §4): objects dealt to GPMs round robin in submission order, both
//! eyes of an object on its GPM.
use super::{DrawObject, Scheme, SchemeError, Work};

pub struct ObjectRoundRobin;

impl Scheme for ObjectRoundRobin {
    fn name(&self) -> &'static str {
        "object"
    }

    fn plan(&mut self, objects: &[DrawObject], gpms: usize) -> Result<Vec<Work>, SchemeError> {
        if gpms == 0 {
            return Err(SchemeError::NoGpms);
        }
        Ok((0..objects.len())
            .map(|k| Work {
                gpm: k % gpms,
                objects: vec![k],
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vr::tsl::TextureSet;

    #[test]
    fn five_objects_over_two_gpms_by_hand() {
        let objs: Vec<DrawObject> = (0..5)
            .map(|s| DrawObject {
                surface: s,
                triangles: vec![s],
                textures: TextureSet::default(),
            })
            .collect();
        let plan = ObjectRoundRobin.plan(&objs, 2).unwrap();
        // Objects 0..5 dealt 0, 1, 0, 1, 0.
        let got: Vec<(usize, Vec<usize>)> = plan.into_iter().map(|w| (w.gpm, w.objects)).collect();
        assert_eq!(
            got,
            [
                (0, vec![0]),
                (1, vec![1]),
                (0, vec![2]),
                (1, vec![3]),
                (0, vec![4])
            ]
        );
    }
}
