//! Quiet groups: an idle group turns its timers off until it is written
//! again, and one message per peer node replaces every group's heartbeats.
//!
//! A node hosts many groups, most of them idle at any time. Each awake
//! group's leader sends a heartbeat to each follower every heartbeat
//! interval, and each replica's timers tick: with a thousand idle groups
//! that is most of a core doing nothing. As CockroachDB quiesces idle
//! ranges and TiKV hibernates idle regions, a leader whose group has been
//! idle for a check interval, with every follower holding every entry and
//! every entry committed, asks each follower to stop the group's timers
//! ([`Request::Quiesce`]); once all agree it stops its own (no heartbeats,
//! no ticks). Raft's safety never rests on timers, only its liveness, so
//! the one question is how a quiet group wakes:
//!
//! * **A write.** Every write a leader takes (an append, a membership
//!   change) first wakes the group here ([`Group::stir`]); its entries
//!   reach the followers as AppendEntries, and any Raft message wakes a
//!   follower's group — after openraft has taken it, so the leader's lease
//!   is fresh and the follower does not stand at its first tick. A sleep
//!   being decided when a write comes is called off (a count of writes,
//!   checked under the same lock the write wakes under).
//! * **A leader gone.** Each node pings each peer node every heartbeat
//!   interval ([`Request::Ping`]: one message per peer, however many
//!   groups). A peer that has not answered for the longest election
//!   timeout is taken as gone, and every quiet group here it led wakes: its
//!   election timer has long passed, so it stands at its next tick. A
//!   peer's answer counts the groups that stopped on it (a failed disk):
//!   when that count moves, the quiet groups it led wake too.
//! * **A peer back.** A node that greets this one (a restart, a healed
//!   partition) wakes every group this node leads that has it as a member:
//!   the leader's heartbeats reach it before its own election timer, which
//!   starts at its open, runs out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use openraft::ServerState;
use openraft::rt::watch::WatchReceiver;
use tokio::sync::watch;

use crate::node::{Group, Shared};
use crate::wire::{Request, Response, ShardName};

/// A group's quiet state on this node. Clones share it.
#[derive(Debug, Default)]
pub(crate) struct Quiet {
    /// Whether the group's timers (and, on a leader, heartbeats) are off.
    asleep: AtomicBool,
    /// Writes the leader here took: a sleep decided before one is called
    /// off.
    writes: AtomicU64,
    /// Held while a write wakes the group and while a sleep is made final.
    turn: Mutex<()>,
}

impl Group {
    /// Wakes the group before a write on its leader, and calls off a sleep
    /// being decided.
    pub(crate) fn stir(&self) {
        let _turn = self
            .quiet
            .turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.quiet.writes.fetch_add(1, Ordering::AcqRel);
        self.wake();
    }

    /// Turns the group's timers and heartbeats back on, if they were off.
    pub(crate) fn wake(&self) {
        if self.quiet.asleep.swap(false, Ordering::AcqRel) {
            let config = self.raft.runtime_config();
            config.heartbeat(true);
            config.tick(true);
        }
    }

    /// Turns the group's timers and heartbeats off.
    fn sleep(&self) {
        if !self.quiet.asleep.swap(true, Ordering::AcqRel) {
            let config = self.raft.runtime_config();
            config.tick(false);
            config.heartbeat(false);
        }
    }

    /// Whether the group's timers are off here.
    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet.asleep.load(Ordering::Acquire)
    }
}

/// A follower's answer to [`Request::Quiesce`]: the group sleeps if
/// `leader` leads it in `term` here and this replica holds every entry the
/// leader committed.
pub(crate) fn quiesce(group: &Group, term: u64, leader: u64) -> bool {
    let agreed = {
        let m = group.raft.metrics().borrow_watched().clone();
        m.running_state.is_ok()
            && m.current_leader == Some(leader)
            && m.current_term == term
            && m.state != ServerState::Leader
    };
    if agreed {
        group.sleep();
    }
    agreed
}

/// A node (`peer`) greeted this one: the groups this node leads that have
/// it as a member wake, so their heartbeats reach it.
pub(crate) fn peer_greeted(shared: &Shared, peer: u64) {
    for (_, group) in shared.all_groups() {
        if !group.is_quiet() {
            continue;
        }
        let m = group.raft.metrics().borrow_watched().clone();
        if m.state == ServerState::Leader
            && m.membership_config.membership().get_node(&peer).is_some()
        {
            group.wake();
        }
    }
}

/// What this node knows of a peer's liveness.
struct PeerSeen {
    last_answer: Instant,
    stops: Option<u64>,
}

/// The node's quiet keeper: pings peers every heartbeat interval, wakes
/// quiet groups whose leader is gone, and puts idle groups it leads to
/// sleep every `check_every` pings. Ends when `stop` turns true.
pub(crate) async fn keep(shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let timings = shared.timings();
    let period = Duration::from_millis(timings.heartbeat_ms.max(1));
    let gone_after = Duration::from_millis(timings.election_max_ms);
    // Idle for at least four heartbeat intervals (and at least one check)
    // before a group sleeps.
    let check_every = 4u32;
    let mut seen: HashMap<u64, PeerSeen> = HashMap::new();
    // Per group, (last log index, writes) at the previous check.
    let mut idle: HashMap<ShardName, (Option<u64>, u64)> = HashMap::new();
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round = 0u32;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        if *stop.borrow() {
            return;
        }
        // A ping may take half the time that makes a peer gone: a busy
        // machine's slow answer is not taken for a dead node.
        ping_peers(&shared, &mut seen, gone_after / 2, gone_after).await;
        round = round.wrapping_add(1);
        if round.is_multiple_of(check_every) {
            put_idle_groups_to_sleep(&shared, &mut idle).await;
        }
    }
}

/// Pings every known peer once; wakes the quiet groups led by a peer that
/// is gone or whose groups stopped.
async fn ping_peers(
    shared: &Arc<Shared>,
    seen: &mut HashMap<u64, PeerSeen>,
    timeout: Duration,
    gone_after: Duration,
) {
    let peers: Vec<(u64, String)> = shared
        .known_peers()
        .into_iter()
        .filter(|(id, _)| *id != shared.id)
        .collect();
    let calls = peers.iter().map(|(id, addr)| {
        let peer = shared.peers.get(addr);
        async move { (*id, peer.call(Request::Ping, timeout).await) }
    });
    let now = Instant::now();
    for (id, answer) in futures::future::join_all(calls).await {
        let entry = seen.entry(id).or_insert(PeerSeen {
            last_answer: now,
            stops: None,
        });
        let mut wake = false;
        if let Ok(Response::Pong { stops }) = answer {
            entry.last_answer = now;
            wake = entry.stops.is_some_and(|s| s != stops);
            entry.stops = Some(stops);
        } else if now.duration_since(entry.last_answer) > gone_after {
            wake = true;
        }
        if wake {
            wake_groups_led_by(shared, id);
        }
    }
}

/// Wakes every quiet group here whose leader is `leader`.
fn wake_groups_led_by(shared: &Shared, leader: u64) {
    for (key, group) in shared.all_groups() {
        if group.is_quiet() && group.raft.metrics().borrow_watched().current_leader == Some(leader)
        {
            tracing::info!(node = shared.id, shard = %key, leader, "waking a quiet group: its leader is gone");
            group.wake();
        }
    }
}

/// Puts to sleep every group this node leads that was idle since the last
/// check, once every follower agrees.
async fn put_idle_groups_to_sleep(
    shared: &Arc<Shared>,
    idle: &mut HashMap<ShardName, (Option<u64>, u64)>,
) {
    let mut now_idle = HashMap::new();
    for (key, group) in shared.all_groups() {
        if group.is_quiet() {
            continue;
        }
        let name = ShardName::from(&key);
        let writes = group.quiet.writes.load(Ordering::Acquire);
        let m = group.raft.metrics().borrow_watched().clone();
        let last = m.last_log_index;
        let settled = m.running_state.is_ok()
            && m.state == ServerState::Leader
            && m.last_applied.map(|id| id.index) == last
            && m.membership_config.membership().get_joint_config().len() == 1
            && m.replication.as_ref().is_some_and(|r| {
                r.iter()
                    .filter(|(id, _)| **id != shared.id)
                    .all(|(_, matched)| matched.as_ref().map(|id| id.index) == last)
            });
        if !settled {
            continue;
        }
        if idle.get(&name) != Some(&(last, writes)) {
            now_idle.insert(name, (last, writes));
            continue;
        }
        let followers: Vec<u64> = m
            .membership_config
            .membership()
            .nodes()
            .map(|(id, _)| *id)
            .filter(|id| *id != shared.id)
            .collect();
        let request = |_| Request::Quiesce {
            shard: name.clone(),
            term: m.current_term,
            leader: shared.id,
        };
        let calls = followers.iter().map(|id| {
            let addr = shared.address_of(*id).unwrap_or_default();
            let peer = shared.peers.get(&addr);
            let request = request(*id);
            let timeout = shared.call_timeout();
            async move { peer.call(request, timeout).await }
        });
        let agreed = futures::future::join_all(calls)
            .await
            .into_iter()
            .all(|answer| matches!(answer, Ok(Response::Done)));
        if agreed {
            // Final only if no write came meanwhile.
            let _turn = group
                .quiet
                .turn
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if group.quiet.writes.load(Ordering::Acquire) == writes {
                group.sleep();
                tracing::debug!(node = shared.id, shard = %key, "group quiet");
            }
        }
    }
    *idle = now_idle;
}
