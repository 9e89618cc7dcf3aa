//! `tessera run quake` and `tessera trace replay` as a user runs them.

mod common;

use std::path::Path;
use std::process::Output;

use common::{argv, f64s, fails, refused, run_report, stderr, tessera, u64s};

/// Runs `trace replay TRACE` with `args` (words) and, where given, `--out DIR`.
fn replay(trace: &Path, args: &str, out: Option<&Path>) -> Output {
    let mut a = vec!["trace", "replay", trace.to_str().unwrap()];
    a.extend(argv(args));
    if let Some(out) = out {
        a.extend(["--out", out.to_str().unwrap()]);
    }
    tessera(&a)
}

fn csv(path: &Path) -> Vec<(u64, u64, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let v: Vec<u64> = l.split(',').map(|s| s.parse().unwrap()).collect();
            (v[0], v[1], v[2])
        })
        .collect()
}

#[test]
fn run_quake_writes_its_files_and_replay_matches_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let trace = dir.path().join("t.trace");
    let cmd = format!("run quake --frames 6 --devices 2 --split left-right --page 16 --width 80 --height 60 --trace {} --png-every 2 --residency-png --procedure two-pass --drop-unused --initial-placement random", trace.display());
    let report = run_report(&cmd, &out);
    for f in [
        "report.json",
        "requests.csv",
        "requests.svg",
        "requests.png",
        "frame-0000.png",
        "frame-0002.png",
        "frame-0005.png",
        "residency/frame-0000.png",
        "residency/frame-0005.png",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    assert_eq!(report["workload"], "quake");
    assert_eq!(report["devices"], 2);
    assert_eq!(report["procedure"], "two-pass");
    assert_eq!(report["initial_placement"], "random");
    assert_eq!(report["drop_unused"], true);
    let rows = csv(&out.join("requests.csv"));
    assert_eq!(rows.len(), 12);
    // The CSV and the report say the same, and the first frame requests something.
    for &(f, d, r) in &rows {
        assert_eq!(
            report["texture_requests_by_frame"][f as usize][d as usize],
            r
        );
    }
    assert!(rows[0].2 > 0);
    // Per texture: every texture of the scene, and its requests add up to the run's.
    let per = report["per_texture"].as_array().unwrap();
    assert_eq!(per.len(), 42);
    let by_texture: u64 = per.iter().map(|t| t["requests"].as_u64().unwrap()).sum();
    assert_eq!(by_texture, rows.iter().map(|r| r.2).sum::<u64>());
    assert!(per.iter().all(|t| t["pages"].as_u64().unwrap() >= 1));
    // Replaying at the recorded page size and devices reproduces the run exactly (the command
    // checks every frame and device, and says so).
    let replay_csv = dir.path().join("replay.csv");
    let o = replay(&trace, &format!("--csv {}", replay_csv.display()), None);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("matches the recorded run"), "{stdout}");
    assert_eq!(csv(&replay_csv), rows);
    // At other settings the replay is not compared, and the line names what differs.
    let o = replay(&trace, "--initial-placement home --page 8", None);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout.contains("(not compared with the recorded run, whose settings differ: page 8 (recorded: 16); initial placement at home (recorded: random (seed 1)))"),
        "{stdout}"
    );
    // A page-size sweep on one device (the strips merged) writes its CSV and plots.
    let sweep = dir.path().join("sweep");
    // `...` doubles, as in every list of page sizes: 4, 8 and 16.
    let o = replay(&trace, "--pages 4,...,16 --devices 1", Some(&sweep));
    assert!(o.status.success(), "{}", stderr(&o));
    let lines = std::fs::read_to_string(sweep.join("sweep.csv")).unwrap();
    assert_eq!(lines.lines().count(), 4, "{lines}");
    for f in ["requests.svg", "requests.png", "memory.svg", "memory.png"] {
        assert!(sweep.join(f).exists(), "{f} missing");
    }
    // Replay's folders obey the rule of every command: results already there are refused
    // without --force (a usage error, 2), and a replay that fails leaves no folder and no
    // partial one.
    let again = replay(&trace, "--pages 4,16", Some(&sweep));
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert_eq!(
        std::fs::read_to_string(sweep.join("sweep.csv")).unwrap(),
        lines
    );
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    let failed = dir.path().join("failed");
    let o = replay(&trace, "--devices 3", Some(&failed));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!failed.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before.len());
}

/// Random placement with clearing each frame: the placement serves the first frame, and
/// clearing starts at the second. `run quake` had refused the pair, saying the placement would
/// be cleared before the first frame, while `trace replay` took it; now a recording of it
/// replays to the same counts.
#[test]
fn random_placement_with_clearing_records_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let cmd = format!("run quake --frames 3 --devices 2 --page 16 --width 48 --height 32 --clear-each-frame --initial-placement random --trace {}", trace.display());
    let report = run_report(&cmd, &dir.path().join("out"));
    assert_eq!(report["initial_placement"], "random");
    assert_eq!(report["clear_each_frame"], true);
    let o = replay(&trace, "", Some(&dir.path().join("replay")));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(said.contains("matches the recorded run"), "{said}");
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    for (extra, says) in [
        ("--width 0", "--width"),
        ("--height 5000", "--height"),
        ("--frames 0", "--frames"),
        ("--page 3", "page"),
        ("--split diagonal", "split"),
        ("--devices 0", "device"),
    ] {
        let mut a = argv(extra);
        a.extend(["--out", out]);
        fails(&[&argv("run quake"), &a[..]].concat(), says);
    }
    // Trace files: missing, not a trace, another version, truncated.
    let missing = dir.path().join("none.trace");
    let o = tessera(&["trace", "replay", missing.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
    let junk = dir.path().join("junk.trace");
    std::fs::write(&junk, b"GIF89a and more").unwrap();
    let o = tessera(&["trace", "replay", junk.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a tessera trace"));
    let good = dir.path().join("good.trace");
    let o = tessera(
        &[
            argv("run quake --frames 2 --width 32 --height 24 --page 8 --out"),
            vec![out],
            argv("--trace"),
            vec![good.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bytes = std::fs::read(&good).unwrap();
    let mut v3 = bytes.clone();
    v3[8] = 3;
    let f = dir.path().join("v3.trace");
    std::fs::write(&f, &v3).unwrap();
    let o = tessera(&["trace", "replay", f.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("version 3 is not supported"));
    // A changed byte whose fields still read: the checksum finds it.
    let mut changed = bytes.clone();
    let last = changed.len() - 1;
    changed[last] ^= 1;
    let f = dir.path().join("changed.trace");
    std::fs::write(&f, &changed).unwrap();
    let o = tessera(&["trace", "replay", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the trace is corrupt: its checksum"));
    let f = dir.path().join("cut.trace");
    std::fs::write(&f, &bytes[..bytes.len() - 3]).unwrap();
    let o = tessera(&["trace", "replay", f.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
    for args in [["--page", "2"], ["--devices", "3"]] {
        let o = tessera(&["trace", "replay", good.to_str().unwrap(), args[0], args[1]]);
        assert!(!o.status.success(), "{args:?}");
        assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
    }
}

/// `--filter trilinear --border 1`: two devices render what one does and what the unpaged
/// rasterizer renders with the same sampler, and the report counts requests per level.
#[test]
fn filtered_runs_equal_the_reference_on_one_or_two_devices() {
    use tessera_workloads::boiling::reference::{checksum_hex, fnv1a};
    use tessera_workloads::quake::atlas::{Atlas, Packing};
    use tessera_workloads::quake::{reference, scene};
    let dir = tempfile::tempdir().unwrap();
    let (w, h, frames, page) = (64u32, 48u32, 3u32, 16u32);
    let run = |devices: &str, name: &str| {
        let cmd = format!("run quake --frames {frames} --devices {devices} --page {page} --width {w} --height {h} --filter trilinear --border 1 --png-every 0");
        run_report(&cmd, &dir.path().join(name))
    };
    let two = run("2", "two");
    let one = run("1", "one");
    assert_eq!(two["checksum"], one["checksum"]);
    let mesh = scene::generated();
    let sizes: Vec<(u32, u32)> = mesh.textures.iter().map(|t| (t.width, t.height)).collect();
    let atlas = Atlas::pack_with(&sizes, page, Packing::Levels).unwrap();
    let cam = scene::camera_path(frames)[frames as usize - 1];
    let (frame, _) = reference::render_filtered(
        &mesh,
        &atlas,
        &cam.view_proj(w as f64 / h as f64),
        w,
        h,
        Some(tessera_core::Filter::Trilinear),
    )
    .unwrap();
    assert_eq!(two["checksum"], checksum_hex(fnv1a(frame.iter().copied())));
    let f = &two["filtering"];
    assert_eq!(f["filter"], "trilinear");
    assert_eq!(f["border"], 1);
    // (16 + 2)² / 16² − 1.
    assert!((f["border_overhead"].as_f64().unwrap() - (324.0 / 256.0 - 1.0)).abs() < 1e-12);
    let levels = f["levels"].as_u64().unwrap() as usize;
    let by_level = f["requests_by_level"].as_array().unwrap();
    assert_eq!(by_level.len(), frames as usize);
    let level_rows = csv(&dir.path().join("two/requests_by_level.csv"));
    for (fr, per) in by_level.iter().enumerate() {
        let per = u64s(per);
        assert_eq!(per.len(), levels);
        let total: u64 = u64s(&two["texture_requests_by_frame"][fr]).iter().sum();
        assert_eq!(per.iter().sum::<u64>(), total, "frame {fr}");
        for (l, &r) in per.iter().enumerate() {
            assert!(
                level_rows.contains(&(fr as u64, l as u64, r)),
                "requests_by_level.csv lacks frame {fr} level {l}: {r}"
            );
        }
    }
    assert_eq!(level_rows.len(), frames as usize * levels);
    assert!(dir.path().join("two/requests_by_level.svg").exists());
    let (pages, held) = (u64s(&f["pages_by_level"]), u64s(&f["held_pages_by_level"]));
    assert_eq!(
        pages.iter().sum::<u64>(),
        f["chain_pages"].as_u64().unwrap()
    );
    assert_eq!(held.len(), levels);
    assert!(
        held.iter().zip(&pages).all(|(h, p)| h <= p),
        "{held:?} of {pages:?}"
    );
    assert!(held[1..].iter().sum::<u64>() > 0, "{held:?}");
    assert_eq!(f["page_bytes"], 18 * 18 * 4);
    // The unfiltered report has no filtering section.
    assert!(run_nearest(dir.path()).get("filtering").is_none());
}

fn run_nearest(dir: &Path) -> serde_json::Value {
    let cmd = "run quake --frames 1 --width 32 --height 24 --page 8";
    run_report(cmd, &dir.join("nearest"))
}

/// A random start places the textures' pages, not the atlas's padding: with nothing dropped or
/// evicted, the pages the devices hold are the textures' pages, each once, where every atlas
/// page used to be held (the footprint then counted padding no picture showed). A replay at the
/// recorded settings places the same pages and says so.
#[test]
fn a_random_start_places_texture_pages_only() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let cmd = format!(
        "run quake --frames 1 --devices 2 --page 16 --width 80 --height 60 --png-every 0 \
         --initial-placement random --seed 7 --trace {}",
        trace.display()
    );
    let r = run_report(&cmd, &dir.path().join("out"));
    let (atlas, texture) = (
        r["atlas_pages"].as_u64().unwrap(),
        r["texture_pages"].as_u64().unwrap(),
    );
    assert!(atlas > texture, "the atlas has no padding: {atlas}");
    let f = &r["texture_footprint"];
    let n = |d: usize, k: &str| f[d][k].as_u64().unwrap();
    // Two devices: the pages both hold are each device's shared pages.
    assert_eq!(n(0, "shared_pages"), n(1, "shared_pages"));
    assert_eq!(
        n(0, "unique_pages") + n(1, "unique_pages") + n(0, "shared_pages"),
        texture
    );
    let o = tessera(&["trace", "replay", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("matches the recorded run"), "{said}");
    let held: Vec<(u64, u64)> = said
        .lines()
        .filter_map(|l| {
            l.split_once("at the end it alone holds ")?
                .1
                .split_once(" atlas pages, ")
        })
        .map(|(u, s)| {
            (
                u.parse().unwrap(),
                s.trim_end_matches(" shared").parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(held.len(), 2, "{said}");
    assert_eq!(held[0].0 + held[1].0 + held[0].1, texture, "{said}");
}

#[test]
fn bad_filter_options_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (args, says) in [
        (vec!["--border", "1"], "--border needs --filter"),
        (
            vec!["--filter", "bilinear", "--page", "16", "--border", "5"],
            "too wide for --page 16",
        ),
        (vec!["--filter", "blurry"], "blurry"),
        (vec!["--filter", "trilinear", "--border", "-1"], "-1"),
        (vec!["--miss", "degrade"], "--miss degrade needs --filter"),
        (
            vec![
                "--filter",
                "trilinear",
                "--miss",
                "degrade",
                "--procedure",
                "two-pass",
            ],
            "--miss degrade needs --procedure relaunch",
        ),
        (vec!["--filter", "trilinear", "--miss", "later"], "later"),
        // A trace holds the full-resolution blocks only: a filtered run's replay never
        // matched it ("the replay made 39 requests; the recorded run made 34").
        (
            vec!["--filter", "bilinear", "--trace", "t.bin"],
            "record with --filter nearest",
        ),
    ] {
        let mut a = vec![
            "run",
            "quake",
            "--frames",
            "1",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend(args.iter());
        refused(&a, 2, says);
        assert!(!out.exists(), "{args:?} wrote its output");
    }
}

/// `--miss degrade`: no pixel runs twice, the cold first frame serves most samples coarser,
/// what it asks for arrives after one frame, and the figures reach report.json and
/// degrade.csv.
#[test]
fn a_degrading_run_relaunches_nothing_and_reports_its_coarse_samples() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("degrade");
    let cmd = "run quake --frames 3 --path-frames 400 --devices 2 --split top-bottom --page 16 --width 64 --height 64 --filter trilinear --miss degrade --png-every 0";
    let report = run_report(cmd, &out);
    let f = &report["filtering"];
    assert_eq!(f["miss"], "degrade");
    let d = &f["degrade"];
    let relaunched = u64s(&d["relaunched_invocations"]);
    assert_eq!(relaunched, vec![0, 0, 0]);
    let coarse = f64s(&d["coarse_fraction"]);
    assert_eq!(coarse.len(), 3);
    assert!(coarse[0] > 0.5, "{coarse:?}");
    assert!(coarse[2] < coarse[0], "{coarse:?}");
    assert!(d["tail_pages"].as_u64().unwrap() > 0);
    let arrived = d["arrived_after_frames"].as_array().unwrap();
    assert_eq!(arrived[0], 0);
    assert!(arrived[1].as_u64().unwrap() > 0);
    assert_eq!(d["mean_arrival_frames"], 1.0);
    let csv = std::fs::read_to_string(out.join("degrade.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "frame,samples,coarse_samples,coarse_fraction,relaunched_invocations,late_requests"
    );
    assert_eq!(lines.len(), 4);
    assert!(lines[1].starts_with("0,"));
    // The relaunching default writes no degrade file.
    let exact = dir.path().join("exact");
    let cmd =
        "run quake --frames 1 --page 16 --width 32 --height 32 --filter bilinear --png-every 0";
    let report = run_report(cmd, &exact);
    assert!(!exact.join("degrade.csv").exists());
    assert_eq!(report["filtering"]["miss"], "relaunch");
    assert!(report["filtering"].get("degrade").is_none());
}

/// `--verify` under `--miss degrade` fails where a frame sampled coarser levels, and says
/// why, so a user does not take it for a wrong page: with every frame starting cold
/// (`--clear-each-frame`) the last frame cannot converge.
#[test]
fn a_degrading_frame_that_fails_verify_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let cmd = "run quake --frames 3 --page 16 --width 32 --height 32 --filter bilinear --miss degrade --clear-each-frame --path-frames 100000 --verify --out";
    let mut args = argv(cmd);
    args.push(out.to_str().unwrap());
    let err = fails(&args, "pixels differ");
    assert!(err.contains("--miss degrade serves a sample"), "{err}");
    assert!(!out.exists());
}

/// Eight devices over a screen two pages wide: four devices write each page of the frame and
/// of its depth in every frame. A device's relaunch used to ask only for its newest miss, so
/// the devices took the two pages from each other round after round and the run stopped with
/// "pass did not converge" in most runs; each run must finish, several times over, with
/// the one device's frame. The rounds that end it send a wave's pages whole, atlas pages the
/// device still holds among them: the trace must record only the pages a device lacked, or
/// its replay (which has no such contention) finds half the recorded requests and refuses it.
#[test]
fn many_devices_sharing_the_screens_pages_all_finish() {
    let dir = tempfile::tempdir().unwrap();
    let cmd = "run quake --frames 3 --width 64 --height 64 --page 32 --devices";
    let one = run_report(&format!("{cmd} 1"), &dir.path().join("one"));
    for run in 0..4 {
        let out = dir.path().join(format!("out{run}"));
        let trace = dir.path().join(format!("t{run}.trace"));
        let report = run_report(&format!("{cmd} 8 --trace {}", trace.display()), &out);
        assert_eq!(report["frames"].as_u64(), Some(3), "run {run}");
        assert_eq!(report["checksum"], one["checksum"], "run {run}");
        let o = replay(&trace, "", Some(&dir.path().join(format!("replay{run}"))));
        assert!(o.status.success(), "run {run}: {}", stderr(&o));
    }
}
