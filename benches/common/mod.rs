//! What more than one bench builds the same way: `benches/overhead.rs`
//! here, and `sim/benches/peers.rs` by path.

use std::time::{Duration, Instant};

use rheostat::algorithms::breaker::Cooldown;
use rheostat::algorithms::{Breaker, BreakerConfig};
use rheostat::Limiter;

/// A default breaker tripped open for an hour, so that every call is
/// refused.
pub(crate) fn open_breaker() -> Limiter<Breaker> {
    let open = Limiter::new(
        Breaker::new(BreakerConfig {
            cooldown: Cooldown::Fixed(Duration::from_secs(3_600)),
            ..BreakerConfig::default()
        })
        .expect("valid"),
    );
    for _ in 0..20 {
        if let Ok(p) = open.try_acquire() {
            p.overload();
        }
    }
    assert!(open.try_acquire().is_err(), "the breaker must be open");
    open
}

/// How long `iters` calls of `call` take, one after another.
pub(crate) fn repeat(iters: u64, mut call: impl FnMut()) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        call();
    }
    start.elapsed()
}

/// The first three fields of `/proc/loadavg`, where there is one.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// Now, in UTC, as `2026-12-01T11:35Z`: when a summary's run ended.
pub(crate) fn utc_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace('T', " ")
}
