//! Object-level SFR (OO-VR §4.3, Fig. 6d): objects dealt to GPMs round robin in submission
//! order, fragments composed on the root GPM. Without multi-view rendering the two views of an
//! object are two draw objects ("it still executes the objects from the left and right views
//! separately"): the application submits the left view's objects, then the right view's, and
//! the dealing runs on through both, so the two views of one object meet on one GPM only when
//! the object count is a multiple of the GPM count.
use super::{merged, Composition, Eyes, FrameInput, Plan, Scheme, Traits};

pub struct ObjectRoundRobin;

/// Draw k of the sequence (left view's objects 0..n, then the right view's) to GPM k mod
/// `gpms`.
pub fn deal(objects: usize, gpms: usize) -> Vec<(usize, Eyes, Vec<usize>)> {
    let left = (0..objects).map(|k| (k % gpms, Eyes::Left, vec![k]));
    let right = (0..objects).map(|k| ((objects + k) % gpms, Eyes::Right, vec![k]));
    left.chain(right).collect()
}

impl Scheme for ObjectRoundRobin {
    fn traits(&self) -> Traits {
        Traits::new("object", Composition::Root)
    }
    fn plan(&mut self, input: &FrameInput<'_>) -> Plan {
        let groups = deal(input.objects.len(), input.gpms);
        Plan {
            pieces: merged(input, groups),
            batches: Some(2 * input.objects.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_objects_over_two_gpms_by_hand() {
        // Left views 0..5 dealt 0, 1, 0, 1, 0; right views continue the count: 1, 0, 1, 0, 1.
        let got: Vec<(usize, Eyes)> = deal(5, 2).into_iter().map(|(g, e, _)| (g, e)).collect();
        let (l, r) = (Eyes::Left, Eyes::Right);
        assert_eq!(
            got,
            [
                (0, l),
                (1, l),
                (0, l),
                (1, l),
                (0, l),
                (1, r),
                (0, r),
                (1, r),
                (0, r),
                (1, r)
            ]
        );
    }
}
