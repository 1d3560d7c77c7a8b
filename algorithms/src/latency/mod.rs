//! The machinery every latency-driven policy ([`crate::Aimd`] in its
//! latency mode, [`crate::Vegas`], [`crate::Gradient`]) shares:
//!
//! - [`window`]: finished calls gathered into windows, each closed into one
//!   summary (count, drops, in-flight, aggregate latency and its spread);
//! - `recent`: the recent latency blended from those windows, its standard
//!   error, and the recent drop rate — what "a rise beyond the noise" is
//!   measured against;
//! - `missing`: Little's law over a window, which tells calls that are stuck
//!   (and will time out later) from calls that are served;
//! - `congestion`: whether a window's drops call for a cut, and whether
//!   the caller used its limit at all;
//! - `outage`: an outage's episode, which keeps a dependency that is down
//!   from pinning a limit at its floor;
//! - `background`: loss that sending less does not cure (random errors,
//!   hangs), learned by what the policy's own cuts do, so that it is
//!   tolerated instead of cutting the limit to its floor;
//! - the checks their configurations share.

pub(crate) mod background;
pub(crate) mod congestion;
pub(crate) mod missing;
pub(crate) mod outage;
pub(crate) mod recent;
pub mod window;

use std::time::Duration;

use crate::ConfigError;

/// Seconds as a duration; what no duration can hold (too large, negative,
/// NaN) is the largest.
pub(crate) fn secs_to_duration(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

/// A policy's `loss_tolerance`: the share of recent calls that may drop
/// before a drop cuts the limit, in `[0, 1)`.
pub(crate) fn check_loss_tolerance(field: &'static str, value: f64) -> Result<f64, ConfigError> {
    if (0.0..1.0).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::new(field, value, "a number in [0, 1)"))
    }
}
