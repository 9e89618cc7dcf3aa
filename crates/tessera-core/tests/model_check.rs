//! The model checker against the real protocol: the correct variant passes every world here,
//! and each deliberately broken variant is caught with a short trace.
//!
//! Run with `--nocapture` to see the state counts; the `#[ignore]`d worlds take from tens of
//! seconds to minutes and several GB of memory (see docs/PROTOCOL.md for measured counts).

use std::time::Instant;

use tessera_core::model::{
    check, property, CheckReport, HeldVariant, ModelConfig, RemoteVariant, Violation,
};
use tessera_core::{Coherence, ProtocolVariant};

fn run(cfg: ModelConfig) -> CheckReport {
    let start = Instant::now();
    let report = check(&cfg).expect("a valid world");
    println!("{cfg:?}\n  {:.2?}: {report}", start.elapsed());
    report
}

fn passes(cfg: ModelConfig, at_least: u64) -> CheckReport {
    let r = run(cfg);
    assert!(r.violation.is_none(), "{r}");
    // Lower bounds well under the measured counts: a key that merged states it should not,
    // or a step generator that lost steps, would fall far below them.
    assert!(r.states > at_least, "only {} states: {r}", r.states);
    assert!(r.transitions > r.states && r.terminal > 0, "{r}");
    // Every world here frees while pages are locked or deferred somewhere, so the refusal
    // path must have been taken; a world that never reached it would not check it.
    assert!(
        cfg.frees == 0 || r.refused_frees > 0,
        "no free was refused: {r}"
    );
    // Likewise every world with an eviction budget tries to evict a page in use.
    assert!(
        cfg.evictions_per_device == 0 || r.refused_evictions > 0,
        "no eviction was refused: {r}"
    );
    r
}

fn caught(variant: ProtocolVariant, expected: &str) -> Violation {
    caught_in(ModelConfig::minimum(), variant, expected)
}

fn caught_in(cfg: ModelConfig, variant: ProtocolVariant, expected: &str) -> Violation {
    let r = run(cfg.with_variant(variant));
    let Some(v) = r.violation else {
        panic!("{variant:?} passed the model checker: {r}");
    };
    assert_eq!(v.property, expected, "{v}");
    // Breadth first gives a shortest trace; each of these bugs needs fewer than ten steps.
    assert!(v.trace.len() <= 10, "trace longer than expected:\n{v}");
    assert!(v.trace.last().unwrap().starts_with("VIOLATED"), "{v}");
    v
}

#[test]
#[ignore = "the same states as the minimum world with two slots per device, which the suite runs"]
fn correct_protocol_passes_the_minimum_world() {
    // Measured under owned pages: 20.8 million states (10.2 million without create and
    // free); 6.4 million (3.1) under write-home.
    passes(ModelConfig::minimum(), 10_000_000);
}

#[test]
#[ignore = "the minimum world before create and free were modelled, for docs/PROTOCOL.md"]
fn correct_protocol_passes_the_minimum_world_without_frees() {
    let cfg = ModelConfig {
        frees: 0,
        ..ModelConfig::minimum()
    };
    passes(cfg, 1_000_000);
}

fn with_capacity(capacity: u8) -> ModelConfig {
    ModelConfig {
        capacity: Some(capacity),
        ..ModelConfig::minimum()
    }
}

#[test]
fn correct_protocol_passes_the_minimum_world_with_one_slot_per_device() {
    // Measured: 317 thousand states (161 thousand under write-home). A device holds one page
    // at a time and evicts it (a write-back if it wrote) before it sends a request for the
    // other.
    passes(with_capacity(1), 50_000);
}

#[test]
fn correct_protocol_passes_the_minimum_world_with_two_slots_per_device() {
    // Two pages always fit two slots, so this explores the unbounded minimum world, checking
    // the capacity in every state besides. It stands in for the unbounded run, which would
    // take as long again. Measured under owned pages: 20.8 million states, 75 s in release
    // (6.4 million under the paper's write-home rule, where an owner never shares).
    passes(with_capacity(2), 10_000_000);
}

#[test]
fn the_papers_write_home_rule_passes_the_minimum_world_with_one_slot_per_device() {
    // The runtime keeps it behind `--coherence write-home`, for comparison and the paper's
    // figures: it stays checked. Measured: 160,993 states.
    passes(
        with_capacity(1).with_coherence(Coherence::WriteHome),
        100_000,
    );
}

#[test]
#[ignore = "6.4 million states: about 21 s in release"]
fn the_papers_write_home_rule_passes_the_minimum_world_with_two_slots_per_device() {
    passes(
        with_capacity(2).with_coherence(Coherence::WriteHome),
        2_000_000,
    );
}

#[test]
fn correct_protocol_passes_three_pages_in_one_slot() {
    // Measured: 414 thousand states under owned pages (230 thousand under write-home).
    let cfg = ModelConfig {
        pages: 3,
        ..with_capacity(1)
    };
    passes(cfg, 50_000);
}

#[test]
fn correct_protocol_passes_three_pages_in_two_slots() {
    // Measured: 203 thousand states under owned pages (140 thousand under write-home). The
    // smallest world where two slots bind; with two
    // requests per device it has 95 million states, too many for this machine's suite.
    let cfg = ModelConfig {
        pages: 3,
        requests_per_device: 1,
        ..with_capacity(2)
    };
    passes(cfg, 30_000);
}

#[test]
fn correct_protocol_passes_three_pages_with_one_request_each() {
    // Measured: 751 thousand states under owned pages (462 thousand under write-home).
    let cfg = ModelConfig {
        pages: 3,
        requests_per_device: 1,
        ..ModelConfig::minimum()
    };
    passes(cfg, 50_000);
}

#[test]
fn correct_protocol_passes_four_devices_with_one_request_each() {
    // Measured: 391 thousand states under owned pages (220 thousand under write-home).
    let cfg = ModelConfig {
        devices: 4,
        requests_per_device: 1,
        ..ModelConfig::minimum()
    };
    passes(cfg, 25_000);
}

#[test]
fn without_the_memory_lock_a_write_is_lost() {
    // Paper 3.8: the memory manager serves a request for a page while the device that was
    // granted it is still inside its procedure; that device's write then lands in a copy the
    // directory no longer counts.
    let v = caught(ProtocolVariant::NoMemoryLock, property::NO_LOST_WRITE);
    let last_step = &v.trace[v.trace.len() - 2];
    assert!(last_step.contains("writes"), "{v}");
}

#[test]
fn skipping_invalidation_leaves_two_copies_of_a_written_page() {
    caught(ProtocolVariant::SkipInvalidation, property::SINGLE_WRITER);
}

#[test]
fn downgrading_without_write_back_loses_the_write() {
    // Only the paper's rule writes home on a downgrade; owned pages never do.
    let v = caught_in(
        ModelConfig::minimum().with_coherence(Coherence::WriteHome),
        ProtocolVariant::SkipWriteBackOnDowngrade,
        property::NO_LOST_WRITE,
    );
    assert!(v.trace.iter().any(|l| l.contains("Downgrade")), "{v}");
    // The reader's copy comes from the owner, so it is right; what is lost is home's copy,
    // the only one left once the clean copies are dropped.
    assert!(
        v.trace
            .last()
            .is_some_and(|l| l.contains("has no owner and home holds")),
        "{v}"
    );
}

#[test]
fn freeing_without_invalidation_leaves_a_stale_mapping() {
    let v = caught(
        ProtocolVariant::FreeWithoutInvalidation,
        property::NO_STALE_MAPPING,
    );
    assert!(v.trace.iter().any(|l| l.contains("free of page")), "{v}");
}

#[test]
fn freeing_under_the_memory_lock_pulls_a_page_out_of_a_running_procedure() {
    let v = caught(ProtocolVariant::FreeIgnoringLocks, property::MEMORY_LOCK);
    assert!(v.trace.iter().any(|l| l.contains("free of page")), "{v}");
}

#[test]
fn evicting_without_write_back_loses_the_write() {
    let v = caught(
        ProtocolVariant::EvictWithoutWriteBack,
        property::NO_LOST_WRITE,
    );
    let last_step = &v.trace[v.trace.len() - 2];
    assert!(
        last_step.contains("eviction of page") && !last_step.contains("WriteBack"),
        "{v}"
    );
    // The same bug through the evictions the capacity forces, with no budget for others.
    let cfg = ModelConfig {
        evictions_per_device: 0,
        ..with_capacity(1)
    };
    let v = caught_in(
        cfg,
        ProtocolVariant::EvictWithoutWriteBack,
        property::NO_LOST_WRITE,
    );
    assert!(v.trace[v.trace.len() - 2].contains("to make room"), "{v}");
}

#[test]
fn evicting_under_the_memory_lock_takes_a_page_in_use() {
    let v = caught(ProtocolVariant::EvictIgnoringLocks, property::MEMORY_LOCK);
    let last_step = &v.trace[v.trace.len() - 2];
    assert!(last_step.contains("eviction of page"), "{v}");
}

#[test]
#[ignore = "5.8 million states under owned pages: about 26 s in release"]
fn correct_protocol_passes_four_devices_in_one_slot() {
    let cfg = ModelConfig {
        devices: 4,
        ..with_capacity(1)
    };
    passes(cfg, 500_000);
}

#[test]
#[ignore = "33 million states under owned pages: about 2 minutes in release"]
fn correct_protocol_passes_three_values() {
    let cfg = ModelConfig {
        values: 3,
        // As measured before create and free were modelled; with them it would not fit
        // this machine's time and memory.
        frees: 0,
        ..ModelConfig::minimum()
    };
    passes(cfg, 1_000_000);
}

#[test]
#[ignore = "40 million states under owned pages: about 3 minutes in release"]
fn correct_protocol_passes_four_devices() {
    let cfg = ModelConfig {
        devices: 4,
        evictions_per_device: 0,
        // As measured before create and free were modelled; with them it would not fit
        // this machine's time and memory.
        frees: 0,
        ..ModelConfig::minimum()
    };
    passes(cfg, 1_000_000);
}

#[test]
#[ignore = "11 million states under owned pages: about 51 s in release"]
fn correct_protocol_passes_four_devices_three_pages() {
    let cfg = ModelConfig {
        devices: 4,
        pages: 3,
        requests_per_device: 1,
        // As measured before create and free were modelled; with them it would not fit
        // this machine's time and memory.
        frees: 0,
        ..ModelConfig::minimum()
    };
    passes(cfg, 1_000_000);
}

#[test]
fn correct_protocol_passes_the_remote_world() {
    // Measured: 39,926 states under owned pages (29,246 under write-home). Remote loads and
    // stores interleave with the protocol's
    // requests, grants, evictions and frees of the migrate page; the remote page is never
    // copied and every remote load returns the latest store.
    passes(ModelConfig::remote(), 1_000);
}

#[test]
#[ignore = "3.7 million states under owned pages, about 13 s: the remote world in the suite covers the rules"]
fn remote_pages_in_the_minimum_world_with_one_slot() {
    // The minimum world (one slot per device) with one remote page and one remote operation
    // per device besides. Measured: 3,723,468 states under owned pages (1,755,905 under
    // write-home).
    let cfg = ModelConfig {
        remote_pages: 1,
        remote_ops_per_device: 1,
        ..with_capacity(1)
    };
    passes(cfg, 50_000);
}

#[test]
fn a_remote_page_cached_on_its_reader_reads_stale() {
    // A reader keeps its first load of a remote page; another device stores to the page in
    // place; the reader's next load returns its cached value, not the store.
    let cfg = ModelConfig {
        remote_variant: RemoteVariant::CachedOnReader,
        ..ModelConfig::remote()
    };
    let r = run(cfg);
    let Some(v) = r.violation else {
        panic!("a reader's cache of a remote page passed the model checker: {r}");
    };
    assert_eq!(v.property, property::DATA_VALUE, "{v}");
    assert!(v.trace.len() <= 10, "trace longer than expected:\n{v}");
    assert!(
        v.trace.iter().any(|s| s.contains("stores remote page")),
        "{v}"
    );
    assert!(v.trace[v.trace.len() - 2].contains("from its cache"), "{v}");
}

#[test]
fn a_remote_page_copied_into_its_readers_page_table_is_caught() {
    let cfg = ModelConfig {
        remote_variant: RemoteVariant::CopiedOnRead,
        ..ModelConfig::remote()
    };
    let r = run(cfg);
    let Some(v) = r.violation else {
        panic!("a copy of a remote page passed the model checker: {r}");
    };
    assert_eq!(v.property, property::REMOTE_NEVER_COPIED, "{v}");
    assert!(v.trace.len() <= 5, "trace longer than expected:\n{v}");
}

// Asynchronous staging (`Protocol::with_staging`): a device inside its procedure stages the
// next batch, and may evict pages outside its own batch to make room. The runtime uses it under
// `--staging on` (docs/PROTOCOL.md, "Asynchronous staging").

fn staging(cfg: ModelConfig) -> ModelConfig {
    ModelConfig {
        staging: true,
        ..cfg
    }
}

fn passes_staging(cfg: ModelConfig, at_least: u64) {
    let r = passes(staging(cfg), at_least);
    // Staging must have been refused somewhere (a stage that needed a locked device), or
    // the refusal path was never explored.
    assert!(r.refused_stages > 0, "no stage was refused: {r}");
}

#[test]
fn staging_passes_two_devices_in_two_slots() {
    // Measured under write-home: 115,471 states and 434,517 transitions, against 114,749 and
    // 418,390 for the same world without staging.
    // Two requests per device (a procedure stages with its second), so a stage is offered
    // beside a held page, refused while the other device holds what it needs, and granted
    // after evictions outside the batch made room.
    let cfg = ModelConfig {
        devices: 2,
        ..with_capacity(2)
    };
    passes_staging(cfg, 50_000);
}

#[test]
#[ignore = "10.3 million states under owned pages: about 34 s in release"]
fn staging_passes_three_devices_two_pages_in_two_slots_without_frees() {
    let cfg = ModelConfig {
        frees: 0,
        ..with_capacity(2)
    };
    passes_staging(cfg, 1_000_000);
}

#[test]
fn staging_that_ignores_other_locks_takes_a_page_in_use() {
    let v = caught_in(
        staging(with_capacity(2)),
        ProtocolVariant::StageIgnoringLocks,
        property::MEMORY_LOCK,
    );
    assert!(v.trace[v.trace.len() - 2].contains("staged request"), "{v}");
}

#[test]
fn staging_that_evicts_a_held_page_is_caught() {
    let v = caught_in(
        staging(with_capacity(2)),
        ProtocolVariant::EvictIgnoringLocks,
        property::MEMORY_LOCK,
    );
    assert!(
        v.trace[v.trace.len() - 2].contains("eviction of page"),
        "{v}"
    );
}

#[test]
fn launches_from_the_held_set_keep_every_property() {
    // Idle devices read and write the pages their page tables hold, with no request and no
    // memory lock, interleaved with every request, eviction, free and create of the others.
    let r = passes(ModelConfig::held(), 10_000);
    println!("held world: {} states", r.states);
}

#[test]
fn a_held_store_that_ignores_the_writable_bit_is_caught() {
    // A device holding a read copy stores into it with no request, as a kernel specialized
    // past the writable check would: the other copies and home no longer agree with it.
    let cfg = ModelConfig {
        held_variant: HeldVariant::StoreIgnoresWritable,
        ..ModelConfig::held()
    };
    let r = run(cfg);
    let Some(v) = r.violation else {
        panic!("a store ignoring the writable bit passed the model checker: {r}");
    };
    assert_eq!(v.property, property::NO_LOST_WRITE, "{v}");
    assert!(v.trace.len() <= 10, "trace longer than expected:\n{v}");
    assert!(
        v.trace.iter().any(|s| s.contains("outside a procedure")),
        "{v}"
    );
}

#[test]
fn an_owner_evicted_without_handing_ownership_on_loses_the_write() {
    let v = caught(
        ProtocolVariant::EvictOwnerWithoutHandover,
        property::NO_LOST_WRITE,
    );
    // A reader copied the owner's page, then the owner left: home, stale, is taken as latest.
    assert!(
        v.trace.iter().any(|l| l.contains("eviction of page")),
        "{v}"
    );
    assert!(
        v.trace
            .last()
            .is_some_and(|l| l.contains("has no owner and home holds")),
        "{v}"
    );
    // Under the paper's rule the owner never shares, so the variant changes nothing there.
    let r = run(with_capacity(1)
        .with_coherence(Coherence::WriteHome)
        .with_variant(ProtocolVariant::EvictOwnerWithoutHandover));
    assert!(r.violation.is_none(), "{r}");
}

#[test]
fn a_write_that_takes_an_owned_page_from_home_holds_a_stale_copy() {
    // The writer's copy is valid and stale the moment it is granted, before it writes.
    let v = caught(
        ProtocolVariant::WriteCopiesFromHome,
        property::NO_LOST_WRITE,
    );
    assert!(
        v.trace
            .iter()
            .any(|l| l.contains("Copy") && l.contains("Home")),
        "{v}"
    );
}
