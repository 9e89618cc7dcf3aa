//! A parsed litmus test, already lowered to what the oracle and the runner execute: per thread,
//! a list of memory operations, register computations and branches, addressed by index.
//!
//! Values are 32-bit words. A pointer to shared variable `v` is the word [`addr_of`]`(v)`, so
//! that pointers travel through memory and registers like any other value; [`var_of`] turns a
//! word back into a variable when it is dereferenced.

use std::fmt::{self, Write as _};

/// A place in the source text, both 1-based; columns count characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// One litmus test.
#[derive(Clone, Debug, PartialEq)]
pub struct Test {
    pub name: String,
    /// The quoted line after the name, if any.
    pub doc: Option<String>,
    /// Shared variables in order of first mention; variable `i` is word `i` of the buffer.
    pub vars: Vec<String>,
    /// Per variable, whether the runner made it up (RCU read-side nesting counters): such
    /// words take part in runs but not in printed outcomes.
    pub hidden: Vec<bool>,
    /// Initial value of each shared variable (0 unless the initial-state block says otherwise).
    pub init: Vec<i32>,
    pub threads: Vec<Thread>,
    /// The `locations [...]` clause: extra locations to show in every outcome.
    pub locations: Vec<Loc>,
    /// herd7's `filter P`: runs whose final state does not satisfy P are left out of the
    /// histogram and the condition's counts (they are still checked against the oracle).
    pub filter: Option<Prop>,
    pub condition: Condition,
}

/// The word that points at shared variable `v`. Far from the small integers tests use, so a
/// pointer and a number are told apart when an outcome is printed.
pub const ADDR_BASE: i32 = 0x7AD0_0000;

pub fn addr_of(var: usize) -> i32 {
    ADDR_BASE.wrapping_add(var as i32)
}

/// The variable a pointer word names, if it names one of `nvars`.
pub fn var_of(word: i32, nvars: usize) -> Option<usize> {
    let i = word.wrapping_sub(ADDR_BASE);
    (0..nvars as i64)
        .contains(&(i as i64))
        .then_some(i as usize)
}

/// One thread `Pn`: its registers and its operations in program order.
#[derive(Clone, Debug, PartialEq)]
pub struct Thread {
    /// Every register, named ones (declared in the source) and hidden ones (holding a load
    /// made inside a larger expression), indexed by `Op` and `Expr`.
    pub regs: Vec<Reg>,
    pub ops: Vec<Op>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reg {
    /// `None` for a hidden temporary: it is never part of an outcome.
    pub name: Option<String>,
    pub init: i32,
}

impl Thread {
    /// Indices of the named registers, in declaration order: the thread's part of an outcome.
    pub fn visible(&self) -> impl Iterator<Item = usize> + '_ {
        self.regs
            .iter()
            .enumerate()
            .filter(|(_, r)| r.name.is_some())
            .map(|(i, _)| i)
    }

    pub fn reg_index(&self, name: &str) -> Option<usize> {
        self.regs
            .iter()
            .position(|r| r.name.as_deref() == Some(name))
    }

    /// The thread's part of an outcome, from all its registers.
    pub fn visible_values(&self, regs: &[i32]) -> Vec<i32> {
        self.visible().map(|r| regs[r]).collect()
    }

    /// Initial values of all registers.
    pub fn initial_regs(&self) -> Vec<i32> {
        self.regs.iter().map(|r| r.init).collect()
    }

    /// Position of register `reg` among the visible ones.
    pub fn visible_slot(&self, reg: usize) -> Option<usize> {
        self.visible().position(|r| r == reg)
    }
}

/// How a load was written. Under sequential consistency they all behave alike; the kind is
/// kept for printing and for a future weaker model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadKind {
    /// `READ_ONCE(*x)`
    Once,
    /// `smp_load_acquire(x)`
    Acquire,
    /// a plain `*x`
    Plain,
    /// `rcu_dereference(*p)` and its kin
    Rcu,
    /// `atomic_read(v)` and its kin
    Atomic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// `WRITE_ONCE(*x, v)`
    Once,
    /// `smp_store_release(x, v)`
    Release,
    /// a plain `*x = v`
    Plain,
    /// `rcu_assign_pointer(*p, v)`
    Rcu,
    /// `atomic_set(v, e)` and its kin
    Atomic,
    /// `spin_unlock(l)`: the lock word back to 0
    Unlock,
    /// a store the runner adds: an RCU read-side nesting counter
    Internal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fence {
    /// `smp_mb()`
    Mb,
    /// `smp_wmb()`
    Wmb,
    /// `smp_rmb()`
    Rmb,
    /// `barrier()`, a compiler barrier
    Barrier,
    /// Any other fence or ordering annotation (`smp_mb__after_atomic`, ...), by name.
    Other(String),
}

/// Where a memory operation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// A shared variable named in the source.
    Var(usize),
    /// The variable register `reg` points at (`*r0`), known only when the operation runs;
    /// `pos` is where the access was written, for the error when it points at none.
    Reg { reg: usize, pos: Pos },
    /// Element `regs[index]` of the object (an array, or a scalar as an array of one) whose
    /// first variable is `first`: `a[r0]`, `*(x + r0)`. An index outside `0..len` names
    /// nothing, even where a neighbouring variable lies: C gives a pointer no way out of its
    /// object. `pos` is where the access was written, for the error.
    Elem {
        first: usize,
        len: usize,
        index: usize,
        pos: Pos,
    },
}

impl Addr {
    /// The variable this address names with registers `regs`, if any.
    pub fn resolve(&self, regs: &[i32], nvars: usize) -> Option<usize> {
        match self {
            Addr::Var(v) => Some(*v),
            Addr::Reg { reg, .. } => var_of(regs[*reg], nvars),
            Addr::Elem {
                first, len, index, ..
            } => {
                let i = usize::try_from(regs[*index]).ok()?;
                (i < *len && first + i < nvars).then_some(first + i)
            }
        }
    }
}

/// Which value a fetch-and-op returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmwRet {
    /// `atomic_fetch_add`: the value before.
    Old,
    /// `atomic_add_return`: the value after.
    New,
}

/// A read-modify-write: one atomic step that reads a word and writes it.
#[derive(Clone, Debug, PartialEq)]
pub enum Rmw {
    /// `xchg(x, v)`: stores v, returns the old value.
    Xchg(Expr),
    /// `cmpxchg(x, old, new)`: stores new if the word is old; returns the word it found.
    Cmpxchg { old: Expr, new: Expr },
    /// `atomic_add_return`, `atomic_fetch_or`, `atomic_inc`, ...: word = word op operand.
    Fetch {
        op: BinOp,
        operand: Expr,
        ret: RmwRet,
    },
    /// `atomic_add_unless(v, a, u)`: adds a unless the word is u; returns whether it added.
    AddUnless { add: Expr, unless: Expr },
}

impl Rmw {
    /// Given the word found and the thread's registers: the word to store (`None` when the
    /// operation leaves it, a failed cmpxchg) and the value returned.
    pub fn apply(&self, old: i32, regs: &[i32]) -> (Option<i32>, i32) {
        match self {
            Rmw::Xchg(v) => (Some(v.eval(regs)), old),
            Rmw::Cmpxchg { old: want, new } => {
                if old == want.eval(regs) {
                    (Some(new.eval(regs)), old)
                } else {
                    (None, old)
                }
            }
            Rmw::Fetch { op, operand, ret } => {
                let new = op.apply(old, operand.eval(regs));
                let r = match ret {
                    RmwRet::Old => old,
                    RmwRet::New => new,
                };
                (Some(new), r)
            }
            Rmw::AddUnless { add, unless } => {
                if old == unless.eval(regs) {
                    (None, 0)
                } else {
                    (Some(old.wrapping_add(add.eval(regs))), 1)
                }
            }
        }
    }
}

/// One step of a thread. Only `Load`, `Store` and `Rmw` touch shared memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Load {
        addr: Addr,
        dst: usize,
        kind: LoadKind,
    },
    Store {
        addr: Addr,
        value: Expr,
        kind: StoreKind,
    },
    /// One atomic read-modify-write; the value it returns goes to `dst`.
    Rmw {
        addr: Addr,
        dst: usize,
        rmw: Rmw,
    },
    /// Goes to op `target` (an index into the thread's ops; the length means the end) when
    /// `cond` is not zero. A `spin` branch goes back to retry a memory operation that found
    /// the lock taken or the reader still inside its critical section: taking it means the
    /// thread cannot progress until another thread does something.
    Branch {
        cond: Expr,
        target: usize,
        spin: bool,
    },
    /// A register computation, `r1 = r0 + 1`.
    Local {
        dst: usize,
        value: Expr,
    },
    Fence(Fence),
}

impl Op {
    pub fn is_memory(&self) -> bool {
        matches!(self, Op::Load { .. } | Op::Store { .. } | Op::Rmw { .. })
    }
}

/// A value computed from registers. Loads inside expressions were hoisted into hidden
/// registers by the parser, so evaluating an expression never touches memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Const(i32),
    Reg(usize),
    Neg(Box<Expr>),
    /// `!e`: 1 if e is 0, else 0.
    Not(Box<Expr>),
    /// `~e`
    BitNot(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    And,
    Or,
    Xor,
    /// `/` and `%` give 0 for a zero divisor: a test must not stop a run half way.
    Div,
    Rem,
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `&&` and `||` on values, where the right side touches no memory; a right side that
    /// does is lowered to a branch that skips it, as C does (parse/expr.rs, `logical`).
    LAnd,
    LOr,
}

impl BinOp {
    /// 32-bit two's-complement arithmetic: shared variables are 32-bit words.
    pub fn apply(self, a: i32, b: i32) -> i32 {
        match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            // By 0: 0. `i32::MIN / -1` wraps to `i32::MIN`, as two's complement does.
            BinOp::Div if b == 0 => 0,
            BinOp::Rem if b == 0 => 0,
            BinOp::Div => a.wrapping_div(b),
            BinOp::Rem => a.wrapping_rem(b),
            BinOp::Shl => a.wrapping_shl(b as u32),
            BinOp::Shr => a.wrapping_shr(b as u32),
            BinOp::Eq => (a == b) as i32,
            BinOp::Ne => (a != b) as i32,
            BinOp::Lt => (a < b) as i32,
            BinOp::Le => (a <= b) as i32,
            BinOp::Gt => (a > b) as i32,
            BinOp::Ge => (a >= b) as i32,
            BinOp::LAnd => (a != 0 && b != 0) as i32,
            BinOp::LOr => (a != 0 || b != 0) as i32,
        }
    }
}

impl Expr {
    /// 32-bit two's-complement arithmetic: shared variables are 32-bit words.
    pub fn eval(&self, regs: &[i32]) -> i32 {
        match self {
            Expr::Const(v) => *v,
            Expr::Reg(r) => regs[*r],
            Expr::Neg(e) => e.eval(regs).wrapping_neg(),
            Expr::Not(e) => (e.eval(regs) == 0) as i32,
            Expr::BitNot(e) => !e.eval(regs),
            Expr::Bin(op, a, b) => op.apply(a.eval(regs), b.eval(regs)),
        }
    }
}

/// A location a condition can name: a thread's register or a shared variable's final value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Loc {
    /// `thread:reg`; `reg` indexes `Thread::regs` and is always a named register.
    Reg {
        thread: usize,
        reg: usize,
    },
    Var(usize),
}

/// The proposition of the final condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Prop {
    True,
    False,
    Eq(Loc, i32),
    Ne(Loc, i32),
    Not(Box<Prop>),
    And(Box<Prop>, Box<Prop>),
    Or(Box<Prop>, Box<Prop>),
    Implies(Box<Prop>, Box<Prop>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantifier {
    /// `exists P`: some run satisfies P.
    Exists,
    /// `~exists P`: no run satisfies P.
    NotExists,
    /// `forall P`: every run satisfies P.
    Forall,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub quantifier: Quantifier,
    pub prop: Prop,
}

/// herd7's word for runs whose proposition held `pos` times and failed `neg` times.
pub fn observation_word(pos: u64, neg: u64) -> &'static str {
    match (pos, neg) {
        (0, _) => "Never",
        (_, 0) => "Always",
        _ => "Sometimes",
    }
}

/// The final state of one run: every named register of every thread (in declaration order)
/// and every shared variable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Outcome {
    pub regs: Vec<Vec<i32>>,
    pub mem: Vec<i32>,
}

impl Test {
    /// The value of `loc` in an outcome of this test.
    pub fn value(&self, o: &Outcome, loc: Loc) -> i32 {
        match loc {
            Loc::Var(v) => o.mem[v],
            Loc::Reg { thread, reg } => {
                let slot = self.threads[thread]
                    .visible_slot(reg)
                    .expect("conditions name only declared registers");
                o.regs[thread][slot]
            }
        }
    }

    /// Whether a final state passes the test's `filter` (every state does without one).
    pub fn kept(&self, o: &Outcome) -> bool {
        self.filter.as_ref().is_none_or(|f| self.holds(f, o))
    }

    /// herd7's witnesses over the runs the `filter` kept: runs where the condition's
    /// proposition held, and runs where it did not. herd7 counts the proposition whatever
    /// the quantifier: `exists P`, `~exists P` and `forall P` all count runs satisfying P.
    pub fn witnesses(&self, observed: &std::collections::BTreeMap<Outcome, u64>) -> (u64, u64) {
        observed
            .iter()
            .filter(|(o, _)| self.kept(o))
            .fold((0, 0), |(pos, neg), (o, n)| {
                match self.holds(&self.condition.prop, o) {
                    true => (pos + n, neg),
                    false => (pos, neg + n),
                }
            })
    }

    /// The herd7 summary line of these runs: `Observation <name> <Never|Sometimes|Always>
    /// <pos> <neg>`.
    pub fn observation_line(&self, observed: &std::collections::BTreeMap<Outcome, u64>) -> String {
        let (pos, neg) = self.witnesses(observed);
        format!(
            "Observation {} {} {pos} {neg}",
            self.name,
            observation_word(pos, neg)
        )
    }

    pub fn holds(&self, p: &Prop, o: &Outcome) -> bool {
        match p {
            Prop::True => true,
            Prop::False => false,
            Prop::Eq(l, v) => self.value(o, *l) == *v,
            Prop::Ne(l, v) => self.value(o, *l) != *v,
            Prop::Not(p) => !self.holds(p, o),
            Prop::And(a, b) => self.holds(a, o) && self.holds(b, o),
            Prop::Or(a, b) => self.holds(a, o) || self.holds(b, o),
            Prop::Implies(a, b) => !self.holds(a, o) || self.holds(b, o),
        }
    }

    pub fn loc_name(&self, loc: Loc) -> String {
        match loc {
            Loc::Var(v) => self.vars[v].clone(),
            Loc::Reg { thread, reg } => format!(
                "{thread}:{}",
                self.threads[thread].regs[reg]
                    .name
                    .as_deref()
                    .unwrap_or("?")
            ),
        }
    }

    /// Every location of an outcome: registers thread by thread, then the shared variables.
    pub fn all_locs(&self) -> Vec<Loc> {
        let mut out: Vec<Loc> = self
            .threads
            .iter()
            .enumerate()
            .flat_map(|(t, th)| th.visible().map(move |reg| Loc::Reg { thread: t, reg }))
            .collect();
        out.extend(
            (0..self.vars.len())
                .filter(|v| !self.hidden.get(*v).copied().unwrap_or(false))
                .map(Loc::Var),
        );
        out
    }

    /// The locations an outcome is shown by, as herd7 does: those of the `locations` clause
    /// and of the condition, in order of first mention. A condition naming none (`exists
    /// true`) shows everything.
    pub fn shown_locs(&self) -> Vec<Loc> {
        let mut out = Vec::new();
        for l in &self.locations {
            if !out.contains(l) {
                out.push(*l);
            }
        }
        collect_locs(&self.condition.prop, &mut out);
        if out.is_empty() {
            out = self.all_locs();
        }
        out
    }

    /// `0:r0=0; 1:r0=1; x=1;` in herd7's style.
    pub fn format_outcome(&self, o: &Outcome, locs: &[Loc]) -> String {
        let mut s = String::new();
        for (i, l) in locs.iter().enumerate() {
            if i > 0 {
                s.push(' ');
            }
            let _ = write!(
                s,
                "{}={};",
                self.loc_name(*l),
                self.value_text(self.value(o, *l))
            );
        }
        s
    }

    /// A value as herd7 prints it: a pointer by the name of its variable.
    pub fn value_text(&self, v: i32) -> String {
        match var_of(v, self.vars.len()) {
            Some(i) => self.vars[i].clone(),
            None => v.to_string(),
        }
    }

    /// The condition as written, e.g. `exists (0:r0=0 /\ 1:r0=0)`.
    pub fn condition_text(&self) -> String {
        let q = match self.condition.quantifier {
            Quantifier::Exists => "exists",
            Quantifier::NotExists => "~exists",
            Quantifier::Forall => "forall",
        };
        format!("{q} ({})", PropText(self, &self.condition.prop))
    }
}

fn collect_locs(p: &Prop, out: &mut Vec<Loc>) {
    match p {
        Prop::True | Prop::False => {}
        Prop::Eq(l, _) | Prop::Ne(l, _) => {
            if !out.contains(l) {
                out.push(*l);
            }
        }
        Prop::Not(a) => collect_locs(a, out),
        Prop::And(a, b) | Prop::Or(a, b) | Prop::Implies(a, b) => {
            collect_locs(a, out);
            collect_locs(b, out);
        }
    }
}

/// Prints a proposition fully parenthesised below the top level, so that it reads back the
/// same whatever the precedence rules of the reader.
struct PropText<'a>(&'a Test, &'a Prop);

impl fmt::Display for PropText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        let atomic = |p: &Prop| {
            matches!(
                p,
                Prop::True | Prop::False | Prop::Eq(..) | Prop::Ne(..) | Prop::Not(_)
            )
        };
        let side = |f: &mut fmt::Formatter<'_>, p: &Prop| {
            if atomic(p) {
                write!(f, "{}", PropText(t, p))
            } else {
                write!(f, "({})", PropText(t, p))
            }
        };
        match self.1 {
            Prop::True => f.write_str("true"),
            Prop::False => f.write_str("false"),
            Prop::Eq(l, v) => write!(f, "{}={}", t.loc_name(*l), t.value_text(*v)),
            Prop::Ne(l, v) => write!(f, "{}!={}", t.loc_name(*l), t.value_text(*v)),
            Prop::Not(p) => {
                f.write_str("~")?;
                side(f, p)
            }
            Prop::And(a, b) | Prop::Or(a, b) | Prop::Implies(a, b) => {
                let op = match self.1 {
                    Prop::And(..) => "/\\",
                    Prop::Or(..) => "\\/",
                    _ => "=>",
                };
                // Chains of one operator print flat: a /\ b /\ c.
                let same = |p: &Prop| std::mem::discriminant(p) == std::mem::discriminant(self.1);
                if same(a) && !matches!(self.1, Prop::Implies(..)) {
                    write!(f, "{}", PropText(t, a))?;
                } else {
                    side(f, a)?;
                }
                write!(f, " {op} ")?;
                side(f, b)
            }
        }
    }
}
