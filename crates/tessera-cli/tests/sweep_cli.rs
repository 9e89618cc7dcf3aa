//! `tessera sweep`, `--topology` and `--residency-png` as a user runs them.

mod common;

use common::{argv, json, ok, refused, stderr, tessera};

use std::path::Path;

use serde_json::Value;

/// Rows of a CSV without quoted cells, as (header, cells).
fn csv(path: &Path) -> Vec<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            assert_eq!(cells.len(), header.len(), "ragged row {l}");
            header
                .iter()
                .cloned()
                .zip(cells.iter().map(|c| c.to_string()))
                .collect()
        })
        .collect()
}

fn get<'a>(row: &'a [(String, String)], key: &str) -> &'a str {
    &row.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no column {key}"))
        .1
}

/// The CSV column that must hold each report.json counter, written out here rather than
/// taken from the code under test.
const SAME: &[(&str, &str)] = &[
    ("devices", "/devices"),
    ("page_size", "/page_size"),
    ("frames", "/frames"),
    ("warmup_frames", "/warmup_frames"),
    ("page_requests_per_frame", "/page_requests_per_frame"),
    (
        "host_to_device_pages_per_frame",
        "/host_to_device_per_frame/pages",
    ),
    (
        "host_to_device_bytes_per_frame",
        "/host_to_device_per_frame/bytes",
    ),
    (
        "device_to_host_pages_per_frame",
        "/device_to_host_per_frame/pages",
    ),
    (
        "device_to_host_bytes_per_frame",
        "/device_to_host_per_frame/bytes",
    ),
    (
        "device_to_device_pages_per_frame",
        "/device_to_device_per_frame/pages",
    ),
    (
        "device_to_device_bytes_per_frame",
        "/device_to_device_per_frame/bytes",
    ),
    (
        "texels_to_devices_per_frame",
        "/texels_to_devices_per_frame",
    ),
    ("texels_to_host_per_frame", "/texels_to_host_per_frame"),
    ("memory_unique_bytes", "/memory/unique_bytes"),
    ("memory_shared_bytes", "/memory/shared_bytes"),
    ("memory_total_bytes", "/memory/total_bytes"),
];

fn same_counters(row: &[(String, String)], report: &Value, what: &str) {
    for (col, ptr) in SAME {
        let want = report.pointer(ptr).and_then(Value::as_f64).unwrap();
        let got: f64 = get(row, col).parse().unwrap();
        assert_eq!(got, want, "{what}: CSV {col} vs report.json {ptr}");
    }
    assert_eq!(
        get(row, "checksum"),
        report["checksum"].as_str().unwrap(),
        "{what}"
    );
    assert_eq!(
        get(row, "split"),
        report["split"].as_str().unwrap(),
        "{what}"
    );
}

/// A PNG of the plot size whose top band (the title) has dark text pixels and whose body
/// has coloured (non-grey) pixels: drawn text and drawn data, not a blank canvas.
fn check_plot_png(path: &Path) {
    let img = image::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .to_rgb8();
    assert_eq!(
        (img.width(), img.height()),
        (900, 560),
        "{}",
        path.display()
    );
    let dark_in_title = (0..img.width())
        .flat_map(|x| (0..30).map(move |y| (x, y)))
        .filter(|&(x, y)| img.get_pixel(x, y).0.iter().all(|&c| c < 100))
        .count();
    assert!(dark_in_title > 50, "{}: no title text", path.display());
    let coloured = img
        .pixels()
        .filter(|p| {
            let [r, g, b] = p.0;
            r.max(g).max(b) - r.min(g).min(b) > 60
        })
        .count();
    assert!(coloured > 200, "{}: no data drawn", path.display());
}

#[test]
fn page_size_sweep_writes_csv_plots_and_reports_that_agree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let stdout = ok(&[argv("sweep page-size --workload boiling --size 64 --devices 2 --pages 4,...,16 --frames 2 --warmup 1 --topology pcie1-x16 --out"), vec![out.to_str().unwrap()]].concat());
    assert!(stdout.contains("fps modeled"), "{stdout}");
    let rows = csv(&out.join("sweep.csv"));
    assert_eq!(
        rows.iter()
            .map(|r| get(r, "page_size").to_string())
            .collect::<Vec<_>>(),
        ["4", "8", "16"]
    );
    for row in &rows {
        let page = get(row, "page_size");
        let report = json(&out.join(format!("page-{page}/report.json")));
        same_counters(row, &report, &format!("page {page}"));
        assert_eq!(get(row, "topology"), "pcie1-x16");
        // What ran each point, as its report says.
        assert_eq!(get(row, "backend"), "cpu");
        assert_eq!(get(row, "adapter"), report["adapter"].as_str().unwrap());
        for (col, ptr) in [
            ("frames_per_second_measured", "/frames_per_second_measured"),
            ("frames_per_second_modeled", "/modeled/frames_per_second"),
            ("wall_seconds_measured", "/wall_seconds"),
        ] {
            let want = report.pointer(ptr).and_then(Value::as_f64).unwrap();
            assert_eq!(get(row, col).parse::<f64>().unwrap(), want, "{col}");
        }
        // Two devices split the field in rows: both hold pages, and the boundary is shared.
        assert!(report["memory"]["shared_bytes"].as_u64().unwrap() > 0);
    }
    // Smaller pages, more requests (the paper's Figure 9).
    let req: Vec<f64> = rows
        .iter()
        .map(|r| get(r, "page_requests_per_frame").parse().unwrap())
        .collect();
    assert!(req[0] > req[1] && req[1] > req[2], "{req:?}");
    let per_device = csv(&out.join("per_device.csv"));
    assert_eq!(per_device.len(), 6);
    let report = json(&out.join("page-8/report.json"));
    for row in per_device.iter().filter(|r| get(r, "page_size") == "8") {
        let d: usize = get(row, "device").parse().unwrap();
        let dev = &report["per_device"][d];
        assert_eq!(
            get(row, "unique_bytes").parse::<f64>().unwrap(),
            dev["memory"]["unique_bytes"].as_f64().unwrap()
        );
        assert_eq!(
            get(row, "read_requests_per_frame").parse::<f64>().unwrap(),
            dev["read_requests_per_frame"].as_f64().unwrap()
        );
    }
    for plot in ["memory", "requests", "transfer", "speed", "stages"] {
        check_plot_png(&out.join(format!("{plot}.png")));
        let svg = std::fs::read_to_string(out.join(format!("{plot}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("<text"), "{plot}.svg");
    }
    let speed = std::fs::read_to_string(out.join("speed.svg")).unwrap();
    assert!(speed.contains("measured") && speed.contains("modeled on pcie1-x16"));

    // An ordinary run with the same settings counts the same (the boundary at row 32 is a
    // page boundary for every page size here, so the counts do not depend on timing).
    let run_dir = dir.path().join("run");
    ok(&[argv("run boiling --size 64 --devices 2 --page 8 --frames 2 --warmup 1 --topology pcie1-x16 --out"), vec![run_dir.to_str().unwrap()]].concat());
    let row = rows.iter().find(|r| get(r, "page_size") == "8").unwrap();
    same_counters(row, &json(&run_dir.join("report.json")), "tessera run");
}

/// Under a budget a sweep's CSVs say what it cost, as each point's report does: the budget,
/// the policy, evictions, their write-backs and refaults, per point and per device.
#[test]
fn a_sweep_under_a_budget_carries_its_evictions() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    ok(&[
        argv(
            "sweep devices --size 128 --page 16 --devices 1,2 --frames 3 --warmup 1 \
             --budget-mib 0.08 --policy clock --out",
        ),
        vec![out.to_str().unwrap()],
    ]
    .concat());
    let rows = csv(&out.join("sweep.csv"));
    let per_device = csv(&out.join("per_device.csv"));
    assert_eq!(rows.len(), 2);
    let mut evicted = 0;
    for row in &rows {
        let n = get(row, "devices");
        let report = json(&out.join(format!("devices-{n}/report.json")));
        assert_eq!(get(row, "budget_bytes"), report["budget_bytes"].to_string());
        assert_eq!(get(row, "policy"), "clock");
        for (col, ptr) in [
            ("evictions", "/eviction/evictions"),
            ("eviction_write_backs", "/eviction/write_backs"),
            ("refaults", "/eviction/refaults"),
            (
                "eviction_write_backs_per_frame",
                "/write_backs_per_frame/eviction",
            ),
        ] {
            let want = report.pointer(ptr).unwrap().as_f64().unwrap();
            assert_eq!(
                get(row, col).parse::<f64>().unwrap(),
                want,
                "{n} devices: {col}"
            );
        }
        evicted += get(row, "evictions").parse::<u64>().unwrap();
        for d in per_device.iter().filter(|r| get(r, "devices") == n) {
            let i: usize = get(d, "device").parse().unwrap();
            assert_eq!(
                get(d, "evictions"),
                report["per_device"][i]["eviction"]["evictions"].to_string(),
                "{n} devices, device {i}"
            );
        }
    }
    assert!(evicted > 0, "the budget evicted nothing");
}

#[test]
fn modeled_time_charges_each_page_move_to_its_link() {
    let dir = tempfile::tempdir().unwrap();
    ok(&[
        "run",
        "boiling",
        "--size",
        "64",
        "--devices",
        "1",
        "--page",
        "16",
        "--frames",
        "1",
        "--topology",
        "pcie1-x16",
        // The modeled frame must be the cold one, which the isolated model would run
        // second, after the pages had moved in.
        "--model",
        "concurrent",
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    let r = json(&dir.path().join("report.json"));
    assert_eq!(r["modeled"]["model"], "concurrent");
    assert_eq!(r["modeled"]["manager_seconds_measured"], 0.0);
    assert_eq!(r["time_kind"], "measured");
    assert_eq!(r["modeled"]["time_kind"], "modeled");
    assert_eq!(r["topology"], "pcie1-x16");
    // One device, one frame: every page comes from home over host->device0, a 4 GB/s link
    // with 10 us per page move, and nothing else moves.
    let pages = r["host_to_device_per_frame"]["pages"].as_f64().unwrap();
    let bytes = r["host_to_device_per_frame"]["bytes"].as_f64().unwrap();
    assert_eq!(pages, 5.0 * 16.0, "five textures of 4x4 pages");
    let want = pages * 10e-6 + bytes / 4e9;
    let links = r["modeled"]["links"].as_array().unwrap();
    let link = links.iter().find(|l| l["link"] == "host->device0").unwrap();
    let busy = link["busy_seconds"].as_f64().unwrap();
    assert!((busy - want).abs() < 1e-12, "{busy} vs {want}");
    // One link busy at a time, so the transfer part of the model is that link's time.
    let transfer = r["modeled"]["transfer_seconds_modeled"].as_f64().unwrap();
    assert!((transfer - want).abs() < 1e-12, "{transfer} vs {want}");
    let total = r["modeled"]["seconds"].as_f64().unwrap();
    let device = r["modeled"]["device_seconds_measured"].as_f64().unwrap();
    assert!((total - device - transfer).abs() < 1e-12);
    assert!(device > 0.0);

    // The isolated model adds the memory manager's time, summed over devices.
    let iso = tempfile::tempdir().unwrap();
    ok(&[argv("run boiling --size 64 --devices 2 --page 16 --frames 2 --warmup 1 --topology pcie1-x16 --out"), vec![iso.path().to_str().unwrap()]].concat());
    let r = json(&iso.path().join("report.json"));
    let m = &r["modeled"];
    assert_eq!(m["model"], "isolated");
    assert_eq!(r["simulated_frames"], 3);
    let f = |k: &str| m[k].as_f64().unwrap();
    let per = |k: &str| -> f64 {
        m[k].as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .sum()
    };
    assert!((f("manager_seconds_measured") - per("manager_seconds_per_device")).abs() < 1e-9);
    let total = f("device_seconds_measured")
        + f("transfer_seconds_modeled")
        + f("manager_seconds_measured");
    assert!((f("seconds") - total).abs() < 1e-12);
    assert_eq!(m["work_seconds_per_device"].as_array().unwrap().len(), 2);
    assert!(r["wall_seconds_devices_one_at_a_time"].as_f64().unwrap() > 0.0);
}

#[test]
fn devices_sweep_reports_speed_up_and_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dev");
    ok(&[
        argv("sweep devices --size 32 --page 8 --devices 1,2,4 --frames 1 --topology nvlink --out"),
        vec![out.to_str().unwrap()],
    ]
    .concat());
    let rows = csv(&out.join("sweep.csv"));
    assert_eq!(rows.len(), 3);
    for row in &rows {
        let n = get(row, "devices");
        same_counters(
            row,
            &json(&out.join(format!("devices-{n}/report.json"))),
            &format!("{n} devices"),
        );
    }
    // Nothing is written back: one device has no boundary, and several keep their boundary
    // pages on their owners (owned pages), moving them device to device instead.
    assert_eq!(get(&rows[0], "device_to_host_pages_per_frame"), "0.0");
    assert_eq!(get(&rows[2], "device_to_host_pages_per_frame"), "0.0");
    assert_ne!(get(&rows[2], "device_to_device_pages_per_frame"), "0.0");
    for plot in ["speedup", "traffic", "requests", "stages"] {
        check_plot_png(&out.join(format!("{plot}.png")));
        assert!(out.join(format!("{plot}.svg")).exists());
    }
}

#[test]
fn residency_pictures_colour_pages_by_device() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok(&[
        argv("run boiling --size 64 --devices 2 --page 16 --frames 2 --residency-png --out"),
        vec![dir.path().to_str().unwrap()],
    ]
    .concat());
    assert!(stdout.contains("residency-field.png"), "{stdout}");
    for t in ["field", "border", "diffusion", "buoyancy", "display"] {
        assert!(
            dir.path().join(format!("residency-{t}.png")).exists(),
            "{t}"
        );
    }
    let img = image::open(dir.path().join("residency-field.png"))
        .unwrap()
        .to_rgb8();
    // 4x4 pages of 64 pixels each (the most a page gets) from (16, 56); rows split the
    // field: device 0 (blue) holds the bottom half, device 1 (orange) the top.
    let at = |px: u32, py_from_bottom: u32| {
        img.get_pixel(16 + px * 64 + 30, 56 + (3 - py_from_bottom) * 64 + 30)
            .0
    };
    assert_eq!(at(0, 0), [31, 119, 180]);
    assert_eq!(at(3, 1), [31, 119, 180]);
    assert_eq!(at(0, 3), [255, 127, 14]);
    assert_eq!(at(2, 2), [255, 127, 14]);
    // The buoyancy pass reads diffusion one row up and down, so the two page rows at the
    // boundary are held by both devices: drawn black.
    let img = image::open(dir.path().join("residency-diffusion.png"))
        .unwrap()
        .to_rgb8();
    let p = img.get_pixel(16 + 30, 56 + 64 + 30).0;
    assert_eq!(p, [20, 20, 20]);
}

/// `residency.csv` is the pictures' legends as numbers, read from the node the report's
/// counters come from. Under a budget in the isolated model the devices that ran together can
/// end holding other pages than the devices run one at a time; the pictures were drawn from
/// the former while the report gave the latter.
#[test]
fn the_residency_table_agrees_with_the_report_under_a_budget() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(&[
        argv(
            "run boiling --size 100 --page 16 --devices 3 --split tiles --frames 3 --warmup 1 \
             --budget-mib 0.06 --residency-png --gif-every 0 --out",
        ),
        vec![out.to_str().unwrap()],
    ]
    .concat());
    let report = json(&out.join("report.json"));
    let rows = csv(&out.join("residency.csv"));
    let get = |r: &[(String, String)], k: &str| r.iter().find(|(h, _)| h == k).unwrap().1.clone();
    let mut alone = [0u64; 3];
    let mut per_texture = std::collections::BTreeMap::<String, u64>::new();
    for r in &rows {
        let pages: u64 = get(r, "pages").parse().unwrap();
        *per_texture.entry(get(r, "texture")).or_default() += pages;
        if let Ok(d) = get(r, "holder").parse::<usize>() {
            alone[d] += pages;
        }
    }
    // Five textures of ceil(100 / 16)² = 49 pages, each page counted once.
    assert_eq!(per_texture.len(), 5, "{per_texture:?}");
    assert!(per_texture.values().all(|&n| n == 49), "{per_texture:?}");
    for (d, &n) in alone.iter().enumerate() {
        assert_eq!(
            n,
            report["per_device"][d]["memory"]["unique_pages"]
                .as_u64()
                .unwrap(),
            "device {d}"
        );
    }
    // The budget did bite.
    assert!(report["eviction"]["evictions"].as_u64().unwrap() > 0);
}

#[test]
fn a_topology_file_is_used_and_its_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(
        &good,
        "name = \"slow-box\"\n[[device]]\nid = 0\n[[device]]\nid = 1\n\
         [[link]]\nfrom = \"host\"\nto = \"device0\"\nbandwidth_gb_per_s = 1\nlatency_us = 20\n\
         [[link]]\nfrom = \"host\"\nto = \"device1\"\nbandwidth_gb_per_s = 1\nlatency_us = 20\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    ok(&[
        argv("run boiling --size 32 --page 8 --frames 1 --topology"),
        vec![good.to_str().unwrap()],
        argv("--out"),
        vec![out.to_str().unwrap()],
    ]
    .concat());
    let r = json(&out.join("report.json"));
    assert_eq!(r["topology"], "slow-box");
    assert_eq!(r["modeled"]["links"].as_array().unwrap().len(), 4);
    assert_eq!(r["modeled"]["links"][0]["gb_per_s"], 1.0);

    let bad = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let devs = "[[device]]\nid = 0\n[[device]]\nid = 1\n";
    let link = |to: &str, bw: &str| {
        format!("[[link]]\nfrom = \"host\"\nto = \"{to}\"\nbandwidth_gb_per_s = {bw}\n")
    };
    let negative = bad(
        "negative.toml",
        &format!("{devs}{}{}", link("device0", "-16"), link("device1", "16")),
    );
    let zero = bad(
        "zero.toml",
        &format!("{devs}{}{}", link("device0", "0"), link("device1", "16")),
    );
    let unknown = bad(
        "unknown.toml",
        &format!("{devs}{}{}", link("device0", "16"), link("device7", "16")),
    );
    let cut_off = bad("cut-off.toml", &format!("{devs}{}", link("device0", "16")));
    let syntax = bad("syntax.toml", "[[device]\nid = 0\n");
    let one = bad(
        "one.toml",
        &format!("[[device]]\nid = 0\n{}", link("device0", "16")),
    );
    let out = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["--topology", &negative],
            format!("{negative}:8:22: bandwidth must be a number of GB/s"),
        ),
        (
            vec!["--topology", &zero],
            "bandwidth must be a number of GB/s".into(),
        ),
        (
            vec!["--topology", &unknown],
            format!("{unknown}:11:6: unknown endpoint \"device7\""),
        ),
        (
            vec!["--topology", &cut_off],
            "device1 has no link from host".into(),
        ),
        (vec!["--topology", &syntax], "line 1".into()),
        (
            vec!["--topology", &one],
            format!("(from {one}) has 1 device(s), but the run uses 2"),
        ),
        (
            vec!["--topology", "pcie9-x16"],
            "unknown topology \"pcie9-x16\"".into(),
        ),
    ];
    for (extra, needle) in cases {
        // `--force`: the folder may hold an earlier case's results; a failing run keeps them.
        let mut args = vec![
            "run", "boiling", "--size", "32", "--page", "8", "--out", out, "--force",
        ];
        args.extend(extra.iter());
        let o = tessera(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} should fail");
        assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
        assert!(
            err.contains(&needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
    // Options that do not go together, as CLI.md's exit status says: 2, before the run.
    let mismatch = tessera(&argv(&format!(
        "run boiling --size 32 --page 8 --devices 8 --topology mcm-4 --out {out} --force"
    )));
    assert_eq!(mismatch.status.code(), Some(2), "{}", stderr(&mismatch));
    assert!(stderr(&mismatch).contains("has 4 device(s), but the run uses 8"));
    // A file's device count is found in the file: a failed run, as a scene's contents are.
    let from_file = tessera(&argv(&format!(
        "run boiling --size 32 --page 8 --topology {one} --out {out} --force"
    )));
    assert_eq!(from_file.status.code(), Some(1), "{}", stderr(&from_file));
}

#[test]
fn bad_sweep_lists_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cases = [
        (
            "sweep page-size --pages 4,12,16",
            "page size 12 is not a power of two",
        ),
        ("sweep page-size --pages 1024", "out of range"),
        ("sweep page-size --pages 8,8", "appears twice"),
        ("sweep page-size --pages a,b", "not a whole number"),
        (
            "sweep page-size --size 64 --pages 32,128",
            "page size 128 is larger than the 64x64 field",
        ),
        ("sweep devices --devices 0,2", "out of range"),
        (
            "sweep devices --size 4 --page 1 --devices 2,8",
            "more devices than rows",
        ),
        ("sweep devices --topology warp", "unknown topology"),
    ];
    // Usage errors (exit 2), as the same values are on `run boiling`.
    for (line, needle) in cases {
        let mut args = argv(line);
        args.extend(["--out", out]);
        refused(&args, 2, needle);
    }
    // Nothing was run: a bad point is caught before the first good one starts.
    assert!(!dir.path().join("sweep.csv").exists());
}
