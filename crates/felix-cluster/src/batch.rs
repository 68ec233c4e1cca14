//! [`ReadBatch`]: committed records read from a replica, kept as the runs
//! of record bytes the replica's segments hold.
//!
//! A read on a replica is [`Shard::read_runs`](felix_storage::Shard::read_runs):
//! the records as framed on disk, verified by that read, one buffer per
//! run. They travel to a client as those bytes ([`WireRun`]); the client
//! checks every record again as a read checks it
//! ([`RecordRun::verify`]: header CRC, offsets, lengths, record CRC), so
//! a record damaged on the way is refused, never handed out. Nothing is
//! allocated per record on either side: a batch's records are borrowed
//! from its runs.
//!
//! A Raft log's record is one kind byte then the body
//! ([`felix_raft::ENTRY_NORMAL`] and the others): a batch yields the
//! normal entries' payloads after that byte and steps over a leader's
//! blank entry and membership changes, which take an offset and hold no
//! producer's record.

use felix_raft::ENTRY_NORMAL;
use felix_storage::RecordRun;

use crate::wire::{ShardOffsets, WireRun};

/// Committed records read from a replica ([`Client::read`](crate::Client::read),
/// [`ReplicatedShard::read`](crate::ReplicatedShard::read)).
///
/// ```
/// # use felix_cluster::ReadBatch;
/// # fn show(batch: &ReadBatch) {
/// for record in batch.records() {
///     println!("{} at {} µs: {} bytes", record.offset, record.timestamp_micros, record.payload.len());
/// }
/// // The next read starts past what this one covered, skipped entries included.
/// let from = batch.next;
/// # let _ = from;
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBatch {
    runs: Vec<RecordRun>,
    /// Where the next read starts: past the last entry read, skipped ones
    /// included.
    pub next: u64,
    /// The shard's offsets on the node that answered.
    pub offsets: ShardOffsets,
}

/// One record of a [`ReadBatch`], borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchRecord<'a> {
    /// Its offset (its Raft index).
    pub offset: u64,
    /// Its publish time, microseconds since the Unix epoch, set by the
    /// leader that took it.
    pub timestamp_micros: u64,
    /// The producer's bytes.
    pub payload: &'a [u8],
}

/// Bytes a replica sent that are not the records they claim to be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchDefect {
    /// A record failed the checks a read makes.
    #[error("the record at byte {position} of its segment (offset {offset} expected): {kind}")]
    Damaged {
        /// The offset the record should carry.
        offset: u64,
        /// Where the sender read it in its segment file.
        position: u64,
        /// What is wrong.
        kind: felix_format::CorruptionKind,
    },
    /// The runs do not follow one another from the read's start, or the
    /// next read's start is not where they end.
    #[error("runs out of order: one from offset {found} where {expected} comes next")]
    OutOfOrder {
        /// The offset expected next.
        expected: u64,
        /// The offset found.
        found: u64,
    },
}

impl ReadBatch {
    /// A batch of `runs` a read on this node returned (verified by it).
    pub(crate) fn read(runs: Vec<RecordRun>, from: u64, offsets: ShardOffsets) -> Self {
        let next = runs.last().map_or(from, RecordRun::next_offset);
        Self {
            runs,
            next,
            offsets,
        }
    }

    /// A batch of the runs a node sent for a read from `from`, each record
    /// checked again here.
    pub(crate) fn received(
        runs: Vec<WireRun>,
        from: u64,
        next: u64,
        offsets: ShardOffsets,
    ) -> Result<Self, BatchDefect> {
        let mut expected = from;
        let mut verified = Vec::with_capacity(runs.len());
        for run in runs {
            if run.first_offset != expected {
                return Err(BatchDefect::OutOfOrder {
                    expected,
                    found: run.first_offset,
                });
            }
            let run =
                RecordRun::verify(run.bytes, run.first_offset, run.position).map_err(|damage| {
                    BatchDefect::Damaged {
                        offset: damage.offset,
                        position: damage.position,
                        kind: damage.kind,
                    }
                })?;
            expected = run.next_offset();
            verified.push(run);
        }
        let batch = Self::read(verified, from, offsets);
        if batch.next != next {
            return Err(BatchDefect::OutOfOrder {
                expected: batch.next,
                found: next,
            });
        }
        Ok(batch)
    }

    /// The runs as they travel.
    pub(crate) fn into_wire(self) -> (Vec<WireRun>, u64, ShardOffsets) {
        let runs = self
            .runs
            .into_iter()
            .map(|run| WireRun {
                first_offset: run.first_offset(),
                position: run.position(),
                bytes: run.into_bytes(),
            })
            .collect();
        (runs, self.next, self.offsets)
    }

    /// The producers' records, in offset order.
    pub fn records(&self) -> impl Iterator<Item = BatchRecord<'_>> + '_ {
        self.runs
            .iter()
            .flat_map(RecordRun::iter)
            .filter_map(|r| match r.payload.split_first() {
                Some((&ENTRY_NORMAL, payload)) => Some(BatchRecord {
                    offset: r.offset,
                    timestamp_micros: r.timestamp_micros,
                    payload,
                }),
                _ => None,
            })
    }

    /// How many producers' records the batch holds (a walk over the
    /// runs' headers: nothing is counted ahead for callers that never ask).
    pub fn len(&self) -> usize {
        self.records().count()
    }

    /// True when the batch holds no producer's record (it may still have
    /// stepped over a leader's blank entry: see [`next`](Self::next)).
    pub fn is_empty(&self) -> bool {
        self.records().next().is_none()
    }

    /// The bytes of the records read, headers and entry kinds included:
    /// what the read moved.
    pub fn encoded_len(&self) -> usize {
        self.runs.iter().map(|r| r.bytes().len()).sum()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use bytes::Bytes;
    use felix_format::{CorruptionKind, encode_record_header};
    use felix_raft::{ENTRY_BLANK, ENTRY_MEMBERSHIP, ENTRY_NORMAL};

    use super::{BatchDefect, ReadBatch};
    use crate::wire::{ShardOffsets, WireRun};

    /// A run of entries from `first`, each a kind byte then a body.
    fn run(first: u64, entries: &[(u8, &[u8])]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (i, (kind, body)) in entries.iter().enumerate() {
            let payload = [&[*kind][..], body].concat();
            let header = encode_record_header(first + i as u64, 100 + i as u64, &payload).unwrap();
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(&payload);
        }
        bytes
    }

    fn wire(first_offset: u64, bytes: Vec<u8>) -> WireRun {
        WireRun {
            first_offset,
            position: 32,
            bytes: Bytes::from(bytes),
        }
    }

    const OFFSETS: ShardOffsets = ShardOffsets {
        base: 0,
        committed: 10,
        written: 10,
    };

    #[test]
    fn a_received_batch_yields_normal_entries_and_steps_over_the_others() {
        let first = run(
            5,
            &[
                (ENTRY_BLANK, b""),
                (ENTRY_NORMAL, b"a"),
                (ENTRY_MEMBERSHIP, b"m"),
            ],
        );
        let second = run(8, &[(ENTRY_NORMAL, b"bc")]);
        let batch =
            ReadBatch::received(vec![wire(5, first), wire(8, second)], 5, 9, OFFSETS).unwrap();
        let records: Vec<(u64, u64, &[u8])> = batch
            .records()
            .map(|r| (r.offset, r.timestamp_micros, r.payload))
            .collect();
        assert_eq!(records, [(6, 101, &b"a"[..]), (8, 100, &b"bc"[..])]);
        assert_eq!((batch.len(), batch.next), (2, 9));
    }

    #[test]
    fn an_empty_answer_reads_nothing_and_starts_the_next_read_where_it_was() {
        let batch = ReadBatch::received(Vec::new(), 7, 7, OFFSETS).unwrap();
        assert!(batch.is_empty());
        assert_eq!((batch.next, batch.records().count()), (7, 0));
    }

    #[test]
    fn a_record_damaged_on_the_way_is_refused_with_its_offset_and_position() {
        let mut bytes = run(5, &[(ENTRY_NORMAL, b"a"), (ENTRY_NORMAL, b"bc")]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        let err = ReadBatch::received(vec![wire(5, bytes)], 5, 7, OFFSETS).unwrap_err();
        // The second record begins after the first's 28-byte header and 2
        // payload bytes, at 32 in its segment.
        assert!(
            matches!(
                err,
                BatchDefect::Damaged {
                    offset: 6,
                    position: 62,
                    kind: CorruptionKind::RecordChecksum { .. }
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn a_run_cut_short_is_refused_as_truncated() {
        let mut bytes = run(5, &[(ENTRY_NORMAL, b"abc")]);
        bytes.pop();
        let err = ReadBatch::received(vec![wire(5, bytes)], 5, 6, OFFSETS).unwrap_err();
        assert!(
            matches!(
                err,
                BatchDefect::Damaged {
                    position: 32,
                    kind: CorruptionKind::Truncated { .. },
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn runs_that_skip_or_repeat_offsets_are_refused() {
        let bytes = run(6, &[(ENTRY_NORMAL, b"a")]);
        let err = ReadBatch::received(vec![wire(6, bytes.clone())], 5, 7, OFFSETS).unwrap_err();
        assert_eq!(
            err,
            BatchDefect::OutOfOrder {
                expected: 5,
                found: 6
            }
        );
        // A run whose records carry other offsets than it claims.
        let err = ReadBatch::received(vec![wire(5, bytes.clone())], 5, 6, OFFSETS).unwrap_err();
        assert_eq!(
            err,
            BatchDefect::Damaged {
                offset: 5,
                position: 32,
                kind: CorruptionKind::OffsetOutOfOrder {
                    expected: 5,
                    found: 6
                },
            }
        );
        // A next read's start other than where the runs end.
        let err = ReadBatch::received(vec![wire(6, bytes)], 6, 9, OFFSETS).unwrap_err();
        assert_eq!(
            err,
            BatchDefect::OutOfOrder {
                expected: 7,
                found: 9
            }
        );
    }
}
