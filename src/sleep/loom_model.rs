//! Loom models of the sleep protocol, on the real `Sleep` and `Status`.
//!
//! Properties:
//! * `outside_post_is_never_lost`: a job posted while the worker is going to
//!   sleep is always taken (a lost wake-up would leave the model deadlocked,
//!   which loom reports);
//! * `one_post_wakes_at_most_one`: with two workers, one post wakes at most
//!   one sleeper, and termination wakes whoever is left;
//! * `a_second_job_is_handed_on`: a worker that found a job while being the
//!   last awake idle one wakes a sleeper for the rest, judging "the rest" by
//!   the channel (not its bit, which outlives the last job);
//! * `a_batch_reaches_both_workers`: two jobs posted as one batch reach
//!   both sleeping workers;
//! * `a_clearers_second_look_announces`: from the racing state (a busy
//!   worker cleared the bit while two jobs were posted by posters that saw
//!   it set, and an idle worker is leaving idle with a job of its own), the
//!   clearer's second look takes one job and announces it (mark and
//!   `new_jobs`, as `Pool::take` does), so the sleeper is woken for the
//!   other; with a plain `set` instead, the model deadlocks.
//!
//! And of its domains (a worker reserved for the top level, one common):
//! * `a_low_job_reaches_a_common_worker`: a job the reserved worker does
//!   not serve is taken by the common one, the reserved one never taking
//!   it;
//! * `an_urgent_job_is_never_lost`: a top-level job posted while both go
//!   to sleep is taken, once;
//! * `a_reserved_workers_rest_is_handed_to_the_common_domain`: the
//!   reserved worker, last awake idle in its domain, leaves idle while a
//!   job whose poster counted on it waits; it hands the job on to the
//!   common domain, whose worker sleeps (with the hand-on removed, the
//!   model deadlocks).
//!
//! What the models cannot show: the final status check guards against the
//! JEC wrapping around to the value a sleepy worker remembered (2^32
//! events), which no exhaustive model reaches; with the final check removed
//! these models still pass, because the JEC catches every race they can
//! produce. The check's own argument is in the module doc.

use super::*;
use crate::status::{Bit, Status};
use crate::sync::{lock, AtomicBool, AtomicUsize, Condvar, Mutex};
use loom::sync::Arc;

/// A pool reduced to its sleep protocol: one channel (a counter), the
/// status bits, termination. Also the harness of `core::seats`' model.
pub(crate) struct World {
    pub(crate) sleep: Sleep,
    pub(crate) status: Status,
    /// The channel: counts queued jobs.
    pub(crate) jobs: AtomicUsize,
    /// The pool's TERMINATED phase.
    pub(crate) done: AtomicBool,
    taken: Mutex<usize>,
    taken_changed: Condvar,
}

impl World {
    pub(crate) fn new(workers: usize) -> Arc<World> {
        Arc::new(World {
            sleep: Sleep::new(workers),
            status: Status::new(1),
            jobs: AtomicUsize::new(0),
            done: AtomicBool::new(false),
            taken: Mutex::new(0),
            taken_changed: Condvar::new(),
        })
    }

    /// Looks before it takes, as a real queue's emptiness check does: a
    /// plain load can miss a push that is not yet visible, which is what the
    /// protocol's fences are for (an RMW would always see it).
    pub(crate) fn take(&self) -> bool {
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

    pub(crate) fn post(&self) -> usize {
        self.jobs.fetch_add(1, Ordering::Release);
        self.status.mark(Bit::new(0));
        self.sleep.new_jobs(1)
    }

    /// `Pool::take`'s second look, after clearing the bit: a job found
    /// then is announced.
    fn second_look(&self) -> bool {
        if self.take() {
            self.status.mark(Bit::new(0));
            self.sleep.new_jobs(1);
            return true;
        }
        false
    }

    /// A worker's idle loop, as `pool::worker` and `Pool::take` run it:
    /// look into the channel only if its bit is set; on finding it empty,
    /// clear and look again. Returns `true` if it took a job, `false` if it
    /// saw termination.
    fn work(&self, index: usize) -> bool {
        let bit = Bit::new(0);
        let mut idle = self.sleep.start_looking(index);
        loop {
            if self.status.is_set(bit) {
                if self.take() {
                    self.sleep.work_found(idle, || self.work_remains());
                    self.took();
                    return true;
                }
                self.status.clear(bit);
                if self.second_look() {
                    self.sleep.work_found(idle, || self.work_remains());
                    self.took();
                    return true;
                }
            }
            if self.done.load(Ordering::SeqCst) {
                return false;
            }
            self.sleep.no_work_found(&mut idle, || {
                Check::search_if(self.status.any() || self.done.load(Ordering::SeqCst))
            });
        }
    }

    /// What `Pool::work_remains` asks after `work_found`'s fence: a set bit
    /// whose channel is not empty (a plain load, as a queue's emptiness
    /// check is).
    fn work_remains(&self) -> bool {
        self.status.is_set(Bit::new(0)) && self.jobs.load(Ordering::Acquire) > 0
    }

    /// Counts a job taken, for a poster that waits for them.
    pub(crate) fn took(&self) {
        *lock(&self.taken) += 1;
        self.taken_changed.notify_all();
    }

    /// Blocks until `n` jobs were taken (a job left with every worker
    /// asleep leaves it blocked, which loom reports as a deadlock).
    pub(crate) fn wait_taken(&self, n: usize) {
        let mut taken = lock(&self.taken);
        while *taken < n {
            taken = self.taken_changed.wait(taken).unwrap();
        }
    }

    fn terminate(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }
}

/// Starts `n` workers, each searching until it took a job or saw
/// termination.
fn spawn_workers(world: &Arc<World>, n: usize) -> Vec<loom::thread::JoinHandle<bool>> {
    (0..n)
        .map(|i| {
            let world = world.clone();
            loom::thread::spawn(move || world.work(i))
        })
        .collect()
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
        let workers = spawn_workers(&world, 2);
        assert!(world.post() <= 1, "one job woke more than one sleeper");
        world.terminate();
        let took: usize = workers
            .into_iter()
            .map(|w| w.join().unwrap() as usize)
            .sum();
        // The job is taken by a worker, or is still queued if both saw
        // termination first; never lost and never taken twice.
        assert_eq!(took + world.jobs.load(Ordering::SeqCst), 1);
    });
}

/// Two jobs, two workers that take one each: the worker that finds the
/// first while the second is being posted, and was the last awake idle
/// one, must hand the search on, or the second job sits while its worker
/// sleeps (loom reports the deadlock). `work_remains` checks the channel,
/// not only its bit, which stays set after the last job is taken; with
/// the check removed (`|| false`), this model deadlocks.
#[test]
fn a_second_job_is_handed_on() {
    loom::model(|| {
        let world = World::new(2);
        let workers = spawn_workers(&world, 2);
        world.post();
        world.post();
        for worker in workers {
            assert!(worker.join().unwrap(), "a job was not taken");
        }
    });
}

/// A batch: two jobs stored, the bit marked once, posted as two (as
/// `Shared::pushed_many` does) while both workers go to sleep: both jobs
/// are taken, and the post wakes at most two.
#[test]
fn a_batch_reaches_both_workers() {
    loom::model(|| {
        let world = World::new(2);
        let workers = spawn_workers(&world, 2);
        world.jobs.fetch_add(2, Ordering::Release);
        world.status.mark(Bit::new(0));
        assert!(world.sleep.new_jobs_at(0, 2) <= 2);
        for worker in workers {
            assert!(worker.join().unwrap(), "a job of the batch was not taken");
        }
    });
}

/// See the module doc. The racing state: two jobs queued, their bit clear
/// (worker 0 cleared it after their posters saw it set), worker 1 idle with
/// a job of its own in hand, worker 2 searching (it will sleep: the bit is
/// clear). Worker 0 takes one job on its second look and then stays busy
/// with it; worker 1 leaves idle; the other job must reach worker 2.
#[test]
fn a_clearers_second_look_announces() {
    loom::model(|| {
        let world = World::new(3);
        world.jobs.store(2, Ordering::SeqCst);
        // Worker 1 counts as idle from the start (it searched and found).
        let leaving = world.sleep.start_looking(1);
        let clearer = {
            let world = world.clone();
            loom::thread::spawn(move || {
                if world.second_look() {
                    world.took();
                }
            })
        };
        let sleeper = {
            let world = world.clone();
            loom::thread::spawn(move || world.work(2))
        };
        world.sleep.work_found(leaving, || world.work_remains());
        world.wait_taken(2);
        world.terminate();
        clearer.join().unwrap();
        sleeper.join().unwrap();
    });
}

/// A pool of two levels (channel 0 above channel 1, each a job counter)
/// whose worker 0 is reserved for level 0, in sleep domain 1; worker 1
/// serves both, in the common domain 0 (see the module doc's "Domains").
struct Reserved {
    sleep: Sleep,
    status: Status,
    jobs: [AtomicUsize; 2],
    done: AtomicBool,
    taken: Mutex<usize>,
    taken_changed: Condvar,
}

impl Reserved {
    fn new() -> Arc<Reserved> {
        Arc::new(Reserved {
            sleep: Sleep::with_domains(vec![1, 0]),
            status: Status::new(2),
            jobs: [AtomicUsize::new(0), AtomicUsize::new(0)],
            done: AtomicBool::new(false),
            taken: Mutex::new(0),
            taken_changed: Condvar::new(),
        })
    }

    /// The channels worker `index` serves.
    fn serves(index: usize) -> &'static [usize] {
        if index == 0 {
            &[0]
        } else {
            &[0, 1]
        }
    }

    fn take(&self, channel: usize) -> bool {
        let jobs = &self.jobs[channel];
        let mut n = jobs.load(Ordering::Acquire);
        while n > 0 {
            match jobs.compare_exchange(n, n - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(actual) => n = actual,
            }
        }
        false
    }

    /// A job at `channel`, posted as `Shared::pushed` does.
    fn post(&self, channel: usize) {
        self.jobs[channel].fetch_add(1, Ordering::Release);
        self.announce(channel);
    }

    /// `Shared::pushed`: marks the bit and posts to the domains that serve
    /// the channel's level (channel 0: the reserved domain 1 first).
    fn announce(&self, channel: usize) {
        self.status.mark(Bit::new(channel));
        if channel == 0 {
            self.sleep.new_jobs_in(&[1], 0, 1);
        } else {
            self.sleep.new_jobs(1);
        }
    }

    /// `Pool::work_remains` for worker 0 (its levels only) or 1.
    fn work_remains(&self, index: usize) -> bool {
        Reserved::serves(index)
            .iter()
            .any(|&c| self.status.is_set(Bit::new(c)) && self.jobs[c].load(Ordering::Acquire) > 0)
    }

    /// Searches the channels `index` serves, as `Pool::take` does, until
    /// it took a job (`true`) or saw termination.
    fn work(&self, index: usize) -> bool {
        let mut idle = self.sleep.start_looking(index);
        loop {
            for &channel in Reserved::serves(index) {
                let bit = Bit::new(channel);
                if !self.status.is_set(bit) {
                    continue;
                }
                let mut found = self.take(channel);
                if !found {
                    self.status.clear(bit);
                    found = self.take(channel);
                    if found {
                        self.announce(channel);
                    }
                }
                if found {
                    self.sleep.work_found(idle, || self.work_remains(index));
                    self.took();
                    return true;
                }
            }
            if self.done.load(Ordering::SeqCst) {
                return false;
            }
            self.sleep.no_work_found(&mut idle, || {
                let work = Reserved::serves(index)
                    .iter()
                    .any(|&c| self.status.is_set(Bit::new(c)));
                Check::search_if(work || self.done.load(Ordering::SeqCst))
            });
        }
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

    fn terminate(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }
}

/// A low-level job is never left to the reserved worker alone: posted to
/// the common domain, it reaches worker 1 (a poster counting on the
/// reserved worker's idleness would leave it stranded: loom reports the
/// deadlock).
#[test]
fn a_low_job_reaches_a_common_worker() {
    loom::model(|| {
        let world = Reserved::new();
        let common = {
            let world = world.clone();
            loom::thread::spawn(move || world.work(1))
        };
        let reserved = {
            let world = world.clone();
            loom::thread::spawn(move || world.work(0))
        };
        world.post(1);
        world.wait_taken(1);
        world.terminate();
        assert!(
            common.join().unwrap(),
            "the low job went to the common worker"
        );
        assert!(
            !reserved.join().unwrap(),
            "the reserved worker took no low job"
        );
    });
}

/// An urgent job posted while both workers go to sleep is taken: the
/// reserved domain's protocol covers it, or the common domain's.
#[test]
fn an_urgent_job_is_never_lost() {
    loom::model(|| {
        let world = Reserved::new();
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let world = world.clone();
                loom::thread::spawn(move || world.work(i))
            })
            .collect();
        world.post(0);
        world.wait_taken(1);
        world.terminate();
        let took: usize = workers
            .into_iter()
            .map(|w| w.join().unwrap() as usize)
            .sum();
        assert_eq!(took, 1, "taken once");
    });
}

/// Two urgent jobs as one batch while both workers sleep: the reserved
/// domain takes what it can (one), the common domain the rest (one), and
/// no more than two are woken.
#[test]
fn a_batch_is_split_between_the_domains() {
    loom::model(|| {
        let world = Reserved::new();
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let world = world.clone();
                loom::thread::spawn(move || world.work(i))
            })
            .collect();
        while world.sleep.sleeping() < 2 {
            loom::thread::yield_now();
        }
        world.jobs[0].fetch_add(2, Ordering::Release);
        world.status.mark(Bit::new(0));
        // (One, if the woken reserved worker's hand-on woke the common one
        // first.)
        assert!(
            world.sleep.new_jobs_in(&[1], 0, 2) <= 2,
            "no more than the jobs"
        );
        for worker in workers {
            assert!(worker.join().unwrap(), "each took a job");
        }
    });
}

/// The gap `work_found` closes: the reserved worker leaves idle with an
/// urgent job in hand (taken before the model starts) while a second is
/// posted (its poster may count on the reserved worker's idleness and
/// wake nobody), then stays busy. The common worker must hear of the
/// second job: with the hand-on to the common domain removed, this model
/// deadlocks.
#[test]
fn a_reserved_workers_rest_is_handed_to_the_common_domain() {
    loom::model(|| {
        let world = Reserved::new();
        let common = {
            let world = world.clone();
            loom::thread::spawn(move || world.work(1))
        };
        // The common worker is asleep (the race with a worker going to
        // sleep is the other models'), and worker 0 counts as idle (it
        // searched and found).
        while world.sleep.sleeping() == 0 {
            loom::thread::yield_now();
        }
        let leaving = world.sleep.start_looking(0);
        let poster = {
            let world = world.clone();
            loom::thread::spawn(move || world.post(0))
        };
        world.sleep.work_found(leaving, || world.work_remains(0));
        poster.join().unwrap();
        world.wait_taken(1);
        world.terminate();
        assert!(common.join().unwrap(), "the common worker took the job");
    });
}

/// What the models need of `Sleep` beyond what the pool uses.
impl Sleep {
    /// `workers` slots, all in the common domain.
    pub(crate) fn new(workers: usize) -> Sleep {
        Sleep::with_domains(vec![0; workers])
    }

    /// Workers asleep now, in every domain.
    pub(crate) fn sleeping(&self) -> usize {
        std::iter::once(&self.common)
            .chain(self.reserved.iter())
            .map(|d| d.counters.load().sleeping())
            .sum()
    }

    /// `n` jobs were posted (their bits already marked, see the module doc)
    /// to the common domain, from no channel in particular. Returns how
    /// many sleepers it woke.
    pub(crate) fn new_jobs(&self, n: usize) -> usize {
        self.post(0, n, 0).woken
    }
}
