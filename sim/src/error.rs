//! A scenario file that could not be read, and the checks that find out.

use std::fmt;
use std::time::Duration;

use super::values::{Fraction, Latency, Stall};
use rheostat::config::ConfigFileError;

const WEEK: Duration = Duration::from_secs(7 * 86_400);

/// A scenario file that could not be read: the key at fault as a path in
/// the file (`traffic.phase[1].until`), why, and the line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    origin: String,
    field: String,
    reason: String,
    line: Option<usize>,
}

impl ScenarioError {
    pub(crate) fn from_config(origin: &str, e: &ConfigFileError) -> Self {
        // A missing key is named in full: the table's path, then the key.
        let missing = e
            .reason()
            .strip_prefix("missing field `")
            .and_then(|rest| rest.split_once('`'))
            .map(|(key, _)| key);
        let field = match (e.field(), missing) {
            ("", Some(key)) => key.to_owned(),
            (table, Some(key)) => format!("{table}.{key}"),
            (table, None) => table.to_owned(),
        };
        ScenarioError {
            origin: origin.to_owned(),
            field,
            reason: e.reason().to_owned(),
            line: e.line(),
        }
    }

    pub(crate) fn io(origin: &str, e: &std::io::Error) -> Self {
        ScenarioError {
            origin: origin.to_owned(),
            field: String::new(),
            reason: e.to_string(),
            line: None,
        }
    }

    /// The key at fault, as a dotted path in the file; empty where the
    /// fault is not one key's (a syntax error, a file that cannot be read).
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Why it was refused.
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// The line (from 1), where known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
        }
        if self.field.is_empty() {
            write!(f, ": {}", self.reason)
        } else {
            write!(f, ": `{}`: {}", self.field, self.reason)
        }
    }
}

impl std::error::Error for ScenarioError {}

/// The checks run over a parsed scenario; the first failure is kept, with
/// the line of its key looked up in the text.
pub(crate) struct Checks<'a> {
    origin: &'a str,
    text: &'a str,
    first: Option<ScenarioError>,
}

impl<'a> Checks<'a> {
    pub(crate) fn new(origin: &'a str, text: &'a str) -> Self {
        Checks {
            origin,
            text,
            first: None,
        }
    }

    pub(crate) fn fail(&mut self, field: &str, reason: impl Into<String>) {
        if self.first.is_none() {
            self.first = Some(ScenarioError {
                origin: self.origin.to_owned(),
                field: field.to_owned(),
                reason: reason.into(),
                line: rheostat::config::toml_line(self.text, field),
            });
        }
    }

    /// `at` is inside a run that ends at `end`.
    pub(crate) fn within(&mut self, field: &str, at: Duration, end: Duration) {
        if at > end {
            self.fail(
                field,
                format!("found {at:?}, after the end of the run ({end:?})"),
            );
        }
    }

    /// `at` is no earlier than the phase above it, which ends at `last`.
    pub(crate) fn ordered(&mut self, field: &str, at: Duration, last: Duration) {
        if at < last {
            self.fail(
                field,
                format!("found {at:?}, before the phase above it ({last:?}): phases go in order"),
            );
        }
    }

    /// Above zero, and at most a week (no caller waits longer, and the
    /// policies sized from it stay within their own ranges).
    pub(crate) fn positive(&mut self, field: &str, d: Duration) {
        if d.is_zero() {
            self.fail(field, "found 0s, expected a duration above 0");
        } else if d > WEEK {
            self.fail(field, format!("found {d:?}, expected at most 7 days"));
        }
    }

    /// A stall's span: durations above zero, `to` no shorter than `from`.
    pub(crate) fn stall(&mut self, field: &str, stall: &Stall) {
        self.positive(&format!("{field}.from"), stall.from);
        self.positive(&format!("{field}.to"), stall.to);
        if stall.to < stall.from {
            self.fail(
                &format!("{field}.to"),
                format!(
                    "found {:?}, expected at least `from` ({:?})",
                    stall.to, stall.from
                ),
            );
        }
    }

    pub(crate) fn latency(&mut self, field: &str, latency: &Latency) {
        self.positive(&format!("{field}.median"), latency.median);
        self.positive(&format!("{field}.p99"), latency.p99);
        if latency.p99 < latency.median {
            self.fail(
                &format!("{field}.p99"),
                format!(
                    "found {:?}, expected at least the median ({:?})",
                    latency.p99, latency.median
                ),
            );
        }
    }

    /// Overload and client errors are shares of the same answers.
    pub(crate) fn shares(&mut self, table: &str, overload: Fraction, client: Fraction) {
        if overload.0 + client.0 > 1.0 {
            self.fail(
                &format!("{table}.client_errors"),
                format!(
                    "found {} with overload_errors {}, expected the two to add up to at most 1",
                    client.0, overload.0
                ),
            );
        }
    }

    pub(crate) fn finish(self) -> Result<(), ScenarioError> {
        self.first.map_or(Ok(()), Err)
    }
}
