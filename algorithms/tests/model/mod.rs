//! A small deterministic model of a dependency, driven in virtual time.
//!
//! The dependency has `workers` identical workers and one FIFO queue. A call
//! admitted at `a` takes the worker that frees up first, starts at
//! `max(a, free)` and holds it for a service time drawn uniformly from
//! `mean · [1 − jitter, 1 + jitter]`, or, with `log_normal` set, from a
//! log-normal distribution whose median is the behaviour's `mean_ms`; its
//! latency is queueing delay plus service time. Calls arrive open-loop (Poisson) or one every fixed interval;
//! a call arriving while the gate is full is rejected and forgotten. Time
//! exists only as `Instant`s computed from one origin: nothing sleeps.

#![allow(
    dead_code,
    unreachable_pub,
    reason = "each test target uses a different part of the model"
)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rheostat_algorithms::{Algorithm, Outcome, Sample};

/// A SplitMix64 generator, so every run is the same run.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `(0, 1)`.
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Exponential with the given rate per second, in seconds.
    pub fn exp(&mut self, rate: f64) -> f64 {
        -self.unit().ln() / rate
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// How calls arrive.
#[derive(Clone, Copy, Debug)]
pub enum Arrivals {
    /// Poisson, this many a second.
    Poisson(f64),
    /// One every this many seconds.
    Every(f64),
}

/// What the dependency does with a call, given the simulated second it
/// arrives at.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// It queues for a worker and answers after `mean_ms` (jittered).
    Serve { mean_ms: f64 },
    /// It fails every call after `after_ms`, reported as an overload.
    Fail { after_ms: f64 },
}

pub struct Model {
    pub workers: usize,
    pub jitter: f64,
    /// When set, service times are log-normal with this p99 / median ratio
    /// (the median being the behaviour's `mean_ms`), and `jitter` is unused.
    pub log_normal: Option<f64>,
    /// The fraction of served calls that fail as overloads anyway, at random.
    pub errors: f64,
    pub arrivals: Arrivals,
    /// The behaviour from each given second on (sorted by second).
    pub behaviour: Vec<(f64, Behaviour)>,
    pub seed: u64,
}

impl Model {
    /// 50 workers, 20 ms ± 10% service, Poisson at twice capacity
    /// (50 / 20 ms = 2500 calls/s, so 5000 calls/s).
    pub fn twice_capacity() -> Self {
        Model {
            workers: 50,
            jitter: 0.1,
            log_normal: None,
            errors: 0.0,
            arrivals: Arrivals::Poisson(5000.0),
            behaviour: vec![(0.0, Behaviour::Serve { mean_ms: 20.0 })],
            seed: 1,
        }
    }

    fn behaviour_at(&self, t: f64) -> Behaviour {
        self.behaviour
            .iter()
            .rev()
            .find(|(from, _)| *from <= t)
            .map_or(Behaviour::Serve { mean_ms: 20.0 }, |(_, b)| *b)
    }
}

/// What a run saw.
#[derive(Debug, Default)]
pub struct Trace {
    /// `(second, learnt limit, gate limit)` every 100 ms.
    pub limits: Vec<(f64, f64, u32)>,
    /// `(second admitted, latency in seconds)` of every admitted call that
    /// finished within the run.
    pub calls: Vec<(f64, f64)>,
    pub rejected: u64,
    /// The second of every rejection.
    pub rejected_at: Vec<f64>,
}

impl Trace {
    /// The first second from which the learnt limit stays in `[lo, hi]` to
    /// the end of the run, if it ends there.
    pub fn settled_from(&self, lo: f64, hi: f64) -> Option<f64> {
        let last_outside = self
            .limits
            .iter()
            .rposition(|&(_, limit, _)| limit < lo || limit > hi);
        match last_outside {
            None => self.limits.first().map(|l| l.0),
            Some(i) => self.limits.get(i + 1).map(|l| l.0),
        }
    }

    /// The `q` quantile of the latencies of calls admitted in `[from, to)`,
    /// in seconds.
    pub fn latency_quantile(&self, from: f64, to: f64, q: f64) -> f64 {
        let mut l: Vec<f64> = self
            .calls
            .iter()
            .filter(|(at, _)| *at >= from && *at < to)
            .map(|(_, latency)| *latency)
            .collect();
        assert!(!l.is_empty(), "no calls in [{from}, {to})");
        l.sort_by(f64::total_cmp);
        let rank = ((q * l.len() as f64).ceil() as usize).clamp(1, l.len()) - 1;
        l[rank]
    }

    /// The mean learnt limit over `[from, to)`.
    pub fn mean_limit(&self, from: f64, to: f64) -> f64 {
        let l: Vec<f64> = self
            .limits
            .iter()
            .filter(|(t, _, _)| *t >= from && *t < to)
            .map(|(_, limit, _)| *limit)
            .collect();
        l.iter().sum::<f64>() / l.len() as f64
    }

    /// The learnt limit at the last record at or before second `t`.
    pub fn limit_at(&self, t: f64) -> f64 {
        self.limits
            .iter()
            .rev()
            .find(|(at, _, _)| *at <= t)
            .map_or(f64::NAN, |l| l.1)
    }

    /// Calls rejected per second over `[from, to)`.
    pub fn rejection_rate(&self, from: f64, to: f64) -> f64 {
        let n = self
            .rejected_at
            .iter()
            .filter(|at| **at >= from && **at < to)
            .count();
        n as f64 / (to - from)
    }

    /// Calls admitted per second over `[from, to)`.
    pub fn goodput(&self, from: f64, to: f64) -> f64 {
        let n = self
            .calls
            .iter()
            .filter(|(at, _)| *at >= from && *at < to)
            .count();
        n as f64 / (to - from)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Completion {
    at: Instant,
    id: usize,
}

/// Drive `policy` against `model` for `seconds` of virtual time. `learnt`
/// reads the policy's unrounded limit; `observe` sees the policy after every
/// event, with the current second.
pub fn run<A: Algorithm>(
    policy: &mut A,
    model: &Model,
    seconds: f64,
    learnt: impl Fn(&A) -> f64,
    mut observe: impl FnMut(f64, &A),
) -> Trace {
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    let secs = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
    let end = at(seconds);
    let mut rng = Rng::new(model.seed);
    let mut workers: BinaryHeap<Reverse<Instant>> =
        (0..model.workers).map(|_| Reverse(t0)).collect();
    let mut completions: BinaryHeap<Reverse<Completion>> = BinaryHeap::new();
    // (admitted at, latency, in flight at admission, outcome)
    let mut calls: Vec<(Instant, Duration, u32, Outcome)> = Vec::new();
    let mut in_flight: u32 = 0;
    let mut trace = Trace::default();
    let next_gap = |rng: &mut Rng| match model.arrivals {
        Arrivals::Poisson(rate) => rng.exp(rate),
        Arrivals::Every(s) => s,
    };
    let mut next_arrival = at(next_gap(&mut rng));
    let mut next_record = t0;

    loop {
        let next_completion = completions.peek().map(|Reverse(c)| c.at);
        let now = match next_completion {
            Some(c) if c <= next_arrival => c,
            _ => next_arrival,
        };
        if now > end {
            break;
        }
        // Timers due before this event, as a runtime would fire them.
        for _ in 0..1000 {
            match policy.publish().wake_at {
                Some(deadline) if deadline <= now => policy.handle_timeout(deadline),
                _ => break,
            }
        }
        while next_record <= now {
            trace.limits.push((
                secs(next_record),
                learnt(policy),
                policy.publish().gate.limit,
            ));
            next_record += Duration::from_millis(100);
        }

        if Some(now) == next_completion {
            let Reverse(done) = completions.pop().expect("peeked");
            let (admitted, latency, load, outcome) = calls[done.id];
            in_flight -= 1;
            policy.on_sample(now, &Sample::new(outcome, latency, load));
            trace.calls.push((secs(admitted), latency.as_secs_f64()));
        } else {
            next_arrival = now + Duration::from_secs_f64(next_gap(&mut rng));
            if in_flight >= policy.publish().gate.limit {
                trace.rejected += 1;
                trace.rejected_at.push(secs(now));
            } else {
                in_flight += 1;
                let finish = match model.behaviour_at(secs(now)) {
                    Behaviour::Serve { mean_ms } => {
                        let Reverse(free) = workers.pop().expect("a worker");
                        let start = free.max(now);
                        let factor = match model.log_normal {
                            // The 99th percentile of a normal lies 2.326
                            // standard deviations out.
                            Some(p99) => (p99.ln() / 2.326 * rng.normal()).exp(),
                            None => 1.0 + model.jitter * (2.0 * rng.unit() - 1.0),
                        };
                        let done = start + Duration::from_secs_f64(mean_ms * factor / 1000.0);
                        workers.push(Reverse(done));
                        if model.errors > 0.0 && rng.unit() < model.errors {
                            (done, Outcome::Overload)
                        } else {
                            (done, Outcome::Success)
                        }
                    }
                    Behaviour::Fail { after_ms } => (
                        now + Duration::from_secs_f64(after_ms / 1000.0),
                        Outcome::Overload,
                    ),
                };
                let id = calls.len();
                calls.push((now, finish.0 - now, in_flight, finish.1));
                completions.push(Reverse(Completion { at: finish.0, id }));
            }
        }
        observe(secs(now), policy);
    }
    trace
}
