//! Arbitrary parameters, then arbitrary samples, admissions, rejections,
//! manual moves and clock steps (forward, far forward, backwards), fed to
//! any policy exactly as the runtime would. No panic, no NaN in a gate, an
//! adaptive limit never outside its bounds.

#![no_main]
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rheostat::algorithms::{Feedback, Outcome, Sample};
use rheostat_fuzz::{sample, Built, PolicyArgs, Time};

#[derive(Arbitrary, Debug)]
enum Op {
    /// A call that finished now after `latency`.
    Sample {
        outcome: u8,
        latency: Duration,
        in_flight: u32,
        probe: bool,
    },
    /// One of the calls admitted earlier finishes now.
    Finish { which: u8, outcome: u8 },
    /// A call arrives: asked about only while the gate probes, as the
    /// runtime does.
    Admit,
    /// The runtime refused `n` calls locally.
    Rejected(u16),
    /// Microseconds pass.
    Tick(u16),
    /// Seconds pass.
    Wait(u16),
    /// Any step forward, however large.
    Jump(Duration),
    /// The clock goes back.
    Back(Duration),
    /// The runtime applies a due timeout (or an early one).
    Timeout { early: bool },
    /// A breaker moved by hand, or a bulkhead resized.
    Manual(u8, u32),
    /// `n` successes handed over in one batch, if the policy allows
    /// batching now (as the runtime would).
    Batch(u32),
}

#[derive(Arbitrary, Debug)]
struct Input {
    policy: PolicyArgs,
    ops: Vec<Op>,
}

fuzz_target!(|input: Input| {
    let Ok(mut built) = input.policy.build() else {
        return;
    };
    let mut time = Time::new();
    let mut admitted: Vec<(Instant, bool)> = Vec::new();
    built.check();
    for op in input.ops.iter().take(2000) {
        let now = time.now;
        match *op {
            Op::Sample {
                outcome,
                latency,
                in_flight,
                probe,
            } => built
                .get_mut()
                .on_sample(now, &sample(outcome, latency, in_flight, probe)),
            Op::Finish { which, outcome } => {
                if !admitted.is_empty() {
                    let (start, probe) = admitted.swap_remove(usize::from(which) % admitted.len());
                    let latency = now.saturating_duration_since(start);
                    let in_flight = u32::try_from(admitted.len() + 1).unwrap_or(u32::MAX);
                    built
                        .get_mut()
                        .on_sample(now, &sample(outcome, latency, in_flight, probe));
                }
            }
            Op::Admit => {
                let gate = built.get().publish().gate.sanitized();
                let in_flight = u32::try_from(admitted.len()).unwrap_or(u32::MAX);
                if gate.limit > in_flight {
                    let go = !gate.probe || built.get_mut().on_admit(now);
                    if go && admitted.len() < 10_000 {
                        admitted.push((now, gate.probe));
                    }
                }
            }
            Op::Rejected(n) => built.get_mut().on_rejected(now, u64::from(n)),
            Op::Batch(n) => {
                let policy = built.get_mut();
                // Only while untimed successes may be held: the runtime
                // counts them then.
                let hints = policy.publish().hints;
                let untimed = Sample::new(Outcome::Success, Duration::ZERO, 1);
                let allowed = hints.feedback != Feedback::Timed
                    && hints.deferral.is_some_and(|d| d.covers(now, &untimed));
                if allowed {
                    policy.on_successes(now, u64::from(n));
                }
            }
            Op::Tick(us) => time.forward(Duration::from_micros(u64::from(us))),
            Op::Wait(s) => time.forward(Duration::from_secs(u64::from(s))),
            Op::Jump(d) => time.forward(d),
            Op::Back(d) => time.back(d),
            Op::Timeout { early } => {
                let policy = built.get_mut();
                if early || policy.publish().wake_at.is_some_and(|t| t <= now) {
                    policy.handle_timeout(now);
                }
            }
            Op::Manual(what, n) => match &mut built {
                Built::Breaker(b) => match what % 5 {
                    0 => b.force_open(now),
                    1 => b.force_closed(now),
                    2 => b.disable(now),
                    3 => b.metrics_only(now),
                    _ => b.reset(now),
                },
                Built::Fixed(f) => {
                    let before = f.limit();
                    if f.set_limit(n).is_err() {
                        assert_eq!(f.limit(), before);
                    }
                }
                _ => {}
            },
        }
        while built.get_mut().poll_transition().is_some() {}
        let _ = built.get().snapshot();
        built.check();
    }
});
