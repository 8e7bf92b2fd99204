//! The joiner's waker: one slot, written by the task's `JoinHandle` and
//! taken by the task's completion, guarded by a state byte.
//!
//! The byte lives beside the slot in the task's header rather than in a
//! struct of its own, which would pad it to a word: so the header stays
//! at 48 bytes, and a small task's cell one glibc chunk smaller. The
//! protocol is the one of `futures`' `AtomicWaker`, for a single
//! registrant (the handle, polled through `&mut`).
//!
//! # States (bits of the byte)
//!
//! * `0`: nobody is in the slot;
//! * [`REGISTERING`]: the joiner is writing its waker into the slot;
//! * [`WAKING`]: the completer has claimed the slot (to take the waker),
//!   or found the joiner in it and left the wake to it.
//!
//! # Protocol
//!
//! * **Register** (the joiner, in `JoinHandle::poll`, before it looks at
//!   the task's state word once more): compare-exchange `0 → REGISTERING`.
//!   On success, write the waker, then compare-exchange `REGISTERING → 0`;
//!   if that fails, the completer came meanwhile (`REGISTERING | WAKING`)
//!   and left the slot alone: take the waker out, reset the byte to `0`,
//!   and wake it. If the first exchange fails, a completer is taking the
//!   slot (`WAKING`): wake the new waker directly.
//! * **Wake** (the completer, after the state word says `COMPLETE`):
//!   `fetch_or(WAKING)`. If the byte was `0`, the slot is ours: take the
//!   waker, clear `WAKING`, wake it. Otherwise the joiner is registering
//!   and will see `WAKING` in its second exchange.
//!
//! # Why no wake-up is lost
//!
//! The joiner's exchanges and the completer's `fetch_or` are ordered in the
//! byte's modification order. If the joiner's last exchange comes first,
//! the completer finds `0` and takes the waker the joiner wrote (published
//! by that exchange's release). If the `fetch_or` falls between the
//! joiner's two exchanges, the second fails, reading the `fetch_or`, which
//! releases: the joiner's look at the state word that follows sees
//! `COMPLETE` (the joiner also wakes itself, which only costs a poll).
//! If the completer's whole wake (`fetch_or`, then the release clear)
//! comes before the joiner's first exchange, that exchange reads the clear
//! (acquire): everything the completer did before, the `COMPLETE` of the
//! state word included, happens before the joiner's next look at the
//! state word, which then sees the task complete and does not wait. (A
//! first exchange that finds `WAKING` still set acquires the `fetch_or` in
//! the same way; it wakes the new waker too, which costs a poll.)
//!
//! The waker's clone and the old waker's drop (user code) run outside the
//! `REGISTERING` window, so a panic in them leaves the byte as it was.

use std::task::Waker;

use crate::sync::{AtomicU8, Ordering, UnsafeCell};

/// In the state byte: the joiner is writing the slot.
const REGISTERING: u8 = 0b01;
/// In the state byte: the completer claimed the slot, or left the wake to
/// the registering joiner.
const WAKING: u8 = 0b10;

/// The slot; its state byte is kept by the caller (see the module doc).
pub(crate) struct JoinWaker(UnsafeCell<Option<Waker>>);

// SAFETY: the slot is touched only by the party that holds it through the
// state byte's protocol (see the module doc): one at a time, each hand-over
// ordered by an acquire/release pair on the byte. `Waker` is `Send + Sync`.
unsafe impl Sync for JoinWaker {}

impl JoinWaker {
    pub(crate) fn new() -> JoinWaker {
        JoinWaker(UnsafeCell::new(None))
    }

    /// The joiner's side: leaves `waker` to be woken by [`JoinWaker::wake`]
    /// (or wakes it at once, if a wake is under way). `state` is this
    /// slot's byte. One registrant at a time.
    pub(crate) fn register(&self, state: &AtomicU8, waker: &Waker) {
        // User code (the clone, and below the old waker's drop) runs
        // outside the `REGISTERING` window: a panic there leaves the byte
        // as it was.
        let mut new = Some(waker.clone());
        let registering =
            state.compare_exchange(0, REGISTERING, Ordering::Acquire, Ordering::Acquire);
        if let Err(actual) = registering {
            debug_assert_eq!(actual & REGISTERING, 0, "one registrant at a time");
            // A completer is taking the slot: it may not see this waker.
            // (The failed exchange acquired its `fetch_or`, so the joiner's
            // look that follows already sees `COMPLETE`; the wake costs at
            // most one more poll.)
            return waker.wake_by_ref();
        }
        self.0.with_mut(|slot| {
            // SAFETY: `REGISTERING` gives us the slot: the completer takes
            // it only from `0`.
            let slot = unsafe { &mut *slot };
            // `will_wake` compares pointers: no user code.
            if !slot.as_ref().is_some_and(|old| old.will_wake(waker)) {
                // The old waker comes out into `new`, dropped as we return.
                std::mem::swap(slot, &mut new);
            }
        });
        if state
            .compare_exchange(REGISTERING, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // The completer came meanwhile and left the wake to us; the
            // slot is still ours until the byte is reset. (The failed
            // exchange acquired its `fetch_or`, so the joiner's next look
            // sees `COMPLETE`: this wake only spares it a poll that would
            // find nothing new.)
            let woken = self.0.with_mut(|slot| {
                // SAFETY: as above: the completer set `WAKING` on a taken
                // slot and left it.
                unsafe { &mut *slot }.take()
            });
            state.swap(0, Ordering::AcqRel);
            if let Some(woken) = woken {
                woken.wake();
            }
        }
    }

    /// The completer's side: takes the registered waker, if the slot is
    /// free, to be woken by the caller; `None` if the joiner is
    /// registering (it wakes itself) or nobody registered.
    pub(crate) fn take(&self, state: &AtomicU8) -> Option<Waker> {
        // Release as well as acquire: a joiner whose exchange fails on this
        // `WAKING` must then see the state word's `COMPLETE` (see the
        // module doc); with acquire alone it would register again and wait.
        if state.fetch_or(WAKING, Ordering::AcqRel) != 0 {
            return None;
        }
        let waker = self.0.with_mut(|slot| {
            // SAFETY: we set `WAKING` on a free slot: it is ours until we
            // clear it (the joiner's first exchange fails meanwhile).
            unsafe { &mut *slot }.take()
        });
        state.fetch_and(!WAKING, Ordering::Release);
        waker
    }
}
