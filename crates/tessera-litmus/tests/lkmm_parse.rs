//! Which of the Linux kernel's litmus tests parse, with each refusal: a survey, not a gate
//! (`cargo test -p tessera-litmus --test lkmm_parse -- --ignored --nocapture`).

mod common;

use common::{litmus_files, lkmm_path};

#[test]
#[ignore = "a survey of ../shared/litmus/lkmm; prints, asserts nothing"]
fn lkmm_parse_survey() {
    let dir = lkmm_path();
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
