//! What the CLI's test binaries share: running `tessera` and reading what it wrote. Each
//! binary uses part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .output()
        .expect("the binary runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args`, which must succeed; returns what it printed.
pub fn ok(args: &[&str]) -> String {
    let o = tessera(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// Runs `args`, which must fail with exit status `code` (2: usage, 1: the run), without a
/// panic and with `needle` in its message; returns the message.
pub fn refused(args: &[&str], code: i32, needle: &str) -> String {
    let o = tessera(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err}"
    );
    err
}

pub fn json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `cmd` (its words split at white space) with `--out out`, which must succeed; what it
/// printed.
pub fn ok_in(cmd: &str, out: &Path) -> String {
    let mut args = argv(cmd);
    args.extend(["--out", out.to_str().expect("a UTF-8 path")]);
    ok(&args)
}

/// Runs `cmd` (its words split at white space) with `--out out`, which must succeed; the
/// report.json it wrote.
pub fn run_report(cmd: &str, out: &Path) -> serde_json::Value {
    ok_in(cmd, out);
    report(out)
}

/// The report.json a run wrote into `dir`.
pub fn report(dir: &Path) -> serde_json::Value {
    json(&dir.join("report.json"))
}

/// The names in `dir`, sorted; none where it does not exist.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Runs `args`: whether it succeeded, and what it printed on stdout and stderr.
pub fn outcome(args: &[&str]) -> (bool, String, String) {
    let o = tessera(args);
    (o.status.success(), stdout(&o), stderr(&o))
}

/// Writes `Scene::generated(n)` as the pk3 `dir/<file>`: `bsp` in place of its BSP (its own
/// when `None`), and its textures as TGA but the ones in `skip`.
pub fn write_pk3(dir: &Path, file: &str, n: u32, bsp: Option<Vec<u8>>, skip: &[usize]) {
    use image::{ImageFormat, RgbaImage};
    use tessera_scene::{bsp, pk3, Scene};
    let scene = Scene::generated(n);
    let bsp = bsp.unwrap_or_else(|| bsp::write(&scene));
    let mut files = vec![(format!("maps/{}.bsp", scene.name), bsp)];
    for (_, t) in scene
        .textures
        .iter()
        .enumerate()
        .filter(|(i, _)| !skip.contains(i))
    {
        let img = RgbaImage::from_raw(t.width, t.height, t.rgba.clone()).unwrap();
        let mut tga = std::io::Cursor::new(Vec::new());
        img.write_to(&mut tga, ImageFormat::Tga).unwrap();
        files.push((format!("{}.tga", t.name), tga.into_inner()));
    }
    std::fs::write(dir.join(file), pk3::write(&files).unwrap()).unwrap();
}

/// The words of `line` as arguments: `argv("run boiling --size 32")`.
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// Runs `args`, which must fail (with any status) without a panic and with `needle` in its
/// message; returns the message.
pub fn fails(args: &[&str], needle: &str) -> String {
    let o = tessera(args);
    let err = stderr(&o);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err}"
    );
    err
}

/// Whether `--backend wgpu` can run here; without an adapter the caller skips (saying so),
/// unless `TESSERA_REQUIRE_VULKAN=1`.
pub fn adapter_or_skip() -> bool {
    let o = tessera(&["devices"]);
    let listing = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if listing.contains("--backend wgpu uses:") {
        return true;
    }
    assert!(
        std::env::var("TESSERA_REQUIRE_VULKAN").as_deref() != Ok("1"),
        "TESSERA_REQUIRE_VULKAN=1 but no adapter: {listing}"
    );
    eprintln!("SKIPPED: no wgpu adapter ({listing})");
    false
}

/// A JSON array of whole numbers.
pub fn u64s(v: &serde_json::Value) -> Vec<u64> {
    let all = v.as_array().expect("an array").iter();
    all.map(|v| v.as_u64().expect("a whole number")).collect()
}

/// A JSON array of numbers.
pub fn f64s(v: &serde_json::Value) -> Vec<f64> {
    let all = v.as_array().expect("an array").iter();
    all.map(|v| v.as_f64().expect("a number")).collect()
}

/// Waits until `ready` holds, looking every millisecond, and fails naming `what` after a
/// minute.
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !ready() {
        assert!(start.elapsed().as_secs() < 60, "{what} never happened");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Sends SIGINT to `child`, as Ctrl-C would, and waits for it to end.
#[cfg(unix)]
pub fn interrupt(child: std::process::Child) -> Output {
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    child.wait_with_output().unwrap()
}
