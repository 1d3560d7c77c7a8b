//! An operator's hand on a limiter: overrides that end by themselves.
//!
//! During an incident an operator knows what no policy can: that a partner
//! is down for maintenance, that it has recovered while its breaker still
//! waits out a cooldown, that a limit set too tight has flapped for an
//! hour. [`Overrides::set`](crate::limiter::Overrides::set) replaces
//! the policy's decision — not its learning — for a stated while:
//!
//! | override | what it does |
//! | --- | --- |
//! | [`Override::ForceOpen`] | refuse every call, probes included |
//! | [`Override::ForceClosed`] | hold the policy's breaker closed (a policy with a breaker only) |
//! | [`Override::Cap`] | at most `n` calls in flight, never more than the policy allows |
//! | [`Override::MetricsOnly`] | admit every call; the policy still learns and reports |
//!
//! Every override ends: at most [`MAX_OVERRIDE`] after it is set, so a
//! forgotten one cannot pin a dependency shut or open. It ends at the
//! first admission, finished call or read of the
//! [gate](crate::Limiter::gate) at or after its end,
//! and the policy's own gate is back at once. The policy hears every call
//! it is sent meanwhile, so its state is current when the override ends.
//!
//! The override is applied where the policy's answer is published, under
//! the lock, never on the call path: an admission reads the same one gate
//! word with or without one. [`Observer::override_applied`] and
//! [`Observer::override_ended`](crate::Observer::override_ended) tell of
//! each (the metrics observer as the gauge `rheostat_override{limiter,
//! kind}`, the tracing observer as an event), and the limiter's snapshot
//! shows the override in force.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use rheostat::{algorithms::Aimd, overrides::Override, Limiter, clock::ManualClock, RejectReason};
//!
//! let clock = ManualClock::new();
//! let limiter = Limiter::builder(Aimd::recommended()).clock(clock.clone()).build()?;
//! // The partner announced maintenance: nothing goes for ten minutes.
//! limiter.overrides().set(Override::ForceOpen, Duration::from_secs(600))?;
//! assert_eq!(limiter.try_acquire().unwrap_err().reason(), RejectReason::Open);
//! assert_eq!(limiter.snapshot().overridden.map(|(o, _)| o), Some(Override::ForceOpen));
//! // It ends by itself, and the policy decides again.
//! clock.advance(Duration::from_secs(600));
//! limiter.try_acquire()?.success();
//! assert_eq!(limiter.overrides().in_force(), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Observer::override_applied`]: crate::Observer::override_applied

use std::time::Duration;

pub use crate::algorithms::overrides::Override;

/// The longest an override may last: a week. Longer is a configuration
/// change, not an override.
pub const MAX_OVERRIDE: Duration = Duration::from_secs(7 * 24 * 3600);
