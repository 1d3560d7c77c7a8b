//! The breaker, driven by hand with hand-built instants, and its invariants
//! under random traffic.

use std::time::{Duration, Instant};

use rheostat_algorithms::breaker::{Breaker, BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat_algorithms::{Algorithm, BreakerState, Gate, Outcome, Sample, Transition};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The recommended breaker without jitter, ramp or run rule, with a
/// cooldown of 10 s doubling to 60 s: instants are exact, and the rate
/// rules and the half-open cycle can be tested on their own.
fn plain() -> BreakerConfig {
    BreakerConfig {
        cooldown_jitter: 0.0,
        ramp: Duration::ZERO,
        consecutive_failures: 0,
        cooldown: Cooldown::Exponential {
            base: secs(10),
            factor: 2.0,
            cap: secs(60),
        },
        ..BreakerConfig::recommended()
    }
}

fn breaker(config: BreakerConfig) -> Breaker {
    Breaker::new(config).expect("valid config")
}

fn call(outcome: Outcome, latency: Duration) -> Sample {
    Sample::new(outcome, latency, 1)
}

fn drain(b: &mut Breaker) -> Vec<Transition> {
    std::iter::from_fn(|| b.poll_transition()).collect()
}

fn moves(b: &mut Breaker) -> Vec<(BreakerState, BreakerState)> {
    drain(b).into_iter().map(|t| (t.from, t.to)).collect()
}

/// Twenty failed calls finishing at `now`: enough to trip the defaults.
fn trip(b: &mut Breaker, now: Instant) {
    for _ in 0..20 {
        b.on_sample(now, &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Open);
}

/// Admit `n` probes at `now`; how many were let through.
fn admit(b: &mut Breaker, now: Instant, n: u32) -> u32 {
    (0..n).map(|_| u32::from(b.on_admit(now))).sum()
}

/// Report a probe admitted at `admitted` that took `latency`.
fn probe(b: &mut Breaker, admitted: Instant, latency: Duration, outcome: Outcome) {
    b.on_sample(admitted + latency, &call(outcome, latency).with_probe(true));
}

/// Trip at `t0`, wait out a 10 s cooldown, and return when half-open began.
fn half_open(b: &mut Breaker, t0: Instant) -> Instant {
    trip(b, t0);
    let t1 = b
        .publish()
        .gate
        .until
        .expect("an open breaker says until when");
    b.handle_timeout(t1);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    drain(b);
    t1
}

#[test]
fn a_new_breaker_is_closed_and_admits_everything() {
    let b = breaker(plain());
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert_eq!(b.publish().wake_at, None);
    assert_eq!(b.snapshot().state, Some(BreakerState::Closed));
    assert_eq!(b.name(), "breaker");
}

#[test]
fn closed_opens_when_the_failure_rate_reaches_the_threshold() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    // Nine failures in twenty calls: 45%, stays closed.
    for i in 0..20 {
        let outcome = if i < 9 {
            Outcome::Overload
        } else {
            Outcome::Success
        };
        b.on_sample(t0 + ms(i), &call(outcome, ms(30)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    // One more failure: ten in twenty-one (47.6%), still closed; another:
    // eleven in twenty-two, 50%: open.
    b.on_sample(t0 + secs(1), &call(Outcome::Overload, ms(30)));
    assert_eq!(b.state(), BreakerState::Closed);
    b.on_sample(t0 + secs(2), &call(Outcome::Overload, ms(30)));
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::Closed, BreakerState::Open)
    );
    assert_eq!(t[0].at, t0 + secs(2));
    assert_eq!(t[0].calls, 22);
    assert_eq!(t[0].failure_rate, 0.5);
    assert_eq!(t[0].slow_call_rate, 0.0);
    assert_eq!(t[0].policy, "breaker");
    assert_eq!(b.publish().gate, Gate::shut(Some(t0 + secs(12))));
    assert_eq!(b.snapshot().state, Some(BreakerState::Open));
}

#[test]
fn closed_opens_when_the_slow_call_rate_reaches_the_threshold() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        failure_rate: None,
        slow_call_rate: Some(0.8),
        slow_call_duration: secs(5),
        ..plain()
    });
    // Exactly the slow-call duration is not slow.
    for _ in 0..20 {
        b.on_sample(t0 + secs(5), &call(Outcome::Success, secs(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    // Failures do not count when only the slow-call rate trips.
    for _ in 0..20 {
        b.on_sample(t0 + secs(6), &call(Outcome::Overload, ms(1)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    for _ in 0..160 {
        b.on_sample(t0 + secs(7), &call(Outcome::Success, secs(6)));
    }
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::Closed, BreakerState::Open)
    );
    assert_eq!(t[0].calls, 200);
    assert_eq!(t[0].slow_call_rate, 0.8);
    assert_eq!(t[0].failure_rate, 0.1);
}

#[test]
fn no_trip_below_the_minimum_call_volume() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    for _ in 0..19 {
        b.on_sample(t0, &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats(t0).calls, 19);
    assert_eq!(b.window_stats(t0).failure_rate(), 1.0);
}

#[test]
fn a_time_window_forgets_failures_older_than_its_length() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    for _ in 0..15 {
        b.on_sample(t0, &call(Outcome::Overload, ms(5)));
    }
    // 30 s later the first bucket has aged out: ten fresh failures are not
    // twenty calls.
    for _ in 0..10 {
        b.on_sample(t0 + secs(30), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats(t0 + secs(30)).calls, 10);
}

#[test]
fn a_count_window_judges_the_last_n_calls() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        window: BreakerWindow::Count { calls: 20 },
        ..plain()
    });
    for _ in 0..9 {
        b.on_sample(t0, &call(Outcome::Overload, ms(5)));
    }
    for _ in 0..11 {
        b.on_sample(t0 + secs(3600), &call(Outcome::Success, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    // The tenth failure, an hour later, pushes out a success: 10 of 20.
    b.on_sample(t0 + secs(7200), &call(Outcome::Overload, ms(5)));
    assert_eq!(b.state(), BreakerState::Closed, "it pushed out a failure");
    b.on_sample(t0 + secs(7200), &call(Outcome::Overload, ms(5)));
    assert_eq!(b.window_stats(t0).calls, 20);
    assert_eq!(b.window_stats(t0).failures, 9);
    for _ in 0..9 {
        b.on_sample(t0 + secs(7200), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn open_refuses_everything_until_the_cooldown_ends_then_goes_half_open() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    trip(&mut b, t0);
    drain(&mut b);
    assert_eq!(b.publish().wake_at, Some(t0 + secs(10)));
    // Nothing gets through early, and nothing recorded while open counts.
    assert!(!b.on_admit(t0 + secs(9)));
    b.on_sample(t0 + secs(9), &call(Outcome::Success, ms(5)));
    b.handle_timeout(t0 + secs(10) - Duration::from_nanos(1));
    assert_eq!(b.state(), BreakerState::Open);
    b.handle_timeout(t0 + secs(10));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    let t = drain(&mut b);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::Open, BreakerState::HalfOpen)
    );
    assert_eq!(t[0].at, t0 + secs(10));
    let g = b.publish().gate;
    assert!(g.probe);
    assert_eq!(g.limit, 5);
    assert_eq!(g.admit_probability, 1.0);
    // Waiting for traffic: nothing to time out yet.
    assert_eq!(g.until, None);
}

#[test]
fn open_becomes_half_open_lazily_on_the_first_call_after_the_cooldown() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    trip(&mut b, t0);
    let late = t0 + secs(25);
    assert!(b.on_admit(late));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(b.publish().gate.until, Some(late + secs(30)));
}

#[test]
fn half_open_closes_on_four_of_five_probe_successes() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    assert_eq!(admit(&mut b, t1, 5), 5);
    probe(&mut b, t1, ms(100), Outcome::Success);
    probe(&mut b, t1, ms(200), Outcome::Overload);
    probe(&mut b, t1, ms(300), Outcome::Success);
    probe(&mut b, t1, ms(400), Outcome::Success);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    probe(&mut b, t1, ms(500), Outcome::Success);
    assert_eq!(b.state(), BreakerState::Closed);
    let t = drain(&mut b);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::HalfOpen, BreakerState::Closed)
    );
    assert_eq!(t[0].at, t1 + ms(500));
    assert_eq!(t[0].calls, 5);
    assert_eq!(t[0].failure_rate, 0.2);
    assert_eq!(b.publish().gate, Gate::unlimited());
    // The fifth probe's result is late: it does not count in the new window.
    probe(&mut b, t1, ms(600), Outcome::Overload);
    assert_eq!(b.window_stats(t1 + secs(1)).calls, 0);
}

#[test]
fn half_open_reopens_as_soon_as_closing_is_impossible() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    assert_eq!(admit(&mut b, t1, 5), 5);
    probe(&mut b, t1, ms(100), Outcome::Overload);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    probe(&mut b, t1, ms(200), Outcome::Overload);
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::HalfOpen, BreakerState::Open)
    );
    assert_eq!(t[0].calls, 2);
    assert_eq!(t[0].failure_rate, 1.0);
    // The cooldown doubled: 20 s.
    assert_eq!(b.publish().gate, Gate::shut(Some(t1 + ms(200) + secs(20))));
}

#[test]
fn a_slow_probe_fails_while_the_slow_call_rate_is_enabled() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        slow_call_rate: Some(0.5),
        slow_call_duration: secs(2),
        ..plain()
    });
    let t1 = half_open(&mut b, t0);
    admit(&mut b, t1, 5);
    probe(&mut b, t1, secs(3), Outcome::Success);
    probe(&mut b, t1, secs(3), Outcome::Success);
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(t[0].slow_call_rate, 1.0);
}

#[test]
fn a_probe_that_never_reports_counts_as_a_failure_so_half_open_never_sticks() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    assert_eq!(admit(&mut b, t1, 3), 3);
    assert_eq!(admit(&mut b, t1 + secs(1), 2), 2);
    // The allowance is spent: the gate shuts until the earliest deadline.
    assert_eq!(b.publish().gate, Gate::shut(Some(t1 + secs(30))));
    probe(&mut b, t1, secs(1), Outcome::Success);
    probe(&mut b, t1, secs(2), Outcome::Success);
    probe(&mut b, t1, secs(3), Outcome::Success);
    // Two probes admitted at t1 + 1 s never report.
    assert_eq!(b.publish().wake_at, Some(t1 + secs(31)));
    b.handle_timeout(t1 + secs(31) - Duration::from_nanos(1));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    b.handle_timeout(t1 + secs(31));
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::HalfOpen, BreakerState::Open)
    );
    assert_eq!(t[0].calls, 5);
    assert_eq!(t[0].failure_rate, 0.4);
    // Probes succeeded in the cycle: the cooldown starts over at its base
    // instead of doubling.
    assert_eq!(b.publish().gate.until, Some(t1 + secs(41)));
    // Their results, arriving later, change nothing.
    probe(&mut b, t1 + secs(1), secs(35), Outcome::Success);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn a_probe_reported_after_its_deadline_is_a_failure_even_if_it_succeeded() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        half_open: HalfOpen::Probes {
            probes: 1,
            close_after: 1,
        },
        ..plain()
    });
    let t1 = half_open(&mut b, t0);
    assert!(b.on_admit(t1));
    probe(&mut b, t1, secs(30), Outcome::Success);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn probe_concurrency_caps_the_probes_in_flight() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        probe_concurrency: 2,
        ..plain()
    });
    let t1 = half_open(&mut b, t0);
    assert_eq!(b.publish().gate.limit, 2);
    assert_eq!(admit(&mut b, t1, 5), 2);
    probe(&mut b, t1, ms(100), Outcome::Success);
    assert_eq!(admit(&mut b, t1 + ms(100), 5), 1);
}

#[test]
fn an_ignored_probe_gives_its_allowance_back() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    assert_eq!(admit(&mut b, t1, 5), 5);
    assert!(b.publish().gate.is_shut());
    probe(&mut b, t1, ms(100), Outcome::Ignore);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert!(b.publish().gate.probe);
    assert!(b.on_admit(t1 + ms(100)));
    assert!(!b.on_admit(t1 + ms(100)));
}

#[test]
fn only_this_cycles_probes_judge_half_open() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    // A call that started before the trip finishes during half-open.
    let t1 = half_open(&mut b, t0);
    b.on_sample(t1 + secs(1), &call(Outcome::Success, secs(12)));
    // A call that is not a probe, and a "probe" nobody admitted.
    b.on_sample(t1 + secs(1), &call(Outcome::Success, ms(10)));
    b.on_sample(
        t1 + secs(1),
        &call(Outcome::Success, ms(10)).with_probe(true),
    );
    assert!(b.publish().gate.probe);
    assert_eq!(admit(&mut b, t1 + secs(2), 5), 5);
    for _ in 0..3 {
        probe(&mut b, t1 + secs(2), ms(10), Outcome::Success);
    }
    assert_eq!(b.state(), BreakerState::HalfOpen);
}

#[test]
fn results_from_before_a_trip_never_count_after_recovery() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    admit(&mut b, t1, 4);
    for _ in 0..4 {
        probe(&mut b, t1, ms(50), Outcome::Success);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    let closed = t1 + ms(50);
    // Thirty calls that started before the trip time out now.
    for _ in 0..30 {
        b.on_sample(closed + secs(1), &call(Outcome::Overload, secs(15)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats(closed + secs(1)).calls, 0);
    // Calls started after closing do count.
    b.on_sample(closed + secs(1), &call(Outcome::Overload, ms(500)));
    assert_eq!(b.window_stats(closed + secs(1)).calls, 1);
}

#[test]
fn a_storm_of_ignored_calls_never_opens_it() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    for i in 0..10_000 {
        b.on_sample(t0 + ms(i), &call(Outcome::Ignore, secs(60)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats(t0 + secs(10)).calls, 0);
    assert!(drain(&mut b).is_empty());
}

/// Close a half-open breaker at `t1` with four instant probe successes.
fn close(b: &mut Breaker, t1: Instant) {
    admit(b, t1, 4);
    for _ in 0..4 {
        probe(b, t1, Duration::ZERO, Outcome::Success);
    }
    assert_eq!(b.state(), BreakerState::Closed);
}

/// `n` calls admitted at `admitted` that finish at `done` with `outcome`.
fn finish(b: &mut Breaker, admitted: Instant, done: Instant, outcome: Outcome, n: u32) {
    for _ in 0..n {
        b.on_sample(done, &call(outcome, done - admitted));
    }
}

/// The recommended ramp on the exact breaker: from 10%, doubling on three
/// successes or after 5 s (20 s over four doublings).
fn ramping() -> BreakerConfig {
    BreakerConfig {
        ramp: secs(20),
        ramp_start: 0.1,
        ramp_successes: 3,
        ..plain()
    }
}

#[test]
fn the_ramp_doubles_on_successes_of_calls_admitted_at_the_current_level() {
    let t0 = Instant::now();
    let mut b = breaker(ramping());
    let t1 = half_open(&mut b, t0);
    close(&mut b, t1);
    let g = b.publish().gate;
    assert_eq!(g.admit_probability, 0.1);
    assert_eq!(g.limit, rheostat_algorithms::MAX_LIMIT);
    assert!(!g.probe);
    assert_eq!(g.until, Some(t1 + secs(5)));
    // It needs latencies, to tell when each call was admitted.
    assert_eq!(
        b.publish().hints.feedback,
        rheostat_algorithms::Feedback::Timed
    );
    assert_eq!(b.publish().hints.deferral, None);

    // Three successes of calls admitted since closing: 20%.
    let t2 = t1 + ms(100);
    finish(&mut b, t1 + ms(10), t2, Outcome::Success, 3);
    assert_eq!(b.publish().gate.admit_probability, 0.2);
    assert_eq!(b.publish().gate.until, Some(t2 + secs(5)));
    // Calls admitted at 10% are no evidence for 20%.
    finish(&mut b, t1 + ms(50), t2 + ms(50), Outcome::Success, 10);
    assert_eq!(b.publish().gate.admit_probability, 0.2);
    // Calls admitted at 20% are.
    let mut now = t2 + ms(100);
    for level in [0.4, 0.8] {
        finish(&mut b, now - ms(40), now, Outcome::Success, 3);
        assert_eq!(b.publish().gate.admit_probability, level);
        now += ms(100);
    }
    finish(&mut b, now - ms(40), now, Outcome::Success, 3);
    // Full traffic, under a second after closing: the ramp is over.
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert_eq!(b.publish().wake_at, None);
    assert_eq!(
        b.publish().hints.feedback,
        rheostat_algorithms::Feedback::Outcomes
    );
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn a_failure_restarts_the_count_of_successes() {
    let t0 = Instant::now();
    let mut b = breaker(ramping());
    let t1 = half_open(&mut b, t0);
    close(&mut b, t1);
    let t2 = t1 + ms(200);
    finish(&mut b, t1, t2, Outcome::Success, 2);
    finish(&mut b, t1, t2, Outcome::Overload, 1);
    finish(&mut b, t1, t2, Outcome::Success, 2);
    assert_eq!(b.publish().gate.admit_probability, 0.1, "held");
    // Neither an ignored call nor a stale one counts, either way.
    finish(&mut b, t1, t2, Outcome::Ignore, 5);
    b.on_sample(t2, &call(Outcome::Success, ms(5)).with_stale(true));
    assert_eq!(b.publish().gate.admit_probability, 0.1);
    finish(&mut b, t1, t2, Outcome::Success, 1);
    assert_eq!(b.publish().gate.admit_probability, 0.2);
    // Enough failures reopen it through the usual rules: here, as the
    // window reaches twenty calls, fifteen of them failed.
    finish(&mut b, t2, t2 + ms(10), Outcome::Overload, 13);
    assert_eq!(b.state(), BreakerState::Closed);
    finish(&mut b, t2, t2 + ms(10), Outcome::Overload, 1);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.window_stats(t2).calls, 0);
}

#[test]
fn with_no_evidence_the_ramp_moves_up_a_step_every_quarter_of_its_length() {
    let t0 = Instant::now();
    let mut b = breaker(ramping());
    let t1 = half_open(&mut b, t0);
    close(&mut b, t1);
    let mut seen = vec![b.publish().gate.admit_probability];
    let mut now = t1;
    while let Some(next) = b.publish().wake_at {
        assert!(next > now, "the ramp always moves forward");
        now = next;
        // A failure holds the evidence back, not the clock.
        b.on_sample(now - ms(1), &call(Outcome::Overload, ms(5)));
        b.handle_timeout(now);
        seen.push(b.publish().gate.admit_probability);
    }
    assert_eq!(now, t1 + secs(20));
    assert_eq!(seen, [0.1, 0.2, 0.4, 0.8, 1.0]);
    assert_eq!(b.publish().gate, Gate::unlimited());

    // A long silence ends it at once.
    let mut b = breaker(ramping());
    let t1 = half_open(&mut b, t0);
    close(&mut b, t1);
    b.on_sample(t1 + secs(60), &call(Outcome::Success, ms(5)));
    assert_eq!(b.publish().gate, Gate::unlimited());
}

#[test]
fn a_run_of_failures_trips_a_window_too_sparse_to_judge_a_rate() {
    let exact = || {
        breaker(BreakerConfig {
            cooldown_jitter: 0.0,
            ..BreakerConfig::recommended()
        })
    };
    let t0 = Instant::now();
    // One call every 5 s: the 30 s window never holds more than six.
    let every = |i: u64| t0 + secs(5 * i);
    let mut b = exact();
    for i in 0..9 {
        b.on_sample(every(i), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    b.on_sample(every(9), &call(Outcome::Overload, ms(5)));
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!((t[0].calls, t[0].failure_rate), (10, 1.0));
    assert_eq!(b.publish().gate.until, Some(every(9) + secs(5)));

    // A success breaks the run; an ignored call does not.
    let mut b = exact();
    let outcomes = [Outcome::Overload; 9]
        .into_iter()
        .chain([Outcome::Success])
        .chain([Outcome::Overload; 5])
        .chain([Outcome::Ignore])
        .chain([Outcome::Overload; 4]);
    for (i, outcome) in (0..).zip(outcomes) {
        b.on_sample(every(i), &call(outcome, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    b.on_sample(every(20), &call(Outcome::Overload, ms(5)));
    assert_eq!(b.state(), BreakerState::Open);

    // A window with the volume to judge a rate is judged on the rate: a run
    // of twelve among forty calls (30%) does not trip it.
    let mut b = exact();
    for _ in 0..28 {
        b.on_sample(t0, &call(Outcome::Success, ms(5)));
    }
    for _ in 0..12 {
        b.on_sample(t0 + secs(1), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn the_default_cooldown_is_a_tenth_of_the_outage_between_5_and_60_s() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        cooldown_jitter: 0.0,
        ..BreakerConfig::recommended()
    });
    for _ in 0..20 {
        b.on_sample(t0, &call(Outcome::Overload, ms(5)));
    }
    let mut opened = t0;
    let mut periods = Vec::new();
    for _ in 0..40 {
        let until = b.publish().gate.until.expect("open");
        periods.push((until - opened, opened - t0));
        b.handle_timeout(until);
        assert_eq!(admit(&mut b, until, 2), 2);
        probe(&mut b, until, ms(10), Outcome::Overload);
        probe(&mut b, until, ms(10), Outcome::Overload);
        assert_eq!(b.state(), BreakerState::Open);
        opened = until + ms(10);
    }
    for (period, outage) in &periods {
        let expected = outage.mul_f64(0.1).clamp(secs(5), secs(60));
        assert!(
            period.abs_diff(expected) < Duration::from_micros(1),
            "{period:?} after {outage:?}"
        );
    }
    assert_eq!(periods[8].0, secs(5));
    assert!(periods[12].0 > secs(5));
    assert_eq!(periods[39].0, secs(60));

    // A cycle in which a probe succeeded starts the outage over.
    let until = b.publish().gate.until.expect("open");
    b.handle_timeout(until);
    assert_eq!(admit(&mut b, until, 5), 5);
    for outcome in [Outcome::Success, Outcome::Success, Outcome::Overload] {
        probe(&mut b, until, ms(10), outcome);
    }
    assert_eq!(b.state(), BreakerState::HalfOpen);
    probe(&mut b, until, ms(20), Outcome::Overload);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.publish().gate.until, Some(until + ms(20) + secs(5)));
}

#[test]
fn a_zero_ramp_jumps_straight_to_full_traffic() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    admit(&mut b, t1, 4);
    for _ in 0..4 {
        probe(&mut b, t1, ms(5), Outcome::Success);
    }
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert_eq!(b.publish().wake_at, None);
}

#[test]
fn the_cooldown_doubles_per_failed_cycle_up_to_the_cap_and_resets_on_close() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    trip(&mut b, t0);
    let mut opened = t0;
    let mut periods = Vec::new();
    for _ in 0..5 {
        let until = b.publish().gate.until.expect("open");
        periods.push((until - opened).as_secs());
        b.handle_timeout(until);
        assert_eq!(admit(&mut b, until, 2), 2);
        probe(&mut b, until, ms(10), Outcome::Overload);
        probe(&mut b, until, ms(10), Outcome::Overload);
        assert_eq!(b.state(), BreakerState::Open);
        opened = until + ms(10);
    }
    periods.push((b.publish().gate.until.expect("open") - opened).as_secs());
    assert_eq!(periods, [10, 20, 40, 60, 60, 60]);

    // Closing resets it: the next trip is back to 10 s.
    let until = b.publish().gate.until.expect("open");
    b.handle_timeout(until);
    admit(&mut b, until, 4);
    for _ in 0..4 {
        probe(&mut b, until, ms(10), Outcome::Success);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    let t2 = until + secs(1);
    trip(&mut b, t2);
    assert_eq!(b.publish().gate.until, Some(t2 + secs(10)));
}

#[test]
fn a_fixed_cooldown_never_grows() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        cooldown: Cooldown::Fixed(secs(7)),
        ..plain()
    });
    trip(&mut b, t0);
    for _ in 0..3 {
        let until = b.publish().gate.until.expect("open");
        b.handle_timeout(until);
        admit(&mut b, until, 2);
        probe(&mut b, until, Duration::ZERO, Outcome::Overload);
        probe(&mut b, until, Duration::ZERO, Outcome::Overload);
        assert_eq!(b.publish().gate.until, Some(until + secs(7)));
    }
}

#[test]
fn jitter_only_shortens_the_cooldown_and_is_reproducible_from_the_seed() {
    let t0 = Instant::now();
    let config = BreakerConfig {
        cooldown_jitter: 0.2,
        cooldown: Cooldown::Fixed(secs(10)),
        ..plain()
    };
    let run = |seed: u64| {
        let mut b = breaker(BreakerConfig {
            seed,
            ..config.clone()
        });
        let mut waits = Vec::new();
        let mut now = t0;
        for _ in 0..50 {
            trip(&mut b, now);
            let until = b.publish().gate.until.expect("open");
            waits.push(until - now);
            b.reset(until);
            // Calls that started before the reset would not count.
            now = until + secs(1);
        }
        waits
    };
    let a = run(1);
    assert!(a.iter().all(|w| *w >= secs(8) && *w <= secs(10)), "{a:?}");
    assert!(a.iter().any(|w| *w < ms(9500)), "jitter is used: {a:?}");
    assert_eq!(a, run(1));
    assert_ne!(a, run(2));
}

#[test]
fn a_fleet_of_forty_scales_five_probes_down_to_one() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        fleet_size: 40,
        ..plain()
    });
    assert_eq!(b.probe_allowance(), Some(1));
    assert_eq!(b.probes_to_close(), Some(1));
    let t1 = half_open(&mut b, t0);
    assert_eq!(b.publish().gate.limit, 1);
    assert_eq!(admit(&mut b, t1, 5), 1);
    probe(&mut b, t1, ms(10), Outcome::Success);
    assert_eq!(b.state(), BreakerState::Closed);
    // Forty instances stake 40 probes in all, not 200.
    let fleet: u32 = (0..40)
        .map(|_| {
            breaker(BreakerConfig {
                fleet_size: 40,
                ..plain()
            })
            .probe_allowance()
            .unwrap_or(0)
        })
        .sum();
    assert_eq!(fleet, 40);
}

#[test]
fn fleet_scaling_keeps_the_k_of_n_proportion() {
    let scaled = |fleet_size, probes, close_after| {
        let b = breaker(BreakerConfig {
            fleet_size,
            half_open: HalfOpen::Probes {
                probes,
                close_after,
            },
            ..plain()
        });
        (b.probe_allowance(), b.probes_to_close())
    };
    assert_eq!(scaled(1, 5, 4), (Some(5), Some(4)));
    assert_eq!(scaled(2, 5, 4), (Some(3), Some(3)));
    assert_eq!(scaled(4, 20, 15), (Some(5), Some(4)));
    assert_eq!(scaled(1000, 5, 4), (Some(1), Some(1)));
    assert_eq!(scaled(2, 10, 1), (Some(5), Some(1)));
}

#[test]
fn a_fraction_half_open_admits_a_share_of_arrivals_then_judges_the_success_rate() {
    let t0 = Instant::now();
    let config = BreakerConfig {
        half_open: HalfOpen::Fraction {
            fraction: 0.05,
            period: secs(30),
            success_rate: 0.8,
            min_probes: 5,
        },
        probe_concurrency: 100,
        fleet_size: 2,
        ..plain()
    };
    let mut b = breaker(config.clone());
    assert_eq!(b.probe_allowance(), None);
    assert_eq!(b.probe_fraction(), Some(0.025));
    let t1 = half_open(&mut b, t0);
    let g = b.publish().gate;
    assert!(g.probe);
    assert_eq!(g.admit_probability, 0.025);
    assert_eq!(g.limit, 100);
    assert_eq!(g.until, Some(t1 + secs(30)));
    // Ten probes over the period, eight succeed: 80%, closed at its end.
    for i in 0..10 {
        let at = t1 + secs(i);
        assert!(b.on_admit(at));
        let outcome = if i < 2 {
            Outcome::Overload
        } else {
            Outcome::Success
        };
        probe(&mut b, at, ms(100), outcome);
    }
    assert_eq!(
        b.state(),
        BreakerState::HalfOpen,
        "not before the period ends"
    );
    b.handle_timeout(t1 + secs(30));
    assert_eq!(b.state(), BreakerState::Closed);

    // Three of ten failing (70%) opens it again.
    let mut b = breaker(config);
    let t1 = half_open(&mut b, t0);
    for i in 0..10 {
        let at = t1 + secs(i);
        assert!(b.on_admit(at));
        let outcome = if i < 3 {
            Outcome::Overload
        } else {
            Outcome::Success
        };
        probe(&mut b, at, ms(100), outcome);
    }
    b.handle_timeout(t1 + secs(30));
    assert_eq!(b.state(), BreakerState::Open);
    let t = drain(&mut b);
    assert_eq!(t.last().map(|t| t.calls), Some(10));
}

#[test]
fn a_fraction_half_open_with_too_few_probes_keeps_waiting_for_traffic() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        half_open: HalfOpen::Fraction {
            fraction: 0.05,
            period: secs(30),
            success_rate: 0.8,
            min_probes: 3,
        },
        ..plain()
    });
    let t1 = half_open(&mut b, t0);
    assert!(b.on_admit(t1));
    probe(&mut b, t1, ms(10), Outcome::Success);
    b.handle_timeout(t1 + secs(30));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert!(b.publish().gate.probe, "still admitting probes");
    assert_eq!(b.publish().wake_at, None, "nothing to time out");
    for i in 0..2 {
        let at = t1 + secs(100 + i);
        assert!(b.on_admit(at));
        probe(&mut b, at, ms(10), Outcome::Success);
    }
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn force_open_refuses_everything_and_records_nothing() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    b.on_sample(t0, &call(Outcome::Success, ms(5)));
    b.force_open(t0 + secs(1));
    assert_eq!(b.state(), BreakerState::ForcedOpen);
    assert_eq!(b.publish().gate, Gate::shut(None));
    assert_eq!(b.publish().wake_at, None);
    let t = drain(&mut b);
    assert_eq!(t.len(), 1);
    assert_eq!(
        (t[0].from, t[0].to),
        (BreakerState::Closed, BreakerState::ForcedOpen)
    );
    assert_eq!(t[0].calls, 1);
    assert!(!b.on_admit(t0 + secs(2)));
    b.on_sample(t0 + secs(2), &call(Outcome::Overload, ms(5)));
    assert_eq!(b.window_stats(t0 + secs(2)).calls, 0);
    // It stays forced open however long it waits.
    b.handle_timeout(t0 + secs(86_400));
    assert_eq!(b.state(), BreakerState::ForcedOpen);
}

#[test]
fn force_closed_counts_calls_but_never_opens() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    trip(&mut b, t0);
    b.force_closed(t0 + secs(1));
    assert_eq!(b.state(), BreakerState::ForcedClosed);
    assert_eq!(b.publish().gate, Gate::unlimited());
    for _ in 0..100 {
        b.on_sample(t0 + secs(2), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.state(), BreakerState::ForcedClosed);
    assert_eq!(b.window_stats(t0 + secs(2)).failures, 100);
    assert_eq!(
        moves(&mut b),
        [
            (BreakerState::Closed, BreakerState::Open),
            (BreakerState::Open, BreakerState::ForcedClosed),
        ]
    );
}

#[test]
fn disabled_admits_everything_and_records_nothing() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    trip(&mut b, t0);
    b.disable(t0 + secs(1));
    assert_eq!(b.state(), BreakerState::Disabled);
    assert_eq!(b.publish().gate, Gate::unlimited());
    for _ in 0..100 {
        b.on_sample(t0 + secs(2), &call(Outcome::Overload, ms(5)));
    }
    assert_eq!(b.window_stats(t0 + secs(2)).calls, 0);
    assert_eq!(b.snapshot().state, Some(BreakerState::Disabled));
    assert_eq!(
        moves(&mut b),
        [
            (BreakerState::Closed, BreakerState::Open),
            (BreakerState::Open, BreakerState::Disabled),
        ]
    );
}

#[test]
fn metrics_only_reports_what_it_would_do_and_never_refuses() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    b.metrics_only(t0);
    trip_shadow(&mut b, t0 + secs(1));
    assert_eq!(b.state(), BreakerState::MetricsOnly);
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert!(b.on_admit(t0 + secs(2)));
    // The shadow cooldown still ends, and the calls after it judge recovery.
    assert_eq!(b.publish().wake_at, Some(t0 + secs(11)));
    b.handle_timeout(t0 + secs(11));
    // A call that started before the shadow half-open does not judge it.
    b.on_sample(t0 + secs(12), &call(Outcome::Overload, secs(5)));
    for _ in 0..4 {
        b.on_sample(t0 + secs(12), &call(Outcome::Success, ms(100)));
    }
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert_eq!(
        moves(&mut b),
        [
            (BreakerState::Closed, BreakerState::MetricsOnly),
            (BreakerState::Closed, BreakerState::Open),
            (BreakerState::Open, BreakerState::HalfOpen),
            (BreakerState::HalfOpen, BreakerState::Closed),
        ]
    );
}

fn trip_shadow(b: &mut Breaker, now: Instant) {
    for _ in 0..20 {
        b.on_sample(now, &call(Outcome::Overload, ms(5)));
    }
}

#[test]
fn reset_closes_it_with_an_empty_window_and_the_base_cooldown() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    let t1 = half_open(&mut b, t0);
    admit(&mut b, t1, 2);
    probe(&mut b, t1, ms(1), Outcome::Overload);
    probe(&mut b, t1, ms(1), Outcome::Overload);
    assert_eq!(b.publish().gate.until, Some(t1 + ms(1) + secs(20)));
    drain(&mut b);
    let t2 = t1 + secs(5);
    b.reset(t2);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.publish().gate, Gate::unlimited());
    assert_eq!(moves(&mut b), [(BreakerState::Open, BreakerState::Closed)]);
    trip(&mut b, t2 + secs(1));
    assert_eq!(b.publish().gate.until, Some(t2 + secs(11)));
    // Reset from a manual state returns to automatic operation.
    b.force_open(t2 + secs(2));
    b.reset(t2 + secs(3));
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats(t2 + secs(3)).calls, 0);
}

#[test]
fn undrained_transitions_are_bounded() {
    let t0 = Instant::now();
    let mut b = breaker(plain());
    for i in 0..1000 {
        b.force_open(t0 + ms(i));
    }
    let t = drain(&mut b);
    assert_eq!(t.len(), 256);
    assert_eq!(t.last().map(|t| t.at), Some(t0 + ms(999)));
}

#[test]
fn huge_latencies_and_instants_do_not_panic() {
    let t0 = Instant::now();
    let mut b = breaker(BreakerConfig {
        slow_call_rate: Some(0.5),
        ..plain()
    });
    for _ in 0..20 {
        b.on_sample(t0, &call(Outcome::Success, Duration::MAX));
    }
    assert_eq!(b.state(), BreakerState::Open);
    let far = t0 + secs(100 * 365 * 24 * 3600);
    b.handle_timeout(far);
    assert!(b.on_admit(far));
    b.on_sample(far, &call(Outcome::Success, Duration::MAX).with_probe(true));
    b.handle_timeout(far + secs(31));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert_eq!(b.publish().gate.limit, 5);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Copy, Debug)]
    enum Latency {
        /// The true time since admission (probe results match).
        Real,
        /// Zero, reported as a non-probe.
        Zero,
        /// `Duration::MAX`, reported as a non-probe.
        Max,
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Wait(Duration),
        Admit(u8),
        Finish {
            pick: usize,
            outcome: Outcome,
            latency: Latency,
        },
        Lost(usize),
    }

    fn outcome() -> impl Strategy<Value = Outcome> {
        prop_oneof![
            3 => Just(Outcome::Success),
            3 => Just(Outcome::Overload),
            1 => Just(Outcome::Ignore),
        ]
    }

    fn wait() -> impl Strategy<Value = Duration> {
        prop_oneof![
            2 => Just(Duration::ZERO),
            4 => (0u64..2_000).prop_map(Duration::from_millis),
            2 => (1u64..120).prop_map(Duration::from_secs),
            1 => Just(Duration::from_secs(10 * 365 * 24 * 3600)),
        ]
    }

    fn op(outcomes: BoxedStrategy<Outcome>) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => wait().prop_map(Op::Wait),
            3 => (0u8..8).prop_map(Op::Admit),
            4 => (
                any::<usize>(),
                outcomes,
                prop_oneof![8 => Just(Latency::Real), 1 => Just(Latency::Zero), 1 => Just(Latency::Max)],
            )
                .prop_map(|(pick, outcome, latency)| Op::Finish { pick, outcome, latency }),
            1 => any::<usize>().prop_map(Op::Lost),
        ]
    }

    fn config() -> impl Strategy<Value = BreakerConfig> {
        let half_open = prop_oneof![
            4 => (1u32..8).prop_flat_map(|n| (Just(n), 1..=n))
                .prop_map(|(probes, close_after)| HalfOpen::Probes { probes, close_after }),
            1 => (0.01f64..1.0, 1u64..60, 0.1f64..1.0, 1u32..6).prop_map(|(f, p, s, m)| HalfOpen::Fraction {
                fraction: f,
                period: Duration::from_secs(p),
                success_rate: s,
                min_probes: m,
            }),
        ];
        let window = prop_oneof![
            (1u32..40).prop_map(|calls| BreakerWindow::Count { calls }),
            (1u64..60, 1u32..20).prop_map(|(s, buckets)| BreakerWindow::Time {
                length: Duration::from_secs(s),
                buckets,
            }),
        ];
        let cooldown = prop_oneof![
            (1u64..30_000).prop_map(|m| Cooldown::Fixed(Duration::from_millis(m))),
            (1u64..20, 1.0f64..4.0, 20u64..200).prop_map(|(b, factor, c)| Cooldown::Exponential {
                base: Duration::from_secs(b),
                factor,
                cap: Duration::from_secs(c),
            }),
            (1u64..20, 0.01f64..=1.0, 20u64..200).prop_map(|(b, share, c)| {
                Cooldown::Proportional {
                    base: Duration::from_secs(b),
                    share,
                    cap: Duration::from_secs(c),
                }
            }),
        ];
        (
            (
                half_open,
                window,
                1u32..30,
                cooldown,
                0.0f64..0.9,
                any::<u64>(),
            ),
            (
                prop::option::of(0.05f64..=1.0),
                prop::option::of(0.05f64..=1.0),
                1u64..20,
                1u32..5,
                1u64..60,
                prop_oneof![Just(0u64), 1u64..60],
                1u32..50,
                (prop_oneof![Just(0u32), 1u32..12], 1u32..6, 0.01f64..=1.0),
            ),
        )
            .prop_map(
                |(
                    (half_open, window, min_calls, cooldown, cooldown_jitter, seed),
                    (
                        failure_rate,
                        slow_call_rate,
                        slow,
                        probe_concurrency,
                        probe_timeout,
                        ramp,
                        fleet_size,
                        (consecutive_failures, ramp_successes, ramp_start),
                    ),
                )| {
                    let min_calls = match window {
                        BreakerWindow::Count { calls } => min_calls.min(calls),
                        BreakerWindow::Time { .. } => min_calls,
                    };
                    BreakerConfig {
                        failure_rate: failure_rate.or(if slow_call_rate.is_none() {
                            Some(0.5)
                        } else {
                            None
                        }),
                        slow_call_rate,
                        slow_call_duration: Duration::from_secs(slow),
                        window,
                        min_calls,
                        consecutive_failures,
                        cooldown,
                        cooldown_jitter,
                        seed,
                        half_open,
                        probe_concurrency,
                        probe_timeout: Duration::from_secs(probe_timeout),
                        ramp: Duration::from_secs(ramp),
                        ramp_start,
                        ramp_successes,
                        fleet_size,
                    }
                },
            )
    }

    #[derive(Debug)]
    struct Call {
        start: Instant,
        probe: bool,
        cycle: u64,
    }

    /// The runtime's side, as the contract describes it, with the
    /// invariants checked after every step.
    struct Runtime {
        b: Breaker,
        now: Instant,
        in_flight: Vec<Call>,
        rng: u64,
        cycle: u64,
        admitted: u32,
        refunded: u32,
        spent_at: Option<Instant>,
        opened: u32,
    }

    impl Runtime {
        fn new(config: BreakerConfig, seed: u64) -> Self {
            Runtime {
                b: Breaker::new(config).expect("the strategy builds valid configs"),
                now: Instant::now(),
                in_flight: Vec::new(),
                rng: seed,
                cycle: 0,
                admitted: 0,
                refunded: 0,
                spent_at: None,
                opened: 0,
            }
        }

        fn uniform(&mut self) -> f64 {
            self.rng = self
                .rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (self.rng >> 11) as f64 / (1u64 << 53) as f64
        }

        fn timers(&mut self) {
            if self.b.publish().wake_at.is_some_and(|t| self.now >= t) {
                self.b.handle_timeout(self.now);
            }
            assert!(
                self.b.publish().wake_at.is_none_or(|t| self.now < t),
                "handle_timeout leaves nothing due"
            );
        }

        fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
            match op {
                Op::Wait(d) => {
                    if let Some(t) = self.now.checked_add(d) {
                        self.now = t;
                    }
                    self.timers();
                }
                Op::Admit(n) => {
                    for _ in 0..n {
                        self.admit()?;
                    }
                }
                Op::Finish {
                    pick,
                    outcome,
                    latency,
                } => {
                    if !self.in_flight.is_empty() {
                        let call = self.in_flight.swap_remove(pick % self.in_flight.len());
                        let (latency, probe) = match latency {
                            Latency::Real => (self.now - call.start, call.probe),
                            Latency::Zero => (Duration::ZERO, false),
                            Latency::Max => (Duration::MAX, false),
                        };
                        if probe
                            && outcome == Outcome::Ignore
                            && call.cycle == self.cycle
                            && call
                                .start
                                .checked_add(self.b.config().probe_timeout)
                                .is_none_or(|d| self.now < d)
                        {
                            self.refunded += 1;
                            self.spent_at = None;
                        }
                        self.timers();
                        self.b.on_sample(
                            self.now,
                            &Sample::new(outcome, latency, 1).with_probe(probe),
                        );
                    }
                }
                Op::Lost(pick) => {
                    // The runtime forgets a call (a cancelled future that
                    // reported nothing): the breaker must cope.
                    if !self.in_flight.is_empty() {
                        self.in_flight.swap_remove(pick % self.in_flight.len());
                    }
                }
            }
            self.observe()
        }

        fn admit(&mut self) -> Result<(), TestCaseError> {
            self.timers();
            self.observe()?;
            let gate = self.b.publish().gate;
            let state = self.b.state();
            if gate.limit == 0 {
                return Ok(());
            }
            prop_assert!(
                state != BreakerState::Open,
                "an open breaker admits nothing"
            );
            prop_assert!(state != BreakerState::ForcedOpen);
            if self.in_flight.len() >= gate.limit as usize {
                return Ok(());
            }
            if gate.admit_probability < 1.0 && self.uniform() >= gate.admit_probability {
                return Ok(());
            }
            if gate.probe {
                if !self.b.on_admit(self.now) {
                    return Ok(());
                }
                self.admitted += 1;
                if let Some(allowance) = self.b.probe_allowance() {
                    let cap = allowance.min(self.b.config().probe_concurrency);
                    prop_assert!(gate.limit <= cap, "the probe limit is the cap");
                    prop_assert!(
                        self.admitted - self.refunded <= allowance,
                        "admitted {} (less {} refunds) > allowance {allowance}",
                        self.admitted,
                        self.refunded
                    );
                    if self.admitted - self.refunded == allowance {
                        self.spent_at = Some(self.now);
                    }
                }
            } else {
                prop_assert!(
                    state != BreakerState::HalfOpen,
                    "half-open admits probes only"
                );
            }
            self.in_flight.push(Call {
                start: self.now,
                probe: gate.probe,
                cycle: self.cycle,
            });
            let probes = self
                .in_flight
                .iter()
                .filter(|c| c.probe && c.cycle == self.cycle)
                .count();
            prop_assert!(probes <= self.b.config().probe_concurrency as usize);
            self.observe()
        }

        fn observe(&mut self) -> Result<(), TestCaseError> {
            let min_calls = u64::from(self.b.config().min_calls);
            while let Some(t) = self.b.poll_transition() {
                if t.to == BreakerState::HalfOpen {
                    self.cycle += 1;
                    self.admitted = 0;
                    self.refunded = 0;
                    self.spent_at = None;
                }
                if t.to == BreakerState::Open {
                    self.opened += 1;
                }
                if t.from == BreakerState::Closed && t.to == BreakerState::Open {
                    let c = self.b.config();
                    // A run of failures trips only a window too sparse to
                    // judge a rate, and reports the run: all of it failed.
                    let run = u64::from(c.consecutive_failures);
                    let by_run = run > 0 && t.calls >= run && t.failure_rate == 1.0;
                    prop_assert!(
                        t.calls >= min_calls || by_run,
                        "tripped on {} < {min_calls} calls",
                        t.calls
                    );
                    let by_failures = c.failure_rate.is_some_and(|r| t.failure_rate >= r);
                    let by_slowness = c.slow_call_rate.is_some_and(|r| t.slow_call_rate >= r);
                    prop_assert!(
                        by_failures || by_slowness || by_run,
                        "tripped without cause: {t:?}"
                    );
                }
            }
            let gate = self.b.publish().gate;
            match self.b.state() {
                BreakerState::Open => prop_assert_eq!(gate.limit, 0),
                BreakerState::HalfOpen => {
                    prop_assert!(gate.probe || gate.limit == 0);
                    if let Some(spent) = self.spent_at {
                        let deadline = spent.checked_add(self.b.config().probe_timeout);
                        prop_assert!(
                            deadline.is_some_and(|d| self.now < d),
                            "still half-open {:?} after the allowance was spent",
                            self.now - spent
                        );
                    }
                }
                _ => {}
            }
            Ok(())
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn the_breaker_keeps_its_invariants_under_any_traffic(
            config in config(),
            seed in any::<u64>(),
            ops in prop::collection::vec(op(outcome().boxed()), 1..200),
        ) {
            let mut rt = Runtime::new(config, seed);
            for op in ops {
                rt.step(op)?;
            }
        }

        #[test]
        fn any_storm_of_ignored_outcomes_never_opens_it(
            config in config(),
            seed in any::<u64>(),
            ops in prop::collection::vec(op(Just(Outcome::Ignore).boxed()), 1..200),
        ) {
            let mut rt = Runtime::new(config, seed);
            for op in ops {
                rt.step(op)?;
            }
            prop_assert_eq!(rt.opened, 0);
            prop_assert_eq!(rt.b.state(), BreakerState::Closed);
        }
    }
}
