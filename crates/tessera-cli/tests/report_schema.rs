//! Every workload's report.json, as `tessera run` writes it, against the schema users read
//! (docs/report.schema.json): one core of keys with one vocabulary, then the workload's own.

mod common;

use common::{argv, tessera};

use std::path::Path;

fn schema() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/report.schema.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Runs `tessera run WORKLOAD ARGS --out DIR` and returns its report.json.
fn report(workload: &str, args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut all = vec!["run", workload];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = tessera(&all);
    assert!(
        o.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

/// One small run of every workload.
fn runs() -> [(&'static str, Vec<&'static str>); 6] {
    [
        (
            "boiling",
            argv("--size 32 --page 8 --frames 2 --gif-every 0"),
        ),
        ("quake", argv("--frames 2 --width 64 --height 48 --page 16")),
        (
            "vr",
            argv("--generated 1 --frames 1 --warmup 0 --width 32 --height 24 --page 8 --devices 2"),
        ),
        (
            "raytrace",
            argv("--scene generated:1 --width 32 --height 24 --frames 1 --ao-samples 1"),
        ),
        (
            "stencil",
            argv("--size 16 --halo 1 --devices 2 --steps 1 --page 8"),
        ),
        (
            "convolution",
            argv("--size 64 --filter 3 --devices 2 --steps 1 --page 16"),
        ),
    ]
}

#[test]
fn every_workloads_report_validates_against_the_schema() {
    let validator = jsonschema::validator_for(&schema()).expect("the schema is a valid schema");
    for (workload, args) in runs() {
        let r = report(workload, &args);
        let errors: Vec<String> = validator
            .iter_errors(&r)
            .map(|e| format!("{}: {e}", e.instance_path))
            .collect();
        assert!(errors.is_empty(), "{workload}: {errors:#?}");
        assert_eq!(r["workload"], workload);
        // What the schema cannot say: one entry per device, in order.
        let devices = r["devices"].as_u64().unwrap();
        let per_device = r["per_device"].as_array().unwrap();
        assert_eq!(per_device.len() as u64, devices, "{workload}");
        for (i, d) in per_device.iter().enumerate() {
            assert_eq!(d["device"], i, "{workload}");
        }
        // The host counters are read from the run, not left at their defaults: every
        // workload hands its devices work in every measured frame.
        let submissions: f64 = per_device
            .iter()
            .map(|d| d["host"]["submissions_per_frame"].as_f64().unwrap())
            .sum();
        assert!(submissions > 0.0, "{workload}: no submissions counted");
    }
}

/// `verified` says whether `--verify` ran and passed, in every workload's report: null
/// without it, true with it (a run that fails its check writes no report).
#[test]
fn every_report_says_whether_it_was_verified() {
    for (workload, mut args) in runs() {
        assert!(
            report(workload, &args)["verified"].is_null(),
            "{workload} without --verify"
        );
        args.push("--verify");
        assert_eq!(
            report(workload, &args)["verified"],
            true,
            "{workload} with --verify"
        );
    }
}

#[test]
fn the_schema_refuses_a_report_that_breaks_the_core() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let good = report(
        "boiling",
        &argv("--size 32 --page 8 --frames 1 --gif-every 0"),
    );
    assert!(validator.is_valid(&good));
    // The spellings the core replaced are refused, as are missing core keys.
    let broken: [(&str, serde_json::Value); 4] = [
        ("procedure", "Relaunch".into()),
        ("backend", "cpu (2 threads)".into()),
        ("checksum", serde_json::Value::Null),
        ("stages", serde_json::json!({ "compute_seconds": 1.0 })),
    ];
    for (key, value) in broken {
        let mut r = good.clone();
        r[key] = value;
        assert!(!validator.is_valid(&r), "{key} = {}", r[key]);
    }
    let mut r = good.clone();
    r.as_object_mut().unwrap().remove("split");
    assert!(!validator.is_valid(&r));
    // Every device entry carries the host's work.
    let mut r = good.clone();
    r["per_device"][0].as_object_mut().unwrap().remove("host");
    assert!(!validator.is_valid(&r));
}
