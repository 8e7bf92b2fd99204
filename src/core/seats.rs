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
//! some thread drives). A worker that needs a stand-in and finds no free
//! seat waits for one if a stand-in is retiring (its worker is back, and
//! it gives its seat back after its current task): each worker thread has
//! at most one stand-in that is not retiring, so of the `threads + 1`
//! guest seats, one that is free or retiring is always there for a worker
//! about to block, unless a driving thread holds it.

use std::task::Waker;

use super::context::WorkerLocal;
use crate::sync::{lock, Mutex, Unpark};

/// The guest seats of a pool that are free, and who waits for one.
pub(crate) struct Seats {
    inner: Mutex<Inner>,
    /// How many guest seats the pool has.
    total: usize,
}

struct Inner {
    free: Vec<WorkerLocal>,
    waiting: Vec<Waker>,
    /// Taken seats whose thread was told to give them back (a stand-in
    /// whose worker is back), and has not yet.
    retiring: usize,
}

impl Seats {
    pub(crate) fn new(free: Vec<WorkerLocal>) -> Seats {
        Seats {
            total: free.len(),
            inner: Mutex::new(Inner {
                free,
                waiting: Vec::new(),
                retiring: 0,
            }),
        }
    }

    /// Takes the free seat of lowest index, if any; if none, keeps `waker`
    /// (if given) to wake when one is given back.
    pub(crate) fn claim(&self, waker: Option<&Waker>) -> Option<WorkerLocal> {
        let mut inner = lock(&self.inner);
        if let Some(i) = (0..inner.free.len()).min_by_key(|&i| inner.free[i].index) {
            return Some(inner.free.swap_remove(i));
        }
        if let Some(waker) = waker.filter(|new| !inner.waiting.iter().any(|w| w.will_wake(new))) {
            inner.waiting.push(waker.clone());
        }
        None
    }

    /// Takes a free seat as [`Seats::claim`]; if none is free but some
    /// will be soon (a retiring stand-in's), waits for it, parking the
    /// calling thread. `None` if none is free and none is retiring.
    pub(crate) fn claim_or_wait(&self) -> Option<WorkerLocal> {
        let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
        loop {
            if let Some(seat) = self.claim(Some(&waker)) {
                return Some(seat);
            }
            if lock(&self.inner).retiring == 0 {
                return None;
            }
            std::thread::park();
        }
    }

    /// Tells the thread of a taken seat to give it back (`tell`: `false`
    /// if it gave it back already), under the list's lock: a seat told is
    /// retiring until its thread gives it back ([`Seats::release`] with
    /// `retired`), which cannot happen before it is counted. Returns what
    /// `tell` did.
    pub(crate) fn retire(&self, tell: impl FnOnce() -> bool) -> bool {
        let mut inner = lock(&self.inner);
        let told = tell();
        inner.retiring += usize::from(told);
        told
    }

    /// Gives back a seat its thread emptied (see the module's invariant)
    /// and wakes those who waited for one. `retired`: the thread had been
    /// told to ([`Seats::retire`]).
    pub(crate) fn release(&self, seat: WorkerLocal, retired: bool) {
        let mut inner = lock(&self.inner);
        inner.free.push(seat);
        inner.retiring -= usize::from(retired);
        let waiting = std::mem::take(&mut inner.waiting);
        drop(inner);
        waiting.into_iter().for_each(Waker::wake);
    }

    /// Wakes those who wait for a seat (the pool terminated: a close
    /// waiting for the seat no longer needs it).
    pub(crate) fn wake_waiting(&self) {
        let waiting = std::mem::take(&mut lock(&self.inner).waiting);
        waiting.into_iter().for_each(Waker::wake);
    }

    /// Whether every guest seat is free: no thread drives the pool or
    /// stands in for a worker.
    pub(crate) fn all_free(&self) -> bool {
        lock(&self.inner).free.len() == self.total
    }
}

#[cfg(all(test, loom))]
mod loom_model;
