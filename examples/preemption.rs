//! Urgent work behind long background tasks, four ways, on two workers:
//!
//! 1. background tasks of 1 ms that never check: an urgent task waits for
//!    one to end;
//! 2. the same tasks, awaiting `smartpool::yield_if_needed()` after each
//!    microsecond of work: they give way only when urgent work waits;
//! 3. no checks, but the urgent level reserves a worker
//!    (`LevelOptions::reserve`): urgent work finds it idle; the background
//!    drains on the other;
//! 4. a never-ending flood of urgent work, and one background task whose
//!    level has a starvation bound (`LevelOptions::max_wait`);
//! 5. priority inheritance: an urgent task needs the result of a child
//!    queued behind a background backlog, and awaits its `JoinHandle`
//!    (the child moves up to the urgent level) or a side channel (nothing
//!    boosts it);
//! 6. re-prioritising: a task queued as background work becomes urgent
//!    (`JoinHandle::move_to`).
//!
//! Run: `cargo run --release --example preemption`

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smartpool::prelude::*;
use smartpool::LevelOptions;

const THREADS: usize = 2;
const BACKGROUND_TASKS: usize = 300;
const STEPS: usize = 1_000;
const STEP: Duration = Duration::from_micros(1);
const URGENT_EVERY: Duration = Duration::from_millis(1);

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Level {
    Urgent,
    Background,
}

struct App {
    urgent: VecDequeChannel,
    background: VecDequeChannel,
    options: Vec<LevelOptions>,
}

impl PoolBehavior for App {
    type ChannelKey = Level;

    fn config(&self) -> PoolConfig<Level> {
        let level = |key| {
            vec![ChannelParams {
                key,
                complete_on_close: true,
            }]
        };
        PoolConfig {
            threads: THREADS,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![level(Level::Urgent), level(Level::Background)],
        }
    }

    fn channel(&self, key: Level) -> &dyn Channel {
        match key {
            Level::Urgent => &self.urgent,
            Level::Background => &self.background,
        }
    }

    fn level_options(&self) -> Vec<LevelOptions> {
        self.options.clone()
    }
}

fn pool(options: Vec<LevelOptions>) -> OwnedPool<App> {
    OwnedPool::new(App {
        urgent: VecDequeChannel::new(),
        background: VecDequeChannel::new(),
        options,
    })
    .expect("valid config")
}

/// Busy CPU work of `d`.
fn spin(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Waits of the urgent tasks (sorted), and the background's drain time.
fn urgent_behind_background(owned: &OwnedPool<App>, check: bool) -> (Vec<Duration>, Duration) {
    let pool = &owned.pool;
    let left = Arc::new(AtomicUsize::new(BACKGROUND_TASKS));
    let start = Instant::now();
    for _ in 0..BACKGROUND_TASKS {
        let left = left.clone();
        drop(pool.background.exec(async move {
            for _ in 0..STEPS {
                spin(STEP);
                if check {
                    smartpool::yield_if_needed().await;
                }
            }
            left.fetch_sub(1, Ordering::Relaxed);
        }));
    }
    let waits = Arc::new(Mutex::new(Vec::new()));
    let mut urgent = Vec::new();
    while left.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(URGENT_EVERY);
        let (waits, submitted) = (waits.clone(), Instant::now());
        urgent.push(
            pool.urgent
                .exec(run(move || waits.lock().unwrap().push(submitted.elapsed()))),
        );
    }
    let drained = start.elapsed();
    for h in urgent {
        owned.block_on(h).expect("urgent task");
    }
    let mut waits = std::mem::take(&mut *waits.lock().unwrap());
    waits.sort_unstable();
    (waits, drained)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    }
}

/// An urgent flood that never stops by itself (each task resubmits itself
/// until `stop`), and one background task: how long it waits.
fn background_under_flood(owned: &OwnedPool<App>, give_up: Duration) -> Option<Duration> {
    let pool = owned.pool.clone();
    let stop = Arc::new(AtomicBool::new(false));
    fn flood(pool: Arc<Pool<App>>, stop: Arc<AtomicBool>) {
        let p = pool.clone();
        drop(pool.urgent.exec(run(move || {
            spin(Duration::from_micros(50));
            if !stop.load(Ordering::Relaxed) {
                flood(p, stop);
            }
        })));
    }
    for _ in 0..THREADS * 3 {
        flood(pool.clone(), stop.clone());
    }
    std::thread::sleep(Duration::from_millis(5));
    let submitted = Instant::now();
    let started = Arc::new(Mutex::new(None));
    let s = started.clone();
    let task = pool
        .background
        .exec(run(move || *s.lock().unwrap() = Some(submitted.elapsed())));
    while started.lock().unwrap().is_none() && submitted.elapsed() < give_up {
        std::thread::sleep(Duration::from_millis(1));
    }
    stop.store(true, Ordering::Relaxed);
    owned.block_on(task).expect("background task");
    let waited = started.lock().unwrap().filter(|w| *w < give_up);
    waited
}

/// A backlog of `n` background tasks of 20 µs; the count of those left.
fn backlog(owned: &OwnedPool<App>, n: usize) -> Arc<AtomicUsize> {
    let left = Arc::new(AtomicUsize::new(n));
    for _ in 0..n {
        let left = left.clone();
        drop(owned.pool.background.exec(run(move || {
            spin(Duration::from_micros(20));
            left.fetch_sub(1, Ordering::Relaxed);
        })));
    }
    // Let the workers get into it.
    std::thread::sleep(Duration::from_millis(5));
    left
}

fn drained(left: &AtomicUsize) {
    while left.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// 5: how long the child waited after the urgent task asked for it.
fn inversion(owned: &OwnedPool<App>, await_handle: bool) -> Duration {
    let left = backlog(owned, BACKLOG);
    let pool = &owned.pool;
    let (tx, rx) = futures::channel::oneshot::channel();
    let child = pool.background.exec(run(move || {
        let now = Instant::now();
        let _ = tx.send(now);
        now
    }));
    let waiter = pool.urgent.exec(async move {
        let asked = Instant::now();
        let started = if await_handle {
            child.await.expect("child")
        } else {
            drop(child);
            rx.await.expect("child")
        };
        started - asked
    });
    let waited = owned.block_on(waiter).expect("urgent task");
    drained(&left);
    waited
}

/// 6: how long a queued background task waited after it became urgent.
fn reprioritised(owned: &OwnedPool<App>, move_it: bool) -> Duration {
    let left = backlog(owned, BACKLOG);
    let pool = &owned.pool;
    let asset = pool.background.exec(run(Instant::now));
    let asked = Instant::now();
    if move_it {
        asset.move_to(&pool.urgent).expect("queued: moved");
    }
    let started = owned.block_on(asset).expect("asset");
    drained(&left);
    started - asked
}

const BACKLOG: usize = 5_000;

fn main() {
    println!(
        "{THREADS} workers; {BACKGROUND_TASKS} background tasks of {} ms ({STEPS} steps of {} µs);\n\
         one urgent task submitted every {} ms while they run. The urgent task's wait:\n",
        (STEP * STEPS as u32).as_millis(),
        STEP.as_micros(),
        URGENT_EVERY.as_millis()
    );
    println!(
        "{:<44}{:>10}{:>10}{:>10}{:>12}",
        "", "p50", "p99", "max", "background"
    );
    let plain = pool(Vec::new());
    let reserved = pool(vec![LevelOptions::new().reserve(1)]);
    for (name, owned, check) in [
        ("1. background never checks", &plain, false),
        ("2. background awaits yield_if_needed()", &plain, true),
        ("3. no checks, one worker reserved", &reserved, false),
    ] {
        let (waits, drained) = urgent_behind_background(owned, check);
        println!(
            "{name:<44}{:>10}{:>10}{:>10}{:>10.0} ms",
            show(percentile(&waits, 0.5)),
            show(percentile(&waits, 0.99)),
            show(*waits.last().expect("samples")),
            drained.as_secs_f64() * 1e3
        );
    }
    println!(
        "\n(1 waits for a background task to end; 2 costs the background almost nothing;\n\
         3 gives up a worker's share of the background, see its drain time, and its\n\
         urgent wait is the reserved worker's wake-up from sleep.)\n"
    );

    let bound = Duration::from_millis(5);
    let give_up = Duration::from_millis(500);
    println!("4. a flood of urgent work that never ends; one background task submitted:");
    let strict = background_under_flood(&plain, give_up);
    println!(
        "   strict priority:              {}",
        strict.map_or(
            format!("not started after {} ms", give_up.as_millis()),
            show
        )
    );
    let bounded = pool(vec![
        LevelOptions::new(),
        LevelOptions::new().max_wait(bound),
    ]);
    let waited = background_under_flood(&bounded, give_up);
    println!(
        "   background max_wait {} ms:     started after {}",
        bound.as_millis(),
        waited.map_or("never".into(), show)
    );

    println!(
        "\n5. an urgent task needs a child queued behind {BACKLOG} background tasks of 20 µs:"
    );
    println!(
        "   it awaits a side channel:     the child starts after {}",
        show(inversion(&plain, false))
    );
    println!(
        "   it awaits the JoinHandle:     the child starts after {} (inherits the urgent level)",
        show(inversion(&plain, true))
    );
    println!("\n6. a task queued behind the same backlog becomes urgent:");
    println!(
        "   left where it is:             starts after {}",
        show(reprioritised(&plain, false))
    );
    println!(
        "   handle.move_to(&pool.urgent): starts after {}",
        show(reprioritised(&plain, true))
    );
    for owned in [plain, reserved, bounded] {
        owned.close().wait();
    }
}
