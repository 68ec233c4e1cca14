//! Finding a replicated shard's record by time above its log start.
//!
//! A committed log-start entry moves where a replica's log begins at once,
//! but the shard's own start (and its time index) moves only when the
//! snapshot at the entry is taken and the log purged, moments later. In
//! between, the shard's answer may lie below the start: the answer is then
//! the first record from the start on, which this walks to.

use felix_storage::{ReadBound, Shard, StorageError};

/// How much one step of the walk reads.
const WALK_READ_BYTES: u64 = 64 << 10;

/// The first record at or after `start` and below `end` whose timestamp is
/// at least `t`, as [`Shard::offset_for_timestamp`] answers from the
/// shard's own start: its answer when that is at or past `start`, else
/// the records from `start` walked in order. Leaders stamp the records,
/// so the walk usually ends at the first one.
pub(crate) fn offset_for_timestamp_from(
    shard: &Shard,
    t: u64,
    start: u64,
    end: u64,
) -> Result<Option<u64>, StorageError> {
    let hit = shard.offset_for_timestamp(t, ReadBound::Below(end))?;
    match hit {
        Some(hit) if hit.offset < start => walk(shard, t, start, end),
        hit => Ok(hit.map(|h| h.offset)),
    }
}

/// The walk of [`offset_for_timestamp_from`] from `from`.
fn walk(shard: &Shard, t: u64, mut from: u64, end: u64) -> Result<Option<u64>, StorageError> {
    while from < end {
        let runs = shard.read_runs(from, WALK_READ_BYTES, ReadBound::Below(end))?;
        let before = from;
        for record in runs.iter().flat_map(|run| run.iter()) {
            if record.timestamp_micros >= t {
                return Ok(Some(record.offset));
            }
            from = record.offset + 1;
        }
        if from == before {
            // Nothing readable there (a read below `end` returns at least
            // one record when one is): the end moved under the walk.
            break;
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use felix_storage::Record;

    /// A shard of `n` records stamped 100, 200, … (offset 0 at 100), and
    /// one stamped 50 at offset `n`: a clock that went back.
    fn shard(dir: &std::path::Path, n: u64) -> Shard {
        let shard = Shard::options(dir).open().unwrap();
        let mut records: Vec<Record> = (0..n)
            .map(|i| Record::new((i + 1) * 100, format!("r{i}")))
            .collect();
        records.push(Record::new(50, "late"));
        shard.append(&records).wait().unwrap();
        shard
    }

    #[test]
    fn an_answer_below_the_start_moves_to_the_first_record_from_the_start_that_reaches_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let shard = shard(dir.path(), 10);
        // The shard alone answers 0 for time 100; from start 4 it is 4.
        assert_eq!(
            offset_for_timestamp_from(&shard, 100, 0, 11).unwrap(),
            Some(0)
        );
        assert_eq!(
            offset_for_timestamp_from(&shard, 100, 4, 11).unwrap(),
            Some(4)
        );
        // A time that only records past the start reach: the shard's own
        // answer, unchanged.
        assert_eq!(
            offset_for_timestamp_from(&shard, 750, 4, 11).unwrap(),
            Some(7)
        );
        // Only the record before the start reaches 1,000 (offset 9 at
        // 1,000); from 10 on, the late record does not.
        assert_eq!(
            offset_for_timestamp_from(&shard, 1_000, 10, 11).unwrap(),
            None
        );
        // The end bounds the walk: below 6, from 4, time 100 is 4; none
        // past the end.
        assert_eq!(
            offset_for_timestamp_from(&shard, 100, 4, 6).unwrap(),
            Some(4)
        );
        assert_eq!(offset_for_timestamp_from(&shard, 900, 4, 6).unwrap(), None);
    }

    #[test]
    fn the_walk_crosses_many_reads_to_the_first_record_that_reaches_the_time() {
        let dir = tempfile::tempdir().unwrap();
        // 5,000 records of about 30 bytes: several 64 KiB reads.
        let shard = Shard::options(dir.path()).open().unwrap();
        let mut records: Vec<Record> = (0..5_000u64)
            .map(|i| Record::new(10, format!("early record {i:08}")))
            .collect();
        records[0] = Record::new(1_000, "reaches");
        records.push(Record::new(1_000, "reaches again"));
        shard.append(&records).wait().unwrap();
        assert_eq!(
            offset_for_timestamp_from(&shard, 1_000, 0, 5_001).unwrap(),
            Some(0)
        );
        assert_eq!(
            offset_for_timestamp_from(&shard, 1_000, 1, 5_001).unwrap(),
            Some(5_000)
        );
        assert_eq!(
            offset_for_timestamp_from(&shard, 1_000, 1, 5_000).unwrap(),
            None
        );
    }
}
