//! [`Hedges`]: the hedges a retrying call sends beside its attempt
//! ([`RetryConfig::hedge`](crate::retry::RetryConfig::hedge)), raced
//! against it by its [`RetryResponseFuture`](super::RetryResponseFuture)
//! as `Limiter::call` races its own (`src/call.rs`).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::time::Sleep;
use tower_service::Service;

use super::attempt::{answered, Ending};
use super::call::finite;
use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::CallError;
use crate::limiter::{Admission, Limiter, OwnedPermit};
use crate::priority::Class;
use crate::retry::{Action, Attempts, Ended, HedgeOutcome, Hedging, Retry};
use crate::tower::classify::Classify;

/// How a hedge is armed after an attempt is sent: its delay, and what
/// [`Limiter::late`] weighs when it is due (the limiter's setbacks then and
/// when the attempt was sent).
pub(crate) type Arming = (Duration, u64, Option<Instant>);

/// What the hedges need of the call they race for, lent by its future at
/// each poll.
pub(crate) struct Race<'a, S, Req, K, A, C> {
    pub(crate) limiter: &'a Arc<Limiter<A, C>>,
    pub(crate) retry: &'a Retry,
    pub(crate) attempts: &'a mut Attempts,
    /// The clone of the inner service that sends what follows the first
    /// attempt.
    pub(crate) service: &'a mut Option<S>,
    /// The request, kept while another attempt may follow.
    pub(crate) request: &'a mut Option<Req>,
    pub(crate) classifier: &'a K,
    /// The class every attempt is admitted as.
    pub(crate) class: Option<Class>,
    /// Whether every attempt may be cut early.
    pub(crate) cut_early: bool,
}

/// The hedges of the attempt out, raced beside it: nothing (not even an
/// allocation) until a hedge delay is first armed, so that a call that
/// does not hedge carries one pointer for them.
pub(crate) struct Hedges<F, A, C>(Option<Box<Racing<F, A, C>>>);

/// The timer until the next hedge is weighed, the hedge admitted and
/// waiting for the inner service, those sent and not yet ended. Idle (no
/// timer, nothing out) between races.
struct Racing<F, A, C> {
    /// How long the attempts out may run before a hedge is weighed; `None`
    /// once it is, until a hedge sent arms it again.
    delay: Option<Duration>,
    /// The limiter's setbacks when the last attempt was sent, and when it
    /// was sent: what [`Limiter::late`] weighs.
    setbacks: u64,
    sent_at: Option<Instant>,
    /// The timer of `delay`, started at the first poll after it is armed.
    timer: Option<Pin<Box<Sleep>>>,
    /// A hedge admitted, waiting for the inner service to be ready.
    admitted: Option<OwnedPermit<A, C>>,
    /// The hedges sent and not yet ended.
    out: Vec<Sent<F, A, C>>,
    /// The hedges sent since the race began, each won or lost when it
    /// ends.
    sent: u32,
}

/// A hedge sent under `permit`, given at most `timeout`.
struct Sent<F, A, C> {
    future: Pin<Box<F>>,
    permit: OwnedPermit<A, C>,
    timeout: Option<Duration>,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl<F: Future, A, C> Sent<F, A, C> {
    /// Its result once it answers, or the timeout it ran out of.
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Result<F::Output, Duration>> {
        if let Poll::Ready(output) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        let Some(after) = self.timeout else {
            return Poll::Pending;
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(after)));
        sleep.as_mut().poll(cx).map(|()| Err(after))
    }
}

impl<F, A: Algorithm, C: Clock> Hedges<F, A, C> {
    /// Hedges whose first is weighed after `delay`, with the limiter's
    /// setbacks then and when the attempt was sent; none if `None`.
    pub(crate) fn new(delay: Option<Arming>) -> Self {
        let mut hedges = Hedges(None);
        hedges.arm(delay);
        hedges
    }

    /// An attempt was sent: weigh a hedge after `delay`, with the limiter's
    /// setbacks then and when it was sent (none if `None`).
    pub(crate) fn arm(&mut self, delay: Option<Arming>) {
        match (&mut self.0, delay) {
            (Some(racing), delay) => racing.arm(delay),
            (None, Some((delay, setbacks, sent))) => {
                self.0 = Some(Box::new(Racing {
                    delay: Some(delay),
                    setbacks,
                    sent_at: sent,
                    timer: None,
                    admitted: None,
                    out: Vec::new(),
                    sent: 0,
                }));
            }
            (None, None) => {}
        }
    }

    /// Send the hedge admitted once the inner service is ready, weigh a
    /// hedge when the timer fires, and answer how the first hedge sent to
    /// end did (its permit recorded): `Pending` until one does.
    pub(crate) fn poll<S, Req, K>(
        &mut self,
        cx: &mut Context<'_>,
        race: Race<'_, S, Req, K, A, C>,
    ) -> Poll<Ending<S::Response, S::Error>>
    where
        S: Service<Req, Future = F>,
        F: Future<Output = Result<S::Response, S::Error>>,
        Req: Clone,
        K: Classify<S::Response, S::Error, End = ()>,
    {
        match &mut self.0 {
            Some(racing) => racing.poll(cx, race),
            None => Poll::Pending,
        }
    }

    /// The race is over, `won` by a hedge if one gave the call its answer
    /// (a success): the hedges still out are cancelled, their permits
    /// released as [`Outcome::Ignore`](crate::Outcome::Ignore), each hedge
    /// sent is reported won or lost, and the timer disarmed. Nothing to do
    /// if none was weighed.
    pub(crate) fn end(&mut self, won: bool, limiter: &Limiter<A, C>) {
        if let Some(racing) = &mut self.0 {
            racing.end(won, limiter);
        }
    }
}

impl<F, A: Algorithm, C: Clock> Racing<F, A, C> {
    fn arm(&mut self, delay: Option<Arming>) {
        self.delay = delay.map(|(delay, setbacks, sent)| {
            self.setbacks = setbacks;
            self.sent_at = sent;
            delay
        });
        self.timer = None;
    }

    /// As [`Hedges::poll`].
    fn poll<S, Req, K>(
        &mut self,
        cx: &mut Context<'_>,
        mut race: Race<'_, S, Req, K, A, C>,
    ) -> Poll<Ending<S::Response, S::Error>>
    where
        S: Service<Req, Future = F>,
        F: Future<Output = Result<S::Response, S::Error>>,
        Req: Clone,
        K: Classify<S::Response, S::Error, End = ()>,
    {
        loop {
            let ended =
                self.out
                    .iter_mut()
                    .enumerate()
                    .find_map(|(n, hedge)| match hedge.poll(cx) {
                        Poll::Ready(answer) => Some((n, answer)),
                        Poll::Pending => None,
                    });
            if let Some((n, answer)) = ended {
                let Sent { permit, .. } = self.out.swap_remove(n);
                return Poll::Ready(match answer {
                    Ok(result) => {
                        answered(result, Some(permit), race.classifier, race.limiter, true)
                    }
                    Err(after) => {
                        permit.overload();
                        (Ended::TimedOut, Err(CallError::TimedOut(after)))
                    }
                });
            }
            if self.admitted.is_some() {
                let Some(service) = race.service.as_mut() else {
                    unreachable!("a hedge is weighed only with a service to send it")
                };
                if let Poll::Ready(ready) = service.poll_ready(cx) {
                    let Some(permit) = self.admitted.take() else {
                        unreachable!("checked above")
                    };
                    match ready {
                        Ok(()) => self.send(permit, &mut race),
                        // The service failed: the hedge is not sent, and the
                        // attempt out answers for the call.
                        Err(_) => {
                            permit.ignore();
                            race.limiter.observe_hedge(HedgeOutcome::Refused);
                        }
                    }
                    continue;
                }
            }
            if let Some(delay) = self.delay {
                let timer = self
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(delay)));
                if timer.as_mut().poll(cx).is_ready() {
                    self.arm(None);
                    self.weigh(&mut race);
                    continue;
                }
            }
            return Poll::Pending;
        }
    }

    /// The attempts out have run for the delay: take a free slot for a
    /// hedge if the attempts allow one (never waiting in the queue), or
    /// report why none is sent.
    fn weigh<S, Req, K>(&mut self, race: &mut Race<'_, S, Req, K, A, C>) {
        let limiter: &Limiter<A, C> = race.limiter;
        let now = limiter.clock().now();
        let late = limiter.late(self.setbacks, self.sent_at);
        let outcome = match race.attempts.hedge(race.retry, now, late) {
            Hedging::Not(why) => why,
            Hedging::Later(why) => {
                // Weighed again after another delay, as of the same attempt.
                let next = race.attempts.hedge_delay(race.retry, limiter.hedge_delay());
                self.arm(next.map(|delay| (delay, self.setbacks, self.sent_at)));
                why
            }
            Hedging::Acquire => {
                let admission = Admission::new(Arc::clone(race.limiter))
                    .class(race.class)
                    .cut_early(race.cut_early);
                match admission.timed().try_acquire() {
                    Ok(permit) => {
                        // Reported once sent, or why not.
                        self.admitted = Some(permit);
                        return;
                    }
                    Err(_) => race.attempts.hedge_refused(),
                }
            }
        };
        limiter.observe_hedge(outcome);
    }

    /// Send the hedge admitted under `permit` with the service made ready
    /// for it, and arm the timer for the next.
    fn send<S, Req, K>(&mut self, permit: OwnedPermit<A, C>, race: &mut Race<'_, S, Req, K, A, C>)
    where
        S: Service<Req, Future = F>,
        Req: Clone,
    {
        let limiter: &Limiter<A, C> = race.limiter;
        let timeout = permit.timeout(race.attempts.next_timeout());
        let now = || limiter.clock().now();
        let outcome = match race.attempts.hedge_admitted(race.retry, now, timeout) {
            Action::Send { timeout } => {
                // As for any attempt: cloned while another may follow.
                let request = if race.attempts.may_follow(race.retry) {
                    race.request.clone()
                } else {
                    race.request.take()
                };
                let (Some(request), Some(service)) = (request, race.service.as_mut()) else {
                    unreachable!("a hedge is weighed only with a request and a service to send it")
                };
                self.out.push(Sent {
                    future: Box::pin(service.call(request)),
                    permit,
                    timeout: finite(timeout),
                    sleep: None,
                });
                self.sent += 1;
                let next = race.attempts.hedge_delay(race.retry, limiter.hedge_delay());
                let sent = self.out.last().and_then(|hedge| hedge.permit.started());
                self.arm(next.map(|delay| (delay, limiter.setbacks(), sent)));
                HedgeOutcome::Sent
            }
            // `Action::Expire`: no time left before the deadline.
            _ => {
                permit.ignore();
                HedgeOutcome::Deadline
            }
        };
        limiter.observe_hedge(outcome);
    }

    /// As [`Hedges::end`].
    fn end(&mut self, won: bool, limiter: &Limiter<A, C>) {
        self.arm(None);
        if let Some(permit) = self.admitted.take() {
            // Admitted, but the inner service was not ready in time.
            permit.ignore();
            limiter.observe_hedge(HedgeOutcome::Refused);
        }
        for hedge in self.out.drain(..) {
            hedge.permit.outrun();
        }
        for n in 0..std::mem::take(&mut self.sent) {
            limiter.observe_hedge(if won && n == 0 {
                HedgeOutcome::Won
            } else {
                HedgeOutcome::Lost
            });
        }
    }
}

impl<F, A, C> fmt::Debug for Hedges<F, A, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(racing) = &self.0 else {
            return f.write_str("Hedges(none)");
        };
        f.debug_struct("Hedges")
            .field("delay", &racing.delay)
            .field("admitted", &racing.admitted.is_some())
            .field("out", &racing.out.len())
            .field("sent", &racing.sent)
            .finish()
    }
}
