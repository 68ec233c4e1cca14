//! How far a read may go, and where the log's offsets stand.
//!
//! Three ends matter to a reader: what is *written* (in the file, perhaps
//! only in the page cache), what is *durable* (covered by a successful
//! `fdatasync`), and what is *acknowledged* (an append returned for it).
//! A read by default ends at the acknowledged end, the *committed* end:
//! under [`Durability::OnCommit`](crate::Durability::OnCommit) that is the
//! durable offset, otherwise what is written. After a failure has stopped
//! the shard's writes, every end is clamped to the committed one, so no
//! reader ever sees a record whose write or sync failed.

/// Where a read (or a wait for the tail) ends.
///
/// ```
/// use felix_storage::{ReadBound, Record, Shard};
///
/// let dir = tempfile::tempdir()?;
/// let shard = Shard::options(dir.path()).open()?;
/// shard.append(&[Record::new(1, "a"), Record::new(2, "b"), Record::new(3, "c")]).wait()?;
/// // A consumer reads what was acknowledged...
/// assert_eq!(shard.read(0, 1 << 20, ReadBound::Committed)?.len(), 3);
/// // ...or only up to a high watermark replication computed.
/// let below_hw = shard.read(0, 1 << 20, ReadBound::Below(2))?;
/// assert_eq!(below_hw.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadBound {
    /// Acknowledged records only: up to the durable offset under
    /// [`Durability::OnCommit`](crate::Durability::OnCommit), up to what is
    /// written otherwise. What a consumer reads. The default.
    #[default]
    Committed,
    /// Records below the given offset (a high watermark that replication
    /// computed), and at most what is written.
    Below(u64),
    /// Everything written, acknowledged or not: a leader serving its
    /// followers before its own sync, as Kafka followers fetch up to the
    /// log end.
    Written,
}

/// A consistent snapshot of a shard's offsets (see [`crate::Shard::offsets`]).
///
/// `readable ≤ written`, `durable ≤ written` and `base ≤ written` always
/// hold; `readable` is `durable` under
/// [`Durability::OnCommit`](crate::Durability::OnCommit) and `written`
/// otherwise, until a failure stops the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// The oldest offset still held.
    pub base: u64,
    /// One past the last record a [`ReadBound::Committed`] read returns.
    pub readable: u64,
    /// One past the last record written.
    pub written: u64,
    /// One past the last record a successful `fdatasync` covered.
    pub durable: u64,
}

/// What a wait for the tail ([`crate::Shard::wait_readable`]) saw.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// Records from the offset waited at up to `end` (exclusive) are
    /// readable under the bound: a read from there returns at least one.
    Readable {
        /// One past the last readable record.
        end: u64,
    },
    /// The timeout passed and nothing at the offset became readable.
    TimedOut {
        /// One past the last readable record.
        end: u64,
    },
    /// The bound was [`ReadBound::Below`] an offset at or below the one
    /// waited at: nothing can become readable under it.
    BoundReached {
        /// The bound's offset.
        bound: u64,
    },
    /// A failure stopped the shard's writes and everything acknowledged
    /// below `end` has been read: nothing more will become readable until
    /// the shard is reopened ([`crate::Shard::poisoned`] has the failure).
    Poisoned {
        /// One past the last acknowledged record.
        end: u64,
    },
}

/// Where a read under `bound` ends, given the log's written and durable
/// offsets: the one rule every read and wait follows.
pub(crate) fn readable_end(
    bound: ReadBound,
    written: u64,
    durable: u64,
    on_commit: bool,
    poisoned: bool,
) -> u64 {
    let committed = if on_commit {
        durable.min(written)
    } else {
        written
    };
    // After a failure, nothing past what was acknowledged is served, under
    // any bound: it may be a record whose write or sync failed.
    let limit = if poisoned { committed } else { written };
    let end = match bound {
        ReadBound::Committed => committed,
        ReadBound::Below(offset) => offset.min(limit),
        ReadBound::Written => limit,
    };
    debug_assert!(
        end <= written,
        "a read passes the writer: {end} > {written}"
    );
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_end_follows_the_policy_and_the_poison() {
        use ReadBound::*;
        // (bound, written, durable, on_commit, poisoned) -> end
        let cases = [
            (Committed, 10, 4, true, false, 4),
            (Committed, 10, 4, false, false, 10),
            (Written, 10, 4, true, false, 10),
            (Below(7), 10, 4, true, false, 7),
            (Below(70), 10, 4, true, false, 10),
            (Written, 10, 4, true, true, 4),
            (Below(7), 10, 4, true, true, 4),
            (Committed, 10, 4, true, true, 4),
            (Written, 10, 4, false, true, 10),
        ];
        for (bound, written, durable, on_commit, poisoned, end) in cases {
            assert_eq!(
                readable_end(bound, written, durable, on_commit, poisoned),
                end,
                "{bound:?} written {written} durable {durable} on_commit {on_commit} poisoned {poisoned}"
            );
        }
    }
}
