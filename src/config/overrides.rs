//! [`OverrideConfig`]: an operator's [override](crate::overrides) as a
//! file (or a store) writes it, with the instant it ends.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::algorithms::{ConfigError, MAX_LIMIT};
use crate::overrides::{Override, MAX_OVERRIDE};

/// The most overrides one file or one fleet document may hold: 1,000. An
/// incident's worth is a few per limiter, and each list is checked and
/// applied whenever it changes; a list beyond this is refused as a whole,
/// naming `overrides` and this bound.
pub const MAX_OVERRIDES: usize = 1_000;

/// What an override does, as a file names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideKind {
    /// [`Override::ForceOpen`].
    ForceOpen,
    /// [`Override::ForceClosed`].
    ForceClosed,
    /// [`Override::Cap`], with the file's `cap`.
    Cap,
    /// [`Override::MetricsOnly`].
    MetricsOnly,
}

/// One override in a file's `[[overrides]]` list: which limiter, what it
/// does, until when, and on which instances.
///
/// ```toml
/// [[overrides]]
/// limiter = "payments"
/// kind = "cap"                       # force_open, force_closed, cap, metrics_only
/// cap = 10                           # with kind = "cap" only
/// until = "2026-12-02T18:00:00Z"     # RFC 3339; at most 7 days ahead
/// instances = { region = "eu-west" } # only where every label matches; every instance if left out
/// reason = "partner maintenance"     # shown in logs
/// ```
///
/// An override whose `until` has passed is kept in the file and does
/// nothing: it needs no edit to end.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use rheostat::config::OverrideConfig;
/// use rheostat::overrides::Override;
///
/// let config: OverrideConfig = toml::from_str(r#"
///     limiter = "payments"
///     kind = "cap"
///     cap = 10
///     until = "2099-01-01T00:00:00Z"
///     instances = { region = "eu-west" }
/// "#)?;
/// assert_eq!(config.overriding()?, Override::Cap(10));
/// let eu = [("region".to_string(), "eu-west".to_string())].into();
/// assert!(config.applies_to(&eu));
/// assert!(!config.applies_to(&Default::default()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideConfig {
    /// The limiter it overrides, as the file's `limiters` lists it.
    pub limiter: String,
    /// What it does.
    pub kind: OverrideKind,
    /// The cap, with `kind = "cap"` only: in `[1, MAX_LIMIT]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u32>,
    /// When it ends (RFC 3339, `"2026-12-02T18:00:00Z"`): at most
    /// [`MAX_OVERRIDE`] after the file is read.
    #[serde(with = "humantime_serde")]
    pub until: SystemTime,
    /// The instances it applies to: those whose labels include every one
    /// of these. Empty (left out), every instance.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub instances: BTreeMap<String, String>,
    /// Why, for the logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl OverrideConfig {
    /// The override it describes.
    ///
    /// # Errors
    ///
    /// `cap` missing with `kind = "cap"`, given with another kind, or out
    /// of `[1, MAX_LIMIT]`.
    pub fn overriding(&self) -> Result<Override, ConfigError> {
        match (self.kind, self.cap) {
            (OverrideKind::Cap, None) => Err(ConfigError::new(
                "cap",
                "nothing",
                format!("a whole number in [1, {MAX_LIMIT}] with kind = \"cap\""),
            )),
            (OverrideKind::Cap, Some(cap)) if cap == 0 || cap > MAX_LIMIT => Err(ConfigError::new(
                "cap",
                cap,
                format!("a whole number in [1, {MAX_LIMIT}] (refusing every call is kind = \"force_open\")"),
            )),
            (OverrideKind::Cap, Some(cap)) => Ok(Override::Cap(cap)),
            (_, Some(cap)) => Err(ConfigError::new(
                "cap",
                cap,
                "no cap but with kind = \"cap\"",
            )),
            (OverrideKind::ForceOpen, None) => Ok(Override::ForceOpen),
            (OverrideKind::ForceClosed, None) => Ok(Override::ForceClosed),
            (OverrideKind::MetricsOnly, None) => Ok(Override::MetricsOnly),
        }
    }

    /// Whether it applies to an instance with `labels`: every label it
    /// names, with the same value.
    pub fn applies_to(&self, labels: &BTreeMap<String, String>) -> bool {
        self.instances
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
    }

    /// How long it lasts from `now`: `None` once it has ended.
    pub fn lasting(&self, now: SystemTime) -> Option<Duration> {
        self.until
            .duration_since(now)
            .ok()
            .filter(|left| !left.is_zero())
    }

    /// Check it as read at `now`: its kind and cap, and an end at most
    /// [`MAX_OVERRIDE`] ahead.
    ///
    /// # Errors
    ///
    /// As [`OverrideConfig::overriding`], or `until` too far ahead.
    pub fn validate(&self, now: SystemTime) -> Result<(), ConfigError> {
        self.overriding()?;
        if self.lasting(now).is_some_and(|left| left > MAX_OVERRIDE) {
            return Err(ConfigError::new(
                "until",
                humantime_serde::re::humantime::format_rfc3339_seconds(self.until),
                "an instant at most 7 days ahead: an override that outlasts an incident is a change to the limiter's own table",
            ));
        }
        Ok(())
    }
}
