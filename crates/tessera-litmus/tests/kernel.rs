//! The kernel's litmus language: locks, read-modify-writes, control flow, pointers, RCU and
//! `filter`, through the parser, the oracle (against outcome sets worked out by hand) and
//! the runner under each schedule; and the Linux kernel's own tests.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::litmus_files;
use tessera_core::ProtocolVariant;
use tessera_litmus::ast::{addr_of, Addr, BinOp, Expr, Fence, Op, Rmw, RmwRet};
use tessera_litmus::{
    load, parse, run_test, sc_outcomes, Outcome, RunConfig, ScError, Schedule, Test,
};

fn kernel_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/litmus/kernel")
}

fn kernel(name: &str) -> Test {
    load(&kernel_dir().join(format!("{name}.litmus"))).unwrap()
}

/// The Linux kernel's tests (`common::lkmm_path`), or `None` where they are missing.
fn lkmm_dir() -> Option<PathBuf> {
    let dir = common::lkmm_path();
    dir.is_dir().then_some(dir)
}

fn config(runs: u64, schedule: Schedule) -> RunConfig {
    RunConfig {
        runs,
        schedule,
        seed: 3,
        ..Default::default()
    }
}

fn outcome(regs: &[&[i32]], mem: &[i32]) -> Outcome {
    Outcome {
        regs: regs.iter().map(|r| r.to_vec()).collect(),
        mem: mem.to_vec(),
    }
}

// ---------------------------------------------------------------------------------------
// Parser

#[test]
fn registers_need_no_declaration() {
    let t = parse("C T\n{}\nP0(int *x) { r1 = READ_ONCE(*x); r2 = r1 + 1; }\nexists (0:r2=1)\n")
        .unwrap();
    let p = &t.threads[0];
    assert_eq!(p.reg_index("r1"), Some(0));
    assert_eq!(p.reg_index("r2"), Some(1));
    assert!(matches!(
        p.ops[0],
        Op::Load {
            addr: Addr::Var(0),
            dst: 0,
            ..
        }
    ));
}

#[test]
fn if_else_lowers_to_branches() {
    let t = parse(
        "C T\n{}\nP0(int *x, int *y) { int r0; r0 = READ_ONCE(*x);\n if (r0 == 1) WRITE_ONCE(*y, 1); else { WRITE_ONCE(*y, 2); } }\nexists (y=1)\n",
    )
    .unwrap();
    let ops = &t.threads[0].ops;
    // load; branch over the then-part when the condition is false; then; jump over the
    // else-part; else.
    assert_eq!(ops.len(), 5);
    let cond = Expr::Not(Box::new(Expr::Bin(
        BinOp::Eq,
        Box::new(Expr::Reg(0)),
        Box::new(Expr::Const(1)),
    )));
    assert_eq!(
        ops[1],
        Op::Branch {
            cond,
            target: 4,
            spin: false
        }
    );
    assert_eq!(
        ops[3],
        Op::Branch {
            cond: Expr::Const(1),
            target: 5,
            spin: false
        }
    );
}

#[test]
fn read_modify_writes_are_single_operations() {
    let src = "C T\n{ atomic_t v = ATOMIC_INIT(3); }\nP0(atomic_t *v, int *x) {\n\
               r0 = atomic_fetch_add_release(2, v);\n\
               atomic_dec(v);\n\
               r1 = cmpxchg_relaxed(x, 0, 5);\n\
               r2 = xchg(x, 7);\n\
               r3 = atomic_long_add_return_acquire(1, v);\n\
               r4 = atomic_dec_and_test(v);\n\
               r5 = atomic_add_unless(v, 1, 0);\n}\nexists (v=0)\n";
    let t = parse(src).unwrap();
    assert_eq!(t.init, [3, 0]);
    let rmws: Vec<&Rmw> = t.threads[0]
        .ops
        .iter()
        .filter_map(|o| match o {
            Op::Rmw { rmw, .. } => Some(rmw),
            _ => None,
        })
        .collect();
    assert_eq!(
        rmws,
        [
            &Rmw::Fetch {
                op: BinOp::Add,
                operand: Expr::Const(2),
                ret: RmwRet::Old
            },
            &Rmw::Fetch {
                op: BinOp::Sub,
                operand: Expr::Const(1),
                ret: RmwRet::New
            },
            &Rmw::Cmpxchg {
                old: Expr::Const(0),
                new: Expr::Const(5)
            },
            &Rmw::Xchg(Expr::Const(7)),
            &Rmw::Fetch {
                op: BinOp::Add,
                operand: Expr::Const(1),
                ret: RmwRet::New
            },
            &Rmw::Fetch {
                op: BinOp::Sub,
                operand: Expr::Const(1),
                ret: RmwRet::New
            },
            &Rmw::AddUnless {
                add: Expr::Const(1),
                unless: Expr::Const(0)
            },
        ]
    );
    // Only read-modify-writes touch memory here: each is one operation.
    assert!(t.threads[0]
        .ops
        .iter()
        .all(|o| !o.is_memory() || matches!(o, Op::Rmw { .. })));
}

#[test]
fn spin_lock_retries_a_cmpxchg() {
    let t = parse("C T\n{}\nP0(spinlock_t *l) { spin_lock(l); spin_unlock(l); }\nexists (l=0)\n")
        .unwrap();
    let ops = &t.threads[0].ops;
    assert!(matches!(
        &ops[0],
        Op::Rmw {
            addr: Addr::Var(0),
            rmw: Rmw::Cmpxchg { .. },
            ..
        }
    ));
    assert!(matches!(
        &ops[1],
        Op::Branch {
            target: 0,
            spin: true,
            ..
        }
    ));
    assert!(matches!(
        &ops[2],
        Op::Store {
            addr: Addr::Var(0),
            value: Expr::Const(0),
            ..
        }
    ));
}

#[test]
fn pointers_in_the_initial_state_registers_and_the_condition() {
    let t = parse(
        "C T\n{ int a = 1; int *p = &a; q = a; }\nP0(int **p, int *a) { int *r0; int r1; r0 = READ_ONCE(*p); r1 = READ_ONCE(*r0); WRITE_ONCE(*p, a); }\nexists (0:r0=a /\\ p=a)\n",
    )
    .unwrap();
    assert_eq!(t.vars, ["a", "p", "q"]);
    assert_eq!(t.init, [1, addr_of(0), addr_of(0)]);
    let ops = &t.threads[0].ops;
    assert!(matches!(
        ops[1],
        Op::Load {
            addr: Addr::Reg { reg: 0, .. },
            ..
        }
    ));
    assert!(matches!(
        &ops[2],
        Op::Store { addr: Addr::Var(1), value: Expr::Const(v), .. } if *v == addr_of(0)
    ));
    assert_eq!(t.condition_text(), "exists (0:r0=a /\\ p=a)");
}

#[test]
fn grace_periods_wait_on_every_other_reader() {
    let t = parse(
        "C T\n{}\nP0(int *x) { rcu_read_lock(); WRITE_ONCE(*x, 1); rcu_read_unlock(); }\n\
         P1(int *x) { r0 = READ_ONCE(*x); synchronize_rcu(); }\n\
         P2(int *x) { rcu_read_lock(); r0 = READ_ONCE(*x); rcu_read_unlock(); }\nexists (x=1)\n",
    )
    .unwrap();
    assert_eq!(t.hidden, [false, true, true]);
    let ops = &t.threads[1].ops;
    // load x; the fence marking the grace period; then, per reader, a load of its nesting
    // word retried while it is not zero.
    assert!(matches!(ops[1], Op::Fence(Fence::Other(_))));
    assert!(matches!(
        ops[2],
        Op::Load {
            addr: Addr::Var(1),
            ..
        }
    ));
    assert!(matches!(
        ops[3],
        Op::Branch {
            target: 2,
            spin: true,
            ..
        }
    ));
    assert!(matches!(
        ops[4],
        Op::Load {
            addr: Addr::Var(2),
            ..
        }
    ));
    assert!(matches!(
        ops[5],
        Op::Branch {
            target: 4,
            spin: true,
            ..
        }
    ));
    assert_eq!(ops.len(), 6);
    // Hidden words are no part of a printed outcome.
    assert_eq!(t.all_locs().len(), 1 + 1 + 1);
}

#[test]
fn every_fence_and_annotation_is_accepted() {
    for f in [
        "smp_mb",
        "smp_rmb",
        "smp_wmb",
        "barrier",
        "smp_mb__before_atomic",
        "smp_mb__after_atomic",
        "smp_mb__after_spinlock",
        "smp_mb__after_unlock_lock",
        "smp_mb__after_srcu_read_unlock",
        "smp_read_barrier_depends",
        "smp_acquire__after_ctrl_dep",
    ] {
        let src = format!("C T\n{{}}\nP0(int *x) {{ {f}(); WRITE_ONCE(*x, 1); }}\nexists (x=1)\n");
        let t = parse(&src).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(matches!(t.threads[0].ops[0], Op::Fence(_)), "{f}");
    }
}

#[test]
fn filter_is_kept_apart_from_the_condition() {
    let t = parse(
        "C T\n{}\nP0(int *x) { r0 = READ_ONCE(*x); }\nP1(int *x) { WRITE_ONCE(*x, 1); }\nfilter (0:r0=1)\nexists (x=1)\n",
    )
    .unwrap();
    assert!(t.filter.is_some());
}

#[test]
fn truncated_and_mangled_kernel_tests_never_panic() {
    let src = std::fs::read_to_string(kernel_dir().join("trylock-MP.litmus")).unwrap();
    let chars: Vec<char> = src.chars().collect();
    for cut in 0..chars.len() {
        let s: String = chars[..cut].iter().collect();
        let _ = parse(&s);
        let mut m = chars.clone();
        m[cut] = ['(', '*', '}', '&', '0', 'x', ';'][cut % 7];
        let _ = parse(&m.iter().collect::<String>());
    }
}

// ---------------------------------------------------------------------------------------
// Oracle, against outcome sets worked out by hand

#[test]
fn locked_increments_are_never_lost() {
    // Vars: l, c. Whoever takes the lock first reads 0, the other 1; c ends at 2.
    let want = BTreeSet::from([
        outcome(&[&[0], &[1]], &[0, 2]),
        outcome(&[&[1], &[0]], &[0, 2]),
    ]);
    assert_eq!(sc_outcomes(&kernel("lock-counter")).unwrap(), want);
}

#[test]
fn a_failed_cmpxchg_writes_nothing() {
    let t = parse(
        "C T\n{}\nP0(int *x) { r0 = cmpxchg(x, 1, 2); }\nP1(int *x) { WRITE_ONCE(*x, 1); }\nexists (x=2)\n",
    )
    .unwrap();
    // Before the store the cmpxchg fails (x stays 1 after the store); after it, it succeeds.
    let want = BTreeSet::from([outcome(&[&[0], &[]], &[1]), outcome(&[&[1], &[]], &[2])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn add_unless_is_atomic_with_respect_to_set() {
    // v=1; add_unless(v, 1, 0) then set(v, 0) gives 0; set first leaves 0 for add_unless to
    // skip. Either way v=0, never 2.
    let t = parse(
        "C T\n{ atomic_t v = ATOMIC_INIT(1); }\nP0(atomic_t *v) { r0 = atomic_add_unless(v, 1, 0); }\nP1(atomic_t *v) { atomic_set(v, 0); }\nexists (v=2)\n",
    )
    .unwrap();
    let want = BTreeSet::from([outcome(&[&[1], &[]], &[0]), outcome(&[&[0], &[]], &[0])]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn a_reader_sees_the_pointer_and_its_target_or_neither() {
    // Vars: a, b, p. Hand-worked: r0=a (then r1=1), or r0=b after b=2 (then r1=2).
    let a = addr_of(0);
    let b = addr_of(1);
    let want = BTreeSet::from([
        outcome(&[&[], &[a, 1]], &[1, 2, b, 0]),
        outcome(&[&[], &[b, 2]], &[1, 2, b, 0]),
    ]);
    assert_eq!(sc_outcomes(&kernel("ptr-chase")).unwrap(), want);
}

#[test]
fn a_grace_period_waits_for_the_reader_it_overlaps() {
    // RCU+sync+read: if P1 saw x=1 before its grace period, P0's critical section had begun,
    // so it ends (y=1) before P1 reads y. (r0, r1) is (0,0), (0,1) or (1,1), never (1,0).
    let t = parse(
        "C T\n{}\nP0(int *x, int *y) { rcu_read_lock(); WRITE_ONCE(*x, 1); WRITE_ONCE(*y, 1); rcu_read_unlock(); }\n\
         P1(int *x, int *y) { r0 = READ_ONCE(*x); synchronize_rcu(); r1 = READ_ONCE(*y); }\nexists (1:r0=1 /\\ 1:r1=0)\n",
    )
    .unwrap();
    let want = BTreeSet::from([
        outcome(&[&[], &[0, 0]], &[1, 1, 0]),
        outcome(&[&[], &[0, 1]], &[1, 1, 0]),
        outcome(&[&[], &[1, 1]], &[1, 1, 0]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn a_lock_never_released_ends_in_no_outcome() {
    let t = parse(
        "C T\n{}\nP0(spinlock_t *l) { spin_lock(l); }\nP1(spinlock_t *l) { spin_lock(l); }\nexists (l=1)\n",
    )
    .unwrap();
    assert!(sc_outcomes(&t).unwrap().is_empty());
}

#[test]
fn a_dereferenced_number_is_an_error() {
    let t =
        parse("C T\n{}\nP0(int *x) { r0 = READ_ONCE(*x); r1 = READ_ONCE(*r0); }\nexists (x=0)\n")
            .unwrap();
    assert_eq!(
        sc_outcomes(&t),
        // `r0` of `*r0` is on line 3 at column 50, counted by hand.
        Err(ScError::BadPointer {
            thread: 0,
            line: 3,
            col: 50,
            value: 0
        })
    );
}

// ---------------------------------------------------------------------------------------
// Runner

#[test]
fn the_kernel_fixtures_pass_under_every_schedule() {
    let mut files = Vec::new();
    litmus_files(&kernel_dir(), &mut files);
    assert_eq!(files.len(), 13);
    for schedule in [Schedule::Random, Schedule::Pct, Schedule::Exhaustive] {
        for f in &files {
            let r = run_test(&load(f).unwrap(), &config(40, schedule)).unwrap();
            assert!(r.passed(), "{schedule:?}\n{}", r.render());
            assert_eq!(r.positive(), 0, "{}", r.render());
        }
    }
}

#[test]
fn exhaustive_runs_every_interleaving_once() {
    // IRIW and IRRWIW: 6 operations in threads of 1, 2, 1, 2: 6!/(2!2!) = 180 orders.
    // 3.2W: three threads of 2: 6!/(2!2!2!) = 90.
    for (name, runs, outcomes) in [("IRRWIW", 180, 21), ("3.2W", 90, 7)] {
        let r = run_test(&kernel(name), &config(1000, Schedule::Exhaustive)).unwrap();
        assert_eq!(r.runs(), runs, "{name}");
        assert_eq!(r.exhausted, Some(true));
        assert_eq!(r.coverage(), (outcomes, outcomes), "{}", r.render());
    }
}

#[test]
fn a_failed_spin_waits_for_a_write_not_a_load() {
    // P0's lock attempt fails until P1's unlock, and a retry after one of P1's loads would
    // fail the same way. So P0's first attempt comes before P1's first load, its second, its
    // unlock, or after it (4 places), and every failed attempt waits for the unlock: 4
    // interleavings. Waking it on loads too made the search longer.
    let t = parse(
        "C wait\n{ l=1; }\nP0(spinlock_t *l) { spin_lock(l); }\n\
         P1(spinlock_t *l, int *x) { int r0; int r1; r0 = READ_ONCE(*x); r1 = READ_ONCE(*x); spin_unlock(l); }\n\
         exists (1:r0=0)\n",
    )
    .unwrap();
    let r = run_test(&t, &config(1000, Schedule::Exhaustive)).unwrap();
    assert_eq!(r.exhausted, Some(true), "{}", r.render());
    assert_eq!(r.runs(), 4, "{}", r.render());
    assert!(r.passed(), "{}", r.render());
}

#[test]
fn pct_reaches_every_allowed_outcome_of_iriw_irrwiw_and_3_2w() {
    let iriw = load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/litmus/IRIW.litmus"))
        .unwrap();
    for t in [iriw, kernel("IRRWIW"), kernel("3.2W")] {
        let r = run_test(&t, &config(1000, Schedule::Pct)).unwrap();
        let (seen, allowed) = r.coverage();
        assert_eq!(seen, allowed, "{}", r.render());
        assert!(r.passed());
    }
}

#[test]
fn a_test_that_deadlocks_is_called_off_not_hung() {
    let t = parse(
        "C T\n{}\nP0(spinlock_t *l) { spin_lock(l); }\nP1(spinlock_t *l) { spin_lock(l); }\nexists (l=1)\n",
    )
    .unwrap();
    for schedule in [Schedule::Pct, Schedule::Exhaustive] {
        let r = run_test(&t, &config(5, schedule)).unwrap();
        assert_eq!(r.runs(), 0);
        assert!(r.failed_runs > 0);
        // SC allows no outcome of it, and all of none is not coverage.
        assert_eq!(r.coverage(), (0, 0));
        assert!(!r.covered(), "{}", r.render());
    }
}

#[test]
fn skipping_invalidation_loses_read_modify_writes_alone() {
    let mut c = config(300, Schedule::Pct);
    c.variant = ProtocolVariant::SkipInvalidation;
    let r = run_test(&kernel("atomic-counter"), &c).unwrap();
    assert!(!r.forbidden().is_empty(), "{}", r.render());
}

#[test]
fn skipping_invalidation_is_caught_with_locks_and_rmws() {
    for name in ["lock-counter", "xchg-MP"] {
        let mut c = config(300, Schedule::Pct);
        c.variant = ProtocolVariant::SkipInvalidation;
        let r = run_test(&kernel(name), &c).unwrap();
        assert!(!r.forbidden().is_empty(), "{}", r.render());
    }
}

#[test]
fn the_linux_kernel_tests_run_with_no_forbidden_outcome() {
    let Some(dir) = lkmm_dir() else {
        // The suite is not ours to ship; where CI knows it is there it says so, and then
        // its absence is a failure, not a skip.
        assert!(
            std::env::var_os("TESSERA_REQUIRE_LKMM").is_none(),
            "TESSERA_REQUIRE_LKMM is set but the lkmm directory was not found (set TESSERA_LKMM)"
        );
        eprintln!("skipped: ../shared/litmus/lkmm is not there (set TESSERA_LKMM)");
        return;
    };
    let mut files = Vec::new();
    litmus_files(&dir, &mut files);
    let mut ran = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let Ok(t) = load(f) else { continue };
        let r = run_test(&t, &config(20, Schedule::Pct)).unwrap();
        ran += 1;
        assert!(r.passed(), "{}", r.render());
        if text.contains("Result: Never") {
            assert_eq!(r.positive(), 0, "{}", r.render());
        }
    }
    assert!(ran >= 43, "{ran} of {} ran", files.len());
}
