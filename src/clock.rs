//! Where the runtime reads time.

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

/// The operating system's monotonic clock ([`Instant::now`]). The default.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that moves only when told to, for tests and simulation.
///
/// Clones share one time, so a test can keep a handle while the limiter owns
/// another.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::{Clock, ManualClock};
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
