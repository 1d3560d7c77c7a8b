//! How a call through the layer is finished once it is over, as the
//! [`Classify::End`] of the layer's classifier says: `()` (when the
//! response comes: here) or, with the `http` feature,
//! [`AtBodyEnd`](super::classify::AtBodyEnd) (when its body ends, for gRPC:
//! in `future/body.rs`).

use std::pin::Pin;
use std::time::Duration;

use tokio::time::Sleep;

use super::classify::{CallEnd, Classify};
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::limiter::OwnedPermit;

/// How a call that ends as `Self` says is finished: what the service
/// answers, and how the outcome is recorded.
pub trait Finish<Res, E, K, A, C>: CallEnd {
    /// What the service answers: the inner service's response, or, at
    /// the body's end, that response with a body holding the permit.
    type Response;

    /// Ends the call whose inner service answered `result`: records its
    /// outcome as `classifier` says, or hands `permit` to the response to
    /// hold until the outcome is known (the layer's `timeout`, if any,
    /// still running, in `sleep` if it started).
    fn finish(
        classifier: &K,
        result: Result<Res, E>,
        permit: Option<OwnedPermit<A, C>>,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
    ) -> Result<Self::Response, E>;
}

/// The latency of the call admitted under `permit`, to now.
pub(crate) fn latency<A: Algorithm, C: Clock>(permit: &OwnedPermit<A, C>) -> Duration {
    let now = permit.limiter().clock().now();
    permit
        .started()
        .map_or(Duration::ZERO, |start| now.saturating_duration_since(start))
}

/// A call is over when the inner service's response comes (or it fails):
/// the permit is released and the outcome recorded then, as the layer's
/// [`Classify`] says.
impl<Res, E, K, A, C> Finish<Res, E, K, A, C> for ()
where
    K: Classify<Res, E>,
    A: Algorithm,
    C: Clock,
{
    type Response = Res;

    fn finish(
        classifier: &K,
        result: Result<Res, E>,
        permit: Option<OwnedPermit<A, C>>,
        _timeout: Option<Duration>,
        _sleep: Option<Pin<Box<Sleep>>>,
    ) -> Result<Res, E> {
        if let Some(permit) = permit {
            let latency = latency(&permit);
            permit.record(classifier.classify(&result, latency));
        }
        result
    }
}

/// What a service whose classifier `K` ends its calls answers, for an
/// inner service answering `Result<Res, E>`.
pub(crate) type Answer<K, Res, E, A, C> =
    <<K as Classify<Res, E>>::End as Finish<Res, E, K, A, C>>::Response;
