//! Stall detection: a poll that runs too long while work waits is reported.
//!
//! # Rule
//!
//! A seat that runs one poll for longer than the pool's threshold
//! ([`PoolBehavior::stall_threshold`]) while a task waits at that poll's
//! level or above is reported once: a `warn` log naming the channel, and
//! one more in the channel's [`ChannelMetrics::stalls`]. (glommio's
//! `detect_stalls` and tokio-console's long-poll warning do the same.)
//!
//! # Why
//!
//! A blocking call inside a task (`futures::executor::block_on` on a
//! handle, a lock held across slow work) keeps its worker from every task
//! queued behind it. On a pool of one thread that is a hang, and nothing
//! said so.
//!
//! # How
//!
//! One watcher thread per pool looks at every seat each quarter of the
//! threshold. It reads what `core::meters` keeps anyway: the seat's
//! activity (the channel of the task it runs, or idle) and its progress
//! (the channel's tasks taken, tasks run inline in a wait, changes of
//! activity: three counts, whatever the pool's size). A seat seen running the same
//! channel with the same progress for the threshold has run one poll that
//! long. A wait that helps makes progress, so it is not a stall. While
//! every seat is idle the watcher waits (up to ten seconds) until a worker
//! that ends an idle spell with a task rings it (`core::Bell`), so an idle
//! pool costs nothing.
//!
//! # Why nothing is lost
//!
//! The watcher only reads, and writes only its own counts: no worker ever
//! waits for it. It holds the pool's shared state, never the pool (whose
//! behavior must not be dropped on its thread), and ends as soon as its
//! `Watcher` is stopped or dropped: the pool's close joins it.
//!
//! Needs the `metrics` feature (the activity and progress it reads).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::Pool;
use crate::behavior::PoolBehavior;
use crate::core::Shared;
use crate::status::BitSet;

/// The longest a watcher waits between two looks while every seat is
/// idle, unless rung (see `core::Bell`): a missed ring delays one report
/// by at most this.
const IDLE_LOOK: Duration = Duration::from_secs(10);

/// The shortest threshold: a shorter one is taken as this.
pub(crate) const MIN_THRESHOLD: Duration = Duration::from_millis(1);

/// A pool's watcher thread (see the module doc). Dropping it stops the
/// thread without waiting for it.
pub(crate) struct Watcher {
    shared: Arc<Shared>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Watcher {
    /// Starts the watcher of `pool`, if its threshold is set (and the
    /// `metrics` feature is on); `None` otherwise, or if no thread could
    /// be started (the pool works without it, and the error is logged).
    pub(crate) fn start<B: PoolBehavior>(pool: &Arc<Pool<B>>) -> Option<Watcher> {
        let threshold = pool.behavior.stall_threshold()?.max(MIN_THRESHOLD);
        if !crate::core::meters::ENABLED {
            return None;
        }
        // Per level, the status bits of that level and those above.
        let waiting: Box<[BitSet]> = (0..=pool.levels.lowest())
            .map(|level| pool.levels.bits_down_to(level).clone())
            .collect();
        let shared = pool.shared.clone();
        let thread = thread::Builder::new()
            .name("smartpool-watch".into())
            .stack_size(256 << 10)
            .spawn(move || watch(&shared, &waiting, threshold))
            .inspect_err(|e| {
                log::error!("smartpool: no stall watcher thread could be started: {e}")
            })
            .ok()?;
        let (shared, thread) = (pool.shared.clone(), Some(thread));
        Some(Watcher { shared, thread })
    }

    /// Stops the watcher and waits for its thread to end.
    pub(crate) fn stop(mut self) {
        self.shared.bell.stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.shared.bell.stop();
    }
}

/// What the watcher saw of one seat.
struct Look {
    /// The channel of the task it ran and its progress, if it ran one.
    seen: Option<(usize, u64)>,
    /// Since when the seat showed this.
    since: Instant,
    /// Whether this poll was reported already.
    reported: bool,
}

/// The watcher's loop (see the module doc): `waiting` holds, per level,
/// the status bits of that level and those above.
fn watch(shared: &Shared, waiting: &[BitSet], threshold: Duration) {
    let busy_look = threshold / 4;
    let idle_look = IDLE_LOOK.max(busy_look);
    let mut looks: Vec<Look> = Vec::new();
    let mut idle = false;
    loop {
        // While every seat is idle, wait until a worker that finds work
        // rings.
        let period = if idle { idle_look } else { busy_look };
        if shared.bell.wait(period, idle) || shared.close.is_terminated() {
            return;
        }
        idle = !look(shared, waiting, &mut looks, threshold);
    }
}

/// One look at every seat: reports the polls past `threshold`; `true` if
/// some seat runs a task.
fn look(shared: &Shared, waiting: &[BitSet], looks: &mut Vec<Look>, threshold: Duration) -> bool {
    let meters = &shared.meters;
    let now = Instant::now();
    let mut busy = false;
    for (seat, meter) in meters.seats.iter().enumerate() {
        // The channel of the task it runs, and its progress: the channel's
        // tasks it took, the tasks it ran inline, and its changes of
        // activity (a task of another channel, run in a wait, changes it).
        // The same in two looks: one poll ran between them.
        let taken = |c: usize| meter.channels.get(c).map_or(0, |c| c.taken.get());
        let progress = |c: usize| taken(c) + meter.inline.get();
        let seen = meter.running_now().map(|c| (c, progress(c)));
        busy |= seen.is_some();
        let fresh = Look {
            seen,
            since: now,
            reported: false,
        };
        let Some(last) = looks.get_mut(seat) else {
            looks.push(fresh);
            continue;
        };
        if last.seen != seen {
            *last = fresh;
            continue;
        }
        let Some((channel, _)) = seen else { continue };
        let ran = now.saturating_duration_since(last.since);
        if last.reported || ran < threshold {
            continue;
        }
        let level = shared.channels[channel].level;
        // Queued work has a status bit; a LIFO slot's task (of the lowest
        // level) has none.
        let waits = shared.status.any_in_set(&waiting[level])
            || (level + 1 == waiting.len() && shared.any_slot_full());
        if !waits {
            continue;
        }
        last.reported = true;
        meters.stalls[channel].add(1);
        log::warn!(
            "smartpool: pool {} seat {seat}: a task of channel {} has run one poll for {ran:?} \
             while tasks wait at its level or above; a blocking call in a task? (wait with \
             pool.block_on, or block in block_in_place or spawn_blocking)",
            shared.id,
            shared.channels[channel].name,
        );
    }
    busy
}
