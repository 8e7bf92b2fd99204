//! The shutdown and panic matrix, in the manner of tokio's task
//! combinations test: every combination of
//!
//! * kind: a closure (`run`), a future ready at its first poll, or a future
//!   that parks once on an outside signal;
//! * channel: `complete_on_close` (coc) or not;
//! * panic: none, in poll (a parked future panics in the poll after its
//!   wake), or in drop (a value the task owns panics when dropped);
//! * handle: dropped at once, awaited by a thread that starts before close,
//!   or awaited after close;
//! * close: before the task runs (it is queued behind a busy worker), while
//!   it runs (its first poll is in progress), or after (it completed, or
//!   parked).
//!
//! Expected outcomes (the handle's result, when awaited):
//!
//! | case | outcome |
//! |---|---|
//! | not coc, close before it runs | Cancelled (never run) |
//! | not coc, parked future, close while or after | Cancelled (dropped when woken after close) |
//! | panic in poll, otherwise | Panicked |
//! | closure, panic in drop (its captures drop inside the call) | Panicked |
//! | future, panic in drop (it drops after returning its output) | Ok |
//! | no panic, otherwise | Ok |
//!
//! In every cell: close resolves; the task's owned state is dropped exactly
//! once (drop counter); its body finished iff the outcome is Ok, or it is a
//! closure that ran and panicked in its captures' drop; and after close the
//! pool refuses new work. A parked future's signal is sent after it parked
//! (a signal arriving during a poll just lets that poll complete it).

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use common::{Gate, TwoLevels, FAILSAFE};
use futures::channel::oneshot;
use futures::executor::block_on;
use smartpool::prelude::*;

#[derive(Copy, Clone, Debug, PartialEq)]
enum Kind {
    Closure,
    Future,
    Parked,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Panic {
    No,
    InPoll,
    InDrop,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Handle {
    Dropped,
    AwaitedBefore,
    AwaitedAfter,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum When {
    Before,
    While,
    After,
}

#[derive(Copy, Clone, Debug, PartialEq)]
enum Outcome {
    Ok,
    Panicked,
    Cancelled,
}

/// The table of the module doc, as code.
fn expected(kind: Kind, coc: bool, panic: Panic, when: When) -> Outcome {
    if !coc && (when == When::Before || kind == Kind::Parked) {
        return Outcome::Cancelled;
    }
    match (panic, kind) {
        (Panic::InPoll, _) => Outcome::Panicked,
        (Panic::InDrop, Kind::Closure) => Outcome::Panicked,
        _ => Outcome::Ok,
    }
}

/// Counts its drop; panics in it if armed.
struct Bomb {
    drops: Arc<AtomicUsize>,
    armed: bool,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.armed {
            panic!("bomb in drop");
        }
    }
}

/// What a task reports to the test.
#[derive(Clone)]
struct Probe {
    started: Gate,
    release: Gate,
    /// Opened when a parked future's poll found no signal and will park.
    parked: Gate,
    finished: Arc<AtomicUsize>,
    hold: bool,
    panic_in_poll: bool,
}

impl Probe {
    /// Entered at the start of the first poll.
    fn enter(&self) {
        self.started.open();
        if self.hold {
            self.release.wait();
        }
    }

    fn finish(&self) -> u32 {
        if self.panic_in_poll {
            panic!("panic in poll");
        }
        self.finished.fetch_add(1, Ordering::SeqCst);
        7
    }
}

/// A future that owns a bomb; parks once on `signal` if given.
struct Task {
    probe: Probe,
    _bomb: Bomb,
    signal: Option<oneshot::Receiver<()>>,
    polled: bool,
}

impl Future for Task {
    type Output = u32;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
        if !self.polled {
            self.polled = true;
            self.probe.enter();
        }
        if let Some(signal) = self.signal.as_mut() {
            match Pin::new(signal).poll(cx) {
                Poll::Pending => {
                    self.probe.parked.open();
                    return Poll::Pending;
                }
                Poll::Ready(_) => self.signal = None,
            }
        }
        Poll::Ready(self.probe.finish())
    }
}

fn cell(kind: Kind, coc: bool, panic: Panic, handle: Handle, when: When) {
    let owned = OwnedPool::new(TwoLevels::new(1)).unwrap();
    let pool = owned.pool.clone();
    let drops = Arc::new(AtomicUsize::new(0));
    let probe = Probe {
        started: Gate::new(),
        release: Gate::new(),
        parked: Gate::new(),
        finished: Arc::new(AtomicUsize::new(0)),
        hold: when == When::While,
        panic_in_poll: panic == Panic::InPoll,
    };
    let bomb = Bomb {
        drops: drops.clone(),
        armed: panic == Panic::InDrop,
    };
    let (signal_tx, signal_rx) = oneshot::channel();

    // Close before: hold the only worker so the task stays queued.
    let blocker = Gate::new();
    let blocker_started = Gate::new();
    if when == When::Before {
        let (b, s) = (blocker.clone(), blocker_started.clone());
        drop(pool.high.exec(run(move || {
            s.open();
            b.wait();
        })));
        assert!(blocker_started.wait_for(FAILSAFE));
    }

    let channel = if coc { &pool.high } else { &pool.low };
    let join = match kind {
        Kind::Closure => {
            let p = probe.clone();
            channel.exec(run(move || {
                let _bomb = bomb;
                p.enter();
                p.finish()
            }))
        }
        Kind::Future | Kind::Parked => channel.exec(Task {
            probe: probe.clone(),
            _bomb: bomb,
            signal: (kind == Kind::Parked).then_some(signal_rx),
            polled: false,
        }),
    };

    match when {
        When::Before => {}
        When::While => assert!(probe.started.wait_for(FAILSAFE), "the task never started"),
        When::After => {
            assert!(probe.started.wait_for(FAILSAFE), "the task never started");
            // One worker: once this runs, the task's poll has returned.
            block_on(pool.high.exec(run(|| ()))).unwrap();
        }
    }

    let mut join = Some(join);
    let awaiting = match handle {
        Handle::Dropped => {
            drop(join.take());
            None
        }
        Handle::AwaitedBefore => {
            let join = join.take().unwrap();
            Some(std::thread::spawn(move || block_on(join)))
        }
        Handle::AwaitedAfter => None,
    };

    // Close, then let everything that waits go.
    let closing = {
        let done = Gate::new();
        let d = done.clone();
        std::thread::spawn(move || {
            block_on(owned.close());
            d.open();
        });
        done
    };
    while !pool.is_closing() {
        std::thread::yield_now();
    }
    blocker.open();
    probe.release.open();
    if kind == Kind::Parked && (coc || when != When::Before) {
        // The signal comes from outside after the future parked (a signal
        // that arrives during the poll just lets that poll finish it).
        assert!(probe.parked.wait_for(FAILSAFE), "the future never parked");
    }
    let _ = signal_tx.send(());
    assert!(closing.wait_for(FAILSAFE), "close did not resolve");

    let outcome = match (join, awaiting) {
        (Some(join), None) => Some(block_on(join)),
        (None, Some(thread)) => Some(thread.join().unwrap()),
        _ => None,
    };
    let want = expected(kind, coc, panic, when);
    if let Some(outcome) = outcome {
        let got = match outcome {
            Ok(7) => Outcome::Ok,
            Ok(other) => panic!("unexpected output {other}"),
            Err(e) if e.is_panic() => Outcome::Panicked,
            Err(e) if e.is_cancelled() => Outcome::Cancelled,
            Err(e) => panic!("unexpected error {e}"),
        };
        assert_eq!(got, want, "handle outcome");
    }
    assert_eq!(
        drops.load(Ordering::SeqCst),
        1,
        "the task's state dropped exactly once"
    );
    let finished = probe.finished.load(Ordering::SeqCst);
    let body_finishes = want == Outcome::Ok
        || (want == Outcome::Panicked && kind == Kind::Closure && panic == Panic::InDrop);
    assert_eq!(
        finished, body_finishes as usize,
        "the body finished iff expected"
    );
    // The pool is closed for good: a late task is refused.
    assert!(pool.high.try_exec(async {}).is_err());
    // Every worker exited and released the pool.
    assert_eq!(Arc::strong_count(&pool), 1, "only our reference is left");
}

// The 162 cells, one test each.

#[test]
fn closure_coc_ok_detached_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_coc_ok_detached_close_while() {
    cell(Kind::Closure, true, Panic::No, Handle::Dropped, When::While);
}

#[test]
fn closure_coc_ok_detached_close_after() {
    cell(Kind::Closure, true, Panic::No, Handle::Dropped, When::After);
}

#[test]
fn closure_coc_ok_awaited_before_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_coc_ok_awaited_before_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_coc_ok_awaited_before_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_coc_ok_awaited_after_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_coc_ok_awaited_after_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_coc_ok_awaited_after_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn closure_coc_poll_panic_detached_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_coc_poll_panic_detached_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn closure_coc_poll_panic_detached_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_coc_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn closure_coc_drop_panic_detached_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_coc_drop_panic_detached_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn closure_coc_drop_panic_detached_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_coc_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Closure,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn closure_drop_ok_detached_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_drop_ok_detached_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn closure_drop_ok_detached_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn closure_drop_ok_awaited_before_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_drop_ok_awaited_before_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_drop_ok_awaited_before_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_drop_ok_awaited_after_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_drop_ok_awaited_after_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_drop_ok_awaited_after_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn closure_drop_poll_panic_detached_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_drop_poll_panic_detached_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn closure_drop_poll_panic_detached_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_drop_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn closure_drop_drop_panic_detached_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn closure_drop_drop_panic_detached_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn closure_drop_drop_panic_detached_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn closure_drop_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Closure,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_coc_ok_detached_close_before() {
    cell(Kind::Future, true, Panic::No, Handle::Dropped, When::Before);
}

#[test]
fn future_coc_ok_detached_close_while() {
    cell(Kind::Future, true, Panic::No, Handle::Dropped, When::While);
}

#[test]
fn future_coc_ok_detached_close_after() {
    cell(Kind::Future, true, Panic::No, Handle::Dropped, When::After);
}

#[test]
fn future_coc_ok_awaited_before_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_coc_ok_awaited_before_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_coc_ok_awaited_before_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_coc_ok_awaited_after_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_coc_ok_awaited_after_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_coc_ok_awaited_after_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_coc_poll_panic_detached_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn future_coc_poll_panic_detached_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn future_coc_poll_panic_detached_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn future_coc_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_coc_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_coc_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_coc_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_coc_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_coc_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_coc_drop_panic_detached_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn future_coc_drop_panic_detached_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn future_coc_drop_panic_detached_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn future_coc_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_coc_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_coc_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_coc_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_coc_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_coc_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Future,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_drop_ok_detached_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn future_drop_ok_detached_close_while() {
    cell(Kind::Future, false, Panic::No, Handle::Dropped, When::While);
}

#[test]
fn future_drop_ok_detached_close_after() {
    cell(Kind::Future, false, Panic::No, Handle::Dropped, When::After);
}

#[test]
fn future_drop_ok_awaited_before_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_drop_ok_awaited_before_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_drop_ok_awaited_before_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_drop_ok_awaited_after_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_drop_ok_awaited_after_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_drop_ok_awaited_after_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_drop_poll_panic_detached_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn future_drop_poll_panic_detached_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn future_drop_poll_panic_detached_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn future_drop_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_drop_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_drop_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_drop_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_drop_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_drop_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn future_drop_drop_panic_detached_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn future_drop_drop_panic_detached_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn future_drop_drop_panic_detached_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn future_drop_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn future_drop_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn future_drop_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn future_drop_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn future_drop_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn future_drop_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Future,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_coc_ok_detached_close_before() {
    cell(Kind::Parked, true, Panic::No, Handle::Dropped, When::Before);
}

#[test]
fn parked_coc_ok_detached_close_while() {
    cell(Kind::Parked, true, Panic::No, Handle::Dropped, When::While);
}

#[test]
fn parked_coc_ok_detached_close_after() {
    cell(Kind::Parked, true, Panic::No, Handle::Dropped, When::After);
}

#[test]
fn parked_coc_ok_awaited_before_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_coc_ok_awaited_before_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_coc_ok_awaited_before_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_coc_ok_awaited_after_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_coc_ok_awaited_after_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_coc_ok_awaited_after_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_coc_poll_panic_detached_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn parked_coc_poll_panic_detached_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn parked_coc_poll_panic_detached_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_coc_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_coc_drop_panic_detached_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn parked_coc_drop_panic_detached_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn parked_coc_drop_panic_detached_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_coc_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Parked,
        true,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_drop_ok_detached_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn parked_drop_ok_detached_close_while() {
    cell(Kind::Parked, false, Panic::No, Handle::Dropped, When::While);
}

#[test]
fn parked_drop_ok_detached_close_after() {
    cell(Kind::Parked, false, Panic::No, Handle::Dropped, When::After);
}

#[test]
fn parked_drop_ok_awaited_before_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_drop_ok_awaited_before_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_drop_ok_awaited_before_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_drop_ok_awaited_after_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_drop_ok_awaited_after_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_drop_ok_awaited_after_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::No,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_drop_poll_panic_detached_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn parked_drop_poll_panic_detached_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn parked_drop_poll_panic_detached_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_before_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_before_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_before_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_after_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_after_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_drop_poll_panic_awaited_after_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InPoll,
        Handle::AwaitedAfter,
        When::After,
    );
}

#[test]
fn parked_drop_drop_panic_detached_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::Before,
    );
}

#[test]
fn parked_drop_drop_panic_detached_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::While,
    );
}

#[test]
fn parked_drop_drop_panic_detached_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::Dropped,
        When::After,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_before_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::Before,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_before_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::While,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_before_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedBefore,
        When::After,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_after_close_before() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::Before,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_after_close_while() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::While,
    );
}

#[test]
fn parked_drop_drop_panic_awaited_after_close_after() {
    cell(
        Kind::Parked,
        false,
        Panic::InDrop,
        Handle::AwaitedAfter,
        When::After,
    );
}
