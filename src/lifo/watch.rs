//! An idle worker's reading of the other workers' slots: steal, search
//! again, watch, or sleep.
//!
//! The idle workers share, per worker, a memory of the last state seen of
//! that worker's slot and since when, kept by whichever idle worker looks
//! (one entry per worker, so memory is linear in workers). From a fresh
//! look a worker concludes:
//!
//! * **steal**: the slot holds the task it held [`STEAL_DELAY`] ago (same
//!   word, so same generation): its worker has not come back for it;
//! * **young**: the slot holds a task seen for less than the delay, or just
//!   filled for the first time since an empty look: search again, to age it
//!   (the idle search yields between rounds);
//! * **moving**: the slot is seen *cycling*: filled at least twice since
//!   the last look, or once while it held another task then (its worker
//!   came back for a task and filled the slot again), or once at each of
//!   two looks within [`QUIET`] (a chain slower than a look); now or at a
//!   look within the last [`QUIET`]. Its worker keeps coming back, so
//!   waiting is enough: watch (a timed wait of [`WATCH_PERIOD`]) instead of
//!   sleeping. (Two looks microseconds apart often see no fill between
//!   them, and a chain whose next fill finds the others asleep pays a
//!   wake-up on every hop.)
//! * **quiet**: no slot holds a task, and none was seen cycling for
//!   [`QUIET`]: nothing keeps the worker from sleeping. (A single fill that
//!   its worker took back is quiet: a sparse spawn, one a millisecond, must
//!   not keep the other workers watching.)
//!
//! A full slot never reads quiet, which is what `lifo`'s argument needs:
//! that follows from the look alone, whatever the memory says. The memory
//! only times steals and tells watching from sleeping, so two idle workers
//! looking at one slot at once need not agree: the second to reach an
//! entry that the first holds concludes without it (young if the slot is
//! full, moving if not: search or watch again, never sleep on a guess).
//! Since the memory is shared, a fill counts once among all the lookers,
//! and a task's age runs from the first look of any of them.
//! The looks are plain loads; their freshness comes from the fences of the
//! sleep protocol around them (see `lifo`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, Instant};

use super::slot::{Seen, Slot};

/// How long a task sits in a slot before another worker may steal it. Go
/// leaves `runnext` to its owner for about 3 µs; a hop between tasks costs
/// far less, so a worker that comes back at all is back long
/// before this. Under loom any time may pass between two looks: zero.
pub(crate) const STEAL_DELAY: Duration = Duration::from_micros(if cfg!(loom) { 0 } else { 20 });

/// How long a watching worker waits between looks (Linux adds its timer
/// slack, 50 µs by default, to a timed wait). Loom's models wait no time.
pub(crate) const WATCH_PERIOD: Duration = Duration::from_micros(50);

/// How long after it last saw a slot cycling a worker goes on watching it,
/// and how close two single fills must be to count as cycling: longer than
/// a watch period with its timer slack (about 100 µs), so that a chain
/// reads as moving at every look of a watching worker. Under loom any time
/// may pass between two looks: zero.
pub(crate) const QUIET: Duration = Duration::from_micros(if cfg!(loom) { 0 } else { 200 });

/// How many slots a search round looks at (see [`Watch::observe_window`]).
pub(crate) const WINDOW: usize = 64;

/// What an idle worker should do about the other workers' slots.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Steal from worker `.0` the task it held when seen as `.1`.
    Steal(usize, Seen),
    Young,
    Moving,
    Quiet,
}

/// What an idle worker remembers of one other worker's slot.
#[derive(Copy, Clone, Debug)]
struct Memory {
    /// The last look.
    seen: Seen,
    /// When the slot was first seen as `seen`.
    since: Instant,
    /// When a look last found it cycling.
    filled: Option<Instant>,
    /// When a look last found exactly one fill since the look before.
    single: Option<Instant>,
}

/// The idle workers' memory of every worker's slot (plain std locks: the
/// memory is a heuristic no protocol argument rests on, see the module doc).
#[derive(Debug)]
pub(crate) struct Watch {
    memory: Box<[Entry]>,
}

/// The memory of one slot.
#[derive(Debug)]
struct Entry {
    /// The slot's word when last judged empty and not cycling lately, or
    /// [`Seen::NEVER_EMPTY`]: a look that finds the slot empty with this
    /// word concludes quiet without the lock (one load per slot, where the
    /// idle searches of thousands of workers locked every entry).
    quiet: AtomicUsize,
    memory: Mutex<Memory>,
}

impl Watch {
    /// The memory for a pool of `workers`.
    pub(crate) fn new(workers: usize) -> Watch {
        let memory = Memory {
            seen: Seen::EMPTY,
            since: Instant::now(),
            filled: None,
            single: None,
        };
        Watch {
            memory: (0..workers)
                .map(|_| Entry {
                    quiet: AtomicUsize::new(Seen::EMPTY.word()),
                    memory: Mutex::new(memory),
                })
                .collect(),
        }
    }

    /// Worker `me` looks at every other worker's slot (`slots`, indexed by
    /// worker): what the final check before sleeping needs.
    pub(crate) fn observe<T>(&self, me: usize, slots: &[Slot<T>]) -> Verdict {
        self.observe_at(me, slots, Instant::now(), 0, slots.len())
    }

    /// Worker `me` looks at up to [`WINDOW`] slots from `*from` on, and
    /// moves `*from` past them: a search round's look. In a pool of more
    /// than [`WINDOW`] workers, where every idle round of every worker
    /// looking at every slot made start-up time quadratic in workers, a
    /// task in a slot outside the window waits for a later round (or for the
    /// full look before sleeping, which never reads a full slot as quiet).
    pub(crate) fn observe_window<T>(
        &self,
        me: usize,
        slots: &[Slot<T>],
        from: &std::cell::Cell<usize>,
    ) -> Verdict {
        let n = slots.len();
        if n <= WINDOW {
            return self.observe(me, slots);
        }
        let start = from.get() % n;
        from.set((start + WINDOW) % n);
        self.observe_at(me, slots, Instant::now(), start, WINDOW)
    }

    /// Looks at `count` slots from `start` on (wrapping).
    fn observe_at<T>(
        &self,
        me: usize,
        slots: &[Slot<T>],
        now: Instant,
        start: usize,
        count: usize,
    ) -> Verdict {
        let mut verdict = Verdict::Quiet;
        let n = slots.len();
        for k in 0..count.min(n) {
            let worker = (start + k) % n;
            if worker == me {
                continue;
            }
            let (look, entry) = (slots[worker].look(), &self.memory[worker]);
            if !look.is_full() && look.word() == entry.quiet.load(Ordering::Relaxed) {
                // Unchanged since judged quiet (the fast path of `judge`).
                continue;
            }
            let slot_verdict = match entry.memory.try_lock() {
                Ok(mut memory) => entry.judge(&mut memory, worker, look, now),
                // A poisoned entry still holds a valid (if odd) memory.
                Err(TryLockError::Poisoned(poisoned)) => {
                    entry.judge(&mut poisoned.into_inner(), worker, look, now)
                }
                // Another idle worker is looking: conclude without memory.
                Err(TryLockError::WouldBlock) if look.is_full() => Verdict::Young,
                Err(TryLockError::WouldBlock) => Verdict::Moving,
            };
            // Young outweighs moving, which outweighs quiet.
            match slot_verdict {
                Verdict::Steal(..) => return slot_verdict,
                Verdict::Young => verdict = Verdict::Young,
                Verdict::Moving if verdict == Verdict::Quiet => verdict = Verdict::Moving,
                _ => {}
            }
        }
        verdict
    }
}

impl Entry {
    /// Worker `worker`'s slot's verdict from a fresh look, updating its
    /// memory (`memory`, locked) and its quiet word: `Steal`; `Young`;
    /// `Moving` if it is full or was seen cycling lately; else `Quiet`.
    fn judge(&self, memory: &mut Memory, worker: usize, look: Seen, now: Instant) -> Verdict {
        // Young: a full slot, not yet stale, and not seen cycling now.
        let young = if look == memory.seen {
            if look.is_full() && now.duration_since(memory.since) >= STEAL_DELAY {
                return Verdict::Steal(worker, look);
            }
            look.is_full()
        } else {
            let fills = look.fills_since(memory.seen);
            let close_single = fills == 1
                && memory
                    .single
                    .is_some_and(|at| now.duration_since(at) < QUIET);
            let moving = fills >= 2 || (fills == 1 && memory.seen.is_full()) || close_single;
            if fills == 1 {
                memory.single = Some(now);
            }
            if moving {
                memory.filled = Some(now);
            }
            memory.seen = look;
            memory.since = now;
            look.is_full() && !moving
        };
        let recent = memory
            .filled
            .is_some_and(|at| now.duration_since(at) < QUIET);
        let quiet = !look.is_full() && !recent;
        let word = if quiet {
            look.word()
        } else {
            Seen::NEVER_EMPTY
        };
        self.quiet.store(word, Ordering::Relaxed);
        if young {
            Verdict::Young
        } else if quiet {
            Verdict::Quiet
        } else {
            Verdict::Moving
        }
    }
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    /// Worker 1 watches worker 0's slot.
    struct Observer(Watch);

    impl Observer {
        fn observe_at(&self, slots: &[Slot<u32>], now: Instant) -> Verdict {
            self.0.observe_at(1, slots, now, 0, slots.len())
        }
    }

    fn pool() -> (Observer, Vec<Slot<u32>>, Instant) {
        let start = Instant::now();
        (
            Observer(Watch::new(2)),
            vec![Slot::new(), Slot::new()],
            start,
        )
    }

    #[test]
    fn a_task_left_for_the_delay_is_stolen() {
        let (observer, slots, t0) = pool();
        slots[0].fill(7).unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Young);
        let later = t0 + STEAL_DELAY / 2;
        assert_eq!(observer.observe_at(&slots, later), Verdict::Young);
        match observer.observe_at(&slots, t0 + STEAL_DELAY) {
            Verdict::Steal(0, seen) => assert_eq!(slots[0].steal(seen), Some(7)),
            other => panic!("not stolen: {other:?}"),
        }
        assert_eq!(slots[0].take(), None, "the owner finds it gone");
        assert!(slots[0].fill(8).is_ok(), "the owner may fill again");
    }

    #[test]
    fn a_worker_that_comes_back_is_watched_not_robbed() {
        let (observer, slots, t0) = pool();
        slots[0].fill(1).unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Young);
        for round in 1..10u32 {
            // Its worker took the last task and filled the slot again.
            assert!(slots[0].take().is_some());
            slots[0].fill(round).unwrap();
            let at = t0 + STEAL_DELAY * (2 * round);
            assert_eq!(observer.observe_at(&slots, at), Verdict::Moving);
        }
        // It took the last one too: nothing to watch once that was seen.
        assert!(slots[0].take().is_some());
        let at = t0 + STEAL_DELAY * 30;
        assert_eq!(observer.observe_at(&slots, at), Verdict::Quiet);
        assert_eq!(observer.observe_at(&slots, at), Verdict::Quiet);
    }

    #[test]
    fn a_stale_steal_fails_once_the_owner_took_it() {
        let (observer, slots, t0) = pool();
        slots[0].fill(1).unwrap();
        observer.observe_at(&slots, t0);
        let Verdict::Steal(0, seen) = observer.observe_at(&slots, t0 + STEAL_DELAY) else {
            panic!("not stale");
        };
        assert_eq!(slots[0].take(), Some(1));
        slots[0].fill(2).unwrap();
        assert_eq!(slots[0].steal(seen), None, "a newer task is not stolen");
        assert_eq!(slots[0].take(), Some(2));
    }

    #[test]
    fn a_slot_filled_lately_is_watched_until_quiet() {
        let (observer, slots, t0) = pool();
        slots[0].fill(1).unwrap();
        slots[0].take().unwrap();
        slots[0].fill(2).unwrap();
        slots[0].take().unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Moving);
        // A second look right away sees no change, but the worker is busy.
        let soon = t0 + QUIET / 2;
        assert_eq!(observer.observe_at(&slots, soon), Verdict::Moving);
        assert_eq!(observer.observe_at(&slots, t0 + QUIET), Verdict::Quiet);
    }

    #[test]
    fn a_single_fill_taken_back_is_quiet() {
        let (observer, slots, t0) = pool();
        slots[0].fill(1).unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Young);
        slots[0].take().unwrap();
        // A sparse spawn: its worker came back; nothing to watch.
        let soon = t0 + QUIET / 10;
        assert_eq!(observer.observe_at(&slots, soon), Verdict::Quiet);
    }

    #[test]
    fn a_slow_chain_is_watched_from_its_second_hop() {
        let (observer, slots, t0) = pool();
        let hop = QUIET / 4;
        slots[0].fill(1).unwrap();
        slots[0].take().unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Quiet);
        slots[0].fill(2).unwrap();
        slots[0].take().unwrap();
        assert_eq!(observer.observe_at(&slots, t0 + hop), Verdict::Moving);
        // Sparse: the next single fill comes long after.
        slots[0].fill(3).unwrap();
        slots[0].take().unwrap();
        let later = t0 + hop + QUIET * 5;
        assert_eq!(observer.observe_at(&slots, later), Verdict::Quiet);
    }

    #[test]
    fn its_own_slot_is_not_watched() {
        let (observer, slots, t0) = pool();
        slots[1].fill(1).unwrap();
        assert_eq!(observer.observe_at(&slots, t0), Verdict::Quiet);
        assert_eq!(
            observer.observe_at(&slots, t0 + STEAL_DELAY),
            Verdict::Quiet
        );
    }
}
