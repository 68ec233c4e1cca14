//! The dispatch thread: runs completion callbacks in the order they were
//! handed over, away from the sync workers, so that a slow callback never
//! delays a sync. Started on the first callback.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::loom::lock;
use crate::loom::sync::{Condvar, Mutex};
use crate::loom::thread::{self, JoinHandle};

/// A completion callback with its outcome bound in.
pub(crate) type Callback = Box<dyn FnOnce() + Send>;

pub(super) struct Dispatch {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    ready: Condvar,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Callback>,
    thread: Option<JoinHandle<()>>,
    /// The thread waits on `ready`.
    idle: bool,
    stop: bool,
}

impl Dispatch {
    pub(super) fn new(name: String) -> Self {
        Self {
            shared: Arc::new(Shared {
                name,
                state: Mutex::new(State::default()),
                ready: Condvar::new(),
            }),
        }
    }

    /// Queues `callback`, starting the thread on first use; hands it back
    /// when stopped or when no thread can be started.
    pub(super) fn push(&self, callback: Callback) -> Option<Callback> {
        let shared = &self.shared;
        let mut state = lock(&shared.state);
        if state.stop {
            return Some(callback);
        }
        state.queue.push_back(callback);
        if state.thread.is_none() {
            let me = Arc::clone(shared);
            let spawned = thread::Builder::new()
                .name(shared.name.clone())
                .spawn(move || me.run());
            match spawned {
                Ok(handle) => state.thread = Some(handle),
                Err(err) => {
                    tracing::warn!(error = %err, "no callback thread: running the callback inline");
                    return state.queue.pop_back();
                }
            }
        } else if state.idle {
            state.idle = false;
            drop(state);
            shared.ready.notify_one();
        }
        None
    }

    /// Runs what is queued, then stops the thread and waits for it.
    pub(super) fn shutdown(&self) {
        let handle = {
            let mut state = lock(&self.shared.state);
            state.stop = true;
            state.thread.take()
        };
        self.shared.ready.notify_all();
        if let Some(handle) = handle
            && handle.thread().id() != thread::current().id()
        {
            let _ = handle.join();
        }
    }

    #[cfg(all(test, not(loom)))]
    pub(super) fn running(&self) -> usize {
        usize::from(lock(&self.shared.state).thread.is_some())
    }
}

impl Shared {
    fn run(&self) {
        let mut state = lock(&self.state);
        loop {
            if let Some(callback) = state.queue.pop_front() {
                drop(state);
                // A panicking callback must not stop the ones after it.
                if catch_unwind(AssertUnwindSafe(callback)).is_err() {
                    tracing::error!("a completion callback panicked");
                }
                state = lock(&self.state);
                continue;
            }
            if state.stop {
                return;
            }
            state.idle = true;
            state = self
                .ready
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}
