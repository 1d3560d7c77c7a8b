//! Client-side adaptive throttling, as described in Google's SRE book.
//!
//! Over a sliding time window the throttle counts `requests` and `accepts`
//! and rejects each new call locally with probability
//!
//! ```text
//! reject = min(cap, max(0, (requests − K·accepts) / (requests + pad)))
//! ```
//!
//! While the dependency accepts at least one call in `K`, nothing is
//! rejected; beyond that the throttle sheds the excess. A dependency that
//! succeeds on a fraction `s` of calls is sent a fraction `K·s` of them, so
//! at `K = 1` one that answers 60% of calls gets about 60% of the traffic.
//! The cap keeps some traffic flowing even in a full outage, so the throttle
//! notices recovery by itself, and a window after the dependency recovers
//! nothing of the outage is left in the counts.
//!
//! # What counts
//!
//! - [`Outcome::Success`] is a request and an accept.
//! - [`Outcome::Overload`] is a request without an accept.
//! - [`Outcome::Ignore`] is neither. In this crate `Ignore` means "not
//!   evidence either way" and covers cancelled calls and an inner breaker's
//!   rejections as well as 4xx answers; counting it as an accept would let
//!   calls that a caller abandoned during an outage hold the throttle open.
//!   A caller that wants a 4xx to count as the dependency accepting the call
//!   (the SRE book's reading) classifies it as `Success`.
//! - Calls refused locally arrive through [`Algorithm::on_rejected`]. They
//!   always count towards the minimum volume; they count as requests in the
//!   formula only with [`ThrottleConfig::count_rejected`] (see there for why
//!   that is off by default).
//!
//! Everything is counted in a [`BucketRing`]; see [`crate::buckets`] for
//! exactly which events the window holds at any instant.

use std::time::{Duration, Instant};

use crate::buckets::{self, BucketRing, Tally};
use crate::{
    check, Algorithm, ConfigError, Deferral, Feedback, Gate, Hints, Outcome, Published, Sample,
    Snapshot, MAX_LIMIT,
};

/// The largest `K` [`ThrottleConfig::validate`] accepts. At `K = 100` the
/// throttle rejects only when fewer than one call in a hundred is accepted.
pub const MAX_K: f64 = 100.0;

/// The parameters of [`Throttle`].
///
/// The defaults follow the SRE book — `K = 2`, a padding of 1 — with a
/// window of 10 s where the book has two minutes: a throttle acts on what
/// its window holds, and two minutes of healthy history kept it from acting
/// through the first minute of a brownout and kept it rejecting most of a
/// minute after recovery; at 10 s it does both within about 10 s (at 100
/// calls a second the window still holds a thousand calls). A cap of 0.9 so
/// at least one call in ten still probes the dependency; a floor of 20
/// calls so a quiet endpoint is not throttled on a handful of failures.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat_algorithms::throttle::ThrottleConfig;
///
/// let config = ThrottleConfig { k: 1.5, window: Duration::from_secs(30), buckets: 30, ..Default::default() };
/// assert!(config.validate().is_ok());
///
/// let err = ThrottleConfig { k: 0.5, ..Default::default() }
///     .validate()
///     .expect_err("k below 1 rejects calls to a healthy dependency");
/// assert_eq!(err.field(), "throttle.k");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct ThrottleConfig {
    /// How many requests the throttle lets through per accept before it
    /// starts rejecting, in `[1, 100]`. 2 is the SRE book's recommendation;
    /// lower is more aggressive (1.1 sheds almost as soon as anything fails),
    /// higher lets more doomed calls through and recovers faster. Below 1 the
    /// throttle would reject calls to a perfectly healthy dependency.
    pub k: f64,
    /// Added to `requests` in the denominator, so a window with few calls
    /// rejects less. The SRE book uses 1; grpc-go's implementation uses 8.
    pub pad: u32,
    /// How far back the throttle looks (default 10 s), above 0 and at most
    /// [`MAX_DURATION`](crate::MAX_DURATION).
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub window: Duration,
    /// How many buckets the window is split into, in `[1, 10_000]`, each at
    /// least 1 ms wide (default 10: one-second buckets). Old counts leave the
    /// window one bucket at a time, and while rejecting the throttle asks to
    /// be woken at every bucket boundary.
    pub buckets: u32,
    /// The cap on the rejection probability, in `[0, 1)` (default 0.9). Some
    /// traffic always reaches the dependency, so recovery is seen without a
    /// separate probe. 0 turns rejection off (the throttle only counts).
    pub max_reject_probability: f64,
    /// Under this many calls in the window (sent plus rejected locally),
    /// nothing is rejected (default 20).
    pub min_requests: u64,
    /// Whether calls rejected locally count as requests in the formula
    /// (default `false`).
    ///
    /// The SRE book counts them, and that is right when the dependency has a
    /// fixed capacity `C` (a quota): accepts stay at `C` whatever is sent, and
    /// counting every attempt holds what is sent at `K·C`.
    ///
    /// But when the dependency fails a *fraction* of calls (a success rate
    /// `s`), accepts scale with what is sent, and counting rejections makes
    /// the admitted fraction `u` feed on itself (`u ← K·s·u`): it climbs to 1
    /// when `K·s > 1` and falls to the cap when `K·s < 1`, an all-or-nothing
    /// switch instead of a dial. After an outage it regrows only as fast as
    /// the few admitted calls succeed: nearly two windows from the cap, at
    /// the defaults.
    ///
    /// Not counting them gives the proportional answer (`reject = 1 − K·s`,
    /// so 40% failing at `K = 1` leaves 60% admitted) and forgets an outage
    /// within one window; against a fixed capacity it sends about
    /// `√(K·C·demand)` rather than `K·C`. Set it when the dependency enforces
    /// a quota.
    pub count_rejected: bool,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            k: 2.0,
            pad: 1,
            window: Duration::from_secs(10),
            buckets: 10,
            max_reject_probability: 0.9,
            min_requests: 20,
            count_rejected: false,
        }
    }
}

impl ThrottleConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range: `k` NaN or outside `[1, 100]`,
    /// `window` zero or above a year, `buckets` zero, above 10 000 or making
    /// a bucket narrower than 1 ms, `max_reject_probability` NaN or outside
    /// `[0, 1)`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::closed("throttle.k", self.k, 1.0, MAX_K)?;
        buckets::validate(self.window, self.buckets).map_err(|e| e.within("throttle"))?;
        let cap = self.max_reject_probability;
        if !(cap.is_finite() && (0.0..1.0).contains(&cap)) {
            return Err(ConfigError::new(
                "throttle.max_reject_probability",
                cap,
                "a number in [0, 1)",
            ));
        }
        Ok(())
    }
}

/// What a [`Throttle`]'s window holds.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, Outcome, Sample, Throttle, ThrottleConfig};
///
/// let mut throttle = Throttle::new(ThrottleConfig::default())?;
/// let now = Instant::now();
/// throttle.on_sample(now, &Sample::new(Outcome::Success, Duration::from_millis(5), 1));
/// throttle.on_rejected(now, 3);
/// let counts = throttle.counts();
/// assert_eq!((counts.sent, counts.accepted, counts.rejected), (1, 1, 3));
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThrottleCounts {
    /// Calls sent to the dependency that came back `Success` or `Overload`.
    pub sent: u64,
    /// Of those, how many were `Success`.
    pub accepted: u64,
    /// Calls refused locally, as told by [`Algorithm::on_rejected`].
    pub rejected: u64,
}

impl ThrottleCounts {
    /// The `requests` of the formula: calls sent, plus calls rejected
    /// locally if `count_rejected`.
    pub fn requests(&self, count_rejected: bool) -> u64 {
        if count_rejected {
            self.sent.saturating_add(self.rejected)
        } else {
            self.sent
        }
    }

    /// Every call attempted: sent plus rejected locally.
    pub fn volume(&self) -> u64 {
        self.sent.saturating_add(self.rejected)
    }
}

impl Tally for ThrottleCounts {
    fn add(&mut self, other: &Self) {
        self.sent = self.sent.saturating_add(other.sent);
        self.accepted = self.accepted.saturating_add(other.accepted);
        self.rejected = self.rejected.saturating_add(other.rejected);
    }

    fn sub(&mut self, other: &Self) {
        self.sent = self.sent.saturating_sub(other.sent);
        self.accepted = self.accepted.saturating_sub(other.accepted);
        self.rejected = self.rejected.saturating_sub(other.rejected);
    }
}

/// Google SRE client-side adaptive throttling: rejects calls locally with a
/// probability that grows as the dependency accepts fewer of them.
///
/// The throttle never moves the limit; it publishes an admit probability
/// (`1 − reject`) that the runtime draws against, so it needs no random
/// numbers of its own. The probability is recomputed at every event. While it
/// rejects anything, the gate's `until` is the next bucket boundary, so the
/// runtime wakes it as old counts expire (and hands over the rejections it
/// has counted since); a throttle that rejects nothing asks for no timer.
///
/// See the [module documentation](self) for what counts as a request and an
/// accept, and [`ThrottleConfig`] for the parameters.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Algorithm, Outcome, Sample, Throttle, ThrottleConfig};
///
/// let mut throttle = Throttle::new(ThrottleConfig { k: 1.0, pad: 0, min_requests: 0, ..Default::default() })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// // Six calls in ten succeed...
/// for i in 0..10 {
///     let outcome = if i % 10 < 6 { Outcome::Success } else { Outcome::Overload };
///     throttle.on_sample(t0 + ms(i), &Sample::new(outcome, ms(20), 1));
/// }
/// // ...so at K = 1, four in ten are rejected.
/// let gate = throttle.publish().gate;
/// assert!((gate.admit_probability - 0.6).abs() < 1e-12);
/// // It asks to be woken when the next one-second bucket begins.
/// assert_eq!(gate.until, Some(t0 + Duration::from_secs(1)));
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Throttle {
    config: ThrottleConfig,
    ring: BucketRing<ThrottleCounts>,
    reject: f64,
}

impl Throttle {
    /// A throttle with an empty window, rejecting nothing.
    ///
    /// # Errors
    ///
    /// See [`ThrottleConfig::validate`].
    pub fn new(config: ThrottleConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let ring =
            BucketRing::new(config.window, config.buckets).map_err(|e| e.within("throttle"))?;
        Ok(Throttle {
            config,
            ring,
            reject: 0.0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    /// The probability, in `[0, max_reject_probability]`, that a call is
    /// rejected, as of the latest event.
    pub fn reject_probability(&self) -> f64 {
        self.reject
    }

    /// What the window holds, as of the latest event.
    pub fn counts(&self) -> ThrottleCounts {
        self.ring.total()
    }

    fn record(&mut self, now: Instant, counts: ThrottleCounts) {
        self.ring.record(now, counts);
        self.recompute();
    }

    fn recompute(&mut self) {
        let counts = self.ring.total();
        let requests = counts.requests(self.config.count_rejected);
        if requests == 0 || counts.volume() < self.config.min_requests {
            self.reject = 0.0;
            return;
        }
        let excess = self.excess(requests, counts.accepted);
        // Counts above 2^53 lose precision, which a ratio does not notice.
        let p = excess / (requests as f64 + f64::from(self.config.pad));
        self.reject = if p.is_nan() {
            0.0
        } else {
            p.clamp(0.0, self.config.max_reject_probability)
        };
    }
}

impl Throttle {
    fn gate(&self) -> Gate {
        Gate {
            limit: MAX_LIMIT,
            admit_probability: 1.0 - self.reject,
            probe: false,
            until: if self.reject > 0.0 {
                self.ring.next_boundary()
            } else {
                None
            },
        }
    }

    /// `requests − K·accepts`, the excess of requests the rule rejects in
    /// proportion to (`recompute`), and what [`Throttle::deferral`] watches.
    fn excess(&self, requests: u64, accepted: u64) -> f64 {
        #[allow(
            clippy::cast_precision_loss,
            reason = "counts above 2^53 lose precision, which a ratio does not notice"
        )]
        let (requests, accepts) = (requests as f64, accepted as f64);
        requests - self.config.k * accepts
    }

    /// Successes may be held while no number of them could make the
    /// throttle reject, until the current bucket ends.
    ///
    /// A success adds one request and one accept, so it changes the
    /// [excess](Throttle::excess) by `1 − K`, which is never positive
    /// (`K ≥ 1`): once the excess is below zero it stays there, and with it
    /// the rejection probability at zero. That holds from an excess of −1
    /// down (a margin wider than any rounding of counts below 2^52), or
    /// while every request in the window was accepted. Held successes reach
    /// the throttle before its next event; those counted before the bucket
    /// ends belong to the current bucket, where `on_successes` adds them.
    fn deferral(&self) -> Option<Deferral> {
        let counts = self.ring.total();
        let requests = counts.requests(self.config.count_rejected);
        if requests <= counts.accepted || self.excess(requests, counts.accepted) <= -1.0 {
            self.ring
                .next_boundary()
                .map(|t| Deferral::until(Some(t), Duration::MAX))
        } else {
            None
        }
    }
}

impl Algorithm for Throttle {
    fn name(&self) -> &'static str {
        "throttle"
    }

    /// Outcomes only (the throttle never looks at latency), successes held
    /// (or only counted) while none could make it reject.
    #[inline]
    fn publish(&self) -> Published {
        Published::new(self.gate()).with_hints(
            Hints::default()
                .with_feedback(Feedback::Outcomes)
                .with_deferral(self.deferral()),
        )
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        let accepted = match sample.outcome {
            Outcome::Success => 1,
            Outcome::Overload => 0,
            Outcome::Ignore => {
                // Not evidence: only let time move on.
                self.handle_timeout(now);
                return;
            }
        };
        self.record(
            now,
            ThrottleCounts {
                sent: 1,
                accepted,
                rejected: 0,
            },
        );
    }

    fn on_successes(&mut self, _now: Instant, count: u64) {
        // Counted before the current bucket ended (see `deferral`).
        self.ring.add_to_current(ThrottleCounts {
            sent: count,
            accepted: count,
            rejected: 0,
        });
        self.recompute();
    }

    fn on_rejected(&mut self, now: Instant, count: u64) {
        self.record(
            now,
            ThrottleCounts {
                sent: 0,
                accepted: 0,
                rejected: count,
            },
        );
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.ring.advance(now);
        self.recompute();
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.gate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn throttle(k: f64) -> Throttle {
        Throttle::new(ThrottleConfig {
            k,
            min_requests: 0,
            ..ThrottleConfig::default()
        })
        .expect("valid config")
    }

    fn sample(outcome: Outcome) -> Sample {
        Sample::new(outcome, ms(10), 1)
    }

    #[test]
    fn an_empty_throttle_admits_everything_and_wants_no_timer() {
        let t = throttle(2.0);
        assert_eq!(t.gate(), Gate::unlimited());
        assert_eq!(t.publish().wake_at, None);
        assert_eq!(t.reject_probability(), 0.0);
    }

    #[test]
    fn the_formula_uses_k_and_the_padding() {
        let t0 = Instant::now();
        let mut t = throttle(2.0);
        // 10 requests, 3 accepts: (10 − 6) / (10 + 1).
        for i in 0..10 {
            let o = if i < 3 {
                Outcome::Success
            } else {
                Outcome::Overload
            };
            t.on_sample(t0, &sample(o));
        }
        assert!((t.reject_probability() - 4.0 / 11.0).abs() < 1e-12);
        assert!((t.gate().admit_probability - 7.0 / 11.0).abs() < 1e-12);
    }

    #[test]
    fn rejection_is_capped() {
        let t0 = Instant::now();
        let mut t = throttle(2.0);
        for _ in 0..1_000 {
            t.on_sample(t0, &sample(Outcome::Overload));
        }
        assert_eq!(t.reject_probability(), 0.9);
        assert!((t.gate().admit_probability - 0.1).abs() < 1e-12);
    }

    #[test]
    fn nothing_is_rejected_under_the_minimum_volume() {
        let t0 = Instant::now();
        let mut t = Throttle::new(ThrottleConfig::default()).expect("valid");
        for _ in 0..19 {
            t.on_sample(t0, &sample(Outcome::Overload));
        }
        assert_eq!(t.reject_probability(), 0.0);
        t.on_sample(t0, &sample(Outcome::Overload));
        assert!(t.reject_probability() > 0.0);
    }

    #[test]
    fn local_rejections_count_towards_the_volume_either_way() {
        let t0 = Instant::now();
        let mut t = Throttle::new(ThrottleConfig::default()).expect("valid");
        for _ in 0..5 {
            t.on_sample(t0, &sample(Outcome::Overload));
        }
        assert_eq!(t.reject_probability(), 0.0);
        t.on_rejected(t0, 15);
        // Volume 20 reached; the formula still uses the 5 sent calls.
        assert!((t.reject_probability() - 5.0 / 6.0).abs() < 1e-12);
        assert_eq!(t.counts().requests(false), 5);
        assert_eq!(t.counts().requests(true), 20);
    }

    #[test]
    fn counted_rejections_are_requests() {
        let t0 = Instant::now();
        let mut t = Throttle::new(ThrottleConfig {
            k: 1.0,
            min_requests: 0,
            count_rejected: true,
            ..ThrottleConfig::default()
        })
        .expect("valid");
        for _ in 0..4 {
            t.on_sample(t0, &sample(Outcome::Success));
        }
        assert_eq!(t.reject_probability(), 0.0);
        t.on_rejected(t0, 5);
        // (9 − 4) / (9 + 1)
        assert!((t.reject_probability() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn ignored_calls_are_neither_requests_nor_accepts() {
        let t0 = Instant::now();
        let mut t = throttle(1.0);
        t.on_sample(t0, &sample(Outcome::Overload));
        let before = t.reject_probability();
        for _ in 0..100 {
            t.on_sample(t0, &sample(Outcome::Ignore));
        }
        assert_eq!(
            t.counts(),
            ThrottleCounts {
                sent: 1,
                accepted: 0,
                rejected: 0
            }
        );
        assert_eq!(t.reject_probability(), before);
    }

    #[test]
    fn while_rejecting_the_gate_expires_at_the_next_bucket_boundary() {
        let t0 = Instant::now();
        let mut t = throttle(2.0);
        t.on_sample(t0, &sample(Outcome::Overload));
        assert_eq!(t.gate().until, Some(t0 + ms(1_000)));
        t.on_sample(t0 + ms(1_500), &sample(Outcome::Overload));
        assert_eq!(t.publish().wake_at, Some(t0 + ms(2_000)));
        t.handle_timeout(t0 + ms(2_000));
        assert_eq!(t.publish().wake_at, Some(t0 + ms(3_000)));
    }

    #[test]
    fn an_idle_throttle_forgets_its_window_and_stops_asking_for_timers() {
        let t0 = Instant::now();
        let mut t = throttle(2.0);
        for i in 0..100 {
            t.on_sample(t0 + ms(i * 10), &sample(Outcome::Overload));
        }
        assert_eq!(t.reject_probability(), 0.9);
        // Follow the timers the throttle asks for, with no traffic at all.
        let mut wakes = 0;
        while let Some(at) = t.publish().wake_at {
            t.handle_timeout(at);
            wakes += 1;
            assert!(wakes <= 200, "the throttle never stopped asking");
        }
        assert_eq!(t.reject_probability(), 0.0);
        assert_eq!(t.counts(), ThrottleCounts::default());
        assert_eq!(wakes, 10);
    }

    #[test]
    fn a_batch_of_successes_counts_as_many_successes_one_by_one() {
        let t0 = Instant::now();
        let (mut batched, mut single) = (throttle(2.0), throttle(2.0));
        for t in [&mut batched, &mut single] {
            t.on_sample(t0, &sample(Outcome::Overload));
            for _ in 0..3 {
                t.on_sample(t0, &sample(Outcome::Success));
            }
        }
        // 4 requests, 3 accepts: 4 − 2·3 = −2, so successes may be batched
        // until the first bucket ends.
        assert_eq!(
            batched.deferral(),
            Some(Deferral::until(Some(t0 + ms(1_000)), Duration::MAX))
        );
        batched.on_successes(t0 + ms(10), 5);
        for _ in 0..5 {
            single.on_sample(t0 + ms(10), &sample(Outcome::Success));
        }
        assert_eq!(batched.counts(), single.counts());
        assert_eq!(
            batched.reject_probability().to_bits(),
            single.reject_probability().to_bits()
        );
        // An empty throttle has no bucket to batch into.
        assert_eq!(throttle(2.0).deferral(), None);
    }

    #[test]
    fn a_zero_cap_never_rejects() {
        let t0 = Instant::now();
        let mut t = Throttle::new(ThrottleConfig {
            max_reject_probability: 0.0,
            min_requests: 0,
            ..ThrottleConfig::default()
        })
        .expect("valid");
        for _ in 0..100 {
            t.on_sample(t0, &sample(Outcome::Overload));
        }
        assert_eq!(t.gate().admit_probability, 1.0);
        assert_eq!(t.gate().until, None);
    }

    #[test]
    fn a_huge_pad_or_count_cannot_produce_nan() {
        let t0 = Instant::now();
        let mut t = Throttle::new(ThrottleConfig {
            pad: u32::MAX,
            min_requests: 0,
            count_rejected: true,
            ..ThrottleConfig::default()
        })
        .expect("valid");
        t.on_rejected(t0, u64::MAX);
        t.on_rejected(t0, u64::MAX);
        t.on_sample(t0, &sample(Outcome::Success));
        let p = t.gate().admit_probability;
        assert!(!p.is_nan() && (0.1 - 1e-12..=1.0).contains(&p), "{p}");
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = ThrottleConfig::default();
        let cases: Vec<(ThrottleConfig, &str)> = vec![
            (
                ThrottleConfig {
                    k: f64::NAN,
                    ..base.clone()
                },
                "throttle.k",
            ),
            (
                ThrottleConfig {
                    k: 0.99,
                    ..base.clone()
                },
                "throttle.k",
            ),
            (
                ThrottleConfig {
                    k: f64::INFINITY,
                    ..base.clone()
                },
                "throttle.k",
            ),
            (
                ThrottleConfig {
                    k: 101.0,
                    ..base.clone()
                },
                "throttle.k",
            ),
            (
                ThrottleConfig {
                    window: Duration::ZERO,
                    ..base.clone()
                },
                "throttle.window",
            ),
            (
                ThrottleConfig {
                    window: Duration::MAX,
                    ..base.clone()
                },
                "throttle.window",
            ),
            (
                ThrottleConfig {
                    buckets: 0,
                    ..base.clone()
                },
                "throttle.buckets",
            ),
            (
                ThrottleConfig {
                    buckets: 10_001,
                    ..base.clone()
                },
                "throttle.buckets",
            ),
            (
                ThrottleConfig {
                    window: ms(50),
                    buckets: 51,
                    ..base.clone()
                },
                "throttle.buckets",
            ),
            (
                ThrottleConfig {
                    max_reject_probability: 1.0,
                    ..base.clone()
                },
                "throttle.max_reject_probability",
            ),
            (
                ThrottleConfig {
                    max_reject_probability: -0.1,
                    ..base.clone()
                },
                "throttle.max_reject_probability",
            ),
            (
                ThrottleConfig {
                    max_reject_probability: f64::NAN,
                    ..base.clone()
                },
                "throttle.max_reject_probability",
            ),
        ];
        for (config, field) in cases {
            let err = Throttle::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
        for k in [1.0, 1.1, 2.0, 100.0] {
            assert!(Throttle::new(ThrottleConfig { k, ..base.clone() }).is_ok());
        }
    }
}
