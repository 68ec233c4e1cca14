//! A shard's remote copy read on its own, without a local shard or a tier
//! over it: what an operator's tool lists, fetches and checks.

use bytes::Bytes;
use object_store::path::Path;

use felix_format::log_start::{LogStart, MovedBy};
use felix_format::tier_manifest::{
    Manifest, RemoteObjectName, RemoteSegment, decode_manifest, manifest_object_name,
};
use felix_format::{FileKind, ShardKey};
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use crate::error::TieredError;
use crate::read::check_counts;
use crate::remote::{Remote, SegmentObject};
use crate::stores::TierStore;
use crate::walk::SegmentWalk;

/// One manifest version in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestObject {
    /// The number in its name.
    pub seq: u64,
    /// The object.
    pub object: Path,
    /// Bytes the store holds.
    pub size: u64,
}

/// One segment object a check found damaged or missing.
#[derive(Debug)]
pub struct RemoteFinding {
    /// The segment's id.
    pub segment: u64,
    /// Which of its three objects.
    pub kind: FileKind,
    /// What is wrong: [`TieredError::RemoteLength`],
    /// [`TieredError::RemoteChecksum`], [`TieredError::RemoteCorrupt`],
    /// [`TieredError::RemoteExtent`], [`TieredError::RemoteMissing`] (the
    /// store has no such object), or [`TieredError::Store`] (the store
    /// could not be read).
    pub error: TieredError,
}

/// A shard's objects under a prefix, read-only.
///
/// What an operator's check needs without a local shard: the manifest
/// versions, the newest that decodes, and each listed segment verified.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_tiered::{RemoteShard, stores};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), felix_tiered::TieredError> {
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// // The same prefix as the tier's `TierConfig::prefix` (default "felix").
/// let remote = RemoteShard::new(stores::in_memory(), "felix", &key);
/// match remote.newest().await? {
///     None => println!("nothing offloaded"),
///     Some(manifest) => {
///         for segment in &manifest.segments {
///             for finding in remote.verify_segment(segment).await {
///                 println!("segment {} {:?}: {}", finding.segment, finding.kind, finding.error);
///             }
///         }
///     }
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RemoteShard {
    remote: Remote,
    key: ShardKey,
}

impl RemoteShard {
    /// The objects of shard `key` under `prefix` in `store` (the prefix a
    /// [`TierConfig`](crate::TierConfig) names).
    pub fn new(store: TierStore, prefix: &str, key: &ShardKey) -> Self {
        RemoteShard {
            remote: Remote::new(store, prefix, key),
            key: key.clone(),
        }
    }

    /// The shard's key.
    pub fn key(&self) -> &ShardKey {
        &self.key
    }

    /// The prefix every object of the shard is under,
    /// `{prefix}/{dir_name}`.
    pub fn base(&self) -> &str {
        &self.remote.base
    }

    /// Every manifest version in the store, oldest first.
    pub async fn manifests(&self) -> Result<Vec<ManifestObject>, TieredError> {
        let mut out: Vec<ManifestObject> = self
            .remote
            .list()
            .await?
            .into_iter()
            .filter_map(|l| match l.name {
                RemoteObjectName::Manifest(seq) => Some(ManifestObject {
                    seq,
                    object: l.path,
                    size: l.size,
                }),
                _ => None,
            })
            .collect();
        out.sort_by_key(|m| m.seq);
        Ok(out)
    }

    /// The bytes of manifest version `seq`, as stored.
    pub async fn fetch(&self, seq: u64) -> Result<Bytes, TieredError> {
        self.remote
            .get(&self.remote.object(&manifest_object_name(seq)))
            .await
    }

    /// Manifest version `seq`, checked as an open checks it: it decodes,
    /// holds the number its name says, and is this shard's.
    pub async fn check(&self, seq: u64) -> Result<Manifest, TieredError> {
        let object = self.remote.object(&manifest_object_name(seq));
        let bytes = self.remote.get(&object).await?;
        let view = decode_manifest(&bytes).map_err(|source| TieredError::Manifest {
            object: object.clone(),
            source,
        })?;
        if view.seq != seq {
            return Err(TieredError::ManifestSeq {
                object,
                named: seq,
                found: view.seq,
            });
        }
        if !view.key.is(&self.key) {
            return Err(TieredError::KeyMismatch { object });
        }
        Ok(view.to_manifest())
    }

    /// The manifest a tier opening the shard would use: the newest version
    /// that decodes (`None` when there is none at all; an error when there
    /// are versions and none decodes).
    pub async fn newest(&self) -> Result<Option<Manifest>, TieredError> {
        Ok(self.remote.load_manifest(&self.key).await?.0)
    }

    /// Reads `object` as a stream: its length and CRC-32, and `walk` fed
    /// every piece (it keeps the first damage). Nothing is held whole.
    async fn stream(
        &self,
        object: &Path,
        mut walk: Option<SegmentWalk>,
    ) -> Result<(u64, u32, Option<SegmentWalk>), TieredError> {
        let mut pieces = self
            .remote
            .store
            .get(object)
            .await
            .map_err(|e| match e {
                // Listed, so it must be there: its absence is damage to the
                // remote copy, not a store that cannot be reached.
                object_store::Error::NotFound { .. } => TieredError::RemoteMissing {
                    object: object.clone(),
                    source: e,
                },
                e => TieredError::store("get", object, e),
            })?
            .into_stream();
        let (mut len, mut crc) = (0u64, crc32fast::Hasher::new());
        while let Some(piece) = pieces
            .try_next()
            .await
            .map_err(|e| TieredError::store("get", object, e))?
        {
            len += piece.len() as u64;
            crc.update(&piece);
            if let Some(walk) = &mut walk {
                // Damage stays in the walk, which `walked` reports; the
                // stream is still read to the end for its length and CRC.
                let _ = walk.feed(&piece);
            }
        }
        Ok((len, crc.finalize(), walk))
    }

    /// Checks one listed segment's three objects against its manifest
    /// entry: each object's length and CRC-32, and every record of the
    /// `.log` walked at full depth up to the entry's next offset (also when
    /// its CRC fails, to name the damaged record's byte). Each object is
    /// read once as a stream (one get each) and never held whole. Returns what is wrong, nothing when all is well.
    pub async fn verify_segment(&self, segment: &RemoteSegment) -> Vec<RemoteFinding> {
        let mut findings = Vec::new();
        let id = segment.extent.id;
        for (kind, len, crc) in [
            (FileKind::Segment, segment.extent.len, segment.segment_crc),
            (FileKind::Index, segment.index_len, segment.index_crc),
            (
                FileKind::TimeIndex,
                segment.time_index_len,
                segment.time_index_crc,
            ),
        ] {
            let object = self.remote.path(SegmentObject::of(segment, kind));
            let walk = (kind == FileKind::Segment).then(|| SegmentWalk::new(segment.extent.len));
            let (found, crc_found, walk) = match self.stream(&object, walk).await {
                Ok(streamed) => streamed,
                Err(error) => {
                    findings.push(RemoteFinding {
                        segment: id,
                        kind,
                        error,
                    });
                    continue;
                }
            };
            let whole = check_counts(&object, (len, crc), (found, crc_found));
            // The records are walked even when the CRC fails: the walk
            // names the damaged record's byte, which the CRC cannot.
            let walked = match walk {
                Some(walk) => walked(&object, &walk, segment),
                None => Ok(()),
            };
            for error in [whole.err(), walked.err()].into_iter().flatten() {
                findings.push(RemoteFinding {
                    segment: id,
                    kind,
                    error,
                });
            }
        }
        findings
    }
}

/// Checks that every record an offload deleted locally is held by the
/// remote copy whose newest manifest is `manifest` (`None`: the store has
/// none), given the shard's log-start file (`None`: no file, or one that
/// cannot be used, which moves nothing).
///
/// An offload moves the local start only once a manifest listing every
/// record below it is durable, and records so in the file
/// ([`MovedBy::Offload`]). When it did and the manifest ends below that
/// start, or there is none, those records are in neither copy: the copy was
/// lost or is looked for in the wrong store or prefix, and this is
/// [`TieredError::HeldNowhere`], `missing` running from the manifest's end
/// (0 without one) to the recorded start. Offsets below the manifest's
/// start were deleted by remote retention, on purpose, and are not
/// reported. A start a deletion of records or a reset moved last
/// ([`MovedBy::Deletion`]) may have discarded anything: nothing is
/// reported.
///
/// ```
/// use felix_format::ShardKey;
/// use felix_format::log_start::{LogStart, MovedBy};
/// use felix_tiered::{TieredError, held_nowhere};
///
/// let key = ShardKey::new("acme", "default", "orders", 0);
/// let offloaded = LogStart { start_offset: 18_224, first_segment_id: 9, moved_by: MovedBy::Offload };
/// // An offload moved the start to 18224, and no manifest lists the records.
/// let err = held_nowhere(&key, None, Some(&offloaded)).unwrap_err();
/// assert!(matches!(
///     err,
///     TieredError::HeldNowhere { missing, manifest: None, .. } if missing == (0..18_224)
/// ));
/// // A deletion of records moved it: they were discarded on purpose.
/// let deleted = LogStart { moved_by: MovedBy::Deletion, ..offloaded };
/// assert!(held_nowhere(&key, None, Some(&deleted)).is_ok());
/// ```
pub fn held_nowhere(
    key: &ShardKey,
    manifest: Option<&Manifest>,
    log_start: Option<&LogStart>,
) -> Result<(), TieredError> {
    let Some(&LogStart {
        start_offset: start,
        moved_by: MovedBy::Offload,
        ..
    }) = log_start
    else {
        return Ok(());
    };
    let end = manifest.map_or(0, Manifest::next_offset);
    if end >= start {
        return Ok(());
    }
    Err(TieredError::HeldNowhere {
        shard: key.clone(),
        missing: end..start,
        manifest: manifest.map(|m| m.seq),
    })
}

/// Holds a walk of a `.log` object's records, damage or end, to the
/// manifest.
fn walked(object: &Path, walk: &SegmentWalk, segment: &RemoteSegment) -> Result<(), TieredError> {
    let corrupt = |(position, kind)| TieredError::RemoteCorrupt {
        object: object.clone(),
        position,
        kind,
    };
    let found_next = walk.finish().map_err(corrupt)?;
    if found_next != segment.extent.next_offset {
        return Err(TieredError::RemoteExtent {
            object: object.clone(),
            expected_next: segment.extent.next_offset,
            found_next,
        });
    }
    Ok(())
}
