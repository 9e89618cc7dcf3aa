//! The `tessera` binary as a user runs it.

mod common;

use common::{argv, fails, listing, ok_in, refused, run_report, stderr, tessera};

use std::process::Command;

use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum, ReferenceBoiling};

#[test]
fn run_boiling_writes_report_and_png_matching_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = tessera(&[argv("run boiling --devices 3 --size 48 --page 8 --frames 4 --procedure two-pass --split tiles --out"), vec![out]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    for key in [
        "workload",
        "backend",
        "devices",
        "page_size",
        "procedure",
        "frames",
        "frames_per_second_measured",
        "per_device",
        "stages",
        "checksum",
    ] {
        assert!(report.get(key).is_some(), "report.json lacks {key}");
    }
    assert_eq!(report["devices"], 3);
    assert_eq!(report["procedure"], "two-pass");
    // The isolated model (the default) times the devices alone on a second node: the field
    // is after the 4 frames asked for, no more.
    assert_eq!(report["simulated_frames"], 4);
    let mut r = ReferenceBoiling::new(48, 48, BoilingParams::default());
    r.run(4);
    assert_eq!(report["checksum"], checksum_hex(field_checksum(&r.field)));
    let devices = report["per_device"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    // Three devices split one field: each must have fetched pages, from home or (a page its
    // neighbour modified) straight from the neighbour.
    for d in devices {
        let fetched = d["host_to_device_per_frame"]["pages"].as_f64().unwrap()
            + d["device_to_device_per_frame"]["pages"].as_f64().unwrap();
        assert!(fetched > 0.0, "{d}");
        assert!(d["page_requests_per_frame"].as_f64().unwrap() > 0.0);
        // One word for per-stage seconds, at the top and per device.
        assert!(d["stages"]["compute"].as_f64().unwrap() > 0.0, "{d}");
        assert!(d.get("stage_seconds").is_none(), "{d}");
    }
    let png = image::open(dir.path().join("frame.png")).unwrap();
    assert_eq!((png.width(), png.height()), (48, 48));
    // The display pass wrote the reference's colours (PNG rows run from the top).
    let rgba = png.to_rgba8();
    let want = r.display_rgba();
    for (x, y) in [(0u32, 0u32), (47, 47), (5, 30)] {
        let i = ((y * 48 + x) * 4) as usize;
        assert_eq!(
            rgba.get_pixel(x, 47 - y).0,
            [want[i], want[i + 1], want[i + 2], want[i + 3]]
        );
    }
    assert!(String::from_utf8_lossy(&o.stdout).contains("field_checksum="));
}

#[test]
fn bad_input_is_a_clear_error_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    // A `run boiling` line gets `--out` added, so nothing lands in the working folder.
    let cases = [
        ("run volcano", "unrecognized subcommand"),
        ("run boiling --warp-speed", "unexpected argument"),
        ("run boiling --size 0", "--size"),
        ("run boiling --size 100000", "--size"),
        ("run boiling --size -3", "error"),
        ("run boiling --page 3", "power of two"),
        (
            "run boiling --page 1024",
            "larger than 512, the largest page side",
        ),
        ("run boiling --size 16 --page 32", "larger than"),
        (
            "run boiling --size 4 --devices 5 --page 1",
            "more devices than rows",
        ),
        ("run boiling --devices 0", "device count"),
        ("run boiling --devices 65", "device count"),
        (
            "run boiling --procedure three-pass",
            "invalid value 'three-pass' for '--procedure",
        ),
        (
            "run boiling --split diagonal",
            "invalid value 'diagonal' for '--split",
        ),
        ("run boiling --frames 0", "--frames"),
        ("bench overhead --size 0", "--size"),
        (
            "run boiling --size 64 --page 8 --budget-mib 0 --frames 1",
            "budget must be more than 0",
        ),
        ("run boiling --budget-mib=-1", "budget must be more than 0"),
        ("run boiling --budget-mib -1", "budget must be more than 0"),
        ("run boiling --budget-mib lots", "not a number of MiB"),
        (
            "run boiling --policy mru",
            "invalid value 'mru' for '--policy",
        ),
        (
            "run boiling --thrashing panic",
            "invalid value 'panic' for '--thrashing",
        ),
        (
            "run boiling --prefetch all",
            "invalid value 'all' for '--prefetch",
        ),
        (
            "run boiling --staging yes",
            "invalid value 'yes' for '--staging",
        ),
        (
            "run boiling --footprint-ahead maybe",
            "invalid value 'maybe' for '--footprint-ahead",
        ),
        // 1 KiB pages and a budget of one: boiling's kernels read one texture and write
        // another, so no invocation fits.
        (
            "run boiling --size 64 --page 16 --budget-mib 0.001 --frames 1",
            "needs at least 2 pages of 1024 bytes (2048 bytes) resident at once",
        ),
        ("bench oversubscription --ratios 0.5", "below 1"),
        (
            "bench oversubscription --policy lru,belady",
            "invalid value 'belady' for '--policy",
        ),
        (
            "bench oversubscription --prefetch off,uvm",
            "invalid value 'uvm' for '--prefetch",
        ),
        (
            "bench oversubscription --staging off,async",
            "invalid value 'async' for '--staging",
        ),
    ];
    for (line, needle) in cases {
        let mut args = argv(line);
        if line.starts_with("run boiling") {
            args.extend(["--out", out]);
        }
        fails(&args, needle);
    }
}

/// `bench oversubscription` measures each setting once, and only the workload it runs: a
/// ratio named twice, or an option of the other workload (which it would measure as if never
/// given), is a usage error, as the values `run boiling` refuses are.
#[test]
fn oversubscription_refuses_what_it_would_not_measure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cases = [
        ("--ratios 1,2,1", "--ratios names ratio 1 twice"),
        (
            "--workload raytrace --prefetch off,tree",
            "--prefetch applies to --workload boiling only",
        ),
        (
            "--workload raytrace --staging off",
            "--staging applies to --workload boiling only",
        ),
        (
            "--workload raytrace --size 64",
            "--size applies to --workload boiling only",
        ),
        (
            "--workload raytrace --deferred off",
            "--deferred applies to --workload boiling only",
        ),
        ("--width 64", "--width applies to --workload raytrace only"),
        (
            "--scene generated:1",
            "--scene applies to --workload raytrace only",
        ),
        ("--map oa_dm1", "--map applies to --workload raytrace only"),
        (
            "--workload raytrace --map oa_dm1 --scene generated:1",
            "cannot be used with",
        ),
        (
            "--size 64 --page 128",
            "--page 128 is larger than the 64x64 field",
        ),
        ("--size 8 --page 8 --devices 16", "more devices than rows"),
    ];
    for (line, needle) in cases {
        let mut args = argv("bench oversubscription");
        args.extend(argv(line));
        args.extend(["--out", out.to_str().unwrap()]);
        refused(&args, 2, needle);
    }
    assert!(!out.exists());
}

#[test]
fn unwritable_output_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"keep me").unwrap();
    let o = tessera(
        &[
            argv("run boiling --size 8 --page 4 --frames 1 --out"),
            vec![file.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(o.status.code(), Some(2), "a bad --out is a usage error");
    assert!(String::from_utf8_lossy(&o.stderr).contains("exists and is not a folder"));
    // A folder inside that file: the file is named as the problem.
    let inside = file.join("sub");
    let o = tessera(
        &[
            argv("run boiling --size 8 --page 4 --frames 1 --out"),
            vec![inside.to_str().unwrap()],
        ]
        .concat(),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{} is a file, not a folder", file.display())),
        "{err}"
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"keep me",
        "nothing already written is lost"
    );
}

#[test]
fn bad_home_files_are_refused_with_their_path_and_existing_files_kept() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let existing = dir.path().join("data.bin");
    std::fs::write(&existing, b"keep me").unwrap();
    let missing = dir.path().join("no").join("such").join("home");
    let cases = [
        (dir.path().to_path_buf(), "is a directory"),
        (missing, "does not exist"),
        (existing.clone(), "already exists"),
    ];
    for (path, needle) in &cases {
        for sub in [
            &["run", "boiling"][..],
            &["sweep", "devices", "--devices", "1"],
        ] {
            let mut args = sub.to_vec();
            let p = path.to_str().unwrap();
            args.extend([
                "--size",
                "8",
                "--page",
                "4",
                "--frames",
                "1",
                "--out",
                out.to_str().unwrap(),
                "--home-file",
                p,
            ]);
            let o = tessera(&args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!o.status.success(), "{args:?} should fail");
            // What the path is, or its folder, decides before anything runs: a usage
            // error, 2.
            assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
            assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
            assert!(
                err.contains(p) && err.contains(needle),
                "{args:?}: expected {p} and {needle:?} in {err}"
            );
        }
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep me");
}

/// `PATH.isolated` is boiling's isolated model's second home file: a file there refuses that
/// run, before anything runs, and no other, which never creates it; a folder that is a file is
/// called what it is.
#[test]
fn only_the_isolated_model_is_refused_for_a_file_at_its_second_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("h.bin");
    let second = dir.path().join("h.bin.isolated");
    std::fs::write(&second, b"keep me").unwrap();
    let h = home.to_str().unwrap();
    let run = |extra: &[&str], out: &str| {
        let out = dir.path().join(out);
        let mut args = extra.to_vec();
        args.extend(["--out", out.to_str().unwrap(), "--home-file", h]);
        tessera(&args)
    };
    let small = argv("--size 16 --page 8 --frames 1 --devices 2");
    let refused = run(&[&["run", "boiling"][..], &small].concat(), "a");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{err}");
    assert!(
        err.contains(second.to_str().unwrap()) && err.contains("already exists"),
        "{err}"
    );
    assert!(!dir.path().join("a").exists());
    for (extra, out) in [
        (
            [&["run", "boiling", "--model", "concurrent"][..], &small].concat(),
            "b",
        ),
        (
            argv("run stencil --size 16 --page 8 --frames 1 --devices 2"),
            "c",
        ),
    ] {
        let o = run(&extra, out);
        assert!(
            o.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(!home.exists(), "{extra:?} left its home file");
    }
    assert_eq!(std::fs::read(&second).unwrap(), b"keep me");
    let under_a_file = second.join("x");
    let o = tessera(&[
        "run",
        "boiling",
        "--out",
        dir.path().join("d").to_str().unwrap(),
        "--home-file",
        under_a_file.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("is not a folder"), "{err}");
}

#[test]
fn a_run_with_a_home_file_gives_the_same_field_and_removes_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("tessera.home");
    let checksum = |extra: &[&str], out: &str| {
        let mut args = [
            argv("run boiling --size 32 --page 8 --frames 2 --gif-every 0 --out"),
            vec![out],
        ]
        .concat();
        args.extend(extra);
        let o = tessera(&args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.path().join(out).join("report.json")).unwrap(),
        )
        .unwrap();
        report["checksum"].clone()
    };
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let in_file = checksum(
        &["--home-file", home.to_str().unwrap()],
        a.to_str().unwrap(),
    );
    let in_memory = checksum(&[], b.to_str().unwrap());
    assert!(in_file.is_string(), "{in_file}");
    assert_eq!(in_file, in_memory);
    assert!(!home.exists(), "the home file is removed when the run ends");
}

/// Runs the binary, killing it if it has not exited within `limit`: a refusal must come
/// before any work, and a test that hangs tells nothing.
fn tessera_within(args: &[&str], limit: std::time::Duration) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let start = std::time::Instant::now();
    while child
        .try_wait()
        .expect("the child can be waited on")
        .is_none()
    {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{args:?} still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("the output is read")
}

#[test]
fn absurd_thread_counts_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    // 100000 threads made `run` start a pool of that many and print nothing for minutes.
    let huge = "100000";
    let overflowing = "99999999999999999999999";
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "boiling", "--threads", huge, "--out", out],
        vec!["run", "boiling", "--threads", overflowing, "--out", out],
        vec!["sweep", "page-size", "--threads", huge, "--out", out],
        vec!["sweep", "devices", "--threads", huge, "--out", out],
        vec!["bench", "overhead", "--threads", huge],
    ];
    for args in &cases {
        let o = tessera_within(args, std::time::Duration::from_secs(20));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(
            err.contains("more than this machine can sensibly run"),
            "{args:?}: {err}"
        );
    }
    assert!(
        !dir.path().join("out").exists(),
        "a refused command wrote nothing"
    );
    let o = tessera(&["run", "boiling", "--threads", "two", "--out", out]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a whole number of threads"));
}

/// A camera path is made before the first frame: four billion frames asked for 96 GB and
/// aborted the process, leaving its partial folder. At most a million is a usage error.
#[test]
fn absurd_camera_paths_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "quake", "--frames", "4000000000", "--out", out],
        vec!["run", "quake", "--path-frames", "1000001", "--out", out],
        vec!["run", "vr", "--frames", "4000000000", "--out", out],
        vec!["run", "vr", "--warmup", "4294967295", "--out", out],
        vec!["sweep", "vr", "--frames", "1000001", "--out", out],
    ];
    for args in &cases {
        let o = tessera_within(args, std::time::Duration::from_secs(20));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("1..=1000000") || err.contains("0..=1000000"),
            "{args:?}: {err}"
        );
    }
    assert!(listing(dir.path()).is_empty(), "{:?}", listing(dir.path()));
}

#[test]
fn small_machines_may_oversubscribe_and_zero_threads_means_one_per_core() {
    for (threads, want) in [("64", Some(64)), ("0", None)] {
        let dir = tempfile::tempdir().unwrap();
        let report = run_report(
            &format!("run boiling --size 16 --page 8 --frames 1 --threads {threads} --gif-every 0"),
            dir.path(),
        );
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let want = want.unwrap_or(cores);
        assert_eq!(report["adapter"], format!("cpu ({want} threads)"));
    }
}

#[test]
fn run_writes_an_animation_of_the_display() {
    use image::AnimationDecoder;

    let dir = tempfile::tempdir().unwrap();
    let printed = ok_in(
        "run boiling --size 32 --page 8 --warmup 1 --frames 4 --gif-every 2",
        dir.path(),
    );
    let file = std::fs::File::open(dir.path().join("frames.gif")).unwrap();
    let frames = image::codecs::gif::GifDecoder::new(std::io::BufReader::new(file))
        .unwrap()
        .into_frames()
        .collect_frames()
        .unwrap();
    // Frames 2 and 4 of the five (warm-up counted), and the last one, 5, in either model.
    assert_eq!(frames.len(), 3);
    for f in &frames {
        assert_eq!(f.buffer().dimensions(), (32, 32));
    }
    assert_ne!(
        frames[0].buffer(),
        frames[2].buffer(),
        "the simulation moved between samples"
    );
    assert!(printed.contains("frames.gif (3 frame(s)"));

    let none = tempfile::tempdir().unwrap();
    ok_in(
        "run boiling --size 16 --page 8 --frames 2 --gif-every 0",
        none.path(),
    );
    assert!(none.path().join("frame.png").exists());
    assert!(!none.path().join("frames.gif").exists());
}

#[test]
fn sweep_legends_name_the_backend_that_ran() {
    let dir = tempfile::tempdir().unwrap();
    ok_in(
        "sweep devices --size 16 --page 8 --devices 1,2 --frames 1",
        dir.path(),
    );
    let svg = std::fs::read_to_string(dir.path().join("speedup.svg")).unwrap();
    assert!(svg.contains("measured (cpu)"), "{svg}");
}

#[test]
fn an_oversubscribed_run_evicts_and_gives_the_resident_field() {
    let dir = tempfile::tempdir().unwrap();
    let run = |sub: &str, budget: &str, prefetch: &str, staging: &str| -> serde_json::Value {
        let out = dir.path().join(sub);
        ok_in(&format!("run boiling --devices 2 --size 64 --page 8 --frames 3 --budget-mib {budget} --policy clock --prefetch {prefetch} --staging {staging} --gif-every 0"), &out);
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
    };
    // Five 64² float textures are 80 KiB, 40 KiB per device: 16 KiB is 2.5x oversubscribed.
    let resident = run("resident", "4096", "off", "off");
    let pressed = run("pressed", "0.015625", "off", "off");
    assert_eq!(pressed["checksum"], resident["checksum"]);
    let prefetching = run("prefetching", "0.015625", "tree", "off");
    assert_eq!(prefetching["checksum"], resident["checksum"]);
    assert_eq!(prefetching["prefetch"], "tree");
    let staging = run("staging", "0.015625", "off", "on");
    assert_eq!(staging["checksum"], resident["checksum"]);
    assert_eq!(staging["staging"], true);
    assert_eq!(pressed["staging"], false);
    assert_eq!(pressed["eviction"]["staged_batches"], 0);
    assert_eq!(pressed["policy"], "clock");
    assert!(pressed["eviction"]["evictions"].as_u64().unwrap() > 0);
    assert_eq!(resident["eviction"]["evictions"], 0);
    assert!(
        pressed["per_device"][1]["eviction"]["refaults"]
            .as_u64()
            .unwrap()
            > 0
    );
}

/// Ratio 1 is the working set: a budget of what the busiest device holds in a resident frame,
/// its band and the halo it reads. On two devices a share of the textures (half) left the halo
/// out, and ratio 1 evicted 59 pages a frame; a budget of it evicts nothing.
#[test]
fn ratio_one_holds_the_working_set_on_several_devices() {
    for devices in ["1", "2", "4"] {
        let dir = tempfile::tempdir().unwrap();
        ok_in(
            &format!("bench oversubscription --size 64 --page 16 --frames 2 --rounds 1 --ratios 1,2 --policy lru --devices {devices}"),
            dir.path(),
        );
        let csv = std::fs::read_to_string(dir.path().join("oversubscription.csv")).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        let evictions = |ratio: &str| -> f64 {
            let r = rows.iter().find(|r| r[col("ratio")] == ratio).unwrap();
            r[col("evictions_per_frame")].parse().unwrap()
        };
        assert_eq!(evictions("1"), 0.0, "{devices} device(s): {csv}");
        assert!(evictions("2") > 0.0, "{devices} device(s): {csv}");
    }
}

#[test]
fn bench_oversubscription_prints_its_table_and_writes_csv_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok_in("bench oversubscription --size 32 --page 8 --frames 1 --rounds 1 --ratios 1.5,4 --policy lru,fifo --prefetch off,tree --staging off,on", dir.path());
    assert!(stdout.contains("every field checksum equals the resident run's"));
    let csv = std::fs::read_to_string(dir.path().join("oversubscription.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(
        rows.len(),
        17,
        "a header and ratio x policy x prefetch x staging rows: {csv}"
    );
    let header: Vec<&str> = rows[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for r in &rows[1..] {
        let cells: Vec<&str> = r.split(',').collect();
        let tput: f64 = cells[col("throughput_vs_resident")].parse().unwrap();
        let loads: f64 = cells[col("loads_per_frame")].parse().unwrap();
        let opt: f64 = cells[col("opt_loads_per_frame")].parse().unwrap();
        assert!(tput > 0.0 && tput.is_finite());
        assert!(opt <= loads, "OPT is a lower bound on loads: {r}");
        assert!(cells[col("evictions_per_frame")].parse::<f64>().unwrap() > 0.0);
        let prefetched: f64 = cells[col("prefetched_per_frame")].parse().unwrap();
        let hits: f64 = cells[col("prefetch_hits_per_frame")].parse().unwrap();
        assert!(hits <= prefetched, "{r}");
        if cells[col("prefetch")] == "off" {
            assert_eq!(prefetched, 0.0, "{r}");
        }
        let staged: f64 = cells[col("staged_batches_per_frame")].parse().unwrap();
        let during: f64 = cells[col("pages_copied_during_launch_per_frame")]
            .parse()
            .unwrap();
        if cells[col("staging")] == "off" {
            assert_eq!(staged, 0.0, "{r}");
            assert_eq!(during, 0.0, "{r}");
        }
        // The CPU backend times its host link, so every row has a transfer bound, and the
        // frame's time over it is the row's own ratio (the columns are where they say).
        let ms: f64 = cells[col("wall_ms_per_frame")].parse().unwrap();
        let bound: f64 = cells[col("transfer_bound_ms_per_frame")].parse().unwrap();
        let vs: f64 = cells[col("time_vs_transfer_bound")].parse().unwrap();
        assert!(bound > 0.0 && bound.is_finite(), "{r}");
        assert!((ms / bound - vs).abs() <= 0.01 * vs.max(1.0), "{r}");
        // Oversubscribed frames fault, so the host waits on the device and asks the manager.
        for host in ["blocking_waits_per_frame", "manager_messages_per_frame"] {
            assert!(
                cells[col(host)].parse::<f64>().unwrap() > 0.0,
                "{host}: {r}"
            );
        }
    }
    assert!(dir.path().join("oversubscription.png").exists());
    assert!(dir.path().join("oversubscription.svg").exists());
}

/// Without the `mpi` feature, asking for several nodes says how to get them, and is a usage
/// error (2): an option this build cannot honour; a litmus run across nodes too.
#[cfg(not(feature = "mpi"))]
#[test]
fn devices_per_node_without_mpi_says_how_to_build_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    for args in [
        vec!["run", "boiling", "--devices-per-node", "2", "--out", out],
        vec![
            "litmus",
            "--devices-per-node",
            "2",
            "tests/litmus/SB.litmus",
        ],
    ] {
        let o = tessera(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--features mpi"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    assert!(
        !dir.path().join("report.json").exists(),
        "a refused run wrote a report"
    );
}

/// Help lists the values an option takes, and every topology preset the core knows.
#[test]
fn help_lists_possible_values_and_every_topology_preset() {
    let o = tessera(&["run", "boiling", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    for values in [
        "[possible values: relaunch, two-pass]",
        "[possible values: rows, cols, tiles]",
        "[possible values: lru, clock, fifo, random]",
        "[possible values: owned, write-home]",
    ] {
        assert!(help.contains(values), "{values} missing from {help}");
    }
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for preset in tessera_model::PRESETS {
        assert!(flat.contains(preset), "{preset} missing from {help}");
    }
    // A value outside the list is a usage error (exit 2) that names the list.
    let o = tessera(&["run", "boiling", "--split", "diagonal"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("rows, cols, tiles"), "{err}");
}

/// `--frames N` is N frames of the field whichever model times them: the isolated model's
/// devices-alone timing runs on a second node and leaves the field, frame.png and the
/// checksum those of N frames, the reference's.
#[test]
fn frames_n_is_n_frames_in_either_model() {
    let mut seen = Vec::new();
    for model in ["isolated", "concurrent"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let o = tessera(
            &[
                argv(
                    "run boiling --devices 2 --size 64 --page 16 --frames 7 --gif-every 0 --model",
                ),
                vec![model],
                argv("--out"),
                vec![out.to_str().unwrap()],
            ]
            .concat(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
        assert_eq!(report["simulated_frames"], 7, "{model}");
        assert_eq!(report["modeled"]["model"], model);
        seen.push((
            report["checksum"].clone(),
            std::fs::read(out.join("frame.png")).unwrap(),
        ));
    }
    let mut r = ReferenceBoiling::new(64, 64, BoilingParams::default());
    r.run(7);
    assert_eq!(seen[0].0, checksum_hex(field_checksum(&r.field)));
    assert_eq!(
        seen[0], seen[1],
        "the model changed the field or the picture"
    );
}

/// A page side that does not divide the field is supported: the edge pages are partial (the
/// paper's address formulas round the page counts up), and the field is the reference's.
#[test]
fn a_page_that_does_not_divide_the_field_gives_partial_edge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok_in(
        "run boiling --devices 2 --size 100 --page 32 --frames 3 --gif-every 0",
        &out,
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let mut r = ReferenceBoiling::new(100, 100, BoilingParams::default());
    r.run(3);
    assert_eq!(report["checksum"], checksum_hex(field_checksum(&r.field)));
}

#[test]
fn help_names_the_exit_status_of_each_class() {
    let o = tessera(&["--help"]);
    let text = String::from_utf8_lossy(&o.stdout);
    for says in [
        "1 when the run failed",
        "2 for a usage",
        "130 when interrupted",
    ] {
        assert!(text.contains(says), "{says:?} not in {text}");
    }
}

/// A budget too small for a kernel names the pages its invocation had asked for (a lower
/// bound: pages show one miss at a time) and, for a kernel with a footprint, the bytes that are
/// enough for any invocation of it. A budget of those bytes gets past that kernel: the run
/// succeeds, or a later kernel of the frame is the one that needs more. At pages of one texel
/// too, where the bound had been taken at the field's corner, whose footprint is clipped.
#[test]
fn a_budget_too_small_names_what_is_enough_for_the_kernel() {
    for (size, page) in [(64, 8), (37, 1)] {
        enough_is_enough(size, page);
    }
}

fn enough_is_enough(size: u32, page: u32) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let run = |budget: f64| {
        let mib = format!("{budget}");
        let line = format!(
            "run boiling --size {size} --page {page} --frames 1 --gif-every 0 --force --budget-mib"
        );
        let args = argv(&line);
        tessera(&[&args[..], &[mib.as_str(), "--out", out]].concat())
    };
    // The bound in MiB, as the message gives it to paste into --budget-mib.
    let says = |o: &std::process::Output| -> Option<(String, String)> {
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        let kernel = err
            .split("invocation of kernel ")
            .nth(1)?
            .split(' ')
            .next()?;
        // The kernel's bound where it says more than the pages asked for; where it does not,
        // the pages asked for are the bound, and the message says only "at least".
        let enough = match err.split_once(" MiB, are enough") {
            Some((before, _)) => before.rsplit(' ').next()?,
            None if err.contains("(the run's other kernels may need more)") => err
                .split("give it at least ")
                .nth(1)?
                .split(" MiB")
                .next()?
                .rsplit(' ')
                .next()?,
            None => return None,
        };
        Some((kernel.to_string(), enough.to_string()))
    };
    let mut budget = (page * page * 4) as f64 / (1 << 20) as f64;
    let mut kernels = Vec::new();
    loop {
        let o = run(budget);
        if o.status.success() {
            break;
        }
        let (kernel, enough) = says(&o).unwrap_or_else(|| {
            panic!(
                "no footprint bound in: {}",
                String::from_utf8_lossy(&o.stderr)
            )
        });
        assert!(
            !kernels.contains(&kernel),
            "page {page}: {kernel} failed again with the bytes it said were enough: {kernels:?}"
        );
        kernels.push(kernel);
        budget = enough.parse().unwrap();
    }
    assert!(
        !kernels.is_empty(),
        "a page's bytes ran boiling at page {page}"
    );
}

/// An endless input file is refused, not read until memory runs out: each of these read about
/// 4 GB of `/dev/zero` before failing under a memory limit, and would take all memory
/// without one.
#[cfg(unix)]
#[test]
fn endless_input_files_are_refused_not_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    for (args, needle) in [
        (vec!["trace", "replay", "/dev/zero"], "not a tessera trace"),
        (vec!["litmus", "/dev/zero"], "longer than 16 MiB"),
        (
            [
                argv("run boiling --size 16 --page 8 --frames 1 --topology /dev/zero --out"),
                vec![o],
            ]
            .concat(),
            "longer than 16 MiB",
        ),
    ] {
        let r = tessera(&args);
        assert_eq!(r.status.code(), Some(1), "{args:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(needle), "{args:?}: {}", stderr(&r));
        assert!(!out.exists());
    }
}

/// Help offers only what a command takes: the slab decompositions refuse `--split-on-pages`,
/// so their help does not list it (it had, with "[default: on]"), and `--split` takes a
/// split. Help written to a full standard output fails, as every command's output does.
#[test]
fn help_offers_what_the_command_takes() {
    for cmd in [
        "run stencil",
        "run convolution",
        "sweep stencil",
        "sweep convolution",
    ] {
        let help = common::ok(&[argv(cmd), vec!["--help"]].concat());
        assert!(!help.contains("--split-on-pages"), "{cmd}: {help}");
    }
    for cmd in [
        "run boiling",
        "run raytrace",
        "sweep devices",
        "bench scaling",
    ] {
        let help = common::ok(&[argv(cmd), vec!["--help"]].concat());
        assert!(help.contains("--split <SPLIT>"), "{cmd}: {help}");
        assert!(!help.contains("PARTITION"), "{cmd}: {help}");
    }
    let help = common::ok(&argv("run boiling --help"));
    assert!(help.contains("--split-on-pages"), "{help}");
    #[cfg(unix)]
    for args in [
        vec!["--help"],
        vec!["run", "boiling", "--help"],
        vec!["--version"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&args)
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).contains("cannot write to standard output"),
            "{args:?}"
        );
    }
}
