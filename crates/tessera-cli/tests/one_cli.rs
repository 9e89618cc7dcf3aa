//! One vocabulary across commands: `--split` on every workload, `--scene` on vr, `--verify`
//! against each workload's unpaged reference, options a command cannot honour refused as
//! usage errors, and values checked where they are parsed.

mod common;

use common::{argv, listing, ok, refused, report, stderr, stdout, tessera};

/// A small boiling run, without its `--out`.
fn boiling() -> Vec<&'static str> {
    argv("run boiling --size 32 --page 8 --frames 2 --gif-every 0")
}

fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(extra).copied().collect()
}

/// Each case (extra words, exit status, what the message names) added to `base` with
/// `--out out` is refused.
fn refused_each(base: &[&str], out: &str, cases: &[(&str, i32, &str)]) {
    for &(extra, code, says) in cases {
        refused(
            &with(&with(base, &argv(extra)), &["--out", out]),
            code,
            says,
        );
    }
}

#[test]
fn split_is_the_option_everywhere_and_partition_still_works() {
    for cmd in [
        &["run", "boiling"][..],
        &["run", "raytrace"],
        &["run", "quake"],
        &["run", "stencil"],
        &["run", "convolution"],
        &["sweep", "page-size"],
        &["sweep", "devices"],
        &["sweep", "stencil"],
        &["sweep", "convolution"],
        &["bench", "scaling"],
    ] {
        let help = ok(&with(cmd, &["--help"]));
        assert!(help.contains("--split"), "{cmd:?}: {help}");
        assert!(!help.contains("--partition"), "{cmd:?}: {help}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut sums = Vec::new();
    for (flag, out) in [("--split", "a"), ("--partition", "b")] {
        let out = dir.path().join(out);
        ok(&with(
            &boiling(),
            &[
                flag,
                "cols",
                "--devices",
                "2",
                "--out",
                out.to_str().unwrap(),
            ],
        ));
        let r = report(&out);
        assert_eq!(r["split"], "cols", "{flag}");
        sums.push(r["checksum"].clone());
    }
    assert_eq!(sums[0], sums[1]);
    let out = dir.path().join("ray");
    ok(&[argv("run raytrace --scene generated:1 --width 24 --height 16 --page 8 --devices 2 --split cols --out"), vec![out.to_str().unwrap()]].concat());
    assert_eq!(report(&out)["split"], "cols");
    refused(
        &with(&boiling(), &["--split", "diagonal"]),
        2,
        "invalid value 'diagonal' for '--split",
    );
}

const VR: [&str; 12] = [
    "run", "vr", "--frames", "1", "--warmup", "0", "--width", "24", "--height", "16", "--page", "8",
];

#[test]
fn vr_takes_a_scene_as_the_other_workloads_do() {
    let dir = tempfile::tempdir().unwrap();
    let mut sums = Vec::new();
    for (i, scene) in [&["--scene", "generated:1"][..], &["--generated", "1"]]
        .iter()
        .enumerate()
    {
        let out = dir.path().join(i.to_string());
        ok(&with(&with(&VR, scene), &["--out", out.to_str().unwrap()]));
        let r = report(&out);
        assert_eq!(r["scene"], "generated:1");
        sums.push(r["checksum"].clone());
    }
    assert_eq!(sums[0], sums[1]);
    let out = dir.path().join("bad");
    let out = out.to_str().unwrap();
    refused_each(
        &VR,
        out,
        &[
            ("", 2, "--scene"),
            ("--scene cave", 2, "unknown scene"),
            ("--scene generated:1 --map oa_dm1", 2, "cannot be used with"),
            ("--scene generated:1 --link-gbps 0", 2, "--link-gbps"),
            // The older spelling has the same bound: a huge room ran out of memory.
            ("--generated 65", 2, "0..=64"),
        ],
    );
    assert!(!dir.path().join("bad").exists());
}

/// The game trace takes the scenes the other workloads take: `generated:N`, and a map as
/// `openarena:MAP` or its shorthand `--map MAP`, which render the same frames.
#[test]
fn quake_takes_a_scene_as_the_other_workloads_do() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    common::write_pk3(dir.path(), "pak0.pk3", 1, None, &[]);
    let quake = argv("run quake --frames 2 --width 32 --height 24 --page 8");
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        ok(&with(
            &with(&quake, extra),
            &["--out", out.to_str().unwrap()],
        ));
        report(&out)
    };
    let boxes = run("boxes", &["--scene", "generated:1"]);
    let room = run("room", &[]);
    let map = run("map", &["--scene", "openarena:generated-1", "--pak-dir", d]);
    let short = run("short", &["--map", "generated-1", "--pak-dir", d]);
    assert_eq!(boxes["scene"], "generated:1");
    assert_eq!(room["scene"], "generated");
    assert_eq!(map["scene"], "openarena:generated-1");
    assert_eq!(map["checksum"], short["checksum"]);
    assert_ne!(boxes["checksum"], room["checksum"]);
    let bad = dir.path().join("bad");
    let bad = bad.to_str().unwrap();
    let missing = format!("--scene openarena:nosuchmap --pak-dir {d}");
    refused_each(
        &quake,
        bad,
        &[
            ("--scene cave", 2, "unknown scene"),
            ("--scene generated:1 --map x", 2, "cannot be used with"),
            (&missing, 1, "nosuchmap"),
        ],
    );
    assert!(!dir.path().join("bad").exists());
}

/// Every workload's `--verify` compares with its unpaged reference and says so.
#[test]
fn every_workload_verifies_against_its_unpaged_reference() {
    let dir = tempfile::tempdir().unwrap();
    let runs: [(&str, Vec<&str>, &str); 6] = [
        (
            "boiling",
            with(&boiling(), &["--devices", "3"]),
            "bit for bit",
        ),
        (
            "quake",
            argv("run quake --frames 2 --width 32 --height 24 --png-every 0"),
            "pixel for pixel",
        ),
        (
            "vr",
            with(&VR, &["--scene", "generated:1"]),
            "pixel for pixel",
        ),
        (
            "raytrace",
            argv("run raytrace --scene generated:1 --width 24 --height 16 --page 8 --devices 2 --budget-mib 0.05"),
            "pixel for pixel",
        ),
        (
            "stencil",
            vec![
                "run", "stencil", "--size", "16", "--halo", "2", "--page", "8", "--steps", "1",
            ],
            "bit for bit",
        ),
        (
            "convolution",
            argv("run convolution --size 32 --filter 3 --page 8 --frames 1"),
            "bit for bit",
        ),
    ];
    for (name, args, how) in runs {
        let out = dir.path().join(name);
        let printed = ok(&with(&args, &["--verify", "--out", out.to_str().unwrap()]));
        assert!(
            printed.contains("verified: equals") && printed.contains(how),
            "{name}: {printed}"
        );
        assert!(out.join("report.json").exists(), "{name}");
    }
}

/// A field that differs from the reference (a protocol broken on purpose) fails the run with
/// exit 1 and writes nothing.
#[test]
fn a_verify_failure_exits_1_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for args in [
        with(&boiling(), &["--devices", "3"]),
        vec![
            "run", "stencil", "--size", "16", "--halo", "2", "--page", "8", "--steps", "2",
        ],
    ] {
        let broken = with(
            &args,
            &["--protocol", "skip-invalidation", "--verify", "--out", o],
        );
        let err = refused(&broken, 1, "--verify: the field differs");
        assert!(!out.exists(), "{args:?}: {err}");
        assert_eq!(listing(dir.path()), Vec::<String>::new(), "{args:?}");
        // Without --verify the same broken run succeeds: the check is what failed it.
        let run = tessera(&with(
            &args,
            &["--protocol", "skip-invalidation", "--out", o],
        ));
        assert!(run.status.success(), "{}", stderr(&run));
        std::fs::remove_dir_all(&out).unwrap();
    }
}

#[test]
fn halo_runs_honour_coherence_and_deferred() {
    let dir = tempfile::tempdir().unwrap();
    // Devices with links of their own: owned pages move a neighbour's read over them, where
    // write-home also sends the page up the owner's host link. (Behind PCIe alone both cross
    // that link once: the read is taken from the home copy the write-back made.)
    let stencil = [
        "run",
        "stencil",
        "--size",
        "16",
        "--halo",
        "2",
        "--page",
        "8",
        "--steps",
        "2",
        "--verify",
        "--topology",
        "nvlink",
    ];
    let moved = |coherence: &str| {
        let out = dir.path().join(coherence);
        ok(&with(
            &stencil,
            &["--coherence", coherence, "--out", out.to_str().unwrap()],
        ));
        let r = report(&out);
        let to_host: f64 = r["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["link"].as_str().unwrap().ends_with("host"))
            .map(|l| l["pages_per_frame"].as_f64().unwrap())
            .sum();
        (to_host, r["checksum"].clone())
    };
    let (owned, a) = moved("owned");
    let (write_home, b) = moved("write-home");
    assert_eq!(a, b);
    // Write-home sends every modified page a neighbour reads home; owned keeps it.
    assert!(write_home > owned, "write-home {write_home}, owned {owned}");
    for deferred in ["on", "off"] {
        let out = dir.path().join(format!("deferred-{deferred}"));
        let printed = ok(&with(
            &stencil,
            &[
                "--devices",
                "1",
                "--deferred",
                deferred,
                "--out",
                out.to_str().unwrap(),
            ],
        ));
        assert!(printed.contains("verified: equals"), "{printed}");
    }
}

#[test]
fn options_a_command_cannot_honour_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let nodes = with(&boiling(), &["--devices-per-node", "1", "--out", o]);
    for (extra, needle) in [
        (&["--deferred", "on"][..], "--deferred does not apply"),
        (&["--deferred", "off"], "--deferred does not apply"),
        (
            &["--staging", "on"],
            "--staging on is not built across nodes",
        ),
        (&["--home-file", "h.bin"], "--home-file does not apply"),
        // The devices are the processes times --devices-per-node: it had been ignored.
        (&["--devices", "3"], "--devices does not apply"),
        // Rank 0 writes report.json and frame.png only: these were silently not written.
        (
            &["--residency-png"],
            "--residency-png is not drawn across nodes",
        ),
        // A run over nodes is measured: these were accepted and had no effect.
        (&["--model", "concurrent"], "--model does not apply"),
        (
            &["--topology", "pcie1-x16"],
            "--topology takes a file with a [network] table",
        ),
    ] {
        refused(&with(&nodes, extra), 2, needle);
    }
    refused(
        &with(
            &argv("run boiling --size 32 --page 8 --gif-every 2 --devices-per-node 1 --out"),
            &[o],
        ),
        2,
        "--gif-every is not written across nodes",
    );
    refused(
        &with(&boiling(), &["--devices-per-node", "0", "--out", o]),
        2,
        "not a device count",
    );
    // Options of runs over nodes, given to one process: they were accepted and ignored.
    for (extra, needle) in [
        (
            &["--home-block-pages", "4"][..],
            "--home-block-pages applies with --devices-per-node only",
        ),
        (
            &["--lost-after-s", "5"],
            "--lost-after-s applies with --devices-per-node only",
        ),
    ] {
        refused(&with(&with(&boiling(), &["--out", o]), extra), 2, needle);
    }
    for sweep in ["page-size", "devices"] {
        refused(
            &["sweep", sweep, "--workload", "raytrace", "--out", o],
            2,
            "bench oversubscription --workload raytrace",
        );
    }
    assert!(!out.exists());
}

/// `run boiling --devices-per-node` follows the rule of every command: an `--out` holding
/// results is refused without `--force`, before any process starts work.
#[test]
fn devices_per_node_refuses_an_out_with_results() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), b"earlier").unwrap();
    let o = dir.path().to_str().unwrap();
    refused(
        &with(&boiling(), &["--devices-per-node", "1", "--out", o]),
        2,
        "already holds files",
    );
    assert_eq!(listing(dir.path()), ["keep.txt"]);
    // With --force the check passes; this build then stops at MPI (or runs under it).
    let forced = tessera(&with(
        &boiling(),
        &["--devices-per-node", "1", "--force", "--out", o],
    ));
    assert!(!stderr(&forced).contains("already holds files"));
    assert_eq!(
        std::fs::read(dir.path().join("keep.txt")).unwrap(),
        b"earlier"
    );
}

#[test]
fn bad_values_are_usage_errors_naming_the_option() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let cases = [
        (
            "run boiling --devices-per-node 1 --lost-after-s 0",
            "--lost-after-s",
        ),
        // Shorter than a few heartbeats: every node would call the others lost.
        (
            "run boiling --devices-per-node 1 --lost-after-s 0.05",
            "less than 0.1",
        ),
        // A duration cannot hold it: every rank panicked converting it.
        (
            "run boiling --devices-per-node 1 --lost-after-s 1e20",
            "more than a day",
        ),
        (
            "run boiling --devices-per-node 1 --home-block-pages 0",
            "--home-block-pages",
        ),
        ("run boiling --budget-mib 0", "--budget-mib"),
        ("run quake --width 0", "--width"),
        ("run quake --height 4096", "--height"),
        ("run quake --frames 0", "--frames"),
        ("run raytrace --frames 0", "--frames"),
        ("run raytrace --devices 65", "--devices"),
        ("run raytrace --width 0", "--width"),
        ("run stencil --steps 0", "--frames"),
        ("run stencil --frames 0", "--frames"),
        ("run stencil --devices 0", "--devices"),
        ("run convolution --frames 0", "--frames"),
        ("bench overhead --size 0", "--size"),
        ("bench overhead --rounds 0", "--rounds"),
        ("bench scaling --frames 0", "--frames"),
        ("bench oversubscription --rounds 0", "--rounds"),
        ("sweep devices --frames 0", "--frames"),
        ("sweep page-size --size 9000", "--size"),
    ];
    // As `run boiling` bounds it, before the build is asked for MPI.
    for k in ["0", "65"] {
        refused(
            &["litmus", "--devices-per-node", k, "x.litmus"],
            2,
            "between 1 and 64",
        );
    }
    for (line, needle) in cases {
        let mut args = argv(line);
        if !line.starts_with("bench") || line.starts_with("bench oversubscription") {
            args.extend(["--out", o]);
        }
        refused(&args, 2, needle);
    }
    assert!(!out.exists());
    // A good value still runs: the parsers refuse only what is out of range.
    let printed = stdout(&tessera(&with(&boiling(), &["--out", o])));
    assert!(printed.contains("field_checksum="), "{printed}");
}

/// A value, or a combination of options, that a command cannot honour is a usage error (exit
/// 2) found before anything runs, whichever check finds it: clap's, the command's own, or a
/// library's that only settings raise. Each used to run up to its check and exit 1, and
/// `--network` on one node was silently ignored.
#[test]
fn settings_a_command_cannot_honour_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "run boiling --size 16 --page 64",
            "larger than the 16x16 field",
        ),
        (
            "run boiling --size 8 --page 8 --devices 16",
            "cannot split 8 rows",
        ),
        (
            "run boiling --size 32 --page 8 --topology foo",
            "unknown topology",
        ),
        (
            "run boiling --size 32 --page 8 --network ib-hdr",
            "--devices-per-node only",
        ),
        (
            "run boiling --size 32 --page 8 --network foo",
            "invalid value 'foo'",
        ),
        // Options that cannot go together point to the subcommand's own usage.
        (
            "run boiling --size 32 --page 8 --network ib-hdr",
            "Usage: tessera run boiling",
        ),
        (
            "run quake --border 1 --filter nearest",
            "Usage: tessera run quake",
        ),
        (
            "run raytrace --scene generated:1 --width 32 --height 4 --devices 8",
            "cannot split 4 rows between 8 devices",
        ),
        (
            "run quake --width 4 --height 32 --devices 8",
            "cannot split 4 columns between 8 devices",
        ),
        ("run boiling --size 32 --page 8 --budget-mib inf", "finite"),
        (
            "run boiling --size 32 --page 8 --budget-mib 1e-9",
            "at least a byte",
        ),
        ("run vr --scene generated:1 --link-gbps 1e300", "GB/s"),
        (
            "run quake --width 640 --height 8 --devices 65",
            "device count between 1 and 64",
        ),
        (
            "bench overhead --size 16 --page 64",
            "larger than the 16x16 field",
        ),
        ("run raytrace --ao-radius nan", "positive length"),
        ("run raytrace --ao-radius 1e39", "\"1e39\" is too large"),
        ("run raytrace --ao-samples 65", "0..=64"),
        ("run raytrace --instances 0", "1..=4096"),
        ("run vr --scene generated:1 --scheme foo", "unknown scheme"),
        ("run vr --scene generated:1 --width 0", "1..=2048"),
        ("run stencil --halo 0", "halo must be at least 1"),
        (
            "run stencil --size 4 --page 2 --devices 1 --halo 100",
            "halo 100 is more than the grid's 4 cells along z (use a larger grid or a smaller halo)",
        ),
        ("run stencil --size 513", "between 1 and 512"),
        ("run convolution --filter 1", "from 3 to 31"),
        (
            "run quake --path-frames 1 --frames 3",
            "shorter than --frames 3",
        ),
        (
            "bench oversubscription --workload raytrace --staging on",
            "boiling only",
        ),
        ("bench oversubscription --ratios inf", "not a finite number"),
    ];
    for (line, says) in cases {
        let mut args = argv(line);
        if line.starts_with("run") {
            args.extend(["--out", out]);
        }
        refused(&args, 2, says);
    }
    // A sweep's page sizes are all checked before the first runs; the trace file is not read.
    let trace = dir.path().join("none.bin");
    let trace = trace.to_str().unwrap();
    refused(
        &["trace", "replay", trace, "--pages", "8,4,3"],
        2,
        "power of two",
    );
    refused(&["trace", "replay", trace, "--page", "2"], 2, "4 or more");
    // A list that names an entry twice is refused, as the doubling lists are.
    refused(
        &["trace", "replay", trace, "--pages", "8,16,8"],
        2,
        "8 appears twice",
    );
    refused(
        &argv("bench oversubscription --policy lru,clock,lru"),
        2,
        "names lru twice",
    );
    refused(
        &argv("bench oversubscription --prefetch off,tree,off"),
        2,
        "names off twice",
    );
    refused(
        &argv("bench oversubscription --staging on,on"),
        2,
        "names on twice",
    );
    refused(
        &argv("sweep stencil --access explicit,migrate,explicit"),
        2,
        "explicit is named twice",
    );
    assert!(listing(dir.path()).is_empty());
}

/// A command of one process started as several MPI processes ran whole on every rank: each
/// printed its results, and the ranks raced on the one `--out` (the loser was told that the
/// folder it had just found empty already held results). It is refused on every rank before
/// anything is written; the commands that run across processes, and one process alone, run.
#[test]
fn a_command_of_one_process_is_refused_under_mpirun() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let run = argv("run boiling --size 16 --page 8 --frames 1 --gif-every 0 --out");
    let under = |var: &str, n: &str, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env(var, n)
            .output()
            .unwrap()
    };
    for var in ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"] {
        let o2 = under(var, "2", &with(&run, &[o]));
        let err = String::from_utf8_lossy(&o2.stderr);
        assert_eq!(o2.status.code(), Some(2), "{var}: {err}");
        assert!(err.contains("one of 2 MPI processes"), "{var}: {err}");
        assert!(!out.exists(), "{var}: --out was written");
    }
    let sweep = argv("sweep stencil --size 16 --devices 1 --out");
    let o2 = under("OMPI_COMM_WORLD_SIZE", "3", &with(&sweep, &[o]));
    assert_eq!(o2.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o2.stderr).contains("one of 3 MPI processes"));
    // One process of one, and the form that runs across processes, are not refused by it.
    let alone = under("OMPI_COMM_WORLD_SIZE", "1", &with(&run, &[o]));
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    let across = under(
        "OMPI_COMM_WORLD_SIZE",
        "2",
        &with(&run, &[o, "--force", "--devices-per-node", "1"]),
    );
    assert!(
        !String::from_utf8_lossy(&across.stderr).contains("one of 2 MPI processes"),
        "{}",
        String::from_utf8_lossy(&across.stderr)
    );
}
