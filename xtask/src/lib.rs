//! Project automation for the felix storage workspace, as a library so that
//! `cargo test` runs the same checks as `cargo xtask`.
//!
//! * [`fixtures`] writes and checks the golden files under `fixtures/v2/`,
//!   built only from `felix-format`'s encoders, so a change to the format
//!   shows up as a diff someone has to commit on purpose.
//! * [`bench`](mod@bench) runs the benchmark suite (`cargo xtask bench`): felix-bench
//!   and the peer crates, alternating, with medians and the targets of
//!   `docs/performance.md`.
//! * [`layering`] reads every `crates/*/Cargo.toml` and reports dependencies
//!   that point up the crate stack, so the layering in `ARCHITECTURE.md` is
//!   enforced rather than merely written down.

pub mod bench;
mod crc;
pub mod fixtures;
mod hexdump;
pub mod layering;
mod shard;

use std::path::{Path, PathBuf};

/// The workspace root: the parent of this crate's directory.
///
/// Taken from the compile-time manifest path rather than the current
/// directory, so `cargo xtask` and `cargo test` agree wherever they are run.
pub fn workspace_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir.parent().unwrap_or(xtask_dir).to_path_buf()
}
