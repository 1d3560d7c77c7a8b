//! [`LimiterConfig`] (one limiter) and [`LimitersConfig`] (a file of them).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::file::ConfigFileError;
use super::parse::parse_checked;
use super::paths::located;
use super::read::read_bounded;
use super::timeout;
use super::tree::Format;
use super::GrpcConfig;
use super::OverrideConfig;
use super::PolicyConfig;
use super::ServerConfig;
use crate::algorithms::{check, Algorithm, ConfigError, Outcome};
use crate::limiter::QueueOrder;
use crate::limiter::Sharding;
use crate::limiter::{Builder, DynLimiter, Limiter, MAX_WAITERS};
use crate::priority::Priorities;
use crate::timeout::Timeout;

/// A server limiter's `max_wait` unless its table says otherwise.
const SERVER_MAX_WAIT_MS: u64 = 100;
use crate::retry::RetryConfig;

/// One limiter: its policy and its own options.
///
/// Omitted options take the [`Builder`] defaults: a FIFO queue of 1024
/// waiters, no maximum wait, no timeout, dropped permits counted as
/// [`Outcome::Ignore`].
///
/// A dependency's call options are here too, beside its policy, so that a
/// file holds all of them: `timeout`, the timeout each call is given
/// unless the code gives one ([`Builder::timeout`]), and `wait`, whether
/// callers wait for a slot rather than fail fast ([`Builder::wait`]),
/// which a `max_wait` sets unless `wait = false` says otherwise: a file
/// that says how long callers may wait means that they wait. The tower
/// layers take both from the limiter; their own `timeout(…)` and `wait()`
/// win. A retry's `retry.timeout` keeps its meaning: where set, it is a
/// retried call's own, over this one.
///
/// The `timeout` takes three forms (see [`crate::timeout`]):
///
/// - `timeout = "800ms"`: typed, the same for every call;
/// - `timeout = "auto"`: learned from the dependency's recent successful
///   latencies, never above 15 s ([`LearnedTimeout::default`]);
/// - a table, `timeout = { ceiling = "2s", quantile = 0.99 }` or
///   `[limiters.<name>.timeout]`: learned, with any of `ceiling` (15 s if
///   left out), `quantile`, `margin`, `floor`, `share`, `window`,
///   `min_samples` and `cut_early` set (the fields of [`LearnedTimeout`]);
///   a key left out takes [`LearnedTimeout::new`]'s default, an unknown one
///   is refused. `cut_early = false` gives every call through the limiter
///   its caller's own timeout, never a learned one shorter: for a route no
///   call to which is safe to cut early (a payment).
///
/// A learned timeout's field out of range is named as the file writes it
/// (`timeout.quantile`), with its range and its line.
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
///     timeout = "800ms"
///     max_wait = "250ms"
///     queue = "lifo"
///     policy = { policy = "fixed", limit = 8 }
/// "#)?;
/// assert!(config.wait, "a max_wait means callers wait");
/// let limiter = config.build("search")?;
/// assert_eq!(limiter.gate().limit, 8);
/// assert_eq!(limiter.timeouts().ceiling, Some(std::time::Duration::from_millis(800)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A learned timeout, at its defaults or tuned:
///
/// ```
/// use std::time::Duration;
/// use rheostat::config::LimiterConfig;
/// use rheostat::{timeout::LearnedTimeout, Timeout};
///
/// let auto: LimiterConfig = toml::from_str(r#"
///     timeout = "auto"
///     policy = { policy = "aimd" }
/// "#)?;
/// assert_eq!(auto.timeout, Some(Timeout::Learned(LearnedTimeout::default())));
///
/// let tuned: LimiterConfig = toml::from_str(r#"
///     timeout = { ceiling = "2s", quantile = 0.99 }
///     policy = { policy = "aimd" }
/// "#)?;
/// let learned = LearnedTimeout::new(Duration::from_secs(2)).quantile(0.99);
/// assert_eq!(tuned.timeout, Some(Timeout::Learned(learned)));
/// // Until it has seen enough successes, each call gets the ceiling.
/// let limiter = tuned.build("search")?;
/// assert_eq!(limiter.timeouts().ceiling, Some(Duration::from_secs(2)));
/// assert_eq!(limiter.timeouts().learned, None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`LearnedTimeout`]: crate::timeout::LearnedTimeout
/// [`LearnedTimeout::default`]: crate::timeout::LearnedTimeout::default
/// [`LearnedTimeout::new`]: crate::timeout::LearnedTimeout::new
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, from = "LimiterFields")]
pub struct LimiterConfig {
    /// The order waiters are served in (`"fifo"` or `"lifo"`).
    #[serde(default)]
    pub queue: QueueOrder,
    /// How many callers may wait for a slot, in `[0, 2^20]`.
    #[serde(default = "default_max_waiters")]
    pub max_waiters: usize,
    /// The longest a caller waits for a slot ([`Admission::acquire`](crate::Admission::acquire)); no
    /// limit if left out.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_wait: Option<Duration>,
    /// The timeout each call is given unless the code gives one (see
    /// [`Builder::timeout`]); none if left out. Typed (`"800ms"`), or
    /// learned from the dependency's latencies: `"auto"` at
    /// [`LearnedTimeout::default`](crate::timeout::LearnedTimeout::default), or a
    /// table of how it is learned (`{ ceiling = "2s", quantile = 0.99 }`).
    #[serde(
        default,
        serialize_with = "timeout::serialize",
        skip_serializing_if = "Option::is_none"
    )]
    pub timeout: Option<Timeout>,
    /// Whether callers wait for a slot (up to `max_wait`) rather than fail
    /// fast: the tower layer waits as if built with its `wait()` (see
    /// [`Builder::wait`]). Left out, callers wait if `max_wait` is set: a
    /// file that says how long a dependency's callers may wait means that
    /// they wait.
    pub wait: bool,
    /// What a permit dropped without an outcome counts as (`"ignore"`,
    /// `"overload"` or `"success"`).
    #[serde(default = "default_on_drop")]
    pub on_drop: Outcome,
    /// Whether released slots are parked per core (`"on-contention"`,
    /// `"off"` or `"always"`); see [`Sharding`].
    #[serde(default)]
    pub sharding: Sharding,
    /// The policy (required, even when the file has a `default`: a listed
    /// limiter is not merged with it).
    pub policy: PolicyConfig,
    /// How failed calls are retried (see [`crate::retry`]); none if left
    /// out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryConfig>,
    /// Classes of calls (see [`crate::priority`]); an empty table gives
    /// SRE's four, none if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<Priorities>,
    /// How a server answers the requests this limiter refuses (see
    /// [`ServerConfig`]); with it, `queue` defaults to `"lifo"` and
    /// `max_wait` to 100 ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerConfig>,
    /// How the calls to a gRPC dependency are classified (see
    /// [`GrpcConfig`]); the classifier's defaults if left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcConfig>,
}

/// [`LimiterConfig`] as a file writes it: its fields, and the key a probe's
/// timeout used to be set with and the learned timeout's `cut_early`, each
/// refused with where it goes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimiterFields {
    #[serde(default)]
    queue: Option<QueueOrder>,
    #[serde(default = "default_max_waiters")]
    max_waiters: usize,
    #[serde(default, with = "humantime_serde::option")]
    max_wait: Option<Duration>,
    #[serde(default, deserialize_with = "timeout::deserialize")]
    timeout: Option<Timeout>,
    #[serde(default)]
    wait: Option<bool>,
    #[serde(default = "default_on_drop")]
    on_drop: Outcome,
    #[serde(default, deserialize_with = "timeout::moved_probe_timeout")]
    #[allow(dead_code, reason = "never set: the key is refused")]
    probe_timeout: (),
    #[serde(default, deserialize_with = "timeout::misplaced_cut_early")]
    #[allow(dead_code, reason = "never set: the key is refused")]
    cut_early: (),
    #[serde(default)]
    sharding: Sharding,
    policy: PolicyConfig,
    #[serde(default)]
    retry: Option<RetryConfig>,
    #[serde(default)]
    priorities: Option<Priorities>,
    #[serde(default)]
    server: Option<ServerConfig>,
    #[serde(default)]
    grpc: Option<GrpcConfig>,
}

impl From<LimiterFields> for LimiterConfig {
    fn from(f: LimiterFields) -> Self {
        let server = f.server.is_some();
        LimiterConfig {
            queue: f.queue.unwrap_or(if server {
                QueueOrder::Lifo
            } else {
                QueueOrder::Fifo
            }),
            max_waiters: f.max_waiters,
            max_wait: f
                .max_wait
                .or(server.then_some(Duration::from_millis(SERVER_MAX_WAIT_MS))),
            timeout: f.timeout,
            wait: f.wait.unwrap_or(f.max_wait.is_some()),
            on_drop: f.on_drop,
            sharding: f.sharding,
            policy: f.policy,
            retry: f.retry,
            priorities: f.priorities,
            server: f.server,
            grpc: f.grpc,
        }
    }
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
            timeout: None,
            wait: false,
            on_drop: default_on_drop(),
            sharding: Sharding::OnContention,
            policy: policy.into(),
            retry: None,
            priorities: None,
            server: None,
            grpc: None,
        }
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field out of range, named as this limiter's table in a
    /// file writes it: `max_waiters`, `max_wait`, `timeout` (a learned
    /// one's `timeout.quantile` and so on), or a policy field as
    /// [`PolicyConfig::build`] names it, after `policy.`
    /// (`policy.backoff`), or a retry field (`retry.attempts`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_options()?;
        self.policy.validate().map_err(|e| located("policy", &e))
    }

    fn check_options(&self) -> Result<(), ConfigError> {
        if self.max_waiters > MAX_WAITERS {
            return Err(ConfigError::new(
                "max_waiters",
                self.max_waiters,
                format!("a whole number in [0, {MAX_WAITERS}]"),
            ));
        }
        if let Some(wait) = self.max_wait {
            check::duration("max_wait", wait)?;
        }
        if let Some(timeout) = &self.timeout {
            timeout.validate()?;
        }
        if let Some(retry) = &self.retry {
            retry.validate()?;
            if let Some(hedge) = &retry.hedge {
                hedge.check_source(matches!(self.timeout, Some(Timeout::Learned(_))))?;
            }
        }
        if let Some(priorities) = &self.priorities {
            priorities.validate()?;
        }
        if let Some(server) = &self.server {
            server.validate()?;
        }
        if let Some(grpc) = &self.grpc {
            grpc.validate()?;
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
        let policy = self.policy.build().map_err(|e| located("policy", &e))?;
        let mut builder = Limiter::builder(policy)
            .name(name)
            .queue(self.queue, self.max_waiters)
            .on_drop(self.on_drop)
            .sharding(self.sharding)
            .wait(self.wait);
        if let Some(wait) = self.max_wait {
            builder = builder.max_wait(wait);
        }
        if let Some(timeout) = self.timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(retry) = &self.retry {
            builder = builder.retry(retry.clone());
        }
        if let Some(priorities) = &self.priorities {
            builder = builder.priorities(priorities.clone());
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
    /// Operators' overrides of listed limiters, each until its end
    /// ([`OverrideConfig`]); applied by a [`LiveLimiters`](super::LiveLimiters).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<OverrideConfig>,
}

impl LimitersConfig {
    /// Read and check a file written in TOML.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field, the reason and the line.
    pub fn from_toml(text: &str) -> Result<Self, ConfigFileError> {
        parse_checked(text, Format::Toml, |c: &Self| c.check(text, Format::Toml))
    }

    /// Read and check a file written in JSON.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the field and the reason (and the line
    /// of a syntax or type error).
    pub fn from_json(text: &str) -> Result<Self, ConfigFileError> {
        parse_checked(text, Format::Json, |c: &Self| c.check(text, Format::Json))
    }

    /// Read and check the file at `path`: JSON if its name ends in `.json`,
    /// TOML otherwise.
    ///
    /// # Errors
    ///
    /// A [`ConfigFileError`] naming the file, and the field, the reason and
    /// the line; or saying why the file could not be read.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigFileError> {
        Self::load_with_text(path.as_ref()).map(|(file, _, _)| file)
    }

    /// [`LimitersConfig::load`], with the text read and its format, for
    /// errors found later to name their lines.
    pub(super) fn load_with_text(path: &Path) -> Result<(Self, String, Format), ConfigFileError> {
        let format = Self::format_of(path)?;
        let text = read_bounded(path)?;
        Self::parse(&text, format)
            .map(|file| (file, text, format))
            .map_err(|e| e.in_file(path))
    }

    /// The format a file's name says: JSON if it ends in `.json`, TOML
    /// otherwise; a YAML name is refused.
    pub(super) fn format_of(path: &Path) -> Result<Format, ConfigFileError> {
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("yaml" | "yml") => Err(ConfigFileError::yaml().in_file(path)),
            Some("json") => Ok(Format::Json),
            _ => Ok(Format::Toml),
        }
    }

    /// Read and check `text`, written in `format`.
    pub(super) fn parse(text: &str, format: Format) -> Result<Self, ConfigFileError> {
        match format {
            Format::Json => Self::from_json(text),
            Format::Toml => Self::from_toml(text),
        }
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
    /// default; otherwise as [`LimiterConfig::validate`], after the
    /// limiter's place in the file (`limiters.payments.policy.backoff`).
    pub fn build(&self, name: &str) -> Result<DynLimiter, ConfigError> {
        self.builder(name)?.build()
    }

    /// A [`Builder`] for the limiter called `name` (or, if it is not
    /// listed, one from the default), named `name`, to add observers, metrics
    /// or tracing before building.
    ///
    /// # Errors
    ///
    /// As [`LimitersConfig::build`].
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::config::LimitersConfig;
    ///
    /// let file = LimitersConfig::from_toml(r#"
    ///     [limiters.payments.policy]
    ///     policy = "aimd"
    /// "#)?;
    /// let payments = file.builder("payments")?.build()?;
    /// assert_eq!(payments.name(), "payments");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder(&self, name: &str) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> {
        let location = if self.limiters.contains_key(name) {
            format!("limiters.{name}")
        } else {
            "default".to_owned()
        };
        match self.get(name) {
            Some(config) => config
                .builder(name.to_owned())
                .map_err(|e| located(&location, &e)),
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
            config.validate().map_err(|e| located(&location, &e))?;
        }
        self.check_overrides(SystemTime::now())
            .map_err(|(location, e)| located(&location, &e))
    }

    /// Each override names a listed limiter and is valid at `now`; the
    /// first that is not, with its place in the file (`overrides[0]`).
    fn check_overrides(&self, now: SystemTime) -> Result<(), (String, ConfigError)> {
        for (i, o) in self.overrides.iter().enumerate() {
            let location = format!("overrides[{i}]");
            if !self.limiters.contains_key(&o.limiter) {
                let e = ConfigError::new(
                    "limiter",
                    format_args!("`{}`", o.limiter),
                    "a limiter the file lists under `limiters`",
                );
                return Err((location, e));
            }
            o.validate(now).map_err(|e| (location, e))?;
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

    /// The limiter options of a file just read (its policies were checked
    /// as they were read).
    fn check(&self, text: &str, format: Format) -> Result<(), ConfigFileError> {
        if self.limiters.is_empty() && self.default.is_none() {
            return Err(ConfigFileError::empty());
        }
        for (location, config) in self.entries() {
            config
                .check_options()
                .map_err(|e| ConfigFileError::invalid(text, format, &location, &e))?;
        }
        self.check_overrides(SystemTime::now())
            .map_err(|(location, e)| ConfigFileError::invalid(text, format, &location, &e))
    }
}
