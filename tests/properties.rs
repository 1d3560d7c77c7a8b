//! Invariants over arbitrary sequences of operations.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use rheostat::Admission;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::{Aimd, AimdConfig, Algorithm, Fixed, Published, Sample};
use rheostat::{clock::ManualClock, limiter::Sharding, Limiter, Outcome, RejectReason};

/// A policy whose limit is either fixed-and-settable or AIMD, and which counts
/// the samples it is given.
struct Counted {
    inner: Inner,
    samples: Arc<AtomicU64>,
}

enum Inner {
    Fixed(Fixed),
    Aimd(Aimd),
}

impl Algorithm for Counted {
    fn name(&self) -> &'static str {
        "counted"
    }
    fn publish(&self) -> Published {
        Published::new(match &self.inner {
            Inner::Fixed(f) => f.publish().gate,
            Inner::Aimd(a) => a.publish().gate,
        })
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.samples.fetch_add(1, Ordering::SeqCst);
        match &mut self.inner {
            Inner::Fixed(f) => f.on_sample(now, sample),
            Inner::Aimd(a) => a.on_sample(now, sample),
        }
    }
}

/// An operation; `true` runs it on a thread of its own, which, with
/// parking per core, takes another shard than the test's thread.
#[derive(Clone, Debug)]
enum Op {
    Acquire(bool),
    AcquireOwned(bool),
    Record(usize, Outcome, bool),
    /// One attempt of a held call ends; the call keeps its slot.
    Attempt(usize, Outcome, bool),
    Drop(usize, bool),
    SetLimit(u32),
    Advance(u64),
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Success),
        Just(Outcome::Overload),
        Just(Outcome::Ignore)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<bool>().prop_map(Op::Acquire),
        1 => any::<bool>().prop_map(Op::AcquireOwned),
        3 => (any::<usize>(), outcome(), any::<bool>()).prop_map(|(i, o, t)| Op::Record(i, o, t)),
        1 => (any::<usize>(), outcome(), any::<bool>()).prop_map(|(i, o, t)| Op::Attempt(i, o, t)),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(i, t)| Op::Drop(i, t)),
        1 => (0u32..12).prop_map(Op::SetLimit),
        1 => prop_oneof![Just(0u64), 1u64..10_000, Just(u64::MAX)].prop_map(Op::Advance),
    ]
}

enum Held<'a> {
    Borrowed(rheostat::Permit<&'a Limiter<Counted, ManualClock>>),
    Owned(rheostat::OwnedPermit<Counted, ManualClock>),
}

impl Held<'_> {
    fn record(self, outcome: Outcome) {
        match self {
            Held::Borrowed(p) => p.record(outcome),
            Held::Owned(p) => p.record(outcome),
        }
    }

    fn record_attempt(&mut self, outcome: Outcome) {
        match self {
            Held::Borrowed(p) => p.record_attempt(outcome),
            Held::Owned(p) => p.record_attempt(outcome),
        }
    }
}

/// Run `f` here, or on a thread of its own.
fn on<T: Send>(elsewhere: bool, f: impl FnOnce() -> T + Send) -> T {
    if elsewhere {
        std::thread::scope(|s| s.spawn(f).join().unwrap())
    } else {
        f()
    }
}

fn run(ops: Vec<Op>, aimd: bool, sharding: Sharding) -> Result<(), TestCaseError> {
    let samples = Arc::new(AtomicU64::new(0));
    let inner = if aimd {
        Inner::Aimd(
            Aimd::new(AimdConfig {
                initial: 4,
                min: 1,
                max: 10,
                timeout: Duration::from_millis(500),
                ..AimdConfig::default()
            })
            .unwrap(),
        )
    } else {
        Inner::Fixed(Fixed::new(3).unwrap())
    };
    let clock = ManualClock::new();
    let limiter = Arc::new(
        Limiter::builder(Counted {
            inner,
            samples: Arc::clone(&samples),
        })
        .clock(clock.clone())
        .sharding(sharding)
        .build()
        .unwrap(),
    );
    let mut held: Vec<Held<'_>> = Vec::new();
    let mut admitted = 0u64;
    let mut attempts = 0u64;
    for op in ops {
        let limit = limiter.gate().limit;
        match op {
            Op::Acquire(elsewhere) | Op::AcquireOwned(elsewhere) => {
                let result = if matches!(op, Op::Acquire(_)) {
                    on(elsewhere, || limiter.try_acquire().map(Held::Borrowed))
                } else {
                    on(elsewhere, || {
                        Admission::new(Arc::clone(&limiter))
                            .try_acquire()
                            .map(Held::Owned)
                    })
                };
                match result {
                    Ok(p) => {
                        admitted += 1;
                        held.push(p);
                        prop_assert!(
                            limiter.in_flight() <= limit,
                            "admitted to {} in flight over a limit of {}",
                            limiter.in_flight(),
                            limit
                        );
                    }
                    Err(r) => {
                        prop_assert_eq!(r.reason(), RejectReason::LimitReached);
                        prop_assert!(held.len() as u32 >= limit);
                    }
                }
            }
            Op::Record(i, outcome, elsewhere) if !held.is_empty() => {
                let p = held.swap_remove(i % held.len());
                on(elsewhere, || p.record(outcome));
            }
            Op::Attempt(i, outcome, elsewhere) if !held.is_empty() => {
                let n = held.len();
                let p = &mut held[i % n];
                on(elsewhere, || p.record_attempt(outcome));
                attempts += 1;
            }
            Op::Drop(i, elsewhere) if !held.is_empty() => {
                let p = held.swap_remove(i % held.len());
                on(elsewhere, || drop(p));
            }
            Op::SetLimit(n) => {
                let r = limiter.update(|c| match &mut c.inner {
                    Inner::Fixed(f) => f.set_limit(n).map(|_| ()),
                    Inner::Aimd(_) => Ok(()),
                });
                prop_assert_eq!(r.is_err(), n == 0 && !aimd);
            }
            Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Op::Record(..) | Op::Attempt(..) | Op::Drop(..) => {}
        }
        prop_assert_eq!(limiter.in_flight() as usize, held.len());
        let gate = limiter.gate();
        prop_assert!(!gate.admit_probability.is_nan());
    }
    drop(held);
    prop_assert_eq!(limiter.in_flight(), 0);
    prop_assert_eq!(
        samples.load(Ordering::SeqCst),
        admitted + attempts,
        "every admitted permit released exactly once, every attempt learnt once"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn in_flight_never_exceeds_a_fixed_limit_and_each_permit_releases_once(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, false, Sharding::Off)?;
    }

    #[test]
    fn in_flight_never_exceeds_an_aimd_limit_and_each_permit_releases_once(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, true, Sharding::Off)?;
    }

    #[test]
    fn with_slots_parked_per_core_in_flight_never_exceeds_a_fixed_limit(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, false, Sharding::Always)?;
    }

    #[test]
    fn with_slots_parked_per_core_in_flight_never_exceeds_an_aimd_limit(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, true, Sharding::Always)?;
    }
}

#[test]
fn threads_hammering_one_limiter_never_exceed_its_limit() {
    const LIMIT: u32 = 4;
    let limiter = Arc::new(Limiter::new(Fixed::new(LIMIT).unwrap()));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let limiter = Arc::clone(&limiter);
            std::thread::spawn(move || {
                let mut admitted = 0u32;
                for i in 0..20_000u32 {
                    if let Ok(p) = limiter.try_acquire() {
                        admitted += 1;
                        assert!(limiter.in_flight() <= LIMIT);
                        match (i + t) % 3 {
                            0 => p.success(),
                            1 => p.overload(),
                            _ => drop(p),
                        }
                    }
                }
                admitted
            })
        })
        .collect();
    let admitted: u32 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(admitted > 0);
    assert_eq!(limiter.in_flight(), 0);
}

/// Threads that park and take back slots, and refusals that drain them,
/// against a limit that moves: calls really in flight (counted by the
/// callers themselves) never exceed the limit in force, and every slot
/// comes back.
#[test]
fn threads_parking_slots_per_core_never_exceed_the_limit() {
    use std::sync::atomic::AtomicU32;
    const LIMITS: [u32; 3] = [3, 6, 40];
    let limiter = Arc::new(
        Limiter::builder(Fixed::new(LIMITS[2]).unwrap())
            .sharding(Sharding::Always)
            .build()
            .unwrap(),
    );
    let running = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|t| {
            let (limiter, running, stop) = (
                Arc::clone(&limiter),
                Arc::clone(&running),
                Arc::clone(&stop),
            );
            std::thread::spawn(move || {
                let mut admitted = 0u64;
                let mut held = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    if let Ok(p) = limiter.try_acquire() {
                        admitted += 1;
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        // Never above the highest limit ever set.
                        assert!(now <= LIMITS[2], "{now} calls in flight");
                        held.push(p);
                    }
                    if held.len() > (i + t) as usize % 3 {
                        running.fetch_sub(1, Ordering::SeqCst);
                        held.pop().unwrap().success();
                    }
                }
                running.fetch_sub(held.len() as u32, Ordering::SeqCst);
                drop(held);
                admitted
            })
        })
        .collect();
    for round in 0..300 {
        let limit = LIMITS[round % LIMITS.len()];
        limiter.update(|f| f.set_limit(limit)).unwrap();
        std::thread::sleep(Duration::from_micros(200));
    }
    // Lowest limit last: nobody is admitted beyond it once it is in force.
    limiter.update(|f| f.set_limit(LIMITS[0])).unwrap();
    std::thread::sleep(Duration::from_millis(5));
    stop.store(true, Ordering::Relaxed);
    let admitted: u64 = callers.into_iter().map(|h| h.join().unwrap()).sum();
    assert!(admitted > 0);
    assert_eq!(limiter.in_flight(), 0);
    // Every slot is free again: parked or not, all of them can be taken.
    limiter.update(|f| f.set_limit(LIMITS[2])).unwrap();
    let all: Vec<_> = (0..LIMITS[2])
        .map(|_| limiter.try_acquire().unwrap())
        .collect();
    assert!(limiter.try_acquire().is_err());
    drop(all);
}
