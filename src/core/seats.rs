//! Guest seats: worker places for threads that are not the pool's own.
//!
//! A pool has one *seat* per worker thread and, past those, `threads + 1`
//! guest seats. A seat is everything a worker is to the others: a local
//! deque per channel (with its stealers in `Shared`), a LIFO slot, a place
//! in the sleep protocol and in the slot watch. A thread that drives the
//! pool without being one of its workers takes a guest seat for as long as
//! it drives: a caller of `Pool::block_on` or `Pool::run_until_stalled`
//! (the only way tasks run in a zero-thread pool), and the stand-in thread
//! that serves while a worker is inside `block_in_place` (see
//! `pool::blocking`).
//!
//! # States of a guest seat
//!
//! * **free**: its `WorkerLocal` sits in [`Seats`]' list; its deques and
//!   slot are empty; it is counted neither idle nor asleep.
//! * **taken**: one thread took its `WorkerLocal` out of the list
//!   ([`Seats::claim`], under the list's lock) and is that worker until it
//!   gives it back. Other workers steal from its deques and slot as from
//!   any worker's.
//!
//! # Invariant
//!
//! *A seat is owned by at most one thread, and a free seat holds no task.*
//! The first half holds because the seat's `WorkerLocal` is a value, in
//! the list or on exactly one thread (it is `Send`, not `Sync`). The second
//! holds because the leaving thread, after it stopped being the seat's
//! worker (so that nothing it runs pushes there any more), moves the task
//! in its slot and those in its deques to their channels, which mark their
//! status bits and let the sleep protocol wake a worker, before it gives
//! the seat back (see `pool::drive`). A thief racing that move takes each
//! task once (crossbeam's deques, the slot's CAS). So nothing is stranded
//! in a seat nobody serves.
//!
//! A thread that finds no free seat does not drive: it waits, and its
//! waker is kept here and woken when a seat is given back, so that it
//! tries again (in a zero-thread pool, the tasks it waits for run only if
//! some thread drives).

use std::fmt;
use std::task::Waker;

use super::context::WorkerLocal;
use crate::sync::{lock, Mutex};

/// The guest seats of a pool that are free, and who waits for one.
pub(crate) struct Seats {
    inner: Mutex<Inner>,
}

struct Inner {
    free: Vec<WorkerLocal>,
    waiting: Vec<Waker>,
}

impl Seats {
    pub(crate) fn new(free: Vec<WorkerLocal>) -> Seats {
        Seats {
            inner: Mutex::new(Inner {
                free,
                waiting: Vec::new(),
            }),
        }
    }

    /// Takes the free seat of lowest index, if any; if none, keeps `waker`
    /// (if given) to wake when one is given back.
    pub(crate) fn claim(&self, waker: Option<&Waker>) -> Option<WorkerLocal> {
        let mut inner = lock(&self.inner);
        let lowest = (0..inner.free.len()).min_by_key(|&i| inner.free[i].index);
        match lowest {
            Some(i) => Some(inner.free.swap_remove(i)),
            None => {
                if let Some(waker) = waker {
                    if !inner.waiting.iter().any(|w| w.will_wake(waker)) {
                        inner.waiting.push(waker.clone());
                    }
                }
                None
            }
        }
    }

    /// Gives back a seat its thread emptied (see the module's invariant)
    /// and wakes those who waited for one.
    pub(crate) fn release(&self, seat: WorkerLocal) {
        let waiting = {
            let mut inner = lock(&self.inner);
            inner.free.push(seat);
            std::mem::take(&mut inner.waiting)
        };
        for waker in waiting {
            waker.wake();
        }
    }

    /// How many guest seats are free now.
    pub(crate) fn free(&self) -> usize {
        lock(&self.inner).free.len()
    }
}

impl fmt::Debug for Seats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Seats").field("free", &self.free()).finish()
    }
}
