//! Distribution policies (OO-VR's schemes) behind one trait, one file per scheme.
//!
//! A scheme turns a frame's visible draw objects into [`Piece`]s of work, each drawn by one
//! GPM, and hands them to the renderer one at a time through [`Render`], which draws the piece
//! on its GPM alone and returns the measured device seconds. Schemes that only deal work out
//! (everything but OO-VR) plan first and render after; OO-VR needs each batch's measured time
//! before it places the next, so the trait lets a scheme interleave.
mod afr;
mod baseline;
mod object;
mod oo_app;
mod oo_vr;
mod sfr;

pub use afr::Afr;
pub use baseline::{Baseline, BASELINE_TILE};
pub use object::ObjectRoundRobin;
pub use oo_app::OoApp;
pub use oo_vr::OoVr;
pub use sfr::Sfr;

use super::objects::DrawObject;
use super::predict::BatchFeatures;

/// A rectangle of the stereo frame: both eyes side by side, `2W × H`, the left eye's pixels
/// at x < W. Half-open, rows from the bottom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

/// One GPM's piece of a frame: some objects (or all) over a region of the stereo frame. A
/// piece covering both eyes draws both on its GPM (OO-VR §5: a batch's two views share the
/// GPM's texture pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub gpm: usize,
    /// Indices into [`FrameInput::objects`]; `None`: every object.
    pub objects: Option<Vec<usize>>,
    pub region: Region,
}

/// Where the pixels a GPM draws are composed into the final framebuffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Composition {
    /// Where they are drawn: each pixel is drawn once, by the GPM whose screen part holds it,
    /// into its own memory (first touch); nothing crosses a link.
    InPlace,
    /// On GPM 0, the root: every other GPM sends its fragments, colour and depth (object-level
    /// SFR's master node, OO-VR §5.3).
    Root,
    /// OO-VR's distributed composition (§5.3, Fig. 14): the stereo frame in as many vertical
    /// strips as GPMs, strip k composed by GPM k's ROPs.
    Distributed,
}

/// What a scheme sees of a frame.
pub struct FrameInput<'a> {
    /// The frame's number in the run, from 0.
    pub index: u64,
    /// The visible draw objects, in submission order.
    pub objects: &'a [DrawObject],
    /// Per object, Eq. 3's inputs (both eyes): triangles submitted, vertices of the triangles
    /// set up after clipping, pixels it shows.
    pub features: &'a [BatchFeatures],
    pub gpms: usize,
    /// One eye's screen.
    pub width: u32,
    pub height: u32,
}

impl FrameInput<'_> {
    /// The whole stereo frame.
    pub fn full(&self) -> Region {
        Region {
            x0: 0,
            y0: 0,
            x1: 2 * self.width,
            y1: self.height,
        }
    }
}

/// What a scheme reports of a frame beyond the pieces it rendered.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameTiming {
    /// Per GPM, when its last piece finishes, in measured device seconds from the frame's
    /// start (the pieces' times back to back, plus any wait a dispatcher imposed).
    pub finish: Vec<f64>,
    /// Per GPM, the device seconds of its pieces.
    pub busy: Vec<f64>,
    /// OO-VR: per predicted batch, `|predicted − measured| / measured`.
    pub prediction_errors: Vec<f64>,
    /// Batches the scheme formed (object schemes), or pieces.
    pub batches: usize,
    /// OO-VR: whether the frame's last batch was split over the GPMs.
    pub tail_split: bool,
}

/// Draws a piece on its GPM alone and returns its measured device seconds.
pub type Render<'r> = dyn FnMut(&Piece) -> Result<f64, super::VrError> + 'r;

/// What a scheme refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    #[error("a scheme needs at least one GPM")]
    NoGpms,
    #[error("unknown scheme {name:?} (expected one of: {})", NAMES.join(", "))]
    Unknown { name: String },
}

/// What sets a scheme apart besides its plan: its name, where it composes and how its GPMs
/// hold the textures.
#[derive(Clone, Copy, Debug)]
pub struct Traits {
    /// The name the CLI takes (`object`, `oo-app`, ...).
    pub name: &'static str,
    /// Where fragments are composed.
    pub composition: Composition,
    /// Whether every GPM holds all textures (AFR pre-allocates the whole memory space in
    /// every GPM, OO-VR §4.1), so that no texture page crosses a link.
    pub replicated: bool,
    /// Whether texture pages are pre-allocated ahead of the work (OO-VR's PA units, §5.2), so
    /// their transfer overlaps rendering instead of stalling it.
    pub preallocates: bool,
}

impl Traits {
    pub fn new(name: &'static str, composition: Composition) -> Self {
        Traits {
            name,
            composition,
            replicated: false,
            preallocates: false,
        }
    }
}

/// A frame's pieces, all placed before any is drawn, and the batches they make where that is
/// not one a piece.
#[derive(Default)]
pub struct Plan {
    pub pieces: Vec<Piece>,
    pub batches: Option<usize>,
}

impl Plan {
    pub fn of(pieces: Vec<Piece>) -> Self {
        Plan {
            pieces,
            batches: None,
        }
    }
}

/// A distribution policy.
pub trait Scheme {
    fn traits(&self) -> Traits;
    fn name(&self) -> &'static str {
        self.traits().name
    }
    fn composition(&self) -> Composition {
        self.traits().composition
    }
    fn replicated(&self) -> bool {
        self.traits().replicated
    }
    fn preallocates(&self) -> bool {
        self.traits().preallocates
    }
    /// The frame's pieces, for a scheme that places them all before drawing any; one that
    /// interleaves overrides [`Scheme::frame`] instead.
    fn plan(&mut self, _input: &FrameInput<'_>) -> Plan {
        Plan::default()
    }
    /// Renders the frame: every visible pixel of both eyes drawn by exactly one piece that
    /// holds the object in front there (or every object).
    fn frame(
        &mut self,
        input: &FrameInput<'_>,
        render: &mut Render<'_>,
    ) -> Result<FrameTiming, super::VrError> {
        check_gpms(input.gpms)?;
        let plan = self.plan(input);
        let mut t = render_all(&plan.pieces, input.gpms, render)?;
        if let Some(b) = plan.batches {
            t.batches = b;
        }
        Ok(t)
    }
}

/// Every scheme, in the order the figures list them.
pub const NAMES: &[&str] = &[
    "baseline", "afr", "sfr-v", "sfr-h", "object", "oo-app", "oo-vr",
];

/// A scheme by its name.
pub fn by_name(name: &str) -> Result<Box<dyn Scheme>, SchemeError> {
    Ok(match name {
        "baseline" => Box::new(Baseline),
        "afr" => Box::new(Afr),
        "sfr-v" => Box::new(Sfr::vertical()),
        "sfr-h" => Box::new(Sfr::horizontal()),
        "object" => Box::new(ObjectRoundRobin),
        "oo-app" => Box::new(OoApp),
        "oo-vr" => Box::new(OoVr::default()),
        _ => {
            return Err(SchemeError::Unknown {
                name: name.to_string(),
            })
        }
    })
}

/// Renders `pieces` in order, each GPM's back to back.
pub(crate) fn render_all(
    pieces: &[Piece],
    gpms: usize,
    render: &mut Render<'_>,
) -> Result<FrameTiming, super::VrError> {
    let mut busy = vec![0.0; gpms];
    for p in pieces {
        let t = render(p)?;
        busy[p.gpm] += t;
    }
    Ok(FrameTiming {
        finish: busy.clone(),
        busy,
        batches: pieces.len(),
        ..FrameTiming::default()
    })
}

/// Which eyes a group of objects is drawn for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eyes {
    Both,
    Left,
    Right,
}

/// Objects dealt to GPMs as `groups` says, each GPM's objects for the same eyes drawn in one
/// piece (drawing them one piece each gives the same pixels; one pass per GPM and eye spares
/// the per-pass overhead of the software devices).
pub(crate) fn merged(input: &FrameInput<'_>, groups: Vec<(usize, Eyes, Vec<usize>)>) -> Vec<Piece> {
    let eyes = [Eyes::Both, Eyes::Left, Eyes::Right];
    let mut per: Vec<[Vec<usize>; 3]> = vec![Default::default(); input.gpms];
    for (g, e, objs) in groups {
        let k = eyes.iter().position(|&x| x == e).unwrap_or(0);
        per[g][k].extend(objs);
    }
    let full = input.full();
    let mut out = Vec::new();
    for (gpm, sets) in per.into_iter().enumerate() {
        for (k, mut objects) in sets.into_iter().enumerate() {
            if objects.is_empty() {
                continue;
            }
            objects.sort_unstable();
            let region = match eyes[k] {
                Eyes::Both => full,
                Eyes::Left => Region {
                    x1: input.width,
                    ..full
                },
                Eyes::Right => Region {
                    x0: input.width,
                    ..full
                },
            };
            out.push(Piece {
                gpm,
                objects: Some(objects),
                region,
            });
        }
    }
    out
}

/// `len` split into `parts` near-equal spans, the first ones one longer.
pub(crate) fn spans(len: u32, parts: usize) -> Vec<(u32, u32)> {
    let parts = parts.max(1) as u32;
    let (q, r) = (len / parts, len % parts);
    let mut at = 0;
    (0..parts)
        .map(|k| {
            let n = q + u32::from(k < r);
            let s = (at, at + n);
            at += n;
            s
        })
        .collect()
}

pub(crate) fn check_gpms(gpms: usize) -> Result<(), SchemeError> {
    if gpms == 0 {
        Err(SchemeError::NoGpms)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_are_errors_and_every_name_builds() {
        assert!(matches!(by_name("sfr-x"), Err(SchemeError::Unknown { name }) if name == "sfr-x"));
        for name in NAMES {
            assert_eq!(by_name(name).unwrap().name(), *name);
        }
    }

    #[test]
    fn spans_by_hand() {
        assert_eq!(spans(10, 4), [(0, 3), (3, 6), (6, 8), (8, 10)]);
        assert_eq!(spans(3, 1), [(0, 3)]);
    }
}
