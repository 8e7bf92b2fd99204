//! Loom model of `block_in_place`'s hand-over (see `pool::blocking`), on
//! the real `Sleep`, `Status` and `Seats`: worker W hands its place to a
//! stand-in G on a guest seat while a poster P pushes a task and another
//! worker S goes to sleep.
//!
//! Properties: no lost wake-up (while W blocks, every task, the one W moved
//! out of its own queue and P's, is taken by S or G: a task left while
//! both sleep leaves W waiting for ever, which loom reports); G ends when
//! told to retire, also when it was asleep then (else the join blocks); no
//! seat with two owners (a claim of the guest seat never succeeds while G
//! holds it).
//!
//! What it leaves out: the queues are a counter (as in `sleep`'s models),
//! and the context switch of step 1 is not modelled (no loom model runs a
//! worker context, see `crate::context`).

use super::*;
use crate::sleep::{Check, Sleep};
use crate::status::{Bit, Status};
use crate::sync::{AtomicBool, AtomicUsize, Condvar, Ordering};
use loom::sync::Arc;

struct World {
    sleep: Sleep,
    status: Status,
    jobs: AtomicUsize,
    done: AtomicBool,
    taken: Mutex<usize>,
    taken_changed: Condvar,
    seats: Seats,
}

impl World {
    fn take(&self) -> bool {
        let mut n = self.jobs.load(Ordering::Acquire);
        while n > 0 {
            match self
                .jobs
                .compare_exchange(n, n - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    fn post(&self) {
        self.jobs.fetch_add(1, Ordering::Release);
        self.status.mark(Bit::new(0));
        self.sleep.new_jobs(1);
    }

    fn took(&self) {
        *lock(&self.taken) += 1;
        self.taken_changed.notify_all();
    }

    fn wait_taken(&self, n: usize) {
        let mut taken = lock(&self.taken);
        while *taken < n {
            taken = self.taken_changed.wait(taken).unwrap();
        }
    }

    /// A worker's loop from seat `index` (`Pool::take`'s bit protocol, the
    /// sleep protocol), taking jobs until `stop()` or termination.
    fn serve(&self, index: usize, stop: &dyn Fn() -> bool) {
        let bit = Bit::new(0);
        loop {
            let mut idle = self.sleep.start_looking(index);
            loop {
                if stop() || self.done.load(Ordering::SeqCst) {
                    return;
                }
                if self.status.is_set(bit) {
                    let mut found = self.take();
                    if !found {
                        self.status.clear(bit);
                        found = self.take();
                        if found {
                            self.status.mark(bit);
                            self.sleep.new_jobs(1);
                        }
                    }
                    if found {
                        self.sleep.work_found(idle, || {
                            self.status.is_set(bit) && self.jobs.load(Ordering::Acquire) > 0
                        });
                        self.took();
                        break;
                    }
                }
                self.sleep.no_work_found(&mut idle, || {
                    Check::search_if(
                        self.status.any() || self.done.load(Ordering::SeqCst) || stop(),
                    )
                });
            }
        }
    }
}

/// Four threads: at loom's preemption bound of 2 the model takes two
/// minutes, so it runs at 1 (every interleaving with one preemption), in
/// about two seconds; both bounds pass. Without the rouse of the retiring
/// stand-in, it deadlocks at bound 1.
#[test]
fn hand_over_loses_no_wake_up_and_no_seat() {
    let mut model = loom::model::Builder::new();
    model.preemption_bound = Some(1);
    model.check(|| {
        let guest = WorkerLocal::new(0, 2, 0, true).0;
        let world = Arc::new(World {
            sleep: Sleep::new(3),
            status: Status::new(1),
            jobs: AtomicUsize::new(0),
            done: AtomicBool::new(false),
            taken: Mutex::new(0),
            taken_changed: Condvar::new(),
            seats: Seats::new(vec![guest]),
        });
        let sleeper = {
            let world = world.clone();
            loom::thread::spawn(move || world.serve(1, &|| false))
        };
        let poster = {
            let world = world.clone();
            loom::thread::spawn(move || world.post())
        };
        // W (this thread, seat 0) blocks: the task in its own queue goes
        // to the channel, then a guest seat goes to the stand-in.
        world.post();
        let seat = world.seats.claim(None).expect("a free guest seat");
        let retire = Arc::new(AtomicBool::new(false));
        let holding = Arc::new(AtomicBool::new(true));
        let stand_in = {
            let (world, retire, holding) = (world.clone(), retire.clone(), holding.clone());
            loom::thread::spawn(move || {
                world.serve(seat.index, &|| retire.load(Ordering::SeqCst));
                holding.store(false, Ordering::SeqCst);
                world.seats.release(seat, true);
            })
        };
        // While W blocks, S and G take both tasks.
        world.wait_taken(2);
        // W is back: the stand-in retires, roused if it sleeps.
        world.seats.retiring();
        retire.store(true, Ordering::SeqCst);
        world.sleep.rouse(2);
        if let Some(seat) = world.seats.claim(None) {
            assert!(!holding.load(Ordering::SeqCst), "a seat with two owners");
            world.seats.release(seat, false);
        }
        stand_in.join().unwrap();
        world.done.store(true, Ordering::SeqCst);
        world.sleep.wake_all();
        poster.join().unwrap();
        sleeper.join().unwrap();
        assert!(world.seats.all_free());
        assert_eq!(world.jobs.load(Ordering::SeqCst), 0);
    });
}
