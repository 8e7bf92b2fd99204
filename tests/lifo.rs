//! The LIFO slot (on by default in `VecDequeChannel`): a task submitted on
//! a worker runs next on that worker, unless the schedule serves a higher
//! level, a streak has run long while work is queued, or the task woke
//! itself (a yield); another worker steals it only if its worker does not
//! come back for it (`tests/work_stealing.rs` has the blocking cases).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;

use common::{yield_once, Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

type Log = Arc<Mutex<Vec<&'static str>>>;

type Hops = Arc<Mutex<Vec<ThreadId>>>;

fn hop(pool: Arc<Pool<TwoLevels>>, left: usize, threads: Hops, done: mpsc::Sender<()>) {
    threads.lock().unwrap().push(std::thread::current().id());
    if left == 0 {
        done.send(()).unwrap();
        return;
    }
    let next = pool.clone();
    drop(
        pool.low
            .exec(run(move || hop(next, left - 1, threads, done))),
    );
}

#[test]
fn a_chain_of_spawns_stays_on_one_worker() {
    let owned = OwnedPool::new(TwoLevels::lifo(2, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let (done, done_rx) = mpsc::channel();
    let (p, t) = (pool.clone(), threads.clone());
    drop(pool.low.exec(run(move || hop(p, 1000, t, done))));
    done_rx.recv_timeout(FAILSAFE).expect("the chain finished");
    let threads = threads.lock().unwrap();
    let moves = threads.windows(2).filter(|w| w[0] != w[1]).count();
    // A hop moves only if its worker was kept from it for the steal delay
    // (tens of microseconds: the OS preempted it); without the slot, the
    // idle worker steals about every other hop. Valgrind runs one thread
    // at a time, which keeps the owner away for longer than the delay, so
    // there the check is not made.
    if std::env::var_os("SMARTPOOL_UNDER_VALGRIND").is_none() {
        assert!(moves < 100, "{moves} of 1000 hops moved to another worker");
    }
    drop(threads);
    block_on(owned.close());
}

/// One worker: a low task puts a low task in its slot, then submits a high
/// task; the high one runs first.
#[test]
fn the_slot_waits_for_higher_levels() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let log: Log = Log::default();
    let (p, l) = (pool.clone(), log.clone());
    let first = pool.low.exec(run(move || {
        let (l1, l2) = (l.clone(), l.clone());
        let low = p
            .low
            .exec(run(move || l1.lock().unwrap().push("low, in the slot")));
        let high = p.high.exec(run(move || l2.lock().unwrap().push("high")));
        (low, high)
    }));
    let (low, high) = block_on(first).unwrap();
    block_on(low).unwrap();
    block_on(high).unwrap();
    assert_eq!(*log.lock().unwrap(), ["high", "low, in the slot"]);
    block_on(owned.close());
}

/// One worker: a task submits A (into the slot) and B (into the local
/// queue); A yields once, and its yield goes behind B, not into the slot.
#[test]
fn a_yield_goes_behind_queued_work() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let log: Log = Log::default();
    let (p, l) = (pool.clone(), log.clone());
    let submit = pool.low.exec(run(move || {
        let a = p.low.exec(logged_yield(l.clone()));
        let b = p.low.exec(run(move || l.lock().unwrap().push("b")));
        (a, b)
    }));
    let (a, b) = block_on(submit).unwrap();
    block_on(a).unwrap();
    block_on(b).unwrap();
    assert_eq!(*log.lock().unwrap(), ["a before", "b", "a after"]);
    block_on(owned.close());
}

async fn logged_yield(l: Log) {
    l.lock().unwrap().push("a before");
    yield_once().await;
    l.lock().unwrap().push("a after");
}

/// One worker: a queued task gets its turn within a streak of slot tasks.
#[test]
fn a_streak_of_slot_tasks_lets_queued_work_in() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let (g, p) = (gate.clone(), pool.clone());
    let hops = Arc::new(Mutex::new(Vec::new()));
    let h = hops.clone();
    let (done, done_rx) = mpsc::channel();
    let chain = pool.low.exec(run(move || {
        g.wait();
        hop(p, 200, h, done);
    }));
    // Queued (visible) behind the chain's first task.
    let (h, seen) = (hops.clone(), Arc::new(Mutex::new(None)));
    let s = seen.clone();
    let queued = pool.low.exec(run(move || {
        *s.lock().unwrap() = Some(h.lock().unwrap().len())
    }));
    gate.open();
    block_on(chain).unwrap();
    done_rx.recv_timeout(FAILSAFE).expect("the chain finished");
    block_on(queued).unwrap();
    let at = seen.lock().unwrap().expect("ran");
    assert!(
        at < 200,
        "the queued task waited for the whole chain (ran after hop {at})"
    );
    block_on(owned.close());
}

/// The pool closes while a dropping channel's task sits in the slot of a
/// worker busy with the task that submitted it: the slot task is dropped,
/// not run.
#[test]
fn a_close_drops_a_slot_task_of_a_dropping_channel() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let gate = Gate::new();
    let (g, p) = (gate.clone(), pool.clone());
    let (handle_tx, handle_rx) = mpsc::channel();
    let outer = pool.low.exec(run(move || {
        handle_tx.send(p.low.exec(run(|| "ran"))).unwrap();
        g.wait();
    }));
    let in_slot = handle_rx.recv_timeout(FAILSAFE).unwrap();
    let closing = owned.close();
    gate.open();
    block_on(outer).unwrap();
    assert!(block_on(in_slot).unwrap_err().is_cancelled());
    block_on(closing);
}

/// A scope opened by a task on a 1-thread pool: its first task sits in the
/// worker's slot, and the waiting worker runs it.
#[test]
fn a_waiting_scope_runs_its_slot_task() {
    let owned = OwnedPool::new(TwoLevels::lifo(1, (true, false))).unwrap();
    let pool = owned.pool.clone();
    let p = pool.clone();
    let outer = pool.high.exec(run(move || {
        let mut parts = [0; 4];
        smartpool::scope(|s| {
            for (i, part) in parts.iter_mut().enumerate() {
                s.exec(&p.low, run(move || *part = i + 1));
            }
        });
        parts.iter().sum::<usize>()
    }));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(block_on(outer)));
    let Ok(sum) = rx.recv_timeout(FAILSAFE) else {
        std::mem::forget(owned);
        panic!("the scope's slot task never ran");
    };
    assert_eq!(sum.unwrap(), 10);
    block_on(owned.close());
}

/// A task resubmits itself (on `high` or low) until `stop` opens: it keeps
/// its worker busy, never idle.
fn busy(pool: Arc<Pool<TwoLevels>>, stop: Gate, high: bool) {
    if stop.is_open() {
        return;
    }
    let next = pool.clone();
    let again = run(move || busy(next, stop, high));
    drop(if high {
        pool.high.exec(again)
    } else {
        pool.low.exec(again)
    });
}

/// Worker B is kept busy on one level (`busy_high`), worker A submits a
/// task on the other (`submit_high`), then blocks until it ran.
fn reaches_a_busy_worker(behavior: TwoLevels, busy_high: bool, submit_high: bool) -> bool {
    let owned = OwnedPool::new(behavior).unwrap();
    let pool = owned.pool.clone();
    let ran = Gate::new();
    let (p, r) = (pool.clone(), ran.clone());
    drop(pool.low.exec(run(move || busy(p, r, busy_high))));
    let (p, r) = (pool.clone(), ran.clone());
    let spawner = pool.low.exec(run(move || {
        let r2 = r.clone();
        let task = run(move || r2.open());
        drop(if submit_high {
            p.high.exec(task)
        } else {
            p.low.exec(task)
        });
        r.wait_for(FAILSAFE)
    }));
    let reached = block_on(spawner).unwrap();
    block_on(owned.close());
    reached
}

/// Worker B never goes idle (a low task keeps resubmitting itself), and
/// worker A submits a high task, then blocks until it ran. Only the lowest
/// level uses the slot: in A's slot, the high task would wait for A forever,
/// since B looks at the slots only when idle; in its channel, B's schedule
/// serves it before B's next low task.
#[test]
fn a_high_task_from_a_busy_worker_reaches_a_worker_busy_with_low_tasks() {
    assert!(
        reaches_a_busy_worker(TwoLevels::lifo(2, (false, false)), false, true),
        "the high task waited for the worker that submitted it"
    );
}

/// Under RoundRobin, B busy on the first level must still give the second
/// its slice: a task submitted there by a busy worker goes to its channel,
/// not to the slot (which B's rotation would never look into).
#[test]
fn under_round_robin_a_task_from_a_busy_worker_gets_its_slice() {
    let slices = vec![Duration::from_millis(1); 2];
    let behavior = TwoLevels::with(2, ScheduleAlgorithm::RoundRobin(slices), (false, false));
    assert!(
        reaches_a_busy_worker(behavior, true, false),
        "the low task waited for the worker that submitted it"
    );
}

/// One hop of a chain whose worker comes back for its slot task at about
/// the steal delay: it fills the slot, then computes for 15 to 60 µs before
/// it returns, so that the idle worker's steal and the owner's take race.
fn racing_hop(
    pool: Arc<Pool<TwoLevels>>,
    left: usize,
    runs: Arc<Vec<AtomicUsize>>,
    done: mpsc::Sender<()>,
) {
    runs[left].fetch_add(1, Ordering::Relaxed);
    if left == 0 {
        done.send(()).unwrap();
        return;
    }
    let (next, r) = (pool.clone(), runs.clone());
    drop(
        pool.low
            .exec(run(move || racing_hop(next, left - 1, r, done))),
    );
    let busy = Duration::from_micros(15 + (left as u64 * 7) % 46);
    let start = std::time::Instant::now();
    while start.elapsed() < busy {
        std::hint::spin_loop();
    }
}

/// The owner's take and a thief's steal of the same slot task race (see
/// `src/lifo/slot.rs`): every task of the chain runs exactly once, and the
/// chain reaches its end (a task neither side got would stop it).
#[test]
fn owner_and_thief_racing_for_the_slot_run_each_task_once() {
    let owned = OwnedPool::new(TwoLevels::lifo(2, (false, false))).unwrap();
    let pool = owned.pool.clone();
    let hops = common::scaled(20_000);
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..=hops).map(|_| AtomicUsize::new(0)).collect());
    let (done, done_rx) = mpsc::channel();
    let (p, r) = (pool.clone(), runs.clone());
    drop(pool.low.exec(run(move || racing_hop(p, hops, r, done))));
    done_rx.recv_timeout(FAILSAFE).expect("the chain finished");
    block_on(owned.close());
    for (hop, count) in runs.iter().enumerate() {
        assert_eq!(count.load(Ordering::Relaxed), 1, "hop {hop}");
    }
}
