//! A learned attempt timeout beside a typed one, over real HTTP: a hyper
//! server on loopback answers every request in 20–40 ms for 5 s, then never
//! answers 30% of them (a request that hangs holds its connection until
//! the client gives up); a pool of 200 workers calls it at 100 requests a
//! second through the tower layer over a hyper client, a worker held while
//! its request is in flight. Both runs use the recommended policy
//! (`Aimd::recommended()`) at its defaults and the same seed, rate and
//! length, side by side: one with a typed `timeout(15 s)`, one with
//! `Timeout::learned(15 s)` (its defaults).
//!
//! ```sh
//! cargo run --release --example learned_timeout --features http
//! cargo run --release --example learned_timeout --features http -- --secs 120
//! ```
//!
//! Prints, every 3 s, a row per run: the timeout in force
//! (`Limiter::timeouts().in_force`), the limiter's limit, the workers held
//! (mean and most over the interval) and, of them, those held by a request
//! the server is not answering (mean), the goodput (requests answered 200
//! a second), the requests timed out and refused a second. Then, for each
//! run from the first request that may hang to the end: the goodput, the
//! workers held, the workers held for each request answered a second, and
//! the learned run's figures against the typed run's.
//!
//! A hung request holds its worker until the timeout cuts it: 15 s typed;
//! learned, about twice the slowest answer in a thousand, but for the 1%
//! of requests given the ceiling so that slower answers stay in view.
//!
//! `--secs N` runs each for N seconds (30 by default), `--rate N` sends N
//! requests a second (100 by default), `--healthy N` answers every request
//! for the first N seconds (5 by default; with 0, requests hang from the
//! first, and hung requests may take every slot of the limit before 100
//! answers have taught the learner anything).

#[path = "../tests/support/hangs.rs"]
#[allow(
    dead_code,
    reason = "shared with the integration test, which reads what this example only prints"
)]
mod hangs;

use std::time::Duration;

use hangs::Setup;

/// `--secs N`, `--rate N` and `--healthy N`, over the defaults.
fn setup() -> Result<Setup, String> {
    let mut setup = Setup::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("`{flag}` needs a value"))?;
        let number = |range: std::ops::RangeInclusive<u64>| {
            value
                .parse::<u64>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or(format!(
                    "invalid `{flag}`: found {value}, expected a whole number in [{}, {}]",
                    range.start(),
                    range.end()
                ))
        };
        match flag.as_str() {
            "--secs" => setup.length = Duration::from_secs(number(1..=86_400)?),
            "--rate" => setup.rate = u32::try_from(number(1..=10_000)?).unwrap_or(100),
            "--healthy" => setup.healthy = Duration::from_secs(number(0..=86_400)?),
            _ => {
                return Err(format!(
                    "unknown flag `{flag}`: expected `--secs N`, `--rate N` or `--healthy N`"
                ))
            }
        }
    }
    if setup.healthy >= setup.length {
        return Err(format!(
            "invalid `--healthy`: found {}, expected fewer seconds than `--secs` ({})",
            setup.healthy.as_secs(),
            setup.length.as_secs()
        ));
    }
    Ok(setup)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let setup = setup()?;
    hangs::compare(setup).await?;
    Ok(())
}
