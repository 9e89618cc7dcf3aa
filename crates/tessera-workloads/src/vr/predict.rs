//! OO-VR's batch cost predictor (§5.2, Eqs. 2–3) and its earliest-available dispatch.
//!
//! Eq. 2 is the general form, `t(X) = RT(g_X, c_X, HW, ST)`: a batch's time from its geometry
//! and texture properties, the hardware and the rendering step. Eq. 3 is the linear instance
//! OO-VR uses, `t(X) = c0·#triangle_X + c1·#tv_X + c2·#pixel_X` (the extracted text prints the
//! first `+` as `=`; the sentence after it names the three terms as rates, so a sum is meant):
//! triangles, transformed vertices and rendered pixels, with `c0..c2` the GPM's triangle,
//! vertex and pixel rates. The coefficients are fitted once, by least squares over the first
//! [`WARMUP_BATCHES`] batches' measured times (§6: "the first 8 batches … initialize c0, c1 and
//! c2"), which are dispatched round robin.
//!
//! Dispatch ([`schedule`]): every batch is ready at time 0 (the middleware batches a frame's
//! objects before issuing them). A batch is dispatched as soon as the engine's batch queue has
//! room: the queue holds the batches dispatched to a GPM that have not started there yet, at
//! most [`QUEUE_DEPTH`] (§6: "we limit the maximum size of the batch queue to 4"; "multiple
//! batches could be distributed onto one GPM at the same time"). It goes to the GPM with the
//! least predicted remaining work: the predicted times of its unfinished batches, less the
//! elapsed part of the one running (§5.2's two counters: the elapsed counter advances with the
//! vertices and pixels done, i.e. by the fraction of the batch done times its prediction).
//! Ties go to the lowest GPM. A GPM runs its batches back to back in dispatch order.
//!
//! Simplification: fitting needs the warm-up batches' times, which the hardware has once they
//! finish; we fit before dispatching batch 9 without waiting for them. The paper fits once at
//! the start of rendering, so over many frames that wait happens once.

/// Batches measured before the predictor is fitted (§6).
pub const WARMUP_BATCHES: usize = 8;
/// The engine's batch queue (§6).
pub const QUEUE_DEPTH: usize = 4;

/// Eq. 3's inputs for one batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchFeatures {
    pub triangles: f64,
    /// Transformed vertices.
    pub vertices: f64,
    /// Rendered pixels.
    pub pixels: f64,
}

impl BatchFeatures {
    pub fn new(triangles: f64, vertices: f64, pixels: f64) -> Self {
        BatchFeatures {
            triangles,
            vertices,
            pixels,
        }
    }

    fn row(&self) -> [f64; 3] {
        [self.triangles, self.vertices, self.pixels]
    }
}

/// Eq. 3's rates: seconds per triangle, per transformed vertex, per pixel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coefficients {
    pub c0: f64,
    pub c1: f64,
    pub c2: f64,
}

impl Coefficients {
    /// Eq. 3.
    pub fn predict(&self, f: &BatchFeatures) -> f64 {
        self.c0 * f.triangles + self.c1 * f.vertices + self.c2 * f.pixels
    }
}

/// What the predictor and dispatch refuse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PredictError {
    #[error("fitting Eq. 3 needs at least 3 batches (got {0})")]
    TooFewSamples(usize),
    #[error("batch {0}: a feature or time is negative or not finite")]
    BadSample(usize),
    #[error("the warm-up batches do not determine Eq. 3's three rates (their features are linearly dependent)")]
    Singular,
    #[error("dispatch needs at least one GPM")]
    NoGpms,
    #[error("the batch queue needs at least one entry")]
    NoQueue,
    #[error("{actual} measured times but {predicted} predictions")]
    LengthMismatch { actual: usize, predicted: usize },
}

fn usable(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

/// Least-squares fit of Eq. 3 to `(features, measured seconds)`: the normal equations, with
/// each column scaled to at most 1 first (pixels outnumber triangles by orders of magnitude,
/// and unscaled normal equations would square that spread).
pub fn fit(samples: &[(BatchFeatures, f64)]) -> Result<Coefficients, PredictError> {
    if samples.len() < 3 {
        return Err(PredictError::TooFewSamples(samples.len()));
    }
    for (i, (f, t)) in samples.iter().enumerate() {
        if !f.row().iter().all(|&x| usable(x)) || !usable(*t) {
            return Err(PredictError::BadSample(i));
        }
    }
    let mut scale = [0.0f64; 3];
    for (f, _) in samples {
        for (s, x) in scale.iter_mut().zip(f.row()) {
            *s = s.max(x);
        }
    }
    if scale.contains(&0.0) {
        return Err(PredictError::Singular);
    }
    // [A | b] for A = XᵀX, b = Xᵀt over the scaled columns.
    let mut m = [[0.0f64; 4]; 3];
    for (f, t) in samples {
        let r = f.row();
        let x: [f64; 3] = std::array::from_fn(|j| r[j] / scale[j]);
        for i in 0..3 {
            for j in 0..3 {
                m[i][j] += x[i] * x[j];
            }
            m[i][3] += x[i] * t;
        }
    }
    let largest = (0..3).map(|i| m[i][i]).fold(0.0, f64::max);
    for col in 0..3 {
        let pivot = (col..3)
            .max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))
            .unwrap_or(col);
        m.swap(col, pivot);
        if m[col][col].abs() <= 1e-10 * largest {
            return Err(PredictError::Singular);
        }
        for row in 0..3 {
            if row != col {
                let k = m[row][col] / m[col][col];
                let pivot_row = m[col];
                for (x, p) in m[row].iter_mut().zip(pivot_row).skip(col) {
                    *x -= k * p;
                }
            }
        }
    }
    let c: [f64; 3] = std::array::from_fn(|i| m[i][3] / m[i][i] / scale[i]);
    Ok(Coefficients {
        c0: c[0],
        c1: c[1],
        c2: c[2],
    })
}

/// Dispatch settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DispatchConfig {
    pub gpms: usize,
    pub queue_depth: usize,
    /// Batches dispatched round robin before the predictor is used.
    pub warmup: usize,
}

impl DispatchConfig {
    /// OO-VR's settings for `gpms` GPMs.
    pub fn oo_vr(gpms: usize) -> Self {
        DispatchConfig {
            gpms,
            queue_depth: QUEUE_DEPTH,
            warmup: WARMUP_BATCHES,
        }
    }
}

/// Where and when each batch ran.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    /// Per batch: its GPM, and its start and finish in seconds.
    pub gpm: Vec<usize>,
    pub start: Vec<f64>,
    pub finish: Vec<f64>,
    /// Per GPM: its measured work (sum of its batches' times).
    pub busy: Vec<f64>,
    /// When the last batch finishes.
    pub makespan: f64,
    /// The fitted rates; `None` when there were too few batches to fit, or the warm-up
    /// batches did not determine them (then every batch went round robin).
    pub coefficients: Option<Coefficients>,
    /// Per batch after the warm-up, `|predicted − measured| / measured` (batches measured at
    /// 0 s are left out); empty without coefficients.
    pub relative_errors: Vec<f64>,
}

impl Schedule {
    /// Mean relative prediction error; `None` when nothing was predicted.
    pub fn mean_error(&self) -> Option<f64> {
        (!self.relative_errors.is_empty())
            .then(|| self.relative_errors.iter().sum::<f64>() / self.relative_errors.len() as f64)
    }
}

/// OO-VR's dispatch of batches with these features and measured times: fit Eq. 3 on the
/// warm-up batches, then earliest-available dispatch (module comment).
pub fn dispatch(
    features: &[BatchFeatures],
    actual: &[f64],
    config: DispatchConfig,
) -> Result<Schedule, PredictError> {
    if features.len() != actual.len() {
        return Err(PredictError::LengthMismatch {
            actual: actual.len(),
            predicted: features.len(),
        });
    }
    let warm = config.warmup.min(actual.len());
    let samples: Vec<(BatchFeatures, f64)> = features[..warm]
        .iter()
        .copied()
        .zip(actual[..warm].iter().copied())
        .collect();
    let coefficients = if actual.len() > warm {
        match fit(&samples) {
            Ok(c) => Some(c),
            Err(PredictError::TooFewSamples(_) | PredictError::Singular) => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    let predicted: Option<Vec<f64>> =
        coefficients.map(|c| features.iter().map(|f| c.predict(f)).collect());
    let mut s = schedule(actual, predicted.as_deref(), config)?;
    s.coefficients = coefficients;
    if let Some(p) = &predicted {
        s.relative_errors = (warm..actual.len())
            .filter(|&i| actual[i] > 0.0)
            .map(|i| (p[i] - actual[i]).abs() / actual[i])
            .collect();
    }
    Ok(s)
}

/// Earliest-available dispatch of batches with measured times `actual` and predicted times
/// `predicted` (module comment). The first `config.warmup` batches, or all of them without
/// predictions, go round robin.
pub fn schedule(
    actual: &[f64],
    predicted: Option<&[f64]>,
    config: DispatchConfig,
) -> Result<Schedule, PredictError> {
    if config.gpms == 0 {
        return Err(PredictError::NoGpms);
    }
    if config.queue_depth == 0 {
        return Err(PredictError::NoQueue);
    }
    if let Some(p) = predicted {
        if p.len() != actual.len() {
            return Err(PredictError::LengthMismatch {
                actual: actual.len(),
                predicted: p.len(),
            });
        }
        if let Some(i) = p.iter().position(|&x| !usable(x)) {
            return Err(PredictError::BadSample(i));
        }
    }
    if let Some(i) = actual.iter().position(|&x| !usable(x)) {
        return Err(PredictError::BadSample(i));
    }
    let n = actual.len();
    let mut s = Schedule {
        gpm: Vec::with_capacity(n),
        start: Vec::with_capacity(n),
        finish: Vec::with_capacity(n),
        busy: vec![0.0; config.gpms],
        ..Schedule::default()
    };
    // Per GPM: its batches in order; when its last one finishes.
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); config.gpms];
    let mut free_at = vec![0.0f64; config.gpms];
    let mut now = 0.0f64;
    for i in 0..n {
        // Wait for room in the queue: the next pending batch to start frees an entry.
        loop {
            let pending: Vec<f64> = s.start.iter().copied().filter(|&t| t > now).collect();
            if pending.len() < config.queue_depth {
                break;
            }
            now = pending.into_iter().fold(f64::INFINITY, f64::min);
        }
        let g = match predicted {
            Some(p) if i >= config.warmup => {
                let remaining = |g: usize| -> f64 {
                    on[g]
                        .iter()
                        .filter(|&&b| s.finish[b] > now)
                        .map(|&b| {
                            let done = if s.start[b] < now && actual[b] > 0.0 {
                                (now - s.start[b]) / actual[b]
                            } else {
                                0.0
                            };
                            p[b] * (1.0 - done)
                        })
                        .sum()
                };
                (0..config.gpms)
                    .map(|g| (remaining(g), g))
                    .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
                    .map(|(_, g)| g)
                    .unwrap_or(0)
            }
            _ => i % config.gpms,
        };
        let start = now.max(free_at[g]);
        let finish = start + actual[i];
        free_at[g] = finish;
        on[g].push(i);
        s.gpm.push(g);
        s.start.push(start);
        s.finish.push(finish);
        s.busy[g] += actual[i];
        s.makespan = s.makespan.max(finish);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn eq3_fit_recovers_exact_rates_by_hand() {
        // t = 2·triangles + 1·vertices + 0.5·pixels, worked out per batch:
        let samples = [
            ((1.0, 2.0, 4.0), 6.0),  // 2 + 2 + 2
            ((2.0, 1.0, 0.0), 5.0),  // 4 + 1 + 0
            ((0.0, 3.0, 2.0), 4.0),  // 0 + 3 + 1
            ((3.0, 0.0, 6.0), 9.0),  // 6 + 0 + 3
            ((1.0, 1.0, 1.0), 3.5),  // 2 + 1 + 0.5
            ((4.0, 2.0, 2.0), 11.0), // 8 + 2 + 1
            ((0.0, 0.0, 8.0), 4.0),  // 0 + 0 + 4
            ((2.0, 5.0, 0.0), 9.0),  // 4 + 5 + 0
        ]
        .map(|((a, b, c), t)| (BatchFeatures::new(a, b, c), t));
        let c = fit(&samples).unwrap();
        assert!(
            close(c.c0, 2.0) && close(c.c1, 1.0) && close(c.c2, 0.5),
            "{c:?}"
        );
        // Eq. 3 for (10, 10, 10): 20 + 10 + 5 = 35.
        assert!(close(
            c.predict(&BatchFeatures::new(10.0, 10.0, 10.0)),
            35.0
        ));
    }

    #[test]
    fn eq3_least_squares_by_hand() {
        // Orthogonal columns: each rate is the mean of the times of the batches using it.
        // Triangle-only batches took 2 and 4 (c0 = 3); vertex-only 3, 3 and 6 (c1 = 4);
        // pixel-only 5, 7 and 9 (c2 = 7). Residuals are nonzero, so this is a real fit.
        let samples = [
            ((1.0, 0.0, 0.0), 2.0),
            ((1.0, 0.0, 0.0), 4.0),
            ((0.0, 1.0, 0.0), 3.0),
            ((0.0, 1.0, 0.0), 3.0),
            ((0.0, 1.0, 0.0), 6.0),
            ((0.0, 0.0, 1.0), 5.0),
            ((0.0, 0.0, 1.0), 7.0),
            ((0.0, 0.0, 1.0), 9.0),
        ]
        .map(|((a, b, c), t)| (BatchFeatures::new(a, b, c), t));
        let c = fit(&samples).unwrap();
        assert!(
            close(c.c0, 3.0) && close(c.c1, 4.0) && close(c.c2, 7.0),
            "{c:?}"
        );
    }

    #[test]
    fn fits_that_cannot_be_made_are_errors() {
        let f = |a, b, c| BatchFeatures::new(a, b, c);
        assert_eq!(
            fit(&[(f(1.0, 1.0, 1.0), 1.0); 2]),
            Err(PredictError::TooFewSamples(2))
        );
        // Vertices always 3 × triangles: dependent columns.
        let dependent: Vec<_> = (1..=8)
            .map(|k| (f(k as f64, 3.0 * k as f64, (k * k) as f64), 1.0))
            .collect();
        assert_eq!(fit(&dependent), Err(PredictError::Singular));
        assert_eq!(
            fit(&[
                (f(1.0, 0.0, 0.0), 1.0),
                (f(0.0, 1.0, 0.0), f64::NAN),
                (f(0.0, 0.0, 1.0), 1.0)
            ]),
            Err(PredictError::BadSample(1))
        );
    }

    #[test]
    fn earliest_available_dispatch_by_hand() {
        // 2 GPMs, a 2-entry queue, no warm-up; measured [2, 3, 4, 3, 2], predicted
        // [2, 3, 4, 2.5, 2]. All batches ready at t = 0.
        // b0: remaining G0 0, G1 0, tie -> G0, runs 0..2.
        // b1: G0 2, G1 0 -> G1, runs 0..3.
        // b2: G0 2, G1 3 -> G0, starts when b0 ends: 2..6; queued (pending 1).
        // b3: G0 2 + 4 = 6, G1 3 -> G1, 3..6; queued (pending 2 = depth).
        // b4: the queue is full until b2 starts at t = 2 (pending: b3). At t = 2:
        //     G0: b0 done, b2 just started (elapsed 0): 4.
        //     G1: b1 ran 2 of its 3 s, so 3 · (1 − 2/3) = 1 left, plus b3's 2.5: 3.5.
        //     3.5 < 4 -> G1, after b3: 6..8. (Without the elapsed counter G1 would count
        //     5.5 and lose.)
        let cfg = DispatchConfig {
            gpms: 2,
            queue_depth: 2,
            warmup: 0,
        };
        let s = schedule(
            &[2.0, 3.0, 4.0, 3.0, 2.0],
            Some(&[2.0, 3.0, 4.0, 2.5, 2.0]),
            cfg,
        )
        .unwrap();
        assert_eq!(s.gpm, [0, 1, 0, 1, 1]);
        assert_eq!(s.start, [0.0, 0.0, 2.0, 3.0, 6.0]);
        assert_eq!(s.finish, [2.0, 3.0, 6.0, 6.0, 8.0]);
        assert_eq!(s.busy, [6.0, 8.0]);
        assert_eq!(s.makespan, 8.0);
    }

    #[test]
    fn warmup_and_missing_predictions_go_round_robin() {
        // 3 GPMs, no predictions: 0, 1, 2, 0; the fourth starts after the first (1 s).
        let cfg = DispatchConfig {
            gpms: 3,
            queue_depth: 4,
            warmup: 0,
        };
        let s = schedule(&[1.0, 2.0, 3.0, 1.0], None, cfg).unwrap();
        assert_eq!(s.gpm, [0, 1, 2, 0]);
        assert_eq!(s.finish, [1.0, 2.0, 3.0, 2.0]);
        // With predictions but a warm-up of 2 on 2 GPMs: b0 -> G0, b1 -> G1 by rotation
        // even though G1 is predicted idle for b0; b2 (predicted): G0 has 5 left, G1 1 -> G1.
        let cfg = DispatchConfig {
            gpms: 2,
            queue_depth: 4,
            warmup: 2,
        };
        let s = schedule(&[5.0, 1.0, 1.0], Some(&[5.0, 1.0, 1.0]), cfg).unwrap();
        assert_eq!(s.gpm, [0, 1, 1]);
    }

    #[test]
    fn dispatch_fits_on_the_warm_up_and_reports_the_error() {
        // The 8 warm-up batches of eq3_least_squares_by_hand (rates 3, 4, 7), then two
        // batches: (1, 1, 0) predicted 3 + 4 = 7, measured 8: error 1/8 = 0.125;
        // (0, 0, 2) predicted 14, measured 14: error 0.
        let f = BatchFeatures::new;
        let mut features = vec![f(1.0, 0.0, 0.0); 2];
        features.extend([f(0.0, 1.0, 0.0); 3]);
        features.extend([f(0.0, 0.0, 1.0); 3]);
        features.extend([f(1.0, 1.0, 0.0), f(0.0, 0.0, 2.0)]);
        let actual = [2.0, 4.0, 3.0, 3.0, 6.0, 5.0, 7.0, 9.0, 8.0, 14.0];
        let s = dispatch(&features, &actual, DispatchConfig::oo_vr(4)).unwrap();
        let c = s.coefficients.unwrap();
        assert!(
            close(c.c0, 3.0) && close(c.c1, 4.0) && close(c.c2, 7.0),
            "{c:?}"
        );
        assert_eq!(s.relative_errors.len(), 2);
        assert!(close(s.relative_errors[0], 0.125) && close(s.relative_errors[1], 0.0));
        assert!(close(s.mean_error().unwrap(), 0.0625));
        // Warm-up: round robin over 4 GPMs.
        assert_eq!(&s.gpm[..8], [0, 1, 2, 3, 0, 1, 2, 3]);
    }

    #[test]
    fn bad_dispatch_input_is_an_error() {
        let cfg = DispatchConfig::oo_vr(0);
        assert_eq!(schedule(&[1.0], None, cfg), Err(PredictError::NoGpms));
        let cfg = DispatchConfig {
            queue_depth: 0,
            ..DispatchConfig::oo_vr(2)
        };
        assert_eq!(schedule(&[1.0], None, cfg), Err(PredictError::NoQueue));
        let cfg = DispatchConfig::oo_vr(2);
        assert_eq!(
            schedule(&[1.0, -1.0], None, cfg),
            Err(PredictError::BadSample(1))
        );
        assert!(matches!(
            dispatch(&[BatchFeatures::new(1.0, 1.0, 1.0)], &[], cfg),
            Err(PredictError::LengthMismatch { .. })
        ));
    }
}
