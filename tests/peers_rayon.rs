//! rayon-core's `scope` and `join` tests, ported to smartpool.
//!
//! Origin: rayon-rs/rayon at commit c4dac9f82ee03f61e855075b668229a9e4d759ad,
//! files `rayon-core/src/scope/test.rs`, `rayon-core/src/join/test.rs`, and
//! `scope_mix` from `src/iter/test.rs`. Each test restates the intent of
//! the original against smartpool's API (nothing is copied), and a comment
//! above it names its origin.
//!
//! How rayon maps onto smartpool:
//! * `rayon::scope(|s| s.spawn(|s| ..))` becomes
//!   `smartpool::scope(|s| s.spawn(&pool.work, move || ..))` (a job, as
//!   rayon's), or `s.exec(&pool.work, run(move || ..))` (a task with a
//!   handle: most tests below use it, as they did before `spawn` existed).
//!   Each spawn names its channel, and a closure that spawns more captures
//!   `s`. `spawn_fifo` is a method of the same scope: smartpool has no
//!   separate `scope_fifo`.
//! * `rayon::join(a, b)` becomes `smartpool::join(&pool.work, a, b)`: `b`
//!   is queued on the channel, `a` runs on the caller, then the caller
//!   runs `b` itself if no worker took it.
//! * rayon's implicit global pool becomes an explicit [`Flat`] pool (one
//!   FIFO channel) on 1 and on 4 threads. Each test runs from outside the
//!   pool, where the caller parks while the workers run the tasks, and
//!   inside a pool task, as rayon's tests run both outside and inside
//!   `install`. A waiting worker first runs its scope's own
//!   not-yet-started tasks, newest first, then helps with any of the
//!   pool's tasks.
//!
//! Not ported:
//! * `static_scope_fifo`, `mixed_lifetime_scope_fifo`: as `static_scope`
//!   below (the `'scope` lifetime cannot be named).
//! * `static_scope`: it checks that an explicit `Scope<'static>` limits
//!   spawns to `'static` data while the body borrows locally. smartpool's
//!   `'scope` is higher-ranked (as with `std::thread::scope`), so a test
//!   has no way to name it.
//! * `scope_spawn_broadcast`, `scope_fifo_spawn_broadcast`,
//!   `scope_spawn_broadcast_nested`, `scope_spawn_broadcast_barrier`,
//!   `scope_spawn_broadcast_panic_one`, `scope_spawn_broadcast_panic_many`:
//!   smartpool has no broadcast (one task per worker thread).
//! * `join_context_both`, `join_context_neither`, `join_context_second`:
//!   smartpool has no `join_context` or `migrated()`.
//!
//! Deliberate differences (also noted beside the tests):
//! * A waiting scope runs only *its own* pending tasks (`exec`) newest
//!   first, then helps with the pool's. rayon's wait pops the thread's
//!   shared deque, so the orders differ in `mixed_lifo_order`. Closures
//!   of `spawn` and `spawn_fifo` travel the worker's job deque as rayon's
//!   do, and every order test gives rayon's result with them.
//! * Close: rayon keeps a pool alive while a scope needs it. smartpool's
//!   close refuses new tasks, and a scope on a closing pool sees them
//!   cancelled (covered by `tests/scope.rs`, not here); `join` runs a
//!   refused or dropped `b` on the caller (covered by `tests/fork_join.rs`).

mod common;

use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};

use common::{scaled, Flat, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool::Scope;

fn pool(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat::new(threads)).unwrap()
}

const THREADS: [usize; 2] = [1, 4];

/// Waits for a result sent by `f`'s thread. A panic is resumed here;
/// a hang aborts the run, because a deadlocked pool can't be closed or
/// dropped.
fn wait_result<T>(rx: mpsc::Receiver<std::thread::Result<T>>) -> T {
    match rx.recv_timeout(FAILSAFE * 3) {
        Ok(Ok(value)) => value,
        Ok(Err(payload)) => resume_unwind(payload),
        Err(_) => {
            eprintln!("peers_rayon: no progress within the fail-safe (deadlocked)");
            std::process::abort();
        }
    }
}

/// Runs `f` as a task of `owned`'s pool and returns its value. The task's
/// panic is resumed here.
fn inside<T: Send + 'static>(
    owned: &OwnedPool<Flat>,
    f: impl FnOnce(&Pool<Flat>) -> T + Send + 'static,
) -> T {
    let pool = owned.pool.clone();
    let task = owned.pool.work.exec(run(move || f(&pool)));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(block_on(task).map_err(panic_payload));
    });
    wait_result(rx)
}

/// A task's panic payload, or (a cancelled task) a message to panic with.
fn panic_payload(error: JoinError) -> Box<dyn Any + Send> {
    match error.try_into_panic() {
        Ok(payload) => payload,
        Err(error) => Box::new(format!("the pool task did not run: {error}")),
    }
}

/// Runs `f` on a plain thread outside the pool (a scope there parks while
/// the workers run its tasks). Same results and fail-safe as [`inside`].
fn outside<T: Send + 'static>(
    owned: &OwnedPool<Flat>,
    f: impl FnOnce(&Pool<Flat>) -> T + Send + 'static,
) -> T {
    let pool = owned.pool.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(catch_unwind(AssertUnwindSafe(|| f(&pool))));
    });
    wait_result(rx)
}

/// Runs `test` on a pool of 1 and of 4 threads, outside the pool and
/// inside it.
fn outside_and_inside(test: impl Fn(&Pool<Flat>) + Clone + Send + 'static) {
    for threads in THREADS {
        let owned = pool(threads);
        outside(&owned, test.clone());
        inside(&owned, test.clone());
        block_on(owned.close());
    }
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        String::from("<not a string>")
    }
}

/// Checks that `result` holds rayon's test panic.
fn expect_hello<T: std::fmt::Debug>(result: std::thread::Result<T>) {
    let payload = result.expect_err("the panic propagated to the caller");
    assert_eq!(panic_text(&*payload), "Hello, world!");
}

/// A fixed pseudo-random sequence (xorshift32), in place of rayon's seeded
/// `StdRng`.
struct XorShift(u32);

impl XorShift {
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }

    fn below(&mut self, bound: u32) -> u32 {
        self.next() % bound
    }
}

fn random_u32s(len: usize, seed: u32) -> Vec<u32> {
    let mut rng = XorShift(seed);
    (0..len).map(|_| rng.next()).collect()
}

// ---------------------------------------------------------------------
// rayon-core src/scope/test.rs
// ---------------------------------------------------------------------

// rayon-core src/scope/test.rs: scope_empty
#[test]
fn scope_empty() {
    outside_and_inside(|_| smartpool::scope(|_| {}));
}

// rayon-core src/scope/test.rs: scope_result
#[test]
fn scope_result() {
    outside_and_inside(|_| assert_eq!(smartpool::scope(|_| 22), 22));
}

// rayon-core src/scope/test.rs: scope_two
#[test]
fn scope_two() {
    outside_and_inside(|p| {
        let counter = AtomicUsize::new(0);
        smartpool::scope(|s| {
            let counter = &counter;
            s.exec(
                &p.work,
                run(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                }),
            );
            s.exec(
                &p.work,
                run(move || {
                    counter.fetch_add(10, Ordering::SeqCst);
                }),
            );
        });
        assert_eq!(counter.into_inner(), 11);
    });
}

/// Splits `size` in two tasks of the same scope until 1, counting leaves.
fn divide_and_conquer<'scope>(
    s: &'scope Scope<'scope, '_>,
    pool: &'scope Pool<Flat>,
    leaves: &'scope AtomicUsize,
    size: usize,
) {
    if size > 1 {
        for _ in 0..2 {
            s.exec(
                &pool.work,
                run(move || divide_and_conquer(s, pool, leaves, size / 2)),
            );
        }
    } else {
        leaves.fetch_add(1, Ordering::SeqCst);
    }
}

fn divide_and_conquer_seq(leaves: &mut usize, size: usize) {
    if size > 1 {
        divide_and_conquer_seq(leaves, size / 2);
        divide_and_conquer_seq(leaves, size / 2);
    } else {
        *leaves += 1;
    }
}

// rayon-core src/scope/test.rs: scope_divide_and_conquer
#[test]
fn scope_divide_and_conquer() {
    outside_and_inside(|p| {
        let leaves = AtomicUsize::new(0);
        smartpool::scope(|s| {
            let leaves = &leaves;
            s.exec(&p.work, run(move || divide_and_conquer(s, p, leaves, 1024)));
        });
        let mut sequential = 0;
        divide_and_conquer_seq(&mut sequential, 1024);
        assert_eq!(leaves.into_inner(), sequential);
    });
}

struct Tree<T: Send> {
    value: T,
    children: Vec<Tree<T>>,
}

impl<T: Send> Tree<T> {
    /// Applies `op` to every value: one scope for the whole tree, each
    /// node's children submitted by a task of that scope.
    fn update<OP: Fn(&mut T) + Sync>(&mut self, pool: &Pool<Flat>, op: OP) {
        smartpool::scope(|s| self.update_in_scope(pool, &op, s));
    }

    fn update_in_scope<'scope, OP: Fn(&mut T) + Sync>(
        &'scope mut self,
        pool: &'scope Pool<Flat>,
        op: &'scope OP,
        s: &'scope Scope<'scope, '_>,
    ) {
        let Tree { value, children } = self;
        s.exec(
            &pool.work,
            run(move || {
                for child in children {
                    s.exec(&pool.work, run(move || child.update_in_scope(pool, op, s)));
                }
            }),
        );
        op(value);
    }
}

impl Tree<u32> {
    /// The values, parents before children.
    fn values(&self) -> Vec<u32> {
        let mut values = vec![self.value];
        for child in &self.children {
            values.extend(child.values());
        }
        values
    }
}

/// A tree `depth` levels deep with 0 to 3 children per node.
fn random_tree(depth: usize, rng: &mut XorShift) -> Tree<u32> {
    let children = if depth == 0 {
        Vec::new()
    } else {
        (0..rng.below(4))
            .map(|_| random_tree(depth - 1, rng))
            .collect()
    };
    Tree {
        value: rng.below(1_000_000),
        children,
    }
}

// rayon-core src/scope/test.rs: update_tree
#[test]
fn update_tree() {
    outside_and_inside(|p| {
        let mut tree = random_tree(10, &mut XorShift(0x9e37_79b9));
        let before = tree.values();
        tree.update(p, |v| *v += 1);
        let after = tree.values();
        assert_eq!(before.len(), after.len());
        assert!(
            before.iter().zip(&after).all(|(b, a)| b + 1 == *a),
            "every node updated exactly once"
        );
    });
}

/// What a chain of tasks records: how many ran, and the most stack any
/// of them found in use below `bottom` (an address on the caller's stack).
struct ChainRecord {
    bottom: usize,
    deepest: Mutex<usize>,
    ran: AtomicUsize,
}

impl ChainRecord {
    fn new(bottom: usize) -> ChainRecord {
        ChainRecord {
            bottom,
            deepest: Mutex::new(0),
            ran: AtomicUsize::new(0),
        }
    }
}

/// An address on the current stack.
#[inline(never)]
fn stack_address() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// A chain: each task records how deep the stack is below `bottom`, then
/// submits the next one to the same scope.
fn the_final_countdown<'scope>(
    s: &'scope Scope<'scope, '_>,
    pool: &'scope Pool<Flat>,
    record: &'scope ChainRecord,
    n: usize,
) {
    let used = stack_address().abs_diff(record.bottom);
    {
        let mut deepest = record.deepest.lock().unwrap();
        *deepest = (*deepest).max(used);
    }
    record.ran.fetch_add(1, Ordering::SeqCst);
    if n > 0 {
        s.exec(
            &pool.work,
            run(move || the_final_countdown(s, pool, record, n - 1)),
        );
    }
}

// rayon-core src/scope/test.rs: linear_stack_growth
// On one worker, a chain of 5, 500 or 10,000 scoped tasks (each submits
// the next) uses the same stack depth. smartpool's waiting scope runs its
// own tasks one after another, newest first, from its wait loop, not
// nested in each other. A chain of 10,000 growing linearly would overflow
// the 4 MiB worker stack.
#[test]
fn linear_stack_growth() {
    let owned = pool(1);
    let long = scaled(10_000);
    let [d5, d500, dlong] = inside(&owned, move |p| {
        let bottom = stack_address();
        [5, 500, long].map(|n| {
            let record = ChainRecord::new(bottom);
            smartpool::scope(|s| the_final_countdown(s, p, &record, n));
            assert_eq!(record.ran.into_inner(), n + 1, "the whole chain ran");
            record.deepest.into_inner().unwrap()
        })
    });
    for (n, depth) in [(500, d500), (long, dlong)] {
        let ratio = d5 as f64 / depth as f64;
        assert!(
            ratio > 0.9 && ratio < 1.1,
            "stack used by a chain of 5: {d5} bytes, of {n}: {depth} bytes"
        );
    }
    block_on(owned.close());
}

// rayon-core src/scope/test.rs: linear_stack_growth (the same chain run
// to completion outside and inside the pool, on 1 and 4 threads)
#[test]
fn a_long_chain_of_scoped_tasks_completes() {
    let n = scaled(2_000);
    outside_and_inside(move |p| {
        let record = ChainRecord::new(stack_address());
        smartpool::scope(|s| the_final_countdown(s, p, &record, n));
        assert_eq!(record.ran.into_inner(), n + 1, "the whole chain ran");
    });
}

// rayon-core src/scope/test.rs: panic_propagate_scope
#[test]
fn panic_propagate_scope() {
    outside_and_inside(|_| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|_| panic!("Hello, world!"))
        })));
    });
}

// rayon-core src/scope/test.rs: panic_propagate_spawn
#[test]
fn panic_propagate_spawn() {
    outside_and_inside(|p| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(&p.work, run(|| panic!("Hello, world!")));
            })
        })));
    });
}

// rayon-core src/scope/test.rs: panic_propagate_nested_spawn
#[test]
fn panic_propagate_nested_spawn() {
    outside_and_inside(|p| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(
                    &p.work,
                    run(move || {
                        s.exec(
                            &p.work,
                            run(move || {
                                s.exec(&p.work, run(|| panic!("Hello, world!")));
                            }),
                        );
                    }),
                );
            })
        })));
    });
}

// rayon-core src/scope/test.rs: panic_propagate_nested_scope_spawn
// The inner scope resumes its task's panic in the outer task. The outer
// scope then resumes it in the caller, and the payload is the same.
#[test]
fn panic_propagate_nested_scope_spawn() {
    outside_and_inside(|p| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(
                    &p.work,
                    run(move || {
                        smartpool::scope(|inner| {
                            inner.exec(&p.work, run(|| panic!("Hello, world!")));
                        });
                    }),
                );
            })
        })));
    });
}

// rayon-core src/scope/test.rs: panic_propagate_still_execute_1
// Job A panics and job B, submitted after it, still runs. Eight more
// tasks count that every task ended before the scope resumed the panic.
#[test]
fn panic_propagate_still_execute_1() {
    outside_and_inside(|p| {
        let mut x = false;
        let others = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(&p.work, run(|| panic!("Hello, world!"))); // job A
                s.exec(&p.work, run(|| x = true)); // job B
                for _ in 0..8 {
                    s.exec(
                        &p.work,
                        run(|| {
                            others.fetch_add(1, Ordering::SeqCst);
                        }),
                    );
                }
            })
        }));
        expect_hello(result);
        assert!(x, "job B ran although job A panicked");
        assert_eq!(others.into_inner(), 8, "every task ended first");
    });
}

// rayon-core src/scope/test.rs: panic_propagate_still_execute_2
// As _1, with job B submitted before the panicking job A.
#[test]
fn panic_propagate_still_execute_2() {
    outside_and_inside(|p| {
        let mut x = false;
        let others = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                for _ in 0..8 {
                    s.exec(
                        &p.work,
                        run(|| {
                            others.fetch_add(1, Ordering::SeqCst);
                        }),
                    );
                }
                s.exec(&p.work, run(|| x = true)); // job B
                s.exec(&p.work, run(|| panic!("Hello, world!"))); // job A
            })
        }));
        expect_hello(result);
        assert!(x, "job B ran although job A panicked");
        assert_eq!(others.into_inner(), 8, "every task ended first");
    });
}

// rayon-core src/scope/test.rs: panic_propagate_still_execute_3
// The body panics after submitting. The tasks still run, and the body's
// panic is the one resumed.
#[test]
fn panic_propagate_still_execute_3() {
    outside_and_inside(|p| {
        let mut x = false;
        let others = AtomicUsize::new(0);
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(&p.work, run(|| x = true));
                for _ in 0..8 {
                    s.exec(
                        &p.work,
                        run(|| {
                            others.fetch_add(1, Ordering::SeqCst);
                        }),
                    );
                }
                panic!("Hello, world!");
            })
        }));
        expect_hello(result);
        assert!(x, "a task submitted before the body's panic ran");
        assert_eq!(others.into_inner(), 8, "every task ended first");
    });
}

// rayon-core src/scope/test.rs: panic_propagate_still_execute_4
// A task's panic does not interrupt the body: the body runs to its end.
#[test]
fn panic_propagate_still_execute_4() {
    outside_and_inside(|p| {
        let mut x = false;
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::scope(|s| {
                s.exec(&p.work, run(|| panic!("Hello, world!")));
                x = true;
            })
        }));
        expect_hello(result);
        assert!(x, "the body ran to its end");
    });
}

// rayon-core src/scope/test.rs: lifo_order
// On one thread, a scope waiting on a worker runs its own tasks newest
// first. That includes the ones its tasks submit to it while it waits, so
// the order is rayon's LIFO order. (Only from inside the pool: from
// outside, the tasks go through the channel in FIFO order.)
#[test]
fn lifo_order() {
    let owned = pool(1);
    let order = inside(&owned, |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|s| {
            let log = &log;
            for i in 0..10 {
                s.exec(
                    &p.work,
                    run(move || {
                        for j in 0..10 {
                            s.exec(&p.work, run(move || log.lock().unwrap().push(i * 10 + j)));
                        }
                    }),
                );
            }
        });
        log.into_inner().unwrap()
    });
    assert_eq!(order, (0..100).rev().collect::<Vec<i32>>());
    block_on(owned.close());
}

// rayon-core src/scope/test.rs: nested_lifo_order
// Each outer task opens an inner scope. Each scope runs its own tasks
// newest first, so the result is again 99 down to 0.
#[test]
fn nested_lifo_order() {
    let owned = pool(1);
    let order = inside(&owned, |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|s| {
            let log = &log;
            for i in 0..10 {
                s.exec(
                    &p.work,
                    run(move || {
                        smartpool::scope(|inner| {
                            for j in 0..10 {
                                inner.exec(
                                    &p.work,
                                    run(move || log.lock().unwrap().push(i * 10 + j)),
                                );
                            }
                        });
                    }),
                );
            }
        });
        log.into_inner().unwrap()
    });
    assert_eq!(order, (0..100).rev().collect::<Vec<i32>>());
    block_on(owned.close());
}

// rayon-core src/scope/test.rs: mixed_lifo_order
// Differs from rayon on purpose. rayon expects [-3, 2, -2, 1, -1, 3, 0]:
// its inner scope's wait pops the thread's one deque, so it also runs the
// outer scope's tasks that were pushed in between. smartpool's inner scope
// runs only its own tasks (-3, -2, -1, newest first) and returns once
// they are done. The outer scope then runs its own (3, 2, 1, 0).
#[test]
fn mixed_lifo_order() {
    let owned = pool(1);
    let order = inside(&owned, |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|outer| {
            let log = &log;
            outer.exec(&p.work, run(move || log.lock().unwrap().push(0)));
            smartpool::scope(|inner| {
                inner.exec(&p.work, run(move || log.lock().unwrap().push(-1)));
                outer.exec(&p.work, run(move || log.lock().unwrap().push(1)));
                inner.exec(&p.work, run(move || log.lock().unwrap().push(-2)));
                outer.exec(&p.work, run(move || log.lock().unwrap().push(2)));
                inner.exec(&p.work, run(move || log.lock().unwrap().push(-3)));
            });
            outer.exec(&p.work, run(move || log.lock().unwrap().push(3)));
        });
        log.into_inner().unwrap()
    });
    assert_eq!(order, vec![-3, -2, -1, 3, 2, 1, 0]);
    block_on(owned.close());
}

// rayon-core src/scope/test.rs: mixed_lifetime_scope
// The tasks capture references copied out of a borrowed slice. They borrow
// the counters, not the slice.
#[test]
fn mixed_lifetime_scope() {
    fn increment(pool: &Pool<Flat>, counters: &[&AtomicUsize]) {
        smartpool::scope(|s| {
            for &counter in counters {
                s.exec(
                    &pool.work,
                    run(move || {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }),
                );
            }
        });
    }
    outside_and_inside(|p| {
        let counter = AtomicUsize::new(0);
        increment(p, &[&counter; 100]);
        assert_eq!(counter.into_inner(), 100);
    });
}

// rayon-core src/scope/test.rs: the nested-scope shape of
// nested_lifo_order and panic_propagate_nested_scope_spawn (a scope opened
// inside a task of another scope), here checking borrows across three
// frames: the test's (shared and split mutably), the outer task's (a local
// the inner tasks borrow), and the inner tasks'.
#[test]
fn nested_scopes_borrow_from_outer_frames() {
    outside_and_inside(|p| {
        let words: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
        let mut lengths = vec![0usize; 8];
        let total = AtomicUsize::new(0);
        smartpool::scope(|outer| {
            for (chunk, word_chunk) in lengths.chunks_mut(2).zip(words.chunks(2)) {
                let total = &total;
                outer.exec(
                    &p.work,
                    run(move || {
                        let suffix = String::from("!");
                        smartpool::scope(|inner| {
                            for (len, word) in chunk.iter_mut().zip(word_chunk) {
                                let suffix = &suffix;
                                inner.exec(
                                    &p.work,
                                    run(move || {
                                        *len = word.len() + suffix.len();
                                        total.fetch_add(*len, Ordering::Relaxed);
                                    }),
                                );
                            }
                        });
                    }),
                );
            }
        });
        assert_eq!(lengths, vec![3; 8]);
        assert_eq!(total.into_inner(), 24);
    });
}

// ---------------------------------------------------------------------
// rayon-core src/join/test.rs
// ---------------------------------------------------------------------

fn quick_sort<T: PartialOrd + Send>(pool: &Pool<Flat>, v: &mut [T]) {
    if v.len() <= 1 {
        return;
    }
    let mid = partition(v);
    let (lo, rest) = v.split_at_mut(mid);
    let hi = &mut rest[1..]; // rest[0] is the pivot, in place
    smartpool::join(&pool.work, || quick_sort(pool, lo), || quick_sort(pool, hi));
}

/// Lomuto partition around the middle element; returns where the pivot
/// ends up.
fn partition<T: PartialOrd>(v: &mut [T]) -> usize {
    let last = v.len() - 1;
    v.swap(v.len() / 2, last);
    let mut store = 0;
    for i in 0..last {
        if v[i] < v[last] {
            v.swap(i, store);
            store += 1;
        }
    }
    v.swap(store, last);
    store
}

// rayon-core src/join/test.rs: sort (called from outside the pool)
#[test]
fn sort() {
    for threads in THREADS {
        let owned = pool(threads);
        let data = random_u32s(scaled(6 * 1024), 0x2545_f491);
        let mut expected = data.clone();
        expected.sort_unstable();
        let sorted = outside(&owned, move |p| {
            let mut data = data;
            quick_sort(p, &mut data);
            data
        });
        assert_eq!(sorted, expected);
        block_on(owned.close());
    }
}

// rayon-core src/join/test.rs: sort_in_pool
#[test]
fn sort_in_pool() {
    for threads in THREADS {
        let owned = pool(threads);
        let data = random_u32s(scaled(12 * 1024), 0x6c07_8965);
        let mut expected = data.clone();
        expected.sort_unstable();
        let sorted = inside(&owned, move |p| {
            let mut data = data;
            quick_sort(p, &mut data);
            data
        });
        assert_eq!(sorted, expected);
        block_on(owned.close());
    }
}

// rayon-core src/join/test.rs: panic_propagate_a
#[test]
fn join_panic_propagate_a() {
    outside_and_inside(|p| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::join(&p.work, || panic!("Hello, world!"), || ())
        })));
    });
}

// rayon-core src/join/test.rs: panic_propagate_b
#[test]
fn join_panic_propagate_b() {
    outside_and_inside(|p| {
        expect_hello(catch_unwind(AssertUnwindSafe(|| {
            smartpool::join(&p.work, || (), || panic!("Hello, world!"))
        })));
    });
}

// rayon-core src/join/test.rs: panic_propagate_both
// As rayon: `a`'s panic is resumed (after `b` also ran and panicked).
#[test]
fn join_panic_propagate_both() {
    outside_and_inside(|p| {
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::join(
                &p.work,
                || panic!("Hello, world!"),
                || panic!("Goodbye, world!"),
            )
        }));
        assert_eq!(
            panic_text(&*result.expect_err("the panic propagated")),
            "Hello, world!"
        );
    });
}

// rayon-core src/join/test.rs: panic_b_still_executes
#[test]
fn join_panic_b_still_executes() {
    outside_and_inside(|p| {
        let mut x = false;
        let result = catch_unwind(AssertUnwindSafe(|| {
            smartpool::join(&p.work, || panic!("Hello, world!"), || x = true)
        }));
        expect_hello(result);
        assert!(x, "closure b ran although closure a panicked");
    });
}

// rayon-core src/join/test.rs: join_counter_overflow
// Many joins in a row inside a 2-thread pool, as rayon's `pool.join`
// does. rayon runs 500,000 to overflow a 16-bit jobs counter on 32-bit
// targets. smartpool's counter is 32 bits, and that many joins would take
// seconds in a debug build, so this runs 20,000 (scaled) and checks that
// every half ran.
#[test]
fn join_counter_overflow() {
    let owned = pool(2);
    let n = scaled(20_000);
    let (i, j) = inside(&owned, move |p| {
        let (mut i, mut j) = (0usize, 0usize);
        for _ in 0..n {
            smartpool::join(&p.work, || i += 1, || j += 1);
        }
        (i, j)
    });
    assert_eq!((i, j), (n, n));
    block_on(owned.close());
}

// ---------------------------------------------------------------------
// rayon src/iter/test.rs
// ---------------------------------------------------------------------

/// Σ (v[i] + 1) by recursive joins, in place of rayon's parallel iterator.
fn par_sum_plus_one(pool: &Pool<Flat>, v: &[i32]) -> i32 {
    if v.len() <= 64 {
        return v.iter().map(|&i| i + 1).sum();
    }
    let (left, right) = v.split_at(v.len() / 2);
    let (a, b) = smartpool::join(
        &pool.work,
        || par_sum_plus_one(pool, left),
        || par_sum_plus_one(pool, right),
    );
    a + b
}

// rayon src/iter/test.rs: scope_mix
// A scope's task runs divide and conquer in the scope while another runs
// a join-based reduction (rayon: a parallel iterator) that nests scopes of
// its own.
#[test]
fn scope_mix() {
    outside_and_inside(|p| {
        let leaves = AtomicUsize::new(0);
        smartpool::scope(|s| {
            let leaves = &leaves;
            s.exec(&p.work, run(move || divide_and_conquer(s, p, leaves, 1024)));
            s.exec(
                &p.work,
                run(move || {
                    let a: Vec<i32> = (0..1024).collect();
                    let parallel = par_sum_plus_one(p, &a);
                    let sequential: i32 = a.iter().map(|&i| i + 1).sum();
                    assert_eq!(parallel, sequential);
                }),
            );
        });
        assert_eq!(leaves.into_inner(), 1024);
    });
}

// rayon-core src/scope/test.rs: lifo_order, fifo_order, nested_*_order and
// mixed_*_order, with `Scope::spawn` and `Scope::spawn_fifo` (rayon's
// `spawn` and `spawn_fifo`; smartpool has one scope type for both). On
// one thread, inside the pool, as rayon runs them inside `install`.

/// `s.spawn` or `s.spawn_fifo` of `f` on `p.work`.
fn spawn_on<'scope>(
    s: &'scope Scope<'scope, '_>,
    p: &'scope Pool<Flat>,
    fifo: bool,
    f: impl FnOnce() + Send + 'scope,
) {
    if fifo {
        s.spawn_fifo(&p.work, f);
    } else {
        s.spawn(&p.work, f);
    }
}

/// rayon's `test_order!`: ten spawns of ten spawns each, every inner one
/// logging `i * 10 + j`.
fn spawn_order(fifo: bool) -> Vec<i32> {
    let owned = pool(1);
    let order = inside(&owned, move |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|s| {
            let log = &log;
            for i in 0..10 {
                spawn_on(s, p, fifo, move || {
                    for j in 0..10 {
                        spawn_on(s, p, fifo, move || log.lock().unwrap().push(i * 10 + j));
                    }
                });
            }
        });
        log.into_inner().unwrap()
    });
    block_on(owned.close());
    order
}

/// rayon's `test_nested_order!`: ten spawns, each opening a scope of ten.
fn nested_spawn_order(outer_fifo: bool, inner_fifo: bool) -> Vec<i32> {
    let owned = pool(1);
    let order = inside(&owned, move |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|s| {
            let log = &log;
            for i in 0..10 {
                spawn_on(s, p, outer_fifo, move || {
                    smartpool::scope(|inner| {
                        for j in 0..10 {
                            spawn_on(inner, p, inner_fifo, move || {
                                log.lock().unwrap().push(i * 10 + j)
                            });
                        }
                    });
                });
            }
        });
        log.into_inner().unwrap()
    });
    block_on(owned.close());
    order
}

/// rayon's `test_mixed_order!`: spawns on an outer and an inner scope,
/// interleaved.
fn mixed_spawn_order(outer_fifo: bool, inner_fifo: bool) -> Vec<i32> {
    let owned = pool(1);
    let order = inside(&owned, move |p| {
        let log = Mutex::new(Vec::new());
        smartpool::scope(|outer| {
            let log = &log;
            let push = move |i: i32| move || log.lock().unwrap().push(i);
            spawn_on(outer, p, outer_fifo, push(0));
            smartpool::scope(|inner| {
                spawn_on(inner, p, inner_fifo, push(-1));
                spawn_on(outer, p, outer_fifo, push(1));
                spawn_on(inner, p, inner_fifo, push(-2));
                spawn_on(outer, p, outer_fifo, push(2));
                spawn_on(inner, p, inner_fifo, push(-3));
            });
            spawn_on(outer, p, outer_fifo, push(3));
        });
        log.into_inner().unwrap()
    });
    block_on(owned.close());
    order
}

#[test]
fn lifo_order_of_spawn() {
    assert_eq!(spawn_order(false), (0..100).rev().collect::<Vec<i32>>());
}

#[test]
fn fifo_order() {
    assert_eq!(spawn_order(true), (0..100).collect::<Vec<i32>>());
}

#[test]
fn nested_lifo_order_of_spawn() {
    assert_eq!(
        nested_spawn_order(false, false),
        (0..100).rev().collect::<Vec<i32>>()
    );
}

#[test]
fn nested_fifo_order() {
    assert_eq!(
        nested_spawn_order(true, true),
        (0..100).collect::<Vec<i32>>()
    );
}

#[test]
fn nested_lifo_fifo_order() {
    let expected: Vec<i32> = (0..10)
        .rev()
        .flat_map(|i| (0..10).map(move |j| i * 10 + j))
        .collect();
    assert_eq!(nested_spawn_order(false, true), expected);
}

#[test]
fn nested_fifo_lifo_order() {
    let expected: Vec<i32> = (0..10)
        .flat_map(|i| (0..10).rev().map(move |j| i * 10 + j))
        .collect();
    assert_eq!(nested_spawn_order(true, false), expected);
}

#[test]
fn mixed_lifo_order_of_spawn() {
    assert_eq!(
        mixed_spawn_order(false, false),
        vec![-3, 2, -2, 1, -1, 3, 0]
    );
}

#[test]
fn mixed_fifo_order() {
    assert_eq!(mixed_spawn_order(true, true), vec![-1, 0, -2, 1, -3, 2, 3]);
}

#[test]
fn mixed_lifo_fifo_order() {
    assert_eq!(mixed_spawn_order(false, true), vec![-1, 2, -2, 1, -3, 3, 0]);
}

#[test]
fn mixed_fifo_lifo_order() {
    assert_eq!(mixed_spawn_order(true, false), vec![-3, 0, -2, 1, -1, 2, 3]);
}
