//! The published gate: what the hot path reads without a lock.

use crate::algorithms::{Gate, MAX_LIMIT};
use crate::sync::{AtomicU64, Ordering};

/// `admit` value meaning "admit every call under the limit".
pub(crate) const ALWAYS: u32 = u32::MAX;

/// A gate packed into one word so that limit, probability and the probe flag
/// are always read together: bits 0–31 the admit threshold, bit 32 the probe
/// flag, bits 33–63 the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed(u64);

impl Packed {
    pub(crate) fn new(gate: &Gate) -> Packed {
        let gate = gate.sanitized();
        let admit = if gate.admit_probability >= 1.0 {
            ALWAYS
        } else {
            // In [0, 1): the product is below 2^32, so the cast is exact
            // after flooring.
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "probability is in [0, 1), so the product fits in u32"
            )]
            let threshold = (gate.admit_probability * 4_294_967_296.0) as u32;
            threshold.min(ALWAYS - 1)
        };
        let limit = u64::from(gate.limit.min(MAX_LIMIT));
        Packed(u64::from(admit) | (u64::from(gate.probe) << 32) | (limit << 33))
    }

    pub(crate) fn limit(self) -> u32 {
        #[allow(clippy::cast_possible_truncation, reason = "31 bits after the shift")]
        let limit = (self.0 >> 33) as u32;
        limit
    }

    pub(crate) fn probe(self) -> bool {
        self.0 & (1 << 32) != 0
    }

    pub(crate) fn admit(self) -> u32 {
        #[allow(clippy::cast_possible_truncation, reason = "low 32 bits by design")]
        let admit = self.0 as u32;
        admit
    }

    pub(crate) fn admit_probability(self) -> f64 {
        if self.admit() == ALWAYS {
            1.0
        } else {
            f64::from(self.admit()) / 4_294_967_296.0
        }
    }
}

/// The packed gate in an atomic.
#[derive(Debug)]
pub(crate) struct AtomicGate(AtomicU64);

impl AtomicGate {
    pub(crate) fn new(gate: &Gate) -> Self {
        AtomicGate(AtomicU64::new(Packed::new(gate).0))
    }

    #[inline]
    pub(crate) fn load(&self) -> Packed {
        Packed(self.0.load(Ordering::SeqCst))
    }

    /// Store only if changed, so an unchanged gate does not bounce the cache
    /// line between cores. Says whether it changed.
    pub(crate) fn store(&self, packed: Packed) -> bool {
        if self.0.load(Ordering::Relaxed) == packed.0 {
            return false;
        }
        self.0.store(packed.0, Ordering::SeqCst);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_round_trips_limit_probe_and_probability() {
        for limit in [0, 1, 7, 1000, MAX_LIMIT] {
            for probe in [false, true] {
                for p in [0.0, 0.25, 0.5, 0.999, 1.0] {
                    let g = Gate {
                        limit,
                        admit_probability: p,
                        probe,
                        until: None,
                    };
                    let packed = Packed::new(&g);
                    assert_eq!(packed.limit(), limit);
                    assert_eq!(packed.probe(), probe);
                    assert!((packed.admit_probability() - p).abs() < 1e-9);
                }
            }
        }
    }

    #[test]
    fn a_nan_probability_packs_as_shut() {
        let g = Gate {
            admit_probability: f64::NAN,
            ..Gate::limited(5)
        };
        assert_eq!(Packed::new(&g).admit(), 0);
    }
}
