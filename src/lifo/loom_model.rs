//! Loom models of the stealable LIFO slot, on the real `Slot`, `Observer`
//! and `Sleep`.
//!
//! Worker 0 (the model's main thread) fills its slot and then blocks until
//! the task has run: the case of a task waiting for one it put in the slot.
//! Worker 1 is idle and searches as `pool::worker` does (steal pass, then
//! a sleep round whose final check reads the observer). If the protocol
//! could leave worker 1 asleep while the task sits in the slot, both block
//! and loom reports the deadlock.
//!
//! Properties:
//! * `a_blocked_owner_is_robbed`: the task is stolen, wherever the fill
//!   lands in the thief's search;
//! * `a_sleeping_thief_is_woken`: the same, the fill landing once the thief
//!   sleeps;
//! * `a_second_fill_is_robbed`: the owner takes its first task back and
//!   fills again before blocking; the thief, which may have seen the first
//!   task, steals the second, and each task runs once;
//! * `a_busy_owner_is_watched`: the owner comes back twice, then blocks;
//! * `owner_and_thief_take_once`: the owner takes its task while the thief
//!   may steal it; exactly one of them runs it, and the thief ends;
//! * `two_thieves_and_a_refill_take_each_task_once`: the slot alone, a
//!   stale thief and a fresh one against an owner that takes and fills
//!   again.
//!
//! Under loom the steal delay is zero (any time may pass between two
//! looks) and a watch waits no time (loom's timed wait never times out);
//! both widen what the model explores.
//!
//! Mutation checks (each failed the named models, then was undone):
//! `slot_filled` waking nobody (`a_sleeping_thief_is_woken`); the final
//! check sleeping on `Young` (`a_second_fill_is_robbed`) or on `Moving`
//! (`a_busy_owner_is_watched`); a claim by load and store instead of
//! compare-exchange (loom reports the cell used by two threads); a steal
//! without its fence (`owner_and_thief_take_once`,
//! `a_second_fill_is_robbed`, `a_busy_owner_is_watched`: the cell used by
//! two threads); a thief claiming any fill but the claim's own, not only
//! later ones (`two_thieves_and_a_refill_take_each_task_once`: a stale
//! thief's verdict hides a steal, and the slot reads full).
//!
//! The fill fence pairs with the sleep fence and `work_found`'s. The
//! models check the first pairing: a fill without its fence fails
//! `a_busy_owner_is_watched`. `work_found`'s pairing is not modelled
//! (the thief's `more_work` here is `|| false`); `sleep` and `lifo`
//! argue it.

use super::slot::Slot;
use super::watch::{Verdict, Watch};
use crate::sleep::{Check, Sleep};
use crate::sync::{lock, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};
use loom::sync::Arc;

/// A task: counts its runs and its drops.
struct Task(Arc<World>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

struct World {
    sleep: Sleep,
    slots: Vec<Slot<Task>>,
    /// Tasks run; worker 0 blocks on `ran_changed` for it.
    ran: Mutex<usize>,
    ran_changed: Condvar,
    dropped: AtomicUsize,
    done: AtomicBool,
}

impl World {
    fn new() -> Arc<World> {
        Arc::new(World {
            sleep: Sleep::new(2),
            slots: vec![Slot::new(), Slot::new()],
            ran: Mutex::new(0),
            ran_changed: Condvar::new(),
            dropped: AtomicUsize::new(0),
            done: AtomicBool::new(false),
        })
    }

    fn run(&self, task: Task) {
        drop(task);
        *lock(&self.ran) += 1;
        self.ran_changed.notify_all();
    }

    /// Worker 0, active: fills its slot and announces it, as `enqueue`
    /// does.
    fn fill(&self, world: &Arc<World>) {
        assert!(self.slots[0].fill(Task(world.clone())).is_ok());
        self.sleep.slot_filled(false);
    }

    /// Worker 0 blocks until a task ran (the thief wakes it).
    fn wait_for_run(&self, runs: usize) {
        let mut ran = lock(&self.ran);
        while *ran < runs {
            ran = self.ran_changed.wait(ran).unwrap();
        }
    }

    fn runs(&self) -> usize {
        *lock(&self.ran)
    }

    /// Ends the thief: the pool's termination, as `close` signals it.
    fn terminate(&self) {
        self.done.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }

    /// Worker 1's idle search, steal after steal, until `done` or `steals`
    /// steals. Returns how many tasks it stole.
    fn thief(&self, steals: usize) -> usize {
        let observer = Watch::new(2);
        let mut stolen = 0;
        while stolen < steals && !self.done.load(Ordering::SeqCst) {
            if self.search(&observer) {
                stolen += 1;
            }
        }
        stolen
    }

    /// One idle search: `true` if it stole and ran a task, `false` at
    /// `done`.
    fn search(&self, observer: &Watch) -> bool {
        let mut idle = self.sleep.start_looking(1);
        loop {
            if self.done.load(Ordering::SeqCst) {
                return false;
            }
            match observer.observe(1, &self.slots) {
                Verdict::Steal(worker, seen) => {
                    if let Some(task) = self.slots[worker].steal(seen) {
                        self.sleep.work_found(idle, || false);
                        self.run(task);
                        return true;
                    }
                    continue;
                }
                Verdict::Young => {
                    loom::thread::yield_now();
                    continue;
                }
                Verdict::Moving | Verdict::Quiet => {}
            }
            self.sleep.no_work_found(&mut idle, || {
                if self.done.load(Ordering::SeqCst) {
                    return Check::Search;
                }
                match observer.observe(1, &self.slots) {
                    Verdict::Steal(..) | Verdict::Young => Check::Search,
                    Verdict::Moving => Check::Watch,
                    Verdict::Quiet => Check::Sleep,
                }
            });
        }
    }
}

fn spawn_thief(world: &Arc<World>, steals: usize) -> loom::thread::JoinHandle<usize> {
    let world = world.clone();
    loom::thread::spawn(move || world.thief(steals))
}

/// Explores with 3 preemptions whatever the environment says (see the
/// mutation checks above: 2 do not reach them).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

#[test]
fn a_blocked_owner_is_robbed() {
    model(|| {
        let world = World::new();
        let thief = spawn_thief(&world, 1);
        world.fill(&world);
        // Blocks in a task that waits for the one it put in the slot.
        world.wait_for_run(1);
        assert_eq!(thief.join().unwrap(), 1);
        assert_eq!(world.dropped.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_second_fill_is_robbed() {
    model(|| {
        let world = World::new();
        let thief = spawn_thief(&world, 2);
        world.fill(&world);
        let mine = world.slots[0].take();
        let taken_back = mine.is_some();
        match mine {
            Some(task) => world.run(task),
            // The thief got it: the slot is empty once it ran it.
            None => world.wait_for_run(1),
        }
        world.fill(&world);
        world.wait_for_run(2);
        world.terminate();
        let stolen = thief.join().unwrap();
        assert_eq!(stolen, if taken_back { 1 } else { 2 });
        assert_eq!(world.dropped.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn owner_and_thief_take_once() {
    model(|| {
        let world = World::new();
        let thief = spawn_thief(&world, 1);
        world.fill(&world);
        if let Some(task) = world.slots[0].take() {
            world.run(task);
        }
        world.wait_for_run(1);
        world.terminate();
        let stolen = thief.join().unwrap();
        assert_eq!(world.runs(), 1);
        assert!(stolen <= 1);
        assert_eq!(world.dropped.load(Ordering::SeqCst), 1);
    });
}

/// The fill lands once the thief sleeps: only the filler's wake-up gets
/// the task out
/// (loom's yields seldom let the thief sleep before a fill that comes right
/// away, so the model waits for it).
#[test]
fn a_sleeping_thief_is_woken() {
    model(|| {
        let world = World::new();
        let thief = spawn_thief(&world, 1);
        while world.sleep.sleeping() == 0 {
            loom::thread::yield_now();
        }
        world.fill(&world);
        world.wait_for_run(1);
        assert_eq!(thief.join().unwrap(), 1);
    });
}

/// The owner comes back for two tasks, then blocks in the third: a thief
/// that saw the slot moving must watch, not sleep, or it misses the third.
#[test]
fn a_busy_owner_is_watched() {
    model(|| {
        let world = World::new();
        let thief = spawn_thief(&world, 3);
        for round in 1..=2 {
            world.fill(&world);
            match world.slots[0].take() {
                Some(task) => world.run(task),
                None => world.wait_for_run(round),
            }
            // Whoever ran it, the slot is empty for the next fill.
            world.wait_for_run(round);
        }
        world.fill(&world);
        world.wait_for_run(3);
        world.terminate();
        thief.join().unwrap();
    });
}

/// Two thieves, one of them stale (it looked before the owner took the first
/// task back and filled again): each task goes to exactly one of the three,
/// the cell has one user at a time, and the slot ends empty and usable.
#[test]
fn two_thieves_and_a_refill_take_each_task_once() {
    loom::model(|| {
        let slot = Arc::new(Slot::<usize>::new());
        slot.fill(1).unwrap();
        let stale = slot.look();
        let thieves: Vec<_> = (0..2)
            .map(|k| {
                let slot = slot.clone();
                loom::thread::spawn(move || {
                    let seen = if k == 0 { stale } else { slot.look() };
                    slot.steal(seen)
                })
            })
            .collect();
        let mut got: Vec<usize> = slot.take().into_iter().collect();
        slot.fill(2).expect("empty after a take");
        for thief in thieves {
            got.extend(thief.join().unwrap());
        }
        if got.contains(&2) {
            // Stolen: the slot reads empty before its owner is back.
            assert!(!slot.look().is_full());
            assert_eq!(slot.take(), None);
        } else {
            assert_eq!(slot.take(), Some(2));
        }
        got.extend((!got.contains(&2)).then_some(2));
        got.sort_unstable();
        assert_eq!(got, [1, 2]);
        slot.fill(3).expect("empty at the end");
        assert_eq!(slot.take(), Some(3));
    });
}
