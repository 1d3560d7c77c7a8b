//! The virtual-time run of one scenario: a generator, a caller that takes a
//! slot from a gatekeeper (Vector's controller driven directly, or a real
//! `rheostat::Limiter` on a `ManualClock`), retries, and the test link.
//!
//! What Vector's harness does, and so what this does:
//!
//! - `requests` requests, one every `interval` seconds (all at once for 0);
//!   the caller sends the next one as soon as it gets a slot, in order.
//! - Every attempt has a 1 s timeout. A failed attempt (a deferral, an
//!   injected failure, a timeout) is retried, forever, after a Fibonacci
//!   backoff without jitter: 1, 2, 3, 5, 8, 13, 21 s, then 30 s each.
//! - Timers run as Tokio's do under paused time, which Vector's test uses.
//!   The timer wheel counts whole milliseconds from the runtime's start;
//!   a deadline is rounded up to its tick, the current time down to its
//!   tick, and the paused clock jumps by the whole milliseconds between.
//!   Vector pauses the clock some fraction of a millisecond after the
//!   runtime starts, and every jump keeps that fraction, so every timer of
//!   `d` fires `⌈fraction + d⌉` milliseconds after it is set: a 100 ms
//!   answer takes 101 ms (hence the 0.102 s upper bounds of Vector's
//!   ranges). The fraction here is drawn from the seed.
//! - The run ends when the link has answered `requests` attempts with a
//!   success; every statistic stops there.
//! - At one instant, every event due is handled before any waiting request
//!   takes a slot (releases first, then admissions).
//!
//! Two ways a caller holds a limiter, both run for every row:
//!
//! - [`Mode::PerRequest`]: one slot per request, held across its retries
//!   (Vector's sinks: the limiter wraps the retry layer). Vector's
//!   controller is told of each attempt as it ends (or, as before Vector's
//!   `attempt.rs`, only of the whole call: [`Direct::whole_call`]); a
//!   `Limiter` permit records once, when the request finally succeeds, with
//!   the latency of the whole retry sequence: a permit has no way to report
//!   the attempts in between.
//! - [`Mode::PerAttempt`]: one slot per attempt. A failed attempt gives its
//!   slot back (as an overload); its retry, once its backoff is over, waits
//!   for a slot in line with fresh requests, oldest first.

use rheostat::Admission;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rheostat::algorithms::Algorithm;
use rheostat::{
    clock::{Clock, ManualClock},
    Limiter, OwnedPermit, RejectReason,
};

use super::controller::VectorArc;
use super::link::{Answer, Link};
use super::scenario::Params;
use super::stats::{Range3, Spread, TimeHistogram, TimeWeighted};

/// How a caller holds its slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One slot per request, held across its retries.
    PerRequest,
    /// One slot per attempt.
    PerAttempt,
}

impl Mode {
    pub(crate) fn title(self) -> &'static str {
        match self {
            Mode::PerRequest => "(a) one slot per request, held across its retries",
            Mode::PerAttempt => "(b) one slot per attempt",
        }
    }
}

/// How an attempt ended, for the caller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Ended {
    /// Answered with a success after this round trip.
    Served(Duration),
    /// Answered with a retriable error (a deferral, an injected failure).
    Refused,
    /// No answer within the timeout (dropped, or too slow).
    TimedOut,
}

/// Something that hands out slots: the policy under test.
pub(crate) trait Gatekeeper {
    type Slot;

    /// Take a slot now, or say when to try again (`None`: when a slot is
    /// given back).
    fn try_take(&mut self, now: Instant) -> Result<Self::Slot, Option<Instant>>;

    /// An attempt made under `slot` ended (before the slot is given back,
    /// if it is).
    fn attempt_ended(&mut self, now: Instant, ended: Ended);

    /// An attempt under `slot` failed and the request keeps the slot for a
    /// retry (one slot per request).
    fn attempt_failed(&mut self, slot: &mut Self::Slot, ended: Ended) {
        let _ = (slot, ended);
    }

    /// A retry goes out under `slot`, held since an earlier attempt.
    fn retry_started(&mut self, slot: &mut Self::Slot) {
        let _ = slot;
    }

    /// Give a slot back after holding it for `held`; `last` is how its last
    /// attempt ended.
    fn give_back(&mut self, now: Instant, slot: Self::Slot, held: Duration, last: Ended);

    /// Slots held now.
    fn in_flight(&self) -> u32;

    /// The current limit.
    fn limit(&self) -> u32;

    /// Statistics the gatekeeper keeps itself (Vector's controller: the limit
    /// at each round's end, and each round's mean RTT), replacing the
    /// harness's own sampling of the limit.
    fn own_stats(&self) -> Option<(Option<Spread>, Option<Range3>)> {
        None
    }
}

/// Vector's controller, driven as Vector drives it.
#[derive(Debug)]
pub(crate) struct Direct {
    pub(crate) arc: VectorArc,
    pub(crate) mode: Mode,
    /// Vector before per-attempt reports (`attempt.rs`): with a slot held
    /// across retries, the controller hears only of the whole call, timed
    /// from the slot's taking, when it finally succeeds.
    pub(crate) whole_call: bool,
}

impl Gatekeeper for Direct {
    type Slot = ();

    fn try_take(&mut self, _now: Instant) -> Result<(), Option<Instant>> {
        if self.arc.has_room() {
            self.arc.start();
            Ok(())
        } else {
            Err(None)
        }
    }

    fn attempt_ended(&mut self, _now: Instant, ended: Ended) {
        if self.mode == Mode::PerRequest && !self.whole_call {
            let (rtt, back_pressure) = split(ended);
            self.arc.attempt(rtt, back_pressure);
        }
    }

    fn give_back(&mut self, now: Instant, _slot: (), held: Duration, last: Ended) {
        match self.mode {
            Mode::PerRequest if self.whole_call => {
                let (rtt, back_pressure) = split(last);
                self.arc.finish(now, rtt.map(|_| held), back_pressure);
            }
            Mode::PerRequest => self.arc.finish(now, None, false),
            Mode::PerAttempt => {
                let (rtt, back_pressure) = split(last);
                self.arc.finish(now, rtt, back_pressure);
            }
        }
    }

    fn in_flight(&self) -> u32 {
        self.arc.in_flight()
    }

    fn limit(&self) -> u32 {
        self.arc.limit()
    }

    fn own_stats(&self) -> Option<(Option<Spread>, Option<Range3>)> {
        Some((self.arc.limits.spread(), self.arc.averaged_rtt.range()))
    }
}

fn split(ended: Ended) -> (Option<Duration>, bool) {
    match ended {
        Ended::Served(rtt) => (Some(rtt), false),
        Ended::Refused | Ended::TimedOut => (None, true),
    }
}

type Shared = Limiter<Box<dyn Algorithm>, ManualClock>;

/// A real `rheostat::Limiter`: `try_acquire`, then `success()` for a served
/// attempt and `overload()` for a refused or timed-out one.
pub(crate) struct ThroughLimiter {
    pub(crate) limiter: Arc<Shared>,
}

impl std::fmt::Debug for ThroughLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThroughLimiter")
            .field("gate", &self.limiter.gate())
            .finish()
    }
}

impl Gatekeeper for ThroughLimiter {
    type Slot = OwnedPermit<Box<dyn Algorithm>, ManualClock>;

    fn try_take(&mut self, now: Instant) -> Result<Self::Slot, Option<Instant>> {
        match Admission::new(Arc::clone(&self.limiter)).try_acquire() {
            Ok(permit) => Ok(permit),
            Err(rejection) => {
                let waits_for_a_release = rejection.reason() == RejectReason::LimitReached
                    && self.limiter.in_flight() > 0;
                if waits_for_a_release {
                    return Err(None);
                }
                // Shut or throttled: look again when the gate says, or soon.
                let soon = now + Duration::from_millis(10);
                let at = rejection
                    .retry_after()
                    .map(|d| now + d)
                    .or(self.limiter.gate().until)
                    .unwrap_or(soon);
                Err(Some(at.max(now + Duration::from_millis(1))))
            }
        }
    }

    fn attempt_ended(&mut self, _now: Instant, _ended: Ended) {}

    fn attempt_failed(&mut self, slot: &mut Self::Slot, _ended: Ended) {
        // The permit's per-attempt report: the policy hears of the
        // deferral or timeout now, as Vector's controller does.
        slot.record_attempt(rheostat::Outcome::Overload);
    }

    fn retry_started(&mut self, slot: &mut Self::Slot) {
        slot.start_attempt();
    }

    fn give_back(&mut self, _now: Instant, slot: Self::Slot, _held: Duration, last: Ended) {
        match last {
            Ended::Served(_) => slot.success(),
            Ended::Refused | Ended::TimedOut => slot.overload(),
        }
    }

    fn in_flight(&self) -> u32 {
        self.limiter.in_flight()
    }

    fn limit(&self) -> u32 {
        self.limiter.gate().limit
    }
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Run {
    /// Whether every request succeeded within [`GIVE_UP`].
    pub(crate) finished: bool,
    /// Virtual seconds until the last request succeeded.
    pub(crate) seconds: f64,
    pub(crate) attempts: u64,
    /// Attempts answered with a retriable error.
    pub(crate) deferred: u64,
    /// Attempts the link dropped (they timed out).
    pub(crate) dropped: u64,
    /// Attempts answered too late (abandoned at the timeout).
    pub(crate) slow: u64,
    /// The plain mean RTT of the served attempts, seconds.
    pub(crate) rtt_mean: f64,
    /// Vector's `stats.in_flight`: attempts at the link.
    pub(crate) link_in_flight: Option<Spread>,
    /// Vector's `stats.rate`: attempts started over the last second.
    pub(crate) link_rate: Option<Spread>,
    /// Vector's `controller.in_flight`: slots held.
    pub(crate) held: Option<Spread>,
    /// Vector's `controller.concurrency_limit`.
    pub(crate) limit: Option<Spread>,
    /// Vector's `controller.observed_rtt`: served attempts' RTTs.
    pub(crate) observed_rtt: Option<Range3>,
    /// Vector's `controller.averaged_rtt` (its controller only).
    pub(crate) averaged_rtt: Option<Range3>,
}

impl Run {
    /// Attempts that did not serve a request.
    pub(crate) fn wasted(&self) -> u64 {
        self.deferred + self.dropped + self.slow
    }
}

/// The fraction of a millisecond, from 1 ns to 1 ms − 1 ns, that the clock
/// stands past the timer wheel's ticks.
fn fraction_of_a_tick(seed: u64) -> Duration {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    Duration::from_nanos(1 + (z ^ (z >> 31)) % 999_999)
}

/// A run that has not finished after this much virtual time gives up.
pub(crate) const GIVE_UP: Duration = Duration::from_secs(3600);

const TIMEOUT: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// The next generated request is due.
    Arrival,
    /// The link answers request `req`'s current attempt.
    Answer { req: usize, ok: bool },
    /// The link sends an answer nobody waits for any more.
    Abandoned,
    /// Request `req`'s current attempt times out.
    Timeout { req: usize, dropped: bool },
    /// Request `req`'s backoff is over.
    Retry { req: usize },
    /// Look at the gate again.
    Wake,
}

struct Request<S> {
    slot: Option<S>,
    slot_taken: Instant,
    attempt_started: Instant,
    backoff: (Duration, Duration),
}

struct Sim<'c, K: Gatekeeper> {
    params: Params,
    mode: Mode,
    clock: &'c ManualClock,
    /// The timer wheel's millisecond zero.
    t0: Instant,
    /// When the run starts: `t0` and a fraction of a millisecond.
    start: Instant,
    now: Instant,
    seq: u64,
    events: BinaryHeap<Reverse<(Instant, u64, Event)>>,
    link: Link,
    keeper: K,
    requests: Vec<Request<K::Slot>>,
    /// Retries (per-attempt mode) waiting for a slot: since when, which.
    waiting: VecDeque<(Instant, usize)>,
    /// When the caller last sent a fresh request.
    last_fresh: Instant,
    wake_at: Option<Instant>,
    arrival_at: Option<Instant>,
    run: Run,
    served: u64,
    rtt_sum: f64,
    held: TimeHistogram,
    limits: TimeHistogram,
    observed: TimeWeighted,
}

/// Run `params` through `keeper` in `mode`. `clock` is the clock the keeper
/// reads (if any); the run moves it.
pub(crate) fn run<K: Gatekeeper>(
    params: Params,
    mode: Mode,
    seed: u64,
    leak_abandoned: bool,
    clock: &ManualClock,
    keeper: K,
) -> Run {
    let t0 = clock.now();
    let start = t0 + fraction_of_a_tick(seed);
    clock.set_elapsed(start - t0);
    let mut sim = Sim {
        params,
        mode,
        clock,
        t0,
        start,
        now: start,
        seq: 0,
        events: BinaryHeap::new(),
        link: Link::new(params, seed, leak_abandoned),
        keeper,
        requests: Vec::with_capacity(params.requests),
        waiting: VecDeque::new(),
        last_fresh: start,
        wake_at: None,
        arrival_at: None,
        served: 0,
        run: Run {
            finished: false,
            seconds: 0.0,
            attempts: 0,
            deferred: 0,
            dropped: 0,
            slow: 0,
            rtt_mean: f64::NAN,
            link_in_flight: None,
            link_rate: None,
            held: None,
            limit: None,
            observed_rtt: None,
            averaged_rtt: None,
        },
        rtt_sum: 0.0,
        held: TimeHistogram::default(),
        limits: TimeHistogram::default(),
        observed: TimeWeighted::default(),
    };
    sim.go();
    sim.finish()
}

impl<K: Gatekeeper> Sim<'_, K> {
    fn at(&mut self, t: Instant, event: Event) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, event)));
    }

    /// When a timer of `after`, set at `from`, fires: at its deadline's
    /// tick (rounded up), plus the fraction of a millisecond the clock
    /// carries.
    fn fire(&self, from: Instant, after: Duration) -> Instant {
        let deadline = from.saturating_duration_since(self.t0) + after;
        let tick = deadline.as_nanos().div_ceil(1_000_000);
        let fraction = self.start - self.t0;
        self.t0 + Duration::from_millis(u64::try_from(tick).unwrap_or(u64::MAX)) + fraction
    }

    /// When the generator emits request `index`: Tokio's interval, whose
    /// deadlines are `index` periods after its first, immediate, tick.
    fn arrival(&self, index: usize) -> Instant {
        if index == 0 || self.params.interval <= 0.0 {
            return self.start;
        }
        let period = Duration::from_secs_f64(self.params.interval);
        self.fire(
            self.start,
            period * u32::try_from(index).unwrap_or(u32::MAX),
        )
    }

    fn go(&mut self) {
        self.dispatch();
        while let Some(Reverse((t, _, _))) = self.events.peek().copied() {
            if t.saturating_duration_since(self.t0) > GIVE_UP {
                break;
            }
            self.now = t;
            self.clock.set_elapsed(t.saturating_duration_since(self.t0));
            while let Some(Reverse((t2, _, event))) = self.events.peek().copied() {
                if t2 != t {
                    break;
                }
                self.events.pop();
                self.handle(event);
            }
            if self.link.completed >= self.params.requests {
                self.run.finished = true;
                break;
            }
            self.dispatch();
        }
    }

    fn handle(&mut self, event: Event) {
        let now = self.now;
        match event {
            Event::Arrival => {}
            Event::Wake => {
                if self.wake_at == Some(now) {
                    self.wake_at = None;
                }
            }
            Event::Abandoned => self.link.end_abandoned(now),
            Event::Answer { req, ok } => {
                self.link.end(now, ok);
                let ended = if ok {
                    Ended::Served(now - self.requests[req].attempt_started)
                } else {
                    self.run.deferred += 1;
                    Ended::Refused
                };
                self.attempt_ended(req, ended);
            }
            Event::Timeout { req, dropped } => {
                if dropped {
                    self.run.dropped += 1;
                } else {
                    self.run.slow += 1;
                }
                self.attempt_ended(req, Ended::TimedOut);
            }
            Event::Retry { req } => match self.mode {
                Mode::PerRequest => self.attempt(req),
                Mode::PerAttempt => self.waiting.push_back((now, req)),
            },
        }
    }

    fn attempt(&mut self, req: usize) {
        let now = self.now;
        self.run.attempts += 1;
        self.requests[req].attempt_started = now;
        if let Some(slot) = self.requests[req].slot.as_mut() {
            self.keeper.retry_started(slot);
        }
        let deadline = self.fire(now, TIMEOUT);
        match self.link.start(now) {
            Answer::After { delay, ok } => {
                let answer = self.fire(now, delay);
                if answer > deadline {
                    self.at(
                        deadline,
                        Event::Timeout {
                            req,
                            dropped: false,
                        },
                    );
                    self.at(answer, Event::Abandoned);
                } else {
                    self.at(answer, Event::Answer { req, ok });
                }
            }
            Answer::Dropped => self.at(deadline, Event::Timeout { req, dropped: true }),
        }
    }

    fn attempt_ended(&mut self, req: usize, ended: Ended) {
        let now = self.now;
        if let Ended::Served(rtt) = ended {
            let secs = rtt.as_secs_f64();
            self.rtt_sum += secs;
            self.served += 1;
            self.observed.add(secs, now);
        }
        self.keeper.attempt_ended(now, ended);
        let release = matches!(ended, Ended::Served(_)) || self.mode == Mode::PerAttempt;
        if release {
            if let Some(slot) = self.requests[req].slot.take() {
                self.held.add(self.keeper.in_flight() as usize, now);
                self.limits.add(self.keeper.limit() as usize, now);
                let held = now - self.requests[req].slot_taken;
                self.keeper.give_back(now, slot, held, ended);
            }
        } else if let Some(slot) = self.requests[req].slot.as_mut() {
            self.keeper.attempt_failed(slot, ended);
        }
        if !matches!(ended, Ended::Served(_)) {
            let (previous, current) = self.requests[req].backoff;
            let next = (previous + current).min(MAX_BACKOFF);
            self.requests[req].backoff = (current, next);
            let due = self.fire(now, next);
            self.at(due, Event::Retry { req });
        }
    }

    /// Hand slots to waiting requests, oldest first, while the keeper agrees.
    fn dispatch(&mut self) {
        let now = self.now;
        loop {
            let fresh = self.requests.len();
            let fresh_due = fresh < self.params.requests && self.arrival(fresh) <= now;
            let fresh_since = self.arrival(fresh).max(self.last_fresh);
            let retry = self.waiting.front().copied();
            let pick_retry = match retry {
                Some((since, _)) => !fresh_due || since <= fresh_since,
                None => false,
            };
            if !pick_retry && !fresh_due {
                break;
            }
            let before = self.keeper.in_flight();
            let slot = match self.keeper.try_take(now) {
                Ok(slot) => slot,
                Err(wake) => {
                    if let Some(at) = wake {
                        if self.wake_at.is_none_or(|w| at < w || w <= now) {
                            self.wake_at = Some(at);
                            self.at(at, Event::Wake);
                        }
                    }
                    break;
                }
            };
            self.held.add(before as usize, now);
            let req = if pick_retry {
                self.waiting.pop_front();
                match retry {
                    Some((_, req)) => req,
                    None => unreachable!("a retry was picked"),
                }
            } else {
                self.last_fresh = now;
                self.requests.push(Request {
                    slot: None,
                    slot_taken: now,
                    attempt_started: now,
                    backoff: (Duration::ZERO, Duration::from_secs(1)),
                });
                fresh
            };
            self.requests[req].slot = Some(slot);
            self.requests[req].slot_taken = now;
            self.attempt(req);
        }
        // Wake for the next generated request if nothing else will.
        let next = self.requests.len();
        if next < self.params.requests && self.params.interval > 0.0 {
            let due = self.arrival(next);
            if due > now && self.arrival_at != Some(due) {
                self.arrival_at = Some(due);
                self.at(due, Event::Arrival);
            }
        }
    }

    fn finish(self) -> Run {
        let mut run = self.run;
        run.seconds = self.now.saturating_duration_since(self.start).as_secs_f64();
        run.rtt_mean = self.rtt_sum / self.served.max(1) as f64;
        run.link_in_flight = self.link.in_flight.spread();
        run.link_rate = self.link.rate.spread();
        run.held = self.held.spread();
        match self.keeper.own_stats() {
            Some((limit, averaged)) => {
                run.limit = limit;
                run.averaged_rtt = averaged;
            }
            None => run.limit = self.limits.spread(),
        }
        run.observed_rtt = self.observed.range();
        run
    }
}
