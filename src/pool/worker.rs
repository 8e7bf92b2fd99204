//! The worker loop: find a task through the schedule, run it, and when there
//! is none, go through the sleep protocol.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::Pool;
use crate::behavior::PoolBehavior;
use crate::schedule::Cursor;
use crate::steal::{self, WorkerContext, WorkerLocal};
use crate::sync::{fence, Ordering};
use crate::task::{RunOutcome, RunningTask};

/// Body of worker thread `local.index`.
pub(super) fn run<B: PoolBehavior>(pool: Arc<Pool<B>>, local: WorkerLocal) {
    let local = Rc::new(local);
    let entered = steal::enter(local.clone());
    // Tasks and followups catch their own panics; a panicking third-party
    // channel unwinds out of `work`. The worker logs it and goes on: its
    // idle state, if any, left the idle count as it unwound, and `take` set
    // the channel's bit again. A channel that panics every time would make
    // this a busy loop, so each restart first pauses, longer each time in a
    // row (up to 100 ms): the worker stays alive to serve other channels
    // and close, at a bounded cost.
    let mut pause = Duration::from_millis(1);
    while let Err(panic) = catch_unwind(AssertUnwindSafe(|| work(&pool, &local))) {
        log::error!(
            "smartpool: worker {}: a channel panicked: {}; the worker goes on",
            local.index,
            crate::task::panic_message(&*panic)
        );
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
    local.drain();
    drop(entered);
    let shared = &pool.shared;
    if shared.close.worker_exited() {
        // Pairs with the post fence of a push that raced termination (see
        // `close`): either that pusher sees TERMINATED, or we see its task.
        fence(Ordering::SeqCst);
        pool.drain_all(); // catches channel panics: close is always signalled
        shared.close.finish();
    }
}

fn work<B: PoolBehavior>(pool: &Pool<B>, local: &WorkerLocal) {
    let shared = &*pool.shared;
    let worker = WorkerContext::worker(shared, local);
    let mut cursor = pool.levels.cursor();
    'work: loop {
        if shared.close.is_terminated() {
            return;
        }
        if let Some((task, channel)) = find(pool, &worker, &mut cursor) {
            execute(pool, task, channel);
            continue;
        }
        let mut idle = shared.sleep.start_looking(local.index);
        loop {
            if shared.close.is_terminated() {
                return;
            }
            if let Some((task, channel)) = find(pool, &worker, &mut cursor) {
                shared.sleep.work_found(idle, || shared.status.any());
                execute(pool, task, channel);
                continue 'work;
            }
            shared.sleep.no_work_found(&mut idle, || {
                shared.status.any() || shared.close.is_terminated()
            });
        }
    }
}

fn find<B: PoolBehavior>(
    pool: &Pool<B>,
    worker: &WorkerContext<'_>,
    cursor: &mut Cursor,
) -> Option<(RunningTask, usize)> {
    pool.levels.find(&pool.shared.status, cursor, |channel| {
        pool.take(worker, channel).map(|task| (task, channel))
    })
}

fn execute<B: PoolBehavior>(pool: &Pool<B>, task: RunningTask, channel: usize) {
    let shared = &pool.shared;
    if !shared.channels[channel].complete_on_close && shared.close.is_closing() {
        // Closing: tasks of dropping channels are dropped, not run.
        drop(task);
        return;
    }
    task.set_from(channel);
    match task.run() {
        RunOutcome::Completed { counted } => {
            if counted {
                shared.release_counted();
            }
        }
        RunOutcome::Parked => {}
        RunOutcome::Requeue(task) => pool.followup(task),
    }
}
