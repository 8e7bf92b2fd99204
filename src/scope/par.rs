//! Parallel loops at a level: `for_each` over slices and ranges, and
//! `map` into a `Vec`, run on a channel of a pool (rayon's `par_iter`,
//! `par_iter_mut`, `par_chunks_mut`, for the common shapes).
//!
//! The rule: a loop splits its index range in halves by [`join`] until a
//! piece is at most `len / (4 × workers)` long (and at least one item), so
//! idle workers of the channel's level steal halves as they do any job,
//! and a worker that finds none runs the loop alone with a few dozen
//! joins of overhead. Each piece runs sequentially on the thread that
//! holds it. Called from outside the pool, a loop runs inside
//! [`install`]: its splitting happens on the pool's workers.
//!
//! Why not rayon's `ParallelIterator`: its adaptors drive themselves
//! through `rayon_core::join`, which runs on rayon's own thread pool; no
//! trait lets another executor's `join` stand in. The loops here cover
//! what a frame's physics step or a `par_iter` over components needs; for
//! the rest of rayon's adaptors, call them inside a task of the level.

use std::ops::Range;

use super::join::{install, join};
use crate::channel::Channel;

/// Runs `body` on pieces of `range`, split in halves by `join` down to
/// `min` items.
fn split<C, F>(channel: &C, range: Range<usize>, min: usize, body: &F)
where
    C: Channel + ?Sized,
    F: Fn(Range<usize>) + Sync,
{
    if range.len() <= min {
        body(range);
        return;
    }
    let mid = range.start + range.len() / 2;
    let (low, high) = (range.start..mid, mid..range.end);
    join(
        channel,
        || split(channel, low, min, body),
        || split(channel, high, min, body),
    );
}

/// The smallest piece of a loop over `len` items on `channel`: it aims
/// for four pieces per worker seat of its pool (one piece if the channel
/// belongs to no pool).
fn min_piece<C: Channel + ?Sized>(channel: &C, len: usize) -> usize {
    let pieces = channel
        .link()
        .map_or(1, |link| 4 * link.shared.stealers.len().max(1));
    (len / pieces).max(1)
}

/// Calls `f(i)` for every `i` in `range`, in parallel on `channel`.
///
/// ```
/// # use smartpool::prelude::*;
/// # let owned = smartpool::Builder::new().threads(2).levels(1).build().unwrap();
/// let sum = std::sync::atomic::AtomicUsize::new(0);
/// smartpool::par::for_range(owned.pool.level(0), 0..1000, |i| {
///     sum.fetch_add(i, std::sync::atomic::Ordering::Relaxed);
/// });
/// assert_eq!(sum.into_inner(), 499_500);
/// ```
pub fn for_range<C, F>(channel: &C, range: Range<usize>, f: F)
where
    C: Channel + ?Sized,
    F: Fn(usize) + Sync,
{
    let min = min_piece(channel, range.len());
    let body = |piece: Range<usize>| piece.for_each(&f);
    install(channel, || split(channel, range, min, &body));
}

/// Calls `f` on every item of `items`, in parallel on `channel`.
pub fn for_each<C, T, F>(channel: &C, items: &[T], f: F)
where
    C: Channel + ?Sized,
    T: Sync,
    F: Fn(&T) + Sync,
{
    for_range(channel, 0..items.len(), |i| f(&items[i]));
}

/// Calls `f` on every item of `items`, mutably, in parallel on `channel`.
pub fn for_each_mut<C, T, F>(channel: &C, items: &mut [T], f: F)
where
    C: Channel + ?Sized,
    T: Send,
    F: Fn(&mut T) + Sync,
{
    for_each_chunk_mut(channel, items, 1, |_, chunk| chunk.iter_mut().for_each(&f));
}

/// Calls `f(index, chunk)` on every chunk of `chunk` items of `items` (the
/// last may be shorter), in parallel on `channel` (rayon's
/// `par_chunks_mut().enumerate()`).
///
/// # Panics
///
/// If `chunk` is 0.
pub fn for_each_chunk_mut<C, T, F>(channel: &C, items: &mut [T], chunk: usize, f: F)
where
    C: Channel + ?Sized,
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    assert!(
        chunk > 0,
        "smartpool::par::for_each_chunk_mut: a chunk of 0 items"
    );
    let chunks = items.len().div_ceil(chunk);
    let min = min_piece(channel, chunks);
    install(channel, || split_mut(channel, items, 0, chunk, min, &f));
}

/// `for_each_chunk_mut`'s splitting: `items` holds chunks from `first`.
fn split_mut<C, T, F>(channel: &C, items: &mut [T], first: usize, chunk: usize, min: usize, f: &F)
where
    C: Channel + ?Sized,
    T: Send,
    F: Fn(usize, &mut [T]) + Sync,
{
    let chunks = items.len().div_ceil(chunk);
    if chunks <= min {
        for (i, piece) in items.chunks_mut(chunk).enumerate() {
            f(first + i, piece);
        }
        return;
    }
    let half = chunks / 2;
    let (low, high) = items.split_at_mut(half * chunk);
    join(
        channel,
        || split_mut(channel, low, first, chunk, min, f),
        || split_mut(channel, high, first + half, chunk, min, f),
    );
}

/// `items` mapped by `f`, in order, computed in parallel on `channel`.
///
/// ```
/// # use smartpool::prelude::*;
/// # let owned = smartpool::Builder::new().threads(2).levels(1).build().unwrap();
/// let squares = smartpool::par::map(owned.pool.level(0), &[1, 2, 3, 4], |x| x * x);
/// assert_eq!(squares, [1, 4, 9, 16]);
/// ```
pub fn map<C, T, U, F>(channel: &C, items: &[T], f: F) -> Vec<U>
where
    C: Channel + ?Sized,
    T: Sync,
    U: Send,
    F: Fn(&T) -> U + Sync,
{
    let mut out: Vec<Option<U>> = items.iter().map(|_| None).collect();
    let min = min_piece(channel, items.len());
    let fill = |i: usize, slot: &mut [Option<U>]| slot[0] = Some(f(&items[i]));
    install(channel, || split_mut(channel, &mut out, 0, 1, min, &fill));
    out.into_iter()
        .map(|value| value.expect("every slot is filled"))
        .collect()
}
