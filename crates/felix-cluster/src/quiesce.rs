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
//! ([`Request::Quiesce`]; a follower agrees once it has applied every
//! entry, so that its reads hold every acknowledged record); once all
//! agree it stops its own (no heartbeats, no ticks). Raft's safety never
//! rests on timers, only its liveness, so the one question is how a quiet
//! group wakes:
//!
//! * **A write.** Every write a leader takes (an append, a membership
//!   change) first wakes the group there ([`Group::stir`]; on a replica
//!   that does not lead, nothing wakes); its entries reach the followers
//!   as AppendEntries, and entries of the leader a follower follows wake
//!   its group — after openraft has taken them, so the leader's lease is
//!   fresh and the follower does not stand at its first tick. Heartbeats
//!   and votes wake nothing (a follower woken with a long-expired lease
//!   would stand). A sleep being decided when a write comes is called off
//!   (a count of writes, checked under the lock every sleep and wake
//!   takes).
//! * **A leader gone.** Each node pings each peer node every heartbeat
//!   interval ([`Request::Ping`]: one message per peer, however many
//!   groups). A peer that has not answered for the longest election
//!   timeout is taken as gone, and every quiet group here it led wakes: its
//!   election timer has long passed, so it stands at its next tick. A
//!   peer's answer names its run and counts the groups that stopped or did
//!   not open on it (a failed disk): when either changes (a restart), the
//!   quiet groups it led wake too. Peers are the configured ones, those
//!   learned, and every member of every group hosted here.
//! * **A peer back.** A node that greets this one (a restart, a healed
//!   partition) wakes every group this node leads that has it as a member:
//!   the leader's heartbeats reach it before its own election timer, which
//!   starts at its open, runs out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use felix_raft::TypeConfig;
use openraft::ServerState;
use openraft::rt::watch::WatchReceiver;
use openraft::type_config::TypeConfigExt;
use tokio::sync::watch;

use crate::node::{Group, Shared};
use crate::wire::{QuiesceRefusal, Request, Response, ShardName};

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
    fn turn(&self) -> std::sync::MutexGuard<'_, ()> {
        self.quiet
            .turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the group before a write on its leader, calls off a sleep
    /// being decided, and renews the leader's lease when it ran out. On a
    /// replica that does not lead, nothing: the write is refused there, and
    /// waking a follower whose lease ran out long ago would make it stand
    /// for election.
    ///
    /// openraft refuses a leader's write once its lease — a quorum's last
    /// acknowledgement, valid for the longest election timeout — has run
    /// out, and a group quiet for longer than that has no acknowledgement
    /// that recent: its first write would be refused (with no leader
    /// named), and an idle shard's retention would never move its start.
    /// One heartbeat round renews the lease; the wait is bounded by the
    /// lease's length (a leader cut off from its majority gets no answer,
    /// and its write is then refused as it would have been).
    pub(crate) async fn stir(&self) {
        if self.raft.metrics().borrow_watched().state != ServerState::Leader {
            return;
        }
        {
            let _turn = self.turn();
            self.quiet.writes.fetch_add(1, Ordering::AcqRel);
            self.wake_holding_turn();
        }
        self.renew_lease().await;
    }

    /// Sends a heartbeat round and waits, at most the lease's length, for
    /// a quorum to acknowledge it, unless the leader's lease is valid for
    /// another heartbeat interval (a write checked just before the lease
    /// ends would be refused by the time openraft takes it) or the leader
    /// is its group's only voter (its own quorum: openraft's lease always
    /// holds then, and no one would answer the heartbeat).
    async fn renew_lease(&self) {
        let config = self.raft.config();
        let lease = Duration::from_millis(config.election_timeout_max);
        let margin = Duration::from_millis(config.heartbeat_interval);
        let valid = {
            let metrics = self.raft.metrics();
            let m = metrics.borrow_watched();
            let alone = m.membership_config.membership().voter_ids().eq([m.id]);
            alone
                || m.last_quorum_acked
                    .as_ref()
                    .is_some_and(|acked| TypeConfig::now() + margin < **acked + lease)
        };
        if valid {
            return;
        }
        let asked = TypeConfig::now();
        if self.raft.trigger().heartbeat().await.is_err() {
            // The group stopped: the write reports it.
            return;
        }
        let renewed = self
            .raft
            .wait(Some(lease))
            .metrics(
                |m| {
                    m.last_quorum_acked
                        .as_ref()
                        .is_some_and(|acked| **acked >= asked)
                },
                "a quorum acknowledged the leader's heartbeat",
            )
            .await;
        if let Err(e) = renewed {
            tracing::debug!(shard = %self.log.shard().label(), error = %e, "the leader's lease was not renewed");
        }
    }

    /// Turns the group's timers and heartbeats back on, if they were off.
    pub(crate) fn wake(&self) {
        let _turn = self.turn();
        self.wake_holding_turn();
    }

    /// [`wake`](Self::wake) for a caller holding `turn`: the flag and
    /// openraft's switches change together, so a sleep and a wake racing
    /// cannot leave the switches off under a flag that says awake.
    fn wake_holding_turn(&self) {
        if self.quiet.asleep.swap(false, Ordering::AcqRel) {
            let config = self.raft.runtime_config();
            config.heartbeat(true);
            config.tick(true);
        }
    }

    /// Turns the group's timers and heartbeats off; the caller holds
    /// `turn`.
    fn sleep_holding_turn(&self) {
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
/// `leader` leads it in `term` here and this replica has applied every
/// entry up to `applied`, the leader's last (so its reads hold every
/// record the leader acknowledged).
pub(crate) fn quiesce(
    group: &Group,
    term: u64,
    leader: u64,
    applied: Option<u64>,
) -> Result<(), QuiesceRefusal> {
    {
        let metrics = group.raft.metrics();
        let m = metrics.borrow_watched();
        if m.running_state.is_err() {
            return Err(QuiesceRefusal::Stopped);
        }
        let led = m.current_leader == Some(leader)
            && m.current_term == term
            && m.state != ServerState::Leader;
        if !led {
            return Err(QuiesceRefusal::NotLeader {
                asked_by: leader,
                term,
                leader_here: m.current_leader,
                term_here: m.current_term,
            });
        }
        let here = m.last_applied.map(|id| id.index);
        if let Some(wanted) = applied
            && here.is_none_or(|here| here < wanted)
        {
            return Err(QuiesceRefusal::Behind {
                wanted,
                applied: here,
            });
        }
    }
    let _turn = group.turn();
    group.sleep_holding_turn();
    Ok(())
}

/// A node (`peer`) greeted this one: the groups this node leads that have
/// it as a member wake, so their heartbeats reach it.
pub(crate) fn peer_greeted(shared: &Shared, peer: u64) {
    for (_, group) in shared.all_groups() {
        if !group.is_quiet() {
            continue;
        }
        let leads_peer = {
            let metrics = group.raft.metrics();
            let m = metrics.borrow_watched();
            m.state == ServerState::Leader
                && m.membership_config.membership().get_node(&peer).is_some()
        };
        if leads_peer {
            group.wake();
        }
    }
}

/// What this node knows of a peer's liveness.
struct PeerSeen {
    last_answer: Instant,
    /// The peer's run and its count of stopped groups, as last answered.
    pong: Option<(u64, u64)>,
}

/// The node's quiet keeper: one task pings the peers every heartbeat
/// interval and wakes the quiet groups whose leader is gone; another puts
/// idle groups this node leads to sleep every four intervals. Neither
/// waits on the other, so a slow round of one never delays the other's
/// verdicts. Both end when `stop` turns true.
pub(crate) async fn keep(shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let timings = shared.timings();
    let period = Duration::from_millis(timings.heartbeat_ms.max(1));
    let gone_after = Duration::from_millis(timings.election_max_ms);
    tokio::join!(
        ping_loop(Arc::clone(&shared), stop.clone(), period, gone_after),
        // Idle from one look to the next, four heartbeat intervals on,
        // before a group sleeps.
        sleep_loop(shared, stop, period * 4, gone_after / 2),
    );
}

/// A tick of `period` until `stop` turns true or its node is dropped
/// (`false` then).
async fn next_tick(tick: &mut tokio::time::Interval, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        changed = stop.changed() => if changed.is_err() { return false },
        _ = tick.tick() => {}
    }
    !*stop.borrow()
}

fn ticker(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

async fn ping_loop(
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    period: Duration,
    gone_after: Duration,
) {
    let mut seen: HashMap<u64, PeerSeen> = HashMap::new();
    let mut members = HashMap::new();
    let mut tick = ticker(period);
    let mut round = 0u32;
    while next_tick(&mut tick, &mut stop).await {
        // The groups' members change rarely: looked up every ten pings.
        if round.is_multiple_of(10) {
            members = group_members(&shared);
        }
        round = round.wrapping_add(1);
        // A ping may take half the time that makes a peer gone: a busy
        // machine's slow answer is not taken for a dead node.
        ping_peers(&shared, &members, &mut seen, gone_after / 2, gone_after).await;
    }
}

/// Every member of every group hosted here, with its address.
fn group_members(shared: &Shared) -> HashMap<u64, String> {
    let mut members = HashMap::new();
    for (_, group) in shared.all_groups() {
        let metrics = group.raft.metrics();
        let m = metrics.borrow_watched();
        for (id, node) in m.membership_config.membership().nodes() {
            members.entry(*id).or_insert_with(|| node.addr.clone());
        }
    }
    members
}

async fn sleep_loop(
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    period: Duration,
    timeout: Duration,
) {
    // Per group, (last log index, writes) at the previous look.
    let mut idle: HashMap<ShardName, (Option<u64>, u64)> = HashMap::new();
    let mut tick = ticker(period);
    while next_tick(&mut tick, &mut stop).await {
        put_idle_groups_to_sleep(&shared, &mut idle, timeout).await;
    }
}

/// Pings every known peer once; wakes the quiet groups led by a peer that
/// is gone or whose groups stopped.
async fn ping_peers(
    shared: &Arc<Shared>,
    members: &HashMap<u64, String>,
    seen: &mut HashMap<u64, PeerSeen>,
    timeout: Duration,
    gone_after: Duration,
) {
    // Every node this one knows: configured, learned, and every member of
    // every group it hosts (a restart forgets what was learned, and a
    // group's leader may be none of the configured peers).
    let mut peers: HashMap<u64, String> = shared.known_peers().into_iter().collect();
    for (id, addr) in members {
        peers.entry(*id).or_insert_with(|| addr.clone());
    }
    peers.remove(&shared.id);
    let calls = peers.iter().map(|(id, addr)| {
        let peer = shared.peers.get(addr);
        async move { (*id, peer.call(Request::Ping, timeout).await) }
    });
    let now = Instant::now();
    for (id, answer) in futures::future::join_all(calls).await {
        let entry = seen.entry(id).or_insert(PeerSeen {
            last_answer: now,
            pong: None,
        });
        let mut wake = false;
        if let Ok(Response::Pong { run, stops }) = answer {
            entry.last_answer = now;
            // Another run (a restart) or more stopped groups: the groups
            // it led may have no leader now.
            wake = entry.pong.is_some_and(|p| p != (run, stops));
            entry.pong = Some((run, stops));
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
/// look, once every follower agrees. The groups' rounds run at once, each
/// call bounded by `timeout`: a follower that does not answer keeps its
/// group awake, and holds up nothing else.
async fn put_idle_groups_to_sleep(
    shared: &Arc<Shared>,
    idle: &mut HashMap<ShardName, (Option<u64>, u64)>,
    timeout: Duration,
) {
    let mut now_idle = HashMap::new();
    let mut rounds = Vec::new();
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
        // Kept for the next look either way: a round refused now (a
        // follower not yet told the last entry committed) is asked again
        // then, not a look later.
        let seen = idle.get(&name) == Some(&(last, writes));
        now_idle.insert(name.clone(), (last, writes));
        if !seen {
            continue;
        }
        let calls: Vec<_> = m
            .membership_config
            .membership()
            .nodes()
            .filter(|(id, _)| **id != shared.id)
            .map(|(_, node)| {
                let peer = shared.peers.get(&node.addr);
                let request = Request::Quiesce {
                    shard: name.clone(),
                    term: m.current_term,
                    leader: shared.id,
                    applied: last,
                };
                async move { peer.call(request, timeout).await }
            })
            .collect();
        let node = shared.id;
        rounds.push(async move {
            let mut agreed = true;
            for answer in futures::future::join_all(calls).await {
                if !matches!(answer, Ok(Response::Done)) {
                    tracing::debug!(node, shard = %key, ?answer, "a follower keeps the group awake");
                    agreed = false;
                }
            }
            if agreed {
                // Final only if no write came meanwhile.
                let _turn = group.turn();
                if group.quiet.writes.load(Ordering::Acquire) == writes {
                    group.sleep_holding_turn();
                    tracing::debug!(node, shard = %key, "group quiet");
                }
            }
        });
    }
    futures::future::join_all(rounds).await;
    *idle = now_idle;
}
