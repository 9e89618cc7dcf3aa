//! The `tessera` binary as a user runs it.

use std::process::Command;

use tessera_workloads::boiling::math::BoilingParams;
use tessera_workloads::boiling::reference::{checksum_hex, field_checksum, ReferenceBoiling};

fn tessera(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[test]
fn run_boiling_writes_report_and_png_matching_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let o = tessera(&[
        "run",
        "boiling",
        "--devices",
        "3",
        "--size",
        "48",
        "--page",
        "8",
        "--frames",
        "4",
        "--procedure",
        "two-pass",
        "--partition",
        "tiles",
        "--out",
        out,
    ]);
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
        "stage_seconds",
        "field_checksum",
    ] {
        assert!(report.get(key).is_some(), "report.json lacks {key}");
    }
    assert_eq!(report["devices"], 3);
    assert_eq!(report["procedure"], "two-pass");
    let mut r = ReferenceBoiling::new(48, 48, BoilingParams::default());
    r.run(4);
    assert_eq!(
        report["field_checksum"],
        checksum_hex(field_checksum(&r.field))
    );
    let devices = report["per_device"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    // Three devices split one field: each must have fetched pages from home.
    for d in devices {
        assert!(d["host_to_device_per_frame"]["pages"].as_f64().unwrap() > 0.0);
        assert!(d["page_requests_per_frame"].as_f64().unwrap() > 0.0);
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
    let cases: &[(&[&str], &str)] = &[
        (&["run", "volcano"], "invalid value"),
        (&["run", "boiling", "--warp-speed"], "unexpected argument"),
        (&["run", "boiling", "--size", "0", "--out", out], "--size"),
        (
            &["run", "boiling", "--size", "100000", "--out", out],
            "--size",
        ),
        (&["run", "boiling", "--size", "-3", "--out", out], "error"),
        (
            &["run", "boiling", "--page", "3", "--out", out],
            "power of two",
        ),
        (
            &["run", "boiling", "--page", "1024", "--out", out],
            "power of two",
        ),
        (
            &[
                "run", "boiling", "--size", "16", "--page", "32", "--out", out,
            ],
            "larger than",
        ),
        (
            &[
                "run",
                "boiling",
                "--size",
                "4",
                "--devices",
                "5",
                "--page",
                "1",
                "--out",
                out,
            ],
            "more devices than rows",
        ),
        (
            &["run", "boiling", "--devices", "0", "--out", out],
            "device count",
        ),
        (
            &["run", "boiling", "--devices", "65", "--out", out],
            "device count",
        ),
        (
            &["run", "boiling", "--procedure", "three-pass", "--out", out],
            "unknown procedure",
        ),
        (
            &["run", "boiling", "--partition", "diagonal", "--out", out],
            "unknown partition",
        ),
        (
            &["run", "boiling", "--frames", "0", "--out", out],
            "--frames",
        ),
        (&["bench", "overhead", "--size", "0"], "--size"),
        (
            &[
                "run",
                "boiling",
                "--size",
                "64",
                "--page",
                "8",
                "--budget-mib",
                "0",
                "--frames",
                "1",
                "--out",
                out,
            ],
            "memory budget",
        ),
    ];
    for (args, needle) in cases {
        let o = tessera(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
}

#[test]
fn unwritable_output_directory_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"keep me").unwrap();
    let o = tessera(&[
        "run",
        "boiling",
        "--size",
        "8",
        "--page",
        "4",
        "--frames",
        "1",
        "--out",
        file.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot create output directory"));
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"keep me",
        "nothing already written is lost"
    );
}
