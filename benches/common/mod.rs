//! What more than one bench builds the same way.

use std::time::Duration;

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
