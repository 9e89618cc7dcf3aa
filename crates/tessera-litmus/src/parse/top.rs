//! The test's frame: tokens, header, initial state and values.

use super::*;

impl<'a> Parser<'a> {
    pub(super) fn peek(&self, m: Mode) -> Result<Token> {
        self.cur.clone().lex(m)
    }
    pub(super) fn bump(&mut self, m: Mode) -> Result<Token> {
        self.cur.lex(m)
    }
    pub(super) fn eat(&mut self, m: Mode, p: &str) -> Result<bool> {
        if self.peek(m)?.is(p) {
            self.bump(m)?;
            return Ok(true);
        }
        Ok(false)
    }
    pub(super) fn expect(&mut self, m: Mode, p: &str) -> Result<Pos> {
        let t = self.bump(m)?;
        if t.is(p) {
            return Ok(t.pos);
        }
        expected(&t, &format!("`{p}`"))
    }
    pub(super) fn ident(&mut self, m: Mode, what: &str) -> Result<(String, Pos)> {
        let t = self.bump(m)?;
        match t.tok {
            Tok::Ident(s) => Ok((s, t.pos)),
            _ => expected(&t, what),
        }
    }

    pub(super) fn test(&mut self) -> Result<Test> {
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
    pub(super) fn info_lines(&mut self) -> Result<()> {
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

    pub(super) fn init_block(
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
    pub(super) fn array_declaration(
        &mut self,
        vars: &mut Vars,
        name: &str,
        pos: Pos,
    ) -> Result<()> {
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
    pub(super) fn array_cell(&mut self, m: Mode, vars: &Vars, name: &str) -> Result<usize> {
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
    pub(super) fn type_name(&mut self, m: Mode) -> Result<String> {
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
    pub(super) fn value(&mut self, m: Mode, vars: &mut Vars, intern: bool) -> Result<i32> {
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
}
