//! A circuit breaker that steps out of a failing dependency's way and, just
//! as carefully, lets it back in.
//!
//! [`Breaker`] trips on a failure rate and/or a slow-call rate over a count
//! or time window once a minimum call volume is reached, or, where traffic
//! is too sparse to reach it, on a run of failures; stays open for a
//! jittered cooldown that grows with the outage up to a cap (and starts over
//! when the dependency answers a probe); then judges recovery on several
//! probes (or a share of traffic), each given the probe timeout, so that a
//! dependency coming back slowly is not shut out and half-open can never
//! stick; and after closing ramps admission back up on evidence instead of
//! sending everything at once. A probe allowance can be scaled down by fleet
//! size, and it can be forced open or closed, disabled, or run as a witness
//! that only reports.
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
//! // Ten failures in a row, too few calls to judge a rate: the run opens it.
//! for _ in 0..10 {
//!     breaker.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(5), 1));
//! }
//! assert_eq!(breaker.state(), BreakerState::Open);
//! // A rejection can say how long until the next probe: the 5 s cooldown,
//! // jittered down by up to 20%.
//! let retry_after = breaker.publish().gate.until.map(|u| u - t0);
//! assert!(retry_after.is_some_and(|d| d >= Duration::from_secs(4) && d <= Duration::from_secs(5)));
//! # Ok::<(), rheostat_algorithms::ConfigError>(())
//! ```

mod config;
mod policy;
mod settings;
mod state;
mod stats;

pub use config::{
    BreakerConfig, BreakerWindow, Cooldown, HalfOpen, MAX_COOLDOWN_FACTOR, MAX_FLEET_SIZE,
    MAX_PROBES, MAX_WINDOW_BUCKETS, MAX_WINDOW_CALLS, MIN_BUCKET_WIDTH,
};
pub use policy::Breaker;
pub use state::{BreakerState, Transition};
pub use stats::WindowStats;
