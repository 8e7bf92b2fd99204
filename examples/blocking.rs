//! Blocking work beside compute work on one pool.
//!
//! A compute level runs CPU-bound tasks (hashing blocks of bytes) on the
//! pool's workers; a file level reads files. Reading blocks the thread, so
//! the file tasks hand the read to `spawn_blocking` and await it: the
//! workers stay free for compute meanwhile. A task that must block in the
//! middle of its work (here: waiting on a lock held elsewhere) wraps the
//! wait in `block_in_place`, and a stand-in thread serves the worker's
//! place meanwhile. The main thread waits with `pool.block_on`, running
//! the pool's tasks while it waits.
//!
//! Run: `cargo run --release --example blocking`

use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use smartpool::prelude::*;
use smartpool::{block_in_place, BlockingConfig};

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Level {
    Compute,
    Files,
}

struct App {
    compute: VecDequeChannel,
    files: VecDequeChannel,
}

impl PoolBehavior for App {
    type ChannelKey = Level;

    fn config(&self) -> PoolConfig<Level> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Level::Compute,
                    complete_on_close: true,
                }],
                vec![ChannelParams {
                    key: Level::Files,
                    complete_on_close: true,
                }],
            ],
        }
    }

    fn channel(&self, key: Level) -> &dyn Channel {
        match key {
            Level::Compute => &self.compute,
            Level::Files => &self.files,
        }
    }

    // At most 8 reads at once; idle reader threads exit after a second.
    fn blocking(&self) -> BlockingConfig {
        BlockingConfig {
            max_threads: 8,
            keep_alive: Duration::from_secs(1),
            ..BlockingConfig::default()
        }
    }
}

/// CPU work: a hash of `bytes`, folded 200 times.
fn digest(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for round in 0..200u32 {
        round.hash(&mut h);
        bytes.hash(&mut h);
    }
    h.finish()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Some files to read: this crate's sources.
    let files: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();

    let owned = OwnedPool::new(App {
        compute: VecDequeChannel::new(),
        files: VecDequeChannel::new(),
    })?;
    let pool = owned.pool.clone();
    let start = Instant::now();

    // Compute: 64 blocks of 64 KiB to digest, on the workers.
    let compute: Vec<_> = (0..64u8)
        .map(|i| pool.compute.exec(run(move || digest(&vec![i; 64 << 10]))))
        .collect();

    // Files: each task reads its file on a blocking thread, then digests
    // it on a worker.
    let reads: Vec<_> = files
        .iter()
        .cloned()
        .map(|path| {
            let pool = pool.clone();
            pool.clone().files.exec(async move {
                let bytes = pool
                    .spawn_blocking(move || std::fs::read(&path))
                    .await
                    .expect("the read ran")?;
                Ok::<_, std::io::Error>((bytes.len(), digest(&bytes)))
            })
        })
        .collect();

    // A task that blocks in the middle of its work: the lock is held by
    // the main thread for 50 ms; the worker's place is served meanwhile.
    let shared_state = Arc::new(Mutex::new(0u64));
    let held = shared_state.lock().unwrap();
    let blocker = {
        let state = shared_state.clone();
        pool.compute.exec(run(move || {
            let mut value = block_in_place(|| state.lock().unwrap());
            *value += 1;
            *value
        }))
    };
    std::thread::sleep(Duration::from_millis(50));
    drop(held);

    // The main thread waits, and runs pool tasks while it does.
    let (digests, read_bytes, blocked) = pool.block_on(async {
        let mut digests = 0u64;
        for h in compute {
            digests ^= h.await?;
        }
        let mut read_bytes = 0;
        for h in reads {
            let (len, d) = h.await??;
            read_bytes += len;
            digests ^= d;
        }
        Ok::<_, Box<dyn std::error::Error>>((digests, read_bytes, blocker.await?))
    })?;

    println!(
        "digested 64 blocks and {} files ({} KiB) in {:.1} ms, xor of digests {:016x}",
        files.len(),
        read_bytes >> 10,
        start.elapsed().as_secs_f64() * 1e3,
        digests
    );
    println!(
        "the blocked task got the lock after the main thread let it go: value {blocked}; \
         {} blocking thread(s) alive",
        pool.blocking_threads()
    );
    owned.close().wait();
    Ok(())
}
