//! A voxel world loading around a walking player.
//!
//! The world is made of chunk columns, 16 × 16 blocks wide and 64 high, on
//! a grid. Each frame the player takes a step, the game tells the pool where
//! they stand (`set_focus`, one store), and asks for every chunk within view
//! that it has not asked for yet. The pool's workers always generate the
//! missing chunk nearest to the player next, wherever the player has walked
//! since the chunk was asked for. At the end, chunks still waiting are
//! dropped: nobody needs them any more.
//!
//! Run: `cargo run -p smartpool-spatial --example chunk_loader`

use std::collections::HashSet;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use smartpool::prelude::*;
use smartpool_spatial::SpatialChannel;

/// How far the player sees, in chunks.
const VIEW: i32 = 8;
/// How far the player walks each frame, in chunks.
const STEP: f32 = 1.5;
const FRAMES: u32 = 40;
const FRAME_TIME: Duration = Duration::from_millis(25);
/// What one chunk costs a worker at least: the noise below plus what a real
/// game would do next (lighting, meshing), stood for by a busy wait.
const CHUNK_COST: Duration = Duration::from_millis(3);

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Ch {
    Chunks,
}

/// The game's pool: one spatial channel of chunk jobs, at the centre of
/// each chunk column, in chunk units (`[f32; 2]`: its focus is lock-free).
struct Game {
    chunks: SpatialChannel<[f32; 2]>,
}

impl PoolBehavior for Game {
    type ChannelKey = Ch;
    fn config(&self) -> PoolConfig<Ch> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![vec![ChannelParams {
                key: Ch::Chunks,
                // On close, queued chunks are dropped; those being
                // generated finish.
                complete_on_close: false,
            }]],
        }
    }
    fn channel(&self, _key: Ch) -> &dyn Channel {
        &self.chunks
    }
}

/// A generated chunk: where it is, and how many of its blocks are solid.
struct Chunk {
    #[allow(dead_code)] // a real game would put it in its world map
    at: (i32, i32),
    solid: u32,
}

/// What the workers tell the game.
enum Event {
    /// A worker picked a chunk this far from the player.
    Picked(f32),
    Built(Chunk),
}

/// The CPU job: a height for each of the 16 × 16 block columns from a
/// little hash noise, every block below it solid but for a cave here and
/// there; then the rest of the chunk's cost.
fn generate(x: i32, z: i32) -> Chunk {
    let start = Instant::now();
    let mut solid = 0;
    for bx in 0..16 {
        for bz in 0..16 {
            let (wx, wz) = (x * 16 + bx, z * 16 + bz);
            let height = 20 + noise(wx / 4, wz / 4) % 24 + noise(wx, wz) % 4;
            for y in 0..64u32 {
                let cave = noise(wx ^ ((y as i32) << 8), wz) % 17 == 0;
                if y < height && !cave {
                    solid += 1;
                }
            }
        }
    }
    while start.elapsed() < CHUNK_COST {
        std::hint::spin_loop();
    }
    Chunk { at: (x, z), solid }
}

fn noise(a: i32, b: i32) -> u32 {
    let mut h = (a as u32).wrapping_mul(0x9E37_79B1) ^ (b as u32).wrapping_mul(0x85EB_CA77);
    h ^= h >> 15;
    h = h.wrapping_mul(0xC2B2_AE3D);
    h ^ (h >> 13)
}

/// Where the player stands at `frame`, in chunk units: walking east, then
/// turning north halfway.
fn player_at(frame: u32) -> [f32; 2] {
    let half = FRAMES / 2;
    if frame < half {
        [frame as f32 * STEP, 0.0]
    } else {
        [half as f32 * STEP, (frame - half) as f32 * STEP]
    }
}

fn distance(chunk: [f32; 2], player: [f32; 2]) -> f32 {
    ((chunk[0] - player[0]).powi(2) + (chunk[1] - player[1]).powi(2)).sqrt()
}

/// The first few and the last distances of a list, to one decimal.
fn sketch(distances: &[f32]) -> String {
    let show = |d: &[f32]| {
        d.iter()
            .map(|d| format!("{d:.1}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if distances.len() <= 10 {
        show(distances)
    } else {
        let n = distances.len();
        format!("{} .. {}", show(&distances[..7]), show(&distances[n - 2..]))
    }
}

fn main() {
    let owned = OwnedPool::new(Game {
        chunks: SpatialChannel::new(),
    })
    .expect("valid config");
    let pool = owned.pool.clone();
    let (events_tx, events) = mpsc::channel::<Event>();
    let mut asked = HashSet::new();
    let (mut built, mut solid) = (0, 0);

    println!(
        "The player sees {VIEW} chunks around and walks {STEP} chunks a frame: east, then north.\n\
         The 2 workers cannot keep up, so chunks wait. Each frame: the chunks that came into\n\
         view, those waiting, and how far from the player each chunk the workers picked was,\n\
         in the order they picked them: always the nearest one waiting. (A pick made while\n\
         the game is still asking for the frame's chunks takes the nearest asked for so far.)\n"
    );
    for frame in 0..FRAMES {
        let player = player_at(frame);
        // Tell the pool first: the chunks asked for below, and every chunk
        // still waiting, are now ordered around the new position. One
        // store; the workers' next pick honours it.
        pool.chunks.set_focus(player);

        let (px, pz) = (player[0].round() as i32, player[1].round() as i32);
        let mut new = 0;
        for x in px - VIEW..=px + VIEW {
            for z in pz - VIEW..=pz + VIEW {
                let centre = [x as f32, z as f32];
                if distance(centre, player) <= VIEW as f32 && asked.insert((x, z)) {
                    let (tell, p) = (events_tx.clone(), pool.clone());
                    // The chunk comes back through `tell`; the handle is not
                    // needed (dropping it does not cancel the task).
                    drop(pool.chunks.exec(
                        run(move || {
                            let _ = tell.send(Event::Picked(distance(centre, p.chunks.focus())));
                            let _ = tell.send(Event::Built(generate(x, z)));
                        }),
                        centre,
                    ));
                    new += 1;
                }
            }
        }

        std::thread::sleep(FRAME_TIME); // the rest of the frame: rendering, say

        let mut picked = Vec::new();
        for event in events.try_iter() {
            match event {
                Event::Picked(d) => picked.push(d),
                Event::Built(chunk) => {
                    built += 1;
                    solid += chunk.solid as u64;
                }
            }
        }
        println!(
            "frame {frame:>2}  player at ({:>4.1}, {:>4.1})  {new:>3} new {:>4} waiting  {:>2} picked: {}",
            player[0],
            player[1],
            pool.chunks.len(),
            picked.len(),
            sketch(&picked),
        );
    }

    // Chunks still waiting are not needed any more: close drops them (the
    // channel is not complete_on_close) and lets the running ones finish.
    let waiting = pool.chunks.len();
    drop(pool);
    block_on(owned.close());
    built += events
        .try_iter()
        .filter(|e| matches!(e, Event::Built(_)))
        .count();
    println!(
        "\nclosed: {built} of {} chunks generated ({solid} solid blocks), \
         {waiting} still waiting were dropped.",
        asked.len()
    );
}
