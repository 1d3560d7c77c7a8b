//! Retries that cannot become a storm: budgeted, bound by one deadline, and
//! stopped by the limiter they go through.
//!
//! A [`RetryConfig`] given to a limiter ([`Builder::retry`](crate::Builder::retry),
//! or a `retry` table beside the `policy` table of a configuration file)
//! makes [`Limiter::call`](crate::Limiter::call) retry a failed call (and,
//! with the `tower` feature, the layer `RheostatLayer::retry` makes),
//! within four bounds:
//!
//! - **attempts**: at most `attempts` per call, the first included;
//! - **deadline**: no retry starts after the call's deadline, and each
//!   attempt's timeout shrinks so that it ends by it;
//! - **budget**: over the last `ttl`, retries number at most `ratio` of the
//!   calls made plus `min_per_second × ttl` (Finagle's retry budget), so a
//!   dependency that fails every call sees at most `1 + ratio` times the
//!   calls it would see without retries;
//! - **the limiter**: a call refused by an open breaker or by throttling is
//!   not retried, nor is a failure after which the breaker is open; a call
//!   refused because the limit is reached may wait once in the queue if
//!   [`RetryConfig::wait_on_limit`] is set.
//!
//! Only failures the classifier calls retryable are retried: by default an
//! [`Outcome::Overload`] (a timeout, a 5xx, a
//! refused connection), never an [`Outcome::Ignore`]
//! (a 4xx), and never a success. A classifier may say more with a
//! [`Verdict`]: that an overload is not worth retrying, or how long the
//! server asked to wait (`Retry-After`), which is then a floor on the
//! backoff.
//!
//! A [`Hedge`] (`RetryConfig::hedge`; `hedge = "auto"` in a file) sends a
//! second attempt beside one that has not answered after a delay, learned
//! (the p95 of recent successes) or typed, and takes the first answer. It
//! spends the same budget, needs a free slot, is sent only for a call that
//! may be sent twice, and stands down while the policy sees congestion; see
//! [`Hedge`].
//!
//! Every decision after a failed attempt is told to the limiter's
//! [`Observer`](crate::Observer) as a [`RetryOutcome`] (the metrics
//! observer counts them in `rheostat_retries_total`).
//!
//! The attempt loop itself — acquire, wait once, time out, classify,
//! decide, back off, retry — is one state machine, [`Attempts`], told
//! events and answering the next [`Action`]; `Limiter::call`, the tower
//! layer's retrying future and the simulator drive it, each doing only the
//! waiting and the I/O.
//!
//! # Examples
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::time::Duration;
//! use rheostat::retry::RetryConfig;
//! use rheostat::{algorithms::{Aimd, AimdConfig}, Limiter, Outcome};
//!
//! let limiter = Limiter::builder(Aimd::new(AimdConfig::default())?)
//!     .retry(RetryConfig {
//!         backoff: rheostat::retry::Backoff { base: Duration::from_millis(1), cap: Duration::from_millis(5) },
//!         ..RetryConfig::default()
//!     })
//!     .timeout(Duration::from_secs(1))
//!     .build()?;
//!
//! // Fails twice, then answers: the third attempt is the last the default allows.
//! let tries = AtomicU32::new(0);
//! let answer = limiter
//!     .call(|r: &Result<u32, String>| match r {
//!         Ok(_) => Outcome::Success,
//!         Err(_) => Outcome::Overload,
//!     }, || async {
//!         let n = tries.fetch_add(1, Ordering::Relaxed);
//!         if n < 2 { Err("503".to_string()) } else { Ok(n) }
//!     })
//!     .await
//!     .map_err(|e| e.to_string())?;
//! assert_eq!(answer, 2);
//! # Ok(())
//! # }
//! ```

mod attempts;
mod budget;
mod config;
mod hedge;

use std::fmt;
use std::time::{Duration, Instant};

pub use attempts::{Action, Attempts, Decided, Hedging, Late};
pub use config::{Backoff, Budget, RetryConfig};
pub use hedge::Hedge;

/// Most attempts a call may be given, hedges and retries included.
pub const MAX_ATTEMPTS: u32 = 10;

use crate::algorithms::{ConfigError, Outcome};
use crate::error::RejectReason;
use crate::sync::{AtomicU64, Ordering};
use budget::{Account, Withdrawal};

/// The least time before the deadline a retry must have to be sent: the
/// resolution of Tokio's timer, which rounds a backoff's end up to the next
/// millisecond. A retry planned to start less than this before the deadline
/// could find it passed when its backoff ends, and would be counted as sent
/// (its budget spent) without an attempt.
const LEAST_ATTEMPT: Duration = Duration::from_millis(1);

/// What a classifier makes of a finished attempt: the outcome the limiter
/// learns from, whether a retry could help, and how long the server asked
/// to be left alone.
///
/// An [`Outcome`] converts into the verdict the retry assumes by default:
/// retryable if, and only if, it is an overload.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{retry::Verdict, Outcome};
///
/// assert!(Verdict::from(Outcome::Overload).retryable);
/// assert!(!Verdict::from(Outcome::Ignore).retryable);
/// let busy = Verdict::from(Outcome::Overload).retry_after(Duration::from_secs(2));
/// assert_eq!(busy.retry_after, Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// What the limiter's policy learns.
    pub outcome: Outcome,
    /// Whether another attempt could succeed. Only an overload may be
    /// retried, whatever this says.
    pub retryable: bool,
    /// The server's `Retry-After`: no retry starts sooner.
    pub retry_after: Option<Duration>,
}

impl Verdict {
    /// `outcome`, retryable if it is an overload.
    pub fn new(outcome: Outcome) -> Self {
        Verdict {
            outcome,
            retryable: outcome == Outcome::Overload,
            retry_after: None,
        }
    }

    /// The same verdict, not worth retrying.
    #[must_use]
    pub fn not_retryable(mut self) -> Self {
        self.retryable = false;
        self
    }

    /// The same verdict, with the server's `Retry-After`.
    #[must_use]
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Whether a retry may follow: a retryable overload.
    pub fn may_retry(&self) -> bool {
        self.retryable && self.outcome == Outcome::Overload
    }
}

impl From<Outcome> for Verdict {
    fn from(outcome: Outcome) -> Self {
        Verdict::new(outcome)
    }
}

/// What was decided after a failed attempt (the `outcome` label of
/// `rheostat_retries_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RetryOutcome {
    /// A retry was sent.
    Sent,
    /// The budget had no retry left.
    BudgetExhausted,
    /// The retry could not start (after its backoff, or the server's
    /// `Retry-After`) before the call's deadline.
    Deadline,
    /// The failure was not retryable (not an overload, or the classifier
    /// said so).
    NotRetryable,
    /// The limiter refused the attempt (an open breaker, throttling, a
    /// full queue), or its breaker opened on the failure: nothing to retry
    /// through.
    Rejected,
    /// The call had used all its attempts.
    Exhausted,
}

impl RetryOutcome {
    /// A stable lower-case name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryOutcome::Sent => "sent",
            RetryOutcome::BudgetExhausted => "budget_exhausted",
            RetryOutcome::Deadline => "deadline",
            RetryOutcome::NotRetryable => "not_retryable",
            RetryOutcome::Rejected => "rejected",
            RetryOutcome::Exhausted => "exhausted",
        }
    }

    /// Every outcome, in label order.
    pub const ALL: [RetryOutcome; 6] = [
        RetryOutcome::Sent,
        RetryOutcome::BudgetExhausted,
        RetryOutcome::Deadline,
        RetryOutcome::NotRetryable,
        RetryOutcome::Rejected,
        RetryOutcome::Exhausted,
    ];
}

impl fmt::Display for RetryOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of a hedge, or why none was sent (the `result` label of
/// `rheostat_hedges_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HedgeOutcome {
    /// A hedge was sent beside an attempt still out.
    Sent,
    /// A hedge sent gave the call its answer.
    Won,
    /// A hedge sent did not: another attempt answered first, or it failed.
    Lost,
    /// None sent: the policy sees congestion (the limit last moved down, a
    /// breaker not closed, a throttle refusing).
    Congested,
    /// None sent yet: no call sent after the attempt has answered, so the
    /// calls are answering in order and the whole dependency is late, not
    /// this call (a hedge would wait behind the same backlog). Weighed
    /// again after each further hedge delay, and counted at each weighing.
    InOrder,
    /// None sent: the retry budget had none left.
    BudgetExhausted,
    /// None sent: the limiter had no free slot (a hedge never waits).
    Refused,
    /// None sent: the call's deadline is too near.
    Deadline,
    /// None sent: the call's attempts are spent.
    Exhausted,
}

impl HedgeOutcome {
    /// A stable lower-case name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            HedgeOutcome::Sent => "sent",
            HedgeOutcome::Won => "won",
            HedgeOutcome::Lost => "lost",
            HedgeOutcome::Congested => "congested",
            HedgeOutcome::InOrder => "in_order",
            HedgeOutcome::BudgetExhausted => "budget_exhausted",
            HedgeOutcome::Refused => "refused",
            HedgeOutcome::Deadline => "deadline",
            HedgeOutcome::Exhausted => "exhausted",
        }
    }

    /// Every outcome, in label order.
    pub const ALL: [HedgeOutcome; 9] = [
        HedgeOutcome::Sent,
        HedgeOutcome::Won,
        HedgeOutcome::Lost,
        HedgeOutcome::Congested,
        HedgeOutcome::InOrder,
        HedgeOutcome::BudgetExhausted,
        HedgeOutcome::Refused,
        HedgeOutcome::Deadline,
        HedgeOutcome::Exhausted,
    ];
}

impl fmt::Display for HedgeOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How an attempt ended, as the retry sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ended {
    /// It ran and was classified.
    Ran(Verdict),
    /// It ran out of time (an overload, retryable).
    TimedOut,
    /// The limiter refused it.
    Refused(RejectReason),
}

/// What to do after a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Wait `wait`, then make the next attempt with at most `timeout`.
    Retry {
        /// The backoff (at least the server's `Retry-After`).
        wait: Duration,
        /// The next attempt's timeout, shrunk to end by the deadline.
        timeout: Duration,
    },
    /// Stop, for this reason.
    Stop(RetryOutcome),
}

/// The state of one call being retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// When the call began (its first attempt's admission, or refusal).
    pub started: Instant,
    /// Attempts made so far, refused ones included.
    pub attempts: u32,
    /// The timeout an attempt gets before the deadline shrinks it.
    pub timeout: Duration,
}

/// A limiter's retry policy: its configuration, its budget and its jitter.
///
/// Made by [`Builder::retry`](crate::Builder::retry); a user of
/// [`Limiter::call`](crate::Limiter::call) or of the tower layer never
/// drives it by hand, but a loop of one's own can: [`Attempts`] runs the
/// whole attempt loop as a state machine (as `Limiter::call` does);
/// underneath it, [`Retry::begin`] counts a call, [`Retry::after`] decides
/// what follows a failed attempt.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat::retry::{Call, Decision, Ended, Retry, RetryConfig, RetryOutcome};
/// use rheostat::Outcome;
///
/// let retry = Retry::new(RetryConfig::default(), 7, Instant::now())?;
/// let t0 = Instant::now();
/// let mut call = retry.begin(t0, Duration::from_millis(500));
/// call.attempts = 1;
/// // A 5xx: retried, after a jittered wait of at most 50 ms.
/// let Decision::Retry { wait, timeout } = retry.after(&call, Ended::Ran(Outcome::Overload.into()), t0, false) else {
///     panic!("an overload is retried");
/// };
/// assert!(wait <= Duration::from_millis(50));
/// assert_eq!(timeout, Duration::from_millis(500));
/// // A 4xx is not.
/// assert_eq!(
///     retry.after(&call, Ended::Ran(Outcome::Ignore.into()), t0, false),
///     Decision::Stop(RetryOutcome::NotRetryable)
/// );
/// # Ok::<(), rheostat::ConfigError>(())
/// ```
pub struct Retry {
    config: RetryConfig,
    account: Account,
    rng: AtomicU64,
    /// Retries granted so far (hedges stand down after one).
    retried: AtomicU64,
}

impl Retry {
    /// A retry policy with `config`, drawing its jitter from `seed`, its
    /// budget's intervals counted from `origin`.
    ///
    /// # Errors
    ///
    /// As [`RetryConfig::validate`].
    pub fn new(config: RetryConfig, seed: u64, origin: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Retry {
            account: Account::new(&config.budget, origin),
            config,
            rng: AtomicU64::new(seed ^ 0x7E57_0FBA_C0FF_5E00),
            retried: AtomicU64::new(0),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &RetryConfig {
        &self.config
    }

    /// Count a new call at `now` in the budget, and begin its account with
    /// `timeout` (the configured attempt timeout if there is one).
    #[inline]
    pub fn begin(&self, now: Instant, timeout: Duration) -> Call {
        self.account.deposit(now);
        Call {
            started: now,
            attempts: 0,
            timeout: self.config.timeout.unwrap_or(timeout),
        }
    }

    /// The timeout of the first attempt of `call`: its timeout, shrunk to
    /// the deadline.
    #[inline]
    pub fn first_timeout(&self, call: &Call) -> Duration {
        match self.config.deadline {
            Some(deadline) => call.timeout.min(deadline),
            None => call.timeout,
        }
    }

    /// What follows attempt `call.attempts` of `call`, which ended as
    /// `ended` at `now`; `shut` if the limiter's gate is now shut (an open
    /// breaker). A retry this grants is withdrawn from the budget.
    pub fn after(&self, call: &Call, ended: Ended, now: Instant, shut: bool) -> Decision {
        self.decide(call, ended, now, shut).0
    }

    /// As [`Retry::after`], and whether the budget has just run dry.
    pub(crate) fn decide(
        &self,
        call: &Call,
        ended: Ended,
        now: Instant,
        shut: bool,
    ) -> (Decision, bool) {
        let stop = |outcome| (Decision::Stop(outcome), false);
        let retry_after = match ended {
            Ended::Ran(verdict) if verdict.may_retry() => verdict.retry_after,
            Ended::Ran(_) => return stop(RetryOutcome::NotRetryable),
            Ended::TimedOut => None,
            Ended::Refused(_) => return stop(RetryOutcome::Rejected),
        };
        if call.attempts >= self.config.attempts {
            return stop(RetryOutcome::Exhausted);
        }
        if shut {
            return stop(RetryOutcome::Rejected);
        }
        let jitter = self.jitter(call.attempts);
        let wait = retry_after.map_or(jitter, |floor| jitter.max(floor));
        let timeout = match self.config.deadline {
            None => call.timeout,
            Some(deadline) => {
                let end = call.started.checked_add(deadline);
                let start = now.checked_add(wait);
                match (end, start) {
                    (Some(end), Some(start))
                        if end.saturating_duration_since(start) > LEAST_ATTEMPT =>
                    {
                        call.timeout.min(end - start)
                    }
                    _ => return stop(RetryOutcome::Deadline),
                }
            }
        };
        match self.account.withdraw(now) {
            Withdrawal::Granted => {
                self.retried.fetch_add(1, Ordering::Relaxed);
                (Decision::Retry { wait, timeout }, false)
            }
            Withdrawal::Refused { first } => (Decision::Stop(RetryOutcome::BudgetExhausted), first),
        }
    }

    /// Retries granted so far.
    pub(crate) fn retried(&self) -> u64 {
        self.retried.load(Ordering::Relaxed)
    }

    /// Withdraw one attempt from the budget at `now` for a hedge: only
    /// while the budget is not dry (its last withdrawal granted) and would
    /// still grant a retry after it, so that a hedge never takes what
    /// retries, a failed call's only chance, need.
    pub(crate) fn withdraw_hedge(&self, now: Instant) -> Withdrawal {
        if self.account.is_dry() {
            return Withdrawal::Refused { first: false };
        }
        self.account.withdraw_leaving(now, 1)
    }

    /// What is left at `now` of `call`'s deadline; `None` without one.
    pub fn left(&self, call: &Call, now: Instant) -> Option<Duration> {
        self.config
            .deadline
            .map(|deadline| deadline.saturating_sub(now.saturating_duration_since(call.started)))
    }

    /// The timeout of an attempt of `call` starting now by `clock`: `next`,
    /// cut to end by the deadline — unless the attempt is a breaker's probe,
    /// whose own timeout (`probe`) it is given whole, past the deadline: cut
    /// to the caller's patience, a probe of a dependency that answers
    /// slowly as it recovers fails every time, and the breaker never
    /// closes. Zero if the deadline has passed. The clock is read only if
    /// there is a deadline.
    pub fn attempt_timeout(
        &self,
        call: &Call,
        next: Duration,
        clock: &impl crate::clock::Clock,
        probe: Option<Duration>,
    ) -> Duration {
        match (probe, self.config.deadline) {
            (Some(probe), _) => probe,
            (None, Some(_)) => self
                .left(call, clock.now())
                .map_or(next, |left| next.min(left)),
            (None, None) => next,
        }
    }

    /// The retries the budget would grant at `now`.
    pub fn budget_left(&self, now: Instant) -> f64 {
        self.account.balance(now)
    }

    /// A full-jitter wait before retry `n` (1 for the first).
    fn jitter(&self, n: u32) -> Duration {
        let ceiling = self.config.backoff.ceiling(n);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        let z = crate::sync::splitmix(&self.rng);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        // Uniform in [0, ceiling]: the high half of a 128-bit product.
        #[allow(clippy::cast_possible_truncation, reason = "the high half")]
        let drawn = ((u128::from(z) * (u128::from(nanos) + 1)) >> 64) as u64;
        Duration::from_nanos(drawn)
    }

    /// How long one of the budget's buckets lasts (a tenth of its `ttl`).
    pub fn budget_bucket(&self) -> Duration {
        self.account.bucket_width()
    }
}

impl fmt::Debug for Retry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}
