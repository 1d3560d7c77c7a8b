//! [`RetryResponseFuture`]: a call's attempts, driven by
//! [`Attempts`]; the hedges raced beside an attempt are in `hedge.rs`.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tower_service::Service;

use super::attempt::answered;
use super::call::{finite, single_timeout};
use super::hedge::{Hedges, Race};
use crate::algorithms::Algorithm;
use crate::clock::{Clock, DefaultClock};
use crate::error::{CallError, Rejection};
use crate::limiter::{Admission, Limiter, OwnedPermit, Readiness};
use crate::priority::Class;
use crate::retry::{Action, Attempts, Ended};
use crate::tower::acquire::{Acquire, StartAcquire};
use crate::tower::classify::Classify;

/// What a retrying call needs beyond its first attempt.
pub(crate) struct Plan<S, Req, K, A, C> {
    pub(crate) limiter: Arc<Limiter<A, C>>,
    /// The class every attempt is admitted as (`None`: the default class).
    pub(crate) class: Option<Class>,
    /// Whether every attempt may be cut early, by a learned timeout.
    pub(crate) cut_early: bool,
    pub(crate) classifier: K,
    pub(crate) start_queue: StartAcquire<A, C>,
    /// The call's attempts, `None` if the limiter has no retry policy (one
    /// attempt, nothing observed).
    pub(crate) attempts: Option<Attempts>,
    /// The layer's timeout, for the one attempt of a call without retries.
    pub(crate) timeout: Option<Duration>,
    /// A clone of the inner service, for the attempts after the first.
    pub(crate) service: Option<S>,
    /// The request, kept for the attempts still to be sent.
    pub(crate) request: Option<Req>,
}

/// How the first attempt began.
pub(crate) enum First<F, A, C> {
    /// Sent under `permit`, given at most `timeout`.
    Called {
        future: F,
        permit: OwnedPermit<A, C>,
        timeout: Option<Duration>,
    },
    /// Refused at admission.
    Refused(Rejection),
    /// Admitted with no time left before the deadline: not sent.
    Expired,
    /// Waiting in the limiter's queue for its slot (a layer that waits,
    /// given a class function), to be sent with the plan's service.
    Waiting(Acquire<A, C>),
}

pin_project! {
    /// The response of a [`RheostatRetry`](crate::tower::RheostatRetry) service:
    /// the last attempt's response, or why there is none.
    ///
    /// Each attempt holds its own permit until it completes, recorded as
    /// the classifier says (or as an overload if its timeout ran out);
    /// between attempts (the backoff) no permit is held. A response the
    /// classifier counts as a failure (a 503) is returned as it is once no
    /// retry follows.
    ///
    /// With a [hedge](crate::retry::Hedge), an attempt still out after the
    /// hedge delay races a hedge sent beside it: the first answer is the
    /// call's, and the attempts still out are dropped, their permits
    /// released as [`Outcome::Ignore`](crate::Outcome::Ignore).
    ///
    /// # Cancel safety
    ///
    /// Dropping it drops every attempt in flight (an attempt and the
    /// hedges beside it) and releases each one's permit as the limiter's
    /// drop outcome ([`Outcome::Ignore`](crate::Outcome::Ignore) unless
    /// configured otherwise), a hedge's slot taken but not yet sent
    /// included; dropped during a backoff, nothing is held; dropped while
    /// waiting in the limiter's queue, it leaves the queue (a slot handed
    /// to it goes to the next waiter). No retry or hedge is made after it
    /// is dropped.
    ///
    /// # Panics
    ///
    /// If polled after it completed, or polled outside a Tokio runtime with
    /// the time driver enabled.
    pub struct RetryResponseFuture<S, Req, K, A = Box<dyn Algorithm>, C = DefaultClock>
    where
        S: Service<Req>,
    {
        #[pin]
        state: Attempt<S::Future, A, C>,
        permit: Option<OwnedPermit<A, C>>,
        timeout: Option<Duration>,
        sleep: Option<Pin<Box<Sleep>>>,
        hedges: Hedges<S::Future, A, C>,
        service: Option<S>,
        request: Option<Req>,
        attempts: Option<Attempts>,
        layer_timeout: Option<Duration>,
        limiter: Arc<Limiter<A, C>>,
        class: Option<Class>,
        cut_early: bool,
        classifier: K,
        start_queue: StartAcquire<A, C>,
    }
}

pin_project! {
    #[project = AttemptProj]
    enum Attempt<F, A, C> {
        /// An attempt in flight (`None` once it failed while hedges
        /// beside it are still out).
        Called {
            #[pin]
            future: Option<F>,
        },
        /// An attempt refused at admission.
        Refused {
            rejection: Rejection,
        },
        /// Waiting in the limiter's queue: for the first attempt's slot (as
        /// a plain service waits in `poll_ready`), or once after a refusal.
        Queued {
            acquire: Acquire<A, C>,
        },
        /// Admitted: waiting for the inner service to be ready.
        Admitted,
        /// Waiting before the next attempt.
        Backoff {
            sleep: Option<Pin<Box<Sleep>>>,
        },
        /// Admitted with no time left before the deadline.
        Expired,
        /// Finished.
        Done,
    }
}

impl<S, Req, K, A, C> RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
    A: Algorithm,
    C: Clock,
{
    pub(crate) fn new(plan: Plan<S, Req, K, A, C>, first: First<S::Future, A, C>) -> Self {
        // A first attempt sent by `call` may be hedged from its first poll.
        let hedge_in = match (&first, &plan.attempts, plan.limiter.retry()) {
            (First::Called { permit, .. }, Some(attempts), Some(retry)) => attempts
                .hedge_delay(retry, plan.limiter.hedge_delay())
                .map(|delay| (delay, plan.limiter.setbacks(), permit.started())),
            _ => None,
        };
        let (state, permit, timeout) = match first {
            First::Called {
                future,
                permit,
                timeout,
            } => (
                Attempt::Called {
                    future: Some(future),
                },
                Some(permit),
                timeout,
            ),
            First::Refused(rejection) => (Attempt::Refused { rejection }, None, None),
            First::Expired => (Attempt::Expired, None, None),
            First::Waiting(acquire) => (Attempt::Queued { acquire }, None, None),
        };
        RetryResponseFuture {
            state,
            permit,
            timeout,
            sleep: None,
            hedges: Hedges::new(hedge_in),
            service: plan.service,
            request: plan.request,
            attempts: plan.attempts,
            layer_timeout: plan.timeout,
            limiter: plan.limiter,
            class: plan.class,
            cut_early: plan.cut_early,
            classifier: plan.classifier,
            start_queue: plan.start_queue,
        }
    }
}

impl<S, Req, K, A, C> Future for RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
    Req: Clone,
    K: Classify<S::Response, S::Error, End = ()>,
    A: Algorithm,
    C: Clock,
{
    type Output = Result<S::Response, CallError<S::Error>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            let limiter: &Limiter<A, C> = this.limiter;
            let retry = limiter.retry();
            let now = || limiter.clock().now();
            let shut = || matches!(limiter.ready().now(), Readiness::Shut { .. });
            // Each arm waits for its I/O, then tells the call's attempts
            // what happened (or, for a call without retries, answers
            // itself), and hands over their answer with the attempt's
            // result, to return if the answer is to.
            let (action, result) = match this.state.as_mut().project() {
                AttemptProj::Called { mut future } => {
                    // The attempt, while it is out, then the hedges beside
                    // it: the first to end is told.
                    let mut ended = None;
                    if let Some(attempt) = future.as_mut().as_pin_mut() {
                        if let Poll::Ready(result) = attempt.poll(cx) {
                            *this.sleep = None;
                            let retrying = this.attempts.is_some();
                            let (permit, classifier) = (this.permit.take(), &*this.classifier);
                            ended = Some(answered(result, permit, classifier, limiter, retrying));
                        } else if let Some(after) = *this.timeout {
                            let sleep = this
                                .sleep
                                .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
                            if sleep.as_mut().poll(cx).is_ready() {
                                *this.sleep = None;
                                if let Some(permit) = this.permit.take() {
                                    permit.overload();
                                }
                                ended = Some((Ended::TimedOut, Err(CallError::TimedOut(after))));
                            }
                        }
                    }
                    let hedge = ended.is_none();
                    let (ended, result) = match ended {
                        Some(ended) => {
                            future.set(None);
                            ended
                        }
                        None => {
                            let (Some(attempts), Some(retry)) = (this.attempts.as_mut(), retry)
                            else {
                                return Poll::Pending;
                            };
                            ready!(this.hedges.poll(
                                cx,
                                Race {
                                    limiter: this.limiter,
                                    retry,
                                    attempts,
                                    service: this.service,
                                    request: this.request,
                                    classifier: this.classifier,
                                    class: *this.class,
                                    cut_early: *this.cut_early,
                                },
                            ))
                        }
                    };
                    let (Some(attempts), Some(retry)) = (this.attempts.as_mut(), retry) else {
                        this.state.set(Attempt::Done);
                        return Poll::Ready(result);
                    };
                    let action = attempts.ended(retry, ended, now, shut);
                    if action != Action::Await {
                        // The race, if any, is over: what is still out
                        // loses, and teaches the policy nothing.
                        if let Some(permit) = this.permit.take() {
                            permit.outrun();
                        }
                        *this.sleep = None;
                        let won = hedge && action == (Action::Answer { decided: None });
                        this.hedges.end(won, limiter);
                    }
                    (action, Some(result))
                }
                AttemptProj::Refused { rejection } => {
                    let rejection = *rejection;
                    let (Some(attempts), Some(retry)) = (this.attempts.as_mut(), retry) else {
                        this.state.set(Attempt::Done);
                        return Poll::Ready(Err(CallError::Rejected(rejection)));
                    };
                    (
                        attempts.refused(retry, rejection.reason(), now, shut),
                        Some(Err(CallError::Rejected(rejection))),
                    )
                }
                AttemptProj::Queued { acquire } => {
                    let next = match ready!(acquire.as_mut().poll(cx)) {
                        Ok(permit) => {
                            *this.permit = Some(permit);
                            Attempt::Admitted
                        }
                        Err(rejection) => Attempt::Refused { rejection },
                    };
                    this.state.set(next);
                    continue;
                }
                AttemptProj::Admitted => {
                    let Some(service) = this.service.as_mut() else {
                        unreachable!(
                            "an attempt not sent by `call` is made only with a service to send it"
                        )
                    };
                    if let Err(error) = ready!(service.poll_ready(cx)) {
                        if let Some(permit) = this.permit.take() {
                            permit.ignore();
                        }
                        this.state.set(Attempt::Done);
                        return Poll::Ready(Err(CallError::Failed(error)));
                    }
                    let Some(permit) = this.permit.as_ref() else {
                        unreachable!("an attempt admitted holds its permit")
                    };
                    let action = match (this.attempts.as_mut(), retry) {
                        (Some(attempts), Some(retry)) => {
                            let (timeout, probe) =
                                (permit.timeout(attempts.next_timeout()), permit.is_probe());
                            attempts.admitted(retry, now, timeout, probe)
                        }
                        _ => Action::Send {
                            timeout: single_timeout(permit, *this.layer_timeout)
                                .unwrap_or(Duration::MAX),
                        },
                    };
                    (action, None)
                }
                AttemptProj::Backoff { sleep } => {
                    if let Some(sleep) = sleep {
                        ready!(sleep.as_mut().poll(cx));
                    }
                    let Some(attempts) = this.attempts.as_mut() else {
                        unreachable!("only a call with retries backs off")
                    };
                    (attempts.backoff_elapsed(), None)
                }
                AttemptProj::Expired => (Action::Expire, None),
                AttemptProj::Done => panic!("polled after completion"),
            };
            match action {
                Action::Acquire => {
                    let admission = Admission::new(Arc::clone(this.limiter))
                        .class(*this.class)
                        .cut_early(*this.cut_early);
                    let next = match admission.timed().try_acquire() {
                        Ok(permit) => {
                            *this.permit = Some(permit);
                            Attempt::Admitted
                        }
                        Err(rejection) => Attempt::Refused { rejection },
                    };
                    this.state.set(next);
                }
                Action::Queue { within } => {
                    let (class, cut_early) = (*this.class, *this.cut_early);
                    let acquire =
                        (this.start_queue)(Arc::clone(this.limiter), within, class, cut_early);
                    this.state.set(Attempt::Queued { acquire });
                }
                Action::Send { timeout } => {
                    let Some(service) = this.service.as_mut() else {
                        unreachable!("an attempt is sent with the service readied for it")
                    };
                    // The request is cloned while another attempt may
                    // follow, and moved into the last; a hedge may be sent
                    // beside it after the hedge delay.
                    let (again, hedge_in) = match (this.attempts.as_ref(), retry) {
                        (Some(attempts), Some(retry)) => (
                            attempts.may_follow(retry),
                            attempts
                                .hedge_delay(retry, limiter.hedge_delay())
                                .map(|delay| {
                                    let sent = this.permit.as_ref().and_then(|p| p.started());
                                    (delay, limiter.setbacks(), sent)
                                }),
                        ),
                        _ => (false, None),
                    };
                    let request = if again {
                        this.request.clone()
                    } else {
                        this.request.take()
                    };
                    let Some(request) = request else {
                        unreachable!("a request is kept until its last attempt is sent")
                    };
                    *this.timeout = finite(timeout);
                    *this.sleep = None;
                    let future = service.call(request);
                    this.state.set(Attempt::Called {
                        future: Some(future),
                    });
                    this.hedges.arm(hedge_in);
                }
                // The hedges out may yet answer: the arm above polls them.
                Action::Await => {}
                Action::Sleep { wait, decided } => {
                    limiter.observe_retry(decided);
                    drop(result);
                    let sleep = (!wait.is_zero()).then(|| Box::pin(tokio::time::sleep(wait)));
                    this.state.set(Attempt::Backoff { sleep });
                }
                Action::Expire => {
                    if let Some(permit) = this.permit.take() {
                        permit.ignore();
                    }
                    this.state.set(Attempt::Done);
                    return Poll::Ready(Err(CallError::TimedOut(Duration::ZERO)));
                }
                Action::Answer { decided } => {
                    if let Some(decided) = decided {
                        limiter.observe_retry(decided);
                    }
                    let Some(result) = result else {
                        unreachable!("an answer follows an attempt")
                    };
                    this.state.set(Attempt::Done);
                    return Poll::Ready(result);
                }
            }
        }
    }
}

impl<S, Req, K, A: Algorithm, C: Clock> fmt::Debug for RetryResponseFuture<S, Req, K, A, C>
where
    S: Service<Req>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryResponseFuture")
            .field("permit", &self.permit)
            .field("timeout", &self.timeout)
            .field("hedges", &self.hedges)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}
