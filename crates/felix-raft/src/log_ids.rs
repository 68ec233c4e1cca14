//! The order of a Raft log's ids, checked on both sides of the disk: each
//! index above the one before, each term at or above the one before.
//!
//! `append` asserts it, in debug builds, of the run openraft hands it
//! (contiguous, too): a violation there is openraft's bug or ours, caught
//! at the call that made it. A read checks it of what comes back in every
//! build and returns [`RaftLogError::LogIdOrder`]: the records are on disk,
//! where another writer may have put them, so a violation is the log's
//! state, not a bug, and an error rather than a panic.

use felix_format::raft_state::RaftLogId;
use openraft::LogId;
use openraft::vote::leader_id_std::CommittedLeaderId;

use crate::error::RaftLogError;

/// Checks that log ids `(term, index)` read from `shard` ascend as a Raft
/// log's do. An index is the record's offset.
pub(crate) fn check_read(
    shard: &str,
    ids: impl IntoIterator<Item = (u64, u64)>,
) -> Result<(), RaftLogError> {
    let mut previous: Option<(u64, u64)> = None;
    for (term, index) in ids {
        if let Some((previous_term, previous_index)) = previous
            && (index <= previous_index || term < previous_term)
        {
            return Err(RaftLogError::LogIdOrder {
                shard: shard.to_owned(),
                offset: index,
                term,
                previous_offset: previous_index,
                previous_term,
            });
        }
        previous = Some((term, index));
    }
    Ok(())
}

/// Asserts, in debug builds, that the log ids `(term, index)` of a run
/// about to be appended ascend as a Raft log's do, each index by one: what
/// [`check_read`] checks when they are read back.
pub(crate) fn debug_assert_appended(ids: impl Iterator<Item = (u64, u64)>) {
    if !cfg!(debug_assertions) {
        return;
    }
    let mut previous: Option<(u64, u64)> = None;
    for (term, index) in ids {
        if let Some((previous_term, previous_index)) = previous {
            debug_assert!(
                previous_index.checked_add(1) == Some(index) && term >= previous_term,
                "append: log id (term {term}, index {index}) does not follow (term {previous_term}, index {previous_index})"
            );
        }
        previous = Some((term, index));
    }
}

/// openraft's log id of a recorded one.
pub(crate) fn log_id(id: RaftLogId) -> LogId<CommittedLeaderId<u64>> {
    LogId::new(CommittedLeaderId::new(id.term), id.index)
}

/// The recorded form of openraft's log id.
pub(crate) fn raft_log_id(id: &LogId<CommittedLeaderId<u64>>) -> RaftLogId {
    RaftLogId {
        term: id.leader_id.term,
        index: id.index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_read_ascending_ids_with_gaps_and_new_terms_pass() {
        // A purge meanwhile may skip indexes; a new leader raises the term.
        assert!(check_read("s", [(1, 0), (1, 1), (1, 4), (3, 5), (3, 6)]).is_ok());
        assert!(check_read("s", []).is_ok());
    }

    #[test]
    fn check_read_term_going_back_is_an_error_naming_both_ids() {
        let err = check_read("orders-0", [(1, 7), (2, 8), (1, 9)]).unwrap_err();
        assert!(
            matches!(
                &err,
                RaftLogError::LogIdOrder {
                    shard,
                    offset: 9,
                    term: 1,
                    previous_offset: 8,
                    previous_term: 2,
                } if shard == "orders-0"
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "log ids read from shard orders-0 do not ascend: (term 1, index 9) follows (term 2, index 8)"
        );
    }

    #[test]
    fn check_read_index_not_above_the_one_before_is_an_error() {
        for (ids, offset, previous_offset) in [([(1, 5), (1, 5)], 5, 5), ([(1, 5), (1, 4)], 4, 5)] {
            let err = check_read("s", ids).unwrap_err();
            assert!(
                matches!(
                    err,
                    RaftLogError::LogIdOrder { offset: o, term: 1, previous_offset: p, previous_term: 1, .. }
                        if o == offset && p == previous_offset
                ),
                "{ids:?}: {err:?}"
            );
        }
    }
}
