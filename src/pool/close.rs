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
//!   and drop every task they take from the other channels.
//! * `TERMINATED`: no task counts any more; workers exit. The last one out
//!   drains every channel (dropping, which cancels, what it finds) and
//!   signals the close future.
//!
//! # The count
//!
//! `live` counts *counted* tasks: those that sit in, run from, or are parked
//! after running from a `complete_on_close` channel. A task becomes counted
//! when it is submitted to such a channel and stops being counted when it
//! is submitted to another kind, completes, or is dropped (`RunningTask`'s
//! flag, written only by its responsible party, says which it is).
//!
//! # Invariant
//!
//! *The phase becomes `TERMINATED` only when it is `CLOSING` and `live` is
//! zero, and then it does.* Both transitions that can make that true race: a
//! task's release (`fetch_sub` to zero, fence, read the phase) and `begin`
//! (write `CLOSING`, fence, read `live`). The two SeqCst fences are ordered:
//! the side whose fence comes second reads the other side's write, sees both
//! conditions, and terminates. (Fences rather than SeqCst accesses alone:
//! the argument then holds in loom's model too, and the release side pays for
//! its fence only when the count reaches zero.) Both may try: a
//! compare-exchange lets exactly one win, and only the winner wakes the
//! workers.
//!
//! # Why nothing is lost after termination
//!
//! A task can still be pushed after `TERMINATED` (a late followup of a parked
//! task of a dropping channel, or an `exec` that passed the `OPEN` check just
//! before close). The pusher runs the status bit's post fence after pushing
//! and then reads the phase; the last worker reads `TERMINATED`, runs a
//! SeqCst fence, then drains. Whichever fence is first, either the pusher
//! sees `TERMINATED` and drains the channel itself, or the drain sees the
//! task. Two drains of one channel are harmless: each task is popped once.

use futures::task::AtomicWaker;

use crate::sync::{fence, AtomicBool, AtomicUsize, Ordering};

const OPEN: usize = 0;
const CLOSING: usize = 1;
const TERMINATED: usize = 2;

#[derive(Debug)]
pub(crate) struct CloseState {
    phase: AtomicUsize,
    live: AtomicUsize,
    workers: AtomicUsize,
    drained: AtomicBool,
    waker: AtomicWaker,
}

impl CloseState {
    pub(crate) fn new(workers: usize) -> CloseState {
        CloseState {
            phase: AtomicUsize::new(OPEN),
            live: AtomicUsize::new(0),
            workers: AtomicUsize::new(workers),
            drained: AtomicBool::new(false),
            waker: AtomicWaker::new(),
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.phase.load(Ordering::Acquire) == OPEN
    }

    /// `CLOSING` or `TERMINATED`.
    pub(crate) fn is_closing(&self) -> bool {
        self.phase.load(Ordering::Acquire) != OPEN
    }

    pub(crate) fn is_terminated(&self) -> bool {
        self.phase.load(Ordering::SeqCst) == TERMINATED
    }

    /// A task became counted.
    pub(crate) fn count(&self) {
        self.live.fetch_add(1, Ordering::SeqCst);
    }

    /// A counted task completed, was dropped, or moved to a dropping
    /// channel. `true`: this call terminated the pool; wake the workers.
    #[must_use]
    pub(crate) fn release(&self) -> bool {
        let before = self.live.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "released more tasks than counted");
        if before != 1 {
            return false;
        }
        // Pairs with the fence in `begin`.
        fence(Ordering::SeqCst);
        self.phase.load(Ordering::SeqCst) == CLOSING && self.terminate()
    }

    /// Starts closing. `true`: this call terminated the pool (nothing
    /// counted was left); wake the workers.
    #[must_use]
    pub(crate) fn begin(&self) -> bool {
        let _ = self
            .phase
            .compare_exchange(OPEN, CLOSING, Ordering::SeqCst, Ordering::SeqCst);
        // Pairs with the fence in `release`.
        fence(Ordering::SeqCst);
        self.live.load(Ordering::SeqCst) == 0 && self.terminate()
    }

    /// Forces `TERMINATED` (start-up failed: no task exists yet).
    pub(crate) fn abort(&self) {
        self.phase.store(TERMINATED, Ordering::SeqCst);
    }

    fn terminate(&self) -> bool {
        self.phase
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
