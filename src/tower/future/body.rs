//! [`ResponseBody`]: a response's body holding its call's permit until it
//! ends, for a layer that classifies at the end of the body (gRPC).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::CallError;
use crate::limiter::OwnedPermit;
use crate::tower::classify::{AtBodyEnd, BodyEnd, ClassifyEnd};
use crate::tower::end::{latency, Finish};

pin_project! {
    /// The body of a response from a layer whose classifier reads the
    /// outcome at the end of the body ([`GrpcClassifier`](crate::tower::GrpcClassifier)):
    /// the inner service's body, holding the call's permit until the call's
    /// outcome is known.
    ///
    /// Where the response's headers said the outcome (a gRPC status in a
    /// trailers-only response), the permit was released then, and the body
    /// is the inner one. Otherwise the body holds the permit until it ends
    /// — with trailers (a gRPC call's status), without, or with an error —
    /// and records the outcome the classifier gives for that end, with the
    /// latency from admission to then. The layer's timeout, if it has one,
    /// runs on from the request into the body: when it runs out the call is
    /// recorded as an overload and the body ends with
    /// [`CallError::TimedOut`]. The deadline is checked before the inner
    /// body is polled, so a body whose frames are always ready ends at it
    /// too (within 32 frames: the clock is read every 32nd poll).
    ///
    /// Its errors are the inner body's, as [`CallError::Failed`].
    ///
    /// # Cancel safety
    ///
    /// Dropped before it ends (a client that stops reading a stream, a
    /// cancelled call), it releases the permit as the limiter's drop
    /// outcome ([`Outcome::Ignore`](crate::Outcome::Ignore) unless the
    /// limiter was built with [`on_drop`](crate::Builder::on_drop)), as a
    /// dropped response future does.
    ///
    /// # Panics
    ///
    /// With a timeout, if polled outside a Tokio runtime with the time
    /// driver enabled.
    pub struct ResponseBody<B, K, A = Box<dyn Algorithm>, C = DefaultClock> {
        #[pin]
        inner: B,
        held: Option<Held<K, A, C>>,
        timed_out: bool,
    }
}

/// What a body holds while its call is not over.
struct Held<K, A, C> {
    permit: OwnedPermit<A, C>,
    classifier: K,
    deadline: Option<Deadline>,
}

/// How many polls of a body pass between two reads of the clock. A body
/// whose frames are always ready never waits on its sleep, so only the
/// clock tells it that its deadline passed; a read costs about what
/// passing a frame on through the body does (both 150–300 ns in a debug
/// build, `tests/hostile_tower.rs` prints them), so reading it every 32nd
/// poll costs a frame about 3% more, and lets such a body run past its
/// deadline by 31 frames at most: microseconds.
const POLLS_PER_CLOCK_READ: u32 = 32;

/// The layer's timeout, running on into the body.
struct Deadline {
    /// The timeout, for the error.
    after: Duration,
    /// Runs out at the deadline: polled when the inner body is pending, so
    /// that the body is woken then.
    sleep: Pin<Box<Sleep>>,
    /// Polls left before the clock is read again: 0 reads it.
    polls_to_read: u32,
}

impl Deadline {
    /// Whether the deadline has passed, by the clock, read on the first
    /// poll and every [`POLLS_PER_CLOCK_READ`]th after it.
    fn passed(&mut self) -> bool {
        if self.polls_to_read > 0 {
            self.polls_to_read -= 1;
            return false;
        }
        self.polls_to_read = POLLS_PER_CLOCK_READ - 1;
        tokio::time::Instant::now() >= self.sleep.deadline()
    }
}

impl<B, K, A: Algorithm, C: Clock> ResponseBody<B, K, A, C> {
    /// `inner`, holding nothing: the call is over.
    fn over(inner: B) -> Self {
        ResponseBody {
            inner,
            held: None,
            timed_out: false,
        }
    }

    /// Whether it still holds its call's permit: the outcome is not known
    /// yet.
    pub fn holds_permit(&self) -> bool {
        self.held.is_some()
    }

    /// The inner body, unwrapped (a permit it holds is released as the
    /// limiter's drop outcome).
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<K: ClassifyEnd, A: Algorithm, C: Clock> Held<K, A, C> {
    /// Records the call's outcome, its body having ended as `end`.
    fn end(self, end: BodyEnd<'_>) {
        let latency = latency(&self.permit);
        let outcome = self.classifier.end(end, latency);
        self.permit.record(outcome);
    }
}

impl<B, K, A, C> Body for ResponseBody<B, K, A, C>
where
    B: Body,
    K: ClassifyEnd,
    A: Algorithm,
    C: Clock,
{
    type Data = B::Data;
    type Error = CallError<B::Error>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if *this.timed_out {
            return Poll::Ready(None);
        }
        // The deadline first: a body always ready would otherwise run past
        // it for as long as it has frames.
        let passed = this.held.as_mut().and_then(|held| {
            let deadline = held.deadline.as_mut()?;
            deadline.passed().then_some(deadline.after)
        });
        if let Some(after) = passed {
            if let Some(held) = this.held.take() {
                held.permit.overload();
            }
            *this.timed_out = true;
            return Poll::Ready(Some(Err(CallError::TimedOut(after))));
        }
        let polled = this.inner.poll_frame(cx);
        let Some(held) = this.held.as_mut() else {
            return polled.map(|frame| frame.map(|r| r.map_err(CallError::Failed)));
        };
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(trailers) = frame.trailers_ref() {
                    if let Some(held) = this.held.take() {
                        held.end(BodyEnd::Trailers(trailers));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                if let Some(held) = this.held.take() {
                    held.end(BodyEnd::Failed);
                }
                Poll::Ready(Some(Err(CallError::Failed(error))))
            }
            Poll::Ready(None) => {
                if let Some(held) = this.held.take() {
                    held.end(BodyEnd::Finished);
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                let Some(deadline) = held.deadline.as_mut() else {
                    return Poll::Pending;
                };
                let after = deadline.after;
                if deadline.sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if let Some(held) = this.held.take() {
                    held.permit.overload();
                }
                *this.timed_out = true;
                Poll::Ready(Some(Err(CallError::TimedOut(after))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.timed_out || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.timed_out {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

impl<B, E, K, A, C> Finish<http::Response<B>, E, K, A, C> for AtBodyEnd
where
    B: Body,
    K: ClassifyEnd + Clone,
    A: Algorithm,
    C: Clock,
{
    type Response = http::Response<ResponseBody<B, K, A, C>>;

    fn finish(
        classifier: &K,
        result: Result<http::Response<B>, E>,
        permit: Option<OwnedPermit<A, C>>,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
    ) -> Result<Self::Response, E> {
        let Some(permit) = permit else {
            return result.map(|response| response.map(ResponseBody::over));
        };
        let latency = latency(&permit);
        if let Some(outcome) = classifier.head(&result, latency) {
            permit.record(outcome);
            return result.map(|response| response.map(ResponseBody::over));
        }
        let response = match result {
            Ok(response) => response,
            // A classifier that leaves an error's outcome for later is
            // told: there is no body to wait for.
            Err(error) => {
                permit.record(classifier.end(BodyEnd::Failed, latency));
                return Err(error);
            }
        };
        // The sleep the response future started, or one from now if it
        // never had to wait.
        let deadline = timeout.map(|after| Deadline {
            after,
            sleep: sleep.unwrap_or_else(|| Box::pin(tokio::time::sleep(after))),
            polls_to_read: 0,
        });
        let held = Held {
            permit,
            classifier: classifier.clone(),
            deadline,
        };
        if response.body().is_end_stream() {
            // Nothing will poll an empty body: it ended with its headers.
            held.end(BodyEnd::Finished);
            return Ok(response.map(ResponseBody::over));
        }
        Ok(response.map(|inner| ResponseBody {
            inner,
            held: Some(held),
            timed_out: false,
        }))
    }
}

impl<B: fmt::Debug, K, A: Algorithm, C: Clock> fmt::Debug for ResponseBody<B, K, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseBody")
            .field("inner", &self.inner)
            .field("permit", &self.held.as_ref().map(|held| &held.permit))
            .field("timed_out", &self.timed_out)
            .finish()
    }
}
