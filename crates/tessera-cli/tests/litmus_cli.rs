//! `tessera litmus` as a user runs it: the shipped tests, a broken protocol, bad files.

mod common;

use common::tessera;

use std::path::{Path, PathBuf};
use std::process::Output;

fn shipped(name: &str) -> String {
    litmus_dir()
        .join(format!("{name}.litmus"))
        .to_string_lossy()
        .into_owned()
}

fn litmus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/litmus")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn every_shipped_test_passes() {
    let mut files: Vec<String> = std::fs::read_dir(litmus_dir())
        .unwrap()
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .filter(|p| p.ends_with(".litmus"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 13);
    let mut args = vec!["litmus", "--runs", "20"];
    args.extend(files.iter().map(String::as_str));
    let o = tessera(&args);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert_eq!(out.matches(" Never 0 20\n").count(), 13, "{out}");
    assert_eq!(
        out.matches("Forbidden by sequential consistency: none")
            .count(),
        13
    );
    assert!(
        out.contains("Summary: 13 files, 13 passed, 0 failed"),
        "{out}"
    );
}

#[test]
fn a_single_thread_test_passes_and_prints_the_herd7_summary() {
    let o = tessera(&["litmus", "--runs", "10", "--same-page", &shipped("CoWW")]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("Test CoWW Allowed\n"), "{out}");
    assert!(
        out.contains("Histogram (1 states)\n10    :>x=2;\n"),
        "{out}"
    );
    assert!(out.contains("\nObservation CoWW Never 0 10\n"), "{out}");
    assert!(out.contains("Forbidden by sequential consistency: none"));
    assert!(out.contains("all variables on one page"));
}

#[test]
fn a_broken_protocol_makes_the_run_fail() {
    let o = tessera(&[
        "litmus",
        "--runs",
        "10",
        "--protocol",
        "skip-write-back",
        "--coherence",
        "write-home",
        &shipped("SB"),
    ]);
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}");
    // Reads of a modified page come straight from its owner, so skipping the write-back no
    // longer shows in the registers; it shows in the final memory, read from a home that
    // was never written (a final x or y of 0 after both threads stored 1).
    assert!(
        out.contains("Forbidden by sequential consistency: ")
            && !out.contains("Forbidden by sequential consistency: none"),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("!>") && (l.contains(" x=0;") || l.contains(" y=0;"))),
        "{out}"
    );
    assert!(
        err.contains("sequential consistency forbids") && err.contains("SB"),
        "{err}"
    );
    assert!(!err.contains("panicked"));
}

#[test]
fn the_eviction_variants_are_selectable_and_named_in_the_report() {
    for name in ["evict-without-write-back", "evict-ignoring-locks"] {
        let o = tessera(&["litmus", "--runs", "5", "--protocol", name, &shipped("SB")]);
        let (out, err) = text(&o);
        // Litmus runs never evict, so these broken variants behave as the correct protocol.
        assert!(o.status.success(), "{name}: {out}\n{err}");
        assert!(
            out.contains(&format!("; protocol {name}; coherence owned; ")),
            "{out}"
        );
    }
}

#[test]
fn malformed_files_are_reported_with_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &[u8], &str)] = &[
        (
            "missing-semicolon.litmus",
            b"C Bad\n{}\nP0(int *x) {\n  WRITE_ONCE(*x, 1)\n}\nexists (x=1)\n",
            "line 5, column 1: expected `;`, found `}`",
        ),
        (
            "loop.litmus",
            b"C Loop\n{}\nP0(int *x) {\n\twhile (1) { }\n}\nexists (x=1)\n",
            "line 4, column 2: unsupported: loops",
        ),
        (
            "binary.litmus",
            b"C Bin\n{}\n\xff\xfe",
            "line 3, column 1: the file is not UTF-8 text",
        ),
        ("empty.litmus", b"", "line 1, column 1: expected `C`"),
    ];
    for (name, bytes, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let o = tessera(&["litmus", "--runs", "5", path.to_str().unwrap()]);
        let (out, err) = text(&o);
        assert!(!o.status.success(), "{name}: {out}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(err.contains(name), "the message names the file: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn unreadable_files_are_a_clear_error_and_the_others_still_run() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.litmus");
    let o = tessera(&[
        "litmus",
        "--runs",
        "5",
        missing.to_str().unwrap(),
        dir.path().to_str().unwrap(),
        &shipped("CoWW"),
    ]);
    let (out, err) = text(&o);
    assert!(!o.status.success());
    assert!(err.contains("nope.litmus: cannot read the file"), "{err}");
    assert_eq!(err.matches("cannot read the file").count(), 2, "{err}");
    assert!(out.contains("Observation CoWW Never 0 5"), "{out}");
    assert!(err.contains("2 files could not be run"), "{err}");
    assert!(!err.contains("panicked"));
}

#[test]
fn bad_arguments_are_rejected() {
    for (args, want) in [
        (&["litmus"][..], "required"),
        (&["litmus", "--runs", "0", "x.litmus"][..], "--runs"),
        (
            &["litmus", "--protocol", "magic", "x.litmus"][..],
            "invalid value",
        ),
    ] {
        let o = tessera(args);
        let (_, err) = text(&o);
        assert!(!o.status.success());
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn schedules_report_their_coverage() {
    let iriw = shipped("IRIW");
    let o = tessera(&["litmus", "--schedule", "exhaustive", &iriw]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.contains("schedule exhaustive"), "{out}");
    assert!(out.contains("Every interleaving run"), "{out}");
    // 6 operations in threads of 1, 2, 1, 2: 6!/(2!2!) = 180 interleavings.
    assert!(out.contains("Observation IRIW Never 0 180"), "{out}");
    assert!(
        out.contains("Sequential consistency allows 15 outcomes; 15 of them seen"),
        "{out}"
    );
    assert!(
        out.contains(
            "Coverage: every outcome sequential consistency allows seen in 1 of 1 tests run"
        ),
        "{out}"
    );
    let o = tessera(&["litmus", "--schedule", "bogus", &iriw]);
    assert!(!o.status.success());
}

/// Across processes the threads run free on the multi-node engine: the options that choose a
/// schedule, a placement, a protocol or a seed are refused there (they had been ignored, and a
/// broken protocol reported no forbidden outcome), before MPI or anything else starts.
#[test]
fn options_the_multi_node_engine_ignores_are_refused() {
    let sb = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/litmus/SB.litmus");
    for extra in [
        &["--protocol", "skip-invalidation"][..],
        &["--schedule", "exhaustive"],
        &["--same-page"],
        &["--coherence", "write-home"],
        &["--seed", "7"],
    ] {
        let mut args = vec!["litmus", "--devices-per-node", "1"];
        args.extend_from_slice(extra);
        args.push(sb);
        common::refused(&args, 2, "does not apply with --devices-per-node");
    }
}

/// A folder runs every `.litmus` file below it, its subfolders included, and nothing else;
/// a folder with none is named as such, as an unreadable file is.
#[test]
fn a_folder_runs_every_litmus_file_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("kernel");
    std::fs::create_dir(&sub).unwrap();
    std::fs::copy(shipped("SB"), dir.path().join("SB.litmus")).unwrap();
    std::fs::copy(shipped("MP"), sub.join("MP.litmus")).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a test").unwrap();
    let o = tessera(&["litmus", "--runs", "5", &dir.path().to_string_lossy()]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}\n{err}");
    // In order of their paths: SB.litmus before kernel/MP.litmus ('S' before 'k').
    let (mp, sb) = (out.find("Test MP ").unwrap(), out.find("Test SB ").unwrap());
    assert!(sb < mp, "{out}");
    assert!(
        out.contains("Summary: 2 files, 2 passed, 0 failed"),
        "{out}"
    );

    let empty = tempfile::tempdir().unwrap();
    let o = tessera(&["litmus", &empty.path().to_string_lossy()]);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "{}: cannot read the file: a folder holding no .litmus file",
            empty.path().display()
        )),
        "{err}"
    );
}

/// `--json` prints a line a script can read per test and a summary last, with the verdicts
/// the text gives and the same exit status: one passing test, one a broken protocol fails,
/// and a file that cannot be read.
#[test]
fn json_lines_carry_each_verdict_and_the_summary() {
    let missing = litmus_dir().join("no-such-test.litmus");
    let run = |protocol: &str| {
        let o = tessera(&[
            "litmus",
            "--runs",
            "40",
            "--json",
            "--protocol",
            protocol,
            "--coherence",
            "write-home",
            &shipped("SB"),
            &shipped("CoWW"),
            &missing.to_string_lossy(),
        ]);
        let (out, err) = text(&o);
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{out}")))
            .collect();
        (o.status.code(), lines, err)
    };
    let (code, lines, err) = run("correct");
    assert_eq!(code, Some(1), "the missing file fails the run: {err}");
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (l, name) in lines.iter().zip(["SB", "CoWW"]) {
        assert_eq!(l["test"], name, "{l}");
        assert_eq!(l["passed"], true, "{l}");
        assert_eq!(l["runs"], 40, "{l}");
        assert_eq!(l["forbidden"], serde_json::json!([]), "{l}");
        let counted: u64 = l["histogram"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["count"].as_u64().unwrap())
            .sum();
        assert_eq!(counted, 40, "{l}");
        assert_eq!(l["protocol"], "correct");
    }
    assert!(lines[2]["error"].as_str().unwrap().contains("no-such-test"));
    let summary = &lines[3]["summary"];
    assert_eq!(summary["files"], 3, "{summary}");
    assert_eq!(summary["passed"], 2, "{summary}");
    assert_eq!(summary["failed"], serde_json::json!([]), "{summary}");
    assert_eq!(summary["not_run"].as_array().unwrap().len(), 1, "{summary}");

    let (code, lines, _) = run("skip-write-back");
    assert_eq!(code, Some(1));
    let sb = &lines[0];
    assert_eq!(sb["passed"], false, "{sb}");
    assert!(!sb["forbidden"].as_array().unwrap().is_empty(), "{sb}");
    assert_eq!(lines[3]["summary"]["failed"], serde_json::json!(["SB"]));
}
