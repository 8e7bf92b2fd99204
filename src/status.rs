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
    pub(crate) fn new(index: usize) -> Bit {
        Bit {
            word: index / 64,
            mask: 1 << (index % 64),
        }
    }
}

/// Some bits of the bitfield: runs of consecutive channel indices (a
/// pool numbers its channels level by level, so a level, or the levels
/// above one, is one run). Its size is the number of runs, not of channels:
/// a pool's start-up stays linear in its levels.
#[derive(Clone, Debug)]
pub(crate) struct BitSet {
    /// The runs, as half-open index ranges, sorted and apart.
    runs: Box<[(usize, usize)]>,
    /// The same runs as words: one load per word asks whether any is set.
    spans: Box<[Span]>,
    /// The first span's first word and its mask, kept inline: most sets
    /// (a level, the levels above one) are one word, asked with one load
    /// and no indirection (`should_yield` asks on every call).
    head: (usize, u64),
    /// Whether the head is the whole set.
    single: bool,
}

/// A run's words: `first..=last`, the first and last masked.
#[derive(Clone, Copy, Debug)]
struct Span {
    first: usize,
    last: usize,
    first_mask: u64,
    last_mask: u64,
}

impl BitSet {
    /// The bits of the channels in `runs` (half-open ranges, sorted and
    /// apart; empty ones are skipped). Not generic: one copy for every
    /// caller.
    pub(crate) fn of_runs(mut runs: Vec<(usize, usize)>) -> BitSet {
        runs.retain(|(start, end)| start < end);
        debug_assert!(runs.windows(2).all(|w| w[0].1 < w[1].0));
        let spans: Box<[Span]> = runs
            .iter()
            .map(|&(start, end)| {
                let (first, last) = (start / 64, (end - 1) / 64);
                let last_mask = !0u64 >> (63 - (end - 1) % 64);
                let mut first_mask = !0u64 << (start % 64);
                if first == last {
                    first_mask &= last_mask;
                }
                Span {
                    first,
                    last,
                    first_mask,
                    last_mask,
                }
            })
            .collect();
        let head = spans.first().map_or((0, 0), |s| (s.first, s.first_mask));
        let single = spans.len() <= 1 && spans.first().is_none_or(|s| s.first == s.last);
        BitSet {
            runs: runs.into(),
            spans,
            head,
            single,
        }
    }

    /// The channels whose bits these are.
    pub(crate) fn channels(&self) -> impl Iterator<Item = usize> + '_ {
        self.runs.iter().flat_map(|&(start, end)| start..end)
    }

    /// Whether any of these bits is set in `words`, loaded with `order`.
    #[inline]
    fn any(&self, words: &[Word], order: Ordering) -> bool {
        if words[self.head.0].0.load(order) & self.head.1 != 0 {
            return true;
        }
        !self.single && self.any_beyond_head(words, order)
    }

    #[cold]
    fn any_beyond_head(&self, words: &[Word], order: Ordering) -> bool {
        self.spans.iter().any(|s| {
            if words[s.first].0.load(order) & s.first_mask != 0 {
                return true;
            }
            s.first != s.last
                && (words[s.first + 1..s.last]
                    .iter()
                    .any(|w| w.0.load(order) != 0)
                    || words[s.last].0.load(order) & s.last_mask != 0)
        })
    }
}

/// One word of the bitfield, on cache lines of its own (two, against the
/// adjacent-line prefetcher): every search reads it, and it must not share
/// a line with what some other thread writes.
#[derive(Debug)]
#[repr(align(128))]
struct Word(AtomicU64);

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
        let word = &self.words[bit.word].0;
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
        self.words[bit.word]
            .0
            .fetch_and(!bit.mask, Ordering::SeqCst);
        // W-fence: pairs with the P-fence in `mark`.
        fence(Ordering::SeqCst);
    }

    /// Sets `bit` unconditionally (after a re-check found a task).
    pub(crate) fn set(&self, bit: Bit) {
        self.words[bit.word].0.fetch_or(bit.mask, Ordering::SeqCst);
    }

    /// Whether `bit` is set now. A hint for searching; see the invariant.
    #[inline]
    pub(crate) fn is_set(&self, bit: Bit) -> bool {
        self.words[bit.word].0.load(Ordering::Acquire) & bit.mask != 0
    }

    /// Whether any bit of `bits` is set now (a hint, as
    /// [`Status::is_set`]): one load per word.
    #[inline]
    pub(crate) fn any_in_set(&self, bits: &BitSet) -> bool {
        bits.any(&self.words, Ordering::Acquire)
    }

    /// Whether any bit of `bits` is set: a reserved worker's final check
    /// (SeqCst, as [`Status::any`]).
    pub(crate) fn any_of_set(&self, bits: &BitSet) -> bool {
        bits.any(&self.words, Ordering::SeqCst)
    }

    /// Whether any bit at all is set: the sleep protocol's final check.
    pub(crate) fn any(&self) -> bool {
        // SeqCst so that the load takes part in the fence ordering of `sleep`.
        self.words.iter().any(|w| w.0.load(Ordering::SeqCst) != 0)
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
        let set = |a: usize, b: usize| BitSet::of_runs(vec![(a, a + 1), (b, b + 1)]);
        assert!(status.any_in_set(&set(5, 199)));
        assert!(!status.any_in_set(&set(5, 198)));
    }

    #[test]
    fn runs_across_words_see_exactly_their_bits() {
        let status = Status::new(300);
        status.mark(Bit::new(130));
        let run = |a, b| BitSet::of_runs(vec![(a, b)]);
        for (a, b, hit) in [
            (0, 130, false),
            (0, 131, true),
            (130, 131, true),
            (131, 300, false),
            (60, 200, true),
            (129, 130, false),
        ] {
            assert_eq!(status.any_in_set(&run(a, b)), hit, "{a}..{b}");
        }
        let runs = |runs: &[(usize, usize)]| BitSet::of_runs(runs.to_vec());
        assert!(!status.any_in_set(&runs(&[(0, 100), (140, 300)])));
        assert!(status.any_in_set(&runs(&[(100, 200)])));
        assert!(status.any_in_set(&runs(&[(0, 10), (120, 131)])));
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
