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
//! * A point of at most 8 bytes (`[f32; 2]`) is stored as the bytes of one
//!   `AtomicU64`: lock-free, whatever the point's own alignment. (An
//!   `atomic::Atomic<[f32; 2]>` would not be: the `atomic` crate uses a
//!   native atomic only when the type's size *and* alignment match it, and
//!   `[f32; 2]` is 4-aligned.) smartpool itself needs 64-bit atomics, so
//!   this adds no platform requirement.
//! * A larger point (`[f32; 3]`, `[f64; 2]`, `[f64; 3]`) lives in an
//!   [`atomic::Atomic<P>`]: lock-free if its size and alignment match a
//!   native atomic, otherwise the crate's fallback, which copies the point
//!   under one of a fixed set of global spinlocks chosen by address. That
//!   spinlock is held for the copy only: it is never the queue's lock and
//!   never runs user code.
//!
//! # Ordering
//!
//! Relaxed: the focus publishes nothing but itself. Coherence still gives
//! the channel's promise: a pop whose load happens after a `set_focus` sees
//! that focus or a later one. The channel loads the focus under its queue
//! lock, after the pop has synchronised with every push it can take, so a
//! `set_focus` made before pushing a task is honoured by the pop that finds
//! that task.

use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering};

use atomic::Atomic;
use bytemuck::Pod;

/// An atomic cell for a point (see the module doc for how it is stored).
pub(crate) enum Focus<P> {
    /// A point of at most 8 bytes, as the leading bytes of a word.
    Word(AtomicU64),
    /// A larger point.
    Wide(Atomic<P>),
}

impl<P: Pod> Focus<P> {
    /// Whether points of this size fit one word.
    const FITS_WORD: bool = size_of::<P>() <= size_of::<u64>();

    /// Whether loads and stores of the focus take no lock at all.
    pub(crate) const fn is_lock_free() -> bool {
        Self::FITS_WORD || Atomic::<P>::is_lock_free()
    }

    pub(crate) fn new(p: P) -> Focus<P> {
        if Self::FITS_WORD {
            Focus::Word(AtomicU64::new(to_word(p)))
        } else {
            Focus::Wide(Atomic::new(p))
        }
    }

    pub(crate) fn load(&self) -> P {
        match self {
            Focus::Word(w) => from_word(w.load(Ordering::Relaxed)),
            Focus::Wide(a) => a.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn store(&self, p: P) {
        match self {
            Focus::Word(w) => w.store(to_word(p), Ordering::Relaxed),
            Focus::Wide(a) => a.store(p, Ordering::Relaxed),
        }
    }
}

/// `p`'s bytes at the start of a zeroed word. Only for `FITS_WORD` points.
fn to_word<P: Pod>(p: P) -> u64 {
    let mut word = 0u64;
    bytemuck::bytes_of_mut(&mut word)[..size_of::<P>()].copy_from_slice(bytemuck::bytes_of(&p));
    word
}

/// The point whose bytes `to_word` stored. Only for `FITS_WORD` points.
fn from_word<P: Pod>(word: u64) -> P {
    bytemuck::pod_read_unaligned(&bytemuck::bytes_of(&word)[..size_of::<P>()])
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
    }

    #[test]
    fn larger_points_use_the_atomic_crate_and_round_trip() {
        let f = Focus::new([1.0f64, 2.0, 3.0]);
        assert!(matches!(f, Focus::Wide(_)));
        f.store([4.0, 5.0, 6.0]);
        assert_eq!(f.load(), [4.0, 5.0, 6.0]);
        let g = Focus::new([0.5f32, 0.25, 0.125]);
        g.store([1.0, 2.0, 3.0]);
        assert_eq!(g.load(), [1.0, 2.0, 3.0]);
        // 12 and 24 bytes match no native atomic: the fallback.
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
