//! Finished tasks' cells, freed by the threads that submit.
//!
//! A task's cell is allocated by the thread that submits it and, when a
//! worker runs the task to its end, freed by that worker. With glibc's
//! allocator the freed block goes to a list shared with the submitter's
//! next allocations, which then take the workers' blocks back one by one,
//! each a miss between cores on a pointer the worker wrote (BENCHMARKS.md,
//! "Finished cells freed by the submitters"). So a worker that runs tasks
//! without making any keeps the cells it would free and hands them to the
//! pool, and the threads that submit free them, one a submission: the
//! allocator hands that block straight back to the submission's own task.
//!
//! # Protocol
//!
//! * A *dead* cell is a finished task's small cell (at most 1 KiB) that
//!   holds nothing but its memory: the worker's reference the only one
//!   (`Arc::get_mut`: no other `Arc`, no `Weak`, every other holder's last
//!   access acquired), nobody joins it, its stage empty (the output was
//!   dropped on the worker), no count towards close, not registered as
//!   parked. A waker that a dropped handle left in the joiner's slot is
//!   dropped there and then, on the worker, so that nothing it keeps alive
//!   (another task, close's wait for it) waits for the cell's free.
//!   Freeing a dead cell later runs no code of the task's.
//! * A worker that finishes such a task gives the cell to its pool
//!   (`core::context::dispose`), unless it made a task of that pool since
//!   it last finished one: a worker that submits frees its own cells,
//!   which its next allocation takes back at once. It keeps cells in a
//!   batch of its own and, at [`BATCH`], hands the batch to the pool's
//!   [`DeadCells`]. While the pool holds [`MAX_BYTES`] of cells (nobody
//!   submits to take them), it frees each cell as its task finishes, as it
//!   would without all this (freeing a batch at once would hold the worker
//!   for 32 frees while urgent work waits: W7's p99 read 27 µs). The
//!   budget covers a backlog that the workers drain while the submitter
//!   is off its core: a submitter that shares its core with other work
//!   queues tens of thousands of tasks between two of its turns, and each
//!   cell the workers free then is one its next allocations take back from
//!   another core (at 2,048 cells, W1 under load spent 17% of its time in
//!   the workers' frees: BENCHMARKS.md, "A process for each peer and row;
//!   finished cells under load").
//! * Every submission through a channel of the pool
//!   ([`DeadCells::free_one`], in `exec`) first frees one cell, the lowest
//!   in address of those its thread took earlier (kept in the thread's
//!   context); with none left there, it takes the pool's newest batches,
//!   up to [`TAKE_BATCHES`], and sorts them (one load when the pool holds
//!   none). By address: the next tasks' cells then lie in the order they
//!   are made, as fresh memory does, so that two cells on one cache line
//!   tend to be run by one worker (in the order the workers finished them,
//!   W3's yields read 3 to 7 ns slower: neighbours on two workers write
//!   one line). At most `TAKE_BATCHES`: the sort is a submission's cost
//!   (sorting all a pool held then, 2,048 cells, put W7's urgent p99 at 42
//!   µs in a full run).
//! * A worker frees its own batch as it leaves its pool (its thread's end,
//!   a guest's departure); the pool frees the batches left when its shared
//!   state is dropped; a thread frees the cells it took as it ends.
//!
//! Invariant: a dead cell is held by exactly one of a worker's batch, the
//! pool's list or a submitting thread's context, until that holder frees
//! it: each is freed once. A pool holds at most [`MAX_BYTES`] of cells and
//! one batch more (4 MiB, counting each cell, its `Arc`'s counts and its
//! slot in a batch: about 47,000 of the 56-byte cells of small closures;
//! memory the same tasks held while they were queued), a worker one batch,
//! and a thread that submits what it took (512 cells at most), until its
//! next submissions or its end;
//! cells that outlive their pool there keep only the memory of the pool's
//! control block (its `Weak`). No lock and no borrow is held while a cell
//! is freed.
//!
//! No loom model of its own: ownership moves under a lock (`batches`) or
//! within one thread, and the length and fullness are hints written under
//! that lock, whose staleness only delays a free, costs a look under the
//! lock, or frees a cell (or, when `give` refuses, a batch) on the worker
//! as a full pool would.
//! Whether a cell is dead is decided with `Arc::get_mut`, std's uniqueness
//! check, which loom does not see (the task models' cells are std `Arc`s);
//! `tests/close.rs` races handles' drops with their tasks' ends and checks
//! that every output is dropped before close resolves (it fails if the
//! stage is not checked), and `tests/finished_cells.rs` that the memory
//! stays bounded and is given back.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

pub(crate) use crate::context::DeadCell;

/// How many dead cells a worker gathers before it hands them to the pool.
pub(crate) const BATCH: usize = 32;

/// How many bytes of cells a pool holds for its submitters, at most (see
/// the module doc).
const MAX_BYTES: usize = 4 << 20;

/// How many batches a submitter takes at once, at most: it sorts them, so
/// this bounds what one submission may spend (about 5 µs for 512 cells).
const TAKE_BATCHES: usize = 16;

/// A pool's batches of dead cells, waiting for a submitter to free them.
/// On lines of its own: workers write it every [`BATCH`] tasks, every
/// submission reads it.
#[repr(align(128))]
pub(crate) struct DeadCells {
    batches: Mutex<Batches>,
    /// How many batches `batches` holds, written under its lock.
    len: AtomicUsize,
    /// Whether `batches` holds `limit` bytes or more, written under its
    /// lock.
    full: AtomicBool,
    /// [`MAX_BYTES`], but in the unit tests.
    limit: usize,
}

/// The batches a pool holds, each with its size in bytes, and their sum.
#[derive(Default)]
struct Batches {
    list: Vec<(Vec<DeadCell>, usize)>,
    bytes: usize,
}

impl DeadCells {
    pub(crate) fn new() -> DeadCells {
        DeadCells::with_limit(MAX_BYTES)
    }

    fn with_limit(limit: usize) -> DeadCells {
        DeadCells {
            batches: Mutex::new(Batches::default()),
            len: AtomicUsize::new(0),
            full: AtomicBool::new(false),
            limit,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Batches> {
        // Nothing panics under the lock but an allocation failure, which
        // leaves the list as it was: a poisoned lock breaks nothing.
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the pool holds [`MAX_BYTES`] of cells (a hint: read
    /// without the lock).
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Takes `batch` for a submitter to free, or gives it back if the pool
    /// holds [`MAX_BYTES`] of cells already (so it may go over by one
    /// batch).
    pub(crate) fn give(&self, batch: Vec<DeadCell>) -> Result<(), Vec<DeadCell>> {
        let size = batch.iter().map(bytes).sum::<usize>();
        let mut batches = self.lock();
        if batches.bytes >= self.limit {
            return Err(batch);
        }
        batches.list.push((batch, size));
        batches.bytes += size;
        self.published(&batches);
        Ok(())
    }

    /// Mirrors `batches`' length and fullness in the hints, under its lock.
    fn published(&self, batches: &Batches) {
        self.len.store(batches.list.len(), Ordering::Relaxed);
        self.full
            .store(batches.bytes >= self.limit, Ordering::Relaxed);
    }

    /// A submitter's share (see the module doc): frees one dead cell, the
    /// lowest in address of those the calling thread took earlier, or, with
    /// none left, of the pool's newest batches, which the thread takes (one
    /// load when the pool holds none).
    #[inline]
    pub(crate) fn free_one(&self) {
        let cell = crate::context::with_freeing(|freeing| {
            let mut freeing = freeing.borrow_mut();
            if freeing.is_empty() && self.len.load(Ordering::Relaxed) != 0 {
                if let Some(batch) = self.take() {
                    *freeing = batch;
                }
            }
            freeing.pop()
        });
        if let Some(cell) = cell.flatten() {
            free_cell(cell);
        }
    }

    /// Takes up to [`TAKE_BATCHES`] batches, newest first, as one, sorted
    /// by address, lowest last.
    #[cold]
    #[inline(never)]
    fn take(&self) -> Option<Vec<DeadCell>> {
        let taken = {
            let mut batches = self.lock();
            let keep = batches.list.len().saturating_sub(TAKE_BATCHES);
            let taken = batches.list.split_off(keep);
            batches.bytes -= taken.iter().map(|(_, size)| size).sum::<usize>();
            self.published(&batches);
            taken
        };
        let mut taken = taken.into_iter().map(|(batch, _)| batch);
        let mut cells = taken.next()?;
        for batch in taken {
            cells.extend(batch);
        }
        sort_batch(&mut cells);
        Some(cells)
    }
}

/// Orders cells for a submitter: highest address first, so that `pop` frees
/// the lowest first (see the module doc).
pub(crate) fn sort_batch(batch: &mut [DeadCell]) {
    batch.sort_unstable_by_key(|cell| std::cmp::Reverse(address(cell)));
}

/// What keeping `cell` costs, as the budget counts it: the cell, the
/// `Arc`'s two counts and the cell's slot in a batch (not the allocator's
/// rounding).
fn bytes(cell: &DeadCell) -> usize {
    std::mem::size_of_val(&**cell)
        + 2 * std::mem::size_of::<usize>()
        + std::mem::size_of::<DeadCell>()
}

/// Where `cell` is.
fn address(cell: &DeadCell) -> usize {
    std::sync::Arc::as_ptr(cell).cast::<()>() as usize
}

impl Drop for DeadCells {
    fn drop(&mut self) {
        let batches = std::mem::take(self.batches.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (batch, _) in batches.list {
            free(batch);
        }
    }
}

/// Frees `cells`, one by one (see [`free_cell`]).
pub(crate) fn free(cells: Vec<DeadCell>) {
    for cell in cells {
        free_cell(cell);
    }
}

/// Frees `cell`, catching and logging a panic (a dropped handle's waker is
/// the only code a dead cell can run).
#[inline]
pub(crate) fn free_cell(cell: DeadCell) {
    crate::contain::drop_contained(cell, "freeing a finished task");
}

#[cfg(all(test, not(loom)))]
mod test {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// A stand-in cell that counts its frees.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many batches the test's pool holds.
    const BATCHES: usize = 64;

    fn batch(freed: &Arc<AtomicUsize>) -> Vec<DeadCell> {
        (0..BATCH)
            .map(|_| Arc::new(Counted(freed.clone())) as DeadCell)
            .collect()
    }

    /// Each submission frees one cell, lowest address first of what its
    /// thread took (the newest `TAKE_BATCHES` batches, sorted together)
    /// when its own ran out; a pool holding its limit in bytes gives the next
    /// batch back; what is left is freed when the pool and the thread are
    /// done with it.
    #[test]
    fn submitters_free_one_cell_each_and_nothing_is_left() {
        let freed = Arc::new(AtomicUsize::new(0));
        // Room for exactly `BATCHES` batches.
        let cell = bytes(&(Arc::new(Counted(Arc::default())) as DeadCell));
        let dead = DeadCells::with_limit(BATCHES * BATCH * cell);
        let mut runs = Vec::new();
        for _ in 0..BATCHES {
            let cells = batch(&freed);
            runs.push(cells.iter().map(address).collect::<Vec<usize>>());
            assert!(dead.give(cells).is_ok());
        }
        let mut order: Vec<usize> = runs[BATCHES - TAKE_BATCHES..].concat();
        order.sort_unstable();
        assert!(dead.is_full());
        let refused = dead.give(batch(&freed)).expect_err("the pool is full");
        assert_eq!(refused.len(), BATCH);
        drop(refused);
        assert_eq!(freed.load(Ordering::SeqCst), BATCH);
        // The freeing order, read off the thread's batch before each free.
        for (k, next) in order.iter().take(3 * BATCH).enumerate() {
            if k > 0 {
                let seen = crate::context::with_freeing(|f| {
                    f.borrow()
                        .last()
                        .map(|c| Arc::as_ptr(c).cast::<()>() as usize)
                });
                assert_eq!(seen.flatten(), Some(*next), "lowest first");
            }
            dead.free_one();
            assert_eq!(
                freed.load(Ordering::SeqCst),
                BATCH + k + 1,
                "one a submission"
            );
        }
        assert_eq!(dead.len.load(Ordering::SeqCst), BATCHES - TAKE_BATCHES);
        // The take made room for its batches again.
        assert!(!dead.is_full());
        assert!(dead.give(batch(&freed)).is_ok());
        assert_eq!(dead.len.load(Ordering::SeqCst), BATCHES - TAKE_BATCHES + 1);
        drop(dead);
        // The pool's are freed with it; this thread keeps the rest it took.
        let kept = TAKE_BATCHES * BATCH - 3 * BATCH;
        assert_eq!(freed.load(Ordering::SeqCst), (BATCHES + 2) * BATCH - kept);
        let held = crate::context::with_freeing(|f| f.borrow().len()).unwrap();
        assert_eq!(held, kept);
        // Freed at its next submission to any pool, one at a time.
        DeadCells::new().free_one();
        assert_eq!(
            freed.load(Ordering::SeqCst),
            (BATCHES + 2) * BATCH - kept + 1
        );
        // A thread's batch is freed as it ends.
        let base = freed.load(Ordering::SeqCst);
        std::thread::spawn({
            let freed = freed.clone();
            move || {
                let dead = DeadCells::new();
                assert!(dead.give(batch(&freed)).is_ok());
                dead.free_one();
                assert_eq!(freed.load(Ordering::SeqCst), base + 1);
            }
        })
        .join()
        .unwrap();
        assert_eq!(freed.load(Ordering::SeqCst), base + BATCH);
    }
}
