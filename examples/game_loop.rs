//! A game loop: every frame, 8 frame-critical jobs must finish, while
//! assets load in the background on the same pool.
//!
//! Run: `cargo run --release --example game_loop`
//!
//! What to look at: the frame times. With the frame jobs on level 0 and
//! asset loading on level 1, a frame waits at most for the asset tasks the
//! workers are in the middle of, and no frame is missed while the assets
//! load. With one shared level, the first frame queues behind the whole
//! asset backlog.

use std::time::{Duration, Instant};

use smartpool::prelude::*;

/// Busy work standing in for a job of `d`.
fn work(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

const FRAMES: usize = 120;
const FRAME: Duration = Duration::from_micros(16_667);
const JOBS_PER_FRAME: usize = 8;
const JOB: Duration = Duration::from_micros(300);
const ASSETS: usize = 600;
const ASSET: Duration = Duration::from_millis(2);

/// Runs the game for `FRAMES` frames with frame jobs on `frame_level` and
/// assets on `asset_level`; returns each frame's time (submit to done),
/// and when the last asset was loaded.
fn play(levels: usize, frame_level: usize, asset_level: usize) -> (Vec<Duration>, Duration) {
    let owned = smartpool::Builder::new()
        .levels(levels)
        .threads(2)
        .build()
        .expect("a valid pool");
    let pool = &owned.pool;
    // The level's title screen: asset loading starts.
    let loading = Instant::now();
    let assets: Vec<_> = (0..ASSETS)
        .map(|_| {
            pool.level(asset_level).exec(run(move || {
                work(ASSET);
                loading.elapsed()
            }))
        })
        .collect();
    let mut times = Vec::with_capacity(FRAMES);
    let mut next_frame = Instant::now();
    for _ in 0..FRAMES {
        let start = Instant::now();
        let jobs: Vec<_> = (0..JOBS_PER_FRAME)
            .map(|_| pool.level(frame_level).exec(run(|| work(JOB))))
            .collect();
        // Wait without running pool tasks on this (the render) thread.
        for job in jobs {
            futures::executor::block_on(job).expect("a frame job");
        }
        times.push(start.elapsed());
        next_frame += FRAME;
        std::thread::sleep(next_frame.saturating_duration_since(Instant::now()));
    }
    let loaded = assets
        .into_iter()
        .map(|asset| futures::executor::block_on(asset).expect("an asset"))
        .max()
        .unwrap_or_default();
    owned.close().wait();
    (times, loaded)
}

fn report(name: &str, (mut times, loaded): (Vec<Duration>, Duration)) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    let missed = times.iter().filter(|&&t| t > FRAME).count();
    println!(
        "{name:<32} p50 {:>7.2?}  p99 {:>7.2?}  max {:>8.2?}  over 16.7 ms: {missed:>2}  assets loaded after {loaded:.2?}",
        at(0.5),
        at(0.99),
        times[times.len() - 1],
    );
}

fn main() {
    println!(
        "{FRAMES} frames of {JOBS_PER_FRAME} jobs of {JOB:?}, while {ASSETS} assets of {ASSET:?} load, on 2 workers:"
    );
    report("frame jobs above asset loading", play(2, 0, 1));
    report("one shared level (FIFO)", play(1, 0, 0));
    println!(
        "With levels, assets load during the frames: a frame waits at most for the asset task\n\
         each worker is in (2 ms). With one level, the first frame waits behind the whole\n\
         backlog; the later ones run on idle workers, once nothing is left to load."
    );
}
