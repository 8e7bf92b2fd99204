//! One worker's LIFO slot, which other workers may steal from.
//!
//! # States
//!
//! The slot is one word, `generation << 2 | TAKING | FULL`, and a cell:
//!
//! * **empty** (neither flag): the cell holds nothing;
//! * **full**: the cell holds a task, put there by the owner;
//! * **taking**: a thief claimed the task and is moving it out of the cell.
//!
//! Transitions:
//!
//! * `fill` (owner only): empty → full. The owner writes the cell, then
//!   stores the word with the next generation, `Release`. It refuses when
//!   the slot is full or taking.
//! * `take` (owner): full → empty, by compare-exchange, `Acquire`; then it
//!   moves the task out of the cell.
//! * `steal` (a thief): full → taking, by compare-exchange from the exact
//!   word it saw (same generation), `Acquire`; it moves the task out, then
//!   stores empty (same generation), `Release`.
//!
//! # Invariant: the cell has one user at a time
//!
//! Only the owner puts a task in the cell, and only in the empty state,
//! which it reads with `Acquire`: a thief's release of the cell (its `Release` store
//! of empty) happens before the owner's next write. Whoever moves a full
//! slot's task out first wins the compare-exchange that leaves the full
//! state, so exactly one of owner and thief gets the task, and the owner's
//! `Release` store of full makes the task it wrote visible to the winner's
//! `Acquire`. While taking, the owner neither takes nor fills: the cell is
//! the thief's.
//!
//! The generation changes with every fill, so a thief that saw a word twice
//! knows the same task sat in the slot in between (the counter would have
//! to wrap around, 2^62 fills, to fool it).

use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

const FULL: usize = 1;
const TAKING: usize = 2;
const GENERATION: usize = 4;

/// A worker's LIFO slot, holding one `T`. On cache lines of its own: the
/// pool keeps every worker's slot in one slice, and each worker writes its
/// own at every fill and take.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Slot<T> {
    word: AtomicUsize,
    cell: UnsafeCell<Option<T>>,
}

// SAFETY: the cell is used by one thread at a time (see the module doc):
// the owner writes it only while the word says empty, and the one thread
// that moved the word out of full reads it. The `T` moves between threads,
// hence `T: Send`.
unsafe impl<T: Send> Sync for Slot<T> {}

/// What a look at a slot saw: compare two to tell whether the slot held the
/// same task in between.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen(usize);

impl Seen {
    /// Whether the slot held a task.
    pub(crate) fn is_full(self) -> bool {
        self.0 & FULL != 0
    }

    /// A new slot's state.
    pub(crate) const EMPTY: Seen = Seen(0);

    /// A value no look at an empty slot returns (it says full).
    pub(crate) const NEVER_EMPTY: usize = FULL;

    /// The slot's word, to keep in an atomic.
    pub(crate) fn word(self) -> usize {
        self.0
    }

    /// How often the slot was filled since `earlier` was looked at.
    pub(crate) fn fills_since(self, earlier: Seen) -> usize {
        (self.0 / GENERATION).wrapping_sub(earlier.0 / GENERATION)
    }
}

impl<T> Slot<T> {
    pub(crate) fn new() -> Slot<T> {
        Slot {
            word: AtomicUsize::new(0),
            cell: UnsafeCell::new(None),
        }
    }

    /// Owner: puts `task` in the slot if it is empty; gives it back if not.
    /// The caller then announces the fill (see `lifo`).
    pub(crate) fn fill(&self, task: T) -> Result<(), T> {
        let word = self.word.load(Ordering::Acquire);
        if word & (FULL | TAKING) != 0 {
            return Err(task);
        }
        // SAFETY: the slot is empty, so no thread but this one, its owner,
        // uses the cell, and the `Acquire` load ordered the last thief's use
        // before this write (see the module doc).
        self.cell.with_mut(|cell| unsafe { *cell = Some(task) });
        let next = (word & !(GENERATION - 1)).wrapping_add(GENERATION) | FULL;
        self.word.store(next, Ordering::Release);
        Ok(())
    }

    /// Owner: takes the slot's task, if it holds one and no thief claimed
    /// it.
    pub(crate) fn take(&self) -> Option<T> {
        let word = self.word.load(Ordering::Relaxed);
        if word & FULL == 0 {
            return None;
        }
        self.claim(word, word & !FULL)
    }

    /// The slot's state now, for a thief to compare with a later look.
    pub(crate) fn look(&self) -> Seen {
        Seen(self.word.load(Ordering::Acquire))
    }

    /// Thief: takes the task if the slot still holds the one it held when
    /// `seen` was looked at.
    pub(crate) fn steal(&self, seen: Seen) -> Option<T> {
        if !seen.is_full() {
            return None;
        }
        let released = seen.0 & !FULL;
        let task = self.claim(seen.0, released | TAKING)?;
        self.word.store(released, Ordering::Release);
        Some(task)
    }

    /// Leaves the full state `from` for `to`; on success moves the task out.
    fn claim(&self, from: usize, to: usize) -> Option<T> {
        self.word
            .compare_exchange(from, to, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        // SAFETY: this thread moved the word out of full, which only one
        // thread can do per fill; the owner's `Release` store of full made
        // its write of the cell visible to our `Acquire`, and nobody else
        // uses the cell until we are done (the owner writes it only once it
        // reads empty, which a thief stores after this read, and the owner,
        // if it is this thread, fills only after this returns).
        let task = self.cell.with_mut(|cell| unsafe { (*cell).take() });
        debug_assert!(task.is_some(), "a full slot holds a task");
        task
    }
}
