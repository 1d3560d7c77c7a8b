//! [`ShedFuture`]: a server request waiting for a slot, answered, or
//! refused with a response.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{Response, StatusCode};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::settings::Settings;
use crate::algorithms::{Algorithm, Outcome};
use crate::clock::{Clock, DefaultClock};
use crate::error::Rejection;
use crate::limiter::OwnedPermit;
use crate::tower::acquire::Acquire;
use crate::tower::classify::{GrpcClassifier, GrpcCode, GRPC_PUSHBACK, GRPC_STATUS};

pin_project! {
    /// The response of a [`Shed`](super::Shed) service: the inner service's response,
    /// or the refusal.
    ///
    /// Waiting for a slot, it holds the request and the inner service
    /// readied for it; admitted, it holds the permit until the inner
    /// service's response comes, then records the outcome, or until the
    /// [request timeout](super::ShedLayer#the-request-timeout) runs out,
    /// then drops the inner call, releases the permit and answers `408
    /// Request Timeout`. A refused gRPC request is answered as gRPC expects
    /// (see [gRPC](super::ShedLayer#grpc)).
    ///
    /// # Cancel safety
    ///
    /// Dropping it while waiting leaves the limiter's queue (a slot handed
    /// to it goes to the next waiter); dropping it while the inner service
    /// runs drops that call and releases the permit as the limiter's drop
    /// outcome ([`Outcome::Ignore`] unless configured otherwise).
    ///
    /// # Panics
    ///
    /// If polled after it completed, or polled outside a Tokio runtime with
    /// the time driver enabled once admitted (for the request timeout) or
    /// while waiting for a slot under a limiter with a `max_wait`.
    pub struct ShedFuture<S, Req, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, S::Future, A, C>,
        permit: Option<OwnedPermit<A, C>>,
        // The request timeout, from the inner call's first `Pending`.
        #[pin]
        deadline: Option<Sleep>,
        settings: Settings,
        // Whether the request is a gRPC call.
        grpc: bool,
    }
}

pin_project! {
    #[project = StateProj]
    pub(super) enum State<S, Req, F, A, C> {
        /// Waiting for a slot, with the service readied for the request.
        Waiting {
            acquire: Acquire<A, C>,
            service: Option<S>,
            request: Option<Req>,
        },
        /// Admitted: the inner service is answering.
        Called {
            #[pin]
            future: F,
        },
        /// Refused at once.
        Refused {
            rejection: Rejection,
        },
        /// Answered.
        Done,
    }
}

impl<S: Service<Req>, Req, A, C> ShedFuture<S, Req, A, C> {
    pub(super) fn new(
        state: State<S, Req, S::Future, A, C>,
        permit: Option<OwnedPermit<A, C>>,
        settings: Settings,
        grpc: bool,
    ) -> Self {
        ShedFuture {
            state,
            permit,
            deadline: None,
            settings,
            grpc,
        }
    }
}

/// Whether a request with these headers is a gRPC call: its content type
/// is `application/grpc`, or `application/grpc+` or `;` something.
pub(super) fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|value| {
        let value = value.as_bytes();
        value
            .strip_prefix(b"application/grpc")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"+") || rest.starts_with(b";"))
    })
}

/// The outcome a server records for a gRPC response whose status came in
/// its headers: a failure of the server's own (the codes a client counts
/// as overloads by default) is an overload, anything else a success, as
/// [`server_outcome`](super::server_outcome) says of HTTP statuses.
pub(super) fn grpc_server_outcome(code: GrpcCode) -> Outcome {
    if GrpcClassifier::DEFAULT_OVERLOAD.contains(&code) {
        Outcome::Overload
    } else {
        Outcome::Success
    }
}

/// `text` as a `grpc-message` writes it: percent-encoded UTF-8, every byte
/// but a printable ASCII character other than `%` as `%XX`.
fn grpc_message(text: &str) -> HeaderValue {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if (0x20..0x7f).contains(&byte) && byte != b'%' {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    HeaderValue::try_from(encoded).unwrap_or(HeaderValue::from_static("refused"))
}

/// The response to a request refused as `rejection` says: for a gRPC call,
/// a trailers-only response with the layer's gRPC status and a
/// `grpc-retry-pushback-ms`; otherwise the layer's status with a
/// `Retry-After`.
fn refusal<B: Default>(rejection: Rejection, settings: &Settings, grpc: bool) -> Response<B> {
    let after = rejection.retry_after().unwrap_or(settings.retry_after);
    if grpc {
        let millis = u64::try_from(after.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(u64::from(after.subsec_nanos() % 1_000_000 > 0));
        let mut response = Response::new(B::default());
        *response.status_mut() = StatusCode::OK;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(
            GRPC_STATUS,
            HeaderValue::from(settings.grpc_status.as_i32()),
        );
        headers.insert("grpc-message", grpc_message(&rejection.to_string()));
        headers.insert(GRPC_PUSHBACK, HeaderValue::from(millis));
        response.extensions_mut().insert(rejection);
        return response;
    }
    let seconds = after
        .as_secs()
        .saturating_add(u64::from(after.subsec_nanos() > 0));
    let mut response = Response::new(B::default());
    *response.status_mut() = settings.status;
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response.extensions_mut().insert(rejection);
    response
}

/// The answer to a request whose handler ran past the request timeout:
/// `408 Request Timeout`, or for a gRPC call a trailers-only
/// `DEADLINE_EXCEEDED`, with an empty body.
fn timed_out<B: Default>(settings: &Settings, grpc: bool) -> Response<B> {
    let mut response = Response::new(B::default());
    if grpc {
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(
            GRPC_STATUS,
            HeaderValue::from(GrpcCode::DeadlineExceeded.as_i32()),
        );
        let message = format!("request timed out after {:?}", settings.request_timeout);
        headers.insert("grpc-message", grpc_message(&message));
    } else {
        *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    }
    response
}

impl<S, Req, ResBody, A, C> Future for ShedFuture<S, Req, A, C>
where
    S: Service<Req, Response = Response<ResBody>>,
    ResBody: Default,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<Response<ResBody>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting {
                    acquire,
                    service,
                    request,
                } => match ready!(acquire.as_mut().poll(cx)) {
                    Ok(permit) => {
                        let (Some(mut service), Some(request)) = (service.take(), request.take())
                        else {
                            unreachable!("a waiting request keeps its service and itself")
                        };
                        *this.permit = Some(permit);
                        let future = service.call(request);
                        this.state.set(State::Called { future });
                    }
                    Err(rejection) => {
                        this.state.set(State::Done);
                        return Poll::Ready(Ok(refusal(rejection, this.settings, *this.grpc)));
                    }
                },
                StateProj::Called { future } => {
                    let Poll::Ready(result) = future.poll(cx) else {
                        if this.deadline.is_none() {
                            let after = this.settings.request_timeout;
                            this.deadline.set(Some(tokio::time::sleep(after)));
                        }
                        let Some(deadline) = this.deadline.as_mut().as_pin_mut() else {
                            return Poll::Pending;
                        };
                        ready!(deadline.poll(cx));
                        // Dropping the call, then the permit: released as
                        // the limiter's drop outcome.
                        this.state.set(State::Done);
                        drop(this.permit.take());
                        return Poll::Ready(Ok(timed_out(this.settings, *this.grpc)));
                    };
                    if let Some(permit) = this.permit.take() {
                        permit.record(match &result {
                            Ok(response) => match response.headers().get(GRPC_STATUS) {
                                Some(code) if *this.grpc => {
                                    grpc_server_outcome(GrpcCode::parse(code.as_bytes()))
                                }
                                _ => (this.settings.outcome)(response.status()),
                            },
                            Err(_) => Outcome::Overload,
                        });
                    }
                    this.state.set(State::Done);
                    return Poll::Ready(result);
                }
                StateProj::Refused { rejection } => {
                    let rejection = *rejection;
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(refusal(rejection, this.settings, *this.grpc)));
                }
                StateProj::Done => panic!("polled after completion"),
            }
        }
    }
}

impl<S: Service<Req>, Req, A: Algorithm, C: Clock> fmt::Debug for ShedFuture<S, Req, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting",
            State::Called { .. } => "called",
            State::Refused { .. } => "refused",
            State::Done => "done",
        };
        f.debug_struct("ShedFuture")
            .field("state", &state)
            .field("permit", &self.permit)
            .field("grpc", &self.grpc)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::StatusCode;

    use super::*;

    #[test]
    fn retry_after_is_rounded_up_to_whole_seconds() {
        let settings = |retry_after| Settings {
            retry_after,
            ..Settings::new(None)
        };
        let rejection = Rejection::new(crate::RejectReason::LimitReached, "fixed", None);
        for (after, header) in [
            (Duration::ZERO, "0"),
            (Duration::from_millis(1), "1"),
            (Duration::from_secs(1), "1"),
            (Duration::from_millis(1001), "2"),
            (Duration::from_secs(30), "30"),
            (Duration::MAX, "18446744073709551615"),
        ] {
            let response: Response<()> = refusal(rejection, &settings(after), false);
            assert_eq!(response.headers()[RETRY_AFTER], header, "{after:?}");
        }
        // The rejection's own wait comes first.
        let open = Rejection::new(
            crate::RejectReason::Open,
            "breaker",
            Some(Duration::from_millis(2500)),
        );
        let response: Response<()> = refusal(open, &settings(Duration::from_secs(9)), false);
        assert_eq!(response.headers()[RETRY_AFTER], "3");
    }

    #[test]
    fn a_grpc_refusal_is_trailers_only_with_its_pushback_rounded_up_to_milliseconds() {
        let settings = Settings {
            grpc_status: GrpcCode::ResourceExhausted,
            ..Settings::new(None)
        };
        for (after, header) in [
            (None, "1000"),
            (Some(Duration::ZERO), "0"),
            (Some(Duration::from_micros(1)), "1"),
            (Some(Duration::from_millis(2500)), "2500"),
            (Some(Duration::from_micros(2_500_001)), "2501"),
            (Some(Duration::MAX), "18446744073709551615"),
        ] {
            let rejection = Rejection::new(crate::RejectReason::Open, "breaker", after);
            let response: Response<()> = refusal(rejection, &settings, true);
            assert_eq!(response.status(), StatusCode::OK);
            let headers = response.headers();
            assert_eq!(headers[CONTENT_TYPE], "application/grpc");
            assert_eq!(headers[GRPC_STATUS], "8");
            assert_eq!(headers[GRPC_PUSHBACK], header, "{after:?}");
            assert!(!headers.contains_key(RETRY_AFTER));
            assert!(response.extensions().get::<Rejection>().is_some());
        }
    }

    #[test]
    fn a_timed_out_request_is_answered_408_or_deadline_exceeded_for_grpc() {
        let settings = Settings::new(None);
        let response: Response<()> = timed_out(&settings, false);
        assert_eq!(response.status(), StatusCode::REQUEST_TIMEOUT);
        assert!(response.headers().is_empty());
        let response: Response<()> = timed_out(&settings, true);
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers();
        assert_eq!(headers[CONTENT_TYPE], "application/grpc");
        assert_eq!(headers[GRPC_STATUS], "4");
        assert_eq!(headers["grpc-message"], "request timed out after 15s");
    }

    #[test]
    fn grpc_requests_are_known_by_their_content_type() {
        let headers = |value: &'static str| {
            let mut map = http::HeaderMap::new();
            map.insert(CONTENT_TYPE, HeaderValue::from_static(value));
            map
        };
        for grpc in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc;charset=utf-8",
        ] {
            assert!(is_grpc(&headers(grpc)), "{grpc}");
        }
        for other in [
            "application/grpc-web",
            "application/json",
            "text/plain",
            "application/grpcx",
        ] {
            assert!(!is_grpc(&headers(other)), "{other}");
        }
        assert!(!is_grpc(&http::HeaderMap::new()));
    }

    #[test]
    fn a_grpc_message_is_percent_encoded() {
        assert_eq!(
            grpc_message("limit reached (fixed)"),
            "limit reached (fixed)"
        );
        assert_eq!(grpc_message("100% ouvert\n"), "100%25 ouvert%0A");
        assert_eq!(grpc_message("été"), "%C3%A9t%C3%A9");
    }
}
