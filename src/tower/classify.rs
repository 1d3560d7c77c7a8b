//! How a finished call becomes an [`Outcome`].

use std::time::Duration;

use crate::algorithms::Outcome;
use crate::retry::Verdict;

#[cfg(feature = "http")]
mod grpc;
#[cfg(feature = "http")]
mod http_response;

#[cfg(feature = "http")]
pub use grpc::GrpcClassifier;
#[cfg(feature = "http")]
pub(crate) use grpc::GrpcCode;
#[cfg(feature = "http")]
pub(crate) use grpc::{GRPC_PUSHBACK, GRPC_STATUS};
#[cfg(feature = "http")]
pub use http_response::HttpClassifier;

/// Turns the result of a call, and how long it took, into what it says
/// about the dependency.
///
/// Wrap a closure in [`ClassifyFn`] to use it as one.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::tower::{Classify, ClassifyFn};
/// use rheostat::Outcome;
///
/// // A gRPC-ish classifier: only "unavailable" is the dependency's fault.
/// let classify = ClassifyFn(|r: &Result<u32, &str>, _latency: Duration| match r {
///     Ok(_) => Outcome::Success,
///     Err(e) if *e == "unavailable" => Outcome::Overload,
///     Err(_) => Outcome::Ignore,
/// });
/// assert_eq!(classify.classify(&Err("unavailable"), Duration::ZERO), Outcome::Overload);
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot classify a `Result<{Res}, {E}>`",
    label = "no classifier for these results",
    note = "a tower layer must be told what a response says about the dependency: \
            `.classify(HttpClassifier::new())` for HTTP responses (5xx and 429 are overloads), \
            `.classify(ResultClassifier)` if every response is a success and every error an overload, \
            or `.classify(ClassifyFn(|result, latency| ...))`"
)]
pub trait Classify<Res, E> {
    /// When a call is over, and so when its permit is released and what a
    /// layer's service answers: `()` for when the response comes (the inner
    /// service's response is the answer), as for every classifier but
    /// [`GrpcClassifier`] and for any of your own. A `GrpcClassifier`'s is
    /// when the outcome is known, at the end of the response's body if its
    /// headers do not say it (the answer's body then holds the permit: see
    /// [`RheostatLayer::classify`](super::RheostatLayer::classify)).
    type End: CallEnd;

    /// What `result`, which took `latency`, says about the dependency.
    fn classify(&self, result: &Result<Res, E>, latency: Duration) -> Outcome;

    /// What `result` says to a [retry](crate::retry): its outcome, whether
    /// another attempt could succeed, and how long the server asked to be
    /// left alone. Only the retrying service
    /// ([`RheostatLayer::retry`](super::RheostatLayer::retry)) asks for it.
    ///
    /// By default, [`classify`](Self::classify)'s outcome, retryable if it
    /// is an overload. Override it to keep an overload from being retried
    /// (an error a retry cannot fix) or to read a server's `Retry-After`;
    /// keep its outcome the one [`classify`](Self::classify) gives.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::retry::Verdict;
    /// use rheostat::tower::Classify;
    /// use rheostat::Outcome;
    ///
    /// /// Fails as an overload, but says a retry cannot help.
    /// struct Permanent;
    ///
    /// impl Classify<(), &'static str> for Permanent {
    ///     type End = ();
    ///     fn classify(&self, r: &Result<(), &'static str>, _: Duration) -> Outcome {
    ///         if r.is_ok() { Outcome::Success } else { Outcome::Overload }
    ///     }
    ///     fn verdict(&self, r: &Result<(), &'static str>, latency: Duration) -> Verdict {
    ///         Verdict::from(self.classify(r, latency)).not_retryable()
    ///     }
    /// }
    ///
    /// let verdict = Permanent.verdict(&Err("disk full"), Duration::ZERO);
    /// assert_eq!(verdict.outcome, Outcome::Overload);
    /// assert!(!verdict.may_retry());
    /// ```
    fn verdict(&self, result: &Result<Res, E>, latency: Duration) -> Verdict {
        Verdict::from(self.classify(result, latency))
    }
}

/// Turns an HTTP response whose outcome may come after its headers — at
/// the end of its body, in its trailers, as a gRPC call's status does —
/// into what it says about the dependency: what a classifier whose
/// [`Classify::End`] is the body's end ([`GrpcClassifier`]) is asked.
///
/// The layer asks [`head`](Self::head) when the response's headers come
/// (or the inner service fails); if it answers `None`, the layer hands the
/// call's permit to the response's body and asks [`end`](Self::end) when
/// the body ends, with the latency to then.
#[cfg(feature = "http")]
#[allow(
    unreachable_pub,
    reason = "named in the bounds of the public response body, not by its users"
)]
pub trait ClassifyEnd {
    /// What `result`, `latency` after admission, says about the dependency,
    /// if its headers say it (a gRPC status in a trailers-only response, an
    /// error from the inner service); `None` if the outcome comes with the
    /// end of the body. (An error from the inner service has no body: an
    /// error left for later is classified at once as a body that
    /// [failed](BodyEnd::Failed).)
    fn head<B, E>(
        &self,
        result: &Result<http::Response<B>, E>,
        latency: Duration,
    ) -> Option<Outcome>;

    /// What a response whose body ended as `end`, `latency` after
    /// admission, says about the dependency.
    fn end(&self, end: BodyEnd<'_>, latency: Duration) -> Outcome;
}

/// How a response's body ended, for [`ClassifyEnd::end`].
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug)]
#[allow(
    unreachable_pub,
    reason = "named in a method of a sealed public trait, not by its users"
)]
pub enum BodyEnd<'a> {
    /// With these trailers (for gRPC, where its status is).
    Trailers(&'a http::HeaderMap),
    /// Without trailers.
    Finished,
    /// With an error: the connection reset, the stream broken, the layer's
    /// timeout run out.
    Failed,
}

/// When a call admitted by a [`Rheostat`](super::Rheostat) service is
/// over, as its classifier's [`Classify::End`] says: `()` (when the inner
/// service's response comes), or [`AtBodyEnd`] (when the response's body
/// ends). Implemented by these two types and by no other.
pub trait CallEnd: sealed::Sealed {}

impl CallEnd for () {}
#[cfg(feature = "http")]
impl CallEnd for AtBodyEnd {}

mod sealed {
    /// Only `()` and [`AtBodyEnd`](super::AtBodyEnd) are a
    /// [`CallEnd`](super::CallEnd).
    #[allow(
        unreachable_pub,
        reason = "the seal of a public trait, named nowhere else"
    )]
    pub trait Sealed {}

    impl Sealed for () {}
    #[cfg(feature = "http")]
    impl Sealed for super::AtBodyEnd {}
}

/// A call is over when the outcome is known: at the response's headers if
/// they say it, otherwise when the response's body ends, its permit held
/// by the body (a [`ResponseBody`](super::future::ResponseBody)) until
/// then. The [`Classify::End`] of [`GrpcClassifier`].
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtBodyEnd;

/// A closure `Fn(&Result<Res, E>, Duration) -> Outcome` as a [`Classify`].
///
/// (A wrapper rather than an implementation for every closure: such a
/// blanket implementation makes the compiler fail to prove that futures
/// using the service are `Send`.)
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassifyFn<F>(pub F);

impl<F, Res, E> Classify<Res, E> for ClassifyFn<F>
where
    F: Fn(&Result<Res, E>, Duration) -> Outcome,
{
    type End = ();

    fn classify(&self, result: &Result<Res, E>, latency: Duration) -> Outcome {
        (self.0)(result, latency)
    }
}

/// A response is a success, an error an overload: for a service whose
/// responses are all successes. Not for HTTP, whose 503 is a response:
/// use [`HttpClassifier`](super::HttpClassifier) (the `http` feature).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::tower::{Classify, ResultClassifier};
/// use rheostat::Outcome;
///
/// let ok: Result<u32, &str> = Ok(7);
/// assert_eq!(ResultClassifier.classify(&ok, Duration::ZERO), Outcome::Success);
/// assert_eq!(ResultClassifier.classify(&Err::<u32, _>("reset"), Duration::ZERO), Outcome::Overload);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultClassifier;

impl<Res, E> Classify<Res, E> for ResultClassifier {
    type End = ();

    fn classify(&self, result: &Result<Res, E>, _latency: Duration) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Overload,
        }
    }
}

/// No classifier yet: what [`RheostatLayer::new`](super::RheostatLayer::new)
/// and [`KeyedLayer::new`](super::KeyedLayer::new) start with.
///
/// It classifies nothing (it implements no [`Classify`]), so a service made
/// from a layer that still has it cannot be called: the layer must be told
/// what a response says about the dependency, with `.classify(...)`. There
/// is no default, because none is right for every service: a result-only
/// default would count an HTTP `503` as a success, and an HTTP default would
/// not fit a gRPC or database client. Give
/// [`HttpClassifier::new()`](super::HttpClassifier::new) for HTTP,
/// [`ResultClassifier`] for a service whose every response is a success and
/// every error an overload, or a closure in a [`ClassifyFn`].
///
/// # Examples
///
/// A layer told how to classify HTTP responses:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use rheostat::{algorithms::Fixed, tower::{HttpClassifier, RheostatLayer}, Limiter};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let limiter = Arc::new(Limiter::new(Fixed::new(8)?));
/// let client = RheostatLayer::new(limiter)
///     .classify(HttpClassifier::new())
///     .layer(service_fn(|_: http::Request<()>| async {
///         http::Response::builder().status(503).body(())
///     }));
/// let response = client.oneshot(http::Request::new(())).await?;
/// assert_eq!(response.status(), 503); // a response, recorded as an overload
/// # Ok(())
/// # }
/// ```
///
/// The same layer not told cannot be called. Here the compiler says that
/// `oneshot` exists for `Rheostat<_, Unclassified, _>` but its bounds are
/// not met; where the client is given to code that needs a
/// `Service<http::Request<()>>`, it says that `Unclassified` cannot
/// classify a `Result<Response<()>, http::Error>`, and how to give a
/// classifier.
///
/// ```compile_fail,E0599
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use rheostat::{algorithms::Fixed, tower::RheostatLayer, Limiter};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let limiter = Arc::new(Limiter::new(Fixed::new(8)?));
/// let client = RheostatLayer::new(limiter)
///     .layer(service_fn(|_: http::Request<()>| async {
///         http::Response::builder().status(503).body(())
///     }));
/// let response = client.oneshot(http::Request::new(())).await?;
/// assert_eq!(response.status(), 503);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unclassified;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Classify;
    use crate::algorithms::Outcome;

    const FAST: Duration = Duration::from_millis(5);

    #[test]
    fn the_default_verdict_is_the_outcome_retryable_if_an_overload() {
        let classify = super::ResultClassifier;
        let verdict = Classify::<(), ()>::verdict(&classify, &Err(()), FAST);
        assert!(verdict.may_retry());
        let verdict = Classify::<(), ()>::verdict(&classify, &Ok(()), FAST);
        assert_eq!(verdict.outcome, Outcome::Success);
        assert!(!verdict.may_retry());
        let ignore = super::ClassifyFn(|_: &Result<(), ()>, _: Duration| Outcome::Ignore);
        assert!(!ignore.verdict(&Err(()), FAST).may_retry());
    }
}
