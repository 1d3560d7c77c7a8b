//! An operator's hand on a limiter: overrides that end by themselves.
//!
//! During an incident an operator knows what no policy can: that a partner
//! is down for maintenance, that it has recovered while its breaker still
//! waits out a cooldown, that a limit set too tight has flapped for an
//! hour. [`Overrides::set`](crate::limiter::Overrides::set) replaces
//! the policy's decision — not its learning — for a stated while:
//!
//! | override | what it does |
//! | --- | --- |
//! | [`Override::ForceOpen`] | refuse every call, probes included |
//! | [`Override::ForceClosed`] | hold the policy's breaker closed (a policy with a breaker only) |
//! | [`Override::Cap`] | at most `n` calls in flight, never more than the policy allows |
//! | [`Override::MetricsOnly`] | admit every call; the policy still learns and reports |
//!
//! Every override ends: at most [`MAX_OVERRIDE`] after it is set, so a
//! forgotten one cannot pin a dependency shut or open. It ends at the
//! first admission, finished call or read of the
//! [gate](crate::Limiter::gate) at or after its end,
//! and the policy's own gate is back at once. The policy hears every call
//! it is sent meanwhile, so its state is current when the override ends.
//!
//! The override is applied where the policy's answer is published, under
//! the lock, never on the call path: an admission reads the same one gate
//! word with or without one. [`Observer::override_applied`] and
//! [`Observer::override_ended`](crate::Observer::override_ended) tell of
//! each (the metrics observer as the gauge `rheostat_override{limiter,
//! kind}`, the tracing observer as an event), and the limiter's snapshot
//! shows the override in force.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use rheostat::{algorithms::Aimd, overrides::Override, Limiter, clock::ManualClock, RejectReason};
//!
//! let clock = ManualClock::new();
//! let limiter = Limiter::builder(Aimd::recommended()).clock(clock.clone()).build()?;
//! // The partner announced maintenance: nothing goes for ten minutes.
//! limiter.overrides().set(Override::ForceOpen, Duration::from_secs(600))?;
//! assert_eq!(limiter.try_acquire().unwrap_err().reason(), RejectReason::Open);
//! assert_eq!(limiter.snapshot().overridden.map(|(o, _)| o), Some(Override::ForceOpen));
//! // It ends by itself, and the policy decides again.
//! clock.advance(Duration::from_secs(600));
//! limiter.try_acquire()?.success();
//! assert_eq!(limiter.overrides().in_force(), None);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Observer::override_applied`]: crate::Observer::override_applied

use std::fmt;
use std::time::{Duration, Instant};

use crate::algorithms::{Gate, Published};

/// The longest an override may last: a week. Longer is a configuration
/// change, not an override.
pub const MAX_OVERRIDE: Duration = Duration::from_secs(7 * 24 * 3600);

/// What an override does to a policy's answer.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat::algorithms::{Gate, Published};
/// use rheostat::overrides::Override;
///
/// let now = Instant::now();
/// let until = now + Duration::from_secs(600);
/// let policy = Published::new(Gate::limited(40));
/// // Shut: nothing is sent, and the gate is looked at again when it ends.
/// assert_eq!(Override::ForceOpen.apply(policy, until).gate, Gate::shut(Some(until)));
/// // Capped: never more than 10, never more than the policy allows.
/// assert_eq!(Override::Cap(10).apply(policy, until).gate.limit, 10);
/// assert_eq!(Override::Cap(100).apply(policy, until).gate.limit, 40);
/// // Deciding nothing: every call is admitted.
/// assert_eq!(Override::MetricsOnly.apply(policy, until).gate.max_in_flight(), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Override {
    /// Refuse every call, probes included: a dependency known to be down,
    /// or one an operator takes out of service.
    ForceOpen,
    /// Hold the policy's breaker closed
    /// ([`Algorithm::hold_closed`](crate::Algorithm::hold_closed)): a
    /// partner known to have recovered, whose breaker would otherwise wait
    /// out its cooldown and probes. Only for a policy with a breaker; a
    /// limit beside it (in a stack) still limits.
    ForceClosed,
    /// At most this many calls in flight, and never more than the policy
    /// allows (at least 1; refusing everything is [`Override::ForceOpen`]).
    Cap(u32),
    /// Decide nothing: admit every call, while the policy goes on learning
    /// and reporting what it would have done.
    MetricsOnly,
}

impl Override {
    /// Every kind, for a label set registered whole: `force_open`,
    /// `force_closed`, `cap`, `metrics_only`.
    pub const KINDS: [&'static str; 4] = ["force_open", "force_closed", "cap", "metrics_only"];

    /// Its kind, as metrics, logs and files name it (`"force_open"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Override::ForceOpen => Self::KINDS[0],
            Override::ForceClosed => Self::KINDS[1],
            Override::Cap(_) => Self::KINDS[2],
            Override::MetricsOnly => Self::KINDS[3],
        }
    }

    /// The answer enforced in place of the policy's `published` while the
    /// override lasts, until `until`: the gate as the override says, looked
    /// at again no later than `until` (its `until` and `wake_at` are at
    /// the latest then), the policy's hints and refusers as they were.
    /// [`Override::ForceClosed`] acts on the policy itself, through
    /// [`Algorithm::hold_closed`](crate::Algorithm::hold_closed), and here
    /// only sets when to look again.
    #[must_use]
    pub fn apply(self, published: Published, until: Instant) -> Published {
        let mut out = published;
        out.gate = match self {
            Override::ForceOpen => Gate::shut(Some(until)),
            Override::Cap(limit) => published.gate.meet(Gate {
                until: Some(until),
                ..Gate::limited(limit.max(1))
            }),
            Override::MetricsOnly => Gate {
                until: Some(until),
                ..Gate::unlimited()
            },
            Override::ForceClosed => Gate {
                until: Some(published.gate.until.map_or(until, |t| t.min(until))),
                ..published.gate
            },
        };
        out.wake_at = Some(published.wake_at.map_or(until, |t| t.min(until)));
        out
    }
}

impl fmt::Display for Override {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Override::Cap(limit) => write!(f, "cap {limit}"),
            other => f.write_str(other.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_override_looks_again_when_it_ends_and_no_later() {
        let now = Instant::now();
        let until = now + Duration::from_secs(60);
        let later = Published::new(Gate::shut(Some(now + Duration::from_secs(90))));
        let sooner = Published::new(Gate::shut(Some(now + Duration::from_secs(5))));
        for kind in [
            Override::ForceOpen,
            Override::ForceClosed,
            Override::Cap(3),
            Override::MetricsOnly,
        ] {
            let out = kind.apply(later, until);
            assert_eq!(out.gate.until, Some(until), "{kind}");
            assert_eq!(out.wake_at, Some(until), "{kind}");
            // A policy that wants to be woken sooner still is.
            assert_eq!(kind.apply(sooner, until).wake_at, sooner.wake_at, "{kind}");
        }
    }

    #[test]
    fn a_cap_never_admits_more_than_the_policy_nor_a_forced_open_anything() {
        let until = Instant::now();
        let shut = Published::new(Gate::shut(None));
        assert!(Override::Cap(10).apply(shut, until).gate.is_shut());
        let half = Published::new(Gate {
            admit_probability: 0.5,
            ..Gate::limited(20)
        });
        let capped = Override::Cap(5).apply(half, until).gate;
        assert_eq!((capped.limit, capped.admit_probability), (5, 0.5));
        assert_eq!(Override::Cap(0).apply(half, until).gate.limit, 1);
        let probing = Published::new(Gate {
            probe: true,
            ..Gate::limited(1)
        });
        let open = Override::ForceOpen.apply(probing, until).gate;
        assert!(open.is_shut() && !open.probe);
        // Metrics only admits what the policy would refuse, and no probe.
        let everything = Override::MetricsOnly.apply(shut, until).gate;
        assert!(!everything.is_shut() && !everything.probe);
        // Forced closed leaves the gate to the (held) policy.
        assert_eq!(Override::ForceClosed.apply(half, until).gate.limit, 20);
    }

    #[test]
    fn kinds_are_named_as_metrics_and_files_name_them() {
        assert_eq!(Override::Cap(7).as_str(), "cap");
        assert_eq!(Override::Cap(7).to_string(), "cap 7");
        assert_eq!(Override::MetricsOnly.to_string(), "metrics_only");
        assert_eq!(Override::KINDS.len(), 4);
    }
}
