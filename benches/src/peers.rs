//! Every executor behind one interface, each through its native API.
//!
//! A [`Peer`] owns a running pool of `threads` workers; its [`Spawner`] is a
//! cheap handle that submits work from any thread, inside the pool or not.

use std::future::Future;
use std::sync::Arc;

/// Submits work to a running pool.
pub trait Spawner: Clone + Send + Sync + 'static {
    /// Runs a closure on the pool, detached.
    fn spawn(&self, f: impl FnOnce() + Send + 'static);
    /// Runs a future on the pool, detached. Only for peers with `FUTURES`.
    fn spawn_future(&self, f: impl Future<Output = ()> + Send + 'static);
    /// Runs an urgent closure: on a higher level where the peer has levels,
    /// the same as `spawn` where it has not.
    fn spawn_urgent(&self, f: impl FnOnce() + Send + 'static) {
        self.spawn(f);
    }
    /// The peer's own way to yield (goes back through its queue).
    fn yield_now(&self) -> impl Future<Output = ()> + Send + 'static {
        crate::YieldNow::new()
    }
}

/// A running pool.
pub trait Peer: Sized {
    const NAME: &'static str;
    /// Whether it runs futures (rayon and smartpool 0.3.2's futures 0.1 API
    /// do not, here).
    const FUTURES: bool;
    /// Whether it has priority levels.
    const LEVELS: bool;
    type Spawner: Spawner;
    fn start(threads: usize) -> Self;
    fn spawner(&self) -> Self::Spawner;
}

// ---- tokio -------------------------------------------------------------

pub struct Tokio(tokio::runtime::Runtime);

impl Peer for Tokio {
    const NAME: &'static str = "tokio";
    const FUTURES: bool = true;
    const LEVELS: bool = false;
    type Spawner = tokio::runtime::Handle;
    fn start(threads: usize) -> Tokio {
        Tokio(
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .build()
                .expect("tokio runtime"),
        )
    }
    fn spawner(&self) -> tokio::runtime::Handle {
        self.0.handle().clone()
    }
}

impl Spawner for tokio::runtime::Handle {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        drop(tokio::runtime::Handle::spawn(self, async move { f() }));
    }
    fn spawn_future(&self, f: impl Future<Output = ()> + Send + 'static) {
        drop(tokio::runtime::Handle::spawn(self, f));
    }
    fn yield_now(&self) -> impl Future<Output = ()> + Send + 'static {
        tokio::task::yield_now()
    }
}

// ---- rayon -------------------------------------------------------------

pub struct Rayon(Arc<rayon::ThreadPool>);

impl Peer for Rayon {
    const NAME: &'static str = "rayon";
    const FUTURES: bool = false;
    const LEVELS: bool = false;
    type Spawner = Arc<rayon::ThreadPool>;
    fn start(threads: usize) -> Rayon {
        Rayon(Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("rayon pool"),
        ))
    }
    fn spawner(&self) -> Arc<rayon::ThreadPool> {
        self.0.clone()
    }
}

impl Spawner for Arc<rayon::ThreadPool> {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        rayon::ThreadPool::spawn(self, f);
    }
    fn spawn_future(&self, _f: impl Future<Output = ()> + Send + 'static) {
        unreachable!("rayon runs no futures");
    }
}

// ---- async-executor ------------------------------------------------------

pub struct AsyncExecutor {
    executor: Arc<async_executor::Executor<'static>>,
    stop: Option<futures::channel::oneshot::Sender<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Peer for AsyncExecutor {
    const NAME: &'static str = "async-executor";
    const FUTURES: bool = true;
    const LEVELS: bool = false;
    type Spawner = Arc<async_executor::Executor<'static>>;
    fn start(threads: usize) -> AsyncExecutor {
        use futures::FutureExt;
        let executor = Arc::new(async_executor::Executor::new());
        let (stop, stopped) = futures::channel::oneshot::channel::<()>();
        let stopped = stopped.shared();
        let threads = (0..threads)
            .map(|_| {
                let (executor, stopped) = (executor.clone(), stopped.clone());
                std::thread::spawn(move || {
                    let _ = futures_lite::future::block_on(executor.run(stopped));
                })
            })
            .collect();
        AsyncExecutor {
            executor,
            stop: Some(stop),
            threads,
        }
    }
    fn spawner(&self) -> Arc<async_executor::Executor<'static>> {
        self.executor.clone()
    }
}

impl Drop for AsyncExecutor {
    fn drop(&mut self) {
        drop(self.stop.take());
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Spawner for Arc<async_executor::Executor<'static>> {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        async_executor::Executor::spawn(self, async move { f() }).detach();
    }
    fn spawn_future(&self, f: impl Future<Output = ()> + Send + 'static) {
        async_executor::Executor::spawn(self, f).detach();
    }
    fn yield_now(&self) -> impl Future<Output = ()> + Send + 'static {
        futures_lite::future::yield_now()
    }
}

// ---- futures' ThreadPool -----------------------------------------------

pub struct FuturesPool(futures::executor::ThreadPool);

impl Peer for FuturesPool {
    const NAME: &'static str = "futures ThreadPool";
    const FUTURES: bool = true;
    const LEVELS: bool = false;
    type Spawner = futures::executor::ThreadPool;
    fn start(threads: usize) -> FuturesPool {
        FuturesPool(
            futures::executor::ThreadPool::builder()
                .pool_size(threads)
                .create()
                .expect("futures pool"),
        )
    }
    fn spawner(&self) -> futures::executor::ThreadPool {
        self.0.clone()
    }
}

impl Spawner for futures::executor::ThreadPool {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        self.spawn_ok(async move { f() });
    }
    fn spawn_future(&self, f: impl Future<Output = ()> + Send + 'static) {
        self.spawn_ok(f);
    }
}

// ---- smartpool ---------------------------------------------------------

pub mod ours {
    use smartpool::prelude::*;

    #[derive(Copy, Clone, Eq, PartialEq, Hash, Debug)]
    pub enum Level {
        Urgent,
        Normal,
    }

    /// Two FIFO levels: urgent above normal.
    pub struct TwoLevels {
        pub urgent: VecDequeChannel,
        pub normal: VecDequeChannel,
        pub threads: usize,
        /// Both channels `complete_on_close` (close waits for their tasks,
        /// which costs a count per task), or neither.
        pub complete_on_close: bool,
        /// Workers reserved for the urgent level.
        pub reserved: usize,
    }

    impl PoolBehavior for TwoLevels {
        type ChannelKey = Level;
        fn config(&self) -> PoolConfig<Level> {
            PoolConfig {
                threads: self.threads,
                schedule: ScheduleAlgorithm::HighestFirst,
                levels: vec![
                    vec![ChannelParams {
                        key: Level::Urgent,
                        complete_on_close: self.complete_on_close,
                    }],
                    vec![ChannelParams {
                        key: Level::Normal,
                        complete_on_close: self.complete_on_close,
                    }],
                ],
            }
        }
        fn channel(&self, key: Level) -> &dyn Channel {
            match key {
                Level::Urgent => &self.urgent,
                Level::Normal => &self.normal,
            }
        }
        fn level_options(&self) -> Vec<smartpool::LevelOptions> {
            vec![smartpool::LevelOptions::new().reserve(self.reserved)]
        }
    }
}

pub struct Smartpool(smartpool::OwnedPool<ours::TwoLevels>);

impl Peer for Smartpool {
    const NAME: &'static str = "smartpool";
    const FUTURES: bool = true;
    const LEVELS: bool = true;
    type Spawner = Arc<smartpool::Pool<ours::TwoLevels>>;
    fn start(threads: usize) -> Smartpool {
        Smartpool(
            smartpool::OwnedPool::new(ours::TwoLevels {
                urgent: smartpool::VecDequeChannel::new(),
                normal: smartpool::VecDequeChannel::new(),
                threads,
                complete_on_close: false,
                reserved: 0,
            })
            .expect("smartpool"),
        )
    }
    fn spawner(&self) -> Arc<smartpool::Pool<ours::TwoLevels>> {
        self.0.pool.clone()
    }
}

/// smartpool with both channels `complete_on_close`: close waits for every
/// task, which counts each one in and out (tokio's runtime drops its tasks
/// at shutdown, like the default peer's channels).
pub struct SmartpoolCoc(smartpool::OwnedPool<ours::TwoLevels>);

impl Peer for SmartpoolCoc {
    const NAME: &'static str = "smartpool coc";
    const FUTURES: bool = true;
    const LEVELS: bool = true;
    type Spawner = Arc<smartpool::Pool<ours::TwoLevels>>;
    fn start(threads: usize) -> SmartpoolCoc {
        SmartpoolCoc(
            smartpool::OwnedPool::new(ours::TwoLevels {
                urgent: smartpool::VecDequeChannel::new(),
                normal: smartpool::VecDequeChannel::new(),
                threads,
                complete_on_close: true,
                reserved: 0,
            })
            .expect("smartpool"),
        )
    }
    fn spawner(&self) -> Arc<smartpool::Pool<ours::TwoLevels>> {
        self.0.pool.clone()
    }
}

/// smartpool with both channels built `without_lifo_slot`: every task
/// submitted on a worker goes to its local queue, where the other workers
/// may steal it at once (the default before the stealable slot).
pub struct SmartpoolNoSlot(smartpool::OwnedPool<ours::TwoLevels>);

impl Peer for SmartpoolNoSlot {
    const NAME: &'static str = "smartpool no slot";
    const FUTURES: bool = true;
    const LEVELS: bool = true;
    type Spawner = Arc<smartpool::Pool<ours::TwoLevels>>;
    fn start(threads: usize) -> SmartpoolNoSlot {
        SmartpoolNoSlot(
            smartpool::OwnedPool::new(ours::TwoLevels {
                urgent: smartpool::VecDequeChannel::without_lifo_slot(),
                normal: smartpool::VecDequeChannel::without_lifo_slot(),
                threads,
                complete_on_close: false,
                reserved: 0,
            })
            .expect("smartpool"),
        )
    }
    fn spawner(&self) -> Arc<smartpool::Pool<ours::TwoLevels>> {
        self.0.pool.clone()
    }
}

impl Spawner for Arc<smartpool::Pool<ours::TwoLevels>> {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        use smartpool::Exec;
        // Fire and forget, as the other peers spawn (rayon's `spawn`,
        // async-executor's `detach`, tokio's dropped handle).
        self.normal
            .exec_detached(smartpool::run(f))
            .expect("the pool is open");
    }
    fn spawn_future(&self, f: impl Future<Output = ()> + Send + 'static) {
        use smartpool::Exec;
        self.normal.exec_detached(f).expect("the pool is open");
    }
    fn spawn_urgent(&self, f: impl FnOnce() + Send + 'static) {
        use smartpool::Exec;
        self.urgent
            .exec_detached(smartpool::run(f))
            .expect("the pool is open");
    }
}

// ---- smartpool 0.3.2 ---------------------------------------------------

pub mod original {
    use smartpool_old::prelude::setup::*;

    #[derive(Copy, Clone, Eq, PartialEq, Debug)]
    pub enum Level {
        Urgent,
        Normal,
    }

    /// The same two levels, on the original's API.
    pub struct TwoLevels {
        pub urgent: VecDequeChannel,
        pub normal: VecDequeChannel,
        pub threads: u32,
    }

    impl PoolBehavior for TwoLevels {
        type ChannelKey = Level;
        fn config(&mut self) -> PoolConfig<Self> {
            PoolConfig {
                threads: self.threads,
                schedule: ScheduleAlgorithm::HighestFirst,
                levels: vec![
                    vec![ChannelParams {
                        key: Level::Urgent,
                        complete_on_close: false,
                    }],
                    vec![ChannelParams {
                        key: Level::Normal,
                        complete_on_close: false,
                    }],
                ],
            }
        }
        fn touch_channel<O>(&self, key: Level, mut toucher: impl ChannelToucher<O>) -> O {
            match key {
                Level::Urgent => toucher.touch(&self.urgent),
                Level::Normal => toucher.touch(&self.normal),
            }
        }
        fn touch_channel_mut<O>(
            &mut self,
            key: Level,
            mut toucher: impl ChannelToucherMut<O>,
        ) -> O {
            match key {
                Level::Urgent => toucher.touch_mut(&mut self.urgent),
                Level::Normal => toucher.touch_mut(&mut self.normal),
            }
        }
        fn followup(&self, from: Level, task: RunningTask) {
            match from {
                Level::Urgent => self.urgent.submit(task),
                Level::Normal => self.normal.submit(task),
            }
        }
    }
}

pub struct Original(Option<smartpool_old::prelude::OwnedPool<original::TwoLevels>>);

impl Peer for Original {
    const NAME: &'static str = "smartpool 0.3.2";
    const FUTURES: bool = false;
    const LEVELS: bool = true;
    type Spawner = Arc<smartpool_old::prelude::Pool<original::TwoLevels>>;
    fn start(threads: usize) -> Original {
        Original(Some(
            smartpool_old::prelude::OwnedPool::new(original::TwoLevels {
                urgent: smartpool_old::prelude::setup::VecDequeChannel::new(),
                normal: smartpool_old::prelude::setup::VecDequeChannel::new(),
                threads: threads as u32,
            })
            .expect("smartpool 0.3.2"),
        ))
    }
    fn spawner(&self) -> Arc<smartpool_old::prelude::Pool<original::TwoLevels>> {
        self.0.as_ref().expect("running").pool.clone()
    }
}

impl Drop for Original {
    fn drop(&mut self) {
        use futures01::Future;
        if let Some(owned) = self.0.take() {
            let _ = owned.close().wait();
        }
    }
}

impl Spawner for Arc<smartpool_old::prelude::Pool<original::TwoLevels>> {
    fn spawn(&self, f: impl FnOnce() + Send + 'static) {
        use smartpool_old::prelude::Exec;
        self.normal.exec(smartpool_old::prelude::run(f));
    }
    fn spawn_future(&self, _f: impl Future<Output = ()> + Send + 'static) {
        unreachable!("smartpool 0.3.2 runs futures 0.1 only");
    }
    fn spawn_urgent(&self, f: impl FnOnce() + Send + 'static) {
        use smartpool_old::prelude::Exec;
        self.urgent.exec(smartpool_old::prelude::run(f));
    }
}
