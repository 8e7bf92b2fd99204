//! Blocking sections: `block_in_place`, with a stand-in that serves the
//! worker's place, and `spawn_blocking`, on the pool's blocking threads.
//!
//! # The hand-over (`block_in_place` on a worker thread)
//!
//! A worker W about to block gives its place to a stand-in thread:
//!
//! 1. W stops being a worker for the span of the closure
//!    (`context::leave_for_now`): what the closure submits or wakes goes
//!    to the channels' shared queues, not W's.
//! 2. W moves the task in its LIFO slot and those in its deques to their
//!    channels (each push marks its status bit and lets the sleep protocol
//!    wake a worker). W's seat keeps no task; W stays counted active in
//!    the sleep protocol (it is running a task), as before.
//! 3. W takes a free guest seat (see `core::seats`) and hands it to a
//!    blocking thread, the stand-in, which becomes that seat's worker and
//!    runs the pool's loop (levels, stealing, sleeping, waking) until it is
//!    told to retire.
//! 4. W runs the closure.
//! 5. W tells the stand-in to retire (a flag, then `Sleep::rouse` of the
//!    stand-in's seat) and becomes a worker again (its own seat, which no
//!    other thread took). It does not wait: the stand-in ends the task it
//!    runs, if any, empties its seat into the channels and gives it back.
//!
//! No wake-up is lost: every task W held is in a channel, announced, before
//! the closure runs (the sleep protocol's argument for any push covers
//! them; the stand-in is one more worker that may find them). A stand-in
//! that sleeps when told to retire is roused (its sleep's final check reads
//! the flag after its sleep fence; the rouse takes its lock after the flag
//! is set; `sleep`'s argument). No seat has two owners: W's seat stays W's,
//! the guest seat belongs to the stand-in from W's claim to the stand-in's
//! release (`seats`' invariant); a stand-in that never started (no thread
//! could be spawned) gives the seat back through W.
//!
//! If there is no free guest seat, or stand-ins are off, or no thread can
//! be started, W blocks without one, and counts as blocked for the
//! deadlock check (see `core::blocked`). On a guest seat (a thread driving
//! the pool with `block_on`) and off a worker, the closure just runs: a
//! driver's thread is not part of the pool's parallelism, and in a
//! zero-thread pool nothing else runs tasks meanwhile.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use super::drive::Guest;
use super::Pool;
use crate::behavior::PoolBehavior;
use crate::core::blocked::WorkerState;
use crate::core::context::WorkerLocal;
use crate::task::{CancelReason, JoinHandle};
use crate::thread_config::help_stack_budget;

/// Runs `f`, a closure that blocks (on IO, a lock, a channel), on the
/// calling thread; if that thread is a worker of a pool, another thread
/// serves the worker's place meanwhile, so the pool keeps its parallelism
/// (tokio's `block_in_place`). The calling thread is a worker again when
/// `f` returns (or unwinds).
///
/// * On a worker thread: the tasks queued on this worker move to their
///   channels, and a stand-in thread (from the pool's blocking threads,
///   see [`PoolBehavior::blocking`](crate::PoolBehavior::blocking)) serves
///   the pool until `f` is done. If none can be had, the worker blocks
///   without one (and if every worker does while tasks wait, the pool's
///   [`deadlock`](crate::PoolBehavior::deadlock) handler is called).
/// * On a thread driving a pool ([`Pool::block_on`]), in a zero-thread
///   pool, or on any other thread: `f` just runs.
///
/// Unlike tokio's, it never panics: it works inside `block_on`, inside a
/// scope, inside another `block_in_place` (the inner one just runs), and
/// on any kind of pool.
pub fn block_in_place<R>(f: impl FnOnce() -> R) -> R {
    let Some(worker) = crate::core::context::current() else {
        return f();
    };
    let mut f = Some(f);
    let mut output = None;
    worker.block_in_place(&mut || output = Some((f.take().expect("called once"))()));
    drop(worker);
    output.expect("the section ran the closure")
}

impl<B: PoolBehavior> Pool<B> {
    /// Runs `f` on one of the pool's blocking threads, apart from the
    /// workers, and returns a handle to its result (tokio's
    /// `spawn_blocking`): for work that blocks for long (reading files,
    /// a synchronous client). The set of blocking threads grows on demand
    /// up to [`BlockingConfig::max_threads`](crate::BlockingConfig), over
    /// which calls queue; an idle one exits after the keep-alive.
    ///
    /// After close began, `f` does not run: the handle resolves to a
    /// cancellation ([`CancelReason::PoolClosed`]). If no blocking thread
    /// can be started and none runs, the handle resolves to a cancellation
    /// ([`CancelReason::SpawnFailed`]) and the error is logged. A panic in
    /// `f` is caught and carried by the handle. Close does not wait for
    /// blocking closures already running (they cannot be interrupted), nor
    /// drop queued ones: they run on their threads, which outlive the pool.
    /// In a zero-thread pool, `f` runs on a blocking thread all the same:
    /// such a pool starts no worker thread, but blocking ones on demand.
    pub fn spawn_blocking<F, R>(self: &Arc<Self>, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (task, handle) = crate::task::spawn_unmovable(crate::run(f), self.scheduler.clone());
        if self.shared.close.is_closing() {
            task.set_cancel_reason(Some(CancelReason::PoolClosed));
            return handle;
        }
        let job = Box::new(move |run: bool| {
            if run {
                drop(task.run());
            } else {
                task.set_cancel_reason(Some(CancelReason::SpawnFailed));
            }
        });
        if let Err(e) = self.blocking.run(job, false) {
            log::error!("smartpool: no blocking thread could be started for spawn_blocking: {e}");
        }
        handle
    }

    /// How many blocking threads the pool has now, running or idle (see
    /// [`Pool::spawn_blocking`]; stand-ins included).
    pub fn blocking_threads(&self) -> usize {
        self.blocking.threads()
    }

    /// The worker thread `local` runs `f`, handing its place to a stand-in
    /// (see the module doc).
    pub(super) fn block_in_place(self: &Arc<Self>, local: &WorkerLocal, f: &mut dyn FnMut()) {
        if local.guest {
            return f();
        }
        let shared = &*self.shared;
        let away = crate::context::leave_for_now();
        self.move_out(local);
        let stand_in = self.stand_ins.then(|| self.start_stand_in()).flatten();
        let blocked = stand_in
            .is_none()
            .then(|| shared.block(local.index, WorkerState::BlockedInPlace));
        // While a stand-in serves its place, the seat runs nothing of the
        // pool's: it shows idle (and no stall; see `stall`), and its
        // activity comes back as `f` returns.
        let _restore = stand_in.is_some().then(|| {
            let nested = super::worker::Nested::save(shared, local);
            shared.meters.seats[local.index].idle(shared.meters.epoch);
            nested
        });
        let result = catch_unwind(AssertUnwindSafe(f));
        if let Some(stand_in) = stand_in {
            stand_in.retire(shared);
        }
        drop(blocked);
        drop(away);
        if let Err(panic) = result {
            resume_unwind(panic);
        }
    }

    /// Takes a guest seat and starts a stand-in on it; `None` if no seat
    /// is free or no thread could be started.
    fn start_stand_in(self: &Arc<Self>) -> Option<Arc<StandIn>> {
        let seat = self.shared.seats.claim_or_wait()?;
        let stand_in = Arc::new(StandIn {
            state: AtomicU8::new(SERVING),
            index: seat.index,
        });
        // The seat travels to the stand-in in the job; if no thread can
        // run it, the job gives the seat back.
        let job = {
            let (pool, stand_in) = (self.clone(), stand_in.clone());
            Box::new(move |run: bool| {
                if run {
                    pool.stand_in(seat, &stand_in);
                } else {
                    pool.shared.seats.release(seat, false);
                }
            })
        };
        let started = self.blocking.run(job, true).inspect_err(|e| {
            log::error!(
                "smartpool: no stand-in thread could be started for a worker in \
                 block_in_place: {e}; the pool has one worker fewer meanwhile"
            )
        });
        started.ok().map(|()| stand_in)
    }

    /// A stand-in's life on its blocking thread: the seat's worker until
    /// told to retire (or the pool terminates), then gives the seat back.
    fn stand_in(self: &Arc<Self>, seat: WorkerLocal, stand_in: &StandIn) {
        let mut guest = Guest::enter(self, seat, help_stack_budget(self.blocking.stack_size));
        let retired = || stand_in.state.load(Ordering::SeqCst) != SERVING;
        // As a worker thread's loop: a channel's panic that unwinds out of
        // the loop is logged and the loop goes on (see `worker::run`).
        loop {
            match catch_unwind(AssertUnwindSafe(|| guest.worker().help_until(&retired))) {
                Ok(done) if done || self.shared.close.is_terminated() => break,
                Ok(_) => {}
                Err(panic) => log::error!(
                    "smartpool: stand-in for a blocked worker: a channel panicked: {}; it goes on",
                    crate::contain::panic_message(&*panic)
                ),
            }
        }
        // The seat goes back as the guest drops.
        guest.retired = stand_in.state.swap(GONE, Ordering::SeqCst) == RETIRING;
    }
}

/// A stand-in serving a blocked worker's place: told to retire when the
/// worker is back.
pub(super) struct StandIn {
    /// [`SERVING`], then [`RETIRING`] (its worker is back) and/or [`GONE`]
    /// (it gave its seat back: told to, or the pool terminated).
    state: AtomicU8,
    /// Its guest seat.
    index: usize,
}

const SERVING: u8 = 0;
const RETIRING: u8 = 1;
const GONE: u8 = 2;

impl StandIn {
    /// Tells the stand-in to retire, counting its seat as retiring (see
    /// `seats`) if it still holds it: the count goes up before the stand-in
    /// can give the seat back, and it comes down with the seat's release
    /// only if the stand-in saw the request, so it never drifts.
    fn retire(&self, shared: &crate::core::Shared) {
        use Ordering::SeqCst;
        let state = &self.state;
        let tell = || state.compare_exchange(SERVING, RETIRING, SeqCst, SeqCst);
        if shared.seats.retire(|| tell().is_ok()) {
            shared.sleep.rouse(self.index);
        }
    }
}
