//! The retry budget's account: calls deposit, retries withdraw, over a
//! sliding window of ten buckets.
//!
//! Invariant: a retry is granted at time `t` only if, counting it, the
//! retries granted in the window's buckets (those that began less than
//! `ttl` before the bucket holding `t`) number at most
//! `ratio × calls counted in those buckets + min_per_second × ttl`. So over
//! any stretch of `0.9 × ttl`, retries never exceed `ratio` of the calls
//! made in the `ttl` before its end plus the reserve.
//!
//! Mechanism: a deposit, made by every call, is one atomic add to the
//! bucket of its time (the bucket's tag, the index of the interval it
//! counts, shares the word with its count, so a stale bucket is reset by
//! the compare-and-swap that counts the first call of the new interval).
//! A withdrawal, made only by a failed attempt that would be retried, reads
//! the deposits and, under a lock, its own ring of withdrawals: two
//! withdrawals never both take the last retry. A deposit lost to a race
//! (a thread delayed across a whole interval) only makes the budget
//! smaller.

use std::time::{Duration, Instant};

use super::config::Budget;
use crate::sync::{AtomicBool, AtomicU64, Mutex, Ordering, PoisonError};

/// Buckets in the window.
pub(crate) const BUCKETS: usize = 10;

/// What a withdrawal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Withdrawal {
    /// A retry may go; it is counted.
    Granted,
    /// None left; `first` if the budget had a retry to give at the last
    /// withdrawal (it has just run dry).
    Refused { first: bool },
}

pub(crate) struct Account {
    origin: Instant,
    /// Nanoseconds per bucket.
    width: u64,
    /// `2^64 / width`, rounded up: an interval's index is a multiplication
    /// and a shift, not a division, on the path every call takes.
    inverse: u128,
    ratio: f64,
    /// `min_per_second × ttl`.
    reserve: f64,
    /// Per bucket: its interval's index (high 32 bits, wrapping) and the
    /// calls counted in it (low 32 bits).
    deposits: [AtomicU64; BUCKETS],
    /// Per bucket: its interval's index and the retries granted in it.
    withdrawals: Mutex<[(u32, u64); BUCKETS]>,
    /// Whether the last withdrawal was refused.
    dry: AtomicBool,
}

const COUNT: u64 = 0xFFFF_FFFF;

impl Account {
    /// Whether the last withdrawal was refused: retries are using all the
    /// budget has.
    pub(crate) fn is_dry(&self) -> bool {
        self.dry.load(Ordering::Relaxed)
    }

    pub(crate) fn new(budget: &Budget, origin: Instant) -> Self {
        let ttl = u64::try_from(budget.ttl.as_nanos()).unwrap_or(u64::MAX);
        let width = (ttl / BUCKETS as u64).max(1);
        Account {
            origin,
            width,
            inverse: (1u128 << 64).div_ceil(u128::from(width)),
            ratio: budget.ratio,
            reserve: budget.min_per_second * budget.ttl.as_secs_f64(),
            deposits: std::array::from_fn(|_| AtomicU64::new(0)),
            // Index u32::MAX is never current for years after the origin.
            withdrawals: Mutex::new([(u32::MAX, 0); BUCKETS]),
            dry: AtomicBool::new(false),
        }
    }

    /// The index of the interval holding `now` (a clock that went back
    /// before the origin reads as the first). With the inverse rounded up,
    /// `k × width` nanoseconds is exactly the start of interval `k` for
    /// every `k` within centuries; an interval may begin under a nanosecond
    /// early, never late.
    #[inline]
    fn interval(&self, now: Instant) -> u32 {
        let since = now.saturating_duration_since(self.origin);
        let nanos = u128::from(since.as_secs()) * 1_000_000_000 + u128::from(since.subsec_nanos());
        #[allow(clippy::cast_possible_truncation, reason = "an index that wraps")]
        let index = ((nanos * self.inverse) >> 64) as u32;
        index
    }

    /// Whether interval `tag` is within the window of interval `now`.
    #[inline]
    fn in_window(tag: u32, now: u32) -> bool {
        (now.wrapping_sub(tag) as usize) < BUCKETS
    }

    /// Count one call at `now`.
    #[inline]
    pub(crate) fn deposit(&self, now: Instant) {
        let index = self.interval(now);
        let slot = &self.deposits[index as usize % BUCKETS];
        let mut word = slot.load(Ordering::Relaxed);
        loop {
            #[allow(clippy::cast_possible_truncation, reason = "the tag half")]
            let tag = (word >> 32) as u32;
            if tag == index {
                if word & COUNT != COUNT {
                    slot.fetch_add(1, Ordering::Relaxed);
                }
                return;
            }
            if index.wrapping_sub(tag) >= 1 << 31 {
                // The bucket already counts a later interval (another
                // thread's clock ran ahead): drop this call, which only
                // makes the budget smaller.
                return;
            }
            match slot.compare_exchange_weak(
                word,
                (u64::from(index) << 32) | 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => word = current,
            }
        }
    }

    /// Calls counted in the window of interval `index`.
    fn deposited(&self, index: u32) -> u64 {
        self.deposits
            .iter()
            .map(|slot| slot.load(Ordering::Relaxed))
            .filter(|word| {
                #[allow(clippy::cast_possible_truncation, reason = "the tag half")]
                let tag = (word >> 32) as u32;
                Self::in_window(tag, index)
            })
            .map(|word| word & COUNT)
            .sum()
    }

    /// Take one retry at `now`, if the window allows it.
    pub(crate) fn withdraw(&self, now: Instant) -> Withdrawal {
        self.withdraw_leaving(now, 0)
    }

    /// Take one attempt at `now` if the window allows it and `keep` more
    /// after it; a refusal for want of what is kept does not make the
    /// budget dry (it could still grant a retry).
    pub(crate) fn withdraw_leaving(&self, now: Instant, keep: u64) -> Withdrawal {
        let index = self.interval(now);
        let mut ring = self
            .withdrawals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let deposited = self.deposited(index);
        let withdrawn = Self::withdrawn(&ring, index);
        #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
        let allowed = self.ratio * deposited as f64 + self.reserve;
        #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
        let granted = (withdrawn + 1 + keep) as f64 <= allowed;
        if granted {
            let bucket = &mut ring[index as usize % BUCKETS];
            if bucket.0 != index {
                *bucket = (index, 0);
            }
            bucket.1 += 1;
            self.dry.store(false, Ordering::Relaxed);
            Withdrawal::Granted
        } else if (withdrawn + 1) as f64 <= allowed {
            Withdrawal::Refused { first: false }
        } else {
            Withdrawal::Refused {
                first: !self.dry.swap(true, Ordering::Relaxed),
            }
        }
    }

    /// Retries granted in the window of interval `index`.
    fn withdrawn(ring: &[(u32, u64); BUCKETS], index: u32) -> u64 {
        ring.iter()
            .filter(|(tag, _)| Self::in_window(*tag, index))
            .map(|(_, n)| n)
            .sum()
    }

    /// The retries the window would grant at `now` (for snapshots and tests).
    pub(crate) fn balance(&self, now: Instant) -> f64 {
        let index = self.interval(now);
        let ring = self
            .withdrawals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let withdrawn = Self::withdrawn(&ring, index);
        #[allow(clippy::cast_precision_loss, reason = "counts far below 2^53")]
        let balance = self.ratio * self.deposited(index) as f64 + self.reserve - withdrawn as f64;
        balance.max(0.0)
    }

    /// How long one bucket lasts.
    pub(crate) fn bucket_width(&self) -> Duration {
        Duration::from_nanos(self.width)
    }
}
