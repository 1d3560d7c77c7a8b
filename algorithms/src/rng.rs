//! A small seeded random generator shared by the policies.

/// A small seeded generator (SplitMix64) for the policies' jitter and
/// sampling: fast, reproducible, and not for anything secret.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A uniform draw in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        #[allow(
            clippy::cast_precision_loss,
            reason = "a 53-bit integer is exact in an f64"
        )]
        let mantissa = (self.next_u64() >> 11) as f64;
        mantissa * (1.0 / (1u64 << 53) as f64)
    }

    /// A draw in `[0, n)`, `0` when `n` is 0 (slightly biased for huge `n`,
    /// which is harmless here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_draws_in_range() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..1_000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
        }
        assert_eq!(a.below(0), 0);
        assert!(a.below(7) < 7);
    }
}
