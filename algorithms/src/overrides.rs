//! An operator's override of a policy's answer, for a while.
//!
//! During an incident an operator knows what no policy can: that a partner
//! is down for maintenance, that it has recovered although its breaker is
//! still open, that a new limit has flapped for an hour. An [`Override`]
//! replaces the policy's decision, not its learning: the policy goes on
//! hearing every call it is sent, and its own gate is back the moment the
//! override ends. Every override ends, at the instant given with it, so a
//! forgotten one cannot pin a dependency shut or open.
//!
//! [`Override::apply`] is the whole rule, a pure function from the policy's
//! [`Published`] answer to the one enforced; the runtime applies it each
//! time it publishes, and re-evaluates the gate when the override ends.

use std::fmt;
use std::time::Instant;

use crate::gate::earlier;
use crate::{Gate, Published};

/// What an override does to a policy's answer.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::overrides::Override;
/// use rheostat_algorithms::{Gate, Published};
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
                until: earlier(published.gate.until, Some(until)),
                ..published.gate
            },
        };
        out.wake_at = earlier(published.wake_at, Some(until));
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
    use std::time::Duration;

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
