//! The workspace's real manifests keep the layering written in
//! `xtask/src/layering.rs` (and `ARCHITECTURE.md`).

use xtask::layering::{check, read_workspace, render_graph};
use xtask::workspace_root;

#[test]
fn check_workspace_crates_depend_only_downward() {
    let manifests = read_workspace(&workspace_root()).unwrap();
    assert!(
        manifests
            .iter()
            .any(|m| m.package.as_deref() == Some("felix-format")),
        "crates/felix-format not found: is the workspace root right?"
    );
    let violations = check(&manifests);
    let text: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "layering violated:\n{}\n\ngraph:\n{}",
        text.join("\n"),
        render_graph(&manifests)
    );
}

#[test]
fn check_felix_storage_modules_use_only_the_units_below_them() {
    let sources = xtask::layering::modules::read_storage_sources(&workspace_root()).unwrap();
    assert!(sources.len() > 20, "felix-storage's sources not found");
    let violations = xtask::layering::modules::check_sources(&sources);
    let text: Vec<String> = violations.iter().map(ToString::to_string).collect();
    assert!(
        violations.is_empty(),
        "module order violated:\n{}",
        text.join("\n")
    );
}
