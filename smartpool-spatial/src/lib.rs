//! # smartpool-spatial
//!
//! A channel for [`smartpool`] that serves the queued task nearest to a
//! moving focus point first (a game loading the world chunks nearest the
//! player, say).
//!
//! Not yet implemented: this crate is a placeholder in the workspace so that
//! it builds and tests with it from the start. The `SpatialChannel` arrives
//! with its own issue.

#![warn(missing_docs)]

pub use smartpool;
