//! Which level a worker serves next: `HighestFirst` and `RoundRobin`.
//!
//! The schedule only orders levels; `pool::worker` looks into a level's
//! channels. Every level rule lives here: the order of levels, the time
//! slices, and which levels' tasks may use the LIFO slot
//! ([`Levels::uses_slot`]), whose task the schedule admits like a queued
//! one ([`Levels::admits`]). Per-worker state (the round-robin position and, within each
//! level, which channel to look at first) lives in a [`Cursor`] owned by
//! the worker, so choosing a level writes nothing shared.
//!
//! Invariant (HighestFirst): a worker looks at level `l` only after it found
//! every level above `l` without a set status bit, or found their channels
//! empty, in this same search; so it never starts a lower-level task while a
//! higher level's bit was set at the moment it looked. The one exception is
//! a level with a starvation bound (below), which it looks at first once
//! that level is due.
//!
//! # Starvation bounds (HighestFirst)
//!
//! A level may have a bound, `max_wait`
//! ([`LevelOptions::max_wait`](crate::LevelOptions::max_wait)), kept by
//! its `WaitClock` (see `wait_clock` for its states and invariant). A search
//! first asks each bounded level it serves, highest first: empty, or
//! nothing above it has work, the clock stops; else, past the bound, the
//! search claims the level and looks at it before every other level. So
//! while the level holds work that higher levels keep waiting, it is served
//! at least once per bound: its first such task starts within the bound plus
//! the rest of the task each worker that serves the level is running, each
//! later one within a bound of the one before. The cost, only in pools that
//! set a bound: a clock read in a search that sees a bounded level waiting,
//! and in a push to it while a higher level has work.

use std::time::Instant;

use crate::behavior::{LevelOptions, ScheduleAlgorithm};
use crate::status::{BitSet, Status};
use crate::wait_clock::WaitClock;
use std::sync::Arc;

/// One level: its channels (indices) and their status bits.
pub(crate) struct Level {
    pub(crate) channels: Box<[usize]>,
    mask: BitSet,
    /// The bits whose work a task of this level gives way to: under
    /// HighestFirst, the levels above; under RoundRobin, every other level
    /// (see `admits` and `should_yield`; a starvation bound waits behind
    /// these).
    others: BitSet,
}

/// Which levels each seat serves, from the levels' reservations (see
/// [`PoolBehavior::level_options`](crate::PoolBehavior::level_options)):
/// level `l` reserving `n` workers gets `n` worker threads that serve only
/// levels `0..=l`, each group a sleep domain of its own (see `sleep`'s
/// "Domains"). Worker threads are given out from seat 0, the highest
/// level's reservation first; the rest, and every guest seat, serve every
/// level, in the common domain 0.
pub(crate) struct Seating {
    /// Per seat: the lowest level it serves.
    pub(crate) floor: Vec<usize>,
    /// Per seat: its sleep domain.
    pub(crate) domain: Vec<usize>,
    /// Per channel: the reserved domains that serve its level, nearest
    /// reservation first (posters try them before the common domain).
    pub(crate) wakes: Vec<Box<[usize]>>,
    /// Worker threads reserved (seats `0..reserved`).
    pub(crate) reserved: usize,
}

impl Seating {
    /// `options[l].reserved_workers`: workers reserved by level `l` (a
    /// reservation of the lowest level changes nothing: it serves every
    /// level); validated to leave the common domain at least one worker
    /// thread.
    pub(crate) fn new(
        levels: &Levels,
        options: &[LevelOptions],
        threads: usize,
        seats: usize,
    ) -> Seating {
        let lowest = levels.lowest();
        let mut floor = Vec::with_capacity(seats);
        let mut domain = Vec::with_capacity(seats);
        // The reserving levels, highest first: their domains are 1, 2, ...
        let mut reserving = Vec::new();
        for (level, n) in options.iter().map(|o| o.reserved_workers).enumerate() {
            if level < lowest && n > 0 {
                reserving.push(level);
                floor.resize(floor.len() + n, level);
                domain.resize(domain.len() + n, reserving.len());
            }
        }
        let reserved = floor.len();
        assert!(
            reserved == 0 || reserved < threads,
            "validation leaves a common worker"
        );
        floor.resize(seats, lowest);
        domain.resize(seats, 0);
        let wakes = levels
            .level_of
            .iter()
            // The domains of the reserving levels whose workers serve the
            // channel's level (`l >= own`): a tail of `reserving`, which is
            // in level order.
            .map(|&own| (reserving.partition_point(|&l| l < own) + 1..=reserving.len()).collect())
            .collect();
        Seating {
            floor,
            domain,
            wakes,
            reserved,
        }
    }
}

/// A level's starvation bound (see the module doc).
struct Bound {
    level: usize,
    /// Waits behind the level's `others`: under HighestFirst, the levels
    /// above it.
    clock: Arc<WaitClock>,
}

/// The levels and the policy of a pool.
pub(crate) struct Levels {
    levels: Box<[Level]>,
    /// Channel index → its level.
    level_of: Box<[usize]>,
    /// The policy; under RoundRobin, with its slices.
    policy: ScheduleAlgorithm,
    /// The levels with a starvation bound, highest first.
    bounds: Box<[Bound]>,
    /// Per level `l`: the status bits of levels `0..=l`.
    down_to: Box<[BitSet]>,
}

/// A worker's position in the schedule.
pub(crate) struct Cursor {
    /// The lowest level the worker serves (the last, unless it is
    /// reserved: see [`Seating`]).
    floor: usize,
    level: usize,
    since: Instant,
    /// Per level: the channel to look at first next time.
    rotation: Box<[usize]>,
}

impl Levels {
    /// `sizes[l]` is level `l`'s count of channels, highest level first;
    /// the channels are numbered level by level from 0 (as a pool numbers
    /// them): each level is one run of indices, and so are the levels
    /// above it. `options[l]`'s `max_wait` (missing: none), level `l`'s
    /// starvation bound (HighestFirst only).
    pub(crate) fn new(
        sizes: &[usize],
        algorithm: &ScheduleAlgorithm,
        options: &[LevelOptions],
    ) -> Levels {
        let total = sizes.iter().sum();
        let (mut level_of, mut down_to, mut built) =
            (Vec::with_capacity(total), Vec::new(), Vec::new());
        for (level, &size) in sizes.iter().enumerate() {
            // The level's run, `start..end`.
            let (start, end) = (level_of.len(), level_of.len() + size);
            level_of.resize(end, level);
            // `down_to[l]`: the levels `0..=l`, the run `0..end`.
            down_to.push(BitSet::of_runs(vec![(0, end)]));
            let others = match algorithm {
                ScheduleAlgorithm::HighestFirst => vec![(0, start)],
                ScheduleAlgorithm::RoundRobin(_) => vec![(0, start), (end, total)],
            };
            built.push(Level {
                channels: (start..end).collect(),
                mask: BitSet::of_runs(vec![(start, end)]),
                others: BitSet::of_runs(others),
            });
        }
        let bounds = options
            .iter()
            .enumerate()
            // The highest level waits for nobody: a bound there is moot.
            .skip(1)
            .filter_map(|(level, option)| {
                Some(Bound {
                    level,
                    clock: Arc::new(WaitClock::new(option.max_wait?)),
                })
            })
            .collect();
        Levels {
            levels: built.into(),
            level_of: level_of.into(),
            policy: algorithm.clone(),
            bounds,
            down_to: down_to.into(),
        }
    }

    /// Whether some level has a starvation bound (a worker woken with a
    /// hint then searches as always: the hint does not know the clocks).
    pub(crate) fn has_bounds(&self) -> bool {
        !self.bounds.is_empty()
    }

    /// Channel `channel`'s level's wait clock, if it has a bound, with the
    /// status bits of the levels above it: a push to the channel while one
    /// of those is set starts the clock (see `wait_clock`).
    pub(crate) fn clock_of(&self, channel: usize) -> Option<(Arc<WaitClock>, BitSet)> {
        let level = self.level_of[channel];
        self.bounds
            .iter()
            .find(|b| b.level == level)
            .map(|b| (b.clock.clone(), self.levels[level].others.clone()))
    }

    /// The first bounded level (down to `floor`) that is due, claimed by
    /// this search; keeps every bounded level's clock on the way (see the
    /// module doc).
    fn due(&self, status: &Status, floor: usize) -> Option<usize> {
        let waiting = |bound: &Bound| {
            let Level { mask, others, .. } = &self.levels[bound.level];
            status.any_in_set(mask) && status.any_in_set(others)
        };
        for bound in self.bounds.iter().take_while(|b| b.level <= floor) {
            if !waiting(bound) {
                bound.clock.stop();
                // A push may have come since we looked (see `wait_clock`).
                if waiting(bound) {
                    bound.clock.start();
                }
                continue;
            }
            if let Some(since) = bound.clock.due() {
                if bound.clock.claim(since) {
                    return Some(bound.level);
                }
            }
        }
        None
    }

    /// Whether tasks of `channel` may use a worker's LIFO slot (see
    /// `lifo`): those of the lowest level under HighestFirst, where a slot
    /// task (which has no status bit) can only delay work of its own level;
    /// under RoundRobin, where every level is owed its slice and a slot
    /// task would escape its level's, only those of a pool of one level.
    pub(crate) fn uses_slot(&self, channel: usize) -> bool {
        match self.policy {
            ScheduleAlgorithm::HighestFirst => self.level_of[channel] + 1 == self.levels.len(),
            ScheduleAlgorithm::RoundRobin(_) => self.levels.len() == 1,
        }
    }

    /// For each channel, the status bits that mean "yield" to a task of
    /// it (see `should_yield`), as (word, mask) pairs: under HighestFirst,
    /// those of the levels above its own; under RoundRobin, those of every
    /// other level.
    pub(crate) fn yield_masks(&self) -> Box<[BitSet]> {
        self.level_of
            .iter()
            .map(|&level| self.levels[level].others.clone())
            .collect()
    }

    /// The lowest level.
    pub(crate) fn lowest(&self) -> usize {
        self.levels.len() - 1
    }

    /// Channel `channel`'s level.
    pub(crate) fn level_of(&self, channel: usize) -> usize {
        self.level_of[channel]
    }

    /// The status bits of levels `0..=floor` (a reserved worker's final
    /// check before sleeping looks at these).
    pub(crate) fn bits_down_to(&self, floor: usize) -> &BitSet {
        &self.down_to[floor]
    }

    /// Under RoundRobin, when the slice of the level `cursor` serves ends;
    /// `None` under HighestFirst.
    #[inline]
    pub(crate) fn slice_end(&self, cursor: &Cursor) -> Option<Instant> {
        match &self.policy {
            ScheduleAlgorithm::HighestFirst => None,
            ScheduleAlgorithm::RoundRobin(slices) => {
                Some(crate::sync::later(cursor.since, slices[cursor.level]))
            }
        }
    }

    /// The position of a worker that serves levels `0..=floor`.
    pub(crate) fn cursor(&self, floor: usize) -> Cursor {
        debug_assert!(floor < self.levels.len());
        Cursor {
            floor,
            level: 0,
            since: Instant::now(),
            rotation: vec![0; self.levels.len()].into(),
        }
    }

    /// Whether the policy would serve `channel`'s level now, by the status
    /// bits: HighestFirst, if no higher level has a set bit; RoundRobin, if
    /// it is the current level and its slice lasts, or no other level has a
    /// set bit. (For a task outside the channels: a worker's LIFO slot.)
    #[inline]
    pub(crate) fn admits(&self, status: &Status, cursor: &Cursor, channel: usize) -> bool {
        let level = self.level_of[channel];
        if level > cursor.floor {
            return false;
        }
        let others = &self.levels[level].others;
        match &self.policy {
            ScheduleAlgorithm::HighestFirst => level == 0 || !status.any_in_set(others),
            ScheduleAlgorithm::RoundRobin(slices) => {
                (level == cursor.level && cursor.since.elapsed() < slices[level])
                    || !status.any_in_set(others)
            }
        }
    }

    /// Offers level `level`'s channels to `take`, if any of their bits is
    /// set, starting at the cursor's rotation (which moves on by one; a
    /// level of one channel has none).
    #[inline(always)]
    fn try_level<T>(
        &self,
        status: &Status,
        cursor: &mut Cursor,
        level: usize,
        take: &mut impl FnMut(usize) -> Option<T>,
    ) -> Option<T> {
        let Level { channels, mask, .. } = &self.levels[level];
        if !status.any_in_set(mask) {
            return None;
        }
        if let [channel] = **channels {
            return take(channel);
        }
        // The rotation without a division (on every search).
        let n = channels.len();
        let start = cursor.rotation[level];
        cursor.rotation[level] = if start + 1 == n { 0 } else { start + 1 };
        let (head, tail) = channels.split_at(start);
        tail.iter().chain(head).find_map(|&channel| take(channel))
    }

    /// Offers levels in the policy's order to `take`, which looks into the
    /// given channels (in rotated order) and returns a task if it found one.
    pub(crate) fn find<T>(
        &self,
        status: &Status,
        cursor: &mut Cursor,
        mut take: impl FnMut(usize) -> Option<T>,
    ) -> Option<T> {
        let count = cursor.floor + 1;
        match &self.policy {
            ScheduleAlgorithm::HighestFirst if self.bounds.is_empty() => {
                (0..count).find_map(|level| self.try_level(status, cursor, level, &mut take))
            }
            ScheduleAlgorithm::HighestFirst => {
                if let Some(level) = self.due(status, cursor.floor) {
                    if let Some(task) = self.try_level(status, cursor, level, &mut take) {
                        return Some(task);
                    }
                }
                (0..count).find_map(|level| {
                    let task = self.try_level(status, cursor, level, &mut take)?;
                    // Served in the normal order: the level's next task
                    // waits its own bound (see `wait_clock`).
                    if let Some(bound) = self.bounds.iter().find(|b| b.level == level) {
                        bound.clock.served();
                    }
                    Some(task)
                })
            }
            ScheduleAlgorithm::RoundRobin(slices) => {
                let now = Instant::now();
                if cursor.level >= count {
                    cursor.level = 0;
                }
                if now.duration_since(cursor.since) >= slices[cursor.level] {
                    cursor.level = (cursor.level + 1) % count;
                    cursor.since = now;
                }
                for k in 0..count {
                    let level = (cursor.level + k) % count;
                    if let Some(task) = self.try_level(status, cursor, level, &mut take) {
                        if k != 0 {
                            // The current level was empty: its slice ends.
                            cursor.level = level;
                            cursor.since = now;
                        }
                        return Some(task);
                    }
                }
                None
            }
        }
    }
}
