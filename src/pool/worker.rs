//! The worker loop: find a task through the schedule, run it, and when there
//! is none, go through the sleep protocol.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use super::Pool;
use crate::behavior::PoolBehavior;
use crate::channel::Submit;
use crate::core::context::{Allowed, LocalTask, PoolHooks, WorkerContext, WorkerLocal};
use crate::core::job::{JobRef, Tag};
use crate::core::meters::{self, SeatMeters};
use crate::lifo::watch::Verdict;
use crate::lifo::SlotTask;
use crate::schedule::Cursor;
use crate::sleep::Check;
use crate::sync::Restore;
use crate::task::{RunOutcome, RunningTask};
use crate::thread_config::{help_stack_budget, ThreadConfig};

/// Body of worker thread `local.index`, with its two references to the
/// pool: `pool`, which outlives the worker's context (its invariant: the
/// pool is alive while the address is set), and `hooks`' (both made before
/// the thread starts, so that the pool's count does not depend on when it
/// does). The thread was started with `config`'s stack; its hooks run
/// first and last.
pub(super) fn run<B: PoolBehavior>(
    pool: Arc<Pool<B>>,
    hooks: Arc<Pool<B>>,
    local: WorkerLocal,
    config: &ThreadConfig,
) {
    let index = local.index;
    let (local, entered) = enter_seat(&pool, hooks, local, help_stack_budget(config.stack_size));
    log::debug!("smartpool: pool {} worker {index} started", pool.shared.id);
    ThreadConfig::call(&config.on_start, index, "on_start");
    let pool = &pool;
    // Tasks, followups and channels' `push`, `pop` and `may_have_tasks`
    // are caught where they are called; what is left to unwind out of
    // `work` is user code no protocol step depends on (the behavior's
    // `channel`). The worker logs it and goes on: its idle state, if any,
    // left the idle count as it unwound. Should that panic every time, each
    // restart first pauses, longer each time in a row (up to 100 ms): the
    // worker stays alive to serve other channels and close, at a bounded
    // cost.
    let mut pause = Duration::from_millis(1);
    let work = || serve(pool, &local, &|| pool.shared.close.is_terminated());
    while let Err(panic) = catch_unwind(AssertUnwindSafe(work)) {
        log::error!(
            "smartpool: worker {}: a channel panicked: {}; the worker goes on",
            local.index,
            crate::contain::panic_message(&*panic)
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    // The seat shows idle from now on.
    pool.shared.meters.seats[local.index].idle(pool.shared.meters.epoch);
    // Leave the context first: what the drain drops may run user code
    // (destructors, joiners' wakers) that must not find a worker here to
    // help or push onto (its pushes go to the injectors, which the other
    // workers or the last one out drain).
    drop(entered);
    local.take_all(&pool.shared).for_each(drop);
    // Before this worker counts as exited: close resolves after every
    // worker's hook, and its join of the threads stays immediate.
    ThreadConfig::call(&config.on_stop, index, "on_stop");
    log::debug!("smartpool: pool {} worker {index} stopped", pool.shared.id);
    let shared = &pool.shared;
    if shared.close.worker_exited() {
        pool.drain_all(None); // catches channel panics: close is always signalled
        log::debug!("smartpool: pool {} closed: every worker exited", shared.id);
        shared.close.finish();
    }
}

/// Runs the pool's tasks until `stop()`: finds one, or searches and sleeps
/// idle until one comes (or `stop()`). A search that took a job returns
/// none: the job runs here.
fn serve<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal, stop: &dyn Fn() -> bool) {
    let shared = &*pool.shared;
    let worker = &WorkerContext::worker(shared, local);
    let cursor = &mut pool.levels.cursor(local.floor);
    let seat = &shared.meters.seats[local.index];
    while !stop() {
        let found = match find(pool, worker, cursor) {
            Some(task) => Some(task),
            None if local.run_stolen() => continue,
            None => search_idle(pool, worker, cursor, stop),
        };
        match found {
            Some(task) => {
                if local.guest {
                    // A guest seat turns busy without an idle spell.
                    shared.bell.ring();
                }
                execute(pool, Some(seat), task);
            }
            None if local.run_stolen() => {}
            // Stopped (the loop ends), or a channel left alone: only the
            // loop's condition decides whether the worker exits.
            None if !stop() => _ = back_off(local),
            None => {}
        }
    }
}

/// If the worker leaves a channel alone because its `pop` panicked (see
/// `Pool::take`), pauses for at most a millisecond, outside the idle state
/// (so that a new task wakes another worker meanwhile), and returns `true`:
/// the caller searches again, serving the other channels, until the
/// channel is due again. So a broken channel costs the worker at most a
/// thousand searches a second, and delays other work by at most a
/// millisecond.
fn back_off(local: &WorkerLocal) -> bool {
    let Some(at) = local.next_retry() else {
        return false;
    };
    let left = at.saturating_duration_since(std::time::Instant::now());
    std::thread::sleep(left.min(Duration::from_millis(1)));
    true
}

/// A worker's search once it found nothing: through the sleep protocol
/// (idle, sleepy, asleep) until it finds a task, or until `stop()`. Either
/// way it leaves idle through `work_found`: tasks posted while it was idle
/// may have counted on it, so it hands the search on if work remains.
/// `stop()` is also part of the final check before sleeping.
fn search_idle<B: PoolBehavior>(
    pool: &Pool<B>,
    worker: &WorkerContext<'_>,
    cursor: &mut Cursor,
    stop: &dyn Fn() -> bool,
) -> Option<RunningTask> {
    let shared = &*pool.shared;
    let local = worker.local().expect("only workers search");
    let mut idle = shared.sleep.start_looking(local.index);
    if local.ran_job.replace(false) {
        idle.linger();
    }
    shared.meters.seats[local.index].idle(shared.meters.epoch);
    // Idle until the search returns, also when a channel's panic unwinds
    // through it.
    let idle_flag = Restore::set(&local.idle, true);
    // A reserved worker serves only the levels down to its floor: it
    // neither steals from nor watches the LIFO slots (whose tasks are of
    // the lowest level), and sleeps while only lower levels have work.
    let reserved = local
        .reserved
        .then(|| pool.levels.bits_down_to(local.floor));
    let found = loop {
        if stop() {
            break None;
        }
        // Woken with a hint: that channel first, if the schedule serves
        // its level now (under HighestFirst without starvation bounds;
        // RoundRobin's slices and the bounds' clocks are the search's to
        // keep).
        if let Some(channel) = idle.take_hint() {
            if !shared.round_robin
                && !pool.levels.has_bounds()
                && pool.levels.admits(&shared.status, cursor, channel)
            {
                if let Some(task) = pool.take(worker, channel) {
                    break Some(task);
                }
                if local.holds_job() {
                    break None;
                }
            }
        }
        if let Some(found) = find(pool, worker, cursor) {
            break Some(found);
        }
        // A job taken runs at the caller. A channel left alone keeps its
        // bit set: the sleep protocol would search for ever, so the caller
        // backs off instead.
        if local.holds_job() || local.next_retry().is_some() {
            break None;
        }
        if let Some(bits) = &reserved {
            shared.sleep.no_work_found(&mut idle, || {
                let work = shared.status.any_of_set(bits);
                Check::search_if(work || shared.close.is_terminated() || stop())
            });
            continue;
        }
        match steal_stale(pool, local) {
            Verdict::Steal(..) => continue,
            // Searches again (yielding, without the sleep protocol's
            // counters) until the task is stolen or taken.
            Verdict::Young => {
                crate::sync::yield_now();
                continue;
            }
            Verdict::Moving | Verdict::Quiet => {}
        }
        shared.sleep.no_work_found(&mut idle, || {
            if shared.status.any()
                || shared.close.is_terminated()
                || shared.lifo[local.index].look().is_full()
                || stop()
            {
                return Check::Search;
            }
            match shared.watch.observe(local.index, &shared.lifo) {
                Verdict::Steal(..) | Verdict::Young => Check::Search,
                Verdict::Moving => Check::Watch,
                Verdict::Quiet => Check::Sleep,
            }
        });
    };
    drop(idle_flag);
    shared.sleep.work_found(idle, || match reserved {
        // Only the work this worker serves counted on it (see `sleep`'s
        // "Domains").
        Some(bits) => pool.channel_may_hold(bits.channels()),
        // Its own slot too: refilled at the fairness turn (`refill`), it
        // holds a task nobody runs while this worker runs what it found.
        None => pool.work_remains() || shared.any_slot_full(),
    });
    if found.is_some() || local.holds_job() {
        // A seat turns busy: a stall watcher waiting for one looks again.
        shared.bell.ring();
    }
    found
}

/// Watches the other workers' LIFO slots (see `lifo::watch`) and returns
/// the verdict. On `Steal`, it has stolen the task that sat in a slot for
/// the steal delay, if the slot still held it, and submitted it to its
/// channel, where the schedule serves it like any queued task.
fn steal_stale<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal) -> Verdict {
    let shared = &pool.shared;
    let verdict = shared
        .watch
        .observe_window(local.index, &shared.lifo, &local.watch_from);
    if let Verdict::Steal(worker, seen) = verdict {
        if let Some(stolen) = shared.lifo[worker].steal(seen) {
            shared.meters.seats[local.index].steals.add(1);
            flush_out(pool, local, stolen);
        }
    }
    verdict
}

/// Submits `task` (of `channel`), taken out of a LIFO slot, to its
/// channel, where every worker sees it: with the worker's local queues
/// closed to it, so that it does not land back on this worker.
fn flush_out<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal, (channel, task): SlotTask) {
    pool.shared.meters.moved_out(local.index, channel);
    local
        .lifo
        .flushing_during(|| pool.channel_at(channel).submit(task));
}

/// Makes the calling thread the worker `local` of `pool`, served by
/// `hooks` (a reference to the pool), helping in waits while it has used
/// less than `budget` of its stack below this call.
pub(super) fn enter_seat<B: PoolBehavior>(
    pool: &Arc<Pool<B>>,
    hooks: Arc<Pool<B>>,
    mut local: WorkerLocal,
    budget: usize,
) -> (std::rc::Rc<WorkerLocal>, crate::context::Entered) {
    local.stack_base = stack_address();
    local.stack_budget = budget;
    let address = Arc::as_ptr(pool).cast::<()>();
    local.enter(address, pool.shared.clone(), Box::new(hooks))
}

/// Whether the worker uses more of its stack than its budget allows for
/// running tasks on top (see `help_stack_budget`).
pub(super) fn over_stack_budget(local: &WorkerLocal) -> bool {
    local.stack_base.saturating_sub(stack_address()) > local.stack_budget
}

/// An address on the current stack, to measure how much of it is in use
/// (stacks grow down on every platform Rust's std supports threads on but a
/// few; there, `used` reads 0 and the budget never binds).
#[inline(never)]
pub(super) fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// What the pool does for its worker threads (see `core::context`).
impl<B: PoolBehavior> PoolHooks for Arc<Pool<B>> {
    /// The worker loop, with `done` for its end, and these differences:
    /// * With more than its stack budget (`help_stack_budget`) in use, it does
    ///   not help: it moves its LIFO slot's task to its channel (where the
    ///   other workers see it) and returns `false`, for the caller to park.
    /// * Entered from code the worker runs while idle (a channel's `pop`),
    ///   it searches without the sleep protocol, whose idle state the outer
    ///   search holds (taking it twice would miscount the worker): it
    ///   counts as an awake idle worker, which it is, and yields between
    ///   searches.
    /// * The pool terminating does not end it: a terminated pool's workers
    ///   exit, but this one is inside a task, so it cannot. It does what the
    ///   last worker out does (see `close`): having read `TERMINATED`, it
    ///   fences and drains every channel (a push that raced termination is
    ///   either seen by that drain or drained by its pusher), then returns
    ///   `false`, for the caller to park.
    fn help_until(&self, local: &WorkerLocal, done: &dyn Fn() -> bool) -> bool {
        let _outside = local.outside_jobs();
        let pool = &**self;
        let shared = &*pool.shared;
        let _outer = Nested::save(shared, local);
        if over_stack_budget(local) {
            if let Some(task) = shared.lifo[local.index].take() {
                flush_out(pool, local, task);
            }
            return false;
        }
        if local.idle.get() {
            let worker = WorkerContext::worker(shared, local);
            let seat = &shared.meters.seats[local.index];
            let mut cursor = pool.levels.cursor(local.floor);
            while !done() {
                if shared.close.is_terminated() {
                    pool.drain_all(Some(local.index));
                    return false;
                }
                match find(pool, &worker, &mut cursor) {
                    Some(task) => _ = execute(pool, Some(seat), task),
                    None if local.run_stolen() => {}
                    None if matches!(steal_stale(pool, local), Verdict::Steal(..))
                        || (!done() && back_off(local)) => {}
                    None => crate::sync::yield_now(),
                }
            }
            return true;
        }
        serve(pool, local, &|| done() || shared.close.is_terminated());
        if done() {
            return true;
        }
        pool.drain_all(Some(local.index));
        false
    }

    fn help_once(&self, local: &WorkerLocal, channel: usize, allowed: Allowed<'_>) -> bool {
        let pool = &**self;
        let shared = &*pool.shared;
        let terminated = shared.close.is_terminated();
        if terminated {
            // As `help_until` does: the drain may drop (so end) what the
            // wait waits for.
            pool.drain_all(Some(local.index));
        }
        if terminated || over_stack_budget(local) {
            let own = match allowed {
                Allowed::Subtree(own, _) | Allowed::Anything(own) if own != Tag::NONE => own,
                _ => return false,
            };
            // No helping, but `b` itself, if a waiter moved it to the
            // injector, is the owner's to run, as a pop would have found
            // it: at this frame's depth, whatever the pool's state.
            let is_own = |job: &JobRef| job.tag() == own;
            let job = crate::core::job::steal_injected(shared, channel, &is_own);
            return job.map(|job| local.run_job(job)).is_some();
        }
        let _outer = Nested::save(shared, local);
        let seat = &shared.meters.seats[local.index];
        let worker = WorkerContext::worker(shared, local);
        let top = match allowed {
            Allowed::Anything(_) => Some(local.floor),
            _ => pool.levels.level_of(channel).checked_sub(1),
        };
        if let Some(top) = top {
            let mut cursor = pool.levels.cursor(top.min(local.floor));
            if let Some(task) = find(pool, &worker, &mut cursor) {
                let _outside = local.outside_jobs();
                execute(pool, Some(seat), task);
                return true;
            }
            if local.run_stolen() {
                return true;
            }
        }
        // Other seats' jobs only, of `b`'s subtree: this seat's deque
        // holds the jobs of the frames below the wait (their owners take
        // them back), and a job of another subtree may be long.
        let within = match allowed {
            Allowed::NoJob => return false,
            Allowed::Subtree(_, within) => within,
            Allowed::Anything(_) => &|_: &JobRef| true,
        };
        let job = crate::core::job::steal_within(shared, local.index, channel, within);
        job.map(|job| local.run_job(job)).is_some()
    }

    fn run_now(
        &self,
        local: &WorkerLocal,
        index: usize,
        take: &mut dyn FnMut() -> Option<LocalTask>,
    ) {
        let _outside = local.outside_jobs();
        let pool = &**self;
        let shared = &*pool.shared;
        if over_stack_budget(local) {
            return;
        }
        // As `exec` admits a new task: counted if the channel is
        // complete_on_close, refused if the pool is closing. A count for an
        // empty claim is given back as it drops.
        let Ok(count) = shared.admit(index) else {
            return;
        };
        let Some(future) = take() else {
            return;
        };
        // (Detached: the handle drops at once.)
        let (task, _) = crate::task::spawn(future, pool.scheduler.clone());
        if let Some(count) = count {
            count.hand_to(&task);
        }
        // Not counted: the shell queued for it is (see `scope`), and runs
        // empty. The seat runs a task of `index`, inside the waiting one.
        let _outer = Nested::save(shared, local);
        shared.meters.running(local.index, index);
        task.set_from(index);
        execute(pool, None, task);
    }

    fn block_in_place(&self, local: &WorkerLocal, f: &mut dyn FnMut()) {
        Pool::block_in_place(self, local, f);
    }
}

/// The next task for `worker`: its LIFO slot's, if the schedule admits it
/// and the streak allows (else that task goes to its channel, see `lifo`),
/// or one from the channels by the schedule. The task comes back with the
/// channel it came from recorded (`RunningTask::from`).
pub(super) fn find<B: PoolBehavior>(
    pool: &Pool<B>,
    worker: &WorkerContext<'_>,
    cursor: &mut Cursor,
) -> Option<RunningTask> {
    let status = &pool.shared.status;
    if let Some(local) = worker.local() {
        if let Some((channel, task)) = pool.shared.lifo[local.index].take() {
            // The slot's task counts towards the channel's fairness tick
            // like a popped one. At the tick's turn, the channel's next pop
            // (below) looks at its injector first, and the task stays in
            // the slot for the search after: outside work gets its turn,
            // and the slot keeps its order ahead of the worker's queue.
            let admitted = pool.levels.admits(status, cursor, channel);
            if admitted && !local.channels[channel].tick.slot_run() {
                refill(pool, local, (channel, task));
            } else if admitted && (local.lifo.extend_streak() || !pool.work_remains()) {
                // At the end of a streak, queued work goes first, if there
                // is any: the slot must not keep a worker from it.
                return Some(pool.running(worker, channel, task));
            } else {
                behind_queue(pool, local, (channel, task));
            }
        }
        local.lifo.end_streak();
    }
    let found = pool
        .levels
        .find(status, cursor, |channel| pool.take(worker, channel))
        .or_else(|| {
            // Nothing queued after all: a task refilled at the tick's turn
            // runs now (after a job the search took, if it took one).
            let local = worker.local().filter(|local| !local.holds_job())?;
            let (channel, task) = pool.shared.lifo[local.index].take()?;
            Some(pool.running(worker, channel, task))
        });
    if let Some(end) = pool.levels.slice_end(cursor) {
        // Under RoundRobin: the slice the found task runs in (for
        // `should_yield`).
        if let Some(local) = worker.local() {
            local.slice_end.set(Some(end));
        }
    }
    found
}

/// Puts `task` (with its channel), just taken from the worker's own
/// slot, back in it, announced as any fill (see `lifo`).
#[cold]
fn refill<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal, task: SlotTask) {
    let shared = &pool.shared;
    match shared.lifo[local.index].fill(task) {
        Ok(()) => shared.sleep.slot_filled(local.idle.get()),
        // (Only its worker fills a slot, and it just took this one: not
        // seen. Were it full, the task would go behind the queue.)
        Err(task) => behind_queue(pool, local, task),
    }
}

/// Submits `task` (of `channel`), taken from the worker's own slot, behind
/// the channel's work queued on this worker (tokio's LIFO slot does the
/// same), where other workers can steal it.
fn behind_queue<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal, (channel, task): SlotTask) {
    pool.shared.meters.moved_out(local.index, channel);
    local
        .lifo
        .closed_during(|| pool.channel_at(channel).submit(task));
}

/// What a nested search or run inside a task changes of its seat, saved
/// as it begins and restored as it ends (also in an unwind): the seat's
/// activity (see `core::meters`, "Nested runs"), and the worker's
/// RoundRobin slice end, so that the task that waits is judged by its own
/// slice again (see `should_yield`).
pub(super) struct Nested<'a> {
    meters: &'a crate::core::meters::Meters,
    local: &'a WorkerLocal,
    activity: u32,
    slice_end: Option<std::time::Instant>,
}

impl<'a> Nested<'a> {
    pub(super) fn save(shared: &'a crate::core::Shared, local: &'a WorkerLocal) -> Nested<'a> {
        Nested {
            meters: &shared.meters,
            local,
            activity: shared.meters.seats[local.index].activity(),
            slice_end: local.slice_end.get(),
        }
    }
}

impl Drop for Nested<'_> {
    fn drop(&mut self) {
        let seat = &self.meters.seats[self.local.index];
        seat.restore(self.meters, self.activity);
        self.local.slice_end.set(self.slice_end);
    }
}

/// Runs a task taken from a channel (recorded in it as `from`) on the
/// caller's seat, whose counts are `meters` (see `core::meters`; `None`
/// for a task no channel held, which is not counted). Returns whether it
/// was a task's live token (run, or dropped by close), not a stale one a
/// move left behind.
#[inline(always)]
pub(super) fn execute<B: PoolBehavior>(
    pool: &Pool<B>,
    meters: Option<&SeatMeters>,
    task: RunningTask,
) -> bool {
    let shared = &pool.shared;
    if shared.close.is_closing() {
        // Closing: tasks of dropping channels are dropped, not run; past
        // close's deadline, every task is. (Either counts as cancelled.)
        // (Taken: the drop counts it cancelled, not dropped in its queue.)
        if !shared.channels[task.from()].complete_on_close {
            task.set_cancel_reason(Some(crate::task::CancelReason::PoolClosed));
            drop(task);
            return true;
        }
        if shared.parked.is_abandoning() {
            // (Its drop counts it for `CloseReport::aborted`.)
            task.set_cancel_reason(Some(crate::task::CancelReason::CloseTimedOut));
            drop(task);
            return true;
        }
    }
    let ran = task.run_counted();
    let live = !matches!(ran.outcome, RunOutcome::Stale);
    let Some(meters) = meters.filter(|_| meters::ENABLED) else {
        return live;
    };
    if let Some(counts) = meters.channels.get(ran.channel as usize) {
        match ran.outcome {
            // The task gave its count back (if it held one) as it completed.
            RunOutcome::Completed => counts.completed.add(1),
            RunOutcome::Panicked => counts.panicked.add(1),
            RunOutcome::Aborted => counts.aborted.add(1),
            // Parked, or (woken during its poll) handed to followup
            // already; or a move's leftover, which gave back its own count.
            RunOutcome::Pending | RunOutcome::Stale => {}
        }
        if ran.first {
            counts.started.add(1);
            if ran.stamp != 0 {
                meters.waited(shared.meters.epoch, ran.channel as usize, ran.stamp);
            }
        }
    }
    live
}
