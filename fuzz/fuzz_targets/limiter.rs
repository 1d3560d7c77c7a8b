//! The runtime around any policy: arbitrary acquisitions, outcomes, drops,
//! clock steps (forward and back), policy swaps and timeouts through a
//! `Limiter` on a manual clock. In flight always equals the permits held,
//! every admission is released exactly once, and the published gate is
//! never NaN — with an observer (every call timed) or without one (the
//! limiter times, locks and batches successes only as the policy asks), and
//! with released slots parked per core or not.

#![no_main]
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rheostat::{clock::ManualClock, limiter::Sharding, Limiter, Observer, Outcome};
use rheostat_fuzz::{check_gate, outcome, PolicyArgs};

#[derive(Arbitrary, Debug)]
enum Op {
    Acquire,
    Record { which: u8, outcome: u8 },
    Drop { which: u8 },
    Advance(u32),
    AdvanceFar(Duration),
    SetElapsed(Duration),
    Timeout,
    Swap(Box<PolicyArgs>),
}

#[derive(Arbitrary, Debug)]
struct Input {
    policy: PolicyArgs,
    /// With an observer every call is timed; without one, the limiter
    /// times, locks and batches only as the policy asks.
    observe: bool,
    /// Park released slots per core at any limit (one shard here: one
    /// thread), or never.
    park: bool,
    ops: Vec<Op>,
}

#[derive(Default)]
struct Counts {
    admitted: AtomicU64,
    finished: AtomicU64,
}

impl Observer for Counts {
    fn admitted(&self, _in_flight: u32, _probe: bool) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }
    fn finished(&self, _outcome: Outcome, _latency: Duration, _in_flight: u32) {
        self.finished.fetch_add(1, Ordering::Relaxed);
    }
}

fuzz_target!(|input: Input| {
    let Ok(built) = input.policy.build() else {
        return;
    };
    let clock = ManualClock::new();
    let counts = Arc::new(Counts::default());
    let builder = Limiter::builder(built.into_boxed().0)
        .clock(clock.clone())
        .sharding(if input.park {
            Sharding::Always
        } else {
            Sharding::Off
        });
    let builder = if input.observe {
        builder.observer(Arc::clone(&counts))
    } else {
        builder
    };
    let Ok(limiter) = builder.build() else {
        return;
    };
    let mut held = Vec::new();
    for op in input.ops.iter().take(2000) {
        match op {
            Op::Acquire => {
                if let Ok(permit) = limiter.try_acquire() {
                    assert!(permit.in_flight_at_start() >= 1);
                    held.push(permit);
                }
            }
            Op::Record { which, outcome: o } => {
                if !held.is_empty() {
                    let i = usize::from(*which) % held.len();
                    held.swap_remove(i).record(outcome(*o));
                }
            }
            Op::Drop { which } => {
                if !held.is_empty() {
                    let i = usize::from(*which) % held.len();
                    drop(held.swap_remove(i));
                }
            }
            Op::Advance(us) => clock.advance(Duration::from_micros(u64::from(*us))),
            Op::AdvanceFar(d) => clock.advance(*d),
            Op::SetElapsed(d) => clock.set_elapsed(*d),
            Op::Timeout => {
                let _ = limiter.wake_at();
                limiter.wake();
                let _ = limiter.readiness();
            }
            Op::Swap(args) => {
                if let Ok(next) = args.build() {
                    limiter.update(|p| *p = next.into_boxed().0);
                }
            }
        }
        assert_eq!(limiter.in_flight() as usize, held.len());
        let gate = limiter.gate();
        assert!((0.0..=1.0).contains(&gate.admit_probability));
        limiter.update(|p| check_gate(p.as_ref()));
    }
    drop(held);
    assert_eq!(limiter.in_flight(), 0);
    assert_eq!(
        counts.admitted.load(Ordering::Relaxed),
        counts.finished.load(Ordering::Relaxed)
    );
});
