//! Nothing is written unless the run succeeds: a run that fails, in any of the ways a newcomer
//! hit (a bad page size, a bad budget, an existing home file, an adapter that does not exist,
//! a text file given as a pk3), leaves `--out` as it was, with no partial folder beside it;
//! results already in `--out` are refused without `--force` and replaced with it (never the
//! folder the command runs in); and an interrupted run (SIGINT) leaves nothing either, its
//! home file included.

mod common;

#[cfg(unix)]
use common::interrupt;
use common::{argv, listing, stderr, tessera, wait_until};

use std::process::{Command, Stdio};

#[test]
fn a_failed_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_s = out.to_str().unwrap();
    let home = dir.path().join("home.bin");
    std::fs::write(&home, b"already here").unwrap();
    let pk3 = dir.path().join("notes.pk3");
    std::fs::write(&pk3, b"just text, not a zip").unwrap();
    let before = listing(dir.path());
    let boiling = |extra: &[&str]| {
        let mut a = vec![
            "run", "boiling", "--size", "128", "--frames", "2", "--out", out_s,
        ];
        a.extend_from_slice(extra);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    // Exit 2: a bad option value, refused as clap refuses any (a usage error); exit 1: a run
    // that failed. Either way nothing is written.
    let cases: Vec<(Vec<String>, &str, i32)> = vec![
        (boiling(&["--page", "30"]), "not a power of two", 2),
        (boiling(&["--page", "1024"]), "larger than 512", 2),
        (boiling(&["--frames", "0"]), "--frames", 2),
        (
            boiling(&["--devices", "0"]),
            "device count between 1 and 64",
            2,
        ),
        (
            boiling(&["--page", "32", "--budget-mib", "0.001"]),
            "too small",
            1,
        ),
        // The folders above an `--out` that does not exist yet are made for the results,
        // and go again with a run that fails, after the run started or before.
        (
            [
                argv("run boiling --size 128 --frames 2 --page 32 --budget-mib 0.001 --out"),
                vec![dir.path().join("a/b/out").to_str().unwrap()],
            ]
            .concat()
            .into_iter()
            .map(String::from)
            .collect(),
            "too small",
            1,
        ),
        (
            [
                argv("bench oversubscription --size 64 --page 128 --out"),
                vec![dir.path().join("c/out").to_str().unwrap()],
            ]
            .concat()
            .into_iter()
            .map(String::from)
            .collect(),
            "larger than the 64x64 field",
            2,
        ),
        (
            boiling(&["--page", "32", "--home-file", home.to_str().unwrap()]),
            "already exists",
            2,
        ),
        (
            boiling(&[
                "--home-file",
                dir.path().join("no/such/folder/h.bin").to_str().unwrap(),
            ]),
            "does not exist",
            2,
        ),
        (
            boiling(&["--home-file", ""]),
            "an empty path names no file",
            2,
        ),
        (
            [
                "run",
                "quake",
                "--pak-dir",
                dir.path().to_str().unwrap(),
                "--map",
                "notes",
                "--out",
                out_s,
            ]
            .map(String::from)
            .to_vec(),
            "not a readable pk3",
            1,
        ),
    ];
    for (args, message, code) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = tessera(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).to_lowercase().contains(message),
            "{args:?}: {message:?} not in {}",
            stderr(&o)
        );
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        assert_eq!(
            listing(dir.path()),
            before,
            "{args:?} left something behind"
        );
    }
    // An adapter that does not exist fails after clap has accepted everything.
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run",
            "boiling",
            "--backend",
            "wgpu",
            "--size",
            "64",
            "--page",
            "32",
        ])
        .args(["--frames", "1", "--out", out_s])
        .env("TESSERA_ADAPTER", "nosuchgpu")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("\"nosuchgpu\""), "{}", stderr(&o));
    assert_eq!(
        listing(dir.path()),
        before,
        "a missing adapter left something behind"
    );
}

#[test]
fn earlier_results_are_refused_without_force_and_replaced_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = |frames: &str, force: bool| {
        let mut a = [
            argv("run boiling --size 64 --page 32 --frames"),
            vec![frames],
            argv("--gif-every 0 --out"),
            vec![out.to_str().unwrap()],
        ]
        .concat();
        if force {
            a.push("--force");
        }
        tessera(&a)
    };
    let first = run("1", false);
    assert!(first.status.success(), "{}", stderr(&first));
    let report = std::fs::read(out.join("report.json")).unwrap();
    let again = run("2", false);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("--force"), "{}", stderr(&again));
    assert_eq!(std::fs::read(out.join("report.json")).unwrap(), report);
    // A failing forced run keeps the earlier results too.
    let failing = tessera(
        &[
            argv("run boiling --size 64 --page 30 --out"),
            vec![out.to_str().unwrap()],
            argv("--force"),
        ]
        .concat(),
    );
    assert_eq!(failing.status.code(), Some(2));
    assert_eq!(std::fs::read(out.join("report.json")).unwrap(), report);
    let forced = run("2", true);
    assert!(forced.status.success(), "{}", stderr(&forced));
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["frames"], 2, "{r}");
    // Messages name the results where they end up, not the partial folder.
    let said = String::from_utf8_lossy(&forced.stdout);
    assert!(
        said.contains(&format!("wrote {}", out.join("report.json").display())),
        "{said}"
    );
    assert!(!said.contains("partial"), "{said}");
    assert_eq!(listing(dir.path()), vec!["out".to_string()]);
}

/// `--out DIR/.` is the folder DIR: the run writes into it, and `--force` replaces what it
/// held only once the new results are there. Replacing `DIR/.` had emptied DIR and then failed.
#[test]
fn an_out_ending_in_a_dot_is_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d");
    std::fs::create_dir(&d).unwrap();
    let dotted = format!("{}/.", d.display());
    let run = |force: bool| {
        let mut a = [
            argv("run stencil --size 16 --page 8 --halo 2 --frames 1 --out"),
            vec![dotted.as_str()],
        ]
        .concat();
        if force {
            a.push("--force");
        }
        tessera(&a)
    };
    let first = run(false);
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(d.join("report.json").is_file());
    std::fs::write(d.join("mine"), b"earlier").unwrap();
    let refused = run(false);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert_eq!(std::fs::read(d.join("mine")).unwrap(), b"earlier");
    let forced = run(true);
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(d.join("report.json").is_file());
    assert!(!d.join("mine").exists());
    assert_eq!(listing(dir.path()), vec!["d".to_string()]);
    // `new/../e` is `e`: no empty `new` is left beside it.
    let through = format!("{}/new/../e", dir.path().display());
    let r = tessera(
        &[
            argv("run stencil --size 16 --page 8 --halo 2 --frames 1 --out"),
            vec![through.as_str()],
        ]
        .concat(),
    );
    assert!(r.status.success(), "{}", stderr(&r));
    assert_eq!(listing(dir.path()), vec!["d".to_string(), "e".to_string()]);
}

/// `run quake --trace FILE` writes the trace only when the whole command succeeds, and refuses
/// before the run a path it could not take: one inside `--out` (replaced whole by the commit),
/// a folder, or a file in a folder that does not exist.
#[test]
fn a_trace_is_written_with_the_results_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let quake_forced = |trace: &std::path::Path, force: bool| {
        tessera(
            &[
                if force { vec!["--force"] } else { vec![] },
                argv("run quake --page 8 --frames 2 --width 32 --height 16 --png-every 0 --out"),
                vec![out.to_str().unwrap(), "--trace", trace.to_str().unwrap()],
            ]
            .concat(),
        )
    };
    let quake = |trace: &std::path::Path| quake_forced(trace, false);
    let folder = dir.path().join("tdir");
    std::fs::create_dir(&folder).unwrap();
    for (trace, why) in [
        (out.join("t.bin"), "inside --out"),
        (folder.clone(), "is a folder"),
        (dir.path().join("none/t.bin"), "does not exist"),
    ] {
        let r = quake(&trace);
        assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
        assert!(stderr(&r).contains(why), "{}", stderr(&r));
        assert_eq!(listing(dir.path()), vec!["tdir".to_string()]);
    }
    let trace = dir.path().join("t.bin");
    std::fs::write(&trace, b"old trace").unwrap();
    // An earlier trace without --force: refused (exit 2) as --out's results are, and kept.
    let kept = quake(&trace);
    assert_eq!(kept.status.code(), Some(2), "{}", stderr(&kept));
    assert!(
        stderr(&kept).contains("exists; pass --force to replace it when this run succeeds"),
        "{}",
        stderr(&kept)
    );
    assert_eq!(std::fs::read(&trace).unwrap(), b"old trace");
    // Earlier results in --out without --force: refused (exit 2), and no trace appears.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine"), b"x").unwrap();
    let fresh = dir.path().join("t2.bin");
    let refused = quake(&fresh);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("holds"), "{}", stderr(&refused));
    assert!(!fresh.exists());
    std::fs::remove_dir_all(&out).unwrap();
    let ok = quake_forced(&trace, true);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert_ne!(std::fs::read(&trace).unwrap(), b"old trace");
    assert_eq!(
        listing(dir.path()),
        vec!["o".to_string(), "t.bin".to_string(), "tdir".to_string()]
    );
}

/// `trace replay --csv FILE` and `run quake --trace FILE` name files outside `--out`: they
/// are written only when the command succeeds, never onto the file the command reads, a
/// device, a path ending in a slash, or a path inside `--out`; nothing a refused or failed
/// command names is touched.
#[cfg(unix)]
#[test]
fn a_file_named_by_an_option_is_written_only_on_success() {
    use tessera_workloads::quake::trace::Trace;
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    let s = |name: &str| p(name).to_str().unwrap().to_string();
    let trace = s("t.bin");
    let recorded = tessera(
        &[
            argv("run quake --page 8 --frames 2 --width 32 --height 16 --png-every 0 --out"),
            vec![&s("q"), "--trace", &trace],
        ]
        .concat(),
    );
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    // The same trace with one recorded request count changed: its replay disagrees (exit 1).
    let mut wrong = Trace::read(&p("t.bin")).unwrap();
    wrong.frames[0][0].requests += 1;
    std::fs::write(p("wrong.bin"), wrong.encode()).unwrap();
    std::fs::write(p("old.csv"), b"old").unwrap();
    std::fs::create_dir(p("r")).unwrap();
    std::fs::write(p("r/mine"), b"mine").unwrap();
    let before = listing(dir.path());
    let original = std::fs::read(p("t.bin")).unwrap();
    let cases: [(Vec<String>, i32, &str); 8] = [
        (
            vec![
                "--force".into(),
                "trace".into(),
                "replay".into(),
                s("wrong.bin"),
                "--csv".into(),
                s("old.csv"),
            ],
            1,
            "the recorded run made",
        ),
        // A sweep through the recorded page size checks that point as a single replay does.
        (
            vec![
                "--force".into(),
                "trace".into(),
                "replay".into(),
                s("wrong.bin"),
                "--pages".into(),
                "4,8".into(),
                "--out".into(),
                s("r"),
            ],
            1,
            "the recorded run made",
        ),
        (
            vec![
                "trace".into(),
                "replay".into(),
                trace.clone(),
                "--csv".into(),
                s("old.csv"),
            ],
            2,
            "exists; pass --force to replace it when this run succeeds",
        ),
        (
            vec![
                "trace".into(),
                "replay".into(),
                trace.clone(),
                "--csv".into(),
                trace.clone(),
            ],
            2,
            "is the file this command reads",
        ),
        (
            vec![
                "trace".into(),
                "replay".into(),
                trace.clone(),
                "--csv".into(),
                "/dev/null".into(),
            ],
            2,
            "not a plain file",
        ),
        (
            vec![
                "trace".into(),
                "replay".into(),
                trace.clone(),
                "--csv".into(),
                format!("{}/", s("new")),
            ],
            2,
            "names no file",
        ),
        (
            vec![
                "--force".into(),
                "trace".into(),
                "replay".into(),
                trace.clone(),
                "--out".into(),
                s("r"),
                "--csv".into(),
                s("r/x.csv"),
            ],
            2,
            "inside --out",
        ),
        (
            vec![
                "--force".into(),
                "run".into(),
                "quake".into(),
                "--frames".into(),
                "1".into(),
                "--width".into(),
                "32".into(),
                "--height".into(),
                "16".into(),
                "--out".into(),
                s("r"),
                "--trace".into(),
                format!("{}/", s("new")),
            ],
            2,
            "names no file",
        ),
    ];
    for (args, code, why) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = tessera(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{args:?}: {}", stderr(&o));
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("wrote"),
            "{args:?}"
        );
        assert_eq!(listing(dir.path()), before, "{args:?}");
        assert_eq!(std::fs::read(p("old.csv")).unwrap(), b"old", "{args:?}");
        assert_eq!(std::fs::read(p("r/mine")).unwrap(), b"mine", "{args:?}");
        assert_eq!(std::fs::read(p("t.bin")).unwrap(), original, "{args:?}");
    }
    let ok = tessera(&["--force", "trace", "replay", &trace, "--csv", &s("old.csv")]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    let said = String::from_utf8_lossy(&ok.stdout);
    assert!(
        said.ends_with(&format!("wrote {}\n", s("old.csv"))),
        "{said}"
    );
    let csv = std::fs::read_to_string(p("old.csv")).unwrap();
    assert!(csv.starts_with("frame,device,texture_requests\n"), "{csv}");
}

#[cfg(unix)]
#[test]
fn an_interrupted_run_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let home = dir.path().join("home.bin");
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run", "boiling", "--size", "256", "--page", "32", "--frames", "100000",
        ])
        .args(["--gif-every", "1", "--out", out.to_str().unwrap()])
        // Created fresh by the run (and `.isolated` beside it): gone with the interrupt too.
        .args(["--home-file", home.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the run is writing (its partial folder holds the GIF it streams).
    wait_until("the run writing", || {
        listing(dir.path()).iter().any(|n| {
            n.contains("partial")
                && std::fs::read_dir(dir.path().join(n)).is_ok_and(|mut d| d.next().is_some())
        })
    });
    let o = interrupt(child);
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

/// An interrupt while `--force` replaces earlier results waits for the replacement to finish:
/// the new results are whole in `--out`, the earlier ones gone, nothing hidden is left beside
/// it, and the message says the results were in place. (The handler used to run beside the
/// commit: here it left the earlier results half removed in a hidden folder.) Many earlier
/// files make the removal long enough to be caught.
#[cfg(unix)]
#[test]
fn an_interrupt_during_the_replacement_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for i in 0..40_000 {
        std::fs::write(out.join(format!("old-{i}")), b"").unwrap();
    }
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(argv(
            "--force run boiling --size 16 --page 8 --frames 1 --gif-every 0 --out",
        ))
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("moving the earlier results aside", || {
        listing(dir.path()).iter().any(|n| n.contains("replaced"))
    });
    let o = interrupt(child);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        err.contains(&format!(
            "interrupted, after the results were in place in {}",
            out.display()
        )),
        "{err}"
    );
    assert_eq!(listing(dir.path()), vec!["out".to_string()]);
    let new = listing(&out);
    assert!(new.contains(&"report.json".to_string()), "{new:?}");
    assert!(new.iter().all(|n| !n.starts_with("old-")), "{new:?}");
}

/// A run killed outright (SIGKILL, the out-of-memory killer) leaves its partial folder: the
/// next run for the same `--out` names it, leaves it for the user to remove (another machine
/// may be writing it), and writes its own results.
#[cfg(target_os = "linux")]
#[test]
fn a_partial_folder_a_killed_run_left_is_named_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    // Above the kernel's largest process id (2^22): no process has it.
    let left = dir.path().join(".out.partial-4194399");
    std::fs::create_dir(&left).unwrap();
    std::fs::write(left.join("frames.gif"), b"half a GIF").unwrap();
    // Another command's, and one whose process is alive (this test's): not named.
    std::fs::create_dir(dir.path().join(".other.partial-4194399")).unwrap();
    let alive = dir
        .path()
        .join(format!(".out.partial-{}", std::process::id()));
    std::fs::create_dir(&alive).unwrap();
    let out = dir.path().join("out");
    let boil = |force: &'static str| {
        let o = tessera(
            &[
                argv(force),
                argv("run boiling --size 16 --page 8 --frames 1 --gif-every 0 --out"),
                vec![out.to_str().unwrap()],
            ]
            .concat(),
        );
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let err = boil("");
    assert!(
        err.contains(&format!(
            "note: {} was left by a run that did not finish (process 4194399 is gone",
            left.display()
        )),
        "{err}"
    );
    assert_eq!(err.matches("was left by a run").count(), 1, "{err}");
    assert!(left.join("frames.gif").exists());
    assert!(out.join("report.json").exists());
    // Earlier results a run killed while replacing them had moved aside, and the partial
    // folder an interrupted run renamed before removing it: named too, and kept.
    let aside = dir.path().join(".out.replaced-4194398");
    std::fs::create_dir(&aside).unwrap();
    std::fs::write(aside.join("report.json"), b"{}").unwrap();
    let renamed = dir.path().join(".out.partial-4194397.interrupted");
    std::fs::create_dir(&renamed).unwrap();
    let err = boil("--force");
    assert!(
        err.contains(&format!(
            "note: {} holds earlier results that a run moved aside to replace them, then could not remove or was killed before it did (process 4194398 is gone",
            aside.display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "note: {} was left by a run that did not finish (process 4194397",
            renamed.display()
        )),
        "{err}"
    );
    assert!(aside.join("report.json").exists() && renamed.exists());
}

/// `--force` replaces `--out` whole, so an `--out` that is the folder the command runs in, or
/// one above it, is refused: the files beside the user's results stay.
#[test]
fn force_never_replaces_the_folder_it_runs_in() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("work");
    std::fs::create_dir(&here).unwrap();
    std::fs::write(here.join("precious.txt"), b"mine").unwrap();
    for out in [here.clone(), dir.path().to_path_buf()] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(argv(
                "run boiling --size 16 --page 8 --frames 1 --gif-every 0 --force --out",
            ))
            .arg(&out)
            .current_dir(&here)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("current folder"), "{}", stderr(&o));
        assert_eq!(listing(&here), ["precious.txt"]);
    }
}

/// The results are a folder moved into place, so `--out` never names the folder the command
/// runs in, even empty: a usage error, and the folder is left as it was. (`--out .` was exit 1;
/// `--out "$PWD"` replaced the folder, leaving the shell in one that was gone.)
#[test]
fn out_is_never_the_current_folder() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("work");
    std::fs::create_dir(&here).unwrap();
    let modified = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.modified().unwrap()).ok();
    let before = modified(&here);
    for out in [".".into(), here.clone(), here.join("sub/..")] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(argv(
                "run boiling --size 16 --page 8 --frames 1 --gif-every 0 --out",
            ))
            .arg(&out)
            .current_dir(&here)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{out:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is the current folder"),
            "{}",
            stderr(&o)
        );
        assert!(listing(&here).is_empty(), "{:?}", listing(&here));
        assert_eq!(listing(dir.path()), ["work"]);
        assert_eq!(modified(&here), before);
    }
}

/// A link as `--out`, to a folder or to nothing, is refused before the run (the results folder
/// renamed onto it had replaced the user's link with a folder, or failed at the end of the
/// run); a folder above the current one is named as such.
#[test]
fn out_is_never_a_link_nor_a_folder_above() {
    let dir = tempfile::tempdir().unwrap();
    let here = dir.path().join("work");
    let target = dir.path().join("target");
    std::fs::create_dir(&here).unwrap();
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, here.join("live")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nowhere"), here.join("dangling")).unwrap();
    let run = |out: &str, force: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tessera"));
        c.args(argv(
            "run boiling --size 16 --page 8 --frames 1 --gif-every 0 --out",
        ))
        .arg(out)
        .current_dir(&here);
        if force {
            c.arg("--force");
        }
        c.output().unwrap()
    };
    for (out, force) in [("live", false), ("live", true), ("dangling", false)] {
        let o = run(out, force);
        assert_eq!(o.status.code(), Some(2), "{out}: {}", stderr(&o));
        assert!(stderr(&o).contains("is a link"), "{}", stderr(&o));
        assert!(here
            .join(out)
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
    }
    assert!(listing(&target).is_empty());
    let o = run("..", false);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is a folder above the current one"),
        "{}",
        stderr(&o)
    );
    let mut names = listing(&here);
    names.sort();
    assert_eq!(names, ["dangling", "live"]);
}

/// `--force` replaces `--out` whole, so a file the command reads from inside it (a
/// topology here; a trace or a pak folder alike) is refused before the run, and kept.
#[test]
fn force_never_replaces_a_folder_holding_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_s = out.to_str().unwrap();
    let boiling = |extra: &[&str]| {
        let mut a = argv("run boiling --size 16 --page 8 --frames 1 --gif-every 0 --devices 1");
        a.extend_from_slice(extra);
        a.extend(["--out", out_s]);
        tessera(&a)
    };
    let first = boiling(&[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let topo = out.join("topo.toml");
    // A topology the run would take, so that without the check it would succeed and the
    // commit would take the file with the earlier results.
    let toml = "[[device]]\nid = 0\n[[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 16\n";
    std::fs::write(&topo, toml).unwrap();
    let before = listing(&out);
    let forced = boiling(&["--topology", topo.to_str().unwrap(), "--force"]);
    assert_eq!(forced.status.code(), Some(2), "{}", stderr(&forced));
    let err = stderr(&forced);
    assert!(
        err.contains("--topology") && err.contains("inside --out"),
        "{err}"
    );
    assert_eq!(listing(&out), before);
    assert_eq!(std::fs::read_to_string(&topo).unwrap(), toml);
    // A link inside --out to a file outside goes with the folder as well: refused, and kept.
    let beside = dir.path().join("topo.toml");
    std::fs::write(&beside, toml).unwrap();
    std::fs::remove_file(&topo).unwrap();
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&beside, &topo).unwrap();
        let before = listing(&out);
        let forced = boiling(&["--topology", topo.to_str().unwrap(), "--force"]);
        assert_eq!(forced.status.code(), Some(2), "{}", stderr(&forced));
        assert!(
            stderr(&forced).contains("inside --out"),
            "{}",
            stderr(&forced)
        );
        assert_eq!(listing(&out), before);
        assert!(std::fs::symlink_metadata(&topo).is_ok());
        std::fs::remove_file(&topo).unwrap();
    }
    // Outside --out, the same file runs.
    let ok = boiling(&["--topology", beside.to_str().unwrap(), "--force"]);
    assert!(ok.status.success(), "{}", stderr(&ok));
}

/// A pak folder given as `--out` itself, or a `--trace` written into the pak folder, would
/// replace the game files the run reads: `--force --pak-dir pk --out pk` had exited 0 with the
/// pk3 gone, and `--trace pk/pak0.pk3` had overwritten a pk3. Both are refused (exit 2) before
/// the run, and the pk3 is kept. A generated scene reads no pak, so without the checks both
/// runs would succeed.
#[test]
fn force_never_replaces_the_pak_folder_or_a_pak_file() {
    let dir = tempfile::tempdir().unwrap();
    let pk = dir.path().join("pk");
    std::fs::create_dir(&pk).unwrap();
    let pk3 = pk.join("pak0.pk3");
    std::fs::write(&pk3, b"the game's files").unwrap();
    let pk_s = pk.to_str().unwrap();
    let quake = |extra: &[&str]| {
        let mut a = argv("run quake --scene generated --frames 1 --width 32 --height 24 --force");
        a.extend(["--pak-dir", pk_s]);
        a.extend_from_slice(extra);
        tessera(&a)
    };
    let as_out = quake(&["--out", pk_s]);
    assert_eq!(as_out.status.code(), Some(2), "{}", stderr(&as_out));
    assert!(
        stderr(&as_out).contains("--pak-dir") && stderr(&as_out).contains("or is that folder"),
        "{}",
        stderr(&as_out)
    );
    let out = dir.path().join("out");
    let trace = quake(&[
        "--trace",
        pk3.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(trace.status.code(), Some(2), "{}", stderr(&trace));
    assert!(
        stderr(&trace).contains("a folder this command reads"),
        "{}",
        stderr(&trace)
    );
    assert!(!out.exists());
    assert_eq!(listing(&pk), ["pak0.pk3"]);
    assert_eq!(std::fs::read(&pk3).unwrap(), b"the game's files");
}

/// Left to its default, `--out` is `out/<command>`: runs gather under `out/`.
#[test]
fn the_default_out_is_out_slash_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run",
            "boiling",
            "--size",
            "32",
            "--page",
            "8",
            "--frames",
            "1",
            "--gif-every",
            "0",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("out/boiling/report.json").exists());
    assert_eq!(listing(&dir.path().join("out")), ["boiling"]);
}

/// Standard output that fails is not a panic. A reader that goes away (`| head -1`) only stops
/// the printing: the run still writes its results. A full one (`> /dev/full`) fails the run
/// with a message and exit status 1, and nothing is written, since a script reading the lines
/// would get them cut short.
#[test]
fn a_closed_or_full_standard_output_is_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &std::path::Path, stdout: Stdio| {
        Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(argv("run boiling --size 64 --page 8 --frames 3 --out"))
            .arg(out)
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("the binary runs")
    };
    // The pipe's reading end is closed before the child writes its first line.
    let closed = dir.path().join("closed");
    let mut child = run(&closed, Stdio::piped());
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(closed.join("report.json").is_file());

    if std::path::Path::new("/dev/full").exists() {
        let full = dir.path().join("full");
        let dev_full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = run(&full, Stdio::from(dev_full))
            .wait_with_output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(err.contains("cannot write to standard output"), "{err}");
        assert!(!full.exists(), "a failed run writes nothing");
    }
    assert_eq!(listing(dir.path()), vec!["closed".to_string()]);
}
