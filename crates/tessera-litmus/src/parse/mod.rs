//! A hand-written recursive-descent parser for herd7's C litmus format, as used by the Linux
//! kernel memory model's `tools/memory-model/litmus-tests`.
//!
//! ```text
//! C SB                                   header: `C`, the name, an optional "doc" line
//! (* comments like this, anywhere at top level; C comments inside code *)
//! { x=0; int y = 0; 0:r0=1; }            optional initial state
//! P0(int *x, int *y) { int r0; WRITE_ONCE(*x, 1); r0 = READ_ONCE(*y); }
//! P1(int *x, int *y) { ... }
//! locations [x; 0:r0;]                   optional
//! exists (0:r0=0 /\ 1:r0=0)              or ~exists, forall; with /\ \/ ~ => ( )
//! ```
//!
//! Thread bodies are the kernel's litmus C: registers of any type (declared or not), loads and
//! stores in every spelling, read-modify-writes, spinlocks, RCU and SRCU, `if`/`else`, pointers
//! and register arithmetic; docs/LITMUS.md lists them with what each lowers to. What the runner
//! cannot execute faithfully (loops, callbacks, interrupts) is an `Unsupported` error at its
//! line and column: the runner must never guess what a test means.
//!
//! Lexing is on demand and depends on where the parser is: at top level `(*` opens an OCaml
//! comment, but inside a thread `READ_ONCE(*x)` must lex as `(` `*` `x`.

use tessera_core::MAX_DEVICES;

use crate::ast::{
    addr_of, Addr, BinOp, Condition, Expr, Fence, LoadKind, Loc, Op, Pos, Prop, Quantifier, Reg,
    Rmw, RmwRet, StoreKind, Test, Thread,
};

/// Why a litmus file could not be read as a test, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {kind}")]
pub struct ParseError {
    pub line: u32,
    pub col: u32,
    pub kind: ErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ErrorKind {
    #[error("expected {expected}, found {found}")]
    Expected { expected: String, found: String },
    /// Valid herd7 input this runner does not execute.
    #[error("unsupported: {0}")]
    Unsupported(String),
    #[error("unterminated {0}")]
    Unterminated(&'static str),
    #[error("unexpected character {0:?}")]
    BadChar(char),
    #[error("{0} does not fit in a 32-bit word")]
    BadInt(String),
    /// A name used but never declared: register, shared variable or thread.
    #[error("{0}")]
    Undefined(String),
    #[error("{0}")]
    Duplicate(String),
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    /// An array element or pointer offset that is known, at parse time, to lie outside the
    /// object it was computed from.
    #[error("out of bounds: {0}")]
    OutOfBounds(String),
    /// Expressions, statements or propositions nested deeper than the parser goes.
    #[error("nested more than {0} levels deep")]
    TooDeep(u32),
}

type Result<T, E = ParseError> = std::result::Result<T, E>;

fn err<T>(pos: Pos, kind: ErrorKind) -> Result<T> {
    Err(ParseError {
        line: pos.line,
        col: pos.col,
        kind,
    })
}

/// Parses a litmus file's bytes; invalid UTF-8 is reported at the first bad byte.
pub fn parse_bytes(bytes: &[u8]) -> Result<Test> {
    // A byte-order mark, which some editors write at the start of a UTF-8 file, is no text.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => parse(s),
        Err(e) => {
            // The prefix before the bad byte is valid by definition.
            let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or("");
            let mut c = Cursor::new(good);
            while c.bump_char().is_some() {}
            err(c.pos(), ErrorKind::NotUtf8)
        }
    }
}

/// Parses one litmus test.
pub fn parse(src: &str) -> Result<Test> {
    Parser {
        cur: Cursor::new(src),
        nesting: 0,
    }
    .test()
}

mod build;
mod expr;
mod lex;
mod stmt;
mod top;

use build::*;
use lex::*;

fn expected<T>(t: &Token, what: &str) -> Result<T> {
    err(
        t.pos,
        ErrorKind::Expected {
            expected: what.to_string(),
            found: t.describe(),
        },
    )
}

fn var_loc(vars: &Vars, name: &str, pos: Pos) -> Result<Loc> {
    match vars.find(name) {
        Some(v) => Ok(Loc::Var(v)),
        None => err(
            pos,
            ErrorKind::Undefined(format!("unknown location `{name}`")),
        ),
    }
}

/// Fences and ordering annotations besides `smp_mb`, `smp_wmb`, `smp_rmb` and `barrier`:
/// each operation here is complete before the next starts, so all of them are no-ops.
const FENCES: &[&str] = &[
    "smp_mb__before_atomic",
    "smp_mb__after_atomic",
    "smp_mb__after_spinlock",
    "smp_mb__after_unlock_lock",
    "smp_mb__after_srcu_read_unlock",
    "smp_mb__before_spinlock",
    "smp_read_barrier_depends",
    "smp_acquire__after_ctrl_dep",
    "read_barrier_depends",
];

/// One spelling per operation: ordering suffixes (`_relaxed`, `_acquire`, `_release`), the
/// `atomic_long_`/`atomic64_` families, `raw_` locks and RCU flavours all behave alike under
/// sequential consistency.
fn normalise(name: &str) -> String {
    if matches!(
        name,
        "smp_load_acquire" | "smp_store_release" | "smp_store_mb"
    ) {
        return name.to_string();
    }
    let mut n = match name.strip_prefix("raw_") {
        Some(r) if r.starts_with("spin_") => r.to_string(),
        _ => name.to_string(),
    };
    for p in ["atomic_long_", "atomic64_"] {
        if let Some(r) = n.strip_prefix(p) {
            n = format!("atomic_{r}");
        }
    }
    if n.starts_with("atomic_") || n.starts_with("xchg") || n.starts_with("cmpxchg") {
        for s in ["_relaxed", "_acquire", "_release"] {
            if let Some(r) = n.strip_suffix(s) {
                n = r.to_string();
                break;
            }
        }
    }
    match n.as_str() {
        "rcu_read_lock_bh" | "rcu_read_lock_sched" => "rcu_read_lock".into(),
        "rcu_read_unlock_bh" | "rcu_read_unlock_sched" => "rcu_read_unlock".into(),
        "synchronize_rcu_expedited" | "synchronize_rcu_bh" | "synchronize_sched" => {
            "synchronize_rcu".into()
        }
        "synchronize_srcu_expedited" => "synchronize_srcu".into(),
        _ => n,
    }
}

/// An atomic_t arithmetic operation: the operator, where its operand is (`None`: there is
/// none, it is 1; `Some(true)`: before the location, as in `atomic_add(i, v)`) and, for
/// the forms with a value, which value they return.
fn atomic_op(n: &str) -> Option<(BinOp, Option<bool>, Option<RmwRet>)> {
    let op = |w: &str| match w {
        "add" | "inc" => Some(BinOp::Add),
        "sub" | "dec" => Some(BinOp::Sub),
        "and" | "andnot" => Some(BinOp::And),
        "or" => Some(BinOp::Or),
        "xor" => Some(BinOp::Xor),
        _ => None,
    };
    let operand = |w: &str| {
        if matches!(w, "inc" | "dec") {
            None
        } else {
            Some(true)
        }
    };
    let rest = n.strip_prefix("atomic_")?;
    if let Some(w) = rest.strip_prefix("fetch_") {
        return Some((op(w)?, operand(w), Some(RmwRet::Old)));
    }
    if let Some(w) = rest.strip_suffix("_return") {
        return Some((op(w)?, operand(w), Some(RmwRet::New)));
    }
    if let Some(w) = rest.strip_suffix("_and_test") {
        if matches!(w, "inc" | "dec" | "sub") {
            return Some((op(w)?, operand(w), Some(RmwRet::New)));
        }
        return None;
    }
    if rest == "add_negative" {
        return Some((BinOp::Add, Some(true), Some(RmwRet::New)));
    }
    Some((op(rest)?, operand(rest), None))
}

const VALUE_CALLS: &[&str] = &[
    "READ_ONCE",
    "smp_load_acquire",
    "rcu_dereference",
    "rcu_dereference_raw",
    "rcu_access_pointer",
    "lockless_dereference",
    "srcu_dereference",
    "atomic_read",
    "xchg",
    "atomic_xchg",
    "cmpxchg",
    "atomic_cmpxchg",
    "atomic_add_unless",
    "atomic_inc_not_zero",
    "spin_trylock",
    "spin_is_locked",
    "srcu_read_lock",
    "srcu_down_read",
];

const VOID_CALLS: &[&str] = &[
    "WRITE_ONCE",
    "smp_store_release",
    "smp_store_mb",
    "rcu_assign_pointer",
    "RCU_INIT_POINTER",
    "atomic_set",
    "spin_lock",
    "spin_unlock",
    "rcu_read_lock",
    "rcu_read_unlock",
    "srcu_read_unlock",
    "srcu_up_read",
    "synchronize_rcu",
    "synchronize_srcu",
    "smp_mb",
    "smp_memb",
    "smp_wmb",
    "smp_rmb",
    "mb",
    "wmb",
    "rmb",
    "barrier",
];

fn is_value_call(name: &str) -> bool {
    let n = normalise(name);
    VALUE_CALLS.contains(&n.as_str()) || matches!(atomic_op(&n), Some((_, _, Some(_))))
}

fn is_void_call(n: &str) -> bool {
    VOID_CALLS.contains(&n) || FENCES.contains(&n) || matches!(atomic_op(n), Some((_, _, None)))
}

const SUPPORTED: &str = "READ_ONCE/WRITE_ONCE, acquire/release, rcu_*, srcu_*, atomic_*, \
                         xchg, cmpxchg, spin_lock/unlock/trylock/is_locked and the fences; \
                         see docs/LITMUS.md";

fn unsupported_call(name: &str) -> ErrorKind {
    let why = match name {
        "call_rcu" | "call_srcu" | "kfree_rcu" => " (callbacks need function pointers)",
        "try_cmpxchg" | "atomic_try_cmpxchg" => " (it writes back through a pointer to a register)",
        n if is_interrupt_form(n) => " (interrupts have no meaning here)",
        _ => "",
    };
    ErrorKind::Unsupported(format!("`{name}`{why} (supported: {SUPPORTED})"))
}

/// The lock forms that also mask interrupts (`spin_lock_irqsave`, `raw_spin_unlock_bh`,
/// `read_lock_irq`, ...) and the interrupt switches themselves (`local_irq_disable`).
fn is_interrupt_form(n: &str) -> bool {
    let lock = ["spin_", "read_", "write_"]
        .iter()
        .any(|l| n.trim_start_matches("raw_").starts_with(l));
    let masks = ["_irqsave", "_irqrestore", "_irq", "_bh"]
        .iter()
        .any(|m| n.ends_with(m));
    (lock && masks) || n.starts_with("local_irq_") || n.starts_with("local_bh_")
}

fn is_type_word(w: &str) -> bool {
    TYPE_WORDS.contains(&w)
}

/// Replaces each grace-period marker with its waits: for every other thread that enters a
/// read-side critical section of the same domain, load its nesting word until it reads 0.
/// Seeing 0 once after the grace period began means every critical section that began
/// before it has ended, which is all RCU promises.
fn expand_syncs(builders: &mut [ThreadBuilder]) {
    let mut counters: Vec<(usize, Domain, usize)> = builders
        .iter()
        .flat_map(|b| b.rcu.iter().map(move |(d, _, w)| (b.index, *d, *w)))
        .collect();
    // Down/up readers belong to no thread (the up may run on another), so every grace
    // period of the domain waits for them, the caller's own included: an unmatched
    // `srcu_down_read` before `synchronize_srcu` deadlocks here as it would in the kernel.
    for b in builders.iter() {
        for (d, w) in &b.updown {
            let c = (usize::MAX, Some(*d), *w);
            if !counters.contains(&c) {
                counters.push(c);
            }
        }
    }
    for b in builders.iter_mut() {
        if b.syncs.is_empty() {
            continue;
        }
        let waits = |at: usize, b: &ThreadBuilder| -> Vec<usize> {
            let d = b.syncs.iter().find(|(i, _)| *i == at).map(|(_, d)| *d);
            match d {
                None => Vec::new(),
                Some(d) => counters
                    .iter()
                    .filter(|(u, dd, _)| *u != b.index && *dd == d)
                    .map(|(_, _, w)| *w)
                    .collect(),
            }
        };
        // Where each old op lands once the waits are in.
        let old = std::mem::take(&mut b.ops);
        let mut map = Vec::with_capacity(old.len() + 1);
        let mut at = 0;
        for i in 0..old.len() {
            map.push(at);
            at += 1 + 2 * waits(i, b).len();
        }
        map.push(at);
        let mut ops = Vec::with_capacity(at);
        for (i, mut op) in old.into_iter().enumerate() {
            if let Op::Branch { target, .. } = &mut op {
                *target = map[(*target).min(map.len() - 1)];
            }
            let ws = waits(i, b);
            ops.push(op);
            for w in ws {
                let tmp = b.temp();
                let load_at = ops.len();
                ops.push(Op::Load {
                    addr: Addr::Var(w),
                    dst: tmp,
                    kind: LoadKind::Rcu,
                });
                ops.push(Op::Branch {
                    cond: Expr::Reg(tmp),
                    target: load_at,
                    spin: true,
                });
            }
        }
        b.ops = ops;
    }
}

/// `P7` → 7.
fn thread_number(s: &str) -> Option<usize> {
    let digits = s.strip_prefix('P')?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // A number too large for usize is no thread we could run; MAX_DEVICES rejects it later.
    Some(digits.parse().unwrap_or(usize::MAX))
}
