//! [`Limiter::call`]: one call, its attempts and the waits between them.
//!
//! Above both the limiter and the retry policy: it drives
//! [`retry::Attempts`](crate::retry::Attempts) with the limiter's permits,
//! so neither of them imports the other's driver.

use std::future::{poll_fn, Future};
use std::ops::Deref;
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

use crate::algorithms::{check, Algorithm};
use crate::clock::Clock;
use crate::error::CallError;
use crate::limiter::{Admission, Limiter, Permit, Readiness};
use crate::retry::{Action, Attempts, Ended, HedgeOutcome, Hedging, Verdict};

impl<L, A, C> Admission<L>
where
    L: Deref<Target = Limiter<A, C>>,
    A: Algorithm,
    C: Clock,
{
    /// Run a call under a permit, give each attempt at most the admission's
    /// [`timeout`](Admission::timeout) (else the limiter's
    /// [`Builder::timeout`](crate::Builder::timeout); with neither, an
    /// attempt is given as long as it takes), and record its outcome as
    /// `classify` says; if the limiter has a [retry policy](crate::retry) and the
    /// outcome is a retryable failure, make another attempt (a new future
    /// from `make`) within its bounds.
    ///
    /// The permit is taken as the tower layers take theirs: if the limit is
    /// reached, the call waits in the limiter's queue ([`Admission::acquire`])
    /// when the limiter waits ([`Builder::wait`](crate::Builder::wait);
    /// in a file, a limiter with a `max_wait`) or the admission sets its
    /// own [`max_wait`](Admission::max_wait), at most that `max_wait` (else
    /// the limiter's [`Builder::max_wait`](crate::Builder::max_wait); with a
    /// retry's deadline, no longer than it either); otherwise it is refused
    /// at once ([`Admission::try_acquire`]). The attempt timeout runs from
    /// admission, after the wait.
    ///
    /// Each attempt is given what [`Permit::timeout`](crate::Permit::timeout)
    /// gives it: a [learned](crate::timeout) timeout if shorter, unless the
    /// admission says the call may not be [cut
    /// early](Admission::cut_early). An attempt that runs out of time is recorded as
    /// [`Outcome::Overload`](crate::Outcome::Overload). An attempt admitted as a probe is given the
    /// [probe timeout](crate::timeout::Timeouts::probe) instead (see
    /// [`Permit::timeout`](crate::Permit::timeout)), even past the retry's deadline (no retry
    /// follows a probe that ends after it); to choose a
    /// probe's timeout yourself, take the permit with
    /// [`Admission::try_acquire`] and use [`Permit::run`](crate::Permit::run).
    ///
    /// With a [hedge](crate::retry::Hedge) in the retry policy, an attempt
    /// that has not answered after the hedge delay gets a second one beside
    /// it, if a slot is free, the budget allows and the policy sees no
    /// congestion; the first answer is the call's, and the attempt that
    /// loses is released as [`Outcome::Ignore`](crate::Outcome::Ignore). A
    /// call that may not be sent twice is made with
    /// [`Admission::send_once`].
    ///
    /// `classify` returns an [`Outcome`](crate::Outcome) or, to say more to the retry, a
    /// [`Verdict`] (whether an overload is worth retrying, the server's
    /// `Retry-After`). The call's result is the last attempt's: a value the
    /// classifier counted as a failure (an HTTP 503 response, say) is
    /// returned as it is once no retry follows.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the permit of every attempt in flight (a
    /// hedge's too), each of which records the limiter's drop outcome (by default [`Outcome::Ignore`](crate::Outcome::Ignore));
    /// dropped while waiting for a slot, it leaves the queue as
    /// [`Admission::acquire`] does (a slot handed to it in the meantime goes
    /// back to the limiter and to the next waiter); dropped during a
    /// backoff, nothing is held.
    ///
    /// # Errors
    ///
    /// [`CallError::Rejected`] if refused, [`CallError::TimedOut`],
    /// [`CallError::Failed`] with the call's own error (each of the last
    /// attempt), or [`CallError::InvalidTimeout`] for a zero or
    /// over-a-year timeout.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::Fixed, CallError, Limiter, Outcome};
    ///
    /// #[derive(Debug)]
    /// enum HttpError { Status(u16) }
    ///
    /// // 5xx is the dependency's fault; 4xx is ours and teaches nothing.
    /// let classify = |r: &Result<&str, HttpError>| match r {
    ///     Ok(_) => Outcome::Success,
    ///     Err(HttpError::Status(s)) if *s >= 500 => Outcome::Overload,
    ///     Err(_) => Outcome::Ignore,
    /// };
    /// let limiter = Limiter::builder(Fixed::new(10).unwrap())
    ///     .timeout(Duration::from_secs(1))
    ///     .build()
    ///     .unwrap();
    /// let body = limiter.admission().call(classify, || async { Ok("hello") }).await.unwrap();
    /// assert_eq!(body, "hello");
    ///
    /// let hung = limiter
    ///     .admission()
    ///     .timeout(Duration::from_millis(5))
    ///     .call(classify, std::future::pending)
    ///     .await;
    /// assert!(matches!(hung, Err(CallError::TimedOut(_))));
    /// # }
    /// ```
    pub async fn call<M, F, T, E, K, V>(
        self,
        mut classify: K,
        mut make: M,
    ) -> Result<T, CallError<E>>
    where
        M: FnMut() -> F,
        F: Future<Output = Result<T, E>>,
        K: FnMut(&Result<T, E>) -> V,
        V: Into<Verdict>,
    {
        let limiter: &Limiter<A, C> = self.limiter();
        let admission = self.borrowed();
        // `Duration::MAX`: no timeout but a probe's.
        let timeout = self.attempt_timeout();
        if let Some(Err(e)) = timeout.map(|t| check::duration("timeout", t)) {
            return Err(CallError::InvalidTimeout(e));
        }
        let timeout = timeout.unwrap_or(Duration::MAX);
        let Some(retry) = limiter.retry() else {
            let permit = admission.admit(None).await.map_err(CallError::Rejected)?;
            let timeout = permit.timeout(timeout);
            let answered = tokio::time::timeout(timeout, make()).await.ok();
            return settle(permit, timeout, answered, &mut classify).1;
        };
        // A call that waits for its first slot begins before the wait,
        // which its deadline bounds (as the tower layers' does); one that
        // fails fast, at its admission (the instant the limiter read for
        // it, if it read one) or refusal.
        let (mut attempts, first) = if admission.waits() {
            let now = limiter.clock().now();
            let attempts = Attempts::new(retry, now, timeout);
            let left = retry.left(attempts.call(), now);
            (attempts, admission.admit(left).await)
        } else {
            let first = admission.try_acquire();
            let began = first.as_ref().ok().and_then(|permit| permit.started());
            let now = began.unwrap_or_else(|| limiter.clock().now());
            (Attempts::new(retry, now, timeout), first)
        };
        if !admission.may_resend() {
            attempts = attempts.no_resend();
        }
        let now = || limiter.clock().now();
        let shut = || matches!(limiter.ready().now(), Readiness::Shut { .. });
        // The permit of the attempt admitted, and the last attempt's result.
        let mut permit = None;
        let mut last = None;
        let mut slot = first;
        loop {
            // Tell the machine of the admission, then do as it says until
            // it asks for the next.
            let mut action = match slot {
                Ok(admitted) => {
                    let timeout = admitted.timeout(attempts.next_timeout());
                    let probe = admitted.is_probe();
                    permit = Some(admitted);
                    attempts.admitted(retry, now, timeout, probe)
                }
                Err(rejection) => {
                    last = Some(Err(CallError::Rejected(rejection)));
                    attempts.refused(retry, rejection.reason(), now, shut)
                }
            };
            slot = loop {
                action = match action {
                    Action::Acquire => break admission.try_acquire(),
                    Action::Queue { within } => break admission.acquire_within(within).await,
                    Action::Send { timeout } => {
                        let Some(permit) = permit.take() else {
                            unreachable!("an attempt is sent once admitted")
                        };
                        // A hedge may follow after its delay, unless there
                        // is a setback (a call refused, a failure retried)
                        // after the count read now.
                        let hedge = attempts
                            .hedge_delay(retry, limiter.hedge_delay())
                            .map(|delay| (delay, limiter.setbacks()));
                        let mut attempt = pin!(tokio::time::timeout(timeout, make()));
                        // With a hedge to follow, polled once first: an
                        // attempt ready at once costs nothing more for it.
                        let answered = match hedge {
                            None => Ok(attempt.as_mut().await),
                            Some(hedge) => {
                                match poll_fn(|cx| Poll::Ready(attempt.as_mut().poll(cx))).await {
                                    Poll::Ready(answered) => Ok(answered),
                                    Poll::Pending => Err(hedge),
                                }
                            }
                        };
                        match answered {
                            Err(hedge) => {
                                let (action, result) = Box::pin(hedged(
                                    &admission,
                                    &mut attempts,
                                    hedge,
                                    ((permit, timeout), attempt),
                                    &mut make,
                                    &mut classify,
                                ))
                                .await;
                                last = Some(result);
                                action
                            }
                            Ok(answered) => {
                                let (ended, result) =
                                    settle(permit, timeout, answered.ok(), &mut classify);
                                last = Some(result);
                                attempts.ended(retry, ended, now, shut)
                            }
                        }
                    }
                    Action::Await => {
                        unreachable!("an attempt alone is never awaited beside another")
                    }
                    Action::Sleep { wait, decided } => {
                        limiter.observe_retry(decided);
                        last = None;
                        if !wait.is_zero() {
                            tokio::time::sleep(wait).await;
                        }
                        attempts.backoff_elapsed()
                    }
                    Action::Expire => {
                        if let Some(permit) = permit.take() {
                            permit.ignore();
                        }
                        return Err(CallError::TimedOut(Duration::ZERO));
                    }
                    Action::Answer { decided } => {
                        if let Some(decided) = decided {
                            limiter.observe_retry(decided);
                        }
                        let Some(result) = last else {
                            unreachable!("an answer follows an attempt")
                        };
                        return result;
                    }
                };
            };
        }
    }
}

/// Race the attempt admitted (`first`: its permit, its timeout and the
/// attempt itself, sent and not answered when first polled) against a
/// timer and, each time the attempts out have run for `delay` without an
/// answer, weigh a hedge ([`Attempts::hedge`], told what
/// [`Limiter::late`] sees: `setbacks` is the count read as the last was
/// sent) and send it beside them if a slot is free, or weigh again after
/// another delay while calls answer in order; until one answers for the
/// call. Answers the
/// machine's next action (never [`Action::Await`]) and the result of the attempt
/// that ended last. The attempts still out when the call is answered are
/// dropped and their permits released as
/// [`Outcome::Ignore`](crate::Outcome::Ignore).
async fn hedged<A, C, M, F, T, E, K, V>(
    admission: &Admission<&Limiter<A, C>>,
    attempts: &mut Attempts,
    (delay, mut setbacks): (Duration, u64),
    first: (Out<'_, A, C>, Pin<&mut tokio::time::Timeout<F>>),
    make: &mut M,
    classify: &mut K,
) -> (Action, Result<T, CallError<E>>)
where
    A: Algorithm,
    C: Clock,
    M: FnMut() -> F,
    F: Future<Output = Result<T, E>>,
    K: FnMut(&Result<T, E>) -> V,
    V: Into<Verdict>,
{
    use futures_util::stream::{FuturesUnordered, StreamExt};

    let limiter: &Limiter<A, C> = admission.limiter();
    let Some(retry) = limiter.retry() else {
        unreachable!("a hedge is weighed only under a retry policy")
    };
    let now = || limiter.clock().now();
    let shut = || matches!(limiter.ready().now(), Readiness::Shut { .. });
    // A hedge, timed: which attempt it is, and its result (`None`: timed
    // out).
    let send = |n: usize, timeout: Duration, attempt: F| async move {
        (n, tokio::time::timeout(timeout, attempt).await.ok())
    };
    let (out, mut first) = first;
    // When the latest attempt was sent, for whose lateness it shows.
    let mut sent = out.0.started();
    // The permits of the attempts out, by attempt: the first, then the
    // hedges.
    let mut permits = Permits {
        first: Some(out),
        hedges: Vec::new(),
    };
    let mut first_out = true;
    let mut hedges = FuturesUnordered::new();
    let mut timer = pin!(tokio::time::sleep(delay));
    let mut hedge_due = true;
    loop {
        let (n, result) = tokio::select! {
            biased;
            out = first.as_mut(), if first_out => {
                first_out = false;
                (0, out.ok())
            }
            Some(out) = hedges.next(), if !hedges.is_empty() => out,
            () = &mut timer, if hedge_due => {
                hedge_due = false;
                let late = limiter.late(setbacks, sent);
                let outcome = match attempts.hedge(retry, now(), late) {
                    Hedging::Not(why) => why,
                    Hedging::Later(why) => {
                        if let Some(delay) = attempts.hedge_delay(retry, limiter.hedge_delay()) {
                            timer.as_mut().reset(tokio::time::Instant::now() + delay);
                            hedge_due = true;
                        }
                        why
                    }
                    Hedging::Acquire => match admission.try_acquire() {
                        Err(_) => attempts.hedge_refused(),
                        Ok(permit) => {
                            let timeout = permit.timeout(attempts.next_timeout());
                            match attempts.hedge_admitted(retry, now, timeout) {
                                Action::Send { timeout } => {
                                    setbacks = limiter.setbacks();
                                    sent = permit.started();
                                    permits.hedges.push(Some((permit, timeout)));
                                    hedges.push(send(permits.hedges.len(), timeout, make()));
                                    if let Some(delay) =
                                        attempts.hedge_delay(retry, limiter.hedge_delay())
                                    {
                                        timer
                                            .as_mut()
                                            .reset(tokio::time::Instant::now() + delay);
                                        hedge_due = true;
                                    }
                                    HedgeOutcome::Sent
                                }
                                _ => {
                                    permit.ignore();
                                    HedgeOutcome::Deadline
                                }
                            }
                        }
                    },
                };
                limiter.observe_hedge(outcome);
                continue;
            }
            else => unreachable!("an attempt is out while the call is not answered"),
        };
        // An attempt ended: record it and tell the machine; unless another
        // is still awaited, release the others and report each hedge.
        let Some((permit, timeout)) = permits.take(n) else {
            unreachable!("each attempt ends once")
        };
        let (ended, result) = settle(permit, timeout, result, classify);
        let action = attempts.ended(retry, ended, now, shut);
        if action == Action::Await {
            continue;
        }
        // Answered (or to be retried): the attempts still out lose, and
        // teach the policy nothing (the learned latencies, the time they
        // ran: `Permit::outrun`).
        let won = matches!(action, Action::Answer { decided: None }) && n > 0;
        if let Some((permit, _)) = permits.first.take() {
            permit.outrun();
        }
        for (m, out) in permits.hedges.iter_mut().enumerate() {
            if let Some((permit, _)) = out.take() {
                permit.outrun();
            }
            limiter.observe_hedge(if won && m + 1 == n {
                HedgeOutcome::Won
            } else {
                HedgeOutcome::Lost
            });
        }
        return (action, result);
    }
}

/// An attempt given `timeout` ended with `answered` (`None`: it ran out of
/// time): its permit recorded as `classify` says, or as an overload if it
/// timed out; how it ended, for the machine, and its result, for the
/// caller.
fn settle<A, C, T, E, K, V>(
    permit: Permit<&Limiter<A, C>>,
    timeout: Duration,
    answered: Option<Result<T, E>>,
    classify: &mut K,
) -> (Ended, Result<T, CallError<E>>)
where
    A: Algorithm,
    C: Clock,
    K: FnMut(&Result<T, E>) -> V,
    V: Into<Verdict>,
{
    match answered {
        None => {
            permit.overload();
            (Ended::TimedOut, Err(CallError::TimedOut(timeout)))
        }
        Some(result) => {
            let verdict: Verdict = classify(&result).into();
            permit.record(verdict.outcome);
            (Ended::Ran(verdict), result.map_err(CallError::Failed))
        }
    }
}

/// The permits of a hedged call's attempts out: the first's, and each
/// hedge's, by attempt.
struct Permits<'l, A, C> {
    first: Option<Out<'l, A, C>>,
    hedges: Vec<Option<Out<'l, A, C>>>,
}

/// An attempt out: its permit, and the timeout it was given.
type Out<'l, A, C> = (Permit<&'l Limiter<A, C>>, Duration);

impl<'l, A, C> Permits<'l, A, C> {
    /// Attempt `n`'s permit (0 the first, then the hedges), taken.
    fn take(&mut self, n: usize) -> Option<Out<'l, A, C>> {
        match n.checked_sub(1) {
            None => self.first.take(),
            Some(hedge) => self.hedges.get_mut(hedge).and_then(Option::take),
        }
    }
}
