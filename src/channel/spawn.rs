//! `futures::task::Spawn` on channels: code written against the futures
//! crate's executor traits (`SpawnExt::spawn`, `spawn_with_handle`, the
//! crates that take an `impl Spawn`) runs its futures on a smartpool
//! channel, at that channel's level.

use std::fmt;

use futures_task::{FutureObj, Spawn, SpawnError};

use super::{Channel, Exec, MultiChannel, VecDequeChannel};

/// A channel as a [`Spawn`]r: made by [`Exec::spawner`], for a channel of
/// any type (the channels of this crate that take no parameter implement
/// [`Spawn`] themselves).
///
/// A spawned future runs as [`Exec::exec_detached`] runs it: its output
/// is `()`, and `SpawnExt::spawn_with_handle`
/// gives a handle to wait for it. A future the pool refuses (closing, or
/// the channel attached to no pool) comes back as
/// [`SpawnError::shutdown`], and is dropped.
pub struct Spawner<'a, C: ?Sized>(pub(super) &'a C);

impl<C: Channel + ?Sized> Spawn for Spawner<'_, C> {
    fn spawn_obj(&self, future: FutureObj<'static, ()>) -> Result<(), SpawnError> {
        self.0
            .exec_detached(future)
            .map_err(|_| SpawnError::shutdown())
    }
}

impl<C: ?Sized> fmt::Debug for Spawner<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Spawner").finish_non_exhaustive()
    }
}

/// As [`Spawner`]: `pool.urgent.spawn(fut)` with
/// `futures::task::SpawnExt` in scope.
impl Spawn for VecDequeChannel {
    fn spawn_obj(&self, future: FutureObj<'static, ()>) -> Result<(), SpawnError> {
        Spawner(self).spawn_obj(future)
    }
}

/// As [`Spawner`]: a spawned future goes to one of the shards, as
/// [`Exec::exec`] sends it.
impl<C: Channel> Spawn for MultiChannel<C> {
    fn spawn_obj(&self, future: FutureObj<'static, ()>) -> Result<(), SpawnError> {
        Spawner(self).spawn_obj(future)
    }
}
