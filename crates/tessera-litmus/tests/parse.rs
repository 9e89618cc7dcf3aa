//! The parser against herd7's C litmus format: what real catalogues contain parses, and every
//! kind of bad input is an error at the right line and column, never a panic.

use tessera_litmus::ast::{
    Addr, BinOp, Expr, Fence, LoadKind, Loc, Op, Prop, Quantifier, StoreKind,
};
use tessera_litmus::{parse, parse_bytes, ErrorKind, ParseError};

const SB: &str = "C SB
{ x=0; y=0; }
P0(int *x, int *y) { int r0; WRITE_ONCE(*x, 1); r0 = READ_ONCE(*y); }
P1(int *x, int *y) { int r0; WRITE_ONCE(*y, 1); r0 = READ_ONCE(*x); }
exists (0:r0=0 /\\ 1:r0=0)
";

#[test]
fn store_buffering_in_its_shortest_form() {
    let t = parse(SB).unwrap();
    assert_eq!(t.name, "SB");
    assert_eq!(t.vars, ["x", "y"]);
    assert_eq!(t.init, [0, 0]);
    assert_eq!(t.threads.len(), 2);
    let p0 = &t.threads[0];
    // The load goes straight into r0: no hidden register, no copy.
    assert_eq!(p0.regs.len(), 1);
    assert_eq!(
        p0.ops,
        [
            Op::Store {
                addr: Addr::Var(0),
                value: Expr::Const(1),
                kind: StoreKind::Once
            },
            Op::Load {
                addr: Addr::Var(1),
                dst: 0,
                kind: LoadKind::Once
            },
        ]
    );
    assert_eq!(t.condition.quantifier, Quantifier::Exists);
    assert_eq!(t.condition_text(), "exists (0:r0=0 /\\ 1:r0=0)");
}

/// Everything the Linux kernel's litmus tests use that this runner supports, in their layout.
const KERNEL_STYLE: &str = r#"C ISA2+pooncerelease+poacquirerelease+poacquireonce
"a doc string"

(*
 * Result: Never
 *
 * (* nested *) comments; WRITE_ONCE(x, 1) in a comment is not code.
 *)

{
	int x;
	int y = 0;
	z=0;
	[w]=7;
	2:r9=-3;
}

P0(int *x, int *y)
{
	WRITE_ONCE(*x, 1); // a C comment
	smp_store_release(y, 1); /* another */
}

P1(int *y, volatile int *z)
{
	int r0;

	r0 = smp_load_acquire(y);
	smp_mb();
	smp_store_release(z, r0 + 1);
}

P2(int *x, int *z, int *w)
{
	int r0 = smp_load_acquire(z);
	int r1, r9;

	smp_rmb();
	r1 = READ_ONCE(*x);
	smp_wmb();
	barrier();
	*w = r1 * 2 | 0x10;
	r9 = *w;
}

locations [1:r0; x; w] (* shown in every outcome *)
exists (1:r0=1 /\ 2:r0=2 /\ 2:r1=0 \/ ~(x=1) /\ [w]=16)
(* trailing comment *)
"#;

#[test]
fn kernel_style_file_with_every_supported_feature() {
    let t = parse(KERNEL_STYLE).unwrap();
    assert_eq!(t.name, "ISA2+pooncerelease+poacquirerelease+poacquireonce");
    assert_eq!(t.doc.as_deref(), Some("a doc string"));
    assert_eq!(t.vars, ["x", "y", "z", "w"]);
    assert_eq!(t.init, [0, 0, 0, 7]);
    let p1 = &t.threads[1];
    assert_eq!(
        p1.ops,
        [
            Op::Load {
                addr: Addr::Var(1),
                dst: 0,
                kind: LoadKind::Acquire
            },
            Op::Fence(Fence::Mb),
            Op::Store {
                addr: Addr::Var(2),
                value: Expr::Bin(BinOp::Add, Box::new(Expr::Reg(0)), Box::new(Expr::Const(1))),
                kind: StoreKind::Release
            },
        ]
    );
    let p2 = &t.threads[2];
    let names: Vec<_> = p2.regs.iter().map(|r| r.name.as_deref()).collect();
    assert_eq!(names, [Some("r0"), Some("r1"), Some("r9")]);
    assert_eq!(p2.regs[2].init, -3, "0:r9=-3 in the initial state");
    assert_eq!(
        p2.ops[1..],
        [
            Op::Fence(Fence::Rmb),
            Op::Load {
                addr: Addr::Var(0),
                dst: 1,
                kind: LoadKind::Once
            },
            Op::Fence(Fence::Wmb),
            Op::Fence(Fence::Barrier),
            Op::Store {
                addr: Addr::Var(3),
                value: Expr::Bin(
                    BinOp::Or,
                    Box::new(Expr::Bin(
                        BinOp::Mul,
                        Box::new(Expr::Reg(1)),
                        Box::new(Expr::Const(2))
                    )),
                    Box::new(Expr::Const(16))
                ),
                kind: StoreKind::Plain
            },
            Op::Load {
                addr: Addr::Var(3),
                dst: 2,
                kind: LoadKind::Plain
            },
        ]
    );
    assert_eq!(
        t.locations,
        [Loc::Reg { thread: 1, reg: 0 }, Loc::Var(0), Loc::Var(3)]
    );
    // /\ binds tighter than \/.
    assert!(matches!(t.condition.prop, Prop::Or(..)));
    assert_eq!(
        t.condition_text(),
        "exists ((1:r0=1 /\\ 2:r0=2 /\\ 2:r1=0) \\/ (~x=1 /\\ w=16))"
    );
}

#[test]
fn locations_name_registers_and_variables() {
    let src = "C L
{}
P0(int *x) { int r0; r0 = READ_ONCE(*x); }
P1(int *x) { int r5; WRITE_ONCE(*x, 2); }
locations [1:r5; x;]
exists (0:r0=2)
";
    let t = parse(src).unwrap();
    assert_eq!(t.locations, [Loc::Reg { thread: 1, reg: 0 }, Loc::Var(0)]);
    assert_eq!(
        t.shown_locs(),
        [
            Loc::Reg { thread: 1, reg: 0 },
            Loc::Var(0),
            Loc::Reg { thread: 0, reg: 0 }
        ]
    );
}

#[test]
fn quantifiers_and_condition_forms() {
    let body = "C Q\n{}\nP0(int *x) { int r0; r0 = READ_ONCE(*x); }\n";
    let q = |cond: &str| {
        let t = parse(&format!("{body}{cond}\n")).unwrap();
        (t.condition.quantifier, t.condition_text())
    };
    assert_eq!(
        q("~exists (0:r0=1)"),
        (Quantifier::NotExists, "~exists (0:r0=1)".into())
    );
    assert_eq!(
        q("forall (0:r0=0 \\/ 0:r0=1)"),
        (Quantifier::Forall, "forall (0:r0=0 \\/ 0:r0=1)".into())
    );
    // herd7 accepts a condition without parentheses, `not`, `!=`, `=>`, true and false.
    assert_eq!(
        q("exists 0:r0=0 /\\ x!=1"),
        (Quantifier::Exists, "exists (0:r0=0 /\\ x!=1)".into())
    );
    assert_eq!(
        q("forall (not 0:r0=3 => true \\/ false)"),
        (
            Quantifier::Forall,
            "forall (~0:r0=3 => (true \\/ false))".into()
        )
    );
}

#[test]
fn diy_information_lines_are_skipped() {
    let src = "C SB\n\"Fre PodWR Fre PodWR\"\nCycle=Fre PodWR Fre PodWR\nRelax=\nSafe=Fre PodWR\n{}\nP0(int *x) { WRITE_ONCE(*x, 1); }\nexists (x=1)\n";
    let t = parse(src).unwrap();
    assert_eq!(t.doc.as_deref(), Some("Fre PodWR Fre PodWR"));
    assert_eq!(t.threads.len(), 1);
}

#[test]
fn loads_inside_expressions_are_hoisted_in_order() {
    let src = "C E\n{}\nP0(int *x, int *y) { int r0; r0 = READ_ONCE(*x) - READ_ONCE(*y); WRITE_ONCE(*y, READ_ONCE(*x)); }\nexists (0:r0=0)\n";
    let t = parse(src).unwrap();
    let p = &t.threads[0];
    // r0, then two hidden registers for the subtraction, then one for the store's value.
    assert_eq!(p.regs.len(), 4);
    assert_eq!(p.visible().collect::<Vec<_>>(), [0]);
    let kinds: Vec<_> = p
        .ops
        .iter()
        .map(|o| match o {
            Op::Load {
                addr: Addr::Var(v), ..
            } => format!("L{v}"),
            Op::Store {
                addr: Addr::Var(v), ..
            } => format!("S{v}"),
            Op::Local { .. } => "local".into(),
            Op::Fence(_) => "fence".into(),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["L0", "L1", "local", "L0", "S1"]);
}

/// Parses `src`, expecting an error of `kind`'s variant at (line, col).
#[track_caller]
fn fails(src: &str, line: u32, col: u32, want: &str) -> ParseError {
    let e = parse(src).expect_err("must not parse");
    assert_eq!(
        (e.line, e.col),
        (line, col),
        "wrong place for {e} (want {want})"
    );
    let text = e.to_string();
    assert!(
        text.contains(want),
        "error {text:?} should mention {want:?}"
    );
    assert!(
        text.starts_with(&format!("line {line}, column {col}: ")),
        "{text}"
    );
    e
}

#[test]
fn expected_token_errors() {
    let e = fails(
        "C T\n{}\nP0(int *x) {\n  WRITE_ONCE(*x, 1)\n}\nexists (x=1)\n",
        5,
        1,
        "expected `;`, found `}`",
    );
    assert!(matches!(e.kind, ErrorKind::Expected { .. }));
    fails(
        "C T\n{}\nP1(int *x) { }\nexists (x=1)\n",
        3,
        1,
        "expected `P0`, found `P1`",
    );
    fails(
        "C T\n{}\nP0(int *x) { }\nP2(int *x) { }\nexists (x=1)\n",
        4,
        1,
        "expected `P1`, found `P2`",
    );
    fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1); }\n",
        4,
        1,
        "expected a final condition (`exists`, `~exists` or `forall`), found end of file",
    );
    fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1); }\nexists (x=1) x\n",
        4,
        14,
        "expected end of file after the condition, found `x`",
    );
    fails("\n\n  SB\n", 3, 3, "unsupported: architecture `SB`");
    fails(
        "C T\nexists (x=1)\n",
        2,
        1,
        "expected the initial state `{ ... }` or a thread `P0(...) { ... }`, found `exists`",
    );
    fails(
        "C\n{}\n",
        1,
        2,
        "expected the test name after `C`, found end of line",
    );
    fails(
        "C T\n{ x=0 y=1; }\nP0(int *x) { }\nexists (x=0)\n",
        2,
        7,
        "expected `;` or `}`, found `y`",
    );
    fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1);\nexists (x=1)\n",
        4,
        1,
        "expected `}` closing P0, found `exists`",
    );
    fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1); \n",
        4,
        1,
        "expected `}` closing P0, found end of file",
    );
}

#[test]
fn unsupported_constructs_are_named_with_their_place() {
    let cases: &[(&str, u32, u32, &str)] = &[
        (
            "C T\n{}\nP0(int *x) { while (1) { } }\nexists (x=2)\n",
            3,
            14,
            "unsupported: loops",
        ),
        (
            "C T\n{}\nP0(int *x) { return; }\nexists (x=2)\n",
            3,
            14,
            "unsupported: `return`",
        ),
        (
            "C T\n{}\nP0(int *x) { call_rcu(x); }\nexists (x=2)\n",
            3,
            14,
            "unsupported: `call_rcu` (callbacks need function pointers)",
        ),
        (
            "C T\n{}\nP0(int *x) { spin_lock_irqsave(x, 0); }\nexists (x=2)\n",
            3,
            14,
            "unsupported: `spin_lock_irqsave` (interrupts",
        ),
        (
            "C T\n{}\nP0(int *x) { raw_spin_unlock_irqrestore(x, 0); }\nexists (x=2)\n",
            3,
            14,
            "unsupported: `raw_spin_unlock_irqrestore` (interrupts",
        ),
        (
            "C T\n{}\nP0(int *x) { local_irq_disable(); }\nexists (x=2)\n",
            3,
            14,
            "unsupported: `local_irq_disable` (interrupts",
        ),
        (
            "C T\n{}\nP0(int x) { }\nexists (x=2)\n",
            3,
            8,
            "unsupported: parameter `x` is not a pointer",
        ),
        (
            "X86 SB\n{}\nP0 | P1 ;\n",
            1,
            1,
            "unsupported: architecture `X86`",
        ),
        (
            "C T\n{}\nP0(int *x) { int r0; r0 = READ_ONCE(*x)->next; }\nexists (x=2)\n",
            3,
            40,
            "unsupported: operator `->`",
        ),
        (
            "C T\n{}\nP0(int *x) { *x += 1; }\nexists (x=2)\n",
            3,
            17,
            "unsupported: operator `+=` on shared memory",
        ),
        (
            "C T\n{}\nP0(int *x) { int r0; r0 = &x; }\nexists (x=2)\n",
            3,
            27,
            "unsupported: address-of `&`",
        ),
        (
            "C T\n{}\nP0(int *x) { int r0; r0 = atomic_try_cmpxchg(x, 0, 1); }\nexists (x=2)\n",
            3,
            27,
            "unsupported: `atomic_try_cmpxchg`",
        ),
        (
            "C T\n{}\nP0(int *x) { int r0; r0 = atomic_inc(x); }\nexists (x=2)\n",
            3,
            27,
            "unsupported: `atomic_inc` has no value",
        ),
        (
            "C T\n{}\nP0(int *x) { x++; }\nexists (x=2)\n",
            3,
            14,
            "unsupported: arithmetic on the pointer `x`",
        ),
    ];
    for (src, line, col, want) in cases {
        let e = fails(src, *line, *col, want);
        assert!(
            matches!(e.kind, ErrorKind::Unsupported(_)),
            "{e} should be Unsupported"
        );
    }
}

#[test]
fn lexical_errors() {
    let e = fails(
        "C T\n(* never closed\n{}\n",
        2,
        1,
        "unterminated comment `(*`",
    );
    assert_eq!(e.kind, ErrorKind::Unterminated("comment `(*`"));
    let e = fails(
        "C T\n{}\nP0(int *x) { /* open\n}\n",
        3,
        14,
        "unterminated comment `/*`",
    );
    assert!(matches!(e.kind, ErrorKind::Unterminated(_)));
    let e = fails("C T\n\"doc\n", 2, 1, "unterminated string");
    assert!(matches!(e.kind, ErrorKind::Unterminated(_)));
    let e = fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1) @ }\n",
        3,
        32,
        "unexpected character '@'",
    );
    assert_eq!(e.kind, ErrorKind::BadChar('@'));
    let e = fails(
        "C T\n{ x=4294967296; }\nP0(int *x) { }\nexists (x=0)\n",
        2,
        5,
        "`4294967296` does not fit in a 32-bit word",
    );
    assert!(matches!(e.kind, ErrorKind::BadInt(_)));
    let e = fails(
        "C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 99999999999999999999); }\n",
        3,
        29,
        "does not fit",
    );
    assert!(matches!(e.kind, ErrorKind::BadInt(_)));
}

#[test]
fn undefined_and_duplicate_names() {
    let cases: &[(&str, u32, u32, &str, bool)] = &[
        (
            "C T\n{}\nP0(int *x) { int r0; r0 = READ_ONCE(*x); }\nexists (0:r1=0)\n",
            4,
            11,
            "P0 has no register `r1`",
            false,
        ),
        (
            "C T\n{}\nP0(int *x) { }\nexists (3:r0=0)\n",
            4,
            9,
            "there is no thread P3",
            false,
        ),
        (
            "C T\n{}\nP0(int *x) { }\nexists (y=0)\n",
            4,
            9,
            "unknown location `y`",
            false,
        ),
        (
            "C T\n{ y=1; }\nP0(int *x) { WRITE_ONCE(*x, y); }\nexists (x=0)\n",
            3,
            29,
            "`y` is a shared variable but not a parameter of P0",
            false,
        ),
        (
            "C T\n{}\nP0(int *x) { WRITE_ONCE(*y, 1); }\nexists (x=0)\n",
            3,
            26,
            "`y` is neither a parameter nor a register of P0",
            false,
        ),
        (
            "C T\n{ 1:r0=1; }\nP0(int *x) { int r0; }\nexists (x=0)\n",
            2,
            3,
            "there is no thread P1",
            false,
        ),
        (
            "C T\n{}\nP0(int *x) { int r0; int r0; }\nexists (x=0)\n",
            3,
            26,
            "register `r0` is declared twice in P0",
            true,
        ),
        (
            "C T\n{}\nP0(int *x) { int x; }\nexists (x=0)\n",
            3,
            18,
            "`x` is already a parameter of P0",
            true,
        ),
        (
            "C T\n{ x=1; int x = 2; }\nP0(int *x) { }\nexists (x=0)\n",
            2,
            12,
            "`x` is initialised twice",
            true,
        ),
        (
            "C T\n{}\nP0(int *x, int *x) { }\nexists (x=0)\n",
            3,
            17,
            "parameter `x` appears twice",
            true,
        ),
    ];
    for (src, line, col, want, dup) in cases {
        let e = fails(src, *line, *col, want);
        if *dup {
            assert!(matches!(e.kind, ErrorKind::Duplicate(_)), "{e}");
        } else {
            assert!(matches!(e.kind, ErrorKind::Undefined(_)), "{e}");
        }
    }
}

#[test]
fn invalid_utf8_is_reported_at_the_bad_byte() {
    let mut bytes = b"C T\n{}\nP0(int *x) { ".to_vec();
    bytes.extend_from_slice(&[0xff, 0xfe]);
    bytes.extend_from_slice(b" }\n");
    let e = parse_bytes(&bytes).unwrap_err();
    assert_eq!((e.line, e.col, &e.kind), (3, 14, &ErrorKind::NotUtf8));
    assert_eq!(
        e.to_string(),
        "line 3, column 14: the file is not UTF-8 text"
    );
}

#[test]
fn columns_count_characters_not_bytes() {
    // `é` is two bytes but one column.
    let e = parse("(* é *) @").unwrap_err();
    assert_eq!((e.line, e.col), (1, 9));
}

/// A small deterministic mutation fuzzer: no input may panic the parser.
#[test]
fn mutated_inputs_never_panic() {
    let seeds = [SB, KERNEL_STYLE];
    let alphabet: &[u8] = b"(){}[];,*=&|^~!-+:/\\\"\n P0x1rEXISTS";
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut parsed = 0;
    for i in 0..4000 {
        let mut b = seeds[i % seeds.len()].as_bytes().to_vec();
        for _ in 0..1 + next() % 4 {
            let at = (next() % b.len() as u64) as usize;
            match next() % 4 {
                0 => {
                    b.remove(at);
                }
                1 => b.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                2 => b[at] = (next() % 256) as u8,
                _ => b.truncate(at),
            }
            if b.is_empty() {
                break;
            }
        }
        if parse_bytes(&b).is_ok() {
            parsed += 1;
        }
    }
    // Some mutations (inside comments, say) still parse; most must not.
    assert!(parsed > 0 && parsed < 4000, "{parsed}");
}

/// Nesting deeper than the parser goes is a positioned error, not a stack overflow: 5,000
/// parentheses overflowed the stack of the command-line tool's main thread, and a test
/// thread's is smaller. What a test nests in practice still parses.
#[test]
fn nesting_too_deep_is_an_error_not_a_stack_overflow() {
    let thread = |body: &str| format!("C D\n{{}}\nP0(int *x) {{ {body} }}\nexists (0:r0=1)\n");
    let parens = |n: usize| format!("int r0 = {}1{};", "(".repeat(n), ")".repeat(n));
    assert!(parse(&thread(&parens(100))).is_ok());
    for body in [
        parens(5000),
        format!("int r0 = {}1;", "!".repeat(5000)),
        format!("int r0; {}r0 = 1;{}", "{ ".repeat(5000), " }".repeat(5000)),
    ] {
        let e = parse(&thread(&body)).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::TooDeep(_)), "{e}");
        assert_eq!(e.line, 3);
    }
    let deep_cond = format!(
        "C D\n{{}}\nP0(int *x) {{ int r0 = 1; }}\nexists {}0:r0=1{}\n",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    let e = parse(&deep_cond).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooDeep(_)), "{e}");
    // Chains are as deep as they are long: 40,000 terms overflowed the stack evaluating them.
    let chain = |n: usize| format!("int r0 = {};", vec!["1"; n].join(" + "));
    assert!(parse(&thread(&chain(100))).is_ok());
    let e = parse(&thread(&chain(40_000))).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooDeep(_)), "{e}");
    assert_eq!(e.line, 3);
    // `?:` nests to the right through its `:` side and to the left through its `?` side; a
    // chain of 30,000 overflowed the stack parsing it.
    let right = |n: usize| format!("int r0 = 1{};", " ? 1 : 0".repeat(n));
    let left = |n: usize| format!("int r0 = 1{}{};", " ? 1".repeat(n), " : 0".repeat(n));
    for form in [right, left] {
        assert!(parse(&thread(&form(100))).is_ok());
        let e = parse(&thread(&form(50_000))).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::TooDeep(_)), "{e}");
        assert_eq!(e.line, 3);
    }
    for op in ["/\\", "\\/", "=>"] {
        let cond = |n: usize| {
            format!(
                "C D\n{{}}\nP0(int *x) {{ int r0 = 1; }}\nexists ({})\n",
                vec!["0:r0=1"; n].join(&format!(" {op} "))
            )
        };
        assert!(parse(&cond(100)).is_ok(), "{op}");
        let e = parse(&cond(40_000)).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::TooDeep(_)), "{op}: {e}");
        assert_eq!(e.line, 4, "{op}");
    }
}

#[test]
fn a_byte_order_mark_is_skipped() {
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(b"C T\n{}\nP0(int *x) { WRITE_ONCE(*x, 1); }\nexists (x=1)\n");
    let t = tessera_litmus::parse_bytes(&bytes).unwrap();
    assert_eq!(t.name, "T");
}
