//! A tiered shard whose remote copy is lost, or looked for in the wrong
//! place: records an offload deleted locally are in neither copy, and a
//! tiered open says so with the offsets instead of serving them as
//! trimmed. A start a reset or a deletion of records moved last is not
//! held to the remote copy, before the first offload or after one. A
//! listed object that is missing is named as such by a check.

mod common;

use std::sync::Arc;

use felix_format::log_start::MovedBy;
use felix_format::tier_manifest::{manifest_object_name, segment_object_name};
use felix_format::{FileKind, ShardKey};
use felix_storage::Shard;
use felix_tiered::{
    RemoteShard, TierConfig, TierRetention, TierStore, TieredError, TieredShard, stores,
};
use object_store::ObjectStoreExt;
use object_store::path::Path;

fn key() -> ShardKey {
    ShardKey::new("acme", "default", "orders", 0)
}

fn tier(prefix: &str) -> TierConfig {
    TierConfig {
        prefix: prefix.to_owned(),
        local: TierRetention {
            max_bytes: Some(2048),
            max_age: None,
        },
        ..TierConfig::default()
    }
}

/// Appends 100 records to `shard` and offloads through a tier over
/// `store`; returns the local log start afterwards.
async fn offload_some(shard: &Arc<Shard>, store: &TierStore) -> u64 {
    common::fill(shard, 100);
    let tiered = TieredShard::open(Arc::clone(shard), key(), store.clone(), tier("felix"))
        .await
        .unwrap();
    let outcome = tiered.offload().await.unwrap();
    assert!(!outcome.uploaded.is_empty());
    assert!(outcome.local_start > 0);
    outcome.local_start
}

/// What the shard's log-start file says moved its start.
fn moved_by(shard: &Shard) -> MovedBy {
    felix_recovery::read_log_start(shard.file_system(), shard.dir())
        .start()
        .unwrap()
        .moved_by
}

/// Opens a tier over `store` and checks what it serves: `local_start`
/// locally, offsets below it `Trimmed`, nothing remote.
async fn opens_trimmed_below(shard: &Arc<Shard>, store: TierStore, local_start: u64) {
    let tiered = TieredShard::open(Arc::clone(shard), key(), store, tier("felix"))
        .await
        .unwrap();
    assert_eq!(shard.offsets().base, local_start);
    let err = tiered.read(0, 1 << 20).await.unwrap_err();
    assert!(
        matches!(err, TieredError::Trimmed { requested: 0, oldest } if oldest == local_start),
        "{err:?}"
    );
}

#[tokio::test]
async fn open_emptied_store_after_offload_is_held_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    let store = stores::in_memory();
    let local_start = offload_some(&shard, &store).await;
    assert_eq!(moved_by(&shard), MovedBy::Offload);
    // The same store still opens: it lists what was deleted locally.
    TieredShard::open(Arc::clone(&shard), key(), store, tier("felix"))
        .await
        .unwrap();
    // An emptied bucket (here a fresh one), and the right store with the
    // wrong prefix: no manifest anywhere, records deleted locally.
    for (store, prefix) in [
        (stores::in_memory(), "felix"),
        (stores::in_memory(), "other"),
    ] {
        let err = TieredShard::open(Arc::clone(&shard), key(), store, tier(prefix))
            .await
            .unwrap_err();
        assert!(
            matches!(
                &err,
                TieredError::HeldNowhere { shard, missing, manifest: None }
                    if *shard == key() && *missing == (0..local_start)
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "offsets 0..{local_start} of shard {} are in neither the local log nor the remote copy (no remote manifest, and an offload moved the local log start to {local_start}): the remote copy was lost, or this is not the store or prefix they were offloaded to",
                key()
            )
        );
    }
}

#[tokio::test]
async fn open_store_with_only_an_older_manifest_names_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    let store = stores::in_memory();
    let first_end = offload_some(&shard, &store).await;
    let remote = RemoteShard::new(store.clone(), "felix", &key());
    let first = remote.newest().await.unwrap().unwrap();
    assert_eq!(first.next_offset(), first_end);
    let first_bytes = remote.fetch(first.seq).await.unwrap();
    let local_start = offload_some(&shard, &store).await;
    assert!(local_start > first_end);
    // A store holding only the first manifest (a restore of an old copy).
    let old = stores::in_memory();
    let object = Path::from(format!(
        "{}/{}",
        remote.base(),
        manifest_object_name(first.seq)
    ));
    old.put(&object, first_bytes.into()).await.unwrap();
    let err = TieredShard::open(Arc::clone(&shard), key(), old, tier("felix"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            TieredError::HeldNowhere { shard, missing, manifest: Some(seq) }
                if *shard == key() && *missing == (first_end..local_start) && *seq == first.seq
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn open_untrimmed_shard_over_an_empty_store_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    common::fill(&shard, 100);
    let tiered = TieredShard::open(shard, key(), stores::in_memory(), tier("felix"))
        .await
        .unwrap();
    assert_eq!(tiered.remote_range(), 0..0);
}

#[tokio::test]
async fn verify_segment_missing_listed_object_is_remote_missing() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    let store = stores::in_memory();
    offload_some(&shard, &store).await;
    let remote = RemoteShard::new(store.clone(), "felix", &key());
    let manifest = remote.newest().await.unwrap().unwrap();
    let victim = &manifest.segments[0];
    let object = Path::from(format!(
        "{}/{}",
        remote.base(),
        segment_object_name(victim.extent.id, victim.upload, FileKind::Index)
    ));
    store.delete(&object).await.unwrap();
    let findings = remote.verify_segment(victim).await;
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].segment, victim.extent.id);
    assert_eq!(findings[0].kind, FileKind::Index);
    assert!(
        matches!(
            &findings[0].error,
            TieredError::RemoteMissing { object: o, source: object_store::Error::NotFound { .. } }
                if *o == object
        ),
        "{:?}",
        findings[0].error
    );
}

#[tokio::test]
async fn open_replica_created_at_a_later_offset_over_an_empty_store_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let config = felix_storage::StoreConfig {
        segment_size_bytes: 1024,
        ..felix_storage::StoreConfig::default()
    };
    let store = felix_storage::Store::options(root.path())
        .config(config)
        .open()
        .unwrap();
    // A replica whose log begins where the leader's surviving history does.
    let shard = store.create_shard_at(&key(), 5_000).unwrap();
    common::fill(&shard, 10);
    let tiered = TieredShard::open(shard, key(), stores::in_memory(), tier("felix"))
        .await
        .unwrap();
    assert_eq!(tiered.local().offsets().base, 5_000);
    assert_eq!(tiered.manifest().seq, 0);
}

#[tokio::test]
async fn open_reset_before_the_first_offload_over_an_empty_store_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    common::fill(&shard, 100);
    shard.reset_to(500).unwrap();
    assert_eq!(moved_by(&shard), MovedBy::Deletion);
    assert_eq!(shard.segments().len(), 1);
    opens_trimmed_below(&shard, stores::in_memory(), 500).await;
}

#[tokio::test]
async fn open_deletion_before_the_first_offload_with_its_segments_removed_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    common::fill(&shard, 100);
    // At a segment's base, as an offload cuts: every segment below it goes.
    let cut = shard.segments()[3].extent.base_offset;
    shard.delete_records_before(cut).unwrap();
    shard.apply_retention().unwrap();
    // What an offload leaves, but for the log-start file, which alone
    // tells the two apart.
    assert_eq!(shard.segments()[0].extent.base_offset, cut);
    assert_eq!(moved_by(&shard), MovedBy::Deletion);
    let store = stores::in_memory();
    opens_trimmed_below(&shard, store.clone(), cut).await;
    // The first offload then moves the start as an offload, and from then
    // on a lost copy is refused.
    let local_start = offload_some(&shard, &store).await;
    assert!(local_start > cut);
    assert_eq!(moved_by(&shard), MovedBy::Offload);
    let err = TieredShard::open(
        Arc::clone(&shard),
        key(),
        stores::in_memory(),
        tier("felix"),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            &err,
            TieredError::HeldNowhere { shard, missing, manifest: None }
                if *shard == key() && *missing == (0..local_start)
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn open_deletion_past_the_manifest_end_after_an_offload_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let shard = common::small_shard(dir.path());
    let store = stores::in_memory();
    let offloaded = offload_some(&shard, &store).await;
    let end = shard.offsets().written;
    assert!(end > offloaded + 1);
    shard.delete_records_before(end - 1).unwrap();
    shard.apply_retention().unwrap();
    assert_eq!(moved_by(&shard), MovedBy::Deletion);
    let tiered = TieredShard::open(Arc::clone(&shard), key(), store.clone(), tier("felix"))
        .await
        .unwrap();
    // The remote copy still serves what it holds, the local log the rest.
    let remote = tiered.remote_range();
    assert_eq!(remote.end, offloaded);
    let read = tiered.read(remote.start, 1 << 20).await.unwrap();
    assert_eq!(read[0].offset, remote.start);
    assert_eq!(shard.offsets().base, end - 1);
}
