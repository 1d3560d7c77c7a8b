//! A real hyper server on loopback browns out — capacity drop, outage
//! (503 at once, then refused connections), cold start — while a hyper
//! client calls it through the tower layer, in under 10 s of real time.
//!
//! Asserts: in-flight is never above the limit; while the server is down,
//! rejections come back fast (p99 under 1 ms); traffic returns after the
//! server recovers.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/brownout.rs"]
#[allow(
    dead_code,
    reason = "shared with the example, which uses parts this test does not"
)]
mod brownout;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use brownout::{Dependency, InFlightCheck, Phase, Result_, Server};
use rheostat::algorithms::breaker::{BreakerConfig, BreakerWindow, Cooldown, HalfOpen};
use rheostat::algorithms::AimdConfig;
use rheostat::config::PolicyConfig;
use rheostat::Limiter;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy() -> PolicyConfig {
    PolicyConfig::Stack {
        members: vec![
            PolicyConfig::Breaker(BreakerConfig {
                failure_rate: Some(0.5),
                window: BreakerWindow::Time {
                    length: Duration::from_secs(1),
                    buckets: 10,
                },
                min_calls: 10,
                cooldown: Cooldown::Fixed(ms(400)),
                cooldown_jitter: 0.0,
                half_open: HalfOpen::Probes {
                    probes: 3,
                    close_after: 2,
                },
                probe_concurrency: 3,
                probe_timeout: Duration::from_secs(2),
                ramp: ms(500),
                ramp_start: 0.2,
                ..BreakerConfig::recommended()
            }),
            PolicyConfig::Aimd(AimdConfig {
                initial: 8,
                min: 2,
                max: 16,
                backoff: 0.8,
                timeout: ms(100),
                one_backoff_per_flight: true,
                ..AimdConfig::default()
            }),
        ],
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_browning_out_server_is_shed_fast_while_down_and_served_again_after() {
    let start = Instant::now();
    let schedule = vec![
        (ms(0), Phase::Normal),
        (ms(1500), Phase::Degraded),
        (ms(3500), Phase::Outage),
        (ms(4750), Phase::Refusing),
        (ms(6000), Phase::ColdStart),
    ];
    let run = ms(8500);
    let server = Server::start(
        Dependency {
            workers: 16,
            degraded_workers: 3,
            service_time: ms(20),
            cold_service_time: ms(80),
            cold_service_time_max: ms(80),
            warm_after: 20,
        },
        schedule,
        start,
    )
    .unwrap();
    let check = Arc::new(InFlightCheck::default());
    let limiter = Arc::new(
        Limiter::builder(policy().build().unwrap())
            .name("brownout")
            .observer(Arc::clone(&check))
            .build()
            .unwrap(),
    );
    // No slow threshold in the classifier: a cold dependency's slow answers
    // are answers, and must close the breaker; AIMD sees their latency.
    let service = brownout::client(Arc::clone(&limiter), ms(1000), None);
    let records = brownout::drive(service, server.addr(), ms(4), server.start_instant(), run).await;
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );

    for (i, s) in brownout::seconds(&records).iter().enumerate() {
        println!(
            "{i:>2}s {:<17} sent {:>4} ok {:>4} errors {:>4} rejected {:>4} p50 {:>7.1?} p99 {:>7.1?}",
            server.phase_at(Duration::from_secs(i as u64) + ms(500)).name(),
            s.sent, s.ok, s.errors, s.rejected, s.p50, s.p99
        );
    }

    // In-flight never above the limit of the gate that admitted the call.
    let max = check.max_in_flight.load(Ordering::Relaxed);
    println!("max in flight {max}");
    assert_eq!(check.over_limit.load(Ordering::Relaxed), 0);
    assert!((1..=16).contains(&max), "{max}");

    // While down (after the breaker has had 0.5 s to see it), calls are
    // refused by the limiter, fast.
    let down: Vec<_> = records
        .iter()
        .filter(|r| r.sent > ms(4000) && r.sent < ms(6000))
        .collect();
    let mut rejected: Vec<Duration> = down
        .iter()
        .filter(|r| r.result == Result_::Rejected)
        .map(|r| r.latency)
        .collect();
    let share = rejected.len() as f64 / down.len() as f64;
    let p99 = brownout::percentile(&mut rejected, 0.99);
    println!(
        "while down: {} of {} rejected, p99 rejection latency {p99:?}",
        rejected.len(),
        down.len()
    );
    assert!(share > 0.8, "{share}");
    assert!(p99 < ms(1), "{p99:?}");
    assert!(down.iter().all(|r| server.phase_at(r.sent).is_down()));

    // Traffic returns: in the last second most calls are admitted and
    // answered.
    let last: Vec<_> = records
        .iter()
        .filter(|r| r.sent >= run - ms(1000))
        .collect();
    let ok = last
        .iter()
        .filter(|r| r.result == Result_::Answered(200))
        .count();
    println!("last second: {ok} of {} answered 200", last.len());
    assert!(
        ok as f64 > 0.5 * last.len() as f64,
        "{ok} of {}",
        last.len()
    );
    assert_eq!(limiter.in_flight(), 0);
}
