//! The latency mode's rules, one at a time, driven by hand.

use std::time::{Duration, Instant};

use crate::aimd::{Aimd, AimdConfig};
use crate::window::WindowConfig;
use crate::{Algorithm, Outcome, Sample};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

/// Windows that close `length` after their first call, however few calls
/// they hold.
fn windows_of(length: Duration) -> WindowConfig {
    WindowConfig {
        min_duration: length,
        max_duration: length,
        min_samples: 1,
        ..WindowConfig::default()
    }
}

// -----------------------------------------------------------------
// The latency mode: one decision per round trip.

/// The latency mode with windows of 10 ms and at least one call, and
/// min 1, max 1000, its flow of calls opened a second before `*t`.
pub(in crate::aimd) fn latency(initial: u32, noise: f64, t: &mut Instant) -> Aimd {
    let mut a = Aimd::new(AimdConfig {
        initial,
        min: 1,
        max: 1000,
        noise,
        window: windows_of(ms(10)),
        // Each rule on its own; the slow start has its own test.
        slow_start: false,
        ..AimdConfig::default()
    })
    .expect("valid config");
    // A flow's first window reads its fastest calls: it decides nothing.
    round_trip(&mut a, t, &successes(ms(20), 1), 1);
    assert_eq!(a.raw_limit(), f64::from(initial));
    *t += Duration::from_secs(1);
    a
}

/// One round trip: calls admitted when the previous one closed, all
/// finishing at once; the window closes 10 ms later.
fn round_trip(a: &mut Aimd, t: &mut Instant, calls: &[(Outcome, Duration)], in_flight: u32) {
    let calls: Vec<_> = calls.iter().map(|&(o, l)| (o, l, in_flight)).collect();
    round_trip_each(a, t, &calls);
}

/// [`round_trip`], each call admitted with its own calls in flight.
fn round_trip_each(a: &mut Aimd, t: &mut Instant, calls: &[(Outcome, Duration, u32)]) {
    *t += calls.iter().map(|c| c.1).max().unwrap_or_default();
    for &(outcome, latency, in_flight) in calls {
        a.on_sample(*t, &Sample::new(outcome, latency, in_flight));
    }
    *t += ms(10);
    assert_eq!(a.publish().wake_at, Some(*t));
    a.handle_timeout(*t);
}

fn successes(latency: Duration, n: usize) -> Vec<(Outcome, Duration)> {
    vec![(Outcome::Success, latency); n]
}

#[test]
fn growth_starts_at_one_per_round_trip_and_doubles_its_step_while_unchallenged() {
    let mut t = Instant::now();
    let mut a = latency(10, 0.0, &mut t);
    // Ten successes with the limit reached: one more, not ten.
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 10);
    assert_eq!(a.raw_limit(), 11.0);
    assert_eq!(a.baseline(), Some(ms(20)));
    // Unchallenged, the step doubles: 2, then 4.
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 11);
    assert_eq!(a.raw_limit(), 13.0);
    // In use means at least half the limit: 7 of 13 is.
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 7);
    assert_eq!(a.raw_limit(), 17.0);
    // Under half: nothing learnt about more.
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 8);
    assert_eq!(a.raw_limit(), 17.0);
    assert_eq!(a.quiet(), None);
    // A cut (a rise just past the band: the backoff's ×0.9) puts the step
    // back at one.
    round_trip(&mut a, &mut t, &successes(ms(21), 10), 17);
    assert!((a.raw_limit() - 15.3).abs() < 1e-9);
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 15);
    assert!((a.raw_limit() - 16.3).abs() < 1e-9);
}

/// The latency mode at its defaults (a slow start from 10), with windows
/// of 10 ms, no noise band and max 1000, its flow of calls opened a second
/// before `*t`.
fn slow_start(t: &mut Instant) -> Aimd {
    let mut a = Aimd::new(AimdConfig {
        initial: 10,
        max: 1000,
        noise: 0.0,
        window: windows_of(ms(10)),
        ..AimdConfig::default()
    })
    .expect("valid config");
    assert!(a.is_regrowing());
    // The flow's first window decides nothing.
    round_trip(&mut a, t, &successes(ms(20), 1), 1);
    assert_eq!(a.raw_limit(), 10.0);
    *t += Duration::from_secs(1);
    a
}

#[test]
fn after_a_cut_on_latency_the_limit_goes_half_the_way_back_per_round_trip_at_any_size() {
    let mut t = Instant::now();
    let mut a = latency(900, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 900);
    assert_eq!(a.raw_limit(), 901.0);
    // One window reads queueing just past the band (noise, say): ×0.9.
    round_trip(&mut a, &mut t, &successes(ms(21), 5), 901);
    assert!((a.raw_limit() - 810.9).abs() < 1e-9);
    // Half the way back to 901 per round trip in use: within 1% of it in
    // seven round trips, where one per round trip would take ninety, and
    // no further while below it.
    let mut seen = Vec::new();
    for _ in 0..7 {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(20), 5), limit);
        seen.push(a.raw_limit().round());
    }
    assert_eq!(seen, [856.0, 878.0, 890.0, 895.0, 898.0, 900.0, 901.0]);
    // A cut on drops is no noise: the knee it marks is probed one per
    // round trip.
    let limit = a.publish().gate.limit;
    let mut calls = successes(ms(20), 5);
    calls.extend([(Outcome::Overload, ms(20)); 20]);
    round_trip(&mut a, &mut t, &calls, limit);
    let cut = a.raw_limit();
    assert!(cut < 820.0, "{cut}");
    for n in 1..=3 {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(20), 5), limit);
        assert!(
            (a.raw_limit() - (cut + f64::from(n))).abs() < 1e-9,
            "{}",
            a.raw_limit()
        );
    }
    // Small limits still go up by at least one.
    let mut a = latency(10, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    round_trip(&mut a, &mut t, &successes(ms(21), 5), 11);
    assert!((a.raw_limit() - 9.9).abs() < 1e-9);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 9);
    assert!((a.raw_limit() - 10.9).abs() < 1e-9);
}

#[test]
fn the_slow_start_doubles_per_round_trip_in_use_until_the_first_queueing() {
    let mut t = Instant::now();
    let mut a = slow_start(&mut t);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(20), 5), limit);
        seen.push(a.raw_limit());
    }
    assert_eq!(seen, [20.0, 40.0, 80.0]);
    // The first sign of queueing: back to the limit before the last
    // doubling; the knee lies between it and 80, and each round trip
    // goes half the way back to 80.
    round_trip(&mut a, &mut t, &successes(ms(30), 5), 80);
    assert_eq!(a.raw_limit(), 40.0);
    assert!(!a.is_regrowing());
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 40);
    assert_eq!(a.raw_limit(), 60.0);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 60);
    assert_eq!(a.raw_limit(), 70.0);
    // Not in use: nothing learnt about more.
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    assert_eq!(a.raw_limit(), 70.0);
}

#[test]
fn while_calls_go_missing_the_limit_falls_to_twice_what_is_served() {
    // Windows of 250 ms; calls of 50 ms admitted with 20 in flight.
    let window = |successes: u32| {
        let mut a = Aimd::new(AimdConfig {
            initial: 20,
            noise: 0.0,
            window: windows_of(ms(250)),
            ..AimdConfig::default()
        })
        .expect("valid config");
        let t0 = Instant::now();
        let gap = ms(250) / successes;
        for i in 0..successes {
            a.on_sample(t0 + gap * i, &Sample::new(Outcome::Success, ms(50), 20));
        }
        a.handle_timeout(t0 + ms(250));
        a
    };
    // 100 served in 250 ms at 50 ms each: 20 at a time, as many as were
    // in flight. The slow start doubles.
    let healthy = window(100);
    assert_eq!(healthy.raw_limit(), 40.0);
    assert!(healthy.is_regrowing());
    // 20 served: 4 at a time of the 20 in flight. The rest are stuck
    // (dropped, to time out later): no more slow start, and back to
    // twice what was served.
    let missing = window(20);
    assert_eq!(missing.raw_limit(), 8.0);
    assert!(!missing.is_regrowing());
}

#[test]
fn a_caller_with_its_calls_one_at_a_time_is_not_taken_for_calls_going_missing() {
    // Ten calls of 10 ms in 250 ms, each alone in flight (it counts
    // itself): 0.4 of a call out on average, all of it answered. Counted
    // with itself, each would seem to have met one call in flight, and
    // answers for 0.4 of it "missing" calls.
    let mut a = Aimd::new(AimdConfig {
        initial: 2,
        noise: 0.0,
        slow_start: false,
        window: windows_of(ms(250)),
        ..AimdConfig::default()
    })
    .expect("valid config");
    let mut t0 = Instant::now();
    for _ in 0..3 {
        for i in 0..10u32 {
            a.on_sample(t0 + ms(25) * i, &Sample::new(Outcome::Success, ms(10), 1));
        }
        t0 += ms(250);
        a.handle_timeout(t0);
    }
    // Never cut; grown, the caller using half its limit.
    assert!(a.raw_limit() > 2.0, "{}", a.raw_limit());
}

#[test]
fn a_late_drop_cuts_from_the_limit_its_call_met_and_a_fast_one_not_at_all() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    let admitted = t;
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 40);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 41);
    assert_eq!(a.raw_limit(), 43.0);
    // Refused in a microsecond: the dependency is down, not queueing.
    t += ms(20);
    a.on_sample(t, &Sample::new(Outcome::Overload, us(1), 10));
    assert_eq!(a.raw_limit(), 43.0);
    // Timed out, admitted under 40 before both growths: the cut is from
    // the 40.
    t += ms(20);
    a.on_sample(t, &Sample::new(Outcome::Overload, t - admitted, 40));
    assert_eq!(a.raw_limit(), 36.0);
    // A caller using little of a limit that has not grown since: from
    // the limit, not from what was in flight.
    let mut b = latency(40, 0.0, &mut t);
    t += ms(20);
    b.on_sample(t, &Sample::new(Outcome::Overload, ms(20), 1));
    assert_eq!(b.raw_limit(), 36.0);
}

#[test]
fn a_hang_while_successes_are_fast_cuts_from_the_limit_not_from_what_it_met() {
    // A drop answered at about the round trip (a 5xx, a deferral) met the
    // load now: the cut is from the 25 then in flight.
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 15);
    assert_eq!(a.raw_limit(), 40.0, "not in use");
    t += ms(20);
    a.on_sample(t, &Sample::new(Outcome::Overload, ms(25), 25));
    assert_eq!(a.raw_limit(), 22.5);
    // A call that hung for a second, fifty round trips, while the calls
    // that succeed answer as fast as ever: no queue, and the 25 it met in
    // flight are long gone. The cut is from the limit.
    let mut b = latency(40, 0.0, &mut t);
    round_trip(&mut b, &mut t, &successes(ms(20), 5), 15);
    t += ms(20);
    b.on_sample(
        t,
        &Sample::new(Outcome::Overload, Duration::from_secs(1), 25),
    );
    assert_eq!(b.raw_limit(), 36.0);
}

#[test]
fn a_window_of_calls_admitted_before_the_last_change_does_not_decide() {
    let mut t = Instant::now();
    let mut a = latency(10, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 10), 10);
    assert_eq!(a.raw_limit(), 11.0);
    // Calls that started 500 ms ago, before the limit grew: they say
    // nothing about 11.
    t += ms(1);
    for _ in 0..10 {
        a.on_sample(t, &Sample::new(Outcome::Success, ms(500), 11));
    }
    t += ms(10);
    a.handle_timeout(t);
    assert_eq!(a.raw_limit(), 11.0);
}

#[test]
fn a_rise_beyond_the_noise_backs_off_and_one_within_it_does_not() {
    let mut t = Instant::now();
    let mut a = Aimd::new(AimdConfig {
        initial: 20,
        min: 1,
        window: WindowConfig {
            min_duration: ms(10),
            max_duration: ms(10),
            min_samples: 10,
            ..WindowConfig::default()
        },
        slow_start: false,
        ..AimdConfig::default()
    })
    .expect("valid");
    let spread = |low: u64, high: u64| -> Vec<(Outcome, Duration)> {
        (0..10)
            .map(|i| (Outcome::Success, ms(if i % 2 == 0 { low } else { high })))
            .collect()
    };
    // The flow's first window decides nothing.
    round_trip(&mut a, &mut t, &successes(ms(20), 1), 15);
    t += Duration::from_secs(1);
    // 15 and 25 ms: a mean of 20 ms uncertain by 8%; 2 standard
    // errors put the baseline at 23.3 ms.
    round_trip(&mut a, &mut t, &spread(15, 25), 15);
    let baseline = a.baseline().expect("set").as_secs_f64();
    assert!((0.0232..0.0234).contains(&baseline), "{baseline}");
    // 20% slower, within the noise: no back-off (the limit, in use,
    // grows), and the baseline hardly moves.
    let before = a.raw_limit();
    round_trip(&mut a, &mut t, &spread(19, 29), 15);
    assert!(a.raw_limit() > before, "{}", a.raw_limit());
    let moved = a.baseline().expect("set").as_secs_f64() - baseline;
    assert!(moved > 0.0 && moved < 1e-5, "{moved}");
    // Twice as slow: backs off, by more than the backoff: the window
    // proves that of the calls in flight the dependency served about
    // 23.3 ms / 33.6 ms (its band's lower end) and queued the rest.
    let before = a.raw_limit();
    round_trip(&mut a, &mut t, &spread(35, 45), 15);
    let cut = a.raw_limit() / before;
    assert!((0.69..0.7).contains(&cut), "{cut}");
}

#[test]
fn a_caller_using_under_half_its_limit_backs_off_only_when_latency_doubles() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    round_trip(&mut a, &mut t, &successes(ms(30), 5), 10);
    assert_eq!(a.raw_limit(), 40.0);
    // Two and a half times: a queue, cut by half, the most one cut takes.
    round_trip(&mut a, &mut t, &successes(ms(50), 5), 10);
    assert_eq!(a.raw_limit(), 20.0);
}

#[test]
fn a_latency_that_stays_higher_while_the_limit_does_not_bind_becomes_the_baseline() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    // A baseline learned low: 20 ms, where the dependency answers in 30.
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    assert_eq!(a.baseline(), Some(ms(20)));
    // Ten in flight of 40: queueing read, nothing cut, and for two round
    // trips nothing learned either.
    for _ in 0..2 {
        round_trip(&mut a, &mut t, &successes(ms(30), 5), 10);
    }
    assert_eq!(a.baseline(), Some(ms(20)));
    // Three of its latencies later, it is the dependency's.
    for _ in 0..3 {
        round_trip(&mut a, &mut t, &successes(ms(30), 5), 10);
    }
    let learned = a.baseline().expect("set");
    assert!(learned > ms(25), "{learned:?}");
    // So the limit in use at 30 ms is not queueing: it grows, not cut.
    round_trip(&mut a, &mut t, &successes(ms(30), 40), 40);
    assert!(a.raw_limit() > 40.0, "{}", a.raw_limit());
}

#[test]
fn a_latency_still_rising_while_the_limit_does_not_bind_is_a_queue_and_not_learned() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    for step in 1..=8 {
        round_trip(&mut a, &mut t, &successes(ms(20 + 2 * step), 5), 10);
    }
    assert_eq!(a.baseline(), Some(ms(20)));
    assert_eq!(a.raw_limit(), 40.0);
    // When the calls come to use the limit, the queue is cut, to the 20 of
    // every 38 ms of calls in flight the dependency serves without it.
    round_trip(&mut a, &mut t, &successes(ms(38), 40), 40);
    assert!(
        (a.raw_limit() - 40.0 * 20.0 / 38.0).abs() < 1e-9,
        "{}",
        a.raw_limit()
    );
}

#[test]
fn a_queue_the_caller_reaches_only_in_a_burst_is_not_one_it_keeps_standing() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 30);
    assert_eq!(a.baseline(), Some(ms(20)));
    let limit = a.raw_limit();
    // Half again as slow, under twice the baseline: one call admitted at
    // the limit (a burst), nine with four in flight. On average the caller
    // used a fifth of its limit: the queue is the dependency's, by chance.
    let mut burst = vec![(Outcome::Success, ms(30), 40)];
    burst.extend([(Outcome::Success, ms(30), 4); 9]);
    round_trip_each(&mut a, &mut t, &burst);
    assert_eq!(a.raw_limit(), limit);
    // The same latency with the caller at its limit throughout: cut.
    round_trip(&mut a, &mut t, &successes(ms(30), 10), 40);
    assert!(a.raw_limit() < limit, "{}", a.raw_limit());
}

#[test]
fn drops_cut_once_per_round_trip_however_fast_they_come() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 15);
    assert_eq!(a.baseline(), Some(ms(20)));
    // A thousand calls refused in a microsecond, a microsecond apart:
    // fast failures, not queueing. The limit holds.
    for _ in 0..1000 {
        t += us(1);
        a.on_sample(t, &Sample::new(Outcome::Overload, us(1), 30));
    }
    assert_eq!(a.raw_limit(), 40.0);
    // A thousand failing after a round trip, a microsecond apart: one
    // congestion event.
    for _ in 0..1000 {
        t += us(1);
        a.on_sample(t, &Sample::new(Outcome::Overload, ms(20), 40));
    }
    assert_eq!(a.raw_limit(), 36.0);
    // One round trip on, the next cut.
    t += ms(20);
    a.on_sample(t, &Sample::new(Outcome::Overload, ms(20), 40));
    assert!((a.raw_limit() - 32.4).abs() < 1e-9);
    // Without `one_backoff_per_flight`, every drop cuts.
    let mut a = Aimd::new(AimdConfig {
        initial: 20,
        one_backoff_per_flight: false,
        ..AimdConfig::default()
    })
    .expect("valid");
    for _ in 0..3 {
        a.on_sample(t, &Sample::new(Outcome::Overload, us(1), 20));
    }
    assert!((a.raw_limit() - 14.58).abs() < 1e-9);
}

#[test]
fn a_trickle_of_drops_is_not_congestion_a_stream_is() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    // One drop in fifty calls, for a while: never cut, and the limit
    // still grows.
    let mut seen = vec![a.raw_limit()];
    for _ in 0..10 {
        let mut calls = successes(ms(20), 49);
        calls.push((Outcome::Overload, ms(20)));
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &calls, limit);
        seen.push(a.raw_limit());
    }
    assert!(
        seen.windows(2).all(|w| w[1] > w[0] || w[1] == 1000.0),
        "{seen:?}"
    );
    // One in five: once the drops are over a tenth of the last fifty or
    // so calls (in the fifth round trip of five), a cut each round
    // trip.
    let mut calls = successes(ms(20), 4);
    calls.push((Outcome::Overload, ms(20)));
    let mut limits = vec![a.raw_limit()];
    for _ in 0..8 {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &calls, limit);
        limits.push(a.raw_limit());
    }
    assert!(limits[..5].windows(2).all(|w| w[1] >= w[0]), "{limits:?}");
    assert!(
        limits[4..]
            .windows(2)
            .all(|w| (w[1] - 0.9 * w[0]).abs() < 1e-9),
        "{limits:?}"
    );
    // A fresh limiter has seen nothing else: its first drop cuts.
    let mut a = latency(40, 0.0, &mut t);
    t += ms(20);
    a.on_sample(t, &Sample::new(Outcome::Overload, ms(20), 40));
    assert_eq!(a.raw_limit(), 36.0);
}

#[test]
fn a_slow_success_counts_as_a_drop_in_the_latency_mode_too() {
    let mut t = Instant::now();
    let mut a = latency(20, 0.0, &mut t);
    a.on_sample(
        t,
        &Sample::new(Outcome::Success, Duration::from_secs(5) + ms(1), 20),
    );
    assert_eq!(a.raw_limit(), 18.0);
}

#[test]
fn after_an_outage_of_fast_failures_the_limit_is_held_and_then_doubles_until_queueing() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 30);
    let before = a.raw_limit();
    // Down: every call refused in a microsecond. The first round trip of
    // it cuts (it could be congestion); once a window has held nothing
    // but fast failures, they hold the limit.
    for _ in 0..100 {
        round_trip(&mut a, &mut t, &[(Outcome::Overload, us(1)); 5], 1);
    }
    let held = a.raw_limit();
    assert!(held >= 0.8 * before, "{held} from {before}");
    assert!(a.is_regrowing());
    // Up again: doubling per round trip while the limit is in use, from
    // the second (the first reads the new flow's fastest calls).
    let mut seen = Vec::new();
    for _ in 0..3 {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(20), 5), limit);
        seen.push(a.raw_limit());
    }
    assert_eq!(seen, [held, held * 2.0, held * 4.0]);
    // The first sign of queueing: back to the limit before the last
    // doubling, and from there one at a time.
    let limit = a.publish().gate.limit;
    round_trip(&mut a, &mut t, &successes(ms(30), 5), limit);
    assert_eq!(a.raw_limit(), held * 2.0);
    assert!(!a.is_regrowing());
}

#[test]
fn slow_failures_are_not_an_outage() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 30);
    for _ in 0..10 {
        round_trip(&mut a, &mut t, &[(Outcome::Overload, ms(800)); 5], 30);
    }
    assert!(!a.is_regrowing());
    assert!(a.raw_limit() < 40.0 * 0.9f64.powi(9));
    // A slow failure ends a regrowth too.
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &[(Outcome::Overload, us(1)); 5], 30);
    assert!(a.is_regrowing());
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 36);
    t += ms(100);
    a.on_sample(t, &Sample::new(Outcome::Overload, ms(100), 36));
    assert!(!a.is_regrowing());
}

#[test]
fn timeouts_after_refusals_are_a_cold_start_given_traffic_for_ten_seconds_then_cut() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 40);
    assert_eq!(a.raw_limit(), 41.0);
    // A minute of refused connections: held.
    let refused = [(Outcome::Overload, us(1)); 5];
    for _ in 0..6000 {
        round_trip(&mut a, &mut t, &refused, 1);
    }
    assert_eq!(a.raw_limit(), 41.0);
    // Back, cold: every call times out. A limit not in use is cut, but
    // after refusals the floor is the whole limit (decayed for the 0.8 s
    // since the last refusal)...
    let timed_out = [(Outcome::Overload, ms(800)); 5];
    round_trip(&mut a, &mut t, &timed_out, 10);
    let held = a.raw_limit();
    assert!(held > 0.9 * 41.0 && held < 41.0, "{held}");
    // ...and one in use doubles, as if the dependency answered: it warms
    // only with the traffic it is given.
    round_trip(&mut a, &mut t, &timed_out, 41);
    // (Its drops first cut it to the floor, then the window doubles it.)
    assert!(a.raw_limit() > 1.8 * held, "{}", a.raw_limit());
    let cold = t;
    while t < cold + Duration::from_secs(8) {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &timed_out, limit);
    }
    assert_eq!(
        a.raw_limit(),
        82.0,
        "up to twice the limit the outage began with"
    );
    // Ten seconds after the last refusal it is no longer a cold start but
    // a dependency that does not answer: the doubling bought nothing, and
    // the limit is back at once at the floor, which halves every 10 s
    // from the 41 the outage began with.
    while t < cold + Duration::from_secs(10) {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &timed_out, limit);
    }
    let limit = a.raw_limit();
    assert!((15.0..=25.0).contains(&limit), "{limit}");
    while t < cold + Duration::from_secs(30) {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &timed_out, limit);
    }
    let limit = a.raw_limit();
    assert!((3.0..=7.0).contains(&limit), "{limit}");
}

#[test]
fn the_window_after_a_slower_dependency_is_told_may_raise_the_new_baseline_at_once() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 40);
    while a.baseline() == Some(ms(20)) {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(40), 5), limit);
    }
    assert_eq!(a.baseline(), Some(ms(40)));
    // The window that told was one sample of the new latency, and a fast
    // one: the next, at 44 ms, is the new latency, not a queue.
    let before = a.raw_limit();
    let limit = a.publish().gate.limit;
    round_trip(&mut a, &mut t, &successes(ms(44), 5), limit);
    assert_eq!(a.baseline(), Some(ms(44)));
    assert_eq!(a.raw_limit(), before * 2.0, "still regrowing");
    // Only that one: a rise after it is queueing again.
    let limit = a.publish().gate.limit;
    round_trip(&mut a, &mut t, &successes(ms(50), 5), limit);
    assert!(!a.is_regrowing());
    assert!(a.baseline() < Some(ms(45)));
}

#[test]
fn a_dependency_that_became_slower_is_told_from_a_queue_once_the_calls_halve() {
    let mut t = Instant::now();
    let mut a = latency(40, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 40);
    assert_eq!(a.raw_limit(), 41.0);
    // Twice as slow at any concurrency: the limit falls until the calls
    // in flight have halved, then the baseline takes the new latency.
    let mut cuts = 0;
    while a.baseline() == Some(ms(20)) {
        let limit = a.publish().gate.limit;
        round_trip(&mut a, &mut t, &successes(ms(40), 5), limit);
        cuts += 1;
        assert!(cuts < 20, "never followed");
    }
    assert_eq!(a.baseline(), Some(ms(40)));
    // Cut once, by half (the window reads half the calls as queued), to
    // 20.5 (20 in flight, half of 41), and doubled in the window that
    // told: calls twice as slow need twice as many in flight.
    assert_eq!(cuts, 2);
    assert_eq!(a.raw_limit(), 41.0);
    // And it goes on doubling until the first sign of queueing.
    assert!(a.is_regrowing());
    let before = a.raw_limit();
    let limit = a.publish().gate.limit;
    round_trip(&mut a, &mut t, &successes(ms(40), 5), limit);
    assert_eq!(a.raw_limit(), before * 2.0);
    let limit = a.publish().gate.limit;
    round_trip(&mut a, &mut t, &successes(ms(60), 5), limit);
    assert!(!a.is_regrowing(), "queueing ends the regrowth");
    assert_eq!(a.raw_limit(), before);

    // A queue the caller built is not mistaken for that: halving the
    // calls halves the latency.
    let mut a = latency(100, 0.0, &mut t);
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 30);
    let mut highest = 0.0f64;
    for i in 0..30 {
        let limit = a.publish().gate.limit;
        // 25 calls served at once, the rest queued behind them.
        let latency = ms(20) * limit.div_ceil(25);
        round_trip(&mut a, &mut t, &successes(latency, 5), limit);
        if i >= 20 {
            highest = highest.max(a.raw_limit());
        }
    }
    assert_eq!(a.baseline(), Some(ms(20)));
    // Probing the knee: never more than one call queued.
    assert!(highest < 27.0, "{highest}");
}

#[test]
fn a_flow_that_has_just_doubled_does_not_lower_the_baseline_for_three_round_trips() {
    let mut t = Instant::now();
    let mut a = slow_start(&mut t);
    // The slow start doubles: the flow has grown by a multiple.
    round_trip(&mut a, &mut t, &successes(ms(20), 5), 10);
    assert_eq!((a.raw_limit(), a.baseline()), (20.0, Some(ms(20))));
    // Its next answers are fast ones (the slow ones are not back): within
    // three round trips of the doubling, the baseline stays.
    round_trip(&mut a, &mut t, &successes(ms(15), 5), 1);
    assert_eq!(a.baseline(), Some(ms(20)));
    // Later, a faster window lowers it, by 1/16 of the gap.
    t += ms(100);
    round_trip(&mut a, &mut t, &successes(ms(15), 5), 1);
    let baseline = a.baseline().expect("set").as_secs_f64();
    assert!(
        (baseline - (0.020 - 0.005 / 16.0)).abs() < 1e-9,
        "{baseline}"
    );
}
