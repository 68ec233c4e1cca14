//! Running one workload on a simulated disk until it ends or the power
//! does, and keeping the model of what it was promised: a record is
//! acknowledged when a call that promises its durability returns `Ok`
//! (an on-commit `append`, a completion, `sync`, `close`), or once the
//! shard's own `durable_offset` passes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use felix_epochs::EpochHistory;
use felix_io::FileSystem;
use felix_io::sim::SimFs;
use felix_storage::{AppendFuture, Durability, Record, Shard, StorageError};

use super::exec;
use super::workload::{Op, Scale};
use super::{DIR, config, payload};

/// What the workload did, as far as a crash check needs to know.
#[derive(Debug, Default)]
pub(crate) struct Model {
    /// The live log as the workload saw it: offset → payload.
    pub(crate) log: BTreeMap<u64, Vec<u8>>,
    /// Every payload ever appended at each offset (a record may be replaced
    /// after a truncation), so nothing never appended can pass as data.
    pub(crate) appended: BTreeMap<u64, BTreeSet<Vec<u8>>>,
    /// Records acknowledged as durable and not since given up by the
    /// workload (truncated or retained away).
    pub(crate) acked: BTreeMap<u64, Vec<u8>>,
    /// Histories the epochs file may hold: the last one stored, and one
    /// whose store was interrupted.
    pub(crate) histories: Vec<EpochHistory>,
    /// The log start a call that returned promised durable: a reopen
    /// begins at or above it.
    pub(crate) min_base: u64,
    /// Mutating file-system calls made before the power went out.
    pub(crate) calls: u64,
    /// Where the run stopped early: the operation's index and what it
    /// returned. `None` when every operation and completion succeeded.
    pub(crate) stopped: Option<(usize, String)>,
}

impl Model {
    fn ack_below(&mut self, durable: u64) {
        for (&offset, payload) in self.log.range(..durable) {
            self.acked.insert(offset, payload.clone());
        }
    }

    /// Everything the workload appended and still holds: what a `sync` or
    /// `close` that returned made durable.
    fn ack_all(&mut self) {
        self.acked
            .extend(self.log.iter().map(|(&o, p)| (o, p.clone())));
    }

    fn forget_from(&mut self, offset: u64) {
        self.log.split_off(&offset);
        self.acked.split_off(&offset);
    }

    fn forget_below(&mut self, offset: u64) {
        self.log = self.log.split_off(&offset);
        self.acked = self.acked.split_off(&offset);
    }
}

/// How a workload appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `Append::wait`, one at a time. Under `OnCommit` its `Ok` is the
    /// acknowledgement: the batch is held to every crash state from the
    /// moment it returns.
    Blocking,
    /// `Append::submit`: consecutive appends are all in flight at once
    /// and awaited before the next other operation, on this executor.
    Futures(Executor),
    /// `Append::written` under `OnCommit`, its return taken as the
    /// acknowledgement as `Blocking` takes `wait`'s: an append that
    /// returned before its sync. The check must fail on it.
    NoWaitTakenAsDurable,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Executor {
    /// `common/exec.rs`'s `block_on`.
    Minimal,
    /// A current-thread tokio runtime.
    Tokio,
}

/// Appends whose futures are pending, with the records each covers.
type InFlight = Vec<(Vec<(u64, Vec<u8>)>, AppendFuture)>;

/// Awaits every pending append. A completion that reports its records
/// durable acknowledges them (the crash check then holds the disk to
/// them); returns the first failure.
fn settle(in_flight: &mut InFlight, model: &mut Model, executor: Executor) -> Result<(), String> {
    let runtime = (executor == Executor::Tokio).then(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    });
    let mut first_failure = Ok(());
    for (batch, append) in in_flight.drain(..) {
        let outcome = match &runtime {
            Some(runtime) => runtime.block_on(append),
            None => exec::block_on(append),
        };
        match outcome {
            Ok(receipt) => {
                acknowledge(model, batch, receipt.first_offset, receipt.last_offset);
            }
            Err(e) => {
                if first_failure.is_ok() {
                    first_failure = Err(format!("a completion: {e}"));
                }
            }
        }
    }
    first_failure
}

/// Holds `batch` to every crash state from now on, once its receipt names
/// exactly its offsets.
fn acknowledge(model: &mut Model, batch: Vec<(u64, Vec<u8>)>, first: u64, last: u64) {
    let expected = (batch[0].0, batch[batch.len() - 1].0);
    assert_eq!((first, last), expected, "a receipt names other offsets");
    model.acked.extend(batch);
}

fn open(
    handle: &FileSystem,
    durability: Durability,
    retention: Option<u64>,
    scale: Scale,
) -> Result<Shard, StorageError> {
    Shard::options(Path::new(DIR))
        .file_system(handle.clone())
        .config(config(durability, retention, scale))
        .label("sim")
        .open()
}

/// Runs `ops` on `fs` until they end or the power does (the first failing
/// operation ends the run, noted in [`Model::stopped`]). Returns what a
/// crash check must hold the disk to.
pub(crate) fn run(
    fs: &SimFs,
    seed: u64,
    durability: Durability,
    ops: &[Op],
    scale: Scale,
    mode: Mode,
) -> Model {
    let handle = FileSystem::new(fs.clone());
    let mut model = Model {
        histories: vec![EpochHistory::new()],
        ..Model::default()
    };
    let mut shard = match open(&handle, durability, None, scale) {
        Ok(shard) => shard,
        Err(e) => {
            model.stopped = Some((0, format!("the first open: {e}")));
            model.calls = fs.mutating_calls();
            return model;
        }
    };
    let on_commit = durability == Durability::OnCommit;
    let mut generation = 0;
    let mut serial = 0;
    let mut in_flight = InFlight::new();
    for (index, op) in ops.iter().enumerate() {
        if let (Mode::Futures(executor), false) = (mode, matches!(op, Op::Append { .. }))
            && let Err(e) = settle(&mut in_flight, &mut model, executor)
        {
            model.stopped = Some((index, e));
            break;
        }
        let outcome: Result<(), String> = match *op {
            Op::Append { count, len } => {
                // Behind appends in flight, which may still be queued for
                // the sync pending to write (so not yet in `next_offset`).
                let next = in_flight.last().map_or_else(
                    || shard.offsets().written,
                    |(_, a)| a.receipt().last_offset + 1,
                );
                let batch: Vec<_> = (0..count)
                    .map(|i| {
                        serial += 1;
                        (next + i, payload(seed, serial, len))
                    })
                    .collect();
                for (offset, p) in &batch {
                    model.appended.entry(*offset).or_default().insert(p.clone());
                    model.log.insert(*offset, p.clone());
                }
                let records: Vec<_> = batch
                    .iter()
                    .map(|(o, p)| Record::new(*o, p.clone()))
                    .collect();
                match mode {
                    Mode::Blocking => shard.append(&records).wait().map(|receipt| {
                        // The return is the promise: not whatever
                        // `durable_offset` says afterwards.
                        if on_commit {
                            acknowledge(
                                &mut model,
                                batch,
                                receipt.first_offset,
                                receipt.last_offset,
                            );
                        }
                    }),
                    Mode::NoWaitTakenAsDurable => shard.append(&records).written().map(|receipt| {
                        acknowledge(&mut model, batch, receipt.first_offset, receipt.last_offset);
                    }),
                    Mode::Futures(_) => shard
                        .append(&records)
                        .submit()
                        .map(|append| in_flight.push((batch, append))),
                }
                .map_err(|e| format!("append: {e}"))
            }
            Op::Sync => shard
                .sync()
                .map(|()| model.ack_all())
                .map_err(|e| format!("sync: {e}")),
            Op::Truncate { back } => {
                let next = shard.offsets().written;
                let to = next.saturating_sub(back).max(shard.offsets().base);
                // From the call on, records at or above `to` may be gone.
                model.forget_from(to);
                // Truncating to the log end cuts nothing, history included.
                if to < next {
                    let mut cut = model.histories.last().cloned().unwrap_or_default();
                    cut.truncate_from(to);
                    model.histories.push(cut);
                }
                shard
                    .truncate_to(to)
                    .map_err(|e| format!("truncate_to({to}): {e}"))
            }
            Op::Retention { max_bytes } => {
                drop(shard);
                shard = match open(&handle, durability, Some(max_bytes), scale) {
                    Ok(reopened) => reopened,
                    Err(e) => {
                        model.stopped = Some((index, format!("the open before retention: {e}")));
                        break;
                    }
                };
                // Until it returns, anything below the active segment may go.
                let active_base = shard.segments().last().map_or(0, |s| s.extent.base_offset);
                match shard.apply_retention() {
                    Ok(outcome) => {
                        model.forget_below(outcome.base_offset);
                        let mut pruned = model.histories.last().cloned().unwrap_or_default();
                        if pruned.truncate_before(outcome.base_offset) > 0 {
                            model.histories.push(pruned);
                        }
                        Ok(())
                    }
                    Err(e) => {
                        model.forget_below(active_base);
                        Err(format!("apply_retention: {e}"))
                    }
                }
            }
            Op::Generation => {
                generation += 1;
                let mut next = model.histories.last().cloned().unwrap_or_default();
                if next.record(generation, shard.offsets().written).is_ok() {
                    model.histories.push(next);
                }
                shard
                    .begin_generation(generation)
                    .map(|_| ())
                    .map_err(|e| format!("begin_generation({generation}): {e}"))
            }
            Op::Close => match shard.close() {
                Ok(()) => {
                    model.ack_all();
                    // Writing on: a closed handle refuses, and nothing it
                    // was given reaches the disk (the payload is in no
                    // model, so the check would call it never appended).
                    let next = shard.offsets().written;
                    let late = Record::new(next, payload(seed, u64::MAX, 1));
                    let refused = shard.append(&[late]).wait();
                    assert!(
                        matches!(refused, Err(StorageError::ShardClosed { .. })),
                        "an append on a closed shard: {refused:?}"
                    );
                    drop(shard);
                    shard = match open(&handle, durability, None, scale) {
                        Ok(reopened) => reopened,
                        Err(e) => {
                            model.stopped = Some((index, format!("the open after close: {e}")));
                            break;
                        }
                    };
                    Ok(())
                }
                Err(e) => Err(format!("close: {e}")),
            },
            Op::DeleteBefore { back } => {
                let offsets = shard.offsets();
                let to = offsets.readable.saturating_sub(back).max(offsets.base);
                // From the call on, records below `to` may be gone.
                model.forget_below(to);
                match shard.delete_records_before(to) {
                    Ok(start) => {
                        model.min_base = model.min_base.max(start);
                        let mut pruned = model.histories.last().cloned().unwrap_or_default();
                        if pruned.truncate_before(start) > 0 {
                            model.histories.push(pruned);
                        }
                        Ok(())
                    }
                    Err(e) => Err(format!("delete_records_before({to}): {e}")),
                }
            }
            Op::Reset { ahead } => {
                let to = shard.offsets().written + ahead;
                // From the call on, the whole log may be gone.
                model.forget_below(to);
                model.histories.push(EpochHistory::new());
                shard
                    .reset_to(to)
                    .map(|()| model.min_base = model.min_base.max(to))
                    .map_err(|e| format!("reset_to({to}): {e}"))
            }
            Op::CloseReopen | Op::Reopen => {
                if matches!(op, Op::CloseReopen) {
                    if let Err(e) = shard.close() {
                        model.stopped = Some((index, format!("close: {e}")));
                        break;
                    }
                    model.ack_all();
                }
                drop(shard);
                shard = match open(&handle, durability, None, scale) {
                    Ok(reopened) => reopened,
                    Err(e) => {
                        model.stopped = Some((index, format!("reopen: {e}")));
                        break;
                    }
                };
                Ok(())
            }
        };
        if let Err(e) = outcome {
            model.stopped = Some((index, e));
            break;
        }
        // The shard's own claim is a promise too.
        model.ack_below(shard.offsets().durable);
    }
    if let Mode::Futures(executor) = mode
        && let Err(e) = settle(&mut in_flight, &mut model, executor)
        && model.stopped.is_none()
    {
        model.stopped = Some((ops.len(), e));
    }
    // Only the last stored history and one interrupted store are possible.
    let keep = model.histories.len().saturating_sub(2);
    model.histories.drain(..keep);
    model.calls = fs.mutating_calls();
    model
}
