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
//! higher level's bit was set at the moment it looked.

use std::time::{Duration, Instant};

use crate::behavior::ScheduleAlgorithm;
use crate::status::{Bit, BitSet, Status};

/// One level: its channels (indices) and their status bits.
#[derive(Debug)]
pub(crate) struct Level {
    pub(crate) channels: Box<[usize]>,
    bits: Box<[Bit]>,
}

#[derive(Debug)]
enum Policy {
    HighestFirst,
    RoundRobin(Box<[Duration]>),
}

/// The levels and the policy of a pool.
#[derive(Debug)]
pub(crate) struct Levels {
    levels: Box<[Level]>,
    /// Channel index → its level.
    level_of: Box<[usize]>,
    policy: Policy,
}

/// A worker's position in the schedule.
#[derive(Debug)]
pub(crate) struct Cursor {
    level: usize,
    since: Instant,
    /// Per level: the channel to look at first next time.
    rotation: Box<[usize]>,
}

impl Levels {
    /// `levels` are channel indices, highest level first.
    pub(crate) fn new(levels: Vec<Vec<usize>>, algorithm: &ScheduleAlgorithm) -> Levels {
        let channels = levels.iter().flatten().map(|&c| c + 1).max().unwrap_or(0);
        let mut level_of = vec![0; channels];
        for (level, members) in levels.iter().enumerate() {
            for &channel in members {
                level_of[channel] = level;
            }
        }
        Levels {
            level_of: level_of.into(),
            levels: levels
                .into_iter()
                .map(|channels| Level {
                    bits: channels.iter().map(|&c| Bit::new(c)).collect(),
                    channels: channels.into(),
                })
                .collect(),
            policy: match algorithm {
                ScheduleAlgorithm::HighestFirst => Policy::HighestFirst,
                ScheduleAlgorithm::RoundRobin(slices) => Policy::RoundRobin(slices.clone().into()),
            },
        }
    }

    /// Whether tasks of `channel` may use a worker's LIFO slot (see
    /// `lifo`): those of the lowest level under HighestFirst, where a slot
    /// task (which has no status bit) can only delay work of its own level;
    /// under RoundRobin, where every level is owed its slice and a slot
    /// task would escape its level's, only those of a pool of one level.
    pub(crate) fn uses_slot(&self, channel: usize) -> bool {
        match self.policy {
            Policy::HighestFirst => self.level_of[channel] + 1 == self.levels.len(),
            Policy::RoundRobin(_) => self.levels.len() == 1,
        }
    }

    /// For each channel, the status bits that mean "yield" to a task of
    /// it (see `should_yield`), as (word, mask) pairs: under HighestFirst,
    /// those of the levels above its own; under RoundRobin, those of every
    /// other level.
    pub(crate) fn yield_masks(&self) -> Box<[BitSet]> {
        (0..self.level_of.len())
            .map(|channel| {
                let own = self.level_of[channel];
                let mut words: Vec<(usize, u64)> = Vec::new();
                let others = self
                    .levels
                    .iter()
                    .enumerate()
                    .filter(|&(l, _)| match self.policy {
                        Policy::HighestFirst => l < own,
                        Policy::RoundRobin(_) => l != own,
                    });
                for (_, level) in others {
                    for bit in level.bits.iter() {
                        let (word, mask) = bit.parts();
                        match words.iter_mut().find(|(w, _)| *w == word) {
                            Some((_, m)) => *m |= mask,
                            None => words.push((word, mask)),
                        }
                    }
                }
                words.into_boxed_slice()
            })
            .collect()
    }

    /// Under RoundRobin, when the slice of the level `cursor` serves ends;
    /// `None` under HighestFirst.
    #[inline]
    pub(crate) fn slice_end(&self, cursor: &Cursor) -> Option<Instant> {
        match &self.policy {
            Policy::HighestFirst => None,
            Policy::RoundRobin(slices) => Some(cursor.since + slices[cursor.level]),
        }
    }

    pub(crate) fn cursor(&self) -> Cursor {
        Cursor {
            level: 0,
            since: Instant::now(),
            rotation: vec![0; self.levels.len()].into(),
        }
    }

    /// Whether the policy would serve `channel`'s level now, by the status
    /// bits: HighestFirst, if no higher level has a set bit; RoundRobin, if
    /// it is the current level and its slice lasts, or no other level has a
    /// set bit. (For a task outside the channels: a worker's LIFO slot.)
    pub(crate) fn admits(&self, status: &Status, cursor: &Cursor, channel: usize) -> bool {
        let level = self.level_of[channel];
        match &self.policy {
            Policy::HighestFirst => !self.levels[..level].iter().any(|l| status.any_of(&l.bits)),
            Policy::RoundRobin(slices) => {
                (level == cursor.level && cursor.since.elapsed() < slices[level])
                    || !self
                        .levels
                        .iter()
                        .enumerate()
                        .any(|(l, members)| l != level && status.any_of(&members.bits))
            }
        }
    }

    /// Offers levels in the policy's order to `take`, which looks into the
    /// given channels (in rotated order) and returns a task if it found one.
    pub(crate) fn find<T>(
        &self,
        status: &Status,
        cursor: &mut Cursor,
        mut take: impl FnMut(usize) -> Option<T>,
    ) -> Option<T> {
        let count = self.levels.len();
        let mut try_level = |level: usize, cursor: &mut Cursor| -> Option<T> {
            let Level { channels, bits } = &self.levels[level];
            if !status.any_of(bits) {
                return None;
            }
            // The rotation without a division (on every search).
            let n = channels.len();
            let start = cursor.rotation[level];
            cursor.rotation[level] = if start + 1 == n { 0 } else { start + 1 };
            let (head, tail) = channels.split_at(start);
            tail.iter().chain(head).find_map(|&channel| take(channel))
        };
        match &self.policy {
            Policy::HighestFirst => (0..count).find_map(|level| try_level(level, cursor)),
            Policy::RoundRobin(slices) => {
                let now = Instant::now();
                if now.duration_since(cursor.since) >= slices[cursor.level] {
                    cursor.level = (cursor.level + 1) % count;
                    cursor.since = now;
                }
                for k in 0..count {
                    let level = (cursor.level + k) % count;
                    if let Some(task) = try_level(level, cursor) {
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
