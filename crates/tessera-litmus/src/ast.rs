//! A parsed litmus test, already lowered to what the oracle and the runner execute: per thread,
//! a straight-line list of memory operations and register computations.

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
    /// Initial value of each shared variable (0 unless the initial-state block says otherwise).
    pub init: Vec<i32>,
    pub threads: Vec<Thread>,
    /// The `locations [...]` clause: extra locations to show in every outcome.
    pub locations: Vec<Loc>,
    pub condition: Condition,
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
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// `WRITE_ONCE(*x, v)`
    Once,
    /// `smp_store_release(x, v)`
    Release,
    /// a plain `*x = v`
    Plain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// `smp_mb()`
    Mb,
    /// `smp_wmb()`
    Wmb,
    /// `smp_rmb()`
    Rmb,
    /// `barrier()`, a compiler barrier
    Barrier,
}

/// One step of a thread. Only `Load` and `Store` touch shared memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    Load {
        var: usize,
        dst: usize,
        kind: LoadKind,
    },
    Store {
        var: usize,
        value: Expr,
        kind: StoreKind,
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
        matches!(self, Op::Load { .. } | Op::Store { .. })
    }
}

/// A value computed from registers. Loads inside expressions were hoisted into hidden
/// registers by the parser, so evaluating an expression never touches memory.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Const(i32),
    Reg(usize),
    Neg(Box<Expr>),
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
}

impl Expr {
    /// 32-bit two's-complement arithmetic: shared variables are 32-bit words.
    pub fn eval(&self, regs: &[i32]) -> i32 {
        match self {
            Expr::Const(v) => *v,
            Expr::Reg(r) => regs[*r],
            Expr::Neg(e) => e.eval(regs).wrapping_neg(),
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(regs), b.eval(regs));
                match op {
                    BinOp::Add => a.wrapping_add(b),
                    BinOp::Sub => a.wrapping_sub(b),
                    BinOp::Mul => a.wrapping_mul(b),
                    BinOp::And => a & b,
                    BinOp::Or => a | b,
                    BinOp::Xor => a ^ b,
                }
            }
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
        out.extend((0..self.vars.len()).map(Loc::Var));
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
            let _ = write!(s, "{}={};", self.loc_name(*l), self.value(o, *l));
        }
        s
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
            Prop::Eq(l, v) => write!(f, "{}={v}", t.loc_name(*l)),
            Prop::Ne(l, v) => write!(f, "{}!={v}", t.loc_name(*l)),
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
