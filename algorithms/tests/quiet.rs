//! A success a policy lets be held whenever it finishes (a [`Deferral`]
//! with no `until`: a quiet success) changes nothing in it: whatever state
//! the policy is in, handing it such a success leaves its gate, its
//! unrounded limit and its next timeout as they were.
//!
//! `Aimd`'s Netflix mode has quiet successes; its latency mode (the default)
//! learns from every call and holds successes only until its window may
//! close, whatever state it is in.
//!
//! [`Deferral`]: rheostat_algorithms::Deferral

use std::time::{Duration, Instant};

use proptest::prelude::*;
use rheostat_algorithms::{Aimd, AimdConfig, AimdMode, Algorithm, Outcome, Sample};

#[derive(Clone, Debug)]
struct Step {
    outcome: u8,
    latency_ms: u64,
    in_flight: u32,
    gap_ms: u64,
}

fn step() -> impl Strategy<Value = Step> {
    (0u8..3, 0u64..8_000, 1u32..400, 0u64..2_000).prop_map(
        |(outcome, latency_ms, in_flight, gap_ms)| Step {
            outcome,
            latency_ms,
            in_flight,
            gap_ms,
        },
    )
}

fn outcome(code: u8) -> Outcome {
    match code {
        0 => Outcome::Success,
        1 => Outcome::Overload,
        _ => Outcome::Ignore,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_quiet_success_changes_nothing_in_aimd(
        initial in 1u32..300,
        span in 0u32..300,
        timeout_ms in 1u64..6_000,
        one_backoff_per_flight: bool,
        steps in prop::collection::vec(step(), 0..200),
        // Where in the quiet range the probing success falls, in [0, 1].
        at in 0.0f64..=1.0,
    ) {
        let mut aimd = Aimd::new(AimdConfig {
            mode: AimdMode::Netflix,
            initial,
            min: 1,
            max: initial + span,
            timeout: Duration::from_millis(timeout_ms),
            one_backoff_per_flight,
            ..AimdConfig::default()
        })
        .unwrap();
        let mut now = Instant::now();
        for s in &steps {
            now += Duration::from_millis(s.gap_ms);
            let sample = Sample::new(
                outcome(s.outcome),
                Duration::from_millis(s.latency_ms),
                s.in_flight,
            );
            aimd.on_sample(now, &sample);

            let quiet = aimd.publish().hints.deferral.unwrap();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "in range")]
            let (in_flight, latency) = (
                1 + ((f64::from(quiet.max_in_flight.saturating_sub(1).min(10_000)) * at) as u32),
                quiet.max_latency.mul_f64(at),
            );
            if quiet.max_in_flight == 0 {
                continue;
            }
            let before = (aimd.publish().gate, aimd.raw_limit(), aimd.publish().wake_at);
            let mut probed = aimd.clone();
            probed.on_sample(now, &Sample::new(Outcome::Success, latency, in_flight));
            prop_assert_eq!(
                (probed.publish().gate, probed.raw_limit(), probed.publish().wake_at),
                before,
                "a success after {:?} with {} in flight",
                latency,
                in_flight
            );
            // And at the very edge of both bounds.
            let mut edge = aimd.clone();
            edge.on_sample(
                now,
                &Sample::new(Outcome::Success, quiet.max_latency, quiet.max_in_flight),
            );
            prop_assert_eq!((edge.publish().gate, edge.raw_limit(), edge.publish().wake_at), before);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn the_latency_mode_of_aimd_calls_no_success_quiet(
        initial in 1u32..300,
        one_backoff_per_flight: bool,
        steps in prop::collection::vec(step(), 0..200),
    ) {
        let mut aimd = Aimd::new(AimdConfig {
            initial,
            min: 1,
            max: 300,
            one_backoff_per_flight,
            ..AimdConfig::default()
        })
        .unwrap();
        prop_assert!(aimd.publish().hints.deferral.is_none_or(|d| d.until.is_some()));
        let mut now = Instant::now();
        for s in &steps {
            now += Duration::from_millis(s.gap_ms);
            let sample = Sample::new(
                outcome(s.outcome),
                Duration::from_millis(s.latency_ms),
                s.in_flight,
            );
            aimd.on_sample(now, &sample);
            if let Some(deadline) = aimd.publish().wake_at {
                if deadline <= now {
                    aimd.handle_timeout(now);
                }
            }
            prop_assert!(aimd.publish().hints.deferral.is_none_or(|d| d.until.is_some()));
            let raw = aimd.raw_limit();
            prop_assert!(raw.is_finite() && (1.0..=300.0).contains(&raw), "{}", raw);
        }
    }
}

#[test]
fn just_past_either_bound_a_success_can_move_aimd() {
    let mut aimd = Aimd::new(AimdConfig {
        mode: AimdMode::Netflix,
        initial: 20,
        min: 1,
        max: 100,
        ..AimdConfig::default()
    })
    .unwrap();
    let quiet = aimd.publish().hints.deferral.unwrap();
    assert_eq!(quiet.max_in_flight, 9);
    let now = Instant::now();
    // Half the limit in flight: grows.
    aimd.on_sample(
        now,
        &Sample::new(Outcome::Success, Duration::from_millis(1), 10),
    );
    assert_eq!(aimd.publish().gate.limit, 21);
    // Slower than the timeout: backs off.
    aimd.on_sample(
        now,
        &Sample::new(
            Outcome::Success,
            quiet.max_latency + Duration::from_nanos(1),
            1,
        ),
    );
    assert_eq!(aimd.publish().gate.limit, 18);
}
