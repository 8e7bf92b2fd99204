//! The suite: every workload on every peer, in one run, reported as medians
//! and ratios to tokio, with the targets of the benchmarks issue.
//!
//! Throughput rows (W1–W5, W11) keep every peer running and interleave them rep
//! by rep (each rep runs every peer once, in an order rotated each rep), so
//! that a change in the machine's load lands on all peers alike. Each peer
//! runs each throughput row in a fresh child process of its own; the
//! parent keeps all of a row's children alive and asks each in turn for
//! one rep. So no peer and no throughput row inherits the allocator state
//! that another left in its process (tokio's W5 read 442 ns after W1 and W2 in
//! one process against 206 without them; our W1 under load read 211–217
//! right after futures' ThreadPool against 177–179 without it; the
//! method is in BENCHMARKS.md). The latency and cost rows (W6–W9) and the memory row (W10)
//! also run each peer in a fresh child process, one peer after another.
//!
//! Full run:  `cargo bench -p smartpool-bench`
//! CI size:   `SMARTPOOL_BENCH_QUICK=1 cargo bench -p smartpool-bench`
//! Threads:   `SMARTPOOL_BENCH_THREADS=4` (default 2)
//! Some rows: `SMARTPOOL_BENCH_ROWS=W4,W9` (default all)
//! Some peers: `SMARTPOOL_BENCH_PEERS=tokio,smartpool` (default all; ratios
//! need tokio)
//! Under load: `SMARTPOOL_BENCH_SPIN=1` keeps one core busy with a spinning
//! `sh` process for the whole run, as on a shared machine.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use smartpool_bench::peers::{
    AsyncExecutor, FuturesPool, Original, Peer, Rayon, Smartpool, SmartpoolCoc, SmartpoolNoSlot,
    Spawner, Tokio,
};
use smartpool_bench::workloads;

const PEERS: [&str; 8] = [
    "tokio",
    "rayon",
    "async-executor",
    "futures ThreadPool",
    "smartpool",
    "smartpool coc",
    "smartpool no slot",
    "smartpool 0.3.2",
];

/// Set in a child process that measures one peer's W10.
const MEMORY_CHILD: &str = "SMARTPOOL_BENCH_MEMORY_CHILD";

/// Set in a child process that measures one peer's latency and cost rows.
const LATENCY_CHILD: &str = "SMARTPOOL_BENCH_LATENCY_CHILD";

/// Set in a child process that runs one throughput row on one peer: the
/// row and the peer's name, `"W1 tokio"`.
const ROW_CHILD: &str = "SMARTPOOL_BENCH_ROW_CHILD";

/// Calls `$f::<Peer>($args)` for every peer, in `PEERS` order.
macro_rules! each_peer {
    ($f:ident($($a:expr),*)) => {
        $f::<Tokio>($($a),*);
        $f::<Rayon>($($a),*);
        $f::<AsyncExecutor>($($a),*);
        $f::<FuturesPool>($($a),*);
        $f::<Smartpool>($($a),*);
        $f::<SmartpoolCoc>($($a),*);
        $f::<SmartpoolNoSlot>($($a),*);
        $f::<Original>($($a),*);
    };
}

struct Sizes {
    quick: bool,
    /// Rows to run (`W1`..`W9`); all when empty.
    rows: Vec<String>,
    /// Peers to run, by name; all when empty.
    peers: Vec<String>,
    threads: usize,
    spawn: usize,
    yield_tasks: usize,
    yields: usize,
    rounds: usize,
    chain: usize,
    wake_samples: usize,
    backlog: usize,
    idle: Duration,
    sparse: Duration,
    /// Throughput rows: runs per peer before measuring, and measured reps.
    warm_up: usize,
    reps: usize,
    /// W10: tasks queued.
    queued: usize,
    spin: bool,
}

impl Sizes {
    fn wants(&self, row: &str) -> bool {
        self.rows.is_empty() || self.rows.iter().any(|r| r == row)
    }

    fn wants_peer(&self, peer: &str) -> bool {
        self.peers.is_empty() || self.peers.iter().any(|p| p.eq_ignore_ascii_case(peer))
    }

    fn from_env() -> Sizes {
        let quick = std::env::var_os("SMARTPOOL_BENCH_QUICK").is_some();
        let threads = std::env::var("SMARTPOOL_BENCH_THREADS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(2);
        let pick = |full, tiny| if quick { tiny } else { full };
        let rows = std::env::var("SMARTPOOL_BENCH_ROWS")
            .map(|r| r.split(',').map(|s| s.trim().to_uppercase()).collect())
            .unwrap_or_default();
        let peers = std::env::var("SMARTPOOL_BENCH_PEERS")
            .map(|p| p.split(',').map(|s| s.trim().to_string()).collect())
            .unwrap_or_default();
        Sizes {
            quick,
            rows,
            peers,
            threads,
            spawn: pick(1_000_000, 10_000),
            yield_tasks: pick(1_000, 50),
            yields: pick(1_000, 50),
            rounds: pick(100_000, 1_000),
            chain: pick(100_000, 1_000),
            wake_samples: pick(10_000, 50),
            backlog: pick(100_000, 500),
            idle: if quick {
                Duration::from_millis(200)
            } else {
                Duration::from_secs(2)
            },
            sparse: if quick {
                Duration::from_millis(300)
            } else {
                Duration::from_secs(3)
            },
            warm_up: pick(2, 1),
            reps: pick(15, 2),
            queued: pick(1_000_000, 10_000),
            // Set and not "0".
            spin: std::env::var_os("SMARTPOOL_BENCH_SPIN")
                .is_some_and(|v| !v.is_empty() && v != "0"),
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Row {
    W1,
    W2,
    W3,
    W4,
    W5,
    W11,
}

impl Row {
    fn title(self) -> &'static str {
        match self {
            Row::W1 => "W1 spawn from outside (ns/task)",
            Row::W2 => "W2 spawn inside (ns/task)",
            Row::W3 => "W3 yield (ns/yield)",
            Row::W4 => "W4 ping-pong (ns/round trip)",
            Row::W5 => "W5 chained spawn (ns/hop)",
            Row::W11 => "W11 ping-pong, a pair per worker (ns/round trip)",
        }
    }

    fn needs_futures(self) -> bool {
        matches!(self, Row::W3 | Row::W4 | Row::W11)
    }

    /// One run: its wall time and how many units (tasks, yields, ...).
    fn run<S: Spawner>(self, s: &S, z: &Sizes) -> (Duration, usize) {
        match self {
            Row::W1 => (workloads::spawn_outside(s, z.spawn), z.spawn),
            Row::W2 => (workloads::spawn_inside(s, z.spawn), z.spawn),
            Row::W3 => (
                workloads::yields(s, z.yield_tasks, z.yields),
                z.yield_tasks * z.yields,
            ),
            Row::W4 => (workloads::ping_pong(s, z.rounds), z.rounds),
            Row::W5 => (workloads::chain(s, z.chain), z.chain),
            Row::W11 => (workloads::ping_pong_pairs(s, z.threads, z.rounds), z.rounds),
        }
    }
}

/// Per-unit times (ns) of every measured run, by row and peer.
type Samples = BTreeMap<(Row, &'static str), Vec<f64>>;

/// The throughput rows: for each row, every peer in a child process of its
/// own (this binary again), all alive at once and run one rep at a time,
/// in turn (see the module doc).
fn throughput(z: &Sizes, samples: &mut Samples) {
    for row in THROUGHPUT
        .into_iter()
        .filter(|row| z.wants(&format!("{row:?}")))
    {
        eprintln!("{}: {} reps, peers interleaved", row.title(), z.reps);
        let mut children: Vec<Child> = PEERS
            .iter()
            .filter(|p| z.wants_peer(p))
            .filter_map(|peer| Child::start(row, peer))
            .collect();
        let n = children.len();
        for rep in 0..z.reps {
            for k in 0..n {
                let child = &mut children[(rep + k) % n];
                let ns = child.rep(row);
                samples.entry((row, child.peer)).or_default().push(ns);
            }
        }
    }
}

/// The throughput rows, in the order they run.
const THROUGHPUT: [Row; 6] = [Row::W1, Row::W2, Row::W3, Row::W4, Row::W5, Row::W11];

/// One peer's child process for one row, warmed up and waiting for its
/// parent to ask for a rep.
struct Child {
    peer: &'static str,
    process: std::process::Child,
    /// `None` once closed, which ends the child.
    to: Option<std::process::ChildStdin>,
    from: std::io::BufReader<std::process::ChildStdout>,
}

impl Child {
    /// Starts `peer`'s child for `row`; `None` if the peer cannot run it.
    fn start(row: Row, peer: &'static str) -> Option<Child> {
        use std::process::Stdio;
        let mut process = child_command(ROW_CHILD, &format!("{row:?} {peer}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: no child process for {peer}: {e}", row.title()));
        let to = process.stdin.take();
        let from = std::io::BufReader::new(process.stdout.take().expect("piped"));
        let mut child = Child {
            peer,
            process,
            to,
            from,
        };
        match child.line(row).as_str() {
            READY => Some(child),
            SKIP => None,
            other => panic!("{}: {peer}'s child said {other:?}", row.title()),
        }
    }

    /// Runs one rep in the child: its time per unit, in nanoseconds.
    fn rep(&mut self, row: Row) -> f64 {
        use std::io::Write;
        let to = self.to.as_mut().expect("open until dropped");
        writeln!(to, "{REP}")
            .and_then(|()| to.flush())
            .unwrap_or_else(|e| panic!("{}: {}'s child is gone: {e}", row.title(), self.peer));
        let line = self.line(row);
        line.parse()
            .unwrap_or_else(|_| panic!("{}: {} answered {line:?}", row.title(), self.peer))
    }

    fn line(&mut self, row: Row) -> String {
        use std::io::BufRead;
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(n) if n > 0 => line.trim().to_string(),
            _ => panic!(
                "{}: {}'s child ended early ({:?})",
                row.title(),
                self.peer,
                self.process.try_wait()
            ),
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        // Closing its stdin ends the child's loop, and the child.
        drop(self.to.take());
        let _ = self.process.wait();
    }
}

/// A child's answers: warmed up and waiting, or unable to run the row.
const READY: &str = "ready";
const SKIP: &str = "skip";
/// A parent's request: run one rep.
const REP: &str = "rep";

/// The throughput row and the peer that a row's child runs, from its
/// [`ROW_CHILD`] value (`"W1 tokio"`).
fn row_and_peer(value: &str) -> (Row, &str) {
    value
        .split_once(' ')
        .and_then(|(row, peer)| {
            let row = THROUGHPUT.into_iter().find(|r| format!("{r:?}") == row)?;
            Some((row, peer))
        })
        .unwrap_or_else(|| panic!("{ROW_CHILD}={value:?}: not a throughput row and a peer"))
}

/// In a child process: if `P` is the peer named `name`, starts it, warms
/// it up on `row`, then runs one rep each time its parent asks, answering
/// with the rep's time per unit, until its stdin closes (or says it
/// cannot run the row).
fn row_child<P: Peer>(name: &str, row: Row, z: &Sizes) {
    use std::io::{BufRead, Write};
    if P::NAME != name {
        return;
    }
    // Locked for each answer only: a print from a pool's thread must not
    // wait for the child's loop.
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .expect("the parent reads");
    };
    if row.needs_futures() && !P::FUTURES {
        say(SKIP);
        return;
    }
    let peer = P::start(z.threads);
    let s = peer.spawner();
    for _ in 0..z.warm_up {
        row.run(&s, z);
    }
    say(READY);
    for line in std::io::stdin().lock().lines() {
        if line.as_deref().ok() != Some(REP) {
            break;
        }
        let (took, units) = row.run(&s, z);
        say(&(took.as_nanos() as f64 / units as f64).to_string());
    }
}

/// A child process of this binary (the suite again), told by `var` what to
/// measure. The parent's spinner, if any, keeps running for the whole run:
/// the child starts none of its own.
fn child_command(var: &str, value: &str) -> std::process::Command {
    let exe = std::env::current_exe().expect("the suite's own path");
    let mut command = std::process::Command::new(exe);
    command.env(var, value).env_remove("SMARTPOOL_BENCH_SPIN");
    command
}

/// In a child process: measures W10 for the peer named `name` and prints
/// it for the parent.
fn memory_child<P: Peer>(name: &str, z: &Sizes) {
    if P::NAME != name {
        return;
    }
    let peer = P::start(z.threads);
    let bytes = workloads::queued_memory(&peer.spawner(), z.threads, z.queued);
    drop(peer);
    println!("W10 bytes per task: {bytes}");
}

/// W10 for every peer, each in a fresh child process (this binary again).
fn memory_rows(z: &Sizes) -> BTreeMap<&'static str, f64> {
    let mut out = BTreeMap::new();
    if !z.wants("W10") {
        return out;
    }
    for peer in PEERS.iter().filter(|p| z.wants_peer(p)) {
        eprintln!("W10 memory per queued task: {peer}");
        let child = child_command(MEMORY_CHILD, peer).output();
        let bytes = child.ok().and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("W10 bytes per task: ")?.trim().parse().ok())
        });
        match bytes {
            Some(bytes) => {
                out.insert(*peer, bytes);
            }
            None => eprintln!("W10: no result from {peer}'s child process"),
        }
    }
    out
}

/// Keeps one core busy (a spinning `sh`) until dropped.
struct Spinner(std::process::Child);

impl Spinner {
    fn start() -> Spinner {
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .expect("a spinning sh");
        Spinner(child)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

#[derive(Default)]
struct Latency {
    wake: BTreeMap<&'static str, Histogram<u64>>,
    urgent: BTreeMap<&'static str, workloads::Priority>,
    idle: BTreeMap<&'static str, Duration>,
    sparse: BTreeMap<&'static str, Duration>,
}

fn latency_rows<P: Peer>(z: &Sizes, out: &mut Latency) {
    if !["W6", "W7", "W8", "W9"].iter().any(|r| z.wants(r)) || !z.wants_peer(P::NAME) {
        return;
    }
    eprintln!("latency and cost rows: {}", P::NAME);
    {
        let peer = P::start(z.threads);
        let s = peer.spawner();
        if z.wants("W6") {
            let every = Duration::from_millis(1);
            out.wake
                .insert(P::NAME, workloads::wake_latency(&s, z.wake_samples, every));
        }
        if z.wants("W7") {
            let (work, every) = (Duration::from_micros(20), Duration::from_millis(1));
            out.urgent
                .insert(P::NAME, workloads::priority(&s, z.backlog, work, every));
        }
        if z.wants("W9") {
            out.sparse.insert(
                P::NAME,
                workloads::sparse_cost(&s, z.sparse, Duration::from_millis(1)),
            );
        }
    }
    if z.wants("W8") {
        out.idle
            .insert(P::NAME, workloads::idle_cost::<P>(z.threads, z.idle));
    }
}

/// In a child process: measures the latency and cost rows of the peer
/// named `name` and prints them for the parent, a histogram as its
/// recorded values and their counts.
fn latency_child<P: Peer>(name: &str, z: &Sizes) {
    if P::NAME != name {
        return;
    }
    let mut lat = Latency::default();
    latency_rows::<P>(z, &mut lat);
    let print = |key: &str, h: &Histogram<u64>| {
        for v in h.iter_recorded() {
            println!("{key} {} {}", v.value_iterated_to(), v.count_at_value());
        }
    };
    if let Some(h) = lat.wake.get(P::NAME) {
        print("wake", h);
    }
    if let Some(p) = lat.urgent.get(P::NAME) {
        print("urgent", &p.urgent);
        println!("drained {}", p.drained.as_nanos());
    }
    if let Some(d) = lat.idle.get(P::NAME) {
        println!("idle {}", d.as_nanos());
    }
    if let Some(d) = lat.sparse.get(P::NAME) {
        println!("sparse {}", d.as_nanos());
    }
}

/// The latency and cost rows (W6–W9), each peer in a fresh child process
/// (this binary again), one after another.
fn latency(z: &Sizes) -> Latency {
    let mut lat = Latency::default();
    if !["W6", "W7", "W8", "W9"].iter().any(|r| z.wants(r)) {
        return lat;
    }
    for peer in PEERS.iter().filter(|p| z.wants_peer(p)) {
        let out = child_command(LATENCY_CHILD, peer)
            .stderr(std::process::Stdio::inherit())
            .output();
        let out = match out {
            Ok(out) if out.status.success() => out,
            Ok(out) => panic!("latency rows: {peer}'s child failed: {}", out.status),
            Err(e) => panic!("latency rows: no child process for {peer}: {e}"),
        };
        let (mut wake, mut urgent) = (None::<Histogram<u64>>, None::<Histogram<u64>>);
        let mut drained = None;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let num = |k: usize| -> u64 {
                fields
                    .get(k)
                    .and_then(|f| f.parse().ok())
                    .unwrap_or_else(|| panic!("latency rows: {peer}'s child said {line:?}"))
            };
            match fields.first().copied() {
                Some(key @ ("wake" | "urgent")) => {
                    let h = if key == "wake" {
                        &mut wake
                    } else {
                        &mut urgent
                    };
                    h.get_or_insert_with(workloads::histogram)
                        .record_n(num(1), num(2))
                        .expect("in bounds");
                }
                Some("drained") => drained = Some(Duration::from_nanos(num(1))),
                Some("idle") => {
                    lat.idle.insert(peer, Duration::from_nanos(num(1)));
                }
                Some("sparse") => {
                    lat.sparse.insert(peer, Duration::from_nanos(num(1)));
                }
                _ => panic!("latency rows: {peer}'s child said {line:?}"),
            }
        }
        if let Some(h) = wake {
            lat.wake.insert(peer, h);
        }
        if let (Some(urgent), Some(drained)) = (urgent, drained) {
            lat.urgent
                .insert(peer, workloads::Priority { urgent, drained });
        }
    }
    lat
}

fn us(ns: u64) -> String {
    let us = ns as f64 / 1e3;
    if us < 1000.0 {
        format!("{us:.1} µs")
    } else {
        format!("{:.1} ms", us / 1e3)
    }
}

/// A row of values, each with its ratio to tokio's.
fn table_row(title: &str, values: &BTreeMap<&str, f64>, show: impl Fn(f64) -> String) -> String {
    let tokio = values.get("tokio").copied();
    let cells: Vec<String> = PEERS
        .iter()
        .map(|p| match (values.get(p), tokio) {
            (Some(&v), Some(t)) if t > 0.0 => format!("{} ({:.2})", show(v), v / t),
            (Some(&v), _) => show(v),
            (None, _) => "n/a".into(),
        })
        .collect();
    format!("| {title} | {} |", cells.join(" | "))
}

fn ratio(values: &BTreeMap<&str, f64>, of: &str, to: &str) -> Option<f64> {
    Some(values.get(of)? / values.get(to)?)
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "n/a",
    }
}

fn plot_w7(lat: &Latency, path: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let quantiles = [0.5, 0.9, 0.99, 0.999, 1.0];
    let root = SVGBackend::new(path, (760, 440)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "W7: urgent task wait under a saturated backlog",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..4f64, (1f64..5e6f64).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(5)
        .x_label_formatter(&|x| match x.round() as i64 {
            0 => "p50".into(),
            1 => "p90".into(),
            2 => "p99".into(),
            3 => "p99.9".into(),
            _ => "max".into(),
        })
        .y_desc("wait (log scale)")
        .y_label_formatter(&|v| {
            if *v >= 1e6 {
                format!("{:.0} s", v / 1e6)
            } else if *v >= 1e3 {
                format!("{:.0} ms", v / 1e3)
            } else {
                format!("{v:.0} µs")
            }
        })
        .draw()?;
    let colors = [RED, BLUE, GREEN, MAGENTA, BLACK, CYAN];
    for (i, peer) in PEERS.iter().enumerate() {
        let Some(p) = lat.urgent.get(peer) else {
            continue;
        };
        let points: Vec<(f64, f64)> = quantiles
            .iter()
            .enumerate()
            .map(|(x, &q)| {
                (
                    x as f64,
                    (p.urgent.value_at_quantile(q) as f64 / 1e3).max(1.0),
                )
            })
            .collect();
        let color = colors[i % colors.len()];
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(*peer)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() {
    let z = Sizes::from_env();
    if let Ok(name) = std::env::var(MEMORY_CHILD) {
        each_peer!(memory_child(&name, &z));
        return;
    }
    if let Ok(value) = std::env::var(ROW_CHILD) {
        let (row, peer) = row_and_peer(&value);
        each_peer!(row_child(peer, row, &z));
        return;
    }
    if let Ok(name) = std::env::var(LATENCY_CHILD) {
        each_peer!(latency_child(&name, &z));
        return;
    }
    eprintln!(
        "smartpool suite: {} threads{}{}",
        z.threads,
        if z.quick { ", quick (CI) sizes" } else { "" },
        if z.spin {
            ", one core kept busy by a spinning process"
        } else {
            ""
        }
    );
    let _spinner = z.spin.then(Spinner::start);
    let started = Instant::now();
    let mut samples = Samples::new();
    throughput(&z, &mut samples);
    let lat = latency(&z);
    let w10 = memory_rows(&z);

    // ---- report ---------------------------------------------------------
    let mut lines = vec![
        format!(
            "| row ({} threads{}) | {} |",
            z.threads,
            if z.spin { ", one core busy" } else { "" },
            PEERS.join(" | ")
        ),
        format!("|---|{}", "---|".repeat(PEERS.len())),
    ];
    let mut medians: BTreeMap<Row, BTreeMap<&str, f64>> = BTreeMap::new();
    for ((row, peer), v) in &samples {
        if let Some(m) = median(v) {
            medians.entry(*row).or_default().insert(peer, m);
        }
    }
    for (row, values) in &medians {
        lines.push(table_row(row.title(), values, |v| format!("{v:.0}")));
    }
    let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64;
    let w6p50: BTreeMap<&str, f64> = lat.wake.iter().map(|(p, h)| (*p, q(h, 0.5))).collect();
    let w6p99: BTreeMap<&str, f64> = lat.wake.iter().map(|(p, h)| (*p, q(h, 0.99))).collect();
    lines.push(table_row(
        "W6 wake from sleep p50",
        &w6p50,
        |v| us(v as u64),
    ));
    lines.push(table_row(
        "W6 wake from sleep p99",
        &w6p99,
        |v| us(v as u64),
    ));
    let w7 = |f: &dyn Fn(&workloads::Priority) -> f64| -> BTreeMap<&str, f64> {
        lat.urgent.iter().map(|(p, r)| (*p, f(r))).collect()
    };
    let w7p50 = w7(&|r| q(&r.urgent, 0.5));
    let w7p99 = w7(&|r| q(&r.urgent, 0.99));
    let w7max = w7(&|r| r.urgent.max() as f64);
    let w7drain = w7(&|r| r.drained.as_nanos() as f64);
    lines.push(table_row("W7 urgent wait p50", &w7p50, |v| us(v as u64)));
    lines.push(table_row("W7 urgent wait p99", &w7p99, |v| us(v as u64)));
    lines.push(table_row("W7 urgent wait max", &w7max, |v| us(v as u64)));
    lines.push(table_row("W7 backlog drain", &w7drain, |v| us(v as u64)));
    let cpu = |m: &BTreeMap<&'static str, Duration>| -> BTreeMap<&str, f64> {
        m.iter().map(|(p, d)| (*p, d.as_secs_f64() * 1e3)).collect()
    };
    let w8 = cpu(&lat.idle);
    let w9 = cpu(&lat.sparse);
    lines.push(table_row("W8 idle CPU (µs/s)", &w8, |v| {
        format!("{:.1}", v * 1e3)
    }));
    lines.push(table_row("W9 sparse load CPU (ms/s)", &w9, |v| {
        format!("{v:.1}")
    }));
    lines.push(table_row("W10 memory per queued task (B)", &w10, |v| {
        format!("{v:.0}")
    }));

    let ours = "smartpool";
    let r = |row: Row| medians.get(&row).and_then(|m| ratio(m, ours, "tokio"));
    let mut targets: Vec<(String, Option<f64>, Option<bool>)> = vec![
        (
            "W1 ≤ 0.5 × tokio".into(),
            r(Row::W1),
            r(Row::W1).map(|x| x <= 0.5),
        ),
        (
            "W2 ≤ 0.4 × tokio".into(),
            r(Row::W2),
            r(Row::W2).map(|x| x <= 0.4),
        ),
        (
            "W3 ≤ 1.0 × tokio".into(),
            r(Row::W3),
            r(Row::W3).map(|x| x <= 1.0),
        ),
        (
            "W4 ≤ 1.0 × tokio".into(),
            r(Row::W4),
            r(Row::W4).map(|x| x <= 1.0),
        ),
        (
            "W5 ≤ 0.5 × tokio".into(),
            r(Row::W5),
            r(Row::W5).map(|x| x <= 0.5),
        ),
        (
            "W3 ≤ 1.0 × tokio, complete_on_close".into(),
            medians
                .get(&Row::W3)
                .and_then(|m| ratio(m, "smartpool coc", "tokio")),
            medians
                .get(&Row::W3)
                .and_then(|m| ratio(m, "smartpool coc", "tokio"))
                .map(|x| x <= 1.0),
        ),
        (
            "W5 ≥ 3 × smartpool 0.3.2's throughput".into(),
            medians
                .get(&Row::W5)
                .and_then(|m| ratio(m, "smartpool 0.3.2", ours)),
            medians
                .get(&Row::W5)
                .and_then(|m| ratio(m, "smartpool 0.3.2", ours))
                .map(|x| x >= 3.0),
        ),
        (
            "W6 p50 ≤ 1.0 × tokio".into(),
            ratio(&w6p50, ours, "tokio"),
            ratio(&w6p50, ours, "tokio").map(|x| x <= 1.0),
        ),
        (
            "W7 urgent p50 ≤ 10 µs".into(),
            w7p50.get(ours).map(|v| v / 1e3),
            w7p50.get(ours).map(|v| *v <= 10e3),
        ),
        (
            "W7 urgent p99 ≤ 25 µs".into(),
            w7p99.get(ours).map(|v| v / 1e3),
            w7p99.get(ours).map(|v| *v <= 25e3),
        ),
        (
            "W7 drain ≤ 1.05 × tokio".into(),
            ratio(&w7drain, ours, "tokio"),
            ratio(&w7drain, ours, "tokio").map(|x| x <= 1.05),
        ),
        (
            "W8 idle < 100 µs/s".into(),
            w8.get(ours).map(|v| v * 1e3),
            w8.get(ours).map(|v| *v < 0.1),
        ),
        (
            "W9 ≤ 1.0 × tokio".into(),
            ratio(&w9, ours, "tokio"),
            ratio(&w9, ours, "tokio").map(|x| x <= 1.0),
        ),
    ];
    // Resident memory is counted in whole pages: the pages at the ends of
    // the queue's and the heap's touched ranges count whole, so a reading
    // carries up to a page or so over the tasks' own bytes (96.002 B at 10⁶
    // tasks: 80-byte chunks, 16-byte slots, and 2 KiB of a partly touched
    // page). The check allows one page over the whole queue, its
    // resolution, not a byte a task more.
    let page_per_task = 4096.0 / z.queued as f64;
    targets.push((
        "W10 ≤ 96 B a queued task".into(),
        w10.get(ours).copied(),
        w10.get(ours).map(|b| *b <= 96.0 + page_per_task),
    ));
    println!(
        "\n## Results (value, and ratio to tokio in parentheses; {:.0} s)\n",
        started.elapsed().as_secs_f64()
    );
    for l in &lines {
        println!("{l}");
    }
    println!("\n## Targets\n\n| target | measured | verdict |\n|---|---|---|");
    for (t, m, ok) in &targets {
        let m = m.map_or("n/a".into(), |m| format!("{m:.2}"));
        println!("| {t} | {m} | {} |", verdict(*ok));
    }
    // The committed figure is an idle full run's: a quick run or one under
    // load writes its plot to the temporary directory.
    let svg = if z.quick || z.spin {
        std::env::temp_dir().join("smartpool-w7-latency.svg")
    } else {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("w7-latency.svg")
    };
    if lat.urgent.is_empty() {
        return;
    }
    match plot_w7(&lat, &svg) {
        Ok(()) => println!("\nW7 plot: {}", svg.display()),
        Err(e) => println!("\nW7 plot failed: {e}"),
    }
}
