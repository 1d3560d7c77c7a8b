//! The recent latency, its noise and the recent drop rate, blended from
//! closed windows: see [`Recent`].

use super::window::WindowSummary;

/// The shortest latency [`Recent`] works with, in seconds (1 ns): a zero
/// latency is read as this, so ratios stay finite.
const MIN_LATENCY: f64 = 1e-9;

/// About how many calls [`Recent`] pools the spread of single latencies
/// over.
const NOISE_SPAN: f64 = 100.0;

/// About how many calls [`Recent`] measures the drop rate over.
const LOSS_SPAN: f64 = 50.0;

/// A window whose aggregate is more than this many standard errors from the
/// recent latency starts it afresh: the level has changed.
const CHANGE: f64 = 3.0;

/// What a latency-driven policy reads from its closed windows: the recent
/// latency, how much of it is noise, and the recent drop rate.
///
/// - **latency**: each window with a success moves the estimate toward its
///   aggregate by `min(1, successes / min_samples)`. A window with enough
///   calls replaces it; one that timed out with fewer counts in proportion,
///   so at low traffic the estimate averages about the last
///   `2 · min_samples` calls instead of swinging on each one. A window more
///   than [`CHANGE`] standard errors (its own and the estimate's) away
///   replaces it too: the level has changed, and a quiet caller should not
///   take twenty calls to notice that a dependency answering in 9 s answers
///   in 0.5 s again. A lone slow call seldom qualifies, its own error being
///   as large as it is.
/// - **noise**: the spread of single latencies, as a relative variance
///   (squared coefficient of variation), pooled over about the last
///   [`NOISE_SPAN`] calls: from within windows of two or more successes, and
///   from successive lone successes otherwise (half their squared relative
///   difference, which a step in the level moves once, not for good). From
///   it follows the relative standard error of the estimate, tracked through
///   the smoothing exactly as for independent windows. For a percentile
///   aggregation this is the error of the average: it understates the noise
///   of a tail percentile.
/// - **loss**: the fraction of calls that were drops, averaged over about the
///   last [`LOSS_SPAN`] calls (a window weighs `min(1, calls / LOSS_SPAN)`).
#[derive(Clone, Debug)]
pub(crate) struct Recent {
    full: f64,
    latency: Option<f64>,
    /// The squared relative standard error of `latency`.
    latency_var: f64,
    /// The pooled squared coefficient of variation of one latency.
    cv2: Option<f64>,
    last_lone: Option<f64>,
    loss: f64,
}

impl Recent {
    /// Nothing seen yet, for windows that need `min_samples` calls.
    pub(crate) fn new(min_samples: u32) -> Self {
        Recent {
            full: f64::from(min_samples.max(1)),
            latency: None,
            latency_var: 0.0,
            cv2: None,
            last_lone: None,
            loss: 0.0,
        }
    }

    /// Fold in a closed window.
    pub(crate) fn update(&mut self, summary: &WindowSummary) {
        if summary.samples > 0 {
            let calls = f64::from(summary.samples);
            let a = (calls / LOSS_SPAN).min(1.0);
            self.loss += a * (f64::from(summary.drops) / calls - self.loss);
        }
        let Some(latency) = summary.latency else {
            return;
        };
        let x = latency.as_secs_f64().max(MIN_LATENCY);
        let n = f64::from(summary.successes().max(1));
        self.observe_spread(summary, n);
        let cv2 = self.cv2.unwrap_or(0.0);
        let (latency, var) = match self.latency {
            None => (x, cv2 / n),
            Some(old) if (x - old).abs() > CHANGE * self.error_between(old, x, n) => (x, cv2 / n),
            Some(old) => {
                let a = (n / self.full).min(1.0);
                let keep = 1.0 - a;
                (
                    old + a * (x - old),
                    keep * keep * self.latency_var + a * a * cv2 / n,
                )
            }
        };
        self.latency = Some(latency);
        self.latency_var = if var.is_finite() { var } else { 0.0 };
    }

    /// The standard error of the difference between the recent latency
    /// `old` and a window's aggregate `x` of `n` successes, in seconds.
    fn error_between(&self, old: f64, x: f64, n: f64) -> f64 {
        let window = self.cv2.unwrap_or(0.0) / n * x * x;
        (window + self.latency_var * old * old).sqrt()
    }

    fn observe_spread(&mut self, summary: &WindowSummary, n: f64) {
        let Some(mean) = summary.average.map(|a| a.as_secs_f64().max(MIN_LATENCY)) else {
            return;
        };
        let (observed, weight) = if let Some(sd) = summary.std_dev {
            self.last_lone = None;
            let cv = sd.as_secs_f64() / mean;
            (cv * cv, ((n - 1.0) / NOISE_SPAN).min(1.0))
        } else {
            let previous = self.last_lone.replace(mean);
            let Some(previous) = previous else {
                return;
            };
            let d = 2.0 * (mean - previous) / (mean + previous);
            (d * d / 2.0, 1.0 / NOISE_SPAN)
        };
        if !observed.is_finite() {
            return;
        }
        self.cv2 = Some(match self.cv2 {
            None => observed,
            Some(old) => old + weight * (observed - old),
        });
    }

    /// The recent latency in seconds, `None` before the first success.
    pub(crate) fn latency(&self) -> Option<f64> {
        self.latency
    }

    /// The relative standard error of [`Recent::latency`]; 0 until the
    /// spread is known.
    pub(crate) fn relative_error(&self) -> f64 {
        self.latency_var.sqrt()
    }

    /// The relative standard error of one window's aggregate of `n`
    /// successes.
    pub(crate) fn relative_error_of(&self, n: u32) -> f64 {
        (self.cv2.unwrap_or(0.0) / f64::from(n.max(1))).sqrt()
    }

    /// The fraction of recent calls that were drops, in `[0, 1]`.
    pub(crate) fn loss(&self) -> f64 {
        self.loss
    }

    /// Whether the recent latency is no slower than `baseline` allows: the
    /// lower end of its band, `noise` standard errors down, at or below it
    /// (nothing queues). False without a baseline or a latency.
    pub(crate) fn calm(&self, baseline: Option<f64>, noise: f64) -> bool {
        match (baseline, self.latency) {
            (Some(baseline), Some(x)) => x * (1.0 - noise * self.relative_error()) <= baseline,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::latency::window::tests::{ms, ok, window};
    use crate::{Outcome, Sample};

    fn summary_of(latencies_ms: &[u64], drops: u32) -> WindowSummary {
        let t0 = Instant::now();
        let mut w = window(100, 1000, 1);
        for &latency in latencies_ms {
            w.record(t0, &ok(ms(latency), 1));
        }
        for _ in 0..drops {
            w.record(t0, &Sample::new(Outcome::Overload, ms(1), 1));
        }
        w.flush(t0).expect("calls")
    }

    /// Equal to within a few nanoseconds' rounding.
    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-7
    }

    #[test]
    fn recent_latency_replaces_on_full_windows_and_blends_short_ones() {
        let mut r = Recent::new(4);
        assert_eq!(r.latency(), None);
        r.update(&summary_of(&[80, 120, 80, 120], 0));
        assert!(close(r.latency().expect("set"), 0.100));
        r.update(&summary_of(&[180, 220, 180, 220, 200], 0));
        assert!(
            close(r.latency().expect("set"), 0.200),
            "a full window replaces"
        );
        // One success of four needed, within the noise: a quarter of the
        // way.
        r.update(&summary_of(&[500], 0));
        assert!(close(r.latency().expect("set"), 0.275));
        // A window of drops alone moves the loss, not the latency.
        r.update(&summary_of(&[], 3));
        assert!(close(r.latency().expect("set"), 0.275));
    }

    #[test]
    fn a_window_beyond_three_standard_errors_starts_the_recent_latency_afresh() {
        let mut r = Recent::new(10);
        // Two calls a window around 9 s.
        for _ in 0..20 {
            r.update(&summary_of(&[8000, 10_000], 0));
        }
        assert!(close(r.latency().expect("set"), 9.0));
        // The dependency recovers: one window at 0.5 s is enough.
        r.update(&summary_of(&[400, 600], 0));
        assert!(close(r.latency().expect("set"), 0.5));
        // Around 100 ms, one call at 300 ms is within its own noise: it is
        // blended in, a tenth of the way.
        let mut r = Recent::new(10);
        for _ in 0..20 {
            r.update(&summary_of(&[80, 120], 0));
        }
        r.update(&summary_of(&[300], 0));
        assert!(close(r.latency().expect("set"), 0.120));
    }

    #[test]
    fn recent_error_follows_the_spread_and_the_count() {
        let mut r = Recent::new(10);
        assert!(close(r.relative_error(), 0.0), "unknown until seen");
        // 60 and 140 ms around 100: a coefficient of variation of 0.42.
        let spread: Vec<u64> = (0..10).map(|i| if i % 2 == 0 { 60 } else { 140 }).collect();
        r.update(&summary_of(&spread, 0));
        let cv = 40.0 * (10.0_f64 / 9.0).sqrt() / 100.0;
        assert!(close(r.relative_error_of(1), cv));
        assert!(close(r.relative_error_of(10), cv / 10.0_f64.sqrt()));
        assert!(close(r.relative_error(), cv / 10.0_f64.sqrt()));
        // Identical lone successes say the spread is smaller than thought.
        let mut lone = Recent::new(10);
        for _ in 0..3 {
            lone.update(&summary_of(&[100], 0));
        }
        assert!(close(lone.relative_error_of(1), 0.0));
        lone.update(&summary_of(&[300], 0));
        // Half the squared relative difference of 100 and 300, weighed as
        // one call of the pooling span.
        let d: f64 = 2.0 * 200.0 / 400.0;
        assert!(close(
            lone.relative_error_of(1).powi(2),
            d * d / 2.0 / NOISE_SPAN
        ));
    }

    #[test]
    fn recent_loss_averages_about_the_last_fifty_calls() {
        let mut r = Recent::new(10);
        r.update(&summary_of(&[10; 40], 10));
        assert!(close(r.loss(), 0.2), "a window of fifty calls stands alone");
        r.update(&summary_of(&[10; 4], 1));
        // Five calls weigh a tenth: 0.2 + 0.1 · (0.2 − 0.2).
        assert!(close(r.loss(), 0.2));
        r.update(&summary_of(&[], 5));
        // Five drops: 0.2 + 0.1 · (1 − 0.2).
        assert!(close(r.loss(), 0.28));
    }
}
