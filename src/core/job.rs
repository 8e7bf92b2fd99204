//! Jobs: work that lives on its owner's stack, published on the owner's
//! job deque for idle workers to steal (rayon's `JobRef`).
//!
//! The rule: a published job runs exactly once, by its owner or by the
//! one thief whose steal took it, and its owner does not return before it
//! ran. So the job's memory outlives every use, and nothing is lost: a job
//! that nobody steals is run by its owner.
//!
//! Why a job is never stranded: its owner takes it back once its other
//! half is done (see `scope::stack`). Only the owner pops its deque; a
//! thief steals from the other end. If the owner's pop does not find the
//! job, a thief has it, or a waiting owner moved it to the channel's
//! injector (below); the owner then waits for its latch, and looks for
//! its job in the injector meanwhile, whatever the pool's state and its
//! stack's depth. The announcement of a job (its channel's status bit and
//! the sleep protocol's post, as for a task) only brings parallelism: a
//! job that no idle worker sees in time still runs, on its owner.
//!
//! A job carries a tag: its place in the tree of jobs, which the fork-join
//! layer reads (see `scope::stack`, "Isolated waits") and this module does
//! not. A worker running a job keeps its tag (`WorkerLocal::job_tag`), so
//! the jobs published inside it name it. [`steal_within`] is the steal of
//! a waiting owner: it takes only jobs its filter accepts, and moves the
//! others to the channel's injector, announced again. There, any idle
//! worker finds them, and so does the owner of a stack job, as said. A
//! scope's job holds a count towards close, so the pool does not
//! terminate before it ran.
//!
//! Job deques are per worker seat and per channel, made on a seat's first
//! job on that channel: a thief looking at a channel steals only that
//! channel's jobs, so a job runs at its channel's level, as a task does.
//! A thread that is no seat of the pool publishes on the channel's job
//! injector (a scope's `spawn` from outside). Such a job's owner is not
//! there to take it back: it holds a count towards close, so the pool
//! does not terminate before a seat ran it.

use std::cell::OnceCell;
use std::sync::atomic::Ordering;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::Shared;

/// A job's place in the tree of jobs: an address that only the fork-join
/// layer reads (null: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag(pub(crate) *const ());

// SAFETY: this module and the workers only copy and compare a tag; the
// fork-join layer, which reads through it, says why that is sound.
unsafe impl Send for Tag {}

impl Tag {
    pub(crate) const NONE: Tag = Tag(std::ptr::null());
}

/// A type-erased pointer to a job and the function that runs it.
pub(crate) struct JobRef {
    data: *const (),
    run: unsafe fn(*const ()),
    channel: usize,
    tag: Tag,
}

// SAFETY: a `JobRef` only comes from `JobRef::new`, whose contract makes
// running it from any thread sound; it is run once (`run` takes `self`).
unsafe impl Send for JobRef {}

impl JobRef {
    /// A job of channel `channel`, run by `run(data)`, with the tag `tag`
    /// (its place in the tree of jobs, opaque here).
    ///
    /// # Safety
    ///
    /// `data` must stay valid until `run(data)` returned, and calling
    /// `run(data)` once, from any thread, must be sound.
    pub(crate) unsafe fn new(
        data: *const (),
        run: unsafe fn(*const ()),
        channel: usize,
        tag: Tag,
    ) -> JobRef {
        JobRef {
            data,
            run,
            channel,
            tag,
        }
    }

    /// The job's channel.
    pub(crate) fn channel(&self) -> usize {
        self.channel
    }

    /// The job's tag.
    pub(crate) fn tag(&self) -> Tag {
        self.tag
    }

    /// Whether this is the job at `data`.
    pub(crate) fn is(&self, data: *const ()) -> bool {
        self.data == data
    }

    /// Runs the job (it catches its own panics).
    pub(crate) fn run(self) {
        // SAFETY: `new`'s contract; `self` is consumed, so it runs once.
        unsafe { (self.run)(self.data) }
    }
}

/// A seat's job deques, one per channel, each made on first use.
pub(crate) struct Jobs(Box<[OnceCell<Worker<JobRef>>]>);

impl Jobs {
    pub(crate) fn new(channels: usize) -> Jobs {
        Jobs((0..channels).map(|_| OnceCell::new()).collect())
    }

    /// Publishes `job` on seat `seat`'s deque of its channel, then
    /// announces it as a task push is announced.
    pub(crate) fn push(&self, shared: &Shared, seat: usize, job: JobRef) {
        let channel = job.channel;
        let deque = self.0[channel].get_or_init(|| {
            shared.job_used[channel].store(true, Ordering::Relaxed);
            let deque = Worker::new_lifo();
            // Only this seat makes its deques: set once.
            let _ = shared.job_stealers[seat][channel].set(deque.stealer());
            deque
        });
        deque.push(job);
        shared.pushed(channel);
    }

    /// Takes the newest job of `channel` back, if any is left.
    pub(crate) fn pop(&self, channel: usize) -> Option<JobRef> {
        self.0[channel].get()?.pop()
    }
}

/// Publishes `job` from a thread that is no seat of the pool, on its
/// channel's job injector, then announces it as a task push is announced.
pub(crate) fn inject(shared: &Shared, job: JobRef) {
    let channel = job.channel;
    shared.job_injectors[channel]
        .get_or_init(|| {
            shared.job_used[channel].store(true, Ordering::Relaxed);
            Injector::new()
        })
        .push(job);
    shared.pushed(channel);
}

/// Steals the oldest job of `channel` from the other seats, starting with
/// the right-hand neighbour of seat `seat`, then from the channel's
/// injector.
pub(crate) fn steal(shared: &Shared, seat: usize, channel: usize) -> Option<JobRef> {
    // `steal_within` accepting every job, without its filter's call and
    // the injector's length read (a third of a steal from the injector,
    // on the idle search's path).
    if !used(shared, channel) {
        return None;
    }
    if let Some(job) = others(shared, seat, channel).find_map(|s| settle(|| s.steal())) {
        return Some(job);
    }
    let injector = shared.job_injectors[channel].get()?;
    settle(|| injector.steal())
}

/// The steal of a waiting owner on seat `seat`: the oldest job of
/// `channel` that `within` accepts, from the other seats, then from the
/// channel's injector. A job it does not accept goes to the injector
/// (taken from a seat: announced again, for an idle worker) or back to
/// its end (taken from the injector), and the search goes on: from a seat
/// until it is empty, from the injector for as many jobs as it held.
pub(crate) fn steal_within(
    shared: &Shared,
    seat: usize,
    channel: usize,
    within: &dyn Fn(&JobRef) -> bool,
) -> Option<JobRef> {
    if !used(shared, channel) {
        return None;
    }
    for stealer in others(shared, seat, channel) {
        while let Some(job) = settle(|| stealer.steal()) {
            if within(&job) {
                return Some(job);
            }
            inject(shared, job);
        }
    }
    steal_injected(shared, channel, within)
}

/// The oldest job of `channel`'s injector that `within` accepts, looking
/// at as many jobs as it held. The others go back to its end, announced
/// again: a worker may have found the channel empty while one was out.
pub(crate) fn steal_injected(
    shared: &Shared,
    channel: usize,
    within: &dyn Fn(&JobRef) -> bool,
) -> Option<JobRef> {
    let injector = shared.job_injectors[channel].get()?;
    let mut put_back = false;
    // Once at least: a job pushed as `len` read it empty is still taken.
    let found = (0..injector.len().max(1))
        .map_while(|_| settle(|| injector.steal()))
        .find_map(|job| {
            if within(&job) {
                return Some(job);
            }
            injector.push(job);
            put_back = true;
            None
        });
    if put_back {
        shared.pushed(channel);
    }
    found
}

/// The stealers of `channel`'s job deques of the seats other than `seat`
/// (those made), starting with its right-hand neighbour.
fn others(shared: &Shared, seat: usize, channel: usize) -> impl Iterator<Item = &Stealer<JobRef>> {
    let seats = shared.job_stealers.len();
    (1..seats).filter_map(move |k| shared.job_stealers[(seat + k) % seats][channel].get())
}

/// Repeats `steal` while it says retry.
fn settle(mut steal: impl FnMut() -> Steal<JobRef>) -> Option<JobRef> {
    std::iter::repeat_with(&mut steal)
        .find(|steal| !steal.is_retry())
        .and_then(Steal::success)
}

/// Whether any seat's deque or the injector of `channel` holds a job
/// (a worker leaving idle asks, see `Sleep::work_found`).
pub(crate) fn any(shared: &Shared, channel: usize) -> bool {
    used(shared, channel)
        && shared.job_stealers.iter().any(|seat| {
            seat[channel]
                .get()
                .is_some_and(|stealer| !stealer.is_empty())
        })
        || shared.job_injectors[channel]
            .get()
            .is_some_and(|injector| !injector.is_empty())
}

/// Whether a job was ever published on `channel` (one relaxed load: the
/// paths of a pool that runs no `join` stay as they were; the deque or
/// injector that holds the job is made, flag set, before the push, and a
/// look that misses the flag misses the job as it would miss the push).
#[inline]
pub(crate) fn used(shared: &Shared, channel: usize) -> bool {
    shared.job_used[channel].load(Ordering::Relaxed)
}

/// `[seat][channel]`: the stealers of each seat's job deques, set as they
/// are made.
pub(crate) type JobStealers = Box<[Box<[std::sync::OnceLock<Stealer<JobRef>>]>]>;
