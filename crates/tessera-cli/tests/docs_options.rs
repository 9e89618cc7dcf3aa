//! Every option the docs name exists: the commands of docs/CLI.md ("At a glance" and each
//! command's option table) and the README's, held against the binary's own `--help`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `--options` in `text`.
fn options(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let mut end = start + 2;
        while end < b.len()
            && (b[end].is_ascii_lowercase() || b[end].is_ascii_digit() || b[end] == b'-')
        {
            end += 1;
        }
        let before_ok = start == 0 || !b[start - 1].is_ascii_alphanumeric() && b[start - 1] != b'-';
        if before_ok && end > start + 2 && b[start + 2].is_ascii_lowercase() {
            out.push(text[start..end].to_string());
        }
        i = end.max(start + 2);
    }
    out
}

/// The subcommand words at the start of `words` (`run boiling`, `trace replay`, `devices`).
fn command(words: &[&str]) -> Vec<String> {
    let takes_two = ["run", "sweep", "bench", "trace", "scene"];
    match words.first() {
        Some(w) if takes_two.contains(w) => words.iter().take(2).map(|s| s.to_string()).collect(),
        Some(w) => vec![w.to_string()],
        None => Vec::new(),
    }
}

/// The help of `tessera COMMAND`, every option it accepts in it.
fn help(cmd: &[String]) -> String {
    let mut args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    args.push("--help");
    let o = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(&args)
        .output()
        .expect("the binary runs");
    assert!(
        o.status.success(),
        "tessera {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn accepts(help: &str, option: &str) -> bool {
    options(help).iter().any(|o| o == option)
}

#[test]
fn every_option_the_docs_name_exists() {
    // (commands any of which must take it, option, where the docs name it).
    let mut named: Vec<(Vec<Vec<String>>, String, String)> = Vec::new();
    let cli = doc("docs/CLI.md");
    // "At a glance": a command per `tessera` line, continued on indented lines.
    let glance = cli
        .split("## At a glance")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("docs/CLI.md has an \"At a glance\" block");
    let mut current: Vec<String> = Vec::new();
    for line in glance.lines() {
        let line = line.split(" # ").next().unwrap_or("");
        if let Some(rest) = line.strip_prefix("tessera ") {
            current = command(&rest.split_whitespace().collect::<Vec<_>>());
        }
        for o in options(line) {
            named.push((
                vec![current.clone()],
                o,
                format!("CLI.md, At a glance: {line}"),
            ));
        }
    }
    // Each command's section: the options of its table rows. A table shared by two commands
    // (`run stencil` and `run convolution`) names options of either.
    for section in cli.split("\n## ").skip(1) {
        let heading = section.lines().next().unwrap_or("");
        let cmds: Vec<Vec<String>> = heading
            .split('`')
            .skip(1)
            .step_by(2)
            .map(|c| command(&c.split_whitespace().collect::<Vec<_>>()))
            .collect();
        if cmds.is_empty() {
            continue;
        }
        for row in section.lines().filter(|l| l.starts_with("| `--")) {
            let first = row.split('|').nth(1).unwrap_or("");
            for o in options(first) {
                named.push((cmds.clone(), o, format!("CLI.md, {heading}: {row}")));
            }
        }
    }
    // The README's commands.
    for line in doc("README.md").lines() {
        if let Some(rest) = line.split("-p tessera-cli -- ").nth(1) {
            let cmd = command(&rest.split_whitespace().collect::<Vec<_>>());
            for o in options(rest) {
                named.push((vec![cmd.clone()], o, format!("README: {line}")));
            }
        }
    }
    assert!(
        named.len() > 150,
        "the docs name only {} options: parsing broke",
        named.len()
    );
    let mut helps: BTreeMap<Vec<String>, String> = BTreeMap::new();
    let mut missing = Vec::new();
    for (cmds, option, place) in &named {
        let taken = cmds.iter().any(|cmd| {
            let text = helps.entry(cmd.clone()).or_insert_with(|| help(cmd));
            accepts(text, option)
        });
        if !taken {
            let names: Vec<String> = cmds.iter().map(|c| c.join(" ")).collect();
            missing.push(format!("tessera {} {option} ({place})", names.join(" or ")));
        }
    }
    assert!(
        missing.is_empty(),
        "options the docs name that the binary does not take:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_check_sees_an_option_that_does_not_exist() {
    let run = help(&["run".into(), "boiling".into()]);
    assert!(accepts(&run, "--page"));
    assert!(!accepts(&run, "--pag"));
    assert!(!accepts(&run, "--filter-access"));
    assert_eq!(
        options("a --page-size 3 --x -- --b"),
        ["--page-size", "--x", "--b"]
    );
}
