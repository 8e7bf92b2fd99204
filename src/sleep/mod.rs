//! When workers sleep and who wakes them: the jobs-event-counter protocol.
//!
//! # States of a worker
//!
//! * **active**: running a task;
//! * **idle**: searching the channels for a task, spinning through rounds;
//! * **sleepy**: idle, and has announced through the jobs event counter (JEC)
//!   that it is about to sleep; it searches once more;
//! * **watching**: sleepy, but another worker's LIFO slot holds a task or
//!   was filled lately (see `lifo`): it waits on its condition variable for
//!   one watch period, then searches again. It counts as awake and idle,
//!   like an idle worker, because it will look again without being woken.
//!   Posters of queued jobs that count on awake idle workers poke a
//!   watcher, and so does a worker leaving idle while one watches or when
//!   the sleeper it would wake turned watcher (see `work_found`), so queued
//!   work does not wait for a period to end. A slot fill pokes nobody: its
//!   task is not stolen before the steal delay anyway;
//! * **sleeping**: blocked on its own condition variable.
//!
//! The counters (see `counters`) pack the number of inactive (idle or
//! sleeping) workers, the number of sleeping ones, and the JEC in one word.
//!
//! # Posting work (`Sleep::new_jobs_at`)
//!
//! After the task is stored and its status bit marked (`Status::mark`, with
//! its post and set fences):
//! 1. read the counters, making an even (sleepy) JEC odd;
//! 2. if `n` new jobs exceed the awake idle workers, who will find them
//!    anyway, wake `min(n - idle, sleeping)` sleepers, one condvar each.
//!
//! Never all: one job wakes at most one thread (the herd of the old
//! `tickle`, which woke every sleeper per job, is what this replaces).
//!
//! # Falling asleep (`Sleep::no_work_found`)
//!
//! 1. After `ROUNDS_UNTIL_SLEEPY` empty rounds the worker gets sleepy: it makes
//!    the JEC even and remembers it, then searches once more. A worker that
//!    ran a job since its last idle spell searches `LINGER_ROUNDS` first
//!    (fork-join comes back in bursts; the rounds are searches like any).
//! 2. Still nothing: under its own lock, it adds itself to the sleeping count
//!    only if the JEC is unchanged (else a job came: back to step 1's search).
//! 3. `fence(SeqCst)`, the *sleep fence*.
//! 4. Final check: any status bit set, or the pool terminating (or, from
//!    the worker: its LIFO slot full, or another worker's slot holding a
//!    task it should steal or age; for a worker waiting in a scope: the
//!    wait over)? Then it takes itself off the sleeping count and searches
//!    again. Another worker's slot busy with tasks its worker comes back
//!    for? Then it takes itself off the sleeping count and watches.
//! 5. It marks itself blocked and waits on its condvar until a waker clears
//!    the mark (the waker also decrements the sleeping count).
//!
//! # Filling a LIFO slot (`Sleep::slot_filled`)
//!
//! A fill is announced as a job is, with the *fill fence* in the place of
//! the set fence (it does not bump the JEC or poke watchers). The worker stores the task in its slot, runs a `SeqCst`
//! fence, and reads the counters: if no worker but itself is awake and
//! idle, it wakes one sleeper. (It discounts itself if it is idle: a
//! worker helping inside a wait from its idle search may block on the very
//! task.) The fence pairs with the sleep fence, after which the final
//! check looks at the slots, and with `work_found`'s, after which the last
//! idle worker looks for work to hand on: either that look sees the task,
//! or the filler's read of the counters sees the worker asleep or active.
//! `lifo` has the argument that the task is never stranded; it rests on
//! these fences and on step 4 never sleeping while a slot is full.
//!
//! # Why no wake-up is lost
//!
//! The lost wake-up is: worker S finds nothing, poster P stores a job and
//! sees no sleeper, S sleeps. The JEC catches most cases cheaply, but not a
//! counter that wrapped around to the same value; the final check catches
//! every case, through two fence pairings (`status` has the pusher's side):
//!
//! * P stores the job, runs the *post fence*, reads the channel's bit. If the
//!   bit is clear, P sets it and runs the *set fence*; then P reads the
//!   sleep counters. S increments the sleeping count, runs the *sleep
//!   fence*, then reads the bits.
//! * If P set the bit: when the set fence precedes the sleep fence in the
//!   SeqCst order, S's read sees the bit and S stays awake; otherwise P's
//!   read of the counters sees S asleep and wakes it.
//! * If P found the bit already set, it was set by an earlier push; if it is
//!   clear by the time S looks, the worker X that cleared it re-checks the
//!   channel after its own fence, and either X's re-check finds the job (X
//!   is awake and runs it) or P's read of the bit would have seen X's clear
//!   (the `status` argument), a contradiction.
//!
//! A waker clears S's mark under S's lock, and S checks the mark under that
//! lock before waiting, so a wake between steps 4 and 5 is not missed either.
//! The bits stand for every channel, so this holds for work posted from
//! inside the pool as well as from outside (rayon needs the check only for
//! its injector; we generalise it).
//!
//! Termination uses the same lock: the closer stores the `TERMINATED` phase
//! and then visits every worker's lock, so a worker either sees the phase in
//! step 4 or is already blocked and gets woken.
//!
//! # Domains: reserved workers
//!
//! A level may reserve workers that serve only it and the levels above it
//! (see `schedule`). Each such group is a *domain* with its own counters
//! and watch count; every other worker thread, and every guest seat, is in
//! the common domain 0, whose workers serve every level. A worker counts
//! itself idle and asleep, and checks before sleeping, in its own domain
//! only, and its final check looks at the bits of the levels it serves.
//! So each domain runs the protocol above unchanged, for the jobs its
//! workers can take, and its argument holds for it alone.
//!
//! A poster of a job at level `l` posts it to the domains that serve `l`,
//! nearest reservation first, and stops at the first that *covers* it:
//! one of its workers is awake and idle, or was woken for it. The common
//! domain comes last and is always posted to if nobody covered the job: it
//! serves every level, and validation leaves it at least one worker. A
//! domain that covers a job finds it by the protocol's argument. One gap
//! is closed by `work_found`: the last awake idle worker of a reserved
//! domain that leaves idle while work remains, with no sleeper of its own
//! domain to hand on to, hands on to the common domain (as a new job):
//! posters counted on it, and the common domain's sleepers did not hear
//! of their jobs.
//!
//! A pool without reservations has the common domain alone: every step is
//! the one above.
//!
//! # Posting many jobs (`exec_batch`), and wake hints
//!
//! A batch of `n` jobs is stored, its bit marked once, and posted as `n`
//! jobs at once: up to `n` sleepers woken by one read of the counters,
//! never more than the awake idle workers fall short of (EMPER's
//! notify-n). The argument above holds for `n` as for one.
//!
//! A waker that posts to a channel writes the channel into the slot of the
//! sleeper it wakes, under the slot's lock, before it marks it awake; the
//! woken worker takes it under the same lock and looks into that channel
//! first, if its schedule would serve the channel's level now (so a hint
//! never takes a worker past higher work). A hint is advice: the worker
//! searches as always if the channel is empty, so nothing depends on it.

mod counters;

pub(crate) use counters::MAX_WORKERS;
use counters::{AtomicCounters, JobsEvent};

use crate::sync::{fence, lock, yield_now, AtomicUsize, Condvar, Mutex, MutexGuard, Ordering};

/// Empty search rounds before a worker gets sleepy (then one more search,
/// then sleep). Each round yields the processor once. Fewer rounds than
/// rayon's 32 keep a sparse load's CPU (the suite's W9) at tokio's, with
/// spawn throughput and wake latency unchanged. Under loom every round is
/// a scheduling point; one keeps the model small without changing the
/// protocol.
const ROUNDS_UNTIL_SLEEPY: u32 = if cfg!(loom) { 1 } else { 2 };

/// Empty rounds before a worker that ran a job since its last idle spell
/// gets sleepy: rayon's 32. A fork-join from outside (a game's frame loop)
/// comes back within microseconds, and a worker asleep by then costs the
/// frame a wake-up; sparse tasks (W9) never linger. Under loom, no longer
/// than any other spell.
const LINGER_ROUNDS: u32 = if cfg!(loom) { ROUNDS_UNTIL_SLEEPY } else { 32 };

/// What the sleep's final check found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    /// Work may be there: search again.
    Search,
    /// Only other workers' LIFO slots are busy: watch them.
    Watch,
    /// Nothing: sleep until woken.
    Sleep,
}

impl Check {
    /// `Search` if `work`, else `Sleep`: for a worker that has no slots to
    /// watch.
    pub(crate) fn search_if(work: bool) -> Check {
        if work {
            Check::Search
        } else {
            Check::Sleep
        }
    }
}

/// Where a worker waits on its condvar, if it does.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
enum Park {
    #[default]
    Awake,
    /// Counted asleep; a waker sets it `Awake` and uncounts it.
    Asleep,
    /// Watching, counted awake and idle; a poke sets it `Awake`.
    Watching,
}

/// What posting jobs to a domain did.
#[derive(Copy, Clone, Debug)]
struct Posted {
    /// Sleepers woken.
    woken: usize,
    /// The domain's awake idle workers and those woken: it will find as
    /// many jobs (posting to it covered them if they are at least as many).
    takes: usize,
}

/// One worker's parking slot.
#[derive(Debug, Default)]
struct Slot {
    park: Mutex<Park>,
    condvar: Condvar,
    /// Where its waker's job is: a channel index plus one, or 0 (see the
    /// module doc's "Wake hints"). Written by the waker under the lock,
    /// before it sets `Awake`; taken by the woken worker under the lock.
    hint: AtomicUsize,
}

/// The counters of one domain (see the module doc). Every post
/// read-modify-writes them: on a cache line of their own (two, against the
/// adjacent-line prefetcher), shared with nothing else.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Domain {
    counters: AtomicCounters,
    /// Workers watching (see the module doc): posters poke one of them.
    watching: AtomicUsize,
}

/// The sleep state of a whole pool.
#[derive(Debug)]
pub(crate) struct Sleep {
    /// Domain 0 (see the module doc), kept inline: a pool without
    /// reservations reaches its counters as it did with one domain.
    common: Domain,
    /// Domains 1 and up.
    reserved: Box<[Domain]>,
    /// Per slot: its domain.
    domain_of: Box<[usize]>,
    slots: Box<[Slot]>,
}

/// Evidence that a worker is idle: exists from `start_looking` until
/// `work_found`, and carries the worker's progress towards sleep. Dropped
/// any other way (the worker exits, or unwinds from a panicking channel),
/// it takes the worker off the idle count, so no phantom idle worker keeps
/// posters from waking sleepers.
#[derive(Debug)]
pub(crate) struct IdleState<'a> {
    /// The channel the waker that woke this worker posted to, if it said
    /// (see "Wake hints"): the worker looks there first.
    hint: Option<usize>,
    domain: &'a Domain,
    worker: usize,
    rounds: u32,
    /// Rounds before it gets sleepy, this spell.
    until_sleepy: u32,
    sleepy: Option<JobsEvent>,
}

impl IdleState<'_> {
    /// The worker ran a job since its last idle spell: it searches
    /// [`LINGER_ROUNDS`] rounds before it gets sleepy, once.
    pub(crate) fn linger(&mut self) {
        self.until_sleepy = LINGER_ROUNDS;
    }

    /// The channel its waker said its job is in, once (see "Wake hints").
    pub(crate) fn take_hint(&mut self) -> Option<usize> {
        self.hint.take()
    }
}

impl Drop for IdleState<'_> {
    fn drop(&mut self) {
        self.domain.counters.sub_inactive();
    }
}

impl Sleep {
    /// One slot per entry of `domain_of`, which names its domain (0: the
    /// common one; the others numbered from 1 without gaps).
    pub(crate) fn with_domains(domain_of: Vec<usize>) -> Sleep {
        let workers = domain_of.len();
        assert!(workers <= MAX_WORKERS, "config validation bounds workers");
        let reserved = domain_of.iter().max().copied().unwrap_or(0);
        Sleep {
            common: Domain::default(),
            reserved: (0..reserved).map(|_| Domain::default()).collect(),
            domain_of: domain_of.into(),
            slots: (0..workers).map(|_| Slot::default()).collect(),
        }
    }

    /// The worker found no task and starts searching.
    pub(crate) fn start_looking(&self, worker: usize) -> IdleState<'_> {
        let domain = self.domain(self.domain_of[worker]);
        domain.counters.add_inactive();
        IdleState {
            hint: None,
            domain,
            worker,
            rounds: 0,
            until_sleepy: ROUNDS_UNTIL_SLEEPY,
            sleepy: None,
        }
    }

    /// The idle worker found a task. If it was the last awake idle worker
    /// and work remains (`more_work`, asked after it left idle), it passes
    /// the search on to one sleeper: jobs posted while it was idle counted on
    /// it alone. The pool's `more_work` asks, for each channel whose bit is
    /// set, whether the channel itself may hold a task: a bit stays set
    /// after the last task is taken, and asking only the bits woke a second
    /// worker for every task of a sparse load.
    ///
    /// Leaving idle, then the fence, then looking. A poster P that saw this
    /// worker W idle, and so woke nobody, read the counters before W's
    /// decrement in their modification order; P stored its job and ran its
    /// post fence (and its set fence, if it set the bit) before that read.
    /// So P's fences precede W's fence, and W's look sees P's job in the
    /// channel (the store came before P's fences) and its bit, or a later
    /// state in which a clearing worker's second look, or another worker's
    /// pop, took the job. A LIFO slot's fill is the same, with the fill
    /// fence for P's fences: the look (`more_work`) covers every full slot,
    /// the worker's own included. If other workers are still awake and
    /// idle, W skips the look: the last of them to leave does it, and one
    /// that falls asleep instead sees the bit in its own final check.
    ///
    /// If the awake idle workers left are watching, a poster that counted
    /// on this worker may have read the counters while the watcher was
    /// still counted asleep, so it did not poke it; this worker pokes one
    /// instead, by the same look. (A watcher counts itself watching before
    /// it counts itself awake, so this worker, which read it awake, sees
    /// it watching.)
    ///
    /// In a reserved domain (see the module doc), the last awake idle
    /// worker with no sleeper of its own to hand on to posts the rest to
    /// the common domain instead.
    pub(crate) fn work_found(&self, idle: IdleState<'_>, more_work: impl Fn() -> bool) {
        let (domain, d) = (idle.domain, self.domain_of[idle.worker]);
        std::mem::forget(idle); // we leave idle here, not in its `Drop`
        let after = domain.counters.sub_inactive();
        let last = after.awake_idle() == 0;
        let hand_off = last && after.sleeping() > 0;
        let reserved = d != 0;
        if hand_off || (last && reserved) || domain.watching.load(Ordering::Relaxed) > 0 {
            // Pairs with the set fence of `Status::mark`.
            fence(Ordering::SeqCst);
            // And with the fill fence of `slot_filled`.
            if !more_work() {
                return;
            }
            // The sleeper we would wake may have turned watcher since we
            // read the counters: then poke it.
            if hand_off && self.wake_any(d, 1, 0) > 0 {
                return;
            }
            if last && reserved {
                self.post(0, 1, 0);
            } else {
                self.poke(d, 1);
            }
        }
    }

    /// One empty search round. May block until woken. `final_check` is the
    /// last look before blocking: it must say `Search` if any status bit is
    /// set or the pool is terminating, and must not say `Sleep` while
    /// another worker's LIFO slot holds a task.
    pub(crate) fn no_work_found(&self, idle: &mut IdleState<'_>, final_check: impl Fn() -> Check) {
        if idle.rounds < idle.until_sleepy {
            idle.rounds += 1;
            yield_now();
        } else if idle.sleepy.is_none() {
            idle.sleepy = Some(idle.domain.counters.get_sleepy());
            yield_now();
        } else {
            self.sleep(idle, final_check);
        }
    }

    fn sleep(&self, idle: &mut IdleState<'_>, final_check: impl Fn() -> Check) {
        let sleepy = idle.sleepy.take().expect("only sleepy workers sleep");
        let slot = &self.slots[idle.worker];
        let domain = idle.domain;
        let mut park = lock(&slot.park);
        if !domain.counters.try_add_sleeping(sleepy) {
            // A job was posted since we got sleepy: search once more, then
            // get sleepy again.
            idle.rounds = idle.until_sleepy;
            return;
        }
        // Sleep fence: pairs with the set fence of `Status::mark`, which a
        // poster that set a bit runs before `new_jobs_at` reads the counters.
        fence(Ordering::SeqCst);
        // Nobody can have woken us: wakers only act on `Asleep`.
        match final_check() {
            Check::Sleep => {}
            Check::Search => {
                domain.counters.sub_sleeping();
                idle.rounds = idle.until_sleepy;
                return;
            }
            Check::Watch => {
                // Watching before awake: whoever reads us awake and idle
                // (any read of the counters after our change, which
                // releases; see `counters`) also sees us watching, and
                // pokes us if it counts on us.
                *park = Park::Watching;
                domain.watching.fetch_add(1, Ordering::Relaxed);
                domain.counters.sub_sleeping();
                self.watch(domain, slot, park);
                idle.rounds = idle.until_sleepy;
                return;
            }
        }
        *park = Park::Asleep;
        while *park == Park::Asleep {
            park = slot
                .condvar
                .wait(park)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        // Our waker took us off the sleeping count, and may have said
        // where its job is. Search afresh.
        idle.hint = slot.hint.swap(0, Ordering::Relaxed).checked_sub(1);
        idle.rounds = 0;
        idle.until_sleepy = ROUNDS_UNTIL_SLEEPY;
    }

    /// Waits one watch period, or until poked. The caller set its park to
    /// `Watching`, counted itself watching, then awake and idle; it
    /// searches afterwards (see the module doc).
    fn watch(&self, domain: &Domain, slot: &Slot, mut park: MutexGuard<'_, Park>) {
        // Under loom the period may end at any moment: loom's timed wait
        // never times out, so the model waits no time at all.
        if !cfg!(loom) {
            park = slot
                .condvar
                .wait_timeout(park, crate::lifo::watch::WATCH_PERIOD)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        *park = Park::Awake;
        drop(park);
        domain.watching.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether worker `worker` waits on its condvar now (asleep, or
    /// watching a LIFO slot with a timed wait): for `Pool::metrics`.
    #[cfg(feature = "metrics")]
    pub(crate) fn is_asleep(&self, worker: usize) -> bool {
        *lock(&self.slots[worker].park) != Park::Awake
    }

    /// A worker filled its LIFO slot (see the module doc): wakes a sleeper
    /// if no other worker is awake and idle to see the task. `filler_idle`:
    /// the filler itself is counted awake and idle.
    #[inline]
    pub(crate) fn slot_filled(&self, filler_idle: bool) {
        if self.slots.len() == 1 {
            // One seat (a zero-thread pool): the filler is the only worker
            // there is, and nobody else could take the task.
            return;
        }
        // The fill fence: pairs with the sleep fence and `work_found`'s
        // (see the module doc). (Only the common domain's workers fill or
        // take slots.)
        fence(Ordering::SeqCst);
        let counters = self.common.counters.load();
        let others = counters.awake_idle() - usize::from(filler_idle);
        if others == 0 && counters.sleeping() > 0 {
            self.wake_any(0, 1, 0);
        }
    }

    /// `n` jobs were posted to channel `channel`, served by the common
    /// domain (their bits already marked): announces them, wakes as many
    /// sleepers as the awake idle workers fall short of `n`, each told
    /// where the jobs are (see "Wake hints"). Returns how many it woke.
    #[inline]
    pub(crate) fn new_jobs_at(&self, channel: usize, n: usize) -> usize {
        self.post(0, n, channel + 1).woken
    }

    /// `n` jobs were posted to channel `channel`, at a level that the
    /// reserved domains `domains` serve (nearest first) and the common
    /// domain: posts them to each in turn until one covers them, the common
    /// domain last (see the module doc). Returns how many sleepers it woke.
    pub(crate) fn new_jobs_in(&self, domains: &[usize], channel: usize, n: usize) -> usize {
        let (mut woken, mut left) = (0, n);
        for &domain in domains {
            let posted = self.post(domain, left, channel + 1);
            woken += posted.woken;
            // What this domain's awake idle and woken workers will not
            // find is the next domain's.
            left -= posted.takes.min(left);
            if left == 0 {
                return woken;
            }
        }
        woken + self.post(0, left, channel + 1).woken
    }

    /// Posts `n` jobs to `domain`: announces them, wakes as many sleepers
    /// as the awake idle workers fall short of `n`, each told `hint`.
    #[inline]
    fn post(&self, domain: usize, n: usize, hint: usize) -> Posted {
        let d = self.domain(domain);
        let counters = d.counters.announce_job();
        let to_wake = n
            .saturating_sub(counters.awake_idle())
            .min(counters.sleeping());
        let woken = if to_wake > 0 {
            self.wake_any(domain, to_wake, hint)
        } else {
            0
        };
        if woken < n && d.watching.load(Ordering::Relaxed) > 0 {
            // An awake idle worker we count on may be a watcher, which would
            // look only when its period ends: have it look now.
            self.poke(domain, 1);
        }
        Posted {
            woken,
            takes: counters.awake_idle() + woken,
        }
    }

    /// Ends up to `n` watchers' periods early, in `domain`.
    fn poke(&self, domain: usize, n: usize) {
        self.first_n(domain, n, |worker| unwatch(&self.slots[worker]));
    }

    /// Whether no worker of the common domain is awake and searching: a
    /// new task has nobody to take it at once (two loads; a hint). Asleep
    /// or watching (a timed wait), a worker needs a wake-up, tens of
    /// microseconds, before it looks: the running task gives way sooner.
    /// A reserved domain's idle worker is not counted: it may not serve
    /// the level that waits (so a task may yield to work a reserved worker
    /// was about to take: a trip through its channel, never an inversion).
    #[inline]
    pub(crate) fn none_searching(&self) -> bool {
        let counters = self.common.counters.load();
        counters.awake_idle() <= self.common.watching.load(Ordering::Relaxed)
    }

    /// Domain `domain`'s counters.
    #[inline]
    fn domain(&self, domain: usize) -> &Domain {
        if domain == 0 {
            &self.common
        } else {
            &self.reserved[domain - 1]
        }
    }

    /// Calls `f` on the workers of `domain` in order until it said yes `n`
    /// times; returns how many times it did.
    fn first_n(&self, domain: usize, n: usize, mut f: impl FnMut(usize) -> bool) -> usize {
        let mut yes = 0;
        for worker in (0..self.slots.len()).filter(|&w| self.domain_of[w] == domain) {
            if yes == n {
                break;
            }
            yes += usize::from(f(worker));
        }
        yes
    }

    /// Wakes up to `n` sleeping workers of `domain`, each told `hint`;
    /// returns how many it woke.
    fn wake_any(&self, domain: usize, n: usize, hint: usize) -> usize {
        self.first_n(domain, n, |worker| self.wake_hinted(worker, hint))
    }

    /// Wakes every sleeper and pokes every watcher (which would see
    /// termination when its period ends anyway): used once the pool
    /// terminates.
    pub(crate) fn wake_all(&self) {
        for worker in 0..self.slots.len() {
            self.rouse(worker);
        }
    }

    /// Gets `worker` searching: wakes it if it sleeps, pokes it if it
    /// watches (for a waiter whose wait is over, see `scope`).
    pub(crate) fn rouse(&self, worker: usize) {
        if !self.wake_hinted(worker, 0) {
            unwatch(&self.slots[worker]);
        }
    }

    /// Wakes `worker` if it is blocked in its slot, telling it `hint` (see
    /// "Wake hints"); returns whether it was.
    fn wake_hinted(&self, worker: usize, hint: usize) -> bool {
        let slot = &self.slots[worker];
        let mut park = lock(&slot.park);
        if *park != Park::Asleep {
            return false;
        }
        slot.hint.store(hint, Ordering::Relaxed);
        *park = Park::Awake;
        self.domain(self.domain_of[worker]).counters.sub_sleeping();
        // Notified after the unlock, so that the sleeper does not wake only
        // to block on the lock we still hold. Nothing is lost: it waits
        // while `Asleep`, which it reads under the lock we just released.
        drop(park);
        slot.condvar.notify_one();
        true
    }
}

/// Ends the watch of the worker at `slot`, if it watches; returns whether
/// it did.
fn unwatch(slot: &Slot) -> bool {
    let mut park = lock(&slot.park);
    let watching = *park == Park::Watching;
    if watching {
        *park = Park::Awake;
        drop(park);
        slot.condvar.notify_one();
    }
    watching
}

#[cfg(all(test, loom))]
pub(crate) mod loom_model;
