//! The discrete-event loop: arrivals, attempts, timeouts, retries, bulk
//! consumers, the callers' worker pools and their healthy endpoint, all
//! through the real `Limiter` on a manual clock.
//!
//! This module owns the run: the [`World`] a run keeps, building it for a
//! row ([`run`]: one limiter per instance of the fleet), the event queue
//! and the clock it moves. Each concept the events touch is a module of
//! its own, adding the methods on `World` that handle its events:
//! [`callers`] (arrivals, the worker pools, the healthy endpoint),
//! [`client`] (acquiring, waiting, retrying), [`dependency`] (the model,
//! its phases and flaps, a call's end), [`bulk`] (the queue consumers) and
//! [`record`] (what a run measured).

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
use rheostat::retry::{self, Action, Attempts, HedgeOutcome, Hedging, RetryOutcome};
use rheostat::{
    clock::{Clock, ManualClock},
    limiter::Readiness,
    Limiter, Permit, RejectReason, Rejection,
};

mod bulk;
mod callers;
mod client;
mod dependency;
mod record;
mod slab;
mod store;

use bulk::{Backlog, Consumer, Item};
use callers::{Pools, Race, Request};
use client::Waiting;
use dependency::{Flapping, Job};
pub(crate) use record::{ClassStats, RetryStats, RunResult, Series, MAX_TRANSITIONS};
use slab::Slab;
use store::Store;

type Lim = Limiter<Box<dyn Algorithm>, ManualClock>;

const NANOS: u64 = 1_000_000_000;
const TICK: u64 = STEP;
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
    /// A request's attempts have run for the hedge delay (the timer's
    /// generation).
    Hedge(u64, u32),
    /// A refusal's cost has been paid.
    Refused(u64),
    Wake(u32),
    /// A caller waiting in the limiter's queue gives up.
    WaitOver(u64),
    /// The instances ask whether to claim shared probes.
    ClaimRound,
    /// Shared probes granted to an instance, lapsing at the instant.
    Granted(u32, u32, std::time::Instant),
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
    admit_as: Vec<Class>,
    reference: Option<(u64, u64)>,
    /// Callers waiting in their limiter's queue, by request.
    waits: BTreeMap<u64, (Waiting<'a>, Waker)>,
    /// Requests whose wait has news, in the order it came.
    woken: Arc<Mutex<Vec<u64>>>,
    model: Model,
    jobs: Slab<Job<'a>>,
    requests: Slab<Request>,
    backlog: Backlog,
    rate: f64,
    arrival_gen: u32,
    /// A linear ramp under way: start and end (ns), rates at both.
    ramp: Option<(u64, u64, f64, f64)>,
    healthy_rate: f64,
    next_instance: u32,
    next_healthy: u32,
    flapping: Flapping,
    budgets: Vec<CallerBudget>,
    pools: Pools,
    probe_in_flight: bool,
    /// The store of a row whose fleet shares its probes.
    store: Option<Store>,
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
            .seed(seed ^ (u64::from(i) << 32) ^ 0xA5A5 ^ setup.reseed)
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
        let builder = match setup.timeout {
            Some(timeout) => builder.timeout(timeout),
            None => builder,
        };
        let builder = match setup.shared_probes {
            Some(_) => builder.shared_probes(),
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
        admit_as: match traffic {
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
        backlog: Backlog {
            consumers: Vec::new(),
            items: VecDeque::new(),
            rate: scenario.bulk.as_ref().map_or(0.0, |b| b.rate.0),
        },
        rate: traffic.map_or(0.0, |t| t.rate.0),
        arrival_gen: 0,
        ramp: None,
        healthy_rate: traffic.map_or(0.0, |t| t.healthy.rate.unwrap_or(t.rate).0),
        next_instance: 0,
        next_healthy: 0,
        flapping: Flapping::default(),
        budgets: (0..instances)
            .map(|_| CallerBudget::new(&traffic.map(|t| t.retry_budget).unwrap_or_default()))
            .collect(),
        pools: Pools {
            size: traffic.map_or(u32::MAX, |t| t.pool.0),
            busy: vec![0; instances as usize],
            total: 0,
        },
        probe_in_flight: false,
        store: setup
            .shared_probes
            .map(|shared| Store::new(shared, instances)),
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
            probes_per_second: vec![0; seconds],
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
            retry: retry_config.as_ref().map(|config| RetryStats {
                hedging: config.hedge.is_some(),
                ..RetryStats::default()
            }),
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
        if self.store.is_some() {
            self.at(0, Event::ClaimRound);
        }
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
            self.backlog.consumers = (0..bulk.consumers.0).map(|_| Consumer::default()).collect();
            for _ in 0..bulk.backlog {
                self.backlog.items.push_back(Item { attempts: 0 });
                self.r.items_in += 1;
            }
            self.r.items[0] += bulk.backlog;
            if self.backlog.rate > 0.0 {
                let gap = exp(&mut self.arrivals, self.backlog.rate);
                self.at(gap, Event::ItemArrival);
            }
            for c in 0..bulk.consumers.0 {
                self.at(0, Event::Wake(c));
            }
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
                    self.flapping.at = None;
                    self.flap_edge();
                }
                Event::FlapEdge(gen) => {
                    if gen == self.flapping.generation {
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
                Event::Hedge(req, timer) => self.hedge_due(req, timer),
                Event::Refused(req) => self.request_attempt_ended(req, Ended::Refused),
                Event::Wake(c) => self.wake(c),
                Event::WaitOver(req) => self.wait_over(req),
                Event::ClaimRound => self.claim_round(),
                Event::Granted(i, granted, lapse) => self.granted(i, granted, lapse),
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
            self.r.pool_area += self.pools.total as f64 * dt;
        }
        self.last = t;
        self.now = t;
        self.clock.set_elapsed(Duration::from_nanos(t));
    }
}
