//! The registry of parked tasks: how close reaches a task that no queue and
//! no worker holds.
//!
//! A parked task (`IDLE`, see `task`) is held only by its wakers and its
//! handle. Close must still drop every task of a channel that is not
//! `complete_on_close`, parked ones included: their futures and what they
//! own, their handles resolving as cancelled. So a task registers here
//! once, the first time it parks: a weak reference in one of [`SHARDS`]
//! vectors, picked by the task's address. A task that never parks (most
//! closures, futures that finish in one poll) never touches the registry.
//! Entries are not removed when a task finishes: a push that finds its
//! shard grown to twice its size after the last clean-up first drops the
//! entries of finished tasks (amortised O(1) a registration; the weak
//! reference keeps a finished task's allocation, not its future, until
//! then).
//!
//! # Protocol
//!
//! * *Registration*, by the poller while the task is `RUNNING` (it is
//!   responsible), before the poll's end can park it: lock the shard,
//!   push, unlock. The task's header remembers it (written by the
//!   responsible party only), so later parks skip this.
//! * *Sweep*, by close: [`begin_close`](super::Shared::begin_close) moves
//!   the phase to `CLOSING` (a SeqCst read-modify-write of the close word),
//!   then, shard by shard under its lock, wakes every registered task that
//!   is still alive. A wake that claims a parked task hands it to the pool
//!   like any wake: while closing, workers drop every task they take from a
//!   channel that is not `complete_on_close`, and after termination the
//!   pusher drains what it pushed (see `close`). A task of a
//!   `complete_on_close` channel just runs once more: a spurious wake,
//!   which every future tolerates.
//! * *Parking while closing*: a poll that parks a task not counted towards
//!   close reads the phase after its state transition, and if the pool is
//!   closing, wakes the task itself (it no longer holds it: only a wake may
//!   claim it back), which hands it to the pool as above.
//!
//! # Why no uncounted task is left parked when close resolves
//!
//! Take such a task parked at the end, and its last park `P` (the state
//! word's `RUNNING → IDLE`).
//!
//! * If the sweep did not visit it, it registered after the sweep left its
//!   shard: its registration's lock acquired the sweep's unlock, which
//!   follows `CLOSING`; `P` comes later on the same thread and reads the
//!   phase after it: it sees `CLOSING` and wakes the task.
//! * If the sweep's wake `W` of it came after `P` (both are
//!   read-modify-writes of the state word, so they are ordered), `W` found
//!   it `IDLE` and claimed it.
//! * If `W` came before `P`: `W` found the task `RUNNING` (then it set
//!   `SCHEDULED` and that poll re-queued the task instead of parking it: no
//!   `P` there) or `SCHEDULED` (a poll still to come). That poll's
//!   `start_running` is a read-modify-write of the word after `W`, so it
//!   acquires `W`'s release, which follows `CLOSING`: `P`, later in that
//!   poll, sees `CLOSING` and wakes the task.
//!
//! Each way the task is woken, and a woken uncounted task is dropped by the
//! pool. The sweep runs inside `close()` before it returns the close
//! future, and the self-wakes run in a worker's poll before that worker
//! exits (close resolves after the last worker's exit and final drain), so
//! every such drop has happened when close resolves.

use std::fmt;

use crate::sync::{lock, Mutex};
use crate::task::ParkedTask;

/// Shards of the registry: registrations from different workers rarely
/// meet on one lock.
pub(crate) const SHARDS: usize = 16;

/// The tasks that have parked at least once (see the module doc).
pub(crate) struct Parked {
    shards: Box<[Mutex<Shard>]>,
}

#[derive(Default)]
struct Shard {
    tasks: Vec<ParkedTask>,
    /// The shard's length after its last clean-up.
    kept: usize,
}

impl Parked {
    pub(crate) fn new() -> Parked {
        Parked {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }

    /// Registers a task that is about to park for the first time.
    pub(crate) fn register(&self, task: ParkedTask) {
        let mut shard = lock(&self.shards[task.shard(SHARDS)]);
        if shard.tasks.len() >= 2 * shard.kept.max(32) {
            shard.tasks.retain(ParkedTask::is_alive);
            shard.kept = shard.tasks.len();
        }
        shard.tasks.push(task);
    }

    /// Wakes every registered task still alive (close's sweep), and
    /// forgets them: a task that parks later wakes itself (see the module
    /// doc). The wakes run outside the shard's lock: a wake hands the task
    /// to the behavior's followup, user code that may park other tasks.
    pub(crate) fn wake_all(&self) {
        for shard in self.shards.iter() {
            let tasks = std::mem::take(&mut lock(shard).tasks);
            for task in tasks {
                task.wake();
            }
        }
    }
}

impl fmt::Debug for Parked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parked").finish_non_exhaustive()
    }
}
