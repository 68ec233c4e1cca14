//! Where a follower's log parts from its leader's, from the two histories.
//!
//! The protocol is Kafka's leader-epoch truncation (KIP-101, refined by
//! KIP-279). The follower asks the leader about its latest generation; the
//! leader answers with [`EpochHistory::end_offset_for`]; the follower turns
//! the answer into a truncation point with [`divergence_point`], truncates,
//! and asks again until the answer is [`Divergence::Resolved`].
//!
//! It relies on one property replication keeps: a record is identified by its
//! offset and generation. A generation has one leader, which writes its
//! records contiguously from its log end, and followers only copy them, so
//! two logs holding the same generation at an offset hold the same record
//! there and agree on everything below it. The invariant this module keeps is
//! that it never names a truncation point below the longest common prefix of
//! the two logs, and names exactly that prefix when it says `Resolved`.

use crate::history::EpochHistory;

/// The leader's answer to "where did my generation end?": the largest
/// generation at or below the one asked and the offset where it ended in the
/// leader's log.
///
/// ```
/// # use felix_epochs::{EpochHistory, LeaderAnswer};
/// let mut leader = EpochHistory::new();
/// leader.record(1, 0)?;
/// assert_eq!(leader.end_offset_for(1, 40), Some(LeaderAnswer { generation: 1, end_offset: 40 }));
/// # Ok::<(), felix_epochs::HistoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaderAnswer {
    /// The generation answered about.
    pub generation: u64,
    /// The offset where that generation ended: the next generation's first
    /// offset, or the leader's log end for its latest generation.
    pub end_offset: u64,
}

/// Where a follower must truncate, and whether it must then ask again.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Divergence {
    /// The logs agree below `truncate_to` and differ at it (or one of them
    /// ends there): truncate, then fetch from `truncate_to`.
    Resolved {
        /// The first offset the follower must drop; its log end when nothing
        /// is to be dropped.
        truncate_to: u64,
    },
    /// The leader answered about a generation the follower does not hold, so
    /// the follower's records from `truncate_to` on belong to generations the
    /// leader never had: truncate there, cut the history with
    /// [`EpochHistory::truncate_from`], and ask again about the new latest
    /// generation.
    AskAgain {
        /// The first offset the follower must drop.
        truncate_to: u64,
    },
    /// Every generation in the follower's history is newer than the leader's
    /// answer, so its records from `truncate_to` (where its history begins)
    /// on are not the leader's; below that its history says nothing.
    ///
    /// When the follower's log starts at or after `truncate_to`, as it does
    /// whenever retention keeps the history with
    /// [`EpochHistory::truncate_before`], this is as final as `Resolved`.
    /// Otherwise the history was lost or pruned, and the caller falls back to
    /// its own policy for the records below.
    BeforeHistory {
        /// The first offset the follower must drop.
        truncate_to: u64,
    },
}

impl Divergence {
    /// The first offset the follower must drop, whatever comes next.
    ///
    /// ```
    /// # use felix_epochs::Divergence;
    /// assert_eq!(Divergence::AskAgain { truncate_to: 12 }.truncate_to(), 12);
    /// ```
    pub fn truncate_to(self) -> u64 {
        match self {
            Self::Resolved { truncate_to }
            | Self::AskAgain { truncate_to }
            | Self::BeforeHistory { truncate_to } => truncate_to,
        }
    }
}

/// The follower's side: where its log must be cut, given its own history, its
/// log end, and the leader's answer about its latest generation.
///
/// Following KIP-279, the follower looks up the largest generation it holds at
/// or below the one the leader answered about:
///
/// - if it is the same generation, both logs hold it up to the smaller of the
///   two ends and differ right after, so the answer is `Resolved` at the
///   smaller end;
/// - if it is older, the follower's records after that generation's end are
///   of generations the leader never had, so it truncates there and asks
///   again (`AskAgain`); each round removes at least one generation, so the
///   exchange ends;
/// - if the follower holds none, the divergence lies below its history
///   (`BeforeHistory`).
///
/// No answer is ever above `local_log_end`. `answer` must be the leader's
/// reply about this history's latest generation; given anything newer, the
/// result is `AskAgain` without truncating, so the caller asks the right
/// question.
///
/// The KIP-279 scenario: the follower led generation 2 and wrote offset 1 in
/// it, which the leader never saw, while the leader holds generation 1 up to
/// offset 3.
///
/// ```
/// use felix_epochs::{divergence_point, Divergence, EpochHistory};
///
/// let mut leader = EpochHistory::new();
/// leader.record(0, 0)?;
/// leader.record(1, 1)?;
/// leader.record(3, 3)?;
/// let mut follower = EpochHistory::new();
/// follower.record(0, 0)?;
/// follower.record(2, 1)?;
///
/// let answer = leader.end_offset_for(2, 3).unwrap();
/// let first = divergence_point(&follower, 2, answer);
/// assert_eq!(first, Divergence::AskAgain { truncate_to: 1 });
/// follower.truncate_from(1);
///
/// let answer = leader.end_offset_for(0, 3).unwrap();
/// assert_eq!(divergence_point(&follower, 1, answer), Divergence::Resolved { truncate_to: 1 });
/// # Ok::<(), felix_epochs::HistoryError>(())
/// ```
pub fn divergence_point(
    local: &EpochHistory,
    local_log_end: u64,
    answer: LeaderAnswer,
) -> Divergence {
    let divergence = divergence_unchecked(local, local_log_end, answer);
    // A follower truncates to the answer: one past its log end would
    // claim records it never held.
    debug_assert!(
        divergence.truncate_to() <= local_log_end,
        "divergence point {divergence:?} is past the follower's log end {local_log_end}"
    );
    divergence
}

/// [`divergence_point`] without the check of its answer.
fn divergence_unchecked(
    local: &EpochHistory,
    local_log_end: u64,
    answer: LeaderAnswer,
) -> Divergence {
    match local.floor_end(answer.generation, local_log_end) {
        Some((generation, end)) if generation == answer.generation => Divergence::Resolved {
            truncate_to: end.min(answer.end_offset).min(local_log_end),
        },
        Some((_, end)) => Divergence::AskAgain {
            truncate_to: end.min(local_log_end),
        },
        None => Divergence::BeforeHistory {
            truncate_to: local
                .earliest()
                .map_or(local_log_end, |e| e.start_offset.min(local_log_end)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::history::history_of as history;

    /// Runs the exchange to its end and returns the truncation points.
    fn reconcile(
        follower: &mut EpochHistory,
        follower_end: &mut u64,
        leader: &EpochHistory,
        leader_end: u64,
    ) -> Vec<Divergence> {
        let mut steps = Vec::new();
        while let Some(latest) = follower.latest() {
            let answer = leader
                .end_offset_for(latest.generation, leader_end)
                .unwrap();
            let step = divergence_point(follower, *follower_end, answer);
            steps.push(step);
            *follower_end = step.truncate_to();
            follower.truncate_from(*follower_end);
            if !matches!(step, Divergence::AskAgain { .. }) {
                break;
            }
        }
        steps
    }

    #[test]
    fn divergence_point_kip101_lost_high_watermark_keeps_records() {
        // Both replicas hold offsets 0 and 1 of generation 0; the follower
        // restarted before learning the high watermark. Truncating to it
        // would lose offset 1 if the leader then failed.
        let leader = history(&[(0, 0)]);
        let follower = history(&[(0, 0)]);
        let answer = leader.end_offset_for(0, 2).unwrap();
        assert_eq!(
            divergence_point(&follower, 2, answer),
            Divergence::Resolved { truncate_to: 2 }
        );
    }

    #[test]
    fn divergence_point_kip101_new_leader_wrote_over_cuts_at_its_start() {
        // The old leader (now follower) holds offsets 0 and 1 of generation 0;
        // the new leader had only offset 0, and wrote offset 1 in generation 1.
        let leader = history(&[(0, 0), (1, 1)]);
        let follower = history(&[(0, 0)]);
        let answer = leader.end_offset_for(0, 2).unwrap();
        assert_eq!(
            answer,
            LeaderAnswer {
                generation: 0,
                end_offset: 1
            }
        );
        assert_eq!(
            divergence_point(&follower, 2, answer),
            Divergence::Resolved { truncate_to: 1 }
        );
    }

    #[test]
    fn divergence_point_kip279_unknown_generation_asks_again() {
        let leader = history(&[(0, 0), (1, 1), (3, 3)]);
        let mut follower = history(&[(0, 0), (2, 1)]);
        let mut follower_end = 2;
        let steps = reconcile(&mut follower, &mut follower_end, &leader, 3);
        assert_eq!(
            steps,
            [
                Divergence::AskAgain { truncate_to: 1 },
                Divergence::Resolved { truncate_to: 1 }
            ]
        );
        assert_eq!(follower, history(&[(0, 0)]));
    }

    #[test]
    fn divergence_point_follower_ahead_in_same_generation_cuts_to_leader_end() {
        let leader = history(&[(1, 0), (4, 10)]);
        let follower = history(&[(1, 0)]);
        let answer = leader.end_offset_for(1, 30).unwrap();
        assert_eq!(
            divergence_point(&follower, 17, answer),
            Divergence::Resolved { truncate_to: 10 }
        );
    }

    #[test]
    fn divergence_point_all_local_generations_newer_is_before_history() {
        // The leader never had generation 5, nor anything between 2 and 5.
        let leader = history(&[(2, 0), (6, 8)]);
        let follower = history(&[(5, 0)]);
        let answer = leader.end_offset_for(5, 12).unwrap();
        assert_eq!(
            answer,
            LeaderAnswer {
                generation: 2,
                end_offset: 8
            }
        );
        assert_eq!(
            divergence_point(&follower, 4, answer),
            Divergence::BeforeHistory { truncate_to: 0 }
        );
    }

    #[test]
    fn divergence_point_leader_history_newer_than_asked_resolves_at_its_start() {
        // Everything the leader holds was written after the follower's
        // generation 1, so nothing of the follower's log from offset 3 is kept.
        let leader = history(&[(2, 3)]);
        let follower = history(&[(1, 0)]);
        let answer = leader.end_offset_for(1, 9).unwrap();
        assert_eq!(
            answer,
            LeaderAnswer {
                generation: 1,
                end_offset: 3
            }
        );
        assert_eq!(
            divergence_point(&follower, 6, answer),
            Divergence::Resolved { truncate_to: 3 }
        );
    }

    #[test]
    fn divergence_point_empty_local_history_is_before_history_at_log_end() {
        let answer = LeaderAnswer {
            generation: 3,
            end_offset: 5,
        };
        assert_eq!(
            divergence_point(&EpochHistory::new(), 9, answer),
            Divergence::BeforeHistory { truncate_to: 9 }
        );
    }

    #[test]
    fn divergence_point_answer_newer_than_local_asks_again_without_cutting() {
        let follower = history(&[(1, 0)]);
        let answer = LeaderAnswer {
            generation: 4,
            end_offset: 2,
        };
        assert_eq!(
            divergence_point(&follower, 6, answer),
            Divergence::AskAgain { truncate_to: 6 }
        );
    }

    #[test]
    fn divergence_point_history_beyond_log_end_never_exceeds_it() {
        // The log was cut to 4 but the history not yet: the answer still stays
        // within the log.
        let leader = history(&[(1, 0), (2, 10)]);
        let follower = history(&[(1, 0), (2, 10)]);
        let answer = leader.end_offset_for(2, 20).unwrap();
        assert_eq!(
            divergence_point(&follower, 4, answer),
            Divergence::Resolved { truncate_to: 4 }
        );
    }
}
