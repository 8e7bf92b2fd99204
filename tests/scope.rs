//! Scoped tasks: borrow from the caller's stack, end before `scope`
//! returns (completed, panicked or dropped by a close), propagate panics
//! after every task ended, and do not deadlock a worker that waits.

mod common;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};

use common::{scaled, DropCounter, Gate, TwoLevels, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;

#[test]
fn tasks_borrow_the_stack_mutably_and_shared() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let mut cells = vec![0usize; scaled(1000)];
    let offset = 7; // borrowed shared by every task
    let sum = AtomicUsize::new(0);
    smartpool::scope(|s| {
        for (i, cell) in cells.iter_mut().enumerate() {
            let (offset, sum) = (&offset, &sum);
            s.exec(
                &pool.low,
                run(move || {
                    *cell = i + offset;
                    sum.fetch_add(*cell, Ordering::Relaxed);
                }),
            );
        }
    });
    let n = cells.len();
    assert!(cells.iter().enumerate().all(|(i, &c)| c == i + 7));
    assert_eq!(sum.into_inner(), n * (n - 1) / 2 + 7 * n);
    block_on(owned.close());
}

#[test]
fn scope_returns_the_body_value_and_handles_give_outputs() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let text = String::from("borrowed");
    let (joined, awaited, body) = smartpool::scope(|s| {
        let len = s.exec(&pool.high, run(|| text.len()));
        let upper = s.exec(&pool.low, async { text.to_uppercase() });
        // A handle awaited from another scoped task.
        let awaited = s.exec(&pool.low, async move { upper.await.unwrap() + "!" });
        (len.join().unwrap(), awaited.join().unwrap(), "body")
    });
    assert_eq!((joined, awaited.as_str(), body), (8, "BORROWED!", "body"));
    block_on(owned.close());
}

/// A task parked on an outside event keeps the scope waiting until it is
/// woken (through its followup) and finishes.
#[test]
fn scope_waits_for_a_parked_task() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let (tx, mut rx) = oneshot::channel::<usize>();
    let (parked, parked_rx) = mpsc::channel();
    let waker_thread = std::thread::spawn(move || {
        parked_rx.recv().unwrap();
        // Give a broken scope every chance to return early.
        std::thread::sleep(std::time::Duration::from_millis(20));
        tx.send(5).unwrap();
    });
    let mut got = 0;
    smartpool::scope(|s| {
        s.exec(
            &pool.low,
            futures::future::poll_fn(|cx| {
                let polled = std::pin::Pin::new(&mut rx).poll(cx);
                match polled {
                    Poll::Pending => {
                        let _ = parked.send(()); // parked: now wake it
                        Poll::Pending
                    }
                    Poll::Ready(value) => {
                        got = value.unwrap();
                        Poll::Ready(())
                    }
                }
            }),
        );
    });
    assert_eq!(got, 5, "scope returned before its parked task ended");
    waker_thread.join().unwrap();
    assert!(pool.followups[1].load(Ordering::SeqCst) >= 1);
    block_on(owned.close());
}

#[test]
fn a_task_panic_propagates_after_every_task_ended() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let finished = AtomicUsize::new(0);
    let result = catch_unwind(AssertUnwindSafe(|| {
        smartpool::scope(|s| {
            let failing = s.exec(&pool.low, run(|| panic!("scoped boom")));
            for _ in 0..4 {
                s.exec(
                    &pool.low,
                    run(|| {
                        assert!(gate.wait_for(FAILSAFE));
                        finished.fetch_add(1, Ordering::SeqCst);
                    }),
                );
            }
            let error = failing.join().unwrap_err();
            assert!(error.is_panic() && error.to_string().contains("scoped boom"));
            // The others are still held: the panic must wait for them.
            gate.open();
        })
    }));
    let payload = result.expect_err("the task's panic reaches the caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"scoped boom"));
    assert_eq!(finished.load(Ordering::SeqCst), 4);
    // The workers survived the panic.
    assert_eq!(block_on(pool.low.exec(run(|| 3))).unwrap(), 3);
    block_on(owned.close());
}

#[test]
fn a_body_panic_waits_for_the_tasks_and_wins_over_theirs() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let finished = AtomicUsize::new(0);
    let gate = Gate::new();
    let (panicking, panicking_rx) = mpsc::channel();
    let g = gate.clone();
    // Holds the tasks until the body has panicked.
    let opener = std::thread::spawn(move || {
        panicking_rx.recv().unwrap();
        g.open();
    });
    let result = catch_unwind(AssertUnwindSafe(|| {
        smartpool::scope(|s| {
            for _ in 0..8 {
                s.exec(
                    &pool.low,
                    run(|| {
                        assert!(gate.wait_for(FAILSAFE));
                        finished.fetch_add(1, Ordering::SeqCst);
                    }),
                );
            }
            s.exec(&pool.low, run(|| panic!("task")));
            panicking.send(()).unwrap();
            panic!("body");
        })
    }));
    opener.join().unwrap();
    assert_eq!(result.unwrap_err().downcast_ref::<&str>(), Some(&"body"));
    assert_eq!(finished.load(Ordering::SeqCst), 8);
    block_on(owned.close());
}

/// A scope inside a task of a 1-thread pool: its tasks queue behind the
/// waiting task's own worker, which runs them while it waits.
#[test]
fn a_scope_inside_a_task_of_a_one_thread_pool_does_not_deadlock() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let inner = pool.clone();
    let handle = pool.low.exec(run(move || {
        let mut parts = [0u64; 16];
        let inner = &*inner;
        smartpool::scope(|s| {
            for (i, part) in parts.iter_mut().enumerate() {
                // Both levels, and a nested scope in one of them.
                let channel: &dyn Channel = if i % 2 == 0 { &inner.high } else { &inner.low };
                s.exec(
                    channel,
                    run(move || {
                        *part = smartpool::scope(|s2| {
                            s2.exec(&inner.low, run(move || i as u64 * 2))
                                .join()
                                .unwrap()
                        });
                    }),
                );
            }
        });
        parts.iter().sum::<u64>()
    }));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(block_on(handle)));
    let Ok(sum) = rx.recv_timeout(FAILSAFE) else {
        std::mem::forget(owned); // closing would wait for the stuck worker
        panic!("the 1-thread pool deadlocked");
    };
    assert_eq!(sum.unwrap(), (0..16).map(|i| i * 2).sum::<u64>());
    block_on(owned.close());
}

/// A parked scoped task on a 1-thread pool whose only worker waits in the
/// scope: the wake-up's followup must reach the waiting worker.
#[test]
fn a_waiting_worker_is_woken_by_a_followup() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let inner = pool.clone();
    let (tx, rx) = oneshot::channel::<u32>();
    let (parked, parked_rx) = mpsc::channel::<()>();
    let handle = pool.high.exec(run(move || {
        let mut got = 0;
        smartpool::scope(|s| {
            s.exec(&inner.low, async {
                parked.send(()).unwrap();
                got = rx.await.unwrap();
            });
        });
        got
    }));
    parked_rx
        .recv_timeout(FAILSAFE)
        .expect("the scoped task ran");
    tx.send(9).unwrap();
    let (done, done_rx) = mpsc::channel();
    std::thread::spawn(move || done.send(block_on(handle)));
    let Ok(got) = done_rx.recv_timeout(FAILSAFE) else {
        std::mem::forget(owned); // closing would wait for the stuck worker
        panic!("the wake-up was lost");
    };
    assert_eq!(got.unwrap(), 9);
    block_on(owned.close());
}

#[test]
fn tasks_can_submit_more_tasks_to_their_scope() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let count = AtomicUsize::new(0);
    fn fan<'scope>(
        s: &'scope smartpool::Scope<'scope, '_>,
        pool: &'scope Pool<TwoLevels>,
        count: &'scope AtomicUsize,
        depth: u32,
    ) {
        count.fetch_add(1, Ordering::Relaxed);
        if depth > 0 {
            for _ in 0..2 {
                s.exec(&pool.low, run(move || fan(s, pool, count, depth - 1)));
            }
        }
    }
    let depth = if cfg!(miri) { 3 } else { 8 };
    smartpool::scope(|s| fan(s, &pool, &count, depth));
    assert_eq!(count.into_inner(), (1 << (depth + 1)) - 1);
    block_on(owned.close());
}

#[test]
fn outputs_of_detached_tasks_are_dropped_before_scope_returns() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let drops = DropCounter::new();
    smartpool::scope(|s| {
        for _ in 0..50 {
            let drops = &drops;
            // The handle is dropped at once; the output then has no reader.
            drop(s.exec(&pool.low, run(move || drops.token())));
        }
    });
    assert_eq!(drops.drops(), 50);
    block_on(owned.close());
}

#[test]
fn after_close_try_exec_gives_the_future_back_and_exec_cancels() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    block_on(owned.close());
    let mut untouched = 1;
    let drops = DropCounter::new();
    smartpool::scope(|s| {
        let rejected = s.try_exec(&pool.high, async { untouched = 2 }).unwrap_err();
        assert!(rejected.to_string().contains("closing or closed"));
        drop(rejected);
        let token = drops.token();
        let handle = s.exec(&pool.high, run(move || drop(token)));
        assert!(handle.join().unwrap_err().is_cancelled());
    });
    assert_eq!(untouched, 1);
    assert_eq!(drops.drops(), 1, "the refused closure was dropped, not run");
}

/// Queued tasks of a dropping channel are dropped by a close: they end,
/// cancelled, and the scope returns.
#[test]
fn a_close_drops_queued_scoped_tasks_and_the_scope_returns() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let (started, started_rx) = mpsc::channel();
    let g = gate.clone();
    let busy = pool.high.exec(run(move || {
        started.send(()).unwrap();
        g.wait();
    }));
    started_rx.recv().unwrap();
    let drops = DropCounter::new();
    let ran = AtomicUsize::new(0);
    let mut closing = None;
    smartpool::scope(|s| {
        let handles: Vec<_> = (0..10)
            .map(|_| {
                let (token, ran) = (drops.token(), &ran);
                s.exec(
                    &pool.low,
                    run(move || {
                        ran.fetch_add(1, Ordering::SeqCst);
                        drop(token);
                    }),
                )
            })
            .collect();
        closing = Some(owned.close());
        gate.open();
        for handle in handles {
            assert!(handle.join().unwrap_err().is_cancelled());
        }
    });
    assert_eq!((ran.into_inner(), drops.drops()), (0, 10));
    block_on(busy).unwrap();
    block_on(closing.unwrap());
}

/// A waker kept past the scope, then woken and dropped: the task ended
/// already, so nothing borrowed is touched (valgrind and miri check the
/// memory side).
#[test]
fn a_waker_that_outlives_the_scope_touches_nothing() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let kept: Arc<Mutex<Option<Waker>>> = Arc::default();
    {
        let borrowed = String::from("on the stack");
        let keep = kept.clone();
        smartpool::scope(|s| {
            s.exec(
                &pool.low,
                futures::future::poll_fn(|cx| {
                    *keep.lock().unwrap() = Some(cx.waker().clone());
                    Poll::Ready(borrowed.len())
                }),
            );
        });
    }
    let waker = kept.lock().unwrap().take().expect("the task ran");
    waker.wake_by_ref();
    drop(waker);
    block_on(owned.close());
}

/// The pool terminates while its only worker waits in a scope whose task
/// is parked: the worker stops helping and parks; the late wake-up's
/// followup finds the pool terminated and drops the task, which ends it and
/// unparks the worker.
#[test]
fn a_worker_waiting_in_a_terminated_pool_is_unparked() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let inner = pool.clone();
    let (tx, mut rx) = oneshot::channel::<u32>();
    let (parked, parked_rx) = mpsc::channel::<()>();
    // A dropping channel: close does not wait for the outer task.
    let outer = pool.low.exec(run(move || {
        smartpool::scope(|s| {
            let parks = futures::future::poll_fn(|cx| {
                let polled = std::pin::Pin::new(&mut rx).poll(cx);
                if polled.is_pending() {
                    let _ = parked.send(()); // pending: the close comes next
                }
                polled.map(Result::unwrap)
            });
            s.exec(&inner.low, parks).join()
        })
    }));
    parked_rx
        .recv_timeout(FAILSAFE)
        .expect("the scoped task ran");
    let closing = owned.close();
    assert!(pool.is_closing());
    // Close drops the parked scoped task (a dropping channel), its
    // receiver with it, now or as its poll ends: the send may find it gone.
    let _ = tx.send(1);
    let (done, done_rx) = mpsc::channel();
    std::thread::spawn(move || done.send(block_on(outer)));
    let outcome = done_rx
        .recv_timeout(FAILSAFE)
        .expect("the waiting worker was never woken");
    let joined = outcome.expect("the running outer task finishes");
    assert!(joined.unwrap_err().is_cancelled());
    block_on(closing);
}

/// A worker of one pool waits for scoped tasks of another: it helps its own
/// pool (which has nothing), sleeps in its own pool's sleep protocol, and
/// the last task, on the other pool, wakes it through its worker slot.
#[test]
fn a_worker_waiting_for_another_pools_tasks_is_woken() {
    let waiting = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let working = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let (w, other) = (waiting.pool.clone(), working.pool.clone());
    let (tx, mut rx) = oneshot::channel::<u32>();
    let (parked, parked_rx) = mpsc::channel::<()>();
    let outer = w.low.exec(run(move || {
        let mut got = 0;
        smartpool::scope(|s| {
            s.exec(
                &other.low,
                futures::future::poll_fn(|cx| match std::pin::Pin::new(&mut rx).poll(cx) {
                    Poll::Pending => {
                        let _ = parked.send(());
                        Poll::Pending
                    }
                    Poll::Ready(value) => {
                        got = value.unwrap();
                        Poll::Ready(())
                    }
                }),
            );
        });
        got
    }));
    parked_rx
        .recv_timeout(FAILSAFE)
        .expect("the scoped task ran");
    tx.send(4).unwrap();
    let (done, done_rx) = mpsc::channel();
    std::thread::spawn(move || done.send(block_on(outer)));
    let Ok(got) = done_rx.recv_timeout(FAILSAFE) else {
        std::mem::forget(waiting);
        panic!("the waiting worker of the other pool was never woken");
    };
    assert_eq!(got.unwrap(), 4);
    block_on(waiting.close());
    block_on(working.close());
}

/// A fan-out on a 1-thread pool: 200 sibling tasks, each waiting in a scope
/// of its own. The siblings queue ahead of each inner task, so every wait
/// runs the next sibling: the waits nest 200 deep on one stack, and all
/// finish.
#[test]
fn siblings_that_each_wait_nest_and_finish_on_one_thread() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let inner = pool.clone();
    let siblings = scaled(200);
    let outer = pool.low.exec(run(move || {
        let done = AtomicUsize::new(0);
        smartpool::scope(|s| {
            for _ in 0..siblings {
                s.exec(
                    &inner.low,
                    run(|| {
                        let value = smartpool::scope(|s2| s2.exec(&inner.low, run(|| 1)).join());
                        done.fetch_add(value.unwrap(), Ordering::SeqCst);
                    }),
                );
            }
        });
        done.into_inner()
    }));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(block_on(outer)));
    let Ok(done) = rx.recv_timeout(FAILSAFE) else {
        std::mem::forget(owned);
        panic!("the fan-out deadlocked");
    };
    assert_eq!(done.unwrap(), siblings);
    block_on(owned.close());
}

/// `Scope::spawn` (rayon's): closures that borrow the stack, from outside
/// the pool and from inside a task, on 1 and 2 threads, nesting spawns
/// from spawned closures; all ran once `scope` returns.
#[test]
fn spawned_closures_borrow_the_stack_and_all_run() {
    for threads in [1, 2] {
        let owned = OwnedPool::new(TwoLevels::new(threads)).unwrap();
        let pool = owned.pool.clone();
        let frame = |pool: &Pool<TwoLevels>| {
            let mut cells = vec![0usize; scaled(500)];
            let nested = AtomicUsize::new(0);
            smartpool::scope(|s| {
                for (i, cell) in cells.iter_mut().enumerate() {
                    let nested = &nested;
                    s.spawn(&pool.low, move || {
                        *cell = i + 1;
                        if i % 10 == 0 {
                            s.spawn(&pool.high, move || {
                                nested.fetch_add(1, Ordering::Relaxed);
                            });
                        }
                    });
                }
            });
            let n = cells.len();
            assert!(cells.iter().enumerate().all(|(i, &c)| c == i + 1));
            assert_eq!(nested.into_inner(), n.div_ceil(10));
        };
        frame(&pool);
        let (tx, rx) = mpsc::channel();
        let inner = pool.clone();
        drop(pool.low.exec(run(move || {
            frame(&inner);
            tx.send(()).unwrap();
        })));
        rx.recv_timeout(FAILSAFE)
            .expect("the frame inside a task ended");
        assert!(common::close_within(owned, FAILSAFE));
    }
}

/// A spawned closure's panic is resumed by `scope` after every closure ran;
/// the other closures still run.
#[test]
fn a_spawned_closures_panic_is_resumed_after_the_others_ran() {
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let ran = AtomicUsize::new(0);
    let result = catch_unwind(AssertUnwindSafe(|| {
        smartpool::scope(|s| {
            for i in 0..20 {
                let ran = &ran;
                s.spawn(&pool.low, move || {
                    if i == 7 {
                        panic!("spawned panic");
                    }
                    ran.fetch_add(1, Ordering::SeqCst);
                });
            }
        })
    }));
    let payload = result.expect_err("the panic is resumed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"spawned panic"));
    assert_eq!(ran.load(Ordering::SeqCst), 19);
    assert!(common::close_within(owned, FAILSAFE));
}

/// Close waits for spawned closures, even on a channel that is not
/// `complete_on_close`; on a closed pool, `spawn` runs the closure on the
/// caller.
#[test]
fn close_waits_for_spawned_closures_and_a_closed_pool_runs_them_here() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let done = AtomicUsize::new(0);
    let (spawned, all_spawned) = mpsc::channel();
    std::thread::scope(|threads| {
        let spawner = threads.spawn(|| {
            smartpool::scope(|s| {
                for _ in 0..3 {
                    let (gate, done) = (&gate, &done);
                    s.spawn(&pool.low, move || {
                        gate.wait();
                        done.fetch_add(1, Ordering::SeqCst);
                    });
                }
                spawned.send(()).unwrap();
            });
        });
        // Close begins (at the call) with the three closures spawned, held
        // on the gate.
        all_spawned.recv_timeout(FAILSAFE).expect("spawned");
        let close = owned.close();
        gate.open();
        block_on(close);
        assert_eq!(done.load(Ordering::SeqCst), 3, "close waited for them");
        spawner.join().unwrap();
    });
    let caller = std::thread::current().id();
    let ran_on = Mutex::new(None);
    smartpool::scope(|s| {
        s.spawn(&pool.low, || {
            *ran_on.lock().unwrap() = Some(std::thread::current().id())
        });
    });
    assert_eq!(*ran_on.lock().unwrap(), Some(caller));
}

/// `spawn_fifo` keeps each closure on its own pool: two pools of one
/// worker each, closures spawned to both from one scope, each runs on its
/// pool's worker.
#[test]
fn spawn_fifo_closures_run_on_their_own_pool() {
    let a = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let b = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let worker_of = |owned: &OwnedPool<TwoLevels>| {
        block_on(owned.pool.low.exec(run(|| std::thread::current().id()))).unwrap()
    };
    let (wa, wb) = (worker_of(&a), worker_of(&b));
    let ran = Mutex::new(Vec::new());
    smartpool::scope(|s| {
        for i in 0..20 {
            let (pool, ran) = (if i % 2 == 0 { &a.pool } else { &b.pool }, &ran);
            s.spawn_fifo(&pool.low, move || {
                ran.lock()
                    .unwrap()
                    .push((i % 2, std::thread::current().id()))
            });
        }
    });
    let ran = ran.into_inner().unwrap();
    assert_eq!(ran.len(), 20);
    assert!(ran
        .iter()
        .all(|&(which, id)| id == if which == 0 { wa } else { wb }));
    assert!(common::close_within(a, FAILSAFE) && common::close_within(b, FAILSAFE));
}

/// A scope's body that closes the pool after spawning on it: close waits
/// for the spawned closure (which runs), then returns, and so does the
/// scope.
#[test]
fn a_scope_body_may_close_the_pool_it_spawned_on() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let ran = AtomicUsize::new(0);
    let closed = common::within(FAILSAFE, move || {
        smartpool::scope(|s| {
            s.spawn(&pool.low, || {
                ran.fetch_add(1, Ordering::SeqCst);
            });
            block_on(owned.close());
        });
        ran.into_inner()
    });
    assert_eq!(closed, Some(1));
}

/// `should_yield` inside a spawned closure that a worker runs outside any
/// task: it answers for the closure's channel, so the closure sees the
/// urgent task that came meanwhile.
#[test]
fn should_yield_inside_a_spawned_closure_sees_urgent_work() {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let (started, running) = mpsc::channel();
    std::thread::scope(|threads| {
        let spawner = threads.spawn(|| {
            smartpool::scope(|s| {
                s.spawn(&pool.low, move || {
                    started.send(()).unwrap();
                    let deadline = std::time::Instant::now() + FAILSAFE;
                    while !smartpool::should_yield() {
                        assert!(std::time::Instant::now() < deadline, "never asked to yield");
                        std::hint::spin_loop();
                    }
                });
            });
        });
        running.recv_timeout(FAILSAFE).expect("the closure started");
        let urgent = pool.high.exec(run(|| ()));
        spawner.join().unwrap();
        block_on(urgent).unwrap();
    });
    assert!(common::close_within(owned, FAILSAFE));
}
