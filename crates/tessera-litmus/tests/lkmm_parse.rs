//! Which of the Linux kernel's litmus tests parse, with each refusal: a survey, not a gate
//! (`cargo test -p tessera-litmus --test lkmm_parse -- --ignored --nocapture`).

use std::path::{Path, PathBuf};

fn litmus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            litmus_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "litmus") {
            out.push(p);
        }
    }
    out.sort();
}

#[test]
#[ignore = "a survey of ../shared/litmus/lkmm; prints, asserts nothing"]
fn lkmm_parse_survey() {
    let dir = std::env::var_os("TESSERA_LKMM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/litmus/lkmm")
        });
    if !dir.is_dir() {
        eprintln!("no lkmm directory at {}", dir.display());
        return;
    }
    let mut files = Vec::new();
    litmus_files(&dir, &mut files);
    let mut ok = 0;
    for f in &files {
        match tessera_litmus::load(f) {
            Ok(t) => match tessera_litmus::sc_outcomes(&t) {
                Ok(_) => ok += 1,
                Err(e) => eprintln!("oracle: {}: {e}", f.display()),
            },
            Err(e) => eprintln!("parse: {e}"),
        }
    }
    eprintln!("{ok} of {} parse and have an SC outcome set", files.len());
}
