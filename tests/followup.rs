//! Futures and followup: a parked future woken from outside goes through the
//! behavior's followup exactly once per wake-up; self-wakes never recurse;
//! wakers work from any thread, after completion and after the pool is gone.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use common::{scaled, DropCounter, Gate, Lv, TwoLevels, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn a_future_woken_from_another_thread_resumes_through_followup() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let (tx, rx) = oneshot::channel::<u32>();
    let h = pool.low.exec(async move { rx.await.unwrap() + 1 });
    std::thread::spawn(move || tx.send(41).unwrap());
    assert_eq!(block_on(h).unwrap(), 42);
    // Parked once (or not at all if the send came first): at most one
    // followup, and only from the channel it ran on.
    assert!(pool.followups[Lv::Low as usize].load(Ordering::SeqCst) <= 1);
    assert_eq!(pool.followups[Lv::High as usize].load(Ordering::SeqCst), 0);
    block_on(owned.close());
}

/// Parks until its gate opens, registering its waker in `slot`.
struct Parked {
    slot: Arc<Mutex<Option<Waker>>>,
    open: Arc<Mutex<bool>>,
    polls: Arc<Mutex<u32>>,
}

impl Future for Parked {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        *self.polls.lock().unwrap() += 1;
        *self.slot.lock().unwrap() = Some(cx.waker().clone());
        if *self.open.lock().unwrap() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[test]
fn many_wakes_of_a_parked_task_queue_it_once() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let slot = Arc::new(Mutex::new(None));
    let open = Arc::new(Mutex::new(false));
    let polls = Arc::new(Mutex::new(0));
    // Hold the only worker so the wakes all land while the task is queued.
    let gate = Gate::new();
    let g = gate.clone();
    let h = pool.low.exec(Parked {
        slot: slot.clone(),
        open: open.clone(),
        polls: polls.clone(),
    });
    while slot.lock().unwrap().is_none() {
        std::thread::yield_now();
    }
    let blocker = pool.high.exec(run(move || g.wait()));
    let waker = slot.lock().unwrap().clone().unwrap();
    *open.lock().unwrap() = true;
    let wakers: Vec<_> = (0..8)
        .map(|_| {
            let w = waker.clone();
            std::thread::spawn(move || (0..scaled(1000)).for_each(|_| w.wake_by_ref()))
        })
        .collect();
    for w in wakers {
        w.join().unwrap();
    }
    gate.open();
    block_on(blocker).unwrap();
    block_on(h).unwrap();
    assert_eq!(
        *polls.lock().unwrap(),
        2,
        "8,000 wakes of a parked task make one poll"
    );
    assert_eq!(pool.followups[Lv::Low as usize].load(Ordering::SeqCst), 1);
    block_on(owned.close());
}

/// Wakes itself `left` times, then completes.
struct SelfWaker {
    left: u32,
}

impl Future for SelfWaker {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        if self.left == 0 {
            return Poll::Ready(7);
        }
        self.left -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[test]
fn a_future_waking_itself_a_million_times_completes() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let wakes = if cfg!(miri) { 1_000 } else { 1_000_000 };
    let h = owned.pool.low.exec(SelfWaker { left: wakes });
    assert_eq!(block_on(h).unwrap(), 7);
    assert_eq!(
        owned.pool.followups[Lv::Low as usize].load(Ordering::SeqCst),
        wakes as usize
    );
    block_on(owned.close());
}

#[test]
fn followup_can_promote_a_woken_task() {
    struct Promote(TwoLevels);
    impl PoolBehavior for Promote {
        type ChannelKey = Lv;
        fn config(&self) -> PoolConfig<Lv> {
            self.0.config()
        }
        fn channel(&self, key: Lv) -> &dyn Channel {
            self.0.channel(key)
        }
        fn followup(&self, from: Lv, task: RunningTask) {
            self.0.followups[from as usize].fetch_add(1, Ordering::SeqCst);
            self.0.high.submit(task);
        }
    }
    let owned = OwnedPool::new(Promote(TwoLevels::new(1))).unwrap();
    let pool = owned.pool.clone();
    let h = pool.0.low.exec(SelfWaker { left: 3 });
    block_on(h).unwrap();
    // First yield came from Low, the rest from High, where it was promoted.
    assert_eq!(pool.0.followups[Lv::Low as usize].load(Ordering::SeqCst), 1);
    assert_eq!(
        pool.0.followups[Lv::High as usize].load(Ordering::SeqCst),
        2
    );
    block_on(owned.close());
}

#[test]
fn wakers_are_harmless_after_completion_and_after_the_pool_is_gone() {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let slot = Arc::new(Mutex::new(None));
    let open = Arc::new(Mutex::new(true));
    let polls = Arc::new(Mutex::new(0));
    let h = owned.pool.low.exec(Parked {
        slot: slot.clone(),
        open,
        polls,
    });
    block_on(h).unwrap();
    let done_waker = slot.lock().unwrap().take().unwrap();
    assert_send_sync(&done_waker);
    done_waker.wake_by_ref(); // after completion: nothing happens

    // A non-complete_on_close task parked when the pool closes.
    let drops = DropCounter::new();
    let token = drops.token();
    let slot = Arc::new(Mutex::new(None));
    let parked = owned.pool.low.exec(Parked {
        slot: slot.clone(),
        open: Arc::new(Mutex::new(false)),
        polls: Arc::new(Mutex::new(0)),
    });
    let kept_parked = Gate::new();
    let k = kept_parked.clone();
    let keep = owned.pool.low.exec(async move {
        let _token = token;
        k.open();
        futures::future::pending::<()>().await
    });
    while slot.lock().unwrap().is_none() {
        std::thread::yield_now();
    }
    // Both have parked (one worker: `keep` runs after `parked`; once its
    // gate is open its poll is under way, and a short task behind it on the
    // same worker proves the poll returned).
    assert!(kept_parked.wait_for(FAILSAFE));
    block_on(owned.pool.low.exec(run(|| ()))).unwrap();
    let waker = slot.lock().unwrap().take().unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    drop(pool); // the pool is gone
                // Close's sweep dropped it; a wake after the pool is gone does nothing.
    std::thread::spawn(move || waker.wake()).join().unwrap();
    assert!(
        block_on(parked).unwrap_err().is_cancelled(),
        "dropped by close"
    );
    drop(done_waker);
    // `keep` was parked with no waker left but its handle: close's sweep
    // dropped it, once.
    assert_eq!(drops.drops(), 1);
    assert!(block_on(keep).unwrap_err().is_cancelled());
    assert_eq!(drops.drops(), 1);
}

#[test]
fn a_task_followed_up_into_another_pools_channel_is_cancelled() {
    // Pool A's followup sends woken tasks to pool B's channel: B refuses
    // them (their close accounting is A's), and both pools still close.
    struct ToOther {
        own: TwoLevels,
        other: Arc<Pool<TwoLevels>>,
    }
    impl PoolBehavior for ToOther {
        type ChannelKey = Lv;
        fn config(&self) -> PoolConfig<Lv> {
            self.own.config()
        }
        fn channel(&self, key: Lv) -> &dyn Channel {
            self.own.channel(key)
        }
        fn followup(&self, _from: Lv, task: RunningTask) {
            self.other.high.submit(task);
        }
    }
    let b = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let a = OwnedPool::new(ToOther {
        own: TwoLevels::new(1),
        other: b.pool.clone(),
    })
    .unwrap();
    let drops = DropCounter::new();
    let token = drops.token();
    // complete_on_close in A; it yields once, and its followup goes to B.
    let h = a.pool.own.high.exec(async move {
        let _token = token;
        SelfWaker { left: 1 }.await
    });
    let outcome = block_on(h);
    // Close both before asserting, so that a failure reports instead of
    // hanging in an OwnedPool's drop.
    let a_closed = common::close_within(a, FAILSAFE);
    let b_closed = common::close_within(b, FAILSAFE);
    assert!(outcome.unwrap_err().is_cancelled());
    assert_eq!(drops.drops(), 1);
    assert!(a_closed, "A waited for a task it lost");
    assert!(b_closed, "B's count was corrupted");
}
