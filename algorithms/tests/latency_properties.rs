//! Invariants of the latency-driven policies under any input: whatever the
//! samples (zero, huge and repeated latencies, bursts of drops, ignored
//! calls, any in-flight count) and whatever the time steps (zero included),
//! the gate's limit stays within `[min, max]` and the learnt limit is never
//! NaN.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat_algorithms::window::{Aggregation, WindowConfig};
use rheostat_algorithms::{
    Algorithm, Gradient, GradientConfig, Outcome, Sample, Vegas, VegasConfig,
};

#[derive(Clone, Debug)]
enum Step {
    /// Time passes, then a call finishes, `repeat` times in a row.
    Call {
        advance: Duration,
        sample: Sample,
        repeat: u8,
    },
    /// Time passes and the runtime fires the policy's timer if due.
    Tick { advance: Duration },
}

fn latency() -> impl Strategy<Value = Duration> {
    prop_oneof![
        2 => Just(Duration::ZERO),
        2 => Just(Duration::MAX),
        1 => Just(Duration::from_nanos(1)),
        4 => (0u64..200).prop_map(Duration::from_millis),
        2 => any::<u64>().prop_map(Duration::from_nanos),
        1 => (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        4 => Just(Outcome::Success),
        3 => Just(Outcome::Overload),
        1 => Just(Outcome::Ignore),
    ]
}

fn in_flight() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1),
        Just(u32::MAX),
        0u32..2000,
        any::<u32>()
    ]
}

fn advance() -> impl Strategy<Value = Duration> {
    prop_oneof![
        3 => Just(Duration::ZERO),
        4 => (0u64..500).prop_map(Duration::from_millis),
        1 => (0u64..3600).prop_map(Duration::from_secs),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (advance(), outcome(), latency(), in_flight(), 1u8..=30).prop_map(
            |(advance, outcome, latency, in_flight, repeat)| Step::Call {
                advance,
                sample: Sample::new(outcome, latency, in_flight),
                repeat,
            }
        ),
        1 => advance().prop_map(|advance| Step::Tick { advance }),
    ]
}

fn window() -> impl Strategy<Value = WindowConfig> {
    (
        1u64..500,
        0u64..2000,
        1u32..30,
        prop_oneof![
            Just(Aggregation::Average),
            (0.01f64..=1.0).prop_map(Aggregation::Percentile),
        ],
        1u32..300,
    )
        .prop_map(
            |(min_ms, extra_ms, min_samples, aggregation, reservoir)| WindowConfig {
                min_duration: Duration::from_millis(min_ms),
                max_duration: Duration::from_millis(min_ms + extra_ms),
                min_samples,
                aggregation,
                reservoir,
            },
        )
}

/// `(min, initial, max)` with `min ≤ initial ≤ max`.
fn bounds() -> impl Strategy<Value = (u32, u32, u32)> {
    (1u32..100, 0u32..500, 0u32..500).prop_map(|(min, a, b)| {
        let (lo, hi) = (a.min(b), a.max(b));
        (min, min + lo, min + hi)
    })
}

fn vegas_config() -> impl Strategy<Value = VegasConfig> {
    (
        bounds(),
        window(),
        any::<bool>(),
        1u32..60,
        prop_oneof![Just(1.0), 0.01f64..1.0],
        any::<u64>(),
    )
        .prop_map(
            |((min, initial, max), window, slow_start, probe_interval, probe_factor, seed)| {
                VegasConfig {
                    initial,
                    min,
                    max,
                    slow_start,
                    probe_interval,
                    probe_factor,
                    seed,
                    window,
                    ..VegasConfig::default()
                }
            },
        )
}

fn gradient_config() -> impl Strategy<Value = GradientConfig> {
    (
        bounds(),
        window(),
        1.0f64..3.0,
        prop_oneof![Just(1.0), 0.01f64..1.0],
        0.0f64..50.0,
        1u32..1000,
    )
        .prop_map(
            |((min, initial, max), window, tolerance, smoothing, headroom, long_window)| {
                GradientConfig {
                    initial,
                    min,
                    max,
                    tolerance,
                    smoothing,
                    headroom,
                    long_window,
                    window,
                    ..GradientConfig::default()
                }
            },
        )
}

/// Drive `policy` through `steps`, checking after every event.
fn check<A: Algorithm>(
    policy: &mut A,
    min: u32,
    max: u32,
    raw: impl Fn(&A) -> f64,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let mut now = Instant::now();
    let verify = |policy: &A, now: Instant| -> Result<(), TestCaseError> {
        let limit = policy.publish().gate.limit;
        prop_assert!(
            (min..=max).contains(&limit),
            "gate {limit} outside [{min}, {max}]"
        );
        let raw = raw(policy);
        prop_assert!(!raw.is_nan(), "raw limit is NaN");
        prop_assert!(
            raw >= f64::from(min) && raw <= f64::from(max),
            "raw {raw} outside [{min}, {max}]"
        );
        if let Some(deadline) = policy.publish().wake_at {
            // A window that is due has been closed: the policy never asks
            // to be woken in the past.
            prop_assert!(deadline > now, "deadline before the latest event");
        }
        Ok(())
    };
    for step in steps {
        match step {
            Step::Call {
                advance,
                sample,
                repeat,
            } => {
                for _ in 0..*repeat {
                    now += *advance;
                    policy.on_sample(now, sample);
                    verify(policy, now)?;
                }
            }
            Step::Tick { advance } => {
                now += *advance;
                if let Some(deadline) = policy.publish().wake_at {
                    if deadline <= now {
                        policy.handle_timeout(deadline);
                    }
                }
                policy.handle_timeout(now);
                verify(policy, now)?;
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn vegas_keeps_its_limit_in_range_and_never_nan(
        config in vegas_config(),
        steps in prop::collection::vec(step(), 0..120),
    ) {
        let (min, max) = (config.min, config.max);
        let mut vegas = Vegas::new(config).expect("generated configs are valid");
        check(&mut vegas, min, max, Vegas::raw_limit, &steps)?;
    }

    #[test]
    fn gradient_keeps_its_limit_in_range_and_never_nan(
        config in gradient_config(),
        steps in prop::collection::vec(step(), 0..120),
    ) {
        let (min, max) = (config.min, config.max);
        let mut gradient = Gradient::new(config).expect("generated configs are valid");
        check(&mut gradient, min, max, Gradient::raw_limit, &steps)?;
    }
}
