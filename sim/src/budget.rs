//! The callers' retry budget: how it is written in a scenario, and the
//! sliding window each client instance keeps ([`CallerBudget`]) for the
//! retries the scenario's callers make themselves (every row but the one
//! whose limiter decides its retries: that limiter keeps the library's
//! own budget).
//!
//! The window is the one tower's `TpsBudget` and Finagle's `RetryBudget`
//! keep: every first attempt deposits `ratio` of a retry, a reserve of
//! `min_per_second × ttl` retries is always there, and what was deposited
//! or withdrawn more than `ttl` ago no longer counts.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::error::Checks;

/// How many retries callers may send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RetryBudget {
    /// No budget: every failure may be retried while attempts and the
    /// deadline allow (`"none"`).
    None,
    /// A share of recent first attempts plus a reserve.
    Window {
        /// Retries allowed per first attempt in the window.
        ratio: f64,
        /// Retries allowed per second whatever the traffic.
        min_per_second: f64,
        /// How long a deposit or a withdrawal counts.
        ttl: Duration,
    },
}

impl Default for RetryBudget {
    /// tower's and Finagle's defaults: 20% plus 10 a second over 10 s.
    fn default() -> Self {
        RetryBudget::Window {
            ratio: 0.2,
            min_per_second: 10.0,
            ttl: Duration::from_secs(10),
        }
    }
}

impl RetryBudget {
    pub(crate) fn validate(&self, path: &str, c: &mut Checks<'_>) {
        if let RetryBudget::Window {
            ratio,
            min_per_second,
            ttl,
        } = *self
        {
            if !(0.0..=1000.0).contains(&ratio) {
                c.fail(
                    &format!("{path}.ratio"),
                    format!("found {ratio}, expected a number in [0, 1000]"),
                );
            }
            if !(0.0..=1e6).contains(&min_per_second) {
                c.fail(
                    &format!("{path}.min_per_second"),
                    format!("found {min_per_second}, expected a number in [0, 1000000]"),
                );
            }
            if ttl < Duration::from_secs(1) || ttl > Duration::from_secs(3600) {
                c.fail(
                    &format!("{path}.ttl"),
                    format!("found {ttl:?}, expected 1 s to 1 h"),
                );
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WindowFields {
    #[serde(default = "default_ratio")]
    ratio: f64,
    #[serde(default = "default_min")]
    min_per_second: f64,
    #[serde(default = "default_ttl", with = "humantime_serde")]
    ttl: Duration,
}

fn default_ratio() -> f64 {
    0.2
}

fn default_min() -> f64 {
    10.0
}

fn default_ttl() -> Duration {
    Duration::from_secs(10)
}

impl<'de> Deserialize<'de> for RetryBudget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RetryBudget;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a ratio (`0.2`), a table `{ ratio, min_per_second, ttl }`, or \"none\"",
                )
            }
            fn visit_f64<E: de::Error>(self, ratio: f64) -> Result<RetryBudget, E> {
                Ok(RetryBudget::Window {
                    ratio,
                    min_per_second: default_min(),
                    ttl: default_ttl(),
                })
            }
            fn visit_i64<E: de::Error>(self, ratio: i64) -> Result<RetryBudget, E> {
                self.visit_f64(ratio as f64)
            }
            fn visit_u64<E: de::Error>(self, ratio: u64) -> Result<RetryBudget, E> {
                self.visit_f64(ratio as f64)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<RetryBudget, E> {
                if s == "none" {
                    Ok(RetryBudget::None)
                } else {
                    Err(E::custom(format_args!(
                        "found \"{s}\", expected a ratio, a table, or \"none\""
                    )))
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RetryBudget, A::Error> {
                let f = WindowFields::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RetryBudget::Window {
                    ratio: f.ratio,
                    min_per_second: f.min_per_second,
                    ttl: f.ttl,
                })
            }
        }
        d.deserialize_any(V)
    }
}

impl Serialize for RetryBudget {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            RetryBudget::None => s.serialize_str("none"),
            RetryBudget::Window {
                ratio,
                min_per_second,
                ttl,
            } => {
                let mut map = s.serialize_map(Some(3))?;
                map.serialize_entry("ratio", &ratio)?;
                map.serialize_entry("min_per_second", &min_per_second)?;
                map.serialize_entry("ttl", &humantime_serde::Serde::from(ttl))?;
                map.end()
            }
        }
    }
}

/// Slots the window is kept in.
const SLOTS: usize = 10;

/// One client instance's retry budget, as its callers keep it: deposits
/// by first attempts and withdrawals by retries over the last `ttl`, in
/// ten slots.
#[derive(Clone, Debug)]
pub(crate) struct CallerBudget {
    limits: Option<(f64, f64)>,
    width: u64,
    epoch: u64,
    slots: [(u64, u64); SLOTS],
    deposits: u64,
    withdrawals: u64,
}

impl CallerBudget {
    pub(crate) fn new(budget: &RetryBudget) -> Self {
        let (limits, ttl) = match *budget {
            RetryBudget::None => (None, Duration::from_secs(10)),
            RetryBudget::Window {
                ratio,
                min_per_second,
                ttl,
            } => (Some((ratio, min_per_second * ttl.as_secs_f64())), ttl),
        };
        CallerBudget {
            limits,
            width: (u64::try_from(ttl.as_nanos()).unwrap_or(u64::MAX) / SLOTS as u64).max(1),
            epoch: 0,
            slots: [(0, 0); SLOTS],
            deposits: 0,
            withdrawals: 0,
        }
    }

    /// Forget the slots that fell out of the window by `now` (nanoseconds).
    fn roll(&mut self, now: u64) {
        let epoch = now / self.width;
        let stale = epoch.saturating_sub(self.epoch).min(SLOTS as u64);
        for k in 1..=stale {
            let slot = &mut self.slots[((self.epoch + k) % SLOTS as u64) as usize];
            self.deposits -= slot.0;
            self.withdrawals -= slot.1;
            *slot = (0, 0);
        }
        self.epoch = self.epoch.max(epoch);
    }

    /// A first attempt at `now`.
    pub(crate) fn deposit(&mut self, now: u64) {
        self.roll(now);
        self.slots[(self.epoch % SLOTS as u64) as usize].0 += 1;
        self.deposits += 1;
    }

    /// Whether a retry may go at `now`; if so it is counted.
    pub(crate) fn withdraw(&mut self, now: u64) -> bool {
        let Some((ratio, reserve)) = self.limits else {
            return true;
        };
        self.roll(now);
        if (self.withdrawals as f64) + 1.0 > reserve + ratio * self.deposits as f64 {
            return false;
        }
        self.slots[(self.epoch % SLOTS as u64) as usize].1 += 1;
        self.withdrawals += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn window(ratio: f64, min_per_second: f64) -> CallerBudget {
        CallerBudget::new(&RetryBudget::Window {
            ratio,
            min_per_second,
            ttl: Duration::from_secs(10),
        })
    }

    #[test]
    fn retries_are_a_share_of_recent_first_attempts() {
        let mut a = window(0.2, 0.0);
        for _ in 0..100 {
            a.deposit(0);
        }
        let granted = (0..100).filter(|_| a.withdraw(S)).count();
        assert_eq!(granted, 20);
    }

    #[test]
    fn the_window_slides_deposits_and_withdrawals_expire() {
        let mut a = window(0.5, 0.0);
        for _ in 0..10 {
            a.deposit(0);
        }
        assert_eq!((0..10).filter(|_| a.withdraw(0)).count(), 5);
        // 11 s later both the deposits and the withdrawals are gone.
        assert!(!a.withdraw(11 * S));
        for _ in 0..4 {
            a.deposit(11 * S);
        }
        assert_eq!((0..10).filter(|_| a.withdraw(11 * S)).count(), 2);
    }

    #[test]
    fn the_reserve_allows_retries_without_traffic() {
        let mut a = window(0.0, 1.0);
        assert_eq!((0..100).filter(|_| a.withdraw(0)).count(), 10);
    }

    #[test]
    fn no_budget_grants_every_retry() {
        let mut a = CallerBudget::new(&RetryBudget::None);
        assert!((0..10_000).all(|_| a.withdraw(0)));
    }
}
