//! Unit tests of the task cell without a pool: what the loom models check
//! under interleavings, checked here for memory safety (these are the tests
//! CI runs under miri, which covers the `unsafe` pin projection).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use super::*;

impl RunOutcome {
    /// Whether the task finished (with its output, a panic, or aborted).
    fn finished(&self) -> bool {
        matches!(
            self,
            RunOutcome::Completed | RunOutcome::Panicked | RunOutcome::Aborted
        )
    }
}

#[derive(Default)]
struct Recorder {
    queued: Mutex<Vec<RunningTask>>,
    /// Tasks registered as parked.
    parked: Mutex<Vec<Weak<dyn CloseWake>>>,
    released: AtomicUsize,
    /// Schedules of tasks woken while running (yields).
    yields: AtomicUsize,
}

impl Schedule for Recorder {
    fn schedule(&self, task: RunningTask) {
        if task.is_requeued() {
            self.yields.fetch_add(1, Ordering::SeqCst);
        }
        self.queued.lock().unwrap().push(task);
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
        false
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
        let mut parked = self.parked.lock().unwrap();
        parked.push(task);
        parked.len() as u32 - 1
    }
    fn unregister(&self, _key: usize, _slot: u32) {}
    fn drops(&self, _counted: bool) -> bool {
        false
    }
    fn count_abandoned(&self) {}
}

fn weak(r: &Arc<Recorder>) -> SchedulerRef {
    SchedulerRef::new(Arc::downgrade(r) as Weak<dyn Schedule>)
}

/// Parks until `open`, keeping its latest waker in `slot`; counts drops.
struct Parked {
    open: Arc<Mutex<bool>>,
    slot: Arc<Mutex<Option<Waker>>>,
    drops: Arc<AtomicUsize>,
    payload: Vec<u64>, // heap data inside the pinned future
}

impl Future for Parked {
    type Output = u64;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        if *self.open.lock().unwrap() {
            return Poll::Ready(self.payload.iter().sum());
        }
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fixture {
    open: Arc<Mutex<bool>>,
    slot: Arc<Mutex<Option<Waker>>>,
    drops: Arc<AtomicUsize>,
}

fn parked(recorder: &Arc<Recorder>) -> (Fixture, RunningTask, JoinHandle<u64>) {
    let f = Fixture {
        open: Arc::new(Mutex::new(false)),
        slot: Arc::new(Mutex::new(None)),
        drops: Arc::new(AtomicUsize::new(0)),
    };
    let future = Parked {
        open: f.open.clone(),
        slot: f.slot.clone(),
        drops: f.drops.clone(),
        payload: vec![1, 2, 3],
    };
    let (task, join) = spawn(future, weak(recorder));
    (f, task, join)
}

#[test]
fn parks_is_woken_from_another_thread_and_completes() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    assert!(matches!(task.run(), RunOutcome::Pending));
    let waker = f.slot.lock().unwrap().take().unwrap();
    *f.open.lock().unwrap() = true;
    std::thread::spawn(move || {
        waker.wake_by_ref();
        waker.wake(); // a second wake before the run is a no-op
    })
    .join()
    .unwrap();
    let token = recorder.queued.lock().unwrap().pop().expect("queued once");
    assert!(recorder.queued.lock().unwrap().is_empty());
    assert!(token.run().finished());
    assert_eq!(f.drops.load(Ordering::SeqCst), 1);
    assert_eq!(futures::executor::block_on(join).unwrap(), 6);
}

#[test]
fn a_wake_during_the_poll_requeues_without_recursion() {
    let recorder = Arc::new(Recorder::default());
    let mut left = 3;
    let (task, join) = spawn(
        futures::future::poll_fn(move |cx| {
            if left == 0 {
                return Poll::Ready("done");
            }
            left -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }),
        weak(&recorder),
    );
    let mut next = task;
    loop {
        match next.run() {
            RunOutcome::Completed | RunOutcome::Panicked | RunOutcome::Aborted => break,
            RunOutcome::Stale => unreachable!("never moved"),
            RunOutcome::Pending => {
                // Woken during its poll: handed back at once, as a yield.
                next = recorder
                    .queued
                    .lock()
                    .unwrap()
                    .pop()
                    .expect("woken during its poll: scheduled, not parked");
            }
        }
    }
    assert_eq!(recorder.yields.load(Ordering::SeqCst), 3);
    assert_eq!(futures::executor::block_on(join).unwrap(), "done");
}

#[test]
fn a_dropped_token_cancels_and_drops_the_future_once() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    task.take_count();
    drop(task);
    assert_eq!(f.drops.load(Ordering::SeqCst), 1);
    assert_eq!(
        recorder.released.load(Ordering::SeqCst),
        1,
        "a counted task releases"
    );
    assert!(futures::executor::block_on(join)
        .unwrap_err()
        .is_cancelled());
}

#[test]
fn a_panic_in_poll_is_caught_and_reported() {
    let recorder = Arc::new(Recorder::default());
    let (task, join) = spawn(async { panic!("inside") }, weak(&recorder));
    assert!(task.run().finished());
    let err = futures::executor::block_on(join).unwrap_err();
    assert_eq!(err.to_string(), "task panicked: inside");
}

#[test]
fn an_abandoned_counted_task_releases_when_freed() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    task.take_count();
    assert!(matches!(task.run(), RunOutcome::Pending));
    drop(join);
    assert_eq!(
        recorder.released.load(Ordering::SeqCst),
        0,
        "its waker still holds it"
    );
    drop(f.slot.lock().unwrap().take()); // the last waker
    assert_eq!(f.drops.load(Ordering::SeqCst), 1);
    assert_eq!(recorder.released.load(Ordering::SeqCst), 1);
}

#[test]
fn a_wake_after_the_pool_is_gone_cancels() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    assert!(matches!(task.run(), RunOutcome::Pending));
    drop(recorder);
    f.slot.lock().unwrap().take().unwrap().wake();
    assert_eq!(f.drops.load(Ordering::SeqCst), 1);
    assert!(futures::executor::block_on(join)
        .unwrap_err()
        .is_cancelled());
}

/// The waker's reference becomes the token (`ArcWake::wake`): with the
/// handle and the pool gone, it is the last one, and the cell is freed
/// inside the wake, as the token is dropped for want of a pool (miri runs
/// this test: a use of the cell after that point would show).
#[test]
fn the_last_waker_woken_by_value_frees_the_task() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    assert!(matches!(task.run(), RunOutcome::Pending));
    drop(join);
    drop(recorder);
    let waker = f.slot.lock().unwrap().take().unwrap();
    assert_eq!(f.drops.load(Ordering::SeqCst), 0, "the waker holds it");
    waker.wake();
    assert_eq!(f.drops.load(Ordering::SeqCst), 1);
}

#[test]
fn wakes_after_completion_do_nothing() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, join) = parked(&recorder);
    *f.open.lock().unwrap() = true;
    assert!(task.run().finished());
    assert_eq!(futures::executor::block_on(join).unwrap(), 6);
    // The future kept no waker (it completed at once); make one by hand.
    let (f2, task2, join2) = parked(&recorder);
    assert!(matches!(task2.run(), RunOutcome::Pending));
    *f2.open.lock().unwrap() = true;
    let waker = f2.slot.lock().unwrap().take().unwrap();
    waker.wake_by_ref();
    let token = recorder.queued.lock().unwrap().pop().unwrap();
    assert!(token.run().finished());
    waker.wake_by_ref();
    waker.wake();
    assert!(recorder.queued.lock().unwrap().is_empty());
    assert_eq!(futures::executor::block_on(join2).unwrap(), 6);
}

/// The header keeps to 48 bytes (the pool as one thin pointer; the moved
/// line's entry and the join waker's state byte fit in its
/// padding: the suite's W10).
#[test]
fn the_header_fits_in_48_bytes() {
    assert!(
        std::mem::size_of::<super::cell::Header>() <= 48,
        "{} bytes",
        std::mem::size_of::<super::cell::Header>()
    );
}

/// A small task (a closure holding one `Arc`) takes a 64-byte cell: a
/// two-word stage (an enum of the future and a one-word `Result`,
/// `JoinError` being one word) beside the header, so that with the `Arc`'s
/// counts it is an 80-byte allocation: glibc's 96-byte chunk, and with the
/// injector's 16-byte slot, 112 bytes a queued task (W10).
#[test]
fn a_small_task_cell_is_64_bytes() {
    fn cell_size<F: std::future::Future>(_: &F) -> usize {
        std::mem::size_of::<super::cell::TaskCell<F>>()
    }
    let shared = std::sync::Arc::new(0u8);
    let task = crate::run(move || drop(shared));
    assert_eq!(std::mem::size_of::<super::JoinError>(), 8);
    assert_eq!(std::mem::size_of::<Result<(), super::JoinError>>(), 8);
    assert!(cell_size(&task) <= 64, "{} bytes", cell_size(&task));
}

/// Every cancel reason and a panic's payload survive the one-word
/// `JoinError`: the reason reads back, the payload comes out whole (and is
/// freed once when not taken: miri and valgrind check).
#[test]
fn join_error_keeps_its_reason_and_payload() {
    for reason in (0..=u8::MAX).filter_map(CancelReason::from_code) {
        let error = JoinError::cancelled(reason);
        assert!(error.is_cancelled() && !error.is_panic());
        assert_eq!(error.cancel_reason(), Some(reason));
        assert!(error.try_into_panic().is_err());
    }
    let error = JoinError::panicked(Box::new(String::from("boom")));
    assert!(error.is_panic() && !error.is_cancelled());
    assert_eq!(error.cancel_reason(), None);
    assert_eq!(error.to_string(), "task panicked: boom");
    let payload = error.try_into_panic().ok().unwrap();
    assert_eq!(payload.downcast_ref::<String>().unwrap(), "boom");
    drop(JoinError::panicked(Box::new(7u64)));
}

/// A waker whose `clone` panics.
fn clone_panics() -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(_: *const ()) -> RawWaker {
        panic!("this waker cannot be cloned")
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer.
    unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
}

/// A joiner whose waker panics while the handle registers it leaves the
/// join slot as it found it (see `join_waker`): the task completes and the
/// handle, polled again, returns the output.
#[test]
fn a_waker_that_panics_in_clone_does_not_wedge_the_join() {
    let recorder = Arc::new(Recorder::default());
    let (f, task, mut join) = parked(&recorder);
    assert!(matches!(task.run(), RunOutcome::Pending));
    let waker = clone_panics();
    let mut cx = Context::from_waker(&waker);
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Pin::new(&mut join).poll(&mut cx)
    }));
    assert!(polled.is_err(), "the clone panicked");
    // Polled again before the task completes, with a good waker: it is
    // registered, and the completion wakes it.
    let flag = Arc::new(Flag(AtomicUsize::new(0)));
    let good = futures::task::waker(flag.clone());
    let mut cx = Context::from_waker(&good);
    assert!(Pin::new(&mut join).poll(&mut cx).is_pending());
    *f.open.lock().unwrap() = true;
    let woken = f.slot.lock().unwrap().take().unwrap();
    woken.wake();
    let token = recorder.queued.lock().unwrap().pop().unwrap();
    assert!(token.run().finished());
    assert_eq!(
        flag.0.load(Ordering::SeqCst),
        1,
        "the completion woke the joiner"
    );
    assert!(matches!(
        Pin::new(&mut join).poll(&mut cx),
        Poll::Ready(Ok(6))
    ));
}

/// Counts its wakes.
struct Flag(AtomicUsize);

impl futures::task::ArcWake for Flag {
    fn wake_by_ref(arc: &Arc<Self>) {
        arc.0.fetch_add(1, Ordering::SeqCst);
    }
}
