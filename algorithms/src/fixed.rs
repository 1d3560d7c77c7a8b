//! A fixed concurrency limit: a bulkhead.

use std::time::Instant;

use crate::{check, Algorithm, ConfigError, Gate, Hints, Published, Sample};

/// A bounded concurrency limit that never moves by itself: at most `limit`
/// calls to one dependency in flight, so a slow dependency can hold that many
/// of the caller's workers and no more.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Algorithm, Fixed};
///
/// let mut bulkhead = Fixed::new(20)?;
/// assert_eq!(bulkhead.publish().gate.limit, 20);
/// bulkhead.set_limit(5)?;
/// assert_eq!(bulkhead.publish().gate.limit, 5);
/// assert!(bulkhead.set_limit(0).is_err());
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fixed {
    limit: u32,
}

impl Fixed {
    /// A bulkhead of `limit` calls.
    ///
    /// # Errors
    ///
    /// If `limit` is 0 or above [`MAX_LIMIT`](crate::MAX_LIMIT).
    pub fn new(limit: u32) -> Result<Self, ConfigError> {
        Ok(Fixed {
            limit: check::limit("fixed.limit", limit, 1)?,
        })
    }

    /// The limit.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Change the limit. Calls already in flight above a lowered limit finish
    /// normally; new calls wait until in-flight falls under it.
    ///
    /// # Errors
    ///
    /// If `limit` is 0 or above [`MAX_LIMIT`](crate::MAX_LIMIT); the limit is
    /// left as it was.
    pub fn set_limit(&mut self, limit: u32) -> Result<(), ConfigError> {
        self.limit = check::limit("fixed.limit", limit, 1)?;
        Ok(())
    }
}

impl Algorithm for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    /// The limit, learning nothing from calls.
    #[inline]
    fn publish(&self) -> Published {
        Published::new(Gate::limited(self.limit)).with_hints(Hints::IGNORES_CALLS)
    }

    fn on_sample(&mut self, _now: Instant, _sample: &Sample) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zero_or_oversized_limit_is_refused_by_name() {
        for bad in [0, crate::MAX_LIMIT + 1, u32::MAX] {
            let e = Fixed::new(bad).expect_err("refused");
            assert_eq!(e.field(), "fixed.limit");
            assert!(e.allowed().contains("[1, "), "{e}");
        }
        let mut f = Fixed::new(4).expect("valid");
        assert!(f.set_limit(0).is_err());
        assert_eq!(f.limit(), 4);
    }
}
