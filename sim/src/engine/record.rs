//! The recording of a run: what one run of one policy measured
//! ([`RunResult`]: counts, the per-second series, latencies, breaker
//! transitions, per class and per retry decision), and the moments the
//! loop writes to it (the in-flight count, the tick's samples, a success).

use super::*;

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
    /// Probes sent in each second of the measured span.
    pub(crate) probes_per_second: Vec<u32>,
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
    /// Whether the limiter's retry hedges.
    pub(crate) hedging: bool,
    /// What became of the hedges weighed in the measured span, by outcome,
    /// in the order of [`HedgeOutcome::ALL`]: sent, and each sent won or
    /// lost once its race was decided; or why none was sent.
    pub(crate) hedges: [u64; HedgeOutcome::ALL.len()],
}

impl RetryStats {
    /// Count one hedge's `outcome`.
    pub(super) fn hedge(&mut self, outcome: HedgeOutcome, n: u64) {
        if let Some(i) = HedgeOutcome::ALL.iter().position(|&o| o == outcome) {
            self.hedges[i] += n;
        }
    }
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

impl<'a> World<'a> {
    pub(super) fn set_active(&mut self, active: u64) {
        self.active = active;
        if self.in_window() {
            self.r.in_flight_max = self.r.in_flight_max.max(active);
        }
    }

    pub(super) fn tick(&mut self) {
        let now = self.clock.now();
        for limiter in self.limiters {
            if limiter.gate().until.is_some_and(|t| t <= now) {
                limiter.wake();
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
            let per_instance = self.pools.total as f32 / self.pools.busy.len().max(1) as f32;
            if let Some(slot) = self.r.per_second.pool.get_mut(s) {
                *slot = per_instance;
            }
        }
        self.ticks += 1;
        self.at(self.now + TICK, Event::Tick);
    }

    /// An interactive request of `class` answered successfully after
    /// `latency` (ns) from its arrival.
    pub(super) fn class_success(&mut self, class: Option<u8>, latency: u64) {
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
    pub(super) fn success(&mut self, latency: Option<u64>) {
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
}
