//! Many tasks, many calls, everything going wrong at once.
//!
//! ```sh
//! cargo test --release --test stress -- --ignored --nocapture
//! RHEOSTAT_STRESS_SECS=600 cargo test --release --test stress -- --ignored --nocapture
//! ```
//!
//! Two limiters (FIFO and LIFO queues; the LIFO one parks released slots
//! per core at any limit) each take calls from 128 Tokio tasks on
//! a four-worker runtime for `RHEOSTAT_STRESS_SECS` seconds (default 60).
//! Calls end in random outcomes against a dependency that turns sick and
//! well again (so the breaker trips and recovers for real); queued
//! `acquire()`s are cancelled by timeouts, calls in flight are cancelled by
//! timeouts and by aborting their tasks, calls panic; a controller task
//! changes the fixed limit, swaps the limiting policy and forces the breaker
//! open and back. Afterwards nothing may be in flight, every admission must
//! have been released, and no admission may have broken the gate:
//!
//! - **in flight under the gate**: every admitted call counts at most as many
//!   calls in flight as the largest limit the policy could have published
//!   while it was being admitted (the controller brackets each change in an
//!   epoch, see [`Limits`]);
//! - **no call through an open breaker**: no call that was not a probe was
//!   admitted entirely within a stretch during which the published gate
//!   admitted only probes or nothing (see [`Closed`]).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Fixed, Gate, Gradient, GradientConfig, Published, Sample,
    Snapshot, Stack, Throttle, ThrottleConfig, Transition, Vegas, VegasConfig,
};
use rheostat::{
    limiter::QueueOrder, limiter::Sharding, CallError, Limiter, Observer, Outcome, OwnedPermit,
    Permit, RejectReason, Rejection,
};

const TASKS: u64 = 128;
const PROBE_CONCURRENCY: u32 = 3;
/// The largest limit the controller ever sets.
const MAX_CEILING: u32 = 64;
const INJECTED: &str = "injected panic";

/// A small seeded generator (splitmix64), one per task.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn micros(&mut self, max: u64) -> Duration {
        Duration::from_micros(self.below(max + 1))
    }
}

/// One global order of events, for bracketing admissions.
static TICK: AtomicU64 = AtomicU64::new(1);

fn tick() -> u64 {
    TICK.fetch_add(1, Ordering::SeqCst)
}

fn admits_non_probes(gate: &Gate) -> bool {
    gate.limit > 0 && !gate.probe && gate.admit_probability > 0.0
}

/// The stretches of time during which the published gate admitted only
/// probes or nothing.
///
/// A stretch starts at a tick taken just *after* such a gate was stored
/// (in [`Observer::gate_changed`], which the limiter calls under the policy
/// lock right after the store), and ends at a tick taken when the policy
/// next computes a gate that admits ordinary calls (in [`Algorithm::gate`],
/// which runs under the same lock *before* the store). So every gate loaded
/// strictly inside a stretch refused ordinary calls, and a non-probe
/// admission bracketed by `[before, after]` inside one is a real breach,
/// never a race of the check.
#[derive(Default)]
struct Closed {
    done: Vec<(u64, u64)>,
    open_since: Option<u64>,
}

impl Closed {
    fn covers(&self, before: u64, after: u64) -> bool {
        if self.open_since.is_some_and(|s| s <= before) {
            return true;
        }
        let i = self.done.partition_point(|&(s, _)| s <= before);
        i > 0 && self.done[i - 1].1 >= after
    }
}

/// The largest limit the limiting policy can publish, by configuration
/// epoch. The controller makes epoch `2k + 1` (changing from configuration
/// `k` to `k + 1`) before an update and `2k + 2` after it, writing the new
/// ceiling into the ring first, so an admission that read epochs `e1` before
/// and `e2` after itself can only have loaded a gate under the largest
/// ceiling of configurations `e1 / 2 ..= (e2 + 1) / 2`.
struct Limits {
    epoch: AtomicU64,
    ring: Vec<AtomicU32>,
}

const RING: u64 = 4096;

impl Limits {
    fn new(first: u32) -> Self {
        let ring: Vec<AtomicU32> = (0..RING).map(|_| AtomicU32::new(0)).collect();
        ring[0].store(first, Ordering::SeqCst);
        Limits {
            epoch: AtomicU64::new(0),
            ring,
        }
    }
    fn slot(&self, k: u64) -> &AtomicU32 {
        &self.ring[usize::try_from(k % RING).unwrap()]
    }
    fn begin(&self, ceiling: u32) {
        let k = self.epoch.load(Ordering::SeqCst) / 2;
        self.slot(k + 1).store(ceiling, Ordering::SeqCst);
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
    fn end(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }
    fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }
    /// The largest ceiling in force between epochs `e1` and `e2`, if the
    /// ring still holds them all.
    fn allowed(&self, e1: u64, e2: u64) -> Option<u32> {
        let (k1, k2) = (e1 / 2, e2.div_ceil(2));
        if k2 - k1 >= RING / 2 {
            return None;
        }
        let max = (k1..=k2)
            .map(|k| self.slot(k).load(Ordering::SeqCst))
            .max()?;
        // Not overwritten while we read?
        (self.epoch() / 2 - k1 < RING / 2).then_some(max)
    }
}

/// Everything the checks need, shared by the policy wrapper, the observer
/// and the tasks.
struct Checker {
    closed: Mutex<Closed>,
    limits: Limits,
    admitted: AtomicU64,
    finished: AtomicU64,
    samples: AtomicU64,
    probes: AtomicU64,
    checked_limit: AtomicU64,
    checked_breaker: AtomicU64,
    closed_stretches: AtomicU64,
    transitions: AtomicU64,
    max_in_flight: AtomicU32,
    breaches: Mutex<Vec<String>>,
}

impl Checker {
    fn new(first_ceiling: u32) -> Self {
        Checker {
            closed: Mutex::default(),
            limits: Limits::new(first_ceiling),
            admitted: AtomicU64::new(0),
            finished: AtomicU64::new(0),
            samples: AtomicU64::new(0),
            probes: AtomicU64::new(0),
            checked_limit: AtomicU64::new(0),
            checked_breaker: AtomicU64::new(0),
            closed_stretches: AtomicU64::new(0),
            transitions: AtomicU64::new(0),
            max_in_flight: AtomicU32::new(0),
            breaches: Mutex::default(),
        }
    }

    fn breach(&self, what: String) {
        let mut breaches = self.breaches.lock().unwrap();
        if breaches.len() < 20 {
            breaches.push(what);
        }
    }

    /// Check one admission bracketed by ticks and epochs.
    fn check(&self, admission: Admission, in_flight: u32, probe: bool) {
        if let Some(limit) = self.limits.allowed(admission.e1, admission.e2) {
            self.checked_limit.fetch_add(1, Ordering::Relaxed);
            let limit = if probe {
                limit.min(PROBE_CONCURRENCY)
            } else {
                limit
            };
            if in_flight > limit {
                self.breach(format!(
                    "{in_flight} in flight at admission (probe: {probe}) under a limit of {limit}"
                ));
            }
        }
        if !probe {
            self.checked_breaker.fetch_add(1, Ordering::Relaxed);
            if self
                .closed
                .lock()
                .unwrap()
                .covers(admission.before, admission.after)
            {
                self.breach(format!(
                    "a call that was not a probe was admitted in ticks {}..{} while the gate admitted only probes or nothing",
                    admission.before, admission.after
                ));
            }
        }
    }
}

/// The ticks and epochs around one admission.
#[derive(Clone, Copy)]
struct Admission {
    before: u64,
    after: u64,
    e1: u64,
    e2: u64,
}

impl Admission {
    fn start(checker: &Checker) -> (u64, u64) {
        (tick(), checker.limits.epoch())
    }
    fn end(checker: &Checker, (before, e1): (u64, u64)) -> Admission {
        let e2 = checker.limits.epoch();
        Admission {
            before,
            after: tick(),
            e1,
            e2,
        }
    }
}

/// The observer: counts, and opens closed stretches.
struct Watch(Arc<Checker>);

impl Observer for Watch {
    fn admitted(&self, in_flight: u32, probe: bool) {
        self.0.admitted.fetch_add(1, Ordering::Relaxed);
        if probe {
            self.0.probes.fetch_add(1, Ordering::Relaxed);
        }
        self.0.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        // Every admission, `call()`'s included: never above any limit set.
        if in_flight > MAX_CEILING {
            self.0.breach(format!(
                "{in_flight} in flight at admission, above every limit ever set"
            ));
        }
    }
    fn finished(&self, _outcome: Outcome, _latency: Duration, _in_flight: u32) {
        self.0.finished.fetch_add(1, Ordering::Relaxed);
    }
    fn gate_changed(&self, gate: &Gate) {
        if !admits_non_probes(gate) {
            let mut closed = self.0.closed.lock().unwrap();
            if closed.open_since.is_none() {
                closed.open_since = Some(tick());
            }
        }
    }
    fn transition(&self, _transition: &Transition) {
        self.0.transitions.fetch_add(1, Ordering::Relaxed);
    }
}

/// The limiting policy behind the breaker.
enum Inner {
    Fixed(Fixed),
    Other(Box<dyn Algorithm>),
}

impl Inner {
    fn get(&self) -> &dyn Algorithm {
        match self {
            Inner::Fixed(f) => f,
            Inner::Other(p) => p.as_ref(),
        }
    }
    fn get_mut(&mut self) -> &mut dyn Algorithm {
        match self {
            Inner::Fixed(f) => f,
            Inner::Other(p) => p.as_mut(),
        }
    }
}

/// A breaker in front of a limiting policy that can be swapped, with the
/// closed-stretch bookkeeping in `gate()` and a sample count.
struct Checked {
    breaker: Breaker,
    inner: Inner,
    checker: Arc<Checker>,
}

impl Checked {
    fn meet(&self) -> Gate {
        self.breaker
            .publish()
            .gate
            .meet(self.inner.get().publish().gate)
            .sanitized()
    }
}

impl Algorithm for Checked {
    fn name(&self) -> &'static str {
        "checked"
    }
    fn publish(&self) -> Published {
        let gate = self.meet();
        if admits_non_probes(&gate) {
            let mut closed = self.checker.closed.lock().unwrap();
            if let Some(since) = closed.open_since.take() {
                closed.done.push((since, tick()));
                self.checker
                    .closed_stretches
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        let wake_at = match (
            self.breaker.publish().wake_at,
            self.inner.get().publish().wake_at,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        Published::new(gate).with_wake_at(wake_at)
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.checker.samples.fetch_add(1, Ordering::Relaxed);
        self.breaker.on_sample(now, sample);
        self.inner.get_mut().on_sample(now, sample);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        if self.breaker.publish().gate.probe && !self.breaker.on_admit(now) {
            return false;
        }
        let inner = self.inner.get_mut();
        !inner.publish().gate.probe || inner.on_admit(now)
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        self.breaker.on_rejected(now, count);
        self.inner.get_mut().on_rejected(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.breaker.handle_timeout(now);
        self.inner.get_mut().handle_timeout(now);
    }
    fn snapshot(&self) -> Snapshot {
        let mut snapshot = Snapshot::new("checked", self.meet());
        if let Some(state) = self.breaker.snapshot().state {
            snapshot = snapshot.with_state(state);
        }
        snapshot
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.breaker.poll_transition()
    }
}

type Lim = Limiter<Checked>;

/// What the tasks did, for the report.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    admitted_by_tasks: AtomicU64,
    rejected: AtomicU64,
    rejected_open: AtomicU64,
    rejected_timed_out: AtomicU64,
    queued_cancelled: AtomicU64,
    in_flight_cancelled: AtomicU64,
    aborted: AtomicU64,
    call_timeouts: AtomicU64,
    panics: AtomicU64,
    limit_changes: AtomicU64,
    swaps: AtomicU64,
    forced_open: AtomicU64,
}

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn breaker() -> Breaker {
    Breaker::new(BreakerConfig {
        window: BreakerWindow::Count { calls: 50 },
        min_calls: 20,
        cooldown: Cooldown::Exponential {
            base: Duration::from_millis(20),
            factor: 2.0,
            cap: Duration::from_millis(200),
        },
        half_open: HalfOpen::Probes {
            probes: 5,
            close_after: 4,
        },
        probe_concurrency: PROBE_CONCURRENCY,
        probe_timeout: Duration::from_millis(50),
        ramp: Duration::from_millis(100),
        ..BreakerConfig::recommended()
    })
    .unwrap()
}

/// A fresh limiting policy with at most `ceiling` in flight.
fn limiting(choice: u64, ceiling: u32) -> Inner {
    let other: Box<dyn Algorithm> = match choice % 5 {
        0 => return Inner::Fixed(Fixed::new(ceiling).unwrap()),
        1 => Box::new(
            Aimd::new(AimdConfig {
                initial: ceiling.min(20),
                min: 1,
                max: ceiling,
                ..AimdConfig::default()
            })
            .unwrap(),
        ),
        2 => Box::new(
            Vegas::new(VegasConfig {
                initial: ceiling.min(20),
                max: ceiling,
                ..VegasConfig::default()
            })
            .unwrap(),
        ),
        3 => Box::new(
            Gradient::new(GradientConfig {
                initial: ceiling.min(20),
                min: 1,
                max: ceiling,
                ..GradientConfig::default()
            })
            .unwrap(),
        ),
        _ => Box::new(
            Stack::builder()
                .push(Fixed::new(ceiling).unwrap())
                .push(
                    Throttle::new(ThrottleConfig {
                        window: Duration::from_secs(2),
                        buckets: 20,
                        ..ThrottleConfig::default()
                    })
                    .unwrap(),
                )
                .build()
                .unwrap(),
        ),
    };
    Inner::Other(other)
}

struct World {
    limiter: Arc<Lim>,
    checker: Arc<Checker>,
    tally: Arc<Tally>,
    sick: Arc<AtomicBool>,
    stop: Instant,
}

impl World {
    fn outcome(&self, rng: &mut Rng) -> Outcome {
        let failing = if self.sick.load(Ordering::Relaxed) {
            75
        } else {
            3
        };
        match rng.below(100) {
            n if n < failing => Outcome::Overload,
            n if n < failing + 5 => Outcome::Ignore,
            _ => Outcome::Success,
        }
    }

    fn rejected(&self, rejection: &Rejection) {
        add(&self.tally.rejected);
        match rejection.reason() {
            RejectReason::Open => add(&self.tally.rejected_open),
            RejectReason::TimedOut => add(&self.tally.rejected_timed_out),
            _ => {}
        }
    }

    fn admitted(&self, admission: Admission, in_flight: u32, probe: bool) {
        add(&self.tally.admitted_by_tasks);
        self.checker.check(admission, in_flight, probe);
    }

    async fn work(rng: &mut Rng) {
        match rng.below(10) {
            0..=3 => {}
            4..=7 => tokio::task::yield_now().await,
            _ => tokio::time::sleep(rng.micros(800)).await,
        }
    }

    /// Finish a call under a borrowed permit: a random outcome, or dropped.
    async fn finish(&self, rng: &mut Rng, permit: Permit<&'_ Limiter<Checked>>) {
        Self::work(rng).await;
        if rng.chance(10) {
            drop(permit);
        } else {
            permit.record(self.outcome(rng));
        }
    }

    async fn finish_owned(&self, rng: &mut Rng, permit: OwnedPermit<Checked>) {
        Self::work(rng).await;
        permit.record(self.outcome(rng));
    }

    async fn one_call(&self, rng: &mut Rng) {
        add(&self.tally.calls);
        let limiter = &*self.limiter;
        match rng.below(100) {
            // Fail fast.
            0..=34 => {
                let start = Admission::start(&self.checker);
                match limiter.try_acquire() {
                    Ok(permit) => {
                        let a = Admission::end(&self.checker, start);
                        self.admitted(a, permit.in_flight_at_start(), permit.is_probe());
                        self.finish(rng, permit).await;
                    }
                    Err(r) => self.rejected(&r),
                }
            }
            // Queue, and give up waiting at a random moment.
            35..=49 => {
                let start = Admission::start(&self.checker);
                let patience = rng.micros(1500);
                match tokio::time::timeout(patience, limiter.admission().acquire()).await {
                    Ok(Ok(permit)) => {
                        let a = Admission::end(&self.checker, start);
                        self.admitted(a, permit.in_flight_at_start(), permit.is_probe());
                        self.finish(rng, permit).await;
                    }
                    Ok(Err(r)) => self.rejected(&r),
                    Err(_elapsed) => add(&self.tally.queued_cancelled),
                }
            }
            // Queue with the limiter's own timeout, zero included.
            50..=57 => {
                let start = Admission::start(&self.checker);
                let wait = if rng.chance(20) {
                    Duration::ZERO
                } else {
                    rng.micros(1000)
                };
                match limiter.admission().max_wait(wait).acquire().await {
                    Ok(permit) => {
                        let a = Admission::end(&self.checker, start);
                        self.admitted(a, permit.in_flight_at_start(), permit.is_probe());
                        self.finish(rng, permit).await;
                    }
                    Err(r) => self.rejected(&r),
                }
            }
            // Run a call under a permit with a timeout it may miss.
            58..=69 => {
                let start = Admission::start(&self.checker);
                match limiter.try_acquire() {
                    Ok(permit) => {
                        let a = Admission::end(&self.checker, start);
                        self.admitted(a, permit.in_flight_at_start(), permit.is_probe());
                        let took = rng.micros(1000);
                        let outcome = self.outcome(rng);
                        let ran = permit
                            .run(
                                Duration::from_micros(500),
                                |_: &Result<(), ()>| outcome,
                                async move {
                                    tokio::time::sleep(took).await;
                                    Ok(())
                                },
                            )
                            .await;
                        if matches!(ran, Err(CallError::TimedOut(_))) {
                            add(&self.tally.call_timeouts);
                        }
                    }
                    Err(r) => self.rejected(&r),
                }
            }
            // `call()`, cancelled in flight by an outer timeout.
            70..=79 => {
                let outcome = self.outcome(rng);
                let took = rng.micros(1000);
                let call = limiter.admission().timeout(Duration::from_secs(1)).call(
                    |_: &Result<(), ()>| outcome,
                    move || async move {
                        tokio::time::sleep(took).await;
                        Ok(())
                    },
                );
                match tokio::time::timeout(rng.micros(1000), call).await {
                    Err(_elapsed) => add(&self.tally.in_flight_cancelled),
                    Ok(Err(CallError::Rejected(r))) => self.rejected(&r),
                    Ok(_) => {}
                }
            }
            // A call that panics, caught.
            80..=89 => {
                let panics = rng.chance(50);
                let took = rng.micros(300);
                let call = limiter.admission().timeout(Duration::from_secs(1)).call(
                    |_: &Result<(), ()>| Outcome::Success,
                    move || async move {
                        tokio::time::sleep(took).await;
                        if panics {
                            std::panic::panic_any(INJECTED);
                        }
                        Ok(())
                    },
                );
                match AssertUnwindSafe(call).catch_unwind().await {
                    Err(_panic) => add(&self.tally.panics),
                    Ok(Err(CallError::Rejected(r))) => self.rejected(&r),
                    Ok(_) => {}
                }
            }
            // An owned permit in a spawned task that panics or is aborted.
            _ => {
                let limiter = Arc::clone(&self.limiter);
                let checker = Arc::clone(&self.checker);
                let panics = rng.chance(30);
                let took = rng.micros(2000);
                let mut inner = Rng(rng.next());
                let sick = Arc::clone(&self.sick);
                let tally = Arc::clone(&self.tally);
                let world = World {
                    limiter: Arc::clone(&limiter),
                    checker: Arc::clone(&checker),
                    tally,
                    sick,
                    stop: self.stop,
                };
                let task = tokio::spawn(async move {
                    let start = Admission::start(&checker);
                    let permit = match rheostat::Admission::new(limiter).acquire().await {
                        Ok(permit) => permit,
                        Err(r) => return world.rejected(&r),
                    };
                    let a = Admission::end(&checker, start);
                    world.admitted(a, permit.in_flight_at_start(), permit.is_probe());
                    tokio::time::sleep(took).await;
                    if panics {
                        std::panic::panic_any(INJECTED);
                    }
                    world.finish_owned(&mut inner, permit).await;
                });
                if rng.chance(50) {
                    tokio::time::sleep(rng.micros(1000)).await;
                    task.abort();
                }
                match task.await {
                    Err(e) if e.is_panic() => add(&self.tally.panics),
                    Err(e) if e.is_cancelled() => add(&self.tally.aborted),
                    _ => {}
                }
            }
        }
    }

    /// Limit changes, swaps and manual breaker moves, bracketed in epochs.
    async fn control(&self, seed: u64) {
        let mut rng = Rng(seed);
        let mut forced = false;
        let mut next_health = Instant::now();
        while Instant::now() < self.stop {
            tokio::time::sleep(Duration::from_micros(500 + rng.below(3000))).await;
            if Instant::now() >= next_health {
                let sick = rng.chance(35);
                self.sick.store(sick, Ordering::Relaxed);
                next_health = Instant::now() + Duration::from_millis(100 + rng.below(600));
            }
            let now = Instant::now();
            match rng.below(100) {
                0..=59 => {
                    let new = 1 + u32::try_from(rng.below(u64::from(MAX_CEILING))).unwrap();
                    self.change(new, |c| match &mut c.inner {
                        Inner::Fixed(f) => f.set_limit(new).unwrap(),
                        inner => *inner = limiting(0, new),
                    });
                    add(&self.tally.limit_changes);
                }
                60..=84 => {
                    let choice = rng.next();
                    let new = 1 + u32::try_from(rng.below(u64::from(MAX_CEILING))).unwrap();
                    self.change(new, |c| c.inner = limiting(choice, new));
                    add(&self.tally.swaps);
                }
                85..=87 if !forced => {
                    self.limiter.update(|c| c.breaker.force_open(now));
                    forced = true;
                    add(&self.tally.forced_open);
                }
                _ if forced && rng.chance(40) => {
                    self.limiter.update(|c| c.breaker.reset(now));
                    forced = false;
                }
                _ => {}
            }
        }
        if forced {
            self.limiter.update(|c| c.breaker.reset(Instant::now()));
        }
        self.sick.store(false, Ordering::Relaxed);
    }

    /// Change the limiting policy inside one epoch whose ceiling is `ceiling`.
    fn change(&self, ceiling: u32, f: impl FnOnce(&mut Checked)) {
        self.checker.limits.begin(ceiling);
        self.limiter.update(f);
        self.checker.limits.end();
    }
}

fn run_one(order: QueueOrder, stop: Instant, runtime: &tokio::runtime::Runtime) -> String {
    let checker = Arc::new(Checker::new(16));
    let policy = Checked {
        breaker: breaker(),
        inner: limiting(0, 16),
        checker: Arc::clone(&checker),
    };
    let limiter = Arc::new(
        Limiter::builder(policy)
            .name(format!("{order:?}"))
            .queue(order, 64)
            .observer(Watch(Arc::clone(&checker)))
            // The FIFO limiter sets its shards up on contention and parks
            // from a limit of 16 per shard; the LIFO one parks at any limit.
            .sharding(match order {
                QueueOrder::Lifo => Sharding::Always,
                _ => Sharding::OnContention,
            })
            .build()
            .unwrap(),
    );
    let tally = Arc::new(Tally::default());
    let sick = Arc::new(AtomicBool::new(false));
    let world = |limiter: &Arc<Lim>| World {
        limiter: Arc::clone(limiter),
        checker: Arc::clone(&checker),
        tally: Arc::clone(&tally),
        sick: Arc::clone(&sick),
        stop,
    };

    let mut handles = Vec::new();
    for task in 0..TASKS {
        let world = world(&limiter);
        handles.push(runtime.spawn(async move {
            let mut rng = Rng(0x5EED ^ (task << 32) ^ order as u64);
            while Instant::now() < world.stop {
                let before = world.tally.rejected_open.load(Ordering::Relaxed);
                world.one_call(&mut rng).await;
                if world.tally.rejected_open.load(Ordering::Relaxed) != before {
                    // An open breaker refused a call (this task's, or
                    // another's meanwhile): back off a little, as a caller
                    // honouring Retry-After would.
                    tokio::time::sleep(rng.micros(1000)).await;
                }
            }
        }));
    }
    let controller = world(&limiter);
    handles.push(runtime.spawn(async move { controller.control(0xC0_47_20_11).await }));
    runtime.block_on(async {
        for handle in handles {
            handle.await.unwrap();
        }
    });

    // Quiet now: every slot must be back.
    let limiter = &*limiter;
    let c = &*checker;
    let t = &*tally;
    assert_eq!(limiter.in_flight(), 0, "{order:?}: slots leaked");
    let admitted = c.admitted.load(Ordering::SeqCst);
    let finished = c.finished.load(Ordering::SeqCst);
    let samples = c.samples.load(Ordering::SeqCst);
    assert_eq!(admitted, finished, "{order:?}: admitted ≠ released");
    assert_eq!(finished, samples, "{order:?}: released ≠ samples told");
    let breaches = c.breaches.lock().unwrap();
    assert!(breaches.is_empty(), "{order:?}: {breaches:#?}");
    assert!(c.checked_breaker.load(Ordering::SeqCst) > 0);
    assert!(
        c.closed_stretches.load(Ordering::SeqCst) > 0,
        "no breaker stretch seen"
    );
    // The limiter still works: a breaker reset lets a call through.
    limiter.update(|c| c.breaker.reset(Instant::now()));
    limiter.try_acquire().unwrap().success();
    assert_eq!(limiter.in_flight(), 0);

    let n = |a: &AtomicU64| a.load(Ordering::SeqCst);
    format!(
        "{order:?}: {} calls; {} admitted (= {} released = {} samples), {} of them probes, \
         {} by the tasks' own count; {} rejected ({} open, {} waits timed out); \
         cancelled: {} queued acquires, {} calls in flight by a timeout, {} tasks aborted; \
         {} call timeouts; {} panics injected and caught; {} limit changes, {} policy swaps, \
         {} forced opens, {} transitions, {} closed stretches; checked {} admissions against \
         the limit and {} non-probe admissions against the breaker, max in flight {}; in flight \
         at the end 0",
        n(&t.calls),
        admitted,
        finished,
        samples,
        n(&c.probes),
        n(&t.admitted_by_tasks),
        n(&t.rejected),
        n(&t.rejected_open),
        n(&t.rejected_timed_out),
        n(&t.queued_cancelled),
        n(&t.in_flight_cancelled),
        n(&t.aborted),
        n(&t.call_timeouts),
        n(&t.panics),
        n(&t.limit_changes),
        n(&t.swaps),
        n(&t.forced_open),
        n(&c.transitions),
        n(&c.closed_stretches),
        n(&c.checked_limit),
        n(&c.checked_breaker),
        c.max_in_flight.load(Ordering::SeqCst),
    )
}

#[test]
#[ignore = "takes a minute; run with --ignored in release"]
fn under_load_faults_and_changes_nothing_leaks_and_no_gate_is_broken() {
    let secs = std::env::var("RHEOSTAT_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(60);
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&INJECTED) {
            default_hook(info);
        }
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let stop = Instant::now() + Duration::from_secs(secs);
    // Both queue orders at once, on one runtime.
    let reports = std::thread::scope(|s| {
        let runtime = &runtime;
        let fifo = s.spawn(move || run_one(QueueOrder::Fifo, stop, runtime));
        let lifo = s.spawn(move || run_one(QueueOrder::Lifo, stop, runtime));
        [fifo.join(), lifo.join()]
    });
    let _ = std::panic::take_hook();
    for report in reports {
        match report {
            Ok(report) => println!("{report}"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}
