//! `felix-store demo`, the README's first command: it runs to the end in a
//! few seconds and reports the same story every time (timings aside).

mod common;

use common::{run, s};

/// Replaces every measured figure: a duration (number and unit, which
/// changes between ms and s) becomes `[TIME]`; a number before a rate, an
/// fsync count or an appends-per-sync ratio becomes `[N]`.
fn normalise_figures(text: &str) -> String {
    text.lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            let mut out: Vec<String> = Vec::with_capacity(words.len());
            let mut i = 0;
            while let Some(word) = words.get(i) {
                let next = words.get(i + 1).copied().unwrap_or_default();
                let number = word.trim_start_matches('(').parse::<f64>().is_ok();
                if number && ["ms", "ms,", "s", "s,"].contains(&next) {
                    out.push(format!(
                        "[TIME]{}",
                        if next.ends_with(',') { "," } else { "" }
                    ));
                    i += 2;
                    continue;
                }
                let counted =
                    next.starts_with("records/s") || next == "fsyncs" || next == "appends";
                out.push(match (number && counted, word.starts_with('(')) {
                    (true, true) => "([N]".to_owned(),
                    (true, false) => "[N]".to_owned(),
                    (false, _) => (*word).to_owned(),
                });
                i += 1;
            }
            out.join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn demo_runs_the_whole_story_in_a_given_dir() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("demo");
    let started = std::time::Instant::now();
    let result = run(["demo", "--dir", s(&dir)]);
    assert!(
        started.elapsed().as_secs() < 30,
        "the demo must finish in seconds"
    );
    assert_eq!(result.code, 0, "{}{}", result.stdout, result.stderr);
    assert_eq!(result.stderr, "");
    let text = normalise_figures(&common::normalise(&result.stdout, root.path()));
    insta::assert_snapshot!(text);
    // The store is kept, and what the demo left opens cleanly.
    let verify = run(["verify", "--json", s(&dir)]);
    assert_eq!(verify.code, 0, "{}", verify.stdout);
    let next: Vec<u64> = verify
        .json_lines()
        .iter()
        .map(|l| l["next_offset"].as_u64().unwrap())
        .collect();
    assert_eq!(next, [2002, 2000, 2000]);
}

#[test]
fn demo_default_temp_dir_is_removed_at_the_end() {
    let result = run(["demo"]);
    assert_eq!(result.code, 0, "{}{}", result.stdout, result.stderr);
    let first = result.stdout.lines().next().unwrap();
    let path = first
        .strip_prefix("felix-store demo: a store in ")
        .unwrap()
        .split(" (")
        .next()
        .unwrap();
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} was left behind"
    );
}

#[test]
fn demo_refuses_a_non_empty_dir() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("precious"), "data").unwrap();
    let result = run(["demo", "--dir", s(root.path())]);
    assert_eq!(result.code, 2);
    assert!(result.stderr.contains("is not empty"), "{}", result.stderr);
    assert_eq!(
        std::fs::read(root.path().join("precious")).unwrap(),
        b"data"
    );
}
