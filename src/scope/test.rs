//! The erased scoped task on its own, without a pool: it ends exactly once,
//! and what it does after it ended (a poll, its drop) touches nothing
//! borrowed. Run under miri, with stacked borrows, in CI.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::task::noop_waker_ref;

use super::erase::ScopedTask;
use super::ScopeState;

fn state() -> Arc<ScopeState> {
    // Off any worker; the body's count, plus the task's (as `Scope::exec`
    // adds it).
    let state = Arc::new(ScopeState::new());
    state.latch.add();
    state
}

#[test]
fn a_finished_task_outlives_its_borrow_harmlessly() {
    let state = state();
    let mut cx = Context::from_waker(noop_waker_ref());
    let mut task = {
        let borrowed = String::from("stack");
        let (mut task, handle) = ScopedTask::erase(async { borrowed.len() }, state.clone(), false);
        assert_eq!(task.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(state.latch.count(), 1, "counted down once");
        assert_eq!(handle.join().unwrap(), 5);
        task // escapes `borrowed`, as a task cell kept by a waker would
    };
    // After the borrow ended: polling and dropping touch nothing.
    assert_eq!(task.as_mut().poll(&mut cx), Poll::Ready(()));
    drop(task);
    assert_eq!(state.latch.count(), 1, "still counted down once");
}

#[test]
fn a_dropped_task_ends_cancelled() {
    let state = state();
    let borrowed = String::from("heap");
    let (task, handle) = ScopedTask::erase(async { borrowed.len() }, state.clone(), false);
    assert!(!handle.is_finished());
    drop(task);
    assert!(handle.join().unwrap_err().is_cancelled());
    assert_eq!(state.latch.count(), 1);
}

#[test]
fn a_panic_goes_to_the_scope_and_the_handle_gets_its_message() {
    let state = state();
    let mut cx = Context::from_waker(noop_waker_ref());
    let (mut task, handle) = ScopedTask::erase(async { panic!("inside") }, state.clone(), false);
    assert_eq!(task.as_mut().poll(&mut cx), Poll::Ready(()));
    let error: crate::JoinError = handle.join().unwrap_err();
    assert!(error.is_panic() && error.to_string().contains("inside"));
    let payload = state.panic.lock().unwrap().take().expect("recorded");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"inside"));
    assert_eq!(state.latch.count(), 1);
}
