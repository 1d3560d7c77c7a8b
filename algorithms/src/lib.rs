//! Pure admission policies for [rheostat](https://docs.rs/rheostat).
//!
//! Every policy in this crate turns what it has seen into one answer, a
//! [`Published`] value: a [`Gate`] (how many calls may be in flight, the
//! chance that a call under that limit is let through, whether an admitted
//! call is a trial (probe) call), when to look again even with no traffic,
//! what it needs to hear about finished calls ([`Hints`]), and which member
//! refuses. A runtime (the `rheostat` crate) enforces the gate on the hot
//! path and feeds every finished call back as a [`Sample`].
//!
//! Beside the policies, [`classes`] holds the rules by which a runtime
//! treats classes of calls: the slots kept for the more critical ones, and
//! an admit fraction spent on them first.
//!
//! Nothing here reads a clock, spawns a task or takes a lock: every
//! time-dependent method takes `now`, and time-driven changes are announced
//! in [`Published::wake_at`] and applied with
//! [`Algorithm::handle_timeout`]. That makes every policy drivable by hand,
//! with hand-built instants, in tests and in simulation.
//!
//! # Examples
//!
//! ```
//! use std::time::{Duration, Instant};
//! use rheostat_algorithms::{aimd::{Aimd, AimdConfig}, Algorithm, Outcome, Sample};
//!
//! let mut aimd = Aimd::new(AimdConfig { initial: 20, ..AimdConfig::default() })?;
//! let t0 = Instant::now();
//! assert_eq!(aimd.publish().gate.limit, 20);
//!
//! // A dropped call backs the limit off by the backoff ratio (0.9).
//! aimd.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(30), 20));
//! assert_eq!(aimd.publish().gate.limit, 18);
//! # Ok::<(), rheostat_algorithms::ConfigError>(())
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

use std::time::Duration;

pub mod aimd;
mod algorithm;
pub mod breaker;
pub mod buckets;
pub mod check;
pub mod classes;
mod error;
pub mod fixed;
mod gate;
pub mod gradient;
pub mod latency;
mod published;
mod rng;
mod sample;
#[cfg(feature = "serde")]
mod serde_rate;
mod snapshot;
pub mod stack;
pub mod throttle;
pub mod vegas;
pub use latency::window;

pub use aimd::{Aimd, AimdConfig, AimdMode};
pub use algorithm::Algorithm;
pub use breaker::{Breaker, BreakerConfig, BreakerState, Transition};
pub use error::ConfigError;
pub use fixed::Fixed;
pub use gate::Gate;
pub use gradient::{Gradient, GradientConfig};
pub use published::{Deferral, Feedback, Hints, Published, Refusal, Refusers};
pub use sample::{Outcome, Sample};
pub use snapshot::Snapshot;
pub use stack::{Stack, StackBuilder, MAX_MEMBERS};
pub use throttle::{Throttle, ThrottleConfig};
pub use vegas::{Vegas, VegasConfig};
pub use window::{Aggregation, Window, WindowConfig, WindowSummary};

/// The largest concurrency limit a gate can carry; a gate at this limit is
/// effectively unbounded.
pub const MAX_LIMIT: u32 = (1 << 31) - 1;

/// The longest duration any policy parameter accepts (one year).
///
/// Longer durations are refused with a [`ConfigError`] rather than risking an
/// overflow in instant arithmetic.
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
