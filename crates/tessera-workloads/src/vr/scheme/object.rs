//! Object-level SFR (OO-VR §4.3): objects dealt to GPMs round robin in submission order, both
//! eyes of an object on its GPM, fragments composed on the root GPM.
use super::{check_gpms, merged, render_all, Composition, FrameInput, FrameTiming, Render, Scheme};
use crate::vr::VrError;

pub struct ObjectRoundRobin;

/// Object k to GPM k mod `gpms`.
pub fn deal(objects: usize, gpms: usize) -> Vec<(usize, Vec<usize>)> {
    (0..objects).map(|k| (k % gpms, vec![k])).collect()
}

impl Scheme for ObjectRoundRobin {
    fn name(&self) -> &'static str {
        "object"
    }
    fn composition(&self) -> Composition {
        Composition::Root
    }
    fn frame(
        &mut self,
        input: &FrameInput<'_>,
        render: &mut Render<'_>,
    ) -> Result<FrameTiming, VrError> {
        check_gpms(input.gpms)?;
        let groups = deal(input.objects.len(), input.gpms);
        let mut t = render_all(&merged(input, groups), input.gpms, render)?;
        t.batches = input.objects.len();
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_objects_over_two_gpms_by_hand() {
        // Objects 0..5 dealt 0, 1, 0, 1, 0.
        let got: Vec<usize> = deal(5, 2).into_iter().map(|(g, _)| g).collect();
        assert_eq!(got, [0, 1, 0, 1, 0]);
    }
}
