//! Scoped tasks: process a frame buffer that lives on the stack, row bands
//! in parallel at frame priority, while background work waits on a lower
//! level. No `Arc`, no `'static`: `smartpool::scope` returns only when
//! every band is done.
//!
//! Run: `cargo run --example scoped`

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Frame,
    Background,
}

struct Game {
    frame: VecDequeChannel,
    background: VecDequeChannel,
}

impl PoolBehavior for Game {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Ch::Frame,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Ch::Background,
                    complete_on_close: false,
                }],
            ],
        }
    }
    fn channel(&self, key: Ch) -> &dyn Channel {
        match key {
            Ch::Frame => &self.frame,
            Ch::Background => &self.background,
        }
    }
    fn followup(&self, from: Ch, task: RunningTask) {
        self.channel(from).submit(task);
    }
}

const WIDTH: usize = 640;
const HEIGHT: usize = 480;
const BANDS: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let owned = OwnedPool::new(Game {
        frame: VecDequeChannel::new(),
        background: VecDequeChannel::new(),
    })?;
    let pool = owned.pool.clone();

    // Background work queued first: the frame's bands still go ahead of
    // it. Each background task notes, as it starts, whether the frame had
    // arrived (all its bands queued), and whether a band of it still
    // waited in the queue.
    let frame_arrived = Arc::new(AtomicBool::new(false));
    let bands_started = Arc::new(AtomicUsize::new(0));
    let background: Vec<_> = (0..6)
        .map(|i| {
            let (arrived, started) = (frame_arrived.clone(), bands_started.clone());
            pool.background.exec(run(move || {
                let arrived = arrived.load(Ordering::SeqCst);
                let band_waited = arrived && started.load(Ordering::SeqCst) < BANDS;
                std::hint::black_box((0..2_000_000u64).fold(i, |a, x| a ^ x));
                (arrived, band_waited)
            }))
        })
        .collect();

    // The frame buffer is a local: the bands borrow it mutably, one each.
    let mut pixels = vec![0u32; WIDTH * HEIGHT];
    let start = Instant::now();
    let band_sums = smartpool::scope(|s| {
        let handles: Vec<_> = pixels
            .chunks_mut(WIDTH * HEIGHT / BANDS)
            .enumerate()
            .map(|(band, rows)| {
                let started = &bands_started;
                s.exec(
                    &pool.frame,
                    run(move || {
                        started.fetch_add(1, Ordering::SeqCst);
                        for (i, pixel) in rows.iter_mut().enumerate() {
                            let (x, y) = (i % WIDTH, band * HEIGHT / BANDS + i / WIDTH);
                            *pixel = ((x ^ y) & 0xFF) as u32; // a checkerboard shade
                        }
                        rows.iter().map(|&p| p as u64).sum::<u64>()
                    }),
                )
            })
            .collect();
        // Every band is queued.
        frame_arrived.store(true, Ordering::SeqCst);
        // Join inside the scope: each band's output, in band order.
        handles
            .into_iter()
            .map(|h| h.join().expect("band task"))
            .collect::<Vec<u64>>()
    });
    println!(
        "frame: {} bands of {} rows shaded in {:?}, on {} worker threads",
        BANDS,
        HEIGHT / BANDS,
        start.elapsed(),
        pool.threads()
    );
    for (band, sum) in band_sums.iter().enumerate() {
        println!("  band {band}: shade sum {sum}");
    }
    // The scope has returned, so `pixels` is ours again.
    let total: u64 = pixels.iter().map(|&p| p as u64).sum();
    assert_eq!(total, band_sums.iter().sum::<u64>());
    println!("whole frame: shade sum {total} (matches the bands)");

    let starts: Vec<(bool, bool)> = background
        .into_iter()
        .map(|h| owned.block_on(h).expect("background task"))
        .collect();
    let before = starts.iter().filter(|(arrived, _)| !arrived).count();
    let overtook = starts
        .iter()
        .filter(|(_, band_waited)| *band_waited)
        .count();
    println!(
        "background: {before} of 6 tasks started before the frame arrived (each worker \
         was free); {overtook} started while a band of the frame waited in the queue"
    );
    owned.close().wait();
    Ok(())
}
