//! [`answered`]: an attempt of a retrying call that answered, classified
//! and recorded, as the [`RetryResponseFuture`](super::RetryResponseFuture)
//! and the hedges it races each end theirs.

use std::time::Duration;

use crate::algorithms::Algorithm;
use crate::clock::Clock;
use crate::error::CallError;
use crate::limiter::{Limiter, OwnedPermit};
use crate::retry::{Ended, Verdict};
use crate::tower::classify::Classify;

/// How an attempt ended, and its result as the call would answer it.
pub(super) type Ending<R, E> = (Ended, Result<R, CallError<E>>);

/// An attempt under `permit` answered `result`: classified (its verdict,
/// for a call with retries), its permit recorded, with its latency by the
/// limiter's clock.
pub(super) fn answered<R, E, K, A, C>(
    result: Result<R, E>,
    permit: Option<OwnedPermit<A, C>>,
    classifier: &K,
    limiter: &Limiter<A, C>,
    retrying: bool,
) -> Ending<R, E>
where
    K: Classify<R, E, End = ()>,
    A: Algorithm,
    C: Clock,
{
    let latency = permit
        .as_ref()
        .and_then(|permit| permit.started())
        .map_or(Duration::ZERO, |start| {
            limiter.clock().now().saturating_duration_since(start)
        });
    let verdict = if retrying {
        classifier.verdict(&result, latency)
    } else {
        Verdict::new(classifier.classify(&result, latency))
    };
    if let Some(permit) = permit {
        permit.record(verdict.outcome);
    }
    (Ended::Ran(verdict), result.map_err(CallError::Failed))
}
