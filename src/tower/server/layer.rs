//! [`ShedLayer`]: the limiter a server's requests share, and what its
//! services do with each request.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use tower_layer::Layer;

use super::service::Shed;
use super::settings::Settings;
use crate::algorithms::{check, Algorithm, ConfigError, Outcome};
use crate::clock::{Clock, DefaultClock};
use crate::limiter::{Builder, Limiter, QueueOrder};
use crate::priority::Class;
use crate::tower::acquire::start_acquire;
use crate::tower::classify::GrpcCode;

/// The longest a request waits in the queue of a limiter started by
/// [`ShedLayer::server_limiter`].
const SERVER_MAX_WAIT: Duration = Duration::from_millis(100);

/// The most requests that wait in the queue of a limiter started by
/// [`ShedLayer::server_limiter`].
const SERVER_MAX_WAITERS: usize = 1024;

/// Load shedding for an HTTP server (axum, hyper, tonic): each request the
/// server receives is admitted through one shared [`Limiter`], and one the
/// limiter refuses is answered at once — `503 Service Unavailable` with a
/// `Retry-After` header by default — without reaching the inner service.
///
/// Where [`RheostatLayer`](crate::tower::RheostatLayer) guards a client from a
/// dependency, this guards a server from its callers: the limiter learns
/// from the server's own latency and errors, and a refusal is a response,
/// not an error, so the server's stack needs no error handling for it.
///
/// For each request the service:
///
/// 1. sorts it into a priority class, if given a
///    [`classify_request`](Self::classify_request) function, and into the
///    least critical class if not (see [Classes](#classes));
/// 2. asks the limiter for a slot, waiting in its queue (as
///    [`Admission::acquire`](crate::Admission::acquire), bounded by the limiter's
///    [`max_wait`](crate::Builder::max_wait) and queue length) if the limit
///    is reached, or failing at once after [`fail_fast`](Self::fail_fast);
///    a throttled request, a full queue, a wait that ran out and an open
///    breaker are refused;
/// 3. admitted, calls the inner service and holds the permit until the
///    response is produced, for at most the [request
///    timeout](#the-request-timeout); refused, answers with the
///    [refusal](#the-refusal);
/// 4. records the outcome: a response is a success unless it is a 5xx
///    (an overload), as [`server_outcome`](crate::tower::server_outcome) says unless
///    [`classify_status`](Self::classify_status) says otherwise; an error
///    from the inner service is an overload. The latency the limiter learns
///    from is its own: from admission (after any wait in the queue) to the
///    response's head; a streamed body is not waited for.
///
/// # Waiting, newest first
///
/// By default a request that finds the limit reached waits for a slot. Build
/// the limiter with a LIFO queue ([`QueueOrder::Lifo`]) and a bounded
/// `max_wait`, as [`ShedLayer::server_limiter`] does: under overload the
/// newest request, whose caller is still waiting for it, is served first,
/// and the oldest — whose callers may already have given up — time out
/// and are refused, instead of every request waiting its turn behind work
/// nobody wants any more. A limiter with a FIFO queue or no `max_wait`
/// (the limiter's defaults) serves oldest first and can hold a request as
/// long as the queue does.
///
/// # The request timeout
///
/// An admitted request holds its slot for at most the request timeout (15
/// s by default, or [`request_timeout`](Self::request_timeout)), counted
/// from when its handler is first run. A handler that has not answered by
/// then — a client trickling its body in a byte every few seconds (a
/// slowloris), a handler stuck on a dead dependency — is dropped, its slot
/// released as the limiter's drop outcome (a trickling client says nothing
/// about the server's capacity), and the request answered `408 Request
/// Timeout` with an empty body (a gRPC call: trailers-only,
/// `DEADLINE_EXCEEDED`). So a client can hold a slot no longer than the
/// timeout, though a client that opens a new connection the moment one is
/// cut, with more connections than the limit, can still crowd others out:
/// bound connections per client in front of the server for that.
///
/// # The refusal
///
/// A refused request is answered with the layer's status (503, or 429 after
/// [`too_many_requests`](Self::too_many_requests), any 4xx or 5xx with
/// [`status`](Self::status)), an empty body (`ResBody::default()`), a
/// `Retry-After` header in whole seconds, rounded up — the rejection's own
/// [`retry_after`](crate::Rejection::retry_after) (an open breaker's time to its
/// next probe) where it knows one, the layer's default (1 s, or
/// [`retry_after`](Self::retry_after)) otherwise — and the [`Rejection`](crate::Rejection) in
/// its extensions, for an outer layer to log or count.
///
/// # gRPC
///
/// In front of a gRPC server (tonic), a refused gRPC call — a request whose
/// `content-type` is `application/grpc`, `application/grpc+proto` or
/// another `application/grpc+…` — is answered as gRPC expects, not with an
/// HTTP status a gRPC client would read as a broken transport: a
/// *trailers-only* response, HTTP 200 with `content-type:
/// application/grpc`, `grpc-status` 14 (`UNAVAILABLE`, or the code given to
/// [`grpc_status`](Self::grpc_status), such as 8, `RESOURCE_EXHAUSTED`), a
/// `grpc-message` saying why, a `grpc-retry-pushback-ms` in whole
/// milliseconds, rounded up, for the same wait a `Retry-After` would give,
/// and the [`Rejection`](crate::Rejection) in its extensions. A gRPC client
/// that retries (gRPC's retry design, A6) waits that long before it tries
/// again. Other requests to the same server are refused as HTTP.
///
/// A gRPC response whose status is in its headers (a handler that failed)
/// is recorded by its status: the codes a client counts as overloads by
/// default ([`GrpcClassifier::DEFAULT_OVERLOAD`](crate::tower::GrpcClassifier::DEFAULT_OVERLOAD):
/// `UNAVAILABLE`, `RESOURCE_EXHAUSTED`, `DEADLINE_EXCEEDED`, `INTERNAL`,
/// `UNKNOWN`, `DATA_LOSS`) as an overload, any other as a success. A
/// status in the trailers is not waited for, as a streamed body is not:
/// the server's latency is to its response's head, which for a unary call
/// comes when the handler has answered.
///
/// # Classes
///
/// Under a limiter built with [priorities](crate::priority), a request is
/// admitted as the class the layer's
/// [`classify_request`](Self::classify_request) function gives it; a
/// request it gives none — no header, a value it cannot read, no class
/// function at all — is of the **least critical** class, not the
/// limiter's default class as a client's calls are. A server's callers
/// write its requests: if a request that says nothing outranked the ones
/// marked `sheddable`, a caller would only have to drop the header to
/// crowd them out, and one that writes `critical-plus` outranks
/// everybody. So classify from what the server itself established about
/// the caller — an identity an authentication layer in front put in the
/// request's extensions, a route — and let the caller's header only
/// lower that class, with [`lower_only`](crate::tower::lower_only), as the last
/// example below does. (A client layer keeps the limiter's default: its
/// requests are its own, and so is their class.) To admit the unclassified
/// as some other class, say so in the class function
/// (`Some(f(request).unwrap_or(class))`).
///
/// # Body type
///
/// The service answers `http::Response<ResBody>` for an inner service that
/// does, and builds a refusal's body with `ResBody::default()`: the layer
/// asks nothing more of the body. `axum::body::Body` is `Default`, so the
/// layer goes in an axum router with `Router::layer` as it is; so are `http_body_util`'s `Full`, `Empty`, `BoxBody` and
/// `UnsyncBoxBody`, for a hyper service or a tonic server whose body is one
/// of them.
///
/// # Readiness
///
/// `poll_ready` is the inner service's readiness: admission is decided per
/// request — in `call` when failing fast, in the response future when
/// waiting — never by holding back readiness. When
/// a request must wait for a slot, the inner service readied for it moves
/// into the response future (a clone takes its place, as tower advises), and
/// is called once a slot is had: so the inner service must be `Clone` (as
/// an axum `Router`'s routes, hyper's `service_fn` and tonic's services
/// are).
///
/// # Cancel safety
///
/// Dropping the response future — hyper does so when the client goes away
/// mid-request — drops the inner call and releases the permit as the
/// limiter's drop outcome ([`Outcome::Ignore`] unless the limiter was built
/// with [`on_drop`](crate::Builder::on_drop)); dropped while waiting, it
/// leaves the queue, and a slot handed to it goes to the next waiter.
///
/// # Examples
///
/// An axum router behind a latency-driven limiter, waiting newest first:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use axum::{body::Body, routing::get, Router};
/// use http::{Request, StatusCode};
/// use rheostat::algorithms::{Gradient, GradientConfig};
/// use rheostat::tower::ShedLayer;
/// use tower::ServiceExt;
///
/// let limiter = ShedLayer::server_limiter(Gradient::new(GradientConfig::default())?)
///     .name("api")
///     .max_wait(Duration::from_millis(50))
///     .build()?;
/// let app = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(ShedLayer::new(Arc::new(limiter)));
///
/// let response = app.oneshot(Request::get("/").body(Body::empty())?).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// # Ok(())
/// # }
/// ```
///
/// A refusal, failing fast:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use http::{Request, Response, StatusCode};
/// use rheostat::{algorithms::Fixed, tower::ShedLayer, Limiter, RejectReason, Rejection};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let limiter = Arc::new(Limiter::new(Fixed::new(1)?));
/// let server = ShedLayer::new(Arc::clone(&limiter))
///     .fail_fast()
///     .layer(service_fn(|_: Request<()>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(String::from("served")))
///     }));
///
/// let busy = limiter.try_acquire()?; // the only slot is taken
/// let response = server.clone().oneshot(Request::new(())).await?;
/// assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(response.headers()["retry-after"], "1");
/// assert_eq!(response.body(), "");
/// let rejection = response.extensions().get::<Rejection>().unwrap();
/// assert_eq!(rejection.reason(), RejectReason::LimitReached);
///
/// drop(busy);
/// let response = server.oneshot(Request::new(())).await?;
/// assert_eq!(response.body(), "served");
/// # Ok(())
/// # }
/// ```
///
/// Classes from the caller's identity, which its `x-priority` header may
/// only lower:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use axum::{body::Body, routing::get, Router};
/// use http::{Request, StatusCode};
/// use rheostat::algorithms::Fixed;
/// use rheostat::priority::{Class, Priorities, Priority};
/// use rheostat::tower::{lower_only, ShedLayer};
/// use tower::util::MapRequestLayer;
/// use tower::ServiceExt;
///
/// /// Who is calling, as authentication found it.
/// #[derive(Clone)]
/// struct Caller { class: Class }
///
/// /// Stands for real authentication (a verified token, a client
/// /// certificate): a checkout frontend is critical, a crawler sheddable,
/// /// anyone else unknown.
/// fn authenticate(mut request: Request<Body>) -> Request<Body> {
///     let class = match request.headers().get("authorization").map(|v| v.as_bytes()) {
///         Some(b"Bearer checkout-token") => Some(Priority::Critical),
///         Some(b"Bearer crawler-token") => Some(Priority::Sheddable),
///         _ => None,
///     };
///     if let Some(priority) = class {
///         request.extensions_mut().insert(Caller { class: priority.into() });
///     }
///     request
/// }
///
/// let limiter = Arc::new(
///     ShedLayer::server_limiter(Fixed::new(64)?)
///         .priorities(Priorities::default())
///         .build()?,
/// );
/// let shed = ShedLayer::new(Arc::clone(&limiter)).classify_request(lower_only(
///     |request: &Request<Body>| request.extensions().get::<Caller>().map(|caller| caller.class),
///     |request: &Request<Body>| Priority::parse(request.headers().get("x-priority")?).map(Class::from),
/// ));
/// // The handler answers with the requests in flight by class, its own included.
/// let app = Router::new()
///     .route("/", get(move || async move { format!("{:?}", limiter.classes().unwrap().in_flight()) }))
///     .layer(shed)
///     .layer(MapRequestLayer::new(authenticate)); // outermost: runs first
///
/// // The crawler asks for `critical-plus`, and is admitted as sheddable.
/// let request = Request::get("/")
///     .header("authorization", "Bearer crawler-token")
///     .header("x-priority", "critical-plus")
///     .body(Body::empty())?;
/// let response = app.oneshot(request).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// let body = axum::body::to_bytes(response.into_body(), 64).await?;
/// assert_eq!(body, "[0, 0, 0, 1]");
/// # Ok(())
/// # }
/// ```
pub struct ShedLayer<A = Box<dyn Algorithm>, C = DefaultClock, P = ()> {
    limiter: Arc<Limiter<A, C>>,
    settings: Settings,
    classify: P,
}

impl ShedLayer {
    /// A limiter [`Builder`] set up for a server: a LIFO queue
    /// ([`QueueOrder::Lifo`]) of at most 1024 requests, each waiting at most
    /// 100 ms. Change either with the builder's
    /// [`queue`](crate::Builder::queue) and
    /// [`max_wait`](crate::Builder::max_wait) — a wait well under the
    /// callers' own timeouts — and give it a name, priorities, an observer
    /// as any other. See [Waiting, newest first](ShedLayer#waiting-newest-first).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use rheostat::algorithms::{Gradient, GradientConfig};
    /// use rheostat::tower::ShedLayer;
    ///
    /// let limiter = ShedLayer::server_limiter(Gradient::new(GradientConfig::default())?)
    ///     .name("api")
    ///     .max_wait(Duration::from_millis(20))
    ///     .build()?;
    /// let layer = ShedLayer::new(Arc::new(limiter));
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn server_limiter<A: Algorithm>(policy: A) -> Builder<A> {
        Limiter::builder(policy)
            .queue(QueueOrder::Lifo, SERVER_MAX_WAITERS)
            .max_wait(SERVER_MAX_WAIT)
    }
}

impl<A: Algorithm, C: Clock> ShedLayer<A, C> {
    /// Admit a server's requests through `limiter`, waiting in its queue
    /// when the limit is reached, refusing with a 503 and a `Retry-After`
    /// of the rejection's (1 s where it knows none), every request of the
    /// limiter's least critical class (see [Classes](ShedLayer#classes)).
    pub fn new(limiter: Arc<Limiter<A, C>>) -> Self {
        let unclassified = limiter.classes().map(|classes| {
            // At most `MAX_CLASSES` classes, and at least one.
            let last = classes.priorities().classes.len().saturating_sub(1);
            Class::new(u8::try_from(last).unwrap_or(u8::MAX))
        });
        ShedLayer {
            limiter,
            settings: Settings::new(unclassified),
            classify: (),
        }
    }
}

impl<A: Algorithm, C: Clock, P> ShedLayer<A, C, P> {
    /// Refuse at once when the limit is reached, instead of waiting in the
    /// limiter's queue.
    #[must_use]
    pub fn fail_fast(mut self) -> Self {
        self.settings.wait = false;
        self
    }

    /// Refuse with `429 Too Many Requests` instead of `503 Service
    /// Unavailable`.
    #[must_use]
    pub fn too_many_requests(mut self) -> Self {
        self.settings.status = StatusCode::TOO_MANY_REQUESTS;
        self
    }

    /// Refuse with `status` instead of `503 Service Unavailable`.
    ///
    /// # Errors
    ///
    /// `shed.status` not a 4xx or a 5xx.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use http::StatusCode;
    /// use rheostat::{algorithms::Fixed, tower::ShedLayer, Limiter};
    ///
    /// let layer = ShedLayer::new(Arc::new(Limiter::new(Fixed::new(8)?)));
    /// assert!(layer.clone().status(StatusCode::OK).is_err());
    /// let layer = layer.status(StatusCode::BAD_GATEWAY)?;
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn status(mut self, status: StatusCode) -> Result<Self, ConfigError> {
        if !status.is_client_error() && !status.is_server_error() {
            return Err(ConfigError::new(
                "shed.status",
                status.as_u16(),
                "a 4xx or 5xx status",
            ));
        }
        self.settings.status = status;
        Ok(self)
    }

    /// Refuse a gRPC call with `code` instead of `UNAVAILABLE` (see
    /// [gRPC](ShedLayer#grpc)): `RESOURCE_EXHAUSTED`, say.
    ///
    /// # Errors
    ///
    /// `shed.grpc_status` `OK`, which is no refusal.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rheostat::{algorithms::Fixed, grpc::GrpcCode, tower::ShedLayer, Limiter};
    ///
    /// let layer = ShedLayer::new(Arc::new(Limiter::new(Fixed::new(8)?)));
    /// assert!(layer.clone().grpc_status(GrpcCode::Ok).is_err());
    /// let layer = layer.grpc_status(GrpcCode::ResourceExhausted)?;
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn grpc_status(mut self, code: GrpcCode) -> Result<Self, ConfigError> {
        if code == GrpcCode::Ok {
            return Err(ConfigError::new(
                "shed.grpc_status",
                code,
                "a code other than ok",
            ));
        }
        self.settings.grpc_status = code;
        Ok(self)
    }

    /// The `Retry-After` of a refusal whose rejection does not say how long
    /// to wait (default 1 s), sent in whole seconds, rounded up (and a gRPC
    /// refusal's `grpc-retry-pushback-ms`, in milliseconds).
    #[must_use]
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.settings.retry_after = after;
        self
    }

    /// Give each admitted request at most `after` to be answered, instead
    /// of 15 s: past it, its handler is dropped, its slot released and the
    /// request answered `408 Request Timeout` (see [The request
    /// timeout](ShedLayer#the-request-timeout)). Make it longer than the
    /// slowest answer the server means to give, an upload included.
    ///
    /// # Errors
    ///
    /// `shed.request_timeout` zero or above a year.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, tower::ShedLayer, Limiter};
    ///
    /// let layer = ShedLayer::new(Arc::new(Limiter::new(Fixed::new(8)?)));
    /// assert!(layer.clone().request_timeout(Duration::ZERO).is_err());
    /// let layer = layer.request_timeout(Duration::from_secs(5))?;
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn request_timeout(mut self, after: Duration) -> Result<Self, ConfigError> {
        self.settings.request_timeout = check::duration("shed.request_timeout", after)?;
        Ok(self)
    }

    /// Record a response of each status as `outcome` says, instead of as
    /// [`server_outcome`](crate::tower::server_outcome) (a 5xx an overload, anything else a success):
    /// say, to teach the limiter nothing from a 501, or to count a 500 from
    /// a bug as no evidence of load.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rheostat::{algorithms::Fixed, tower::{server_outcome, ShedLayer}, Limiter, Outcome};
    ///
    /// let layer = ShedLayer::new(Arc::new(Limiter::new(Fixed::new(8)?)))
    ///     .classify_status(|status| match status.as_u16() {
    ///         500 | 501 => Outcome::Ignore,
    ///         _ => server_outcome(status),
    ///     });
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn classify_status(mut self, outcome: fn(StatusCode) -> Outcome) -> Self {
        self.settings.outcome = outcome;
        self
    }

    /// Admit each request as the class `classify` gives it (see
    /// [`crate::priority`]), for a limiter built with
    /// [`priorities`](crate::Builder::priorities): under load, the less
    /// critical requests are refused first, and the queue serves the most
    /// critical waiter first. A request it gives no class is of the least
    /// critical class; a limiter without priorities ignores classes.
    ///
    /// Classify by what the server knows of the caller, not by what the
    /// caller wrote: see [Classes](ShedLayer#classes), and the example
    /// there. A header read alone, as below, is fit only where every caller
    /// is trusted (a service behind a gateway that sets the header itself
    /// and strips any the client sent).
    ///
    /// A closure needs its argument's type written out
    /// (`|request: &Request<Body>|`): the layer learns the body type only
    /// when it wraps a service.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use axum::{body::Body, routing::get, Router};
    /// use http::Request;
    /// use rheostat::algorithms::Fixed;
    /// use rheostat::priority::{Class, Priorities, Priority};
    /// use rheostat::tower::ShedLayer;
    ///
    /// let limiter = ShedLayer::server_limiter(Fixed::new(64)?)
    ///     .priorities(Priorities::default())
    ///     .build()?;
    /// // Only behind a gateway that owns `x-priority`.
    /// let layer = ShedLayer::new(Arc::new(limiter)).classify_request(|request: &Request<Body>| {
    ///     Priority::parse(request.headers().get("x-priority")?).map(Class::from)
    /// });
    /// let app: Router = Router::new().route("/", get(|| async { "ok" })).layer(layer);
    /// # drop(app);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn classify_request<P2>(self, classify: P2) -> ShedLayer<A, C, P2> {
        ShedLayer {
            limiter: self.limiter,
            settings: self.settings,
            classify,
        }
    }

    /// The limiter.
    pub fn limiter(&self) -> &Arc<Limiter<A, C>> {
        &self.limiter
    }
}

impl<S, A: Algorithm + 'static, C: Clock, P: Clone> Layer<S> for ShedLayer<A, C, P> {
    type Service = Shed<S, A, C, P>;

    fn layer(&self, inner: S) -> Self::Service {
        Shed {
            inner,
            limiter: Arc::clone(&self.limiter),
            settings: self.settings,
            classify: self.classify.clone(),
            start_acquire: start_acquire::<A, C>,
        }
    }
}

impl<A, C, P: Clone> Clone for ShedLayer<A, C, P> {
    fn clone(&self) -> Self {
        ShedLayer {
            limiter: Arc::clone(&self.limiter),
            settings: self.settings,
            classify: self.classify.clone(),
        }
    }
}

impl<A, C, P> fmt::Debug for ShedLayer<A, C, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShedLayer")
            .field("limiter", &self.limiter)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}
