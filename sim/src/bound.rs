//! The bound: the most goodput the modelled dependency could deliver to the
//! offered load, step by step. Every ratio in a comparison is against it,
//! and no policy can beat it (a test checks every shipped scenario).
//!
//! The bound is a fluid model that knows everything a policy could hope to
//! know and more:
//!
//! - **The arrivals are the run's own.** Every policy sees the same
//!   arrivals (the arrival generator is separate from everything a policy
//!   changes), so the bound counts those arrivals, step by step, not a
//!   rate.
//! - **A request can succeed only while it has time.** Each arrival is
//!   worth the chance that one of its attempts succeeds before its
//!   deadline: an attempt succeeds if it is not hung, not answered with an
//!   error, and served within the caller's patience (the per-attempt
//!   timeout, or the recommended breaker's probe timeout, 30 s, for a
//!   probe); retries are granted as if no budget
//!   applied, and each attempt as if it met the dependency at its best
//!   within the request's deadline. A queue item has no deadline. A row
//!   whose callers retry as its limiter decides makes up to its retry
//!   policy's attempts: where that is not the scenario's `attempts`, the
//!   row gets a bound of its own, the same in every other respect. A row
//!   that hedges gets one too, in which a client error is a failure
//!   another attempt may follow: a hedge out when an attempt is answered
//!   with a client error may still answer the request (the model draws
//!   each attempt's outcome on its own). Stalls (`dependency.stall`) are
//!   left out: a stall counted as an ordinary service time serves sooner,
//!   and holds its worker less, than it does, so the bound stays one.
//! - **The dependency serves at most its workers' worth.** A worker is
//!   held for the whole service time (the model keeps serving after the
//!   caller has given up), so `workers / mean service time` calls a
//!   second, of which the share above succeed; while it is down, none; a
//!   dependency flapping by request count serves at most `serve` requests
//!   per `down`. The bound ignores the dependency's queue limit and the
//!   callers' pools, and takes a cold dependency as already warm.
//! - **Work is served earliest deadline first** from an unbounded backlog
//!   (the best order for deadlines), interactive requests before queue
//!   items, whose patience is unbounded.
//!
//! Two allowances make it a bound on a finite run and not only on average:
//! the calls already in service when the measured span starts (at most one
//! per worker), and three standard deviations of the run's own randomness
//! (service times and outcomes are drawn per call, so a lucky run serves a
//! little more than the mean). The report states both.

use std::collections::VecDeque;
use std::time::Duration;

use super::scenario::{Flap, Outage, Scenario};
use super::values::Latency;

/// Nanoseconds per step of the bound (and of the arrival counts it reads).
pub(crate) const STEP: u64 = 100_000_000;
const STEP_SECS: f64 = 0.1;

/// The bound over a run, step by step.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bound {
    /// Successes the fluid model delivers in each step.
    pub(crate) served: Vec<f64>,
    /// The variance each step contributes (binomial and renewal noise).
    pub(crate) variance: Vec<f64>,
    /// Calls that may be in service at the start of each step, and succeed.
    pub(crate) in_service: Vec<f64>,
    /// Successes each step could deliver to that step's own arrivals
    /// (no backlog carried from earlier steps): what recovery is measured
    /// against, so that catching up on a backlog the policy no longer
    /// holds is not asked of it.
    pub(crate) steady: Vec<f64>,
}

impl Bound {
    /// Successes in `[from, to)` seconds: the fluid total, and the
    /// allowance (calls in service at `from`, three standard deviations).
    pub(crate) fn over(&self, from: f64, to: f64) -> (f64, f64) {
        let a = ((from / STEP_SECS).round() as usize).min(self.served.len());
        let b = ((to / STEP_SECS).round() as usize).min(self.served.len());
        let fluid: f64 = self.served[a..b].iter().sum();
        let variance: f64 = self.variance[a..b].iter().sum();
        let edge = self.in_service.get(a).copied().unwrap_or(0.0);
        (fluid, edge + 3.0 * variance.sqrt())
    }

    /// The fluid successes in each whole second.
    pub(crate) fn per_second(&self) -> Vec<f64> {
        self.served.chunks(10).map(|c| c.iter().sum()).collect()
    }

    /// The steady successes in each whole second.
    pub(crate) fn steady_per_second(&self) -> Vec<f64> {
        self.steady.chunks(10).map(|c| c.iter().sum()).collect()
    }
}

/// A log-normal service time's moments.
#[derive(Clone, Copy, Debug)]
struct Service {
    mu: f64,
    sigma: f64,
}

fn normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

impl Service {
    fn new(latency: &Latency) -> Self {
        let median = latency.median.as_secs_f64().max(1e-9);
        let p99 = latency.p99.as_secs_f64().max(median);
        Service {
            mu: median.ln(),
            sigma: (p99 / median).ln() / 2.326,
        }
    }

    fn mean(&self) -> f64 {
        (self.mu + self.sigma * self.sigma / 2.0).exp()
    }

    /// The squared coefficient of variation.
    fn cv2(&self) -> f64 {
        (self.sigma * self.sigma).exp_m1()
    }

    /// P(S ≤ t).
    fn cdf(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        if self.sigma < 1e-12 {
            return if t.ln() >= self.mu { 1.0 } else { 0.0 };
        }
        normal_cdf((t.ln() - self.mu) / self.sigma)
    }

    /// E[min(S, t)].
    fn mean_capped(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        if self.sigma < 1e-12 {
            return self.mu.exp().min(t);
        }
        let s2 = self.sigma * self.sigma;
        let below = self.mean() * normal_cdf((t.ln() - self.mu - s2) / self.sigma);
        below + t * (1.0 - self.cdf(t))
    }
}

/// The dependency at one step.
#[derive(Clone, Copy, Debug)]
struct State {
    workers: f64,
    service: Service,
    overload: f64,
    client: f64,
    hang: f64,
    outage: Outage,
    flap: Option<(Flap, f64)>,
}

impl State {
    fn down(&self, t: f64) -> bool {
        if self.outage != Outage::None {
            return true;
        }
        match self.flap {
            Some((flap, start)) => match flap.up {
                Some(up) => {
                    let down = flap.down.as_secs_f64();
                    (t - start).max(0.0) % (down + up.as_secs_f64()) < down
                }
                None => false,
            },
            None => false,
        }
    }

    /// Successes a step may hold when flapping by request count.
    fn flap_cap(&self) -> f64 {
        match self.flap {
            Some((flap, _)) if flap.up.is_none() => {
                let serve = flap.serve.map_or(0.0, |s| f64::from(s.0));
                serve * STEP_SECS / flap.down.as_secs_f64().max(1e-9)
            }
            _ => f64::INFINITY,
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 4)
}

/// The bound for `scenario`, given the run's first attempts (`arrivals`)
/// and queue items (`items`) per step.
pub(crate) fn bound(scenario: &Scenario, arrivals: &[u32], items: &[u32]) -> Bound {
    let attempts = scenario.traffic.as_ref().map_or(1, |t| t.attempts.0);
    bound_with_attempts(scenario, arrivals, items, attempts, false)
}

/// The bound for callers of `scenario` that make up to `attempts` attempts
/// a request (the row whose limiter decides its retries), another attempt
/// following a client error too if they `hedge`, everything else as the
/// scenario says.
pub(crate) fn bound_with_attempts(
    scenario: &Scenario,
    arrivals: &[u32],
    items: &[u32],
    attempts: u32,
    hedge: bool,
) -> Bound {
    let steps = arrivals.len().max(items.len());
    let dep = &scenario.dependency;
    let mut state = State {
        workers: f64::from(dep.workers.0),
        service: Service::new(&dep.service),
        overload: dep.overload_errors.0,
        client: dep.client_errors.0,
        hang: dep.hang.0,
        outage: Outage::None,
        flap: None,
    };
    // The dependency at every step, and what an attempt is worth there.
    let traffic = scenario.traffic.as_ref();
    // A probe may wait for the recommended breaker's probe timeout.
    let probe = rheostat::algorithms::breaker::BreakerConfig::recommended().probe_timeout;
    let patience = traffic.map_or(0.0, |t| t.timeout.min(t.deadline).max(probe).as_secs_f64());
    let mut states = Vec::with_capacity(steps);
    let mut credit = vec![0.0; steps];
    let mut next = 0;
    for (k, slot) in credit.iter_mut().enumerate() {
        let t = k as u64 * STEP;
        let before = state.workers;
        let mut flap_started = false;
        while let Some(phase) = dep.phase.get(next).filter(|p| nanos(p.at) <= t) {
            if let Some(w) = phase.workers {
                state.workers = f64::from(w.0);
            }
            if let Some(s) = &phase.service {
                state.service = Service::new(s);
            }
            if let Some(e) = phase.overload_errors {
                state.overload = e.0;
            }
            if let Some(e) = phase.client_errors {
                state.client = e.0;
            }
            if let Some(h) = phase.hang {
                state.hang = h.0;
            }
            if let Some(o) = phase.outage {
                state.outage = o;
            }
            state.flap = phase.flap.map(|f| (f, phase.at.as_secs_f64()));
            flap_started |= phase.flap.is_some();
            next += 1;
        }
        // Calls in service on workers just taken away still finish.
        let q = (1.0 - state.overload - state.client) * state.service.cdf(patience);
        *slot = (before - state.workers).max(0.0) * q.max(0.0);
        if flap_started {
            // The first `serve` of a counted flap come before any down time.
            if let Some((flap, _)) = state.flap.filter(|(f, _)| f.up.is_none()) {
                *slot += flap.serve.map_or(0.0, |s| f64::from(s.0));
            }
        }
        states.push(state);
    }

    // Each step's attempt success chance, and the chance an attempt fails
    // in a way the caller retries.
    let attempt = |s: &State, t: f64| -> (f64, f64) {
        if s.down(t) {
            return (0.0, 1.0);
        }
        let f = s.service.cdf(patience);
        let ok = (1.0 - s.hang) * (1.0 - s.overload - s.client) * f;
        let client = if hedge { s.client } else { 0.0 };
        let retry = s.hang
            + (1.0 - s.hang) * (s.overload + client + (1.0 - s.overload - s.client) * (1.0 - f));
        (ok.max(0.0), retry.clamp(0.0, 1.0))
    };
    let chances: Vec<(f64, f64)> = states
        .iter()
        .enumerate()
        .map(|(k, s)| attempt(s, k as f64 * STEP_SECS))
        .collect();
    let (deadline_steps, attempts) = traffic.map_or((1, 1), |t| {
        ((nanos(t.deadline).div_ceil(STEP) as usize).max(1), attempts)
    });
    // The best chance within each request's deadline (a sliding maximum).
    let best = sliding_max(&chances, deadline_steps);

    let bulk = scenario.bulk.as_ref();
    let mut out = Bound {
        served: vec![0.0; steps],
        variance: vec![0.0; steps],
        in_service: vec![0.0; steps],
        steady: vec![0.0; steps],
    };
    // Successes served over the last second, for the calls in service.
    let mut recent: VecDeque<f64> = VecDeque::with_capacity(11);
    let mut recent_sum: f64 = 0.0;
    let mut held_before: f64 = 0.0;
    let mut backlog: VecDeque<(usize, f64)> = VecDeque::new();
    let mut waiting = 0.0;
    let mut items_waiting = 0.0;
    for k in 0..steps {
        let s = &states[k];
        let (ok, retry) = best[k];
        let worth = if retry >= 1.0 - 1e-12 {
            ok * f64::from(attempts)
        } else {
            ok * (1.0 - retry.powi(attempts as i32)) / (1.0 - retry)
        }
        .min(1.0);
        let arrived = f64::from(arrivals.get(k).copied().unwrap_or(0)) * worth;
        backlog.push_back((k + deadline_steps, arrived));
        waiting += arrived;
        while let Some(&(expires, amount)) = backlog.front() {
            if expires >= k {
                break;
            }
            waiting -= amount;
            backlog.pop_front();
        }
        items_waiting += f64::from(items.get(k).copied().unwrap_or(0));

        let t = k as f64 * STEP_SECS;
        let down = s.down(t);
        let mean = s.service.mean();
        let q = (1.0 - s.overload - s.client) * s.service.cdf(patience);
        // Little's law: served per second times the time each is held, with
        // three standard deviations, and never more than every worker.
        let busy = recent_sum * held_before;
        out.in_service[k] =
            (busy + 3.0 * busy.sqrt()).min(s.workers.max(states[k.saturating_sub(1)].workers));
        if !down && q > 0.0 {
            let per_step = s.workers * STEP_SECS * q / mean + credit[k];
            out.steady[k] = (f64::from(arrivals.get(k).copied().unwrap_or(0)) * worth)
                .min(per_step.min(s.flap_cap() + credit[k]));
        }
        let mut work = if down { 0.0 } else { s.workers * STEP_SECS };
        let mut flap_left = s.flap_cap();
        // Interactive requests first, earliest deadline first.
        let mut interactive = 0.0;
        if q > 0.0 && work > 0.0 {
            let can = (work * q / mean + credit[k]).min(flap_left + credit[k]);
            interactive = can.min(waiting.max(0.0));
            let mut take = interactive;
            while take > 1e-12 {
                let Some(front) = backlog.front_mut() else {
                    break;
                };
                let used = front.1.min(take);
                front.1 -= used;
                take -= used;
                if front.1 <= 1e-12 {
                    backlog.pop_front();
                }
            }
            waiting -= interactive;
            work = (work - (interactive - credit[k]).max(0.0) * mean / q).max(0.0);
            flap_left = (flap_left - interactive).max(0.0);
        }
        // Then queue items, which wait as long as it takes.
        let mut queued = 0.0;
        if let Some(b) = bulk {
            let patience = b.timeout.as_secs_f64();
            let ok = (1.0 - s.hang) * (1.0 - s.overload) * s.service.cdf(patience);
            if ok > 0.0 && !down {
                let held = (1.0 - s.hang) * s.service.mean_capped(patience) + s.hang * patience;
                let consumers = f64::from(b.consumers.0) * STEP_SECS * ok / held.max(1e-9);
                let dependency = work * ok / mean;
                queued = items_waiting.min(consumers).min(dependency).min(flap_left);
                items_waiting -= queued;
            }
        }
        out.served[k] = interactive + queued;
        // Queue items wait in the policy's queue too: their backlog is real.
        out.steady[k] += queued;
        let capacity_bound = waiting > 1e-9 || items_waiting > 1e-9;
        let noise = if capacity_bound {
            s.service.cv2() + (1.0 - q.max(ok))
        } else {
            1.0 - worth.min(1.0)
        };
        out.variance[k] = out.served[k] * noise.max(0.0);
        recent.push_back(out.served[k]);
        recent_sum += out.served[k];
        if recent.len() > 10 {
            recent_sum -= recent.pop_front().unwrap_or(0.0);
        }
        held_before = s
            .service
            .mean_capped(patience.max(bulk.map_or(0.0, |b| b.timeout.as_secs_f64())));
    }
    out
}

/// For each step, the largest chance over that step and the `width − 1`
/// after it (first element: success, second: retryable failure).
fn sliding_max(chances: &[(f64, f64)], width: usize) -> Vec<(f64, f64)> {
    let n = chances.len();
    let mut out = vec![(0.0, 0.0); n];
    // Monotone deques from the right.
    let mut ok: VecDeque<usize> = VecDeque::new();
    let mut retry: VecDeque<usize> = VecDeque::new();
    for k in (0..n).rev() {
        while ok.back().is_some_and(|&j| chances[j].0 <= chances[k].0) {
            ok.pop_back();
        }
        ok.push_back(k);
        while retry.back().is_some_and(|&j| chances[j].1 <= chances[k].1) {
            retry.pop_back();
        }
        retry.push_back(k);
        while ok.front().is_some_and(|&j| j >= k + width) {
            ok.pop_front();
        }
        while retry.front().is_some_and(|&j| j >= k + width) {
            retry.pop_front();
        }
        out[k] = (
            ok.front().map_or(0.0, |&j| chances[j].0),
            retry.front().map_or(0.0, |&j| chances[j].1),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_normal_moments_are_right() {
        let s = Service::new(&Latency {
            median: Duration::from_millis(700),
            p99: Duration::from_millis(1500),
        });
        assert!((s.cdf(0.7) - 0.5).abs() < 1e-9);
        assert!((s.cdf(1.5) - 0.99).abs() < 1e-3);
        // E[min(S, t)] tends to E[S] for a long t and to t for a short one.
        assert!((s.mean_capped(100.0) - s.mean()).abs() < 1e-9);
        assert!((s.mean_capped(0.01) - 0.01).abs() < 1e-6);
        assert!(s.mean_capped(0.7) < 0.7);
    }

    #[test]
    fn the_sliding_maximum_looks_ahead() {
        let c = [(0.1, 0.0), (0.5, 0.2), (0.2, 0.9), (0.0, 0.1)];
        let m = sliding_max(&c, 2);
        assert_eq!(m, vec![(0.5, 0.2), (0.5, 0.9), (0.2, 0.9), (0.0, 0.1)]);
    }
}
