//! The learner's rules, one by one.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A learner with a 15 s ceiling, fed `n` successes of `latency`, one
/// every 10 ms from `t0`; the instant after the last.
fn fed(learner: &mut Learner, t0: Instant, n: u32, latency: Duration) -> Instant {
    let mut at = t0;
    for _ in 0..n {
        at += ms(10);
        learner.tell(at, Outcome::Success, latency, Given::Learned);
    }
    at
}

#[test]
fn nothing_is_learned_before_a_hundred_successes_and_then_about_twice_the_p999() {
    let t0 = Instant::now();
    let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0, None);
    fed(&mut learner, t0, 99, ms(50));
    assert_eq!(learner.value(), None);
    fed(&mut learner, t0 + Duration::from_secs(1), 1, ms(50));
    let value = learner.value().unwrap();
    // Twice 50 ms, rounded up to the histogram's sixteenth.
    assert!(value >= ms(100) && value <= ms(107), "{value:?}");
}

#[test]
fn the_first_value_waits_until_the_first_calls_have_run_three_of_the_slowest_answers() {
    let t0 = Instant::now();
    let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0, None);
    // A slow answer first, started 399 ms before t0, then fast ones:
    // a hundred and more successes, yet the flow is younger than three
    // of its slowest answers (1.2 s) until t0 + 801 ms.
    learner.tell(t0 + ms(1), Outcome::Success, ms(400), Given::Learned);
    let mut at = t0 + ms(1);
    while at < t0 + ms(795) {
        at += ms(5);
        learner.tell(at, Outcome::Success, ms(10), Given::Learned);
        assert_eq!(learner.value(), None, "at {:?}", at - t0);
    }
    at = t0 + ms(805);
    learner.tell(at, Outcome::Success, ms(10), Given::Learned);
    assert!(learner.value().is_some());
}

#[test]
fn failures_timeouts_and_ignored_calls_leave_the_learner_as_it_was() {
    let t0 = Instant::now();
    let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0, None);
    let at = fed(&mut learner, t0, 200, ms(50));
    let before = learner.value();
    let secs = Duration::from_secs;
    let outcomes = [Outcome::Overload, Outcome::Ignore].into_iter().cycle();
    for (i, outcome) in (0..1_000).zip(outcomes) {
        assert!(!learner.tell(at + secs(i), outcome, secs(14), Given::Learned));
    }
    assert_eq!(learner.value(), before);
    assert_eq!(learner.seen, (200, 0));
}

#[test]
fn a_success_slower_than_the_timeout_stands_for_the_calls_cut_and_raises_it_at_once() {
    let t0 = Instant::now();
    let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0, None);
    let at = fed(&mut learner, t0, 1_000, ms(50));
    let before = learner.value().unwrap();
    // The dependency slows down: the learned timeout cuts the calls
    // given it, and one call of the 1% given the ceiling answers in
    // 2 s. It stands for the 99 cut: recorded 100 times, a tenth of
    // the window, above its p99.9.
    for _ in 0..99 {
        assert!(!learner.tell(at, Outcome::Overload, before, Given::Learned));
    }
    assert!(learner.tell(
        at + ms(1),
        Outcome::Success,
        Duration::from_secs(2),
        Given::Ceiling
    ));
    let after = learner.value().unwrap();
    assert!(after >= Duration::from_secs(4), "{before:?} -> {after:?}");
    assert!(after <= Duration::from_secs(15));
}

#[test]
fn the_window_forgets_a_slow_past_within_a_window() {
    let t0 = Instant::now();
    let config = LearnedTimeout::new(Duration::from_secs(15));
    let mut learner = Learner::new(config, t0, None);
    let at = fed(&mut learner, t0, 500, ms(400));
    assert!(learner.value().unwrap() >= ms(800));
    // The dependency gets faster: within a window of 10 ms answers, the
    // 400 ms ones are forgotten.
    let at = fed(&mut learner, at, 6_000, ms(10));
    assert!(at - t0 <= config.window * 2);
    let value = learner.value().unwrap();
    assert!(value <= ms(22), "{value:?}");
}

#[test]
fn a_whole_window_without_a_success_forgets_its_latencies_but_not_its_value() {
    let t0 = Instant::now();
    let config = LearnedTimeout::new(Duration::from_secs(15));
    let mut learner = Learner::new(config, t0, None);
    let at = fed(&mut learner, t0, 500, ms(50));
    let learned = learner.value().unwrap();
    // An outage: a window without a success forgets the latencies; too
    // few new ones to go on, so what was learned stands.
    let at = at + config.window;
    learner.tell(at, Outcome::Success, ms(50), Given::Learned);
    assert_eq!(learner.seen, (1, 0));
    assert_eq!(learner.value(), Some(learned));
    // A hundred new successes, ten times slower, are the new value.
    fed(&mut learner, at, 100, ms(500));
    assert!(
        learner.value().unwrap() >= ms(1_000),
        "{:?}",
        learner.value()
    );
}

/// A learner with a 15 s ceiling that has learned about 100 ms from
/// 50 ms successes; the instant after the last.
fn learned_100ms(t0: Instant) -> (Learner, Instant) {
    let mut learner = Learner::new(LearnedTimeout::new(Duration::from_secs(15)), t0, None);
    let at = fed(&mut learner, t0, 200, ms(50));
    (learner, at)
}

#[test]
fn an_expiry_of_the_learned_timeout_is_ignored_until_a_call_given_the_ceiling_hangs() {
    let t0 = Instant::now();
    let (mut learner, at) = learned_100ms(t0);
    let value = learner.value().unwrap();
    // Cut at the learned timeout, with nothing to say those calls would
    // not have answered: the timeout ended it, not the dependency.
    assert_eq!(
        learner.judge(at, Outcome::Overload, value, Given::Learned),
        Outcome::Ignore
    );
    // A failure faster than the timeout is the dependency's.
    assert_eq!(
        learner.judge(at, Outcome::Overload, ms(20), Given::Learned),
        Outcome::Overload
    );
    // A call given the ceiling fails past the learned timeout: calls that
    // slow do not answer, and the expiries are drops (the call itself
    // is evidence, told as ignored: the expiries carry the loss).
    let hung = at + ms(15_000);
    assert_eq!(
        learner.judge(hung, Outcome::Overload, ms(15_000), Given::Ceiling),
        Outcome::Ignore
    );
    assert_eq!(
        learner.judge(hung, Outcome::Overload, value, Given::Learned),
        Outcome::Overload
    );
    // The evidence stands while the expiries it explains keep coming…
    let window = LearnedTimeout::default().window;
    let later = hung + window - ms(1);
    assert_eq!(
        learner.judge(later, Outcome::Overload, value, Given::Learned),
        Outcome::Overload
    );
    let later = later + window - ms(1);
    assert_eq!(
        learner.judge(later, Outcome::Overload, value, Given::Learned),
        Outcome::Overload
    );
    // …and lapses a window after the last.
    let after = later + window;
    assert_eq!(
        learner.judge(after, Outcome::Overload, value, Given::Learned),
        Outcome::Ignore
    );
}

#[test]
fn a_call_given_the_ceiling_that_answers_past_the_timeout_clears_the_evidence_of_hangs() {
    let t0 = Instant::now();
    let (mut learner, at) = learned_100ms(t0);
    let value = learner.value().unwrap();
    learner.judge(at, Outcome::Overload, ms(15_000), Given::Ceiling);
    assert_eq!(
        learner.judge(at, Outcome::Overload, value, Given::Learned),
        Outcome::Overload
    );
    // One answers in 2 s: the dependency slowed down, it does not hang.
    let slow = ms(2_000);
    assert_eq!(
        learner.judge(at, Outcome::Success, slow, Given::Ceiling),
        Outcome::Success
    );
    assert_eq!(
        learner.judge(at, Outcome::Overload, value, Given::Learned),
        Outcome::Ignore
    );
    // Successes and ignored calls are told as they are, whatever the
    // evidence; and nothing is judged before a timeout is learned.
    assert_eq!(
        learner.judge(at, Outcome::Ignore, value, Given::Learned),
        Outcome::Ignore
    );
    let mut fresh = Learner::new(LearnedTimeout::default(), t0, None);
    assert_eq!(
        fresh.judge(t0, Outcome::Overload, slow, Given::Learned),
        Outcome::Overload
    );
}

#[test]
fn a_call_that_kept_its_own_timeout_is_told_as_it_ended_and_stands_only_for_itself() {
    let t0 = Instant::now();
    let (mut learner, at) = learned_100ms(t0);
    let value = learner.value().unwrap();
    // It hung to its caller's 5 s: a failure, as a typed timeout's
    // expiry is, and evidence that calls this slow do not answer.
    assert_eq!(
        learner.judge(at, Outcome::Overload, ms(5_000), Given::Own),
        Outcome::Overload
    );
    assert_eq!(
        learner.judge(at, Outcome::Overload, value, Given::Learned),
        Outcome::Overload
    );
    // One that answers past the learned timeout clears that evidence…
    assert_eq!(
        learner.judge(at, Outcome::Success, ms(300), Given::Own),
        Outcome::Success
    );
    assert_eq!(
        learner.judge(at, Outcome::Overload, value, Given::Learned),
        Outcome::Ignore
    );
    // …and is recorded once: calls like it are never cut (nor are its
    // expiries cuts of the learned timeout).
    let seen = learner.seen;
    learner.tell(at, Outcome::Overload, ms(5_000), Given::Own);
    learner.tell(at, Outcome::Success, ms(300), Given::Own);
    assert_eq!(learner.seen.0 + learner.seen.1, seen.0 + seen.1 + 1);
    // One given the ceiling stands for the calls the timeout cut, 99
    // at most.
    for _ in 0..150 {
        learner.tell(at, Outcome::Overload, value, Given::Learned);
    }
    learner.tell(at, Outcome::Success, ms(300), Given::Ceiling);
    assert_eq!(learner.seen.0 + learner.seen.1, seen.0 + seen.1 + 1 + 100);
}

#[test]
fn the_learned_value_stays_above_the_floor_and_is_none_at_the_ceiling() {
    let t0 = Instant::now();
    let config = LearnedTimeout::new(ms(300)).floor(ms(20));
    let mut fast = Learner::new(config, t0, None);
    fed(&mut fast, t0, 200, Duration::from_micros(100));
    assert_eq!(fast.value(), Some(ms(20)));
    // Twice 140 ms is within the ceiling; twice 250 ms is not, and
    // reaching the ceiling learns nothing shorter than it.
    let mut below = Learner::new(config, t0, None);
    fed(&mut below, t0, 200, ms(140));
    assert!(below.value().is_some_and(|v| v > ms(280) && v < ms(300)));
    let mut slow = Learner::new(config, t0, None);
    fed(&mut slow, t0, 200, ms(250));
    assert_eq!(slow.value(), None);
}
