//! Hedged requests over real HTTP: a hyper server on loopback stalls 2% of
//! its requests for a second and answers the rest in 1–5 ms
//! (`tests/support/stalls.rs`); GETs are sent to it at a steady pace
//! through the retrying tower layer over a hyper client.
//!
//! The quick test checks what hedging does, with a typed delay so that no
//! warm-up is needed, under a fixed limit: hedges are sent, won and lost,
//! every call is answered, and the requests stay within the retry budget.
//! It asserts no timing.
//!
//! The ignored test prints the figures, with and without hedging, the
//! delay learned (`Hedge::default()`: the p95 of recent successes); see
//! its documentation.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/stalls.rs"]
mod stalls;

use std::time::Duration;

use rheostat::retry::{Hedge, HedgeOutcome};
use rheostat::Timeout;
use stalls::{Policy, Setup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hedges_are_sent_beside_stalled_requests_within_the_budget_and_every_call_is_answered() {
    // A limit that never moves: no congestion keeps a hedge back.
    let setup = Setup {
        calls: 1_000,
        policy: Policy::Fixed(100),
        timeout: Timeout::Typed(Duration::from_secs(5)),
        hedge: Hedge::after(Duration::from_millis(50)),
        ..Setup::default()
    };
    let run = stalls::run("hedged", setup, Some(setup.hedge))
        .await
        .unwrap();
    stalls::print(&setup, &[&run]);
    // A typed delay is known at once: nothing to warm up.
    assert_eq!(run.warmup, 0);
    assert_eq!(run.latencies.len(), 1_000);
    assert_eq!(run.failed, 0, "every call answered 200");
    // About 20 requests stall (2%): each is hedged after 50 ms, and the
    // hedge, answered in a few milliseconds, wins.
    let sent = run.hedges(HedgeOutcome::Sent);
    let (won, lost) = (
        run.hedges(HedgeOutcome::Won),
        run.hedges(HedgeOutcome::Lost),
    );
    assert!(sent >= 5, "{sent} hedges sent");
    assert!(won >= 1, "{won} hedges won");
    assert_eq!(won + lost, sent, "each hedge sent is won or lost once");
    // Hedges and retries together: at most 20% of the calls plus 10 a
    // second over the 10 s window, the default budget.
    let bound = 1_000.0 * 1.2 + 100.0;
    assert!(
        (run.requests as f64) <= bound,
        "{} requests for 1,000 calls, bound {bound}",
        run.requests
    );
    assert!(run.requests >= 1_000, "{} requests", run.requests);
}

/// The figures, with and without hedging: 5,000 GETs at 500 a second
/// after a warm-up (until the limiter has learned its timeout and, for the
/// hedged run, its hedge delay), 2% of requests stalled 1 s; under the
/// recommended policy, then under a fixed limit of 1,000 (which never
/// sees congestion, so never keeps a hedge back, nor sheds a call). The
/// issue's goal: p99.9 under 200 ms, at most 5% extra requests. Asserted
/// here only loosely (hedges sent, the hedged tail below half the stall,
/// the requests within the budget); the printout says whether the goals
/// were met.
///
/// ```sh
/// cargo test --release --features http --test http_hedge -- --ignored --nocapture
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "prints figures: four runs of 5,000 calls, about 45 s"]
async fn hedging_cuts_the_tail_of_a_dependency_that_stalls_two_requests_in_a_hundred() {
    for policy in [Policy::Recommended, Policy::Fixed(1_000)] {
        let setup = Setup {
            policy,
            ..Setup::default()
        };
        let [plain, hedged] = stalls::compare(setup).await.unwrap();
        println!();
        assert_eq!(plain.hedges(HedgeOutcome::Sent), 0);
        assert!(hedged.hedges(HedgeOutcome::Sent) > 0, "{policy}");
        assert!(
            hedged.percentile(0.999) < setup.stall_for / 2,
            "{policy}: hedged p99.9 {:?}",
            hedged.percentile(0.999)
        );
        assert!(
            hedged.per_call() <= 1.2,
            "{policy}: {:.3}",
            hedged.per_call()
        );
    }
}
