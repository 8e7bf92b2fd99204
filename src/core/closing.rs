//! The futures that wait for close to begin (`Pool::closing`).
//!
//! The rule: a waiter registers its waker under the lock, after it looked
//! at the phase under that same lock; close changes the phase first, then
//! takes every waker under the lock and wakes them.
//!
//! Why nothing is lost: take the order of the two lock sections. If the
//! waiter's comes first, its waker is in the set that close takes. If
//! close's comes first, the phase changed before close took the lock, so
//! the waiter's look under the lock sees it and returns ready. A waiter
//! that is dropped takes its waker out, so a long-lived pool with many
//! short waiters (a server's connections) keeps no stale ones.

use std::collections::HashMap;
use std::task::Waker;

use crate::sync::{lock, Mutex};

/// The wakers of the futures waiting for close to begin.
#[derive(Default)]
pub(crate) struct ClosingWakers(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    next: u64,
    wakers: HashMap<u64, Waker>,
}

impl ClosingWakers {
    /// Whether close has begun (`closing()`, looked at under the lock);
    /// else registers `waker` under `key` (made on the first call) and
    /// returns `false`.
    pub(crate) fn register(
        &self,
        key: &mut Option<u64>,
        waker: &Waker,
        closing: impl Fn() -> bool,
    ) -> bool {
        let mut inner = lock(&self.0);
        if closing() {
            return true;
        }
        let key = *key.get_or_insert_with(|| {
            inner.next += 1;
            inner.next
        });
        let old = inner.wakers.get(&key);
        if !old.is_some_and(|old| old.will_wake(waker)) {
            // The old waker drops after the lock: dropping a waker may free
            // a task whose future holds another waiter of this set.
            let old = inner.wakers.insert(key, waker.clone());
            drop(inner);
            drop(old);
        }
        false
    }

    /// Takes the waker registered under `key` out (its waiter is dropped).
    pub(crate) fn forget(&self, key: u64) {
        let old = lock(&self.0).wakers.remove(&key);
        drop(old);
    }

    /// Wakes every registered waiter: close has begun (the caller changed
    /// the phase before). A waker's panic is logged and goes no further.
    pub(crate) fn wake_all(&self) {
        let wakers = std::mem::take(&mut lock(&self.0).wakers);
        for (_, waker) in wakers {
            crate::contain::catch(
                || waker.wake(),
                |message| log::error!("smartpool: a closing() waker panicked: {message}"),
            );
        }
    }
}

#[cfg(all(test, loom))]
mod loom_model {
    //! A waiter registers while close begins: it is woken, or it saw the
    //! phase. Removing the look under the lock makes loom find the lost
    //! wake-up (the waiter waits for ever).

    use super::*;
    use crate::sync::{AtomicBool, Ordering};
    use loom::sync::Arc;

    /// A waker that sets a flag (`futures_task::waker` wants a std `Arc`
    /// around it; the flag is loom's).
    struct Flag(Arc<AtomicBool>);

    impl futures_task::ArcWake for Flag {
        fn wake_by_ref(this: &std::sync::Arc<Self>) {
            this.0.store(true, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_waiter_is_woken_or_sees_the_phase() {
        loom::model(|| {
            let wakers = Arc::new(ClosingWakers::default());
            let closing = Arc::new(AtomicBool::new(false));
            let (w, c) = (wakers.clone(), closing.clone());
            let closer = loom::thread::spawn(move || {
                c.store(true, Ordering::SeqCst);
                w.wake_all();
            });
            let woken = Arc::new(AtomicBool::new(false));
            let waker = futures_task::waker(std::sync::Arc::new(Flag(woken.clone())));
            let mut key = None;
            let ready = wakers.register(&mut key, &waker, || closing.load(Ordering::SeqCst));
            closer.join().unwrap();
            assert!(ready || woken.load(Ordering::SeqCst), "a lost wake-up");
        });
    }
}
