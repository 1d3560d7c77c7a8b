//! The limiter's behaviour on one thread: admission, rejection, recording.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rheostat::algorithms::{Aimd, AimdConfig, Algorithm, Fixed, Gate, Published, Sample};
use rheostat::{
    clock::{Clock, ManualClock},
    DynLimiter, Limiter, Outcome, RejectReason,
};

#[path = "support/recorder.rs"]
mod recorder;
use recorder::Recorder;

#[test]
fn the_limit_caps_calls_in_flight_and_the_rejection_says_why() {
    let limiter = Limiter::new(Fixed::new(2).unwrap());
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    let refused = limiter.try_acquire().unwrap_err();
    assert_eq!(refused.reason(), RejectReason::LimitReached);
    assert_eq!(refused.policy(), "fixed");
    assert_eq!(refused.retry_after(), None);
    assert_eq!(
        refused.to_string(),
        "call rejected by `fixed`: concurrency limit reached"
    );
    assert_eq!(limiter.in_flight(), 2);
    a.success();
    assert_eq!(limiter.in_flight(), 1);
    b.ignore();
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn each_record_reaches_the_policy_with_its_latency_and_in_flight() {
    let clock = ManualClock::new();
    let recorder = Recorder::new(10);
    let limiter = Limiter::builder(recorder.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let a = limiter.try_acquire().unwrap();
    let b = limiter.try_acquire().unwrap();
    assert_eq!(a.in_flight_at_start(), 1);
    assert_eq!(b.in_flight_at_start(), 2);
    clock.advance(Duration::from_millis(30));
    b.overload();
    clock.advance(Duration::from_millis(20));
    a.success();
    let samples = recorder.samples.lock().unwrap().clone();
    assert_eq!(samples[0].outcome, Outcome::Overload);
    assert_eq!(samples[0].latency, Duration::from_millis(30));
    assert_eq!(samples[0].in_flight, 2);
    assert_eq!(samples[1].outcome, Outcome::Success);
    assert_eq!(samples[1].latency, Duration::from_millis(50));
    assert!(!samples[1].probe);
}

#[test]
fn updating_the_policy_republishes_the_gate() {
    let limiter = Limiter::new(Fixed::new(1).unwrap());
    let held = limiter.try_acquire().unwrap();
    assert!(limiter.try_acquire().is_err());
    limiter.update(|f| f.set_limit(2)).unwrap();
    let second = limiter.try_acquire().unwrap();
    // Lowering the limit under in-flight lets those calls finish and
    // admits nothing new until in-flight falls under it.
    limiter.update(|f| f.set_limit(1)).unwrap();
    assert!(limiter.try_acquire().is_err());
    held.success();
    assert!(limiter.try_acquire().is_err());
    second.success();
    assert!(limiter.try_acquire().is_ok());
    // An invalid update is refused and changes nothing.
    assert!(limiter.update(|f| f.set_limit(0)).is_err());
    assert_eq!(limiter.gate().limit, 1);
}

#[test]
fn aimd_behind_a_limiter_backs_off_on_overload() {
    let limiter = Limiter::new(
        Aimd::new(AimdConfig {
            initial: 10,
            min: 1,
            max: 100,
            ..AimdConfig::default()
        })
        .unwrap(),
    );
    limiter.try_acquire().unwrap().overload();
    assert_eq!(limiter.gate().limit, 9);
    assert_eq!(limiter.snapshot().raw_limit, Some(9.0));
}

#[test]
fn a_policy_can_be_chosen_at_run_time() {
    let policies: Vec<Box<dyn Algorithm>> = vec![
        Box::new(Fixed::new(3).unwrap()),
        Box::new(Aimd::new(AimdConfig::default()).unwrap()),
    ];
    let limiters: Vec<DynLimiter> = policies.into_iter().map(Limiter::new).collect();
    assert_eq!(limiters[0].gate().limit, 3);
    assert_eq!(limiters[1].gate().limit, 10);
    assert_eq!(limiters[1].snapshot().policy, "aimd");
    limiters[0].try_acquire().unwrap().success();
}

#[test]
fn invalid_limiter_options_name_the_field() {
    let e = Limiter::builder(Fixed::new(1).unwrap())
        .max_wait(Duration::ZERO)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "limiter.max_wait");
    let e = Limiter::builder(Fixed::new(1).unwrap())
        .max_wait(Duration::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "limiter.max_wait");
    let e = Limiter::builder(Fixed::new(1).unwrap())
        .queue(rheostat::limiter::QueueOrder::Fifo, usize::MAX)
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "limiter.max_waiters");
}

#[test]
fn a_gate_with_a_probability_admits_about_that_fraction() {
    struct Half;
    impl Algorithm for Half {
        fn name(&self) -> &'static str {
            "half"
        }
        fn publish(&self) -> Published {
            Published::new(Gate {
                admit_probability: 0.5,
                ..Gate::unlimited()
            })
        }
        fn on_sample(&mut self, _: Instant, _: &Sample) {}
    }
    let limiter = Limiter::builder(Half).seed(7).build().unwrap();
    let mut admitted = 0;
    for _ in 0..10_000 {
        match limiter.try_acquire() {
            Ok(p) => {
                admitted += 1;
                p.success();
            }
            Err(r) => assert_eq!(r.reason(), RejectReason::Throttled),
        }
    }
    assert!((4_700..=5_300).contains(&admitted), "{admitted}");
}

#[test]
fn local_rejections_are_told_to_the_policy() {
    #[derive(Clone, Default)]
    struct Counts(Arc<Mutex<u64>>);
    impl Algorithm for Counts {
        fn name(&self) -> &'static str {
            "counts"
        }
        fn publish(&self) -> Published {
            Published::new(Gate::limited(1))
        }
        fn on_sample(&mut self, _: Instant, _: &Sample) {}
        fn on_rejected(&mut self, _: Instant, count: u64) {
            *self.0.lock().unwrap() += count;
        }
    }
    let counts = Counts::default();
    let limiter = Limiter::new(counts.clone());
    let held = limiter.try_acquire().unwrap();
    for _ in 0..5 {
        assert!(limiter.try_acquire().is_err());
    }
    held.success();
    assert_eq!(*counts.0.lock().unwrap(), 5);
}

#[test]
fn a_shut_gate_rejects_as_open_with_the_time_until_it_reopens() {
    struct Shut(Instant);
    impl Algorithm for Shut {
        fn name(&self) -> &'static str {
            "shut"
        }
        fn publish(&self) -> Published {
            Published::new(Gate::shut(Some(self.0)))
        }
        fn on_sample(&mut self, _: Instant, _: &Sample) {}
        fn handle_timeout(&mut self, now: Instant) {
            self.0 = now + Duration::from_secs(3600);
        }
    }
    let clock = ManualClock::new();
    let reopen = clock.now() + Duration::from_secs(10);
    let limiter = Limiter::builder(Shut(reopen))
        .clock(clock.clone())
        .build()
        .unwrap();
    clock.advance(Duration::from_secs(4));
    let r = limiter.try_acquire().unwrap_err();
    assert_eq!(r.reason(), RejectReason::Open);
    assert_eq!(r.retry_after(), Some(Duration::from_secs(6)));
    // At the deadline the policy is asked again (it re-shuts for an hour).
    clock.advance(Duration::from_secs(6));
    let r = limiter.try_acquire().unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_secs(3600)));
}

#[test]
fn an_observer_sees_admissions_rejections_finishes_gate_changes_and_transitions() {
    use rheostat::algorithms::{Breaker, BreakerConfig, Transition};
    use rheostat::{Observer, Rejection};

    #[derive(Default)]
    struct Seen {
        log: Mutex<Vec<String>>,
    }
    impl Observer for Seen {
        fn admitted(&self, in_flight: u32, probe: bool) {
            self.log
                .lock()
                .unwrap()
                .push(format!("admitted {in_flight} {probe}"));
        }
        fn rejected(&self, r: &Rejection) {
            self.log
                .lock()
                .unwrap()
                .push(format!("rejected {}", r.reason().as_str()));
        }
        fn finished(&self, outcome: Outcome, latency: Duration, in_flight: u32) {
            self.log.lock().unwrap().push(format!(
                "finished {outcome:?} {}ms {in_flight}",
                latency.as_millis()
            ));
        }
        fn gate_changed(&self, gate: &Gate) {
            self.log
                .lock()
                .unwrap()
                .push(format!("gate {}", gate.limit));
        }
        fn transition(&self, t: &Transition) {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} -> {}", t.from, t.to));
        }
    }

    let seen = Arc::new(Seen::default());
    let clock = ManualClock::new();
    let config = BreakerConfig {
        min_calls: 1,
        ..BreakerConfig::default()
    };
    let limiter = Limiter::builder(Breaker::new(config).unwrap())
        .clock(clock.clone())
        .observer(Arc::clone(&seen))
        .build()
        .unwrap();
    let p = limiter.try_acquire().unwrap();
    clock.advance(Duration::from_millis(30));
    p.overload();
    assert!(limiter.try_acquire().is_err());
    let log = seen.log.lock().unwrap().clone();
    assert_eq!(
        log,
        vec![
            "gate 2147483647",
            "admitted 1 false",
            "gate 0",
            "finished Overload 30ms 0",
            "closed -> open",
            "rejected open",
        ]
    );
}

#[test]
fn a_sample_tells_the_calls_in_flight_at_admission_and_at_finish() {
    let recorder = Recorder::new(3);
    let limiter = Limiter::new(recorder.clone());
    let first = limiter.try_acquire().unwrap();
    let second = limiter.try_acquire().unwrap();
    let third = limiter.try_acquire().unwrap();
    first.success();
    second.overload();
    third.ignore();
    let seen: Vec<(u32, u32)> = recorder
        .samples
        .lock()
        .unwrap()
        .iter()
        .map(|s| (s.in_flight, s.in_flight_at_finish))
        .collect();
    // Finishing, each call still counts itself.
    assert_eq!(seen, [(1, 3), (2, 2), (3, 1)]);
}
