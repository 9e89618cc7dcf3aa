//! examples/oversubscribed, run so that it cannot rot: `run` fails unless every word matches
//! the example's plain loop, and the budget it sets must really force evictions.

#[allow(dead_code)] // `main` is the example's, not the test's.
#[path = "../examples/oversubscribed.rs"]
mod oversubscribed;

#[test]
fn an_oversubscribed_buffer_matches_the_plain_loop_and_evicts() {
    let evicted = oversubscribed::run(1).unwrap();
    assert_eq!(evicted.len(), 2);
    assert!(evicted.iter().all(|&e| e > 0), "{evicted:?}");
}
