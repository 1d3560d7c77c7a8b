//! [`Limiter::call`]: one call, its attempts and the waits between them.

use std::future::Future;
use std::time::Duration;

use super::{Decision, Ended, Verdict};
use crate::algorithms::{check, Algorithm, Outcome};
use crate::clock::Clock;
use crate::error::{CallError, RejectReason};
use crate::limiter::{Limiter, Permit, Readiness};
use crate::priority::Class;

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Run a call under a permit taken with [`Limiter::try_acquire`], give
    /// each attempt at most `timeout`, and record its outcome as `classify`
    /// says; if the limiter has a [retry policy](crate::retry) and the
    /// outcome is a retryable failure, make another attempt (a new future
    /// from `make`) within its bounds.
    ///
    /// An attempt that runs out of time is recorded as
    /// [`Outcome::Overload`]. An attempt admitted as a probe is given the
    /// [probe timeout](Limiter::probe_timeout) instead (see
    /// [`Permit::timeout`]), even past the retry's deadline (no retry
    /// follows a probe that ends after it); to choose a
    /// probe's timeout yourself, take the permit with
    /// [`Limiter::try_acquire`] and use [`Permit::run`].
    ///
    /// `classify` returns an [`Outcome`] or, to say more to the retry, a
    /// [`Verdict`] (whether an overload is worth retrying, the server's
    /// `Retry-After`). The call's result is the last attempt's: a value the
    /// classifier counted as a failure (an HTTP 503 response, say) is
    /// returned as it is once no retry follows.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the permit of the attempt in flight, which
    /// records the limiter's drop outcome (by default [`Outcome::Ignore`]);
    /// dropped during a backoff, nothing is held.
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
    /// let limiter = Limiter::new(Fixed::new(10).unwrap());
    /// let body = limiter
    ///     .call(Duration::from_secs(1), classify, || async { Ok("hello") })
    ///     .await
    ///     .unwrap();
    /// assert_eq!(body, "hello");
    ///
    /// let hung = limiter
    ///     .call(Duration::from_millis(5), classify, std::future::pending)
    ///     .await;
    /// assert!(matches!(hung, Err(CallError::TimedOut(_))));
    /// # }
    /// ```
    pub async fn call<M, F, T, E, K, V>(
        &self,
        timeout: Duration,
        classify: K,
        make: M,
    ) -> Result<T, CallError<E>>
    where
        M: FnMut() -> F,
        F: Future<Output = Result<T, E>>,
        K: FnMut(&Result<T, E>) -> V,
        V: Into<Verdict>,
    {
        self.run_call(None, timeout, classify, make).await
    }

    /// [`Limiter::call`] for a call of `class` (see [`crate::priority`]):
    /// every attempt is admitted as that class.
    ///
    /// # Cancel safety
    ///
    /// As [`Limiter::call`].
    ///
    /// # Errors
    ///
    /// As [`Limiter::call`].
    ///
    /// # Panics
    ///
    /// As [`Limiter::call`].
    pub async fn call_as<M, F, T, E, K, V>(
        &self,
        class: Class,
        timeout: Duration,
        classify: K,
        make: M,
    ) -> Result<T, CallError<E>>
    where
        M: FnMut() -> F,
        F: Future<Output = Result<T, E>>,
        K: FnMut(&Result<T, E>) -> V,
        V: Into<Verdict>,
    {
        self.run_call(Some(class), timeout, classify, make).await
    }

    async fn run_call<M, F, T, E, K, V>(
        &self,
        class: Option<Class>,
        timeout: Duration,
        mut classify: K,
        mut make: M,
    ) -> Result<T, CallError<E>>
    where
        M: FnMut() -> F,
        F: Future<Output = Result<T, E>>,
        K: FnMut(&Result<T, E>) -> V,
        V: Into<Verdict>,
    {
        let Some(retry) = self.retry() else {
            let permit = self.try_acquire_class(class).map_err(CallError::Rejected)?;
            let timeout = permit.timeout(timeout);
            return permit
                .run(timeout, |r| classify(r).into().outcome, make())
                .await;
        };
        if let Err(e) = check::duration("timeout", timeout) {
            return Err(CallError::InvalidTimeout(e));
        }
        // The call begins at its first admission (the instant the limiter
        // read for it, if it read one) or refusal.
        let first = self.try_acquire_class(class);
        let began = match &first {
            Ok(permit) => permit.started(),
            Err(_) => None,
        };
        let mut call = retry.begin(began.unwrap_or_else(|| self.clock().now()), timeout);
        let mut next = retry.first_timeout(&call);
        let mut waited = false;
        let mut first = Some(first);
        loop {
            call.attempts += 1;
            let admitted = match first.take() {
                Some(Ok(permit)) => Ok(permit),
                Some(Err(rejection)) => {
                    self.after_refusal(rejection, class, &mut waited, &call, retry)
                        .await
                }
                None => match self.try_acquire_class(class) {
                    Ok(permit) => Ok(permit),
                    Err(rejection) => {
                        self.after_refusal(rejection, class, &mut waited, &call, retry)
                            .await
                    }
                },
            };
            let (ended, result) = match admitted {
                Err(reason_and_error) => reason_and_error,
                Ok(permit) => {
                    let probe = permit.is_probe().then(|| permit.timeout(next));
                    let timeout = retry.attempt_timeout(&call, next, self.clock(), probe);
                    if timeout.is_zero() {
                        permit.ignore();
                        return Err(CallError::TimedOut(timeout));
                    }
                    match tokio::time::timeout(timeout, make()).await {
                        Err(_elapsed) => {
                            permit.overload();
                            (Ended::TimedOut, Err(CallError::TimedOut(timeout)))
                        }
                        Ok(result) => {
                            let verdict: Verdict = classify(&result).into();
                            permit.record(verdict.outcome);
                            if verdict.outcome == Outcome::Success {
                                return result.map_err(CallError::Failed);
                            }
                            (Ended::Ran(verdict), result.map_err(CallError::Failed))
                        }
                    }
                }
            };
            let shut = matches!(self.readiness(), Readiness::Shut { .. });
            let (decision, dry) = retry.decide(&call, ended, self.clock().now(), shut);
            self.observe_retry(&call, ended, decision, dry);
            match decision {
                Decision::Stop(_) => return result,
                Decision::Retry { wait, timeout } => {
                    drop(result);
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                    next = timeout;
                }
            }
        }
    }

    /// [`Limiter::try_acquire_as`] for a class, [`Limiter::try_acquire`]
    /// without one.
    fn try_acquire_class(
        &self,
        class: Option<Class>,
    ) -> Result<Permit<'_, A, C>, crate::Rejection> {
        match class {
            Some(class) => self.try_acquire_as(class),
            None => self.try_acquire(),
        }
    }

    /// Tell the observer, if any, what was decided after attempt
    /// `call.attempts`, which ended as `ended`. A first attempt the limiter
    /// refused is a call refused (the observer was told so), not a retry:
    /// nothing is told of it.
    pub(crate) fn observe_retry(
        &self,
        call: &super::Call,
        ended: Ended,
        decision: Decision,
        dry: bool,
    ) {
        let Some(observer) = self.observer() else {
            return;
        };
        if call.attempts <= 1 && matches!(ended, Ended::Refused(_)) {
            return;
        }
        observer.retry(match decision {
            Decision::Retry { .. } => super::RetryOutcome::Sent,
            Decision::Stop(outcome) => outcome,
        });
        if dry {
            observer.retry_budget_exhausted();
        }
    }

    /// How a refused attempt of `call` goes on: a refusal because the limit
    /// is reached waits once in the queue if the retry allows it; any other
    /// ends the attempt.
    async fn after_refusal<T, E>(
        &self,
        rejection: crate::Rejection,
        class: Option<Class>,
        waited: &mut bool,
        call: &super::Call,
        retry: &super::Retry,
    ) -> Result<Permit<'_, A, C>, (Ended, Result<T, CallError<E>>)> {
        let refused =
            |r: crate::Rejection| (Ended::Refused(r.reason()), Err(CallError::Rejected(r)));
        if rejection.reason() != RejectReason::LimitReached
            || !retry.config().wait_on_limit
            || *waited
        {
            return Err(refused(rejection));
        }
        *waited = true;
        let left = retry.left(call, self.clock().now());
        self.acquire_within_as(left, class).await.map_err(refused)
    }
}
