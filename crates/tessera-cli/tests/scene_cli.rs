//! `tessera scene info` as a user runs it, on a generated pk3 (no OpenArena files needed) and
//! on bad input.

mod common;

use common::{argv, outcome, write_pk3};

use tessera_scene::{bsp, pk3, Scene};

#[test]
fn info_prints_the_counts_of_a_generated_map() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_pk3(dir.path(), "pak0.pk3", 2, None, &[]);
    let (ok, out, err) = outcome(&["scene", "info", "--map", "generated-2", "--pak-dir", d]);
    assert!(ok, "{out}\n{err}");
    // By hand: room 5 quads + 3 wall pieces, corridor 5 quads, 2 × 2 boxes of 5 quads; 4
    // vertices and 2 triangles a quad; one surface per room/corridor quad and per box. Texels:
    // 256² + 128·64 + 64² + 128² + 32².
    for line in [
        "vertices: 132\n",
        "triangles: 66 in 17 surfaces\n",
        "textures: 5, 95232 texels, smallest 32x32, largest 256x256\n",
        "missing textures: 0 (",
        "lightmaps: 2 (128x128)\n",
        "spawns: 5\n",
        "bounds: min (0, 0, 0) max (1536, 1024, 256)",
        "camera path: 500 frames, a loop through the 5 spawns (",
        "load seconds: ",
    ] {
        assert!(out.contains(line), "no {line:?} in\n{out}");
    }

    // A pak set that lacks a texture: it shows as missing.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_pk3(dir.path(), "pak0.pk3", 0, None, &[1]);
    let (ok, out, err) = outcome(&["scene", "info", "--map", "generated-0", "--pak-dir", d]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("missing textures: 1 (checker placeholders; shader-script names, which are not parsed, or images the pak set lacks): textures/generated/wall\n"), "{out}");
    assert!(out.contains("textures: 4, "), "{out}");

    // A pak set of maps without their images (OpenArena's maps package alone): said so, and a
    // run on the map warns on stderr, its stdout left to the run.
    let bare = tempfile::tempdir().unwrap();
    let b = bare.path().to_str().unwrap();
    write_pk3(bare.path(), "pak0.pk3", 0, None, &[0, 1, 2, 3]);
    let (ok, out, err) = outcome(&["scene", "info", "--map", "generated-0", "--pak-dir", b]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("missing textures: 4 (checker placeholders; the pak set holds almost none of the images: is openarena-data installed?)"), "{out}");
    let run = bare.path().join("run");
    let (ok, out, err) = outcome(
        &[
            argv("run quake --frames 1 --width 32 --height 24 --map generated-0 --pak-dir"),
            vec![b, "--out", run.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(ok, "{out}\n{err}");
    assert!(
        err.contains("warning: 4 of the 4 textures of generated-0 are missing"),
        "{err}"
    );
    assert!(!out.contains("warning"), "{out}");
}

#[test]
fn bad_input_fails_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let missing = dir.path().join("nope");
    let (ok, _, err) = outcome(
        &[
            argv("scene info --map oa_dm1 --pak-dir"),
            vec![missing.to_str().unwrap()],
        ]
        .concat(),
    );
    assert!(!ok);
    assert!(
        err.contains("does not exist")
            && err.contains("apt-get install openarena-data openarena-081-maps"),
        "{err}"
    );

    let (ok, _, err) = outcome(&["scene", "info", "--map", "oa_dm1", "--pak-dir", d]);
    assert!(!ok && err.contains("no .pk3 file"), "{err}");

    write_pk3(dir.path(), "pak0.pk3", 1, None, &[]);
    let (ok, _, err) = outcome(&["scene", "info", "--map", "oa_dm1", "--pak-dir", d]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("map oa_dm1 not found") && err.contains("available: generated-1"),
        "{err}"
    );

    // A map whose BSP is not one.
    std::fs::write(
        dir.path().join("pak1.pk3"),
        pk3::write(&[(
            "maps/broken.bsp",
            [b"VBSP".as_slice(), &[0u8; 200]].concat(),
        )])
        .unwrap(),
    )
    .unwrap();
    let (ok, _, err) = outcome(&["scene", "info", "--map", "broken", "--pak-dir", d]);
    assert!(!ok && err.contains("maps/broken.bsp: bad magic"), "{err}");

    // A pk3 that is not a zip.
    std::fs::write(dir.path().join("pak2.pk3"), b"not a zip at all").unwrap();
    let (ok, _, err) = outcome(&["scene", "info", "--map", "generated-1", "--pak-dir", d]);
    assert!(
        !ok && err.contains("pak2.pk3: not a readable pk3 (zip) file"),
        "{err}"
    );
}

/// `run quake --map` renders a map from a pak directory and names it in the report; a map the
/// pak set lacks, or a directory without pk3 files, is a clear error.
#[test]
fn run_quake_renders_a_map_from_a_pak_dir() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_pk3(dir.path(), "pak0.pk3", 2, None, &[]);
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();
    let base = [
        "run",
        "quake",
        "--pak-dir",
        d,
        "--frames",
        "2",
        "--width",
        "48",
        "--height",
        "32",
        "--page",
        "16",
        "--out",
        o,
        "--map",
    ];
    let (ok, stdout, err) = outcome(&[&base[..], &["generated-2"]].concat());
    assert!(ok, "{stdout}\n{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["scene"], "openarena:generated-2");
    assert_eq!(report["textures"], 5);
    let total: u64 = report["per_device"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["texture_requests"].as_u64().unwrap())
        .sum();
    assert!(total > 0, "a first frame must request texture pages");

    // Into the same --out: `--force` lets the failing runs reach their own errors (they
    // leave the results above as they are).
    let (ok, _, err) = outcome(&[&base[..], &["oa_nowhere", "--force"]].concat());
    assert!(!ok);
    assert!(
        err.contains("oa_nowhere") && err.contains("generated-2"),
        "{err}"
    );

    let empty = tempfile::tempdir().unwrap();
    let e = empty.path().to_str().unwrap();
    let (ok, _, err) = outcome(
        &[
            argv("run quake --pak-dir"),
            vec![e],
            argv("--map oa_dm1 --out"),
            vec![o],
            argv("--force"),
        ]
        .concat(),
    );
    assert!(!ok);
    assert!(err.contains("apt-get install"), "{err}");
    assert!(
        out.join("report.json").exists(),
        "a failed run removed earlier results"
    );
}

#[test]
fn scene_list_names_every_map_and_its_pk3() {
    let dir = tempfile::tempdir().unwrap();
    write_pk3(dir.path(), "pak0.pk3", 1, None, &[]);
    // A second map in a second pk3, under another name.
    let mut other = Scene::generated(2);
    other.name = "second".into();
    let files = vec![("maps/second.bsp".to_string(), bsp::write(&other))];
    std::fs::write(dir.path().join("pak1.pk3"), pk3::write(&files).unwrap()).unwrap();
    let first = Scene::generated(1).name;
    let (ok, out, err) = outcome(&["scene", "list", "--pak-dir", dir.path().to_str().unwrap()]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.contains(&format!("{first}\tpak0.pk3").as_str()),
        "{out}"
    );
    assert!(lines.contains(&"second\tpak1.pk3"), "{out}");
    // Standard output is the list alone; the count goes to stderr.
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines.iter().all(|l| l.split('\t').count() == 2), "{out}");
    assert!(err.contains("2 map(s) in 2 pk3 file(s)"), "{err}");
    // A folder with no pk3 is an error that says so.
    let empty = tempfile::tempdir().unwrap();
    let (ok, _, err) = outcome(&["scene", "list", "--pak-dir", empty.path().to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("pk3"), "{err}");
}
