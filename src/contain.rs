//! Containing panics of user code that the pool runs on its own account.
//!
//! A drop the pool performs (a finished task's cell, a stale waker, an
//! output nobody awaits) can run user code that panics. Such a panic is
//! caught where it happens and logged, never let through into the pool's
//! protocol: the thread that dropped the value goes on with what it was
//! doing, and nothing the value owned is lost (the drop ran as far as it
//! could). This module sits below every other, so that each layer contains
//! its drops the same way.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The text of a panic payload, when it has one.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// Runs `f`. A panic in it goes no further: `log` gets its message, and
/// the result is `None`.
#[inline]
pub(crate) fn catch<R>(f: impl FnOnce() -> R, log: impl FnOnce(&str)) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => Some(result),
        Err(panic) => {
            log(panic_message(&*panic));
            None
        }
    }
}

/// Lets go of a caught panic: `log` gets its message, then the payload
/// is dropped, both inside a catch, since both are user code (the logger,
/// the payload's drop). A payload that escapes even that is leaked, never
/// let through.
pub(crate) fn log_panic(panic: Box<dyn Any + Send + 'static>, log: impl FnOnce(&str)) {
    let logged = catch_unwind(AssertUnwindSafe(move || {
        log(panic_message(&*panic));
        drop(panic);
    }));
    if let Err(payload) = logged {
        std::mem::forget(payload);
    }
}

/// Drops `value`; a panic in its drop is logged as "smartpool: `what`
/// panicked: message" and goes no further.
#[inline]
pub(crate) fn drop_contained<T>(value: T, what: &str) {
    catch(
        move || drop(value),
        |message| log::error!("smartpool: {what} panicked: {message}"),
    );
}
