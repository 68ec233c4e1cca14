//! The generation history of a felix shard, and where two replicas' logs part.
//!
//! Each time leadership of a shard changes, the new leader's generation
//! begins at its log end. This crate keeps that history — one
//! `(generation, start_offset)` entry per leadership change — and answers the
//! two questions Kafka's leader-epoch protocol (KIP-101, KIP-279) asks of it:
//! the leader's "where did generation *g* end?"
//! ([`EpochHistory::end_offset_for`]) and the follower's "so where must I
//! truncate?" ([`divergence_point`]).
//!
//! - [`EpochHistory`] is the history in memory: pure logic, no I/O, so its
//!   rules are property-tested against a model of two replicas.
//! - [`EpochsFile`] keeps it in the shard directory's `epochs` file, replaced
//!   atomically, and reads any unusable file as an empty history: the file is
//!   a convenience whose loss costs the automatic repair of a divergence,
//!   never a record, and never stops a shard from opening.
//!
//! The crate depends on `felix-format` (the byte layout) and `felix-io`
//! (every file operation goes through its `FileSystem`, so the crash
//! simulation covers the `epochs` file's replacement too), besides `std`;
//! `felix-storage` decides when to record, store and truncate.
//!
//! ```
//! use felix_epochs::{divergence_point, Divergence, EpochHistory};
//!
//! // Replica A led generation 1 and wrote offsets 0..3; B copied 0..2, then
//! // became leader of generation 2 and wrote offsets 2..5.
//! let mut a = EpochHistory::new();
//! a.record(1, 0)?;
//! let mut b = EpochHistory::new();
//! b.record(1, 0)?;
//! b.record(2, 2)?;
//!
//! // A, now a follower, asks B where its generation 1 ended.
//! let answer = b.end_offset_for(1, 5).expect("B has a history");
//! assert_eq!(divergence_point(&a, 3, answer), Divergence::Resolved { truncate_to: 2 });
//! # Ok::<(), felix_epochs::HistoryError>(())
//! ```

#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod divergence;
mod file;
mod history;

pub use divergence::{Divergence, LeaderAnswer, divergence_point};
pub use felix_format::epochs::{EpochEntry, MAX_EPOCH_ENTRIES};
pub use felix_io::side_file::SideFileProblem;
pub use file::{
    DiscardReason, EPOCHS_FILE_NAME, EPOCHS_TEMP_FILE_NAME, EpochsFile, LoadStatus, Loaded,
};
pub use history::{EpochHistory, HistoryError, Recorded};
