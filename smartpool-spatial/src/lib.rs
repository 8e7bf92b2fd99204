//! # smartpool-spatial
//!
//! A channel for [`smartpool`] that serves the queued task nearest to a
//! moving focus point first: a game generating the world chunks nearest the
//! player, a renderer loading the tiles under the camera, a simulation
//! updating the region being watched.
//!
//! * [`SpatialChannel`] is a smartpool [`Channel`](smartpool::Channel): put
//!   it in a level like any other, and submit each task with a point,
//!   `pool.chunks.exec(future, [x, y])`. Every pop takes the task nearest
//!   to the focus, in O(log n) amortised, a focus that stays put included;
//!   the exceptions (a focus moving within a region pops have emptied, the
//!   refill of a large batch) are measured in [`SpatialQueue`]'s cost notes.
//! * [`SpatialChannel::set_focus`] moves the focus: one store, from any
//!   thread (a task of the channel included), never the queue's lock and
//!   no rebuild; a pop that happens after it honours it. The store is a
//!   native atomic for points of 8 bytes (`[f32; 2]`); larger points take
//!   a short global sequence lock for the copy (crossbeam's `AtomicCell`).
//! * Tasks that come without a point (a future woken and handed back by
//!   followup, or a one-argument `exec`) have already started or have no
//!   place: they run first, first in, first out (so a stream of them, such
//!   as futures that keep yielding, holds back every placed task).
//! * Points are 2-D or 3-D, `f32` or `f64`: any [`SpatialPoint`], `[f32; 3]`
//!   unless you say otherwise. A point type of your own implements
//!   [`rstar::Point`] and `Copy`, nothing more.
//! * [`SpatialQueue`] is the index alone (an rstar R*-tree with
//!   nearest-neighbour removal, and a batch of the items nearest a focus
//!   that stays put), for use outside a pool.
//!
//! ```
//! use futures::executor::block_on;
//! use smartpool::prelude::*;
//! use smartpool_spatial::SpatialChannel;
//!
//! #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
//! enum Ch { Chunks }
//!
//! struct World { chunks: SpatialChannel<[f32; 2]> }
//!
//! impl PoolBehavior for World {
//!     type ChannelKey = Ch;
//!     fn config(&self) -> PoolConfig<Ch> {
//!         PoolConfig {
//!             threads: 2,
//!             schedule: ScheduleAlgorithm::HighestFirst,
//!             // Chunks nobody needs any more are dropped on close.
//!             levels: vec![vec![ChannelParams { key: Ch::Chunks, complete_on_close: false }]],
//!         }
//!     }
//!     fn channel(&self, _key: Ch) -> &dyn Channel {
//!         &self.chunks
//!     }
//! }
//!
//! let owned = OwnedPool::new(World { chunks: SpatialChannel::new() })?;
//! let pool = owned.pool.clone();
//!
//! pool.chunks.set_focus([40.0, 0.0]); // where the player stands
//! let chunks: Vec<_> = (0..10)
//!     .map(|i| {
//!         let at = [i as f32 * 16.0, 0.0];
//!         pool.chunks.exec(run(move || at[0] as u32 / 16), at)
//!     })
//!     .collect();
//! pool.chunks.set_focus([120.0, 8.0]); // the player moved: the rest follows
//!
//! let built: u32 = chunks.into_iter().map(|h| block_on(h).unwrap()).sum();
//! assert_eq!(built, (0..10).sum());
//! block_on(owned.close());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! `cargo run -p smartpool-spatial --example chunk_loader` shows a voxel
//! world loading around a walking player.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod batch;
mod channel;
mod focus;
mod point;
mod queue;

pub use channel::SpatialChannel;
pub use point::SpatialPoint;
pub use queue::SpatialQueue;

/// The crate in [`SpatialPoint`]'s bounds, re-exported for defining point
/// types of your own (implement [`rstar::Point`]).
pub use rstar;

pub use smartpool;
