//! The values a scenario file writes beside durations: a stretch of
//! simulated time, a latency distribution, a share of stalls, a whole number of at least 1, a
//! rate and a share, each refused out of range as it is read.

use std::time::Duration;

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

/// A stretch of simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Span {
    /// Start.
    #[serde(with = "humantime_serde")]
    pub from: Duration,
    /// End.
    #[serde(with = "humantime_serde")]
    pub to: Duration,
}

/// A latency distribution: log-normal with this median and 99th percentile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// The median.
    #[serde(with = "humantime_serde")]
    pub median: Duration,
    /// The 99th percentile, at least the median.
    #[serde(with = "humantime_serde")]
    pub p99: Duration,
}

/// Requests that stall: a `share` of those served take a time drawn
/// uniformly from `[from, to]` instead of the service time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stall {
    /// The share of served requests that stall.
    pub share: Fraction,
    /// The shortest stall.
    #[serde(with = "humantime_serde")]
    pub from: Duration,
    /// The longest stall, at least `from`.
    #[serde(with = "humantime_serde")]
    pub to: Duration,
}

/// A whole number of at least 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Count(pub u32);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        match u32::try_from(n) {
            Ok(n) if n >= 1 => Ok(Count(n)),
            _ => Err(de::Error::custom(format_args!(
                "found {n}, expected a whole number in [1, {}]",
                u32::MAX
            ))),
        }
    }
}

/// A rate per second: finite, at least 0.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize)]
pub struct Rate(pub f64);

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = f64::deserialize(d)?;
        if !r.is_finite() || r < 0.0 {
            return Err(de::Error::custom(format_args!(
                "found {r}, expected a rate per second of at least 0"
            )));
        }
        Ok(Rate(r))
    }
}

/// A share in `[0, 1]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize)]
pub struct Fraction(pub f64);

impl<'de> Deserialize<'de> for Fraction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let f = f64::deserialize(d)?;
        if !(0.0..=1.0).contains(&f) {
            return Err(de::Error::custom(format_args!(
                "found {f}, expected a share in [0, 1]"
            )));
        }
        Ok(Fraction(f))
    }
}
