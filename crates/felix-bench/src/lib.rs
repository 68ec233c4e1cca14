//! The benchmark suite behind `cargo xtask bench`: one process per measured
//! run, printing one JSON line.
//!
//! The `felix-bench` binary runs felix storage and the *limit* of each
//! scenario (the same work done by the simplest code the operating system
//! allows: a `write` loop, a `BufWriter`, a `pread` loop), and the `peers`
//! example runs the peer crates (`commitlog`, `raft-engine`, `wal-db`) on the
//! same scenarios. The peers are dev-dependencies, which only examples,
//! tests and benches can use: so CI builds the adapters (`cargo test` and
//! `cargo clippy --all-targets` build examples) without running them, and
//! the library itself depends on no peer.
//!
//! This library holds what both share: arguments, incompressible payloads,
//! the record framing the limits write, timing, percentiles, peak memory and
//! the JSON line. `cargo xtask bench` alternates the runs, takes medians and
//! writes the tables; see `docs/performance.md`.

pub mod args;
pub mod completions;
pub mod contract;
pub mod data;
pub mod felix;
pub mod format_floor;
pub mod group_limit;
pub mod limits;
pub mod nosync;
pub mod pool_limit;
pub mod report;
pub mod scrub;
pub mod shards;
pub mod shards_async;
pub mod sync_growth;
pub mod time;

pub use args::Args;
pub use report::{Latencies, Measurement, peak_rss_bytes};

use std::path::Path;

/// Joins the appender threads of a run, a panicked one counting as an
/// error, in spawn order.
pub fn join_appenders<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, Result<T, String>>>,
) -> Vec<Result<T, String>> {
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap_or_else(|_| Err("append thread panicked".into()))
        })
        .collect()
}

/// Reads every file under `dir` (recursively) once and throws the bytes
/// away, so a measured run that follows finds them in the page cache.
pub fn warm_page_cache(dir: &Path) -> std::io::Result<u64> {
    use std::io::Read;
    let mut total = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                let mut file = std::fs::File::open(entry.path())?;
                loop {
                    let n = file.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    total += n as u64;
                }
            }
        }
    }
    Ok(total)
}

/// Total bytes of the regular files under `dir` (recursively).
pub fn dir_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0u64;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in std::fs::read_dir(&path)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// Removes `dir` and everything under it if it exists, then creates it
/// empty.
pub fn fresh_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::create_dir_all(dir)
}
