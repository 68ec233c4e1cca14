//! The README's "CI" section names every command `.ci/run` runs, so a step
//! added to the script (as the interop diff and the fuzz run once were)
//! without a word in the README fails here.

use xtask::workspace_root;

/// What names a step: its program and subcommand, past `env VAR=...`
/// prefixes; a toolchain (`+nightly`) or `xtask` and `fuzz` take the word
/// after them too (`cargo xtask fixtures`, `cargo +nightly fuzz run`).
fn step_name(line: &str) -> Option<String> {
    let rest = line.trim_start().strip_prefix("step ")?;
    let mut words = rest
        .split_whitespace()
        .skip_while(|w| *w == "env" || w.contains('='))
        // `RUSTFLAGS="--cfg loom"` splits in two; drop its tail.
        .skip_while(|w| w.ends_with('"'));
    let mut name = vec![words.next()?];
    for word in words {
        name.push(word);
        if !(word.starts_with('+') || word == "xtask" || word == "fuzz") {
            break;
        }
    }
    Some(name.join(" "))
}

#[test]
fn readme_ci_section_names_every_step_of_ci_run() {
    let root = workspace_root();
    let script = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## CI\n")
        .nth(1)
        .expect("the README has a CI section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut steps: Vec<String> = script.lines().filter_map(step_name).collect();
    steps.dedup();
    for expected in [
        "cargo fmt",
        "cargo xtask fixtures",
        "diff -r",
        "cargo +nightly fuzz build",
        "cargo +nightly fuzz run",
    ] {
        assert!(
            steps.iter().any(|s| s == expected),
            "{expected:?} not among the steps read from .ci/run: {steps:?}"
        );
    }
    let missing: Vec<&String> = steps
        .iter()
        .filter(|s| !section.contains(s.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "README's CI section does not name these steps of .ci/run: {missing:?}"
    );
}
