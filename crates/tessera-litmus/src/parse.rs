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
    }
    .test()
}

// ---------------------------------------------------------------------------------------------
// Lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Int(i64),
    Str(String),
    Punct(&'static str),
    Eof,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    pos: Pos,
}

impl Token {
    fn describe(&self) -> String {
        match &self.tok {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Int(n) => format!("`{n}`"),
            Tok::Str(_) => "a string".into(),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "end of file".into(),
        }
    }
    fn is(&self, p: &str) -> bool {
        matches!(self.tok, Tok::Punct(q) if q == p)
    }
    fn ident(&self) -> Option<&str> {
        match &self.tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }
}

/// Where the lexer is: at top level OCaml comments `(* *)` are recognised; in C code they
/// are not, so that `READ_ONCE(*x)` lexes as C.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Top,
    Code,
}

/// Longest first, so that `/\` wins over `/`.
const PUNCTS: &[&str] = &[
    "/\\", "\\/", "=>", "==", "!=", "<=", ">=", "&&", "||", "++", "--", "->", "<<", ">>", "+=",
    "-=", "*=", "|=", "&=", "^=", "(", ")", "{", "}", "[", "]", ";", ",", "*", "&", "+", "-", "|",
    "^", "~", "!", "=", "<", ">", ":", ".", "?", "%", "/",
];

#[derive(Clone)]
struct Cursor<'a> {
    src: &'a str,
    at: usize,
    line: u32,
    col: u32,
}

impl<'a> Cursor<'a> {
    fn new(src: &'a str) -> Self {
        Cursor {
            src,
            at: 0,
            line: 1,
            col: 1,
        }
    }
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }
    fn rest(&self) -> &'a str {
        &self.src[self.at..]
    }
    fn peek_char(&self) -> Option<char> {
        self.rest().chars().next()
    }
    fn bump_char(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.at += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }
    fn skip(&mut self, n: usize) {
        for _ in 0..n {
            self.bump_char();
        }
    }

    fn skip_trivia(&mut self, mode: Mode) -> Result<()> {
        loop {
            let rest = self.rest();
            if rest.starts_with(|c: char| c.is_whitespace()) {
                self.bump_char();
            } else if rest.starts_with("//") {
                while !matches!(self.peek_char(), None | Some('\n')) {
                    self.bump_char();
                }
            } else if rest.starts_with("/*") {
                let start = self.pos();
                self.skip(2);
                loop {
                    if self.rest().starts_with("*/") {
                        self.skip(2);
                        break;
                    }
                    if self.bump_char().is_none() {
                        return err(start, ErrorKind::Unterminated("comment `/*`"));
                    }
                }
            } else if mode == Mode::Top && rest.starts_with("(*") {
                // OCaml comments nest.
                let start = self.pos();
                self.skip(2);
                let mut depth = 1;
                while depth > 0 {
                    if self.rest().starts_with("(*") {
                        self.skip(2);
                        depth += 1;
                    } else if self.rest().starts_with("*)") {
                        self.skip(2);
                        depth -= 1;
                    } else if self.bump_char().is_none() {
                        return err(start, ErrorKind::Unterminated("comment `(*`"));
                    }
                }
            } else {
                return Ok(());
            }
        }
    }

    fn lex(&mut self, mode: Mode) -> Result<Token> {
        self.skip_trivia(mode)?;
        let pos = self.pos();
        let Some(c) = self.peek_char() else {
            return Ok(Token { tok: Tok::Eof, pos });
        };
        let tok = if c.is_ascii_alphabetic() || c == '_' {
            let start = self.at;
            while matches!(self.peek_char(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                self.bump_char();
            }
            Tok::Ident(self.src[start..self.at].to_string())
        } else if c.is_ascii_digit() {
            let start = self.at;
            let hex = self.rest().starts_with("0x") || self.rest().starts_with("0X");
            if hex {
                self.skip(2);
            }
            while matches!(self.peek_char(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
                self.bump_char();
            }
            let text = &self.src[start..self.at];
            let v = if hex {
                i64::from_str_radix(&text[2..], 16)
            } else {
                text.parse::<i64>()
            };
            match v {
                Ok(v) => Tok::Int(v),
                Err(_) => return err(pos, ErrorKind::BadInt(format!("`{text}`"))),
            }
        } else if c == '"' {
            self.bump_char();
            let start = self.at;
            loop {
                match self.peek_char() {
                    Some('"') => break,
                    Some(_) => {
                        self.bump_char();
                    }
                    None => return err(pos, ErrorKind::Unterminated("string")),
                }
            }
            let s = self.src[start..self.at].to_string();
            self.bump_char();
            Tok::Str(s)
        } else if let Some(p) = PUNCTS.iter().find(|p| self.rest().starts_with(**p)) {
            self.skip(p.chars().count());
            Tok::Punct(p)
        } else {
            return err(pos, ErrorKind::BadChar(c));
        };
        Ok(Token { tok, pos })
    }

    /// The test name after `C`: everything up to the next white space (`2+2W`, `SB+mb.x`).
    fn test_name(&mut self) -> Result<String> {
        while matches!(self.peek_char(), Some(' ' | '\t')) {
            self.bump_char();
        }
        let start = self.at;
        while matches!(self.peek_char(), Some(c) if !c.is_whitespace()) {
            self.bump_char();
        }
        if self.at == start {
            let found = match self.peek_char() {
                None => "end of file",
                Some(_) => "end of line",
            };
            return err(
                self.pos(),
                ErrorKind::Expected {
                    expected: "the test name after `C`".into(),
                    found: found.into(),
                },
            );
        }
        Ok(self.src[start..self.at].to_string())
    }

    /// Skips to the end of the current line (herd7's `Key=value` information lines).
    fn skip_line(&mut self) {
        while !matches!(self.bump_char(), None | Some('\n')) {}
    }
}

// ---------------------------------------------------------------------------------------------
// Parser

struct Parser<'a> {
    cur: Cursor<'a>,
}

/// Shared variables met so far.
#[derive(Default)]
struct Vars {
    names: Vec<String>,
    init: Vec<i32>,
    initialised: Vec<bool>,
    hidden: Vec<bool>,
    /// Arrays declared in the initial state: name, first element's variable, length. The
    /// elements are consecutive variables named `a[0]`, `a[1]`, ...
    arrays: Vec<(String, usize, usize)>,
}

impl Vars {
    fn intern(&mut self, name: &str) -> usize {
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
    fn hidden(&mut self, name: &str) -> usize {
        let i = self.intern(name);
        self.hidden[i] = true;
        i
    }
    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
    /// An array's first element and length.
    fn array(&self, name: &str) -> Option<(usize, usize)> {
        self.arrays
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, f, l)| (*f, *l))
    }
    /// The object a name denotes: an array, or a scalar (an array of one, as in C).
    fn object(&mut self, name: &str) -> (usize, usize) {
        self.array(name).unwrap_or_else(|| (self.intern(name), 1))
    }
    /// Declares `name[len]` as `len` fresh consecutive variables.
    fn declare_array(&mut self, name: &str, len: usize, pos: Pos) -> Result<usize> {
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
    fn set_init(&mut self, name: &str, v: i32, pos: Pos) -> Result<()> {
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
type Domain = Option<usize>;

/// A thread being parsed.
struct ThreadBuilder {
    index: usize,
    /// Parameter name → the object it points at: first variable and length (1 for a
    /// scalar).
    params: Vec<(String, usize, usize)>,
    regs: Vec<Reg>,
    ops: Vec<Op>,
    /// Per RCU domain this thread reads under: the register holding its nesting depth and
    /// the shared word that publishes it to synchronising threads.
    rcu: Vec<(Domain, usize, usize)>,
    /// Grace periods to expand once every thread's counters are known: op index, domain.
    syncs: Vec<(usize, Domain)>,
    /// SRCU domains this thread enters or leaves with `srcu_down_read`/`srcu_up_read`, and
    /// the shared word counting the readers inside them.
    updown: Vec<(usize, usize)>,
}

impl ThreadBuilder {
    fn param(&self, name: &str) -> Option<usize> {
        self.object(name).map(|(v, _)| v)
    }
    fn object(&self, name: &str) -> Option<(usize, usize)> {
        self.params
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, l)| (*v, *l))
    }
    fn temp(&mut self) -> usize {
        self.regs.push(Reg {
            name: None,
            init: 0,
        });
        self.regs.len() - 1
    }
    fn load(&mut self, addr: Addr, kind: LoadKind) -> Expr {
        let dst = self.temp();
        self.ops.push(Op::Load { addr, dst, kind });
        Expr::Reg(dst)
    }
    fn rmw(&mut self, addr: Addr, rmw: Rmw) -> usize {
        let dst = self.temp();
        self.ops.push(Op::Rmw { addr, dst, rmw });
        dst
    }
    /// True when `e` is just the result of the load made last: then `r = READ_ONCE(*x)`
    /// loads straight into `r`.
    fn fresh_load(&self, e: &Expr) -> Option<usize> {
        match (e, self.ops.last()) {
            (Expr::Reg(t), Some(Op::Load { dst, .. }))
                if *t == *dst && *t + 1 == self.regs.len() && self.regs[*t].name.is_none() =>
            {
                Some(*t)
            }
            _ => None,
        }
    }
    fn declare(&mut self, name: &str, pos: Pos) -> Result<usize> {
        self.check_new(name, pos)?;
        self.regs.push(Reg {
            name: Some(name.to_string()),
            init: 0,
        });
        Ok(self.regs.len() - 1)
    }
    fn check_new(&self, name: &str, pos: Pos) -> Result<()> {
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
    fn register(&self, name: &str) -> Option<usize> {
        self.regs
            .iter()
            .position(|r| r.name.as_deref() == Some(name))
    }
    /// `r = value`, loading straight into `r` when the value is a fresh load.
    fn assign(&mut self, dst: usize, value: Expr) {
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
    fn rcu_counter(&mut self, domain: Domain, vars: &mut Vars) -> (usize, usize) {
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
    fn updown_counter(&mut self, domain: usize, vars: &mut Vars) -> usize {
        let w = vars.hidden(&format!("srcu down/up readers of {}", vars.names[domain]));
        if !self.updown.contains(&(domain, w)) {
            self.updown.push((domain, w));
        }
        w
    }
    /// One reader in (`BinOp::Add`) or out (`BinOp::Sub`) of `domain`'s down/up count.
    fn step_updown(&mut self, domain: usize, vars: &mut Vars, op: BinOp) {
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
    fn branch(&mut self, cond: Expr) -> usize {
        self.ops.push(Op::Branch {
            cond,
            target: usize::MAX,
            spin: false,
        });
        self.ops.len() - 1
    }
    fn aim(&mut self, at: usize, target: usize) {
        if let Some(Op::Branch { target: t, .. }) = self.ops.get_mut(at) {
            *t = target;
        }
    }
}

/// The value of an expression that reads no register.
fn constant(e: &Expr) -> Option<i32> {
    fn reads_register(e: &Expr) -> bool {
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
const MULTIPLICATIVE: usize = 9;

/// The longest array the initial state may declare.
const MAX_ARRAY: usize = 64;

/// Lexically every word that can start a type.
const TYPE_WORDS: &[&str] = &[
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

const CONTROL: &[(&str, &str)] = &[
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

impl<'a> Parser<'a> {
    fn peek(&self, m: Mode) -> Result<Token> {
        self.cur.clone().lex(m)
    }
    fn bump(&mut self, m: Mode) -> Result<Token> {
        self.cur.lex(m)
    }
    fn eat(&mut self, m: Mode, p: &str) -> Result<bool> {
        if self.peek(m)?.is(p) {
            self.bump(m)?;
            return Ok(true);
        }
        Ok(false)
    }
    fn expect(&mut self, m: Mode, p: &str) -> Result<Pos> {
        let t = self.bump(m)?;
        if t.is(p) {
            return Ok(t.pos);
        }
        expected(&t, &format!("`{p}`"))
    }
    fn ident(&mut self, m: Mode, what: &str) -> Result<(String, Pos)> {
        let t = self.bump(m)?;
        match t.tok {
            Tok::Ident(s) => Ok((s, t.pos)),
            _ => expected(&t, what),
        }
    }

    fn test(&mut self) -> Result<Test> {
        let t = self.bump(Mode::Top)?;
        match t.ident() {
            Some("C") => {}
            Some(arch) => {
                return err(
                    t.pos,
                    ErrorKind::Unsupported(format!(
                        "architecture `{arch}`: only C litmus tests run here"
                    )),
                )
            }
            None => return expected(&t, "`C` and the test name"),
        }
        let name = self.cur.test_name()?;
        let mut doc = None;
        if let Tok::Str(s) = self.peek(Mode::Top)?.tok {
            self.bump(Mode::Top)?;
            doc = Some(s);
        }
        self.info_lines()?;

        let mut vars = Vars::default();
        let mut reg_inits = Vec::new();
        if self.peek(Mode::Top)?.is("{") {
            self.init_block(&mut vars, &mut reg_inits)?;
        }

        let mut builders: Vec<ThreadBuilder> = Vec::new();
        loop {
            let t = self.peek(Mode::Top)?;
            let Some(n) = t.ident().and_then(thread_number) else {
                break;
            };
            if n != builders.len() {
                return expected(&t, &format!("`P{}`", builders.len()));
            }
            if n >= MAX_DEVICES {
                return err(
                    t.pos,
                    ErrorKind::Unsupported(format!(
                        "more than {MAX_DEVICES} threads (each runs on its own device)"
                    )),
                );
            }
            self.bump(Mode::Top)?;
            builders.push(self.thread(n, &mut vars)?);
        }
        expand_syncs(&mut builders);
        let mut threads: Vec<Thread> = builders
            .into_iter()
            .map(|b| Thread {
                regs: b.regs,
                ops: b.ops,
            })
            .collect();
        if threads.is_empty() {
            let t = self.peek(Mode::Top)?;
            let want = if vars.names.is_empty() && reg_inits.is_empty() {
                "the initial state `{ ... }` or a thread `P0(...) { ... }`"
            } else {
                "a thread `P0(...) { ... }`"
            };
            return expected(&t, want);
        }

        for (n, reg, v, pos) in reg_inits {
            let Some(th) = threads.get_mut(n) else {
                return err(
                    pos,
                    ErrorKind::Undefined(format!("there is no thread P{n}")),
                );
            };
            // A register given only an initial value is declared by it, as herd7 does.
            let r = match th.reg_index(&reg) {
                Some(r) => r,
                None => {
                    th.regs.push(Reg {
                        name: Some(reg.clone()),
                        init: 0,
                    });
                    th.regs.len() - 1
                }
            };
            th.regs[r].init = v;
        }

        let mut locations = Vec::new();
        if self.peek(Mode::Top)?.ident() == Some("locations") {
            self.bump(Mode::Top)?;
            self.expect(Mode::Top, "[")?;
            while !self.eat(Mode::Top, "]")? {
                locations.push(self.loc(&vars, &threads)?);
                if !self.eat(Mode::Top, ";")? && !self.peek(Mode::Top)?.is("]") {
                    let t = self.bump(Mode::Top)?;
                    return expected(&t, "`;` or `]`");
                }
            }
        }

        let mut filter = None;
        if self.peek(Mode::Top)?.ident() == Some("filter") {
            self.bump(Mode::Top)?;
            filter = Some(self.prop(&vars, &threads)?);
        }

        let t = self.bump(Mode::Top)?;
        let quantifier = match (&t.tok, t.ident()) {
            (_, Some("exists")) => Quantifier::Exists,
            (_, Some("forall")) => Quantifier::Forall,
            (Tok::Punct("~"), _) => {
                let e = self.bump(Mode::Top)?;
                if e.ident() != Some("exists") {
                    return expected(&e, "`exists` after `~`");
                }
                Quantifier::NotExists
            }
            _ => {
                return expected(&t, "a final condition (`exists`, `~exists` or `forall`)");
            }
        };
        let prop = self.prop(&vars, &threads)?;
        let t = self.bump(Mode::Top)?;
        if t.tok != Tok::Eof {
            return expected(&t, "end of file after the condition");
        }
        Ok(Test {
            name,
            doc,
            vars: vars.names,
            hidden: vars.hidden,
            init: vars.init,
            threads,
            locations,
            filter,
            condition: Condition { quantifier, prop },
        })
    }

    /// diy-generated tests carry `Key=value` lines between the name and the initial state.
    fn info_lines(&mut self) -> Result<()> {
        loop {
            let mut look = self.cur.clone();
            let t = look.lex(Mode::Top)?;
            if t.ident().is_none() || thread_number(t.ident().unwrap_or("")).is_some() {
                return Ok(());
            }
            if look.peek_char() != Some('=') {
                return Ok(());
            }
            self.cur = look;
            self.cur.skip_line();
        }
    }

    fn init_block(
        &mut self,
        vars: &mut Vars,
        regs: &mut Vec<(usize, String, i32, Pos)>,
    ) -> Result<()> {
        let m = Mode::Top;
        self.expect(m, "{")?;
        loop {
            let t = self.peek(m)?;
            match &t.tok {
                Tok::Punct("}") => {
                    self.bump(m)?;
                    return Ok(());
                }
                Tok::Punct(";") => {
                    self.bump(m)?;
                    continue;
                }
                Tok::Int(n) => {
                    self.bump(m)?;
                    let n = usize::try_from(*n).unwrap_or(usize::MAX);
                    self.expect(m, ":")?;
                    let (reg, _) = self.ident(m, "a register name")?;
                    self.expect(m, "=")?;
                    let v = self.value(m, vars, true)?;
                    regs.push((n, reg, v, t.pos));
                }
                Tok::Punct("[") => {
                    self.bump(m)?;
                    let (name, pos) = self.ident(m, "a variable name")?;
                    self.expect(m, "]")?;
                    self.expect(m, "=")?;
                    let v = self.value(m, vars, true)?;
                    vars.set_init(&name, v, pos)?;
                }
                Tok::Ident(w) if is_type_word(w) => {
                    self.type_name(m)?;
                    while self.eat(m, "*")? {}
                    let (name, pos) = self.ident(m, "a variable name")?;
                    if self.peek(m)?.is("[") {
                        self.array_declaration(vars, &name, pos)?;
                        let s = self.peek(m)?;
                        if !s.is(";") && !s.is("}") {
                            return expected(&s, "`;` or `}`");
                        }
                        continue;
                    }
                    vars.intern(&name);
                    let v = if self.eat(m, "=")? {
                        self.value(m, vars, true)?
                    } else {
                        0
                    };
                    vars.set_init(&name, v, pos)?;
                }
                Tok::Ident(w) => {
                    let w = w.clone();
                    self.bump(m)?;
                    let s = self.peek(m)?;
                    if s.is("[") && vars.array(&w).is_some() {
                        // `a[1]=2;`: one element of an array declared earlier.
                        let v = self.array_cell(m, vars, &w)?;
                        self.expect(m, "=")?;
                        let value = self.value(m, vars, true)?;
                        let name = vars.names[v].clone();
                        vars.set_init(&name, value, t.pos)?;
                    } else if s.is("=") {
                        self.bump(m)?;
                        vars.intern(&w);
                        let v = self.value(m, vars, true)?;
                        vars.set_init(&w, v, t.pos)?;
                    } else if s.ident().is_some() || s.is("*") {
                        return err(t.pos, ErrorKind::Unsupported(format!("the type `{w}`")));
                    } else {
                        return expected(&s, &format!("`=` after `{w}`"));
                    }
                }
                _ => {
                    return expected(
                        &t,
                        "an initial value such as `x=0;`, `int x = 0;` or `0:r0=0;`",
                    )
                }
            }
            let s = self.peek(m)?;
            if !s.is(";") && !s.is("}") {
                return expected(&s, "`;` or `}`");
            }
        }
    }

    /// `[N]` and an optional `= {v0, v1, ...}` after an array's name in the initial state;
    /// elements without a value are 0, as in C.
    fn array_declaration(&mut self, vars: &mut Vars, name: &str, pos: Pos) -> Result<()> {
        let m = Mode::Top;
        self.expect(m, "[")?;
        let t = self.bump(m)?;
        let len = match t.tok {
            // Every element is a variable with its own page and directory entry: a bound
            // keeps a typo from making millions.
            Tok::Int(n) if (1..=MAX_ARRAY as i64).contains(&n) => n as usize,
            Tok::Int(n) => {
                return err(
                    t.pos,
                    ErrorKind::Unsupported(format!(
                        "an array of {n} elements (from 1 to {MAX_ARRAY})"
                    )),
                )
            }
            _ => return expected(&t, "the array's length"),
        };
        self.expect(m, "]")?;
        let first = vars.declare_array(name, len, pos)?;
        if !self.eat(m, "=")? {
            return Ok(());
        }
        self.expect(m, "{")?;
        let mut i = 0;
        while !self.eat(m, "}")? {
            let t = self.peek(m)?;
            if i == len {
                return err(
                    t.pos,
                    ErrorKind::OutOfBounds(format!(
                        "more initial values than the {len} elements of `{name}`"
                    )),
                );
            }
            vars.init[first + i] = self.value(m, vars, true)?;
            vars.initialised[first + i] = true;
            i += 1;
            if !self.eat(m, ",")? && !self.peek(m)?.is("}") {
                let t = self.bump(m)?;
                return expected(&t, "`,` or `}`");
            }
        }
        Ok(())
    }

    /// `[i]` after an array's name (already taken) in the initial state or a condition: the
    /// variable of that element, or a positioned error when `i` is out of range.
    fn array_cell(&mut self, m: Mode, vars: &Vars, name: &str) -> Result<usize> {
        let (first, len) = vars.array(name).expect("called only for a declared array");
        self.expect(m, "[")?;
        let t = self.bump(m)?;
        let i = match t.tok {
            Tok::Int(i) => i,
            _ => return expected(&t, "an element number"),
        };
        self.expect(m, "]")?;
        if !(0..len as i64).contains(&i) {
            return err(
                t.pos,
                ErrorKind::OutOfBounds(format!("element {i} of `{name}`, which has {len}")),
            );
        }
        Ok(first + i as usize)
    }

    /// A type without its stars: qualifiers, then words such as `unsigned long`,
    /// `spinlock_t` or `struct srcu_struct`. Every type is a 32-bit word here.
    fn type_name(&mut self, m: Mode) -> Result<String> {
        let mut words = Vec::new();
        loop {
            let t = self.peek(m)?;
            match t.ident() {
                Some("volatile" | "const") => {
                    self.bump(m)?;
                }
                Some("struct") => {
                    self.bump(m)?;
                    let (name, _) = self.ident(m, "a struct name")?;
                    words.push(format!("struct {name}"));
                    return Ok(words.join(" "));
                }
                Some(w) if is_type_word(w) => {
                    words.push(w.to_string());
                    self.bump(m)?;
                }
                _ if words.is_empty() => return expected(&t, "a type"),
                _ => return Ok(words.join(" ")),
            }
        }
    }

    /// An integer constant or a pointer: `x` or `&x` is the address of variable `x`,
    /// `ATOMIC_INIT(n)` is `n`. Words are 32 bits, so anything from `-2^31` to `2^32 - 1` is
    /// accepted and kept as its 32-bit pattern. `intern` lets the initial state name a
    /// variable before any thread mentions it; a condition may name only known ones.
    fn value(&mut self, m: Mode, vars: &mut Vars, intern: bool) -> Result<i32> {
        let t = self.bump(m)?;
        let (neg, t) = if t.is("-") {
            (true, self.bump(m)?)
        } else {
            (false, t)
        };
        let t = if !neg && t.is("&") { self.bump(m)? } else { t };
        match &t.tok {
            Tok::Int(n) => {
                let v = if neg { -n } else { *n };
                if (i32::MIN as i64..=u32::MAX as i64).contains(&v) {
                    Ok(v as i32)
                } else {
                    err(t.pos, ErrorKind::BadInt(format!("`{v}`")))
                }
            }
            Tok::Ident(s) if s == "ATOMIC_INIT" && !neg => {
                self.expect(m, "(")?;
                let v = self.value(m, vars, intern)?;
                self.expect(m, ")")?;
                Ok(v)
            }
            Tok::Ident(s) if !neg && vars.array(s).is_some() => {
                // `a` is a pointer to its first element; `a[i]` (after `&`) to element i.
                if self.peek(m)?.is("[") {
                    return Ok(addr_of(self.array_cell(m, vars, s)?));
                }
                Ok(addr_of(vars.array(s).map_or(0, |(f, _)| f)))
            }
            Tok::Ident(s) if !neg => {
                let v = match vars.find(s) {
                    Some(v) => v,
                    None if intern => vars.intern(s),
                    None => {
                        return err(
                            t.pos,
                            ErrorKind::Undefined(format!("unknown location `{s}`")),
                        )
                    }
                };
                Ok(addr_of(v))
            }
            _ => expected(&t, "an integer or a variable's name"),
        }
    }

    fn thread(&mut self, index: usize, vars: &mut Vars) -> Result<ThreadBuilder> {
        let m = Mode::Code;
        let mut b = ThreadBuilder {
            index,
            params: Vec::new(),
            regs: Vec::new(),
            ops: Vec::new(),
            rcu: Vec::new(),
            syncs: Vec::new(),
            updown: Vec::new(),
        };
        self.expect(m, "(")?;
        if !self.eat(m, ")")? {
            loop {
                self.type_name(m)?;
                let mut stars = 0;
                while self.eat(m, "*")? {
                    stars += 1;
                }
                let (name, pos) = self.ident(m, "a parameter name")?;
                // `int a[]` is C's other spelling of `int *a`.
                if self.eat(m, "[")? {
                    if let Tok::Int(_) = self.peek(m)?.tok {
                        self.bump(m)?;
                    }
                    self.expect(m, "]")?;
                    stars += 1;
                }
                if stars == 0 {
                    return err(
                        pos,
                        ErrorKind::Unsupported(format!(
                            "parameter `{name}` is not a pointer (a thread's parameters point \
                             at the shared variables)"
                        )),
                    );
                }
                if b.param(&name).is_some() {
                    return err(
                        pos,
                        ErrorKind::Duplicate(format!("parameter `{name}` appears twice")),
                    );
                }
                let (v, len) = vars.object(&name);
                b.params.push((name, v, len));
                if self.eat(m, ")")? {
                    break;
                }
                self.expect(m, ",")?;
            }
        }
        self.expect(m, "{")?;
        self.block(&mut b, vars)?;
        Ok(b)
    }

    /// Statements up to and including the closing `}`.
    fn block(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let m = Mode::Code;
        loop {
            let t = self.peek(m)?;
            match &t.tok {
                Tok::Punct("}") => {
                    self.bump(m)?;
                    return Ok(());
                }
                // What follows a thread: its closing brace is missing.
                Tok::Ident(w)
                    if matches!(w.as_str(), "exists" | "forall" | "locations" | "filter")
                        || thread_number(w).is_some() =>
                {
                    return expected(&t, &format!("`}}` closing P{}", b.index));
                }
                Tok::Eof => return expected(&t, &format!("`}}` closing P{}", b.index)),
                _ => self.statement(b, vars)?,
            }
        }
    }

    fn statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let m = Mode::Code;
        let t = self.peek(m)?;
        match &t.tok {
            Tok::Punct(";") => {
                self.bump(m)?;
                Ok(())
            }
            Tok::Punct("{") => {
                self.bump(m)?;
                self.block(b, vars)
            }
            Tok::Punct("*") => {
                // `*p = e;` stores; anything else starting with `*` is an expression.
                let mut look = self.cur.clone();
                look.lex(m)?;
                let name = look.lex(m)?;
                let op = look.lex(m)?;
                let assigns = matches!(
                    op.tok,
                    Tok::Punct("=" | "+=" | "-=" | "*=" | "|=" | "&=" | "^=" | "++" | "--")
                );
                if name.ident().is_some() && assigns {
                    self.bump(m)?;
                    let addr = self.addr_name(b)?;
                    return self.plain_store(b, vars, addr);
                }
                if name.is("(") {
                    // `*(x + i) = e;`, or a load of it whose value is dropped.
                    self.bump(m)?;
                    self.bump(m)?;
                    let addr = self.place(b, vars, true)?;
                    self.expect(m, ")")?;
                    if self.peek(m)?.is(";") {
                        self.bump(m)?;
                        b.load(addr, LoadKind::Plain);
                        return Ok(());
                    }
                    return self.plain_store(b, vars, addr);
                }
                self.expr_statement(b, vars)
            }
            Tok::Ident(w) => {
                let w = w.clone();
                if let Some((_, why)) = CONTROL.iter().find(|(c, _)| *c == w) {
                    return err(t.pos, ErrorKind::Unsupported((*why).to_string()));
                }
                if w == "if" {
                    return self.if_statement(b, vars);
                }
                if w == "else" {
                    return err(
                        t.pos,
                        ErrorKind::Expected {
                            expected: "a statement".into(),
                            found: "`else` without `if`".into(),
                        },
                    );
                }
                if is_type_word(&w) {
                    return self.declaration(b, vars);
                }
                let mut look = self.cur.clone();
                look.lex(m)?;
                let s = look.lex(m)?;
                if s.is("[") {
                    // `x[i] = e;`, or a load of it whose value is dropped.
                    self.bump(m)?;
                    let addr = self.subscript(b, vars, &w, t.pos)?;
                    if self.peek(m)?.is(";") {
                        self.bump(m)?;
                        b.load(addr, LoadKind::Plain);
                        return Ok(());
                    }
                    return self.plain_store(b, vars, addr);
                }
                if let Tok::Punct(p) = s.tok {
                    if p == "=" {
                        self.bump(m)?;
                        self.bump(m)?;
                        let dst = self.assigned_register(b, &w, t.pos)?;
                        let value = self.expr(b, vars)?;
                        b.assign(dst, value);
                        self.expect(m, ";")?;
                        return Ok(());
                    }
                    let compound = match p {
                        "+=" => Some((BinOp::Add, None)),
                        "-=" => Some((BinOp::Sub, None)),
                        "*=" => Some((BinOp::Mul, None)),
                        "|=" => Some((BinOp::Or, None)),
                        "&=" => Some((BinOp::And, None)),
                        "^=" => Some((BinOp::Xor, None)),
                        "++" => Some((BinOp::Add, Some(1))),
                        "--" => Some((BinOp::Sub, Some(1))),
                        _ => None,
                    };
                    if let Some((op, fixed)) = compound {
                        self.bump(m)?;
                        self.bump(m)?;
                        let dst = match b.register(&w) {
                            Some(r) => r,
                            None if b.param(&w).is_some() => {
                                return err(t.pos, self.not_a_register(b, &w))
                            }
                            None => self.unassigned_register(b, vars, &w, t.pos)?,
                        };
                        let rhs = match fixed {
                            Some(c) => Expr::Const(c),
                            None => self.expr(b, vars)?,
                        };
                        let value = Expr::Bin(op, Box::new(Expr::Reg(dst)), Box::new(rhs));
                        b.ops.push(Op::Local { dst, value });
                        self.expect(m, ";")?;
                        return Ok(());
                    }
                }
                if s.ident().is_some() || (s.is("*") && b.register(&w).is_none()) {
                    // `T name;` with a type this runner does not know.
                    return err(t.pos, ErrorKind::Unsupported(format!("the type `{w}`")));
                }
                self.expr_statement(b, vars)
            }
            _ => self.expr_statement(b, vars),
        }
    }

    /// An expression evaluated for its memory operations, or a call with no value.
    fn expr_statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let m = Mode::Code;
        let t = self.peek(m)?;
        if let Tok::Ident(w) = &t.tok {
            let mut look = self.cur.clone();
            look.lex(m)?;
            if look.lex(m)?.is("(") && !is_value_call(w) {
                let w = w.clone();
                self.bump(m)?;
                self.void_call(b, vars, &w, t.pos)?;
                self.expect(m, ";")?;
                return Ok(());
            }
        }
        self.expr(b, vars)?;
        self.expect(m, ";")?;
        Ok(())
    }

    fn if_statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let m = Mode::Code;
        self.bump(m)?;
        self.expect(m, "(")?;
        let cond = self.expr(b, vars)?;
        self.expect(m, ")")?;
        let skip_then = b.branch(Expr::Not(Box::new(cond)));
        self.statement(b, vars)?;
        if self.peek(m)?.ident() == Some("else") {
            self.bump(m)?;
            let skip_else = b.branch(Expr::Const(1));
            let else_at = b.ops.len();
            b.aim(skip_then, else_at);
            self.statement(b, vars)?;
            let end = b.ops.len();
            b.aim(skip_else, end);
        } else {
            let end = b.ops.len();
            b.aim(skip_then, end);
        }
        Ok(())
    }

    /// `int r0, *r1 = e;`: registers of any type; every value is a 32-bit word.
    fn declaration(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let m = Mode::Code;
        self.type_name(m)?;
        loop {
            while self.eat(m, "*")? {}
            let (name, npos) = self.ident(m, "a register name")?;
            if self.eat(m, "=")? {
                let value = self.expr(b, vars)?;
                if let Some(t) = b.fresh_load(&value) {
                    // Name the load's own register rather than copy it.
                    b.check_new(&name, npos)?;
                    b.regs[t].name = Some(name);
                } else {
                    let dst = b.declare(&name, npos)?;
                    b.ops.push(Op::Local { dst, value });
                }
            } else {
                b.declare(&name, npos)?;
            }
            if !self.eat(m, ",")? {
                break;
            }
        }
        self.expect(m, ";")?;
        Ok(())
    }

    /// The register `name = ...` assigns: declared, or declared now, as herd7 accepts
    /// registers used without a declaration.
    fn assigned_register(&self, b: &mut ThreadBuilder, name: &str, pos: Pos) -> Result<usize> {
        if let Some(r) = b.register(name) {
            return Ok(r);
        }
        if b.param(name).is_some() {
            return err(
                pos,
                ErrorKind::Unsupported(format!(
                    "assigning to the pointer `{name}` (did you mean `*{name} = ...`?)"
                )),
            );
        }
        b.declare(name, pos)
    }

    /// A name read before anything was assigned to it: herd7 reads such a register as 0, so
    /// it is declared here with that value. A shared variable's name is the exception: it
    /// reads as a typo (a missing parameter), not as a register, so it stays an error.
    fn unassigned_register(
        &self,
        b: &mut ThreadBuilder,
        vars: &Vars,
        name: &str,
        pos: Pos,
    ) -> Result<usize> {
        if vars.find(name).is_some_and(|v| !vars.hidden[v]) || vars.array(name).is_some() {
            return err(
                pos,
                ErrorKind::Undefined(format!(
                    "`{name}` is a shared variable but not a parameter of P{}",
                    b.index
                )),
            );
        }
        b.declare(name, pos)
    }

    fn not_a_register(&self, b: &ThreadBuilder, name: &str) -> ErrorKind {
        if b.param(name).is_some() {
            ErrorKind::Unsupported(format!(
                "arithmetic on the pointer `{name}` (only on registers)"
            ))
        } else {
            ErrorKind::Undefined(format!("`{name}` is not a register of P{}", b.index))
        }
    }

    /// `= e;` after a location: a plain store.
    fn plain_store(&mut self, b: &mut ThreadBuilder, vars: &mut Vars, addr: Addr) -> Result<()> {
        let m = Mode::Code;
        self.assign_op(m)?;
        let value = self.expr(b, vars)?;
        b.ops.push(Op::Store {
            addr,
            value,
            kind: StoreKind::Plain,
        });
        self.expect(m, ";")?;
        Ok(())
    }

    /// `=`, with a helpful word for compound assignment.
    fn assign_op(&mut self, m: Mode) -> Result<()> {
        let t = self.bump(m)?;
        match t.tok {
            Tok::Punct("=") => Ok(()),
            Tok::Punct(p @ ("+=" | "-=" | "*=" | "|=" | "&=" | "^=" | "++" | "--")) => err(
                t.pos,
                ErrorKind::Unsupported(format!(
                    "operator `{p}` on shared memory (it is not atomic in C; use an \
                     atomic_t operation)"
                )),
            ),
            _ => expected(&t, "`=`"),
        }
    }

    /// The location argument of a memory operation: `*x` or `x` for a parameter (C would
    /// want `*x` for the `_ONCE` forms and `x` for the others; both name the same location),
    /// `*r` or `r` for the variable a register points at; and computed addresses: `x[i]`,
    /// `&x[i]`, `*(x + i)`, `*(&x + i)`, `x + i`.
    fn addr_arg(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Addr> {
        let m = Mode::Code;
        let deref = self.eat(m, "*")?;
        if self.eat(m, "(")? {
            let a = self.place(b, vars, true)?;
            self.expect(m, ")")?;
            return Ok(a);
        }
        // `*x + 1` would be the value at x plus one, no location: offsets only without `*`.
        self.place(b, vars, !deref)
    }

    /// `[&] name [ '[' e ']' ] { (+|-) term }`: a parameter, a pointer register, or an element
    /// of the object a parameter points at. Offsets are taken only when `offsets`.
    fn place(&mut self, b: &mut ThreadBuilder, vars: &mut Vars, offsets: bool) -> Result<Addr> {
        let m = Mode::Code;
        let amp = self.peek(m)?;
        let address_of = self.eat(m, "&")?;
        let t = self.peek(m)?;
        let name = t.ident().map(str::to_string);
        let computed = {
            let mut look = self.cur.clone();
            look.lex(m)?;
            let next = look.lex(m)?;
            next.is("[") || (offsets && (next.is("+") || next.is("-")))
        };
        let Some(name) = name.filter(|_| computed || address_of) else {
            return self.addr_name(b);
        };
        let Some((first, len)) = b.object(&name) else {
            if b.register(&name).is_some() {
                let (at, what) = if address_of {
                    (
                        amp.pos,
                        "address-of `&` of a register (registers have no address)",
                    )
                } else {
                    (
                        t.pos,
                        "arithmetic on a pointer held in a register (the object it points \
                         into is known only at run time; index a parameter instead)",
                    )
                };
                return err(at, ErrorKind::Unsupported(what.into()));
            }
            return err(
                t.pos,
                ErrorKind::Undefined(format!("`{name}` is not a parameter of P{}", b.index)),
            );
        };
        self.bump(m)?;
        let mut index = Expr::Const(0);
        if self.eat(m, "[")? {
            index = self.expr(b, vars)?;
            self.expect(m, "]")?;
        }
        if offsets {
            loop {
                let op = if self.eat(m, "+")? {
                    BinOp::Add
                } else if self.eat(m, "-")? {
                    BinOp::Sub
                } else {
                    break;
                };
                let term = self.binary(b, vars, MULTIPLICATIVE)?;
                index = Expr::Bin(op, Box::new(index), Box::new(term));
            }
        }
        self.element(b, first, len, index, t.pos)
    }

    /// `[e]` after `name` (already taken): an element of the object a parameter points at.
    fn subscript(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        name: &str,
        pos: Pos,
    ) -> Result<Addr> {
        let m = Mode::Code;
        let Some((first, len)) = b.object(name) else {
            let why = if b.register(name).is_some() {
                "indexing a pointer held in a register (the object it points into is known \
                 only at run time; index a parameter instead)"
                    .to_string()
            } else {
                format!("`{name}` is not a parameter of P{}", b.index)
            };
            return err(pos, ErrorKind::Unsupported(why));
        };
        self.expect(m, "[")?;
        let index = self.expr(b, vars)?;
        self.expect(m, "]")?;
        self.element(b, first, len, index, pos)
    }

    /// Element `index` of the object at `first` of `len` variables: checked now when the
    /// index is a constant, else when the access runs.
    fn element(
        &mut self,
        b: &mut ThreadBuilder,
        first: usize,
        len: usize,
        index: Expr,
        pos: Pos,
    ) -> Result<Addr> {
        if let Some(i) = constant(&index) {
            return match usize::try_from(i) {
                Ok(i) if i < len => Ok(Addr::Var(first + i)),
                _ => err(
                    pos,
                    ErrorKind::OutOfBounds(format!(
                        "element {i} of an object of {len} (a scalar is an array of one)"
                    )),
                ),
            };
        }
        let index = match index {
            Expr::Reg(r) => r,
            e => {
                let r = b.temp();
                b.ops.push(Op::Local { dst: r, value: e });
                r
            }
        };
        Ok(Addr::Elem {
            first,
            len,
            index,
            pos,
        })
    }

    /// A parameter (a shared variable) or a register holding a pointer.
    fn addr_name(&mut self, b: &ThreadBuilder) -> Result<Addr> {
        let m = Mode::Code;
        let t = self.bump(m)?;
        let Some(name) = t.ident() else {
            if t.is("&") {
                return err(
                    t.pos,
                    ErrorKind::Unsupported(
                        "address-of `&` (a parameter already is the pointer)".into(),
                    ),
                );
            }
            return expected(
                &t,
                "a shared variable (a parameter of the thread) or a register",
            );
        };
        if let Some(v) = b.param(name) {
            return Ok(Addr::Var(v));
        }
        if let Some(r) = b.register(name) {
            return Ok(Addr::Reg(r));
        }
        err(
            t.pos,
            ErrorKind::Undefined(format!(
                "`{name}` is neither a parameter nor a register of P{}",
                b.index
            )),
        )
    }

    // Calls: the kernel's memory operations.

    /// A call with no value, as a statement: stores, fences, locks, RCU.
    fn void_call(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        name: &str,
        pos: Pos,
    ) -> Result<()> {
        let m = Mode::Code;
        let n = normalise(name);
        self.expect(m, "(")?;
        match n.as_str() {
            "WRITE_ONCE" | "smp_store_release" | "rcu_assign_pointer" | "atomic_set"
            | "smp_store_mb" | "RCU_INIT_POINTER" => {
                let addr = self.addr_arg(b, vars)?;
                self.expect(m, ",")?;
                let value = self.expr(b, vars)?;
                let kind = match n.as_str() {
                    "WRITE_ONCE" => StoreKind::Once,
                    "smp_store_release" => StoreKind::Release,
                    "atomic_set" => StoreKind::Atomic,
                    "smp_store_mb" => StoreKind::Once,
                    _ => StoreKind::Rcu,
                };
                b.ops.push(Op::Store { addr, value, kind });
                if n == "smp_store_mb" {
                    b.ops.push(Op::Fence(Fence::Mb));
                }
            }
            "spin_lock" => {
                let addr = self.addr_arg(b, vars)?;
                // Test-and-set: a cmpxchg from 0 to 1, retried while it finds the lock taken.
                let at = b.ops.len();
                let t = b.rmw(
                    addr,
                    Rmw::Cmpxchg {
                        old: Expr::Const(0),
                        new: Expr::Const(1),
                    },
                );
                b.ops.push(Op::Branch {
                    cond: Expr::Reg(t),
                    target: at,
                    spin: true,
                });
            }
            "spin_unlock" => {
                let addr = self.addr_arg(b, vars)?;
                b.ops.push(Op::Store {
                    addr,
                    value: Expr::Const(0),
                    kind: StoreKind::Unlock,
                });
            }
            "rcu_read_lock" | "rcu_read_unlock" | "srcu_read_unlock" => {
                let domain = if n == "srcu_read_unlock" {
                    let d = self.srcu_domain(b, vars)?;
                    self.expect(m, ",")?;
                    // The index srcu_read_lock returned: one counter per thread needs none.
                    self.expr(b, vars)?;
                    Some(d)
                } else {
                    None
                };
                let delta = if n == "rcu_read_lock" { 1 } else { -1 };
                self.nest(b, vars, domain, delta);
            }
            "srcu_up_read" => {
                let d = self.srcu_domain(b, vars)?;
                self.expect(m, ",")?;
                // The index srcu_down_read returned: one count per domain needs none, but its
                // loads, if any, still happen.
                self.expr(b, vars)?;
                b.step_updown(d, vars, BinOp::Sub);
            }
            "synchronize_rcu" | "synchronize_srcu" => {
                let domain = if n == "synchronize_srcu" {
                    Some(self.srcu_domain(b, vars)?)
                } else {
                    None
                };
                b.syncs.push((b.ops.len(), domain));
                b.ops.push(Op::Fence(Fence::Other(name.to_string())));
            }
            // `smp_memb` is the spelling some of herd7's own C tests use for the full fence.
            "smp_mb" | "smp_memb" | "mb" => b.ops.push(Op::Fence(Fence::Mb)),
            "smp_wmb" | "wmb" => b.ops.push(Op::Fence(Fence::Wmb)),
            "smp_rmb" | "rmb" => b.ops.push(Op::Fence(Fence::Rmb)),
            "barrier" => b.ops.push(Op::Fence(Fence::Barrier)),
            _ if FENCES.contains(&n.as_str()) => {
                b.ops.push(Op::Fence(Fence::Other(name.to_string())))
            }
            _ => {
                if let Some((op, operand_first, _)) = atomic_op(&n) {
                    // `atomic_add(i, v)`, `atomic_inc(v)`: the value is dropped.
                    let (addr, operand) = self.rmw_args(b, vars, operand_first, &n)?;
                    b.rmw(
                        addr,
                        Rmw::Fetch {
                            op,
                            operand,
                            ret: RmwRet::New,
                        },
                    );
                } else if is_value_call(name) {
                    // A value call whose value is dropped: `(void)` is optional.
                    self.value_call(b, vars, name, pos, true)?;
                } else {
                    return err(pos, unsupported_call(name));
                }
            }
        }
        self.expect(m, ")")?;
        Ok(())
    }

    /// The `srcu_struct` argument, whose variable names the SRCU domain.
    fn srcu_domain(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<usize> {
        let t = self.peek(Mode::Code)?;
        match self.addr_arg(b, vars)? {
            Addr::Var(v) => Ok(v),
            Addr::Reg(_) | Addr::Elem { .. } => err(
                t.pos,
                ErrorKind::Unsupported("an srcu_struct held in a register or an array".into()),
            ),
        }
    }

    /// Enters (+1) or leaves (-1) a read-side critical section: the thread's depth goes to
    /// a shared word, which a grace period waits to see at 0.
    fn nest(&mut self, b: &mut ThreadBuilder, vars: &mut Vars, domain: Domain, delta: i32) {
        let (r, w) = b.rcu_counter(domain, vars);
        b.ops.push(Op::Local {
            dst: r,
            value: Expr::Bin(
                BinOp::Add,
                Box::new(Expr::Reg(r)),
                Box::new(Expr::Const(delta)),
            ),
        });
        b.ops.push(Op::Store {
            addr: Addr::Var(w),
            value: Expr::Reg(r),
            kind: StoreKind::Internal,
        });
    }

    /// `(i, v)` or `(v)` or `(v, i)`: the location and the operand of an atomic operation.
    fn rmw_args(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        operand_first: Option<bool>,
        name: &str,
    ) -> Result<(Addr, Expr)> {
        let m = Mode::Code;
        match operand_first {
            None => Ok((self.addr_arg(b, vars)?, Expr::Const(1))),
            Some(true) => {
                let mut i = self.expr(b, vars)?;
                if name.ends_with("andnot") {
                    i = Expr::BitNot(Box::new(i));
                }
                self.expect(m, ",")?;
                Ok((self.addr_arg(b, vars)?, i))
            }
            Some(false) => {
                let a = self.addr_arg(b, vars)?;
                self.expect(m, ",")?;
                Ok((a, self.expr(b, vars)?))
            }
        }
    }

    /// A call with a value; `name` and `(` are taken, the closing `)` is taken here unless
    /// `leave_paren`.
    fn value_call(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        name: &str,
        pos: Pos,
        leave_paren: bool,
    ) -> Result<Expr> {
        let m = Mode::Code;
        let n = normalise(name);
        let e = match n.as_str() {
            "READ_ONCE"
            | "smp_load_acquire"
            | "rcu_dereference"
            | "rcu_dereference_raw"
            | "rcu_access_pointer"
            | "atomic_read"
            | "srcu_dereference"
            | "lockless_dereference" => {
                let addr = self.addr_arg(b, vars)?;
                if n == "srcu_dereference" {
                    self.expect(m, ",")?;
                    self.srcu_domain(b, vars)?;
                }
                let kind = match n.as_str() {
                    "READ_ONCE" => LoadKind::Once,
                    "smp_load_acquire" => LoadKind::Acquire,
                    "atomic_read" => LoadKind::Atomic,
                    _ => LoadKind::Rcu,
                };
                b.load(addr, kind)
            }
            "xchg" | "atomic_xchg" => {
                let addr = self.addr_arg(b, vars)?;
                self.expect(m, ",")?;
                let v = self.expr(b, vars)?;
                Expr::Reg(b.rmw(addr, Rmw::Xchg(v)))
            }
            "cmpxchg" | "atomic_cmpxchg" => {
                let addr = self.addr_arg(b, vars)?;
                self.expect(m, ",")?;
                let old = self.expr(b, vars)?;
                self.expect(m, ",")?;
                let new = self.expr(b, vars)?;
                Expr::Reg(b.rmw(addr, Rmw::Cmpxchg { old, new }))
            }
            "atomic_add_unless" | "atomic_inc_not_zero" => {
                let addr = self.addr_arg(b, vars)?;
                let (add, unless) = if n == "atomic_add_unless" {
                    self.expect(m, ",")?;
                    let a = self.expr(b, vars)?;
                    self.expect(m, ",")?;
                    (a, self.expr(b, vars)?)
                } else {
                    (Expr::Const(1), Expr::Const(0))
                };
                Expr::Reg(b.rmw(addr, Rmw::AddUnless { add, unless }))
            }
            "spin_trylock" => {
                let addr = self.addr_arg(b, vars)?;
                let t = b.rmw(
                    addr,
                    Rmw::Cmpxchg {
                        old: Expr::Const(0),
                        new: Expr::Const(1),
                    },
                );
                Expr::Bin(BinOp::Eq, Box::new(Expr::Reg(t)), Box::new(Expr::Const(0)))
            }
            "spin_is_locked" => {
                let addr = self.addr_arg(b, vars)?;
                let v = b.load(addr, LoadKind::Once);
                Expr::Bin(BinOp::Ne, Box::new(v), Box::new(Expr::Const(0)))
            }
            "srcu_read_lock" => {
                let d = self.srcu_domain(b, vars)?;
                self.nest(b, vars, Some(d), 1);
                Expr::Const(0)
            }
            "srcu_down_read" => {
                // The index is 0, as herd7's srcu_down_read (a load of the initial 0) gives.
                let d = self.srcu_domain(b, vars)?;
                b.step_updown(d, vars, BinOp::Add);
                Expr::Const(0)
            }
            _ => match atomic_op(&n) {
                Some((op, operand_first, Some(ret))) => {
                    let (addr, operand) = self.rmw_args(b, vars, operand_first, &n)?;
                    let t = b.rmw(addr, Rmw::Fetch { op, operand, ret });
                    let r = Expr::Reg(t);
                    if n.ends_with("_and_test") {
                        Expr::Bin(BinOp::Eq, Box::new(r), Box::new(Expr::Const(0)))
                    } else if n == "atomic_add_negative" {
                        Expr::Bin(BinOp::Lt, Box::new(r), Box::new(Expr::Const(0)))
                    } else {
                        r
                    }
                }
                Some((_, _, None)) => {
                    return err(
                        pos,
                        ErrorKind::Unsupported(format!("`{name}` has no value to use")),
                    )
                }
                None if is_void_call(&n) => {
                    return err(
                        pos,
                        ErrorKind::Unsupported(format!("`{name}` has no value to use")),
                    )
                }
                None => return err(pos, unsupported_call(name)),
            },
        };
        if !leave_paren {
            self.expect(m, ")")?;
        }
        Ok(e)
    }

    // Expressions, lowest precedence first, as in C. Loads are hoisted into hidden registers
    // in the order they appear, both sides of `&&` and `||` included: under sequential
    // consistency a load whose value is unused changes nothing but a hidden register.

    fn expr(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Expr> {
        let e = self.binary(b, vars, 0)?;
        let t = self.peek(Mode::Code)?;
        if t.is("?") {
            self.bump(Mode::Code)?;
            return self.conditional(b, vars, e);
        }
        if let Tok::Punct(p @ ("->" | ".")) = t.tok {
            return err(t.pos, ErrorKind::Unsupported(format!("operator `{p}`")));
        }
        Ok(e)
    }

    /// `c ? a : b`, `c` already parsed and `?` taken. Lowered to branches rather than
    /// hoisted like `&&`: only the chosen side's memory operations may happen, since the
    /// other side's may be a read-modify-write or a dereference of a pointer that is not one.
    /// The `:` side is parsed by `expr`, so `a ? b : c ? d : e` nests to the right, as in C.
    fn conditional(&mut self, b: &mut ThreadBuilder, vars: &mut Vars, cond: Expr) -> Result<Expr> {
        let dst = b.temp();
        let skip_then = b.branch(Expr::Not(Box::new(cond)));
        let then = self.expr(b, vars)?;
        b.ops.push(Op::Local { dst, value: then });
        let skip_else = b.branch(Expr::Const(1));
        let else_at = b.ops.len();
        b.aim(skip_then, else_at);
        self.expect(Mode::Code, ":")?;
        let other = self.expr(b, vars)?;
        b.ops.push(Op::Local { dst, value: other });
        let end = b.ops.len();
        b.aim(skip_else, end);
        Ok(Expr::Reg(dst))
    }

    fn binary(&mut self, b: &mut ThreadBuilder, vars: &mut Vars, level: usize) -> Result<Expr> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("||", BinOp::LOr)],
            &[("&&", BinOp::LAnd)],
            &[("|", BinOp::Or)],
            &[("^", BinOp::Xor)],
            &[("&", BinOp::And)],
            &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
            &[
                ("<=", BinOp::Le),
                (">=", BinOp::Ge),
                ("<", BinOp::Lt),
                (">", BinOp::Gt),
            ],
            &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)],
        ];
        if level == LEVELS.len() {
            return self.unary(b, vars);
        }
        let mut e = self.binary(b, vars, level + 1)?;
        loop {
            let t = self.peek(Mode::Code)?;
            let Some((_, op)) = LEVELS[level].iter().find(|(p, _)| t.is(p)) else {
                return Ok(e);
            };
            self.bump(Mode::Code)?;
            let r = self.binary(b, vars, level + 1)?;
            e = Expr::Bin(*op, Box::new(e), Box::new(r));
        }
    }

    fn unary(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Expr> {
        let m = Mode::Code;
        let t = self.bump(m)?;
        match &t.tok {
            Tok::Int(n) => {
                if (i32::MIN as i64..=u32::MAX as i64).contains(n) {
                    Ok(Expr::Const(*n as i32))
                } else {
                    err(t.pos, ErrorKind::BadInt(format!("`{n}`")))
                }
            }
            Tok::Punct("-") => Ok(Expr::Neg(Box::new(self.unary(b, vars)?))),
            Tok::Punct("+") => self.unary(b, vars),
            Tok::Punct("!") => Ok(Expr::Not(Box::new(self.unary(b, vars)?))),
            Tok::Punct("~") => Ok(Expr::BitNot(Box::new(self.unary(b, vars)?))),
            Tok::Punct("(") => {
                let inner = self.peek(m)?;
                if inner
                    .ident()
                    .is_some_and(|w| is_type_word(w) || w == "void")
                {
                    // A cast: every value is a 32-bit word, so it changes nothing.
                    if inner.ident() == Some("void") {
                        self.bump(m)?;
                    } else {
                        self.type_name(m)?;
                    }
                    while self.eat(m, "*")? {}
                    self.expect(m, ")")?;
                    return self.unary(b, vars);
                }
                let e = self.expr(b, vars)?;
                self.expect(m, ")")?;
                Ok(e)
            }
            Tok::Punct("*") => {
                let addr = if self.eat(m, "(")? {
                    let a = self.place(b, vars, true)?;
                    self.expect(m, ")")?;
                    a
                } else {
                    self.addr_name(b)?
                };
                Ok(b.load(addr, LoadKind::Plain))
            }
            Tok::Punct("&") => err(
                t.pos,
                ErrorKind::Unsupported(
                    "address-of `&` in a thread (a parameter already is the pointer)".into(),
                ),
            ),
            Tok::Ident(w) => {
                if self.peek(m)?.is("(") {
                    self.bump(m)?;
                    return self.value_call(b, vars, w, t.pos, false);
                }
                if self.peek(m)?.is("[") {
                    let addr = self.subscript(b, vars, w, t.pos)?;
                    return Ok(b.load(addr, LoadKind::Plain));
                }
                if let Some(r) = b.register(w) {
                    return Ok(Expr::Reg(r));
                }
                if let Some(v) = b.param(w) {
                    // A parameter's value is the address of its variable.
                    return Ok(Expr::Const(addr_of(v)));
                }
                Ok(Expr::Reg(self.unassigned_register(b, vars, w, t.pos)?))
            }
            _ => expected(&t, "an expression"),
        }
    }

    // The final condition.

    fn loc(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Loc> {
        let m = Mode::Top;
        let t = self.bump(m)?;
        match &t.tok {
            Tok::Int(n) => {
                self.expect(m, ":")?;
                let (reg, rpos) = self.ident(m, "a register name")?;
                let th = usize::try_from(*n).ok().and_then(|n| threads.get(n));
                let Some(th) = th else {
                    return err(
                        t.pos,
                        ErrorKind::Undefined(format!("there is no thread P{n}")),
                    );
                };
                match th.reg_index(&reg) {
                    Some(r) => Ok(Loc::Reg {
                        thread: *n as usize,
                        reg: r,
                    }),
                    None => err(
                        rpos,
                        ErrorKind::Undefined(format!("P{n} has no register `{reg}`")),
                    ),
                }
            }
            Tok::Ident(name) if vars.array(name).is_some() => {
                Ok(Loc::Var(self.array_cell(m, vars, name)?))
            }
            Tok::Ident(name) => var_loc(vars, name, t.pos),
            Tok::Punct("[") => {
                let (name, pos) = self.ident(m, "a variable name")?;
                self.expect(m, "]")?;
                var_loc(vars, &name, pos)
            }
            _ => expected(&t, "a location such as `x` or `0:r0`"),
        }
    }

    /// A value in a condition: an integer, or a variable's name for a pointer to it.
    fn cond_value(&mut self, vars: &Vars) -> Result<i32> {
        let m = Mode::Top;
        let t = self.peek(m)?;
        if let Some(name) = t.ident() {
            self.bump(m)?;
            return match vars.find(name) {
                Some(v) => Ok(addr_of(v)),
                None => err(
                    t.pos,
                    ErrorKind::Undefined(format!("unknown location `{name}`")),
                ),
            };
        }
        // Integers only from here: nothing is interned.
        self.value(m, &mut Vars::default(), false)
    }

    fn prop(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let a = self.disjunction(vars, threads)?;
        if self.eat(Mode::Top, "=>")? {
            let b = self.prop(vars, threads)?;
            return Ok(Prop::Implies(Box::new(a), Box::new(b)));
        }
        Ok(a)
    }

    fn disjunction(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let mut a = self.conjunction(vars, threads)?;
        while self.eat(Mode::Top, "\\/")? {
            let b = self.conjunction(vars, threads)?;
            a = Prop::Or(Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn conjunction(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let mut a = self.negation(vars, threads)?;
        while self.eat(Mode::Top, "/\\")? {
            let b = self.negation(vars, threads)?;
            a = Prop::And(Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    fn negation(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let m = Mode::Top;
        let t = self.peek(m)?;
        if t.is("~") || t.ident() == Some("not") {
            self.bump(m)?;
            return Ok(Prop::Not(Box::new(self.negation(vars, threads)?)));
        }
        if t.is("(") {
            self.bump(m)?;
            let p = self.prop(vars, threads)?;
            self.expect(m, ")")?;
            return Ok(p);
        }
        match t.ident() {
            Some("true") => {
                self.bump(m)?;
                return Ok(Prop::True);
            }
            Some("false") => {
                self.bump(m)?;
                return Ok(Prop::False);
            }
            _ => {}
        }
        let loc = self.loc(vars, threads)?;
        let op = self.bump(m)?;
        let negate = if op.is("=") || op.is("==") {
            false
        } else if op.is("!=") {
            true
        } else {
            return expected(&op, "`=` or `!=`");
        };
        let v = self.cond_value(vars)?;
        Ok(if negate {
            Prop::Ne(loc, v)
        } else {
            Prop::Eq(loc, v)
        })
    }
}

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
        "spin_lock_irqsave" | "spin_lock_irq" | "spin_lock_bh" => {
            " (interrupts have no meaning here)"
        }
        _ => "",
    };
    ErrorKind::Unsupported(format!("`{name}`{why} (supported: {SUPPORTED})"))
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
