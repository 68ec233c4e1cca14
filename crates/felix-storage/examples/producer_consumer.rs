//! A producer and a consumer on one shard of a store, as a broker would
//! wire them: producers append and get an acknowledgement once their
//! records are durable; a consumer follows the tail without polling, reading
//! only acknowledged records; the store is closed cleanly at the end.
//!
//! ```text
//! cargo run -p felix-storage --example producer_consumer [-- DIR]
//! ```
//!
//! Without `DIR` the store lives in a temporary directory, removed at exit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_storage::{
    Durability, ReadBound, Record, ShardKey, StorageError, Store, StoreConfig, Tail,
};

const PRODUCERS: usize = 4;
const BATCHES_PER_PRODUCER: usize = 250;
const RECORDS_PER_BATCH: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let root = match std::env::args_os().nth(1) {
        Some(dir) => dir.into(),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("store")
        }
    };
    let config = StoreConfig {
        // An append returns once an fdatasync covers it; concurrent
        // producers share syncs (group commit).
        durability: Durability::OnCommit,
        segment_size_bytes: 1 << 20,
        ..StoreConfig::default()
    };
    config.validate()?;
    let store = Store::options(&root).config(config).open()?;
    let key = ShardKey::new("acme", "default", "orders", 0);
    // An existing shard is opened; a missing one is created (and its exact
    // key recorded in its directory).
    let shard = match store.open_shard(&key) {
        Err(StorageError::ShardNotFound { .. }) => store.create_shard(&key)?,
        other => other?,
    };
    let start = shard.offsets();
    println!("opened {} at {start:?}", shard.label());

    let total = (PRODUCERS * BATCHES_PER_PRODUCER * RECORDS_PER_BATCH) as u64;
    let consumer = {
        let shard = Arc::clone(&shard);
        std::thread::spawn(move || -> Result<u64, StorageError> {
            // A consumer resumes from its committed position; here, the
            // shard's end when the example started.
            let mut next = start.readable;
            let end = next + total;
            let mut bytes = 0u64;
            while next < end {
                match shard
                    .wait_readable(next, ReadBound::Committed)
                    .wait_timeout(Duration::from_secs(5))?
                {
                    Tail::Readable { .. } => {}
                    Tail::TimedOut { .. } => continue,
                    // A failed write or sync stopped the shard: everything
                    // acknowledged has been read.
                    Tail::Poisoned { end } => {
                        eprintln!("shard stopped at {end}: {:?}", shard.poisoned());
                        break;
                    }
                    other => unreachable!("no bound was given: {other:?}"),
                }
                // A wait that says `Readable` is followed by a read that
                // returns at least one record.
                for record in shard.read(next, 1 << 20, ReadBound::Committed)? {
                    bytes += record.payload.len() as u64;
                    next = record.offset + 1;
                }
            }
            Ok(bytes)
        })
    };

    let started = Instant::now();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let shard = Arc::clone(&shard);
            std::thread::spawn(move || -> Result<(), StorageError> {
                for b in 0..BATCHES_PER_PRODUCER {
                    let batch: Vec<Record> = (0..RECORDS_PER_BATCH)
                        .map(|r| Record::now(format!("producer {p} batch {b} record {r}")))
                        .collect();
                    // Durable (and readable) once this returns.
                    let receipt = shard.append(&batch).wait()?;
                    debug_assert!(shard.offsets().durable > receipt.last_offset);
                }
                Ok(())
            })
        })
        .collect();
    for producer in producers {
        producer.join().expect("producer panicked")?;
    }
    let elapsed = started.elapsed();
    let consumed = consumer.join().expect("consumer panicked")?;
    let stats = shard.stats();
    println!(
        "{total} records in {elapsed:.2?} ({:.0} records/s), {:.1} appends per fdatasync; consumer read {consumed} payload bytes",
        total as f64 / elapsed.as_secs_f64(),
        stats.appends_per_sync(),
    );

    // Everything durable, clean-shutdown files written, locks released:
    // the same root opens again at once (the old handles now answer
    // `ShardClosed`), and quickly.
    store.close()?;
    let store = Store::options(&root).config(config).open()?;
    println!("reopened at {:?}", store.open_shard(&key)?.offsets());
    store.close()?;
    Ok(())
}
