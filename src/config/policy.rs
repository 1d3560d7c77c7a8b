//! [`PolicyConfig`]: a policy named in a file, and its fields.

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_value::Value;

use super::file::ConfigFileError;
use super::parse::parse;
use super::paths::{join, policy_field, renamed};
use super::tree::Format;
use super::wording::Mark;
use crate::algorithms::{
    Aimd, AimdConfig, Algorithm, Breaker, BreakerConfig, ConfigError, Fixed, Gradient,
    GradientConfig, Stack, Throttle, ThrottleConfig, Vegas, VegasConfig,
};

/// A policy and its parameters, as written in a configuration file.
///
/// Internally tagged: the `policy` key names the policy (`"fixed"`,
/// `"aimd"`, `"vegas"`, `"gradient"`, `"throttle"`, `"breaker"`, `"stack"`,
/// or `"recommended"`, which takes no fields) and the other keys are the
/// fields of its configuration ([`AimdConfig`] and so on). Omitted fields
/// take their defaults.
///
/// It is checked where serde reads it: whatever the format, a
/// `PolicyConfig` that deserializes is valid, and a value out of range is
/// refused there, named by its path in the policy table as serde reads it
/// (`backoff`, `window.count.calls`, `members[1].backoff`).
///
/// # Examples
///
/// ```
/// use rheostat::config::PolicyConfig;
/// use rheostat::algorithms::AimdConfig;
/// use rheostat::Limiter;
///
/// let config = PolicyConfig::from_toml(r#"
///     policy = "aimd"
///     initial = 30
///     max = 100
/// "#)?;
/// assert_eq!(config, PolicyConfig::Aimd(AimdConfig { initial: 30, max: 100, ..AimdConfig::default() }));
///
/// let limiter = Limiter::new(config.build()?);
/// assert_eq!(limiter.gate().limit, 30);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PolicyConfig {
    /// A bulkhead: [`Fixed`].
    Fixed {
        /// The concurrency limit, in `[1, 2^31 − 1]` (required).
        limit: u32,
    },
    /// [`Aimd`].
    Aimd(AimdConfig),
    /// [`Vegas`].
    Vegas(VegasConfig),
    /// [`Gradient`].
    Gradient(GradientConfig),
    /// [`Throttle`].
    Throttle(ThrottleConfig),
    /// [`Breaker`].
    Breaker(BreakerConfig),
    /// A [`Stack`] of policies, outermost first.
    Stack {
        /// The members (required, at least one).
        members: Vec<PolicyConfig>,
    },
    /// The recommended configuration for the interactive path to a
    /// dependency the caller does not control: today [`Aimd`] with
    /// [`AimdConfig::recommended`]. It takes no fields; to change one,
    /// name the policy it is (`policy = "aimd"`, `loss_tolerance = 0.8`,
    /// `open_start = true`, `timeout = "365d"`, `max = 100`).
    Recommended,
}

/// The names the `policy` key accepts.
const POLICIES: &[&str] = &[
    "fixed",
    "aimd",
    "vegas",
    "gradient",
    "throttle",
    "breaker",
    "stack",
    "recommended",
];

impl PolicyConfig {
    /// The policy's name, as the `policy` key spells it.
    pub fn name(&self) -> &'static str {
        match self {
            PolicyConfig::Fixed { .. } => "fixed",
            PolicyConfig::Aimd(_) => "aimd",
            PolicyConfig::Vegas(_) => "vegas",
            PolicyConfig::Gradient(_) => "gradient",
            PolicyConfig::Throttle(_) => "throttle",
            PolicyConfig::Breaker(_) => "breaker",
            PolicyConfig::Stack { .. } => "stack",
            PolicyConfig::Recommended => "recommended",
        }
    }

    /// Build the policy.
    ///
    /// # Errors
    ///
    /// The first field out of range, named as a policy table in a file
    /// writes it: `backoff`, the breaker's `window.count.calls`, a stack
    /// member's `members[1].backoff`. (The policies' own constructors, such
    /// as [`Aimd::new`], name it after the policy: `aimd.backoff`.)
    pub fn build(&self) -> Result<Box<dyn Algorithm>, ConfigError> {
        let in_table = |e: ConfigError| in_table(&e);
        Ok(match self {
            PolicyConfig::Fixed { limit } => Box::new(Fixed::new(*limit).map_err(in_table)?),
            PolicyConfig::Aimd(c) => Box::new(Aimd::new(c.clone()).map_err(in_table)?),
            PolicyConfig::Vegas(c) => Box::new(Vegas::new(c.clone()).map_err(in_table)?),
            PolicyConfig::Gradient(c) => Box::new(Gradient::new(c.clone()).map_err(in_table)?),
            PolicyConfig::Throttle(c) => Box::new(Throttle::new(c.clone()).map_err(in_table)?),
            PolicyConfig::Breaker(c) => Box::new(Breaker::new(c.clone()).map_err(in_table)?),
            PolicyConfig::Stack { members } => {
                let built = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        m.build()
                            .map_err(|e| renamed(&e, join(&format!("members[{i}]"), e.field())))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Box::new(Stack::new(built).map_err(in_table)?)
            }
            PolicyConfig::Recommended => Box::new(Aimd::recommended()),
        })
    }

    /// Check every field, as [`PolicyConfig::build`] does.
    ///
    /// # Errors
    ///
    /// As [`PolicyConfig::build`].
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.build().map(drop)
    }

    /// Read and check a policy written in TOML.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field, the reason and the line.
    pub fn from_toml(text: &str) -> Result<Self, ConfigFileError> {
        parse(text, Format::Toml)
    }

    /// Read and check a policy written in JSON.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field and the reason (and the line
    /// of a syntax or type error).
    pub fn from_json(text: &str) -> Result<Self, ConfigFileError> {
        parse(text, Format::Json)
    }
}

macro_rules! from_config {
    ($($config:ident => $variant:ident),*) => {$(
        impl From<$config> for PolicyConfig {
            fn from(config: $config) -> Self {
                PolicyConfig::$variant(config)
            }
        }
    )*};
}

from_config!(
    AimdConfig => Aimd,
    VegasConfig => Vegas,
    GradientConfig => Gradient,
    ThrottleConfig => Throttle,
    BreakerConfig => Breaker
);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixedFields {
    limit: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StackFields {
    members: Vec<PolicyConfig>,
}

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The tag may come after the fields, so the table is buffered first.
        // serde's own internally tagged enums buffer too, but lose the path
        // of an error inside; this keeps it (and keeps a NaN a NaN).
        let value = Value::deserialize(deserializer)?;
        let mut table = match value {
            Value::Map(table) => table,
            // A name alone is the policy at its defaults: a limiter's
            // `policy = "recommended"` is `[limiters.NAME.policy]` with
            // `policy = "recommended"` and nothing else.
            Value::String(name) => {
                let mut table = std::collections::BTreeMap::new();
                table.insert(Value::String("policy".to_owned()), Value::String(name));
                table
            }
            other => {
                return Err(de::Error::custom(format_args!(
                    "invalid type: {}, expected a policy's name or a table with a `policy` key",
                    kind(&other)
                )))
            }
        };
        let tag = match table.remove(&Value::String("policy".to_owned())) {
            Some(Value::String(tag)) => tag,
            Some(other) => {
                return Err(marked(
                    "policy",
                    &format!(
                        "invalid type: {}, expected one of {}",
                        kind(&other),
                        POLICIES.join(", ")
                    ),
                ))
            }
            None => return Err(de::Error::missing_field("policy")),
        };
        let rest = Value::Map(table);
        let mut table_keys = Vec::new();
        written_paths(&rest, "", &mut table_keys);
        let config = match tag.as_str() {
            "fixed" => fields::<FixedFields, D::Error>(rest)
                .map(|f| PolicyConfig::Fixed { limit: f.limit }),
            "aimd" => fields(rest).map(PolicyConfig::Aimd),
            "vegas" => fields(rest).map(PolicyConfig::Vegas),
            "gradient" => fields(rest).map(PolicyConfig::Gradient),
            "throttle" => fields(rest).map(PolicyConfig::Throttle),
            "breaker" => fields(rest).map(PolicyConfig::Breaker),
            "stack" => fields::<StackFields, D::Error>(rest)
                .map(|f| PolicyConfig::Stack { members: f.members }),
            "recommended" => match table_keys.first() {
                None => Ok(PolicyConfig::Recommended),
                Some(field) => Err(marked(
                    field,
                    "the recommended configuration takes no fields; \
                     name the policy it is (`policy = \"aimd\"` with `loss_tolerance = 0.8`, \
                     `open_start = true` and `timeout = \"365d\"`) to set one",
                )),
            },
            other => Err(marked(
                "policy",
                &format!(
                    "unknown policy `{other}`, expected one of {}",
                    POLICIES.join(", ")
                ),
            )),
        }?;
        // Checked where it is read: a policy that deserializes is valid, and
        // a value out of range is reported at its path in this table.
        match config.validate() {
            Ok(()) => Ok(config),
            Err(e) => Err(out_of_range(&e, &table_keys)),
        }
    }
}

/// A range error, its field a path in the policy table just read (whose
/// written paths are `written`), marked for the file loader.
fn out_of_range<E: de::Error>(error: &ConfigError, written: &[String]) -> E {
    let field = error.field();
    let default = if written.iter().any(|w| w == field) {
        ""
    } else {
        " (the default; the file does not set it)"
    };
    let reason = format!(
        "found {}{default}, expected {}",
        error.found(),
        error.allowed()
    );
    E::custom(Mark::new(field, &reason).with_range(error.found(), error.allowed()))
}

/// Every path a buffered table writes, down to its leaves (`backoff`,
/// `window.count.calls`, `members[0]`).
fn written_paths(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Map(table) => {
            for (key, value) in table {
                if let Value::String(key) = key {
                    let path = join(prefix, key);
                    written_paths(value, &path, out);
                    out.push(path);
                }
            }
        }
        Value::Seq(items) => {
            for (i, item) in items.iter().enumerate() {
                let path = format!("{prefix}[{i}]");
                written_paths(item, &path, out);
                out.push(path);
            }
        }
        _ => {}
    }
}

/// What a buffered value is, for an error message.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Bool(_) => "a boolean",
        Value::String(_) | Value::Char(_) => "a string",
        Value::Seq(_) => "an array",
        Value::Map(_) => "a table",
        Value::Unit | Value::Option(None) => "null",
        Value::Bytes(_) => "bytes",
        Value::Option(Some(_)) | Value::Newtype(_) => "a value",
        _ => "a number",
    }
}

/// Deserialize a buffered table, keeping the path of any error in it.
fn fields<T: DeserializeOwned, E: de::Error>(value: Value) -> Result<T, E> {
    let deserializer = serde_value::ValueDeserializer::<serde_value::DeserializerError>::new(value);
    serde_path_to_error::deserialize(deserializer).map_err(|e| {
        let path = e.path().to_string();
        // serde's own wording, as the rest of the file's errors have it.
        let message = e.into_inner().into_error::<de::value::Error>().to_string();
        match Mark::read(&message) {
            Some(mark) => E::custom(Mark {
                path: &join(&path, mark.path),
                ..mark
            }),
            None => marked(&path, &message),
        }
    })
}

fn marked<E: de::Error>(path: &str, reason: &str) -> E {
    E::custom(Mark::new(path, reason))
}

/// A policy's error, its field (and any field its range names, such as
/// `at most `aimd.max` (5)`) renamed as a policy table writes it.
fn in_table(error: &ConfigError) -> ConfigError {
    let policy = error.field().split('.').next().unwrap_or_default();
    let mut allowed = String::new();
    for (i, part) in error.allowed().split('`').enumerate() {
        if i > 0 {
            allowed.push('`');
        }
        // Odd parts are between backticks: a field name.
        if i % 2 == 1 && part.starts_with(policy) && part[policy.len()..].starts_with('.') {
            allowed.push_str(&policy_field(part));
        } else {
            allowed.push_str(part);
        }
    }
    ConfigError::new(policy_field(error.field()), error.found(), allowed)
}
