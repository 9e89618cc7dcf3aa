//! Expressions, and the final condition's locations and propositions.

use super::*;

impl<'a> Parser<'a> {
    // Expressions, lowest precedence first, as in C. Loads are hoisted into hidden registers
    // in the order they appear. The right side of `&&` and `||` runs only when C would run
    // it (`logical`), since it may be a read-modify-write, take a lock or dereference a
    // register that the left side checked.

    pub(super) fn expr(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Expr> {
        let e = self.binary(b, vars, 0)?;
        let t = self.peek(Mode::Code)?;
        if t.is("?") {
            self.bump(Mode::Code)?;
            // Each `?:` nests its sides one level deeper, so a long chain is refused as deep
            // parentheses are, not a stack overflow.
            return self.nested(t.pos, |p| p.conditional(b, vars, e));
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
    pub(super) fn conditional(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        cond: Expr,
    ) -> Result<Expr> {
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

    pub(super) fn binary(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        level: usize,
    ) -> Result<Expr> {
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
        for links in 1.. {
            let t = self.peek(Mode::Code)?;
            let Some((_, op)) = LEVELS[level].iter().find(|(p, _)| t.is(p)) else {
                return Ok(e);
            };
            self.chained(t.pos, links)?;
            self.bump(Mode::Code)?;
            e = match op {
                BinOp::LAnd | BinOp::LOr => self.logical(b, vars, *op, e, level + 1)?,
                _ => {
                    let r = self.binary(b, vars, level + 1)?;
                    Expr::Bin(*op, Box::new(e), Box::new(r))
                }
            };
        }
        Ok(e)
    }

    /// `l && r` or `l || r`, `l` already parsed and the operator taken. When `r` holds
    /// memory operations they are skipped on a branch where `l` decides the value, as C
    /// skips them, like the sides of `?:`; when it holds none it stays one expression, with
    /// no branch for a schedule to step through.
    fn logical(
        &mut self,
        b: &mut ThreadBuilder,
        vars: &mut Vars,
        op: BinOp,
        l: Expr,
        level: usize,
    ) -> Result<Expr> {
        let truth = |e: Expr| Expr::Bin(BinOp::Ne, Box::new(e), Box::new(Expr::Const(0)));
        let dst = b.temp();
        let regs = b.regs.len();
        // The value when `l` decides it: 0 for `&&` (l is 0), 1 for `||` (l is not 0).
        b.ops.push(Op::Local {
            dst,
            value: truth(l.clone()),
        });
        let decided = match op {
            BinOp::LAnd => Expr::Not(Box::new(l.clone())),
            _ => l.clone(),
        };
        let skip = b.branch(decided);
        let ops = b.ops.len();
        let r = self.binary(b, vars, level)?;
        if b.ops.len() == ops {
            // Nothing to skip: the branch, its register and the first value go again.
            b.ops.truncate(ops - 2);
            if b.regs.len() == regs {
                b.regs.pop();
            }
            return Ok(Expr::Bin(op, Box::new(l), Box::new(r)));
        }
        b.ops.push(Op::Local {
            dst,
            value: truth(r),
        });
        let end = b.ops.len();
        b.aim(skip, end);
        Ok(Expr::Reg(dst))
    }

    pub(super) fn unary(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Expr> {
        let at = self.peek(Mode::Code)?.pos;
        self.nested(at, |p| p.unary_at_depth(b, vars))
    }

    fn unary_at_depth(&mut self, b: &mut ThreadBuilder, vars: &mut Vars) -> Result<Expr> {
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

    pub(super) fn loc(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Loc> {
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
    pub(super) fn cond_value(&mut self, vars: &Vars) -> Result<i32> {
        let m = Mode::Top;
        let t = self.peek(m)?;
        if let Some(name) = t.ident() {
            self.bump(m)?;
            // `a[1]`: a pointer to an array's cell, as outcomes print it.
            if vars.array(name).is_some() && self.peek(m)?.is("[") {
                return Ok(addr_of(self.array_cell(m, vars, name)?));
            }
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

    pub(super) fn prop(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let a = self.disjunction(vars, threads)?;
        let at = self.peek(Mode::Top)?.pos;
        if self.eat(Mode::Top, "=>")? {
            let b = self.nested(at, |p| p.prop(vars, threads))?;
            return Ok(Prop::Implies(Box::new(a), Box::new(b)));
        }
        Ok(a)
    }

    pub(super) fn disjunction(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let mut a = self.conjunction(vars, threads)?;
        for links in 1.. {
            let at = self.peek(Mode::Top)?.pos;
            if !self.eat(Mode::Top, "\\/")? {
                break;
            }
            self.chained(at, links)?;
            let b = self.conjunction(vars, threads)?;
            a = Prop::Or(Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    pub(super) fn conjunction(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let mut a = self.negation(vars, threads)?;
        for links in 1.. {
            let at = self.peek(Mode::Top)?.pos;
            if !self.eat(Mode::Top, "/\\")? {
                break;
            }
            self.chained(at, links)?;
            let b = self.negation(vars, threads)?;
            a = Prop::And(Box::new(a), Box::new(b));
        }
        Ok(a)
    }

    pub(super) fn negation(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
        let at = self.peek(Mode::Top)?.pos;
        self.nested(at, |p| p.negation_at_depth(vars, threads))
    }

    fn negation_at_depth(&mut self, vars: &Vars, threads: &[Thread]) -> Result<Prop> {
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
