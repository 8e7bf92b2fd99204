//! One worker's LIFO slot, which other workers may steal from.
//!
//! # States
//!
//! The slot is two words and a cell. The owner writes the *word*,
//! `generation << 2 | FULL`; thieves write the *claim*, `generation << 2 |
//! verdict`, the fill they claimed and how that went:
//!
//! * **empty**: the word is not full, or it is full and the claim says a
//!   thief won that very fill (`WON`): the cell holds nothing;
//! * **full**: the word is full and no thief won its fill: the cell holds a
//!   task, put there by the owner;
//! * a claim in progress (`CLAIMED`): one thief is deciding whether it won.
//!
//! Transitions:
//!
//! * `fill` (owner only): empty → full. The owner writes the cell, then
//!   stores the word with the next generation, `Release`. It refuses while
//!   the slot is full (a claim in progress included).
//! * `take` (owner): stores the word not full (same generation), runs a
//!   `SeqCst` fence, then reads the claim. If no thief claimed this fill,
//!   the task is the owner's; if one did, the owner waits for its verdict
//!   (`WON`: the thief has it; `LOST`: the owner has it).
//! * `steal` (a thief, which saw the full word `seen`): claims the fill by
//!   compare-exchange of the claim (refused while another claim is in
//!   progress, or once this fill was claimed), runs a `SeqCst` fence, then
//!   reads the word. Still `seen`: the thief won; it moves the
//!   task out, then stores `WON`, `Release`. Otherwise the owner took the
//!   task (or took it and filled again): the thief stores `LOST`.
//!
//! # Invariant: exactly one of owner and thief gets each task
//!
//! Take and steal are a Dekker handshake: each side stores, fences, then
//! loads the other's word. The two `SeqCst` fences order them, so the two
//! loads cannot both miss the other's store:
//!
//! * the owner reads no claim of this fill: the thief's later read of the
//!   word sees it taken, and the thief loses without touching the cell;
//! * the thief reads the word still `seen`: the owner's read of the claim
//!   sees it, and the owner waits for the verdict, `WON`;
//! * both see the other: the thief read the word taken and loses; the owner
//!   waits for `LOST` and keeps the task.
//!
//! So one side moves the task out of the cell. The owner's `Release` store
//! of the word made its write of the cell visible to a winning thief's
//! `Acquire` read of it, and the thief's `Release` store of `WON` makes its
//! move out visible to the owner's `Acquire` read of the claim, before the
//! owner fills the cell again. Thieves claim one at a time (none while a
//! claim is in progress), so the claim has one writer at a time too.
//!
//! The owner takes on every slot task (a message passed, a chain's hop), a
//! thief rarely: the owner pays a store, a fence and a load.
//!
//! The generation changes with every fill, so a thief that saw a word twice
//! knows the same task sat in the slot in between (the counter would have
//! to wrap around, 2^62 fills, 2^30 on a 32-bit target, to fool it).
//!
//! Claims only move forward: a thief claims only a fill later than the
//! claim's, so a thief that looked long ago cannot overwrite the verdict
//! of a later fill (the owner would read the slot as full again). "Later"
//! is within half the counter's range, and the claim is left behind while
//! no thief steals; so that a ping-pong pair's fills cannot carry the word
//! half a range (2^29 fills on a 32-bit target) past a stale claim, the
//! owner's take moves the claim up to its own fill, as `LOST` (the owner
//! has it), every 2^20 fills, by compare-exchange (a thief that claims
//! meanwhile wins that race, and the next refresh tries again). A thief
//! preempted between its look and its claim for 2^29 fills is not covered.

use crate::sync::{fence, AtomicUsize, Ordering, UnsafeCell};

const FULL: usize = 1;
const GENERATION: usize = 4;

/// A claim's verdict, in its low bits (its generation above them).
const VERDICT: usize = 3;
const CLAIMED: usize = 1;
const WON: usize = 2;
const LOST: usize = 3;

/// Every this many generations, the owner's take moves a stale claim up to
/// its own fill (see the module doc).
const REFRESH: usize = GENERATION << 20;

/// Whether generation `a` came before generation `b`, on a counter that
/// wraps around: within half its range.
fn is_before(a: usize, b: usize) -> bool {
    let ahead = b.wrapping_sub(a);
    ahead != 0 && ahead < usize::MAX / 2
}

/// A worker's LIFO slot, holding one `T`. On cache lines of its own: the
/// pool keeps every worker's slot in one slice, and each worker writes its
/// own at every fill and take.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Slot<T> {
    word: AtomicUsize,
    claim: AtomicUsize,
    cell: UnsafeCell<Option<T>>,
}

// SAFETY: the cell is used by one thread at a time (see the module doc):
// the owner writes it only while the slot is empty, and the one side that
// won the fill reads it. The `T` moves between threads, hence `T: Send`.
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
            claim: AtomicUsize::new(0),
            cell: UnsafeCell::new(None),
        }
    }

    /// Owner: puts `task` in the slot if it is empty; gives it back if not.
    /// The caller then announces the fill (see `lifo`).
    pub(crate) fn fill(&self, task: T) -> Result<(), T> {
        // Only this thread writes the word.
        let word = self.word.load(Ordering::Relaxed);
        if word & FULL != 0 && !self.stolen(word) {
            return Err(task);
        }
        // SAFETY: the slot is empty, so no thread but this one, its owner,
        // uses the cell: we took its last task ourselves, or the thief that
        // won it stored `WON` after its use, which our `Acquire` load read
        // (see the module doc).
        self.cell.with_mut(|cell| unsafe { *cell = Some(task) });
        let next = (word & !(GENERATION - 1)).wrapping_add(GENERATION) | FULL;
        self.word.store(next, Ordering::Release);
        Ok(())
    }

    /// Owner: takes the slot's task, if it holds one and no thief won it.
    pub(crate) fn take(&self) -> Option<T> {
        let word = self.word.load(Ordering::Relaxed);
        if word & FULL == 0 {
            return None;
        }
        let fill = word & !FULL;
        self.word.store(fill, Ordering::Relaxed);
        // Pairs with the thief's fence in `steal`.
        fence(Ordering::SeqCst);
        let mut claim = self.claim.load(Ordering::Acquire);
        if claim & !VERDICT == fill {
            // A thief claimed this fill: its verdict decides.
            while claim & VERDICT == CLAIMED {
                crate::sync::yield_now();
                claim = self.claim.load(Ordering::Acquire);
            }
            if claim & VERDICT == WON {
                return None;
            }
        }
        if fill % REFRESH == 0 && claim & VERDICT != CLAIMED {
            // Keeps the claim's generation within half the counter's range
            // of the word's (see the module doc). A thief that claims
            // meanwhile makes this fail; the next refresh tries again.
            let _ = self.claim.compare_exchange(
                claim,
                fill | LOST,
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
        // SAFETY: this fill is ours (see the module doc): no thief claimed
        // it before our fence, so none moves it out, or its claimer lost.
        let task = self.cell.with_mut(|cell| unsafe { (*cell).take() });
        debug_assert!(task.is_some(), "a full slot holds a task");
        task
    }

    /// The slot's state now, for a thief to compare with a later look.
    pub(crate) fn look(&self) -> Seen {
        let word = self.word.load(Ordering::Acquire);
        if self.stolen(word) {
            // Its owner has not been back: empty.
            return Seen(word & !FULL);
        }
        Seen(word)
    }

    /// Whether the fill that the owner's `word` names is full and a thief
    /// won it: then the cell is empty. `Acquire`: the winner stored `WON`
    /// after it moved the task out.
    #[inline]
    fn stolen(&self, word: usize) -> bool {
        word & FULL != 0 && self.claim.load(Ordering::Acquire) == (word & !FULL) | WON
    }

    /// Thief: takes the task if the slot still holds the one it held when
    /// `seen` was looked at.
    pub(crate) fn steal(&self, seen: Seen) -> Option<T> {
        if !seen.is_full() {
            return None;
        }
        let fill = seen.0 & !FULL;
        let claim = self.claim.load(Ordering::Relaxed);
        if claim & VERDICT == CLAIMED || !is_before(claim & !VERDICT, fill) {
            // Another thief is deciding, or this fill or a later one was
            // claimed before: claims only move forward.
            return None;
        }
        self.claim
            .compare_exchange(claim, fill | CLAIMED, Ordering::Relaxed, Ordering::Relaxed)
            .ok()?;
        // Pairs with the owner's fence in `take`.
        fence(Ordering::SeqCst);
        if self.word.load(Ordering::Acquire) != seen.0 {
            // The owner took it first.
            self.claim.store(fill | LOST, Ordering::Release);
            return None;
        }
        // SAFETY: we won this fill (see the module doc): the owner's
        // `Release` store of the word made its write of the cell visible to
        // our `Acquire` load, the owner leaves the cell alone until it reads
        // our verdict, and other thieves until it changes.
        let task = self.cell.with_mut(|cell| unsafe { (*cell).take() });
        self.claim.store(fill | WON, Ordering::Release);
        debug_assert!(task.is_some(), "a full slot holds a task");
        task
    }
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    #[test]
    fn a_stale_thief_leaves_a_later_steal_alone() {
        let slot = Slot::new();
        slot.fill(1).unwrap();
        let old = slot.look();
        assert_eq!(slot.take(), Some(1));
        slot.fill(2).unwrap();
        let seen = slot.look();
        assert_eq!(slot.steal(seen), Some(2), "a thief wins the second fill");
        assert_eq!(slot.steal(old), None, "the first fill is gone");
        assert_eq!(slot.steal(seen), None, "stolen once");
        assert!(!slot.look().is_full(), "the slot reads empty");
        assert_eq!(slot.take(), None);
        slot.fill(3).unwrap();
        assert_eq!(slot.steal(old), None, "still gone");
        assert_eq!(slot.take(), Some(3));
    }

    #[test]
    fn a_stolen_slot_is_filled_again_without_a_take() {
        let slot = Slot::new();
        slot.fill(1).unwrap();
        assert_eq!(slot.steal(slot.look()), Some(1));
        assert!(slot.fill(2).is_ok(), "empty once stolen");
        assert_eq!(slot.fill(3), Err(3), "full");
        assert_eq!(slot.take(), Some(2));
    }

    #[test]
    #[cfg_attr(miri, ignore = "a million fills")]
    fn the_owner_moves_a_stale_claim_forward() {
        let slot = Slot::new();
        slot.fill(0).unwrap();
        assert_eq!(slot.steal(slot.look()), Some(0));
        let old = slot.claim.load(Ordering::Relaxed);
        for n in 0..(REFRESH / GENERATION) + 1 {
            slot.fill(n).unwrap();
            assert_eq!(slot.take(), Some(n));
        }
        let claim = slot.claim.load(Ordering::Relaxed);
        assert!(is_before(old & !VERDICT, claim & !VERDICT), "moved up");
        assert_eq!(claim & VERDICT, LOST, "as the owner's");
        // A thief still steals the next fill.
        slot.fill(7).unwrap();
        assert_eq!(slot.steal(slot.look()), Some(7));
    }

    #[test]
    fn generations_compare_across_the_wrap() {
        assert!(is_before(usize::MAX - 3, 4));
        assert!(!is_before(4, usize::MAX - 3));
        assert!(!is_before(8, 8));
    }
}
