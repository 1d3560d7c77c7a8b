//! Hedged requests over real HTTP: a hyper server on loopback stalls 2% of
//! its requests for a second and answers the rest in 1–5 ms; GETs go to it
//! at 500 a second through the retrying tower layer over a hyper client,
//! under the recommended policy and a learned timeout, once without
//! hedging and once with `Hedge::default()` (sent when an attempt has run
//! for the p95 of recent successes, learned with the timeout). Each run
//! warms up until its limiter has learned, then measures 5,000 calls.
//!
//! ```sh
//! cargo run --release --example hedge --features http
//! cargo run --release --example hedge --features http -- --calls 20000 --rate 1000
//! ```
//!
//! Prints, for each run, the p50, p99 and p99.9 of the calls' latencies and
//! the slowest, the requests the server received per call, and what
//! became of the hedges: sent, won (the hedge answered first), lost,
//! refused (no free slot), not sent for congestion or an empty budget.

#[path = "../tests/support/stalls.rs"]
#[allow(
    dead_code,
    reason = "shared with the integration test, which reads what this example only prints"
)]
mod stalls;

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rheostat::algorithms::Aimd;
use rheostat::retry::{Hedge, RetryConfig};
use rheostat::tower::{HttpClassifier, RheostatLayer};
use rheostat::{Limiter, Timeout};
use stalls::{HedgeCounts, Server, Setup};
use tower::Layer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let setup = setup()?;
    let mut runs = Vec::new();
    for (name, hedge) in [("no hedge", None), ("hedged", Some(Hedge::default()))] {
        let server = Server::start(setup)?;
        let hedges = Arc::new(HedgeCounts::default());
        let limiter = Arc::new(
            Limiter::builder(Aimd::recommended())
                .timeout(Timeout::learned(Duration::from_secs(15)))
                .retry(RetryConfig {
                    hedge,
                    ..RetryConfig::default()
                })
                .observer(Arc::clone(&hedges))
                .build()?,
        );
        let client = RheostatLayer::new(Arc::clone(&limiter))
            .classify(HttpClassifier::new())
            .retry()
            .layer(Client::builder(TokioExecutor::new()).build_http());
        runs.push(stalls::measure(name, setup, &server, &limiter, &hedges, client).await?);
    }
    stalls::print(&setup, &[&runs[0], &runs[1]]);
    Ok(())
}

/// `--calls N` and `--rate N` over the defaults (which the limiters above
/// match: the recommended policy, a timeout learned under 15 s, and
/// `Hedge::default()`).
fn setup() -> Result<Setup, String> {
    let mut setup = Setup::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("`{flag}` needs a value"))?;
        let number = value
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=100_000).contains(n))
            .ok_or(format!(
                "invalid `{flag}`: found {value}, expected a whole number in [1, 100000]"
            ))?;
        match flag.as_str() {
            "--calls" => setup.calls = number,
            "--rate" => setup.rate = number,
            _ => {
                return Err(format!(
                    "unknown flag `{flag}`: expected `--calls N` or `--rate N`"
                ))
            }
        }
    }
    Ok(setup)
}
