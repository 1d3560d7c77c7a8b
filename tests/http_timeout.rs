//! The learned attempt timeout over real HTTP: the example
//! `learned_timeout`'s two runs (`tests/support/hangs.rs`), shortened. A
//! hyper server on loopback answers every request in 20–40 ms for 3 s,
//! then never answers 30% of them; 200 workers call it at 100 requests a
//! second through the tower layer with the recommended policy, a typed
//! 15 s timeout in one run and `Timeout::learned(15 s)` in the other, side
//! by side, for 15 s.
//!
//! Asserts, with margins wide enough for a loaded machine, over the 12 s in
//! which requests hang: the learned run's goodput is at least the typed
//! run's; it holds several times fewer workers for each request answered;
//! its timeout in force, learned before the first hang, stays well below
//! 15 s to the end.
//!
//! Not asserted: how much of the 70 answerable requests a second the
//! learned run serves. Within seconds of the first hangs, the policy cuts
//! its limit towards its floor to see whether sending less cures a 30%
//! loss, and a request of the 1% given the ceiling that hangs meanwhile
//! holds a slot of the few left for 15 s: on some runs every slot, and
//! the learned run then serves nothing until it ends.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on the first surprise"
)]

#[path = "support/hangs.rs"]
mod hangs;

use std::time::Duration;

use hangs::Setup;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learned_timeout_keeps_the_goodput_a_typed_one_loses_to_hung_requests() {
    let setup = Setup {
        length: Duration::from_secs(15),
        healthy: Duration::from_secs(3),
        row_every: Duration::from_secs(1),
        ..Setup::default()
    };
    let [typed, learned] = hangs::compare(setup).await.unwrap();
    // Requests a second the server answers.
    let answerable = f64::from(setup.rate) * (1.0 - setup.hang);
    assert!(
        learned.goodput >= typed.goodput - 0.05 * answerable,
        "goodput: learned {:.1}/s, typed {:.1}/s",
        learned.goodput,
        typed.goodput
    );
    assert!(
        learned.held_per_answer() * 4.0 <= typed.held_per_answer(),
        "workers held per request answered a second: learned {:.3}, typed {:.3}",
        learned.held_per_answer(),
        typed.held_per_answer()
    );
    assert!(typed.rows.iter().all(|row| row.timeout == setup.ceiling));
    // Learned from the answers before the first hang, and kept: what timed
    // out taught it nothing.
    let hanging = learned
        .rows
        .iter()
        .filter(|row| row.elapsed > setup.healthy);
    for row in hanging {
        assert!(row.timeout <= Duration::from_secs(1), "{row:?}");
    }
    assert!(
        learned.timeout <= Duration::from_secs(1),
        "{:?}",
        learned.timeout
    );
    // The limit, not the pool, bounded the workers held.
    assert_eq!((typed.unsent, learned.unsent), (0, 0));
}
