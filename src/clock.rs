//! Where the runtime reads time: the [`Clock`] a limiter is built with
//! ([`Builder::clock`](crate::Builder::clock)), the [`DefaultClock`] when
//! none is given.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A source of monotonic time.
///
/// A [`Limiter`](crate::Limiter) reads the time only through its clock: to
/// stamp a call when it is admitted, to measure it when it finishes, and to
/// know when a gate expires. Replace the clock and everything the limiter does
/// runs in that clock's time.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The operating system's monotonic clock ([`Instant::now`]); the default
/// without the `quanta` feature.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock read from the CPU's time-stamp counter through
/// [`quanta`](https://docs.rs/quanta): the default clock of a limiter built
/// with the `quanta` feature (on by default).
///
/// `quanta` uses the counter only where it is sound — an invariant TSC,
/// calibrated against the OS's monotonic clock when the first clock is made —
/// and the OS's monotonic clock everywhere else. A read costs a few
/// nanoseconds where [`Instant::now`] costs 20–45 on a virtual machine, and
/// keeps nanosecond resolution, so latency samples lose nothing.
///
/// Instants are [`std::time::Instant`]s: the instant the process first read
/// the clock plus the counter's time since, the same for every
/// `QuantaClock`. They never go backwards. Measured by the
/// counter, a long span may differ from the OS clock's by the calibration's
/// error (parts per million); the limiter compares only instants from one
/// clock, and sleeps for durations, so nothing mixes the two.
///
/// # Examples
///
/// ```
/// use rheostat::clock::{Clock, QuantaClock};
///
/// let clock = QuantaClock::new();
/// let a = clock.now();
/// let b = clock.now();
/// assert!(b >= a);
/// ```
#[cfg(feature = "quanta")]
#[cfg_attr(docsrs, doc(cfg(feature = "quanta")))]
#[derive(Clone, Copy)]
pub struct QuantaClock {
    origin: &'static Origin,
}

/// The process's calibrated counter and the instant it was first read, on
/// both clocks: every [`QuantaClock`] counts from it, so all of them agree,
/// and each is one pointer.
#[cfg(feature = "quanta")]
struct Origin {
    clock: quanta::Clock,
    base: Instant,
    base_ticks: quanta::Instant,
}

#[cfg(feature = "quanta")]
static ORIGIN: std::sync::OnceLock<Origin> = std::sync::OnceLock::new();

#[cfg(feature = "quanta")]
impl QuantaClock {
    /// The clock (the first one made in the process calibrates the counter,
    /// which takes a few milliseconds once).
    pub fn new() -> Self {
        let origin = ORIGIN.get_or_init(|| {
            let clock = quanta::Clock::new();
            let base_ticks = clock.now();
            Origin {
                clock,
                base: Instant::now(),
                base_ticks,
            }
        });
        QuantaClock { origin }
    }
}

#[cfg(feature = "quanta")]
impl Default for QuantaClock {
    fn default() -> Self {
        QuantaClock::new()
    }
}

#[cfg(feature = "quanta")]
impl fmt::Debug for QuantaClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuantaClock")
            .field("since", &self.origin.base)
            .finish()
    }
}

#[cfg(feature = "quanta")]
impl Clock for QuantaClock {
    #[inline]
    fn now(&self) -> Instant {
        let Origin {
            clock,
            base,
            base_ticks,
        } = self.origin;
        let elapsed = clock.now().saturating_duration_since(*base_ticks);
        // Past what an `Instant` can hold (centuries): stand still.
        base.checked_add(elapsed).unwrap_or(*base)
    }
}

/// The clock a limiter uses unless told otherwise: [`QuantaClock`] with the
/// `quanta` feature (on by default), [`SystemClock`] without it.
#[cfg(feature = "quanta")]
pub type DefaultClock = QuantaClock;

/// The clock a limiter uses unless told otherwise: [`QuantaClock`] with the
/// `quanta` feature (on by default), [`SystemClock`] without it.
#[cfg(not(feature = "quanta"))]
pub type DefaultClock = SystemClock;

/// A clock that moves only when told to, for tests and simulation.
///
/// Clones share one time, so a test can keep a handle while the limiter owns
/// another.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::clock::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// let t0 = clock.now();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now() - t0, Duration::from_millis(250));
/// ```
#[derive(Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

struct ManualInner {
    base: Instant,
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at an arbitrary fixed instant.
    pub fn new() -> Self {
        ManualClock {
            inner: Arc::new(ManualInner {
                base: Instant::now(),
                nanos: AtomicU64::new(0),
            }),
        }
    }

    /// Move the clock forward by `by`. Saturates after about 584 years
    /// rather than overflowing.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .inner
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Set the time elapsed since the clock was made. The clock may move
    /// backwards this way; the limiter treats a backwards step as no time
    /// passing.
    pub fn set_elapsed(&self, elapsed: Duration) {
        let n = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.inner.nanos.store(n, Ordering::SeqCst);
    }

    /// The time elapsed since the clock was made.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::SeqCst))
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("elapsed", &self.elapsed())
            .finish()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let elapsed = self.elapsed();
        self.inner
            .base
            .checked_add(elapsed)
            .unwrap_or(self.inner.base)
    }
}

/// Tokio's clock ([`tokio::time::Instant::now`]), which stands still and
/// jumps under `tokio::time::pause()`, so a limiter using it runs in a
/// paused-time test's virtual time.
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_saturates_instead_of_overflowing() {
        let clock = ManualClock::new();
        clock.advance(Duration::MAX);
        clock.advance(Duration::MAX);
        assert_eq!(clock.elapsed(), Duration::from_nanos(u64::MAX));
        let _ = clock.now();
    }

    #[test]
    fn clones_of_a_manual_clock_share_one_time() {
        let a = ManualClock::new();
        let b = a.clone();
        a.advance(Duration::from_secs(3));
        assert_eq!(b.elapsed(), Duration::from_secs(3));
    }
}
