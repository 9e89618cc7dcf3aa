//! Distribution policies (issue 16's schemes) behind one trait, one file per scheme. A sketch:
//! only the object-level schemes that need no measured cost exist so far; the screen- and
//! frame-split schemes and OO-VR (which feeds measured batch times back into
//! [`crate::vr::predict`]) come with the renderer.
mod object;
mod oo_app;

pub use object::ObjectRoundRobin;
pub use oo_app::OoApp;

use super::objects::DrawObject;

/// One GPM's piece of a frame: a set of objects drawn into both eyes' viewports (OO-VR §5:
/// a batch's two views are rendered on one GPM, sharing its texture pages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Work {
    pub gpm: usize,
    /// Indices into the frame's objects, in drawing order.
    pub objects: Vec<usize>,
}

/// What a scheme refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemeError {
    #[error("a scheme needs at least one GPM")]
    NoGpms,
    #[error("unknown scheme {name:?} (implemented so far: {})", NAMES.join(", "))]
    Unknown { name: String },
}

/// A distribution policy: which GPM draws which objects of a frame.
pub trait Scheme {
    /// The name the CLI will take (`object`, `oo-app`, ...).
    fn name(&self) -> &'static str;
    /// The frame's work, every object in exactly one piece.
    fn plan(&mut self, objects: &[DrawObject], gpms: usize) -> Result<Vec<Work>, SchemeError>;
}

/// The schemes implemented so far.
pub const NAMES: &[&str] = &["object", "oo-app"];

/// A scheme by its name.
pub fn by_name(name: &str) -> Result<Box<dyn Scheme>, SchemeError> {
    match name {
        "object" => Ok(Box::new(ObjectRoundRobin)),
        "oo-app" => Ok(Box::new(OoApp)),
        _ => Err(SchemeError::Unknown {
            name: name.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_schemes_and_zero_gpms_are_errors() {
        assert!(matches!(by_name("sfr-x"), Err(SchemeError::Unknown { name }) if name == "sfr-x"));
        for name in NAMES {
            let mut s = by_name(name).unwrap();
            assert_eq!(s.name(), *name);
            assert_eq!(s.plan(&[], 0), Err(SchemeError::NoGpms));
        }
    }
}
