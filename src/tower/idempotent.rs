//! Which requests may be sent more than once ([`RetryRule`],
//! [`Idempotent`]), and which may be cut early: a request that is not
//! idempotent may take effect late, and must not take effect twice.

use super::class::ClassifyRequest;
use crate::priority::Class;

/// Which requests a retrying service ([`RheostatLayer::retry`](super::RheostatLayer::retry))
/// may send more than once.
///
/// [`IdempotentOnly`] (the default) allows the requests that say they are
/// [`Idempotent`]; [`RheostatLayer::retry_any_method`](super::RheostatLayer::retry_any_method)
/// allows every request. Implement it for a
/// rule of your own (a `POST` carrying an `Idempotency-Key` header, a gRPC
/// method known to be safe).
///
/// # Examples
///
/// ```
/// use rheostat::tower::RetryRule;
///
/// /// Reads may be retried, writes may not.
/// #[derive(Clone, Copy, Debug)]
/// struct ReadsOnly;
///
/// enum Query { Read(String), Write(String) }
///
/// impl RetryRule<Query> for ReadsOnly {
///     fn may_retry(&self, query: &Query) -> bool {
///         matches!(query, Query::Read(_))
///     }
/// }
///
/// assert!(ReadsOnly.may_retry(&Query::Read("balance".into())));
/// assert!(!ReadsOnly.may_retry(&Query::Write("transfer".into())));
/// ```
pub trait RetryRule<Req> {
    /// Whether `request` may be sent again after a failed attempt.
    fn may_retry(&self, request: &Req) -> bool;
}

/// A request that knows whether sending it twice has the effect of sending
/// it once, and so may be retried by the default rule, [`IdempotentOnly`].
///
/// With the `http` feature, implemented for `http::Method` and
/// `http::Request`: `GET`, `HEAD`, `PUT`, `DELETE`, `OPTIONS` and
/// `TRACE` are idempotent (RFC 9110, section 9.2.2); `POST`, `PATCH`,
/// `CONNECT` and extension methods are not. Implement it for a request type
/// of your own, or retry every request with
/// [`RheostatLayer::retry_any_method`](super::RheostatLayer::retry_any_method).
///
/// # Examples
///
/// ```
/// use rheostat::tower::Idempotent;
///
/// assert!(http::Method::PUT.is_idempotent());
/// assert!(!http::Method::POST.is_idempotent());
/// let request = http::Request::delete("http://example.com/carts/7").body(()).unwrap();
/// assert!(request.is_idempotent());
/// ```
pub trait Idempotent {
    /// Whether sending it again is safe.
    fn is_idempotent(&self) -> bool;
}

#[cfg(feature = "http")]
impl Idempotent for http::Method {
    fn is_idempotent(&self) -> bool {
        matches!(
            *self,
            http::Method::GET
                | http::Method::HEAD
                | http::Method::PUT
                | http::Method::DELETE
                | http::Method::OPTIONS
                | http::Method::TRACE
        )
    }
}

/// Not idempotent, whatever its method: a request carrying this in its
/// extensions (`request.extensions_mut().insert(NotIdempotent)`) is not
/// [`Idempotent`], so it is neither retried by the default rule
/// ([`IdempotentOnly`]) nor, through a layer whose class function is
/// `IdempotentOnly`
/// ([`classify_request`](super::RheostatLayer::classify_request)), [cut
/// early](ClassifyRequest::cut_early): each of its attempts gets the
/// layer's timeout, never a shorter one its limiter
/// [learned](crate::timeout). For a request that must not take effect
/// twice and may take effect late: a payment, a `PUT` that appends.
///
/// A layer with no class function, or one of your own, does not read it
/// (a layer is generic over its requests, and only a class function knows
/// them to be HTTP ones): give the layer `IdempotentOnly`, or have your
/// class function's [`cut_early`](ClassifyRequest::cut_early) read it.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use rheostat::tower::{HttpClassifier, Idempotent, IdempotentOnly, NotIdempotent, RheostatLayer};
/// use rheostat::{algorithms::Fixed, Limiter, Timeout};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// let mut refund = http::Request::put("https://payments.example/refunds/7").body(())?;
/// refund.extensions_mut().insert(NotIdempotent);
/// assert!(!refund.is_idempotent());
///
/// let limiter = Limiter::builder(Fixed::new(8)?)
///     .timeout(Timeout::learned(Duration::from_secs(15)))
///     .build()?;
/// let client = RheostatLayer::new(Arc::new(limiter))
///     .classify(HttpClassifier::new())
///     .timeout(Duration::from_secs(5))?
///     .classify_request(IdempotentOnly)
///     .layer(service_fn(|_: http::Request<()>| async {
///         Ok::<_, std::io::Error>(http::Response::new(()))
///     }));
/// // Given the layer's 5 s, however short a timeout has been learned.
/// client.oneshot(refund).await?;
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NotIdempotent;

/// Idempotent if its method is, unless it carries [`NotIdempotent`].
#[cfg(feature = "http")]
impl<B> Idempotent for http::Request<B> {
    fn is_idempotent(&self) -> bool {
        self.method().is_idempotent() && self.extensions().get::<NotIdempotent>().is_none()
    }
}

/// The default [`RetryRule`]: retry a request only if it is
/// [`Idempotent`].
///
/// It is a class function too
/// ([`classify_request`](super::RheostatLayer::classify_request)): a
/// request that is not `Idempotent` (for HTTP, a `POST`, a `PATCH`, a
/// request marked `NotIdempotent`) is not [cut
/// early](ClassifyRequest::cut_early), and every request is of the
/// limiter's default class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdempotentOnly;

impl<Req: Idempotent> RetryRule<Req> for IdempotentOnly {
    fn may_retry(&self, request: &Req) -> bool {
        request.is_idempotent()
    }
}

impl<Req: Idempotent> ClassifyRequest<Req> for IdempotentOnly {
    fn class(&self, _request: &Req) -> Option<Class> {
        None
    }

    fn cut_early(&self, request: &Req) -> bool {
        request.is_idempotent()
    }
}

/// A [`RetryRule`] that retries every request, whatever its method: for
/// requests that carry no method, or whose effects the server
/// deduplicates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AnyRequest;

impl<Req> RetryRule<Req> for AnyRequest {
    fn may_retry(&self, _request: &Req) -> bool {
        true
    }
}

#[cfg(all(test, feature = "http"))]
mod tests {
    use super::{AnyRequest, Idempotent, IdempotentOnly, RetryRule};

    fn request(method: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("http://example.com/")
            .body(())
            .unwrap_or_else(|e| panic!("{method}: {e}"))
    }

    #[test]
    fn only_the_idempotent_methods_are_retried_by_default() {
        for method in ["GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"] {
            assert!(request(method).is_idempotent(), "{method}");
            assert!(IdempotentOnly.may_retry(&request(method)), "{method}");
        }
        for method in ["POST", "PATCH", "CONNECT", "PURGE", "LOCK", "get"] {
            assert!(!request(method).is_idempotent(), "{method}");
            assert!(!IdempotentOnly.may_retry(&request(method)), "{method}");
        }
    }

    #[test]
    fn any_request_retries_every_method_and_any_type() {
        for method in ["GET", "POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(AnyRequest.may_retry(&request(method)), "{method}");
        }
        assert!(AnyRequest.may_retry(&"a request that is no HTTP request"));
    }

    #[test]
    fn a_request_marked_not_idempotent_is_not_whatever_its_method_and_is_not_cut_early() {
        use super::{ClassifyRequest, NotIdempotent};
        for method in ["GET", "PUT", "DELETE", "POST"] {
            let mut marked = request(method);
            marked.extensions_mut().insert(NotIdempotent);
            assert!(!marked.is_idempotent(), "{method}");
            assert!(!IdempotentOnly.may_retry(&marked), "{method}");
            assert!(!IdempotentOnly.cut_early(&marked), "{method}");
            assert_eq!(IdempotentOnly.class(&marked), None);
        }
        assert!(IdempotentOnly.cut_early(&request("GET")));
        assert!(!IdempotentOnly.cut_early(&request("POST")));
    }

    #[test]
    fn the_method_decides_whatever_the_body() {
        let post = http::Request::post("http://example.com/")
            .body(String::from("{}"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!post.is_idempotent());
        let put = http::Request::put("http://example.com/")
            .body(vec![1u8, 2, 3])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(put.is_idempotent());
    }
}
