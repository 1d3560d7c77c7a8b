//! Pausing until the gate admits again, and active probes.
//!
//! A bulk consumer that meets an open breaker should stop, not fail every
//! item: [`Limiter::wait_ready`] parks it until the gate admits again. While
//! a breaker is half-open, the limiter can run a user-supplied health check
//! as the probe (an *active probe*), so no real item or user request is
//! gambled on a dependency that may not be back.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithms::{Algorithm, Outcome};
use crate::clock::Clock;
use crate::limiter::Limiter;
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
struct Probing<'a>(&'a AtomicBool);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Whether the gate admits calls now. Applies any time-driven change
    /// that is due (an open breaker's cooldown ending) first.
    pub fn readiness(&self) -> Readiness {
        let now = self.clock().now();
        self.refresh_if_due(now);
        let gate = self.gate();
        if gate.is_shut() {
            Readiness::Shut {
                retry_after: gate.until.map(|u| u.saturating_duration_since(now)),
            }
        } else if gate.probe {
            Readiness::Probing
        } else {
            Readiness::Ready
        }
    }

    /// Wait until the gate admits calls again, without spending a probe per
    /// waiter: the way for a queue consumer to pause through an outage
    /// instead of failing (and dead-lettering) every item.
    ///
    /// Returns at once if the gate admits calls. While it is shut, sleeps
    /// until it is re-evaluated or changed. While a breaker is half-open:
    /// with an [active probe](crate::Builder::active_probe), one waiter runs
    /// the health check as the probe and all keep waiting for the verdict;
    /// without one, returns, and the caller's next call is a probe.
    ///
    /// Time is Tokio's: this is for the system or Tokio clock, not a manual
    /// one.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe. A probe cancelled mid-flight is released as
    /// [`Outcome::Ignore`], which gives the probe back to the breaker.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    ///
    /// # Examples
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use rheostat::{algorithms::{Breaker, BreakerConfig}, Limiter, Outcome, clock::TokioClock};
    ///
    /// let limiter = Limiter::builder(Breaker::new(BreakerConfig::default())?)
    ///     .clock(TokioClock)
    ///     // While half-open, check health with a throwaway call, not a real item.
    ///     .active_probe(Duration::from_secs(5), || async { Outcome::Success })
    ///     .build()?;
    /// limiter.update(|b| b.force_open(TokioClock.now()));
    /// // ... a consumer would now pause in `wait_ready` until it is reset:
    /// limiter.update(|b| b.reset(TokioClock.now()));
    /// limiter.wait_ready().await;
    /// # Ok(())
    /// # }
    /// # use rheostat::clock::Clock;
    /// ```
    pub async fn wait_ready(&self) {
        self.ready_waiters.fetch_add(1, Ordering::SeqCst);
        let _leave = ReadyWaiter(self);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.readiness() {
                Readiness::Ready => return,
                Readiness::Probing => {
                    let Some(probe) = self.active_probe() else {
                        return;
                    };
                    if !self.probing.swap(true, Ordering::SeqCst) {
                        let _running = Probing(&self.probing);
                        self.run_active_probe(probe).await;
                        continue;
                    }
                    changed.await;
                }
                Readiness::Shut { retry_after } => match retry_after {
                    Some(after) => {
                        // Wake a hair after the deadline so it has passed
                        // by the clock's reckoning too.
                        let nap = after.saturating_add(Duration::from_millis(1));
                        let nap = nap.min(Duration::from_secs(86_400));
                        tokio::select! {
                            () = tokio::time::sleep(nap) => {}
                            () = &mut changed => {}
                        }
                    }
                    None => changed.await,
                },
            }
        }
    }

    /// Keep the limiter's time-driven work going with no traffic: apply
    /// cooldowns as they end and, while half-open, run the active probe.
    /// Spawn it once per limiter that has an active probe and no
    /// [`wait_ready`](Limiter::wait_ready) caller to run it. Never returns.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: abort the task to stop it.
    ///
    /// # Panics
    ///
    /// If polled outside a Tokio runtime with the time driver enabled.
    pub async fn drive(self: Arc<Self>) {
        loop {
            self.wait_ready().await;
            // Ready (or probing with no active probe): wait for the gate to
            // change before looking again.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.readiness() == Readiness::Ready {
                changed.await;
            } else if self.active_probe().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn run_active_probe(&self, probe: ActiveProbe) {
        let Ok(permit) = self.try_acquire_probe() else {
            return;
        };
        let outcome = match tokio::time::timeout(probe.timeout, (probe.check)()).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => Outcome::Overload,
        };
        permit.record(outcome);
    }
}

struct ReadyWaiter<'a, A, C>(&'a Limiter<A, C>);

impl<A, C> Drop for ReadyWaiter<'_, A, C> {
    fn drop(&mut self) {
        self.0.ready_waiters.fetch_sub(1, Ordering::SeqCst);
    }
}
