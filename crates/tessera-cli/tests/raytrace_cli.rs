//! `tessera run raytrace` as a user runs it: a map from a pak directory (a generated one, so
//! no OpenArena files are needed) renders the same image as the generated scene itself, at
//! any budget and device count; bad input fails with a clear message and writes nothing.

mod common;

use common::{argv, outcome, report, u64s, write_pk3};

use tessera_scene::{bsp, Scene};

const SMALL: [&str; 8] = [
    "--width",
    "32",
    "--height",
    "24",
    "--page",
    "16",
    "--ao-samples",
    "2",
];

/// `run raytrace` of the SMALL image with `--pak-dir pak_dir --out out` and `extra`: whether
/// it succeeded, and what it printed on stdout and stderr.
fn raytrace(pak_dir: &str, out: &str, extra: &[&str]) -> (bool, String, String) {
    let base = ["run", "raytrace", "--pak-dir", pak_dir, "--out", out];
    outcome(&[&base[..], &SMALL, extra].concat())
}

#[test]
fn a_map_renders_as_the_generated_scene_at_any_budget() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_pk3(dir.path(), "pak0.pk3", 2, None, &[]);
    let run = |name: &str, extra: &[&str]| -> serde_json::Value {
        let out = dir.path().join(name);
        let (ok, stdout, err) = raytrace(d, out.to_str().unwrap(), extra);
        assert!(ok, "{stdout}\n{err}");
        assert!(
            stdout.contains("relaunched") && stdout.contains("wrote"),
            "{stdout}"
        );
        let img = image::open(out.join("image.png")).unwrap();
        assert_eq!((img.width(), img.height()), (32, 24));
        report(&out)
    };
    let generated = run("gen", &["--scene", "generated:2"]);
    let map = run("map", &["--scene", "openarena:generated-2"]);
    // 8 pages of 1 KiB per device: far below the frame's pages.
    let small = run(
        "small",
        &argv("--scene openarena:generated-2 --devices 2 --budget-mib 0.0078125 --policy clock"),
    );
    assert_eq!(map["scene"], "openarena:generated-2");
    assert_eq!(small["devices"], 2);
    assert_eq!(small["budget_bytes"], 8192);
    let evictions: u64 = small["per_device"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["evictions"].as_u64().unwrap())
        .sum();
    assert!(evictions > 0);
    assert!(small["by_frame"][0]["suspended"].as_u64().unwrap() > 0);
    // A frame's time names its unit, seconds as in every report.
    let wall = small["by_frame"][0]["wall_seconds"].as_f64().unwrap();
    assert!(wall > 0.0 && wall < 60.0, "{wall}");
    assert!(small["by_frame"][0].get("wall_ms").is_none());
    let objects: Vec<&str> = small["residency"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        objects,
        [
            "nodes",
            "triangles",
            "attributes",
            "atlas",
            "image",
            "ray state"
        ]
    );
    assert_eq!(generated["checksum"], map["checksum"]);
    assert_eq!(map["checksum"], small["checksum"]);
    // `--map NAME` is `--scene openarena:NAME`, as on run quake and run vr.
    let short = run("short", &["--map", "generated-2"]);
    assert_eq!(short["scene"], "openarena:generated-2");
    assert_eq!(short["checksum"], map["checksum"]);
}

/// Each bad input fails with its message and leaves no output directory.
#[test]
fn bad_input_fails_clearly_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let good = bsp::write(&Scene::generated(1));
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let fails = |pak_dir: &str, extra: &[&str], want: &str| {
        let (ok, stdout, err) = raytrace(pak_dir, o, extra);
        assert!(!ok, "{extra:?} succeeded: {stdout}");
        assert!(err.contains(want), "{extra:?}: no {want:?} in {err}");
        assert!(!out.exists(), "{extra:?} wrote {}", out.display());
    };
    let missing = dir.path().join("nope");
    fails(
        missing.to_str().unwrap(),
        &["--scene", "openarena:oa_dm1"],
        "does not exist",
    );
    write_pk3(dir.path(), "pak0.pk3", 1, None, &[]);
    fails(d, &["--scene", "openarena:oa_dm1"], "map oa_dm1 not found");

    // Truncated: the BSP cut in half, so its lumps reach past its end.
    let sub = |name: &str, bytes: Vec<u8>| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(&p).unwrap();
        write_pk3(&p, "pak0.pk3", 1, Some(bytes), &[]);
        p.to_str().unwrap().to_string()
    };
    let truncated = sub("truncated", good[..good.len() / 2].to_vec());
    fails(
        &truncated,
        &["--scene", "openarena:generated-1"],
        "lies outside the",
    );
    let mut magic = good.clone();
    magic[..4].copy_from_slice(b"VBSP");
    let magic = sub("magic", magic);
    fails(&magic, &["--scene", "openarena:generated-1"], "bad magic");
    // The vertices lump (index 10) moved far past the end of the file.
    let mut lump = good.clone();
    lump[8 + 10 * 8..8 + 10 * 8 + 4].copy_from_slice(&0x7fff_0000i32.to_le_bytes());
    let lump = sub("lump", lump);
    fails(
        &lump,
        &["--scene", "openarena:generated-1"],
        "vertices (lump 10): offset 2147418112",
    );
    // A map with no surfaces is said to be one, as quake and vr say it.
    let mut empty = Scene::generated(1);
    empty.triangles.clear();
    let empty = sub("empty", bsp::write(&empty));
    fails(
        &empty,
        &["--scene", "openarena:generated-1"],
        "scene openarena:generated-1 has no surfaces to draw",
    );
    let notzip = dir.path().join("notzip");
    std::fs::create_dir_all(&notzip).unwrap();
    std::fs::write(notzip.join("pak0.pk3"), b"not a zip at all").unwrap();
    fails(
        notzip.to_str().unwrap(),
        &["--scene", "openarena:generated-1"],
        "not a readable pk3 (zip) file",
    );

    // A budget below the minimum: 4 KiB holds 4 of the 1 KiB pages, the minimum is 8. The
    // options alone say so: a usage error.
    common::refused(
        &argv("run raytrace --scene generated:1 --page 16 --budget-mib 0.00390625 --width 32 --height 24 --out")
            .into_iter()
            .chain([o])
            .collect::<Vec<_>>(),
        2,
        "below the ray tracer's minimum of 8192 bytes",
    );
    assert!(!out.exists());
    fails(d, &["--scene", "generated:x"], "generated:x");
}

/// `bench oversubscription --workload raytrace` runs every ratio and policy, checks every image
/// against the resident one and writes its CSV. No time or ratio is asserted.
#[test]
fn bench_oversubscription_raytrace_checks_every_image() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench");
    let (ok, stdout, err) = outcome(&[argv("bench oversubscription --workload raytrace --scene generated:1 --width 16 --height 12 --ao-samples 1 --ratios 1,4 --policy lru,random --frames 1 --rounds 1 --out"), vec![out.to_str().unwrap()]].concat());
    assert!(ok, "{stdout}\n{err}");
    assert!(
        stdout.contains("every image equals the resident one"),
        "{stdout}"
    );
    let csv = std::fs::read_to_string(out.join("oversubscription-raytrace.csv")).unwrap();
    // A header and one row per ratio and policy, each with its image equal and the image's
    // checksum, the one printed for the resident image.
    assert_eq!(csv.lines().count(), 5, "{csv}");
    assert!(
        csv.lines()
            .next()
            .unwrap()
            .ends_with(",image_equal,checksum"),
        "{csv}"
    );
    let printed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("every image equals the resident one: "))
        .unwrap_or_else(|| panic!("no checksum printed: {stdout}"));
    let tail = format!(",true,{printed}");
    assert!(csv.lines().skip(1).all(|l| l.ends_with(&tail)), "{csv}");
}

/// `--filter trilinear` samples a mip chain of the atlas: it verifies against the resident
/// render on two devices, reports the chain's levels, holds pages of coarser levels, and draws
/// another image than the nearest texel does.
#[test]
fn a_filtered_render_verifies_and_reports_its_levels() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, filter: &str| -> serde_json::Value {
        let out = dir.path().join(name);
        let args = [
            &argv("run raytrace --scene generated:2 --devices 2 --verify --filter")[..],
            &[filter, "--out", out.to_str().unwrap()],
            &SMALL,
        ]
        .concat();
        let (ok, stdout, err) = outcome(&args);
        assert!(ok, "{stdout}\n{err}");
        assert!(stdout.contains("verified:"), "{stdout}");
        report(&out)
    };
    let nearest = run("nearest", "nearest");
    let trilinear = run("trilinear", "trilinear");
    assert_eq!(trilinear["filter"], "trilinear");
    let levels = u64s(&trilinear["held_pages_by_level"]);
    assert!(
        levels.len() > 1 && levels[1..].iter().sum::<u64>() > 0,
        "{levels:?}"
    );
    assert_eq!(nearest["held_pages_by_level"].as_array().unwrap().len(), 1);
    // The chain's pages per level: no level holds more pages than it has, the finest has
    // most, and the atlas object's pages are the chain's.
    let chain = u64s(&trilinear["pages_by_level"]);
    assert_eq!(chain.len(), levels.len());
    assert!(
        chain.iter().zip(&levels).all(|(c, h)| h <= c),
        "{chain:?} {levels:?}"
    );
    assert!(chain[0] >= chain[1], "{chain:?}");
    let atlas = trilinear["residency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "atlas")
        .unwrap();
    assert_eq!(chain.iter().sum::<u64>(), atlas["pages"].as_u64().unwrap());
    assert_ne!(nearest["checksum"], trilinear["checksum"]);
}

/// 36 rows of 16-row pages on two devices: cut on a page (16 + 20 rows) the devices share no
/// page of the image, and frames after the first relaunch nothing; cut evenly (18 + 18) they
/// share one and relaunch rays every frame. The image is the same, and the report says which
/// cut ran.
#[test]
fn the_image_is_cut_on_pages_unless_told_to_cut_evenly() {
    let run = |on: &str| {
        let out = tempfile::tempdir().unwrap();
        let o =
            outcome(
                &[
                    &argv(
                        "run raytrace --width 48 --height 36 --page 16 --ao-samples 2 --devices 2",
                    )[..],
                    &argv("--frames 3 --split-on-pages")[..],
                    &[on, "--out", out.path().to_str().unwrap()][..],
                ]
                .concat(),
            );
        assert!(o.0, "{}", o.2);
        report(out.path())
    };
    let (pages, even) = (run("on"), run("off"));
    assert_eq!(pages["split_on_pages"], true);
    assert_eq!(even["split_on_pages"], false);
    assert_eq!(pages["checksum"], even["checksum"]);
    let relaunched = |r: &serde_json::Value| -> u64 {
        let frames = r["by_frame"].as_array().unwrap();
        frames[1..]
            .iter()
            .map(|f| f["relaunched_invocations"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(relaunched(&pages), 0, "{}", pages["by_frame"]);
    assert!(relaunched(&even) > 0, "{}", even["by_frame"]);
}
