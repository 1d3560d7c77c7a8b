//! The learned attempt timeout (`rheostat::timeout`): its bounds, what it
//! learns from, its window, the share of calls given the ceiling, and the
//! front ends that give it to a call.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use proptest::prelude::*;
use rheostat::algorithms::{Aimd, AimdConfig, Fixed};
use rheostat::{CallError, Limiter, ManualClock, Outcome, Timeout, TokioClock};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A `Fixed` limiter whose timeout is learned as `timeout` says, on a
/// manual clock.
fn learning(timeout: rheostat::LearnedTimeout) -> (Limiter<Fixed, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Fixed::new(1_000).unwrap())
        .clock(clock.clone())
        .timeout(timeout)
        .seed(7)
        .build()
        .unwrap();
    (limiter, clock)
}

/// One call that ends as `outcome` after `latency`.
fn call(
    limiter: &Limiter<Fixed, ManualClock>,
    clock: &ManualClock,
    latency: Duration,
    outcome: Outcome,
) {
    let permit = limiter.try_acquire().unwrap();
    clock.advance(latency);
    permit.record(outcome);
}

fn outcome(n: u8) -> Outcome {
    match n % 3 {
        0 => Outcome::Success,
        1 => Outcome::Overload,
        _ => Outcome::Ignore,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_learned_timeout_never_leaves_its_floor_and_ceiling(
        calls in prop::collection::vec((0u64..3_000_000, any::<u8>()), 1..400),
        ceiling_ms in 1u64..3_000,
        floor_share in 0.0f64..=1.0,
        margin in 1.0f64..=100.0,
        quantile in 0.01f64..0.99999,
    ) {
        let ceiling = ms(ceiling_ms);
        let floor = ceiling.mul_f64(floor_share).max(Duration::from_nanos(1));
        let (limiter, clock) = learning(
            Timeout::learned(ceiling).floor(floor).margin(margin).quantile(quantile),
        );
        for (micros, o) in calls {
            let permit = limiter.try_acquire().unwrap();
            let given = permit.timeout(ceiling);
            prop_assert!(given <= ceiling);
            prop_assert!(given == ceiling || given >= floor, "{given:?} below {floor:?}");
            // The same answer however often it is asked.
            prop_assert_eq!(permit.timeout(ceiling), given);
            // A caller's own, lower ceiling is never exceeded either.
            prop_assert!(permit.timeout(ceiling / 2) <= ceiling / 2);
            clock.advance(Duration::from_micros(micros));
            permit.record(outcome(o));
            if let Some(learned) = limiter.learned_timeout() {
                prop_assert!(learned >= floor && learned <= ceiling, "{learned:?}");
            }
            let in_force = limiter.timeout_in_force().unwrap();
            prop_assert!(in_force <= ceiling);
            prop_assert_eq!(limiter.snapshot().timeout, Some(in_force));
        }
    }

    #[test]
    fn failed_timed_out_and_ignored_calls_never_move_it(
        // Within half a window (60 s), so that all of them are kept.
        successes in 100u32..300,
        latency_ms in 1u64..100,
        after in prop::collection::vec((0u64..20_000_000, any::<bool>()), 1..300),
    ) {
        let (limiter, clock) = learning(Timeout::learned(Duration::from_secs(15)));
        for _ in 0..successes {
            call(&limiter, &clock, ms(latency_ms), Outcome::Success);
        }
        let learned = limiter.learned_timeout();
        prop_assert!(learned.is_some());
        // However long they take, and however much time passes.
        for (micros, overload) in after {
            let outcome = if overload { Outcome::Overload } else { Outcome::Ignore };
            call(&limiter, &clock, Duration::from_micros(micros), outcome);
            prop_assert_eq!(limiter.learned_timeout(), learned);
        }
    }

    #[test]
    fn a_call_given_the_ceiling_that_succeeds_slower_raises_it_to_cover_the_answer(
        successes in 100u32..2_000,
        latency_ms in 1u64..200,
        slower_ms in 1u64..15_000,
    ) {
        let ceiling = Duration::from_secs(15);
        let (limiter, clock) = learning(Timeout::learned(ceiling));
        for _ in 0..successes {
            call(&limiter, &clock, ms(latency_ms), Outcome::Success);
        }
        let before = limiter.learned_timeout().unwrap();
        let slower = before + ms(slower_ms);
        // A call of the share answers after the learned timeout (one cut
        // at it would have timed out): the timeout rises to cover it.
        call(&limiter, &clock, slower, Outcome::Success);
        let after = limiter.learned_timeout().unwrap();
        prop_assert!(after >= slower.min(ceiling), "{before:?} -> {after:?} for {slower:?}");
    }
}

#[test]
fn about_one_call_in_a_hundred_is_given_the_ceiling() {
    let ceiling = Duration::from_secs(15);
    let (limiter, clock) = learning(Timeout::learned(ceiling));
    for _ in 0..200 {
        call(&limiter, &clock, ms(50), Outcome::Success);
    }
    let learned = limiter.learned_timeout().unwrap();
    assert!(learned < ms(120), "{learned:?}");
    let mut uncut = 0;
    for _ in 0..20_000 {
        let permit = limiter.try_acquire().unwrap();
        let given = permit.timeout(ceiling);
        assert!(given == learned || given == ceiling);
        uncut += u32::from(given == ceiling);
        permit.ignore();
    }
    // 1% of 20,000 is 200; a binomial's spread is about 14.
    assert!((140..=260).contains(&uncut), "{uncut}");
}

/// A `Fixed(limit)` limiter that has learned about 100 ms, with half of
/// its calls drawn for the ceiling (the most `share` allows), so that the
/// bound in slots is what stops them.
fn half_drawn(limit: u32) -> (Limiter<Fixed, ManualClock>, ManualClock) {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Fixed::new(limit).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)).share(0.5))
        .seed(11)
        .build()
        .unwrap();
    for _ in 0..200 {
        call(&limiter, &clock, ms(50), Outcome::Success);
    }
    assert!(limiter.learned_timeout().is_some());
    (limiter, clock)
}

#[test]
fn calls_given_the_ceiling_hold_at_most_their_share_of_the_slots_and_at_least_one() {
    let ceiling = Duration::from_secs(15);
    for (limit, most) in [(1, 1), (3, 1), (10, 5), (40, 20)] {
        let (limiter, _clock) = half_drawn(limit);
        let mut fullest = 0;
        for round in 0..100 {
            let permits: Vec<_> = (0..limit).map(|_| limiter.try_acquire().unwrap()).collect();
            let uncut = permits
                .iter()
                .filter(|p| p.timeout(ceiling) == ceiling)
                .count();
            assert!(uncut <= most, "limit {limit}: {uncut} given the ceiling");
            if round >= 50 {
                fullest = fullest.max(uncut);
            }
            // Every permit's end gives its count back, however it ends.
            for (i, permit) in permits.into_iter().enumerate() {
                match i % 3 {
                    0 => permit.success(),
                    1 => permit.overload(),
                    _ => drop(permit),
                }
            }
        }
        // Half the calls are drawn: the bound, not the draw, is what holds
        // them, and it is still reached after fifty rounds of calls ended
        // (no count is lost).
        assert_eq!(fullest, most, "limit {limit}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// However calls are admitted and end, the calls in flight given the
    /// ceiling never pass `max(1, share × limit)`.
    #[test]
    fn the_calls_given_the_ceiling_in_flight_never_pass_their_slots(
        steps in proptest::collection::vec((any::<bool>(), 0usize..8), 1..200),
    ) {
        let ceiling = Duration::from_secs(15);
        let (limiter, _clock) = half_drawn(8);
        let mut held = Vec::new();
        for (acquire, pick) in steps {
            if acquire {
                if let Ok(permit) = limiter.try_acquire() {
                    held.push(permit);
                }
            } else if !held.is_empty() {
                let permit = held.swap_remove(pick % held.len());
                permit.success();
            }
            let uncut = held.iter().filter(|p| p.timeout(ceiling) == ceiling).count();
            prop_assert!(uncut <= 4, "{uncut} of {} given the ceiling", held.len());
        }
    }
}

#[test]
fn a_probe_keeps_its_own_timeout_and_a_limiter_that_learns_nothing_gives_the_ceiling() {
    let typed = Limiter::builder(Fixed::new(4).unwrap())
        .timeout(ms(800))
        .build()
        .unwrap();
    let permit = typed.try_acquire().unwrap();
    assert_eq!(permit.timeout(ms(800)), ms(800));
    assert_eq!(typed.learned_timeout(), None);
    assert_eq!(typed.timeout_in_force(), Some(ms(800)));
    permit.success();
    let none = Limiter::new(Fixed::new(4).unwrap());
    assert_eq!(none.timeout_in_force(), None);
    assert_eq!(none.snapshot().timeout, None);
}

#[test]
fn a_learned_timeout_with_a_field_out_of_range_is_refused_by_name() {
    let error = Limiter::builder(Fixed::new(4).unwrap())
        .timeout(Timeout::learned(Duration::from_secs(1)).quantile(1.5))
        .build()
        .unwrap_err();
    assert_eq!(error.field(), "limiter.timeout.quantile");
    let error = Limiter::builder(Fixed::new(4).unwrap())
        .timeout(Timeout::learned(ms(100)).floor(ms(200)))
        .build()
        .unwrap_err();
    assert_eq!(error.field(), "limiter.timeout.floor");
}

/// `Limiter::call` gives each attempt the learned timeout: a call that
/// hangs is cut at about twice the p99.9 of the answers seen, not at the
/// 15 s ceiling, but for the share given the ceiling.
#[tokio::test(start_paused = true)]
async fn limiter_call_cuts_a_hung_call_at_the_learned_timeout() {
    let ceiling = Duration::from_secs(15);
    let limiter = Limiter::builder(Aimd::new(AimdConfig::default()).unwrap())
        .clock(TokioClock)
        .timeout(Timeout::learned(ceiling))
        .seed(3)
        .build()
        .unwrap();
    let classify = |r: &Result<(), ()>| match r {
        Ok(()) => Outcome::Success,
        Err(()) => Outcome::Overload,
    };
    for _ in 0..200 {
        limiter
            .call(classify, || async {
                tokio::time::sleep(ms(50)).await;
                Ok(())
            })
            .await
            .unwrap();
    }
    let learned = limiter.learned_timeout().unwrap();
    assert!(learned >= ms(100) && learned <= ms(110), "{learned:?}");
    let mut cut = 0;
    for _ in 0..50 {
        let started = tokio::time::Instant::now();
        match limiter
            .call(classify, std::future::pending::<Result<(), ()>>)
            .await
        {
            Err(CallError::TimedOut(given)) => {
                assert!(given == learned || given == ceiling, "{given:?}");
                // Tokio's timer rounds up to the millisecond.
                let elapsed = started.elapsed();
                assert!(elapsed >= given && elapsed <= given + ms(1), "{elapsed:?}");
                cut += u32::from(given == learned);
            }
            other => panic!("a hung call ended {other:?}"),
        }
    }
    assert!(cut >= 45, "{cut} of 50 cut at the learned timeout");
}
