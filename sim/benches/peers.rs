//! rheostat beside the crates users would otherwise pick, in one run.
//!
//! Run with `cargo bench -p rheostat-sim --bench peers`. Criterion prints
//! its own figures as it goes; at the end the bench prints one summary in
//! Markdown (medians and ratios) computed from the very samples criterion
//! analysed.
//!
//! Every sample is paired with its reference timed right beside it — the
//! floor, run for as many iterations just before the case; for a contended
//! case, the same call on one thread alone — and a ratio is the median of
//! the per-sample ratios. On a shared machine whose speed drifts from one
//! minute to the next, that keeps each ratio to figures taken milliseconds
//! apart.
//!
//! # What is measured
//!
//! One call is: acquire, record the outcome (a success, unless the case is a
//! rejection), release. Nothing runs between acquiring and releasing.
//!
//! - **floor**: `tokio::sync::Semaphore::try_acquire` + drop, and the two
//!   `Instant::now()` reads any latency-measuring limiter needs (one at
//!   admission, one at completion). Every "× floor" is to this figure,
//!   uncontended.
//! - **rheostat**: `Limiter::try_acquire` then `Permit::success`, with the
//!   default clock (`QuantaClock`: the time-stamp counter, where sound) and
//!   default options. The limiter reads the clock as often
//!   as the policy's `Feedback` asks: never for `Fixed`, once per call for
//!   `Throttle` and a `Breaker` without a slow-call trip (the default; none
//!   with a count window, whose successes are batched), twice for `Aimd`,
//!   `Vegas` and `Gradient`; and it takes the policy's lock only for calls
//!   the policy learns from (not for a breaker's batched successes, nor for
//!   `Aimd`'s quiet ones). The count-window breaker row is recloser's job:
//!   the failure rate over the last 100 calls.
//! - **tower `ConcurrencyLimit`** (a fixed limit): `poll_ready` with a no-op
//!   waker, `call`, one poll of the response future (a `service_fn` whose
//!   future is ready), then the future is dropped, which releases the
//!   permit. It reads no clock; the `+ 2 clock reads` row adds the two reads
//!   a latency-measuring limiter makes. Its rejected path is tower's idiom
//!   for failing fast: `LoadShed` over a saturated `ConcurrencyLimit`
//!   (`poll_ready`, `call`, one poll to `Err(Overloaded)`).
//! - **tower-acc** 0.1 (`ConcurrencyLimit` with its `Aimd`, `Vegas` and
//!   `Gradient2` at their defaults) and **tower-resilience-adaptive** 0.14
//!   (`AdaptiveService` with its `Aimd` and `Vegas` builders' defaults): one
//!   call as for tower's `ConcurrencyLimit`, the response future polled to
//!   its end (they time the call and feed the algorithm as it ends).
//! - **congestion-limiter** 0.1 (`DefaultLimiter` with its `Fixed`, `Aimd`
//!   and `Vegas`): `try_acquire` then `release(token, Some(Success))`. Its API
//!   is `async` (boxed `async-trait` futures); each future is driven by
//!   polling it in place with a no-op waker until it is ready, which here is
//!   always the first poll — the cheapest way to run a future that is
//!   already ready. Its token reads `tokio::time::Instant` twice. Its `Vegas`
//!   ignores samples shorter than 1 µs, and every call here is shorter, so
//!   its Vegas row measures the path that returns before the algorithm runs.
//!   Its `Gradient` is not benched: it panics on ordinary traffic, because
//!   it subtracts `Duration`s and a sample shorter than the running average
//!   underflows. The bench shows the panic at start-up (paused Tokio time:
//!   ten 10 ms calls, then a 5 ms one) and prints what it said.
//! - **failsafe** 1.3 (its default breaker: success rate over a time window,
//!   or consecutive failures): `CircuitBreaker::call(|| Ok(()))`. It reads
//!   the clock once per call (for its window), not twice: it measures no
//!   latency.
//! - **recloser** 1.4 (its default breaker: a ring of the last 100 calls):
//!   `Recloser::call(|| Ok(()))`. It reads no clock while closed; the
//!   `+ 2 clock reads` row adds them, as for tower.
//!
//! **Contended** cases run the same call on two threads sharing one limiter
//! (each thread makes N calls; tower's service is cloned per thread, the
//! clones sharing one semaphore) and report aggregate calls per second, and
//! its ratio to one thread's rate alone, timed just before or after. They
//! are timed by a loop of our own after criterion's groups (it always runs,
//! whatever criterion's filter): each round times every case in turn, so
//! that load from other processes, which weighs on this figure most, falls
//! on all cases alike. The summary prints the load average. rheostat's
//! limiters run with their defaults: they set up their per-core shards (see
//! `Sharding`) the first time two threads race for a slot, in the first
//! round, and keep them for every run after, on one thread or two.
//!
//! **Memory** is `size_of` of the limiter plus the heap it holds, measured by
//! a counting global allocator (switched on only while measuring, so it
//! costs the timed cases one relaxed load per allocation), and the heap
//! taken by 100,000 keyed limiters.

// The counting allocator below is the only unsafe code in the workspace
// outside dependencies; the libraries themselves `forbid` unsafe code.
#![allow(unsafe_code, reason = "a counting global allocator, to measure heap")]

// The same open breaker and timing loop as the library's overhead bench.
#[path = "../../benches/common/mod.rs"]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::RefCell;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Barrier;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use rheostat::algorithms::breaker::BreakerWindow;
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Breaker, BreakerConfig, Fixed, Gradient, GradientConfig, Throttle,
    ThrottleConfig, Vegas, VegasConfig,
};
use rheostat::config::{KeyedConfig, LimiterConfig, PolicyConfig};
use rheostat::{limiter::Sharding, Limiter};
use tower::Service;

use congestion_limiter::limiter::{
    DefaultLimiter as ClLimiter, Limiter as _, Outcome as ClOutcome,
};
use congestion_limiter::limits as cl;
use failsafe::CircuitBreaker as _;

// ----- the counting allocator ---------------------------------------------

/// Counts live heap bytes while [`COUNTING`] is set.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

fn count(bytes: usize, sign: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        let bytes = isize::try_from(bytes).unwrap_or(isize::MAX);
        LIVE.fetch_add(sign * bytes, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged and returns what `System` returned, so `System`'s guarantees
// hold; counting touches only an atomic and never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller upholds `alloc`'s contract; passed on as is.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size(), 1);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size(), 1);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from `System`,
        // with `layout`: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        count(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc` for `ptr` and `layout`; `new_size` is the
        // caller's, under `realloc`'s contract.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(layout.size(), -1);
            count(new_size, 1);
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes `make`'s value holds, measured while it is alive.
fn heap_of<T>(make: impl FnOnce() -> T) -> (T, isize) {
    COUNTING.store(true, Ordering::SeqCst);
    let before = LIVE.load(Ordering::SeqCst);
    let value = make();
    let heap = LIVE.load(Ordering::SeqCst) - before;
    COUNTING.store(false, Ordering::SeqCst);
    (value, heap)
}

// ----- driving futures ----------------------------------------------------

/// Run a future by polling it in place with a no-op waker until it is ready.
/// Every future driven here is ready at its first poll (or becomes ready by
/// another thread's progress alone), so this costs one poll.
#[inline]
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        std::hint::spin_loop();
    }
}

// ----- what the summary is made from ----------------------------------------

/// Samples criterion took, kept to compute medians for the summary.
#[derive(Default)]
struct Recorder {
    series: RefCell<Vec<Series>>,
}

struct Series {
    group: &'static str,
    id: &'static str,
    /// One per call of the routine, warm-up included.
    samples: Vec<Sample>,
}

/// One routine call: `iters` iterations of the case, and of its reference
/// timed right beside it (the floor, or for a contended case the same call
/// on one thread), so that a ratio never spans a change in the machine's
/// load.
#[derive(Clone, Copy)]
struct Sample {
    iters: u64,
    elapsed: Duration,
    reference: Duration,
    /// For a contended round: whether every thread timed in it ran without
    /// waiting for a CPU (`None` where that cannot be told).
    undisturbed: Option<bool>,
}

/// Samples per case. Set on every group, so criterion's command line cannot
/// change it and the last `SAMPLES` routine calls are the measured ones.
const SAMPLES: usize = 50;

const UNCONTENDED: &str = "uncontended";
const CONTENDED: &str = "contended";
const REJECTED: &str = "rejected";

const FLOOR: &str = "floor: semaphore + 2 clock reads";

impl Recorder {
    fn push(&self, group: &'static str, id: &'static str, sample: Sample) {
        let mut series = self.series.borrow_mut();
        match series.iter_mut().find(|s| s.group == group && s.id == id) {
            Some(s) => s.samples.push(sample),
            None => series.push(Series {
                group,
                id,
                samples: vec![sample],
            }),
        }
    }

    /// Median over the measured samples of `per(sample)`.
    fn median(&self, group: &str, id: &str, per: impl Fn(&Sample) -> f64) -> Option<f64> {
        self.median_of(group, id, |_| true, per).map(|(m, _)| m)
    }

    /// Median over the measured samples that `keep` keeps of `per(sample)`,
    /// and how many were kept.
    fn median_of(
        &self,
        group: &str,
        id: &str,
        keep: impl Fn(&Sample) -> bool,
        per: impl Fn(&Sample) -> f64,
    ) -> Option<(f64, usize)> {
        let series = self.series.borrow();
        let s = series.iter().find(|s| s.group == group && s.id == id)?;
        if s.samples.len() < SAMPLES {
            return None; // a --test run
        }
        let mut values: Vec<f64> = s.samples[s.samples.len() - SAMPLES..]
            .iter()
            .filter(|s| keep(s))
            .map(per)
            .collect();
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let mid = values.len() / 2;
        let median = if values.len() % 2 == 0 {
            (values[mid - 1] + values[mid]) / 2.0
        } else {
            values[mid]
        };
        Some((median, values.len()))
    }

    fn ids(&self, group: &str) -> Vec<&'static str> {
        self.series
            .borrow()
            .iter()
            .filter(|s| s.group == group)
            .map(|s| s.id)
            .collect()
    }
}

fn nanos_per_call(s: &Sample) -> f64 {
    s.elapsed.as_secs_f64() * 1e9 / s.iters as f64
}

fn reference_nanos_per_call(s: &Sample) -> f64 {
    s.reference.as_secs_f64() * 1e9 / s.iters as f64
}

fn to_reference(s: &Sample) -> f64 {
    s.elapsed.as_secs_f64() / s.reference.as_secs_f64()
}

/// Two threads each did `iters` calls: calls per second, both together.
fn two_thread_rate(s: &Sample) -> f64 {
    2.0 * s.iters as f64 / s.elapsed.as_secs_f64()
}

/// One thread did `iters` calls: calls per second.
fn one_thread_rate(s: &Sample) -> f64 {
    s.iters as f64 / s.reference.as_secs_f64()
}

/// Aggregate throughput on two threads over one thread's.
fn scaling(s: &Sample) -> f64 {
    two_thread_rate(s) / one_thread_rate(s)
}

// ----- timing loops ---------------------------------------------------------

/// One benchmark group, and what each of its samples is paired with.
struct Bench<'a, 'r> {
    g: BenchmarkGroup<'a, WallTime>,
    rec: &'r Recorder,
    group: &'static str,
    floor: tokio::sync::Semaphore,
}

impl<'a, 'r> Bench<'a, 'r> {
    fn new(c: &'a mut Criterion, rec: &'r Recorder, group: &'static str) -> Self {
        let mut g = c.benchmark_group(format!("peers/{group}"));
        g.sample_size(SAMPLES)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
        Bench {
            g,
            rec,
            group,
            floor: tokio::sync::Semaphore::new(1_000),
        }
    }

    /// One thread, `call` once per iteration, each sample paired with as
    /// many iterations of the floor.
    fn single(&mut self, id: &'static str, mut call: impl FnMut()) {
        let (rec, group, floor) = (self.rec, self.group, &self.floor);
        self.g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let reference = common::repeat(iters, || floor_call(floor));
                let elapsed = common::repeat(iters, &mut call);
                rec.push(
                    group,
                    id,
                    Sample {
                        iters,
                        elapsed,
                        reference,
                        undisturbed: None,
                    },
                );
                elapsed
            });
        });
    }

    fn finish(self) {
        self.g.finish();
    }
}

// ----- the calls ------------------------------------------------------------

fn floor_call(semaphore: &tokio::sync::Semaphore) {
    let start = Instant::now();
    let permit = semaphore.try_acquire();
    let elapsed = Instant::now().duration_since(start);
    drop(black_box(permit));
    black_box(elapsed);
}

fn rheostat_call<A: Algorithm>(limiter: &Limiter<A>) {
    if let Ok(permit) = black_box(limiter.try_acquire()) {
        permit.success();
    }
}

fn rheostat_refused<A: Algorithm>(limiter: &Limiter<A>) {
    black_box(black_box(limiter.try_acquire()).is_err());
}

fn cl_call<T: cl::LimitAlgorithm + Sync + std::fmt::Debug>(limiter: &ClLimiter<T>) {
    if let Some(token) = black_box(ready(limiter.try_acquire())) {
        black_box(ready(limiter.release(token, Some(ClOutcome::Success))));
    }
}

fn cl_refused<T: cl::LimitAlgorithm + Sync + std::fmt::Debug>(limiter: &ClLimiter<T>) {
    black_box(black_box(ready(limiter.try_acquire())).is_none());
}

type Echo = tower::util::ServiceFn<fn(()) -> std::future::Ready<Result<(), Infallible>>>;

fn echo() -> Echo {
    tower::service_fn(|()| std::future::ready(Ok(())))
}

fn tower_limit(limit: usize) -> tower::limit::ConcurrencyLimit<Echo> {
    tower::limit::ConcurrencyLimit::new(echo(), limit)
}

fn tower_call(svc: &mut tower::limit::ConcurrencyLimit<Echo>) {
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => unreachable!("the limit is never reached here"),
    }
    let response = svc.call(());
    black_box(ready(response)).unwrap_or_else(|never| match never {});
}

fn tower_timed_call(svc: &mut tower::limit::ConcurrencyLimit<Echo>) {
    let start = Instant::now();
    tower_call(svc);
    black_box(Instant::now().duration_since(start));
}

/// One call through any tower service over `echo()`: `poll_ready` with a
/// no-op waker, `call`, the response future polled to its end and dropped.
fn service_call<S>(svc: &mut S)
where
    S: Service<(), Response = ()>,
    S::Error: std::fmt::Debug,
{
    let mut cx = Context::from_waker(Waker::noop());
    match svc.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => {}
        _ => unreachable!("the limit is never reached here"),
    }
    let response = svc.call(());
    black_box(ready(response)).expect("echo answers");
}

fn recloser_call(breaker: &recloser::Recloser) {
    black_box(breaker.call(|| Ok::<(), ()>(()))).unwrap_or_else(|_| unreachable!("closed"));
}

fn failsafe_call(breaker: &impl failsafe::CircuitBreaker) {
    black_box(breaker.call(|| Ok::<(), ()>(()))).unwrap_or_else(|_| unreachable!("closed"));
}

// ----- the limiters ---------------------------------------------------------

fn fixed() -> Limiter<Fixed> {
    Limiter::new(Fixed::new(1_000).expect("valid"))
}

fn aimd(limit: u32) -> Limiter<Aimd> {
    Limiter::new(
        Aimd::new(AimdConfig {
            initial: limit,
            min: 1,
            max: limit.max(10),
            ..AimdConfig::default()
        })
        .expect("valid"),
    )
}

fn vegas(limit: u32) -> Limiter<Vegas> {
    Limiter::new(
        Vegas::new(VegasConfig {
            initial: limit,
            min: 1,
            max: limit.max(10) * 2,
            ..VegasConfig::default()
        })
        .expect("valid"),
    )
}

fn gradient(limit: u32) -> Limiter<Gradient> {
    Limiter::new(
        Gradient::new(GradientConfig {
            initial: limit,
            min: 1,
            max: limit.max(10) * 2,
            ..GradientConfig::default()
        })
        .expect("valid"),
    )
}

fn throttle() -> Limiter<Throttle> {
    Limiter::new(Throttle::new(ThrottleConfig::default()).expect("valid"))
}

fn breaker() -> Limiter<Breaker> {
    Limiter::new(Breaker::new(BreakerConfig::default()).expect("valid"))
}

/// recloser's job: the failure rate over the last 100 calls.
fn count_breaker() -> Limiter<Breaker> {
    Limiter::new(
        Breaker::new(BreakerConfig {
            window: BreakerWindow::Count { calls: 100 },
            ..BreakerConfig::default()
        })
        .expect("valid"),
    )
}

fn open_failsafe() -> impl failsafe::CircuitBreaker {
    let policy = failsafe::failure_policy::consecutive_failures(
        1,
        failsafe::backoff::constant(Duration::from_secs(3_600)),
    );
    let breaker = failsafe::Config::new().failure_policy(policy).build();
    let _ = breaker.call(|| Err::<(), ()>(()));
    assert!(!breaker.is_call_permitted(), "failsafe must be open");
    breaker
}

fn open_recloser() -> recloser::Recloser {
    let breaker = recloser::Recloser::custom()
        .closed_len(1)
        .open_wait(Duration::from_secs(3_600))
        .build();
    for _ in 0..3 {
        let _ = breaker.call(|| Err::<(), ()>(()));
    }
    assert!(
        matches!(
            breaker.call(|| Ok::<(), ()>(())),
            Err(recloser::Error::Rejected)
        ),
        "recloser must be open"
    );
    breaker
}

// ----- the cases ------------------------------------------------------------

fn uncontended(c: &mut Criterion, rec: &Recorder) {
    let mut b = Bench::new(c, rec, UNCONTENDED);
    let semaphore = tokio::sync::Semaphore::new(1_000);
    b.single(FLOOR, || floor_call(&semaphore));
    b.single("(semaphore alone)", || {
        drop(black_box(semaphore.try_acquire()));
    });
    b.single("(2 clock reads alone)", || {
        let start = Instant::now();
        black_box(Instant::now().duration_since(start));
    });

    let (l_fixed, l_aimd, l_vegas) = (fixed(), aimd(1_000), vegas(1_000));
    let (l_gradient, l_throttle, l_breaker) = (gradient(1_000), throttle(), breaker());
    b.single("rheostat Fixed", || rheostat_call(&l_fixed));
    b.single("rheostat Aimd", || rheostat_call(&l_aimd));
    b.single("rheostat Vegas", || rheostat_call(&l_vegas));
    b.single("rheostat Gradient", || rheostat_call(&l_gradient));
    b.single("rheostat Throttle", || rheostat_call(&l_throttle));
    b.single("rheostat Breaker (closed)", || rheostat_call(&l_breaker));
    let l_count = count_breaker();
    b.single("rheostat Breaker, count window (closed)", || {
        rheostat_call(&l_count);
    });

    let mut svc = tower_limit(1_000);
    b.single("tower ConcurrencyLimit", || tower_call(&mut svc));
    b.single("tower ConcurrencyLimit + 2 clock reads", || {
        tower_timed_call(&mut svc);
    });

    // tower-acc and tower-resilience-adaptive at their defaults.
    let mut acc_aimd = tower_acc::ConcurrencyLimit::new(echo(), tower_acc::Aimd::default());
    let mut acc_vegas = tower_acc::ConcurrencyLimit::new(echo(), tower_acc::Vegas::default());
    let mut acc_gradient =
        tower_acc::ConcurrencyLimit::new(echo(), tower_acc::Gradient2::default());
    b.single("tower-acc Aimd", || service_call(&mut acc_aimd));
    b.single("tower-acc Vegas", || service_call(&mut acc_vegas));
    b.single("tower-acc Gradient2", || service_call(&mut acc_gradient));
    let tra_aimd = tower_resilience_adaptive::Aimd::builder()
        .build()
        .expect("the defaults are valid");
    let tra_vegas = tower_resilience_adaptive::Vegas::builder()
        .build()
        .expect("the defaults are valid");
    let mut tra_aimd =
        tower_resilience_adaptive::AdaptiveService::new(echo(), std::sync::Arc::new(tra_aimd));
    let mut tra_vegas =
        tower_resilience_adaptive::AdaptiveService::new(echo(), std::sync::Arc::new(tra_vegas));
    b.single("tower-resilience-adaptive Aimd", || {
        service_call(&mut tra_aimd)
    });
    b.single("tower-resilience-adaptive Vegas", || {
        service_call(&mut tra_vegas)
    });

    let cl_fixed = ClLimiter::new(cl::Fixed::new(1_000));
    let cl_aimd = ClLimiter::new(cl::Aimd::new_with_initial_limit(1_000));
    let cl_vegas = ClLimiter::new(cl::Vegas::new_with_initial_limit(1_000));
    b.single("congestion-limiter Fixed", || cl_call(&cl_fixed));
    b.single("congestion-limiter Aimd", || cl_call(&cl_aimd));
    b.single("congestion-limiter Vegas", || cl_call(&cl_vegas));

    let fs = failsafe::Config::new().build();
    let rc = recloser::Recloser::default();
    b.single("failsafe (closed)", || failsafe_call(&fs));
    b.single("recloser (closed)", || recloser_call(&rc));
    b.single("recloser (closed) + 2 clock reads", || {
        let start = Instant::now();
        recloser_call(&rc);
        black_box(Instant::now().duration_since(start));
    });
    b.finish();
}

// ----- contended: a round-robin loop ----------------------------------------

/// A contended case: `run(iters)` takes this thread's handle on the shared
/// limiter and makes `iters` calls through it.
struct Shared<'a> {
    id: &'static str,
    run: Box<dyn Fn(u64) + Sync + 'a>,
}

fn shared<'a, F: FnMut()>(id: &'static str, make: impl Fn() -> F + Sync + 'a) -> Shared<'a> {
    Shared {
        id,
        run: Box::new(move |iters| {
            let mut call = make();
            for _ in 0..iters {
                call();
            }
        }),
    }
}

/// Nanoseconds this thread has spent waiting for a CPU while runnable
/// (Linux's `/proc/thread-self/schedstat`); `None` where there is no such
/// file.
fn runqueue_wait() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Whether a thread that was busy for `elapsed` waited for a CPU for less
/// than 2% of it (another process took its core only briefly, if at all).
fn ran_undisturbed(before: Option<u64>, after: Option<u64>, elapsed: Duration) -> Option<bool> {
    let waited = after?.checked_sub(before?)?;
    Some(u128::from(waited) * 50 < elapsed.as_nanos())
}

fn one_thread(run: &(dyn Fn(u64) + Sync), iters: u64) -> (Duration, Option<bool>) {
    let waited = runqueue_wait();
    let start = Instant::now();
    run(iters);
    let elapsed = start.elapsed();
    (elapsed, ran_undisturbed(waited, runqueue_wait(), elapsed))
}

/// Two threads each make `iters` calls, timed from both being released at
/// once until both have finished; and whether neither waited for a CPU.
fn two_threads(run: &(dyn Fn(u64) + Sync), iters: u64) -> (Duration, Option<bool>) {
    let barrier = Barrier::new(3);
    let barrier = &barrier;
    let mut start = Instant::now();
    let mut undisturbed = Some(true);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(move || {
                    barrier.wait();
                    let (waited, start) = (runqueue_wait(), Instant::now());
                    run(iters);
                    ran_undisturbed(waited, runqueue_wait(), start.elapsed())
                })
            })
            .collect();
        barrier.wait();
        start = Instant::now();
        for thread in threads {
            let quiet = thread
                .join()
                .unwrap_or_else(|_| unreachable!("calls do not panic"));
            undisturbed = match (undisturbed, quiet) {
                (Some(a), Some(b)) => Some(a && b),
                _ => None,
            };
        }
    });
    (start.elapsed(), undisturbed)
}

/// Each case is timed on two threads and on one, in turn, round after
/// round, so a burst of load from elsewhere on the machine falls on every
/// case alike rather than on whichever one criterion happened to be
/// measuring.
fn contended(rec: &Recorder, quick: bool) {
    let semaphore = tokio::sync::Semaphore::new(1_000);
    let (l_fixed, l_aimd, l_vegas) = (fixed(), aimd(1_000), vegas(1_000));
    let (l_gradient, l_throttle, l_breaker) = (gradient(1_000), throttle(), breaker());
    let l_count = count_breaker();
    let svc = tower_limit(1_000);
    let cl_fixed = ClLimiter::new(cl::Fixed::new(1_000));
    let cl_aimd = ClLimiter::new(cl::Aimd::new_with_initial_limit(1_000));
    let cl_vegas = ClLimiter::new(cl::Vegas::new_with_initial_limit(1_000));
    let fs = failsafe::Config::new().build();
    let rc = recloser::Recloser::default();

    let cases = [
        shared(FLOOR, || || floor_call(&semaphore)),
        shared("rheostat Fixed", || || rheostat_call(&l_fixed)),
        shared("rheostat Aimd", || || rheostat_call(&l_aimd)),
        shared("rheostat Vegas", || || rheostat_call(&l_vegas)),
        shared("rheostat Gradient", || || rheostat_call(&l_gradient)),
        shared("rheostat Throttle", || || rheostat_call(&l_throttle)),
        shared("rheostat Breaker (closed)", || || rheostat_call(&l_breaker)),
        shared("rheostat Breaker, count window (closed)", || {
            || rheostat_call(&l_count)
        }),
        shared("tower ConcurrencyLimit", || {
            let mut svc = svc.clone();
            move || tower_call(&mut svc)
        }),
        shared("congestion-limiter Fixed", || || cl_call(&cl_fixed)),
        shared("congestion-limiter Aimd", || || cl_call(&cl_aimd)),
        shared("congestion-limiter Vegas", || || cl_call(&cl_vegas)),
        shared("failsafe (closed)", || || failsafe_call(&fs)),
        shared("recloser (closed)", || || recloser_call(&rc)),
    ];

    // Calibrate (and warm up): enough calls for about 20 ms on one thread.
    let target = Duration::from_millis(if quick { 1 } else { 20 });
    let iters: Vec<u64> = cases
        .iter()
        .map(|case| {
            let mut n = 1_000;
            while !quick && one_thread(&case.run, n).0 < target {
                n *= 2;
            }
            n
        })
        .collect();
    let rounds = if quick { 1 } else { SAMPLES };
    println!(
        "peers/contended: {} cases, {rounds} rounds of two threads beside one",
        cases.len()
    );
    for round in 0..rounds {
        for (case, &n) in cases.iter().zip(&iters) {
            let ((reference, one_quiet), (elapsed, two_quiet)) = if round % 2 == 0 {
                let one = one_thread(&case.run, n);
                (one, two_threads(&case.run, n))
            } else {
                let two = two_threads(&case.run, n);
                (one_thread(&case.run, n), two)
            };
            rec.push(
                CONTENDED,
                case.id,
                Sample {
                    iters: n,
                    elapsed,
                    reference,
                    undisturbed: one_quiet.zip(two_quiet).map(|(a, b)| a && b),
                },
            );
        }
    }
}

fn rejected(c: &mut Criterion, rec: &Recorder) {
    let mut b = Bench::new(c, rec, REJECTED);
    let empty = tokio::sync::Semaphore::new(0);
    b.single("(semaphore alone, no permits)", || {
        black_box(black_box(empty.try_acquire()).is_err());
    });

    let full_fixed = Limiter::new(Fixed::new(1).expect("valid"));
    let (full_aimd, full_vegas, full_gradient) = (aimd(1), vegas(1), gradient(1));
    let held = (
        full_fixed.try_acquire().expect("a slot"),
        full_aimd.try_acquire().expect("a slot"),
        full_vegas.try_acquire().expect("a slot"),
        full_gradient.try_acquire().expect("a slot"),
    );
    let open = common::open_breaker();
    b.single("rheostat Fixed (limit reached)", || {
        rheostat_refused(&full_fixed);
    });
    b.single("rheostat Aimd (limit reached)", || {
        rheostat_refused(&full_aimd);
    });
    b.single("rheostat Vegas (limit reached)", || {
        rheostat_refused(&full_vegas);
    });
    b.single("rheostat Gradient (limit reached)", || {
        rheostat_refused(&full_gradient);
    });
    b.single("rheostat Breaker (open)", || rheostat_refused(&open));

    let mut shed = tower::load_shed::LoadShed::new(tower_limit(1));
    let mut cx = Context::from_waker(Waker::noop());
    let _slot = match shed.poll_ready(&mut cx) {
        Poll::Ready(Ok(())) => shed.call(()),
        _ => unreachable!("one slot is free"),
    };
    b.single("tower LoadShed + ConcurrencyLimit (limit reached)", || {
        let mut cx = Context::from_waker(Waker::noop());
        let _ = black_box(shed.poll_ready(&mut cx));
        let response = shed.call(());
        black_box(black_box(ready(response)).is_err());
    });

    let cl_fixed = ClLimiter::new(cl::Fixed::new(1));
    let cl_aimd = ClLimiter::new(cl::Aimd::new_with_initial_limit(1));
    let cl_vegas = ClLimiter::new(cl::Vegas::new_with_initial_limit(1));
    let cl_held = (
        ready(cl_fixed.try_acquire()).expect("a token"),
        ready(cl_aimd.try_acquire()).expect("a token"),
        ready(cl_vegas.try_acquire()).expect("a token"),
    );
    b.single("congestion-limiter Fixed (limit reached)", || {
        cl_refused(&cl_fixed);
    });
    b.single("congestion-limiter Aimd (limit reached)", || {
        cl_refused(&cl_aimd);
    });
    b.single("congestion-limiter Vegas (limit reached)", || {
        cl_refused(&cl_vegas);
    });

    let fs = open_failsafe();
    let rc = open_recloser();
    b.single("failsafe (open)", || {
        black_box(black_box(fs.call(|| Ok::<(), ()>(()))).is_err());
    });
    b.single("recloser (open)", || {
        black_box(black_box(rc.call(|| Ok::<(), ()>(()))).is_err());
    });
    b.finish();
    drop((held, cl_held));
}

// ----- memory ---------------------------------------------------------------

struct Footprint {
    what: &'static str,
    inline: usize,
    heap: isize,
}

fn footprint<T>(what: &'static str, make: impl FnOnce() -> T) -> Footprint {
    let (value, heap) = heap_of(make);
    let inline = std::mem::size_of_val(&value);
    drop(value);
    Footprint { what, inline, heap }
}

fn memory() -> (Vec<Footprint>, Vec<(&'static str, isize)>) {
    let limiters = vec![
        footprint("rheostat Fixed", || {
            Limiter::new(Fixed::new(100).expect("valid"))
        }),
        footprint("rheostat Aimd", || {
            Limiter::new(Aimd::new(AimdConfig::default()).expect("valid"))
        }),
        footprint("rheostat Vegas", || {
            Limiter::new(Vegas::new(VegasConfig::default()).expect("valid"))
        }),
        footprint("rheostat Gradient", || {
            Limiter::new(Gradient::new(GradientConfig::default()).expect("valid"))
        }),
        footprint("rheostat Throttle", || {
            Limiter::new(Throttle::new(ThrottleConfig::default()).expect("valid"))
        }),
        footprint("rheostat Breaker", || {
            Limiter::new(Breaker::new(BreakerConfig::default()).expect("valid"))
        }),
        // What contention adds: the shards that park released slots, set up
        // here at once (one 64-byte cell per core, rounded up to a power of
        // two).
        footprint("rheostat Fixed, shards set up", || {
            Limiter::builder(Fixed::new(100).expect("valid"))
                .sharding(Sharding::Always)
                .build()
                .expect("valid")
        }),
        footprint("tower ConcurrencyLimit", || tower_limit(100)),
        footprint("congestion-limiter Fixed", || {
            ClLimiter::new(cl::Fixed::new(100))
        }),
        footprint("congestion-limiter Aimd", || {
            ClLimiter::new(cl::Aimd::new_with_initial_limit(20))
        }),
        footprint("congestion-limiter Vegas", || {
            ClLimiter::new(cl::Vegas::new_with_initial_limit(20))
        }),
        footprint("failsafe (default)", || failsafe::Config::new().build()),
        footprint("recloser (default)", recloser::Recloser::default),
    ];

    const KEYS: u64 = 100_000;
    let keyed = |config: LimiterConfig| {
        let keyed = KeyedConfig::<u64>::new(config)
            .builder()
            .expect("valid")
            .max_keys(KEYS as usize)
            .build()
            .expect("valid");
        let ((), heap) = heap_of(|| {
            for key in 0..KEYS {
                drop(keyed.get(&key).expect("room for every key"));
            }
        });
        heap
    };
    let keyed = vec![
        (
            "Fixed",
            keyed(LimiterConfig::new(PolicyConfig::Fixed { limit: 100 })),
        ),
        ("Aimd", keyed(LimiterConfig::new(AimdConfig::default()))),
        (
            "Breaker",
            keyed(LimiterConfig::new(BreakerConfig::default())),
        ),
    ];
    (limiters, keyed)
}

// ----- congestion-limiter's Gradient ------------------------------------------

/// Feed congestion-limiter's `Gradient` ten 10 ms calls then one 5 ms call,
/// in paused Tokio time; what it panicked with, if it did.
fn congestion_gradient_panic() -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            let limiter = ClLimiter::new(cl::Gradient::new_with_initial_limit(10));
            for ms in [10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 5] {
                let token = limiter.try_acquire().await.expect("a token");
                tokio::time::advance(Duration::from_millis(ms)).await;
                limiter.release(token, Some(ClOutcome::Success)).await;
            }
        });
    }));
    std::panic::set_hook(hook);
    outcome.err().map(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".to_owned())
    })
}

// ----- the summary ----------------------------------------------------------

fn summary(
    rec: &Recorder,
    memory: &(Vec<Footprint>, Vec<(&'static str, isize)>),
    gradient: &str,
    load_before: &str,
) {
    println!("\n## peers: one run (medians over {SAMPLES} criterion samples)\n");
    println!(
        "Ended {}; load average before and after: {load_before} / {}\n",
        common::utc_now(),
        common::load_average()
    );

    for (group, title) in [
        (
            UNCONTENDED,
            "Uncontended, one call (acquire + record + release)",
        ),
        (REJECTED, "Rejected, one call"),
    ] {
        let rows: Vec<_> = rec
            .ids(group)
            .into_iter()
            .filter_map(|id| {
                let ns = rec.median(group, id, nanos_per_call)?;
                let floor = rec.median(group, id, reference_nanos_per_call)?;
                let ratio = rec.median(group, id, to_reference)?;
                Some((id, ns, floor, ratio))
            })
            .collect();
        if rows.is_empty() {
            continue;
        }
        println!(
            "{title}; × floor is the median of each sample's ratio to the floor timed beside it:\n"
        );
        println!("| | median | floor beside it | × floor |\n| --- | ---: | ---: | ---: |");
        for (id, ns, floor, ratio) in rows {
            println!("| {id} | {ns:.1} ns | {floor:.1} ns | {ratio:.2} |");
        }
        println!();
    }
    println!("congestion-limiter Gradient: not benched ({gradient}).\n");

    let undisturbed = |s: &Sample| s.undisturbed == Some(true);
    let rows: Vec<_> = rec
        .ids(CONTENDED)
        .into_iter()
        .filter_map(|id| {
            let two = rec.median(CONTENDED, id, two_thread_rate)?;
            let one = rec.median(CONTENDED, id, one_thread_rate)?;
            let ratio = rec.median(CONTENDED, id, scaling)?;
            let quiet = rec.median_of(CONTENDED, id, undisturbed, scaling);
            Some((id, two, one, ratio, quiet))
        })
        .collect();
    if !rows.is_empty() {
        println!(
            "Two threads sharing one limiter, aggregate, beside one thread alone timed in the \
             same round ({SAMPLES} rounds); the last column keeps only the rounds in which no \
             thread waited for a CPU for 2% of its time or more:\n"
        );
        println!(
            "| | 2 threads | 1 thread | ratio | ratio, undisturbed rounds |\n\
             | --- | ---: | ---: | ---: | ---: |"
        );
        for (id, two, one, ratio, quiet) in rows {
            let quiet = quiet.map_or("none".to_owned(), |(r, n)| format!("{r:.2} ({n})"));
            println!(
                "| {id} | {:.2} M/s | {:.2} M/s | {ratio:.2} | {quiet} |",
                two / 1e6,
                one / 1e6
            );
        }
        println!();
    }

    let (limiters, keyed) = memory;
    println!("Memory per limiter (default configuration):\n");
    println!("| | size_of | heap | total |\n| --- | ---: | ---: | ---: |");
    for f in limiters {
        println!(
            "| {} | {} B | {} B | {} B |",
            f.what,
            f.inline,
            f.heap,
            f.inline as isize + f.heap
        );
    }
    println!("\n100,000 keyed limiters (`KeyedLimiters<u64>`, heap):\n");
    println!("| default policy | total | per key |\n| --- | ---: | ---: |");
    for (policy, heap) in keyed {
        println!(
            "| {policy} | {:.1} MiB | {} B |",
            *heap as f64 / (1024.0 * 1024.0),
            heap / 100_000
        );
    }
}

fn main() {
    let memory = memory();
    let gradient = match congestion_gradient_panic() {
        Some(message) => format!("it panics after ten 10 ms calls and one 5 ms call: {message:?}"),
        None => "it did not panic this time".to_owned(),
    };
    println!("congestion-limiter Gradient: not benched: {gradient}");

    let load_before = common::load_average();
    let rec = Recorder::default();
    let mut c = Criterion::default().configure_from_args();
    uncontended(&mut c, &rec);
    rejected(&mut c, &rec);
    c.final_summary();
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--list" || a == "--profile-time") {
        contended(&rec, args.iter().any(|a| a == "--test"));
    }
    summary(&rec, &memory, &gradient, &load_before);
}
