//! The library's first stop for a user, examples/blur, run on both backends so that it
//! cannot rot: `run` fails unless every texel matches the example's own plain loop.

#[allow(dead_code)] // `main` is the example's, not the test's.
#[path = "../examples/blur/main.rs"]
mod blur;

fn args(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split_whitespace().map(String::from)
}

fn check(backend: &str) {
    // Pages of 16 over 96 rows split in 3 bands: bands end inside pages, so neighbours share
    // pages at every border, and the passes ping-pong what one device wrote to the others.
    let o = blur::parse(args(&format!(
        "--backend {backend} --devices 3 --size 96 --page 16 --passes 3"
    )))
    .unwrap();
    let traffic = blur::run(&o).unwrap_or_else(|e| panic!("blur on {backend}: {e:#}"));
    assert_eq!(traffic.len(), 3);
    for (d, t) in traffic.iter().enumerate() {
        assert!(
            t.host_to_device.pages > 0,
            "device {d} fetched nothing: {t:?}"
        );
    }
}

#[test]
fn blur_on_cpu_matches_the_plain_loop() {
    check("cpu");
}

/// Whether wgpu can run here; without an adapter the caller skips (saying so), unless
/// `TESSERA_REQUIRE_VULKAN=1`, where it fails.
fn wgpu_here() -> bool {
    if tessera::wgpu::adapters().is_empty() {
        assert!(
            std::env::var("TESSERA_REQUIRE_VULKAN").as_deref() != Ok("1"),
            "TESSERA_REQUIRE_VULKAN=1 but wgpu finds no adapter"
        );
        eprintln!("SKIPPED: no wgpu adapter (set TESSERA_REQUIRE_VULKAN=1 to fail instead)");
        return false;
    }
    true
}

#[test]
fn blur_on_wgpu_matches_the_plain_loop() {
    if wgpu_here() {
        check("wgpu");
    }
}

/// Fewer rows than devices: the last device sits every pass out, the others match the loop.
fn short_of_rows(backend: &str) {
    let o = blur::parse(args(&format!(
        "--backend {backend} --devices 3 --size 2 --page 2 --passes 2"
    )))
    .unwrap();
    let traffic = blur::run(&o).unwrap_or_else(|e| panic!("blur on {backend}: {e:#}"));
    let busy: Vec<bool> = traffic.iter().map(|t| t.page_requests > 0).collect();
    assert_eq!(busy, [true, true, false], "{traffic:?}");
}

#[test]
fn blur_of_fewer_rows_than_devices_on_cpu_matches_the_plain_loop() {
    short_of_rows("cpu");
}

#[test]
fn blur_of_fewer_rows_than_devices_on_wgpu_matches_the_plain_loop() {
    if wgpu_here() {
        short_of_rows("wgpu");
    }
}

#[test]
fn bad_options_are_errors_not_panics() {
    for bad in [
        "--backend vulkan",
        "--size x",
        "--size 100000",
        "--devices",
        "--colour red",
    ] {
        assert!(blur::parse(args(bad)).is_err(), "{bad} was accepted");
    }
    // An unknown option is called unknown, with or without a value after it, and its
    // message does not take the next word for part of the option.
    for bad in ["--bogus", "--bogus 1"] {
        let e = blur::parse(args(bad)).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.starts_with("unknown option --bogus\n")),
            "{bad}: {e:?}"
        );
    }
    for bad in ["--devices 0", "--page 3", "--size 0"] {
        let o = blur::parse(args(bad)).unwrap();
        assert!(blur::run(&o).is_err(), "{bad} ran");
    }
}
