//! The core the rest of the pool stands on: the state a pool's parts share
//! (`shared`), the close accounting (`close`), the futures waiting for
//! close to begin (`closing`), the registry of parked tasks
//! that close sweeps (`parked`), the guest seats of threads that drive the
//! pool without being its workers (`seats`), the link between a channel and its pool
//! (`link`), the worker context (`context`), which workers are
//! blocked, for the deadlock check (`blocked`), and the jobs that join
//! publishes from its caller's stack (`job`).
//!
//! Imports only the layers below it (`context`, `sync`, `task`, `lifo`,
//! `sleep`, `status`); queues, channels, the schedule, the pool and the
//! extras (scope, time) import it.

pub(crate) mod blocked;
pub(crate) mod close;
mod closing;
pub(crate) mod context;
pub(crate) mod job;
pub(crate) mod link;
pub(crate) mod meters;
mod parked;
mod seats;
mod shared;

pub(crate) use close::CloseState;
pub(crate) use closing::ClosingWakers;
pub(crate) use parked::Parked;
pub(crate) use seats::Seats;
pub(crate) use shared::{ChannelInfo, ChannelOptions, Shared};
