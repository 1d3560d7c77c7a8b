//! The recommended configuration, at its defaults, in front of a real hyper
//! server on loopback that browns out, goes down and comes back cold —
//! beside the same run with no limit at all.
//!
//! ```sh
//! cargo test --release --test http_defaults -- --ignored --nocapture
//! ```
//!
//! The server has 20 workers of 50 ms (400 calls/s). Phases: healthy for
//! 10 s; a brownout to 40% of its workers (160 calls/s, 8 calls in flight)
//! for 20 s; connections refused for 10 s; then back cold, each of its first
//! 100 answers taking 1.5–3 s, until the end at 70 s. The client sends 250
//! calls/s, open loop, each with an 800 ms timeout, through the tower layer.
//!
//! Asserts, for the recommended configuration (`policy = "recommended"`:
//! `Aimd` with `AimdConfig::recommended`; `RHEOSTAT_HTTP_POLICY=aimd`,
//! `gradient`, `vegas` or `breaker+gradient` runs another at its defaults
//! in its place): in the brownout (from 2 s in) at least 0.9 of the
//! capacity served, and a mean in-flight of at most 1.5 × the 8 the
//! capacity needs; after the cold start, back to 90% of calls answered
//! within 10 s of the run without a limiter (issue 15 showed that no later
//! than it cannot be had beside the brownout's in-flight bound: that run
//! warms the server by flooding it). Each run takes 70 s of real time, so
//! the test is ignored by default and CI does not run it.
//! `docs/results.md`'s "A real HTTP dependency" has the measured figures.

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

use std::sync::Arc;
use std::time::{Duration, Instant};

use brownout::{Dependency, Phase, Server};
use rheostat::algorithms::breaker::BreakerConfig;
use rheostat::algorithms::{AimdConfig, GradientConfig, VegasConfig, MAX_LIMIT};
use rheostat::config::PolicyConfig;
use rheostat::{DynLimiter, Limiter};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

const RUN: u64 = 70;
const BROWNOUT: (u64, u64) = (10, 30);
const COLD: u64 = 40;
/// What the brownout leaves: 8 workers of 50 ms.
const BROWNOUT_CAPACITY: f64 = 160.0;
const BROWNOUT_CONCURRENCY: f64 = 8.0;

/// What one run measured, second by second.
struct Run {
    seconds: Vec<brownout::Second>,
    /// The limiter's in-flight count, sampled every 50 ms, per second.
    in_flight: Vec<Vec<u32>>,
    /// Requests the server gave a worker, in each second.
    started: Vec<u64>,
}

async fn run(limiter: DynLimiter) -> Run {
    let start = Instant::now();
    let server = Server::start(
        Dependency {
            workers: 20,
            degraded_workers: 8,
            service_time: Duration::from_millis(50),
            cold_service_time: Duration::from_millis(1500),
            cold_service_time_max: Duration::from_millis(3000),
            warm_after: 100,
        },
        vec![
            (secs(0), Phase::Normal),
            (secs(BROWNOUT.0), Phase::Degraded),
            (secs(BROWNOUT.1), Phase::Refusing),
            (secs(COLD), Phase::ColdStart),
        ],
        start,
    )
    .unwrap();
    let limiter = Arc::new(limiter);
    let server = Arc::new(server);
    let sampler = {
        let limiter = Arc::clone(&limiter);
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            let mut samples = vec![Vec::new(); RUN as usize + 1];
            let mut started = vec![0; RUN as usize + 1];
            let mut tick = tokio::time::interval(Duration::from_millis(50));
            while start.elapsed() < secs(RUN) {
                tick.tick().await;
                let s = start.elapsed().as_secs() as usize;
                if let Some(slot) = samples.get_mut(s) {
                    slot.push(limiter.in_flight());
                }
                if let Some(slot) = started.get_mut(s) {
                    *slot = server.started();
                }
            }
            (samples, started)
        })
    };
    let service = brownout::client(Arc::clone(&limiter), Duration::from_millis(800), None);
    let records = brownout::drive(
        service,
        server.addr(),
        Duration::from_millis(4),
        server.start_instant(),
        secs(RUN),
    )
    .await;
    let (in_flight, totals) = sampler.await.unwrap();
    let started = totals
        .iter()
        .scan(0, |before, &total| {
            let in_second = total.saturating_sub(*before);
            *before = total.max(*before);
            Some(in_second)
        })
        .collect();
    Run {
        seconds: brownout::seconds(&records),
        in_flight,
        started,
    }
}

fn print(name: &str, run: &Run) {
    println!("{name}");
    for (i, s) in run.seconds.iter().enumerate() {
        let flights = run.in_flight.get(i).cloned().unwrap_or_default();
        let mean = flights.iter().map(|&n| f64::from(n)).sum::<f64>() / flights.len().max(1) as f64;
        let started = run.started.get(i).copied().unwrap_or(0);
        println!(
            "{i:>2}s {:<17} sent {:>4} ok {:>4} errors {:>4} rejected {:>4} in flight {:>5.1} server started {:>4} p50 {:>7.1?} p99 {:>7.1?}",
            phase_name(i as u64),
            s.sent, s.ok, s.errors, s.rejected, mean, started, s.p50, s.p99
        );
    }
}

fn phase_name(second: u64) -> &'static str {
    if second < BROWNOUT.0 {
        "healthy"
    } else if second < BROWNOUT.1 {
        "brownout (40%)"
    } else if second < COLD {
        "refused"
    } else {
        "back, cold start"
    }
}

/// The first second after the cold start from which every second to the
/// end has at least 90% of its calls answered.
fn back_at(run: &Run) -> Option<u64> {
    let last = (RUN - 1) as usize;
    (COLD as usize..last)
        .find(|&from| {
            run.seconds[from..last]
                .iter()
                .all(|s| s.sent > 0 && s.ok as f64 >= 0.9 * s.sent as f64)
        })
        .map(|s| s as u64)
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "two runs of 70 s of real time; use --release"]
async fn the_recommended_configuration_at_its_defaults_rides_out_a_brownout_an_outage_and_a_cold_start(
) {
    // The README's recommendation; RHEOSTAT_HTTP_POLICY runs another
    // policy at its defaults in its place, to compare.
    let name = std::env::var("RHEOSTAT_HTTP_POLICY").unwrap_or_else(|_| "recommended".into());
    let recommended = match name.as_str() {
        "breaker+gradient" => PolicyConfig::Stack {
            members: vec![
                PolicyConfig::Breaker(BreakerConfig::recommended()),
                PolicyConfig::Gradient(GradientConfig::default()),
            ],
        },
        "gradient" => PolicyConfig::Gradient(GradientConfig::default()),
        "vegas" => PolicyConfig::Vegas(VegasConfig::default()),
        "aimd" => PolicyConfig::Aimd(AimdConfig::default()),
        _ => PolicyConfig::Recommended,
    };
    let guarded = run(Limiter::new(recommended.build().unwrap())).await;
    print(&format!("{name}, at its defaults"), &guarded);
    let none = run(Limiter::new(
        PolicyConfig::Fixed { limit: MAX_LIMIT }.build().unwrap(),
    ))
    .await;
    print("no limit", &none);

    let brownout = (BROWNOUT.0 + 2) as usize..BROWNOUT.1 as usize;
    let served: f64 = guarded.seconds[brownout.clone()]
        .iter()
        .map(|s| s.ok as f64)
        .sum::<f64>()
        / brownout.len() as f64;
    let samples: Vec<u32> = guarded.in_flight[brownout]
        .iter()
        .flatten()
        .copied()
        .collect();
    let in_flight = samples.iter().map(|&n| f64::from(n)).sum::<f64>() / samples.len() as f64;
    let (back, back_without) = (back_at(&guarded), back_at(&none));
    println!(
        "brownout: {served:.0} calls/s served of {BROWNOUT_CAPACITY} ({:.2}), mean in-flight {in_flight:.1} (capacity needs {BROWNOUT_CONCURRENCY}); \
         back to 90% answered at {back:?} s, without a limit at {back_without:?} s",
        served / BROWNOUT_CAPACITY
    );
    assert!(served >= 0.9 * BROWNOUT_CAPACITY, "{served}");
    assert!(in_flight <= 1.5 * BROWNOUT_CONCURRENCY, "{in_flight}");
    let back_without = back_without.expect("the run without a limit recovers");
    assert!(
        back.is_some_and(|b| b <= back_without + 10),
        "{back:?} vs {back_without}"
    );
}
