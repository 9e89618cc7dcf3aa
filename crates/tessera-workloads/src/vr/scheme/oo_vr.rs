//! OO-VR (§5): TSL batches (Eq. 1) dispatched by the object-aware runtime distribution engine
//! (§5.2) and composed by the distributed hardware composition (§5.3).
//!
//! - Predictor: Eq. 3 fitted by least squares on the run's first [`WARMUP_BATCHES`] batches
//!   (dealt round robin), once; a fit the warm-up cannot determine waits for more batches.
//! - Dispatch: each batch to the GPM [`crate::vr::predict::schedule`] picks from the measured
//!   times of the batches before it: earliest available by predicted remaining work, a
//!   [`QUEUE_DEPTH`]-entry batch queue. A GPM's finish time is the schedule's, waits included.
//! - Pre-allocation: the PA units fetch a batch's pages ahead, so their link time overlaps
//!   rendering ([`Scheme::preallocates`]; the cost model uses it).
//! - Tail splitting: the frame's last batch is split into vertical strips of the stereo frame,
//!   one per GPM, each started when its GPM frees, when the predictions say that finishes
//!   sooner than the batch whole on one GPM (§5.2's fine-grained mapping of the left-over
//!   work to idle GPMs "based on their IDs").
//! - Composition: distributed, [`Composition::Distributed`].
use super::{
    check_gpms, spans, Composition, FrameInput, FrameTiming, Piece, Region, Render, Scheme, Traits,
};
use crate::vr::predict::{
    fit, schedule, BatchFeatures, Coefficients, DispatchConfig, PredictError, QUEUE_DEPTH,
    WARMUP_BATCHES,
};
use crate::vr::tsl::batch;
use crate::vr::VrError;

#[derive(Default)]
pub struct OoVr {
    coefficients: Option<Coefficients>,
    samples: Vec<(BatchFeatures, f64)>,
}

impl OoVr {
    /// The fitted rates, once the warm-up has determined them.
    pub fn coefficients(&self) -> Option<Coefficients> {
        self.coefficients
    }
}

fn sum(fs: impl Iterator<Item = BatchFeatures>) -> BatchFeatures {
    fs.fold(BatchFeatures::new(0.0, 0.0, 0.0), |a, f| {
        BatchFeatures::new(
            a.triangles + f.triangles,
            a.vertices + f.vertices,
            a.pixels + f.pixels,
        )
    })
}

impl Scheme for OoVr {
    fn traits(&self) -> Traits {
        Traits {
            preallocates: true,
            ..Traits::new("oo-vr", Composition::Distributed)
        }
    }
    fn frame(
        &mut self,
        input: &FrameInput<'_>,
        render: &mut Render<'_>,
    ) -> Result<FrameTiming, VrError> {
        check_gpms(input.gpms)?;
        let g = input.gpms;
        let batches = batch(input.objects);
        let n = batches.len();
        let feats: Vec<BatchFeatures> = batches
            .iter()
            .map(|b| sum(b.objects.iter().map(|&k| input.features[k])))
            .collect();
        let mut actual: Vec<f64> = Vec::with_capacity(n);
        let mut warm = 0usize;
        let mut errors = Vec::new();
        let mut tail: Option<(Vec<f64>, Vec<f64>)> = None;
        let predictions = |c: &Option<Coefficients>, upto: usize| -> Option<Vec<f64>> {
            c.map(|c| {
                feats[..upto]
                    .iter()
                    .map(|f| c.predict(f).max(0.0))
                    .collect()
            })
        };
        for (i, b) in batches.iter().enumerate() {
            let mut objects = b.objects.clone();
            objects.sort_unstable();
            let cfg = DispatchConfig {
                gpms: g,
                queue_depth: QUEUE_DEPTH,
                warmup: warm,
            };
            let predicted = predictions(&self.coefficients, i + 1);
            if let (Some(p), true) = (&predicted, i + 1 == n && n >= 2 && g >= 2) {
                // The tail: the schedule so far tells when each GPM frees.
                let s = schedule(&actual, Some(&p[..i]), cfg)?;
                let mut free = vec![0.0f64; g];
                for (k, &gg) in s.gpm.iter().enumerate() {
                    free[gg] = free[gg].max(s.finish[k]);
                }
                let mut with_tail = actual.clone();
                with_tail.push(p[i]);
                let whole = schedule(&with_tail, Some(p), cfg)?.makespan;
                let split = free.iter().map(|f| f + p[i] / g as f64).fold(0.0, f64::max);
                if split < whole {
                    let mut times = Vec::with_capacity(g);
                    for (gpm, (x0, x1)) in spans(2 * input.width, g).into_iter().enumerate() {
                        let t = if x0 < x1 {
                            render(&Piece {
                                gpm,
                                objects: Some(objects.clone()),
                                region: Region {
                                    x0,
                                    x1,
                                    ..input.full()
                                },
                            })?
                        } else {
                            0.0
                        };
                        times.push(t);
                    }
                    tail = Some((free, times));
                    break;
                }
            }
            let gpm = match &predicted {
                Some(p) if i >= warm => {
                    let mut a = actual.clone();
                    a.push(0.0);
                    *schedule(&a, Some(p), cfg)?.gpm.last().unwrap_or(&0)
                }
                _ => {
                    warm = i + 1;
                    i % g
                }
            };
            let t = render(&Piece {
                gpm,
                objects: Some(objects),
                region: input.full(),
            })?;
            actual.push(t);
            match (&predicted, i >= warm) {
                // A batch measured at 0 s has no relative error.
                (Some(p), true) if t > 0.0 => errors.push((p[i] - t).abs() / t),
                _ if self.coefficients.is_none() => {
                    self.samples.push((feats[i], t));
                    if self.samples.len() >= WARMUP_BATCHES {
                        match fit(&self.samples) {
                            Ok(c) => self.coefficients = Some(c),
                            Err(PredictError::Singular) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
                _ => {}
            }
        }
        let done = actual.len();
        let cfg = DispatchConfig {
            gpms: g,
            queue_depth: QUEUE_DEPTH,
            warmup: warm,
        };
        let predicted = predictions(&self.coefficients, done);
        let s = schedule(&actual, predicted.as_deref(), cfg)?;
        let mut finish = vec![0.0f64; g];
        for (k, &gg) in s.gpm.iter().enumerate() {
            finish[gg] = finish[gg].max(s.finish[k]);
        }
        let mut busy = s.busy.clone();
        let tail_split = tail.is_some();
        if let Some((free, times)) = tail {
            for k in 0..g {
                finish[k] = free[k] + times[k];
                busy[k] += times[k];
            }
        }
        Ok(FrameTiming {
            finish,
            busy,
            prediction_errors: errors,
            batches: n,
            tail_split,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vr::objects::DrawObject;

    /// Twelve objects, each its own texture (so each its own batch), with times that follow
    /// Eq. 3 exactly: t = 1·triangles + 2·vertices + 3·pixels. The last one is large.
    #[test]
    fn warm_up_fit_dispatch_and_tail_split_by_hand() {
        let objects: Vec<DrawObject> = (0..12)
            .map(|k| DrawObject {
                surface: k,
                triangles: vec![k],
                textures: [(k, 64)].into_iter().collect(),
            })
            .collect();
        let mut features: Vec<BatchFeatures> = (0..11)
            .map(|k| {
                let k = k as f64;
                BatchFeatures::new(1.0 + k, (k * k) % 7.0, 2.0 + (3.0 * k) % 5.0)
            })
            .collect();
        features.push(BatchFeatures::new(10.0, 10.0, 100.0));
        let time = |f: &BatchFeatures| f.triangles + 2.0 * f.vertices + 3.0 * f.pixels;
        let input = FrameInput {
            index: 0,
            objects: &objects,
            features: &features,
            gpms: 4,
            width: 10,
            height: 4,
        };
        let mut pieces: Vec<Piece> = Vec::new();
        let mut s = OoVr::default();
        let timing = s
            .frame(&input, &mut |p: &Piece| {
                pieces.push(p.clone());
                let objs = p.objects.as_ref().expect("OO-VR draws batches");
                let t: f64 = objs.iter().map(|&k| time(&features[k])).sum();
                // A strip of the tail does its share of the stereo frame's 20 columns.
                Ok(t * f64::from(p.region.x1 - p.region.x0) / 20.0)
            })
            .unwrap();
        let c = s.coefficients().unwrap();
        assert!(
            (c.c0 - 1.0).abs() < 1e-9 && (c.c1 - 2.0).abs() < 1e-9 && (c.c2 - 3.0).abs() < 1e-9
        );
        // Warm-up: batches 0..8 round robin.
        let gpms: Vec<usize> = pieces[..8].iter().map(|p| p.gpm).collect();
        assert_eq!(gpms, [0, 1, 2, 3, 0, 1, 2, 3]);
        // Batches 8, 9, 10 predicted exactly.
        assert_eq!(timing.prediction_errors.len(), 3);
        assert!(timing.prediction_errors.iter().all(|&e| e < 1e-9));
        // The last batch (time 10 + 20 + 300 = 330, far above the others) is split into the
        // four GPMs' vertical strips of the 20-column stereo frame: 5 columns each.
        assert!(timing.tail_split);
        let tail: Vec<(usize, u32, u32)> = pieces[11..]
            .iter()
            .map(|p| (p.gpm, p.region.x0, p.region.x1))
            .collect();
        assert_eq!(tail, [(0, 0, 5), (1, 5, 10), (2, 10, 15), (3, 15, 20)]);
        assert!(pieces[11..]
            .iter()
            .all(|p| p.objects.as_deref() == Some(&[11][..])));
        // Every GPM ends with its quarter of the tail, 82.5 s, after its other work.
        let busy: f64 = timing.busy.iter().sum();
        let all: f64 = features.iter().map(time).sum();
        assert!((busy - all).abs() < 1e-9);
        assert!(timing.finish.iter().all(|&f| f >= 82.5));
    }
}
