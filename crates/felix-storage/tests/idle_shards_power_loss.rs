//! A store that closes and reopens idle shards, cut off by a power loss
//! after every mutating call: the clean-shutdown records its closes rewrite
//! without syncs (in place), and remove durably before a roll, never make
//! an open lose or misread an acknowledged record — whichever of their
//! writes reach the disk, whole, torn or not at all.

use felix_format::{CLEAN_SHUTDOWN_FILE_NAME, ShardKey};
use felix_io::FileSystem;
use felix_io::sim::{CrashPlan, SimFs, Tear};
use felix_storage::{Durability, Preallocation, ReadBound, Record, Store, StoreConfig};

const ROOT: &str = "/store";
const SHARDS: u32 = 3;
const ROUNDS: u64 = 4;

fn config() -> StoreConfig {
    StoreConfig {
        // Three 38-byte records per segment: the fourth append rolls.
        segment_size_bytes: 32 + 3 * 40,
        index_spacing_bytes: 64,
        preallocate: Preallocation::Off,
        durability: Durability::OnCommit,
        // Every open of another shard closes the last one used.
        max_open_shards: 1,
        ..StoreConfig::default()
    }
}

fn key(i: u32) -> ShardKey {
    ShardKey::new("acme", "default", "orders", i)
}

fn payload(shard: u32, offset: u64) -> Vec<u8> {
    format!("s{shard:02} r{offset:05}").into_bytes()
}

/// Round-robin appends, one record at a time, each to a shard the store
/// has just reopened; stops at the first failure. Returns how many records
/// each shard acknowledged.
fn workload(fs: &FileSystem) -> Vec<u64> {
    let mut acked = vec![0; SHARDS as usize];
    let Ok(store) = Store::options(ROOT)
        .file_system(fs.clone())
        .config(config())
        .open()
    else {
        return acked;
    };
    for round in 0..ROUNDS {
        for i in 0..SHARDS {
            let shard = if round == 0 {
                store.create_shard(&key(i))
            } else {
                store.open_shard(&key(i))
            };
            let Ok(shard) = shard else {
                return acked;
            };
            if shard
                .append(&[Record::new(round, payload(i, round))])
                .wait()
                .is_err()
            {
                return acked;
            }
            acked[i as usize] += 1;
        }
    }
    // Dropping the store closes it; after a power cut that fails, logged.
    acked
}

/// Opens what the crash left and checks every shard against `acked`.
fn check(crashed: SimFs, acked: &[u64], what: &str) {
    let store = Store::options(ROOT)
        .file_system(FileSystem::new(crashed))
        .config(config())
        .open()
        .unwrap_or_else(|e| panic!("{what}: the store opens: {e}"));
    for i in 0..SHARDS {
        let shard = match store.open_shard(&key(i)) {
            Ok(shard) => shard,
            // Never created, or its creation was lost: nothing acknowledged.
            Err(felix_storage::StorageError::ShardNotFound { .. }) => {
                assert_eq!(acked[i as usize], 0, "{what}: shard {i} lost");
                continue;
            }
            Err(e) => panic!("{what}: shard {i} opens: {e}"),
        };
        let runs = shard
            .read_runs(0, u64::MAX, ReadBound::Committed)
            .unwrap_or_else(|e| panic!("{what}: shard {i} reads: {e}"));
        let found: Vec<Vec<u8>> = runs
            .iter()
            .flat_map(|run| run.iter().map(|r| r.payload.to_vec()).collect::<Vec<_>>())
            .collect();
        assert!(
            found.len() as u64 >= acked[i as usize],
            "{what}: shard {i} holds {} records, {} were acknowledged",
            found.len(),
            acked[i as usize]
        );
        for (offset, bytes) in found.iter().enumerate() {
            assert_eq!(
                bytes,
                &payload(i, offset as u64),
                "{what}: shard {i} offset {offset}"
            );
        }
    }
}

#[test]
fn idle_shards_lose_no_acknowledged_record_at_any_power_cut() {
    let calls = {
        let sim = SimFs::new();
        let acked = workload(&FileSystem::new(sim.clone()));
        assert_eq!(acked, vec![ROUNDS; SHARDS as usize]);
        sim.mutating_calls()
    };
    let mut torn_records = 0;
    for cut in 0..=calls {
        let sim = SimFs::new();
        sim.cut_power_after(cut);
        let acked = workload(&FileSystem::new(sim.clone()));
        let pending = sim.pending();
        check(
            sim.crash(&CrashPlan::durable_only()),
            &acked,
            &format!("cut {cut}, durable only"),
        );
        check(
            sim.crash(&CrashPlan::everything(pending.len())),
            &acked,
            &format!("cut {cut}, everything"),
        );
        // Each pending write of a clean-shutdown record torn, everything
        // else kept.
        for (at, op) in pending.iter().enumerate() {
            if op.kind != "write" || !op.path.ends_with(CLEAN_SHUTDOWN_FILE_NAME) {
                continue;
            }
            torn_records += 1;
            for tear in [Tear::Prefix(op.len / 2), Tear::Zeros] {
                let plan = CrashPlan {
                    keep: vec![true; pending.len()],
                    tear: Some((at, tear)),
                };
                check(
                    sim.crash(&plan),
                    &acked,
                    &format!("cut {cut}, {tear:?} at {at}"),
                );
            }
        }
    }
    // The sweep did cross rewrites of kept records.
    assert!(torn_records > 0);
}
