//! The rule a runtime enforces on every call, and a view of a policy.

use std::fmt;
use std::time::Instant;

use crate::MAX_LIMIT;

/// What a policy publishes: the rule the runtime enforces on every call.
///
/// - a closed breaker or a fixed limit: `(n, 1.0)`;
/// - an open breaker: `(0, _)` until its cooldown ends;
/// - a half-open breaker: `(probes, 1.0, probe)`;
/// - an adaptive limit moves `limit`; a throttle moves `admit_probability`.
///
/// Two gates combine with [`Gate::meet`]. Its `Debug` shows a gate that
/// sets no limit as `limit: unlimited`, not as [`MAX_LIMIT`]'s value.
#[derive(Clone, Copy, PartialEq)]
pub struct Gate {
    /// How many calls may be in flight at once; 0 shuts the gate. At most
    /// [`MAX_LIMIT`], which means no limit ([`Gate::max_in_flight`] reads
    /// it as `None`).
    pub limit: u32,
    /// The chance, in `[0, 1]`, that a call under the limit is let through.
    pub admit_probability: f64,
    /// Whether a call admitted now is a trial call. While set, the runtime
    /// asks the policy about every admission ([`Algorithm::on_admit`](crate::Algorithm::on_admit)).
    pub probe: bool,
    /// The instant at which the gate must be re-evaluated even with no traffic
    /// (open → half-open). `None` if it never expires by itself.
    pub until: Option<Instant>,
}

impl Gate {
    /// A gate that admits up to `limit` calls in flight, all of them.
    #[inline]
    pub fn limited(limit: u32) -> Self {
        Gate {
            limit: limit.min(MAX_LIMIT),
            admit_probability: 1.0,
            probe: false,
            until: None,
        }
    }

    /// The gate of an adaptive limit kept as a float: floored, clamped to
    /// `[min, max]` (NaN becomes `min`).
    #[inline]
    pub(crate) fn from_raw_limit(raw: f64, min: u32, max: u32) -> Self {
        // `as` saturates and maps NaN to 0; truncation is the floor for a
        // positive limit, without a libm call.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "saturating float-to-int conversion, then clamped"
        )]
        let limit = raw as u32;
        Gate::limited(limit.clamp(min, max))
    }

    /// A gate that admits everything.
    #[inline]
    pub fn unlimited() -> Self {
        Gate::limited(MAX_LIMIT)
    }

    /// How many calls may be in flight at once, or `None` if the gate sets
    /// no limit (`limit` is [`MAX_LIMIT`]).
    ///
    /// ```
    /// use rheostat_algorithms::Gate;
    ///
    /// assert_eq!(Gate::limited(8).max_in_flight(), Some(8));
    /// assert_eq!(Gate::unlimited().max_in_flight(), None);
    /// ```
    pub fn max_in_flight(&self) -> Option<u32> {
        (self.limit < MAX_LIMIT).then_some(self.limit)
    }

    /// A gate that admits nothing until `until` (or until told otherwise).
    pub fn shut(until: Option<Instant>) -> Self {
        Gate {
            limit: 0,
            admit_probability: 1.0,
            probe: false,
            until,
        }
    }

    /// Whether the gate admits nothing at all.
    pub fn is_shut(&self) -> bool {
        self.limit == 0 || self.admit_probability <= 0.0
    }

    /// The gate that both `self` and `other` allow: the smaller limit, the
    /// product of the probabilities, a probe if either is, and the earlier
    /// expiry.
    #[must_use]
    pub fn meet(self, other: Gate) -> Gate {
        Gate {
            limit: self.limit.min(other.limit),
            admit_probability: sanitize_probability(self.admit_probability)
                * sanitize_probability(other.admit_probability),
            probe: self.probe || other.probe,
            until: earlier(self.until, other.until),
        }
    }

    /// The same gate with its limit clamped to [`MAX_LIMIT`] and its
    /// probability clamped to `[0, 1]` (NaN becomes 0, so a broken policy
    /// fails closed).
    #[must_use]
    #[inline]
    pub fn sanitized(self) -> Gate {
        Gate {
            limit: self.limit.min(MAX_LIMIT),
            admit_probability: sanitize_probability(self.admit_probability),
            ..self
        }
    }
}

impl fmt::Debug for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut gate = f.debug_struct("Gate");
        match self.max_in_flight() {
            Some(limit) => gate.field("limit", &limit),
            None => gate.field("limit", &format_args!("unlimited")),
        };
        gate.field("admit_probability", &self.admit_probability)
            .field("probe", &self.probe)
            .field("until", &self.until)
            .finish()
    }
}

/// The earlier of two instants, either of which may be absent.
#[inline]
pub(crate) fn earlier(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

fn sanitize_probability(p: f64) -> f64 {
    if p.is_nan() {
        0.0
    } else {
        p.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn meet_takes_the_smaller_limit_and_the_product_of_probabilities() {
        let t0 = Instant::now();
        let a = Gate {
            limit: 10,
            admit_probability: 0.5,
            probe: false,
            until: Some(t0 + Duration::from_secs(5)),
        };
        let b = Gate {
            limit: 4,
            admit_probability: 0.5,
            probe: true,
            until: Some(t0 + Duration::from_secs(2)),
        };
        let m = a.meet(b);
        assert_eq!(m.limit, 4);
        assert_eq!(m.admit_probability, 0.25);
        assert!(m.probe);
        assert_eq!(m.until, Some(t0 + Duration::from_secs(2)));
        assert_eq!(Gate::unlimited().meet(Gate::limited(3)).until, None);
    }

    #[test]
    fn a_nan_probability_is_sanitized_to_shut() {
        let g = Gate {
            admit_probability: f64::NAN,
            ..Gate::unlimited()
        }
        .sanitized();
        assert_eq!(g.admit_probability, 0.0);
        assert!(g.is_shut());
    }
}
