//! When a call through the layer is over, and so when its permit is
//! released: [`AtResponse`] (when the response comes) or, with the `http`
//! feature, [`AtBodyEnd`] (when its body ends).

use std::pin::Pin;
use std::time::Duration;

use tokio::time::Sleep;

use super::classify::Classify;
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::limiter::OwnedPermit;

/// When a call admitted by a [`Rheostat`](super::Rheostat) service is over:
/// [`AtResponse`] (the default), or [`AtBodyEnd`] for a layer built with
/// [`classify_at_end`](super::RheostatLayer::classify_at_end). It decides
/// what the service answers, and so is the last type parameter of the layer
/// and its service; it is implemented by these two types and by no other.
pub trait CallEnd<Res, E, K, A, C>: sealed::Sealed {
    /// What the service answers: the inner service's response, or, at
    /// the body's end, that response with a body holding the permit.
    type Response;

    /// Ends the call whose inner service answered `result`: records its
    /// outcome as `classifier` says, or hands `permit` to the response to
    /// hold until the outcome is known (the layer's `timeout`, if any,
    /// still running, in `sleep` if it started).
    #[doc(hidden)]
    fn finish(
        classifier: &K,
        result: Result<Res, E>,
        permit: Option<OwnedPermit<A, C>>,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
    ) -> Result<Self::Response, E>;
}

mod sealed {
    /// Only this crate's markers are a [`CallEnd`](super::CallEnd).
    #[allow(
        unreachable_pub,
        reason = "the seal of a public trait, named nowhere else"
    )]
    pub trait Sealed {}

    impl Sealed for super::AtResponse {}
    #[cfg(feature = "http")]
    impl Sealed for super::AtBodyEnd {}
}

/// A call is over when the inner service's response comes (or it fails):
/// the permit is released and the outcome recorded then, as the layer's
/// [`Classify`] says. The default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtResponse;

/// A call is over when the outcome is known: at the response's headers if
/// they say it, otherwise when the response's body ends, its permit held
/// by the body (a [`ResponseBody`](super::future::ResponseBody)) until
/// then, as the layer's [`ClassifyEnd`](super::ClassifyEnd) says. Set by
/// [`RheostatLayer::classify_at_end`](super::RheostatLayer::classify_at_end),
/// for gRPC.
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtBodyEnd;

/// The latency of the call admitted under `permit`, to now.
pub(crate) fn latency<A: Algorithm, C: Clock>(permit: &OwnedPermit<A, C>) -> Duration {
    let now = permit.limiter().clock().now();
    permit
        .started()
        .map_or(Duration::ZERO, |start| now.saturating_duration_since(start))
}

impl<Res, E, K, A, C> CallEnd<Res, E, K, A, C> for AtResponse
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
