//! `--backend wgpu`, `bench overhead --backend wgpu` and `tessera devices` as a user runs them.
//! Without an adapter the wgpu runs are skipped (and say so), unless `TESSERA_REQUIRE_VULKAN=1`,
//! where they fail.

mod common;

use common::{adapter_or_skip, argv, ok_in, report, tessera, wait_until};

use std::process::Command;

/// `devices` succeeds only where `--backend wgpu` can run: it lists the adapters and the one
/// chosen, or fails (exit 1) saying why, so a script can ask it first.
#[test]
fn devices_lists_adapters_or_fails_saying_there_are_none() {
    let o = tessera(&["devices"]);
    let text = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    match adapter_or_skip() {
        true => {
            assert!(o.status.success(), "{err}");
            assert!(text.contains("--backend wgpu uses:"), "{text}");
        }
        false => {
            assert_eq!(o.status.code(), Some(1), "{text}");
            assert!(err.contains("no GPU adapter found"), "{err}");
        }
    }
    // An adapter asked for by a name that matches none cannot be opened.
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("devices")
        .env("TESSERA_ADAPTER", "no such adapter")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot open a device") || err.contains("no GPU adapter found"),
        "{err}"
    );
}

/// Whether `tessera devices` says the adapter has timestamp queries.
fn gpu_has_timestamps() -> bool {
    String::from_utf8_lossy(&tessera(&["devices"]).stdout).contains("timestamp queries: yes")
}

#[test]
fn wgpu_runs_agree_across_devices_and_procedures() {
    if !adapter_or_skip() {
        return;
    }
    let listing = String::from_utf8_lossy(&tessera(&["devices"]).stdout).to_string();
    let mut sums = Vec::new();
    for (devices, procedure, page) in [("2", "relaunch", "16"), ("3", "two-pass", "8")] {
        let dir = tempfile::tempdir().unwrap();
        let o = tessera(
            &[
                argv("run boiling --backend wgpu --devices"),
                vec![devices],
                argv("--size 48 --page"),
                vec![page],
                argv("--frames 3 --procedure"),
                vec![procedure],
                argv("--partition tiles --verify --out"),
                vec![dir.path().to_str().unwrap()],
            ]
            .concat(),
        );
        // `--verify` fails the run on a difference from the unpaged twin on the same adapter.
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("verified: "),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        let r = report(dir.path());
        assert_eq!(r["backend"], "wgpu");
        // Where the adapter has timestamp queries, the stage breakdown has device time.
        let gpu = &r["gpu_stage_seconds"];
        if listing.contains("timestamp queries: yes") {
            let compute = gpu["compute"].as_f64().unwrap_or(0.0);
            let total: f64 = ["request_pass", "compute", "display"]
                .iter()
                .filter_map(|k| gpu[*k].as_f64())
                .sum();
            assert!(compute > 0.0 && total > compute, "{gpu}");
            let wall: f64 = r["stages"]
                .as_object()
                .unwrap()
                .values()
                .filter_map(|v| v.as_f64())
                .sum();
            assert!(total <= wall, "device time {total} within wall time {wall}");
        } else {
            assert!(gpu.is_null(), "{gpu}");
        }
        sums.push(r["checksum"].clone());
    }
    assert_eq!(sums[0], sums[1]);
}

/// The paper's merge (`--held-in-place off`) with the footprint asked for first, two devices
/// writing the one page of a 64² field: the compute pass's launch releases the lock, and the
/// merge ran without a grant of the written page, so one device's half of the field was lost
/// in every run. `--verify` fails the run on any difference from the unpaged twin.
#[test]
fn two_devices_merging_into_one_page_on_wgpu_keep_both_halves() {
    if !adapter_or_skip() {
        return;
    }
    for devices in ["2", "3"] {
        let dir = tempfile::tempdir().unwrap();
        let o = tessera(
            &[
                argv("run boiling --backend wgpu --size 64 --page 64 --frames 1 --warmup 0"),
                argv("--procedure two-pass --held-in-place off --verify --devices"),
                vec![devices, "--out", dir.path().to_str().unwrap()],
            ]
            .concat(),
        );
        assert!(
            o.status.success(),
            "{devices} devices: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

#[test]
fn bench_overhead_runs_against_the_gpu_twin() {
    if !adapter_or_skip() {
        return;
    }
    let o = tessera(&argv(
        "bench overhead --backend wgpu --size 128 --page 32 --frames 1 --rounds 1",
    ));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("GPU twin"), "{text}");
    assert!(lines[1].starts_with("unpaged "), "{text}");
    let ratio: f64 = lines
        .last()
        .and_then(|l| l.strip_prefix("overhead_ratio="))
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no overhead_ratio line: {text}"));
    assert!(ratio.is_finite() && ratio > 0.0, "{text}");
}

/// With no Vulkan driver to load (the loader pointed at a file that does not exist), a wgpu
/// run fails with a message that says what to install, and no panic.
#[cfg(target_os = "linux")]
#[test]
fn no_adapter_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &[
            argv("run boiling --backend wgpu --size 32 --page 8 --frames 1 --out"),
            vec![dir.path().to_str().unwrap()],
        ]
        .concat()[..],
        &["bench", "overhead", "--backend", "wgpu", "--size", "64"][..],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
            .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("no GPU adapter found"), "{args:?}: {err}");
        assert!(err.contains("mesa-vulkan-drivers"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// GPU-SM's stencil in remote mode on wgpu: `--verify` fails the command unless the field
/// equals the plain single-device reference bit for bit.
#[test]
fn remote_stencil_on_wgpu_equals_the_reference() {
    if !adapter_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let stdout = ok_in("run stencil --backend wgpu --size 12 --halo 2 --devices 2 --split z --access remote --steps 1 --page 4 --verify", dir.path());
    assert!(
        stdout.contains("equals the plain single-device reference"),
        "{stdout}"
    );
    let r = report(dir.path());
    let backend = r["backend"].as_str().unwrap_or_default();
    assert!(backend.starts_with("wgpu"), "{backend}");
    assert_eq!(r["access"], "remote");
    assert_eq!(r["verified"], true);
    // wgpu does not count remote accesses: the report says so, with no figure, not zero.
    assert_eq!(r["remote_counted"], false);
    for key in [
        "remote_mib_per_frame",
        "remote_batch_fraction",
        "modeled_remote_ms_per_frame",
    ] {
        assert!(r[key].is_null(), "{key}: {}", r[key]);
    }
    assert!(
        stdout.contains("remote accesses: not counted on this backend (wgpu)"),
        "{stdout}"
    );
}

#[test]
fn page_moves_on_wgpu_compare_with_plain_write_buffer() {
    if !adapter_or_skip() {
        return;
    }
    // Five page sizes: a wgpu device binds four memories, one per slot size, so one node for
    // the whole list stopped at the fifth size.
    let o = tessera(&argv(
        "bench page-moves --backend wgpu --mib 1 --rounds 1 --pages-kib 1,2,4,16,64",
    ));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("copy_buffer_to_buffer"), "{out}");
    for kib in [1, 2, 4, 16, 64] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("page_kib={kib} ")))
            .unwrap_or_else(|| panic!("{kib} KiB missing from {out}"));
        // Each plain comparison is a positive ratio (a zero or NaN would mean a time was not
        // measured).
        for key in [
            "h2d_vs_write_buffer=",
            "h2d_vs_write_buffer_wait=",
            "d2d_vs_copy_b2b=",
        ] {
            let v: f64 = line
                .split(' ')
                .find_map(|w| w.strip_prefix(key))
                .unwrap_or_else(|| panic!("{key} missing from {line}"))
                .parse()
                .unwrap();
            assert!(v.is_finite() && v > 0.0, "{line}");
        }
    }
    // The CLI's two devices share one wgpu device, so their device → device moves are copies
    // on it (peer copies), not read-backs through the host.
    assert!(
        out.contains("device→device: every page a peer copy"),
        "{out}"
    );
}

/// Under a budget a lone device queues the bands it is granted, as it queues the ones it
/// holds, so the host waits for the GPU once a frame, not once a launch; with `--deferred off`
/// it waits for every launch. The eviction it does meanwhile ranks pages by the stamps of the
/// last settle. Both give the resident run's field.
#[test]
fn oversubscription_on_wgpu_waits_for_the_gpu_once_a_frame_when_deferred() {
    if !adapter_or_skip() {
        return;
    }
    let mut rows = Vec::new();
    for deferred in ["on", "off"] {
        let dir = tempfile::tempdir().unwrap();
        let out = ok_in(
            &format!(
                "bench oversubscription --backend wgpu --size 64 --page 8 --frames 2 --rounds 1 \
                 --ratios 4 --policy lru,clock --deferred {deferred}"
            ),
            dir.path(),
        );
        assert!(
            out.contains("every field checksum equals the resident run's"),
            "{out}"
        );
        let csv = std::fs::read_to_string(dir.path().join("oversubscription.csv")).unwrap();
        let mut lines = csv.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
        let (waits, evictions, sum) = (
            col("device_waits_per_frame"),
            col("evictions_per_frame"),
            col("checksum"),
        );
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            let num = |i: usize| f[i].parse::<f64>().unwrap();
            rows.push((deferred, num(waits), num(evictions), f[sum].to_string()));
        }
    }
    assert_eq!(rows.len(), 4, "{rows:?}");
    for (deferred, waits, evictions, _) in &rows {
        assert!(*evictions > 0.0, "the budget must evict: {rows:?}");
        match *deferred {
            "on" => assert!(*waits <= 1.0, "{rows:?}"),
            _ => assert!(*waits >= 5.0, "{rows:?}"),
        }
    }
    assert!(rows.iter().all(|r| r.3 == rows[0].3), "{rows:?}");
}

/// Mesa prints "error: XDG_RUNTIME_DIR is invalid or not set" where it is unset, as in a CI
/// job, though nothing is wrong; the CLI gives itself a private folder instead. On a CPU
/// adapter a run says, before its first launch, that kernels compile slowly there.
#[test]
fn devices_and_runs_print_no_mesa_noise_and_say_when_kernels_compile_slowly() {
    if !adapter_or_skip() {
        return;
    }
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("devices")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("error"), "{err}");
    let cpu = String::from_utf8_lossy(&o.stdout).contains(", Cpu, ");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args([
            "run",
            "boiling",
            "--backend",
            "wgpu",
            "--size",
            "32",
            "--page",
            "16",
        ])
        .args([
            "--frames",
            "1",
            "--gif-every",
            "0",
            "--out",
            out.to_str().unwrap(),
        ])
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("XDG_RUNTIME_DIR"), "{err}");
    assert_eq!(err.contains("compiling kernels for"), cpu, "{err}");
}

/// `run vr --backend wgpu` draws the stereo frame the CPU backend draws, within the raster's
/// cross-backend tolerance (tessera-wgpu's `quake_wgpu.rs`: a driver may fuse the depth and
/// texture-coordinate sums into FMAs, so at most 0.5% of pixels may differ).
#[test]
fn vr_on_wgpu_draws_the_cpu_frame() {
    if !adapter_or_skip() {
        return;
    }
    let mut images = Vec::new();
    for backend in ["cpu", "wgpu"] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        ok_in(&format!("run vr --generated 2 --frames 2 --warmup 0 --width 48 --height 32 --page 8 --devices 2 --backend {backend}"), &out);
        let r = report(&out);
        assert!(
            r["backend"].as_str().unwrap().starts_with(backend),
            "{}",
            r["backend"]
        );
        assert_eq!(r["devices"], 2);
        // The adapter's own name on wgpu, as every workload's report gives it, not the
        // backend's description of its devices ("wgpu (llvmpipe ..., Vulkan)").
        let adapter = r["adapter"].as_str().unwrap();
        assert!(!adapter.starts_with("wgpu"), "{adapter}");
        assert_eq!(adapter.starts_with("cpu"), backend == "cpu", "{adapter}");
        // The GPU's time per measured frame, from timestamps where the adapter has them (as
        // lavapipe has); none on the CPU backend, which has no device time apart from its wall
        // time.
        let gpu = &r["frame_gpu_seconds"];
        if backend == "cpu" || !gpu_has_timestamps() {
            assert!(gpu.is_null(), "{gpu}");
        } else {
            let frames = gpu.as_array().unwrap_or_else(|| panic!("{gpu}"));
            assert_eq!(frames.len(), 2);
            for (f, wall) in frames.iter().zip(r["frame_seconds"].as_array().unwrap()) {
                let (f, wall) = (f.as_f64().unwrap(), wall.as_f64().unwrap());
                assert!(
                    f > 0.0 && f <= wall,
                    "device {f} s against a {wall} s frame"
                );
            }
        }
        let png = image::open(out.join("stereo.png")).unwrap().to_rgba8();
        images.push(png.into_raw());
    }
    let px = images[0].len() / 4;
    let differ = images[0]
        .chunks_exact(4)
        .zip(images[1].chunks_exact(4))
        .filter(|(a, b)| a != b)
        .count();
    let lit = images[0]
        .chunks_exact(4)
        .filter(|p| p[..3] != images[0][..3])
        .count();
    assert!(
        lit > px / 10,
        "the frame shows the scene: {lit} of {px} pixels differ from the first"
    );
    assert!(
        differ as f64 <= 0.005 * px as f64,
        "{differ} of {px} pixels differ between the backends"
    );
}

/// `bench gpu` runs the workloads on both backends of this machine and prints a ratio for
/// each: measured times, so the test checks that each is a positive number, not its size.
#[test]
fn bench_gpu_prints_a_ratio_per_workload() {
    if !adapter_or_skip() {
        return;
    }
    let o = tessera(&argv(
        "bench gpu --quick --frames 1 --workloads boiling,stencil,convolution,raytrace",
    ));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for w in ["boiling", "stencil", "convolution", "raytrace"] {
        // The value of a `key=value` line.
        let value = |key: String| -> f64 {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .unwrap_or_else(|| panic!("no {key}: {out}"))
                .parse()
                .unwrap()
        };
        let ratio = value(format!("gpu_vs_cpu_{w}"));
        assert!(ratio.is_finite() && ratio > 0.0, "{w}: {ratio}");
        // The GPU run's host work, read from its report: it submitted work every frame.
        let submissions: f64 = out
            .lines()
            .skip_while(|l| !l.starts_with("the host's work"))
            .find(|l| l.trim_start().starts_with(w))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no host row for {w}: {out}"))
            .parse()
            .unwrap();
        assert!(submissions > 0.0, "{w}: {out}");
        // The kernels' device time is part of the GPU frame: a share in (0, 1] of it where
        // the adapter has timestamps, as lavapipe has (counted twice, the ray tracer's would
        // be near 2).
        if gpu_has_timestamps() {
            let share = value(format!("gpu_busy_share_{w}"));
            assert!(share > 0.0 && share <= 1.0, "{w}: {share}");
        }
    }
    assert!(
        !out.contains("gpu_vs_cpu_vr"),
        "only the workloads asked for: {out}"
    );
    // A workload that is not one, or one named twice, is a usage error.
    let bad = tessera(&["bench", "gpu", "--workloads", "boiling,doom"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid value 'doom'"));
    let twice = tessera(&["bench", "gpu", "--workloads", "stencil,stencil"]);
    assert_eq!(twice.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&twice.stderr).contains("names stencil twice"));
    // A device count the workload's fixed size refuses: the run's usage error is this
    // command's (exit 2), said with the run's own error line.
    let split = tessera(&[
        "bench",
        "gpu",
        "--quick",
        "--devices",
        "3",
        "--workloads",
        "stencil",
    ]);
    let err = String::from_utf8_lossy(&split.stderr);
    assert_eq!(split.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "run stencil --backend cpu failed: cannot split 32 cells along z between 3 devices"
        ),
        "{err}"
    );
}

/// An interrupted `bench gpu` stops the run it started and removes its scratch folder: the
/// run went on writing into that folder after the bench had exited, and the folder stayed.
#[cfg(target_os = "linux")]
#[test]
fn an_interrupted_bench_gpu_leaves_no_run_and_no_scratch_folder() {
    if !adapter_or_skip() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(argv(
            "bench gpu --quick --frames 40 --workloads boiling,stencil",
        ))
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let scratch = tmp.path().join(format!("tessera-bench-gpu-{}", child.id()));
    // Interrupted while its first run is under way: the scratch folder holds that run's
    // partial folder. Enough frames that the run is still going when it is looked for.
    wait_until("the bench's first run", || {
        std::fs::read_dir(&scratch).is_ok_and(|mut d| d.next().is_some())
    });
    let runs = || -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains(scratch.to_str().unwrap()))
            .collect()
    };
    assert!(!runs().is_empty(), "the bench's run was not found running");
    let o = common::interrupt(child);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(
        !scratch.exists(),
        "{:?}",
        std::fs::read_dir(&scratch).map(|d| d.count())
    );
    assert!(runs().is_empty(), "{:?}", runs());
}

/// Runs `args` with `var=value` in the environment; it must fail, naming the variable and
/// what it takes, and write nothing into `out`.
fn refused_switch(var: &str, value: &str, args: &[&str], out: &std::path::Path) {
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .env(var, value)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{var}={value} {args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains(&format!("{var}=\"{value}\"")) && err.contains("expected on or off"),
        "{var}={value}: {err}"
    );
    assert!(!out.join("report.json").exists());
}

/// The environment's on/off switches (CLI.md, "Environment").
const SWITCHES: [&str; 4] = [
    "TESSERA_PEER_COPY",
    "TESSERA_WGPU_TILES",
    "TESSERA_WGPU_SPECIALIZE",
    "TESSERA_WGPU_BOUNDS_CHECKS",
];

#[test]
fn a_misspelt_switch_in_the_environment_is_refused_not_taken_as_its_opposite() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let cpu = [
        argv("run boiling --size 32 --page 8 --frames 1 --out"),
        vec![o],
    ]
    .concat();
    // On the CPU backend too, the wgpu backend's switches are read and a misspelt one
    // refused: the same command line may be meant for either backend.
    for var in SWITCHES {
        refused_switch(var, "0ff", &cpu, &out);
    }
    if !adapter_or_skip() {
        return;
    }
    let gpu = [
        argv("run boiling --backend wgpu --size 32 --page 8 --frames 1 --out"),
        vec![o],
    ]
    .concat();
    for var in SWITCHES {
        refused_switch(var, "yes", &gpu, &out);
    }
    // Both words are taken.
    for value in ["on", "off"] {
        let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(&gpu)
            .arg("--force")
            .env("TESSERA_WGPU_TILES", value)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
}
