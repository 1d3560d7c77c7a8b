//! Policies and limiters from configuration files (TOML or JSON).
//!
//! [`PolicyConfig`] names a policy and its parameters, so that swapping AIMD
//! for a breaker is an edit to a file, not to code. [`LimiterConfig`] adds
//! the limiter's own options (queue, waits, drop outcome), and
//! [`LimitersConfig`] is a whole file: one limiter per dependency, plus a
//! default for [keyed limiters](crate::keyed).
//!
//! ```toml
//! [limiters.payments]
//! max_wait = "200ms"
//!
//! [limiters.payments.policy]
//! policy = "aimd"        # or "fixed", "vegas", "gradient", "throttle", "breaker", "stack"
//! backoff = 0.8
//! timeout = "800ms"      # durations as people write them
//! ```
//!
//! - Every field may be left out and then takes the value of the policy's
//!   `Default` (`AimdConfig::default()` and so on); only `policy`, a fixed
//!   bulkhead's `limit` and a stack's `members` are required.
//! - Durations are strings: `"800ms"`, `"30s"`, `"2m"`, `"1h 30m"`.
//! - An unknown field is an error, never ignored.
//! - The breaker's choices are tables named after the choice:
//!   `window.time = { length = "30s", buckets = 30 }` or
//!   `window.count = { calls = 20 }`; `cooldown.fixed = "30s"`,
//!   `cooldown.exponential = { base = "10s", factor = 2.0, cap = "60s" }` or
//!   `cooldown.proportional = { base = "5s", share = 0.1, cap = "60s" }`;
//!   `half_open.probes = { probes = 5, close_after = 4 }` or
//!   `half_open.fraction = { fraction = 0.05, period = "30s", success_rate = 0.8, min_probes = 5 }`.
//!   Inside a choice every field is required. A rate that is off is `"off"`
//!   (`failure_rate = "off"`).
//! - A latency window aggregates by `aggregation = "average"` or
//!   `aggregation.percentile = 0.99`.
//!
//! A file is checked as a whole when it is loaded: a syntax error, an
//! unknown field, a value of the wrong type and a value out of range are all
//! a [`ConfigFileError`] naming the field (as a path in the file:
//! `limiters.payments.policy.backoff`), the reason, and where it can be
//! found, the line.
//!
//! # Examples
//!
//! ```
//! use rheostat::config::{LimitersConfig, PolicyConfig};
//!
//! let file = LimitersConfig::from_toml(r#"
//!     [limiters.payments.policy]
//!     policy = "breaker"
//!     failure_rate = 0.4
//!     cooldown.fixed = "30s"
//! "#)?;
//! let payments = file.build("payments")?;
//! assert_eq!(payments.name(), "payments");
//! assert_eq!(payments.snapshot().policy, "breaker");
//!
//! let err = LimitersConfig::from_toml(r#"
//!     [limiters.payments.policy]
//!     policy = "aimd"
//!     backoff = 1.5
//! "#).unwrap_err();
//! assert_eq!(err.field(), "limiters.payments.policy.backoff");
//! assert_eq!(err.reason(), "found 1.5, expected a number in (0, 1)");
//! assert_eq!(err.line(), Some(4));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_value::Value;

use crate::algorithms::{
    check, Aimd, AimdConfig, Algorithm, Breaker, BreakerConfig, ConfigError, Fixed, Gradient,
    GradientConfig, Outcome, Stack, Throttle, ThrottleConfig, Vegas, VegasConfig,
};
use crate::limiter::{Builder, DynLimiter, Limiter, MAX_WAITERS};
use crate::shards::Sharding;
use crate::wait::QueueOrder;

/// A policy and its parameters, as written in a configuration file.
///
/// Internally tagged: the `policy` key names the policy (`"fixed"`,
/// `"aimd"`, `"vegas"`, `"gradient"`, `"throttle"`, `"breaker"`, `"stack"`)
/// and the other keys are the fields of its configuration
/// ([`AimdConfig`] and so on). Omitted fields take their defaults.
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
/// let limiter = Limiter::from_config(&config)?;
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
}

/// The names the `policy` key accepts.
const POLICIES: &[&str] = &[
    "fixed", "aimd", "vegas", "gradient", "throttle", "breaker", "stack",
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
        }
    }

    /// Build the policy.
    ///
    /// # Errors
    ///
    /// The first field out of range, named as the policy names it
    /// (`aimd.backoff`); a stack member's fields are named after its place
    /// (`stack.members[1].aimd.backoff`).
    pub fn build(&self) -> Result<Box<dyn Algorithm>, ConfigError> {
        Ok(match self {
            PolicyConfig::Fixed { limit } => Box::new(Fixed::new(*limit)?),
            PolicyConfig::Aimd(c) => Box::new(Aimd::new(c.clone())?),
            PolicyConfig::Vegas(c) => Box::new(Vegas::new(c.clone())?),
            PolicyConfig::Gradient(c) => Box::new(Gradient::new(c.clone())?),
            PolicyConfig::Throttle(c) => Box::new(Throttle::new(c.clone())?),
            PolicyConfig::Breaker(c) => Box::new(Breaker::new(c.clone())?),
            PolicyConfig::Stack { members } => {
                let built = members
                    .iter()
                    .enumerate()
                    .map(|(i, m)| {
                        m.build()
                            .map_err(|e| e.within(&format!("stack.members[{i}]")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Box::new(Stack::new(built)?)
            }
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
        let config: Self = parse(text, Format::Toml)?;
        config
            .validate()
            .map_err(|e| ConfigFileError::invalid(text, Format::Toml, "", e))?;
        Ok(config)
    }

    /// Read and check a policy written in JSON.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field and the reason (and the line
    /// of a syntax or type error).
    pub fn from_json(text: &str) -> Result<Self, ConfigFileError> {
        let config: Self = parse(text, Format::Json)?;
        config
            .validate()
            .map_err(|e| ConfigFileError::invalid(text, Format::Json, "", e))?;
        Ok(config)
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

/// Marks the path of an error found inside a buffered policy table, so the
/// file loader can put it after the table's own path.
const MARK: char = '\u{1f}';

impl<'de> Deserialize<'de> for PolicyConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The tag may come after the fields, so the table is buffered first.
        // serde's own internally tagged enums buffer too, but lose the path
        // of an error inside; this keeps it (and keeps a NaN a NaN).
        let value = Value::deserialize(deserializer)?;
        let Value::Map(mut table) = value else {
            return Err(de::Error::custom(format_args!(
                "invalid type: {}, expected a table with a `policy` key",
                kind(&value)
            )));
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
        match tag.as_str() {
            "fixed" => fields::<FixedFields, D::Error>(rest)
                .map(|f| PolicyConfig::Fixed { limit: f.limit }),
            "aimd" => fields(rest).map(PolicyConfig::Aimd),
            "vegas" => fields(rest).map(PolicyConfig::Vegas),
            "gradient" => fields(rest).map(PolicyConfig::Gradient),
            "throttle" => fields(rest).map(PolicyConfig::Throttle),
            "breaker" => fields(rest).map(PolicyConfig::Breaker),
            "stack" => fields::<StackFields, D::Error>(rest)
                .map(|f| PolicyConfig::Stack { members: f.members }),
            other => Err(marked(
                "policy",
                &format!(
                    "unknown policy `{other}`, expected one of {}",
                    POLICIES.join(", ")
                ),
            )),
        }
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
        let (inner, reason) = unmark(&message);
        marked(&join(&path, inner.unwrap_or("")), reason)
    })
}

fn marked<E: de::Error>(path: &str, reason: &str) -> E {
    E::custom(format_args!("{MARK}{path}{MARK}{reason}"))
}

/// Split a message made by [`marked`] into its path and reason.
fn unmark(message: &str) -> (Option<&str>, &str) {
    if let Some(rest) = message.strip_prefix(MARK) {
        if let Some((path, reason)) = rest.split_once(MARK) {
            return (Some(path), reason);
        }
    }
    (None, message)
}

/// `outer.inner`, where either may be empty or serde_path_to_error's `.`.
fn join(outer: &str, inner: &str) -> String {
    let outer = if outer == "." { "" } else { outer };
    let inner = if inner == "." { "" } else { inner };
    match (outer.is_empty(), inner.is_empty()) {
        (true, _) => inner.to_owned(),
        (false, true) => outer.to_owned(),
        (false, false) if inner.starts_with('[') => format!("{outer}{inner}"),
        (false, false) => format!("{outer}.{inner}"),
    }
}

/// One limiter: its policy and its own options.
///
/// Omitted options take the [`Builder`] defaults: a FIFO queue of 1024
/// waiters, no maximum wait, dropped permits counted as
/// [`Outcome::Ignore`].
///
/// A probe's timeout is not a limiter option: it is the breaker's
/// `probe_timeout` (in the `policy` table, 30 s by default), which
/// [`Limiter::call`] and the tower layer give a call admitted as a probe.
/// The limiter's old `probe_timeout` key is refused with an error that says
/// so, rather than ignored.
///
/// # Examples
///
/// ```
/// use rheostat::config::LimiterConfig;
///
/// let config: LimiterConfig = toml::from_str(r#"
///     max_wait = "250ms"
///     queue = "lifo"
///     policy = { policy = "fixed", limit = 8 }
/// "#)?;
/// let limiter = config.build("search")?;
/// assert_eq!(limiter.gate().limit, 8);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, from = "LimiterFields")]
pub struct LimiterConfig {
    /// The order waiters are served in (`"fifo"` or `"lifo"`).
    #[serde(default)]
    pub queue: QueueOrder,
    /// How many callers may wait for a slot, in `[0, 2^20]`.
    #[serde(default = "default_max_waiters")]
    pub max_waiters: usize,
    /// The longest [`Limiter::acquire`] waits; no limit if left out.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_wait: Option<Duration>,
    /// What a permit dropped without an outcome counts as (`"ignore"`,
    /// `"overload"` or `"success"`).
    #[serde(default = "default_on_drop")]
    pub on_drop: Outcome,
    /// Whether released slots are parked per core (`"on-contention"`,
    /// `"off"` or `"always"`); see [`Sharding`].
    #[serde(default)]
    pub sharding: Sharding,
    /// The policy (required).
    pub policy: PolicyConfig,
}

/// [`LimiterConfig`] as a file writes it: its fields, and the key a probe's
/// timeout used to be set with, refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimiterFields {
    #[serde(default)]
    queue: QueueOrder,
    #[serde(default = "default_max_waiters")]
    max_waiters: usize,
    #[serde(default, with = "humantime_serde::option")]
    max_wait: Option<Duration>,
    #[serde(default = "default_on_drop")]
    on_drop: Outcome,
    #[serde(default, deserialize_with = "moved_probe_timeout")]
    #[allow(dead_code, reason = "never set: the key is refused")]
    probe_timeout: (),
    #[serde(default)]
    sharding: Sharding,
    policy: PolicyConfig,
}

impl From<LimiterFields> for LimiterConfig {
    fn from(f: LimiterFields) -> Self {
        LimiterConfig {
            queue: f.queue,
            max_waiters: f.max_waiters,
            max_wait: f.max_wait,
            on_drop: f.on_drop,
            sharding: f.sharding,
            policy: f.policy,
        }
    }
}

/// Refuse the limiter's `probe_timeout`, which is now the breaker's.
fn moved_probe_timeout<'de, D: Deserializer<'de>>(_: D) -> Result<(), D::Error> {
    Err(de::Error::custom(
        "not a limiter option any more: a probe is given its breaker's \
         `probe_timeout` (30 s by default), the deadline the breaker holds it to; \
         set `probe_timeout` in the breaker's `policy` table instead",
    ))
}

fn default_max_waiters() -> usize {
    1024
}

fn default_on_drop() -> Outcome {
    Outcome::Ignore
}

impl LimiterConfig {
    /// `policy` with the default limiter options.
    pub fn new(policy: impl Into<PolicyConfig>) -> Self {
        LimiterConfig {
            queue: QueueOrder::Fifo,
            max_waiters: default_max_waiters(),
            max_wait: None,
            on_drop: default_on_drop(),
            sharding: Sharding::OnContention,
            policy: policy.into(),
        }
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// A policy field as [`PolicyConfig::build`] names it, or
    /// `limiter.max_waiters`, `limiter.max_wait`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_options()?;
        self.policy.validate()
    }

    fn check_options(&self) -> Result<(), ConfigError> {
        if self.max_waiters > MAX_WAITERS {
            return Err(ConfigError::new(
                "limiter.max_waiters",
                self.max_waiters,
                format!("a whole number in [0, {MAX_WAITERS}]"),
            ));
        }
        if let Some(wait) = self.max_wait {
            check::duration("limiter.max_wait", wait)?;
        }
        Ok(())
    }

    /// A [`Builder`] with this policy and these options, named `name`, to add
    /// observers or a clock before building.
    ///
    /// # Errors
    ///
    /// As [`LimiterConfig::validate`].
    pub fn builder(
        &self,
        name: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> {
        self.check_options()?;
        let mut builder = Limiter::builder(self.policy.build()?)
            .name(name)
            .queue(self.queue, self.max_waiters)
            .on_drop(self.on_drop)
            .sharding(self.sharding);
        if let Some(wait) = self.max_wait {
            builder = builder.max_wait(wait);
        }
        Ok(builder)
    }

    /// Build the limiter, named `name`.
    ///
    /// # Errors
    ///
    /// As [`LimiterConfig::validate`].
    pub fn build(
        &self,
        name: impl Into<std::borrow::Cow<'static, str>>,
    ) -> Result<DynLimiter, ConfigError> {
        self.builder(name)?.build()
    }
}

impl From<PolicyConfig> for LimiterConfig {
    fn from(policy: PolicyConfig) -> Self {
        LimiterConfig::new(policy)
    }
}

/// A configuration file: one limiter per dependency, by name, and a default.
///
/// ```toml
/// [default.policy]           # for keys not listed (keyed limiters)
/// policy = "aimd"
///
/// [limiters.payments.policy]
/// policy = "breaker"
/// ```
///
/// # Examples
///
/// ```
/// use rheostat::config::LimitersConfig;
///
/// let file = LimitersConfig::from_json(r#"{
///     "default": { "policy": { "policy": "aimd" } },
///     "limiters": { "search": { "policy": { "policy": "fixed", "limit": 4 } } }
/// }"#)?;
/// assert_eq!(file.build("search")?.gate().limit, 4);
/// assert_eq!(file.build("anything else")?.snapshot().policy, "aimd");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitersConfig {
    /// The limiter for any name not listed in `limiters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<LimiterConfig>,
    /// Limiters by name.
    #[serde(default)]
    pub limiters: BTreeMap<String, LimiterConfig>,
}

impl LimitersConfig {
    /// Read and check a file written in TOML.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field, the reason and the line.
    pub fn from_toml(text: &str) -> Result<Self, ConfigFileError> {
        let config: Self = parse(text, Format::Toml)?;
        config.check(text, Format::Toml)?;
        Ok(config)
    }

    /// Read and check a file written in JSON.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field and the reason (and the line
    /// of a syntax or type error).
    pub fn from_json(text: &str) -> Result<Self, ConfigFileError> {
        let config: Self = parse(text, Format::Json)?;
        config.check(text, Format::Json)?;
        Ok(config)
    }

    /// Read and check the file at `path`: JSON if its name ends in `.json`,
    /// TOML otherwise.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the file, and the field, the reason and
    /// the line; or saying why the file could not be read.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigFileError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigFileError::from(Details {
                file: Some(path.to_owned()),
                field: String::new(),
                reason: format!("cannot read the file: {e}"),
                line: None,
                invalid: None,
            })
        })?;
        let json = path.extension().is_some_and(|e| e == "json");
        let loaded = if json {
            Self::from_json(&text)
        } else {
            Self::from_toml(&text)
        };
        loaded.map_err(|mut e| {
            e.details.file = Some(path.to_owned());
            e
        })
    }

    /// The configuration of the limiter called `name`, or the default.
    pub fn get(&self, name: &str) -> Option<&LimiterConfig> {
        self.limiters.get(name).or(self.default.as_ref())
    }

    /// Build the limiter called `name` (or, if it is not listed, one from
    /// the default), named `name`.
    ///
    /// # Errors
    ///
    /// With field `limiters` if `name` is not listed and there is no
    /// default; otherwise as [`LimiterConfig::validate`].
    pub fn build(&self, name: &str) -> Result<DynLimiter, ConfigError> {
        match self.get(name) {
            Some(config) => config.build(name.to_owned()),
            None => Err(ConfigError::new(
                "limiters",
                format_args!("no limiter `{name}`"),
                "a listed limiter, or a `default`",
            )),
        }
    }

    /// Check every limiter in the file.
    ///
    /// # Errors
    ///
    /// The first field out of range, named as a path in the file
    /// (`limiters.payments.policy.backoff`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (location, config) in self.entries() {
            config.validate().map_err(|e| {
                let field = file_field(&location, e.field());
                ConfigError::new(field, e.found(), e.allowed().to_owned())
            })?;
        }
        Ok(())
    }

    fn entries(&self) -> impl Iterator<Item = (String, &LimiterConfig)> {
        let default = self.default.iter().map(|c| ("default".to_owned(), c));
        let named = self
            .limiters
            .iter()
            .map(|(name, c)| (format!("limiters.{name}"), c));
        default.chain(named)
    }

    fn check(&self, text: &str, format: Format) -> Result<(), ConfigFileError> {
        for (location, config) in self.entries() {
            config
                .validate()
                .map_err(|e| ConfigFileError::invalid(text, format, &location, e))?;
        }
        Ok(())
    }
}

/// Where a field of a [`LimiterConfig`] at `location` sits in the file,
/// given the name [`LimiterConfig::validate`] gives it (`aimd.backoff` is
/// the policy's `backoff`; `limiter.max_wait` is the limiter's `max_wait`).
fn file_field(location: &str, field: &str) -> String {
    match field.strip_prefix("limiter.") {
        Some(option) => join(location, option),
        None => join(&join(location, "policy"), &policy_field(field)),
    }
}

/// The path in a file of the field a policy names `field`, for a policy
/// table at `location` (`policies.aimd` and `aimd.backoff` give
/// `policies.aimd.backoff`).
#[cfg(feature = "sim")]
pub(crate) fn policy_path(location: &str, field: &str) -> String {
    join(location, &policy_field(field))
}

/// The path, inside a policy table, of the field a policy names `field`.
fn policy_field(field: &str) -> String {
    let Some((policy, rest)) = field.split_once('.') else {
        return String::new();
    };
    if policy == "stack" {
        if let Some((member, inner)) = rest.split_once('.') {
            if member.starts_with("members[") {
                return join(member, &policy_field(inner));
            }
        }
        return rest.to_owned();
    }
    if policy == "breaker" {
        // The breaker names fields of its choices without the choice.
        for (named, path) in BREAKER_CHOICES {
            if rest == *named {
                return (*path).to_owned();
            }
        }
    }
    if rest == "window.aggregation" {
        return "window.aggregation.percentile".to_owned();
    }
    rest.to_owned()
}

const BREAKER_CHOICES: &[(&str, &str)] = &[
    ("window.calls", "window.count.calls"),
    ("window.length", "window.time.length"),
    ("window.buckets", "window.time.buckets"),
    ("cooldown", "cooldown.fixed"),
    ("cooldown.base", "cooldown.exponential.base"),
    ("cooldown.factor", "cooldown.exponential.factor"),
    ("cooldown.cap", "cooldown.exponential.cap"),
    ("half_open.probes", "half_open.probes.probes"),
    ("half_open.close_after", "half_open.probes.close_after"),
    ("half_open.fraction", "half_open.fraction.fraction"),
    ("half_open.period", "half_open.fraction.period"),
    ("half_open.success_rate", "half_open.fraction.success_rate"),
    ("half_open.min_probes", "half_open.fraction.min_probes"),
];

impl Limiter<Box<dyn Algorithm>> {
    /// A limiter with the policy `config` describes and default options.
    ///
    /// # Errors
    ///
    /// As [`PolicyConfig::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::{config::PolicyConfig, Limiter};
    ///
    /// let limiter = Limiter::from_config(&PolicyConfig::Fixed { limit: 3 })?;
    /// assert_eq!(limiter.gate().limit, 3);
    /// # Ok::<(), rheostat::ConfigError>(())
    /// ```
    pub fn from_config(config: &PolicyConfig) -> Result<DynLimiter, ConfigError> {
        Ok(Limiter::new(config.build()?))
    }
}

// ----- files and their errors -------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Json,
}

/// A configuration file that could not be read, parsed or checked.
///
/// It names the field as a path in the file (`limiters.payments.policy.backoff`,
/// `limiters.search.policy.members[0].limit`), says why, and where it can,
/// gives the line. A value out of range also carries the [`ConfigError`]
/// (as [`ConfigFileError::config_error`] and as the error's source).
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigFileError {
    details: Box<Details>,
}

#[derive(Clone, Debug, PartialEq)]
struct Details {
    file: Option<PathBuf>,
    field: String,
    reason: String,
    line: Option<usize>,
    invalid: Option<ConfigError>,
}

impl ConfigFileError {
    /// The field at fault, as a dotted path in the file; empty if the fault
    /// is not in one field (a syntax error).
    pub fn field(&self) -> &str {
        &self.details.field
    }

    /// Why it was refused: `found 1.5, expected a number in (0, 1)`,
    /// `unknown field `backof`, expected one of …`.
    pub fn reason(&self) -> &str {
        &self.details.reason
    }

    /// The line (from 1) the fault is on, where known.
    pub fn line(&self) -> Option<usize> {
        self.details.line
    }

    /// The file, if the error came from [`LimitersConfig::load`].
    pub fn file(&self) -> Option<&Path> {
        self.details.file.as_deref()
    }

    /// The range error, if the file parsed but a value is out of range.
    pub fn config_error(&self) -> Option<&ConfigError> {
        self.details.invalid.as_ref()
    }

    fn invalid(text: &str, format: Format, location: &str, error: ConfigError) -> Self {
        let field = file_field(location, error.field());
        let line = match format {
            Format::Toml => toml_line(text, &field),
            Format::Json => None,
        };
        ConfigFileError::from(Details {
            file: None,
            reason: format!("found {}, expected {}", error.found(), error.allowed()),
            field,
            line,
            invalid: Some(error),
        })
    }
}

impl From<Details> for ConfigFileError {
    fn from(details: Details) -> Self {
        ConfigFileError {
            details: Box::new(details),
        }
    }
}

impl fmt::Display for ConfigFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.details.file, self.details.line) {
            (Some(file), Some(line)) => write!(f, "{}:{line}: ", file.display())?,
            (Some(file), None) => write!(f, "{}: ", file.display())?,
            (None, Some(line)) => write!(f, "line {line}: ")?,
            (None, None) => {}
        }
        if self.details.field.is_empty() {
            f.write_str(&self.details.reason)
        } else {
            write!(
                f,
                "invalid `{}`: {}",
                self.details.field, self.details.reason
            )
        }
    }
}

impl std::error::Error for ConfigFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.details
            .invalid
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Parse `text`, naming the field of the first error by its path.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, format: Format) -> Result<T, ConfigFileError> {
    let (path, message, line) = match format {
        Format::Toml => {
            let deserializer = match toml::de::Deserializer::parse(text) {
                Ok(d) => d,
                Err(e) => {
                    return Err(ConfigFileError::from(Details {
                        file: None,
                        field: String::new(),
                        reason: e.message().trim_end().to_owned(),
                        line: e.span().map(|s| line_of(text, s.start)),
                        invalid: None,
                    }))
                }
            };
            match serde_path_to_error::deserialize(deserializer) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    let path = e.path().to_string();
                    let inner = e.into_inner();
                    let line = inner.span().map(|s| line_of(text, s.start));
                    (path, inner.message().trim_end().to_owned(), line)
                }
            }
        }
        Format::Json => {
            let mut deserializer = serde_json::Deserializer::from_str(text);
            let parsed = match serde_path_to_error::deserialize(&mut deserializer) {
                Ok(value) => deserializer
                    .end()
                    .map(|()| value)
                    .map_err(|e| (String::new(), e)),
                Err(e) => Err((e.path().to_string(), e.into_inner())),
            };
            match parsed {
                Ok(value) => return Ok(value),
                Err((path, inner)) => {
                    let line = (inner.line() > 0).then_some(inner.line());
                    let full = inner.to_string();
                    let suffix = format!(" at line {} column {}", inner.line(), inner.column());
                    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
                    (path, message, line)
                }
            }
        }
    };
    let (inner, reason) = unmark(&message);
    let field = join(&path, inner.unwrap_or(""));
    let line = match format {
        // An error inside a policy table is reported by toml at the table;
        // look the field itself up.
        Format::Toml => toml_line(text, &field).or(line),
        Format::Json => line,
    };
    Err(ConfigFileError::from(Details {
        file: None,
        field,
        reason: reason.to_owned(),
        line,
        invalid: None,
    }))
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The line of the deepest part of `field` (a dotted path, with `[i]` for
/// array elements) that the TOML document `text` holds.
pub(crate) fn toml_line(text: &str, field: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};

    let root = DeTable::parse(text).ok()?;
    let mut segments: Vec<Segment<'_>> = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, indices) = match part.find('[') {
            Some(at) => (&part[..at], &part[at..]),
            None => (part, ""),
        };
        segments.push(Segment::Key(key));
        for index in indices.split(['[', ']']).filter(|s| !s.is_empty()) {
            segments.push(Segment::Index(index.parse().ok()?));
        }
    }
    let mut table: Option<&DeTable<'_>> = Some(root.get_ref());
    let mut array: Option<&toml::de::DeArray<'_>> = None;
    let mut found: Option<usize> = None;
    let mut rest = &segments[..];
    while let Some(segment) = rest.first() {
        let value = match (segment, table, array) {
            (Segment::Index(i), _, Some(items)) => {
                rest = &rest[1..];
                let item = items.get(*i)?;
                found = Some(item.span().start);
                item
            }
            (Segment::Key(_), Some(t), _) => {
                // A key may itself contain dots (`"api.example.com"`): take
                // the longest run of segments that is a key here.
                let keys: Vec<&str> = rest
                    .iter()
                    .map_while(|s| match s {
                        Segment::Key(k) => Some(*k),
                        Segment::Index(_) => None,
                    })
                    .collect();
                let hit = (1..=keys.len()).rev().find_map(|n| {
                    let name = keys[..n].join(".");
                    t.get_key_value(name.as_str())
                        .map(|(k, v)| (n, k.span().start, v))
                });
                match hit {
                    Some((n, at, v)) => {
                        rest = &rest[n..];
                        found = Some(at);
                        v
                    }
                    // Not here: the field may sit one table down, inside
                    // a choice (`window.time.length` for `window.length`).
                    None => {
                        let inner = t.values().find_map(|v| match v.get_ref() {
                            DeValue::Table(inner) => inner.get_key_value(keys[0]),
                            _ => None,
                        });
                        match inner {
                            Some((k, v)) => {
                                rest = &rest[1..];
                                found = Some(k.span().start);
                                v
                            }
                            None => break,
                        }
                    }
                }
            }
            _ => break,
        };
        match value.get_ref() {
            DeValue::Table(t) => {
                table = Some(t);
                array = None;
            }
            DeValue::Array(a) => {
                table = None;
                array = Some(a);
            }
            _ => {
                table = None;
                array = None;
            }
        }
    }
    found.map(|at| line_of(text, at))
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}
