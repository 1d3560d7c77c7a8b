//! The congestion test the latency policies share: whether a closed
//! window's drops call for a cut, and whether the caller was using its limit
//! at all.

use std::time::Instant;

use super::window::WindowSummary;

/// The share of recent calls that must be drops before a drop cuts the limit
/// of a caller using under half of it, if `loss_tolerance` is lower: its own
/// load cannot be what overloads the dependency, so only a dependency failing
/// in earnest lowers a limit it is not using.
pub(crate) const APP_LIMITED_LOSS: f64 = 0.25;

/// Whether the window's calls used under half of `limit` at their peak: the
/// caller is app-limited, and the window says nothing about more calls.
pub(crate) fn app_limited(summary: &WindowSummary, limit: f64) -> bool {
    f64::from(summary.max_in_flight) * 2.0 < limit
}

/// Whether a window's drops are a congestion event: a drop of a call that
/// started after the last cut (drops of calls already in flight at a cut do
/// not cut again: once per flight), with drops above the `tolerated` share
/// of recent calls (`recent_loss`; the background's tolerance,
/// `super::background`). An app-limited caller tolerates at least
/// [`APP_LIMITED_LOSS`].
pub(crate) fn congested(
    summary: &WindowSummary,
    last_cut: Option<Instant>,
    limit: f64,
    tolerated: f64,
    recent_loss: f64,
) -> bool {
    let new_drop = match (summary.last_drop_started, last_cut) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(started), Some(cut)) => started >= cut,
    };
    let tolerated = if app_limited(summary, limit) {
        tolerated.max(APP_LIMITED_LOSS)
    } else {
        tolerated
    };
    new_drop && recent_loss > tolerated
}

/// `next` clamped to `[min, max]`, or `current` if `next` is NaN.
pub(crate) fn clamped(current: f64, next: f64, min: f64, max: f64) -> f64 {
    if next.is_nan() {
        current
    } else {
        next.clamp(min, max)
    }
}
