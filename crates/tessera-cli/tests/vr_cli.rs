//! `tessera run vr` as a user runs it: a small generated scene, and bad input.

mod common;

use common::{argv, fails, ok, stderr, tessera};

use std::path::Path;

use tessera_scene::{bsp, pk3, Scene};

#[test]
fn run_vr_writes_a_report_and_a_stereo_png() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = tessera(&[argv("run vr --generated 1 --frames 2 --warmup 0 --width 32 --height 24 --page 8 --devices 2 --scheme oo-vr --out"), vec![out.to_str().unwrap()]].concat());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("modeled latency"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    // The scheme is the core's split, given once, not again per report or per frame.
    assert_eq!(report["split"], "oo-vr");
    assert!(report.get("scheme").is_none(), "{report}");
    assert_eq!(report["devices"], 2);
    let measured = report["measured_by_frame"].as_array().unwrap();
    assert_eq!(measured.len(), 2);
    assert_eq!(report["modeled_by_frame"].as_array().unwrap().len(), 2);
    // A time names its unit; a [from][to] matrix is not the modeled frame's total.
    for m in measured {
        assert!(m.get("scheme").is_none(), "{m}");
        for key in ["finish_seconds", "busy_seconds"] {
            assert_eq!(m[key].as_array().unwrap().len(), 2, "{key}: {m}");
        }
        let matrix = m["composition_bytes_from_to"].as_array().unwrap();
        assert_eq!(matrix.len(), 2, "{m}");
    }
    for (m, f) in measured
        .iter()
        .zip(report["modeled_by_frame"].as_array().unwrap())
    {
        let sum: u64 = m["composition_bytes_from_to"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|row| row.as_array().unwrap())
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(f["composition_bytes"].as_u64().unwrap(), sum, "{f}");
    }
    let png = image::open(out.join("stereo.png")).unwrap();
    assert_eq!((png.width(), png.height()), (64, 24));
}

/// A pak holding `maps/empty.bsp`: a map with textures but no surfaces.
fn empty_map(dir: &Path) {
    let mut scene = Scene::generated(0);
    scene.name = "empty".into();
    scene.triangles.clear();
    let files = vec![("maps/empty.bsp".to_string(), bsp::write(&scene))];
    std::fs::write(dir.join("pak0.pk3"), pk3::write(&files).unwrap()).unwrap();
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    empty_map(dir.path());
    let pak = dir.path().to_str().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let pak_dir = format!("--map empty --pak-dir {pak}");
    for (extra, says) in [
        (
            "--scene generated:1 --scheme sfr-x",
            "unknown scheme \"sfr-x\"",
        ),
        ("--generated 1 --gpms 0", "must be between 1 and 8 (got 0)"),
        (
            "--scene generated:1 --devices 9",
            "must be between 1 and 8 (got 9)",
        ),
        ("--scene generated:1 --link-gbps 0", "--link-gbps"),
        ("--scene generated:1 --frames 0", "--frames"),
        (pak_dir.as_str(), "no surfaces"),
        ("", "give a scene: --scene"),
    ] {
        let mut a = argv("run vr --width 16 --height 16");
        a.extend(["--out", out]);
        a.extend(argv(extra));
        fails(&a, says);
    }
}

/// A split-frame scheme with more GPMs than the stereo frame has columns (`sfr-v`) or rows
/// (`sfr-h`) is a usage error, as in every command that splits an image; as many GPMs as
/// columns run.
#[test]
fn more_gpms_than_strips_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    for (size, scheme, gpms, says) in [
        (
            "--width 1 --height 16",
            "sfr-v",
            "3",
            "more than its 2 columns",
        ),
        (
            "--width 16 --height 4",
            "sfr-h",
            "5",
            "more than its 4 rows",
        ),
    ] {
        let mut a = argv("run vr --scene generated:1 --frames 1 --warmup 0");
        a.extend(argv(size));
        a.extend(["--scheme", scheme, "--devices", gpms, "--out", out]);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{a:?}: {}", stderr(&o));
        assert!(!dir.path().join("out").exists());
    }
    // `sweep vr` takes no --scheme or --devices: its advice is a larger frame alone.
    for (size, says) in [
        ("--width 16 --height 3", "give --height 4 or more"),
        ("--width 1 --height 16", "give --width 2 or more"),
    ] {
        let mut a = argv("sweep vr --scene generated:1 --frames 1 --warmup 0");
        a.extend(argv(size));
        a.extend(["--out", out]);
        let o = tessera(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{a:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("GPMs or a larger"), "{}", stderr(&o));
        assert!(!dir.path().join("out").exists());
    }
    let mut a = argv("run vr --scene generated:1 --frames 1 --warmup 0 --width 1 --height 16");
    a.extend(["--scheme", "sfr-v", "--devices", "2", "--out", out]);
    let o = tessera(&a);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `sweep vr` writes OO-VR's four figures: a row per scheme (Figs 15, 16), per followed scheme
/// and bandwidth (17) and per followed scheme and GPM count (18), each against its base.
#[test]
fn sweep_vr_writes_figures_15_to_18() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut args =
        argv("sweep vr --scene generated:1 --frames 1 --warmup 0 --width 16 --height 16 --page 8");
    args.extend(["--out", out.to_str().unwrap()]);
    let printed = ok(&args);
    assert!(
        printed.contains("Fig 18, speed-up over one GPU"),
        "{printed}"
    );
    let rows = |n: u32| -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(out.join(format!("fig{n}.csv"))).unwrap();
        assert!(out.join(format!("fig{n}.svg")).exists());
        assert!(out.join(format!("fig{n}.png")).exists());
        text.lines()
            .skip(1)
            .map(|l| l.split(',').map(String::from).collect())
            .collect()
    };
    let fig15 = rows(15);
    assert_eq!(fig15.len(), 7);
    assert_eq!(
        (fig15[0][0].as_str(), fig15[0][3].as_str()),
        ("baseline", "1.0000")
    );
    assert_eq!(rows(16).len(), 7);
    let fig17 = rows(17);
    assert_eq!(fig17.len(), 3 * 4);
    assert_eq!(
        (
            fig17[1][0].as_str(),
            fig17[1][1].as_str(),
            fig17[1][3].as_str()
        ),
        ("baseline", "64", "1.0000")
    );
    let fig18 = rows(18);
    assert_eq!(fig18.len(), 3 * 4);
    // One GPM is the single GPU every curve starts from.
    for r in fig18.iter().filter(|r| r[1] == "1") {
        assert_eq!(r[3], "1.0000", "{r:?}");
    }
}
