//! The close protocol: phases, the count of tasks that close waits for, and
//! how the last worker out leaves nothing behind.
//!
//! # Phases
//!
//! `OPEN → CLOSING → TERMINATED`, forward only.
//!
//! * `OPEN`: `exec` accepts tasks.
//! * `CLOSING` (from [`OwnedPool::close`](crate::OwnedPool::close)): `exec`
//!   refuses new tasks; workers keep running tasks of `complete_on_close`
//!   channels, including parked futures when they are woken and followed up,
//!   and drop every task they take from the other channels. Right after
//!   entering `CLOSING`, close sweeps the tasks that have parked
//!   (`parked`): those of the other channels are dropped. If a close
//!   deadline passes (`OwnedPool::close_timeout`), the pool *abandons*
//!   what is left: workers drop every task they take, and the parked ones
//!   are swept again (see `parked`).
//! * `TERMINATED`: reached when nothing counted is left; workers exit. The
//!   last one out drains every channel (dropping, which cancels, what it
//!   finds) and signals the close future. A task that becomes counted after
//!   that (a late followup into a `complete_on_close` channel) is drained by
//!   its own pusher (below) and released again.
//!
//! # The count
//!
//! `live` counts *counted* tasks: those that sit in, run from, or are parked
//! after running from a `complete_on_close` channel, and the tokens of
//! admissions not yet handed to their task. One owner per count: a
//! count is made as a token (`core::shared::Admitted`) by admission to such a
//! channel (or by a followup's or a move's entry into one), and the task
//! token it was made for takes it (its entry's counted flag, written only
//! by the token's holder). From then on it is given back in exactly one
//! place, `task::cell::Entry::release_count`, as the task completes, is
//! cancelled, is freed while counted, or moves to a dropping channel, or
//! as the token is found stale after a move (`task`'s "Moves": each token
//! holds its own count); a token nobody took (a refused admission) gives
//! itself back as it drops.
//!
//! # One word
//!
//! The phase and `live` share one atomic word (phase in the low two bits,
//! `live` counted in units of 4 above them), so that every transition is a
//! single read-modify-write and they are all totally ordered. A mismatched
//! release (a bug) would wrap the count at the top of the word and leave the
//! phase intact. That one word is what makes the invariant hold by
//! construction:
//!
//! *The phase becomes `TERMINATED` only by a compare-exchange from exactly
//! (`CLOSING`, live = 0).* Whoever brings the word to (`CLOSING`, 0), by
//! releasing the last counted task or by `begin` finding no counted task,
//! attempts that exchange. If a new count slipped in between, the exchange
//! fails, and the release of that new task will attempt it again. (Deciding
//! from one's own decrement and then reading the phase from another word
//! would terminate under a task counted in between.) The one other way is
//! [`CloseState::abort`],
//! used only when the pool fails to start.
//!
//! # Admission to a `complete_on_close` channel
//!
//! `exec` into such a channel must either refuse the task (the caller gets
//! it back) or run it: an accepted task may not be cancelled by a close that
//! raced the acceptance. [`CloseState::admit`] counts the task and reads the
//! phase in the same `fetch_add`: if the phase was `OPEN`, the count is in
//! before `begin`, so close waits for the task; otherwise the task is
//! refused and the count given back (`Shared::admit` drops its token, which
//! may then terminate the pool).
//! Tasks of other channels need no admission: close drops them anyway, so
//! one accepted in the instant close begins is cancelled, and says so.
//!
//! # Why nothing is lost after termination
//!
//! A task can still be pushed after `TERMINATED` (a late followup of a parked
//! task, or an `exec` into a dropping channel that passed the `OPEN` check
//! just before close). The pusher runs the status bit's post
//! fence after pushing and then reads the phase; the last worker reads
//! `TERMINATED`, runs a SeqCst fence, then drains. Whichever fence is first,
//! either the pusher sees `TERMINATED` and drains the channel itself, or the
//! drain sees the task. Two drains of one channel are harmless: each task is
//! popped once.

use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering, WakerSlot};

const OPEN: u64 = 0;
const CLOSING: u64 = 1;
const TERMINATED: u64 = 2;
const PHASE_MASK: u64 = 3;
/// One counted task.
const ONE: u64 = 4;

/// The phase of a snapshot of the word (its live count is `word / ONE`).
#[inline]
fn phase(word: u64) -> u64 {
    word & PHASE_MASK
}

/// On lines of its own: every counted task writes the word as it is
/// admitted and as it ends (see `Shared`'s layout).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct CloseState {
    /// Phase (low bits) and live count, see the module doc.
    word: AtomicU64,
    workers: AtomicUsize,
    drained: AtomicBool,
    waker: WakerSlot,
}

impl CloseState {
    pub(crate) fn new(workers: usize) -> CloseState {
        CloseState {
            word: AtomicU64::new(OPEN),
            workers: AtomicUsize::new(workers),
            drained: AtomicBool::new(false),
            waker: WakerSlot::new(),
        }
    }

    /// `CLOSING` or `TERMINATED` (SeqCst).
    #[inline]
    pub(crate) fn is_closing(&self) -> bool {
        phase(self.word.load(Ordering::SeqCst)) != OPEN
    }

    #[inline]
    pub(crate) fn is_terminated(&self) -> bool {
        phase(self.word.load(Ordering::SeqCst)) == TERMINATED
    }

    /// A task became counted (a followup moved it into a
    /// `complete_on_close` channel).
    pub(crate) fn count(&self) {
        self.word.fetch_add(ONE, Ordering::SeqCst);
    }

    /// Admission of a new task to a `complete_on_close` channel (see the
    /// module doc): counts it and tells whether the pool was open. `false`:
    /// refused; the caller must release the count.
    #[must_use]
    pub(crate) fn admit(&self) -> bool {
        phase(self.word.fetch_add(ONE, Ordering::SeqCst)) == OPEN
    }

    /// A counted task completed, was dropped, or moved to a dropping
    /// channel. `true`: this call terminated the pool; wake the workers.
    #[must_use]
    pub(crate) fn release(&self) -> bool {
        let before = self.word.fetch_sub(ONE, Ordering::SeqCst);
        debug_assert!(before / ONE > 0, "released more tasks than counted");
        before / ONE == 1 && phase(before) == CLOSING && self.terminate()
    }

    /// Starts closing. `true`: this call terminated the pool (nothing
    /// counted was left); wake the workers.
    #[must_use]
    pub(crate) fn begin(&self) -> bool {
        // (An error: closing already.)
        let result = self
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                (phase(w) == OPEN).then_some(w | CLOSING)
            });
        result.is_ok_and(|before| before / ONE == 0 && self.terminate())
    }

    /// Whether any worker thread is running (none in a zero-thread pool,
    /// nor once they exited).
    pub(crate) fn has_workers(&self) -> bool {
        self.workers.load(Ordering::Acquire) > 0
    }

    /// Forces `TERMINATED`: the pool failed to start, and `spawned` of its
    /// workers are running (they exit; the last drains). The one exception
    /// to the invariant: a task admitted through a channel shared with the
    /// failed pool in that instant is cancelled.
    pub(crate) fn abort(&self, spawned: usize, configured: usize) {
        self.workers
            .fetch_sub(configured - spawned, Ordering::AcqRel);
        let _ = self
            .word
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                Some((w & !PHASE_MASK) | TERMINATED)
            });
    }

    /// The way to `TERMINATED` (but for `abort`): from exactly (`CLOSING`, 0).
    fn terminate(&self) -> bool {
        self.word
            .compare_exchange(CLOSING, TERMINATED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// A worker is exiting. `true`: it is the last, and must drain.
    #[must_use]
    pub(crate) fn worker_exited(&self) -> bool {
        self.workers.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// The last worker drained the channels: close is done.
    pub(crate) fn finish(&self) {
        self.drained.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Close future side: registers, then tells whether close is done.
    pub(crate) fn poll_finished(&self, waker: &std::task::Waker) -> bool {
        if self.drained.load(Ordering::Acquire) {
            return true;
        }
        self.waker.register(waker);
        self.drained.load(Ordering::Acquire)
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! Property: close terminates exactly once, and only after the last
    //! counted task was released, also when the release races `begin`.
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn release_racing_begin_terminates_once_after_release() {
        loom::model(|| {
            let close = Arc::new(CloseState::new(1));
            close.count();
            let finisher = {
                let close = close.clone();
                loom::thread::spawn(move || close.release())
            };
            let by_begin = close.begin();
            let by_release = finisher.join().unwrap();
            assert!(by_begin ^ by_release, "exactly one side terminates");
            assert!(close.is_terminated());
        });
    }

    #[test]
    fn admission_racing_begin_runs_or_refuses() {
        loom::model(|| {
            let close = Arc::new(CloseState::new(1));
            let submitter = {
                let close = close.clone();
                loom::thread::spawn(move || {
                    if close.admit() {
                        // Accepted: the pool must still be running it.
                        assert!(!close.is_terminated(), "terminated under an admitted task");
                    }
                    close.release()
                })
            };
            let by_begin = close.begin();
            let by_submitter = submitter.join().unwrap();
            assert!(by_begin ^ by_submitter, "exactly one side terminates");
            assert!(close.is_terminated());
        });
    }

    #[test]
    fn a_count_between_release_and_begin_keeps_the_pool_closing() {
        // The race the one-word design exists for: X's release empties the
        // count, Y is admitted, close begins; X must not terminate under Y.
        // Y holds its task until X's release and close's begin are both
        // done, then checks, then finishes.
        use crate::sync::AtomicBool;
        loom::model(|| {
            let close = Arc::new(CloseState::new(1));
            let (x_done, begun) = (
                Arc::new(AtomicBool::new(false)),
                Arc::new(AtomicBool::new(false)),
            );
            close.count(); // X
            let x = {
                let (close, x_done) = (close.clone(), x_done.clone());
                loom::thread::spawn(move || {
                    let terminated = close.release();
                    x_done.store(true, Ordering::SeqCst);
                    terminated
                })
            };
            let y = {
                let (close, x_done, begun) = (close.clone(), x_done.clone(), begun.clone());
                loom::thread::spawn(move || {
                    if close.admit() {
                        while !(x_done.load(Ordering::SeqCst) && begun.load(Ordering::SeqCst)) {
                            loom::thread::yield_now();
                        }
                        assert!(!close.is_terminated(), "terminated under an admitted task");
                    }
                    close.release()
                })
            };
            let by_begin = close.begin();
            begun.store(true, Ordering::SeqCst);
            let by_x = x.join().unwrap();
            let by_y = y.join().unwrap();
            assert_eq!(
                by_begin as u8 + by_x as u8 + by_y as u8,
                1,
                "exactly one terminates"
            );
            assert!(close.is_terminated());
        });
    }

    #[test]
    fn counted_task_keeps_pool_closing() {
        loom::model(|| {
            let close = Arc::new(CloseState::new(1));
            close.count();
            close.count();
            let finisher = {
                let close = close.clone();
                loom::thread::spawn(move || close.release())
            };
            let by_begin = close.begin();
            let by_release = finisher.join().unwrap();
            assert!(!by_begin && !by_release, "one counted task is still live");
            assert!(!close.is_terminated());
            assert!(close.release());
        });
    }
}
