//! What a refused or failed call reports.

use std::fmt;
use std::time::Duration;

use crate::algorithms::ConfigError;
use crate::priority::Class;

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// As many calls are in flight as the gate allows.
    LimitReached,
    /// The gate admits only a fraction of calls, and this one was not among
    /// them (client-side throttling, or Vegas or Gradient shedding).
    Throttled,
    /// A breaker that has just closed admits a growing fraction of calls
    /// while it ramps back to full traffic, and this one was not among them.
    Ramping,
    /// The gate is shut (an open breaker), or a half-open breaker has no
    /// probe to spare.
    Open,
    /// The wait queue was full.
    QueueFull,
    /// No slot came free within the allowed wait.
    TimedOut,
}

impl RejectReason {
    /// A stable lower-case name for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::LimitReached => "limit_reached",
            RejectReason::Throttled => "throttled",
            RejectReason::Ramping => "ramping",
            RejectReason::Open => "open",
            RejectReason::QueueFull => "queue_full",
            RejectReason::TimedOut => "timed_out",
        }
    }
}

/// A call that was refused before it reached the dependency.
///
/// It says why, which policy refused, and, where the policy knows, how long
/// until a retry can succeed (for a `Retry-After` header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    reason: RejectReason,
    policy: &'static str,
    retry_after: Option<Duration>,
    class: Option<Class>,
}

impl Rejection {
    pub(crate) fn new(
        reason: RejectReason,
        policy: &'static str,
        retry_after: Option<Duration>,
    ) -> Self {
        Rejection {
            reason,
            policy,
            retry_after,
            class: None,
        }
    }

    /// The same rejection, of a call of `class`.
    pub(crate) fn with_class(mut self, class: Class) -> Self {
        self.class = Some(class);
        self
    }

    /// The class of the call refused, on a limiter with
    /// [priorities](crate::priority).
    pub fn class(&self) -> Option<Class> {
        self.class
    }

    /// Why the call was refused.
    pub fn reason(&self) -> RejectReason {
        self.reason
    }

    /// The name of the policy (or stack member) that refused it.
    pub fn policy(&self) -> &'static str {
        self.policy
    }

    /// How long until a retry can succeed, where known: the time left until
    /// an open breaker lets a probe through.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.reason {
            RejectReason::LimitReached => "concurrency limit reached",
            RejectReason::Throttled => "throttled",
            RejectReason::Ramping => "ramping up after the circuit closed",
            RejectReason::Open => "circuit open",
            RejectReason::QueueFull => "wait queue full",
            RejectReason::TimedOut => "timed out waiting for a slot",
        };
        write!(f, "call rejected by `{}`: {what}", self.policy)?;
        if let Some(after) = self.retry_after {
            write!(f, ", retry after {after:?}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejection {}

/// Why a keyed set of limiters could not hand out one for a key
/// ([`KeyedLimiters::get`](crate::keyed::KeyedLimiters::get)). Its
/// `Debug` is its message, as [`ConfigError`]'s is.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyedError {
    /// The key is new, and every one of the `max_keys` limiters is in use or
    /// must be kept.
    Full {
        /// The cap on keys.
        max_keys: usize,
    },
    /// The limiter could not be built: the keyed set's factory refused the
    /// key, or an option of the builder it made is out of range.
    Config(ConfigError),
}

impl fmt::Display for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyedError::Full { max_keys } => write!(
                f,
                "no room for a new key: all {max_keys} limiters are in use or kept"
            ),
            KeyedError::Config(e) => e.fmt(f),
        }
    }
}

/// The message, as [`Display`](fmt::Display) writes it.
impl fmt::Debug for KeyedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A configuration error's message is this error's: it has no source of its
/// own to add.
impl std::error::Error for KeyedError {}

impl From<ConfigError> for KeyedError {
    fn from(e: ConfigError) -> Self {
        KeyedError::Config(e)
    }
}

/// Why a call run through [`Limiter::call`](crate::Limiter::call) or
/// [`Permit::run`](crate::Permit::run) did not return a value.
#[derive(Debug)]
#[non_exhaustive]
pub enum CallError<E> {
    /// The limiter refused the call; it was never started.
    Rejected(Rejection),
    /// The attempt did not finish within its timeout; it was recorded as
    /// [`Outcome::Overload`](crate::Outcome::Overload).
    TimedOut(Duration),
    /// The call finished with an error (recorded as the classifier said).
    Failed(E),
    /// The timeout given was zero or longer than a year.
    InvalidTimeout(ConfigError),
    /// No limiter could be had for the request's key (the tower feature's
    /// `KeyedLayer`): the call was never started.
    NoLimiter(KeyedError),
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Rejected(r) => r.fmt(f),
            CallError::TimedOut(after) => write!(f, "call timed out after {after:?}"),
            CallError::Failed(e) => e.fmt(f),
            CallError::InvalidTimeout(e) => e.fmt(f),
            CallError::NoLimiter(e) => write!(f, "no limiter for the request: {e}"),
        }
    }
}

/// Transparent: the message is the inner error's (or says what happened),
/// so the source is the inner error's own source, never the inner error
/// again (a reporter walking the chain would print it twice).
impl<E: std::error::Error + 'static> std::error::Error for CallError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Rejected(r) => r.source(),
            CallError::Failed(e) => e.source(),
            CallError::InvalidTimeout(e) => e.source(),
            CallError::NoLimiter(e) => e.source(),
            CallError::TimedOut(_) => None,
        }
    }
}
