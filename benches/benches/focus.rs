//! The spatial channel's focus cell: the `atomic` crate's `Atomic<P>` (which
//! needs bytemuck's `NoUninit` of the user's point type) against crossbeam's
//! `AtomicCell<P>` (which needs `Copy`; a point of 8 bytes wrapped 8-aligned,
//! as `smartpool-spatial` stores it), ns per load (what each pop does) and
//! per store (`set_focus`), alone and with a second thread loading the same
//! cell meanwhile. Medians of 5 runs of 2·10⁷ operations each.
//!
//! `cargo bench -p smartpool-bench --bench focus`
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use atomic::Atomic;
use crossbeam_utils::atomic::AtomicCell;

trait Cell<P>: Sync {
    fn load(&self) -> P;
    fn store(&self, p: P);
}
impl<P: bytemuck::NoUninit + Copy + Sync + Send> Cell<P> for Atomic<P> {
    fn load(&self) -> P {
        Atomic::load(self, Ordering::Relaxed)
    }
    fn store(&self, p: P) {
        Atomic::store(self, p, Ordering::Relaxed)
    }
}
impl<P: Copy + Send> Cell<P> for AtomicCell<P> {
    fn load(&self) -> P {
        AtomicCell::load(self)
    }
    fn store(&self, p: P) {
        AtomicCell::store(self, p)
    }
}
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct Aligned<P>(P);
struct Word<P>(AtomicCell<Aligned<P>>);
impl<P: Copy + Send> Cell<P> for Word<P> {
    fn load(&self) -> P {
        self.0.load().0
    }
    fn store(&self, p: P) {
        self.0.store(Aligned(p))
    }
}

/// Operations per timed run (`SMARTPOOL_BENCH_QUICK`: CI's size).
fn ops() -> u32 {
    if std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some() {
        100_000
    } else {
        20_000_000
    }
}

fn time<P: Copy + Default>(
    cell: &dyn Cell<P>,
    contended: bool,
    make: impl Fn(u32) -> P,
) -> (f64, f64) {
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        if contended {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    black_box(cell.load());
                }
            });
        }
        let n = ops();
        let t = Instant::now();
        for _ in 0..n {
            black_box(cell.load());
        }
        let load = t.elapsed().as_nanos() as f64 / n as f64;
        let t = Instant::now();
        for i in 0..n {
            cell.store(make(i));
        }
        let store = t.elapsed().as_nanos() as f64 / n as f64;
        stop.store(true, Ordering::Relaxed);
        (load, store)
    })
}

fn row<P: bytemuck::NoUninit + Copy + Default + Send + Sync>(
    name: &str,
    make: impl Fn(u32) -> P + Copy,
    word: bool,
) {
    for contended in [false, true] {
        let a = Atomic::new(P::default());
        let c = AtomicCell::new(P::default());
        let w = Word(AtomicCell::new(Aligned(P::default())));
        let mut ra = vec![];
        let mut rc = vec![];
        for _ in 0..5 {
            ra.push(time(&a, contended, make));
            rc.push(if word {
                time(&w, contended, make)
            } else {
                time(&c, contended, make)
            });
        }
        let med = |v: &Vec<(f64, f64)>, f: fn(&(f64, f64)) -> f64| {
            let mut x: Vec<f64> = v.iter().map(f).collect();
            x.sort_by(|a, b| a.partial_cmp(b).unwrap());
            x[2]
        };
        println!("| {name} | {} | atomic: load {:.1} store {:.1} | crossbeam{}: load {:.1} store {:.1} | lock-free: atomic {} crossbeam {} |",
            if contended { "a second thread loading" } else { "alone" },
            med(&ra, |r| r.0), med(&ra, |r| r.1), if word { " (8-aligned)" } else { "" }, med(&rc, |r| r.0), med(&rc, |r| r.1),
            Atomic::<P>::is_lock_free(), if word { AtomicCell::<Aligned<P>>::is_lock_free() } else { AtomicCell::<P>::is_lock_free() });
    }
}

fn main() {
    println!("| point | readers | atomic crate, ns | crossbeam, ns | lock-free |");
    println!("|---|---|---|---|---|");
    row::<[f32; 2]>("[f32; 2]", |i| [i as f32; 2], true);
    row::<[f32; 3]>("[f32; 3]", |i| [i as f32; 3], false);
    row::<[f64; 3]>("[f64; 3]", |i| [i as f64; 3], false);
}
