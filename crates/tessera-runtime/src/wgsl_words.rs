//! WGSL's keywords and reserved words, which a kernel parameter's name must not be: the
//! backend declares the parameter struct in WGSL under the Rust names, and a reserved name
//! fails only when a GPU backend compiles the kernel. [`kernel_params!`](crate::kernel_params)
//! checks every name against this list when the crate using it compiles. From the WGSL
//! specification's keyword summary, as naga lists it (naga 30, `keywords/wgsl.rs`).

/// The words, keywords first.
pub const WGSL_RESERVED: &[&str] = &[
    "alias",
    "break",
    "case",
    "const",
    "const_assert",
    "continue",
    "continuing",
    "default",
    "diagnostic",
    "discard",
    "else",
    "enable",
    "false",
    "fn",
    "for",
    "if",
    "let",
    "loop",
    "override",
    "requires",
    "return",
    "struct",
    "switch",
    "true",
    "var",
    "while",
    "NULL",
    "Self",
    "abstract",
    "active",
    "alignas",
    "alignof",
    "as",
    "asm",
    "asm_fragment",
    "async",
    "attribute",
    "auto",
    "await",
    "become",
    "cast",
    "catch",
    "class",
    "co_await",
    "co_return",
    "co_yield",
    "coherent",
    "column_major",
    "common",
    "compile",
    "compile_fragment",
    "concept",
    "const_cast",
    "consteval",
    "constexpr",
    "constinit",
    "crate",
    "debugger",
    "decltype",
    "delete",
    "demote",
    "demote_to_helper",
    "do",
    "dynamic_cast",
    "enum",
    "explicit",
    "export",
    "extends",
    "extern",
    "external",
    "fallthrough",
    "filter",
    "final",
    "finally",
    "friend",
    "from",
    "fxgroup",
    "get",
    "goto",
    "groupshared",
    "highp",
    "impl",
    "implements",
    "import",
    "inline",
    "instanceof",
    "interface",
    "layout",
    "lowp",
    "macro",
    "macro_rules",
    "match",
    "mediump",
    "meta",
    "mod",
    "module",
    "move",
    "mut",
    "mutable",
    "namespace",
    "new",
    "nil",
    "noexcept",
    "noinline",
    "nointerpolation",
    "non_coherent",
    "noncoherent",
    "noperspective",
    "null",
    "nullptr",
    "of",
    "operator",
    "package",
    "packoffset",
    "partition",
    "pass",
    "patch",
    "pixelfragment",
    "precise",
    "precision",
    "premerge",
    "priv",
    "protected",
    "pub",
    "public",
    "readonly",
    "ref",
    "regardless",
    "register",
    "reinterpret_cast",
    "require",
    "resource",
    "restrict",
    "self",
    "set",
    "shared",
    "sizeof",
    "smooth",
    "snorm",
    "static",
    "static_assert",
    "static_cast",
    "std",
    "subroutine",
    "super",
    "target",
    "template",
    "this",
    "thread_local",
    "throw",
    "trait",
    "try",
    "type",
    "typedef",
    "typeid",
    "typename",
    "typeof",
    "union",
    "unless",
    "unorm",
    "unsafe",
    "unsized",
    "use",
    "using",
    "varying",
    "virtual",
    "volatile",
    "wgsl",
    "where",
    "with",
    "writeonly",
    "yield",
];

/// Whether `name` may name a kernel parameter in WGSL: not a keyword or reserved word, not
/// `_`, not starting with `__` (WGSL reserves those), and not a Rust raw identifier
/// (`r#type`, which `stringify!` gives with its `r#`: no WGSL name has a `#`). A `const fn`,
/// so that the macro can assert it at compile time.
pub const fn wgsl_name_ok(name: &str) -> bool {
    let b = name.as_bytes();
    if (b.len() == 1 && b[0] == b'_') || (b.len() >= 2 && b[0] == b'_' && b[1] == b'_') {
        return false;
    }
    let mut k = 0;
    while k < b.len() {
        if b[k] == b'#' {
            return false;
        }
        k += 1;
    }
    let mut i = 0;
    while i < WGSL_RESERVED.len() {
        if same(WGSL_RESERVED[i].as_bytes(), b) {
            return false;
        }
        i += 1;
    }
    true
}

const fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_words_are_refused() {
        for bad in [
            "filter", "from", "struct", "target", "_", "__x", "r#type", "r#src",
        ] {
            assert!(!wgsl_name_ok(bad), "{bad}");
        }
        for good in ["src", "filter_code", "width", "_unused", "w0"] {
            assert!(wgsl_name_ok(good), "{good}");
        }
    }
}
