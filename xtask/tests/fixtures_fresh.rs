//! `fixtures/v2/` matches what `cargo xtask fixtures` would write, so a plain
//! `cargo test` catches a format change whose fixtures were not regenerated.

use xtask::{fixtures, workspace_root};

#[test]
fn check_fixtures_v2_match_generator() {
    if let Err(message) = fixtures::check(&workspace_root()) {
        panic!("{message}");
    }
}
