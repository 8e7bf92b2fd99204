//! Recursive divide and conquer with `scope` and with `join`: each task
//! spawns its halves and waits for them. A waiting scope runs its own not-yet-started tasks
//! first, newest first (rayon's work-first order), so this completes on any
//! number of threads, 1 included, without deep nesting.
//! Shapes from rayon-core's `join` tests (`sort`, fibonacci) and its
//! `scope` tests (`divide_and_conquer`).

mod common;

use common::{scaled, Flat, FAILSAFE};
use smartpool::prelude::*;
use std::sync::Arc;

fn pool(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat::new(threads)).unwrap()
}

fn fib(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (mut a, mut b) = (0, 0);
    smartpool::scope(|s| {
        s.exec(&pool.work, run(|| a = fib(pool, n - 1)));
        s.exec(&pool.work, run(|| b = fib(pool, n - 2)));
    });
    a + b
}

/// The fibonacci tests' `n`: 22 (some 57,000 scopes), 18 under valgrind
/// (some 8,000: as `scaled`, the same paths fewer times; fib(22) on one
/// thread beside a test of 8 threads came past the 60 s fail-safe under
/// valgrind's one-thread-at-a-time scheduler), 8 under miri.
fn fib_size() -> u32 {
    if cfg!(miri) {
        8
    } else if common::under_valgrind() {
        18
    } else {
        22
    }
}

/// fibonacci(n), by a loop.
fn fib_plain(n: u32) -> u64 {
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

fn quicksort(pool: &Pool<Flat>, v: &mut [u32]) {
    if v.len() <= 16 {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (left, right) = v.split_at_mut(mid);
    smartpool::scope(|s| {
        s.exec(&pool.work, run(|| quicksort(pool, left)));
        s.exec(&pool.work, run(|| quicksort(pool, right)));
    });
}

/// Runs `f` as a task of `owned`'s pool and waits for it, with a fail-safe.
fn inside<T: Send + 'static>(
    owned: &OwnedPool<Flat>,
    f: impl FnOnce(&Pool<Flat>) -> T + Send + 'static,
) -> T {
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    drop(owned.pool.work.exec(run(move || {
        let _ = tx.send(f(&pool));
    })));
    match rx.recv_timeout(FAILSAFE * 3) {
        Ok(value) => value,
        Err(_) => {
            // A deadlocked pool cannot be closed or dropped: end the run.
            eprintln!("fork_join: deadlocked");
            std::process::abort();
        }
    }
}

#[test]
fn fibonacci_by_scopes_completes_on_one_thread() {
    let owned = pool(1);
    let n = fib_size();
    assert_eq!(inside(&owned, move |p| fib(p, n)), fib_plain(n));
    futures::executor::block_on(owned.close());
}

#[test]
fn fibonacci_by_scopes_completes_on_many_threads() {
    for threads in [2, 4, 8] {
        let owned = pool(threads);
        let n = fib_size();
        assert_eq!(inside(&owned, move |p| fib(p, n)), fib_plain(n));
        futures::executor::block_on(owned.close());
    }
}

#[test]
fn quicksort_by_scopes_completes_on_one_and_on_many_threads() {
    for threads in [1, 3] {
        let owned = pool(threads);
        let data = pseudo_random(scaled(200_000));
        let sorted = inside(&owned, move |p| {
            let mut data = data;
            quicksort(p, &mut data);
            data
        });
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "sorted");
        futures::executor::block_on(owned.close());
    }
}

/// A binary tree of scopes, 2^depth leaves, on more threads than cores
/// (rayon-core's `scope::divide_and_conquer`; the 2^22 joins on 22
/// threads deadlocked about half the time).
#[test]
fn a_deep_tree_of_scopes_completes_on_many_threads() {
    fn tree(pool: &Pool<Flat>, depth: u32, leaves: &std::sync::atomic::AtomicUsize) {
        if depth == 0 {
            leaves.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        smartpool::scope(|s| {
            s.exec(&pool.work, run(|| tree(pool, depth - 1, leaves)));
            s.exec(&pool.work, run(|| tree(pool, depth - 1, leaves)));
        });
    }
    // Under valgrind 2^16 leaves on 22 threads took 54 s of the 60 s
    // fail-safe on an idle machine: 2^13 there.
    let depth = if cfg!(miri) {
        4
    } else if common::under_valgrind() {
        13
    } else {
        16
    };
    for threads in [1, 22] {
        let owned = pool(threads);
        let leaves = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let l = leaves.clone();
        inside(&owned, move |p| tree(p, depth, &l));
        assert_eq!(leaves.load(std::sync::atomic::Ordering::SeqCst), 1 << depth);
        futures::executor::block_on(owned.close());
    }
}

fn fib_by_join(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (a, b) = smartpool::join(
        &pool.work,
        || fib_by_join(pool, n - 1),
        || fib_by_join(pool, n - 2),
    );
    a + b
}

fn quicksort_by_join(pool: &Pool<Flat>, v: &mut [u32]) {
    if v.len() <= 16 {
        v.sort_unstable();
        return;
    }
    let mid = partition(v);
    let (left, right) = v.split_at_mut(mid);
    smartpool::join(
        &pool.work,
        || quicksort_by_join(pool, left),
        || quicksort_by_join(pool, right),
    );
}

/// Hoare partition around the middle element; returns where the right
/// part starts (both parts non-empty).
fn partition(v: &mut [u32]) -> usize {
    let pivot = v[v.len() / 2];
    let (mut lo, mut hi) = (0, v.len() - 1);
    loop {
        while v[lo] < pivot {
            lo += 1;
        }
        while v[hi] > pivot {
            hi -= 1;
        }
        if lo >= hi {
            return hi + 1;
        }
        v.swap(lo, hi);
        lo += 1;
        hi -= 1;
    }
}

/// A fixed pseudo-random sequence (xorshift).
fn pseudo_random(len: usize) -> Vec<u32> {
    let mut x = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

/// Recursive `join` inside a task, on 1 thread and on all of them.
#[test]
fn fibonacci_by_join_completes_on_one_and_on_all_threads() {
    let n = if cfg!(miri) { 8 } else { 22 };
    for threads in [
        1,
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .max(2),
    ] {
        let owned = pool(threads);
        assert_eq!(inside(&owned, move |p| fib_by_join(p, n)), fib_plain(n));
        futures::executor::block_on(owned.close());
    }
}

/// The quicksort over 10^6 elements, by `join`, inside a task on 1
/// thread and on all of them, and from outside the pool (the caller runs
/// the first halves and waits for the workers to run the second).
#[test]
fn quicksort_by_join_sorts_a_million_on_one_and_on_all_threads() {
    let len = scaled(1_000_000);
    for threads in [
        1,
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .max(2),
    ] {
        let owned = pool(threads);
        let sorted = inside(&owned, move |p| {
            let mut data = pseudo_random(len);
            quicksort_by_join(p, &mut data);
            data
        });
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "sorted inside");
        let mut data = pseudo_random(scaled(100_000));
        quicksort_by_join(&owned.pool, &mut data);
        assert!(data.windows(2).all(|w| w[0] <= w[1]), "sorted outside");
        futures::executor::block_on(owned.close());
    }
}

/// On a closed pool, `join` runs both halves on the caller.
#[test]
fn join_runs_a_refused_half_on_the_caller() {
    let owned = pool(1);
    let pool = owned.pool.clone();
    futures::executor::block_on(owned.close());
    let caller = std::thread::current().id();
    let (a, b) = smartpool::join(
        &pool.work,
        || std::thread::current().id(),
        || std::thread::current().id(),
    );
    assert_eq!((a, b), (caller, caller));
}

/// A closing pool that drops `b` unrun (a channel that is not
/// `complete_on_close`): the caller runs it.
#[test]
fn join_runs_a_half_its_pool_dropped_on_the_caller() {
    let owned = OwnedPool::new(Flat::with(1, true, false)).unwrap();
    let pool = owned.pool.clone();
    let (gate, held) = common::hold_worker(&pool.work);
    let closing = std::thread::spawn(move || drop(owned));
    let b_thread = std::sync::Mutex::new(None);
    let (a, ()) = smartpool::join(
        &pool.work,
        || {
            // `b` is queued behind the held worker: close drops it.
            while !pool.is_closing() {
                std::thread::yield_now();
            }
            gate.open();
            closing.join().unwrap();
            std::thread::current().id()
        },
        || *b_thread.lock().unwrap() = Some(std::thread::current().id()),
    );
    assert_eq!(*b_thread.lock().unwrap(), Some(a), "b ran on the caller");
    futures::executor::block_on(held).unwrap();
}

/// Inside a task, `b` is published for the other workers: with `a` waiting
/// for `b` (a channel), `b` must be stolen and run on the other worker, and
/// the caller waits for it.
#[test]
fn join_inside_a_task_lets_another_worker_steal_b() {
    let owned = pool(2);
    let (caller, thief) = inside(&owned, |pool| {
        let (tx, rx) = std::sync::mpsc::channel();
        let (caller, thief) = smartpool::join(
            &pool.work,
            move || {
                rx.recv_timeout(FAILSAFE).expect("b ran meanwhile");
                std::thread::current().id()
            },
            move || {
                tx.send(()).unwrap();
                std::thread::current().id()
            },
        );
        (caller, thief)
    });
    assert_ne!(caller, thief, "b ran on the other worker");
    futures::executor::block_on(owned.close());
}

/// A stolen `b` that panics: its panic is resumed in the caller, after `a`
/// finished; a stolen `b` that returns hands its value over.
#[test]
fn join_resumes_a_stolen_bs_panic_after_a_finished() {
    let owned = pool(2);
    let a_done = inside(&owned, |pool| {
        let a_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let flag = a_done.clone();
        let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            smartpool::join(
                &pool.work,
                move || {
                    // `b` has started elsewhere: its sender is gone.
                    let _ = rx.recv_timeout(FAILSAFE);
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                },
                move || {
                    drop(tx);
                    panic!("b's panic")
                },
            )
        }));
        let payload = joined.expect_err("b panicked");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"b's panic"));
        a_done.load(std::sync::atomic::Ordering::SeqCst)
    });
    assert!(a_done, "a finished before the panic was resumed");
    futures::executor::block_on(owned.close());
}

/// On one worker nobody steals: the caller takes `b` back and runs it
/// itself, after `a`.
#[test]
fn join_on_one_worker_runs_b_on_the_caller_after_a() {
    let owned = pool(1);
    let order = inside(&owned, |pool| {
        let order = std::sync::Mutex::new(Vec::new());
        let caller = std::thread::current().id();
        smartpool::join(
            &pool.work,
            || {
                order
                    .lock()
                    .unwrap()
                    .push(("a", std::thread::current().id() == caller))
            },
            || {
                order
                    .lock()
                    .unwrap()
                    .push(("b", std::thread::current().id() == caller))
            },
        );
        order.into_inner().unwrap()
    });
    assert_eq!(order, [("a", true), ("b", true)]);
    futures::executor::block_on(owned.close());
}

/// fib by a scope whose second half is joined through its handle (the
/// fork-join issue's hang): `b.join()` on a worker runs `b` itself when
/// no worker started it, so the recursion completes on one thread for
/// any `n`, nesting as deep as the recursion.
fn fib_by_handle(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    smartpool::scope(|s| {
        let b = s.exec(&pool.work, run(move || fib_by_handle(pool, n - 2)));
        fib_by_handle(pool, n - 1) + b.join().unwrap()
    })
}

#[test]
fn joining_a_scoped_handle_recursively_completes_on_one_thread() {
    let n = fib_size();
    for threads in [1, 2] {
        let owned = pool(threads);
        let value = inside(&owned, move |pool| fib_by_handle(pool, n));
        assert_eq!(value, fib_plain(n));
        futures::executor::block_on(owned.close());
    }
}

/// rayon #957's shape, for a wait of any kind: a task waiting for its
/// stolen child must not start another task of its level meanwhile
/// (rayon's waiting thread steals it, and the first task stalls behind
/// it). smartpool's wait runs only work of a higher level and its own
/// subtree. `wait`, in a low task on worker 0, hands a low child to
/// worker 1 (which sends on `started` and holds on `gate`) and waits for
/// it. Worker 0, the only one free, runs the two urgent tasks that come
/// meanwhile, and leaves a second low task queued until its wait is over.
fn a_waiter_runs_urgent_work_only<W>(wait: W)
where
    W: FnOnce(&Pool<common::TwoLevels>, common::Gate, std::sync::mpsc::Sender<()>) + Send + 'static,
{
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let owned = OwnedPool::new(common::TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let gate = common::Gate::new();
    let first_done = Arc::new(AtomicBool::new(false));
    let second_started = Arc::new(AtomicBool::new(false));
    let (started, child_running) = std::sync::mpsc::channel();
    let first = {
        let (pool2, gate, done) = (pool.clone(), gate.clone(), first_done.clone());
        pool.low.exec(run(move || {
            wait(&pool2, gate, started);
            done.store(true, SeqCst);
        }))
    };
    // Should an assertion fail, the gate opens, so that close returns.
    struct OpenOnDrop(common::Gate);
    impl Drop for OpenOnDrop {
        fn drop(&mut self) {
            self.0.open();
        }
    }
    let _open = OpenOnDrop(gate.clone());
    child_running
        .recv_timeout(FAILSAFE)
        .expect("the child was taken and started");
    let second = {
        let (started, first_done) = (second_started.clone(), first_done.clone());
        pool.low.exec(run(move || {
            started.store(true, SeqCst);
            first_done.load(SeqCst)
        }))
    };
    for _ in 0..2 {
        let started = second_started.clone();
        let urgent = pool.high.exec(run(move || started.load(SeqCst)));
        let second_ran = futures::executor::block_on(urgent).unwrap();
        assert!(
            !second_ran,
            "the waiting worker ran a task of its own level"
        );
    }
    assert!(
        !second_started.load(SeqCst),
        "nobody ran the second low task"
    );
    gate.open();
    futures::executor::block_on(first).unwrap();
    // Now either worker may run it.
    futures::executor::block_on(second).unwrap();
    futures::executor::block_on(owned.close());
}

#[test]
fn a_waiting_join_runs_urgent_work_but_no_other_task_of_its_level() {
    a_waiter_runs_urgent_work_only(|pool, gate, started| {
        let (to_a, a_waits) = std::sync::mpsc::channel();
        smartpool::join(
            &pool.low,
            // `a` returns once `b` started: on the other worker.
            move || a_waits.recv_timeout(FAILSAFE).expect("b started"),
            move || {
                to_a.send(()).unwrap();
                started.send(()).unwrap();
                gate.wait();
            },
        );
    });
}

/// The same through a scoped handle: the child is a task of the scope
/// (`Scope::exec`), joined while the other worker polls it.
#[test]
fn a_handle_join_runs_urgent_work_but_no_other_task_of_its_level() {
    a_waiter_runs_urgent_work_only(|pool, gate, started| {
        let (to_first, first_waits) = std::sync::mpsc::channel();
        smartpool::scope(|s| {
            let child = s.exec(
                &pool.low,
                run(move || {
                    to_first.send(()).unwrap();
                    started.send(()).unwrap();
                    gate.wait();
                }),
            );
            // The other worker took the child: join it while it runs.
            first_waits
                .recv_timeout(FAILSAFE)
                .expect("the child started");
            child.join().unwrap();
        });
    });
}

/// Busy for `micros` microseconds (a long or a short part of a job).
fn spin(micros: u64) {
    let end = std::time::Instant::now() + std::time::Duration::from_micros(micros);
    while std::time::Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// rayon #957: a long job that waits in `join` for its stolen short half
/// must not start another long job meanwhile (rayon's waiting thread may
/// steal one, and its caller then waits for it). A loop of long items, each
/// joining two short halves, on 4 workers; a thread-local flag says a
/// thread is inside an item. An item that starts where another is still
/// running is the stall. rayon has no such guarantee: this test is ours.
#[test]
fn a_long_job_waiting_on_its_half_starts_no_other_long_job() {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    thread_local!(static IN_ITEM: Cell<bool> = const { Cell::new(false) });
    let owned = pool(4);
    let nested = AtomicUsize::new(0);
    let items = if cfg!(miri) { 8 } else { 64 };
    for _ in 0..scaled(100) {
        smartpool::par::for_range(&owned.pool.work, 0..items, |_| {
            if IN_ITEM.with(|inside| inside.replace(true)) {
                nested.fetch_add(1, Relaxed);
            }
            spin(100);
            smartpool::join(&owned.pool.work, || spin(20), || spin(20));
            IN_ITEM.with(|inside| inside.set(false));
        });
    }
    assert_eq!(nested.into_inner(), 0, "items started inside other items");
    futures::executor::block_on(owned.close());
}

/// How many of `items` long items (100 frames of them, on 4 workers)
/// started inside another: rayon #957's stall. Each item runs `inner`, a
/// wait for two short halves, given the round. The items are scoped tasks
/// (`tasks`) or spawned closures of one frame, opened inside `install`,
/// so that its own waiter is a worker too.
fn items_started_inside_items(tasks: bool, inner: impl Fn(&Pool<Flat>, usize) + Sync) -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    thread_local!(static IN_ITEM: Cell<bool> = const { Cell::new(false) });
    let owned = pool(4);
    let (pool, work) = (&*owned.pool, &owned.pool.work);
    let nested = AtomicUsize::new(0);
    let items = if cfg!(miri) { 8 } else { 64 };
    for round in 0..scaled(100) {
        smartpool::install(work, || {
            smartpool::scope(|s| {
                for _ in 0..items {
                    let (nested, inner) = (&nested, &inner);
                    let item = move || {
                        if IN_ITEM.with(|inside| inside.replace(true)) {
                            nested.fetch_add(1, Relaxed);
                        }
                        spin(100);
                        inner(pool, round);
                        IN_ITEM.with(|inside| inside.set(false));
                    };
                    if tasks {
                        s.exec(work, run(item));
                    } else {
                        s.spawn(work, item);
                    }
                }
            })
        });
    }
    futures::executor::block_on(owned.close());
    nested.into_inner()
}

/// The same for a scope's wait: an item (a spawned closure) that opens a
/// scope of two short closures and waits for it must not start another
/// item meanwhile.
#[test]
fn a_scope_waiting_on_its_closures_starts_no_other_long_job() {
    let nested = items_started_inside_items(false, |pool, _| {
        smartpool::scope(|inner| {
            inner.spawn(&pool.work, || spin(20));
            inner.spawn(&pool.work, || spin(20));
        })
    });
    assert_eq!(nested, 0, "items started inside other items");
}

/// The same with tasks (`Scope::exec`): an item task that opens a scope of
/// two short tasks must not start another item meanwhile, whether it waits
/// in `ScopedJoinHandle::join` (even rounds) or in the scope's end.
#[test]
fn a_task_waiting_on_its_scoped_tasks_starts_no_other_long_task() {
    let nested = items_started_inside_items(true, |pool, round| {
        smartpool::scope(|inner| {
            let a = inner.exec(&pool.work, run(|| spin(20)));
            let b = inner.exec(&pool.work, run(|| spin(20)));
            if round % 2 == 0 {
                a.join().unwrap();
                b.join().unwrap();
            }
        })
    });
    assert_eq!(nested, 0, "items started inside other items");
}

/// Isolation never strands what a scoped task waits for. On a 1-thread
/// pool, the waiting worker is the only one that can run it: a scoped task
/// that awaits a task of its own level (on the waiter's pool, from a
/// task of the same pool or of another pool) completes, joined through
/// its handle or by the scope's end.
#[test]
fn a_parked_scoped_task_gets_the_waiter_s_help() {
    let a = pool(1);
    let b = pool(1);
    for joined in [true, false] {
        let other = b.pool.clone();
        let value = inside(&a, move |pool| {
            smartpool::scope(|s| {
                // Claimed (the waiter's pool), parked on an unscoped task.
                let near = s.exec(&pool.work, async move {
                    pool.work.exec(async { 1 }).await.unwrap()
                });
                // On the other pool, parked on a task of the waiter's.
                let far = s.exec(&other.work, async move {
                    pool.work.exec(async { 2 }).await.unwrap()
                });
                if joined {
                    near.join().unwrap() + far.join().unwrap()
                } else {
                    3
                }
            })
        });
        assert_eq!(value, 3);
    }
    futures::executor::block_on(a.close());
    futures::executor::block_on(b.close());
}

/// A scoped task on another pool counts as waiting until it ends: its poll
/// may wait for the waiter's pool. Here, on two 1-thread pools, a task on
/// `b` opens a scope of its own with a task on `a`, whose only worker is
/// the outer scope's waiter (a cold review's case).
#[test]
fn a_scoped_task_on_another_pool_may_need_the_waiter() {
    let a = pool(1);
    let b = pool(1);
    let other = b.pool.clone();
    let ran = inside(&a, move |pool| {
        let ran = std::sync::atomic::AtomicUsize::new(0);
        smartpool::scope(|s| {
            s.exec(&pool.work, async { 1 });
            s.exec(
                &other.work,
                run(|| {
                    smartpool::scope(|inner| {
                        inner.exec(
                            &pool.work,
                            run(|| ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst)),
                        );
                    })
                }),
            );
        });
        ran.into_inner()
    });
    assert_eq!(ran, 1);
    futures::executor::block_on(a.close());
    futures::executor::block_on(b.close());
}

/// A joined task that blocks, without helping, on work only the waiter
/// is free to run: its sibling (which waits in the queue, so the join
/// helps at once), or a task outside the scope (the wait runs out of
/// patience, then runs anything). `join`'s stolen half the same.
#[test]
#[cfg_attr(
    miri,
    ignore = "a second of patience is about 1,100 timed parks: minutes under miri"
)]
fn a_wait_runs_what_a_blocked_task_waits_for() {
    use std::sync::mpsc::channel;
    let owned = pool(2);
    // The consumer blocks in `recv` on the other worker; its producer is
    // a sibling, then a task outside the scope.
    for (sibling, value) in [(true, 7), (false, 8)] {
        let got = inside(&owned, move |pool| {
            let (tx, rx) = channel();
            let (started, consumer_started) = channel();
            smartpool::scope(|s| {
                let consumer = s.exec(
                    &pool.work,
                    run(move || {
                        started.send(()).unwrap();
                        rx.recv_timeout(FAILSAFE).expect("the producer ran")
                    }),
                );
                consumer_started.recv_timeout(FAILSAFE).unwrap();
                let producer = run(move || tx.send(value).unwrap());
                if sibling {
                    s.exec(&pool.work, producer);
                } else {
                    drop(pool.work.exec(producer));
                }
                consumer.join().unwrap()
            })
        });
        assert_eq!(got, value);
    }
    // `join`: `b` is stolen, then blocks on a task of its level.
    let got = inside(&owned, |pool| {
        let (tx, rx) = channel();
        let (started, b_started) = channel();
        let ((), got) = smartpool::join(
            &pool.work,
            move || {
                b_started.recv_timeout(FAILSAFE).expect("b was stolen");
                drop(pool.work.exec(run(move || tx.send(9).unwrap())));
            },
            move || {
                started.send(()).unwrap();
                rx.recv_timeout(FAILSAFE).expect("the producer ran")
            },
        );
        got
    });
    assert_eq!(got, 9);
    futures::executor::block_on(owned.close());
}

/// A scope whose pool terminates under it: the task its waiter can no
/// longer start (the pool refuses it) is dropped by the drain, and the
/// scope returns, its handle cancelled, whether the body joins it or the
/// scope's end waits (a cold review's hang: the isolated wait never
/// drained). On a channel that is not `complete_on_close`, close does
/// not wait for the task that opened the scope.
#[test]
fn a_scope_returns_when_its_pool_terminates_under_it() {
    use std::sync::mpsc::channel;
    for joined in [true, false] {
        let owned = OwnedPool::new(Flat::with(1, true, false)).unwrap();
        let pool = owned.pool.clone();
        let (started_tx, started) = channel();
        let gate = common::Gate::new();
        let body_gate = gate.clone();
        let (result_tx, result) = channel();
        drop(owned.pool.work.exec(run(move || {
            let cancelled = smartpool::scope(|s| {
                let task = s.exec(&pool.work, async { 5 });
                started_tx.send(()).unwrap();
                body_gate.wait();
                joined.then(|| task.join().is_err())
            });
            result_tx.send(cancelled).unwrap();
        })));
        started.recv_timeout(FAILSAFE).expect("the body ran");
        let close = owned.close();
        gate.open();
        let cancelled = result.recv_timeout(FAILSAFE).expect("the scope returned");
        assert_eq!(cancelled, joined.then_some(true));
        let closed = common::Gate::new();
        let done = closed.clone();
        std::thread::spawn(move || {
            futures::executor::block_on(close);
            done.open();
        });
        assert!(closed.wait_for(FAILSAFE), "close resolved");
    }
}

/// `smartpool::par`: every index once, in order where it returns values,
/// empty inputs, from outside the pool and inside a task, on 1 and 2
/// threads.
#[test]
fn parallel_loops_visit_every_item_once() {
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    let check = |pool: &Pool<Flat>| {
        let n = scaled(10_000);
        let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        smartpool::par::for_range(&pool.work, 0..n, |i| {
            hits[i].fetch_add(1, Relaxed);
        });
        assert!(hits.iter().all(|h| h.load(Relaxed) == 1));
        let mut values: Vec<usize> = (0..n).collect();
        smartpool::par::for_each_mut(&pool.work, &mut values, |v| *v *= 2);
        assert!(values.iter().enumerate().all(|(i, &v)| v == 2 * i));
        let sum = AtomicUsize::new(0);
        smartpool::par::for_each(&pool.work, &values, |v| {
            sum.fetch_add(*v, Relaxed);
        });
        assert_eq!(sum.into_inner(), n * (n - 1));
        smartpool::par::for_each_chunk_mut(&pool.work, &mut values, 7, |index, chunk| {
            assert!(chunk.len() == 7 || index == n.div_ceil(7) - 1);
            chunk.iter_mut().for_each(|v| *v = index);
        });
        assert!(values.iter().enumerate().all(|(i, &v)| v == i / 7));
        let squares = smartpool::par::map(&pool.work, &values, |v| v * v);
        assert!(squares.iter().zip(&values).all(|(s, v)| *s == v * v));
        assert!(smartpool::par::map(&pool.work, &[] as &[u8], |v| *v).is_empty());
        smartpool::par::for_range(&pool.work, 5..5, |_| unreachable!());
    };
    for threads in [1, 2] {
        let owned = pool(threads);
        check(&owned.pool);
        inside(&owned, move |pool| check(pool));
        futures::executor::block_on(owned.close());
    }
}

/// `install` (rayon's): from outside, `f` runs on a worker and its value
/// or panic comes back; on a worker it runs there; a closed pool and a
/// zero-thread pool run it on the caller.
#[test]
fn install_runs_on_a_worker_and_returns_its_value_or_panic() {
    let owned = pool(2);
    let caller = std::thread::current().id();
    let ran_on = smartpool::install(&owned.pool.work, || std::thread::current().id());
    assert_ne!(ran_on, caller, "ran on a worker");
    let inner = inside(&owned, |pool| {
        let here = std::thread::current().id();
        smartpool::install(&pool.work, || std::thread::current().id()) == here
    });
    assert!(inner, "on a worker, install runs in place");
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        smartpool::install(&owned.pool.work, || panic!("installed panic"))
    }));
    let payload = panicked.expect_err("resumed here");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"installed panic"));
    let closed = owned.pool.clone();
    futures::executor::block_on(owned.close());
    assert_eq!(
        smartpool::install(&closed.work, || std::thread::current().id()),
        caller
    );
    let zero = pool(0);
    assert_eq!(
        smartpool::install(&zero.pool.work, || std::thread::current().id()),
        caller
    );
}
