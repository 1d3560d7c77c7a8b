//! The learned attempt timeout (`rheostat::timeout`): its bounds, what it
//! learns from, its window, the share of calls given the ceiling, and the
//! front ends that give it to a call.

#![allow(clippy::unwrap_used, reason = "tests fail loudly")]

use std::time::Duration;

use proptest::prelude::*;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::{Aimd, AimdConfig, Fixed};
use rheostat::{
    clock::{Clock, ManualClock, TokioClock},
    limiter::Sharding,
    CallError, Limiter, Outcome, Timeout,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A `Fixed` limiter whose timeout is learned as `timeout` says, on a
/// manual clock.
fn learning(
    timeout: rheostat::timeout::LearnedTimeout,
) -> (Limiter<Fixed, ManualClock>, ManualClock) {
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
            if let Some(learned) = limiter.timeouts().learned {
                prop_assert!(learned >= floor && learned <= ceiling, "{learned:?}");
            }
            let in_force = limiter.timeouts().in_force.unwrap();
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
        let learned = limiter.timeouts().learned;
        prop_assert!(learned.is_some());
        // However long they take, and however much time passes.
        for (micros, overload) in after {
            let outcome = if overload { Outcome::Overload } else { Outcome::Ignore };
            call(&limiter, &clock, Duration::from_micros(micros), outcome);
            prop_assert_eq!(limiter.timeouts().learned, learned);
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
        let before = limiter.timeouts().learned.unwrap();
        let slower = before + ms(slower_ms);
        // The dependency slows down: a call of the share answers after the
        // learned timeout, and the calls beside it given the learned
        // timeout are cut at it. It stands for those cut, and the timeout
        // rises to cover it.
        let drawn = drawn_for_the_ceiling(&limiter, ceiling);
        let beside: Vec<_> = (0..150).map(|_| limiter.try_acquire().unwrap()).collect();
        clock.advance(before);
        for permit in beside {
            if permit.timeout(ceiling) == before {
                permit.overload();
            } else {
                permit.ignore();
            }
        }
        clock.advance(slower - before);
        drawn.success();
        // Risen to cover it, or to the ceiling, where nothing shorter is
        // learned and calls get the ceiling.
        let after = limiter.timeouts().learned;
        prop_assert!(
            after.is_none_or(|after| after >= slower),
            "{before:?} -> {after:?} for {slower:?}"
        );
        prop_assert!(limiter.timeouts().in_force.unwrap() >= slower.min(ceiling));
    }
}

/// A permit drawn for the ceiling: the first of those taken one after
/// another (the others ignored) that is given it.
fn drawn_for_the_ceiling(
    limiter: &Limiter<Fixed, ManualClock>,
    ceiling: Duration,
) -> rheostat::Permit<&Limiter<Fixed, ManualClock>> {
    loop {
        let permit = limiter.try_acquire().unwrap();
        if permit.timeout(ceiling) == ceiling {
            return permit;
        }
        permit.ignore();
    }
}

#[test]
fn about_one_call_in_a_hundred_is_given_the_ceiling() {
    let ceiling = Duration::from_secs(15);
    let (limiter, clock) = learning(Timeout::learned(ceiling));
    for _ in 0..200 {
        call(&limiter, &clock, ms(50), Outcome::Success);
    }
    let learned = limiter.timeouts().learned.unwrap();
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
    assert!(limiter.timeouts().learned.is_some());
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
    assert_eq!(typed.timeouts().learned, None);
    assert_eq!(typed.timeouts().in_force, Some(ms(800)));
    permit.success();
    let none = Limiter::new(Fixed::new(4).unwrap());
    assert_eq!(none.timeouts().in_force, None);
    assert_eq!(none.snapshot().timeout, None);
}

#[test]
fn a_breaker_that_learns_its_timeout_shows_its_ceiling_learned_value_timeout_in_force_and_probe_timeout_together(
) {
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(BreakerConfig::default()).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)).floor(ms(5)))
        .seed(7)
        .build()
        .unwrap();
    let before = limiter.timeouts();
    assert_eq!(before.ceiling, Some(Duration::from_secs(15)));
    assert_eq!(before.learned, None, "nothing seen yet");
    assert_eq!(
        before.in_force,
        Some(Duration::from_secs(15)),
        "the ceiling"
    );
    assert_eq!(before.probe, Some(Duration::from_secs(30)), "the breaker's");
    for _ in 0..200 {
        let permit = limiter.try_acquire().unwrap();
        clock.advance(ms(40));
        permit.success();
    }
    let after = limiter.timeouts();
    let learned = after.learned.unwrap();
    assert!(learned >= ms(80) && learned <= ms(86), "{learned:?}");
    assert_eq!(
        after.in_force,
        Some(learned),
        "the learned one, below the ceiling"
    );
    assert_eq!(after.ceiling, before.ceiling);
    assert_eq!(after.probe, before.probe);
    assert_eq!(limiter.snapshot().timeout, after.in_force);
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
    let learned = limiter.timeouts().learned.unwrap();
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

/// A `Fixed` limiter that has learned about 80 ms from 40 ms answers.
fn learned_80ms() -> (Limiter<Fixed, ManualClock>, ManualClock) {
    let (limiter, clock) = learning(Timeout::learned(Duration::from_secs(15)));
    for _ in 0..200 {
        call(&limiter, &clock, ms(40), Outcome::Success);
    }
    let learned = limiter.timeouts().learned.unwrap();
    assert!(learned >= ms(80) && learned <= ms(86), "{learned:?}");
    (limiter, clock)
}

#[test]
fn a_call_not_to_be_cut_early_keeps_its_callers_timeout_whatever_was_learned() {
    let (limiter, _clock) = learned_80ms();
    let learned = limiter.timeouts().learned.unwrap();
    let (mut kept, mut cut) = (0, 0);
    for i in 0..2_000u64 {
        // Whatever the caller's timeout, above or below the learned one.
        let caller = ms(20 + i % 10_000);
        let payment = limiter.admission().cut_early(false).try_acquire().unwrap();
        assert_eq!(payment.timeout(caller), caller);
        kept += 1;
        let search = limiter.try_acquire().unwrap();
        cut += u32::from(search.timeout(caller) == learned.min(caller));
        payment.ignore();
        search.ignore();
    }
    // The others are cut at the learned timeout, but for the ~1% drawn
    // for the ceiling: a call kept whole is never drawn, so it takes no
    // slot of theirs.
    assert!(cut >= 1_900, "{cut} of {kept} cut at the learned timeout");
}

#[test]
fn a_learned_timeout_that_cuts_nothing_early_gives_every_call_the_ceiling_and_still_learns() {
    let ceiling = Duration::from_secs(15);
    let (limiter, clock) = learning(Timeout::learned(ceiling).cut_early(false));
    for _ in 0..200 {
        call(&limiter, &clock, ms(40), Outcome::Success);
    }
    // Learned, and shown…
    let learned = limiter.timeouts().learned.unwrap();
    assert!(learned <= ms(86), "{learned:?}");
    // …but given to no call: the timeout in force is the ceiling.
    assert_eq!(limiter.timeouts().in_force, Some(ceiling));
    assert_eq!(limiter.snapshot().timeout, Some(ceiling));
    for _ in 0..1_000 {
        let permit = limiter.try_acquire().unwrap();
        assert_eq!(permit.timeout(ceiling), ceiling);
        assert_eq!(permit.timeout(ms(500)), ms(500));
        permit.ignore();
    }
}

#[test]
fn a_probe_not_to_be_cut_early_gets_the_longer_of_its_probe_timeout_and_its_callers() {
    use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(BreakerConfig::default()).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)))
        .build()
        .unwrap();
    for _ in 0..10 {
        limiter.try_acquire().unwrap().overload();
    }
    clock.advance(Duration::from_secs(5));
    let caller = Duration::from_secs(45);
    let ordinary = limiter.try_acquire().unwrap();
    assert!(ordinary.is_probe());
    assert_eq!(ordinary.timeout(caller), Duration::from_secs(30));
    let payment = limiter.admission().cut_early(false).try_acquire().unwrap();
    assert!(payment.is_probe());
    assert_eq!(payment.timeout(caller), caller);
    assert_eq!(payment.timeout(ms(800)), Duration::from_secs(30));
}

#[test]
fn expiries_of_calls_not_to_be_cut_early_reach_the_policy_as_failures_where_the_learned_ones_do_not(
) {
    use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
    use rheostat::algorithms::BreakerState;
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Breaker::new(BreakerConfig::default()).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)))
        .seed(5)
        .build()
        .unwrap();
    for _ in 0..200 {
        let permit = limiter.try_acquire().unwrap();
        clock.advance(ms(40));
        permit.success();
    }
    let learned = limiter.timeouts().learned.unwrap();
    clock.advance(Duration::from_secs(60));
    // Forty calls cut by the learned timeout: with no call given longer to
    // say they would not have answered, the timeout ended them, not the
    // dependency, and the breaker is told nothing.
    for _ in 0..40 {
        let permit = limiter.try_acquire().unwrap();
        if permit.timeout(Duration::from_secs(15)) == learned {
            clock.advance(learned);
            permit.overload();
        } else {
            permit.ignore(); // drawn for the ceiling
        }
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Closed));
    // Ten payments that each ran out their caller's 5 s: failures, as a
    // typed timeout's are.
    for _ in 0..10 {
        let permit = limiter.admission().cut_early(false).try_acquire().unwrap();
        clock.advance(Duration::from_secs(5));
        permit.overload();
    }
    assert_eq!(limiter.snapshot().state, Some(BreakerState::Open));
}

/// `Limiter::call` with `cut_early(false)` waits out its own timeout for a
/// call that hangs, where the others are cut at the learned timeout.
#[tokio::test(start_paused = true)]
async fn limiter_call_not_to_be_cut_early_waits_out_its_own_timeout() {
    let limiter = Limiter::builder(Aimd::new(AimdConfig::default()).unwrap())
        .clock(TokioClock)
        .timeout(Timeout::learned(Duration::from_secs(15)))
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
    assert!(limiter.timeouts().learned.unwrap() <= ms(110));
    let own = Duration::from_secs(5);
    for _ in 0..20 {
        let started = tokio::time::Instant::now();
        let hung = limiter
            .admission()
            .timeout(own)
            .cut_early(false)
            .call(classify, std::future::pending::<Result<(), ()>>)
            .await;
        assert!(
            matches!(hung, Err(CallError::TimedOut(given)) if given == own),
            "{hung:?}"
        );
        let elapsed = started.elapsed();
        assert!(elapsed >= own && elapsed <= own + ms(1), "{elapsed:?}");
    }
}

/// Records what the observer is told of the ceiling.
#[derive(Clone, Default)]
struct Told(std::sync::Arc<std::sync::Mutex<Vec<(Duration, bool)>>>);

impl rheostat::Observer for Told {
    fn ceiling_cutting(&self, ceiling: Duration, cutting: bool) {
        self.0.lock().unwrap().push((ceiling, cutting));
    }
}

impl Told {
    fn take(&self) -> Vec<(Duration, bool)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// A `Fixed` limiter learning under a 15 s ceiling at the default window
/// (60 s), telling `told`.
fn watched() -> (Limiter<Fixed, ManualClock>, ManualClock, Told) {
    let clock = ManualClock::new();
    let told = Told::default();
    let limiter = Limiter::builder(Fixed::new(100).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(Duration::from_secs(15)))
        .observer(told.clone())
        .build()
        .unwrap();
    (limiter, clock, told)
}

#[test]
fn a_ceiling_that_cuts_every_call_for_a_window_is_told_once_and_once_more_when_an_answer_ends_it() {
    let ceiling = Duration::from_secs(15);
    let (limiter, clock, told) = watched();
    let start = clock.now();
    // The dependency answers in 200 s: each call is cut at the ceiling.
    // Four of them span 45 s from the first: less than a window.
    for _ in 0..4 {
        call(&limiter, &clock, ceiling, Outcome::Overload);
    }
    assert_eq!(limiter.snapshot().ceiling_cutting_since, None);
    assert!(told.take().is_empty());
    // The fifth, a window after the first.
    call(&limiter, &clock, ceiling, Outcome::Overload);
    assert_eq!(
        limiter.snapshot().ceiling_cutting_since,
        Some(start + ceiling)
    );
    // The snapshot says so too.
    assert_eq!(
        limiter.snapshot().ceiling_cutting_since,
        Some(start + ceiling)
    );
    assert_eq!(told.take(), [(ceiling, true)]);
    // Told once: however many more are cut, and whatever else fails.
    for i in 0..100 {
        let latency = if i % 2 == 0 { ceiling } else { ms(3) };
        call(&limiter, &clock, latency, Outcome::Overload);
    }
    assert!(told.take().is_empty());
    assert_eq!(
        limiter.snapshot().ceiling_cutting_since,
        Some(start + ceiling)
    );
    // An answer within the ceiling ends it, once.
    call(&limiter, &clock, Duration::from_secs(14), Outcome::Success);
    assert_eq!(limiter.snapshot().ceiling_cutting_since, None);
    assert_eq!(limiter.snapshot().ceiling_cutting_since, None);
    call(&limiter, &clock, ms(10), Outcome::Success);
    assert_eq!(told.take(), [(ceiling, false)]);
    // Cut again: a whole window more before it is told again.
    for _ in 0..4 {
        call(&limiter, &clock, ceiling, Outcome::Overload);
    }
    assert!(told.take().is_empty());
    call(&limiter, &clock, ceiling, Outcome::Overload);
    assert_eq!(told.take(), [(ceiling, true)]);
}

#[test]
fn a_hang_shorter_than_a_window_fast_failures_and_answers_slower_than_the_ceiling_tell_nothing() {
    let ceiling = Duration::from_secs(15);
    let (limiter, clock, told) = watched();
    // Hangs for 45 s (a failover), then an answer: shorter than a window.
    for _ in 0..4 {
        call(&limiter, &clock, ceiling, Outcome::Overload);
    }
    call(&limiter, &clock, ms(30), Outcome::Success);
    for _ in 0..4 {
        call(&limiter, &clock, ceiling, Outcome::Overload);
    }
    // Refused connections for ten minutes: the ceiling cut none of them.
    for _ in 0..600 {
        call(&limiter, &clock, ms(2), Outcome::Overload);
        clock.advance(Duration::from_secs(1));
    }
    assert!(told.take().is_empty());
    assert_eq!(limiter.snapshot().ceiling_cutting_since, None);
    // Cut for a window: told. A call given longer (not to be cut early)
    // that answers after 200 s would have been cut by the ceiling too: it
    // ends nothing.
    for _ in 0..5 {
        call(&limiter, &clock, ceiling, Outcome::Overload);
    }
    assert_eq!(told.take(), [(ceiling, true)]);
    let slow = limiter.admission().cut_early(false).try_acquire().unwrap();
    clock.advance(Duration::from_secs(200));
    slow.success();
    assert!(limiter.snapshot().ceiling_cutting_since.is_some());
    assert!(told.take().is_empty());
}

#[test]
fn the_span_before_the_ceiling_is_said_to_cut_every_call_is_the_window_and_at_least_two_ceilings() {
    // (ceiling, window, the span expected), in seconds.
    for (ceiling_s, window_s, quiet_s) in [(15, 60, 60), (5, 60, 60), (60, 60, 120), (100, 30, 200)]
    {
        let ceiling = Duration::from_secs(ceiling_s);
        let clock = ManualClock::new();
        let told = Told::default();
        let limiter = Limiter::builder(Fixed::new(1_000).unwrap())
            .clock(clock.clone())
            .timeout(Timeout::learned(ceiling).window(Duration::from_secs(window_s)))
            .observer(told.clone())
            .build()
            .unwrap();
        // A call sent every second, each cut at the ceiling: the first at
        // `ceiling`, one a second after it.
        let mut flying = std::collections::VecDeque::new();
        for t in 1..=ceiling_s + quiet_s {
            flying.push_back(limiter.try_acquire().unwrap());
            clock.advance(Duration::from_secs(1));
            if t >= ceiling_s {
                flying.pop_front().unwrap().overload();
            }
            let expected: &[_] = if t == ceiling_s + quiet_s {
                &[(ceiling, true)]
            } else {
                &[]
            };
            assert_eq!(told.take(), expected, "{ceiling_s} s ceiling, at {t} s");
        }
    }
}

/// The case: healthy calls take 200 s, the learned timeout's
/// ceiling is 15 s. Every call is cut at the ceiling, nothing succeeds, and
/// within a window the limiter says so; a call not to be cut early, given
/// 300 s, is answered, which ends nothing (the ceiling would have cut it).
#[tokio::test(start_paused = true)]
async fn healthy_calls_slower_than_the_ceiling_are_all_cut_and_the_limiter_says_so_within_a_window()
{
    let ceiling = Duration::from_secs(15);
    let told = Told::default();
    let limiter = Limiter::builder(Aimd::recommended())
        .clock(TokioClock)
        .timeout(Timeout::learned(ceiling))
        .observer(told.clone())
        .build()
        .unwrap();
    let classify = |r: &Result<(), ()>| match r {
        Ok(()) => Outcome::Success,
        Err(()) => Outcome::Overload,
    };
    let healthy = || async {
        tokio::time::sleep(Duration::from_secs(200)).await;
        Ok(())
    };
    let start = tokio::time::Instant::now();
    for _ in 0..5 {
        let cut = limiter.call(classify, healthy).await;
        assert!(
            matches!(cut, Err(CallError::TimedOut(given)) if given == ceiling),
            "{cut:?}"
        );
    }
    // The fifth was cut 60 s after the first.
    assert_eq!(start.elapsed(), Duration::from_secs(75));
    assert_eq!(told.take(), [(ceiling, true)]);
    let since = limiter.snapshot().ceiling_cutting_since.unwrap();
    assert_eq!(since, start.into_std() + ceiling, "since the first cut");
    let answered = limiter
        .admission()
        .timeout(Duration::from_secs(300))
        .cut_early(false)
        .call(classify, healthy)
        .await;
    assert!(answered.is_ok());
    assert_eq!(limiter.snapshot().ceiling_cutting_since, Some(since));
    assert!(told.take().is_empty());
    assert_eq!(
        limiter.timeouts().learned,
        None,
        "nothing within the ceiling to learn from"
    );
}

/// How the slow calls of [`mixed_traffic`] are admitted.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Slow {
    /// Drawn for the ceiling, every one: each answers.
    Drawn,
    /// Given the learned timeout, which their caller does not apply: each
    /// answers all the same.
    NotDrawn,
}

/// Five minutes of mixed traffic through a limiter learning its timeout
/// at the defaults (15 s ceiling), on a manual clock: a call every 10 ms
/// (100 a second) answering in 40 to 60 ms, cut at the timeout it is
/// given, and one call a minute (from 30 s) answering in 10 s, admitted as
/// `slow` says; with `hangs`, one of the fast calls a second hangs instead
/// (cut at the timeout it is given). The learned timeout each second from
/// the first learned.
fn mixed_traffic(slow: Slow, hangs: bool) -> Vec<Duration> {
    use std::collections::BTreeMap;
    let ceiling = Duration::from_secs(15);
    let (limiter, clock) = learning(Timeout::learned(ceiling));
    let tick = ms(10);
    let mut ends = BTreeMap::new();
    let mut learned = Vec::new();
    for step in 0..30_000u64 {
        let now = tick * u32::try_from(step).unwrap();
        // Calls end in the order they end, each at its own instant.
        while let Some(entry) = ends.first_entry() {
            let &(end, _) = entry.key();
            if end > now {
                break;
            }
            let (permit, outcome): (rheostat::Permit<_>, Outcome) = entry.remove();
            clock.set_elapsed(end);
            permit.record(outcome);
        }
        clock.set_elapsed(now);
        let fast = if hangs && step % 100 == 50 {
            Duration::MAX
        } else {
            ms(40 + step * 7 % 21)
        };
        let permit = limiter.try_acquire().unwrap();
        let given = permit.timeout(ceiling);
        let (end, outcome) = if fast <= given {
            (now + fast, Outcome::Success)
        } else {
            (now + given, Outcome::Overload)
        };
        ends.insert((end, step * 2), (permit, outcome));
        if step % 6_000 == 3_000 {
            let permit = match slow {
                Slow::Drawn => drawn_for_the_ceiling(&limiter, ceiling),
                // The first not drawn (if the learned timeout is the
                // ceiling, every call gets it: the first of those).
                Slow::NotDrawn => {
                    let mut permit = limiter.try_acquire().unwrap();
                    for _ in 0..1_000 {
                        if permit.timeout(ceiling) < ceiling {
                            break;
                        }
                        permit.ignore();
                        permit = limiter.try_acquire().unwrap();
                    }
                    permit
                }
            };
            let end = now + Duration::from_secs(10);
            ends.insert((end, step * 2 + 1), (permit, Outcome::Success));
        }
        if step % 100 == 0 {
            learned.extend(limiter.timeouts().learned);
        }
    }
    learned
}

/// What the learned timeouts of a run say: the highest, and the share of
/// seconds at more than twice the fast calls' slowest (120 ms).
fn summary(learned: &[Duration]) -> (Duration, f64) {
    let highest = learned.iter().copied().max().unwrap();
    let high = learned.iter().filter(|&&l| l > ms(120)).count();
    #[allow(clippy::cast_precision_loss, reason = "a few hundred seconds")]
    let share = high as f64 / learned.len() as f64;
    (highest, share)
}

/// One 10 s answer a minute among 100 calls a second of 50 ms, each of
/// them drawn for the ceiling: none stands for a call the timeout cut (the
/// timeout cut none like it), so each is recorded once and the timeout
/// stays near the fast calls' tail. Recorded `1 / share` times, each held
/// it at the ceiling for the window after it.
#[test]
fn one_slow_answer_a_minute_drawn_for_the_ceiling_leaves_the_timeout_near_the_fast_tail() {
    let learned = mixed_traffic(Slow::Drawn, false);
    let (highest, share) = summary(&learned);
    println!(
        "slow answers drawn for the ceiling: highest learned {highest:?}, \
         {:.1}% of {} s above 120 ms",
        share * 100.0,
        learned.len()
    );
    // About twice the fast calls' 60 ms, within the histogram's 1/16.
    assert!(highest <= ms(130), "{highest:?}");
}

/// The same traffic with a call a second that hangs, cut at the learned
/// timeout, the slow calls given the learned timeout by the draw and
/// answering past it (their caller applies no timeout): each stands for
/// itself, never for the calls cut, as only a call drawn for the ceiling
/// does.
#[test]
fn one_slow_answer_a_minute_not_drawn_for_the_ceiling_stands_only_for_itself() {
    let learned = mixed_traffic(Slow::NotDrawn, true);
    let (highest, share) = summary(&learned);
    println!(
        "slow answers not drawn: highest learned {highest:?}, \
         {:.1}% of {} s above 120 ms",
        share * 100.0,
        learned.len()
    );
    assert!(highest <= ms(130), "{highest:?}");
}

/// A slowdown of a share of the calls is still seen at the first answer
/// drawn for the ceiling: every tenth call takes 2 s, the learned timeout
/// cuts those given it, and the first of them drawn for the ceiling stands
/// for the cut ones, which puts them above the p99.9: the timeout rises to
/// cover them at once. So it does where successes are held for the policy
/// (`Sharding::Always` holds them from the start): one drawn for the
/// ceiling is never held, which would tell the learner it was not.
#[test]
fn a_slowdown_cut_by_the_learned_timeout_raises_it_at_the_first_answer_drawn_for_the_ceiling() {
    for sharding in [Sharding::OnContention, Sharding::Always] {
        a_slowdown_cut_by_the_learned_timeout_raises_it(sharding);
    }
}

fn a_slowdown_cut_by_the_learned_timeout_raises_it(sharding: Sharding) {
    let ceiling = Duration::from_secs(15);
    let clock = ManualClock::new();
    let limiter = Limiter::builder(Fixed::new(1_000).unwrap())
        .clock(clock.clone())
        .timeout(Timeout::learned(ceiling))
        .sharding(sharding)
        .seed(7)
        .build()
        .unwrap();
    for _ in 0..1_000 {
        call(&limiter, &clock, ms(50), Outcome::Success);
    }
    let before = limiter.timeouts().learned.unwrap();
    assert!(before <= ms(110), "{before:?}");
    // 1,000 calls, a tenth of them 2 s and cut at the learned timeout.
    for i in 0..1_000 {
        let permit = limiter.try_acquire().unwrap();
        if i % 10 == 0 && permit.timeout(ceiling) == before {
            clock.advance(before);
            permit.overload();
        } else {
            clock.advance(ms(1));
            permit.ignore();
        }
    }
    let drawn = drawn_for_the_ceiling(&limiter, ceiling);
    clock.advance(Duration::from_secs(2));
    drawn.success();
    let after = limiter.timeouts().learned.unwrap();
    assert!(
        after >= Duration::from_secs(2),
        "{sharding:?}: {before:?} -> {after:?}"
    );
}
