//! Loom models of the task state machine, on the real `TaskCell`.
//!
//! Property: wakes racing the poll, completion and each other re-queue the
//! task at most once per wake and never lose one (the task completes once
//! every waker's data is published, without further wakes); the future is
//! dropped exactly once; the joiner gets the output; a dropped token cancels;
//! the unlocked stage passes between pollers and to the joiner in order; an
//! abort, racing a poll or a wake, drops the future once, unpolled or after
//! the poll in progress, and leaves nothing queued; close's sweep of
//! parked tasks, racing a park, never leaves an uncounted task parked. A
//! move racing the start, the drop or an abort of the queued token, or a
//! moved task's park racing its wake: the task is polled at most once per
//! line, runs once, is dropped once, and every count towards close taken
//! by a token is given back once (stale tokens give back their own). A
//! task born without a handle completes once and is freed by whichever
//! party lets go of it last. A joiner awaiting the handle while the task
//! completes is always woken (`join_waker`).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use super::*;
use crate::sync::{lock, AtomicBool, AtomicUsize, Mutex, Ordering};

impl RunOutcome {
    /// Whether the task finished (with its output, a panic, or aborted).
    fn finished(&self) -> bool {
        matches!(
            self,
            RunOutcome::Completed | RunOutcome::Panicked | RunOutcome::Aborted
        )
    }
}

/// A scheduler that records what woken tasks it was handed.
#[derive(Default)]
struct Recorder {
    queued: Mutex<Vec<RunningTask>>,
    /// Tasks registered as parked (the pool's registry, `core::parked`).
    parked: Mutex<Vec<Weak<dyn CloseWake>>>,
    /// The registry's sweeping flag (`core::parked`): a SeqCst store, read
    /// by SeqCst loads.
    closing: AtomicBool,
    /// The registry's abandoning flag (close's deadline passed).
    abandoning: AtomicBool,
    /// Counts towards close given back.
    released: AtomicUsize,
}

impl Schedule for Recorder {
    /// Records the hand-over as the pool's followup and channel do, then
    /// queues the token.
    fn schedule(&self, task: RunningTask) {
        task.to_followup();
        task.enter_channel(0);
        lock(&self.queued).push(task);
    }
    fn report(&self, event: Event<'_>) {
        if let Event::Released = event {
            self.released.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn parked(&self) -> &dyn ParkedRegistry {
        self
    }
    fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }
    fn boost(
        &self,
        _: usize,
        _: usize,
        _: &mut dyn FnMut(usize) -> Result<RunningTask, MoveError>,
    ) {
    }
}

impl ParkedRegistry for Recorder {
    fn register(&self, _key: usize, task: Weak<dyn CloseWake>) -> u32 {
        let mut parked = lock(&self.parked);
        parked.push(task);
        parked.len() as u32 - 1
    }
    fn unregister(&self, _key: usize, _slot: u32) {}
    fn drops(&self, counted: bool) -> bool {
        if counted {
            self.abandoning.load(Ordering::SeqCst)
        } else {
            self.closing.load(Ordering::SeqCst)
        }
    }
    fn count_abandoned(&self) {}
}

/// Shared by the future and the threads that wake it.
struct Signals {
    /// Each waker bumps it (an RMW: the latest value exists in the
    /// modification order) before waking; the future reads it with a plain
    /// load, which may be stale unless the wake published it.
    opened: AtomicUsize,
    /// The future's latest waker (cloned, never taken: every opener wakes).
    slot: Mutex<Option<Waker>>,
    drops: AtomicUsize,
    /// Openers that finished waking.
    done: AtomicUsize,
}

/// Ready once `need` openers have opened it.
struct Gate {
    signals: Arc<Signals>,
    need: usize,
    /// Wakes itself in this many of its first polls (a yield: recorded in
    /// the polling thread's context, not in the state word).
    yields: usize,
    /// Takes its waker out of the slot as it completes, so that the slot
    /// keeps no reference to the task.
    clears: bool,
}

impl Future for Gate {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        *lock(&self.signals.slot) = Some(cx.waker().clone());
        if self.yields > 0 {
            self.yields -= 1;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.signals.opened.load(Ordering::Acquire) >= self.need {
            if self.clears {
                drop(lock(&self.signals.slot).take());
            }
            return Poll::Ready(7);
        }
        Poll::Pending
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.signals.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Clones the waker first, then publishes and wakes, as a channel sender
/// holding a receiver's waker does: the slot's mutex then carries nothing
/// about `opened`, and only the wake can publish it to the next poll.
fn open(signals: &Signals) {
    let waker = lock(&signals.slot).clone();
    signals.opened.fetch_add(1, Ordering::Release);
    if let Some(waker) = waker {
        waker.wake();
    }
    signals.done.fetch_add(1, Ordering::SeqCst);
}

fn new_task(need: usize) -> (Arc<Recorder>, Arc<Signals>, RunningTask, JoinHandle<u32>) {
    new_yielding_task(need, 0)
}

/// The scheduler, the signals and the future of a new task (see
/// [`new_yielding_task`]).
fn parts(need: usize, yields: usize) -> (Arc<Recorder>, Arc<Signals>, SchedulerRef, Gate) {
    let recorder = Arc::new(Recorder::default());
    let signals = Arc::new(Signals {
        opened: AtomicUsize::new(0),
        slot: Mutex::new(None),
        drops: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    let weak = SchedulerRef::new(Arc::downgrade(&recorder) as Weak<dyn Schedule>);
    let gate = Gate {
        signals: signals.clone(),
        need,
        yields,
        clears: false,
    };
    (recorder, signals, weak, gate)
}

fn new_yielding_task(
    need: usize,
    yields: usize,
) -> (Arc<Recorder>, Arc<Signals>, RunningTask, JoinHandle<u32>) {
    let (recorder, signals, weak, gate) = parts(need, yields);
    let (task, join) = spawn(gate, weak);
    (recorder, signals, task, join)
}

/// Runs the task as a worker would until it completes. Panics if it is
/// parked with every opener done and nothing queued: a lost wake-up.
fn drive(recorder: &Recorder, signals: &Signals, openers: usize) -> usize {
    let mut runs = 0;
    let mut next = None;
    loop {
        let task = match next.take() {
            Some(task) => task,
            None => {
                let all_done = signals.done.load(Ordering::SeqCst) == openers;
                match lock(&recorder.queued).pop() {
                    Some(task) => task,
                    None if all_done => panic!("lost wake-up: parked, woken by all, not queued"),
                    None => {
                        loom::thread::yield_now();
                        continue;
                    }
                }
            }
        };
        runs += 1;
        match task.run() {
            RunOutcome::Completed | RunOutcome::Panicked | RunOutcome::Aborted => return runs,
            RunOutcome::Stale => panic!("a woken task's token is live"),
            // Parked, or handed back (woken during the poll): either way
            // the queue has it when it is runnable.
            RunOutcome::Pending => {}
        }
    }
}

/// The task completed once: nothing is queued after it, and its future
/// was dropped once.
fn assert_done_once(recorder: &Recorder, signals: &Signals) {
    assert!(
        lock(&recorder.queued).is_empty(),
        "re-queued after completion"
    );
    assert_eq!(
        signals.drops.load(Ordering::SeqCst),
        1,
        "future dropped once"
    );
}

/// [`assert_done_once`], and the joiner gets the output.
fn assert_completed_once(recorder: &Recorder, signals: &Signals, join: JoinHandle<u32>) {
    assert_done_once(recorder, signals);
    assert_eq!(futures::executor::block_on(join).unwrap(), 7);
}

fn model(openers: usize) {
    loom::model(move || {
        let (recorder, signals, task, join) = new_task(openers);
        // The first poll registers the waker the openers will hold.
        assert!(matches!(task.run(), RunOutcome::Pending));
        let task = lock(&recorder.queued).pop();
        assert!(task.is_none(), "nobody woke it yet");
        let threads: Vec<_> = (0..openers)
            .map(|_| {
                let signals = signals.clone();
                loom::thread::spawn(move || open(&signals))
            })
            .collect();
        let runs = drive(&recorder, &signals, openers);
        assert!(runs <= openers, "more polls than wakes");
        for t in threads {
            t.join().unwrap();
        }
        assert_completed_once(&recorder, &signals, join);
    });
}

#[test]
fn wake_racing_poll() {
    model(1);
}

#[test]
fn wakes_racing_each_other() {
    model(2);
}

/// Wakes the thread that made it (loom's `unpark`).
struct Unparker(crate::sync::Thread);

impl futures::task::ArcWake for Unparker {
    fn wake_by_ref(arc: &Arc<Self>) {
        arc.0.unpark();
    }
}

/// Polls `future` on this thread, parking between polls until woken: a
/// wake-up that never comes is a deadlock loom reports.
fn park_on<F: Future>(future: F) -> F::Output {
    let waker = futures::task::waker(Arc::new(Unparker(crate::sync::thread_current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        crate::sync::park();
    }
}

/// The joiner awaits the handle while another thread runs the task to
/// completion: the completion's wake reaches the waker the joiner
/// registered, or the joiner's look after registering sees the task
/// complete (see `join_waker`). The joiner parks until woken, so a lost
/// wake-up is a deadlock the model reports.
#[test]
fn join_racing_completion() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(0);
        let runner = loom::thread::spawn(move || {
            assert!(matches!(task.run(), RunOutcome::Completed));
        });
        assert_eq!(park_on(join).unwrap(), 7);
        runner.join().unwrap();
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1);
        drop(recorder);
    });
}

/// A task born without a handle (`spawn_detached`) that yields once, then
/// parks and is woken by an opener racing its poll: it completes once, its
/// future is dropped once, and its cell is freed by whichever party lets
/// go of it last (no handle holds a reference).
#[test]
fn detached_task_racing_a_wake() {
    loom::model(|| {
        let (recorder, signals, weak, mut gate) = parts(1, 1);
        gate.clears = true;
        let task = spawn_detached(gate, weak);
        assert!(matches!(task.run(), RunOutcome::Pending));
        let task = lock(&recorder.queued).pop().expect("a yield re-queues");
        let opener = {
            let signals = signals.clone();
            loom::thread::spawn(move || open(&signals))
        };
        // Its second poll races the opener: it may complete at once.
        lock(&recorder.queued).push(task);
        drive(&recorder, &signals, 1);
        opener.join().unwrap();
        assert_done_once(&recorder, &signals);
        // The worker's token or the opener's waker was the last reference.
        // The task held the model's one `SchedulerRef`, so its `Weak` to
        // the recorder goes with the cell.
        assert_eq!(Arc::weak_count(&recorder), 0, "the cell was freed");
    });
}

/// A task that wakes itself in its first two polls (yields: recorded in
/// the polling thread's context, not in the state word), the second racing
/// an opener's wake from another thread: each yield re-queues it exactly
/// once, the opener's wake is not lost, and it completes once.
#[test]
fn yield_racing_a_wake() {
    yields_then_a_wake(false);
}

/// The same, the third poll on another thread, so that the opener's wake
/// races the end of the second poll, the token's hand-over and the third
/// poll: a yielding poll's end writes nothing (the word stays running), so
/// the stage (an unlocked cell, checked by loom) passes to the third
/// poller through the queue alone. The re-queued token is never stale.
#[test]
fn yield_hands_the_stage_over_through_the_queue() {
    yields_then_a_wake(true);
}

/// The two models above: the third poll here, or `elsewhere`.
fn yields_then_a_wake(elsewhere: bool) {
    loom::model(move || {
        let (recorder, signals, task, join) = new_yielding_task(1, 2);
        // The first poll registers the waker the opener will hold, and
        // yields.
        assert!(matches!(task.run(), RunOutcome::Pending));
        let task = lock(&recorder.queued).pop().expect("a yield re-queues");
        // Relaxed: only the queue orders the stage for the third poller.
        let handed = Arc::new(AtomicBool::new(false));
        let worker = elsewhere.then(|| {
            let (recorder, signals) = (recorder.clone(), signals.clone());
            let handed = handed.clone();
            loom::thread::spawn(move || {
                while !handed.load(Ordering::Relaxed) {
                    loom::thread::yield_now();
                }
                drive(&recorder, &signals, 1)
            })
        });
        let opener = {
            let signals = signals.clone();
            loom::thread::spawn(move || open(&signals))
        };
        assert!(matches!(task.run(), RunOutcome::Pending));
        assert_eq!(lock(&recorder.queued).len(), 1, "a yield re-queues once");
        let runs = match worker {
            Some(worker) => {
                handed.store(true, Ordering::Relaxed);
                worker.join().unwrap()
            }
            None => drive(&recorder, &signals, 1),
        };
        assert!(runs <= 2, "more polls than the opener's wake and one");
        opener.join().unwrap();
        assert_completed_once(&recorder, &signals, join);
    });
}

/// A poll woken from another thread while it runs: its end's CAS fails,
/// the word stays `RUNNING+SCHEDULED`, and the task is re-queued and
/// polled next on another thread, the stage passing through the queue
/// alone (two openers: the first wake claims the parked task, the second
/// races the second poll; or both come before, and that poll completes).
#[test]
fn wake_during_a_poll_hands_the_stage_over_through_the_queue() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        // The first poll registers the waker the openers will hold.
        assert!(matches!(task.run(), RunOutcome::Pending));
        open(&signals);
        let token = lock(&recorder.queued).pop().expect("woken once");
        // 0 until the second poll ends, then 1 (it did not complete) or 2:
        // relaxed, so that only the queue orders the stage.
        let second = Arc::new(AtomicUsize::new(0));
        let worker = {
            let (recorder, signals, second) = (recorder.clone(), signals.clone(), second.clone());
            loom::thread::spawn(move || loop {
                match second.load(Ordering::Relaxed) {
                    0 => loom::thread::yield_now(),
                    1 => {
                        drive(&recorder, &signals, 2);
                        return;
                    }
                    _ => return,
                }
            })
        };
        let opener = {
            let signals = signals.clone();
            loom::thread::spawn(move || open(&signals))
        };
        let finished = token.run().finished();
        second.store(if finished { 2 } else { 1 }, Ordering::Relaxed);
        worker.join().unwrap();
        opener.join().unwrap();
        assert_completed_once(&recorder, &signals, join);
    });
}

/// A yield's re-queued token, dropped on another thread (a channel that
/// drops it) while an abort races the poll, the hand-over and the drop:
/// the drop claims the running word and cancels the task; the future is
/// dropped once, on whichever side, and the joiner learns it was
/// cancelled.
#[test]
fn a_requeued_token_dropped_elsewhere_cancels_once() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_yielding_task(1, 1);
        let ran = Arc::new(AtomicBool::new(false));
        let dropper = {
            let (recorder, ran) = (recorder.clone(), ran.clone());
            loom::thread::spawn(move || loop {
                // (The flag first: once it is set, the queue has whatever
                // the poll re-queued; nothing, if the abort came first.)
                let last = ran.load(Ordering::Acquire);
                let token = lock(&recorder.queued).pop();
                if let Some(token) = token {
                    return drop(token);
                }
                if last {
                    return;
                }
                loom::thread::yield_now();
            })
        };
        let aborter = spawn_aborter(&join);
        let outcome = task.run();
        assert!(matches!(outcome, RunOutcome::Pending | RunOutcome::Aborted));
        ran.store(true, Ordering::Release);
        dropper.join().unwrap();
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "nothing queued");
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
        assert!(futures::executor::block_on(join)
            .unwrap_err()
            .is_cancelled());
    });
}

#[test]
fn dropped_token_cancels_once() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(1);
        assert!(matches!(task.run(), RunOutcome::Pending));
        let t = {
            let signals = signals.clone();
            loom::thread::spawn(move || open(&signals))
        };
        // (The opener clones the waker stored by the poll above.)
        t.join().unwrap();
        // The wake handed the token to the scheduler; dropping it cancels.
        let token = lock(&recorder.queued).pop().expect("woken once");
        drop(token);
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1);
        assert!(futures::executor::block_on(join)
            .unwrap_err()
            .is_cancelled());
    });
}

/// The task is polled first here, then woken, polled to completion on
/// another thread, and joined here again: the stage (an unlocked cell,
/// checked by loom) passes to the second poller through the wake and the
/// queue, and back to the joiner through `COMPLETE` alone.
#[test]
fn stage_passes_between_threads() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(1);
        assert!(matches!(task.run(), RunOutcome::Pending));
        let worker = {
            let (recorder, signals) = (recorder.clone(), signals.clone());
            loom::thread::spawn(move || {
                open(&signals);
                let token = lock(&recorder.queued).pop().expect("woken once");
                assert!(token.run().finished());
            })
        };
        while !join.is_finished() {
            loom::thread::yield_now();
        }
        assert_eq!(futures::executor::block_on(join).unwrap(), 7);
        worker.join().unwrap();
    });
}

/// Runs the task (popping its tokens) until it completes, waiting for a
/// token whenever it is parked: for models whose last party to hand it
/// back is an abort, which always comes.
fn run_until_complete(recorder: &Recorder, mut task: Option<RunningTask>) {
    loop {
        let token = match task.take() {
            Some(token) => token,
            None => match lock(&recorder.queued).pop() {
                Some(token) => token,
                None => {
                    loom::thread::yield_now();
                    continue;
                }
            },
        };
        if token.run().finished() {
            return;
        }
    }
}

/// Aborts the task of `join` from another thread.
fn spawn_aborter(join: &JoinHandle<u32>) -> loom::thread::JoinHandle<()> {
    let abort = join.abort_handle();
    loom::thread::spawn(move || abort.abort())
}

/// The future was dropped once, and the joiner learns it was aborted.
fn assert_aborted_once(signals: &Signals, join: JoinHandle<u32>) {
    assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
    let error = futures::executor::block_on(join).unwrap_err();
    assert_eq!(error.cancel_reason(), Some(CancelReason::Aborted));
}

/// The joiner gets the output, or learns the task was aborted: for models
/// where an abort races the task's end.
fn assert_output_or_aborted(join: JoinHandle<u32>) {
    match futures::executor::block_on(join) {
        Ok(output) => assert_eq!(output, 7),
        Err(error) => assert_eq!(error.cancel_reason(), Some(CancelReason::Aborted)),
    }
}

/// An abort racing a poll that returns `Pending`: the abort lands before
/// the poll (the future is dropped unpolled), during it (the poller drops
/// it after), or after it (the abort claims the parked task and hands it
/// to the pool). Each way the future is dropped once, nothing stays
/// queued, and the joiner learns it was aborted.
#[test]
fn abort_racing_a_poll() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(matches!(task.run(), RunOutcome::Pending));
        open(&signals);
        let token = lock(&recorder.queued).pop().expect("woken once");
        let aborter = spawn_aborter(&join);
        run_until_complete(&recorder, Some(token));
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "queued after completion");
        assert_aborted_once(&signals, join);
    });
}

/// An abort and a wake racing to claim a parked task: exactly one of them
/// queues it, and running that token drops the future as aborted.
#[test]
fn abort_racing_a_wake() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(matches!(task.run(), RunOutcome::Pending));
        let aborter = spawn_aborter(&join);
        open(&signals);
        aborter.join().unwrap();
        let token = {
            let mut queued = lock(&recorder.queued);
            assert_eq!(queued.len(), 1, "claimed once");
            queued.pop()
        };
        assert!(token.unwrap().run().finished());
        assert_aborted_once(&signals, join);
    });
}

/// An abort racing a poll that yields: the yield is recorded in the
/// polling thread's context, and the poll's end leaves the word as it is:
/// an abort during the poll is found by the re-queued token's start, one
/// after it by that start or by the next poll's end.
#[test]
fn abort_racing_a_yield() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_yielding_task(2, 1);
        let aborter = spawn_aborter(&join);
        run_until_complete(&recorder, Some(task));
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "queued after completion");
        assert_aborted_once(&signals, join);
    });
}

/// A wake and an abort racing the start of a yield's re-queued token: the
/// start loads the word, and claims it with a CAS if a wake or the abort
/// added to it (a CAS that fails on the other's later addition goes round
/// once more); one the load misses is found by the poll's end or the next
/// start. The future is dropped once, nothing stays queued, and the joiner
/// gets the output or learns the task was aborted.
#[test]
fn a_wake_and_an_abort_racing_a_requeued_start() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_yielding_task(1, 1);
        // The first poll registers the waker the opener will hold, and
        // yields.
        assert!(matches!(task.run(), RunOutcome::Pending));
        let token = lock(&recorder.queued).pop().expect("a yield re-queues");
        let opener = {
            let signals = signals.clone();
            loom::thread::spawn(move || open(&signals))
        };
        let aborter = spawn_aborter(&join);
        run_until_complete(&recorder, Some(token));
        opener.join().unwrap();
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "queued after completion");
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
        assert_output_or_aborted(join);
    });
}

/// An abort racing the drop of a queued task's token: the future is
/// dropped once, by the token's drop, and the task ends cancelled (as
/// aborted if the abort came first).
#[test]
fn abort_racing_a_dropped_token() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(1);
        let aborter = spawn_aborter(&join);
        drop(task);
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "nothing queued");
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
        assert!(futures::executor::block_on(join)
            .unwrap_err()
            .is_cancelled());
    });
}

/// Close's sweep, as `core::parked::Parked::sweep(false)` does it: the flag
/// first, then a snapshot of the live registered tasks taken under the
/// registry's lock, close-woken after it.
fn sweep(recorder: &Recorder) {
    recorder.closing.store(true, Ordering::SeqCst);
    close_wake_all(recorder);
}

/// Close's deadline, as `Parked::sweep(true)`: the flag, then the same sweep.
fn abandon(recorder: &Recorder) {
    recorder.abandoning.store(true, Ordering::SeqCst);
    close_wake_all(recorder);
}

fn close_wake_all(recorder: &Recorder) {
    let live: Vec<_> = lock(&recorder.parked)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    for task in live {
        task.close_wake();
    }
}

/// The sweep racing a task's first park (its registration included): the
/// task, which does not count towards close, is dropped exactly once, by
/// the sweep or by its poller after reading the flag (or re-queued, if the
/// sweep's claim found it running: the pool drops it then), never left
/// parked.
#[test]
fn close_sweep_racing_a_first_park() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        let closer = {
            let recorder = recorder.clone();
            loom::thread::spawn(move || sweep(&recorder))
        };
        assert!(matches!(task.run(), RunOutcome::Pending));
        closer.join().unwrap();
        assert_dropped_or_requeued(&recorder, &signals, join);
    });
}

/// After a sweep raced a park: the task was dropped (as the pool closed),
/// or re-queued once by a claim that found it running. Never both, never
/// neither.
fn assert_dropped_or_requeued(recorder: &Recorder, signals: &Signals, join: JoinHandle<u32>) {
    assert_dropped_or_requeued_as(recorder, signals, join, CancelReason::PoolClosed);
}

fn assert_dropped_or_requeued_as(
    recorder: &Recorder,
    signals: &Signals,
    join: JoinHandle<u32>,
    reason: CancelReason,
) {
    let requeued = lock(&recorder.queued).len();
    let dropped = signals.drops.load(Ordering::SeqCst);
    assert_eq!(
        requeued + dropped,
        1,
        "requeued {requeued}, dropped {dropped}"
    );
    lock(&recorder.queued).clear();
    if dropped == 1 {
        let error = futures::executor::block_on(join).unwrap_err();
        assert_eq!(error.cancel_reason(), Some(reason));
    }
}

/// The sweep racing a later park of a registered task that was queued
/// when the sweep began (its claim then changes nothing): the poll that
/// follows sees the flag and drops the task after parking it.
#[test]
fn close_sweep_racing_a_later_park() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(matches!(task.run(), RunOutcome::Pending));
        assert_eq!(lock(&recorder.parked).len(), 1, "registered");
        open(&signals);
        let token = lock(&recorder.queued).pop().expect("woken once");
        let closer = {
            let recorder = recorder.clone();
            loom::thread::spawn(move || sweep(&recorder))
        };
        assert!(matches!(token.run(), RunOutcome::Pending));
        closer.join().unwrap();
        assert_dropped_or_requeued(&recorder, &signals, join);
    });
}

/// Close's deadline racing the first park of a task that counts towards
/// close: it is dropped once (as timed out), by the sweep or by its poller,
/// or re-queued by a claim that found it running (then a worker drops it).
#[test]
fn close_deadline_racing_a_counted_park() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(!task.take_count(), "counted from now on");
        let closer = {
            let recorder = recorder.clone();
            loom::thread::spawn(move || abandon(&recorder))
        };
        assert!(matches!(task.run(), RunOutcome::Pending));
        closer.join().unwrap();
        assert_dropped_or_requeued_as(&recorder, &signals, join, CancelReason::CloseTimedOut);
    });
}

/// An abort racing a poll that returns `Ready`: the task completes with its
/// output (the abort came too late) or is dropped unpolled, never both.
#[test]
fn abort_racing_completion() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(1);
        assert!(matches!(task.run(), RunOutcome::Pending));
        open(&signals);
        let token = lock(&recorder.queued).pop().expect("woken once");
        let aborter = spawn_aborter(&join);
        assert!(token.run().finished());
        aborter.join().unwrap();
        assert!(lock(&recorder.queued).is_empty(), "nothing queued");
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
        assert_output_or_aborted(join);
    });
}

/// An abort racing close's sweep for a parked task: one of them claims
/// it; the task is dropped once, as aborted or as closed.
#[test]
fn abort_racing_the_close_sweep() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(matches!(task.run(), RunOutcome::Pending));
        let aborter = spawn_aborter(&join);
        sweep(&recorder);
        aborter.join().unwrap();
        // The abort's claim queued it (for the pool to drop); the sweep's
        // dropped it at once.
        let queued = lock(&recorder.queued).pop();
        if let Some(token) = queued {
            assert!(token.run().finished());
        }
        assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
        let reason = futures::executor::block_on(join)
            .unwrap_err()
            .cancel_reason();
        assert!(
            matches!(
                reason,
                Some(CancelReason::Aborted | CancelReason::PoolClosed)
            ),
            "{reason:?}"
        );
    });
}

/// Moves (`task`'s "Moves"): the moving thread's claim, as
/// `channel::move_into` makes it after admission (the new token takes a
/// count, as a counted channel's admission gives it).
fn spawn_mover(join: &JoinHandle<u32>) -> loom::thread::JoinHandle<Option<RunningTask>> {
    let task = join.control().expect("not joined yet");
    loom::thread::spawn(move || {
        let token = task.claim_move(1).ok()?;
        assert!(!token.take_count(), "a moved token starts uncounted");
        Some(token)
    })
}

/// Every count taken (`taken`) was given back once; the future was dropped
/// once.
fn assert_balanced(recorder: &Recorder, signals: &Signals, taken: usize) {
    assert_eq!(
        recorder.released.load(Ordering::SeqCst),
        taken,
        "counts given back"
    );
    assert_eq!(signals.drops.load(Ordering::SeqCst), 1, "dropped once");
}

/// A move racing the queued token's start, the moved token run at once
/// on the mover's thread: the task runs once, from the token that won;
/// the other is stale and gives back its own count.
#[test]
fn move_racing_a_start() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(0);
        assert!(!task.take_count());
        let control = join.control().unwrap();
        let mover = loom::thread::spawn(move || {
            let token = control.claim_move(1).ok()?;
            assert!(!token.take_count());
            assert!(matches!(
                token.run(),
                RunOutcome::Completed | RunOutcome::Stale
            ));
            Some(())
        });
        assert!(matches!(
            task.run(),
            RunOutcome::Completed | RunOutcome::Stale
        ));
        let taken = 1 + usize::from(mover.join().unwrap().is_some());
        assert!(lock(&recorder.queued).is_empty());
        assert_eq!(futures::executor::block_on(join).unwrap(), 7);
        assert_balanced(&recorder, &signals, taken);
    });
}

/// A move racing the queued token's drop (a channel dropping it at close):
/// either the drop cancels the task and the move finds it gone, or the
/// move wins, the drop is of a stale token, and the moved token runs.
#[test]
fn move_racing_a_drop() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(0);
        assert!(!task.take_count());
        let mover = spawn_mover(&join);
        drop(task);
        let moved = mover.join().unwrap();
        let taken = 1 + usize::from(moved.is_some());
        let ran = moved.map(|token| token.run());
        let output = futures::executor::block_on(join);
        match ran {
            Some(outcome) => {
                assert!(outcome.finished());
                assert_eq!(output.unwrap(), 7);
            }
            None => assert!(output.unwrap_err().is_cancelled()),
        }
        assert_balanced(&recorder, &signals, taken);
    });
}

/// A move racing an abort and the queued token's start: the task is
/// polled at most once, or dropped unpolled; never lost, never twice.
#[test]
fn move_racing_an_abort_and_a_start() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(0);
        let mover = spawn_mover(&join);
        let aborter = spawn_aborter(&join);
        assert!(matches!(
            task.run(),
            RunOutcome::Completed | RunOutcome::Aborted | RunOutcome::Stale
        ));
        aborter.join().unwrap();
        if let Some(token) = mover.join().unwrap() {
            assert!(matches!(
                token.run(),
                RunOutcome::Completed | RunOutcome::Aborted | RunOutcome::Stale
            ));
        }
        assert!(lock(&recorder.queued).is_empty());
        assert_output_or_aborted(join);
        let taken = recorder.released.load(Ordering::SeqCst);
        assert!(taken <= 1, "only the moved token took a count");
        assert_balanced(&recorder, &signals, taken);
    });
}

/// A moved task parks; two wakes race each other and the polls they
/// cause: each is honoured with a token of the new line, which carries the
/// line's count; the old token, run late, is stale.
#[test]
fn a_moved_task_wakes_racing_its_polls() {
    loom::model(|| {
        let (recorder, signals, task, join) = new_task(2);
        assert!(!task.take_count());
        let moved = join
            .control()
            .unwrap()
            .claim_move(1)
            .expect("queued: moved");
        assert!(!moved.take_count());
        // The first poll registers the waker the openers will hold.
        assert!(matches!(moved.run(), RunOutcome::Pending));
        let openers: Vec<_> = (0..2)
            .map(|_| {
                let signals = signals.clone();
                loom::thread::spawn(move || open(&signals))
            })
            .collect();
        let runs = drive(&recorder, &signals, 2);
        for opener in openers {
            opener.join().unwrap();
        }
        assert!(runs <= 2, "more polls than wakes");
        assert!(matches!(task.run(), RunOutcome::Stale));
        assert_eq!(futures::executor::block_on(join).unwrap(), 7);
        assert_balanced(&recorder, &signals, 2);
    });
}

/// A future that yields once, and in that first poll starts a thread that
/// tries to move its task (the mover then races the poll's end and what
/// follows it).
struct MovedWhilePolled {
    /// The task itself, put in after the spawn; taken by the first poll.
    control: Arc<Mutex<Option<Arc<dyn Control>>>>,
    mover: Arc<Mutex<Option<loom::thread::JoinHandle<Option<MoveError>>>>>,
    drops: Arc<AtomicUsize>,
}

impl Future for MovedWhilePolled {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        let Some(control) = lock(&self.control).take() else {
            return Poll::Ready(7);
        };
        let mover = loom::thread::spawn(move || control.claim_move(2).err());
        *lock(&self.mover) = Some(mover);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

impl Drop for MovedWhilePolled {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Spawns a `MovedWhilePolled` task: (recorder, its drops, the mover's
/// slot, token, handle). The control it holds (a cycle) goes with its
/// first poll or with the future.
#[allow(clippy::type_complexity)]
fn new_moved_while_polled() -> (
    Arc<Recorder>,
    Arc<AtomicUsize>,
    Arc<Mutex<Option<loom::thread::JoinHandle<Option<MoveError>>>>>,
    RunningTask,
    JoinHandle<u32>,
) {
    let recorder = Arc::new(Recorder::default());
    let weak = SchedulerRef::new(Arc::downgrade(&recorder) as Weak<dyn Schedule>);
    let slot = Arc::new(Mutex::new(None));
    let drops = Arc::new(AtomicUsize::new(0));
    let control = Arc::new(Mutex::new(None));
    let (task, join) = spawn(
        MovedWhilePolled {
            control: control.clone(),
            mover: slot.clone(),
            drops: drops.clone(),
        },
        weak,
    );
    *lock(&control) = join.control();
    (recorder, drops, slot, task, join)
}

/// A move racing the end of a yielding poll and an abort (the poll's end
/// leaves the word running and re-queues the task; the re-queued token's
/// start finds the abort and drops the future): the move, made during the
/// poll or after it, finds the task running or aborted and claims nothing;
/// the future is dropped once. (A poll's end that left a token-less
/// `SCHEDULED`, as it once did, was claimed by a move before moves needed
/// a task not started: two parties then held the stage.)
#[test]
fn move_racing_an_aborted_yield() {
    loom::model(|| {
        let (recorder, drops, mover, task, join) = new_moved_while_polled();
        let aborter = spawn_aborter(&join);
        run_until_complete(&recorder, Some(task));
        aborter.join().unwrap();
        // (Aborted before its first poll: no mover.)
        if let Some(mover) = lock(&mover).take() {
            assert!(mover.join().unwrap().is_some(), "a started task moved");
        }
        assert!(lock(&recorder.queued).is_empty(), "queued after completion");
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        let result = futures::executor::block_on(join);
        if let Err(error) = result {
            assert_eq!(error.cancel_reason(), Some(CancelReason::Aborted));
        }
    });
}

/// A moved task, started, yields; a second move races the poll's end and
/// the token it makes: refused, so the line's count stays in one place.
#[test]
fn a_second_move_racing_a_moved_task_s_yield() {
    loom::model(|| {
        let (recorder, drops, mover, task, join) = new_moved_while_polled();
        assert!(!task.take_count());
        let moved = join
            .control()
            .unwrap()
            .claim_move(1)
            .expect("queued: moved");
        assert!(!moved.take_count());
        run_until_complete(&recorder, Some(moved));
        let mover = lock(&mover).take().expect("polled once");
        assert!(mover.join().unwrap().is_some(), "a started task moved");
        assert!(matches!(task.run(), RunOutcome::Stale));
        assert_eq!(futures::executor::block_on(join).unwrap(), 7);
        assert_eq!(
            recorder.released.load(Ordering::SeqCst),
            2,
            "counts given back"
        );
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    });
}
