//! A tower middleware that puts a [`Limiter`](crate::Limiter) in front of a
//! client service, so hyper, tonic or axum clients use it without glue.
//!
//! [`RheostatLayer`] wraps a service in a [`Rheostat`] (or, [retrying](#retries),
//! in a [`RheostatRetry`]). ([`KeyedLayer`] picks the limiter per request
//! instead, by a key taken from the request, from
//! [`KeyedLimiters`](crate::keyed::KeyedLimiters).) For each request
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
//! 3. classifies the result with the [`Classify`] the layer was given —
//!    for HTTP, [`HttpClassifier`] — and records the outcome, with the
//!    call's latency; a call that outlives the layer's [timeout](RheostatLayer::timeout)
//!    ends with [`CallError::TimedOut`](crate::CallError::TimedOut) and is
//!    recorded as an overload.
//!
//! There is no default classifier: a layer starts [`Unclassified`], and a
//! service made from it cannot be called until
//! [`classify`](RheostatLayer::classify) says what a result means —
//! `HttpClassifier::new()` for HTTP (a `503` is a response, but an
//! overload), [`ResultClassifier`] when every response is a success and
//! every error an overload, or a closure in a [`ClassifyFn`].
//!
//! For a server (axum, hyper, tonic), `ShedLayer` (the `http` feature)
//! turns it around: the server's own requests are admitted through a
//! limiter that learns from the server's own latency, waiting newest first,
//! and a refused request is answered with a `503` and a `Retry-After`
//! (a gRPC call: a trailers-only `UNAVAILABLE` with a
//! `grpc-retry-pushback-ms`) instead of an error. Its own documentation says how; the sections below
//! are the client layer's.
//!
//! # gRPC
//!
//! A gRPC call answers HTTP 200 and puts its status in `grpc-status`: in
//! the headers of a *trailers-only* response when the server fails at once,
//! otherwise in the trailers after the body. So a gRPC layer is built with
//! [`RheostatLayer::classify`] and a [`GrpcClassifier`] (the `http`
//! feature): the status is read from the headers where it is there, and
//! otherwise the response's body holds the
//! call's permit until its trailers arrive; the call is recorded then, with
//! the latency to its status. A body dropped early releases the permit as
//! the limiter's drop outcome; the layer's timeout runs on into the body.
//! The service answers an `http::Response` whose body is an
//! `http_body::Body` wrapping the inner one, which a tonic client takes as
//! it takes a channel:
//!
//! ```ignore
//! let channel = ServiceBuilder::new()
//!     .layer(RheostatLayer::new(limiter).classify(GrpcClassifier::new()))
//!     .service(tonic::transport::Endpoint::from_static("http://search:50051").connect().await?);
//! let mut client = SearchClient::new(channel);
//! ```
//!
//! A streaming call holds its slot until its stream ends, and the latency
//! the limiter learns is the stream's length. Put long-lived streams
//! (watches, subscriptions) behind a limiter of their own, a
//! [`Fixed`](crate::algorithms::Fixed) bulkhead sized for them with no
//! timeout shorter than a stream, and keep the adaptive limiter for unary
//! calls and short streams, whose length says something about the
//! dependency.
//!
//! The layer does not retry gRPC calls (a tonic request's body cannot be
//! sent twice); [`GrpcClassifier::verdict`] gives gRPC's retry design's
//! answer (retryable codes, `grpc-retry-pushback-ms`) to a retrying
//! [`Limiter::call`](crate::Limiter::call) around a call of an idempotent
//! method. On the server, `ShedLayer` answers a refused gRPC call with a
//! trailers-only `UNAVAILABLE` and a pushback.
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
//! calling the inner service. With a [class function](#classes), waiting
//! moves into the response future instead.
//!
//! # Classes
//!
//! For a limiter built with [priorities](crate::priority),
//! [`RheostatLayer::classify_request`] admits each request as the class a
//! [`ClassifyRequest`] (a closure `Fn(&Req) -> Option<Class>`) gives it:
//! under load the less critical requests are refused first, and the queue
//! serves the most critical waiter first. A request given no class, or
//! sent through a layer without a class function, is of the limiter's
//! default class.
//!
//! Failing fast, nothing else changes: the request is admitted as its class
//! in `call`. Waiting, the slot cannot be reserved in `poll_ready`, before
//! the request is known: `poll_ready` is then the inner service's
//! readiness, and the response future waits in the queue for a slot for the request's class, then calls the
//! inner service readied for it (a clone takes its place, as tower
//! advises; so the inner service must be `Clone`, which a layer without a
//! class function does not ask). The layer's timeout runs from admission.
//! [Retrying](#retries), every attempt is admitted as the request's class;
//! waiting, the first attempt's wait counts against the retry deadline.
//!
//! # Calls not safe to cut early
//!
//! Where the limiter [learns](crate::timeout) its timeout, each attempt is
//! given the learned one when it is shorter than the layer's. A request
//! that is not safe to cut early (a payment, anything not idempotent: cut,
//! it may still take effect, and sent again, take effect twice) keeps the
//! layer's timeout whole if the layer's class function says so
//! ([`ClassifyRequest::cut_early`]). [`IdempotentOnly`] is one: a request
//! that is not [`Idempotent`] — for HTTP, a `POST`, a `PATCH`, or any
//! request carrying `NotIdempotent` in its extensions (the `http`
//! feature) — is never cut early, and the retrying layer's default rule,
//! the same one, never sends it twice. A layer without a class function
//! cannot read a request (it is generic over what it is sent) and cuts
//! every request early; for a limiter (a route of a [`KeyedLayer`]) no
//! request to which is safe to cut early, say so in its learned timeout
//! instead ([`LearnedTimeout::cut_early`](crate::timeout::LearnedTimeout::cut_early),
//! a file's `timeout = { cut_early = false }`).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rheostat::tower::{HttpClassifier, IdempotentOnly, RheostatLayer};
//! use rheostat::{algorithms::Fixed, Limiter, Timeout};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! let limiter = Limiter::builder(Fixed::new(8)?)
//!     .timeout(Timeout::learned(Duration::from_secs(15)))
//!     .build()?;
//! let client = RheostatLayer::new(Arc::new(limiter))
//!     .classify(HttpClassifier::new())
//!     .classify_request(IdempotentOnly)
//!     .layer(service_fn(|_: http::Request<String>| async {
//!         Ok::<_, std::io::Error>(http::Response::new(()))
//!     }));
//! // A charge keeps the 15 s however short a timeout is learned; a GET
//! // gets the learned one.
//! let charge = http::Request::post("https://payments.example/charges").body("{}".into())?;
//! client.oneshot(charge).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Retries
//!
//! [`RheostatLayer::retry`] opts in to retrying failed requests as the
//! limiter's [retry policy](crate::retry) (given to
//! [`Builder::retry`](crate::Builder::retry)) says, with the semantics of
//! [`Limiter::call`](crate::Limiter::call):
//!
//! - a request is retried only if it failed as the classifier's
//!   [verdict](Classify::verdict) allows (for HTTP: an error, or a 5xx
//!   other than 501 and 505; never a 4xx, 429 included) and the
//!   [`RetryRule`] allows sending it again (by default, only
//!   [`Idempotent`] requests: `GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS`,
//!   `TRACE`);
//! - at most `attempts` attempts, each admitted by the limiter and
//!   recorded as its own call; the call counts once in the retry budget,
//!   and a retry the budget cannot pay for is not sent;
//! - no retry starts after the deadline, and each attempt's timeout (the
//!   layer's, or the retry policy's own `timeout`) shrinks to end by it;
//! - before a retry, a jittered backoff (`tokio::time::sleep`), at least
//!   the server's `Retry-After`;
//! - a refusal by the limiter is never retried (but for one wait in its
//!   queue if [`wait_on_limit`](crate::retry::RetryConfig::wait_on_limit)
//!   is set and the limit was reached), nor is a failure after which the
//!   breaker is open;
//! - every decision after a failed attempt is told to the limiter's
//!   [`Observer`](crate::Observer);
//! - the result is the last attempt's: a 503 is returned as a response
//!   once no retry follows.
//!
//! The retrying service clones the request for each attempt, so it needs
//! `Req: Clone`. For hyper, an `http::Request<B>` is `Clone` only if its
//! body is: use a buffered body (`http_body_util::Full<Bytes>`, `String`,
//! `()`); a streaming body cannot be sent twice, so collect it into one
//! first. A limiter without a retry policy sends every request once.
//! Dropping the response future releases the permit of every attempt in
//! flight, hedges included (see [`RheostatLayer::retry`]).
//!
//! This is the one way to retry through the layer, rather than tower's
//! own `Retry` middleware with a policy: a policy hears how an attempt
//! ended only after tower sent it, so it cannot give an attempt a timeout
//! of its own (a [learned](crate::timeout) one, the retry policy's
//! `timeout`, what is left of the deadline; under tower's `Retry` the last
//! attempt ran past the deadline), nor wait once in the queue when the
//! limit is reached, and it needs the limiter and the classifier given
//! twice, in the right order around the layer. The layer drives the same
//! sans-I/O [`Attempts`](crate::retry::Attempts) as
//! [`Limiter::call`](crate::Limiter::call), within the same bounds: the
//! budget spent once per call, no slot held across a backoff, the
//! server's `Retry-After` a floor on it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rheostat::retry::{Backoff, RetryConfig};
//! use rheostat::tower::{HttpClassifier, RheostatLayer};
//! use rheostat::{algorithms::Fixed, Limiter};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! let limiter = Limiter::builder(Fixed::new(16)?)
//!     .retry(RetryConfig {
//!         deadline: Some(Duration::from_secs(2)),
//!         backoff: Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(5) },
//!         ..RetryConfig::default()
//!     })
//!     .build()?;
//! let sent = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&sent);
//! let client = RheostatLayer::new(Arc::new(limiter))
//!     .classify(HttpClassifier::new())
//!     .timeout(Duration::from_millis(500))?
//!     .retry()
//!     .layer(service_fn(move |_: http::Request<String>| {
//!         // Unavailable twice, then served.
//!         let status = if counter.fetch_add(1, Ordering::SeqCst) < 2 { 503 } else { 200 };
//!         async move { http::Response::builder().status(status).body(()) }
//!     }));
//!
//! let request = http::Request::get("http://example.com/").body(String::new())?;
//! let response = client.clone().oneshot(request).await?;
//! assert_eq!((response.status().as_u16(), sent.load(Ordering::SeqCst)), (200, 3));
//!
//! // A POST is not retried: its 503 comes back as it is.
//! sent.store(0, Ordering::SeqCst);
//! let request = http::Request::post("http://example.com/").body("{}".to_owned())?;
//! let response = client.oneshot(request).await?;
//! assert_eq!((response.status().as_u16(), sent.load(Ordering::SeqCst)), (503, 1));
//! # Ok(())
//! # }
//! ```
//!
//! ## Hedged requests
//!
//! A retry policy with a [`hedge`](crate::retry::RetryConfig::hedge)
//! makes the retrying layer hedge, as [`Limiter::call`](crate::Limiter::call)
//! does: an attempt that has not answered after the hedge delay (typed, or
//! learned by a limiter whose [timeout is learned](crate::timeout): the
//! p95 of recent successes) races a second one, sent beside it by a clone
//! of the inner service, and the first answer is the response; the attempt
//! still out is dropped, its permit released as
//! [`Outcome::Ignore`](crate::Outcome::Ignore). A hedge is an attempt of
//! the call's, within the bounds above, and is sent only for a request the
//! [`RetryRule`] allows sending again (never a `POST` by default), with a
//! free slot (it never waits in the queue), out of the retry budget, and
//! while the policy sees no congestion (see [`Hedge`](crate::retry::Hedge)).
//! While one attempt is still out, another's failure is not retried: the
//! call waits for the one out, and only the last failure is weighed. Every
//! hedge sent, won or lost, or why none was sent, is told to the
//! [`Observer`](crate::Observer) as a
//! [`HedgeOutcome`](crate::retry::HedgeOutcome).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//! use rheostat::retry::{Hedge, RetryConfig};
//! use rheostat::tower::{HttpClassifier, RheostatLayer};
//! use rheostat::{algorithms::Fixed, Limiter};
//! use tower::{service_fn, Layer, ServiceExt};
//!
//! // A hedge after 50 ms (`Hedge::default()` learns the delay instead,
//! // under a limiter whose timeout is learned).
//! let limiter = Limiter::builder(Fixed::new(16)?)
//!     .retry(RetryConfig {
//!         hedge: Some(Hedge::after(Duration::from_millis(50))),
//!         ..RetryConfig::default()
//!     })
//!     .build()?;
//! let sent = Arc::new(AtomicU32::new(0));
//! let counter = Arc::clone(&sent);
//! let client = RheostatLayer::new(Arc::new(limiter))
//!     .classify(HttpClassifier::new())
//!     .timeout(Duration::from_secs(2))?
//!     .retry()
//!     .layer(service_fn(move |_: http::Request<String>| {
//!         // The first request stalls for a second; the next answers at once.
//!         let stalls = counter.fetch_add(1, Ordering::SeqCst) == 0;
//!         async move {
//!             if stalls {
//!                 tokio::time::sleep(Duration::from_secs(1)).await;
//!             }
//!             http::Response::builder().body(if stalls { "first" } else { "hedge" })
//!         }
//!     }));
//!
//! let request = http::Request::get("http://example.com/").body(String::new())?;
//! let response = client.oneshot(request).await?;
//! assert_eq!((*response.body(), sent.load(Ordering::SeqCst)), ("hedge", 2));
//! # Ok(())
//! # }
//! ```
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

mod acquire;
mod class;
mod classify;
mod end;
mod future;
mod idempotent;
mod keyed;
mod layer;
mod retry;
#[cfg(feature = "http")]
mod server;
mod service;

pub use class::{lower_only, ClassifyRequest};
pub use classify::{Classify, ClassifyFn, ResultClassifier, Unclassified};
#[cfg(feature = "http")]
pub use classify::{GrpcClassifier, HttpClassifier};
#[cfg(feature = "http")]
pub use idempotent::NotIdempotent;
pub use idempotent::{Idempotent, IdempotentOnly, RetryRule};
pub use keyed::{KeyedLayer, KeyedRheostat};
pub use layer::RheostatLayer;
pub use retry::RheostatRetry;
#[cfg(feature = "http")]
pub use server::{server_outcome, Shed, ShedLayer};
pub use service::Rheostat;
