//! A tower middleware that puts a [`Limiter`](crate::Limiter) in front of a
//! client service, so hyper, tonic or axum clients use it without glue.
//!
//! [`RheostatLayer`] wraps a service in a [`Rheostat`], whose calls return a
//! [`future::ResponseFuture`]. (With the `config` feature, `KeyedLayer`
//! picks the limiter per request instead, by a key taken from the request,
//! from `KeyedLimiters`.) For each request
//! the service:
//!
//! 1. asks the limiter for a slot — failing fast with
//!    [`CallError::Rejected`](crate::CallError::Rejected), which carries the
//!    [`Rejection`](crate::Rejection) (why, which policy, and for how long),
//!    or, with [`RheostatLayer::wait`], waiting for one in the limiter's
//!    queue;
//! 2. calls the inner service and holds the permit until the response
//!    future completes (or is dropped, which counts as the limiter's drop
//!    outcome);
//! 3. classifies the result with a [`Classify`] — for HTTP,
//!    [`HttpClassifier`] — and records the outcome, with the call's
//!    latency; a call that outlives the layer's [timeout](RheostatLayer::timeout)
//!    ends with [`CallError::TimedOut`](crate::CallError::TimedOut) and is
//!    recorded as an overload.
//!
//! # Readiness
//!
//! Failing fast (the default), `poll_ready` is the inner service's
//! readiness, and admission is decided in `call`: the limiter never makes a
//! caller wait, so a shed request costs one atomic check, not a queue.
//! Waiting ([`RheostatLayer::wait`]), `poll_ready` first waits for a slot and
//! holds it (as tower's `ConcurrencyLimit` does), then polls the inner
//! service; a refusal (an open breaker, a full queue, a wait that timed out)
//! is not a `poll_ready` error — that would tell tower the service is
//! broken for good — but is returned by the next `call`'s future, without
//! calling the inner service.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rheostat::algorithms::{Aimd, AimdConfig};
//! use rheostat::tower::{HttpClassifier, RheostatLayer};
//! use rheostat::{CallError, Limiter};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! let limiter = Arc::new(Limiter::builder(Aimd::new(AimdConfig::default())?).name("payments").build()?);
//! let client = ServiceBuilder::new()
//!     .layer(
//!         RheostatLayer::new(Arc::clone(&limiter))
//!             .classify(HttpClassifier::new().slow_after(Duration::from_secs(2))?)
//!             .timeout(Duration::from_millis(800))?,
//!     )
//!     .service(service_fn(|_req: http::Request<()>| async {
//!         Ok::<_, std::io::Error>(http::Response::new("ok"))
//!     }));
//!
//! match client.oneshot(http::Request::new(())).await {
//!     Ok(response) => assert_eq!(*response.body(), "ok"),
//!     Err(CallError::Rejected(rejection)) => println!("shed: {rejection}"),
//!     Err(e) => println!("failed: {e}"),
//! }
//! # Ok(())
//! # }
//! ```

mod classify;
pub mod future;
#[cfg(feature = "config")]
mod keyed;
mod layer;
mod service;

#[cfg(feature = "http")]
pub use classify::HttpClassifier;
pub use classify::{Classify, ClassifyFn, ResultClassifier};
#[cfg(feature = "config")]
pub use keyed::{KeyedLayer, KeyedRheostat};
pub use layer::RheostatLayer;
pub use service::Rheostat;
