//! Results appear only when a run succeeds. A command that writes into `--out` writes into a
//! hidden folder beside it instead (`.<name>.partial-<pid>`), which is renamed into place when
//! the command has finished without error; a failure, a panic or Ctrl-C removes it, so `--out`
//! never holds a 0-byte GIF or half of a sweep. An `--out` that already holds results is refused
//! unless `--force` is given, and then replaced only at the end, by the new results.

use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use anyhow::{bail, Context, Result};

/// The partial folders of this process, the `--out` each stands for, and the folders above
/// it that the command created: what Ctrl-C removes, and what [`shown`] maps back for
/// messages.
static PARTIAL: Mutex<Vec<(PathBuf, PathBuf, Vec<PathBuf>)>> = Mutex::new(Vec::new());

/// Files a command writes outside `--out` (`run quake --trace`): each written whole to a
/// hidden file beside its path and moved onto the path only when `--out` is committed, so a
/// command that fails or is interrupted leaves neither a new file nor a replaced one.
static ON_COMMIT: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());

/// Lines naming what a command wrote ("wrote DIR/report.json"), held while its results are
/// still in a partial folder and printed once they are in place: a command whose commit fails
/// does not claim files that never appear.
static WROTE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Held while results move into place ([`Staged::commit`]) and by the interrupt handler from
/// its start to the process's exit: an interrupt either finds the results wholly in place or
/// wholly in their partial folder, never half moved, and once it has begun no commit starts.
static COMMIT: Mutex<()> = Mutex::new(());

/// Set by the interrupt handler before anything else: the main thread, whatever it fails
/// with meanwhile (its partial folder removed under it), leaves the exit to the handler.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// The `--out` folders this process has moved results into: what an interrupt that comes
/// after the commit names.
static COMMITTED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Folders a command made for itself outside `--out` (`bench gpu`'s scratch folder), removed
/// on an interrupt as on any other end.
static SCRATCH: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Processes this one started and waits for (`bench gpu`'s runs): stopped on an interrupt,
/// which would otherwise leave them running, writing into a scratch folder being removed.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Set once standard output has failed: nothing more is written to it.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
/// The first failure of standard output other than its reader going away.
static STDOUT_ERROR: OnceLock<String> = OnceLock::new();

/// Writes `text` to standard output, as `print!` does, without `print!`'s panic when the write
/// fails. A reader that went away (`| head`, a broken pipe) only stops the printing: the run
/// goes on and its results land in `--out`. Any other failure (a full disk) is kept for
/// [`stdout_failure`], which fails the command, since a script reading the lines would get
/// them cut short.
pub fn say(text: &str) {
    on_stdout(|o| o.write_all(text.as_bytes()));
}

/// Says `line` (a "wrote ..." line) once the results it names are in place: at once when no
/// partial folder or file to commit is open, else at the commit, and never if the command
/// fails.
pub fn wrote(line: String) {
    let open = PARTIAL.lock().map(|p| !p.is_empty()).unwrap_or(false)
        || ON_COMMIT.lock().map(|f| !f.is_empty()).unwrap_or(false);
    if open {
        if let Ok(mut w) = WROTE.lock() {
            w.push(line);
            return;
        }
    }
    say(&format!("{line}\n"));
}

/// Prints the held "wrote" lines, or drops them.
fn release_wrote(print: bool) {
    let lines = WROTE
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default();
    if print {
        for line in lines {
            say(&format!("{line}\n"));
        }
    }
}

/// The "wrote" lines held for the commit.
#[cfg(test)]
fn held_wrote() -> Vec<String> {
    WROTE.lock().map(|w| w.clone()).unwrap_or_default()
}

/// Standard output's failure, other than a reader that went away, if it failed.
pub fn stdout_failure() -> Result<()> {
    // What a line-buffered stdout still holds fails here, not at the exit, where it would be
    // dropped unseen.
    on_stdout(|o| o.flush());
    match STDOUT_ERROR.get() {
        Some(e) => bail!("cannot write to standard output: {e}"),
        None => Ok(()),
    }
}

/// Runs `op` on standard output unless it has failed before, and records its failure.
fn on_stdout(op: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    if let Err(e) = op(&mut std::io::stdout().lock()) {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = STDOUT_ERROR.set(e.to_string());
        }
    }
}

/// A command's output folder while it runs.
pub struct Staged {
    out: PathBuf,
    partial: PathBuf,
    /// The folders above `out` this command created, deepest first: a command that fails
    /// leaves none of them behind.
    created: Vec<PathBuf>,
    committed: bool,
}

/// Removes every partial folder and exits with 130 on SIGINT (and SIGTERM): an interrupted
/// run leaves nothing behind. Installed once, before any command starts.
pub fn remove_partial_on_interrupt() {
    // mpirun ends every process when one fails: the others' "interrupted" says why, or it reads
    // as if someone had pressed Ctrl-C.
    let why = match crate::mpi_processes() {
        Some(n) if n > 1 => " (mpirun stops every process when one fails or is interrupted)",
        _ => "",
    };
    // A second install fails; the first one's handler does the same.
    let _ = ctrlc::set_handler(move || {
        INTERRUPTED.store(true, Ordering::SeqCst);
        // Waits for a commit under way, and keeps any other from starting: the handler ends
        // the process while it holds the lock.
        let _commit = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
        // The process ends here without dropping its systems, whose home files
        // (`--home-file`) would have gone with them.
        tessera_runtime::remove_home_files();
        drop_on_commit();
        stop_children();
        for p in SCRATCH.lock().map(|s| s.clone()).unwrap_or_default() {
            remove_while_written(&p);
        }
        let partial = PARTIAL.lock().map(|p| p.clone()).unwrap_or_default();
        for (p, _, created) in &partial {
            remove_while_written(p);
            remove_created(created);
        }
        let committed = COMMITTED.lock().map(|c| c.clone()).unwrap_or_default();
        let line = if !partial.is_empty() {
            format!(
                "interrupted{why}: nothing written to {}\n",
                list(partial.iter().map(|(_, o, _)| o))
            )
        } else if !committed.is_empty() {
            format!(
                "interrupted{why}, after the results were in place in {}\n",
                list(committed.iter())
            )
        } else {
            format!("interrupted{why}\n")
        };
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        std::process::exit(130);
    });
}

/// Marks `dir` for removal on an interrupt ([`forget_scratch`] when the command removes it).
pub fn scratch(dir: &Path) {
    if let Ok(mut s) = SCRATCH.lock() {
        s.push(dir.to_path_buf());
    }
}

/// `dir`, removed by its command, no longer needs removing on an interrupt.
pub fn forget_scratch(dir: &Path) {
    if let Ok(mut s) = SCRATCH.lock() {
        s.retain(|d| d != dir);
    }
}

/// Runs `cmd` to its end, as `Command::output` does, stopped by an interrupt of this process.
pub fn child_output(cmd: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    if let Ok(mut c) = CHILDREN.lock() {
        c.push(pid);
    }
    let out = child.wait_with_output();
    if let Ok(mut c) = CHILDREN.lock() {
        c.retain(|&p| p != pid);
    }
    out
}

/// Asks each child run to stop as an interrupt would (it removes its own partial folder), and
/// waits up to ten seconds for each to be gone: the main thread, waiting for it, reaps it.
fn stop_children() {
    let children = CHILDREN.lock().map(|c| c.clone()).unwrap_or_default();
    #[cfg(unix)]
    for &pid in &children {
        if let Ok(pid) = i32::try_from(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
    }
    let start = std::time::Instant::now();
    for pid in children {
        let proc = Path::new("/proc").join(pid.to_string());
        while proc.exists() && start.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// The paths, comma-separated, for a message.
fn list<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> String {
    paths
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Removes a partial folder the main thread may still be writing into: renamed aside first,
/// so the main thread's next file or folder there fails instead of appearing in a folder
/// being emptied (which then could not be removed), then removed; what the main thread
/// created before the rename is inside what is removed.
fn remove_while_written(partial: &Path) {
    let aside = partial.with_file_name(format!(
        "{}.interrupted",
        partial
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    let gone = if std::fs::rename(partial, &aside).is_ok() {
        aside
    } else {
        partial.to_path_buf()
    };
    // A file the main thread had open may still take bytes, never a new entry: a retry
    // finishes what such a write left.
    for _ in 0..3 {
        if std::fs::remove_dir_all(&gone).is_ok() || !gone.exists() {
            return;
        }
    }
}

/// Called by the main thread at its end: once an interrupt has begun, whatever the command
/// came to (often an error from its partial folder taken away) is not its outcome; the handler
/// removes what is left, says so and exits with 130.
pub fn wait_if_interrupted() {
    if INTERRUPTED.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
}

/// Says which partial folders beside `--out` a run that never finished left (one killed
/// outright, by SIGKILL or the out-of-memory killer, removes nothing): hidden, they could hold
/// gigabytes unnoticed. So too the earlier results a run killed in the middle of replacing them
/// (`--force`) had moved aside. Only those whose process is gone from this machine are named,
/// and none is removed: on a shared file system another machine's run may still be writing one.
/// Where `/proc` is not there to ask, nothing is said.
fn note_left_partials(parent: &Path, name: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let partial = format!(".{name}.partial-");
    let replaced = format!(".{name}.replaced-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut left: Vec<(String, u32, bool)> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| {
            let (rest, earlier) = match n.strip_prefix(&partial) {
                Some(rest) => (rest, false),
                None => (n.strip_prefix(&replaced)?, true),
            };
            // An interrupted run renames its partial folder before removing it.
            let pid: u32 = rest
                .strip_suffix(".interrupted")
                .unwrap_or(rest)
                .parse()
                .ok()?;
            Some((n, pid, earlier))
        })
        .filter(|&(_, pid, _)| {
            pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
        })
        .collect();
    left.sort();
    for (n, pid, earlier) in left {
        let what = if earlier {
            "holds earlier results that a run moved aside to replace them, then could not remove or was killed before it did"
        } else {
            "was left by a run that did not finish"
        };
        let advice = if earlier {
            "move back what you want to keep, then remove it"
        } else {
            "its results are incomplete: remove it"
        };
        let line = format!(
            "note: {} {what} (process {pid} is gone from this machine); {advice}\n",
            parent.join(n).display()
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
    }
}

/// `out` without its `.` components, and without `a/..` where `a` does not exist: `d/.` is
/// the folder `d` (replacing `d/.` removed what `d` held and then failed, since no folder can
/// be renamed onto `d/.`), and `new/../x` is `x`, so no empty `new` is made for it. A folder
/// that does not exist is no link, so dropping it with its `..` names the same place.
fn normal(out: &Path) -> PathBuf {
    let mut p = PathBuf::new();
    for c in out.components() {
        let absent =
            matches!(p.components().next_back(), Some(Component::Normal(_))) && !p.exists();
        match c {
            Component::ParentDir if absent => {
                p.pop();
            }
            c => p.push(c),
        }
    }
    p
}

/// Whether `out` may receive a command's results: absent, an empty folder, or (with `force`)
/// a folder of earlier results. Reads only, so every process of a run can ask it.
pub fn check_out(out: &Path, force: bool) -> Result<()> {
    let out = &normal(out);
    // The results are a folder moved into place: onto the folder the command runs in, they
    // would leave the shell that started it in a folder that is gone.
    let here = std::env::current_dir()
        .ok()
        .and_then(|d| d.canonicalize().ok());
    if out.file_name().is_none()
        || (out.is_dir() && here.is_some() && out.canonicalize().ok() == here)
    {
        let which = match out.components().next_back() {
            Some(Component::ParentDir) => "is a folder above the current one",
            Some(Component::RootDir | Component::Prefix(_)) => "is the root folder",
            _ => "is the current folder",
        };
        return Err(crate::usage(format!(
            "--out {} {which}; the results go into a folder of their own, moved into place at the end: name one (e.g. --out results)",
            out.display()
        )));
    }
    // The results folder is renamed onto `--out`: onto a link it would replace the link with
    // a folder and leave the folder it names as it was.
    if out
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let to = std::fs::read_link(out)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        let gone = if out.exists() {
            ""
        } else {
            ", which does not exist"
        };
        return Err(crate::usage(format!(
            "--out {} is a link (to {to}{gone}); the results are a folder moved into place, which would replace the link: give the folder itself",
            out.display()
        )));
    }
    // A folder cannot be made inside a file: say which, rather than the OS's "File exists".
    if let Some(file) = out
        .ancestors()
        .skip(1)
        .find(|a| !a.as_os_str().is_empty() && a.exists())
        .filter(|a| !a.is_dir())
    {
        return Err(crate::usage(format!(
            "--out {}: {} is a file, not a folder",
            out.display(),
            file.display()
        )));
    }
    if out.exists() {
        // What `--out` names is refused as a bad option value is (exit 2), before any work.
        if !out.is_dir() {
            return Err(crate::usage(format!(
                "--out {} exists and is not a folder",
                out.display()
            )));
        }
        let earlier = std::fs::read_dir(out)
            .with_context(|| format!("cannot read --out {}", out.display()))?
            .next()
            .is_some();
        if earlier && !force {
            return Err(crate::usage(format!(
                "--out {} already holds files (earlier results or anything else); choose another folder, or pass --force to replace the folder, whatever it holds, when this run succeeds",
                out.display()
            )));
        }
        // `--force` replaces the folder whole: never one above the folder the command runs in,
        // whatever else it holds.
        if earlier {
            if let (Ok(here), Ok(there)) = (std::env::current_dir(), out.canonicalize()) {
                if here.canonicalize().unwrap_or(here).starts_with(&there) {
                    return Err(crate::usage(format!(
                        "--out {} is the current folder or holds it; --force replaces the folder whole, so give a folder of results below it",
                        out.display()
                    )));
                }
                // An input kept among earlier results (a trace, a topology, a pak folder)
                // would go with them once the run succeeds.
                // The default pak folder too, which no argument names: `--force` must never
                // take the game's files with it.
                let default_pak = (
                    "the default --pak-dir".to_string(),
                    PathBuf::from(tessera_scene::DEFAULT_PAK_DIR),
                );
                let inside = argument_inside(&there, std::env::args_os().skip(1)).or_else(|| {
                    let pak = default_pak.1.canonicalize().ok()?;
                    pak.starts_with(&there).then_some(default_pak)
                });
                if let Some((option, path)) = inside {
                    return Err(crate::usage(format!(
                        "{option} {} is inside --out {}, or is that folder, which --force replaces whole once the run succeeds; move it out of that folder, or give another --out",
                        path.display(),
                        out.display()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The first of `args` (a command line after the program's name) that names something
/// existing inside the folder `out` (canonical), or `out` itself (`--pak-dir pk --out pk`),
/// with the option it was given to ("the argument" for a positional one). Every command's
/// inputs are checked alike this way, whatever options name them.
fn argument_inside(
    out: &Path,
    args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<(String, PathBuf)> {
    let mut option: Option<String> = None;
    for arg in args {
        let text = arg.to_string_lossy().into_owned();
        let (given_to, value) = match text.split_once('=') {
            Some((o, v)) if o.starts_with("--") => (o.to_string(), PathBuf::from(v)),
            _ if text.starts_with('-') => {
                option = Some(text);
                continue;
            }
            _ => (
                option.take().unwrap_or_else(|| "the argument".into()),
                PathBuf::from(arg),
            ),
        };
        option = None;
        if given_to == "--out" {
            continue;
        }
        // What the path leads to, and the entry itself with its last link not followed: a
        // link to a pak folder elsewhere, kept inside --out, went with the folder too.
        let entry = value
            .file_name()
            .filter(|_| std::fs::symlink_metadata(&value).is_ok())
            .and_then(|name| {
                let parent = value.parent().filter(|p| !p.as_os_str().is_empty());
                let parent = parent.unwrap_or(Path::new("."));
                parent.canonicalize().ok().map(|p| p.join(name))
            });
        for at in [value.canonicalize().ok(), entry].into_iter().flatten() {
            if at.starts_with(out) {
                return Some((given_to, value));
            }
        }
    }
    None
}

impl Staged {
    /// Checks `out` and creates its partial folder. `out` may not exist, may be an empty
    /// folder, or (with `force`) a folder of earlier results.
    pub fn begin(out: &Path, force: bool) -> Result<Staged> {
        check_out(out, force)?;
        let out = &normal(out);
        let Some(name) = out.file_name() else {
            bail!("--out {} names no folder", out.display());
        };
        let parent = match out.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let created = missing_folders(&parent);
        if let Err(e) = std::fs::create_dir_all(&parent) {
            remove_created(&created);
            return Err(e).with_context(|| format!("cannot create {}", parent.display()));
        }
        let partial = parent.join(format!(
            ".{}.partial-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        note_left_partials(&parent, &name.to_string_lossy());
        // Left by an earlier process of the same id that was killed outright.
        if partial.exists() {
            std::fs::remove_dir_all(&partial)
                .with_context(|| format!("cannot remove {}", partial.display()))?;
        }
        if let Err(e) = std::fs::create_dir(&partial) {
            remove_created(&created);
            return Err(e).with_context(|| format!("cannot create {}", partial.display()));
        }
        if let Ok(mut p) = PARTIAL.lock() {
            p.push((partial.clone(), out.to_path_buf(), created.clone()));
        }
        Ok(Staged {
            out: out.to_path_buf(),
            partial,
            created,
            committed: false,
        })
    }

    /// Where the command writes.
    pub fn path(&self) -> &Path {
        &self.partial
    }

    /// Moves the results into `--out`, replacing what was there (allowed by `begin`). The
    /// earlier results are moved aside first and removed only once the new ones are in place,
    /// so a failure here leaves them where they were.
    pub fn commit(mut self) -> Result<()> {
        let _commit = COMMIT.lock().unwrap_or_else(|e| e.into_inner());
        if INTERRUPTED.load(Ordering::SeqCst) {
            // The handler waits for this lock and removes the partial folder.
            bail!("interrupted");
        }
        let aside = self.partial.with_file_name(format!(
            ".{}.replaced-{}",
            self.out
                .file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            std::process::id()
        ));
        let replaced = self.out.exists();
        if replaced {
            std::fs::rename(&self.out, &aside).with_context(|| {
                format!(
                    "cannot replace the earlier results in {}",
                    self.out.display()
                )
            })?;
        }
        if let Err(e) = std::fs::rename(&self.partial, &self.out) {
            if replaced {
                let _ = std::fs::rename(&aside, &self.out);
            }
            return Err(e).with_context(|| {
                format!(
                    "cannot move the results from {} to {}",
                    self.partial.display(),
                    self.out.display()
                )
            });
        }
        // The files named by options go last, and a failure among them puts both folders back:
        // the new results into the partial folder that `drop` removes, the earlier ones into
        // `--out`.
        if let Err(e) = commit_files() {
            let _ = std::fs::rename(&self.out, &self.partial);
            if replaced {
                let _ = std::fs::rename(&aside, &self.out);
            }
            return Err(e);
        }
        self.committed = true;
        forget(&self.partial);
        if let Ok(mut c) = COMMITTED.lock() {
            c.push(self.out.clone());
        }
        release_wrote(true);
        // The run succeeded and its results are in place: earlier results that cannot be
        // removed (a folder the user may not write) are said, not a failure of the run.
        if replaced {
            if let Err(e) = std::fs::remove_dir_all(&aside) {
                let line = format!(
                    "warning: the results are in {}, but the earlier ones could not be removed from {}: {e}; remove it by hand\n",
                    self.out.display(),
                    aside.display()
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
            }
        }
        Ok(())
    }
}

/// Runs a command that writes no `--out` but may write files on commit: they are moved onto
/// their paths if it succeeds (standard output included) and removed if not.
pub fn unstaged(run: impl FnOnce() -> Result<()>) -> Result<()> {
    let done = run()
        .and_then(|()| stdout_failure())
        .and_then(|()| commit_files());
    if done.is_err() {
        drop_on_commit();
    }
    release_wrote(done.is_ok());
    done
}

/// Moves the files written by [`write_on_commit`] onto their paths: at a commit, or at the end
/// of a command that writes no `--out` (`trace replay --csv FILE` alone). A failure removes
/// the files not yet moved.
pub fn commit_files() -> Result<()> {
    let files = ON_COMMIT
        .lock()
        .map(|mut f| std::mem::take(&mut *f))
        .unwrap_or_default();
    let mut failed = None;
    for (hidden, path) in files {
        if failed.is_some() {
            let _ = std::fs::remove_file(&hidden);
            continue;
        }
        if let Err(e) = std::fs::rename(&hidden, &path) {
            let _ = std::fs::remove_file(&hidden);
            failed = Some(anyhow::anyhow!("cannot write {}: {e}", path.display()));
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            release_wrote(false);
            drop_on_commit();
            let _ = std::fs::remove_dir_all(&self.partial);
            remove_created(&self.created);
            forget(&self.partial);
        }
    }
}

/// The folders of `dir` and above it that do not exist yet, deepest first.
fn missing_folders(dir: &Path) -> Vec<PathBuf> {
    dir.ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Removes the folders a command created above its `--out`, deepest first, each only while it
/// is empty: another process may have put something in one since.
fn remove_created(created: &[PathBuf]) {
    for d in created {
        if std::fs::remove_dir(d).is_err() {
            return;
        }
    }
}

fn forget(partial: &Path) {
    if let Ok(mut p) = PARTIAL.lock() {
        p.retain(|(q, _, _)| q != partial);
    }
}

/// `path` as the user will find it once the run succeeds: under `--out`, not under the
/// partial folder it is written to. For messages ("wrote ...").
pub fn shown(path: &Path) -> String {
    let Ok(partial) = PARTIAL.lock() else {
        return path.display().to_string();
    };
    for (p, out, _) in partial.iter() {
        if let Ok(rest) = path.strip_prefix(p) {
            return out.join(rest).display().to_string();
        }
    }
    path.display().to_string()
}

/// Runs `run` with the options' `--out` (reached through `out`) pointing into a partial
/// folder, and moves the results into place only if it succeeds.
pub fn staged<O>(
    mut opts: O,
    force: bool,
    out: fn(&mut O) -> &mut PathBuf,
    run: impl FnOnce(&O) -> Result<()>,
) -> Result<()> {
    let s = Staged::begin(out(&mut opts), force)?;
    *out(&mut opts) = s.path().to_path_buf();
    run(&opts)?;
    stdout_failure()?;
    s.commit()
}

/// Creates the folder `dir` and those above it.
pub fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Writes `bytes` to `path`, naming the file in the error.
pub fn write(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `value` to `path` as indented JSON (report.json and its kin).
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    write(path, serde_json::to_string_pretty(value)?)
}

/// The hidden file beside `path` that this process writes before it takes `path`'s name.
fn hidden_beside(path: &Path) -> Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("{} is not a file name", path.display()))?;
    let mut hidden = std::ffi::OsString::from(".");
    hidden.push(name);
    hidden.push(format!(".partial-{}", std::process::id()));
    Ok(path.with_file_name(hidden))
}

/// Writes `bytes` to `path` whole or not at all: into a hidden file beside it, renamed over
/// `path` once written, so a failure or Ctrl-C never leaves a truncated file (for outputs
/// named as files, such as `trace replay --csv`).
pub fn write_whole(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = hidden_beside(path)?;
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

/// Checks, before a run, that `path` can take a file written on commit (`write_on_commit`):
/// a file name whose folder exists, not a folder, not a device or anything else that is not
/// a plain file (renaming over `/dev/null` would replace it), not one of the command's
/// `inputs` nor inside one that is a folder, not inside `out`, which the commit replaces,
/// and not a file already there unless `force`, as `--out` is refused when it holds results.
pub fn check_on_commit(
    option: &str,
    path: &Path,
    out: Option<&Path>,
    inputs: &[&Path],
    force: bool,
) -> Result<()> {
    let usage = |why: &str| Err(crate::usage(format!("{option} {}: {why}", path.display())));
    let text = path.as_os_str().to_string_lossy();
    if path.file_name().is_none()
        || text.ends_with('/')
        || text.ends_with(std::path::MAIN_SEPARATOR)
    {
        return usage("names no file");
    }
    if path.is_dir() {
        return usage("is a folder");
    }
    if let Ok(m) = std::fs::metadata(path) {
        if !m.is_file() {
            return usage(
                "is not a plain file; the file is written beside it and renamed onto it, which would replace it",
            );
        }
        if let Ok(there) = path.canonicalize() {
            for input in inputs {
                if input.canonicalize().is_ok_and(|i| i == there) {
                    return usage("is the file this command reads");
                }
            }
        }
        if !force {
            return usage("exists; pass --force to replace it when this run succeeds");
        }
    }
    let inside = "is inside --out, which a successful run replaces whole";
    if let (Ok(here), Some(out)) = (std::env::current_dir(), out) {
        if here.join(normal(path)).starts_with(here.join(normal(out))) {
            return usage(inside);
        }
    }
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Ok(folder) = folder.canonicalize() else {
        return usage("its folder does not exist");
    };
    if let Some(Ok(out)) = out.map(|o| normal(o).canonicalize()) {
        if folder.starts_with(&out) {
            return usage(inside);
        }
    }
    // A folder the command reads (a pak folder): a file written into it could replace a pk3
    // the run reads, or be read as one by the next.
    for input in inputs {
        if let Some(dir) = input.canonicalize().ok().filter(|_| input.is_dir()) {
            if folder.starts_with(&dir) {
                return usage(&format!(
                    "is inside {}, a folder this command reads",
                    input.display()
                ));
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to a hidden file beside `path`, moved onto `path` when `--out` is committed
/// and removed if the command fails.
pub fn write_on_commit(path: &Path, bytes: &[u8]) -> Result<()> {
    let hidden = hidden_beside(path)?;
    if let Ok(mut f) = ON_COMMIT.lock() {
        f.push((hidden.clone(), path.to_path_buf()));
    }
    std::fs::write(&hidden, bytes).with_context(|| format!("cannot write {}", path.display()))
}

fn drop_on_commit() {
    let files = ON_COMMIT
        .lock()
        .map(|mut f| std::mem::take(&mut *f))
        .unwrap_or_default();
    for (hidden, _) in files {
        let _ = std::fs::remove_file(hidden);
    }
}

/// Writes RGBA8 rows stored from the lower left as a PNG (whose rows run from the top).
pub fn write_png(path: &Path, w: u32, h: u32, rgba_lower_left: &[u8]) -> Result<()> {
    let row = w as usize * 4;
    let flipped: Vec<u8> = rgba_lower_left
        .chunks_exact(row)
        .rev()
        .flatten()
        .copied()
        .collect();
    image::save_buffer(path, &flipped, w, h, image::ExtendedColorType::Rgba8)
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Taken by every unit test that opens a partial folder: the partial folders and the held
    /// "wrote" lines are the process's, and the test threads share them.
    pub(crate) static STAGING: Mutex<()> = Mutex::new(());

    /// One test, since the held lines are the process's: a failed command's "wrote" lines
    /// are never said, a committed one's are, and only once its results are in place.
    #[test]
    fn wrote_lines_wait_for_the_commit() {
        let _serial = STAGING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let s = Staged::begin(&out, false).unwrap();
        wrote(format!("wrote {}", shown(&s.path().join("report.json"))));
        assert_eq!(
            held_wrote(),
            vec![format!("wrote {}", out.join("report.json").display())]
        );
        drop(s);
        assert!(
            held_wrote().is_empty(),
            "a failed command's lines are dropped"
        );
        assert!(!out.exists());

        let s = Staged::begin(&out, false).unwrap();
        write(&s.path().join("report.json"), "{}").unwrap();
        wrote("wrote report.json".into());
        assert_eq!(held_wrote().len(), 1);
        s.commit().unwrap();
        assert!(held_wrote().is_empty(), "said at the commit");
        assert!(out.join("report.json").exists());
    }

    /// Inputs inside `--out` are found whichever way they are given (after an option, with
    /// `=`, positional), and so is an input that is the `--out` folder itself (a pak folder
    /// given as `--out` went whole with `--force`); `--out`'s own value, paths outside it and
    /// names that exist nowhere are not.
    #[test]
    fn an_input_inside_out_is_found_with_its_option() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("paks")).unwrap();
        std::fs::write(out.join("t.bin"), b"x").unwrap();
        std::fs::write(dir.path().join("outside.toml"), b"x").unwrap();
        let canon = out.canonicalize().unwrap();
        let p = |p: &Path| p.to_str().unwrap().to_string();
        let find = |args: &[String]| {
            argument_inside(&canon, args.iter().map(std::ffi::OsString::from))
                .map(|(o, path)| (o, path.file_name().unwrap().to_string_lossy().into_owned()))
        };
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let trace = p(&out.join("t.bin"));
        let paks = p(&out.join("paks"));
        let outside = p(&dir.path().join("outside.toml"));
        let o = p(&out);
        assert_eq!(
            find(&args(&["trace", "replay", &trace, "--out", &o, "--force"])),
            Some(("the argument".into(), "t.bin".into()))
        );
        assert_eq!(
            find(&args(&["run", "quake", "--pak-dir", &paks, "--out", &o])),
            Some(("--pak-dir".into(), "paks".into()))
        );
        assert_eq!(
            find(&args(&["run", "quake", "--pak-dir", &o, "--out", &o])),
            Some(("--pak-dir".into(), "out".into()))
        );
        assert_eq!(
            find(&args(&["run", "boiling", &format!("--topology={trace}")])),
            Some(("--topology".into(), "t.bin".into()))
        );
        assert_eq!(
            find(&args(&[
                "run",
                "boiling",
                "--topology",
                &outside,
                "--out",
                &o
            ])),
            None
        );
        assert_eq!(
            find(&args(&["run", "boiling", &format!("--out={o}/.")])),
            None
        );
        assert_eq!(
            find(&args(&[
                "run",
                "boiling",
                "--topology",
                &p(&out.join("gone.toml"))
            ])),
            None
        );
    }
}
