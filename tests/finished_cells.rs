//! Finished tasks' memory, counted by a global allocator of the test's
//! own. While tasks flow, the memory of finished ones stays bounded; once
//! the pool and the submitting thread are gone, none of it is left.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{scaled, Gate, TwoLevels, FAILSAFE};
use futures::executor::block_on;
use smartpool::prelude::*;

/// The system's allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to `System`, adding bookkeeping only.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System`'s.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// One test in this binary: the count is the whole process's.
#[test]
fn finished_tasks_memory_stays_bounded_and_is_given_back() {
    let tasks = scaled(1_000_000);
    // Warm what is made once a process (the thread-local context, the
    // logger, crossbeam's collector) before the count starts.
    std::thread::spawn(|| one_pool(1_000)).join().unwrap();
    let before = LIVE.load(Ordering::SeqCst);
    let grown = std::thread::spawn(move || one_pool(tasks)).join().unwrap();
    let after = LIVE.load(Ordering::SeqCst);
    // While tasks flowed: at most the pool's cells (4 MiB as its budget
    // counts them, and a batch more), a batch a worker and the
    // submitter's, the pool's own state and its queues (about 260 KB
    // here), against 88 MB for the 10^6 cells (8.8 MB under valgrind,
    // which runs a tenth).
    assert!(
        grown < 6 << 20,
        "{grown} bytes more after {tasks} finished tasks"
    );
    // Given back: the submitter's cells as its thread ended, the pool's
    // with the pool.
    assert!(
        after - before < 64 << 10,
        "{} bytes left after the pool and its submitter are gone",
        after - before
    );
}

/// Runs `tasks` tasks submitted from this thread (not a worker) through a
/// two-worker pool, waits for them, and says how much more memory is live
/// then than before the pool; then closes the pool.
fn one_pool(tasks: usize) -> isize {
    let start = LIVE.load(Ordering::SeqCst);
    let owned = OwnedPool::new(TwoLevels::new(2)).unwrap();
    let pool = owned.pool.clone();
    let done = Arc::new(AtomicUsize::new(0));
    let all = Gate::new();
    for _ in 0..tasks {
        let (done, all) = (done.clone(), all.clone());
        let submitted = pool.low.exec_detached(run(move || {
            if done.fetch_add(1, Ordering::SeqCst) + 1 == tasks {
                all.open();
            }
        }));
        assert!(submitted.is_ok(), "the pool is open");
    }
    assert!(all.wait_for(FAILSAFE), "the tasks ran");
    let grown = LIVE.load(Ordering::SeqCst) - start;
    block_on(owned.close());
    drop(pool);
    grown
}
