//! Loom models of a scope's latch, on the real `CountLatch` (and the real
//! `Sleep` for a waiting worker).
//!
//! Properties, for both kinds of waiter (a parked thread, and a worker in
//! its pool's sleep protocol):
//! * the waiter always returns (a lost wake-up leaves the model deadlocked,
//!   which loom reports);
//! * everything a task did before counting down happens before the wait
//!   returns: each task writes a `loom` cell the waiter then reads, so a
//!   missing ordering is reported as a data race. With two tasks, the second
//!   count-down must carry the first's writes (the release sequence); a
//!   nested task is added by a running one.

use super::help::Help;
use super::latch::CountLatch;
use crate::sleep::{Check, Sleep};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// The borrowed data of the scope: one cell per task.
struct World {
    latch: CountLatch,
    cells: [UnsafeCell<u32>; 2],
}

impl World {
    /// The body and the first task are counted; a nested task adds itself.
    fn new() -> Arc<World> {
        Arc::new(World {
            latch: CountLatch::new(2),
            cells: [UnsafeCell::new(0), UnsafeCell::new(0)],
        })
    }

    /// A task's work: write its borrowed cell, then end.
    fn task(&self, i: usize) {
        // SAFETY: task `i` alone writes cell `i`, and the body reads it only
        // after the latch (loom checks that order).
        self.cells[i].with_mut(|cell| unsafe { *cell = 1 });
        self.latch.count_down();
    }

    fn read_all(&self) -> u32 {
        self.cells
            .iter()
            // SAFETY: read after the latch, which the writers counted down
            // after their writes (loom checks that order).
            .map(|c| c.with(|cell| unsafe { *cell }))
            .sum()
    }
}

/// A worker of a 1-thread pool with no other work: sleeps through the real
/// sleep protocol until the latch opens.
struct Worker {
    sleep: Arc<Sleep>,
}

impl Help for Worker {
    fn help_until(&self, done: &dyn Fn() -> bool) -> bool {
        let mut idle = self.sleep.start_looking(0);
        loop {
            if done() {
                self.sleep.work_found(idle, || false);
                return true;
            }
            self.sleep
                .no_work_found(&mut idle, || Check::search_if(done()));
        }
    }

    fn waker(&self) -> Box<dyn Fn() + Send + Sync> {
        let sleep = self.sleep.clone();
        Box::new(move || {
            sleep.rouse(0);
        })
    }
}

/// Runs a scope of `tasks` tasks (the second, if any, submitted by the
/// first) with the given waiter.
fn scope(tasks: usize, worker: bool) {
    let world = World::new();
    // Not joined: the waker may unpark the waiter after it returned, and
    // loom (0.7) would wrongly let that unpark end a later blocking join.
    {
        let world = world.clone();
        thread::spawn(move || {
            if tasks == 2 {
                // A running task submits a task to its own scope.
                world.latch.add();
                let world = world.clone();
                thread::spawn(move || world.task(1));
            }
            world.task(0);
        });
    }
    // The body ends.
    world.latch.count_down();
    let help = worker.then(|| Worker {
        sleep: Arc::new(Sleep::new(1)),
    });
    let help = help.as_ref().map(|w| w as &dyn Help);
    world.latch.wait_isolated_with(help, || false, |_| false);
    assert_eq!(world.read_all(), tasks as u32);
}

/// A worker's isolated wait (`CountLatch::wait_isolated`) for one task
/// that is polled (the waiter isolated: it parks between rounds that ran
/// nothing), then waits (the waiter helps, sleeping in the real `Sleep`),
/// then is polled again and ends. The waiter always returns: the last
/// count-down wakes both its thread and its sleep slot.
fn isolated_scope() {
    use loom::sync::atomic::{AtomicBool, Ordering};
    let world = World::new();
    let polled = Arc::new(AtomicBool::new(true));
    {
        let (world, polled) = (world.clone(), polled.clone());
        thread::spawn(move || {
            polled.store(false, Ordering::Relaxed);
            polled.store(true, Ordering::Relaxed);
            world.task(0);
        });
    }
    // The body ends.
    world.latch.count_down();
    let worker = Worker {
        sleep: Arc::new(Sleep::new(1)),
    };
    world
        .latch
        .wait_isolated_with(Some(&worker), || polled.load(Ordering::Relaxed), |_| false);
    assert_eq!(world.read_all(), 1);
}

/// Explores with 3 preemptions whatever the environment says: the lost
/// wake-up these models exist for (the latch opening between the worker's
/// last look and its sleep) needs 3 to be reached; with `done` left out of
/// the final check, 2 still pass and 3 fail. The models stay small enough.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn a_parked_waiter_is_woken() {
    model(|| scope(1, false));
}

#[test]
fn a_sleeping_worker_waiter_is_woken() {
    model(|| scope(1, true));
}

#[test]
fn a_nested_task_is_waited_for_by_a_parked_waiter() {
    model(|| scope(2, false));
}

#[test]
fn a_nested_task_is_waited_for_by_a_sleeping_worker() {
    model(|| scope(2, true));
}

#[test]
fn an_isolated_waiter_is_woken_whether_it_parks_or_sleeps() {
    model(isolated_scope);
}

/// The claim (`claim`): a shell running on one thread and the waiter taking
/// the task on another; or the shell dropped unrun while the waiter takes.
/// Properties: the task is run exactly once and dropped exactly once.
mod claim {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::super::claim::{Claim, Shell};
    use crate::core::context::LocalTask as Erased;
    use crate::sync::{AtomicUsize, Ordering};
    use loom::thread;
    // The claim is shared through std's `Arc`, as in the pool.
    use std::sync::Arc;

    /// Counts its runs and drops.
    struct Counted(Arc<[AtomicUsize; 2]>);

    impl Future for Counted {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            self.0[0].fetch_add(1, Ordering::SeqCst);
            Poll::Ready(())
        }
    }

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0[1].fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll_once<F: Future<Output = ()> + ?Sized>(future: Pin<&mut F>) {
        let waker = futures::task::noop_waker();
        let _ = future.poll(&mut Context::from_waker(&waker));
    }

    fn run(shell_runs: bool) {
        loom::model(move || {
            let counts = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
            let task: Erased = Box::pin(Counted(counts.clone()));
            let claim = Arc::new(Claim::new(task, 0));
            let mut shell = Shell::new(claim.clone());
            let pool_side = thread::spawn(move || {
                if shell_runs {
                    poll_once(std::pin::pin!(&mut shell));
                }
                drop(shell);
            });
            // The waiter: takes the task if the shell did not, and runs it.
            if let Some(mut task) = claim.take() {
                poll_once(task.as_mut());
            }
            pool_side.join().unwrap();
            let runs = counts[0].load(Ordering::SeqCst);
            assert_eq!(counts[1].load(Ordering::SeqCst), 1, "dropped exactly once");
            if shell_runs {
                assert_eq!(runs, 1, "run exactly once");
            } else {
                assert!(runs <= 1, "run at most once");
            }
        });
    }

    #[test]
    fn the_shell_and_the_waiter_run_a_claimed_task_once() {
        run(true);
    }

    #[test]
    fn a_shell_dropped_unrun_takes_the_task_along() {
        run(false);
    }
}

/// A stolen job's latch (`stack`): the owner registers and waits (helping
/// between parks) while the thief writes the result and sets the latch. The owner always returns (a lost wake-up deadlocks
/// the model), and the result is visible to it (else loom reports a data
/// race on the cell). The job's deque is crossbeam's, which loom does not
/// run: its pop and steal take a job exactly once.
mod stack_latch {
    use super::super::stack::JobLatch;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    struct Job {
        latch: JobLatch,
        result: UnsafeCell<u32>,
    }

    fn run(help_once: Option<fn() -> bool>) {
        loom::model(move || {
            let job = Arc::new(Job {
                latch: JobLatch::new(),
                result: UnsafeCell::new(0),
            });
            let thief = {
                let job = job.clone();
                thread::spawn(move || {
                    // SAFETY: the thief alone writes the result before the
                    // set; the owner reads it after.
                    job.result.with_mut(|result| unsafe { *result = 7 });
                    // SAFETY: the job is alive (the `Arc`).
                    if let Some(owner) = unsafe { JobLatch::set(&job.latch) } {
                        owner.unpark();
                    }
                })
            };
            match help_once {
                Some(help_once) => job.latch.wait(|_| help_once()),
                None => job.latch.wait_parked(),
            }
            assert!(job.latch.is_set());
            // SAFETY: the latch is set: the thief is done with the cell.
            assert_eq!(job.result.with(|result| unsafe { *result }), 7);
            thief.join().unwrap();
        });
    }

    #[test]
    fn a_parked_owner_is_woken_and_sees_the_result() {
        run(None);
    }

    #[test]
    fn an_owner_that_finds_nothing_to_help_is_woken() {
        run(Some(|| false));
    }

    #[test]
    fn an_owner_that_helps_between_parks_is_woken() {
        run(Some(|| {
            thread::yield_now();
            false
        }));
    }
}
