//! [`ShedFuture`]: a server request waiting for a slot, answered, or
//! refused with a response.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::header::{HeaderValue, RETRY_AFTER};
use http::Response;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::layer::Settings;
use crate::algorithms::{Algorithm, Outcome};
use crate::clock::{Clock, DefaultClock};
use crate::error::Rejection;
use crate::limiter::OwnedPermit;
use crate::tower::service::Acquire;

pin_project! {
    /// The response of a [`Shed`](super::Shed) service: the inner service's response,
    /// or the refusal.
    ///
    /// Waiting for a slot, it holds the request and the inner service
    /// readied for it; admitted, it holds the permit until the inner
    /// service's response comes, then records the outcome.
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
    /// If polled after it completed, or, while waiting for a slot under a
    /// limiter with a `max_wait`, polled outside a Tokio runtime with the
    /// time driver enabled.
    pub struct ShedFuture<S, Req, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: State<S, Req, S::Future, A, C>,
        permit: Option<OwnedPermit<A, C>>,
        settings: Settings,
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
    ) -> Self {
        ShedFuture {
            state,
            permit,
            settings,
        }
    }
}

/// The response to a request refused as `rejection` says.
fn refusal<B: Default>(rejection: Rejection, settings: &Settings) -> Response<B> {
    let after = rejection.retry_after().unwrap_or(settings.retry_after);
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
                        return Poll::Ready(Ok(refusal(rejection, this.settings)));
                    }
                },
                StateProj::Called { future } => {
                    let result = ready!(future.poll(cx));
                    if let Some(permit) = this.permit.take() {
                        permit.record(match &result {
                            Ok(response) => (this.settings.outcome)(response.status()),
                            Err(_) => Outcome::Overload,
                        });
                    }
                    this.state.set(State::Done);
                    return Poll::Ready(result);
                }
                StateProj::Refused { rejection } => {
                    let rejection = *rejection;
                    this.state.set(State::Done);
                    return Poll::Ready(Ok(refusal(rejection, this.settings)));
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
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::StatusCode;

    use super::super::layer::server_outcome;
    use super::*;

    #[test]
    fn retry_after_is_rounded_up_to_whole_seconds() {
        let settings = |retry_after| Settings {
            status: StatusCode::SERVICE_UNAVAILABLE,
            retry_after,
            wait: false,
            outcome: server_outcome,
            unclassified: None,
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
            let response: Response<()> = refusal(rejection, &settings(after));
            assert_eq!(response.headers()[RETRY_AFTER], header, "{after:?}");
        }
        // The rejection's own wait comes first.
        let open = Rejection::new(
            crate::RejectReason::Open,
            "breaker",
            Some(Duration::from_millis(2500)),
        );
        let response: Response<()> = refusal(open, &settings(Duration::from_secs(9)));
        assert_eq!(response.headers()[RETRY_AFTER], "3");
    }
}
