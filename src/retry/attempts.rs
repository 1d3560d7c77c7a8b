//! [`Attempts`]: the attempt loop of one call as a state machine, told
//! events and answering the next [`Action`]; the type says who drives it,
//! and its invariants. What each attempt returns stays with the front end:
//! the machine answers [`Action::Answer`] when the last attempt's result is
//! the call's.

use std::time::{Duration, Instant};

use super::budget::Withdrawal;
use super::{Call, Decision, Ended, HedgeOutcome, Retry, RetryOutcome};
use crate::algorithms::Outcome;
use crate::error::RejectReason;

/// The attempts of one call — acquire, wait once, time out, classify,
/// decide, back off, retry — told what happened and answering what to do
/// next, with no clock and no I/O of its own: it asks the time and whether
/// the limiter's gate is shut through what it is told with each event, and
/// the front end that drives it does the waiting, the sending and the
/// timing. [`Limiter::call`](crate::Limiter::call), the tower layer's
/// retrying future (`RheostatLayer::retry`) and the simulator drive it.
///
/// # Invariants
///
/// - The call is counted in the budget once, when the machine is made
///   ([`Attempts::new`]); a retry is withdrawn from it only when granted
///   ([`Action::Sleep`]).
/// - Attempts, refused ones included, never exceed
///   [`RetryConfig::attempts`](super::RetryConfig::attempts): each
///   [`Action::Acquire`] after a backoff counts one.
/// - After a refusal because the limit is reached, the call waits in the
///   queue ([`Action::Queue`]) at most once, and only if
///   [`RetryConfig::wait_on_limit`](super::RetryConfig::wait_on_limit) says
///   so; any other refusal, or a second, is decided at once.
/// - An attempt's timeout ends by the deadline, except a breaker's probe's,
///   given whole past it (cut to the caller's patience, a probe of a
///   dependency that answers slowly as it recovers fails every time). An
///   attempt admitted with no time left is not sent ([`Action::Expire`]).
/// - A success is answered at once, with no decision. Every other end of an
///   attempt is decided once ([`Retry::after`]'s rules, a retry needing
///   more than a millisecond before the deadline), and the decision is
///   reported ([`Decided`]); a first attempt the limiter refused is a call
///   refused, not a retry, and the observer does not hear of it.
/// - A request the front end may not send twice
///   ([`Attempts::no_resend`]) stops at its first retryable failure as not
///   retryable, without asking the budget or the gate.
/// - A hedge ([`RetryConfig::hedge`](super::RetryConfig::hedge)) is an
///   attempt: hedges and retries together never exceed `attempts`. It is
///   sent only for a request that may be sent twice, while the policy sees
///   no congestion, and only once withdrawn from the budget
///   ([`Attempts::hedge`]); it never waits in the queue. While attempts are
///   out, a failure of one is not decided: the call waits for the others
///   ([`Action::Await`]), and only the last failure is weighed for a retry.
/// - The time is asked only when a deadline or a decision needs it (a clock
///   read is a twentieth of a call that needs no retry, which a retry
///   policy is to leave within 5%: `docs/results.md`), and whether the
///   limiter's gate is shut only when a retry is weighed (reading it
///   refreshes the limiter's published state).
///
/// # Examples
///
/// Driven by hand, as a front end drives it:
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat::retry::{Action, Attempts, Ended, Retry, RetryConfig, RetryOutcome};
/// use rheostat::Outcome;
///
/// let retry = Retry::new(RetryConfig::default(), 7, Instant::now())?;
/// let t0 = Instant::now();
/// let mut attempts = Attempts::new(&retry, t0, Duration::from_millis(500));
/// // The first attempt is admitted, and sent with its timeout.
/// let action = attempts.admitted(&retry, || t0, attempts.next_timeout(), false);
/// assert_eq!(action, Action::Send { timeout: Duration::from_millis(500) });
/// // It fails with a 5xx: back off, then acquire the next attempt.
/// let failed = Ended::Ran(Outcome::Overload.into());
/// let Action::Sleep { decided, .. } = attempts.ended(&retry, failed, || t0, || false) else {
///     panic!("an overload is retried");
/// };
/// assert_eq!(decided.outcome, RetryOutcome::Sent);
/// assert_eq!(attempts.backoff_elapsed(), Action::Acquire);
/// # Ok::<(), rheostat::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempts {
    call: Call,
    /// The next attempt's timeout, before a probe's or the deadline's cut.
    next: Duration,
    /// Whether the call has waited in the queue after a refusal.
    waited: bool,
    /// Whether the request may be sent again.
    resend: bool,
    /// Hedges sent.
    hedges: u32,
    /// Attempts sent and not yet ended.
    out: u32,
}

/// What the front end driving [`Attempts`] does next.
///
/// Not `non_exhaustive`: a front end must do every action, so a new one is
/// meant to break it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "the front end does what the attempts answer"]
pub enum Action {
    /// Take a slot for the next attempt, failing fast; then tell
    /// [`Attempts::admitted`] or [`Attempts::refused`].
    Acquire,
    /// Wait in the limiter's queue for a slot, at most `within` (`None`:
    /// as long as the limiter allows); then tell [`Attempts::admitted`] or
    /// [`Attempts::refused`].
    Queue {
        /// What is left of the call's deadline.
        within: Option<Duration>,
    },
    /// Send the attempt admitted, given at most `timeout`
    /// (`Duration::MAX` for none); then tell [`Attempts::ended`].
    Send {
        /// The attempt's timeout.
        timeout: Duration,
    },
    /// A retry is granted: forget the failed attempt's result, wait `wait`,
    /// then tell [`Attempts::backoff_elapsed`].
    Sleep {
        /// The backoff (at least the server's `Retry-After`).
        wait: Duration,
        /// The decision, to report.
        decided: Decided,
    },
    /// The attempt admitted has no time left before the deadline: release
    /// its permit unrecorded ([`Outcome::Ignore`]) and answer that the call
    /// timed out, with a timeout of zero.
    Expire,
    /// The last attempt's result is the call's: answer it. Attempts still
    /// out (hedges, or the attempt a hedge raced) are cancelled: release
    /// their permits as [`Outcome::Ignore`].
    Answer {
        /// The decision after a failure, to report; `None` after a success.
        decided: Option<Decided>,
    },
    /// The attempt that ended failed while others are still out: forget
    /// nothing yet, and wait for the next of them to end.
    Await,
}

/// What [`Attempts::hedge`] answers when an attempt has run for the hedge
/// delay without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "the front end acquires the hedge's slot or reports why not"]
pub enum Hedging {
    /// Take a free slot for the hedge, failing fast (never queue); then
    /// tell [`Attempts::hedge_admitted`] or [`Attempts::hedge_refused`].
    Acquire,
    /// No hedge, for this reason: report it.
    Not(HedgeOutcome),
    /// No hedge yet, for this reason ([`HedgeOutcome::InOrder`]): report
    /// it, and weigh again when the attempts out have run for another
    /// hedge delay.
    Later(HedgeOutcome),
}

/// Whose lateness an attempt that has run for the hedge delay shows, as
/// the limiter sees it ([`Limiter::late`](crate::Limiter::late)): what
/// [`Attempts::hedge`] weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Late {
    /// Its own: a call sent after it has already succeeded, so it is in
    /// the dependency's tail, which a hedge cuts; or it is alone in
    /// flight, so that nothing says otherwise.
    Alone,
    /// Everyone's, for all the limiter knows: other calls are in flight
    /// and none sent after it has succeeded yet. Calls are answering in
    /// the order they were sent, as from a queue or a dependency slowed as
    /// a whole, and a hedge would wait behind the same backlog.
    InOrder,
    /// The policy sees congestion: its limit last moved down, a breaker is
    /// not closed, a throttle is refusing, or since the attempt was sent a
    /// call was refused or a failure retried.
    Congested,
}

/// What was decided after a failed attempt, for the observer (and the
/// simulator's counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decided {
    /// A retry sent, or why none was.
    pub outcome: RetryOutcome,
    /// Whether the budget has just run dry.
    pub dry: bool,
    /// Whether the observer hears of it: not of a first attempt the
    /// limiter refused, which is a call refused (the observer was told so),
    /// not a retry.
    pub observed: bool,
}

impl Attempts {
    /// A call beginning at `started` (its first admission or refusal, or,
    /// for a front end that admits later, its start), counted in `retry`'s
    /// budget, its first attempt being acquired; each attempt gets
    /// `timeout` (`Duration::MAX` for none) unless the retry's
    /// configuration sets one, cut to the deadline.
    #[inline]
    pub fn new(retry: &Retry, started: Instant, timeout: Duration) -> Self {
        let mut call = retry.begin(started, timeout);
        call.attempts = 1;
        Attempts {
            next: retry.first_timeout(&call),
            call,
            waited: false,
            resend: true,
            hedges: 0,
            out: 0,
        }
    }

    /// The same attempts, for a request that may not be sent twice: its
    /// first retryable failure stops the call as
    /// [`RetryOutcome::NotRetryable`], with no retry asked of the budget.
    #[must_use]
    pub fn no_resend(mut self) -> Self {
        self.resend = false;
        self
    }

    /// The call's account: when it began, attempts made so far.
    pub fn call(&self) -> &Call {
        &self.call
    }

    /// The next attempt's timeout before a probe's or the deadline's cut:
    /// the ordinary timeout a front end gives
    /// [`Permit::timeout`](crate::Permit::timeout) to find a probe's.
    #[inline]
    pub fn next_timeout(&self) -> Duration {
        self.next
    }

    /// Whether an attempt may follow the current one: the request may be
    /// sent again and the call has attempts left. A front end that must
    /// give the request away to send it clones it only while this holds.
    pub fn may_follow(&self, retry: &Retry) -> bool {
        self.resend && self.call.attempts < retry.config().attempts
    }

    /// The attempt was admitted, at `now` (asked only with a deadline),
    /// and its permit gives it `timeout`
    /// ([`Permit::timeout`](crate::Permit::timeout) of
    /// [`Attempts::next_timeout`]: the next timeout, a learned one below
    /// it, or a breaker's probe's); `probe` says whether it is a probe,
    /// whose timeout is given whole, where any other is cut to the
    /// deadline. Answers [`Action::Send`] or [`Action::Expire`].
    #[inline]
    pub fn admitted(
        &mut self,
        retry: &Retry,
        now: impl FnOnce() -> Instant,
        timeout: Duration,
        probe: bool,
    ) -> Action {
        let timeout = match (probe, retry.config().deadline) {
            (true, _) | (false, None) => timeout,
            (false, Some(_)) => retry
                .left(&self.call, now())
                .map_or(timeout, |left| timeout.min(left)),
        };
        if timeout.is_zero() {
            Action::Expire
        } else {
            self.out += 1;
            Action::Send { timeout }
        }
    }

    /// The attempt was refused at admission, at `now`, for `reason`.
    /// Answers [`Action::Queue`] (once, for a full limit, if the retry may
    /// wait), else as [`Attempts::ended`]. `shut` says whether the
    /// limiter's gate is shut (an open breaker), asked only if a retry is
    /// weighed.
    pub fn refused(
        &mut self,
        retry: &Retry,
        reason: RejectReason,
        now: impl FnOnce() -> Instant,
        shut: impl FnOnce() -> bool,
    ) -> Action {
        if reason == RejectReason::LimitReached && retry.config().wait_on_limit && !self.waited {
            self.waited = true;
            return Action::Queue {
                within: retry.left(&self.call, now()),
            };
        }
        self.ended(retry, Ended::Refused(reason), now, shut)
    }

    /// The attempt ended at `now` as `ended`. Answers [`Action::Answer`]
    /// after a success or when no retry follows, [`Action::Sleep`] when
    /// one does (withdrawn from the budget). `now` and `shut` are asked
    /// only if a retry is weighed.
    #[inline]
    pub fn ended(
        &mut self,
        retry: &Retry,
        ended: Ended,
        now: impl FnOnce() -> Instant,
        shut: impl FnOnce() -> bool,
    ) -> Action {
        if !matches!(ended, Ended::Refused(_)) {
            self.out = self.out.saturating_sub(1);
        }
        match ended {
            Ended::Ran(verdict) if verdict.outcome == Outcome::Success => {
                Action::Answer { decided: None }
            }
            // Another attempt is still out: it may yet answer, unless this
            // failure is one no attempt would mend (a 4xx, a verdict
            // against retrying): that is the call's answer.
            Ended::Ran(verdict) if self.out > 0 && !verdict.may_retry() => {
                self.failed(retry, ended, now, shut)
            }
            _ if self.out > 0 => Action::Await,
            _ => self.failed(retry, ended, now, shut),
        }
    }

    /// [`Attempts::ended`] for an attempt that did not succeed.
    fn failed(
        &mut self,
        retry: &Retry,
        ended: Ended,
        now: impl FnOnce() -> Instant,
        shut: impl FnOnce() -> bool,
    ) -> Action {
        let wants_retry = match ended {
            Ended::Ran(verdict) if verdict.outcome == Outcome::Success => {
                return Action::Answer { decided: None };
            }
            Ended::Ran(verdict) => verdict.may_retry(),
            Ended::TimedOut => true,
            Ended::Refused(_) => false,
        };
        let (decision, dry) = if wants_retry && !self.resend {
            (Decision::Stop(RetryOutcome::NotRetryable), false)
        } else {
            retry.decide(&self.call, ended, now(), shut())
        };
        let observed = self.call.attempts > 1 || !matches!(ended, Ended::Refused(_));
        let decided = |outcome| Decided {
            outcome,
            dry,
            observed,
        };
        match decision {
            Decision::Retry { wait, timeout } => {
                self.next = timeout;
                Action::Sleep {
                    wait,
                    decided: decided(RetryOutcome::Sent),
                }
            }
            Decision::Stop(outcome) => Action::Answer {
                decided: Some(decided(outcome)),
            },
        }
    }

    /// The backoff after [`Action::Sleep`] is over: the next attempt
    /// begins. Answers [`Action::Acquire`].
    #[inline]
    pub fn backoff_elapsed(&mut self) -> Action {
        self.call.attempts += 1;
        Action::Acquire
    }

    /// How long the attempt just sent may run before a hedge is weighed:
    /// `None` if no hedge may follow it (none configured, the request may
    /// not be sent twice, its hedges or attempts spent, or, for a learned
    /// delay, none learned yet: `learned`, the limiter's). A front end
    /// asks after each [`Action::Send`] and, if the attempts sent are all
    /// still out when the delay has passed, calls [`Attempts::hedge`].
    #[inline]
    pub fn hedge_delay(&self, retry: &Retry, learned: Option<Duration>) -> Option<Duration> {
        let hedge = retry.config().hedge.as_ref()?;
        if !self.may_follow(retry) || self.hedges >= hedge.max {
            return None;
        }
        hedge.delay.or(learned).filter(|delay| !delay.is_zero())
    }

    /// The attempts out have run for the hedge delay at `now` without an
    /// answer; `late` says whose lateness that is, as the limiter sees it.
    /// Answers [`Hedging::Acquire`], the hedge withdrawn from the budget
    /// and counted as an attempt; [`Hedging::Later`] while calls answer in
    /// order; or why no hedge is sent.
    pub fn hedge(&mut self, retry: &Retry, now: Instant, late: Late) -> Hedging {
        if !self.may_follow(retry) {
            return Hedging::Not(HedgeOutcome::Exhausted);
        }
        if late == Late::Congested {
            return Hedging::Not(HedgeOutcome::Congested);
        }
        if retry
            .left(&self.call, now)
            .is_some_and(|left| left <= super::LEAST_ATTEMPT)
        {
            return Hedging::Not(HedgeOutcome::Deadline);
        }
        if late == Late::InOrder {
            return Hedging::Later(HedgeOutcome::InOrder);
        }
        match retry.withdraw_hedge(now) {
            Withdrawal::Granted => {
                self.hedges += 1;
                self.call.attempts += 1;
                Hedging::Acquire
            }
            Withdrawal::Refused { .. } => Hedging::Not(HedgeOutcome::BudgetExhausted),
        }
    }

    /// The hedge was admitted at `now` (asked only with a deadline), its
    /// permit giving it `timeout`: as [`Attempts::admitted`].
    #[inline]
    pub fn hedge_admitted(
        &mut self,
        retry: &Retry,
        now: impl FnOnce() -> Instant,
        timeout: Duration,
    ) -> Action {
        self.admitted(retry, now, timeout, false)
    }

    /// The hedge found no free slot (or any other refusal): it is not
    /// sent, and does not wait. Its budget stays spent, and it counts as an
    /// attempt made. Answers what to report.
    pub fn hedge_refused(&mut self) -> HedgeOutcome {
        HedgeOutcome::Refused
    }

    /// Hedges sent so far.
    pub fn hedges(&self) -> u32 {
        self.hedges
    }
}

#[cfg(test)]
mod tests;
