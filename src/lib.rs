//! One `Limiter` in front of every outbound call, deciding call by call
//! whether it may go.
//!
//! A circuit breaker is a switch: all traffic or none. A rheostat is a dial.
//! Behind one [`Limiter`] sit interchangeable admission policies — a fixed
//! bulkhead, adaptive concurrency limits ([`Aimd`](algorithms::Aimd)), and
//! more in [`algorithms`] — each of which turns what it has seen into a
//! [`Gate`](algorithms::Gate): how many calls may be in flight and what
//! fraction of calls under that limit may go. The limiter enforces the gate
//! without a lock and feeds each finished call back to the policy.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use rheostat::{algorithms::{Aimd, AimdConfig}, Limiter, Outcome};
//!
//! // An adaptive limit for one dependency.
//! let limiter = Limiter::new(Aimd::new(AimdConfig::default())?);
//!
//! // Fail fast when the limit is reached ...
//! match limiter.try_acquire() {
//!     Ok(permit) => {
//!         // ... make the call, then say how it went.
//!         permit.success();
//!     }
//!     Err(rejected) => println!("shed: {rejected}"),
//! }
//!
//! // ... or let the limiter run the call with a timeout and a classifier.
//! let answer: Result<u32, _> = limiter
//!     .admission()
//!     .timeout(Duration::from_millis(800))
//!     .call(|r: &Result<u32, ()>| match r {
//!         Ok(_) => Outcome::Success,
//!         Err(_) => Outcome::Overload,
//!     }, || async { Ok(42) })
//!     .await;
//! assert_eq!(answer.unwrap(), 42);
//! # Ok(())
//! # }
//! ```
//!
//! # Time
//!
//! The limiter reads time only through its [`Clock`](clock::Clock): the
//! system clock by default, [`TokioClock`](clock::TokioClock) for
//! paused-time tests, [`ManualClock`](clock::ManualClock) for simulation.
//! Waiting for a slot and per-call timeouts use Tokio's timer.

#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod call;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
mod error;
pub mod grpc;
pub mod keyed;
pub mod limiter;
#[cfg(feature = "metrics")]
pub mod metrics;
mod observe;
pub mod overrides;
pub mod priority;
#[cfg(feature = "reqwest")]
pub mod reqwest;
pub mod retry;
mod snapshot;
mod sync;
pub mod timeout;
#[cfg(feature = "tower")]
pub mod tower;
#[cfg(feature = "tracing")]
pub mod tracing;

pub use rheostat_algorithms as algorithms;

pub use algorithms::{Algorithm, ConfigError, Outcome};
pub use error::{CallError, RejectReason, Rejection};
pub use limiter::{Admission, Builder, Handle, OwnedPermit, Permit};
// Defined in `limiter`, shown here with the rest of what most code names.
#[doc(inline)]
pub use limiter::{DynLimiter, Limiter};
pub use observe::Observer;
pub use timeout::Timeout;

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/design.md")]
struct DesignDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/client.md")]
struct ClientDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/configuration.md")]
struct ConfigurationDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/fleets.md")]
struct FleetsDoctests;

#[cfg(doctest)]
#[doc = include_str!("../docs/server.md")]
struct ServerDoctests;
