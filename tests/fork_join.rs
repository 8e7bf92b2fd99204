//! Recursive divide and conquer with `scope`: each task spawns its halves
//! and waits for them. A waiting scope runs its own not-yet-started tasks
//! first, newest first (rayon's work-first order), so this completes on any
//! number of threads, 1 included, without deep nesting.
//! Shapes from rayon-core's `join` tests (`sort`, fibonacci) and its
//! `scope` tests (`divide_and_conquer`).

mod common;

use common::{scaled, Flat, FAILSAFE};
use smartpool::prelude::*;
use std::sync::Arc;

fn pool(threads: usize) -> OwnedPool<Flat> {
    OwnedPool::new(Flat::new(threads)).unwrap()
}

fn fib(pool: &Pool<Flat>, n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    let (mut a, mut b) = (0, 0);
    smartpool::scope(|s| {
        s.exec(&pool.work, run(|| a = fib(pool, n - 1)));
        s.exec(&pool.work, run(|| b = fib(pool, n - 2)));
    });
    a + b
}

fn quicksort(pool: &Pool<Flat>, v: &mut [u32]) {
    if v.len() <= 16 {
        v.sort_unstable();
        return;
    }
    let pivot = v[v.len() / 2];
    let (mut lo, mut hi) = (0, v.len() - 1);
    loop {
        while v[lo] < pivot {
            lo += 1;
        }
        while v[hi] > pivot {
            hi -= 1;
        }
        if lo >= hi {
            break;
        }
        v.swap(lo, hi);
        lo += 1;
        hi -= 1;
    }
    let (left, right) = v.split_at_mut(hi + 1);
    smartpool::scope(|s| {
        s.exec(&pool.work, run(|| quicksort(pool, left)));
        s.exec(&pool.work, run(|| quicksort(pool, right)));
    });
}

/// Runs `f` as a task of `owned`'s pool and waits for it, with a fail-safe.
fn inside<T: Send + 'static>(
    owned: &OwnedPool<Flat>,
    f: impl FnOnce(&Pool<Flat>) -> T + Send + 'static,
) -> T {
    let pool = owned.pool.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    drop(owned.pool.work.exec(run(move || {
        let _ = tx.send(f(&pool));
    })));
    match rx.recv_timeout(FAILSAFE * 3) {
        Ok(value) => value,
        Err(_) => {
            // A deadlocked pool cannot be closed or dropped: end the run.
            eprintln!("fork_join: deadlocked");
            std::process::abort();
        }
    }
}

#[test]
fn fibonacci_by_scopes_completes_on_one_thread() {
    let owned = pool(1);
    let n = if cfg!(miri) { 8 } else { 22 };
    assert_eq!(
        inside(&owned, move |p| fib(p, n)),
        if cfg!(miri) { 21 } else { 17_711 }
    );
    futures::executor::block_on(owned.close());
}

#[test]
fn fibonacci_by_scopes_completes_on_many_threads() {
    for threads in [2, 4, 8] {
        let owned = pool(threads);
        let n = if cfg!(miri) { 8 } else { 22 };
        assert_eq!(
            inside(&owned, move |p| fib(p, n)),
            if cfg!(miri) { 21 } else { 17_711 }
        );
        futures::executor::block_on(owned.close());
    }
}

#[test]
fn quicksort_by_scopes_completes_on_one_and_on_many_threads() {
    for threads in [1, 3] {
        let owned = pool(threads);
        let len = scaled(200_000);
        // A fixed pseudo-random sequence (xorshift).
        let mut x = 0x2545_f491_u32;
        let data: Vec<u32> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x
            })
            .collect();
        let sorted = inside(&owned, move |p| {
            let mut data = data;
            quicksort(p, &mut data);
            data
        });
        assert!(sorted.windows(2).all(|w| w[0] <= w[1]), "sorted");
        futures::executor::block_on(owned.close());
    }
}

/// A binary tree of scopes, 2^depth leaves, on more threads than cores
/// (rayon-core's `scope::divide_and_conquer`; the 2^22 joins on 22
/// threads deadlocked about half the time).
#[test]
fn a_deep_tree_of_scopes_completes_on_many_threads() {
    fn tree(pool: &Pool<Flat>, depth: u32, leaves: &std::sync::atomic::AtomicUsize) {
        if depth == 0 {
            leaves.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        smartpool::scope(|s| {
            s.exec(&pool.work, run(|| tree(pool, depth - 1, leaves)));
            s.exec(&pool.work, run(|| tree(pool, depth - 1, leaves)));
        });
    }
    let depth = if cfg!(miri) { 4 } else { 16 };
    for threads in [1, 22] {
        let owned = pool(threads);
        let leaves = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let l = leaves.clone();
        inside(&owned, move |p| tree(p, depth, &l));
        assert_eq!(leaves.load(std::sync::atomic::Ordering::SeqCst), 1 << depth);
        futures::executor::block_on(owned.close());
    }
}
