//! The discrete-event loop: arrivals, attempts, timeouts, retries, bulk
//! consumers, the callers' worker pools and their healthy endpoint, all
//! through the real `Limiter` on a manual clock.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use hdrhistogram::Histogram;
use rand::Rng;
use rand_pcg::Pcg64Mcg;

use super::bound::STEP;
use super::budget::CallerBudget;
use super::model::{Accept, Model};
use super::row::Row;
use super::rows;
use super::scenario::Scenario;
use rheostat::algorithms::{Algorithm, BreakerState, ConfigError, Outcome};
use rheostat::priority::Class;
use rheostat::retry::{self, Action, Attempts, RetryOutcome};
use rheostat::{Clock, Limiter, ManualClock, Permit, Readiness, RejectReason, Rejection};

type Lim = Limiter<Box<dyn Algorithm>, ManualClock>;

const NANOS: u64 = 1_000_000_000;
const TICK: u64 = STEP;
/// The most transitions a run keeps for its timeline.
pub(crate) const MAX_TRANSITIONS: usize = 20_000;

/// A breaker transition: seconds into the run, the client instance, the
/// states before and after.
pub(crate) type TransitionRecord = (f64, u32, BreakerState, BreakerState);

/// What one run of one policy through one scenario measured.
#[derive(Clone, Debug)]
pub(crate) struct RunResult {
    pub(crate) offered: u64,
    pub(crate) successes: u64,
    /// Attempts the limiter refused.
    pub(crate) rejected: u64,
    pub(crate) timeouts: u64,
    /// Requests that ended without an answer: refused, failed or timed out
    /// on their last attempt.
    pub(crate) failed: u64,
    pub(crate) client_errors: u64,
    /// Requests turned away at once: no free worker in the caller's pool.
    pub(crate) pool_full: u64,
    /// Attempts made (admitted or refused).
    pub(crate) tried: u64,
    pub(crate) sent: u64,
    pub(crate) probes: u64,
    pub(crate) in_flight_area: f64,
    pub(crate) in_flight_max: u64,
    /// Workers busy in the callers' pools, summed over instances.
    pub(crate) pool_area: f64,
    /// The most workers busy in any one instance's pool.
    pub(crate) pool_peak: u32,
    pub(crate) healthy_offered: u64,
    pub(crate) healthy_turned_away: u64,
    /// First attempts per step of the whole run (the bound's input).
    pub(crate) arrivals: Vec<u32>,
    /// Queue items arriving per step (the backlog in the first).
    pub(crate) items: Vec<u32>,
    pub(crate) transitions: Vec<TransitionRecord>,
    pub(crate) transitions_dropped: u64,
    pub(crate) latency: Histogram<u64>,
    pub(crate) open_ticks: u64,
    pub(crate) opens: u64,
    pub(crate) closes: u64,
    pub(crate) items_in: u64,
    pub(crate) items_done: u64,
    pub(crate) dead_lettered: u64,
    /// Per second of the run.
    pub(crate) per_second: Series,
    /// Simulated calls (arrivals and bulk attempts), for the speed figure.
    pub(crate) calls: u64,
    /// What the limiter's retry did, for a row whose callers retry through
    /// it.
    pub(crate) retry: Option<RetryStats>,
    /// Per class of the scenario's traffic, in its order (empty without
    /// classes).
    pub(crate) classes: Vec<ClassStats>,
    /// Success latency (µs) of requests answered in the scenario's
    /// `latency_reference` span, if it has one.
    pub(crate) reference_latency: Option<Histogram<u64>>,
}

/// One class of requests in the measured span.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ClassStats {
    pub(crate) offered: u64,
    pub(crate) successes: u64,
    /// Attempts the limiter refused.
    pub(crate) rejected: u64,
}

/// What the limiter's retry did in one run.
#[derive(Clone, Debug, Default)]
pub(crate) struct RetryStats {
    /// Decisions after a failed attempt in the measured span, by outcome,
    /// in the order of [`RetryOutcome::ALL`].
    pub(crate) decisions: [u64; RetryOutcome::ALL.len()],
    /// Requests that ended in the measured span, by attempts made (the
    /// first entry: one attempt). Requests turned away by a full pool made
    /// none and are not counted.
    pub(crate) attempts: Vec<u64>,
    /// The most attempts any request made, over the whole run.
    pub(crate) most_attempts: u32,
    /// Attempts, over the whole run, that followed a refused attempt of
    /// the same request.
    pub(crate) after_refusal: u64,
}

/// Per-second figures over the whole run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Series {
    pub(crate) successes: Vec<u32>,
    pub(crate) tried: Vec<u32>,
    pub(crate) admitted: Vec<u32>,
    pub(crate) in_flight: Vec<u32>,
    /// Busy workers per instance (a mean over instances), sampled.
    pub(crate) pool: Vec<f32>,
    pub(crate) healthy_offered: Vec<u32>,
    pub(crate) healthy_turned_away: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Tick,
    Phase(u32),
    RatePhase(u32),
    FlapUp,
    /// A timed flap goes down or comes up (the flap's generation).
    FlapEdge(u32),
    /// An arrival drawn at the rate of this generation.
    Arrival(u32),
    ItemArrival,
    HealthyArrival,
    HealthyDone(u32),
    Done(u64),
    Timeout(u64),
    Retry(u64),
    /// A refusal's cost has been paid.
    Refused(u64),
    Wake(u32),
    /// A caller waiting in the limiter's queue gives up.
    WaitOver(u64),
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    Answered(Outcome),
    TimedOut,
    Refused,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    Request(u64),
    Item(u32),
    Probe,
}

struct Job<'a> {
    owner: Owner,
    permit: Option<Permit<'a, Box<dyn Algorithm>, ManualClock>>,
    outcome: Outcome,
    holds_worker: bool,
    hung: bool,
}

struct Request {
    instance: u32,
    /// Its class: an index into the scenario's `traffic.classes`.
    class: Option<u8>,
    arrived: u64,
    deadline: u64,
    attempts: u32,
    /// The request's attempts, where the limiter's retry decides.
    retry: Option<Attempts>,
    /// Why the last attempt was refused, if it was.
    refused: Option<RejectReason>,
}

#[derive(Default)]
struct Consumer {
    item: Option<Item>,
    busy: bool,
    idle: bool,
}

#[derive(Clone, Copy)]
struct Item {
    attempts: u32,
}

/// A slab whose ids carry a generation, so a stale event finds nothing.
struct Slab<T> {
    entries: Vec<(u32, Option<T>)>,
    free: Vec<u32>,
}

impl<T> Slab<T> {
    fn new() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }

    fn insert(&mut self, value: T) -> u64 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.entries.push((0, None));
                u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let entry = &mut self.entries[index as usize];
        entry.1 = Some(value);
        (u64::from(entry.0) << 32) | u64::from(index)
    }

    fn split(id: u64) -> (usize, u32) {
        ((id & 0xFFFF_FFFF) as usize, (id >> 32) as u32)
    }

    fn get_mut(&mut self, id: u64) -> Option<&mut T> {
        let (index, generation) = Self::split(id);
        match self.entries.get_mut(index) {
            Some((g, Some(v))) if *g == generation => Some(v),
            _ => None,
        }
    }

    fn remove(&mut self, id: u64) -> Option<T> {
        let (index, generation) = Self::split(id);
        match self.entries.get_mut(index) {
            Some((g, slot)) if *g == generation && slot.is_some() => {
                *g = g.wrapping_add(1);
                self.free.push(index as u32);
                slot.take()
            }
            _ => None,
        }
    }
}

/// A caller's wait for a slot in its limiter's queue.
type Waiting<'a> = Pin<
    Box<dyn Future<Output = Result<Permit<'a, Box<dyn Algorithm>, ManualClock>, Rejection>> + 'a>,
>;

/// Wakes a waiting caller: notes its request, to be polled after the event
/// at hand.
struct Woken {
    req: u64,
    woken: Arc<Mutex<Vec<u64>>>,
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        if let Ok(mut woken) = self.woken.lock() {
            woken.push(self.req);
        }
    }
}

fn secs(nanos: u64) -> f64 {
    nanos as f64 / NANOS as f64
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 4)
}

fn exp(rng: &mut Pcg64Mcg, rate: f64) -> u64 {
    let u: f64 = rng.random();
    let gap = -(1.0 - u).ln() / rate;
    (gap * NANOS as f64).max(1.0) as u64
}

struct World<'a> {
    sc: &'a Scenario,
    limiters: &'a [Lim],
    clock: ManualClock,
    clairvoyant: Option<&'a Arc<AtomicU32>>,
    probe_aware: bool,
    /// The callers retry as the limiter's retry decides.
    limiter_retry: bool,
    events: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    now: u64,
    end: u64,
    window: (u64, u64),
    arrivals: Pcg64Mcg,
    healthy: Pcg64Mcg,
    /// Draws each arrival's class (a stream of its own, so that a
    /// scenario's other draws do not depend on whether it has classes).
    class_draw: Pcg64Mcg,
    /// The limiter's class of each of the scenario's traffic classes, for
    /// a row with priorities; empty for the others, which acquire without.
    acquire_as: Vec<Class>,
    reference: Option<(u64, u64)>,
    /// Callers waiting in their limiter's queue, by request.
    waits: BTreeMap<u64, (Waiting<'a>, Waker)>,
    /// Requests whose wait has news, in the order it came.
    woken: Arc<Mutex<Vec<u64>>>,
    model: Model,
    jobs: Slab<Job<'a>>,
    requests: Slab<Request>,
    consumers: Vec<Consumer>,
    backlog: VecDeque<Item>,
    rate: f64,
    arrival_gen: u32,
    /// A linear ramp under way: start and end (ns), rates at both.
    ramp: Option<(u64, u64, f64, f64)>,
    item_rate: f64,
    healthy_rate: f64,
    next_instance: u32,
    next_healthy: u32,
    flap_at: Option<u64>,
    flap_gen: u32,
    budgets: Vec<CallerBudget>,
    pool: u32,
    occupied: Vec<u32>,
    occupied_total: u64,
    probe_in_flight: bool,
    active: u64,
    last: u64,
    ticks: u64,
    r: RunResult,
}

/// Run `row` through `scenario` with `seed`.
pub(crate) fn run(scenario: &Scenario, row: &Row, seed: u64) -> Result<RunResult, ConfigError> {
    let clock = ManualClock::new();
    let base = clock.now();
    let limit_cell = Arc::new(AtomicU32::new(rows::share(
        scenario,
        scenario.dependency.workers.0,
    )));
    type Log = (
        Vec<(std::time::Instant, u32, BreakerState, BreakerState)>,
        u64,
    );
    let transitions: Arc<Mutex<Log>> = Arc::new(Mutex::new((Vec::new(), 0)));
    let instances = rows::instances(scenario);
    let mut limiters = Vec::with_capacity(instances as usize);
    let setup = row.limiter(scenario);
    let retry_config = setup.retry;
    for i in 0..instances {
        let policy = rows::build(row, scenario, i, &limit_cell)?;
        let log = Arc::clone(&transitions);
        let builder = Limiter::builder(policy)
            .clock(clock.clone())
            .seed(seed ^ (u64::from(i) << 32) ^ 0xA5A5)
            .on_transition(move |t| {
                if let Ok(mut log) = log.lock() {
                    if log.0.len() < MAX_TRANSITIONS {
                        log.0.push((t.at, i, t.from, t.to));
                    } else {
                        log.1 += 1;
                    }
                }
            });
        // Each instance's limiter has its own retry, and so its own budget.
        let builder = match &retry_config {
            Some(config) => builder.retry(config.clone()),
            None => builder,
        };
        let builder = match scenario.traffic.as_ref().and_then(|t| t.wait) {
            Some(wait) => builder.queue(wait.order, wait.max_waiters as usize),
            None => builder,
        };
        let builder = match &setup.priorities {
            Some(priorities) => builder.priorities(priorities.clone()),
            None => builder,
        };
        limiters.push(builder.build()?);
    }
    let end = nanos(scenario.duration);
    let window = scenario
        .measure
        .map_or((0, end), |m| (nanos(m.from), nanos(m.to)));
    let seconds = end.div_ceil(NANOS).max(1) as usize;
    let steps = (end / TICK) as usize + 1;
    let traffic = scenario.traffic.as_ref();
    let mut world = World {
        sc: scenario,
        limiters: &limiters,
        clock,
        clairvoyant: row.is_clairvoyant().then_some(&limit_cell),
        probe_aware: row.honours_probes(),
        limiter_retry: retry_config.is_some(),
        events: BinaryHeap::new(),
        seq: 0,
        now: 0,
        end,
        window,
        arrivals: Pcg64Mcg::new(u128::from(seed) << 1 | 1),
        healthy: Pcg64Mcg::new(u128::from(seed.wrapping_mul(0x9E37_79B9)) << 1 | 1),
        class_draw: Pcg64Mcg::new(u128::from(seed.wrapping_mul(0xC1A5_5E5D)) << 1 | 1),
        acquire_as: match traffic {
            Some(t) if setup.priorities.is_some() => {
                t.classes.iter().map(|c| Class::from(c.priority)).collect()
            }
            _ => Vec::new(),
        },
        waits: BTreeMap::new(),
        woken: Arc::new(Mutex::new(Vec::new())),
        reference: scenario
            .latency_reference
            .map(|span| (nanos(span.from), nanos(span.to))),
        model: Model::new(&scenario.dependency, seed.wrapping_mul(31).wrapping_add(7)),
        jobs: Slab::new(),
        requests: Slab::new(),
        consumers: Vec::new(),
        backlog: VecDeque::new(),
        rate: traffic.map_or(0.0, |t| t.rate.0),
        arrival_gen: 0,
        ramp: None,
        item_rate: scenario.bulk.as_ref().map_or(0.0, |b| b.rate.0),
        healthy_rate: traffic.map_or(0.0, |t| t.healthy.rate.unwrap_or(t.rate).0),
        next_instance: 0,
        next_healthy: 0,
        flap_at: None,
        flap_gen: 0,
        budgets: (0..instances)
            .map(|_| CallerBudget::new(&traffic.map(|t| t.retry_budget).unwrap_or_default()))
            .collect(),
        pool: traffic.map_or(u32::MAX, |t| t.pool.0),
        occupied: vec![0; instances as usize],
        occupied_total: 0,
        probe_in_flight: false,
        active: 0,
        last: 0,
        ticks: 0,
        r: RunResult {
            offered: 0,
            successes: 0,
            rejected: 0,
            timeouts: 0,
            failed: 0,
            client_errors: 0,
            pool_full: 0,
            tried: 0,
            sent: 0,
            probes: 0,
            in_flight_area: 0.0,
            in_flight_max: 0,
            pool_area: 0.0,
            pool_peak: 0,
            healthy_offered: 0,
            healthy_turned_away: 0,
            arrivals: vec![0; steps],
            items: vec![0; steps],
            transitions: Vec::new(),
            transitions_dropped: 0,
            latency: Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .unwrap_or_else(|_| unreachable!("valid histogram bounds")),
            open_ticks: 0,
            opens: 0,
            closes: 0,
            items_in: 0,
            items_done: 0,
            dead_lettered: 0,
            per_second: Series {
                successes: vec![0; seconds],
                tried: vec![0; seconds],
                admitted: vec![0; seconds],
                in_flight: vec![0; seconds],
                pool: vec![0.0; seconds],
                healthy_offered: vec![0; seconds],
                healthy_turned_away: vec![0; seconds],
            },
            calls: 0,
            retry: retry_config.as_ref().map(|_| RetryStats::default()),
            classes: vec![ClassStats::default(); traffic.map_or(0, |t| t.classes.len())],
            reference_latency: scenario.latency_reference.map(|_| {
                Histogram::new_with_bounds(1, 3_600_000_000, 3)
                    .unwrap_or_else(|_| unreachable!("valid histogram bounds"))
            }),
        },
    };
    world.start();
    world.run();
    let mut r = world.r;
    if let Ok(log) = transitions.lock() {
        for &(at, instance, from, to) in &log.0 {
            let t = nanos(at.saturating_duration_since(base));
            r.transitions.push((secs(t), instance, from, to));
            if t < window.0 || t > window.1 {
                continue;
            }
            if to == BreakerState::Open && from != BreakerState::Open {
                r.opens += 1;
            }
            if to == BreakerState::Closed && from == BreakerState::HalfOpen {
                r.closes += 1;
            }
        }
        r.transitions_dropped = log.1;
    }
    Ok(r)
}

impl<'a> World<'a> {
    fn at(&mut self, t: u64, e: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, e)));
    }

    fn in_window(&self) -> bool {
        self.now >= self.window.0 && self.now <= self.window.1
    }

    fn second(&self) -> usize {
        (self.now / NANOS) as usize
    }

    fn step(&self) -> usize {
        (self.now / TICK) as usize
    }

    fn start(&mut self) {
        self.at(0, Event::Tick);
        for (i, phase) in self.sc.dependency.phase.iter().enumerate() {
            self.at(nanos(phase.at), Event::Phase(i as u32));
        }
        if let Some(traffic) = &self.sc.traffic {
            for (i, phase) in traffic.phase.iter().enumerate() {
                self.at(nanos(phase.at), Event::RatePhase(i as u32));
            }
            if self.healthy_rate > 0.0 {
                let gap = exp(&mut self.healthy, self.healthy_rate);
                self.at(gap, Event::HealthyArrival);
            }
        }
        self.arm_arrival();
        if let Some(bulk) = &self.sc.bulk {
            self.consumers = (0..bulk.consumers.0).map(|_| Consumer::default()).collect();
            for _ in 0..bulk.backlog {
                self.backlog.push_back(Item { attempts: 0 });
                self.r.items_in += 1;
            }
            self.r.items[0] += bulk.backlog;
            if self.item_rate > 0.0 {
                let gap = exp(&mut self.arrivals, self.item_rate);
                self.at(gap, Event::ItemArrival);
            }
            for c in 0..bulk.consumers.0 {
                self.at(0, Event::Wake(c));
            }
        }
    }

    /// Draw the next arrival at the current rate. A change of rate draws
    /// afresh (arrivals are memoryless), and the old draw is dropped.
    fn arm_arrival(&mut self) {
        self.arrival_gen = self.arrival_gen.wrapping_add(1);
        if self.rate > 0.0 && self.sc.traffic.is_some() {
            let gap = exp(&mut self.arrivals, self.rate);
            self.at(self.now + gap, Event::Arrival(self.arrival_gen));
        }
    }

    fn set_rate(&mut self, rate: f64) {
        if rate != self.rate {
            self.rate = rate;
            self.arm_arrival();
        }
    }

    fn run(&mut self) {
        while let Some(Reverse((t, _, event))) = self.events.pop() {
            if t > self.end {
                break;
            }
            self.advance(t);
            match event {
                Event::Tick => self.tick(),
                Event::Phase(i) => self.phase(i as usize),
                Event::RatePhase(i) => self.rate_phase(i as usize),
                Event::FlapUp => {
                    self.flap_at = None;
                    self.flap_edge();
                }
                Event::FlapEdge(gen) => {
                    if gen == self.flap_gen {
                        self.flap_edge();
                        self.arm_flap_edge();
                    }
                }
                Event::Arrival(gen) => {
                    if gen == self.arrival_gen {
                        self.arrival();
                    }
                }
                Event::ItemArrival => self.item_arrival(),
                Event::HealthyArrival => self.healthy_arrival(),
                Event::HealthyDone(i) => self.release_worker(i),
                Event::Done(job) => self.done(job),
                Event::Timeout(job) => self.timeout(job),
                Event::Retry(req) => self.attempt(req),
                Event::Refused(req) => self.request_attempt_ended(req, Ended::Refused),
                Event::Wake(c) => self.wake(c),
                Event::WaitOver(req) => self.wait_over(req),
            }
            if !self.waits.is_empty() {
                self.poll_woken();
            }
        }
        self.advance(self.end);
    }

    fn advance(&mut self, t: u64) {
        let from = self.last.max(self.window.0);
        let to = t.min(self.window.1);
        if to > from {
            let dt = secs(to - from);
            self.r.in_flight_area += self.active as f64 * dt;
            self.r.pool_area += self.occupied_total as f64 * dt;
        }
        self.last = t;
        self.now = t;
        self.clock.set_elapsed(Duration::from_nanos(t));
    }

    fn set_active(&mut self, active: u64) {
        self.active = active;
        if self.in_window() {
            self.r.in_flight_max = self.r.in_flight_max.max(active);
        }
    }

    /// Take a worker of `instance`'s pool, if one is free.
    fn take_worker(&mut self, instance: u32) -> bool {
        let busy = &mut self.occupied[instance as usize];
        if *busy >= self.pool {
            return false;
        }
        *busy += 1;
        let busy = *busy;
        self.occupied_total += 1;
        if self.in_window() {
            self.r.pool_peak = self.r.pool_peak.max(busy);
        }
        true
    }

    fn release_worker(&mut self, instance: u32) {
        let busy = &mut self.occupied[instance as usize];
        if *busy > 0 {
            *busy -= 1;
            self.occupied_total -= 1;
        }
    }

    fn tick(&mut self) {
        let now = self.clock.now();
        for limiter in self.limiters {
            if limiter.poll_timeout().is_some_and(|t| t <= now) {
                limiter.handle_timeout();
            }
            if self.in_window() && limiter.gate().is_shut() {
                self.r.open_ticks += 1;
            }
        }
        if let Some((from, to, a, b)) = self.ramp {
            if self.now >= to {
                self.ramp = None;
                self.set_rate(b);
            } else {
                let f = (self.now - from) as f64 / (to - from) as f64;
                self.set_rate(a + (b - a) * f);
            }
        }
        if self.ticks % 10 == 0 {
            let s = self.second();
            if let Some(slot) = self.r.per_second.in_flight.get_mut(s) {
                *slot = u32::try_from(self.active).unwrap_or(u32::MAX);
            }
            let per_instance = self.occupied_total as f32 / self.occupied.len().max(1) as f32;
            if let Some(slot) = self.r.per_second.pool.get_mut(s) {
                *slot = per_instance;
            }
        }
        self.ticks += 1;
        self.at(self.now + TICK, Event::Tick);
    }

    fn rate_phase(&mut self, i: usize) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let phase = traffic.phase[i];
        match phase.until {
            Some(until) => self.ramp = Some((self.now, nanos(until), self.rate, phase.rate.0)),
            None => {
                self.ramp = None;
                self.set_rate(phase.rate.0);
            }
        }
    }

    fn capacity_changed(&mut self) {
        if let Some(cell) = self.clairvoyant {
            let capacity = self.model.capacity(secs(self.now));
            let share = if capacity == 0 {
                0
            } else {
                rows::share(self.sc, capacity)
            };
            if cell.swap(share, Ordering::Relaxed) != share {
                for limiter in self.limiters {
                    limiter.update(|_| ());
                }
            }
        }
        if self.flap_at.is_none() && !self.model.flaps_by_time() {
            if let Some(up) = self.model.flap_change_after(secs(self.now)) {
                // Round up, so that at `t` the model agrees it is time.
                let t = (up * NANOS as f64).ceil() as u64 + 1;
                self.flap_at = Some(t);
                self.at(t.max(self.now), Event::FlapUp);
            }
        }
    }

    /// Refuse the jobs a dependency that went down drops from its queue.
    fn refuse(&mut self, refused: Vec<u64>) {
        let after = nanos(self.sc.dependency.refuse_latency);
        for job in refused {
            if let Some(j) = self.jobs.get_mut(job) {
                j.outcome = Outcome::Overload;
                self.at(self.now + after, Event::Done(job));
            }
        }
    }

    /// A flapping dependency may have gone down or come up.
    fn flap_edge(&mut self) {
        let refused = self.model.flap_tick(secs(self.now));
        self.refuse(refused);
        let started = self.model.start_queued(secs(self.now));
        self.started(started);
        self.capacity_changed();
    }

    fn arm_flap_edge(&mut self) {
        if self.model.flaps_by_time() {
            if let Some(next) = self.model.flap_change_after(secs(self.now)) {
                let t = (next * NANOS as f64).ceil() as u64 + 1;
                self.at(t.max(self.now + 1), Event::FlapEdge(self.flap_gen));
            }
        }
    }

    fn phase(&mut self, i: usize) {
        let phase = &self.sc.dependency.phase[i];
        self.flap_at = None;
        self.flap_gen = self.flap_gen.wrapping_add(1);
        let refused = self.model.apply(phase, secs(self.now));
        self.refuse(refused);
        let started = self.model.start_queued(secs(self.now));
        self.started(started);
        self.capacity_changed();
        self.arm_flap_edge();
    }

    // ----- interactive callers ---------------------------------------

    fn arrival(&mut self) {
        self.arm_arrival();
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let instance = self.next_instance;
        self.next_instance = (self.next_instance + 1) % traffic.instances.0;
        self.r.calls += 1;
        let step = self.step();
        if let Some(slot) = self.r.arrivals.get_mut(step) {
            *slot += 1;
        }
        if self.in_window() {
            self.r.offered += 1;
        }
        let class = self.draw_class();
        if let (Some(c), true) = (class, self.in_window()) {
            self.r.classes[usize::from(c)].offered += 1;
        }
        if !self.take_worker(instance) {
            if self.in_window() {
                self.r.pool_full += 1;
            }
            return;
        }
        // The limiter's retry counts the request in its budget; the
        // scenario's callers count it in theirs.
        let retry = match self.limiters[instance as usize].retry() {
            Some(retry) if self.limiter_retry => {
                Some(Attempts::new(retry, self.clock.now(), traffic.timeout))
            }
            _ => {
                self.budgets[instance as usize].deposit(self.now);
                None
            }
        };
        let req = self.requests.insert(Request {
            instance,
            class,
            arrived: self.now,
            deadline: self.now + nanos(traffic.deadline),
            attempts: 0,
            retry,
            refused: None,
        });
        self.set_active(self.active + 1);
        self.attempt(req);
    }

    fn healthy_arrival(&mut self) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let instance = self.next_healthy;
        self.next_healthy = (self.next_healthy + 1) % traffic.instances.0;
        let gap = exp(&mut self.healthy, self.healthy_rate);
        self.at(self.now + gap, Event::HealthyArrival);
        let s = self.second();
        if let Some(slot) = self.r.per_second.healthy_offered.get_mut(s) {
            *slot += 1;
        }
        let counted = self.in_window();
        if counted {
            self.r.healthy_offered += 1;
        }
        if self.take_worker(instance) {
            let done = self.now + nanos(traffic.healthy.latency);
            self.at(done, Event::HealthyDone(instance));
        } else {
            if counted {
                self.r.healthy_turned_away += 1;
            }
            if let Some(slot) = self.r.per_second.healthy_turned_away.get_mut(s) {
                *slot += 1;
            }
        }
    }

    fn attempt(&mut self, req: u64) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        request.attempts += 1;
        if let Some(retry) = request.retry.as_mut().filter(|_| request.attempts > 1) {
            // A retry's backoff is over. The slot the limiter's retry asks
            // for ([`Action::Acquire`]) is taken below, as the scenario's
            // callers take theirs.
            let _acquire = retry.backoff_elapsed();
        }
        let after_refusal = request.refused.take().is_some();
        let (instance, deadline, attempts) = (request.instance, request.deadline, request.attempts);
        let class = request.class;
        if let Some(stats) = self.r.retry.as_mut() {
            stats.most_attempts = stats.most_attempts.max(attempts);
            stats.after_refusal += u64::from(after_refusal);
        }
        let s = self.second();
        if let Some(slot) = self.r.per_second.tried.get_mut(s) {
            *slot += 1;
        }
        if self.in_window() {
            self.r.tried += 1;
        }
        let limiters: &'a [Lim] = self.limiters;
        let limiter = &limiters[instance as usize];
        let as_class = class.and_then(|c| self.acquire_as.get(usize::from(c)).copied());
        let acquired = match (traffic.wait, as_class) {
            (None, Some(as_class)) => limiter.try_acquire_as(as_class),
            (None, None) => limiter.try_acquire(),
            (Some(wait), _) => {
                let future: Waiting<'a> = match as_class {
                    Some(as_class) => Box::pin(limiter.acquire_as(as_class)),
                    None => Box::pin(limiter.acquire()),
                };
                let waker = Waker::from(Arc::new(Woken {
                    req,
                    woken: Arc::clone(&self.woken),
                }));
                let mut future = future;
                match future.as_mut().poll(&mut Context::from_waker(&waker)) {
                    Poll::Ready(result) => result,
                    Poll::Pending => {
                        self.waits.insert(req, (future, waker));
                        let patience = wait.max_wait.map_or(u64::MAX, nanos);
                        let until = deadline.min(self.now.saturating_add(patience));
                        self.at(until.max(self.now), Event::WaitOver(req));
                        return;
                    }
                }
            }
        };
        self.acquired(req, acquired);
    }

    /// A caller waiting in the limiter's queue was handed a slot or refused.
    fn poll_woken(&mut self) {
        loop {
            let woken = match self.woken.lock() {
                Ok(mut woken) => std::mem::take(&mut *woken),
                Err(_) => return,
            };
            if woken.is_empty() {
                return;
            }
            for req in woken {
                let Some((future, waker)) = self.waits.get_mut(&req) else {
                    continue;
                };
                if let Poll::Ready(result) = future.as_mut().poll(&mut Context::from_waker(waker)) {
                    self.waits.remove(&req);
                    self.acquired(req, result);
                }
            }
        }
    }

    /// A caller gave up waiting in the limiter's queue: a refusal, whose
    /// cost it has paid waiting.
    fn wait_over(&mut self, req: u64) {
        // Leaving the queue gives back a slot handed over meanwhile.
        if self.waits.remove(&req).is_none() {
            return;
        }
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        request.refused = Some(RejectReason::TimedOut);
        let class = request.class;
        if self.in_window() {
            self.r.rejected += 1;
            if let Some(c) = class {
                self.r.classes[usize::from(c)].rejected += 1;
            }
        }
        self.request_attempt_ended(req, Ended::Refused);
    }

    /// An attempt of `req` was admitted or refused by its limiter.
    fn acquired(
        &mut self,
        req: u64,
        acquired: Result<Permit<'a, Box<dyn Algorithm>, ManualClock>, Rejection>,
    ) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let (deadline, class) = (request.deadline, request.class);
        let instance = request.instance as usize;
        let s = self.second();
        match acquired {
            Err(rejection) => {
                if self.in_window() {
                    self.r.rejected += 1;
                    if let Some(c) = class {
                        self.r.classes[usize::from(c)].rejected += 1;
                    }
                }
                if let Some(request) = self.requests.get_mut(req) {
                    request.refused = Some(rejection.reason());
                }
                self.at(self.now + nanos(traffic.reject_cost), Event::Refused(req));
            }
            Ok(permit) => {
                if let Some(slot) = self.r.per_second.admitted.get_mut(s) {
                    *slot += 1;
                }
                let limiters: &'a [Lim] = self.limiters;
                let attempts = self.requests.get_mut(req).and_then(|r| r.retry.as_mut());
                if let (Some(retry), Some(attempts)) = (limiters[instance].retry(), attempts) {
                    // The limiter's retry gives the attempt its timeout,
                    // cut at the request's deadline (a probe's own, whole),
                    // or sends none with no time left.
                    let probe = permit
                        .is_probe()
                        .then(|| permit.timeout(attempts.next_timeout()));
                    let clock = &self.clock;
                    match attempts.admitted(retry, || clock.now(), probe) {
                        Action::Send { timeout } => {
                            self.send(Owner::Request(req), permit, nanos(timeout));
                        }
                        // `Action::Expire`, the other answer to an admission.
                        _ => {
                            permit.ignore();
                            if self.in_window() {
                                self.r.failed += 1;
                            }
                            self.end_request(req);
                        }
                    }
                    return;
                }
                let ordinary = nanos(traffic.timeout).min(deadline.saturating_sub(self.now));
                // A probe gets the policy's probe timeout (`Permit::timeout`),
                // past the ordinary request's deadline: a cold dependency
                // answers slowly. The classic breaker's callers do not.
                let timeout = if self.probe_aware {
                    nanos(permit.timeout(Duration::from_nanos(ordinary)))
                } else {
                    ordinary
                }
                .max(1);
                self.send(Owner::Request(req), permit, timeout);
            }
        }
    }

    fn send(
        &mut self,
        owner: Owner,
        permit: Permit<'a, Box<dyn Algorithm>, ManualClock>,
        timeout: u64,
    ) {
        if self.in_window() {
            self.r.sent += 1;
            if permit.is_probe() {
                self.r.probes += 1;
            }
        }
        let job = self.jobs.insert(Job {
            owner,
            permit: Some(permit),
            outcome: Outcome::Overload,
            holds_worker: false,
            hung: false,
        });
        self.at(self.now + timeout, Event::Timeout(job));
        let accept = self.model.arrive(job, secs(self.now));
        self.accepted(job, accept);
    }

    fn accepted(&mut self, job: u64, accept: Accept) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        match accept {
            Accept::Serve { after, outcome } => {
                j.holds_worker = true;
                j.outcome = outcome;
                self.at(self.now + nanos(after), Event::Done(job));
            }
            Accept::Queued => {}
            Accept::Refuse { after } => {
                j.outcome = Outcome::Overload;
                self.at(self.now + nanos(after), Event::Done(job));
            }
            Accept::Hang => j.hung = true,
        }
    }

    fn started(&mut self, started: Vec<(u64, Accept)>) {
        for (job, accept) in started {
            self.accepted(job, accept);
        }
    }

    fn done(&mut self, job: u64) {
        let Some(mut j) = self.jobs.remove(job) else {
            return;
        };
        if j.holds_worker {
            let started = self.model.finish(secs(self.now));
            self.started(started);
            self.capacity_changed();
        }
        if let Some(permit) = j.permit.take() {
            permit.record(j.outcome);
            self.deliver(j.owner, Ended::Answered(j.outcome));
        }
    }

    fn timeout(&mut self, job: u64) {
        let Some(j) = self.jobs.get_mut(job) else {
            return;
        };
        let Some(permit) = j.permit.take() else {
            return;
        };
        let (owner, hung) = (j.owner, j.hung);
        if hung {
            self.jobs.remove(job);
        }
        permit.overload();
        if self.in_window() {
            self.r.timeouts += 1;
        }
        self.deliver(owner, Ended::TimedOut);
    }

    /// An attempt ended.
    fn deliver(&mut self, owner: Owner, ended: Ended) {
        match owner {
            Owner::Request(req) => self.request_attempt_ended(req, ended),
            Owner::Item(c) => self.item_attempt_ended(c, ended),
            Owner::Probe => self.probe_in_flight = false,
        }
    }

    fn request_attempt_ended(&mut self, req: u64, ended: Ended) {
        let Some(traffic) = &self.sc.traffic else {
            return;
        };
        if self.limiter_retry && ended != Ended::Answered(Outcome::Success) {
            self.limiter_retry_after(req, ended);
            return;
        }
        match ended {
            Ended::Answered(Outcome::Success) => {
                let (arrived, class) = self
                    .requests
                    .get_mut(req)
                    .map_or((self.now, None), |r| (r.arrived, r.class));
                self.success(Some(self.now - arrived));
                self.class_success(class, self.now - arrived);
                self.end_request(req);
            }
            Ended::Answered(Outcome::Ignore) => {
                if self.in_window() {
                    self.r.client_errors += 1;
                }
                self.end_request(req);
            }
            Ended::Answered(Outcome::Overload) | Ended::TimedOut | Ended::Refused => {
                let Some(request) = self.requests.get_mut(req) else {
                    return;
                };
                let retry_at = self.now + nanos(traffic.backoff);
                let retryable = ended != Ended::Refused || traffic.retry_rejected;
                let (attempts, deadline, instance) =
                    (request.attempts, request.deadline, request.instance);
                if retryable
                    && attempts < traffic.attempts.0
                    && retry_at < deadline
                    && self.budgets[instance as usize].withdraw(self.now)
                {
                    self.at(retry_at, Event::Retry(req));
                } else {
                    if self.in_window() {
                        self.r.failed += 1;
                    }
                    self.end_request(req);
                }
            }
        }
    }

    /// An attempt of a request whose callers retry through the limiter
    /// failed, was refused, or was answered with a client error: the
    /// limiter's retry decides what follows, as in `Limiter::call`.
    fn limiter_retry_after(&mut self, req: u64, ended: Ended) {
        let in_window = self.in_window();
        let limiters: &'a [Lim] = self.limiters;
        let Some(request) = self.requests.get_mut(req) else {
            return;
        };
        let limiter = &limiters[request.instance as usize];
        let (Some(retry), Some(attempts)) = (limiter.retry(), request.retry.as_mut()) else {
            // Unreachable: the row's limiters have a retry, and its requests
            // began a call. Should it happen, the request ends unanswered.
            if in_window {
                self.r.failed += 1;
            }
            self.end_request(req);
            return;
        };
        let shut = || matches!(limiter.readiness(), Readiness::Shut { .. });
        let clock = &self.clock;
        let now = || clock.now();
        let action = match ended {
            Ended::Answered(outcome) => {
                attempts.ended(retry, retry::Ended::Ran(outcome.into()), now, shut)
            }
            Ended::TimedOut => attempts.ended(retry, retry::Ended::TimedOut, now, shut),
            Ended::Refused => {
                let reason = request.refused.unwrap_or(RejectReason::LimitReached);
                attempts.refused(retry, reason, now, shut)
            }
        };
        let decided = match action {
            Action::Sleep { decided, .. } => Some(decided),
            Action::Answer { decided } => decided,
            _ => None,
        };
        if let (Some(stats), Some(decided), true) = (self.r.retry.as_mut(), decided, in_window) {
            if let Some(i) = RetryOutcome::ALL.iter().position(|&o| o == decided.outcome) {
                stats.decisions[i] += 1;
            }
        }
        if let Action::Sleep { wait, .. } = action {
            self.at(self.now + nanos(wait), Event::Retry(req));
            return;
        }
        // The call is answered; or, unreachable, a wait in the queue is
        // asked for, which the rows' retries never allow
        // (`rows::retry_config` leaves `wait_on_limit` off): either way
        // the request ends.
        if in_window {
            if ended == Ended::Answered(Outcome::Ignore) {
                self.r.client_errors += 1;
            } else {
                self.r.failed += 1;
            }
        }
        self.end_request(req);
    }

    /// Draw an arriving request's class, if the scenario's traffic has
    /// classes.
    fn draw_class(&mut self) -> Option<u8> {
        let classes = &self.sc.traffic.as_ref()?.classes;
        let last = classes.len().checked_sub(1)?;
        let u: f64 = self.class_draw.random();
        let mut sum = 0.0;
        let i = classes
            .iter()
            .position(|c| {
                sum += c.share.0;
                u < sum
            })
            .unwrap_or(last);
        u8::try_from(i).ok()
    }

    /// An interactive request of `class` answered successfully after
    /// `latency` (ns) from its arrival.
    fn class_success(&mut self, class: Option<u8>, latency: u64) {
        if self.in_window() {
            if let Some(c) = class {
                self.r.classes[usize::from(c)].successes += 1;
            }
        }
        if let (Some((from, to)), Some(h)) = (self.reference, self.r.reference_latency.as_mut()) {
            if self.now >= from && self.now <= to {
                let micros = (latency / 1_000).max(1);
                let _ = h.record(micros.min(3_600_000_000));
            }
        }
    }

    /// A success; `latency` from arrival for interactive requests.
    fn success(&mut self, latency: Option<u64>) {
        let s = self.second();
        if let Some(slot) = self.r.per_second.successes.get_mut(s) {
            *slot += 1;
        }
        if self.in_window() {
            self.r.successes += 1;
            if let Some(latency) = latency {
                let micros = (latency / 1_000).max(1);
                let _ = self.r.latency.record(micros.min(3_600_000_000));
            }
        }
    }

    fn end_request(&mut self, req: u64) {
        if let Some(request) = self.requests.remove(req) {
            if self.in_window() {
                if let Some(stats) = self.r.retry.as_mut() {
                    let i = request.attempts.max(1) as usize - 1;
                    if stats.attempts.len() <= i {
                        stats.attempts.resize(i + 1, 0);
                    }
                    stats.attempts[i] += 1;
                }
            }
            self.set_active(self.active.saturating_sub(1));
            self.release_worker(request.instance);
        }
    }

    // ----- bulk consumers ----------------------------------------------

    fn item_arrival(&mut self) {
        self.backlog.push_back(Item { attempts: 0 });
        self.r.items_in += 1;
        let step = self.step();
        if let Some(slot) = self.r.items.get_mut(step) {
            *slot += 1;
        }
        if let Some(c) = self.consumers.iter().position(|c| c.idle) {
            self.consumers[c].idle = false;
            self.at(self.now, Event::Wake(c as u32));
        }
        let gap = exp(&mut self.arrivals, self.item_rate);
        self.at(self.now + gap, Event::ItemArrival);
    }

    fn wake(&mut self, c: u32) {
        let Some(bulk) = &self.sc.bulk else { return };
        let pause = nanos(bulk.pause);
        let consumer = &mut self.consumers[c as usize];
        if consumer.busy {
            return;
        }
        if consumer.item.is_none() {
            match self.backlog.pop_front() {
                Some(item) => consumer.item = Some(item),
                None => {
                    consumer.idle = true;
                    return;
                }
            }
        }
        let limiter = &self.limiters[0];
        match limiter.readiness() {
            Readiness::Shut { retry_after } => {
                let wait = retry_after.map_or(pause, nanos).max(1_000_000);
                self.at(self.now + wait, Event::Wake(c));
                return;
            }
            Readiness::Probing if bulk.active_probe => {
                if !self.probe_in_flight {
                    if let Ok(permit) = limiter.try_acquire() {
                        if permit.is_probe() {
                            self.probe_in_flight = true;
                            self.send(Owner::Probe, permit, nanos(bulk.timeout));
                        } else {
                            permit.ignore();
                        }
                    }
                }
                self.at(self.now + pause, Event::Wake(c));
                return;
            }
            Readiness::Probing | Readiness::Ready => {}
        }
        match limiter.try_acquire() {
            Err(_) => self.at(self.now + pause, Event::Wake(c)),
            Ok(permit) => {
                self.consumers[c as usize].busy = true;
                self.r.calls += 1;
                let s = self.second();
                if let Some(slot) = self.r.per_second.admitted.get_mut(s) {
                    *slot += 1;
                }
                if let Some(slot) = self.r.per_second.tried.get_mut(s) {
                    *slot += 1;
                }
                self.set_active(self.active + 1);
                self.send(Owner::Item(c), permit, nanos(bulk.timeout));
            }
        }
    }

    fn item_attempt_ended(&mut self, c: u32, ended: Ended) {
        let Some(bulk) = &self.sc.bulk else { return };
        self.set_active(self.active.saturating_sub(1));
        let consumer = &mut self.consumers[c as usize];
        consumer.busy = false;
        let Some(item) = consumer.item.as_mut() else {
            return;
        };
        match ended {
            Ended::Answered(Outcome::Success | Outcome::Ignore) => {
                consumer.item = None;
                self.r.items_done += 1;
                self.success(None);
                self.at(self.now, Event::Wake(c));
            }
            Ended::Answered(Outcome::Overload) | Ended::TimedOut | Ended::Refused => {
                item.attempts += 1;
                if item.attempts >= bulk.attempts.0 {
                    consumer.item = None;
                    self.r.dead_lettered += 1;
                    self.at(self.now, Event::Wake(c));
                } else {
                    let i = (item.attempts as usize - 1).min(bulk.backoff.len() - 1);
                    let wait = nanos(bulk.backoff[i]);
                    self.at(self.now + wait, Event::Wake(c));
                }
            }
        }
    }
}
