//! The test link of Vector's ARC suite, as its harness
//! (`src/sinks/util/adaptive_concurrency/tests.rs`, vectordotdev/vector)
//! models it, written afresh:
//!
//! - Every attempt that reaches the link counts, at once, in the link's
//!   in-flight level and in the requests started over the last second (its
//!   *rate*; the attempt itself included).
//! - Over `concurrency_limit_params.limit` in flight, or over `rate.limit`
//!   per second, the attempt gets the limit's action: *defer* answers with a
//!   retriable error after an unloaded delay; *drop* leaves the link at once
//!   and never answers, so the caller's 1 s timeout fires.
//! - Otherwise it answers after
//!   `delay × (1 + jitter·E + extra(in_flight) + extra(rate))`, `E`
//!   exponential with mean 1, `extra` the linear `scale` and the knee of
//!   each variable ([`LimitParams::extra`]).
//! - `failures` / `failures_after` (the `retried-request-rtt` scenario,
//!   whose harness code is not in the stored sources): read as its comment
//!   describes, after `failures_after` attempts the next `failures` attempts
//!   answer, after the normal delay, with a retriable error.
//!
//! One deliberate difference. In Vector's harness an attempt that the
//! caller's timeout abandons never leaves the link's in-flight level (its
//! response future is dropped before it can decrement it), so a link that
//! once sees more than a few timeouts slows down for the rest of the run. A
//! real server finishes its work whether or not the caller still waits, so
//! here an abandoned attempt leaves the link when its answer would have
//! been sent. [`Link::new`]'s `leak_abandoned` restores Vector's behaviour;
//! Vector's controller never has an answer abandoned in these scenarios
//! (only dropped ones, which leave at once), and the test checks that its
//! figures are the same either way.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::rng::Rng;
use super::scenario::{Action, Params};
use super::stats::{Level, TimeHistogram};

/// The longest the link takes to answer, seconds.
const LONGEST_ANSWER: f64 = 7200.0;

/// How the link will treat an attempt.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Answer {
    /// An answer after `delay`: a success, or a retriable error.
    After { delay: Duration, ok: bool },
    /// No answer, ever. The attempt has already left the link.
    Dropped,
}

#[derive(Debug)]
pub(crate) struct Link {
    params: Params,
    rng: Rng,
    leak_abandoned: bool,
    /// Attempts at the link now (Vector's `stats.in_flight`).
    pub(crate) in_flight: Level,
    /// Attempts started over the last second (Vector's `stats.rate`).
    pub(crate) rate: TimeHistogram,
    recent: VecDeque<Instant>,
    attempts: usize,
    /// Successful answers sent.
    pub(crate) completed: usize,
}

impl Link {
    pub(crate) fn new(params: Params, seed: u64, leak_abandoned: bool) -> Self {
        Link {
            params,
            rng: Rng::new(seed),
            leak_abandoned,
            in_flight: Level::default(),
            rate: TimeHistogram::default(),
            recent: VecDeque::new(),
            attempts: 0,
            completed: 0,
        }
    }

    /// Forget the attempts that started a second or more ago.
    fn prune(&mut self, now: Instant) {
        let Some(horizon) = now.checked_sub(Duration::from_secs(1)) else {
            return;
        };
        while self.recent.front().is_some_and(|&t| t <= horizon) {
            self.recent.pop_front();
        }
    }

    fn delay_at(&mut self, in_flight: usize, rate: usize) -> Duration {
        let p = &self.params;
        let base = 1.0 + p.concurrency_limit_params.extra(in_flight) + p.rate.extra(rate);
        let factor = self.rng.exp1().mul_add(p.jitter, base);
        // The knee grows without bound; past two hours an answer is as good
        // as never (a run gives up after one), and an `Instant` cannot take
        // the thousand-year delays of a deep knee.
        Duration::from_secs_f64((p.delay * factor).min(LONGEST_ANSWER))
    }

    /// An attempt arrives.
    pub(crate) fn start(&mut self, now: Instant) -> Answer {
        self.prune(now);
        self.recent.push_back(now);
        self.rate.add(self.recent.len(), now);
        self.in_flight.step(1, now);
        let level = self.in_flight.level();
        let rate = self.recent.len();
        let index = self.attempts;
        self.attempts += 1;

        let action = self
            .params
            .concurrency_limit_params
            .action_at(level)
            .or_else(|| self.params.rate.action_at(rate));
        match action {
            None => {
                let failing = index >= self.params.failures_after
                    && index < self.params.failures_after + self.params.failures;
                let delay = self.delay_at(level, rate);
                Answer::After {
                    delay,
                    ok: !failing,
                }
            }
            Some(Action::Defer) => Answer::After {
                delay: self.delay_at(1, 1),
                ok: false,
            },
            Some(Action::Drop) => {
                self.end(now, false);
                Answer::Dropped
            }
        }
    }

    /// An attempt leaves the link (its answer is sent).
    pub(crate) fn end(&mut self, now: Instant, ok: bool) {
        self.prune(now);
        self.rate.add(self.recent.len(), now);
        self.in_flight.step(-1, now);
        if ok {
            self.completed += 1;
        }
    }

    /// An attempt whose caller stopped waiting would have answered now.
    pub(crate) fn end_abandoned(&mut self, now: Instant) {
        if !self.leak_abandoned {
            self.end(now, false);
        }
    }
}
