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
//! Thread bodies are straight-line C: `int` registers (optionally initialised), `READ_ONCE`,
//! `WRITE_ONCE`, `smp_load_acquire`, `smp_store_release`, plain `*x` loads and stores,
//! `smp_mb`/`smp_wmb`/`smp_rmb`/`barrier`, and integer arithmetic. Everything else (control
//! flow, atomics, locks, RCU, pointer values) is an `Unsupported` error at its line and column:
//! the runner must never guess what a test means.
//!
//! Lexing is on demand and depends on where the parser is: at top level `(*` opens an OCaml
//! comment, but inside a thread `READ_ONCE(*x)` must lex as `(` `*` `x`.

use tessera_core::MAX_DEVICES;

use crate::ast::{
    BinOp, Condition, Expr, Fence, LoadKind, Loc, Op, Pos, Prop, Quantifier, Reg, StoreKind, Test,
    Thread,
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
}

impl Vars {
    fn intern(&mut self, name: &str) -> usize {
        if let Some(i) = self.find(name) {
            return i;
        }
        self.names.push(name.to_string());
        self.init.push(0);
        self.initialised.push(false);
        self.names.len() - 1
    }
    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
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

/// A thread being parsed.
struct ThreadBuilder {
    index: usize,
    /// Parameter name → shared variable.
    params: Vec<(String, usize)>,
    regs: Vec<Reg>,
    ops: Vec<Op>,
}

impl ThreadBuilder {
    fn param(&self, name: &str) -> Option<usize> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
    fn temp(&mut self) -> usize {
        self.regs.push(Reg {
            name: None,
            init: 0,
        });
        self.regs.len() - 1
    }
    fn load(&mut self, var: usize, kind: LoadKind) -> Expr {
        let dst = self.temp();
        self.ops.push(Op::Load { var, dst, kind });
        Expr::Reg(dst)
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
}

const SUPPORTED: &str = "READ_ONCE, WRITE_ONCE, smp_load_acquire, smp_store_release, \
                         smp_mb, smp_wmb, smp_rmb and barrier";

const CONTROL: &[&str] = &[
    "if", "else", "while", "for", "do", "switch", "case", "return", "goto", "break", "continue",
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

        let mut threads: Vec<Thread> = Vec::new();
        loop {
            let t = self.peek(Mode::Top)?;
            let Some(n) = t.ident().and_then(thread_number) else {
                break;
            };
            if n != threads.len() {
                return expected(&t, &format!("`P{}`", threads.len()));
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
            threads.push(self.thread(n, &mut vars)?);
        }
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
            let Some(r) = th.reg_index(&reg) else {
                return err(
                    pos,
                    ErrorKind::Undefined(format!("P{n} has no register `{reg}`")),
                );
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
            (_, Some("filter")) => {
                return err(t.pos, ErrorKind::Unsupported("the `filter` clause".into()))
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
            init: vars.init,
            threads,
            locations,
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
                    let v = self.value(m)?;
                    regs.push((n, reg, v, t.pos));
                }
                Tok::Punct("[") => {
                    self.bump(m)?;
                    let (name, pos) = self.ident(m, "a variable name")?;
                    self.expect(m, "]")?;
                    self.expect(m, "=")?;
                    let v = self.value(m)?;
                    vars.set_init(&name, v, pos)?;
                }
                Tok::Ident(w) if is_type_word(w) => {
                    self.int_type(m)?;
                    let s = self.peek(m)?;
                    if s.is("*") {
                        return err(
                            s.pos,
                            ErrorKind::Unsupported(
                                "pointer variables in the initial state (only `int`)".into(),
                            ),
                        );
                    }
                    let (name, pos) = self.ident(m, "a variable name")?;
                    let v = if self.eat(m, "=")? { self.value(m)? } else { 0 };
                    vars.set_init(&name, v, pos)?;
                }
                Tok::Ident(w) => {
                    let w = w.clone();
                    self.bump(m)?;
                    let s = self.peek(m)?;
                    if s.is("=") {
                        self.bump(m)?;
                        let v = self.value(m)?;
                        vars.set_init(&w, v, t.pos)?;
                    } else if s.ident().is_some() || s.is("*") {
                        return err(
                            t.pos,
                            ErrorKind::Unsupported(format!("variables of type `{w}` (only `int`)")),
                        );
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

    /// Qualifiers and `int`; any other type is unsupported.
    fn int_type(&mut self, m: Mode) -> Result<()> {
        loop {
            let (w, pos) = self.ident(m, "a type")?;
            match w.as_str() {
                "volatile" | "const" => continue,
                "int" => return Ok(()),
                _ => {
                    return err(
                        pos,
                        ErrorKind::Unsupported(format!("type `{w}` (only `int`)")),
                    )
                }
            }
        }
    }

    /// An integer constant: shared variables and registers are 32-bit words, so anything
    /// from `-2^31` to `2^32 - 1` is accepted and kept as its 32-bit pattern.
    fn value(&mut self, m: Mode) -> Result<i32> {
        let t = self.bump(m)?;
        let (neg, t) = if t.is("-") {
            (true, self.bump(m)?)
        } else {
            (false, t)
        };
        match t.tok {
            Tok::Int(n) => {
                let v = if neg { -n } else { n };
                if (i32::MIN as i64..=u32::MAX as i64).contains(&v) {
                    Ok(v as i32)
                } else {
                    err(t.pos, ErrorKind::BadInt(format!("`{v}`")))
                }
            }
            Tok::Ident(s) => err(
                t.pos,
                ErrorKind::Unsupported(format!("pointer value `{s}` (only integers)")),
            ),
            Tok::Punct("&") => err(
                t.pos,
                ErrorKind::Unsupported("pointer values `&` (only integers)".into()),
            ),
            _ => expected(&t, "an integer"),
        }
    }

    fn thread(&mut self, index: usize, vars: &mut Vars) -> Result<Thread> {
        let m = Mode::Code;
        let mut b = ThreadBuilder {
            index,
            params: Vec::new(),
            regs: Vec::new(),
            ops: Vec::new(),
        };
        self.expect(m, "(")?;
        if !self.eat(m, ")")? {
            loop {
                self.int_type(m)?;
                let mut stars = 0;
                let mut star_pos = None;
                while self.peek(m)?.is("*") {
                    star_pos.get_or_insert(self.bump(m)?.pos);
                    stars += 1;
                }
                let (name, pos) = self.ident(m, "a parameter name")?;
                match stars {
                    1 => {}
                    0 => {
                        return err(
                            pos,
                            ErrorKind::Unsupported(format!(
                                "parameter `{name}` is not a pointer (only `int *` parameters)"
                            )),
                        )
                    }
                    _ => {
                        return err(
                            star_pos.unwrap_or(pos),
                            ErrorKind::Unsupported(format!(
                                "pointer-to-pointer parameter `{name}` (only `int *`)"
                            )),
                        )
                    }
                }
                if b.param(&name).is_some() {
                    return err(
                        pos,
                        ErrorKind::Duplicate(format!("parameter `{name}` appears twice")),
                    );
                }
                let v = vars.intern(&name);
                b.params.push((name, v));
                if self.eat(m, ")")? {
                    break;
                }
                self.expect(m, ",")?;
            }
        }
        self.expect(m, "{")?;
        self.block(&mut b)?;
        Ok(Thread {
            regs: b.regs,
            ops: b.ops,
        })
    }

    /// Statements up to and including the closing `}`.
    fn block(&mut self, b: &mut ThreadBuilder) -> Result<()> {
        let m = Mode::Code;
        loop {
            let t = self.peek(m)?;
            match &t.tok {
                Tok::Punct("}") => {
                    self.bump(m)?;
                    return Ok(());
                }
                Tok::Punct(";") => {
                    self.bump(m)?;
                }
                Tok::Punct("{") => {
                    self.bump(m)?;
                    self.block(b)?;
                }
                Tok::Punct("*") => {
                    // A plain store `*x = e;`.
                    self.bump(m)?;
                    let var = self.shared(b, m)?;
                    self.assign_op(m)?;
                    let value = self.expr(b)?;
                    b.ops.push(Op::Store {
                        var,
                        value,
                        kind: StoreKind::Plain,
                    });
                    self.expect(m, ";")?;
                }
                // What follows a thread: its closing brace is missing.
                Tok::Ident(w)
                    if matches!(w.as_str(), "exists" | "forall" | "locations" | "filter")
                        || thread_number(w).is_some() =>
                {
                    return expected(&t, &format!("`}}` closing P{}", b.index));
                }
                Tok::Ident(w) => self.ident_statement(b, w.clone(), t.pos)?,
                Tok::Eof => return expected(&t, &format!("`}}` closing P{}", b.index)),
                _ => return expected(&t, "a statement"),
            }
        }
    }

    fn ident_statement(&mut self, b: &mut ThreadBuilder, w: String, pos: Pos) -> Result<()> {
        let m = Mode::Code;
        if CONTROL.contains(&w.as_str()) {
            return err(
                pos,
                ErrorKind::Unsupported(format!("`{w}` (only straight-line code)")),
            );
        }
        match w.as_str() {
            "int" | "volatile" | "const" => {
                self.int_type(m)?;
                loop {
                    let s = self.peek(m)?;
                    if s.is("*") {
                        return err(
                            s.pos,
                            ErrorKind::Unsupported("pointer registers (only `int`)".into()),
                        );
                    }
                    let (name, npos) = self.ident(m, "a register name")?;
                    if self.eat(m, "=")? {
                        let value = self.expr(b)?;
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
            }
            "WRITE_ONCE" | "smp_store_release" => {
                self.bump(m)?;
                self.expect(m, "(")?;
                let var = self.pointer_arg(b)?;
                self.expect(m, ",")?;
                let value = self.expr(b)?;
                self.expect(m, ")")?;
                self.expect(m, ";")?;
                let kind = if w == "WRITE_ONCE" {
                    StoreKind::Once
                } else {
                    StoreKind::Release
                };
                b.ops.push(Op::Store { var, value, kind });
            }
            "smp_mb" | "smp_wmb" | "smp_rmb" | "barrier" => {
                self.bump(m)?;
                self.expect(m, "(")?;
                self.expect(m, ")")?;
                self.expect(m, ";")?;
                b.ops.push(Op::Fence(match w.as_str() {
                    "smp_mb" => Fence::Mb,
                    "smp_wmb" => Fence::Wmb,
                    "smp_rmb" => Fence::Rmb,
                    _ => Fence::Barrier,
                }));
            }
            "READ_ONCE" | "smp_load_acquire" => {
                // A load whose value is dropped still happens.
                self.expr(b)?;
                self.expect(m, ";")?;
            }
            _ => {
                self.bump(m)?;
                let s = self.peek(m)?;
                if s.is("=") {
                    let Some(dst) = b.register(&w) else {
                        if b.param(&w).is_some() {
                            return err(
                                pos,
                                ErrorKind::Unsupported(format!(
                                    "assigning to the pointer `{w}` (did you mean `*{w} = ...`?)"
                                )),
                            );
                        }
                        return err(
                            pos,
                            ErrorKind::Undefined(format!(
                                "`{w}` is not a register declared in P{}",
                                b.index
                            )),
                        );
                    };
                    self.bump(m)?;
                    let value = self.expr(b)?;
                    if let Some(t) = b.fresh_load(&value) {
                        b.regs.pop();
                        if let Some(Op::Load { dst: d, .. }) = b.ops.last_mut() {
                            debug_assert_eq!(*d, t);
                            *d = dst;
                        }
                    } else {
                        b.ops.push(Op::Local { dst, value });
                    }
                    self.expect(m, ";")?;
                } else if s.is("(") {
                    return err(pos, unsupported_call(&w));
                } else if s.ident().is_some() || s.is("*") {
                    return err(
                        pos,
                        ErrorKind::Unsupported(format!("registers of type `{w}` (only `int`)")),
                    );
                } else if let Tok::Punct(p) = s.tok {
                    if ["++", "--", "+=", "-=", "*=", "|=", "&=", "^="].contains(&p) {
                        return err(
                            s.pos,
                            ErrorKind::Unsupported(format!(
                                "operator `{p}` (write `{w} = {w} ...` instead)"
                            )),
                        );
                    }
                    return expected(&s, &format!("`=` after `{w}`"));
                } else {
                    return expected(&s, &format!("`=` after `{w}`"));
                }
            }
        }
        Ok(())
    }

    /// `=`, with a helpful word for compound assignment.
    fn assign_op(&mut self, m: Mode) -> Result<()> {
        let t = self.bump(m)?;
        match t.tok {
            Tok::Punct("=") => Ok(()),
            Tok::Punct(p @ ("+=" | "-=" | "*=" | "|=" | "&=" | "^=" | "++" | "--")) => err(
                t.pos,
                ErrorKind::Unsupported(format!("operator `{p}` on shared memory")),
            ),
            _ => expected(&t, "`=`"),
        }
    }

    /// The variable argument of a memory operation: `*x` or `x`. C would want `*x` for the
    /// `_ONCE` forms and `x` for acquire/release; both spellings mean the same location, so
    /// either is accepted.
    fn pointer_arg(&mut self, b: &ThreadBuilder) -> Result<usize> {
        let m = Mode::Code;
        self.eat(m, "*")?;
        self.shared(b, m)
    }

    /// A parameter name, which names a shared variable.
    fn shared(&mut self, b: &ThreadBuilder, m: Mode) -> Result<usize> {
        let t = self.bump(m)?;
        let Some(name) = t.ident() else {
            if t.is("&") {
                return err(
                    t.pos,
                    ErrorKind::Unsupported("address-of `&` (pass the pointer itself)".into()),
                );
            }
            return expected(&t, "a shared variable (a parameter of the thread)");
        };
        if let Some(v) = b.param(name) {
            return Ok(v);
        }
        if b.register(name).is_some() {
            return err(
                t.pos,
                ErrorKind::Unsupported(format!(
                    "access through the register `{name}` (pointer registers)"
                )),
            );
        }
        err(
            t.pos,
            ErrorKind::Undefined(format!("`{name}` is not a parameter of P{}", b.index)),
        )
    }

    // Expressions, lowest precedence first, as in C: | ^ & (+ -) * unary.

    fn expr(&mut self, b: &mut ThreadBuilder) -> Result<Expr> {
        let e = self.binary(b, 0)?;
        let t = self.peek(Mode::Code)?;
        if let Tok::Punct(
            p @ ("==" | "!=" | "<" | ">" | "<=" | ">=" | "&&" | "||" | "<<" | ">>" | "?" | "%"
            | "/" | "!" | "->" | "."),
        ) = t.tok
        {
            return err(t.pos, ErrorKind::Unsupported(format!("operator `{p}`")));
        }
        Ok(e)
    }

    fn binary(&mut self, b: &mut ThreadBuilder, level: usize) -> Result<Expr> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("|", BinOp::Or)],
            &[("^", BinOp::Xor)],
            &[("&", BinOp::And)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul)],
        ];
        if level == LEVELS.len() {
            return self.unary(b);
        }
        let mut e = self.binary(b, level + 1)?;
        loop {
            let t = self.peek(Mode::Code)?;
            let Some((_, op)) = LEVELS[level].iter().find(|(p, _)| t.is(p)) else {
                return Ok(e);
            };
            self.bump(Mode::Code)?;
            let r = self.binary(b, level + 1)?;
            e = Expr::Bin(*op, Box::new(e), Box::new(r));
        }
    }

    fn unary(&mut self, b: &mut ThreadBuilder) -> Result<Expr> {
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
            Tok::Punct("-") => Ok(Expr::Neg(Box::new(self.unary(b)?))),
            Tok::Punct("+") => self.unary(b),
            Tok::Punct("(") => {
                let e = self.expr(b)?;
                self.expect(m, ")")?;
                Ok(e)
            }
            Tok::Punct("*") => {
                let var = self.shared(b, m)?;
                Ok(b.load(var, LoadKind::Plain))
            }
            Tok::Punct("&") => err(
                t.pos,
                ErrorKind::Unsupported("address-of `&` (pointer values)".into()),
            ),
            Tok::Punct(p @ ("~" | "!")) => {
                err(t.pos, ErrorKind::Unsupported(format!("operator `{p}`")))
            }
            Tok::Ident(w) => match w.as_str() {
                "READ_ONCE" | "smp_load_acquire" => {
                    self.expect(m, "(")?;
                    let var = self.pointer_arg(b)?;
                    self.expect(m, ")")?;
                    let kind = if w == "READ_ONCE" {
                        LoadKind::Once
                    } else {
                        LoadKind::Acquire
                    };
                    Ok(b.load(var, kind))
                }
                _ => {
                    if let Some(r) = b.register(w) {
                        return Ok(Expr::Reg(r));
                    }
                    if self.peek(m)?.is("(") {
                        return err(t.pos, unsupported_call(w));
                    }
                    if b.param(w).is_some() {
                        return err(
                            t.pos,
                            ErrorKind::Unsupported(format!(
                                "the pointer `{w}` used as a value (did you mean `READ_ONCE(*{w})`?)"
                            )),
                        );
                    }
                    err(
                        t.pos,
                        ErrorKind::Undefined(format!(
                            "`{w}` is not a register declared in P{}",
                            b.index
                        )),
                    )
                }
            },
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
            Tok::Ident(name) => var_loc(vars, name, t.pos),
            Tok::Punct("[") => {
                let (name, pos) = self.ident(m, "a variable name")?;
                self.expect(m, "]")?;
                var_loc(vars, &name, pos)
            }
            _ => expected(&t, "a location such as `x` or `0:r0`"),
        }
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
        let v = self.value(m)?;
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

fn unsupported_call(name: &str) -> ErrorKind {
    ErrorKind::Unsupported(format!("`{name}` (supported: {SUPPORTED})"))
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

fn is_type_word(w: &str) -> bool {
    matches!(w, "int" | "volatile" | "const")
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
