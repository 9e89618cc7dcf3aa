//! Threads: statements, places and the kernel's calls, lowered to operations.

use super::*;

impl<'a> Parser<'a> {
    pub(super) fn thread(&mut self, index: usize, vars: &mut Vars) -> Result<ThreadBuilder> {
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
    pub(super) fn block(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
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

    pub(super) fn statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
        let at = self.peek(Mode::Code)?.pos;
        self.nested(at, |p| p.statement_at_depth(b, vars))
    }

    fn statement_at_depth(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
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
            Tok::Punct(p @ ("++" | "--")) => {
                // `++r;`, as `r++;`. On anything but a register C's `++` is a load and a
                // store that another thread may come between, which the atomics spell.
                let op = if *p == "++" { BinOp::Add } else { BinOp::Sub };
                self.bump(m)?;
                let n = self.peek(m)?;
                let name = n.ident().map(str::to_string);
                let dst = match name {
                    Some(w) if b.register(&w).is_some() => b.register(&w).unwrap_or_default(),
                    // A register read before any assignment, which herd7 reads as 0.
                    Some(w) if b.param(&w).is_none() => {
                        self.unassigned_register(b, vars, &w, n.pos)?
                    }
                    _ => {
                        return err(
                            t.pos,
                            ErrorKind::Unsupported(format!(
                                "operator `{p}` on anything but a register (on shared memory it \
                                 is not atomic in C; use an atomic_t operation)"
                            )),
                        )
                    }
                };
                self.bump(m)?;
                let value = Expr::Bin(op, Box::new(Expr::Reg(dst)), Box::new(Expr::Const(1)));
                b.ops.push(Op::Local { dst, value });
                self.expect(m, ";")?;
                Ok(())
            }
            Tok::Punct("*") => {
                // `*p = e;` stores; anything else starting with `*` is an expression.
                let mut look = self.cur.clone();
                look.lex(m)?;
                let name = look.lex(m)?;
                let op = look.lex(m)?;
                let assigns = matches!(
                    op.tok,
                    Tok::Punct(
                        "=" | "+="
                            | "-="
                            | "*="
                            | "/="
                            | "%="
                            | "<<="
                            | ">>="
                            | "|="
                            | "&="
                            | "^="
                            | "++"
                            | "--"
                    )
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
                        "/=" => Some((BinOp::Div, None)),
                        "%=" => Some((BinOp::Rem, None)),
                        "<<=" => Some((BinOp::Shl, None)),
                        ">>=" => Some((BinOp::Shr, None)),
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
    pub(super) fn expr_statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
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
        let after = self.peek(m)?;
        if let Tok::Punct(
            p @ ("++" | "--" | "=" | "+=" | "-=" | "*=" | "/=" | "%=" | "<<=" | ">>=" | "|=" | "&="
            | "^="),
        ) = after.tok
        {
            // `(*x)++;`, `(*x) = 1;`: an update of something that is not a register by name.
            return err(
                after.pos,
                ErrorKind::Unsupported(format!(
                    "operator `{p}` on anything but a register by name (a store is \
                     `WRITE_ONCE(*x, e)` or `*x = e`; an update of shared memory is not atomic \
                     in C: use an atomic_t operation)"
                )),
            );
        }
        self.expect(m, ";")?;
        Ok(())
    }

    pub(super) fn if_statement(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
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
    pub(super) fn declaration(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<()> {
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
    pub(super) fn assigned_register(
        &self,
        b: &mut ThreadBuilder,
        name: &str,
        pos: Pos,
    ) -> Result<usize> {
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
    pub(super) fn unassigned_register(
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

    pub(super) fn not_a_register(&self, b: &ThreadBuilder, name: &str) -> ErrorKind {
        if b.param(name).is_some() {
            ErrorKind::Unsupported(format!(
                "arithmetic on the pointer `{name}` (only on registers)"
            ))
        } else {
            ErrorKind::Undefined(format!("`{name}` is not a register of P{}", b.index))
        }
    }

    /// `= e;` after a location: a plain store.
    pub(super) fn plain_store(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        addr: Addr,
    ) -> Result<()> {
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
    pub(super) fn assign_op(&mut self, m: Mode) -> Result<()> {
        let t = self.bump(m)?;
        match t.tok {
            Tok::Punct("=") => Ok(()),
            Tok::Punct(
                p @ ("+=" | "-=" | "*=" | "/=" | "%=" | "<<=" | ">>=" | "|=" | "&=" | "^=" | "++"
                | "--"),
            ) => err(
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
    pub(super) fn addr_arg(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Addr> {
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
    pub(super) fn place(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        offsets: bool,
    ) -> Result<Addr> {
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
    pub(super) fn subscript(
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
    pub(super) fn element(
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
                        "element {i} of an object of {len}{}",
                        if len == 1 {
                            " (a scalar is an array of one)"
                        } else {
                            ""
                        }
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
    pub(super) fn addr_name(&mut self, b: &ThreadBuilder) -> Result<Addr> {
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
            return Ok(Addr::Reg { reg: r, pos: t.pos });
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
    pub(super) fn void_call(
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
    pub(super) fn srcu_domain(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<usize> {
        let t = self.peek(Mode::Code)?;
        match self.addr_arg(b, vars)? {
            Addr::Var(v) => Ok(v),
            Addr::Reg { .. } | Addr::Elem { .. } => err(
                t.pos,
                ErrorKind::Unsupported("an srcu_struct held in a register or an array".into()),
            ),
        }
    }

    /// Enters (+1) or leaves (-1) a read-side critical section: the thread's depth goes to
    /// a shared word, which a grace period waits to see at 0.
    pub(super) fn nest(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        domain: Domain,
        delta: i32,
    ) {
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
    pub(super) fn rmw_args(
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
    pub(super) fn value_call(
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
}
