//! A store whose shards report through the `metrics` facade.
//!
//! What an application does (felix-storage only records; the application
//! chooses where the figures go):
//!
//! 1. Enable felix-storage's `metrics` feature and add the facade, in the
//!    same 0.x version felix-storage records through (0.24; a recorder
//!    installed through another 0.x version is another crate's, and sees
//!    nothing), and an exporter:
//!
//!    ```toml
//!    felix-storage = { version = "0.1", features = ["metrics"] }
//!    metrics = "0.24"
//!    metrics-exporter-prometheus = "0.18" # or any recorder
//!    ```
//!
//! 2. Install the recorder **before any shard opens**: a shard registers
//!    its handles once, when it opens, with the recorder installed then.
//!    A shard opened before (with none installed) records nowhere until
//!    it is opened again.
//!
//! 3. Optionally, `felix_storage::metrics::describe()` gives the exporter
//!    every metric's unit and help text.
//!
//! This program uses `metrics-util`'s debugging recorder to print what it
//! recorded: `cargo run -p felix-storage --features metrics --example
//! metrics`. The test `tests/metrics.rs` runs it.

use felix_storage::metrics::names::{APPENDED_RECORDS_TOTAL, SHARD_LABEL};
use felix_storage::{Record, ShardKey, Store, StoreConfig};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// Opens a store, appends `records` records to one shard and returns the
/// recorded `felix_storage_appended_records_total` of that shard.
pub(crate) fn run(records: u64) -> Result<u64, Box<dyn std::error::Error>> {
    // First the recorder, then the store.
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::set_global_recorder(recorder)?;
    felix_storage::metrics::describe();

    let root = tempfile::tempdir()?;
    let store = Store::options(root.path())
        .config(StoreConfig::default())
        .open()?;
    let shard = store.create_shard(&ShardKey::new("acme", "default", "orders", 0))?;
    for i in 0..records {
        shard.append(&[Record::now(format!("order {i}"))]).wait()?;
    }
    let label = shard.label().to_owned();
    // Figures published in bulk are all out by the close (see the
    // `metrics` module's freshness note).
    store.close()?;

    let mut appended = None;
    for (key, unit, description, value) in snapshotter.snapshot().into_vec() {
        println!("{:?} {unit:?} {description:?}: {value:?}", key.key());
        let this_shard = key
            .key()
            .labels()
            .any(|l| l.key() == SHARD_LABEL && l.value() == label);
        if key.key().name() == APPENDED_RECORDS_TOTAL
            && this_shard
            && let DebugValue::Counter(n) = value
        {
            appended = Some(n);
        }
    }
    appended.ok_or_else(|| format!("no {APPENDED_RECORDS_TOTAL} recorded").into())
}

#[allow(dead_code, reason = "the test includes this file and calls `run`")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let appended = run(10)?;
    println!("{APPENDED_RECORDS_TOTAL}: {appended}");
    Ok(())
}
