//! Calls going missing: what Little's law over a window says.
//!
//! A window's successes, times their mean latency, over its span, are the
//! calls the dependency served at a time. A queue, however long, serves as
//! many as were in flight; calls that were dropped (to time out later) or
//! hang do not come back, and the window serves fewer than it had out. A
//! policy hears of a dropped call only at its timeout, seconds later; this
//! is the sign it can read at once.

use crate::window::WindowSummary;

/// The fewest successes a window needs before Little's law over it may say
/// that calls go missing.
const LITTLE_SUCCESSES: u32 = 10;

/// The share of the calls in flight that may be missing before calls are
/// said to go missing: half.
pub(crate) const MISSING: f64 = 0.5;

/// The calls a window's answers kept out at a time (the latencies of its
/// successes and of its drops, summed, over its span: Little's law) and
/// the share of the calls in flight at the admission of its calls, on
/// average, that this leaves unaccounted for (`1 − answered ÷ mean in
/// flight`, at least 0): above [`MISSING`], calls are going missing
/// (dropped or hung, to time out later). A failure that answers — a 5xx
/// after the usual delay — came back, and is not missing; a steady share of
/// calls that hang comes back too, at its timeout, so only the onset of
/// hangs (or of drops) reads as missing. Only a window of at least
/// [`LITTLE_SUCCESSES`] successes spanning two round trips or more can
/// tell: a shorter one sees only the calls that happened to finish in it,
/// and a handful is noise.
pub(crate) fn served_and_missing(summary: &WindowSummary) -> Option<(f64, f64)> {
    let span = summary
        .closed
        .saturating_duration_since(summary.started)
        .as_secs_f64();
    match summary.average {
        Some(average)
            if summary.successes() >= LITTLE_SUCCESSES
                && span > 0.0
                && span >= 2.0 * average.as_secs_f64() =>
        {
            let served = f64::from(summary.successes()) * average.as_secs_f64() / span;
            let answered = served
                + (summary.drop_latency.as_secs_f64() + summary.ignored_latency.as_secs_f64())
                    / span;
            // Each call counts itself in what it met; what the others
            // met without it is the time average (arrivals at random see
            // it), which Little's law compares with the answers.
            let in_flight = (summary.mean_in_flight() - 1.0).max(0.0);
            let missing = if in_flight > 0.0 {
                (1.0 - answered / in_flight).max(0.0)
            } else {
                0.0
            };
            Some((served, missing))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::window::{Window, WindowConfig};
    use crate::{Outcome, Sample};

    /// Over one second, 40 successes of 50 ms and 20 calls that a timeout
    /// cut at 300 ms, each admitted with `in_flight` calls out: told as
    /// `cut`.
    fn second(cut: Outcome, in_flight: u32) -> WindowSummary {
        let t0 = Instant::now();
        let mut w = Window::new(WindowConfig {
            min_samples: 1,
            ..WindowConfig::default()
        })
        .expect("valid");
        for i in 0..60u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 1_000 / 60);
            let sample = if i % 3 == 2 {
                Sample::new(cut, Duration::from_millis(300), in_flight)
            } else {
                Sample::new(Outcome::Success, Duration::from_millis(50), in_flight)
            };
            w.add(at, &sample);
        }
        w.flush(t0 + Duration::from_secs(1)).expect("sixty calls")
    }

    #[test]
    fn calls_cut_by_a_timeout_came_back_whether_they_are_drops_or_ignored() {
        // 40 × 50 ms + 20 × 300 ms over about a second: 8 calls out at a
        // time, all of them answered.
        for cut in [Outcome::Overload, Outcome::Ignore] {
            let (_, missing) = served_and_missing(&second(cut, 8)).expect("enough successes");
            assert!(missing < 0.1, "{cut:?}: {missing}");
        }
        // With 40 out at a time, most of them never came back.
        let (_, missing) = served_and_missing(&second(Outcome::Ignore, 40)).expect("enough");
        assert!(missing > MISSING, "{missing}");
    }
}
