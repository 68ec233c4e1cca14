//! `felix-store --help`: what it prints, and that the exit statuses it
//! defines are the ones the README quotes.

mod common;

use common::run;

#[test]
fn help_prints_the_commands_and_the_exit_statuses() {
    let help = run(["--help"]);
    assert_eq!(help.code, 0, "{}", help.stderr);
    insta::assert_snapshot!(help.stdout);
}

/// The exit statuses are defined once, in the tool; the README's "Exit
/// status" section quotes that definition word for word, so a change to one
/// without the other fails here.
#[test]
fn help_exit_status_is_quoted_verbatim_by_the_readme() {
    let help = run(["--help"]).stdout;
    let from = help
        .find("Exit status")
        .expect("--help defines the exit statuses");
    let definition = help[from..].trim_end();
    assert!(
        definition.lines().count() > 10,
        "the definition runs to the end of --help: {definition}"
    );
    let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(readme_path).unwrap();
    let section = readme
        .split("\n### Exit status\n")
        .nth(1)
        .expect("the README has an \"Exit status\" section");
    let section = section.split("\n#").next().unwrap_or(section);
    assert!(
        section.contains(&format!("```text\n{definition}\n```")),
        "README's \"Exit status\" section must quote `felix-store --help`'s definition in a text block:\n{definition}"
    );
}
