//! The modelled dependency: workers, a queue, a service-time distribution,
//! requests that stall, injected errors, outages, flapping and a cache that
//! must warm.

use std::collections::VecDeque;
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, LogNormal};
use rand_pcg::Pcg64Mcg;

use super::scenario::{Cold, Dependency, Flap, Outage, Phase};
use super::values::{Latency, Stall};
use rheostat::algorithms::Outcome;

/// What happens to a request that reaches the dependency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Accept {
    /// Served now: it ends after `after` with `outcome`.
    Serve { after: Duration, outcome: Outcome },
    /// Waits in the queue for a worker.
    Queued,
    /// Refused at once: it ends after `after` as an overload.
    Refuse { after: Duration },
    /// Never answered.
    Hang,
}

pub(crate) struct Model {
    workers: u32,
    busy: u32,
    queue_limit: usize,
    queue: VecDeque<u64>,
    refuse_latency: Duration,
    service: LogNormal<f64>,
    overload_errors: f64,
    client_errors: f64,
    hang: f64,
    /// Served requests that stall, if any do.
    stall: Option<Stall>,
    outage: Outage,
    cold: Option<Cold>,
    /// In `[0, 1]`: 1 is fully warm.
    warmth: f64,
    warmth_at: f64,
    flap: Option<FlapState>,
    rng: Pcg64Mcg,
}

struct FlapState {
    flap: Flap,
    /// When the flapping began (seconds).
    start: f64,
    /// Counted flapping: down until this time (seconds), or up with `left`
    /// requests left to serve.
    down_until: Option<f64>,
    left: u32,
}

impl FlapState {
    /// Timed flapping: the cycle length and the down part of it.
    fn timed(&self) -> Option<(f64, f64)> {
        self.flap.up.map(|up| {
            let down = self.flap.down.as_secs_f64();
            (down + up.as_secs_f64(), down)
        })
    }

    fn is_down(&self, now: f64) -> bool {
        match self.timed() {
            Some((cycle, down)) => (now - self.start).max(0.0) % cycle < down,
            None => self.down_until.is_some_and(|t| now < t),
        }
    }
}

/// The median, in seconds, and the σ of the log-normal with this median and
/// 99th percentile.
fn median_and_sigma(latency: &Latency) -> (f64, f64) {
    let median = latency.median.as_secs_f64().max(1e-9);
    let p99 = latency.p99.as_secs_f64().max(median);
    // The 99th percentile of a normal lies 2.326 standard deviations out.
    (median, (p99 / median).ln() / 2.326)
}

/// The mean of the service time the simulator draws for `latency`, in
/// seconds.
pub(crate) fn mean_seconds(latency: &Latency) -> f64 {
    let (median, sigma) = median_and_sigma(latency);
    median * (sigma * sigma / 2.0).exp()
}

fn lognormal(latency: &Latency) -> LogNormal<f64> {
    let (median, sigma) = median_and_sigma(latency);
    match LogNormal::new(median.ln(), sigma.max(0.0)) {
        Ok(d) => d,
        // Unreachable for finite, validated inputs; fall back to a point.
        Err(_) => LogNormal::new(median.ln(), 0.0).unwrap_or_else(|_| unreachable!()),
    }
}

impl Model {
    pub(crate) fn new(spec: &Dependency, seed: u64) -> Self {
        Model {
            workers: spec.workers.0,
            busy: 0,
            queue_limit: spec.queue as usize,
            queue: VecDeque::new(),
            refuse_latency: spec.refuse_latency,
            service: lognormal(&spec.service),
            overload_errors: spec.overload_errors.0,
            client_errors: spec.client_errors.0,
            hang: spec.hang.0,
            stall: spec.stall.filter(|s| s.share.0 > 0.0),
            outage: Outage::None,
            cold: spec.cold,
            warmth: 1.0,
            warmth_at: 0.0,
            flap: None,
            rng: Pcg64Mcg::new(u128::from(seed) | 1),
        }
    }

    /// Apply a phase at time `now` (seconds). Returns jobs that were queued
    /// and are now refused (an outage began).
    pub(crate) fn apply(&mut self, phase: &Phase, now: f64) -> Vec<u64> {
        if let Some(w) = phase.workers {
            self.workers = w.0;
        }
        if let Some(service) = &phase.service {
            self.service = lognormal(service);
        }
        if let Some(e) = phase.overload_errors {
            self.overload_errors = e.0;
        }
        if let Some(e) = phase.client_errors {
            self.client_errors = e.0;
        }
        if let Some(h) = phase.hang {
            self.hang = h.0;
        }
        if let Some(stall) = phase.stall {
            self.stall = Some(stall).filter(|s| s.share.0 > 0.0);
        }
        if let Some(outage) = phase.outage {
            self.outage = outage;
        }
        if phase.cold {
            self.warmth = 0.0;
            self.warmth_at = now;
        }
        self.flap = phase.flap.map(|flap| FlapState {
            flap,
            start: now,
            down_until: Some(now + flap.down.as_secs_f64()),
            left: flap.serve.map_or(0, |s| s.0),
        });
        if self.is_down(now) {
            self.queue.drain(..).collect()
        } else {
            Vec::new()
        }
    }

    /// Whether it flaps by time (`up`), not by request count.
    pub(crate) fn flaps_by_time(&self) -> bool {
        self.flap.as_ref().is_some_and(|f| f.timed().is_some())
    }

    /// When a flapping dependency next goes down or comes up, after `now`.
    pub(crate) fn flap_change_after(&self, now: f64) -> Option<f64> {
        let f = self.flap.as_ref()?;
        match f.timed() {
            Some((cycle, down)) => {
                let into = (now - f.start).max(0.0);
                let base = f.start + (into / cycle).floor() * cycle;
                let next = if into % cycle < down {
                    base + down
                } else {
                    base + cycle
                };
                Some(if next > now { next } else { next + cycle })
            }
            None => f.down_until,
        }
    }

    /// Bring a flapping dependency back up if its down time is over (a
    /// counted flap; a timed one follows the clock on its own). Returns the
    /// queued jobs that are refused because it went down.
    pub(crate) fn flap_tick(&mut self, now: f64) -> Vec<u64> {
        if let Some(f) = &mut self.flap {
            if f.timed().is_none() && f.down_until.is_some_and(|t| now >= t) {
                f.down_until = None;
                f.left = f.flap.serve.map_or(0, |s| s.0);
            }
        }
        if self.is_down(now) {
            self.queue.drain(..).collect()
        } else {
            Vec::new()
        }
    }

    fn is_down(&self, now: f64) -> bool {
        self.outage != Outage::None || self.flap.as_ref().is_some_and(|f| f.is_down(now))
    }

    /// The workers it has now, 0 while down.
    pub(crate) fn capacity(&self, now: f64) -> u32 {
        if self.is_down(now) {
            0
        } else {
            self.workers
        }
    }

    /// A request arrives at `now` (seconds) with id `job`.
    pub(crate) fn arrive(&mut self, job: u64, now: f64) -> Accept {
        match self.outage {
            Outage::Hang => return Accept::Hang,
            Outage::Refuse => {
                return Accept::Refuse {
                    after: self.refuse_latency,
                }
            }
            Outage::None => {}
        }
        if self.is_down(now) {
            return Accept::Refuse {
                after: self.refuse_latency,
            };
        }
        if self.hang > 0.0 && self.rng.random::<f64>() < self.hang {
            return Accept::Hang;
        }
        if let Some(f) = self.flap.as_mut().filter(|f| f.timed().is_none()) {
            // Up: it takes `serve` requests, and falls over at the next.
            if f.left == 0 {
                f.down_until = Some(now + f.flap.down.as_secs_f64());
                return Accept::Refuse {
                    after: self.refuse_latency,
                };
            }
            f.left -= 1;
        }
        if self.busy < self.workers {
            self.busy += 1;
            return self.serve(now);
        }
        if self.queue.len() < self.queue_limit {
            self.queue.push_back(job);
            return Accept::Queued;
        }
        Accept::Refuse {
            after: self.refuse_latency,
        }
    }

    /// A served request finished at `now`: free its worker and start queued
    /// ones. Returns the jobs that start, with how each will end.
    pub(crate) fn finish(&mut self, now: f64) -> Vec<(u64, Accept)> {
        self.busy = self.busy.saturating_sub(1);
        self.served(now);
        self.start_queued(now)
    }

    /// Workers were added: start queued jobs.
    pub(crate) fn start_queued(&mut self, now: f64) -> Vec<(u64, Accept)> {
        let mut started = Vec::new();
        while self.busy < self.workers && !self.is_down(now) {
            let Some(job) = self.queue.pop_front() else {
                break;
            };
            self.busy += 1;
            started.push((job, self.serve(now)));
        }
        started
    }

    fn served(&mut self, now: f64) {
        if let Some(cold) = self.cold {
            self.cool(now, &cold);
            self.warmth = (self.warmth + 1.0 / f64::from(cold.warm_after.0)).min(1.0);
        }
    }

    fn cool(&mut self, now: f64, cold: &Cold) {
        let idle = (now - self.warmth_at).max(0.0);
        self.warmth *= 0.5f64.powf(idle / cold.cool_half_life.as_secs_f64());
        self.warmth_at = now;
    }

    fn serve(&mut self, now: f64) -> Accept {
        let mut secs = self.service.sample(&mut self.rng);
        // Drawn only where requests stall, so that a scenario without
        // stalls draws as it always has.
        if let Some(stall) = self.stall {
            if self.rng.random::<f64>() < stall.share.0 {
                let (lo, hi) = (stall.from.as_secs_f64(), stall.to.as_secs_f64());
                secs = lo + (hi - lo) * self.rng.random::<f64>();
            }
        }
        if let Some(cold) = self.cold {
            self.cool(now, &cold);
            if self.warmth < 1.0 {
                let lo = cold.fastest.as_secs_f64();
                let hi = cold.slowest.as_secs_f64();
                let cold_secs = lo + (hi - lo) * self.rng.random::<f64>();
                secs = self.warmth * secs + (1.0 - self.warmth) * cold_secs;
            }
        }
        let draw: f64 = self.rng.random();
        let outcome = if draw < self.overload_errors {
            Outcome::Overload
        } else if draw < self.overload_errors + self.client_errors {
            Outcome::Ignore
        } else {
            Outcome::Success
        };
        Accept::Serve {
            after: Duration::from_secs_f64(secs.clamp(1e-6, 86_400.0)),
            outcome,
        }
    }
}
