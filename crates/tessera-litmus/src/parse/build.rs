//! The parser's state: the cursor, the shared variables met so far and the thread being built.

use super::*;

pub(super) struct Parser<'a> {
    pub(super) cur: Cursor<'a>,
    /// Expressions, statements and propositions open around the one being parsed.
    pub(super) nesting: u32,
}

/// The deepest nesting of expressions, statements or propositions a test may have. The parser
/// recurses once or more per level, so a file nested thousands deep overflowed its stack (5,000
/// parentheses did); herd7's tests nest a few levels.
pub(super) const MAX_NESTING: u32 = 256;

impl Parser<'_> {
    /// Runs `f` one level deeper, or refuses at `at` past [`MAX_NESTING`].
    pub(super) fn nested<T>(
        &mut self,
        at: Pos,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        if self.nesting >= MAX_NESTING {
            return err(at, ErrorKind::TooDeep(MAX_NESTING));
        }
        self.nesting += 1;
        let r = f(self);
        self.nesting -= 1;
        r
    }

    /// The `links`-th operator of a chain (`a + b + c`, `p /\ q /\ r`, `a => b => c`) at
    /// `at`: a chain's tree is as deep as it is long, and evaluating or dropping 40,000 terms
    /// overflowed the stack, so a chain counts against the nesting bound as parentheses do.
    pub(super) fn chained(&self, at: Pos, links: u32) -> Result<()> {
        if self.nesting + links >= MAX_NESTING {
            return err(at, ErrorKind::TooDeep(MAX_NESTING));
        }
        Ok(())
    }
}

/// Shared variables met so far.
#[derive(Default)]
pub(super) struct Vars {
    pub(super) names: Vec<String>,
    pub(super) init: Vec<i32>,
    pub(super) initialised: Vec<bool>,
    pub(super) hidden: Vec<bool>,
    /// Arrays declared in the initial state: name, first element's variable, length. The
    /// elements are consecutive variables named `a[0]`, `a[1]`, ...
    pub(super) arrays: Vec<(String, usize, usize)>,
}

impl Vars {
    pub(super) fn intern(&mut self, name: &str) -> usize {
        if let Some(i) = self.find(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.init.push(0);
        self.initialised.push(false);
        self.hidden.push(false);
        self.names.len() - 1
    }
    /// A word the runner adds; its name holds a space, so no identifier can clash with it.
    pub(super) fn hidden(&mut self, name: &str) -> usize {
        let i = self.intern(name);
        self.hidden[i] = true;
        i
    }
    pub(super) fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
    /// An array's first element and length.
    pub(super) fn array(&self, name: &str) -> Option<(usize, usize)> {
        self.arrays
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, f, l)| (*f, *l))
    }
    /// The object a name denotes: an array, or a scalar (an array of one, as in C).
    pub(super) fn object(&mut self, name: &str) -> (usize, usize) {
        self.array(name).unwrap_or_else(|| (self.intern(name), 1))
    }
    /// Declares `name[len]` as `len` fresh consecutive variables.
    pub(super) fn declare_array(&mut self, name: &str, len: usize, pos: Pos) -> Result<usize> {
        if self.find(name).is_some() || self.array(name).is_some() {
            return err(
                pos,
                ErrorKind::Duplicate(format!("`{name}` is declared twice")),
            );
        }
        let first = self.names.len();
        for i in 0..len {
            self.intern(&format!("{name}[{i}]"));
        }
        self.arrays.push((name.to_string(), first, len));
        Ok(first)
    }
    pub(super) fn set_init(&mut self, name: &str, v: i32, pos: Pos) -> Result<()> {
        let i = self.intern(name);
        if self.initialised[i] {
            return err(
                pos,
                ErrorKind::Duplicate(format!("`{name}` is initialised twice")),
            );
        }
        self.initialised[i] = true;
        self.init[i] = v;
        Ok(())
    }
}

/// An RCU flavour: plain RCU, or the SRCU domain of one `srcu_struct` variable.
pub(super) type Domain = Option<usize>;

/// A thread being parsed.
pub(super) struct ThreadBuilder {
    pub(super) index: usize,
    /// Parameter name → the object it points at: first variable and length (1 for a
    /// scalar).
    pub(super) params: Vec<(String, usize, usize)>,
    pub(super) regs: Vec<Reg>,
    pub(super) ops: Vec<Op>,
    /// Per RCU domain this thread reads under: the register holding its nesting depth and
    /// the shared word that publishes it to synchronising threads.
    pub(super) rcu: Vec<(Domain, usize, usize)>,
    /// Grace periods to expand once every thread's counters are known: op index, domain.
    pub(super) syncs: Vec<(usize, Domain)>,
    /// SRCU domains this thread enters or leaves with `srcu_down_read`/`srcu_up_read`, and
    /// the shared word counting the readers inside them.
    pub(super) updown: Vec<(usize, usize)>,
}

impl ThreadBuilder {
    pub(super) fn param(&self, name: &str) -> Option<usize> {
        self.object(name).map(|(v, _)| v)
    }
    pub(super) fn object(&self, name: &str) -> Option<(usize, usize)> {
        self.params
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, l)| (*v, *l))
    }
    pub(super) fn temp(&mut self) -> usize {
        self.regs.push(Reg {
            name: None,
            init: 0,
        });
        self.regs.len() - 1
    }
    pub(super) fn load(&mut self, addr: Addr, kind: LoadKind) -> Expr {
        let dst = self.temp();
        self.ops.push(Op::Load { addr, dst, kind });
        Expr::Reg(dst)
    }
    pub(super) fn rmw(&mut self, addr: Addr, rmw: Rmw) -> usize {
        let dst = self.temp();
        self.ops.push(Op::Rmw { addr, dst, rmw });
        dst
    }
    /// True when `e` is just the result of the load made last: then `r = READ_ONCE(*x)`
    /// loads straight into `r`.
    pub(super) fn fresh_load(&self, e: &Expr) -> Option<usize> {
        match (e, self.ops.last()) {
            (Expr::Reg(t), Some(Op::Load { dst, .. }))
                if *t == *dst && *t + 1 == self.regs.len() && self.regs[*t].name.is_none() =>
            {
                Some(*t)
            }
            _ => None,
        }
    }
    pub(super) fn declare(&mut self, name: &str, pos: Pos) -> Result<usize> {
        self.check_new(name, pos)?;
        self.regs.push(Reg {
            name: Some(name.to_string()),
            init: 0,
        });
        Ok(self.regs.len() - 1)
    }
    pub(super) fn check_new(&self, name: &str, pos: Pos) -> Result<()> {
        if self.regs.iter().any(|r| r.name.as_deref() == Some(name)) {
            return err(
                pos,
                ErrorKind::Duplicate(format!(
                    "register `{name}` is declared twice in P{}",
                    self.index
                )),
            );
        }
        if self.param(name).is_some() {
            return err(
                pos,
                ErrorKind::Duplicate(format!(
                    "`{name}` is already a parameter of P{}",
                    self.index
                )),
            );
        }
        Ok(())
    }
    pub(super) fn register(&self, name: &str) -> Option<usize> {
        self.regs
            .iter()
            .position(|r| r.name.as_deref() == Some(name))
    }
    /// `r = value`, loading straight into `r` when the value is a fresh load.
    pub(super) fn assign(&mut self, dst: usize, value: Expr) {
        if let Some(t) = self.fresh_load(&value) {
            self.regs.pop();
            if let Some(Op::Load { dst: d, .. }) = self.ops.last_mut() {
                debug_assert_eq!(*d, t);
                *d = dst;
            }
        } else {
            self.ops.push(Op::Local { dst, value });
        }
    }
    /// The nesting register and published word of this thread for `domain`.
    pub(super) fn rcu_counter(&mut self, domain: Domain, vars: &mut Vars) -> (usize, usize) {
        if let Some((_, r, w)) = self.rcu.iter().find(|(d, _, _)| *d == domain) {
            return (*r, *w);
        }
        let r = self.temp();
        let name = match domain {
            None => format!("P{} rcu nesting", self.index),
            Some(s) => format!("P{} srcu nesting of {}", self.index, vars.names[s]),
        };
        let w = vars.hidden(&name);
        self.rcu.push((domain, r, w));
        (r, w)
    }
    /// The word counting the readers inside `domain` by `srcu_down_read`. One word per
    /// domain, shared by every thread, because the matching `srcu_up_read` may run on
    /// another: a per-thread depth would stay up on one thread and go negative on the other.
    pub(super) fn updown_counter(&mut self, domain: usize, vars: &mut Vars) -> usize {
        let w = vars.hidden(&format!("srcu down/up readers of {}", vars.names[domain]));
        if !self.updown.contains(&(domain, w)) {
            self.updown.push((domain, w));
        }
        w
    }
    /// One reader in (`BinOp::Add`) or out (`BinOp::Sub`) of `domain`'s down/up count.
    pub(super) fn step_updown(&mut self, domain: usize, vars: &mut Vars, op: BinOp) {
        let w = self.updown_counter(domain, vars);
        self.rmw(
            Addr::Var(w),
            Rmw::Fetch {
                op,
                operand: Expr::Const(1),
                ret: RmwRet::New,
            },
        );
    }
    /// Emits a branch to be aimed later with [`ThreadBuilder::aim`].
    pub(super) fn branch(&mut self, cond: Expr) -> usize {
        self.ops.push(Op::Branch {
            cond,
            target: usize::MAX,
            spin: false,
        });
        self.ops.len() - 1
    }
    pub(super) fn aim(&mut self, at: usize, target: usize) {
        if let Some(Op::Branch { target: t, .. }) = self.ops.get_mut(at) {
            *t = target;
        }
    }
}

/// The value of an expression that reads no register.
pub(super) fn constant(e: &Expr) -> Option<i32> {
    pub(super) fn reads_register(e: &Expr) -> bool {
        match e {
            Expr::Const(_) => false,
            Expr::Reg(_) => true,
            Expr::Neg(a) | Expr::Not(a) | Expr::BitNot(a) => reads_register(a),
            Expr::Bin(_, a, b) => reads_register(a) || reads_register(b),
        }
    }
    (!reads_register(e)).then(|| e.eval(&[]))
}

/// The level of `*`, `/` and `%` in `Parser::binary`: the terms of a pointer offset.
pub(super) const MULTIPLICATIVE: usize = 9;

/// The longest array the initial state may declare.
pub(super) const MAX_ARRAY: usize = 64;

/// Lexically every word that can start a type.
pub(super) const TYPE_WORDS: &[&str] = &[
    "int",
    "unsigned",
    "signed",
    "long",
    "short",
    "char",
    "bool",
    "_Bool",
    "intptr_t",
    "uintptr_t",
    "size_t",
    "u8",
    "u16",
    "u32",
    "u64",
    "s8",
    "s16",
    "s32",
    "s64",
    "spinlock_t",
    "raw_spinlock_t",
    "atomic_t",
    "atomic_long_t",
    "atomic64_t",
    "struct",
    "volatile",
    "const",
];

pub(super) const CONTROL: &[(&str, &str)] = &[
    (
        "while",
        "loops (the oracle and the exhaustive schedule need every thread to end)",
    ),
    (
        "for",
        "loops (the oracle and the exhaustive schedule need every thread to end)",
    ),
    (
        "do",
        "loops (the oracle and the exhaustive schedule need every thread to end)",
    ),
    ("switch", "`switch` (write it as `if`/`else`)"),
    ("case", "`switch` (write it as `if`/`else`)"),
    ("goto", "`goto` (only structured `if`/`else`)"),
    ("return", "`return` (threads run to their closing brace)"),
    ("break", "`break` (there are no loops)"),
    ("continue", "`continue` (there are no loops)"),
];
