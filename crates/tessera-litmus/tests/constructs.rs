//! The conditional operator, arrays and computed addresses, `smp_memb`, SRCU's down/up
//! readers and registers read before any assignment: the parser's lowering, the oracle
//! against outcome sets worked out by hand, the runner against the oracle, and positioned
//! errors for what stays out of range.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tessera_litmus::ast::{Addr, Fence, Op, Rmw};
use tessera_litmus::{
    load, parse, run_test, sc_outcomes, ErrorKind, Outcome, RunConfig, RunError, ScError, Schedule,
    Test,
};

fn kernel(name: &str) -> Test {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/litmus/kernel")
        .join(format!("{name}.litmus"));
    load(&p).unwrap()
}

fn outcome(regs: &[&[i32]], mem: &[i32]) -> Outcome {
    Outcome {
        regs: regs.iter().map(|r| r.to_vec()).collect(),
        mem: mem.to_vec(),
    }
}

/// The runner, every interleaving, must see exactly the oracle's outcomes and nothing else.
fn runner_agrees(t: &Test, want: &BTreeSet<Outcome>) {
    runner_agrees_under(t, want, Schedule::Exhaustive);
}

fn runner_agrees_under(t: &Test, want: &BTreeSet<Outcome>, schedule: Schedule) {
    let config = RunConfig {
        runs: 2000,
        schedule,
        seed: 5,
        ..Default::default()
    };
    let r = run_test(t, &config).unwrap();
    assert!(r.passed(), "{}", r.render());
    assert_eq!(&r.sc, want);
    let seen: BTreeSet<Outcome> = r.observed.keys().cloned().collect();
    assert_eq!(&seen, want, "{}", r.render());
}

fn parse_err(src: &str) -> (u32, u32, ErrorKind) {
    let e = parse(src).unwrap_err();
    (e.line, e.col, e.kind)
}

// ---------------------------------------------------------------------------------------
// The conditional operator

#[test]
fn ternary_binds_below_or_above_plus_and_nests_to_the_right() {
    // r0: (0 || 1) ? 2 : 3 = 2; were `?:` above `||`, 0 || (1 ? 2 : 3) = 1.
    // r1: 1 ? 2 : (0 ? 3 : 4) = 2; grouped to the left, (1 ? 2 : 0) ? 3 : 4 = 3.
    // r2: 1 ? 4 : (5 + 1) = 4; were `+` below `?:`, (1 ? 4 : 5) + 1 = 5.
    let t = parse(
        "C T\n{}\nP0(int *x) { r0 = 0 || 1 ? 2 : 3; r1 = 1 ? 2 : 0 ? 3 : 4;\n\
         r2 = 1 ? 4 : 5 + 1; WRITE_ONCE(*x, r0 == 2 ? 7 : 8); }\nexists (x=7)\n",
    )
    .unwrap();
    let want = BTreeSet::from([outcome(&[&[2, 2, 4]], &[7])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn ternary_makes_only_the_chosen_sides_memory_operations() {
    // Vars f, x, y. P0 exchanges x if it saw the flag, else y: never both. Hand-worked:
    // r0=0 → y=6, x=0; r0=1 → x=5, y=0. Hoisting both sides would give x=5, y=6 always.
    let t = parse(
        "C T\n{}\nP0(int *f, int *x, int *y) { r0 = READ_ONCE(*f); r1 = r0 ? xchg(x, 5) : xchg(y, 6); }\n\
         P1(int *f) { WRITE_ONCE(*f, 1); }\nexists (x=5 /\\ y=6)\n",
    )
    .unwrap();
    let want = BTreeSet::from([
        outcome(&[&[0, 0], &[]], &[1, 0, 6]),
        outcome(&[&[1, 0], &[]], &[1, 5, 0]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    runner_agrees(&t, &want);
}

#[test]
fn ternary_guards_a_dereference() {
    // p starts as the number 0; dereferencing it would be an error, so only the side that
    // is taken may load. Vars p, a (a=3): r1 is -1 before P1's store, 3 after.
    let t = parse(
        "C T\n{ a=3; }\nP0(int **p) { r0 = READ_ONCE(*p); r1 = r0 ? READ_ONCE(*r0) : -1; }\n\
         P1(int **p, int *a) { WRITE_ONCE(*p, a); }\nexists (0:r1=3)\n",
    )
    .unwrap();
    let a = tessera_litmus::ast::addr_of(0);
    let want = BTreeSet::from([
        outcome(&[&[0, -1], &[]], &[3, a]),
        outcome(&[&[a, 3], &[]], &[3, a]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn logical_operators_skip_their_right_side_as_c_does() {
    // Vars f, x, v. P0's `&&` exchanges x only when it saw the flag, and its `||` never
    // increments v. Hand-worked: r0 is 0 either way (xchg finds 0), r1 = 1; x = 1 only when
    // P0 read f after P1's store. Running both sides would give x=1 and v=1 always.
    let t = parse(
        "C T\n{}\nP0(int *f, int *x, atomic_t *v) { r0 = READ_ONCE(*f) && xchg(x, 1);\n\
         r1 = 1 || atomic_inc_return(v); }\nP1(int *f) { WRITE_ONCE(*f, 1); }\nexists (v=1)\n",
    )
    .unwrap();
    let want = BTreeSet::from([
        outcome(&[&[0, 1], &[]], &[1, 0, 0]),
        outcome(&[&[0, 1], &[]], &[1, 1, 0]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    runner_agrees(&t, &want);
}

#[test]
fn logical_and_guards_a_dereference() {
    // As `ternary_guards_a_dereference`: p starts as the number 0, which points at nothing,
    // so `r0 && READ_ONCE(*r0)` may load only once r0 is a pointer. Vars a (a=3), p.
    let t = parse(
        "C T\n{ a=3; }\nP0(int **p) { r0 = READ_ONCE(*p); r1 = r0 && READ_ONCE(*r0); }\n\
         P1(int **p, int *a) { WRITE_ONCE(*p, a); }\nexists (0:r1=1)\n",
    )
    .unwrap();
    let a = tessera_litmus::ast::addr_of(0);
    let want = BTreeSet::from([
        outcome(&[&[0, 0], &[]], &[3, a]),
        outcome(&[&[a, 1], &[]], &[3, a]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn logical_operators_on_registers_alone_take_no_branch() {
    // With nothing to skip, `&&` and `||` stay expressions: no branch for a schedule to
    // step through, and no hidden register.
    let t = parse(
        "C T\n{}\nP0(int *x) { r0 = 1; r1 = r0 && 0 || r0; WRITE_ONCE(*x, r1); }\nexists (x=1)\n",
    )
    .unwrap();
    let p = &t.threads[0];
    assert!(
        !p.ops.iter().any(|o| matches!(o, Op::Branch { .. })),
        "{:?}",
        p.ops
    );
    assert_eq!(p.regs.len(), 2, "{:?}", p.regs);
    assert_eq!(
        sc_outcomes(&t).unwrap(),
        BTreeSet::from([outcome(&[&[1, 1]], &[1])])
    );
}

#[test]
fn every_compound_assignment_and_prefix_step_on_registers() {
    // Hand-worked: 7/2 = 3, 7%4 = 3, 1<<3 = 8, -16>>2 = -4 (arithmetic), ++ on a register
    // never assigned (read as 0) = 1, --3 = 2, and i32::MIN / -1 wraps to i32::MIN.
    let t = parse(
        "C T\n{}\nP0(int *x) { r0 = 7; r0 /= 2; r1 = 7; r1 %= 4; r2 = 1; r2 <<= 3;\n\
         r3 = -16; r3 >>= 2; ++r4; r5 = 3; --r5; r6 = -2147483648; r6 /= -1;\n\
         WRITE_ONCE(*x, r0); }\nexists (x=3)\n",
    )
    .unwrap();
    let want = BTreeSet::from([outcome(&[&[3, 3, 8, -4, 1, 2, i32::MIN]], &[3])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn a_condition_names_a_pointer_to_an_array_cell_as_outcomes_print_it() {
    // r0 = a + 1 points at a[1] (cells are consecutive); the outcome prints `0:r0=a[1]`,
    // and the condition may say the same.
    let t = parse("C T\n{ int a[2]; }\nP0(int *a) { r0 = a + 1; }\nexists (0:r0=a[1])\n").unwrap();
    let want = BTreeSet::from([outcome(&[&[tessera_litmus::ast::addr_of(1)]], &[0, 0])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    let o = want.first().unwrap();
    assert!(t.holds(&t.condition.prop, o));
    assert!(
        t.condition_text().contains("a[1]"),
        "{}",
        t.condition_text()
    );
}

#[test]
fn a_postfix_step_on_a_parenthesised_location_is_refused_with_the_reason() {
    let (line, col, kind) = parse_err("C T\n{}\nP0(int *x) {\n  (*x)++;\n}\nexists (x=0)\n");
    assert_eq!((line, col), (4, 7));
    match kind {
        ErrorKind::Unsupported(what) => assert!(what.contains("not atomic"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_prefix_step_on_shared_memory_is_refused_with_the_reason() {
    let (line, col, kind) = parse_err("C T\n{}\nP0(int *x) {\n  ++(*x);\n}\nexists (x=0)\n");
    assert_eq!((line, col), (4, 3));
    match kind {
        ErrorKind::Unsupported(what) => assert!(what.contains("not atomic"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn ternary_without_its_colon_is_a_positioned_error() {
    let (line, col, kind) = parse_err("C T\n{}\nP0(int *x) {\n  r0 = 1 ? 2;\n}\nexists (x=0)\n");
    assert_eq!((line, col), (4, 13));
    assert!(matches!(kind, ErrorKind::Expected { .. }), "{kind:?}");
}

#[test]
fn the_ternary_fixture_never_shows_the_flag_without_the_data() {
    // Vars x, f. r0=0 → r1=2 (x not read); r0=1 → r1=1.
    let t = kernel("MP+ternary");
    let want = BTreeSet::from([
        outcome(&[&[], &[0, 2]], &[1, 1]),
        outcome(&[&[], &[1, 1]], &[1, 1]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    runner_agrees(&t, &want);
}

// ---------------------------------------------------------------------------------------
// smp_memb

#[test]
fn smp_memb_is_a_full_fence() {
    let t = kernel("SB+memb");
    for th in &t.threads {
        assert_eq!(th.ops[1], Op::Fence(Fence::Mb));
    }
    // Vars x, y: every outcome but both reads at 0.
    let want = BTreeSet::from([
        outcome(&[&[0], &[1]], &[1, 1]),
        outcome(&[&[1], &[0]], &[1, 1]),
        outcome(&[&[1], &[1]], &[1, 1]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    runner_agrees(&t, &want);
}

// ---------------------------------------------------------------------------------------
// Registers read before any assignment

#[test]
fn a_register_read_before_any_assignment_is_zero() {
    let t = parse(
        "C T\n{}\nP0(int *x) { r1 = r0 + 1; WRITE_ONCE(*x, r9 + 4); if (r5 == 0) r6 = 1; r7 += 2; }\n\
         exists (0:r0=0 /\\ 0:r6=1)\n",
    )
    .unwrap();
    let p = &t.threads[0];
    let names: Vec<&str> = p
        .visible()
        .map(|r| p.regs[r].name.as_deref().unwrap())
        .collect();
    assert_eq!(names, ["r1", "r0", "r9", "r5", "r6", "r7"]);
    let want = BTreeSet::from([outcome(&[&[1, 0, 0, 0, 1, 2]], &[4])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn a_shared_variable_that_is_no_parameter_is_not_taken_for_a_register() {
    let (line, col, kind) = parse_err("C T\n{ y=1; }\nP0(int *x) {\n  r0 = y;\n}\nexists (x=0)\n");
    assert_eq!((line, col), (4, 8));
    assert!(matches!(kind, ErrorKind::Undefined(_)), "{kind:?}");
}

// ---------------------------------------------------------------------------------------
// SRCU readers entered and left on different threads

#[test]
fn srcu_down_and_up_share_one_count_per_domain() {
    let t = kernel("SRCU-down-up");
    // Vars l, s, x, i, the hidden count, y.
    assert_eq!(t.hidden, [false, false, false, false, true, false]);
    let rmw_on_count = |th: usize| {
        t.threads[th].ops.iter().any(|o| {
            matches!(
                o,
                Op::Rmw {
                    addr: Addr::Var(4),
                    rmw: Rmw::Fetch { .. },
                    ..
                }
            )
        })
    };
    assert!(rmw_on_count(0) && rmw_on_count(1));
    // The grace period loads the count until it reads 0.
    assert!(t.threads[2].ops.iter().any(|o| matches!(
        o,
        Op::Load {
            addr: Addr::Var(4),
            ..
        }
    )));
}

#[test]
fn a_grace_period_waits_for_a_reader_handed_to_another_thread() {
    // If P2 saw x=1, P0 was inside before the grace period began; it leaves only on P1,
    // after y=1. So (r2, r3) is (0,0), (0,1) or (1,1), never (1,0). Were the reader counted
    // per thread, P0 would stay inside forever and no run would end.
    let t = kernel("SRCU-down-up");
    let mem = [0, 0, 1, 0, 0, 1];
    let want = BTreeSet::from([
        outcome(&[&[0], &[0], &[0, 0]], &mem),
        outcome(&[&[0], &[0], &[0, 1]], &mem),
        outcome(&[&[0], &[0], &[1, 1]], &mem),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    // Lock and grace-period retries make too many interleavings for the exhaustive search
    // to reach the other outcomes within its runs; PCT reaches all three.
    runner_agrees_under(&t, &want, Schedule::Pct);
}

#[test]
fn an_unmatched_down_read_holds_the_callers_own_grace_period() {
    let t = parse(
        "C T\n{}\nP0(struct srcu_struct *s) { r0 = srcu_down_read(s); synchronize_srcu(s); }\n\
         exists (0:r0=0)\n",
    )
    .unwrap();
    assert!(sc_outcomes(&t).unwrap().is_empty());
    let t = parse(
        "C T\n{}\nP0(struct srcu_struct *s) { r0 = srcu_down_read(s); srcu_up_read(s, r0); synchronize_srcu(s); }\n\
         exists (0:r0=0)\n",
    )
    .unwrap();
    assert_eq!(sc_outcomes(&t).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------
// Arrays and computed addresses

#[test]
fn arrays_are_consecutive_variables() {
    let t = parse(
        "C T\n{ int a[3] = {1, 2}; a[2]=9; int *p = &a[1]; }\nP0(int *a, int *x) {\n\
         r0 = a[2]; r1 = READ_ONCE(*(a + 1)); WRITE_ONCE(a[0], 4); *(&x + 0) = 5; r2 = *(x);\n\
         a[r0 - 8] = 6; }\nexists (a[0]=4 /\\ 0:r0=9)\n",
    )
    .unwrap();
    assert_eq!(t.vars, ["a[0]", "a[1]", "a[2]", "p", "x"]);
    let a1 = tessera_litmus::ast::addr_of(1);
    assert_eq!(t.init, [1, 2, 9, a1, 0]);
    // r0=9, r1=2, a[0]=4 then a[9-8]=6, x=5, r2=5.
    let want = BTreeSet::from([outcome(&[&[9, 2, 5]], &[4, 6, 9, a1, 5])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    assert_eq!(t.condition_text(), "exists (a[0]=4 /\\ 0:r0=9)");
}

#[test]
fn the_array_fixture_publishes_an_element_before_its_index() {
    // Vars a[0]=5, a[1], f. r0=0 reads a[0]=5; r0=1 reads a[1], already 1.
    let t = kernel("MP+array");
    let want = BTreeSet::from([
        outcome(&[&[], &[0, 5, 5]], &[5, 1, 1]),
        outcome(&[&[], &[1, 1, 1]], &[5, 1, 1]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
    runner_agrees(&t, &want);
}

#[test]
fn a_constant_index_out_of_range_is_refused_where_it_is_written() {
    for (src, at) in [
        // An element past the end.
        (
            "C T\n{ int a[2]; }\nP0(int *a) {\n  r0 = a[2];\n}\nexists (a[0]=0)\n",
            (4, 8),
        ),
        // A neighbouring scalar is not reachable from x: a scalar is an array of one.
        (
            "C T\n{}\nP0(int *x, int *y) {\n  WRITE_ONCE(*(&x + 1), 1);\n}\nexists (x=0)\n",
            (4, 17),
        ),
        (
            "C T\n{}\nP0(int *x) {\n  r0 = *(x - 1);\n}\nexists (x=0)\n",
            (4, 10),
        ),
        // In the initial state and the condition.
        (
            "C T\n{ int a[2] = {1, 2, 3}; }\nP0(int *a) {\n}\nexists (a[0]=0)\n",
            (2, 21),
        ),
        (
            "C T\n{ int a[2]; }\nP0(int *a) {\n}\nexists (a[2]=0)\n",
            (5, 11),
        ),
    ] {
        let (line, col, kind) = parse_err(src);
        assert_eq!((line, col), at, "{src}");
        assert!(matches!(kind, ErrorKind::OutOfBounds(_)), "{src}: {kind:?}");
    }
    // An array's length is its own; the note on scalars is for scalars only.
    let say = |src: &str| format!("{:?}", parse_err(src).2);
    let array = say("C T\n{ int a[2]; }\nP0(int *a) {\n  r0 = a[2];\n}\nexists (a[0]=0)\n");
    assert!(array.contains("element 2 of an object of 2\""), "{array}");
    let scalar = say("C T\n{}\nP0(int *x) {\n  r0 = *(&x + 1);\n}\nexists (x=0)\n");
    assert!(scalar.contains("(a scalar is an array of one)"), "{scalar}");
}

#[test]
fn a_computed_index_out_of_range_is_a_positioned_error_when_it_runs() {
    // r0 is 0 or 1 (P1's store); a has 1 element at index r0 * 2: 0 is fine, 2 is not.
    let t = parse(
        "C T\n{ int a[1]; }\nP0(int *a, int *f) {\n  r0 = READ_ONCE(*f);\n  r1 = a[r0 * 2];\n}\n\
         P1(int *f) { WRITE_ONCE(*f, 1); }\nexists (0:r1=0)\n",
    )
    .unwrap();
    let e = ScError::OutOfBounds {
        thread: 0,
        line: 5,
        col: 8,
        index: 2,
        len: 1,
    };
    assert_eq!(sc_outcomes(&t), Err(e.clone()));
    let r = run_test(&t, &RunConfig::default());
    assert!(
        matches!(&r, Err(RunError::Oracle(o)) if *o == e),
        "{:?}",
        r.err()
    );
    // A negative index, too.
    let t =
        parse("C T\n{}\nP0(int *x) {\n  r0 = -1;\n  r1 = READ_ONCE(*(x + r0));\n}\nexists (x=0)\n")
            .unwrap();
    assert!(matches!(
        sc_outcomes(&t),
        Err(ScError::OutOfBounds {
            index: -1,
            line: 5,
            ..
        })
    ));
}

#[test]
fn arithmetic_on_a_pointer_register_is_refused() {
    for src in [
        "C T\n{}\nP0(int *x) {\n  r0 = x;\n  r1 = READ_ONCE(*(r0 + 1));\n}\nexists (x=0)\n",
        "C T\n{}\nP0(int *x) {\n  r0 = x;\n  r1 = r0[1];\n}\nexists (x=0)\n",
    ] {
        let (line, _, kind) = parse_err(src);
        assert_eq!(line, 5, "{src}");
        assert!(matches!(kind, ErrorKind::Unsupported(_)), "{src}: {kind:?}");
    }
}

#[test]
fn the_new_fixtures_mangled_or_truncated_never_panic() {
    for name in ["MP+array", "MP+ternary", "SRCU-down-up", "SB+memb"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/litmus/kernel")
            .join(format!("{name}.litmus"));
        let src = std::fs::read_to_string(p).unwrap();
        let chars: Vec<char> = src.chars().collect();
        for cut in 0..chars.len() {
            let s: String = chars[..cut].iter().collect();
            if let Ok(t) = parse(&s) {
                let _ = sc_outcomes(&t);
            }
            let mut m = chars.clone();
            m[cut] = ['(', '*', '[', ']', '?', ':', '9', '&', '-'][cut % 9];
            if let Ok(t) = parse(&m.iter().collect::<String>()) {
                let _ = sc_outcomes(&t);
            }
        }
    }
}

#[test]
fn every_location_spelling_of_an_element_names_it() {
    // Vars a[0..3], f. Each access names a[2] (index 2 computed or constant) except the
    // first two, which name a[1].
    let t = parse(
        "C T\n{ int a[3]; }\nP0(int a[], int *f) {\n  r0 = 2;\n  atomic_inc(&a[1]);\n\
         r1 = smp_load_acquire(a + 1);\n  WRITE_ONCE(*(&a + r0), 7);\n  r2 = READ_ONCE(a[2]);\n\
         r3 = atomic_fetch_add(1, &a[r0]);\n  r4 = *(a + r0 - 1 + 1);\n}\n\
         filter (a[1]=1)\nexists (a[2]=8)\n",
    )
    .unwrap();
    // r1=1 (a[1] after the inc), r2=7, r3=7 (before the add), r4=8.
    let want = BTreeSet::from([outcome(&[&[2, 1, 7, 7, 8]], &[0, 1, 8, 0])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}
