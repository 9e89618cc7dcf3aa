//! `tessera run stencil|convolution` and their sweeps as a user runs them: results equal the
//! plain reference, reports hold what they promise, bad input is a clear error, never a panic.

mod common;

use common::{argv, fails, ok_in, refused, report, run_report};

use tessera_workloads::{convolution, stencil};

fn checksum(v: &[f32]) -> String {
    // FNV-1a over the f32 bits, written here from its definition.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in v.iter().flat_map(|f| f.to_bits().to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

#[test]
fn run_stencil_in_every_version_equals_the_reference() {
    // 1 warm-up + 2 steps together: the result. The isolated model's settling and lone steps
    // come after it, for the model only.
    let want = checksum(&stencil::reference::run(&stencil::initial(16), 16, 2, 3));
    for (access, split) in [
        ("explicit", "x"),
        ("migrate", "y"),
        ("migrate", "z"),
        ("remote", "y"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let stdout = ok_in(&format!("run stencil --size 16 --halo 2 --devices 4 --split {split} --access {access} --steps 2 --page 8 --verify"), dir.path());
        assert!(stdout.contains("equals the plain single-device reference"));
        assert!(stdout.contains("measured wall time"));
        let r = report(dir.path());
        assert_eq!(r["checksum"], want.as_str(), "{access} {split}");
        assert_eq!(r["verified"], true);
        assert_eq!(r["access"], access);
        assert!(r["filter_access"].is_null(), "{}", r["filter_access"]);
        // Two-pass by default for migrate only (docs/EVALUATION.md says why).
        let want_procedure = if access == "migrate" {
            "two-pass"
        } else {
            "relaunch"
        };
        assert_eq!(r["procedure"], want_procedure, "{access}");
        // Four devices exchange halos every step: pages cross a link, or (remote) accesses.
        let moved = r["moved_mib_per_frame"].as_f64().unwrap();
        let remote = r["remote_mib_per_frame"].as_f64().unwrap();
        if access == "remote" {
            assert_eq!(moved, 0.0, "a remote page is never copied");
            assert!(remote > 0.0);
        } else {
            assert!(moved > 0.0);
            assert_eq!(remote, 0.0);
        }
        assert_eq!(r["remote_counted"], true);
        for d in r["per_device"].as_array().unwrap() {
            assert!(
                d["stages"].is_object() && d.get("stage_seconds").is_none(),
                "{d}"
            );
        }
        assert!(r["modeled_ms_per_frame"].as_f64().unwrap() > 0.0);
        assert_eq!(r["per_device"].as_array().unwrap().len(), 4);
    }
}

#[test]
fn run_convolution_equals_the_reference() {
    let init = convolution::initial(32);
    // 1 warm-up + 1 step together: the result, whichever model times it.
    let want = checksum(&convolution::reference::run(
        &init,
        32,
        &convolution::filter(7),
        7,
        2,
    ));
    for (access, filter_access, model) in [
        ("explicit", "replicate", "isolated"),
        ("migrate", "remote-cached", "isolated"),
        ("remote", "remote", "isolated"),
        ("migrate", "remote-cached", "concurrent"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let r = run_report(
            &format!(
                "run convolution --filter-access {filter_access} --size 32 --filter 7 --devices 2 \
                 --access {access} --steps 1 --page 8 --model {model}"
            ),
            dir.path(),
        );
        assert_eq!(r["checksum"], want.as_str(), "{access} {model}");
        assert_eq!(r["filter_size"], 7);
        // The settings differ only here; a script needs them as a key, not in the prose.
        assert_eq!(r["filter_access"], filter_access, "{access} {model}");
    }
}

/// Under a budget the field does not fit, the report and the printout say what the budget
/// did (a user saw pages go home under `--budget-mib` and nothing said why), the devices'
/// figures add up to the run's, and the field is the reference's. With room for everything,
/// nothing is evicted.
#[test]
fn a_budget_reports_its_evictions() {
    let want = checksum(&convolution::reference::run(
        &convolution::initial(64),
        64,
        &convolution::filter(3),
        3,
        3, // the warm-up step and the two measured
    ));
    let dir = tempfile::tempdir().unwrap();
    let line = "run convolution --size 64 --filter 3 --devices 2 --steps 2 --page 8 --policy clock";
    let tight = dir.path().join("tight");
    let said = ok_in(&format!("{line} --budget-mib 0.01"), &tight);
    assert!(said.contains("evictions/step"), "{said}");
    let r = report(&tight);
    assert_eq!(r["checksum"], want.as_str());
    assert_eq!(r["budget_bytes"], 10485);
    assert_eq!(r["policy"], "clock");
    let total = r["eviction_per_frame"]["evictions"].as_f64().unwrap();
    assert!(total > 0.0, "{}", r["eviction_per_frame"]);
    let per_device: f64 = r["per_device"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["eviction_per_frame"]["evictions"].as_f64().unwrap())
        .sum();
    assert_eq!(per_device, total);
    let roomy = run_report(line, &dir.path().join("roomy"));
    assert_eq!(roomy["checksum"], want.as_str());
    assert_eq!(roomy["eviction_per_frame"]["evictions"], 0.0);
}

/// A budget that holds the pages one invocation asked for by their bytes, but not beside the
/// others it keeps, is refused with advice above the budget it had, never at or under it.
#[test]
fn a_budget_refused_advises_more_than_it_had() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let err = refused(
        &[
            argv("run convolution --size 32 --page 4 --frames 2 --filter 31 --budget-mib 0.006 --out"),
            vec![out.to_str().unwrap()],
        ]
        .concat(),
        1,
        "budget of 6291 bytes is too small",
    );
    assert!(err.contains("give it more than 6291 bytes"), "{err}");
    assert!(!out.exists());
}

/// A stencil refused for its budget is told how many bytes are enough for any one invocation,
/// and given that many it runs. The message had given only the pages the invocation missed
/// before the budget ran out, a lower bound: a run given it failed again asking for more.
#[test]
fn a_stencil_refused_for_its_budget_is_told_what_is_enough() {
    let dir = tempfile::tempdir().unwrap();
    let line = "run stencil --size 32 --halo 2 --page 8 --devices 2 --steps 1";
    let out = dir.path().join("tiny");
    let err = refused(
        &[
            argv(line),
            argv("--budget-mib 0.001 --out"),
            vec![out.to_str().unwrap()],
        ]
        .concat(),
        1,
        "budget of 1048 bytes is too small",
    );
    // The star of radius 2: its centre, 6 × 2 neighbours and the cell written, each maybe on
    // a page of its own, in pages of 8 × 8 four-byte cells.
    let enough = (1 + 6 * 2 + 1) * 8 * 8 * 4;
    // Also in MiB, to paste into --budget-mib: 3584 / 2^20 exactly.
    let mib = "0.00341796875";
    assert!(
        err.contains(&format!(
            "({enough} bytes, {mib} MiB, are enough for any one invocation of it;"
        )),
        "{err}"
    );
    assert!(!out.exists());
    let r = run_report(
        &format!("{line} --budget-mib {mib}"),
        &dir.path().join("enough"),
    );
    assert_eq!(r["budget_bytes"], enough);
    // The warm-up step and the measured one.
    let want = checksum(&stencil::reference::run(&stencil::initial(32), 32, 2, 2));
    assert_eq!(r["checksum"], want.as_str());
}

/// A 3 × 3 filter's pages are smaller than the field's 8 × 8 ones. Under a budget no larger
/// than one memory (64 MiB), the first memory made took the whole budget and the filter's
/// pages never got a slot: "out of its memory budget", at any budget up to 64 MiB.
#[test]
fn a_small_budget_leaves_room_for_the_filters_smaller_pages() {
    let want = checksum(&convolution::reference::run(
        &convolution::initial(32),
        32,
        &convolution::filter(3),
        3,
        2,
    ));
    for (access, budget) in [("migrate", 64.0), ("explicit", 64.0), ("migrate", 1.0)] {
        let dir = tempfile::tempdir().unwrap();
        let r = run_report(
            &format!(
                "run convolution --size 32 --filter 3 --devices 2 --access {access} --steps 1 \
                 --page 8 --budget-mib {budget}"
            ),
            dir.path(),
        );
        assert_eq!(r["checksum"], want.as_str(), "{access} {budget}");
    }
}

#[test]
fn sweep_stencil_writes_csv_and_plot_and_skips_impossible_points() {
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok_in("sweep stencil --size 16 --halo 2,8 --devices 1,4 --access explicit,migrate --steps 1 --page 8", dir.path());
    // Halo 8 on 4 devices of 16: slabs of 4 are thinner than the halo.
    assert!(stdout.contains("skipped"), "{stdout}");
    let csv = std::fs::read_to_string(dir.path().join("sweep.csv")).unwrap();
    // Header + 2 accesses × (halo 2 at 1 and 4 devices, halo 8 at 1 device).
    assert_eq!(csv.lines().count(), 1 + 2 * 3, "{csv}");
    // The report's names for the page side and the measured frames (CLI.md, "Reports").
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    for key in [
        "backend",
        "adapter",
        "page_size",
        "frames",
        "warmup_frames",
        "procedure",
        "modeled_work_ms_per_frame",
        "wall_ms_per_frame_measured",
        "checksum",
    ] {
        assert!(head.contains(&key), "{key}: {head:?}");
    }
    // One field per halo, whatever the access or the device count.
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    for r in &rows {
        let same = rows
            .iter()
            .find(|o| o[col("halo")] == r[col("halo")])
            .unwrap();
        assert_eq!(r[col("checksum")], same[col("checksum")], "{csv}");
        assert_eq!(r[col("checksum")].len(), 16, "{csv}");
    }
    assert!(dir.path().join("speedup.svg").exists());
    assert!(dir.path().join("speedup.png").exists());
}

#[test]
fn bad_input_is_a_clear_error_never_a_panic() {
    let cases = [
        (
            "run stencil --size 16 --halo 8 --devices 4",
            "larger than a device's slab",
        ),
        // A convolution's halo is its filter's reach: the message speaks of the filter given.
        (
            "run convolution --size 32 --devices 4 --filter 31",
            "a 31x31 filter's reach of 15 cells is larger than a device's slab of 8 cells along y",
        ),
        (
            "run convolution --size 1 --devices 1 --filter 5",
            "a 5x5 filter's reach of 2 cells is more than the grid's 1 cell along y (use a larger grid or a smaller filter)",
        ),
        (
            "run stencil --size 18 --devices 4 --halo 2",
            "multiple of the device count",
        ),
        ("run stencil --size 16 --halo 0", "halo must be at least 1"),
        ("run stencil --access shared", "unknown access mode"),
        ("run stencil --split w", "unknown split"),
        (
            "run stencil --size 1000",
            "--size must be between 1 and 512",
        ),
        ("run stencil --size 16 --page 12", "power of two"),
        (
            "run convolution --size 32 --filter 4",
            "filter size must be odd",
        ),
        (
            "run convolution --filter-access bogus",
            "possible values: replicate, remote, remote-cached",
        ),
        (
            "run convolution --size 32 --split z",
            "an image has no z axis",
        ),
        ("run convolution --split w", "(expected x or y)"),
        (
            "run convolution --size 32 --access explicit --filter-access remote",
            "replicates the filter by hand",
        ),
        (
            "run convolution --size 30 --devices 4",
            "multiple of the device count",
        ),
        ("sweep convolution --filter 3,6", "filter size must be odd"),
        (
            "sweep stencil --access explicit,bogus",
            "unknown access mode",
        ),
    ];
    for (line, want) in cases {
        fails(&argv(line), want);
    }
}

/// A sweep point refused whatever its device count, or an option a slab decomposition has no
/// use for, is an option the command cannot honour: exit 2 before anything runs, as `run`
/// gives for the same option, not points skipped one by one (an even filter of a doubling
/// list, a split the convolution does not take, the default page larger than the field).
#[test]
fn sweep_points_refused_at_any_device_count_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (line, want) in [
        (
            "sweep convolution --size 64 --filter 3,...,31 --devices 1,2 --frames 1",
            "must be odd",
        ),
        ("sweep convolution --size 64 --split z --frames 1", "split"),
        ("sweep stencil --size 16 --frames 1", "larger than"),
        // Accepted and ignored before: the slabs are placed by the decomposition.
        (
            "run stencil --size 16 --page 8 --split-on-pages off",
            "--split-on-pages applies to 2D partitions",
        ),
        (
            "sweep convolution --size 64 --split-on-pages on",
            "--split-on-pages applies to 2D partitions",
        ),
        // Every point runs alone but none at the device counts given.
        (
            "sweep stencil --size 16 --page 8 --devices 3 --halo 1 --frames 1",
            "no point of the sweep can run",
        ),
    ] {
        let mut args = argv(line);
        args.extend(["--out", out.to_str().unwrap()]);
        refused(&args, 2, want);
        assert!(!out.exists(), "{line} wrote {}", out.display());
    }
}

/// Remote accesses are classified per 64×64 tile of invocations whatever the thread count: a
/// launch with remote objects runs whole tiles. Cutting a launch's last tiles into quarters
/// for balance made the batch and spread bytes, and the modeled time, depend on `--threads`,
/// and differ between the two mirror-image devices of a Y split.
#[test]
fn remote_counts_do_not_depend_on_the_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let runs: Vec<serde_json::Value> = [1, 2, 8]
        .iter()
        .map(|t| {
            let cmd = format!(
                "run stencil --size 32 --halo 4 --steps 1 --split y --page 8 --threads {t} \
                 --access remote --topology gpusm-pcie3"
            );
            run_report(&cmd, &dir.path().join(format!("t{t}")))
        })
        .collect();
    // The modeled time is a difference of two modeled step times, so it carries their
    // rounding: equal within a part in 10⁹, where the cut tiles moved it by 75%.
    let ms = |r: &serde_json::Value| r["modeled_remote_ms_per_frame"].as_f64().unwrap();
    for r in &runs[1..] {
        assert_eq!(r["remote"], runs[0]["remote"]);
        assert!(
            (ms(r) - ms(&runs[0])).abs() <= 1e-9 * ms(&runs[0]),
            "{} {}",
            ms(r),
            ms(&runs[0])
        );
    }
    let links = runs[0]["remote"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{links:?}");
    for k in [
        "batch_mib_per_frame",
        "spread_mib_per_frame",
        "batches_per_frame",
    ] {
        assert_eq!(links[0][k], links[1][k], "{k}: {links:?}");
    }
}

/// Under the concurrent model a step swaps two fields, so settled counts need a warm-up step
/// for each: with one, the field swapped in first is touched for the first time in the first
/// measured step (576 page requests a step at one step, 352 at two), and with two every count
/// is the isolated model's, whatever the step count. `bench gpu` runs the stencil so.
#[test]
fn concurrent_counts_settle_after_a_warm_up_step_per_field() {
    let dir = tempfile::tempdir().unwrap();
    let requests = |extra: &str, name: &str| {
        let cmd = format!(
            "run stencil --size 32 --halo 2 --split z --devices 2 --access migrate --page 8 {extra}"
        );
        run_report(&cmd, &dir.path().join(name))["page_requests_per_frame"]
            .as_f64()
            .unwrap()
    };
    let isolated = requests("--frames 1", "i");
    assert!(requests("--model concurrent --frames 1", "c") > isolated);
    for f in [1, 2] {
        let got = requests(
            &format!("--model concurrent --warmup 2 --frames {f}"),
            &format!("c{f}"),
        );
        assert_eq!(got, isolated, "{f} step(s)");
    }
}
