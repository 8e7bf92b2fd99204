//! The priority issue's rows. So far: what `should_yield` costs a task
//! that calls it in a loop (nothing waits, so it answers `false`), on a
//! worker of a HighestFirst pool with two levels, against the same loop
//! without the call; medians of interleaved reps.
//!
//! Full run: `cargo bench -p smartpool-bench --bench priority`
//! CI size:  `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench --bench priority`

use std::hint::black_box;
use std::time::Instant;

use smartpool::prelude::*;

#[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
enum Lv {
    High,
    Low,
}

struct Two {
    high: VecDequeChannel,
    low: VecDequeChannel,
}

impl PoolBehavior for Two {
    type ChannelKey = Lv;
    fn config(&self) -> PoolConfig<Lv> {
        PoolConfig {
            threads: 2,
            schedule: ScheduleAlgorithm::HighestFirst,
            levels: vec![
                vec![ChannelParams {
                    key: Lv::High,
                    complete_on_close: false,
                }],
                vec![ChannelParams {
                    key: Lv::Low,
                    complete_on_close: false,
                }],
            ],
        }
    }
    fn channel(&self, key: Lv) -> &dyn Channel {
        match key {
            Lv::High => &self.high,
            Lv::Low => &self.low,
        }
    }
}

/// ns per iteration of a loop of `n` steps on the low level, each step a
/// little work and (if `check`) a call of `should_yield`.
fn looped(pool: &std::sync::Arc<Pool<Two>>, n: u64, check: bool) -> f64 {
    let h = pool.low.exec(run(move || {
        let start = Instant::now();
        let mut acc = 0u64;
        let mut yields = 0u64;
        for i in 0..n {
            acc = acc.wrapping_mul(31).wrapping_add(black_box(i));
            if check && smartpool::should_yield() {
                yields += 1;
            }
        }
        black_box((acc, yields));
        start.elapsed().as_nanos() as f64 / n as f64
    }));
    futures::executor::block_on(h).unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
    let (reps, n) = if quick {
        (3, 100_000)
    } else {
        (15, 10_000_000)
    };
    let owned = OwnedPool::new(Two {
        high: VecDequeChannel::new(),
        low: VecDequeChannel::new(),
    })
    .expect("pool");
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        if rep % 2 == 0 {
            with.push(looped(&owned.pool, n, true));
            without.push(looped(&owned.pool, n, false));
        } else {
            without.push(looped(&owned.pool, n, false));
            with.push(looped(&owned.pool, n, true));
        }
    }
    let (with, without) = (median(with), median(without));
    println!("should_yield in a loop of {n} steps, {reps} reps, medians (interleaved)");
    println!("  loop without the call   {without:>6.2} ns/step");
    println!("  loop with should_yield  {with:>6.2} ns/step");
    println!(
        "  the call costs          {:>6.2} ns (target: a couple of ns)",
        with - without
    );
}
