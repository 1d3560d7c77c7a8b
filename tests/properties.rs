//! Invariants over arbitrary sequences of operations.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat::algorithms::{Aimd, AimdConfig, Algorithm, Fixed, Gate, Sample};
use rheostat::{Limiter, ManualClock, Outcome, RejectReason};

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
    fn gate(&self) -> Gate {
        match &self.inner {
            Inner::Fixed(f) => f.gate(),
            Inner::Aimd(a) => a.gate(),
        }
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        self.samples.fetch_add(1, Ordering::SeqCst);
        match &mut self.inner {
            Inner::Fixed(f) => f.on_sample(now, sample),
            Inner::Aimd(a) => a.on_sample(now, sample),
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Acquire,
    AcquireOwned,
    Record(usize, Outcome),
    Drop(usize),
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
        4 => Just(Op::Acquire),
        1 => Just(Op::AcquireOwned),
        3 => (any::<usize>(), outcome()).prop_map(|(i, o)| Op::Record(i, o)),
        1 => any::<usize>().prop_map(Op::Drop),
        1 => (0u32..12).prop_map(Op::SetLimit),
        1 => prop_oneof![Just(0u64), 1u64..10_000, Just(u64::MAX)].prop_map(Op::Advance),
    ]
}

enum Held<'a> {
    Borrowed(rheostat::Permit<'a, Counted, ManualClock>),
    Owned(rheostat::OwnedPermit<Counted, ManualClock>),
}

impl Held<'_> {
    fn record(self, outcome: Outcome) {
        match self {
            Held::Borrowed(p) => p.record(outcome),
            Held::Owned(p) => p.record(outcome),
        }
    }
}

fn run(ops: Vec<Op>, aimd: bool) -> Result<(), TestCaseError> {
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
    let limiter = Arc::new(Limiter::with_clock(
        Counted {
            inner,
            samples: Arc::clone(&samples),
        },
        clock.clone(),
    ));
    let mut held: Vec<Held<'_>> = Vec::new();
    let mut admitted = 0u64;
    for op in ops {
        let limit = limiter.gate().limit;
        match op {
            Op::Acquire | Op::AcquireOwned => {
                let result = if matches!(op, Op::Acquire) {
                    limiter.try_acquire().map(Held::Borrowed)
                } else {
                    limiter.try_acquire_owned().map(Held::Owned)
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
            Op::Record(i, outcome) if !held.is_empty() => {
                let p = held.swap_remove(i % held.len());
                p.record(outcome);
            }
            Op::Drop(i) if !held.is_empty() => {
                drop(held.swap_remove(i % held.len()));
            }
            Op::SetLimit(n) => {
                let r = limiter.update(|c| match &mut c.inner {
                    Inner::Fixed(f) => f.set_limit(n).map(|_| ()),
                    Inner::Aimd(_) => Ok(()),
                });
                prop_assert_eq!(r.is_err(), n == 0 && !aimd);
            }
            Op::Advance(ms) => clock.advance(Duration::from_millis(ms)),
            Op::Record(..) | Op::Drop(_) => {}
        }
        prop_assert_eq!(limiter.in_flight() as usize, held.len());
        let gate = limiter.gate();
        prop_assert!(!gate.admit_probability.is_nan());
    }
    drop(held);
    prop_assert_eq!(limiter.in_flight(), 0);
    prop_assert_eq!(
        samples.load(Ordering::SeqCst),
        admitted,
        "every admitted permit released exactly once"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn in_flight_never_exceeds_a_fixed_limit_and_each_permit_releases_once(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, false)?;
    }

    #[test]
    fn in_flight_never_exceeds_an_aimd_limit_and_each_permit_releases_once(
        ops in prop::collection::vec(op(), 0..200)
    ) {
        run(ops, true)?;
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
