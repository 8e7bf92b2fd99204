//! Loom models of the sleep protocol, on the real `Sleep` and `Status`.
//!
//! Properties:
//! * `outside_post_is_never_lost`: a job posted while the worker is going to
//!   sleep is always taken (a lost wake-up would leave the model deadlocked,
//!   which loom reports);
//! * `one_post_wakes_at_most_one`: with two workers, one post wakes at most
//!   one sleeper, and termination wakes whoever is left.

use super::*;
use crate::status::{Bit, Status};
use crate::sync::{AtomicBool, AtomicUsize};
use loom::sync::Arc;

struct World {
    sleep: Sleep,
    status: Status,
    /// The channel: counts queued jobs.
    jobs: AtomicUsize,
    /// The pool's TERMINATED phase.
    done: AtomicBool,
}

impl World {
    fn new(workers: usize) -> Arc<World> {
        Arc::new(World {
            sleep: Sleep::new(workers),
            status: Status::new(1),
            jobs: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        })
    }

    fn take(&self) -> bool {
        self.jobs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    fn post(&self) -> usize {
        self.jobs.fetch_add(1, Ordering::Release);
        self.status.mark(Bit::new(0));
        self.sleep.new_jobs(1)
    }

    /// A worker's idle loop, as `pool::worker` runs it: returns `true` if it
    /// took a job, `false` if it saw termination.
    fn work(&self, index: usize) -> bool {
        let bit = Bit::new(0);
        let mut idle = self.sleep.start_looking(index);
        loop {
            if self.take() {
                self.sleep.work_found(idle, false);
                return true;
            }
            if self.done.load(Ordering::SeqCst) {
                return false;
            }
            self.status.clear(bit);
            if self.take() {
                self.status.set(bit);
                self.sleep.work_found(idle, false);
                return true;
            }
            self.sleep.no_work_found(&mut idle, || {
                self.status.any() || self.done.load(Ordering::SeqCst)
            });
        }
    }

    fn terminate(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }
}

#[test]
fn outside_post_is_never_lost() {
    loom::model(|| {
        let world = World::new(1);
        let worker = {
            let world = world.clone();
            loom::thread::spawn(move || world.work(0))
        };
        world.post();
        assert!(worker.join().unwrap(), "the posted job was not taken");
    });
}

#[test]
fn one_post_wakes_at_most_one() {
    loom::model(|| {
        let world = World::new(2);
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let world = world.clone();
                loom::thread::spawn(move || world.work(i))
            })
            .collect();
        assert!(world.post() <= 1, "one job woke more than one sleeper");
        world.terminate();
        let took: usize = workers.into_iter().map(|w| w.join().unwrap() as usize).sum();
        // The job is taken by a worker, or is still queued if both saw
        // termination first; never lost and never taken twice.
        assert_eq!(took + world.jobs.load(Ordering::SeqCst), 1);
    });
}
