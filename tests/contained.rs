//! A panic in user code the pool calls is contained: a custom channel's
//! `push`, `pop` and `may_have_tasks`, and a future dropped because its last
//! waker was dropped. None strands a task, starves another channel, escapes
//! into an unrelated thread, or stops close.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use common::{close_within, FAILSAFE};
use futures::executor::block_on;
use smartpool::channel::{ChannelLink, LinkSlot, WorkerContext};
use smartpool::prelude::*;

/// A FIFO behind a mutex whose `push` (after storing), `pop` and
/// `may_have_tasks` can be made to panic.
#[derive(Default)]
struct Faulty {
    link: LinkSlot,
    queue: Mutex<VecDeque<RunningTask>>,
    push_panics: AtomicBool,
    pop_panics: AtomicBool,
    look_panics: AtomicBool,
}

impl Channel for Faulty {
    fn link_slot(&self) -> &LinkSlot {
        &self.link
    }
    fn push(&self, task: RunningTask, _: &ChannelLink) {
        self.queue.lock().unwrap().push_back(task);
        if self.push_panics.load(Ordering::SeqCst) {
            panic!("push panics after storing the task");
        }
    }
    fn pop(&self, _: &WorkerContext<'_>) -> Option<RunningTask> {
        if self.pop_panics.load(Ordering::SeqCst) {
            panic!("pop panics");
        }
        self.queue.lock().unwrap().pop_front()
    }
    fn may_have_tasks(&self) -> bool {
        if self.look_panics.load(Ordering::SeqCst) {
            panic!("may_have_tasks panics");
        }
        !self.queue.lock().unwrap().is_empty()
    }
}

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Faulty,
    Below,
}

struct Behavior {
    faulty: Faulty,
    below: VecDequeChannel,
    threads: usize,
}

impl Behavior {
    fn new(threads: usize) -> Behavior {
        Behavior {
            faulty: Faulty::default(),
            below: VecDequeChannel::new(),
            threads,
        }
    }
}

impl PoolBehavior for Behavior {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: self.threads,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Faulty,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Ch::Below,
                    complete_on_close: true,
                }],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Faulty => &self.faulty,
            Ch::Below => &self.below,
        }
    }
    fn followup(&self, from: Ch, task: RunningTask) {
        self.channel(from).submit(task);
    }
}

/// A push that stores the task and then panics: the task still runs (the
/// pool marks the channel as holding work all the same), the panic does
/// not reach the submitter, and close finishes.
#[test]
fn a_push_that_panics_after_storing_does_not_strand_the_task() {
    for threads in [1, 2] {
        let owned = OwnedPool::new(Behavior::new(threads)).unwrap();
        let pool = owned.pool.clone();
        pool.faulty.push_panics.store(true, Ordering::SeqCst);
        let handles: Vec<_> = (0..10)
            .map(|i| pool.faulty.exec(async move { i }))
            .collect();
        pool.faulty.push_panics.store(false, Ordering::SeqCst);
        for (i, handle) in handles.into_iter().enumerate() {
            assert_eq!(block_on(handle).unwrap(), i);
        }
        assert!(close_within(owned, FAILSAFE), "close finished");
    }
}

/// A pop that always panics: the lower level is still served, and close
/// still finishes (the broken channel's tasks are dropped by close's drain
/// or stay unreachable; close does not wait for ever on the workers).
#[test]
fn a_pop_that_always_panics_does_not_starve_the_levels_below() {
    for threads in [1, 2] {
        let owned = OwnedPool::new(Behavior::new(threads)).unwrap();
        let pool = owned.pool.clone();
        pool.faulty.pop_panics.store(true, Ordering::SeqCst);
        let stuck = pool.faulty.exec(async { 0 });
        let below: Vec<_> = (0..100)
            .map(|i| pool.below.exec(async move { i }))
            .collect();
        for (i, handle) in below.into_iter().enumerate() {
            assert_eq!(block_on(handle).unwrap(), i, "the level below was served");
        }
        // The channel recovers: its task runs.
        pool.faulty.pop_panics.store(false, Ordering::SeqCst);
        assert_eq!(block_on(stuck).unwrap(), 0);
        assert!(close_within(owned, FAILSAFE), "close finished");
    }
}

/// `may_have_tasks` panicking is taken as "maybe": nothing is stranded.
#[test]
fn a_look_that_panics_counts_as_maybe() {
    let owned = OwnedPool::new(Behavior::new(2)).unwrap();
    let pool = owned.pool.clone();
    pool.faulty.look_panics.store(true, Ordering::SeqCst);
    let handles: Vec<_> = (0..100)
        .map(|i| pool.faulty.exec(async move { i }))
        .collect();
    for (i, handle) in handles.into_iter().enumerate() {
        assert_eq!(block_on(handle).unwrap(), i);
    }
    pool.faulty.look_panics.store(false, Ordering::SeqCst);
    assert!(close_within(owned, FAILSAFE));
}

/// A future whose destructor panics, parked, then freed by dropping its
/// last wakers on a thread of ours: the panic stays inside the pool's
/// code (logged), even with two such wakers in one `Vec` (a second panic
/// while the first unwinds would abort the process).
#[test]
fn a_future_dropped_with_its_last_waker_does_not_panic_the_dropper() {
    struct PanicOnDrop(Arc<AtomicUsize>);
    impl Drop for PanicOnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            panic!("the future panics in drop");
        }
    }
    let owned = OwnedPool::new(Behavior::new(1)).unwrap();
    let pool = owned.pool.clone();
    let drops = Arc::new(AtomicUsize::new(0));
    let wakers = Arc::new(Mutex::new(Vec::<Waker>::new()));
    let parked = common::CountDown::new(2);
    let mut handles = Vec::new();
    for _ in 0..2 {
        let (guard, wakers, parked) = (PanicOnDrop(drops.clone()), wakers.clone(), parked.clone());
        // Parks for ever, having handed its waker out.
        let future = futures::future::poll_fn(move |cx: &mut Context<'_>| {
            let _keep = &guard;
            wakers.lock().unwrap().push(cx.waker().clone());
            parked.tick();
            Poll::<()>::Pending
        });
        handles.push(pool.below.exec(future));
    }
    assert!(parked.wait_for(FAILSAFE));
    drop(handles); // the wakers now hold the last references
    let all: Vec<Waker> = std::mem::take(&mut *wakers.lock().unwrap());
    drop(all);
    assert_eq!(drops.load(Ordering::SeqCst), 2, "both futures were dropped");
    assert!(close_within(owned, FAILSAFE));
}
