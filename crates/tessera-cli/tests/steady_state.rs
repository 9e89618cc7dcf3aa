//! The steady state as a user sees it in `report.json`: once every page is resident, a frame
//! of boiling on one device costs no message to the memory manager and no page request, on
//! the CPU backend and on wgpu (lavapipe in CI). The host counters themselves are checked to
//! count: a two-device run, whose boundary pages move every frame, must show messages.

mod common;

use common::{adapter_or_skip, argv, tessera};

/// Runs `run boiling` at 512² (page 64, one warm-up frame, no GIF) and returns its report.
fn boiling(backend: &str, devices: &str, procedure: &str) -> serde_json::Value {
    boiling_with(backend, devices, procedure, &[])
}

fn boiling_with(
    backend: &str,
    devices: &str,
    procedure: &str,
    extra: &[&str],
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let mut args = [
        argv("run boiling --backend"),
        vec![backend],
        argv("--devices"),
        vec![devices],
        argv("--size 512 --page 64 --frames 2 --warmup 1 --gif-every 0 --procedure"),
        vec![procedure],
        argv("--out"),
        vec![dir.path().to_str().unwrap()],
    ]
    .concat();
    args.extend_from_slice(extra);
    let o = tessera(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap()
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Boiling's frame is five passes (four simulation kernels and the display).
const PASSES: f64 = 5.0;

fn check_steady(backend: &str) {
    let mut sums = Vec::new();
    let merged = ["--held-in-place", "off"];
    for (procedure, extra) in [
        ("relaunch", &[][..]),
        ("two-pass", &[][..]),
        ("two-pass", &merged[..]),
    ] {
        let r = boiling_with(backend, "1", procedure, extra);
        let d = &r["per_device"][0];
        let h = &d["host"];
        let in_place = extra.is_empty();
        assert_eq!(r["held_in_place"], in_place);
        let ctx = format!("{backend} {procedure} {extra:?}: {d}");
        assert_eq!(num(&d["page_requests_per_frame"]), 0.0, "{ctx}");
        assert_eq!(num(&d["request_batches_per_frame"]), 0.0, "{ctx}");
        assert_eq!(num(&h["manager_messages_per_frame"]), 0.0, "{ctx}");
        // The counters count: every pass hands the device work, and the host waits for it.
        assert!(num(&h["submissions_per_frame"]) >= PASSES, "{ctx}");
        assert!(num(&h["blocking_waits_per_frame"]) >= 1.0, "{ctx}");
        // Every pass deferred, and one blocking wait per frame, when the frame settles: a
        // relaunch band is one submission, and so is a two-pass part held in place; a part
        // merged two, its compute pass and its merge (its request pass is skipped: the
        // device holds the part's pages).
        let per_pass = if in_place { 1.0 } else { 2.0 };
        let submissions = num(&h["submissions_per_frame"]);
        assert!(submissions <= per_pass * PASSES + 1.0, "{ctx}");
        assert!(num(&h["blocking_waits_per_frame"]) <= 1.0, "{ctx}");
        let held = d["bands_launched_held"].as_u64().unwrap();
        if in_place {
            assert!(held > 0, "{ctx}");
        } else {
            assert_eq!(held, 0, "{ctx}");
            // The merged parts do run their merge.
            assert!(submissions > PASSES + 1.0, "{ctx}");
        }
        if procedure == "two-pass" {
            assert_eq!(d["request_passes"].as_u64(), Some(0), "{ctx}");
        }
        sums.push(r["checksum"].clone());
        if backend == "wgpu" {
            // Queued on the GPU: one wait for the GPU a frame, for every status (80 bytes
            // each), and no fault lists.
            assert!(num(&h["bytes_read_back_per_frame"]) > 0.0, "{ctx}");
            assert!(num(&h["device_waits_per_frame"]) <= 1.0, "{ctx}");
            assert!(
                num(&h["bytes_read_back_per_frame"]) <= submissions * 80.0,
                "{ctx}"
            );
        }
    }
    // Two devices share boundary pages that move every frame: the counter sees the requests.
    // Nothing is deferred in the frames the isolated model times device by device, so their
    // field checks the deferred one's.
    let r = boiling(backend, "2", "relaunch");
    sums.push(r["checksum"].clone());
    for d in r["per_device"].as_array().unwrap() {
        assert!(num(&d["host"]["manager_messages_per_frame"]) > 0.0, "{d}");
        assert!(num(&d["page_requests_per_frame"]) > 0.0, "{d}");
    }
    if backend == "wgpu" {
        // Two tessera devices on the one GPU share its queue: with the devices together their
        // launches are queued too, those whose boundary pages must be asked for included, so
        // a frame waits for the GPU once a device (not once a pass), and the pages that move
        // device to device cost no wait and no read-back.
        let together = ["--model", "concurrent"];
        let r = boiling_with(backend, "2", "relaunch", &together);
        sums.push(r["checksum"].clone());
        for d in r["per_device"].as_array().unwrap() {
            let h = &d["host"];
            assert!(num(&h["manager_messages_per_frame"]) > 0.0, "{d}");
            assert!(num(&d["page_requests_per_frame"]) > 0.0, "{d}");
            assert!(num(&h["device_waits_per_frame"]) <= 1.0, "{d}");
            let submissions = num(&h["submissions_per_frame"]);
            assert!(
                num(&h["bytes_read_back_per_frame"]) <= submissions * 80.0,
                "{d}"
            );
        }
        // Deferred off, each pass waits for its launches.
        let off = boiling_with(
            backend,
            "2",
            "relaunch",
            &[&together[..], &["--deferred", "off"]].concat(),
        );
        sums.push(off["checksum"].clone());
        for d in off["per_device"].as_array().unwrap() {
            assert!(num(&d["host"]["device_waits_per_frame"]) >= PASSES, "{d}");
        }
    }
    assert!(sums.iter().all(|s| s == &sums[0]), "{sums:?}");
}

#[test]
fn a_resident_frame_sends_nothing_to_the_memory_manager_on_the_cpu_backend() {
    check_steady("cpu");
}

#[test]
fn deferred_off_waits_per_launch_and_gives_the_same_field() {
    let on = boiling("cpu", "1", "relaunch");
    let off = boiling_with("cpu", "1", "relaunch", &["--deferred", "off"]);
    assert_eq!(on["deferred"], true);
    assert_eq!(off["deferred"], false);
    assert_eq!(on["checksum"], off["checksum"]);
    let waits =
        |r: &serde_json::Value| num(&r["per_device"][0]["host"]["blocking_waits_per_frame"]);
    assert!(waits(&on) <= 1.0, "{on}");
    assert!(waits(&off) >= PASSES, "{off}");
}

#[test]
fn a_resident_frame_sends_nothing_to_the_memory_manager_on_wgpu() {
    if !adapter_or_skip() {
        return;
    }
    check_steady("wgpu");
}

#[test]
fn with_the_devices_one_at_a_time_the_managers_work_runs_on_the_waiting_thread() {
    // In the isolated model each device's batch finds the memory manager and every other
    // device's worker idle, so the manager's command runs on the driver's own thread and its
    // device jobs (revocations, peer copies, installs) there too: the only blocking waits
    // left are the launches', one a pass. Handing each job to its worker thread instead
    // waited three to four times as often (19 a frame on two devices).
    let r = boiling_with("cpu", "2", "relaunch", &["--model", "isolated"]);
    for d in r["per_device"].as_array().unwrap() {
        assert!(num(&d["host"]["manager_messages_per_frame"]) > 0.0, "{d}");
        assert!(num(&d["request_batches_per_frame"]) > 0.0, "{d}");
        assert!(num(&d["host"]["blocking_waits_per_frame"]) <= PASSES, "{d}");
    }
    let m = &r["modeled"];
    // The boundary pages' copies are timed and left out of the manager's time.
    assert!(num(&m["manager_copy_seconds_left_out"]) > 0.0, "{m}");
}

/// `--split-on-pages`: at 320² with 64-row pages, two devices cut evenly share the page row
/// at row 160, and both write it every pass; cut on pages (192 + 128 rows) they share none,
/// so fewer pages go from one device to the other. The field is the same either way, and the
/// report says which cut ran.
#[test]
fn a_pass_is_cut_on_pages_unless_told_to_cut_evenly() {
    let run = |on: &str| {
        let dir = tempfile::tempdir().unwrap();
        let args = [
            argv("run boiling --devices 2 --size 320 --page 64 --frames 2 --warmup 1"),
            argv("--gif-every 0 --split-on-pages"),
            vec![on],
            argv("--out"),
            vec![dir.path().to_str().unwrap()],
        ]
        .concat();
        let o = tessera(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap())
                .unwrap();
        r
    };
    let (pages, even) = (run("on"), run("off"));
    assert_eq!(pages["split_on_pages"], true);
    assert_eq!(even["split_on_pages"], false);
    assert_eq!(pages["checksum"], even["checksum"]);
    let moved = |r: &serde_json::Value| -> f64 {
        r["per_device"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| num(&d["device_to_device_peer_per_frame"]["pages"]))
            .sum()
    };
    assert!(
        moved(&pages) < moved(&even),
        "{} against {}",
        moved(&pages),
        moved(&even)
    );
}
