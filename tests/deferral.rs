//! Successes held for a latency policy without its lock (its
//! [`Deferral`]) change nothing it decides: a limiter that holds them
//! admits and refuses exactly as one whose policy hears of every call at
//! once, hands every held success over, in order, before the policy's next
//! event, and loses none when threads share it.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, Deferral, Gradient, GradientConfig, Published, Sample, Snapshot,
    Transition, Vegas, VegasConfig,
};
use rheostat::{
    clock::{Clock, ManualClock},
    limiter::Sharding,
    Limiter, Outcome,
};

/// Held successes are buffered once two threads have met on the policy's
/// lock; `Sharding::Always` sets the buffers up at once, for a test driven
/// from one thread.
const AT_ONCE: Sharding = Sharding::Always;

/// A policy that writes down every call it is told of, with the instant
/// it finished, and can be made to refuse deferral.
struct Told<P> {
    inner: P,
    defer: bool,
    log: Arc<Mutex<Vec<(Instant, Sample)>>>,
    count: Arc<AtomicU64>,
}

impl<P> Told<P> {
    fn new(inner: P, defer: bool) -> Self {
        Told {
            inner,
            defer,
            log: Arc::default(),
            count: Arc::default(),
        }
    }
}

impl<P: Algorithm> Algorithm for Told<P> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn publish(&self) -> Published {
        let inner = self.inner.publish();
        if self.defer {
            inner
        } else {
            inner.with_hints(inner.hints.with_deferral(None))
        }
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.log.lock().unwrap().push((now, *sample));
        self.inner.on_sample(now, sample);
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        self.inner.on_rejected(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
    }
    fn snapshot(&self) -> Snapshot {
        self.inner.snapshot()
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        self.inner.poll_transition()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A limiter over `policy` on `clock`, with `sharding`.
fn limiter<P: Algorithm>(
    policy: P,
    clock: &ManualClock,
    sharding: Sharding,
) -> Limiter<P, ManualClock> {
    Limiter::builder(policy)
        .clock(clock.clone())
        .sharding(sharding)
        .build()
        .unwrap()
}

/// One call that takes `latency` on `clock` and ends with `outcome`.
fn call<P: Algorithm>(
    limiter: &Limiter<P, ManualClock>,
    clock: &ManualClock,
    latency: Duration,
    outcome: Outcome,
) {
    let permit = limiter.try_acquire().unwrap();
    clock.advance(latency);
    permit.record(outcome);
}

#[test]
fn held_successes_reach_the_policy_in_order_before_its_next_event() {
    let clock = ManualClock::new();
    let policy = Told::new(Gradient::new(GradientConfig::default()).unwrap(), true);
    let log = Arc::clone(&policy.log);
    let limiter = limiter(policy, &clock, AT_ONCE);
    let call = |latency: u64, outcome: Outcome| call(&limiter, &clock, ms(latency), outcome);
    // The first call opens the window: told at once, it says when the
    // window may close.
    call(5, Outcome::Success);
    assert_eq!(log.lock().unwrap().len(), 1);
    let min = GradientConfig::default().window.min_duration;
    let deferral = limiter.update(|p| p.publish().hints.deferral);
    assert_eq!(
        deferral.map(|d| d.until.is_some()),
        Some(true),
        "an open window lets successes be held until it may close"
    );
    // Nine more successes before it may close: held, not told.
    for latency in 1..=9 {
        call(latency, Outcome::Success);
    }
    assert!(clock.now() < log.lock().unwrap()[0].0 + min);
    assert_eq!(log.lock().unwrap().len(), 1, "held without the lock");
    // A failure is not held: the nine go first, oldest first, then it.
    call(3, Outcome::Overload);
    let log = log.lock().unwrap();
    let latencies: Vec<u64> = log
        .iter()
        .map(|(_, s)| u64::try_from(s.latency.as_millis()).unwrap())
        .collect();
    assert_eq!(latencies, [5, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3]);
    assert_eq!(log.last().unwrap().1.outcome, Outcome::Overload);
    assert!(
        log.windows(2).all(|w| w[0].0 <= w[1].0),
        "each at its own instant"
    );
    assert_eq!(limiter.in_flight(), 0);
}

#[test]
fn a_success_after_the_window_may_close_is_told_at_once_with_those_held() {
    let clock = ManualClock::new();
    let policy = Told::new(Gradient::new(GradientConfig::default()).unwrap(), true);
    let (log, count) = (Arc::clone(&policy.log), Arc::clone(&policy.count));
    let limiter = limiter(policy, &clock, AT_ONCE);
    for _ in 0..20 {
        call(&limiter, &clock, ms(2), Outcome::Success);
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
    clock.advance(GradientConfig::default().window.min_duration);
    let permit = limiter.try_acquire().unwrap();
    permit.success();
    assert_eq!(count.load(Ordering::SeqCst), 21);
    assert_eq!(log.lock().unwrap().len(), 21);
}

#[test]
fn a_snapshot_hands_over_what_is_held() {
    let clock = ManualClock::new();
    let policy = Told::new(Vegas::new(VegasConfig::default()).unwrap(), true);
    let count = Arc::clone(&policy.count);
    let limiter = limiter(policy, &clock, AT_ONCE);
    for _ in 0..5 {
        call(&limiter, &clock, ms(1), Outcome::Success);
    }
    assert_eq!(count.load(Ordering::SeqCst), 1);
    let _ = limiter.snapshot();
    assert_eq!(count.load(Ordering::SeqCst), 5);
}

#[derive(Clone, Copy, Debug)]
enum Op {
    /// Acquire and record at once.
    Call(Outcome),
    /// Acquire and keep the permit.
    Hold,
    /// Record the oldest permit kept.
    Release(Outcome),
    /// Let time pass, in milliseconds.
    Advance(u64),
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        8 => Just(Outcome::Success),
        2 => Just(Outcome::Overload),
        1 => Just(Outcome::Ignore),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => outcome().prop_map(Op::Call),
        3 => Just(Op::Hold),
        3 => outcome().prop_map(Op::Release),
        3 => (0u64..120).prop_map(Op::Advance),
    ]
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Vegas,
    Gradient,
    Aimd,
}

fn policy(kind: Kind) -> Box<dyn Algorithm> {
    match kind {
        Kind::Vegas => Box::new(Vegas::new(VegasConfig::default()).unwrap()),
        Kind::Gradient => Box::new(Gradient::new(GradientConfig::default()).unwrap()),
        Kind::Aimd => Box::new(Aimd::new(AimdConfig::default()).unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn holding_successes_or_asking_nothing_after_them_changes_no_admission_and_no_limit(
        kind in prop_oneof![Just(Kind::Vegas), Just(Kind::Gradient), Just(Kind::Aimd)],
        ops in prop::collection::vec(op(), 1..600),
        buffered in any::<bool>(),
    ) {
        // With buffers, successes are held; without (one thread, never
        // contended), each is told at once and the policy is asked nothing
        // after it.
        let sharding = if buffered { AT_ONCE } else { Sharding::OnContention };
        let (clock_a, clock_b) = (ManualClock::new(), ManualClock::new());
        let held = Told::new(policy(kind), true);
        let told = Told::new(policy(kind), false);
        let (count_a, count_b) = (Arc::clone(&held.count), Arc::clone(&told.count));
        let a = limiter(held, &clock_a, sharding);
        let b = limiter(told, &clock_b, sharding);
        let (mut kept_a, mut kept_b) = (Vec::new(), Vec::new());
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Call(outcome) => {
                    let (x, y) = (a.try_acquire(), b.try_acquire());
                    prop_assert_eq!(x.is_ok(), y.is_ok(), "op {}", i);
                    if let (Ok(x), Ok(y)) = (x, y) {
                        x.record(outcome);
                        y.record(outcome);
                    }
                }
                Op::Hold => {
                    let (x, y) = (a.try_acquire(), b.try_acquire());
                    prop_assert_eq!(x.is_ok(), y.is_ok(), "op {}", i);
                    if let (Ok(x), Ok(y)) = (x, y) {
                        kept_a.push(x);
                        kept_b.push(y);
                    }
                }
                Op::Release(outcome) => {
                    if !kept_a.is_empty() {
                        kept_a.remove(0).record(outcome);
                        kept_b.remove(0).record(outcome);
                    }
                }
                Op::Advance(n) => {
                    clock_a.advance(ms(n));
                    clock_b.advance(ms(n));
                }
            }
            prop_assert_eq!(a.gate().limit, b.gate().limit, "op {}", i);
            prop_assert_eq!(a.in_flight(), b.in_flight(), "op {}", i);
        }
        drop((kept_a, kept_b));
        let (x, y) = (a.snapshot(), b.snapshot());
        prop_assert_eq!(x.raw_limit.map(f64::to_bits), y.raw_limit.map(f64::to_bits));
        prop_assert_eq!(count_a.load(Ordering::SeqCst), count_b.load(Ordering::SeqCst));
    }
}

#[test]
fn one_thread_alone_holds_nothing() {
    let clock = ManualClock::new();
    let policy = Told::new(Gradient::new(GradientConfig::default()).unwrap(), true);
    let count = Arc::clone(&policy.count);
    let limiter = limiter(policy, &clock, Sharding::OnContention);
    for _ in 0..5 {
        call(&limiter, &clock, ms(1), Outcome::Success);
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        5,
        "told at once: its lock is never contended"
    );
}

#[test]
fn threads_sharing_a_latency_limiter_lose_no_held_success() {
    hammer(Sharding::OnContention);
}

#[test]
fn threads_sharing_a_latency_limiter_with_slots_parked_per_core_lose_no_held_success() {
    hammer(Sharding::Always);
}

fn hammer(sharding: Sharding) {
    let policy = Told::new(Gradient::new(GradientConfig::default()).unwrap(), true);
    let count = Arc::clone(&policy.count);
    let limiter = Limiter::builder(policy).sharding(sharding).build().unwrap();
    let admitted = AtomicU64::new(0);
    std::thread::scope(|s| {
        for thread in 0..4u64 {
            let (limiter, admitted) = (&limiter, &admitted);
            s.spawn(move || {
                for i in 0..40_000u64 {
                    let Ok(permit) = limiter.try_acquire() else {
                        continue;
                    };
                    admitted.fetch_add(1, Ordering::SeqCst);
                    // Now and then a failure, told at once.
                    permit.record(if (i + thread) % 97 == 0 {
                        Outcome::Overload
                    } else {
                        Outcome::Success
                    });
                }
            });
        }
    });
    let _ = limiter.snapshot(); // hands over what is still held
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(
        count.load(Ordering::SeqCst),
        admitted.load(Ordering::SeqCst),
        "every admitted call is told to the policy once"
    );
}

#[test]
fn the_deferral_of_a_stack_is_what_every_member_allows() {
    let t0 = Instant::now();
    let a = Deferral::until(Some(t0 + ms(100)), Duration::MAX);
    let b = Deferral::until(None, ms(50));
    assert_eq!(a.meet(b), Deferral::until(Some(t0 + ms(100)), ms(50)));
    assert_eq!(Deferral::ALL.meet(a), a);
    // And at most the calls in flight every member allows.
    let c = Deferral::ALL.with_max_in_flight(4);
    assert_eq!(
        b.meet(c),
        Deferral::until(None, ms(50)).with_max_in_flight(4)
    );
    assert!(b.meet(c).within(&b) && b.meet(c).within(&c) && !b.within(&c));
}
