//! 1,000 concurrent producers and a consumer as tokio tasks on one shard
//! of a store, with no `spawn_blocking`: appends return once written and
//! their futures resolve once durable, woken by the store's sync pool, so
//! the process runs the runtime's worker threads, the sync pool's threads
//! and nothing more. It prints the thread count from /proc/self/status and
//! checks it.
//!
//! ```text
//! cargo run --release -p felix-storage --example tokio_producers [-- DIR]
//! ```
//!
//! Without `DIR` the store lives in a temporary directory, removed at exit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use felix_storage::{Durability, ReadBound, Record, ShardKey, Store, StoreConfig, Tail};

const PRODUCERS: u64 = 1_000;
const APPENDS_PER_PRODUCER: u64 = 20;
const RUNTIME_WORKERS: usize = 2;

/// The process's threads, as the kernel counts them.
fn threads() -> Result<usize, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .ok_or("no Threads line in /proc/self/status")?;
    Ok(line.trim().parse()?)
}

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
        durability: Durability::OnCommit,
        ..StoreConfig::default()
    };
    let store = Store::options(&root).config(config).open()?;
    let shard = store.create_shard(&ShardKey::new("acme", "default", "events", 0))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
        .enable_time()
        .build()?;
    let started = Instant::now();
    let (consumed, peak_threads) = runtime.block_on(async {
        let total = PRODUCERS * APPENDS_PER_PRODUCER;
        let consumer = {
            let shard = Arc::clone(&shard);
            tokio::spawn(async move {
                let mut next = 0;
                while next < total {
                    match shard.wait_readable(next, ReadBound::Committed).await? {
                        Tail::Readable { .. } => {
                            for record in shard.read(next, 1 << 20, ReadBound::Committed)? {
                                next = record.offset + 1;
                            }
                        }
                        other => return Err(format!("consumer stopped: {other:?}").into()),
                    }
                }
                Ok::<u64, Box<dyn std::error::Error + Send + Sync>>(next)
            })
        };
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let shard = Arc::clone(&shard);
                tokio::spawn(async move {
                    for i in 0..APPENDS_PER_PRODUCER {
                        let payload = format!("producer {p} event {i}");
                        // Written here; durable when the future resolves.
                        shard.append(&[Record::now(payload)]).submit()?.await?;
                    }
                    Ok::<(), felix_storage::StorageError>(())
                })
            })
            .collect();
        // Sampled while the producers run.
        let mut peak = 0;
        let sampler = async {
            loop {
                peak = peak.max(threads().unwrap_or(0));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        let produced = async {
            for producer in producers {
                producer.await??;
            }
            Ok::<(), Box<dyn std::error::Error>>(())
        };
        tokio::select! {
            done = produced => done?,
            () = sampler => unreachable!("the sampler never ends"),
        }
        let consumed = consumer.await?.map_err(|e| e.to_string())?;
        Ok::<_, Box<dyn std::error::Error>>((consumed, peak))
    })?;
    let elapsed = started.elapsed();
    let stats = shard.stats();
    // The main thread (blocked in `block_on`), the runtime's workers and
    // the sync pool's threads (callbacks are not used: no dispatch thread).
    let allowed = 1 + RUNTIME_WORKERS + config.sync_threads;
    println!(
        "{} appends from {PRODUCERS} tasks in {elapsed:.2?} ({:.0} appends/s), {} syncs ({:.1} appends per sync); consumer read {consumed}",
        stats.appends,
        stats.appends as f64 / elapsed.as_secs_f64(),
        stats.syncs,
        stats.synced_appends as f64 / stats.syncs.max(1) as f64,
    );
    println!(
        "threads: at most {peak_threads} while producing (main 1 + runtime {RUNTIME_WORKERS} + sync pool at most {}) = allowed {allowed}",
        config.sync_threads
    );
    if peak_threads > allowed {
        return Err(format!("{peak_threads} threads, more than {allowed}").into());
    }
    drop(runtime);
    store.close()?;
    Ok(())
}
