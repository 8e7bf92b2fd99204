//! Time: futures that complete at an instant or after a delay, a periodic
//! stream, and conveniences that run a task on a channel when it is due.
//!
//! Built on `futures-timer`, whose one timer thread wakes the waiting
//! futures. A task of the pool that awaits one of these is parked like any
//! future; when the timer wakes it, it goes through its behavior's followup,
//! exactly as if woken by anything else. It does not occupy a worker while
//! it waits.
//!
//! ```
//! use std::time::Duration;
//! use smartpool::prelude::*;
//! # #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)] enum Ch { Only }
//! # struct P { c: VecDequeChannel }
//! # impl PoolBehavior for P {
//! #     type ChannelKey = Ch;
//! #     fn config(&self) -> PoolConfig<Ch> { PoolConfig { threads: 1, schedule: ScheduleAlgorithm::HighestFirst,
//! #         levels: vec![vec![ChannelParams { key: Ch::Only, complete_on_close: true }]] } }
//! #     fn channel(&self, _: Ch) -> &dyn Channel { &self.c }
//! # }
//! # let owned = OwnedPool::new(P { c: VecDequeChannel::new() })?;
//! let time = TimeScheduler::new();
//! let t = time.clone();
//! let h = owned.pool.c.exec(async move {
//!     t.after(Duration::from_millis(2)).await;
//!     "two milliseconds later"
//! });
//! assert_eq!(futures::executor::block_on(h)?, "two milliseconds later");
//! # futures::executor::block_on(owned.close());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

#[cfg(feature = "async-io")]
use async_io::Timer as Delay;
use futures_core::Stream;
#[cfg(not(feature = "async-io"))]
use futures_timer::Delay;

use crate::channel::{Channel, Exec};
use crate::task::JoinHandle;

/// Makes timers. Cheap to clone; all share one timer thread:
/// `futures-timer`'s, or with the `async-io` feature async-io's (so that a
/// program that uses async-io already runs one timer thread, not two).
/// (`OwnedPool::close_timeout`'s deadline uses `futures-timer`'s either
/// way.)
#[derive(Clone, Debug, Default)]
pub struct TimeScheduler {
    _private: (),
}

impl TimeScheduler {
    /// A scheduler.
    pub fn new() -> TimeScheduler {
        TimeScheduler::default()
    }

    /// A future that completes at `when` (at once if `when` has passed).
    pub fn at(&self, when: Instant) -> Sleep {
        let delay = timer(when.saturating_duration_since(Instant::now()));
        Sleep { until: when, delay }
    }

    /// A future that completes after `delay`. A delay too long for the
    /// clock (`Duration::MAX`) never completes: its deadline is clamped to
    /// about 30 years from now, as tokio clamps far deadlines.
    pub fn after(&self, delay: Duration) -> Sleep {
        self.at(crate::sync::later(Instant::now(), delay))
    }

    /// A stream that yields `start`, `start + interval`, `start + 2 *
    /// interval`, ..., each at (not before) that instant. If the consumer
    /// falls behind, the missed instants come at once, in order (none is
    /// skipped). An instant the clock cannot represent (`Duration::MAX`)
    /// is clamped as in [`TimeScheduler::after`]: the stream ticks at
    /// `start` and then waits for ever. `interval` must not be zero.
    pub fn periodically(&self, start: Instant, interval: Duration) -> Periodic {
        assert!(
            !interval.is_zero(),
            "periodically: the interval must not be zero"
        );
        Periodic {
            interval,
            sleep: self.at(start),
        }
    }

    /// Runs `future` on `channel` once `when` has come: the task parks until
    /// then (it holds no worker), and its handle resolves to its output.
    pub fn run_at<C, F>(&self, channel: &C, when: Instant, future: F) -> JoinHandle<F::Output>
    where
        C: Channel + ?Sized,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let due = self.at(when);
        channel.exec(async move {
            due.await;
            future.await
        })
    }

    /// Runs `future` on `channel` after `delay`; see
    /// [`TimeScheduler::run_at`].
    pub fn run_after<C, F>(&self, channel: &C, delay: Duration, future: F) -> JoinHandle<F::Output>
    where
        C: Channel + ?Sized,
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.run_at(channel, crate::sync::later(Instant::now(), delay), future)
    }
}

/// A future that completes at an instant. Made by [`TimeScheduler::at`] and
/// [`TimeScheduler::after`].
#[must_use = "a Sleep does nothing unless awaited"]
#[derive(Debug)]
pub struct Sleep {
    until: Instant,
    delay: Delay,
}

impl Sleep {
    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.until
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // The clock decides, not the timer: a zero-length `Delay` may still
        // be pending until the timer thread runs, and a timer may fire a
        // hair early on a coarse clock.
        loop {
            let now = Instant::now();
            if now >= self.until {
                return Poll::Ready(());
            }
            if Pin::new(&mut self.delay).poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.delay = timer(self.until - now);
        }
    }
}

/// A stream of instants at a fixed interval; made by
/// [`TimeScheduler::periodically`].
#[must_use = "a Periodic does nothing unless polled"]
#[derive(Debug)]
pub struct Periodic {
    interval: Duration,
    /// Until the next instant, which it yields when it completes.
    sleep: Sleep,
}

impl Stream for Periodic {
    type Item = Instant;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Instant>> {
        ready!(Pin::new(&mut self.sleep).poll(cx));
        let tick = self.sleep.until;
        self.sleep = TimeScheduler::new().at(crate::sync::later(tick, self.interval));
        Poll::Ready(Some(tick))
    }
}

/// A timer that fires after `after`, under [`Sleep`]: futures-timer's, or
/// with the `async-io` feature async-io's.
fn timer(after: Duration) -> Delay {
    #[cfg(not(feature = "async-io"))]
    return Delay::new(after);
    #[cfg(feature = "async-io")]
    return Delay::after(after);
}
