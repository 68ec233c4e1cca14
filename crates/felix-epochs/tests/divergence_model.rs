//! Two replicas under random leader changes, appends, replication and
//! crashes: the leader-epoch exchange always truncates a follower to exactly
//! the longest common prefix of the two logs, never below it, and applying it
//! again changes nothing.
//!
//! Each record carries its generation and a unique id. The model keeps the
//! rule replication relies on — a generation has one leader, which writes at
//! its log end, and a crash ends its term — so two logs with the same
//! generation at an offset hold the same record there; the test checks that
//! too, since the protocol is only correct where it holds.

use felix_epochs::{Divergence, EpochHistory, Recorded, divergence_point};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    generation: u64,
    id: u64,
}

#[derive(Debug, Clone, Default)]
struct Replica {
    log: Vec<Record>,
    history: EpochHistory,
}

impl Replica {
    fn log_end(&self) -> u64 {
        self.log.len() as u64
    }

    /// Cuts the log and its history together, as the storage layer does.
    fn truncate(&mut self, offset: u64) {
        self.log.truncate(offset as usize);
        self.history.truncate_from(offset);
    }
}

#[derive(Debug, Clone, Copy)]
enum Event {
    /// The replica becomes leader of a new generation, whatever its log
    /// holds (elections may be unclean).
    Elect(usize),
    /// The leader appends records in its generation.
    Append(u64),
    /// The follower reconciles with the leader, then copies up to this many
    /// records.
    Replicate(u64),
    /// The replica loses up to this many unflushed records from its tail and,
    /// if it led, its leadership.
    Crash(usize, u64),
}

fn arb_event() -> impl Strategy<Value = Event> {
    prop_oneof![
        2 => (0..2usize).prop_map(Event::Elect),
        4 => (1..5u64).prop_map(Event::Append),
        3 => (0..6u64).prop_map(Event::Replicate),
        2 => (0..2usize, 0..4u64).prop_map(|(r, n)| Event::Crash(r, n)),
    ]
}

/// Length of the longest common prefix of two logs, by generation.
fn common_prefix_by_generation(a: &[Record], b: &[Record]) -> u64 {
    a.iter()
        .zip(b)
        .take_while(|(x, y)| x.generation == y.generation)
        .count() as u64
}

fn common_prefix(a: &[Record], b: &[Record]) -> u64 {
    a.iter().zip(b).take_while(|(x, y)| x == y).count() as u64
}

/// Runs the exchange between `follower` and `leader` to its end, checking
/// every truncation point against the common prefix, and returns the steps.
fn reconcile(follower: &mut Replica, leader: &Replica) -> Result<Vec<Divergence>, TestCaseError> {
    let shared = common_prefix(&follower.log, &leader.log);
    let mut steps = Vec::new();
    loop {
        // A log holds records only under a history covering them, so an empty
        // history means an empty log: nothing to reconcile.
        let Some(latest) = follower.history.latest() else {
            prop_assert!(follower.log.is_empty());
            return Ok(steps);
        };
        let Some(answer) = leader
            .history
            .end_offset_for(latest.generation, leader.log_end())
        else {
            // The leader knows no generation only when it holds nothing, and
            // then nothing of the follower's is shared.
            prop_assert!(leader.log.is_empty());
            follower.truncate(0);
            return Ok(steps);
        };
        prop_assert!(answer.generation <= latest.generation);
        let step = divergence_point(&follower.history, follower.log_end(), answer);
        let cut = step.truncate_to();
        prop_assert!(
            cut >= shared,
            "{step:?} cuts below the shared prefix {shared}"
        );
        prop_assert!(cut <= follower.log_end(), "{step:?} is beyond the log end");
        follower.truncate(cut);
        steps.push(step);
        prop_assert!(steps.len() <= 64, "the exchange does not end: {steps:?}");
        match step {
            Divergence::AskAgain { .. } => {}
            // The history covers the log from offset 0, so a divergence
            // before it leaves nothing below.
            Divergence::BeforeHistory { truncate_to } => {
                prop_assert_eq!(truncate_to, 0);
                return Ok(steps);
            }
            _ => return Ok(steps),
        }
    }
}

/// Reconciles a copy of `follower` with `leader` and checks the result is the
/// common prefix, and that asking again cuts nothing more.
fn check_converges(follower: &Replica, leader: &Replica) -> Result<(), TestCaseError> {
    let shared = common_prefix(&follower.log, &leader.log);
    prop_assert_eq!(
        shared,
        common_prefix_by_generation(&follower.log, &leader.log),
        "the model broke the one-leader-per-generation rule"
    );
    let mut follower = follower.clone();
    reconcile(&mut follower, leader)?;
    prop_assert_eq!(follower.log_end(), shared);
    let again = reconcile(&mut follower, leader)?;
    prop_assert!(
        again.iter().all(|step| step.truncate_to() == shared),
        "repeating moved the cut: {again:?}"
    );
    prop_assert_eq!(follower.log_end(), shared);
    Ok(())
}

/// The history must name the generation of every record in the log.
fn check_history_covers_log(replica: &Replica) -> Result<(), TestCaseError> {
    for (offset, record) in replica.log.iter().enumerate() {
        prop_assert_eq!(
            replica.history.generation_at(offset as u64),
            Some(record.generation)
        );
    }
    Ok(())
}

#[derive(Debug, Default)]
struct Cluster {
    replicas: [Replica; 2],
    leader: Option<usize>,
    last_generation: u64,
    next_id: u64,
}

impl Cluster {
    fn apply(&mut self, event: Event) -> Result<(), TestCaseError> {
        match event {
            Event::Elect(r) => {
                self.last_generation += 1;
                let replica = &mut self.replicas[r];
                let recorded = replica
                    .history
                    .record(self.last_generation, replica.log_end());
                prop_assert!(
                    matches!(recorded, Ok(Recorded::Appended | Recorded::Replaced { .. })),
                    "{recorded:?}"
                );
                self.leader = Some(r);
            }
            Event::Append(count) => {
                let Some(l) = self.leader else { return Ok(()) };
                let generation = self.last_generation;
                for _ in 0..count {
                    self.next_id += 1;
                    self.replicas[l].log.push(Record {
                        generation,
                        id: self.next_id,
                    });
                }
            }
            Event::Replicate(max) => {
                let Some(l) = self.leader else { return Ok(()) };
                let leader = self.replicas[l].clone();
                let follower = &mut self.replicas[1 - l];
                let shared = common_prefix(&follower.log, &leader.log);
                reconcile(follower, &leader)?;
                prop_assert_eq!(follower.log_end(), shared);
                for record in leader.log.iter().skip(shared as usize).take(max as usize) {
                    let offset = follower.log_end();
                    let recorded = follower.history.record(record.generation, offset);
                    prop_assert!(
                        matches!(recorded, Ok(Recorded::Appended | Recorded::AlreadyLatest)),
                        "{recorded:?}"
                    );
                    follower.log.push(*record);
                }
            }
            Event::Crash(r, lost) => {
                let replica = &mut self.replicas[r];
                let end = replica.log_end().saturating_sub(lost);
                replica.truncate(end);
                if self.leader == Some(r) {
                    self.leader = None;
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn divergence_point_random_leader_changes_converges_to_common_prefix(
        events in prop::collection::vec(arb_event(), 0..60),
    ) {
        let mut cluster = Cluster::default();
        for event in events {
            cluster.apply(event)?;
            let [a, b] = &cluster.replicas;
            check_history_covers_log(a)?;
            check_history_covers_log(b)?;
            // Either replica may be asked to follow the other next.
            check_converges(a, b)?;
            check_converges(b, a)?;
        }
    }
}

#[test]
fn divergence_point_kip279_fast_failover_needs_two_rounds() {
    // A led generation 1 and wrote offsets 1..3; B, holding only offset 0,
    // led generation 2 and wrote offset 1; then A led generation 3.
    let mut a = Replica::default();
    let mut b = Replica::default();
    let record = |generation, id| Record { generation, id };
    a.history.record(0, 0).unwrap();
    b.history.record(0, 0).unwrap();
    a.log.push(record(0, 0));
    b.log.push(record(0, 0));
    a.history.record(1, 1).unwrap();
    a.log.extend([record(1, 1), record(1, 2)]);
    b.history.record(2, 1).unwrap();
    b.log.push(record(2, 3));
    a.history.record(3, 3).unwrap();

    let steps = reconcile(&mut b, &a).unwrap();

    assert_eq!(
        steps,
        [
            Divergence::AskAgain { truncate_to: 1 },
            Divergence::Resolved { truncate_to: 1 }
        ]
    );
    assert_eq!(b.log, [record(0, 0)]);
}
