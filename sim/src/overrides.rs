//! How a scenario sets up the compared policies: `[policies]` in a
//! scenario file.
//!
//! ```toml
//! [policies]
//! slow_call = "5s"          # what a slow call is, for the rows that use one
//!
//! [policies.aimd]           # the `aimd` row runs this policy instead
//! policy = "aimd"           # exactly what a configuration file takes
//! max = 50
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::error::Checks;
use super::rows;
use rheostat::config::PolicyConfig;

/// How the compared policies are set up for a scenario.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct PolicyParams {
    /// What a slow call is for this dependency: where given, the
    /// recommended breaker rows trip on a slow-call rate of 50% with this
    /// threshold (a user's service level, not a tuning; without it they do
    /// not count slow calls, as at their defaults).
    pub slow_call: Option<Duration>,
    /// Rows whose policy is replaced, by row name (`aimd`,
    /// `breaker+gradient`): a [`PolicyConfig`], as configuration files
    /// write it. The row keeps its name; every instance of a fleet runs its
    /// own copy.
    pub overrides: BTreeMap<String, PolicyConfig>,
}

impl PolicyParams {
    /// The policy written for the row called `row`, if any.
    pub fn override_for(&self, row: &str) -> Option<&PolicyConfig> {
        self.overrides.get(row)
    }

    /// Replace the policy of the row called `row` with `config` (what a
    /// `[policies.NAME]` table does).
    pub fn set_override(&mut self, row: &str, config: PolicyConfig) {
        self.overrides.insert(row.to_owned(), config);
    }

    pub(crate) fn validate(&self, c: &mut Checks<'_>) {
        for (name, config) in &self.overrides {
            if let Err(e) = config.validate() {
                let table = format!("policies.{name}");
                c.fail(
                    &join(&table, e.field()),
                    format!("found {}, expected {}", e.found(), e.allowed()),
                );
            }
        }
    }
}

/// The keys `[policies]` takes.
fn expected() -> Vec<String> {
    let mut keys = vec!["slow_call".to_owned()];
    keys.extend(
        rows::all()
            .iter()
            .filter(|row| row.takes_override())
            .map(|row| row.name().to_owned()),
    );
    keys
}

impl<'de> Deserialize<'de> for PolicyParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = PolicyParams;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of `slow_call` and policy tables named after rows")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PolicyParams, A::Error> {
                let mut params = PolicyParams::default();
                while let Some(key) = map.next_key::<String>()? {
                    if key == "slow_call" {
                        let d: humantime_serde::Serde<Duration> = map.next_value()?;
                        params.slow_call = Some(d.into_inner());
                        continue;
                    }
                    match rows::named(&key).filter(|row| row.takes_override()) {
                        Some(_) => {
                            let config: PolicyConfig = map.next_value()?;
                            params.overrides.insert(key, config);
                        }
                        None => {
                            let keys: Vec<String> =
                                expected().iter().map(|k| format!("`{k}`")).collect();
                            return Err(de::Error::custom(format_args!(
                                "unknown field `{key}`, expected one of {}",
                                keys.join(", ")
                            )));
                        }
                    }
                }
                Ok(params)
            }
        }
        d.deserialize_map(V)
    }
}

impl Serialize for PolicyParams {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        if let Some(slow) = self.slow_call {
            map.serialize_entry("slow_call", &humantime_serde::Serde::from(slow))?;
        }
        for (name, config) in &self.overrides {
            map.serialize_entry(name, config)?;
        }
        map.end()
    }
}

/// `table.field`, or `table` alone for a fault of the whole table.
fn join(table: &str, field: &str) -> String {
    if field.is_empty() {
        table.to_owned()
    } else if field.starts_with('[') {
        format!("{table}{field}")
    } else {
        format!("{table}.{field}")
    }
}
