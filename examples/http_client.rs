//! A hyper client calling a real hyper server on loopback through the tower
//! layer, while the server browns out: a capacity drop, an outage (503 at
//! once, then refused connections), a cold start with slow answers.
//!
//! ```sh
//! cargo run --release --example http_client
//! ```
//!
//! Prints, for each second of the 20 s run, what the server was doing, how
//! many calls were sent, answered, failed and shed, and the latency of the
//! calls that were let through.

#[path = "../tests/support/brownout.rs"]
#[allow(
    dead_code,
    reason = "shared with the integration test, which uses parts this example does not"
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

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A breaker in front of an adaptive limit: the breaker steps out of the
    // way of an outage, AIMD finds the capacity left in a brownout.
    let policy = PolicyConfig::Stack {
        members: vec![
            PolicyConfig::Breaker(BreakerConfig {
                window: BreakerWindow::Time {
                    length: Duration::from_secs(2),
                    buckets: 20,
                },
                min_calls: 20,
                cooldown: Cooldown::Exponential {
                    base: ms(500),
                    factor: 2.0,
                    cap: Duration::from_secs(2),
                },
                half_open: HalfOpen::Probes {
                    probes: 5,
                    close_after: 4,
                },
                probe_timeout: Duration::from_secs(3),
                ramp: Duration::from_secs(2),
                ..BreakerConfig::recommended()
            }),
            PolicyConfig::Aimd(AimdConfig {
                initial: 10,
                min: 2,
                max: 32,
                backoff: 0.8,
                timeout: ms(100),
                one_backoff_per_flight: true,
                ..AimdConfig::default()
            }),
        ],
    };
    let check = Arc::new(InFlightCheck::default());
    let limiter = Arc::new(
        Limiter::builder(policy.build()?)
            .name("dependency")
            .observer(Arc::clone(&check))
            .build()?,
    );

    let start = Instant::now();
    let server = Server::start(
        Dependency {
            workers: 24,
            degraded_workers: 6,
            service_time: ms(30),
            cold_service_time: ms(150),
            cold_service_time_max: ms(150),
            warm_after: 30,
        },
        vec![
            (ms(0), Phase::Normal),
            (ms(4000), Phase::Degraded),
            (ms(8000), Phase::Outage),
            (ms(11_000), Phase::Refusing),
            (ms(13_000), Phase::ColdStart),
        ],
        start,
    )?;
    println!(
        "server on {}, 400 calls/s for 20 s through the limiter (breaker + AIMD)\n",
        server.addr()
    );
    let service = brownout::client(Arc::clone(&limiter), Duration::from_secs(1), None);
    let records = brownout::drive(
        service,
        server.addr(),
        Duration::from_micros(2500),
        start,
        Duration::from_secs(20),
    )
    .await;

    println!(
        "{:>4}  {:<17} {:>5} {:>9} {:>7} {:>9} {:>10} {:>10}",
        "sec", "server", "sent", "answered", "failed", "rejected", "p50", "p99"
    );
    for (i, s) in brownout::seconds(&records).iter().enumerate() {
        let phase = server.phase_at(Duration::from_secs(i as u64) + ms(500));
        println!(
            "{i:>4}  {:<17} {:>5} {:>9} {:>7} {:>9} {:>10.1?} {:>10.1?}",
            phase.name(),
            s.sent,
            s.ok,
            s.errors,
            s.rejected,
            s.p50,
            s.p99
        );
    }
    let mut shed_while_down: Vec<Duration> = records
        .iter()
        .filter(|r| server.phase_at(r.sent).is_down() && r.result == Result_::Rejected)
        .map(|r| r.latency)
        .collect();
    println!(
        "\nmost calls in flight: {} (admitted over the limit: {}); rejections while down: {}, p99 {:?}",
        check.max_in_flight.load(Ordering::Relaxed),
        check.over_limit.load(Ordering::Relaxed),
        shed_while_down.len(),
        brownout::percentile(&mut shed_while_down, 0.99),
    );
    Ok(())
}
