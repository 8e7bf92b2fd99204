//! The status bitfield: one bit per channel, set while the channel may hold a
//! task. It lets a worker find the highest non-empty level with one load per
//! 64 channels, and it is the sleep protocol's final guard (see `sleep`).
//!
//! # Invariant
//!
//! *A channel that holds a task never has its bit clear once the pusher's
//! [`Status::mark`] has returned.* A set bit may be stale (the channel is
//! empty); workers repair that lazily. A clear bit is never stale.
//!
//! # Protocol
//!
//! Pusher P (any thread), after its task T is stored in channel c:
//!
//! 1. `fence(SeqCst)` (P-fence);
//! 2. load the word; if c's bit is clear, `fetch_or` it, then
//!    `fence(SeqCst)` again (the *set fence*, for the sleep protocol: it
//!    orders the new bit before the poster's read of the sleep counters).
//!
//! Worker W, after `pop` on c returned nothing:
//!
//! 1. `fetch_and` clears c's bit;
//! 2. `fence(SeqCst)` (W-fence);
//! 3. `pop` on c again; if that finds a task, W sets the bit again (the channel
//!    may hold more) and runs the task.
//!
//! # Why no task is stranded
//!
//! The two fences are ordered in the single total order of SeqCst operations.
//! If the W-fence comes first, W's clear is visible to P's load (fence to
//! fence), so P sees the bit clear and sets it. If the P-fence comes first,
//! the store of T is visible to W's second `pop`, which takes T (or sees it
//! taken by another worker). In both cases no moment exists after both
//! finished where T is queued and the bit is clear. Skipping the `fetch_or`
//! when the bit is already set keeps a busy channel's pushes from writing the
//! shared cache line that every worker reads.

use crate::sync::{fence, AtomicU64, Ordering};

/// Where a channel's bit lives: word index and mask within that word.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Bit {
    word: usize,
    mask: u64,
}

impl Bit {
    /// The word and the mask within it.
    pub(crate) fn parts(self) -> (usize, u64) {
        (self.word, self.mask)
    }

    pub(crate) fn new(index: usize) -> Bit {
        Bit {
            word: index / 64,
            mask: 1 << (index % 64),
        }
    }
}

/// Some bits of the bitfield: (word, mask) pairs, one per word touched.
pub(crate) type BitSet = Box<[(usize, u64)]>;

/// One word of the bitfield, on cache lines of its own (two, against the
/// adjacent-line prefetcher): every search reads it, and it must not share
/// a line with what some other thread writes.
#[derive(Debug)]
#[repr(align(128))]
struct Word(AtomicU64);

impl std::ops::Deref for Word {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// The bitfield. Any number of channels; words are added 64 bits at a time.
#[derive(Debug)]
pub(crate) struct Status {
    words: Box<[Word]>,
}

impl Status {
    pub(crate) fn new(channels: usize) -> Status {
        let words = channels.div_ceil(64).max(1);
        Status {
            words: (0..words).map(|_| Word(AtomicU64::new(0))).collect(),
        }
    }

    /// Pusher side: called after a task was stored in the channel owning `bit`.
    #[inline]
    pub(crate) fn mark(&self, bit: Bit) {
        // P-fence: pairs with the W-fence in `clear`.
        fence(Ordering::SeqCst);
        let word = &self.words[bit.word];
        if word.load(Ordering::Relaxed) & bit.mask == 0 {
            word.fetch_or(bit.mask, Ordering::SeqCst);
            // Set fence: pairs with the sleep fence (see `sleep`). Paid only
            // when a channel turns non-empty, not on every push.
            fence(Ordering::SeqCst);
        }
    }

    /// Worker side: called after the channel owning `bit` was found empty.
    /// The caller must then look into the channel once more (see module doc).
    pub(crate) fn clear(&self, bit: Bit) {
        self.words[bit.word].fetch_and(!bit.mask, Ordering::SeqCst);
        // W-fence: pairs with the P-fence in `mark`.
        fence(Ordering::SeqCst);
    }

    /// Sets `bit` unconditionally (after a re-check found a task).
    pub(crate) fn set(&self, bit: Bit) {
        self.words[bit.word].fetch_or(bit.mask, Ordering::SeqCst);
    }

    /// Whether `bit` is set now. A hint for searching; see the invariant.
    #[inline]
    pub(crate) fn is_set(&self, bit: Bit) -> bool {
        self.words[bit.word].load(Ordering::Acquire) & bit.mask != 0
    }

    /// Whether any bit of `mask` in word `word` is set now (a hint, as
    /// [`Status::is_set`]).
    #[inline]
    pub(crate) fn any_in(&self, word: usize, mask: u64) -> bool {
        self.words[word].load(Ordering::Relaxed) & mask != 0
    }

    /// Whether any bit of `bits` is set now (a hint, as
    /// [`Status::is_set`]): one load per word.
    #[inline]
    pub(crate) fn any_in_set(&self, bits: &BitSet) -> bool {
        bits.iter()
            .any(|&(word, mask)| self.words[word].load(Ordering::Acquire) & mask != 0)
    }

    /// Whether any bit of `bits` is set: a reserved worker's final check
    /// (SeqCst, as [`Status::any`]).
    pub(crate) fn any_of_set(&self, bits: &BitSet) -> bool {
        bits.iter()
            .any(|&(word, mask)| self.words[word].load(Ordering::SeqCst) & mask != 0)
    }

    /// Whether any bit at all is set: the sleep protocol's final check.
    pub(crate) fn any(&self) -> bool {
        // SeqCst so that the load takes part in the fence ordering of `sleep`.
        self.words.iter().any(|w| w.load(Ordering::SeqCst) != 0)
    }
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;

    #[test]
    fn bits_beyond_one_word_are_independent() {
        let status = Status::new(200);
        for i in [0, 63, 64, 127, 199] {
            assert!(!status.is_set(Bit::new(i)));
            status.mark(Bit::new(i));
            assert!(status.is_set(Bit::new(i)));
        }
        assert!(!status.is_set(Bit::new(1)));
        assert!(!status.is_set(Bit::new(128)));
        status.clear(Bit::new(64));
        assert!(!status.is_set(Bit::new(64)));
        assert!(status.is_set(Bit::new(63)));
        let set =
            |bits: &[usize]| -> BitSet { bits.iter().map(|&i| Bit::new(i).parts()).collect() };
        assert!(status.any_in_set(&set(&[5, 199])));
        assert!(!status.any_in_set(&set(&[5, 198])));
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! Property: a push racing a clear never leaves a queued task with its bit
    //! clear once both sides are done.
    use super::*;
    use crate::sync::AtomicBool;
    use loom::sync::Arc;

    #[test]
    fn push_racing_clear_keeps_bit() {
        loom::model(|| {
            let status = Arc::new(Status::new(1));
            // The channel: holds at most one task.
            let queued = Arc::new(AtomicBool::new(false));
            let bit = Bit::new(0);

            let pusher = {
                let (status, queued) = (status.clone(), queued.clone());
                loom::thread::spawn(move || {
                    queued.store(true, Ordering::Release);
                    status.mark(bit);
                })
            };
            // Worker: its first look found the channel empty.
            status.clear(bit);
            let took = queued.swap(false, Ordering::AcqRel);
            if took {
                status.set(bit);
            }
            pusher.join().unwrap();
            if queued.load(Ordering::Acquire) {
                assert!(status.is_set(bit), "queued task with its bit clear");
            }
        });
    }
}
