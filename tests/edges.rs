//! The edges: zero and enormous durations, a clock that stands still or runs
//! backwards, results that arrive after the breaker moved on, policies
//! swapped under calls in flight. (Permits that end on another thread are in
//! `permits.rs`; a zero or endless wait in `waiting.rs`.)

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rheostat::algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::window::WindowConfig;
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, BreakerState, ConfigError, Fixed, Gradient, GradientConfig,
    Published, Stack, Throttle, ThrottleConfig, Vegas, VegasConfig, MAX_DURATION, MAX_LIMIT,
};
use rheostat::{
    clock::{Clock, ManualClock},
    DynLimiter, Limiter, Observer, Outcome, RejectReason,
};

const MIN: u32 = 2;
const MAX: u32 = 40;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A breaker that trips on 5 calls in a count window of 10, with a fixed
/// 1 s cooldown, two probes (both needed to close) and no ramp.
fn small_breaker() -> Breaker {
    Breaker::new(BreakerConfig {
        window: BreakerWindow::Count { calls: 10 },
        min_calls: 5,
        cooldown: Cooldown::Fixed(Duration::from_secs(1)),
        cooldown_jitter: 0.0,
        half_open: HalfOpen::Probes {
            probes: 2,
            close_after: 2,
        },
        probe_concurrency: 2,
        probe_timeout: Duration::from_secs(5),
        ramp: Duration::ZERO,
        ..BreakerConfig::recommended()
    })
    .unwrap()
}

/// Every policy, the adaptive ones bounded to `[MIN, MAX]`, with windows
/// short enough to close often.
fn every_policy() -> Vec<Box<dyn Algorithm>> {
    let window = WindowConfig {
        min_duration: ms(1),
        max_duration: ms(10),
        min_samples: 3,
        ..WindowConfig::default()
    };
    let gradient = || {
        Gradient::new(GradientConfig {
            initial: 10,
            min: MIN,
            max: MAX,
            window: window.clone(),
            ..GradientConfig::default()
        })
        .unwrap()
    };
    vec![
        Box::new(Fixed::new(5).unwrap()),
        Box::new(
            Aimd::new(AimdConfig {
                initial: 10,
                min: MIN,
                max: MAX,
                timeout: ms(50),
                ..AimdConfig::default()
            })
            .unwrap(),
        ),
        Box::new(
            Vegas::new(VegasConfig {
                initial: 10,
                min: MIN,
                max: MAX,
                window: window.clone(),
                ..VegasConfig::default()
            })
            .unwrap(),
        ),
        Box::new(gradient()),
        Box::new(
            Throttle::new(ThrottleConfig {
                window: Duration::from_secs(1),
                buckets: 10,
                min_requests: 5,
                ..ThrottleConfig::default()
            })
            .unwrap(),
        ),
        Box::new(small_breaker()),
        Box::new(
            Stack::builder()
                .push(small_breaker())
                .push(gradient())
                .build()
                .unwrap(),
        ),
    ]
}

/// No NaN, a limit within `MAX_LIMIT`, and an adaptive limit (published and
/// unrounded) within its bounds.
fn assert_sane(policy: &dyn Algorithm) {
    let gate = policy.publish().gate;
    let p = gate.admit_probability;
    assert!(
        (0.0..=1.0).contains(&p),
        "{}: probability {p}",
        policy.name()
    );
    assert!(gate.limit <= MAX_LIMIT, "{}", policy.name());
    if matches!(policy.name(), "aimd" | "vegas" | "gradient") {
        assert!(
            (MIN..=MAX).contains(&gate.limit),
            "{}: limit {}",
            policy.name(),
            gate.limit
        );
    }
    if let Some(raw) = policy.snapshot().raw_limit {
        assert!(raw.is_finite(), "{}: raw limit {raw}", policy.name());
        assert!(
            (f64::from(MIN)..=f64::from(MAX)).contains(&raw),
            "{}: raw limit {raw}",
            policy.name()
        );
    }
}

/// Remembers the latency of every finished call.
#[derive(Default)]
struct Latencies(Mutex<Vec<Duration>>);

impl Observer for Latencies {
    fn finished(&self, _outcome: Outcome, latency: Duration, _in_flight: u32) {
        self.0.lock().unwrap().push(latency);
    }
}

/// Drive `limiter` with a pattern of outcomes and overlapping calls,
/// calling `between` after every round.
fn drive(limiter: &DynLimiter<ManualClock>, rounds: u32, mut between: impl FnMut(u32)) {
    for round in 0..rounds {
        let mut held = Vec::new();
        for _ in 0..4 {
            if let Ok(permit) = limiter.try_acquire() {
                held.push(permit);
            }
        }
        for (i, permit) in held.into_iter().enumerate() {
            match (round / 25 + i as u32) % 4 {
                0 | 1 => permit.success(),
                2 => permit.overload(),
                _ => permit.ignore(),
            }
        }
        limiter.wake();
        between(round);
        limiter.update(|p| assert_sane(p.as_ref()));
    }
    assert_eq!(limiter.in_flight(), 0);
}

fn limiter_for(policy: Box<dyn Algorithm>, clock: &ManualClock) -> DynLimiter<ManualClock> {
    Limiter::builder(policy)
        .clock(clock.clone())
        .build()
        .unwrap()
}

// ----- durations ---------------------------------------------------------

fn refused(result: Result<impl Sized, ConfigError>, field: &str) {
    match result {
        Ok(_) => panic!("`{field}` was accepted"),
        Err(e) => assert_eq!(e.field(), field, "{e}"),
    }
}

#[test]
fn zero_and_enormous_durations_in_any_configuration_are_refused_by_name() {
    let too_long = MAX_DURATION + Duration::from_nanos(1);
    for d in [Duration::ZERO, too_long, Duration::MAX] {
        refused(
            Aimd::new(AimdConfig {
                timeout: d,
                ..AimdConfig::default()
            }),
            "aimd.timeout",
        );
        let window = WindowConfig {
            min_duration: d,
            ..WindowConfig::default()
        };
        refused(
            Vegas::new(VegasConfig {
                window,
                ..VegasConfig::default()
            }),
            "vegas.window.min_duration",
        );
        refused(
            Gradient::new(GradientConfig {
                window: WindowConfig {
                    max_duration: d,
                    min_duration: ms(1),
                    ..WindowConfig::default()
                },
                ..GradientConfig::default()
            }),
            "gradient.window.max_duration",
        );
        refused(
            Throttle::new(ThrottleConfig {
                window: d,
                ..ThrottleConfig::default()
            }),
            "throttle.window",
        );
        let b = BreakerConfig::recommended;
        refused(
            Breaker::new(BreakerConfig {
                slow_call_duration: d,
                ..b()
            }),
            "breaker.slow_call_duration",
        );
        refused(
            Breaker::new(BreakerConfig {
                probe_timeout: d,
                ..b()
            }),
            "breaker.probe_timeout",
        );
        refused(
            Breaker::new(BreakerConfig {
                cooldown: Cooldown::Fixed(d),
                ..b()
            }),
            "breaker.cooldown.fixed",
        );
        refused(
            Breaker::new(BreakerConfig {
                window: BreakerWindow::Time {
                    length: d,
                    buckets: 1,
                },
                ..b()
            }),
            "breaker.window.time.length",
        );
        refused(
            Breaker::new(BreakerConfig {
                half_open: HalfOpen::Fraction {
                    fraction: 0.1,
                    period: d,
                    success_rate: 0.8,
                    min_probes: 5,
                },
                ..b()
            }),
            "breaker.half_open.fraction.period",
        );
        refused(
            Limiter::builder(Fixed::new(1).unwrap()).max_wait(d).build(),
            "limiter.max_wait",
        );
        refused(
            Limiter::builder(Fixed::new(1).unwrap())
                .active_probe(d, || async { Outcome::Success })
                .build(),
            "limiter.active_probe.timeout",
        );
    }
    // A ramp of zero means "no ramp"; only an enormous one is refused.
    assert!(Breaker::new(BreakerConfig {
        ramp: Duration::ZERO,
        ..BreakerConfig::recommended()
    })
    .is_ok());
    refused(
        Breaker::new(BreakerConfig {
            ramp: Duration::MAX,
            ..BreakerConfig::recommended()
        }),
        "breaker.ramp",
    );
}

#[test]
fn the_longest_durations_allowed_work_without_overflow() {
    let clock = ManualClock::new();
    let year = MAX_DURATION;
    let breaker = Breaker::new(BreakerConfig {
        window: BreakerWindow::Time {
            length: year,
            buckets: 1000,
        },
        min_calls: 5,
        slow_call_duration: year,
        cooldown: Cooldown::Exponential {
            base: year,
            factor: 100.0,
            cap: year,
        },
        probe_timeout: year,
        ramp: year,
        ..BreakerConfig::recommended()
    })
    .unwrap();
    let limiter = Limiter::builder(breaker)
        .clock(clock.clone())
        .max_wait(year)
        .build()
        .unwrap();
    for _ in 0..5 {
        limiter.try_acquire().unwrap().overload();
    }
    let refused = limiter.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Open);
    let retry = refused.retry_after().unwrap();
    assert!(retry > year - Duration::from_secs(86_400 * 80) && retry <= year);
    // A year and a bit later it probes; the probes close it; the year-long
    // ramp starts.
    clock.advance(year);
    clock.advance(Duration::from_secs(1));
    for _ in 0..4 {
        let permit = limiter.try_acquire().unwrap();
        assert!(permit.is_probe());
        permit.success();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    let gate = limiter.gate();
    assert!(gate.admit_probability > 0.0 && gate.admit_probability < 1.0);
    // And the clock at its own end of time changes nothing.
    clock.advance(Duration::MAX);
    limiter.wake();
    let _ = limiter.try_acquire();
    assert_eq!(limiter.in_flight(), 0);
}

// ----- the clock ---------------------------------------------------------

#[test]
fn a_clock_that_never_moves_measures_zero_latency_and_every_policy_stays_sane() {
    for policy in every_policy() {
        let name = policy.name();
        let clock = ManualClock::new();
        let latencies = Arc::new(Latencies::default());
        let limiter = Limiter::builder(policy)
            .clock(clock.clone())
            .observer(Arc::clone(&latencies))
            .build()
            .unwrap();
        drive(&limiter, 400, |_| {});
        let seen = latencies.0.lock().unwrap();
        assert!(!seen.is_empty(), "{name}: no call went through");
        assert!(seen.iter().all(Duration::is_zero), "{name}");
        assert_eq!(clock.elapsed(), Duration::ZERO);
    }
}

#[test]
fn a_clock_that_jumps_backwards_counts_as_no_time_passing() {
    for policy in every_policy() {
        let name = policy.name();
        let clock = ManualClock::new();
        let latencies = Arc::new(Latencies::default());
        let limiter = Limiter::builder(policy)
            .clock(clock.clone())
            .observer(Arc::clone(&latencies))
            .build()
            .unwrap();
        // Forward in steps, and every seventh round back past where calls
        // started, some of them still in flight.
        clock.set_elapsed(Duration::from_secs(10));
        drive(&limiter, 400, |round| {
            if round % 7 == 6 {
                let back = clock.elapsed().saturating_sub(Duration::from_secs(3));
                clock.set_elapsed(back);
            } else {
                clock.advance(ms(3 + u64::from(round % 5) * 40));
            }
        });
        let held = limiter.try_acquire();
        clock.set_elapsed(Duration::ZERO);
        drop(held);
        // Back to before the limiter was built.
        limiter.wake();
        let _ = limiter.try_acquire();
        assert_eq!(limiter.in_flight(), 0, "{name}");
        limiter.update(|p| assert_sane(p.as_ref()));
        let seen = latencies.0.lock().unwrap();
        assert!(seen.iter().all(|l| *l < Duration::from_secs(60)), "{name}");
    }
}

#[test]
fn an_open_breaker_whose_clock_runs_backwards_stays_open_for_no_longer_than_it_said() {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(small_breaker())
        .clock(clock.clone())
        .build()
        .unwrap();
    clock.set_elapsed(Duration::from_secs(100));
    for _ in 0..5 {
        limiter.try_acquire().unwrap().overload();
    }
    // Fifty seconds back: still open, and the retry-after is counted from
    // the clock as it reads now, to the probe time it announced.
    clock.set_elapsed(Duration::from_secs(50));
    let refused = limiter.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::Open);
    assert_eq!(refused.retry_after(), Some(Duration::from_secs(51)));
    // Back before the limiter was built: nothing underflows.
    clock.set_elapsed(Duration::ZERO);
    let refused = limiter.try_acquire().unwrap_err();
    assert!(refused.retry_after().unwrap() <= Duration::from_secs(101));
    clock.set_elapsed(Duration::from_secs(101));
    assert!(limiter.try_acquire().unwrap().is_probe());
}

// ----- late results --------------------------------------------------------

#[test]
fn results_of_calls_admitted_before_a_trip_decide_nothing_after_it() {
    let clock = ManualClock::new();
    let breaker = Breaker::new(BreakerConfig {
        // Three probes, all needed: one failure would reopen it and one
        // success too many would close it early.
        half_open: HalfOpen::Probes {
            probes: 3,
            close_after: 3,
        },
        probe_concurrency: 3,
        ..small_breaker().config().clone()
    })
    .unwrap();
    let limiter = Limiter::builder(breaker)
        .clock(clock.clone())
        .build()
        .unwrap();
    let state = || limiter.snapshot().state.unwrap();

    // Ten calls go out while closed; five fail and trip it.
    let mut early: Vec<_> = (0..10).map(|_| limiter.try_acquire().unwrap()).collect();
    clock.advance(ms(10));
    for permit in early.drain(..5) {
        permit.overload();
    }
    assert_eq!(state(), BreakerState::Open);
    // Three come back while it is open: they change nothing.
    early.pop().unwrap().success();
    early.pop().unwrap().overload();
    early.pop().unwrap().success();
    assert_eq!(state(), BreakerState::Open);

    // Half-open, with two calls from before the trip still out (they count
    // against the probe concurrency of three).
    clock.advance(Duration::from_secs(1));
    let first = limiter.try_acquire().unwrap();
    assert!(first.is_probe());
    assert_eq!(state(), BreakerState::HalfOpen);
    // A late failure does not reopen it; a late success does not count.
    early.pop().unwrap().overload();
    early.pop().unwrap().success();
    assert_eq!(state(), BreakerState::HalfOpen);
    let second = limiter.try_acquire().unwrap();
    let third = limiter.try_acquire().unwrap();
    assert!(second.is_probe() && third.is_probe());
    first.success();
    second.success();
    assert_eq!(state(), BreakerState::HalfOpen);
    third.success();
    assert_eq!(state(), BreakerState::Closed);
    assert_eq!(limiter.in_flight(), 0);

    // Calls admitted before a manual force-open, and before a reset, report
    // afterwards: neither trips it.
    let before_force: Vec<_> = (0..5).map(|_| limiter.try_acquire().unwrap()).collect();
    clock.advance(ms(10));
    limiter.update(|b| b.force_open(clock.now()));
    for permit in before_force {
        permit.overload();
    }
    assert_eq!(state(), BreakerState::ForcedOpen);
    limiter.update(|b| b.reset(clock.now()));
    let before_reset: Vec<_> = (0..5).map(|_| limiter.try_acquire().unwrap()).collect();
    clock.advance(ms(10));
    limiter.update(|b| b.reset(clock.now()));
    for permit in before_reset {
        permit.overload();
    }
    assert_eq!(state(), BreakerState::Closed);
    assert_eq!(limiter.in_flight(), 0);
}

// ----- permits elsewhere ---------------------------------------------------

// ----- swapping --------------------------------------------------------------

/// Counts samples, to see where late results go.
struct Counting {
    inner: Box<dyn Algorithm>,
    samples: Arc<AtomicU64>,
}

impl Algorithm for Counting {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn publish(&self) -> Published {
        Published::new(self.inner.publish().gate)
    }
    fn on_sample(&mut self, now: std::time::Instant, sample: &rheostat::algorithms::Sample) {
        self.samples.fetch_add(1, Ordering::SeqCst);
        self.inner.on_sample(now, sample);
    }
}

#[test]
fn a_policy_swapped_under_calls_in_flight_takes_their_results_and_nothing_leaks() {
    let clock = ManualClock::new();
    let limiter: DynLimiter<ManualClock> = limiter_for(Box::new(Fixed::new(4).unwrap()), &clock);
    let held: Vec<_> = (0..4).map(|_| limiter.try_acquire().unwrap()).collect();

    // Swap every policy in turn under four calls in flight.
    for policy in every_policy() {
        let name = policy.name();
        limiter.update(|p| *p = policy);
        assert_eq!(limiter.in_flight(), 4, "{name}");
        let _ = limiter.try_acquire();
        limiter.update(|p| assert_sane(p.as_ref()));
    }

    // To a bulkhead of one: nothing more until in-flight falls below it.
    let samples = Arc::new(AtomicU64::new(0));
    limiter.update(|p| {
        *p = Box::new(Counting {
            inner: Box::new(Fixed::new(1).unwrap()),
            samples: Arc::clone(&samples),
        });
    });
    assert_eq!(
        limiter.try_acquire().unwrap_err().reason(),
        RejectReason::LimitReached
    );
    clock.advance(ms(5));
    for (i, permit) in held.into_iter().enumerate() {
        if i % 2 == 0 {
            permit.overload();
        } else {
            drop(permit);
        }
    }
    // The calls admitted under the old policies report to the new one.
    assert_eq!(samples.load(Ordering::SeqCst), 4);
    assert_eq!(limiter.in_flight(), 0);
    limiter.try_acquire().unwrap().success();
    assert_eq!(limiter.in_flight(), 0);
}
