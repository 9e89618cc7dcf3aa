//! The sequential-consistency enumerator on its own, against outcome sets computed by hand.

use std::collections::BTreeSet;
use std::path::Path;

use tessera_litmus::sc::{sc_outcomes_limited, sc_outcomes_within, ScError, TooLarge};
use tessera_litmus::{load, parse, sc_outcomes, Outcome, Test};

fn shipped(name: &str) -> Test {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/litmus")
        .join(format!("{name}.litmus"));
    load(&p).unwrap()
}

/// Builds an outcome set from (registers per thread, memory) rows.
fn set(rows: &[(&[&[i32]], &[i32])]) -> BTreeSet<Outcome> {
    rows.iter()
        .map(|(regs, mem)| Outcome {
            regs: regs.iter().map(|r| r.to_vec()).collect(),
            mem: mem.to_vec(),
        })
        .collect()
}

#[test]
fn store_buffering_has_three_outcomes() {
    // Interleavings of W x; R y  and  W y; R x: whichever read comes last sees the other
    // thread's write, so (0, 0) is impossible.
    let want = set(&[
        (&[&[0], &[1]], &[1, 1]),
        (&[&[1], &[0]], &[1, 1]),
        (&[&[1], &[1]], &[1, 1]),
    ]);
    assert_eq!(sc_outcomes(&shipped("SB")).unwrap(), want);
}

#[test]
fn message_passing_never_sees_the_flag_without_the_data() {
    // P1 reads (flag, buf); buf=1 is written before flag=1.
    let want = set(&[
        (&[&[], &[0, 0]], &[1, 1]),
        (&[&[], &[0, 1]], &[1, 1]),
        (&[&[], &[1, 1]], &[1, 1]),
    ]);
    assert_eq!(sc_outcomes(&shipped("MP")).unwrap(), want);
}

#[test]
fn load_buffering_never_reads_both_writes() {
    let want = set(&[
        (&[&[0], &[0]], &[1, 1]),
        (&[&[0], &[1]], &[1, 1]),
        (&[&[1], &[0]], &[1, 1]),
    ]);
    assert_eq!(sc_outcomes(&shipped("LB")).unwrap(), want);
}

#[test]
fn read_read_coherence() {
    // P1's two reads of x: (0,0), (0,1), (1,1); never (1,0).
    let want = set(&[
        (&[&[], &[0, 0]], &[1]),
        (&[&[], &[0, 1]], &[1]),
        (&[&[], &[1, 1]], &[1]),
    ]);
    assert_eq!(sc_outcomes(&shipped("CoRR")).unwrap(), want);
}

#[test]
fn two_plus_two_writes_final_states() {
    // a=x:=1 b=y:=2 (P0), c=y:=1 d=x:=2 (P1); the six interleavings give
    // abcd (2,1), acbd (2,2), acdb (2,2), cabd (2,2), cadb (2,2), cdab (1,2).
    let want = set(&[
        (&[&[], &[]], &[2, 1]),
        (&[&[], &[]], &[2, 2]),
        (&[&[], &[]], &[1, 2]),
    ]);
    assert_eq!(sc_outcomes(&shipped("2+2W")).unwrap(), want);
}

#[test]
fn write_write_coherence_has_one_outcome() {
    assert_eq!(
        sc_outcomes(&shipped("CoWW")).unwrap(),
        set(&[(&[&[]], &[2])])
    );
}

#[test]
fn iriw_allows_every_reading_but_opposite_orders() {
    // Each reader alone may see any of its four pairs; together, all 16 combinations but the
    // one where P1 sees x before y and P3 sees y before x.
    let mut want = BTreeSet::new();
    for bits in 0..16 {
        let (a, b, c, d) = (bits >> 3 & 1, bits >> 2 & 1, bits >> 1 & 1, bits & 1);
        if (a, b, c, d) == (1, 0, 1, 0) {
            continue;
        }
        want.insert(Outcome {
            regs: vec![vec![], vec![a, b], vec![], vec![c, d]],
            mem: vec![1, 1],
        });
    }
    assert_eq!(want.len(), 15);
    assert_eq!(sc_outcomes(&shipped("IRIW")).unwrap(), want);
}

#[test]
fn every_shipped_condition_is_forbidden_by_sequential_consistency() {
    for name in [
        "SB", "MP", "LB", "IRIW", "WRC", "ISA2", "2+2W", "R", "S", "CoRR", "CoRW", "CoWR", "CoWW",
    ] {
        let t = shipped(name);
        let sc = sc_outcomes(&t).unwrap();
        assert!(!sc.is_empty(), "{name}");
        assert!(
            sc.iter().all(|o| !t.holds(&t.condition.prop, o)),
            "{name}: an SC outcome satisfies its exists clause"
        );
    }
}

#[test]
fn registers_compute_and_start_from_the_initial_state() {
    let t = parse(
        "C Regs
{ x=5; 0:r1=3; }
P0(int *x, int *y) {
    int r0 = READ_ONCE(*x);
    int r1;
    r1 = r1 + r0 * 2;
    WRITE_ONCE(*y, r1 - 1);
}
P1(int *y) { int r0 = READ_ONCE(*y) + 100; }
exists (1:r0=112)
",
    )
    .unwrap();
    // P0 computes y = 3 + 5*2 - 1 = 12; P1 reads y before (0) or after (12).
    let want = set(&[
        (&[&[5, 13], &[100]], &[5, 12]),
        (&[&[5, 13], &[112]], &[5, 12]),
    ]);
    assert_eq!(sc_outcomes(&t).unwrap(), want);
}

#[test]
fn the_state_limit_is_an_error_not_a_hang() {
    let t = shipped("IRIW");
    assert_eq!(
        sc_outcomes_limited(&t, 10),
        Err(TooLarge { limit: 10 }.into())
    );
}

/// A test with many threads stops at the memory budget, long before the state count: the
/// wider the state, the fewer states the budget holds.
#[test]
fn the_memory_budget_stops_wide_tests_early() {
    let t = shipped("IRIW");
    assert!(sc_outcomes_within(&t, usize::MAX, 1 << 20).is_ok());
    let Err(ScError::TooLarge(TooLarge { limit })) = sc_outcomes_within(&t, usize::MAX, 4096)
    else {
        panic!("a 4 KiB budget should not hold IRIW's states");
    };
    assert!(limit > 0 && limit < 4096 / 16, "{limit} states in 4 KiB");
}
