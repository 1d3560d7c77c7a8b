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
//!
//! Its keys are the shipped rows' names, so it is read (`Deserialize`) in
//! `load`, above the rows: the rows are built from a scenario, and this is
//! part of one.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use super::error::Checks;
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
