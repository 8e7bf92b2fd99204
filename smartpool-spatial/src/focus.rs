//! The focus: one point, written by `set_focus` from any thread, read by
//! every pop.
//!
//! # Protocol
//!
//! A write is one store and a read is one load; neither takes the queue's
//! lock, and nothing is rebuilt: the index answers nearest-neighbour queries
//! for any query point, so the next pop simply asks with the new one. A
//! reader never sees a torn point (half old, half new).
//!
//! # Lock-freedom
//!
//! The point lives in crossbeam's `AtomicCell`, which needs nothing of the
//! point type but `Copy` (every `rstar::Point` is): a native atomic when the
//! point's size matches one and its alignment is at least the atomic's,
//! otherwise one of a fixed set of global sequence locks chosen by address
//! (a load reads optimistically and retries if a store overlapped; a store
//! holds that lock for the copy only: it is never the queue's lock and never
//! runs user code).
//!
//! A point of exactly 8 bytes (`[f32; 2]`) is 4-aligned and would miss the
//! native `AtomicU64`; it is stored wrapped in an 8-aligned struct of the
//! same size, which hits it. smartpool itself needs 64-bit atomics, so this
//! adds no platform requirement. Larger points (`[f32; 3]`, `[f64; 2]`,
//! `[f64; 3]`) match no native atomic on stable Rust and take the sequence
//! lock.
//!
//! # Ordering
//!
//! The focus publishes nothing but itself (`AtomicCell`'s acquire and
//! release are more than it needs). Coherence gives the channel's promise:
//! a pop whose load happens after a `set_focus` sees that focus or a later
//! one. The channel loads the focus under its queue lock, after the pop has
//! synchronised with every push it can take, so a `set_focus` made before
//! pushing a task is honoured by the pop that finds that task.

use std::mem::size_of;

use crossbeam_utils::atomic::AtomicCell;

/// `P` at 8-byte alignment: for a point of 8 bytes, the same size, so that
/// `AtomicCell` keeps it in a native `AtomicU64`.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub(crate) struct Aligned<P>(P);

/// An atomic cell for a point (see the module doc for how it is stored).
pub(crate) enum Focus<P> {
    /// A point of 8 bytes, 8-aligned.
    Word(AtomicCell<Aligned<P>>),
    /// Any other point.
    Plain(AtomicCell<P>),
}

impl<P: Copy> Focus<P> {
    /// Whether points of this size are stored aligned to a word.
    const WORD: bool = size_of::<P>() == size_of::<u64>();

    /// Whether loads and stores of the focus take no lock at all.
    pub(crate) const fn is_lock_free() -> bool {
        if Self::WORD {
            AtomicCell::<Aligned<P>>::is_lock_free()
        } else {
            AtomicCell::<P>::is_lock_free()
        }
    }

    pub(crate) fn new(p: P) -> Focus<P> {
        if Self::WORD {
            Focus::Word(AtomicCell::new(Aligned(p)))
        } else {
            Focus::Plain(AtomicCell::new(p))
        }
    }

    pub(crate) fn load(&self) -> P {
        match self {
            Focus::Word(cell) => cell.load().0,
            Focus::Plain(cell) => cell.load(),
        }
    }

    pub(crate) fn store(&self, p: P) {
        match self {
            Focus::Word(cell) => cell.store(Aligned(p)),
            Focus::Plain(cell) => cell.store(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_points_use_a_word_and_round_trip() {
        let f = Focus::new([1.5f32, -2.0]);
        assert!(matches!(f, Focus::Word(_)));
        assert_eq!(f.load(), [1.5, -2.0]);
        f.store([f32::MAX, f32::MIN_POSITIVE]);
        assert_eq!(f.load(), [f32::MAX, f32::MIN_POSITIVE]);
        assert!(Focus::<[f32; 2]>::is_lock_free());
        assert!(Focus::<[f64; 1]>::is_lock_free());
        assert!(Focus::<[f32; 1]>::is_lock_free());
        // A point type of the user's, two `f32` fields: a word too.
        #[derive(Clone, Copy, PartialEq, Debug)]
        struct Xy {
            x: f32,
            y: f32,
        }
        let f = Focus::new(Xy { x: 1.0, y: 2.0 });
        assert!(matches!(f, Focus::Word(_)));
        f.store(Xy { x: 3.0, y: 4.0 });
        assert_eq!(f.load(), Xy { x: 3.0, y: 4.0 });
        assert!(Focus::<Xy>::is_lock_free());
    }

    #[test]
    fn larger_points_use_a_sequence_lock_and_round_trip() {
        let f = Focus::new([1.0f64, 2.0, 3.0]);
        assert!(matches!(f, Focus::Plain(_)));
        f.store([4.0, 5.0, 6.0]);
        assert_eq!(f.load(), [4.0, 5.0, 6.0]);
        let g = Focus::new([0.5f32, 0.25, 0.125]);
        g.store([1.0, 2.0, 3.0]);
        assert_eq!(g.load(), [1.0, 2.0, 3.0]);
        // 12 and 24 bytes match no native atomic: the sequence lock.
        assert!(!Focus::<[f32; 3]>::is_lock_free());
        assert!(!Focus::<[f64; 3]>::is_lock_free());
    }

    #[test]
    fn no_torn_reads_under_concurrent_stores() {
        // Every stored point has equal coordinates; a torn read would not.
        // The reader runs until the writer is done, so the two overlap.
        let f = Focus::new([0.0f64; 3]);
        let writing = std::sync::atomic::AtomicBool::new(true);
        let start = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                for i in 0..10_000 {
                    let c = i as f64;
                    f.store([c, c, c]);
                }
                writing.store(false, std::sync::atomic::Ordering::Release);
            });
            start.wait();
            let mut reads = 0u64;
            while writing.load(std::sync::atomic::Ordering::Acquire) || reads < 1000 {
                let [a, b, c] = f.load();
                assert!(a == b && b == c, "torn focus: {a} {b} {c}");
                reads += 1;
            }
        });
    }
}
