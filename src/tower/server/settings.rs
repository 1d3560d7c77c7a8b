//! What a [`ShedLayer`](super::ShedLayer) hands its services: how to refuse,
//! whether to wait, how long a request may hold its slot, and what each
//! response says about the server.

use std::fmt;
use std::time::Duration;

use http::StatusCode;

use crate::algorithms::Outcome;
use crate::priority::Class;
use crate::tower::classify::GrpcCode;

/// The `Retry-After` of a refusal whose [`Rejection`](crate::Rejection) does not say how long
/// to wait, unless [`ShedLayer::retry_after`](super::ShedLayer::retry_after) says otherwise.
pub(super) const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest an admitted request holds its slot, unless
/// [`ShedLayer::request_timeout`](super::ShedLayer::request_timeout) says
/// otherwise: 15 s, Envoy's default route timeout. It is longer than a
/// caller waits for an ordinary answer, and short enough that a client
/// trickling its body in (a slowloris) or a handler stuck on a dead
/// dependency gives its slot back within a few of its callers' retries,
/// instead of holding it for as long as the connection lives.
pub(super) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// What a layer and its services do with each request.
#[derive(Clone, Copy)]
pub(super) struct Settings {
    /// The status of a refusal.
    pub(super) status: StatusCode,
    /// A refusal's `Retry-After` when its rejection does not know one.
    pub(super) retry_after: Duration,
    /// Whether a request may wait in the limiter's queue.
    pub(super) wait: bool,
    /// The outcome recorded for a response of each status.
    pub(super) outcome: fn(StatusCode) -> Outcome,
    /// The class of a request the class function gives none: the limiter's
    /// least critical (`None` for a limiter without priorities).
    pub(super) unclassified: Option<Class>,
    /// The gRPC status of a gRPC call's refusal.
    pub(super) grpc_status: GrpcCode,
    /// The longest an admitted request holds its slot before it is
    /// answered `408 Request Timeout` (`DEADLINE_EXCEEDED` for gRPC).
    pub(super) request_timeout: Duration,
}

impl Settings {
    /// The settings of a layer built with [`ShedLayer::new`](super::ShedLayer::new).
    pub(super) fn new(unclassified: Option<Class>) -> Self {
        Settings {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after: DEFAULT_RETRY_AFTER,
            wait: true,
            outcome: server_outcome,
            unclassified,
            grpc_status: GrpcCode::Unavailable,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("status", &self.status)
            .field("retry_after", &self.retry_after)
            .field("wait", &self.wait)
            .field("unclassified", &self.unclassified)
            .field("grpc_status", &self.grpc_status)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

/// The outcome a [`ShedLayer`](super::ShedLayer) records for a response of `status` unless
/// told otherwise ([`ShedLayer::classify_status`](super::ShedLayer::classify_status)): a 5xx is an overload,
/// anything else a success.
///
/// # Examples
///
/// ```
/// use http::StatusCode;
/// use rheostat::{tower::server_outcome, Outcome};
///
/// assert_eq!(server_outcome(StatusCode::OK), Outcome::Success);
/// assert_eq!(server_outcome(StatusCode::NOT_FOUND), Outcome::Success);
/// assert_eq!(server_outcome(StatusCode::SERVICE_UNAVAILABLE), Outcome::Overload);
/// ```
pub fn server_outcome(status: StatusCode) -> Outcome {
    if status.is_server_error() {
        Outcome::Overload
    } else {
        Outcome::Success
    }
}
