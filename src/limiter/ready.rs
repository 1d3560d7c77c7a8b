//! Pausing until the gate admits again, and active probes.
//!
//! A bulk consumer that meets an open breaker should stop, not fail every
//! item: [`Ready::wait`](super::Ready::wait) parks it until the gate admits
//! again. While a breaker is half-open, the limiter can run a user-supplied
//! health check as the probe (an *active probe*), so no real item or user
//! request is gambled on a dependency that may not be back.
//!
//! This file holds their types ([`Readiness`], the active probe, the guards
//! that end a wait or a probe however it ends); the limiter's methods that
//! use them sit with the policy's lock, in `published.rs`, and users reach
//! them through the [`Ready`](super::Ready) handle.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::Limiter;
use crate::algorithms::Outcome;
use crate::sync::{AtomicBool, Ordering};

/// Whether a call would be let through now, as far as the gate goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The gate admits calls (subject to its limit and probability).
    Ready,
    /// A half-open breaker admits trial calls only.
    Probing,
    /// The gate admits nothing, until at least `retry_after` from now where
    /// that is known (a forced-open breaker does not say).
    Shut {
        /// How long until the gate is re-evaluated, if known.
        retry_after: Option<Duration>,
    },
}

type ProbeFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;

/// A health check the limiter runs itself as the half-open probe.
#[derive(Clone)]
pub(crate) struct ActiveProbe {
    pub(crate) timeout: Duration,
    pub(crate) check: Arc<dyn Fn() -> ProbeFuture + Send + Sync>,
}

impl ActiveProbe {
    pub(crate) fn new<F, Fut>(timeout: Duration, check: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        ActiveProbe {
            timeout,
            check: Arc::new(move || Box::pin(check()) as ProbeFuture),
        }
    }
}

impl fmt::Debug for ActiveProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActiveProbe")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Releases the "a probe is running" flag however the probe ends.
pub(super) struct Probing<'a>(pub(super) &'a AtomicBool);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Counts a caller waiting for the gate to admit (`Ready::wait`)
/// for as long as it waits, however the wait ends.
pub(super) struct ReadyWaiter<'a, A, C>(pub(super) &'a Limiter<A, C>);

impl<A, C> Drop for ReadyWaiter<'_, A, C> {
    fn drop(&mut self) {
        self.0.ready_waiters.fetch_sub(1, Ordering::SeqCst);
    }
}
