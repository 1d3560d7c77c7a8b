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

/// The calls a window served at a time (successes × their mean latency ÷
/// the window's span: Little's law), if that was under half the calls in
/// flight at the admission of its calls, on average: calls are going
/// missing (dropped, to time out later). Only a window of at least
/// [`LITTLE_SUCCESSES`] successes spanning two round trips or more can
/// tell: a shorter one sees only the calls that happened to finish in it,
/// and a handful is noise.
pub(crate) fn served_when_calls_go_missing(summary: &WindowSummary) -> Option<f64> {
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
            (served * 2.0 < summary.mean_in_flight()).then_some(served)
        }
        _ => None,
    }
}
