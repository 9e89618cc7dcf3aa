//! The file-backed home (`SystemConfig::home_file`): passes, write-backs, creation and freeing
//! in the middle of a run give the same bytes as the in-memory home; bad paths are typed
//! errors.
// With `shuttle` the runtime's threads run only inside a shuttle run (tests/shuttle.rs).
#![cfg(not(feature = "shuttle"))]

use std::path::PathBuf;

use tessera_core::{ObjectDesc, ObjectId, TexelFormat};
use tessera_runtime::{Fault, Invocation, Kernel, RuntimeError, System, SystemConfig};

const N: u32 = 16;

/// `to(x, y) = from(x, N-1-y) + 1`: with the rows split across two devices, every device reads
/// rows the other one wrote, so modified pages are written back home and copied from there.
struct Mirror {
    from: ObjectId,
    to: ObjectId,
}

impl Kernel for Mirror {
    fn name(&self) -> &'static str {
        "mirror"
    }
    fn invoke(&self, inv: &mut Invocation<'_>, x: u32, y: u32) -> Result<(), Fault> {
        let v = inv.load_f32(self.from, x, N - 1 - y)?;
        inv.store_f32(self.to, x, y, v + 1.0)
    }
}

fn texture() -> ObjectDesc {
    // 4×4 pages, so a 16×16 texture has 16 of them.
    ObjectDesc::texture(N, N, TexelFormat::R32Float, 4).unwrap()
}

fn floats(f: impl Fn(u32, u32) -> f32) -> Vec<f32> {
    (0..N * N).map(|i| f(i % N, i / N)).collect()
}

fn config(home_file: Option<PathBuf>) -> SystemConfig {
    SystemConfig {
        devices: 2,
        cpu_threads: 1,
        home_file,
        // The paper's rule writes every page another device reads home: the file then takes
        // writes as well as reads. Under owned pages these pages stay on their owners.
        coherence: tessera_core::Coherence::WriteHome,
        ..Default::default()
    }
}

/// Passes with objects created and freed between them; returns what is read back.
fn run(home_file: Option<PathBuf>) -> Vec<Vec<f32>> {
    let sys = System::cpu(&config(home_file)).unwrap();
    let scratch = sys.create_f32(N, N, 4, None).unwrap();
    let a = sys
        .create_f32(N, N, 4, Some(&floats(|x, y| (x * 100 + y) as f32)))
        .unwrap();
    let b = sys.create_f32(N, N, 4, None).unwrap();
    // A hole before `a`, for `d` below.
    sys.mm.free(scratch.id).unwrap();
    sys.run_kernel(
        Mirror {
            from: a.id,
            to: b.id,
        },
        &[&a, &b],
        N,
        N,
    )
    .unwrap();
    sys.run_kernel(
        Mirror {
            from: b.id,
            to: a.id,
        },
        &[&b, &a],
        N,
        N,
    )
    .unwrap();
    let b_out = sys.read_f32(&b).unwrap();
    sys.mm.free(b.id).unwrap();
    let d = sys
        .create(texture(), Some(vec![0xA5; (N * N * 4) as usize]))
        .unwrap();
    assert_eq!(
        d.page_offset, scratch.page_offset,
        "d reuses the freed pages"
    );
    sys.run_kernel(
        Mirror {
            from: a.id,
            to: d.id,
        },
        &[&a, &d],
        N,
        N,
    )
    .unwrap();
    let traffic = sys.mm.traffic().unwrap();
    assert!(
        traffic.iter().all(|t| t.device_to_host.pages > 0),
        "modified pages went home: {traffic:?}"
    );
    vec![b_out, sys.read_f32(&a).unwrap(), sys.read_f32(&d).unwrap()]
}

#[test]
fn a_file_backed_run_reads_back_what_an_in_memory_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tessera.home");
    let in_file = run(Some(path.clone()));
    let in_memory = run(None);
    assert_eq!(in_file, in_memory);
    let a0 = |x: u32, y: u32| (x * 100 + y) as f32;
    // b = mirror(a) + 1, a = mirror(b) + 1 = a + 2, d = mirror(a) + 1.
    assert_eq!(in_memory[0], floats(|x, y| a0(x, N - 1 - y) + 1.0));
    assert_eq!(in_memory[1], floats(|x, y| a0(x, y) + 2.0));
    assert_eq!(in_memory[2], floats(|x, y| a0(x, N - 1 - y) + 3.0));
    assert!(!path.exists(), "the home file goes with its node");
}

#[test]
fn the_home_file_exists_while_the_node_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tessera.home");
    let sys = System::cpu(&config(Some(path.clone()))).unwrap();
    let a = sys.create_f32(N, N, 4, None).unwrap();
    // 16 pages of 4×4 floats.
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 16 * 64);
    sys.mm.free(a.id).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "freed space is given back"
    );
    drop(sys);
    assert!(!path.exists());
}

#[test]
fn bad_home_files_are_typed_errors_and_existing_files_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("data.bin");
    std::fs::write(&existing, b"someone's data").unwrap();
    use std::io::ErrorKind;
    // The OS error each path gives; None: refused as an existing file.
    let cases = [
        (dir.path().to_path_buf(), Some(ErrorKind::IsADirectory)),
        (
            dir.path().join("no").join("such").join("dir"),
            Some(ErrorKind::NotFound),
        ),
        (existing.clone(), None),
    ];
    for (path, want) in cases {
        let e = match System::cpu(&config(Some(path.clone()))) {
            Ok(_) => panic!("{} was accepted", path.display()),
            Err(e) => e,
        };
        match (&e, want) {
            (RuntimeError::HomeFile { kind, path: p, .. }, Some(want)) => {
                assert_eq!((*kind, p), (want, &path))
            }
            (RuntimeError::HomeFileExists { path: p }, None) => assert_eq!(p, &path),
            _ => panic!("{}: expected {want:?}, got {e:?}", path.display()),
        }
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"someone's data");
    assert!(dir.path().is_dir());
}
