//! The joiner's waker: one slot, written by the task's `JoinHandle` and
//! taken by the task's completion, guarded by a state byte.
//!
//! The byte lives beside the slot in the task's header rather than in a
//! struct of its own, which would pad it to a word: so the header stays
//! at 56 bytes and a small task's allocation in glibc's 96-byte chunk
//! (BENCHMARKS.md, W10). The protocol is the one of `futures`'
//! `AtomicWaker`, for a single registrant (the handle, polled through
//! `&mut`).
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
//! joiner's two exchanges, the second fails and the joiner wakes itself.
//! If the completer's whole wake (`fetch_or`, then the release clear)
//! comes before the joiner's first exchange, that exchange reads the clear
//! (acquire): everything the completer did before, the `COMPLETE` of the
//! state word included, happens before the joiner's next look at the
//! state word, which then sees the task complete and does not wait. (A
//! first exchange that finds `WAKING` still set wakes the new waker.)

use std::task::Waker;

use crate::sync::{AtomicU8, Ordering, UnsafeCell};

/// In the state byte: the joiner is writing the slot.
const REGISTERING: u8 = 0b01;
/// In the state byte: the completer claimed the slot, or left the wake to
/// the registering joiner.
const WAKING: u8 = 0b10;

/// The slot; its state byte is kept by the caller (see the module doc).
pub(crate) struct JoinWaker {
    waker: UnsafeCell<Option<Waker>>,
}

// SAFETY: the slot is touched only by the party that holds it through the
// state byte's protocol (see the module doc): one at a time, each hand-over
// ordered by an acquire/release pair on the byte. `Waker` is `Send + Sync`.
unsafe impl Sync for JoinWaker {}

impl JoinWaker {
    pub(crate) fn new() -> JoinWaker {
        JoinWaker {
            waker: UnsafeCell::new(None),
        }
    }

    /// The joiner's side: leaves `waker` to be woken by [`JoinWaker::wake`]
    /// (or wakes it at once, if a wake is under way). `state` is this
    /// slot's byte. One registrant at a time.
    pub(crate) fn register(&self, state: &AtomicU8, waker: &Waker) {
        match state.compare_exchange(0, REGISTERING, Ordering::Acquire, Ordering::Acquire) {
            Ok(_) => {
                self.waker.with_mut(|slot| {
                    // SAFETY: `REGISTERING` gives us the slot: the completer
                    // takes it only from `0`.
                    let slot = unsafe { &mut *slot };
                    if !slot.as_ref().is_some_and(|old| old.will_wake(waker)) {
                        *slot = Some(waker.clone());
                    }
                });
                if state
                    .compare_exchange(REGISTERING, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_err()
                {
                    // The completer came meanwhile and left the wake to us;
                    // the slot is still ours until the byte is reset.
                    let woken = self.waker.with_mut(|slot| {
                        // SAFETY: as above: the completer set `WAKING` on a
                        // taken slot and left it.
                        unsafe { &mut *slot }.take()
                    });
                    state.swap(0, Ordering::AcqRel);
                    if let Some(woken) = woken {
                        woken.wake();
                    }
                }
            }
            Err(actual) => {
                debug_assert_eq!(actual & REGISTERING, 0, "one registrant at a time");
                // A completer is taking the slot: it may not see this
                // waker, so wake it now.
                waker.wake_by_ref();
            }
        }
    }

    /// The completer's side: takes the registered waker, if the slot is
    /// free, to be woken by the caller; `None` if the joiner is
    /// registering (it wakes itself) or nobody registered.
    pub(crate) fn take(&self, state: &AtomicU8) -> Option<Waker> {
        if state.fetch_or(WAKING, Ordering::AcqRel) != 0 {
            return None;
        }
        let waker = self.waker.with_mut(|slot| {
            // SAFETY: we set `WAKING` on a free slot: it is ours until we
            // clear it (the joiner's first exchange fails meanwhile).
            unsafe { &mut *slot }.take()
        });
        state.fetch_and(!WAKING, Ordering::Release);
        waker
    }
}
