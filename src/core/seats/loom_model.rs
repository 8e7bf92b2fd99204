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
use crate::sleep::loom_model::World;
use crate::sleep::Check;
use crate::status::Bit;
use crate::sync::{AtomicBool, Ordering};
use loom::sync::Arc;

/// A worker's loop from seat `index` (`Pool::take`'s bit protocol, the
/// sleep protocol), taking jobs until `stop()` or termination.
fn serve(world: &World, index: usize, stop: &dyn Fn() -> bool) {
    let bit = Bit::new(0);
    loop {
        let mut idle = world.sleep.start_looking(index);
        loop {
            if stop() || world.done.load(Ordering::SeqCst) {
                return;
            }
            if world.status.is_set(bit) {
                let mut found = world.take();
                if !found {
                    world.status.clear(bit);
                    found = world.take();
                    if found {
                        world.status.mark(bit);
                        world.sleep.new_jobs(1);
                    }
                }
                if found {
                    world.sleep.work_found(idle, || {
                        world.status.is_set(bit) && world.jobs.load(Ordering::Acquire) > 0
                    });
                    world.took();
                    break;
                }
            }
            world.sleep.no_work_found(&mut idle, || {
                Check::search_if(world.status.any() || world.done.load(Ordering::SeqCst) || stop())
            });
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
        let world = World::new(3);
        let seats = Arc::new(Seats::new(vec![
            WorkerLocal::new(0, 2, 0, true, 0, false).0,
        ]));
        let sleeper = {
            let world = world.clone();
            loom::thread::spawn(move || serve(&world, 1, &|| false))
        };
        let poster = {
            let world = world.clone();
            loom::thread::spawn(move || world.post())
        };
        // W (this thread, seat 0) blocks: the task in its own queue goes
        // to the channel, then a guest seat goes to the stand-in.
        world.post();
        let seat = seats.claim(None).expect("a free guest seat");
        let retire = Arc::new(AtomicBool::new(false));
        let holding = Arc::new(AtomicBool::new(true));
        let stand_in = {
            let (world, seats) = (world.clone(), seats.clone());
            let (retire, holding) = (retire.clone(), holding.clone());
            loom::thread::spawn(move || {
                serve(&world, seat.index, &|| retire.load(Ordering::SeqCst));
                holding.store(false, Ordering::SeqCst);
                seats.release(seat, true);
            })
        };
        // While W blocks, S and G take both tasks.
        world.wait_taken(2);
        // W is back: the stand-in retires, roused if it sleeps.
        seats.retire(|| {
            retire.store(true, Ordering::SeqCst);
            true
        });
        world.sleep.rouse(2);
        if let Some(seat) = seats.claim(None) {
            assert!(!holding.load(Ordering::SeqCst), "a seat with two owners");
            seats.release(seat, false);
        }
        stand_in.join().unwrap();
        world.done.store(true, Ordering::SeqCst);
        world.sleep.wake_all();
        poster.join().unwrap();
        sleeper.join().unwrap();
        assert!(seats.all_free());
        assert_eq!(world.jobs.load(Ordering::SeqCst), 0);
    });
}
