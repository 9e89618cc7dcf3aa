//! `tessera run vr` as a user runs it: a small generated scene, and bad input.

mod common;

use common::{argv, fails, tessera};

use std::path::Path;

use tessera_scene::{bsp, pk3, Scene};

#[test]
fn run_vr_writes_a_report_and_a_stereo_png() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = tessera(&[
        "run",
        "vr",
        "--generated",
        "1",
        "--frames",
        "2",
        "--warmup",
        "0",
        "--width",
        "32",
        "--height",
        "24",
        "--page",
        "8",
        "--devices",
        "2",
        "--scheme",
        "oo-vr",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("modeled latency"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["scheme"], "oo-vr");
    assert_eq!(report["devices"], 2);
    assert_eq!(report["measured"].as_array().unwrap().len(), 2);
    assert_eq!(report["modeled"].as_array().unwrap().len(), 2);
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
        ("", "required arguments were not provided"),
    ] {
        let mut a = argv("run vr --width 16 --height 16");
        a.extend(["--out", out]);
        a.extend(argv(extra));
        fails(&a, says);
    }
}
