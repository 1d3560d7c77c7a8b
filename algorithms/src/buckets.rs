//! A time-bucketed ring of counts that evicts by time.
//!
//! [`BucketRing`] splits a sliding time window into equal buckets and keeps a
//! running total over them, so adding an event and reading the total are
//! both O(1) (moving time forward costs one step per bucket passed, at most
//! the number of buckets). It reads no clock: every method that depends on
//! time takes `now`.
//!
//! # The window rule
//!
//! The ring's *origin* is the first instant it is given. With `width` the
//! window divided by the bucket count:
//!
//! - an instant `t` falls in bucket `floor((t − origin) / width)`; an instant
//!   before the origin falls in bucket 0;
//! - the ring's *current* bucket is the largest bucket of any instant it has
//!   been given so far. Time never runs backwards in the ring: an instant
//!   whose bucket is before the current one is treated as the current one (no
//!   advance, and an event given at that instant is added to the current
//!   bucket);
//! - the window covers the current bucket and the `buckets − 1` before it, so
//!   an event leaves the window exactly when time reaches the start of the
//!   bucket `buckets` places after its own. The window is therefore between
//!   `(buckets − 1) × width` and `buckets × width` long, depending on where
//!   in the current bucket `now` lies.
//!
//! Buckets that have left the window are zeroed lazily, when time is next
//! moved past them; a jump of a whole window or more clears everything at
//! once.
//!
//! # Narrow buckets
//!
//! A ring with many buckets may store each bucket in a narrower form than
//! its running total (a [`Slot`]), such as `u32` counts under a `u64`
//! total. A bucket that cannot hold more keeps what it has and the event is
//! not counted, so the total is always exactly the sum of the buckets.

use std::fmt;
use std::num::{NonZeroU128, NonZeroU64};
use std::time::{Duration, Instant};

use crate::{check, ConfigError};

/// The most buckets a [`BucketRing`] may have.
pub const MAX_BUCKETS: u32 = 10_000;

/// The narrowest bucket a [`BucketRing`] may have.
pub const MIN_BUCKET_WIDTH: Duration = Duration::from_millis(1);

/// Something a [`BucketRing`] can count: a value that can be added to a
/// running total and taken back out of it when its bucket expires.
///
/// `Default` must be the empty tally. Implementations should saturate rather
/// than overflow; totals are exact as long as they stay below saturation.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::buckets::Tally;
///
/// #[derive(Clone, Copy, Debug, Default, PartialEq)]
/// struct Calls { ok: u64, failed: u64 }
///
/// impl Tally for Calls {
///     fn add(&mut self, other: &Self) {
///         self.ok = self.ok.saturating_add(other.ok);
///         self.failed = self.failed.saturating_add(other.failed);
///     }
///     fn sub(&mut self, other: &Self) {
///         self.ok = self.ok.saturating_sub(other.ok);
///         self.failed = self.failed.saturating_sub(other.failed);
///     }
/// }
///
/// let mut total = Calls::default();
/// total.add(&Calls { ok: 3, failed: 1 });
/// total.sub(&Calls { ok: 1, failed: 1 });
/// assert_eq!(total, Calls { ok: 2, failed: 0 });
/// ```
pub trait Tally: Copy + Default {
    /// Add `other` into `self`.
    fn add(&mut self, other: &Self);
    /// Take `other`, previously added, back out of `self`.
    fn sub(&mut self, other: &Self);
}

impl Tally for u64 {
    fn add(&mut self, other: &Self) {
        *self = self.saturating_add(*other);
    }

    fn sub(&mut self, other: &Self) {
        *self = self.saturating_sub(*other);
    }
}

/// How one bucket of a [`BucketRing`] stores its share of the total: the
/// [`Tally`] itself (every `T` is a `Slot<T>`), or a narrower form for rings
/// with many buckets.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::buckets::{BucketRing, Slot};
///
/// /// A bucket that counts up to `u32::MAX` events under a `u64` total.
/// #[derive(Clone, Copy, Debug, Default)]
/// struct Narrow(u32);
///
/// impl Slot<u64> for Narrow {
///     fn add(&mut self, value: &u64) -> u64 {
///         match u32::try_from(*value).ok().and_then(|v| self.0.checked_add(v)) {
///             Some(sum) => {
///                 self.0 = sum;
///                 *value
///             }
///             None => 0, // full: not counted
///         }
///     }
///     fn get(&self) -> u64 {
///         u64::from(self.0)
///     }
/// }
///
/// let mut ring = BucketRing::<u64, Narrow>::new(Duration::from_secs(10), 10)?;
/// let t0 = Instant::now();
/// ring.record(t0, 5);
/// ring.record(t0, u64::MAX); // does not fit: not counted
/// assert_eq!(ring.total(), 5);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
pub trait Slot<T>: Copy + Default {
    /// Add `value` to the bucket and return the part of it the bucket holds
    /// (all of it, unless the bucket is full), which the ring adds to its
    /// total.
    fn add(&mut self, value: &T) -> T;
    /// What the bucket holds.
    fn get(&self) -> T;
}

impl<T: Tally> Slot<T> for T {
    #[inline]
    fn add(&mut self, value: &T) -> T {
        Tally::add(self, value);
        *value
    }

    #[inline]
    fn get(&self) -> T {
        *self
    }
}

/// A sliding time window of `buckets` equal buckets with a running total.
///
/// See the [module documentation](self) for exactly which events the window
/// holds at any instant.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::buckets::BucketRing;
///
/// // Ten seconds in ten one-second buckets.
/// let mut ring = BucketRing::<u64>::new(Duration::from_secs(10), 10)?;
/// let t0 = Instant::now();
/// ring.record(t0, 5);
/// ring.record(t0 + Duration::from_secs(3), 2);
/// assert_eq!(ring.total(), 7);
///
/// // At t0 + 10 s the first bucket has left the window; at t0 + 13 s the other.
/// ring.advance(t0 + Duration::from_secs(10));
/// assert_eq!(ring.total(), 2);
/// ring.advance(t0 + Duration::from_secs(13));
/// assert_eq!(ring.total(), 0);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct BucketRing<T, S = T> {
    slots: Box<[S]>,
    /// The bucket width in nanoseconds (at least 1 ms, at most a year).
    width: NonZeroU64,
    /// `current % buckets`, kept so that recording does not divide.
    current_slot: u32,
    origin: Option<Instant>,
    current: u64,
    total: T,
    /// When the current bucket ends, cached so that the common case — an
    /// event inside the current bucket — costs one comparison, not a
    /// division.
    end: Option<Instant>,
}

impl<T: Tally, S: Slot<T>> BucketRing<T, S> {
    /// An empty ring covering `window` in `buckets` buckets of
    /// `window / buckets` each.
    ///
    /// # Errors
    ///
    /// With field `window` if the window is zero or above
    /// [`MAX_DURATION`](crate::MAX_DURATION); with field `buckets` if there
    /// are no buckets, more than [`MAX_BUCKETS`], or so many that a bucket
    /// would be narrower than [`MIN_BUCKET_WIDTH`]. Use
    /// [`ConfigError::within`] to put the caller's prefix on the field.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat_algorithms::buckets::BucketRing;
    ///
    /// assert!(BucketRing::<u64>::new(Duration::from_secs(120), 120).is_ok());
    /// let err = BucketRing::<u64>::new(Duration::from_millis(10), 100)
    ///     .expect_err("100 buckets in 10 ms are narrower than 1 ms");
    /// assert_eq!(err.field(), "buckets");
    /// ```
    pub fn new(window: Duration, buckets: u32) -> Result<Self, ConfigError> {
        let width = validate(window, buckets)?;
        // Never the fallback below: the width is in [1 ms, a year].
        let width_nanos = u64::try_from(width.as_nanos()).unwrap_or(u64::MAX);
        Ok(BucketRing {
            slots: vec![S::default(); buckets as usize].into_boxed_slice(),
            width: NonZeroU64::new(width_nanos).unwrap_or(NonZeroU64::MIN),
            origin: None,
            current: 0,
            current_slot: 0,
            total: T::default(),
            end: None,
        })
    }

    /// The sum of every bucket in the window, as of the latest instant the
    /// ring was given.
    #[inline]
    pub fn total(&self) -> T {
        self.total
    }

    /// How long one bucket is.
    pub fn width(&self) -> Duration {
        Duration::from_nanos(self.width.get())
    }

    /// How many buckets the window holds.
    pub fn buckets(&self) -> u32 {
        // The slot count came from a `u32` in `new`.
        u32::try_from(self.slots.len()).unwrap_or(u32::MAX)
    }

    /// The instant the ring counts buckets from: the first instant it was
    /// given, or `None` while it has seen none.
    pub fn origin(&self) -> Option<Instant> {
        self.origin
    }

    /// The index of the current bucket (0 for the origin's bucket).
    pub fn current_bucket(&self) -> u64 {
        self.current
    }

    /// The bucket `t` falls in, before the no-going-back rule is applied;
    /// `None` while the ring has no origin.
    pub fn bucket_of(&self, t: Instant) -> Option<u64> {
        let origin = self.origin?;
        let nanos = t.saturating_duration_since(origin).as_nanos() / NonZeroU128::from(self.width);
        Some(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// The instant the current bucket ends and the next begins: the next
    /// instant at which time alone changes the window's contents. `None`
    /// while the ring has no origin, or if that instant cannot be
    /// represented.
    pub fn next_boundary(&self) -> Option<Instant> {
        self.end
    }

    fn compute_end(&self) -> Option<Instant> {
        let origin = self.origin?;
        let next = self.current.checked_add(1)?;
        let nanos = self.width.get().checked_mul(next)?;
        origin.checked_add(Duration::from_nanos(nanos))
    }

    /// Move the window forward to `now`, zeroing the buckets that leave it.
    /// An instant at or before the current bucket changes nothing; the first
    /// instant ever given becomes the origin.
    #[inline]
    pub fn advance(&mut self, now: Instant) {
        if self.end.is_some_and(|end| now < end) {
            return;
        }
        let Some(index) = self.bucket_of(now) else {
            self.origin = Some(now);
            self.current = 0;
            self.current_slot = 0;
            self.end = self.compute_end();
            return;
        };
        if index <= self.current {
            return;
        }
        let len = self.slots.len() as u64;
        if index - self.current >= len {
            self.slots.fill(S::default());
            self.total = T::default();
        } else {
            for i in self.current + 1..=index {
                let slot = &mut self.slots[slot_of(i, len)];
                self.total.sub(&slot.get());
                *slot = S::default();
            }
        }
        self.current = index;
        self.current_slot = u32::try_from(slot_of(index, len)).unwrap_or(0);
        self.end = self.compute_end();
    }

    /// What [`total`](Self::total) would be after moving the window forward
    /// to `now`, without moving it.
    pub fn total_at(&self, now: Instant) -> T {
        if self.end.is_none_or(|end| now < end) {
            return self.total;
        }
        let Some(index) = self.bucket_of(now) else {
            return self.total;
        };
        if index <= self.current {
            return self.total;
        }
        let len = self.slots.len() as u64;
        if index - self.current >= len {
            return T::default();
        }
        let mut total = self.total;
        for i in self.current + 1..=index {
            total.sub(&self.slots[slot_of(i, len)].get());
        }
        total
    }

    /// Move the window forward to `now`, then add `value` to the current
    /// bucket (what of it the bucket can hold; see [`Slot`]).
    #[inline]
    pub fn record(&mut self, now: Instant, value: T) {
        self.advance(now);
        self.add_to_current(value);
    }

    /// Add `value` to the current bucket without moving the window (what of
    /// it the bucket can hold; see [`Slot`]). Does nothing while the ring
    /// has no origin.
    #[inline]
    pub fn add_to_current(&mut self, value: T) {
        if self.origin.is_none() {
            return;
        }
        let held = self.slots[self.current_slot as usize].add(&value);
        self.total.add(&held);
    }

    /// Forget everything, origin included.
    pub fn clear(&mut self) {
        self.slots.fill(S::default());
        self.total = T::default();
        self.origin = None;
        self.current = 0;
        self.current_slot = 0;
        self.end = None;
    }
}

fn slot_of(index: u64, len: u64) -> usize {
    // `index % len` is below `len`, which came from a `usize`.
    usize::try_from(index % len).unwrap_or(0)
}

/// Check a window and a bucket count, returning the bucket width.
pub(crate) fn validate(window: Duration, buckets: u32) -> Result<Duration, ConfigError> {
    check::duration("window", window)?;
    if buckets == 0 || buckets > MAX_BUCKETS {
        return Err(ConfigError::new(
            "buckets",
            buckets,
            format!("a whole number in [1, {MAX_BUCKETS}]"),
        ));
    }
    let width = window / buckets;
    if width < MIN_BUCKET_WIDTH {
        let most = (window.as_nanos() / MIN_BUCKET_WIDTH.as_nanos()).max(1);
        return Err(ConfigError::new(
            "buckets",
            buckets,
            format!("a whole number in [1, {most}], so that each bucket is at least 1 ms"),
        ));
    }
    Ok(width)
}

impl<T: fmt::Debug, S> fmt::Debug for BucketRing<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketRing")
            .field("buckets", &self.slots.len())
            .field("width", &Duration::from_nanos(self.width.get()))
            .field("current", &self.current)
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ring(window_ms: u64, buckets: u32) -> BucketRing<u64> {
        BucketRing::new(ms(window_ms), buckets).expect("valid ring")
    }

    #[test]
    fn an_event_leaves_the_window_when_time_reaches_the_bucket_a_window_later() {
        let t0 = Instant::now();
        let mut r = ring(1_000, 10);
        r.advance(t0);
        r.record(t0 + ms(150), 1);
        r.advance(t0 + ms(999));
        assert_eq!(r.total(), 1);
        // Bucket 1 (100..200 ms) is dropped when bucket 11 (1100 ms) begins.
        r.advance(t0 + ms(1_099));
        assert_eq!(r.total(), 1);
        r.advance(t0 + ms(1_100));
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn the_first_instant_becomes_the_origin() {
        let t0 = Instant::now();
        let mut r = ring(1_000, 10);
        assert_eq!(r.origin(), None);
        assert_eq!(r.next_boundary(), None);
        r.record(t0 + ms(37), 2);
        assert_eq!(r.origin(), Some(t0 + ms(37)));
        assert_eq!(r.next_boundary(), Some(t0 + ms(137)));
        assert_eq!(r.total(), 2);
    }

    #[test]
    fn time_going_backwards_is_no_advance() {
        let t0 = Instant::now();
        let later = t0 + ms(500);
        let mut r = ring(1_000, 10);
        r.record(later, 1);
        r.record(t0, 1);
        assert_eq!(r.current_bucket(), 0);
        r.record(later + ms(300), 1);
        r.record(t0, 1);
        assert_eq!(r.current_bucket(), 3);
        assert_eq!(r.total(), 4);
        // The late event went into bucket 3, so it outlives the first two.
        r.advance(later + ms(1_000));
        assert_eq!(r.total(), 2);
        r.advance(later + ms(1_300));
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn a_jump_of_a_window_or_more_clears_everything() {
        let t0 = Instant::now();
        let mut r = ring(1_000, 10);
        for i in 0..10 {
            r.record(t0 + ms(100 * i), 1);
        }
        assert_eq!(r.total(), 10);
        r.advance(t0 + Duration::from_secs(3600 * 24 * 365));
        assert_eq!(r.total(), 0);
        r.record(t0 + Duration::from_secs(3600 * 24 * 365), 4);
        assert_eq!(r.total(), 4);
    }

    #[test]
    fn saturating_counts_never_panic() {
        let t0 = Instant::now();
        let mut r = ring(1_000, 2);
        r.record(t0, u64::MAX);
        r.record(t0 + ms(500), u64::MAX);
        assert_eq!(r.total(), u64::MAX);
        r.advance(t0 + ms(5_000));
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn a_single_bucket_ring_holds_only_the_current_bucket() {
        let t0 = Instant::now();
        let mut r = ring(1_000, 1);
        r.record(t0, 3);
        r.advance(t0 + ms(999));
        assert_eq!(r.total(), 3);
        r.advance(t0 + ms(1_000));
        assert_eq!(r.total(), 0);
    }

    #[test]
    fn the_width_is_the_window_over_the_buckets() {
        for (window, buckets) in [
            (ms(1_000), 10),
            (Duration::new(29, 999_999_999), 7),
            (Duration::from_nanos(10_000_001), 3),
            (crate::MAX_DURATION, MAX_BUCKETS),
            (crate::MAX_DURATION - Duration::from_nanos(1), MAX_BUCKETS),
        ] {
            let r = BucketRing::<u64>::new(window, buckets).expect("valid");
            assert_eq!(r.width(), window / buckets);
            assert_eq!(r.buckets(), buckets);
        }
    }

    #[test]
    fn invalid_windows_and_bucket_counts_are_named() {
        let cases: Vec<(Duration, u32, &str)> = vec![
            (Duration::ZERO, 10, "window"),
            (Duration::MAX, 10, "window"),
            (ms(1_000), 0, "buckets"),
            (ms(1_000), MAX_BUCKETS + 1, "buckets"),
            (ms(10), 11, "buckets"),
        ];
        for (window, buckets, field) in cases {
            let err = BucketRing::<u64>::new(window, buckets).expect_err(field);
            assert_eq!(err.field(), field, "{window:?} / {buckets}: {err}");
        }
        assert!(BucketRing::<u64>::new(ms(10), 10).is_ok());
    }
}

#[cfg(test)]
mod total_at_tests {
    use super::*;

    #[test]
    fn total_at_agrees_with_advancing_a_copy_at_every_step() {
        let t0 = Instant::now();
        let mut ring = BucketRing::<u64>::new(Duration::from_secs(10), 10).expect("valid");
        let mut t = t0;
        // A deterministic walk with steps inside, at and across bucket edges.
        let steps = [
            0u64, 300, 700, 1_000, 1, 2_999, 9_000, 10_000, 500, 25_000, 4_000,
        ];
        for (i, step) in steps.iter().cycle().take(200).enumerate() {
            t += Duration::from_millis(*step);
            for probe in [0u64, 1, 999, 1_000, 5_000, 9_999, 10_000, 60_000] {
                let at = t + Duration::from_millis(probe);
                let mut copy = ring.clone();
                copy.advance(at);
                assert_eq!(ring.total_at(at), copy.total(), "step {i}, probe {probe}");
            }
            ring.record(t, 1 + i as u64 % 3);
        }
    }
}
