//! A run over litmus files: each loaded and run in turn, its report handed on as it completes,
//! and the tally that says whether the whole run passed.

use std::path::{Path, PathBuf};

use crate::run::{count, run_test, Report, RunConfig};

/// What became of one file.
pub enum FileOutcome<'a> {
    /// It ran; its report.
    Ran(&'a Report),
    /// It could not be loaded, or its run failed: the message.
    Error(String),
}

/// The files run, and which did not pass.
#[derive(Debug, Default)]
pub struct Tally {
    pub files: usize,
    pub passed: usize,
    /// Tests that showed an outcome sequential consistency forbids, or whose run failed.
    pub failed: Vec<String>,
    /// Files that could not be loaded.
    pub unreadable: Vec<String>,
    /// Tests run, and those in which every outcome SC allows showed up.
    pub ran: usize,
    pub covered: usize,
}

/// Runs every file of `files` with `config`, handing each outcome to `each` as it completes;
/// one bad file does not stop the others.
pub fn run_files(
    files: &[PathBuf],
    config: &RunConfig,
    mut each: impl FnMut(FileOutcome),
) -> Tally {
    let mut t = Tally {
        files: files.len(),
        ..Tally::default()
    };
    for path in files {
        let test = match crate::load(path) {
            Ok(test) => test,
            Err(e) => {
                each(FileOutcome::Error(e.to_string()));
                t.unreadable.push(path.display().to_string());
                continue;
            }
        };
        match run_test(&test, config) {
            Ok(report) => {
                each(FileOutcome::Ran(&report));
                t.ran += 1;
                if report.covered() {
                    t.covered += 1;
                }
                if report.passed() {
                    t.passed += 1;
                } else {
                    t.failed.push(test.name.clone());
                }
            }
            Err(e) => {
                each(FileOutcome::Error(format!("{}: {e}", path.display())));
                t.failed.push(test.name.clone());
            }
        }
    }
    t
}

impl Tally {
    /// The summary and coverage lines.
    pub fn summary(&self) -> String {
        format!(
            "Summary: {}, {} passed, {} failed, {} not run (unreadable, malformed or unsupported)\nCoverage: every outcome sequential consistency allows seen in {} of {} tests run",
            count(self.files, "file", "files"),
            self.passed,
            self.failed.len(),
            self.unreadable.len(),
            self.covered,
            self.ran
        )
    }

    /// The summary as one JSON object: the counts of [`Tally::summary`], with the tests
    /// that failed and the files not run by name.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "summary": {
                "files": self.files,
                "passed": self.passed,
                "failed": self.failed,
                "not_run": self.unreadable,
                "tests_run": self.ran,
                "covered": self.covered,
            }
        })
    }

    /// Why the run failed, if it did.
    pub fn problems(&self) -> Option<String> {
        let mut problems = Vec::new();
        if !self.failed.is_empty() {
            problems.push(format!(
                "{} showed outcomes sequential consistency forbids or failed to run ({})",
                count(self.failed.len(), "test", "tests"),
                self.failed.join(", ")
            ));
        }
        if !self.unreadable.is_empty() {
            problems.push(format!(
                "{} could not be run: unreadable, malformed or unsupported ({})",
                count(self.unreadable.len(), "file", "files"),
                self.unreadable.join(", ")
            ));
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}
/// Each path as given, but a folder becomes the `.litmus` files below it, its subfolders
/// included, in order of their paths: `tessera litmus tests/litmus` runs the whole suite,
/// where the shell's `tests/litmus/**/*.litmus` leaves the subfolders out unless bash's
/// `globstar` is on. A folder with none, or a part of one that cannot be listed, stays in
/// the list as itself, so that loading it says what is wrong and the other files still run.
pub fn expand_folders(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let mut found = Vec::new();
        for entry in walkdir::WalkDir::new(path).follow_links(true) {
            match entry {
                Ok(e) if e.file_type().is_file() && is_litmus(e.path()) => {
                    found.push(e.into_path())
                }
                Ok(_) => {}
                Err(e) => found.push(e.path().unwrap_or(path).to_path_buf()),
            }
        }
        if found.is_empty() {
            found.push(path.clone());
        }
        found.sort();
        out.extend(found);
    }
    out
}

fn is_litmus(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "litmus")
}
