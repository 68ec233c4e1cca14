//! `cargo xtask bench --tiered [--mib N] [--rounds N]`: tiered storage's
//! figures, from felix-tiered's `tier_bench` example run as one process
//! (felix-bench cannot depend on felix-tiered, which sits beside it). The
//! example starts an S3-protocol server on loopback, alternates the tier
//! and plain `object_store` calls round by round, and prints one JSON line
//! per round and the table of medians that `docs/performance.md` quotes.
//! Its data (`target/bench/tmp/tiered`) is removed at the end.

use std::path::Path;
use std::process::Command;

fn value(options: &[&str], flag: &str, default: u64) -> Result<u64, String> {
    match options.iter().position(|o| *o == flag) {
        None => Ok(default),
        Some(i) => options
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} takes a number")),
    }
}

/// Builds and runs the example.
pub(super) fn run(root: &Path, options: &[&str]) -> Result<(), String> {
    let mib = value(options, "--mib", 1024)?;
    let rounds = value(options, "--rounds", 3)?;
    println!("==> cargo build --release -p felix-tiered --example tier_bench");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args([
            "build",
            "--release",
            "-p",
            "felix-tiered",
            "--example",
            "tier_bench",
        ])
        .status()
        .map_err(|e| format!("cargo build: {e}"))?;
    if !status.success() {
        return Err("cargo build failed".into());
    }
    let data = root.join("target/bench/tmp/tiered");
    let status = Command::new(root.join("target/release/examples/tier_bench"))
        .arg(&data)
        .arg(mib.to_string())
        .arg(rounds.to_string())
        .status()
        .map_err(|e| format!("run tier_bench: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("tier_bench failed ({status})"))
    }
}
