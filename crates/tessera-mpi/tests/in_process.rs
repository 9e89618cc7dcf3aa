//! The multi-node memory system with nodes as threads of one process (no MPI needed): every
//! node count gives the sequential reference's pages, and a node that stops makes the others
//! stop with an error naming it, not hang.

use std::thread;
use std::time::Duration;

use tessera_mpi::{run_node, InProcess, NodeConfig, NodeError, NodeReport, Transport};

fn cluster(nodes: usize, cfg: &NodeConfig) -> Vec<Result<NodeReport, NodeError>> {
    let handles: Vec<_> = InProcess::cluster(nodes)
        .into_iter()
        .map(|t| {
            let cfg = cfg.clone();
            thread::spawn(move || run_node(&t, &cfg))
        })
        .collect();
    handles
        .into_iter()
        .map(|h| h.join().expect("a node thread panicked"))
        .collect()
}

fn config(devices_per_node: usize) -> NodeConfig {
    NodeConfig {
        devices_per_node,
        pages: 24,
        words: 16,
        rounds: 5,
        block_pages: 2,
        lost_after: Duration::from_secs(20),
        stop_after_round: None,
        litmus: None,
        coherence: tessera_core::Coherence::Owned,
    }
}

#[test]
fn every_node_count_gives_the_reference_result() {
    // The same four devices as 1 × 4, 2 × 2 and 4 × 1: the same pages, the same checksum.
    // Under owned pages (the default) and the paper's write-home rule alike.
    let mut checksums = Vec::new();
    let rules = [
        tessera_core::Coherence::Owned,
        tessera_core::Coherence::WriteHome,
    ];
    for (coherence, (nodes, k)) in rules
        .into_iter()
        .flat_map(|c| [(1, 4), (2, 2), (4, 1), (3, 2)].map(|p| (c, p)))
    {
        let cfg = NodeConfig {
            coherence,
            ..config(k)
        };
        let reports = cluster(nodes, &cfg);
        let r0 = reports[0].as_ref().expect("rank 0 finished");
        for r in &reports {
            assert!(r.is_ok(), "{nodes} × {k}: {r:?}");
        }
        assert_eq!(r0.mismatches, 0, "{nodes} × {k}: {r0:?}");
        assert_eq!(r0.checksum, r0.reference_checksum, "{nodes} × {k}");
        if nodes == 1 {
            assert_eq!(r0.inter_node_bytes, 0, "one node sends nothing to others");
        } else {
            assert!(
                r0.inter_node_page_bytes > 0,
                "{nodes} × {k}: pages crossed nodes"
            );
        }
        if nodes * k == 4 {
            checksums.push(r0.checksum);
        }
    }
    assert!(checksums.windows(2).all(|w| w[0] == w[1]), "{checksums:x?}");
}

#[test]
fn a_lost_node_is_named_by_the_others() {
    let cfg = NodeConfig {
        lost_after: Duration::from_millis(1500),
        ..config(1)
    };
    let mut cfg1 = cfg.clone();
    cfg1.stop_after_round = Some(1);
    let handles: Vec<_> = InProcess::cluster(3)
        .into_iter()
        .enumerate()
        .map(|(rank, t)| {
            let cfg = if rank == 1 { cfg1.clone() } else { cfg.clone() };
            thread::spawn(move || run_node(&t, &cfg))
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(
        matches!(results[1], Err(NodeError::Stopped { node: 1, round: 1 })),
        "{:?}",
        results[1]
    );
    for rank in [0, 2] {
        match &results[rank] {
            Err(e @ NodeError::Lost { node: 1, .. }) => {
                assert!(e.to_string().contains("node 1 was lost"), "{e}");
            }
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

/// The litmus tests the repository ships (`tests/litmus/*.litmus`), in name order.
fn shipped_litmus_files() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/litmus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the shipped litmus tests")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "litmus"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    files
}

#[test]
fn shipped_litmus_tests_show_no_sc_violation_with_threads_on_different_nodes() {
    for path in shipped_litmus_files() {
        let test = tessera_litmus::load(&path).expect("a shipped test parses");
        // Threads dealt round robin over three nodes: neighbours in the test on different
        // nodes.
        let cfg = NodeConfig {
            devices_per_node: 2,
            litmus: Some(std::sync::Arc::new(tessera_mpi::LitmusJob {
                test,
                runs: 30,
                jitter_us: 300,
                seed: 7,
            })),
            ..config(2)
        };
        let reports = cluster(3, &cfg);
        let r0 = reports[0].as_ref().expect("rank 0 finished");
        let l = r0.litmus.as_ref().expect("a litmus report");
        println!(
            "{}: {} runs, {} outcomes, {} of {} SC outcomes seen, {} forbidden",
            path.display(),
            l.runs,
            l.outcomes.len(),
            l.allowed_seen,
            l.allowed,
            l.forbidden
        );
        assert_eq!(l.runs, 30, "{}", path.display());
        assert_eq!(l.forbidden, 0, "{}: {:?}", path.display(), l.outcomes);
    }
}

/// A rank that takes its messages late: one that is still finishing a run when the others
/// have started the next.
struct Late {
    inner: InProcess,
    delay: Duration,
}

impl Transport for Late {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn send(&self, to: usize, bytes: Vec<u8>) -> Result<(), NodeError> {
        self.inner.send(to, bytes)
    }
    fn recv(&self, timeout: Duration) -> Result<Option<(usize, Vec<u8>)>, NodeError> {
        thread::sleep(self.delay);
        self.inner.recv(timeout)
    }
    fn barrier(&self) {
        self.inner.barrier()
    }
}

/// One litmus file after another on the same ranks (`litmus::run_files`, what `tessera litmus
/// --devices-per-node` runs under mpirun), with rank 0 late: messages carry no run, so without
/// a barrier between files rank 0, still finishing one test, took the others' first messages
/// of the next as its own, and the next test waited for them forever (this test, without the
/// barrier: a minute, then failed). A hang fails here after a minute instead of holding the
/// suite.
#[test]
fn litmus_files_one_after_another_on_the_same_ranks_finish() {
    let files = shipped_litmus_files();
    let (tx, rx) = std::sync::mpsc::channel();
    for inner in InProcess::cluster(3) {
        let delay = Duration::from_micros(if inner.rank() == 0 { 500 } else { 0 });
        let t = Late { inner, delay };
        let (files, tx) = (files.clone(), tx.clone());
        thread::spawn(move || {
            let base = NodeConfig {
                devices_per_node: 2,
                ..NodeConfig::default()
            };
            let r = tessera_mpi::litmus::run_files(&t, &files, &base, 3, 300, |_| {});
            let _ = tx.send(r.map(|tally| tally.problems()).map_err(|e| e.to_string()));
        });
    }
    for _ in 0..3 {
        let r = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("a rank is still waiting after a minute: a test never finished");
        assert_eq!(r, Ok(None));
    }
}

/// Ranks given other litmus runs (mpirun's `:` gives each its own command line) stop before
/// the first test, each with the same error: another `--runs` had hung, other files had indexed
/// out of range. Ranks given the same run agree and run it.
#[test]
fn litmus_ranks_given_other_runs_stop_before_the_first_test() {
    use tessera_mpi::litmus::{run_files, FilesError};
    let files = shipped_litmus_files();
    let (sb, mp): (Vec<_>, Vec<_>) = (
        files
            .iter()
            .filter(|f| f.ends_with("SB.litmus"))
            .cloned()
            .collect(),
        files
            .iter()
            .filter(|f| f.ends_with("MP.litmus"))
            .cloned()
            .collect(),
    );
    assert_eq!((sb.len(), mp.len()), (1, 1));
    let run = |per_rank: Vec<(Vec<std::path::PathBuf>, u32)>| -> Vec<Result<Vec<String>, String>> {
        let handles: Vec<_> = InProcess::cluster(per_rank.len())
            .into_iter()
            .zip(per_rank)
            .map(|(t, (files, runs))| {
                thread::spawn(move || {
                    let base = NodeConfig {
                        devices_per_node: 1,
                        ..NodeConfig::default()
                    };
                    run_files(&t, &files, &base, runs, 0, |_| {})
                        .map(|tally| tally.failed)
                        .map_err(|e| {
                            assert!(matches!(e, FilesError::Disagree { .. }), "{e}");
                            e.to_string()
                        })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    };
    let other = "rank 1 was given other litmus files or options than rank 0";
    for per_rank in [
        vec![(sb.clone(), 3), (sb.clone(), 5)],
        vec![(sb.clone(), 3), (mp.clone(), 3)],
    ] {
        for r in run(per_rank) {
            assert!(r.as_ref().is_err_and(|e| e.starts_with(other)), "{r:?}");
        }
    }
    for r in run(vec![(sb.clone(), 3), (sb.clone(), 3)]) {
        assert_eq!(r, Ok(Vec::<String>::new()));
    }
}

/// Runs `files` `runs` times on two in-process ranks of one device each
/// (`litmus::run_files`). Per rank: its tally, and what it heard of each file in order, a
/// run's report or, marked `error: `, why the file was skipped.
fn on_two_ranks(
    files: &[std::path::PathBuf],
    runs: u32,
) -> Vec<(usize, tessera_litmus::Tally, Vec<String>)> {
    use tessera_mpi::litmus::{run_files, FileRun};
    let handles: Vec<_> = InProcess::cluster(2)
        .into_iter()
        .map(|t| {
            let files = files.to_vec();
            thread::spawn(move || {
                let base = NodeConfig {
                    devices_per_node: 1,
                    ..NodeConfig::default()
                };
                let mut seen = Vec::new();
                let tally = run_files(&t, &files, &base, runs, 0, |f| match f {
                    FileRun::Ran(report) => seen.push(report),
                    FileRun::Skipped(e) => seen.push(format!("error: {e}")),
                })
                .unwrap();
                (t.rank(), tally, seen)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// A file that cannot be loaded, between two that can, is skipped on every rank alike, as the
/// one-process runner skips it: the files after it still run, rank 0 hands on each report
/// with herd7's `Observation` line and why the file was skipped, and every rank's tally names
/// the skipped file.
#[test]
fn a_bad_litmus_file_is_skipped_and_the_rest_run() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.litmus");
    std::fs::write(&bad, "this is not a litmus test\n").unwrap();
    let shipped = shipped_litmus_files();
    let pick = |name: &str| shipped.iter().find(|f| f.ends_with(name)).unwrap().clone();
    let files = vec![pick("SB.litmus"), bad.clone(), pick("MP.litmus")];
    for (rank, tally, seen) in on_two_ranks(&files, 4) {
        assert_eq!(tally.files, 3);
        assert_eq!(
            tally.unreadable,
            vec![bad.display().to_string()],
            "rank {rank}"
        );
        assert!(tally.problems().is_some_and(|p| p.contains("bad.litmus")));
        let reports: Vec<_> = seen.iter().filter(|s| !s.starts_with("error: ")).collect();
        match rank {
            0 => {
                assert_eq!(seen.len() - reports.len(), 1, "rank {rank}: {seen:?}");
                assert!(seen
                    .iter()
                    .any(|s| s.starts_with("error: ") && s.contains("bad.litmus")));
                assert_eq!((tally.ran, tally.passed), (2, 2), "{seen:?}");
                assert!(tally.failed.is_empty());
                assert_eq!(reports.len(), 2);
                // Neither test's condition can hold under SC: 4 runs, none positive.
                assert!(
                    reports[0].contains("\nObservation SB Never 0 4\n"),
                    "{}",
                    reports[0]
                );
                assert!(
                    reports[1].contains("\nObservation MP Never 0 4\n"),
                    "{}",
                    reports[1]
                );
            }
            // The other ranks hold no report, and rank 0 alone says why a file was skipped.
            _ => assert!(seen.is_empty(), "{seen:?}"),
        }
    }
}

/// A test with more threads than the ranks have devices is skipped on every rank alike, and
/// the files after it run: IRIW's four threads on two ranks of one device each had stopped
/// the whole suite with a configuration error on every rank, the files after it unrun.
#[test]
fn a_test_with_more_threads_than_devices_is_skipped_and_the_rest_run() {
    let shipped = shipped_litmus_files();
    let pick = |name: &str| shipped.iter().find(|f| f.ends_with(name)).unwrap().clone();
    let files = vec![pick("SB.litmus"), pick("IRIW.litmus"), pick("MP.litmus")];
    for (rank, tally, seen) in on_two_ranks(&files, 3) {
        assert_eq!(tally.files, 3, "rank {rank}");
        assert_eq!(
            tally.unreadable.len(),
            1,
            "rank {rank}: {:?}",
            tally.unreadable
        );
        assert!(tally.unreadable[0].ends_with("IRIW.litmus"), "rank {rank}");
        assert!(tally.problems().is_some_and(|p| p.contains("IRIW.litmus")));
        let skipped: Vec<_> = seen.iter().filter(|s| s.starts_with("error: ")).collect();
        match rank {
            0 => {
                assert_eq!((seen.len(), tally.ran, tally.passed), (3, 2, 2), "{seen:?}");
                assert_eq!(skipped.len(), 1, "{seen:?}");
                assert!(
                    skipped[0]
                        .contains("IRIW has 4 threads, more than the 2 devices of 2 processes"),
                    "{}",
                    skipped[0]
                );
            }
            _ => assert!(seen.is_empty(), "{seen:?}"),
        }
    }
}

/// Ranks compare what their runs are made of before one starts (`agree::agree`, which
/// tessera-node runs before an engine run): ranks with another digest all stop with the same
/// pair of ranks named, and ranks that agree go on. A run of another `--rounds` had waited out
/// `--lost-after` and then blamed a lost node.
#[test]
fn ranks_given_other_runs_disagree_before_the_run() {
    use tessera_mpi::agree::{agree, AgreeError};
    let run = |digests: Vec<u64>| -> Vec<Result<(), (usize, usize)>> {
        let handles: Vec<_> = InProcess::cluster(digests.len())
            .into_iter()
            .zip(digests)
            .map(|(t, d)| {
                thread::spawn(move || {
                    let r = agree(&t, d).map_err(|e| match e {
                        AgreeError::Disagree { rank, other } => (rank, other),
                        e => panic!("{e}"),
                    });
                    // A rank that stops at its first disagreement must not close its end of
                    // the in-process transport before the others have sent to it: the ranks'
                    // ends are dropped together, after every thread has ended.
                    (r, t)
                })
            })
            .collect();
        let ended: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        ended.into_iter().map(|(r, _)| r).collect()
    };
    assert_eq!(run(vec![7, 7, 7]), vec![Ok(()); 3]);
    let r = run(vec![7, 7, 8]);
    // Rank 2 disagrees with both; ranks 0 and 1 each see it.
    assert_eq!(r[0], Err((2, 0)));
    assert_eq!(r[1], Err((2, 1)));
    assert!(matches!(r[2], Err((2, _))), "{r:?}");
}

/// The end of a litmus run across processes: rank 0 alone says what went wrong, and every
/// rank returns its own verdict after the barrier, including a rank whose tally has nothing
/// to report (only rank 0 counts forbidden outcomes).
#[test]
fn rank_zero_alone_says_why_a_litmus_run_failed() {
    let handles: Vec<_> = InProcess::cluster(3)
        .into_iter()
        .map(|t| {
            thread::spawn(move || {
                let mut tally = tessera_litmus::Tally {
                    files: 1,
                    ..Default::default()
                };
                if t.rank() == 0 {
                    tally.failed.push("SB".into());
                }
                let mut said = Vec::new();
                let verdict =
                    tessera_mpi::litmus::conclude(&t, &tally, |p| said.push(p.to_string()));
                (t.rank(), verdict, said)
            })
        })
        .collect();
    for h in handles {
        let (rank, verdict, said) = h.join().unwrap();
        match rank {
            0 => {
                assert!(
                    verdict.as_ref().is_some_and(|p| p.contains("SB")),
                    "{verdict:?}"
                );
                assert_eq!(said, vec![verdict.unwrap()]);
            }
            _ => assert_eq!((verdict, said), (None, Vec::<String>::new())),
        }
    }
}
