//! The registry of parked tasks: how close reaches a task that no queue and
//! no worker holds.
//!
//! A parked task (`IDLE`, see `task`) is held only by its wakers and its
//! handle. Close must still drop every task of a channel that is not
//! `complete_on_close`, parked ones included: their futures and what they
//! own, their handles resolving as cancelled. So a task registers here the
//! first time a poll of it returns `Pending` without waking itself: a weak
//! reference in a slot of one of [`SHARDS`] slabs, picked by the task's
//! address; the task's header keeps the slot, and the task leaves it as it
//! is freed. A task that never parks (most closures, futures that finish in
//! one poll, yields) never touches the registry. The weak reference keeps
//! no future alive, and the entry goes with its task: the registry holds
//! the tasks that are alive and have parked once, nothing more.
//!
//! # Protocol
//!
//! * *Registration*, by the poller while the task is `RUNNING` (it is
//!   responsible), before the poll's end can park it: lock the shard, fill
//!   a free slot, unlock. The header remembers the slot (written by the
//!   responsible party only), so later parks skip this.
//! * *Unregistration*, as the task's cell is freed (its header's `Drop`,
//!   exclusive): lock the shard, empty the task's slot (which only this
//!   empties: entries leave only with their task).
//! * *Sweep*, by close, after [`CloseState::begin`](super::CloseState)
//!   moved the phase to `CLOSING`: set the *sweeping* flag (a SeqCst
//!   read-modify-write of a mode word on a cache line of its own: parks
//!   read it), then, shard by shard, take a snapshot of the live entries
//!   under the shard's lock and, after unlocking, *close-wake* each.
//! * *Close-wake*: claim the task as a wake does (`IDLE → SCHEDULED`; if
//!   it is not `IDLE`, a poll is to come, and the wake's write still
//!   publishes the flag to it). Once claimed, the claimer reads whether the
//!   task counts towards close: if not, it drops the task right there
//!   (with `PoolClosed`), not through the behavior's followup, which could
//!   move it into a `complete_on_close` channel and keep it alive; if it
//!   does, it hands it back to the pool (a spurious wake, which every
//!   future tolerates: close waits for it anyway).
//! * *Parking while sweeping*: a poll that parks a task not counted
//!   towards close reads the flag after its state transition and, if set,
//!   close-wakes the task (it no longer holds it: a claim is the only safe
//!   way back).
//!
//! # Deadline
//!
//! `OwnedPool::close_timeout` abandons what is left when its deadline
//! passes: it sets the *abandoning* flag in the same mode word, then sweeps
//! again. From then on the close-wake drops counted tasks too (with
//! `CloseTimedOut`, counting each), a park drops any task, and workers drop
//! every task they take. The argument below holds for counted tasks with
//! *abandoning* in place of *sweeping* (the snapshot finds every live
//! registered task, since entries leave only with their task), so no task
//! is left parked; queued ones reach a worker as the channels hand them
//! out, and running ones are dropped when their poll returns `Pending` (a
//! poll itself is never interrupted). The abandon's sweep runs on the
//! thread that polls the close future.
//!
//! # Why no uncounted task is left parked when close resolves
//!
//! Take such a task parked at the end, and its last park `P` (the state
//! word's `RUNNING → IDLE`, with the task not counted).
//!
//! * If the sweep did not find it, it registered after the sweep's
//!   snapshot of its shard: its registration's lock acquired the
//!   snapshot's unlock, which follows the flag's store. `P` comes after
//!   the registration (in the poll that registered, or in a later one,
//!   whose start follows the earlier poll's end: through the state word,
//!   or, after a re-queue, the token's hand-over), so `P`'s read of the
//!   flag sees it set, and the task is close-woken.
//! * If the sweep's claim `W` of it came after `P` (both are
//!   read-modify-writes of the state word, so they are ordered), `W` found
//!   it `IDLE` and claimed it.
//! * If `W` came before `P`: `W` found the task `RUNNING` (polled: then
//!   it set `SCHEDULED`, and that poll re-queued the task instead of
//!   parking it, no `P` there; or re-queued running already: a poll still
//!   to come) or `SCHEDULED` (a poll still to come). `W` left `SCHEDULED`
//!   in the word, which only a start's CAS clears, and on which `P`'s CAS
//!   cannot succeed: so a start's CAS `C` cleared it before `P`, in the
//!   word's modification order. `C` read `W`'s write or a later one of the
//!   wakes that followed it, so it acquires `W`'s release, which follows
//!   the flag's store; and `C` happens before `P` (a task's polls are
//!   ordered, through the word or the token's hand-over). So `P` sees the
//!   flag and close-wakes the task. (A re-queued token's start that finds
//!   the word plain `RUNNING` only loads it, see `task::state`; if such a
//!   load misses `W`, the `SCHEDULED` it left waits for a later start's
//!   CAS, as above.)
//!
//! Each way the task is claimed and dropped. The sweep runs inside
//! `close()` (and the `OwnedPool`'s drop) before it returns, and a park's
//! close-wake runs in a worker's poll before that worker exits (close
//! resolves after the last worker's exit and final drain), so every such
//! drop has happened when close resolves. (A task re-queued by a wake goes
//! through its followup as usual: while closing, workers drop what they
//! take from the dropping channels.)
//!
//! The sweep runs user code on the closing thread: the destructors of the
//! futures it drops, and the followups of the `complete_on_close` tasks it
//! hands back.

use std::sync::Weak;

use crate::sync::{lock, AtomicU8, AtomicUsize, Mutex, MutexGuard, Ordering};
use crate::task::{CloseWake, ParkedRegistry};

/// Shards of the registry: registrations from different workers rarely
/// meet on one lock.
pub(crate) const SHARDS: usize = 16;

/// The tasks that are alive and have parked (see the module doc).
pub(crate) struct Parked {
    /// [`SWEEPING`], then also [`ABANDONING`]; read by every park: on a
    /// line of its own, which nothing else writes (boxed, so that `Shared`
    /// keeps its layout: an over-aligned field there moved the close word
    /// onto the sleep counters' cache line, which slowed every spawn).
    mode: Box<Padded>,
    shards: Box<[Mutex<Shard>]>,
    /// Counted tasks dropped because the close deadline passed.
    abandoned: AtomicUsize,
}

#[repr(align(64))]
struct Padded(AtomicU8);

/// Close's sweep has begun: uncounted tasks are dropped as they park.
const SWEEPING: u8 = 1;
/// Close's deadline passed: counted tasks too.
const ABANDONING: u8 = 2;

/// One shard: a slab of registrations.
#[derive(Default)]
struct Shard {
    slots: Vec<Option<Weak<dyn CloseWake>>>,
    free: Vec<u32>,
}

impl Parked {
    pub(crate) fn new() -> Parked {
        Parked {
            mode: Box::new(Padded(AtomicU8::new(0))),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            abandoned: AtomicUsize::new(0),
        }
    }

    /// Whether close's deadline passed: every task is dropped.
    pub(crate) fn is_abandoning(&self) -> bool {
        self.mode.0.load(Ordering::SeqCst) & ABANDONING != 0
    }

    /// How many counted tasks were dropped because close's deadline
    /// passed.
    pub(crate) fn abandoned(&self) -> usize {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// Close's sweep (see the module doc): drops the parked tasks that are
    /// not counted; with `abandon` (close's deadline passed), every parked
    /// task, counted ones too (see the module doc's "Deadline"). Sets the
    /// mode, then close-wakes every registered task still alive: a
    /// snapshot of each shard taken under its lock (the entries stay: a
    /// later sweep, at the deadline, finds them again), then the
    /// close-wakes outside it, since they run user code, which may free
    /// registered tasks.
    pub(crate) fn sweep(&self, abandon: bool) {
        let mode = SWEEPING | if abandon { ABANDONING } else { 0 };
        self.mode.0.fetch_or(mode, Ordering::SeqCst);
        for shard in self.shards.iter() {
            let live: Vec<_> = lock(shard)
                .slots
                .iter()
                .flatten()
                .filter_map(Weak::upgrade)
                .collect();
            for task in live {
                task.close_wake();
            }
        }
    }

    /// The shard of the task at `key` (its header's address).
    fn shard(&self, key: usize) -> MutexGuard<'_, Shard> {
        // Cells are at least 64 bytes apart in practice: skip those bits.
        lock(&self.shards[(key >> 6) % SHARDS])
    }
}

impl ParkedRegistry for Parked {
    /// Registers a task that is about to park for the first time; returns
    /// its slot.
    fn register(&self, key: usize, task: Weak<dyn CloseWake>) -> u32 {
        let mut shard = self.shard(key);
        if let Some(slot) = shard.free.pop() {
            shard.slots[slot as usize] = Some(task);
            return slot;
        }
        shard.slots.push(Some(task));
        // Below 2^31 - 1: a slot plus one never has the bit of a queue-wait
        // stamp (`task::STAMP`), which shares its word.
        u32::try_from(shard.slots.len() - 1)
            .ok()
            .filter(|&slot| slot < (1 << 31) - 1)
            .expect("fewer than 2^31 - 1 parked tasks a shard")
    }

    /// The task registered under `key` in `slot` is being freed.
    fn unregister(&self, key: usize, slot: u32) {
        let mut shard = self.shard(key);
        shard.slots[slot as usize] = None;
        shard.free.push(slot);
    }

    /// Whether a task that parks now must be dropped by its poller: an
    /// uncounted one once the sweep began, a counted one once close's
    /// deadline passed.
    #[inline]
    fn drops(&self, counted: bool) -> bool {
        let mode = self.mode.0.load(Ordering::SeqCst);
        mode & if counted { ABANDONING } else { SWEEPING } != 0
    }

    /// A counted task was dropped because close's deadline passed.
    fn count_abandoned(&self) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
    }
}
