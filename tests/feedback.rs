//! The limiter reads the clock and locks the policy no more than the
//! policy's `Feedback` asks, and never hands a timing policy a latency it
//! did not measure.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Feedback, Fixed, Gate, Hints, Published, Sample, Stack, Throttle,
    ThrottleConfig,
};
use rheostat::{
    clock::{Clock, ManualClock},
    DynLimiter, Limiter, Observer, Outcome,
};

/// A manual clock that counts how often it is read.
#[derive(Clone, Default)]
struct Counting {
    clock: ManualClock,
    reads: Arc<AtomicU64>,
}

impl Counting {
    fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }
}

impl Clock for Counting {
    fn now(&self) -> Instant {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.clock.now()
    }
}

/// A fixed limit that claims a given feedback and keeps every sample.
#[derive(Clone)]
struct Claims {
    feedback: Feedback,
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Claims {
    fn new(feedback: Feedback) -> Self {
        Claims {
            feedback,
            samples: Arc::default(),
        }
    }
}

impl Algorithm for Claims {
    fn name(&self) -> &'static str {
        "claims"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(10)).with_hints(Hints::default().with_feedback(self.feedback))
    }
    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        self.samples.lock().unwrap().push(*sample);
    }
}

/// Clock reads for one call admitted and recorded as a success.
fn reads_per_call<A: Algorithm>(policy: A) -> u64 {
    let clock = Counting::default();
    let limiter = Limiter::builder(policy)
        .clock(clock.clone())
        .build()
        .unwrap();
    let before = clock.reads();
    let permit = limiter.try_acquire().unwrap();
    clock.clock.advance(Duration::from_millis(7));
    permit.success();
    clock.reads() - before
}

#[test]
fn the_clock_is_read_only_as_often_as_the_policy_needs() {
    assert_eq!(reads_per_call(Fixed::new(10).unwrap()), 0);
    assert_eq!(
        reads_per_call(Throttle::new(ThrottleConfig::default()).unwrap()),
        1
    );
    assert_eq!(reads_per_call(Aimd::new(AimdConfig::default()).unwrap()), 2);
    assert_eq!(reads_per_call(Claims::new(Feedback::Nothing)), 0);
    assert_eq!(reads_per_call(Claims::new(Feedback::Outcomes)), 1);
    assert_eq!(reads_per_call(Claims::new(Feedback::Timed)), 2);
}

#[test]
fn a_policy_is_given_what_it_asked_for() {
    for (feedback, samples, latency) in [
        (Feedback::Nothing, 0, None),
        (Feedback::Outcomes, 1, Some(Duration::ZERO)),
        (Feedback::Timed, 1, Some(Duration::from_millis(7))),
    ] {
        let policy = Claims::new(feedback);
        let clock = ManualClock::new();
        let limiter = Limiter::builder(policy.clone())
            .clock(clock.clone())
            .build()
            .unwrap();
        let permit = limiter.try_acquire().unwrap();
        assert_eq!(
            permit.started().is_some(),
            feedback == Feedback::Timed,
            "{feedback:?}"
        );
        clock.advance(Duration::from_millis(7));
        permit.overload();
        assert_eq!(limiter.in_flight(), 0);
        let seen = policy.samples.lock().unwrap().clone();
        assert_eq!(seen.len(), samples, "{feedback:?}");
        if let Some(latency) = latency {
            assert_eq!(seen[0].latency, latency, "{feedback:?}");
            assert_eq!(seen[0].outcome, Outcome::Overload, "{feedback:?}");
        }
    }
}

#[test]
fn a_stack_needs_the_most_any_member_needs() {
    let fixed = || Box::new(Fixed::new(5).unwrap()) as Box<dyn Algorithm>;
    let throttle =
        || Box::new(Throttle::new(ThrottleConfig::default()).unwrap()) as Box<dyn Algorithm>;
    let aimd = || Box::new(Aimd::new(AimdConfig::default()).unwrap()) as Box<dyn Algorithm>;
    let stack = |members: Vec<Box<dyn Algorithm>>| {
        members
            .into_iter()
            .fold(Stack::builder(), |b, m| b.push_boxed(m))
            .build()
            .unwrap()
            .publish()
            .hints
            .feedback
    };
    assert_eq!(stack(vec![fixed()]), Feedback::Nothing);
    assert_eq!(stack(vec![fixed(), throttle()]), Feedback::Outcomes);
    assert_eq!(stack(vec![fixed(), throttle(), aimd()]), Feedback::Timed);
}

#[test]
fn an_untimed_call_finished_under_a_timing_policy_teaches_it_nothing() {
    let clock = ManualClock::new();
    let limiter: DynLimiter<ManualClock> =
        Limiter::builder(Box::new(Fixed::new(10).unwrap()) as Box<dyn Algorithm>)
            .clock(clock.clone())
            .build()
            .unwrap();
    let untimed = limiter.try_acquire().unwrap();
    assert_eq!(untimed.started(), None);

    let timing = Claims::new(Feedback::Timed);
    limiter.update(|policy| *policy = Box::new(timing.clone()));
    let timed = limiter.try_acquire().unwrap();
    assert!(timed.started().is_some());
    clock.advance(Duration::from_millis(3));
    untimed.overload();
    timed.overload();

    let seen = timing.samples.lock().unwrap().clone();
    let outcomes: Vec<_> = seen.iter().map(|s| (s.outcome, s.latency)).collect();
    assert_eq!(
        outcomes,
        [
            (Outcome::Ignore, Duration::ZERO),
            (Outcome::Overload, Duration::from_millis(3)),
        ]
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn a_swap_to_a_policy_that_ignores_calls_stops_the_clock() {
    let clock = Counting::default();
    let limiter: DynLimiter<Counting> =
        Limiter::builder(Box::new(Aimd::new(AimdConfig::default()).unwrap()) as Box<dyn Algorithm>)
            .clock(clock.clone())
            .build()
            .unwrap();
    limiter.update(|policy| *policy = Box::new(Fixed::new(3).unwrap()));
    let before = clock.reads();
    for _ in 0..5 {
        limiter.try_acquire().unwrap().success();
    }
    assert_eq!(clock.reads(), before);
}

#[derive(Clone, Default)]
struct Latencies(Arc<Mutex<Vec<Duration>>>);

impl Observer for Latencies {
    fn finished(&self, _outcome: Outcome, latency: Duration, _in_flight: u32) {
        self.0.lock().unwrap().push(latency);
    }
}

#[test]
fn an_observer_is_told_every_latency_even_under_a_fixed_limit() {
    let clock = ManualClock::new();
    let seen = Latencies::default();
    let limiter = Limiter::builder(Fixed::new(2).unwrap())
        .clock(clock.clone())
        .observer(seen.clone())
        .build()
        .unwrap();
    let permit = limiter.try_acquire().unwrap();
    assert!(permit.started().is_some());
    clock.advance(Duration::from_millis(40));
    permit.success();
    assert_eq!(*seen.0.lock().unwrap(), [Duration::from_millis(40)]);
}

/// Keeps samples, and reports a transition whenever told to.
#[derive(Clone, Default)]
struct Flips {
    samples: Arc<Mutex<Vec<Sample>>>,
    pending: bool,
}

impl Algorithm for Flips {
    fn name(&self) -> &'static str {
        "flips"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(10))
    }
    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        self.samples.lock().unwrap().push(*sample);
    }
    fn poll_transition(&mut self) -> Option<rheostat::algorithms::Transition> {
        use rheostat::algorithms::{BreakerState, Transition};
        std::mem::take(&mut self.pending).then(|| {
            Transition::new(
                Instant::now(),
                "flips",
                BreakerState::Closed,
                BreakerState::Open,
                0.0,
                0.0,
                0,
            )
        })
    }
}

#[test]
fn a_call_admitted_before_a_transition_is_marked_stale() {
    let policy = Flips::default();
    let limiter = Limiter::builder(policy.clone())
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let before = limiter.try_acquire().unwrap();
    limiter.update(|p| p.pending = true);
    let after = limiter.try_acquire().unwrap();
    before.success();
    after.success();
    let stale: Vec<bool> = policy
        .samples
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.stale)
        .collect();
    assert_eq!(stale, [true, false]);
}

/// Keeps every sample; successes within 10 ms with at most 3 in flight may
/// be held (they would change nothing).
#[derive(Clone, Default)]
struct Hushed {
    samples: Arc<Mutex<Vec<Sample>>>,
}

impl Algorithm for Hushed {
    fn name(&self) -> &'static str {
        "hushed"
    }
    fn publish(&self) -> Published {
        Published::new(Gate::limited(10)).with_hints(
            Hints::default().with_deferral(Some(
                rheostat::algorithms::Deferral::until(None, Duration::from_millis(10))
                    .with_max_in_flight(3),
            )),
        )
    }
    fn on_sample(&mut self, _now: Instant, sample: &Sample) {
        self.samples.lock().unwrap().push(*sample);
    }
}

#[test]
fn a_success_within_the_deferrals_bounds_is_held_and_nothing_else_is() {
    let policy = Hushed::default();
    let clock = ManualClock::new();
    let seen = Latencies::default();
    // Successes held on a buffer from the start, so that they wait there
    // for the policy's next event rather than being told at once.
    let limiter = Limiter::builder(policy.clone())
        .clock(clock.clone())
        .observer(seen.clone())
        .sharding(rheostat::limiter::Sharding::Always)
        .build()
        .unwrap();
    let call = |latency: Duration, outcome: Outcome| {
        let permit = limiter.try_acquire().unwrap();
        clock.advance(latency);
        permit.record(outcome);
    };
    let told = || -> Vec<(Outcome, Duration, u32)> {
        policy
            .samples
            .lock()
            .unwrap()
            .iter()
            .map(|s| (s.outcome, s.latency, s.in_flight))
            .collect()
    };
    let ms = Duration::from_millis;
    call(ms(5), Outcome::Success); // held
    call(ms(10), Outcome::Success); // held: exactly at the bound
    assert_eq!(told(), []);
    call(ms(10) + Duration::from_nanos(1), Outcome::Success); // a nanosecond too slow
    call(ms(1), Outcome::Overload);
    call(ms(1), Outcome::Ignore);
    // Four in flight: past the bound.
    let held: Vec<_> = (0..3).map(|_| limiter.try_acquire().unwrap()).collect();
    call(ms(1), Outcome::Success);
    for permit in held {
        permit.success(); // admitted with 1 to 3 in flight, within 10 ms: held
    }
    assert_eq!(
        told(),
        [
            (Outcome::Success, ms(5), 1),
            (Outcome::Success, ms(10), 1),
            (Outcome::Success, ms(10) + Duration::from_nanos(1), 1),
            (Outcome::Overload, ms(1), 1),
            (Outcome::Ignore, ms(1), 1),
            (Outcome::Success, ms(1), 4),
        ]
    );
    // Held until the policy's next event, then told in the order they
    // finished.
    limiter.snapshot();
    assert_eq!(
        told()[6..],
        [
            (Outcome::Success, ms(1), 1),
            (Outcome::Success, ms(1), 2),
            (Outcome::Success, ms(1), 3),
        ]
    );
    // The observer still hears of every call.
    assert_eq!(seen.0.lock().unwrap().len(), 9);
    assert_eq!(limiter.in_flight(), 0);
}
