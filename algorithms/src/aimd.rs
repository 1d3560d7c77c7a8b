//! Additive increase, multiplicative decrease: a concurrency limit that backs
//! off on drops and, by default, on a rise in latency.

mod config;
mod latency;
#[cfg(test)]
mod latency_tests;

pub use config::{AimdConfig, AimdMode};

use std::time::{Duration, Instant};

use latency::Rounds;

use crate::latency::secs_to_duration;
use crate::{
    Algorithm, ConfigError, Deferral, Gate, Hints, Outcome, Published, Sample, Snapshot, MAX_LIMIT,
};

/// Additive increase, multiplicative decrease of a concurrency limit `L`.
///
/// # The latency mode (the default)
///
/// Like Vector's adaptive concurrency controller, it decides once per round
/// trip: calls are gathered into windows ([`crate::window`]: 250 ms and 10
/// calls, or 1 s), and a window decides only when most of its successes were
/// admitted since the limit last changed, so a change is judged by the calls
/// it admitted — at most one move per round trip, however slow the
/// dependency.
///
/// - **the baseline** is the round-trip time without queueing. Each window's
///   latency `x` (blended with earlier windows when it holds few calls, as
///   for [`crate::Vegas`]) has a relative standard error `e`, from the
///   pooled spread of single latencies over `√n`; its band is
///   `x · (1 ± noise · e)`. A window without queueing moves the baseline
///   toward the upper end of its band: by 1/16 of the gap when that is
///   lower, by 1/2048 when it is higher; a window with queueing does not
///   move it. So the baseline sits near the no-load latency — an
///   asymmetric average settles at a low quantile of the upper ends, which
///   the band lifts back to about the mean — and the caller's own standing
///   queue is not absorbed into it, where Vector's moving average of the
///   round-trip time takes it in a window at a time.
///   For three of its round trips after the limit rose by a multiple (a
///   doubling, a restore), a window does not lower it: a flow that has
///   just grown reads low, as a new one does (below), its slow answers not
///   back yet.
/// - **queueing** is a window whose band lies wholly above the baseline,
///   `x · (1 − noise · e) > baseline`: `L × min(backoff, max(½,
///   baseline / (x · (1 − noise · e))))`. By Little's law, of the calls in
///   flight at a latency of at least the band's lower end the dependency
///   serves about `baseline / lower` without queueing them: one cut takes
///   a queue of any depth to what the dependency holds (never below half
///   at once), where ×0.9 a round trip took ten round trips to undo a
///   doubled latency, and a rise that noise made, just past the band, is
///   cut by the backoff alone. A window of fewer successes than
///   `window.min_samples` proves a queue but not its depth: it cuts by the
///   backoff. This is the
///   noise-aware form of Vector's `mean + 2.5 · deviation` threshold: the
///   band narrows as a window holds more calls and widens for a dependency
///   whose latency spreads, so noise is not taken for load. A caller using
///   under half its limit, at the window's peak or on average over its
///   calls, backs off only when the latency has at least doubled beyond
///   the noise: its own load is not the cause. (A burst reaches the limit
///   by chance: at a dependency of a worker or two, busy, with a heavy
///   tail, a queue forms and drains by chance, and its peaks are no
///   standing queue of the caller's.)
/// - **a flow's first windows** (at start, after an outage) read low: the
///   first of its calls to finish are its fastest. A window closing less
///   than three of its average latencies after the flow's first call
///   started decides nothing (it stands in for a baseline not yet known).
/// - **slow start**: from `initial`, the limit doubles per round trip in
///   use until the first sign of queueing (it then returns to the limit
///   before the last doubling) or a drop beyond the tolerance.
/// - **open start** ([`AimdConfig::open_start`], off by default):
///   no limit until the first flow is steady, older than three of its
///   slowest successes (every call it holds has had time to answer) with a
///   window whose band's lower end is no higher than the upper end of the
///   window before (the latency has stopped rising). The limit is then
///   twice the most calls in flight, the headroom growth keeps in health,
///   and the baseline the higher of the two windows' upper ends. A flood
///   the open start let in builds a queue that ends in drops, not in a
///   steady latency: drops beyond the tolerance first begin again from
///   `initial` (in slow start), and the calls admitted before are ignored,
///   so the queue they built is neither the baseline nor a cut.
/// - **drops** ([`Outcome::Overload`], or a success slower than `timeout`)
///   cut at once, `L × backoff` — from what the dropped call met if that
///   was less: the limit it was admitted under, if the limit has grown
///   since (a timeout tells of a slow start's overshoot only when it
///   expires, doublings later), or the calls then in flight, if the caller
///   was using at least half that limit and the drop is not *stale* (a
///   drop slower than two baseline round trips while successes are as
///   fast as the baseline allows met no queue, and the calls it met in
///   flight are long gone: a hang, whose share is no sign of the load
///   now) — while drops are more than
///   `loss_tolerance` of the last 50 or so calls (of all calls, before 50):
///   once per flight (not for a call admitted before the last cut) and once
///   per round trip (not within one baseline round-trip time of it), so a
///   stream of failures a microsecond apart is one congestion event per
///   round trip, not thousands, and a trickle of errors from a healthy
///   dependency is none.
/// - **growth**: `L + step` per round trip (per baseline round-trip time
///   a window spans) — not per success — only when the window shows
///   neither queueing nor a drop beyond the tolerance, and the caller used
///   at least half the limit in it. Below the limit the last cut was made
///   from (the knee): half the way back to it per round trip after a cut
///   on latency (a binary search, so a cut that noise made costs a few
///   round trips at any size), one per round trip after a cut on drops
///   (a call lost marks a real knee). Beyond it: the step is 1 after a
///   cut and doubles with each growth since (never more than `L`), so
///   unchallenged it finds a knee of any size in a number of round trips
///   that grows with the knee's logarithm. A caller
///   using under half its limit learns nothing about more, so a healthy
///   caller's limit settles at about twice the most it puts in flight:
///   headroom for its bursts, measured rather than configured, and room
///   below which the queueing test is blind to noise (a caller using
///   under half its limit backs off only for a doubled latency).
/// - **calls going missing**: a window whose answers, by Little's law (the
///   latencies of its successes and its failures ÷ its span, over at least
///   10 successes and two round trips), account for under half the calls it
///   had in flight on average has calls stuck somewhere (dropped or hung,
///   to time out later): the slow start ends, and the limit falls to twice
///   what was served, instead of doubling into a loss it cannot see for a
///   timeout yet. A failure that answers is not missing, and a steady share
///   of hangs answers too, at its timeout; a share missing whatever the
///   caller sends is tried as drops are (below).
/// - **a slower dependency** is told from the caller's own queue: while the
///   latency stays above the baseline, the limit falls; once a window's
///   calls were admitted at no more than half the concurrency seen since the
///   rise began (or the limit is at its floor) and its latency fell by less
///   than a quarter, the rise is not queueing — queueing delay falls with
///   the calls queued — and the baseline takes the new latency at once
///   (the higher of that window's and the next one's: the window that told
///   is one sample of the new latency, and may be a fast one),
///   and the limit regrows, doubling per round trip, until the first sign
///   of queueing: slower calls need as many more in flight for the same
///   throughput (Little's law). A rise lasts until the latency is back at
///   the baseline, not until the first window whose noise band reaches
///   down to it.
/// - **loss that sending less does not cure** (errors at random, calls
///   that hang whatever the load) is tried, not assumed: a cut for drops
///   beyond the tolerance, or for calls going missing, begins a trial;
///   once the caller sends half as many calls a second, and the calls sent
///   since (ten or more, with successes as fast as the baseline) still lose
///   three quarters of the share the first calls after the cut lost, the
///   share is the dependency's *background*, the limit goes back to where
///   the cuts began, and from
///   then on drops are tolerated up to the background plus
///   `loss_tolerance` plus the background's noise (see
///   `crate::latency::background`). A dependency failing 40% of calls at
///   random keeps the limit the caller needs; the failures are answered in
///   proportion by a [`Throttle`](crate::Throttle) if one is stacked, and a
///   dependency that is down by a breaker.
/// - **outages**: a drop under a quarter of the baseline (a refused
///   connection, an immediate error) comes from a dependency that is down or
///   turning calls away, not one that queues: it never cuts the limit. Once
///   the dependency answers after a window of such failures only, the limit
///   **regrows multiplicatively**, doubling per round trip, until the first
///   sign of queueing or a drop that is not a fast failure. Slow failures
///   with nothing served (every call timing out) cut as drops do, but no
///   lower than half the limit the episode began with, a floor halving
///   every 10 s they go on (see `crate::latency::outage`); once calls succeed again
///   the limit regrows, doubling, to where the episode began. So no outage
///   pins the limit at its floor. After refusals, timeouts with nothing
///   served are most likely a **cold start**, which warms only with
///   traffic: for 10 s after the last refusal a limit in use doubles per
///   window, up to twice the limit the episode began with, as if the
///   dependency answered; after them, one that still answers nothing is back at once at the floor (the whole
///   limit the episode began with, halving every 10 s).
///
/// Every success is data here: its [deferral](crate::Hints::deferral) holds
/// successes only until the window may close.
///
/// What it cannot do: a caller that idles and then sends a burst starts a
/// new flow without knowing it, and the burst's first windows, reading low,
/// pull the baseline down by up to 1/16 of the gap each; the extra cuts
/// that follow last until the baseline rises back (slowly) or the calls
/// halve.
///
/// # The Netflix mode
///
/// Netflix concurrency-limits' `AIMDLimit`, per call: a drop, or a success
/// slower than `timeout`, multiplies the limit by `backoff`; any other
/// success adds one, but only while the caller uses at least half the limit.
/// It sees no latency below the timeout, so in front of a queueing
/// dependency it grows by one per success — doubling every round trip while
/// half the limit is in use — until calls fail. See
/// [`AimdConfig::netflix`].
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::window::WindowConfig;
/// use rheostat_algorithms::{Aimd, AimdConfig, Algorithm, Outcome, Sample};
///
/// // Round trips of 100 ms and one call, without the noise band or the
/// // slow start, so that the arithmetic shows.
/// let mut aimd = Aimd::new(AimdConfig {
///     initial: 10,
///     noise: 0.0,
///     slow_start: false,
///     window: WindowConfig { min_duration: Duration::from_millis(100), min_samples: 1, ..Default::default() },
///     ..AimdConfig::default()
/// })?;
/// let t0 = Instant::now();
/// let ms = Duration::from_millis;
/// // The first round trip sets the baseline (20 ms) and, the limit being
/// // in use, adds one.
/// aimd.on_sample(t0, &Sample::new(Outcome::Success, ms(20), 10));
/// aimd.on_sample(t0 + ms(100), &Sample::new(Outcome::Success, ms(20), 10));
/// assert_eq!((aimd.publish().gate.limit, aimd.baseline()), (11, Some(ms(20))));
/// // Successes admitted at 11 in flight take 30 ms: queueing, a third of
/// // them waiting. To 11 × 20 / 30.
/// aimd.on_sample(t0 + ms(200), &Sample::new(Outcome::Success, ms(30), 11));
/// aimd.on_sample(t0 + ms(300), &Sample::new(Outcome::Success, ms(30), 11));
/// assert_eq!(aimd.publish().gate.limit, 7);
/// // A drop cuts at once, × 0.9.
/// aimd.on_sample(t0 + ms(400), &Sample::new(Outcome::Overload, ms(30), 7));
/// assert_eq!(aimd.publish().gate.limit, 6);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Aimd {
    core: Core,
    /// The latency mode's state; `None` in the Netflix mode, which keeps
    /// none.
    rounds: Option<Box<Rounds>>,
}

/// What both modes keep.
#[derive(Clone, Debug)]
struct Core {
    config: AimdConfig,
    limit: f64,
    /// When a drop or a rise in latency last cut the limit.
    last_backoff: Option<Instant>,
}

impl Aimd {
    /// A limiter at `config.initial`.
    ///
    /// # Errors
    ///
    /// See [`AimdConfig::validate`].
    pub fn new(config: AimdConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let rounds = match config.mode {
            AimdMode::Netflix => None,
            AimdMode::Latency => Some(Box::new(Rounds::new(&config)?)),
        };
        Ok(Aimd {
            core: Core {
                limit: f64::from(if config.open_start && config.mode == AimdMode::Latency {
                    config.max
                } else {
                    config.initial
                }),
                config,
                last_backoff: None,
            },
            rounds,
        })
    }

    /// The recommended configuration, [`AimdConfig::recommended`].
    ///
    /// # Panics
    ///
    /// Never: the configuration is valid (a test checks it).
    pub fn recommended() -> Self {
        Aimd::new(AimdConfig::recommended())
            .unwrap_or_else(|e| unreachable!("the recommended configuration is valid: {e}"))
    }

    /// The configuration.
    pub fn config(&self) -> &AimdConfig {
        &self.core.config
    }

    /// The limit before rounding down.
    pub fn raw_limit(&self) -> f64 {
        self.core.limit
    }

    /// The latency mode's estimate of the round-trip time without queueing,
    /// `None` before the first round trip with a success (and always in the
    /// Netflix mode).
    pub fn baseline(&self) -> Option<Duration> {
        self.rounds
            .as_ref()
            .and_then(|r| r.baseline)
            .map(secs_to_duration)
    }

    /// Whether the limit regrows multiplicatively, as after an outage of
    /// fast failures, until the first sign of queueing.
    pub fn is_regrowing(&self) -> bool {
        self.rounds.as_ref().is_some_and(|r| r.regrow.is_some())
    }

    /// The Netflix mode: one decision per call.
    fn on_sample_netflix(&mut self, now: Instant, sample: &Sample) {
        if sample.outcome == Outcome::Ignore {
            return;
        }
        let quiet_up_to = self.quiet().map_or(0, |q| q.max_in_flight);
        let core = &mut self.core;
        if core.is_drop(sample) {
            if core.config.one_backoff_per_flight {
                if let Some(cut) = core.last_backoff {
                    if sample.started(now) < cut {
                        return;
                    }
                }
            }
            core.back_off(now);
        } else if sample.in_flight > quiet_up_to {
            core.set_limit(core.limit + 1.0);
        }
    }
}

impl Core {
    fn is_drop(&self, sample: &Sample) -> bool {
        match sample.outcome {
            Outcome::Overload => true,
            Outcome::Success => sample.latency > self.config.timeout,
            Outcome::Ignore => false,
        }
    }

    #[inline]
    fn gate(&self) -> Gate {
        Gate::from_raw_limit(self.limit, self.config.min, self.config.max)
    }

    fn set_limit(&mut self, next: f64) {
        let (min, max) = (f64::from(self.config.min), f64::from(self.config.max));
        self.limit = crate::latency::congestion::clamped(self.limit, next, min, max);
    }

    /// Multiply the limit by `backoff` at `now`.
    fn back_off(&mut self, now: Instant) {
        self.set_limit(self.limit * self.config.backoff);
        self.last_backoff = Some(now);
    }
}

impl Aimd {
    /// The Netflix mode's quiet successes: within the timeout, admitted
    /// with fewer than half of the limit's calls in flight, or any once the
    /// limit is at its maximum. They change nothing, so they may be held
    /// (its [`Deferral`]); the limit grows on exactly the other successes
    /// that are no drop, by this same rule (`on_sample_netflix`). `None`
    /// in the latency mode, where every success is data.
    fn quiet(&self) -> Option<Deferral> {
        if self.rounds.is_some() {
            return None;
        }
        let Core { config, limit, .. } = &self.core;
        let max_in_flight = if *limit >= f64::from(config.max) {
            MAX_LIMIT
        } else {
            // The largest n with 2n < limit: ceil(limit / 2) − 1.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "the limit is finite and in [min, max]; the cast saturates"
            )]
            let half = (limit / 2.0).ceil() as u32;
            half.saturating_sub(1)
        };
        Some(Deferral::until(None, config.timeout).with_max_in_flight(max_in_flight))
    }
}

impl Algorithm for Aimd {
    fn name(&self) -> &'static str {
        "aimd"
    }

    /// The latency mode hears every call, timed, and wakes when its round
    /// is due; the Netflix mode lets its quiet successes be held.
    #[inline]
    fn publish(&self) -> Published {
        let published = Published::new(self.core.gate());
        match &self.rounds {
            // A success no slower than the timeout is no drop: until the
            // window may close, it changes only what the window holds.
            Some(rounds) => published.with_wake_at(rounds.window.deadline()).with_hints(
                Hints::default().with_deferral(rounds.window.deferral(self.core.config.timeout)),
            ),
            None => published.with_hints(Hints::default().with_deferral(self.quiet())),
        }
    }

    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        match self.rounds.as_deref_mut() {
            Some(rounds) => rounds.on_sample(&mut self.core, now, sample),
            None => self.on_sample_netflix(now, sample),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(rounds) = self.rounds.as_deref_mut() {
            rounds.handle_timeout(&mut self.core, now);
        }
    }

    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.core.gate()).with_raw_limit(self.core.limit)
    }
}

#[cfg(test)]
mod tests {
    use super::latency_tests::latency as latency_mode;
    use super::*;
    use crate::window::WindowConfig;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    // -----------------------------------------------------------------
    // The Netflix mode: one decision per call.

    fn netflix(initial: u32, min: u32, max: u32) -> Aimd {
        Aimd::new(AimdConfig {
            initial,
            min,
            max,
            ..AimdConfig::netflix()
        })
        .expect("valid config")
    }

    fn ok(in_flight: u32) -> Sample {
        Sample::new(Outcome::Success, ms(10), in_flight)
    }

    fn drop_(in_flight: u32) -> Sample {
        Sample::new(Outcome::Overload, ms(10), in_flight)
    }

    #[test]
    fn netflix_each_success_adds_one_while_the_caller_uses_half_the_limit() {
        let t0 = Instant::now();
        let mut a = netflix(10, 1, 100);
        a.on_sample(t0, &ok(5));
        assert_eq!(a.raw_limit(), 11.0);
        a.on_sample(t0, &ok(6));
        assert_eq!(a.raw_limit(), 12.0);
        assert_eq!(a.publish().gate.limit, 12);
        // Under half: holds.
        a.on_sample(t0, &ok(5));
        assert_eq!(a.raw_limit(), 12.0);
    }

    #[test]
    fn netflix_a_drop_multiplies_by_the_backoff_ratio() {
        let t0 = Instant::now();
        let mut a = netflix(20, 1, 200);
        a.on_sample(t0, &drop_(20));
        assert_eq!(a.raw_limit(), 18.0);
        a.on_sample(t0, &drop_(18));
        assert!((a.raw_limit() - 16.2).abs() < 1e-9);
        assert_eq!(a.publish().gate.limit, 16);
    }

    #[test]
    fn netflix_a_slow_success_counts_as_a_drop() {
        let t0 = Instant::now();
        let mut a = netflix(20, 1, 200);
        a.on_sample(
            t0,
            &Sample::new(Outcome::Success, Duration::from_secs(5) + ms(1), 20),
        );
        assert_eq!(a.raw_limit(), 18.0);
        // Exactly at the timeout is not slow.
        a.on_sample(
            t0,
            &Sample::new(Outcome::Success, Duration::from_secs(5), 18),
        );
        assert_eq!(a.raw_limit(), 19.0);
    }

    #[test]
    fn netflix_the_limit_clamps_at_min_and_max() {
        let t0 = Instant::now();
        let mut a = netflix(3, 3, 4);
        a.on_sample(t0, &drop_(3));
        assert_eq!(a.raw_limit(), 3.0);
        a.on_sample(t0, &ok(3));
        a.on_sample(t0, &ok(4));
        a.on_sample(t0, &ok(4));
        assert_eq!(a.raw_limit(), 4.0);
        assert_eq!(a.publish().gate.limit, 4);
    }

    #[test]
    fn ignored_calls_teach_nothing() {
        let mut t = Instant::now();
        let ignored = Sample::new(Outcome::Ignore, Duration::from_secs(60), 10);
        let mut a = netflix(10, 1, 100);
        a.on_sample(t, &ignored);
        assert_eq!(a.raw_limit(), 10.0);
        let mut a = latency_mode(10, 0.0, &mut t);
        a.on_sample(t, &ignored);
        assert_eq!((a.raw_limit(), a.publish().wake_at), (10.0, None));
    }

    #[test]
    fn a_burst_of_drops_from_one_flight_backs_off_once() {
        let t0 = Instant::now();
        for mode in [AimdMode::Netflix, AimdMode::Latency] {
            let mut a = Aimd::new(AimdConfig {
                mode,
                initial: 100,
                min: 1,
                max: 200,
                one_backoff_per_flight: true,
                ..AimdConfig::default()
            })
            .expect("valid");
            // Ten calls started at t0 all time out at t0 + 1 s.
            let t1 = t0 + Duration::from_secs(1);
            for _ in 0..10 {
                a.on_sample(
                    t1,
                    &Sample::new(Outcome::Overload, Duration::from_secs(1), 100),
                );
            }
            assert_eq!(a.raw_limit(), 90.0, "{mode:?}");
            // A call started after the cut that drops again cuts again.
            let t2 = t1 + Duration::from_secs(1);
            a.on_sample(t2, &Sample::new(Outcome::Overload, ms(500), 90));
            assert_eq!(a.raw_limit(), 81.0, "{mode:?}");
        }
    }

    #[test]
    fn zero_and_enormous_latencies_leave_the_limit_finite_and_in_bounds() {
        let mut t = Instant::now();
        let mut a = latency_mode(10, 2.5, &mut t);
        for latency in [Duration::ZERO, Duration::MAX / 4, Duration::ZERO, ms(1)] {
            t += ms(20);
            for outcome in [Outcome::Success, Outcome::Overload, Outcome::Success] {
                a.on_sample(t, &Sample::new(outcome, latency, u32::MAX));
            }
            a.handle_timeout(t + ms(10));
            let raw = a.raw_limit();
            assert!(raw.is_finite() && (1.0..=1000.0).contains(&raw), "{raw}");
        }
    }

    #[test]
    fn every_invalid_field_is_named() {
        let base = AimdConfig::default();
        let cases: Vec<(AimdConfig, &str)> = vec![
            (
                AimdConfig {
                    min: 0,
                    initial: 0,
                    ..base.clone()
                },
                "aimd.min",
            ),
            (
                AimdConfig {
                    min: 50,
                    max: 40,
                    initial: 45,
                    ..base.clone()
                },
                "aimd.min",
            ),
            (
                AimdConfig {
                    initial: 500,
                    max: 200,
                    ..base.clone()
                },
                "aimd.initial",
            ),
            (
                AimdConfig {
                    min: 10,
                    initial: 5,
                    ..base.clone()
                },
                "aimd.initial",
            ),
            (
                AimdConfig {
                    backoff: 1.0,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    backoff: 0.0,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    backoff: f64::NAN,
                    ..base.clone()
                },
                "aimd.backoff",
            ),
            (
                AimdConfig {
                    timeout: Duration::ZERO,
                    ..base.clone()
                },
                "aimd.timeout",
            ),
            (
                AimdConfig {
                    timeout: Duration::MAX,
                    ..base.clone()
                },
                "aimd.timeout",
            ),
            (
                AimdConfig {
                    max: u32::MAX,
                    ..base.clone()
                },
                "aimd.max",
            ),
            (
                AimdConfig {
                    noise: -0.1,
                    ..base.clone()
                },
                "aimd.noise",
            ),
            (
                AimdConfig {
                    noise: f64::NAN,
                    ..base.clone()
                },
                "aimd.noise",
            ),
            (
                AimdConfig {
                    loss_tolerance: 1.0,
                    ..base.clone()
                },
                "aimd.loss_tolerance",
            ),
            (
                AimdConfig {
                    loss_tolerance: -0.1,
                    ..base.clone()
                },
                "aimd.loss_tolerance",
            ),
            (
                AimdConfig {
                    window: WindowConfig {
                        min_samples: 0,
                        ..WindowConfig::default()
                    },
                    ..base.clone()
                },
                "aimd.window.min_samples",
            ),
        ];
        for (config, field) in cases {
            let err = Aimd::new(config.clone()).expect_err(field);
            assert_eq!(err.field(), field, "{config:?}: {err}");
        }
    }
}
