//! A circuit breaker that steps out of a failing dependency's way and, just
//! as carefully, lets it back in.
//!
//! [`Breaker`] trips on a failure rate and/or a slow-call rate over a count
//! or time window once a minimum call volume is reached; stays open for a
//! jittered cooldown that grows with each failed recovery up to a cap; then
//! judges recovery on several probes (or a share of traffic) that callers may
//! give a longer timeout, with a probe timeout so it can never stick
//! half-open; and after closing ramps admission back up instead of sending
//! everything at once. A probe allowance can be scaled down by fleet size,
//! and it can be forced open or closed, disabled, or run as a witness that
//! only reports.
//!
//! [`BreakerConfig::recommended`] (the default) and
//! [`BreakerConfig::classic`] (the breaker of the incident in the seed
//! documents) are the two presets.
//!
//! # Examples
//!
//! ```
//! use std::time::{Duration, Instant};
//! use rheostat_algorithms::{Algorithm, BreakerState, Outcome, Sample};
//! use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
//!
//! let mut breaker = Breaker::new(BreakerConfig::recommended())?;
//! let t0 = Instant::now();
//! for _ in 0..20 {
//!     breaker.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(5), 1));
//! }
//! assert_eq!(breaker.state(), BreakerState::Open);
//! // A rejection can say how long until the next probe.
//! let retry_after = breaker.gate().until.map(|u| u - t0);
//! assert!(retry_after.is_some_and(|d| d > Duration::from_secs(7) && d <= Duration::from_secs(10)));
//! # Ok::<(), rheostat_algorithms::ConfigError>(())
//! ```

mod config;
mod policy;
mod settings;
mod stats;

pub use config::{
    BreakerConfig, BreakerWindow, Cooldown, HalfOpen, MAX_COOLDOWN_FACTOR, MAX_FLEET_SIZE,
    MAX_PROBES, MAX_WINDOW_BUCKETS, MAX_WINDOW_CALLS, MIN_BUCKET_WIDTH,
};
pub use policy::Breaker;
pub use stats::WindowStats;
