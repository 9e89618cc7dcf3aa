//! What a kernel's pipeline knows about its launches before they run.
//!
//! The prelude reads each binding's fields (page shift, format, extent, slot size...) through
//! `bind_<field>(bi)`, and the launch's mode and kind of domain through `launch_mode()` and
//! `launch_is_list()`. Compiled generically, each is a load from the launch uniform, the
//! bindings' at a dynamic index, on the path of every translated access. Most launches bind
//! objects of one shape (boiling's two fields, a stencil's input and output), so the pipeline
//! a launch runs is built for its [`LaunchShape`]: the mode, the kind of domain and every
//! field that all bindings share become constants, and the compiler folds the address
//! arithmetic, the checks that depend on them and the other modes' paths. Fields that differ
//! stay loads. The values are the launch's own, so a specialized pipeline computes what the
//! generic one does.

use crate::abi::{BindInfo, LaunchInfo, BY_ID_SLOTS};

/// A field of [`BindInfo`]: the accessor's name and how to read it.
type Field = (&'static str, fn(&BindInfo) -> u32);

/// Every field of [`BindInfo`] the prelude reads, in its order.
const FIELDS: [Field; 11] = [
    ("id", |b| b.id),
    ("page_offset", |b| b.page_offset),
    ("width", |b| b.width),
    ("height", |b| b.height),
    ("pages_x", |b| b.pages_x),
    ("shift", |b| b.shift),
    ("words_per_texel", |b| b.words_per_texel),
    ("slot_words", |b| b.slot_words),
    ("format", |b| b.format),
    ("remote", |b| b.remote),
    ("mip", |b| b.mip),
];

/// What a pipeline takes as constants: the launch's mode and kind of domain, the bindings'
/// shared fields, and whether the binding search can stop at the id's slot. Pipelines are
/// cached by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaunchShape {
    /// `LaunchInfo::mode`.
    mode: Option<u32>,
    /// `LaunchInfo::is_list`.
    is_list: Option<u32>,
    /// Per field of [`FIELDS`]: the value every binding of the launch has.
    common: [Option<u32>; FIELDS.len()],
    /// Every bound id is in its own `LaunchInfo::by_id` slot, so an id that is not there is
    /// not bound and the search's fallback loop can be left out.
    exact_ids: bool,
}

impl LaunchShape {
    /// Nothing known: every field loaded, the fallback search kept. The merge's shape, and
    /// every launch's where specialization is off.
    pub const GENERIC: LaunchShape = LaunchShape {
        mode: None,
        is_list: None,
        common: [None; FIELDS.len()],
        exact_ids: false,
    };

    /// The shape of a launch whose mode, domain kind, `binds` and `by_id` are filled.
    pub fn of(info: &LaunchInfo) -> LaunchShape {
        let binds = &info.binds[..(info.nbind as usize).min(info.binds.len())];
        let Some(first) = binds.first() else {
            // No binding: every lookup fails, with or without the loop.
            return LaunchShape {
                mode: Some(info.mode),
                is_list: Some(info.is_list),
                exact_ids: true,
                ..Self::GENERIC
            };
        };
        let mut common = [None; FIELDS.len()];
        for (c, (_, get)) in common.iter_mut().zip(FIELDS) {
            let v = get(first);
            if binds.iter().all(|b| get(b) == v) {
                *c = Some(v);
            }
        }
        let exact_ids = binds.iter().all(|b| {
            let slot = b.id % BY_ID_SLOTS;
            let h = info.by_id[(slot / 4) as usize].0[(slot % 4) as usize];
            h != 0 && binds.get(h as usize - 1).is_some_and(|o| o.id == b.id)
        });
        LaunchShape {
            mode: Some(info.mode),
            is_list: Some(info.is_list),
            common,
            exact_ids,
        }
    }

    /// How many fields are constants.
    #[cfg(test)]
    fn constants(&self) -> usize {
        self.common.iter().flatten().count()
    }

    /// The WGSL the prelude is compiled with: the accessors and `EXACT_IDS`.
    pub fn wgsl(&self) -> String {
        let mut s = format!("const EXACT_IDS: bool = {};\n", self.exact_ids);
        for (name, c) in [("mode", self.mode), ("is_list", self.is_list)] {
            let body = match c {
                Some(v) => format!("{v}u"),
                None => format!("launch.{name}"),
            };
            s += &format!("fn launch_{name}() -> u32 {{ return {body}; }}\n");
        }
        for ((name, _), c) in FIELDS.iter().zip(self.common) {
            let body = match c {
                Some(v) => format!("{v}u"),
                None => format!("launch.binds[bi].{name}"),
            };
            s += &format!("fn bind_{name}(bi: u32) -> u32 {{ return {body}; }}\n");
        }
        s
    }
}

/// Whether pipelines are specialized to their launches' bindings: yes, unless
/// `TESSERA_WGPU_SPECIALIZE=off` (docs/WGPU.md, "Specialized per pipeline").
pub fn from_env() -> Result<bool, crate::WgpuError> {
    Ok(crate::switches::switch(crate::switches::SPECIALIZE)?.unwrap_or(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(binds: &[BindInfo]) -> LaunchInfo {
        let mut info = LaunchInfo {
            mode: 1,
            nbind: binds.len() as u32,
            ..Default::default()
        };
        for (i, b) in binds.iter().enumerate() {
            info.binds[i] = *b;
            let slot = b.id % BY_ID_SLOTS;
            let h = &mut info.by_id[(slot / 4) as usize].0[(slot % 4) as usize];
            if *h == 0 {
                *h = i as u32 + 1;
            }
        }
        info
    }

    fn field(id: u32, page_offset: u32, width: u32) -> BindInfo {
        BindInfo {
            id,
            page_offset,
            width,
            height: 64,
            pages_x: 1,
            shift: 6,
            words_per_texel: 1,
            slot_words: 4096,
            format: 1,
            ..Default::default()
        }
    }

    #[test]
    fn shared_fields_become_constants_and_the_rest_stay_loads() {
        let s = LaunchShape::of(&launch(&[field(3, 0, 64), field(4, 1, 32)]));
        let w = s.wgsl();
        assert!(
            w.contains("fn bind_shift(bi: u32) -> u32 { return 6u; }"),
            "{w}"
        );
        assert!(
            w.contains("fn bind_slot_words(bi: u32) -> u32 { return 4096u; }"),
            "{w}"
        );
        assert!(
            w.contains("fn bind_remote(bi: u32) -> u32 { return 0u; }"),
            "{w}"
        );
        assert!(w.contains("return launch.binds[bi].width;"), "{w}");
        assert!(w.contains("return launch.binds[bi].id;"), "{w}");
        assert!(w.contains("return launch.binds[bi].page_offset;"), "{w}");
        assert!(w.contains("const EXACT_IDS: bool = true;"), "{w}");
        assert!(w.contains("fn launch_mode() -> u32 { return 1u; }"), "{w}");
        assert!(
            w.contains("fn launch_is_list() -> u32 { return 0u; }"),
            "{w}"
        );
        // id, page_offset and width differ.
        assert_eq!(s.constants(), FIELDS.len() - 3);
    }

    #[test]
    fn ids_that_share_a_slot_keep_the_search() {
        let s = LaunchShape::of(&launch(&[field(3, 0, 64), field(3 + BY_ID_SLOTS, 1, 64)]));
        assert!(!s.exact_ids);
        assert!(s.wgsl().contains("const EXACT_IDS: bool = false;"));
        // The same object bound twice is found at its slot either way.
        let twice = LaunchShape::of(&launch(&[field(3, 0, 64), field(3, 0, 64)]));
        assert!(twice.exact_ids);
    }

    #[test]
    fn the_generic_shape_loads_every_field() {
        let w = LaunchShape::GENERIC.wgsl();
        assert_eq!(w.matches("launch.binds[bi].").count(), FIELDS.len(), "{w}");
        assert!(w.contains("return launch.mode;") && w.contains("return launch.is_list;"));
        assert!(w.contains("const EXACT_IDS: bool = false;"));
        assert_eq!(LaunchShape::GENERIC.constants(), 0);
    }

    #[test]
    fn no_binding_needs_no_search() {
        let s = LaunchShape::of(&launch(&[]));
        assert!(s.exact_ids);
        assert_eq!(s.constants(), 0);
    }

    #[test]
    fn every_field_the_prelude_reads_has_an_accessor() {
        let prelude = crate::PRELUDE;
        for (name, _) in FIELDS {
            assert!(prelude.contains(&format!("bind_{name}(")), "{name} unused");
        }
        assert!(
            !prelude.contains("launch.binds["),
            "a field read past its accessor"
        );
        assert!(!prelude.contains("launch.mode") && !prelude.contains("launch.is_list"));
    }
}
