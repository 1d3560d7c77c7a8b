//! Policies and limiters from configuration files (TOML or JSON).
//!
//! [`PolicyConfig`] names a policy and its parameters, so that swapping AIMD
//! for a breaker is an edit to a file, not to code. [`LimiterConfig`] adds
//! the limiter's own options (queue, waits, drop outcome), and
//! [`LimitersConfig`] is a whole file: one limiter per dependency, plus a
//! default for [keyed limiters](crate::keyed), which [`KeyedConfig`] makes
//! from it.
//!
//! ```toml
//! [limiters.payments]
//! timeout = "800ms"      # each call's, unless the code gives one
//! max_wait = "200ms"     # callers wait up to this for a slot
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
//! - Everything a caller sets per dependency is in its block: the policy,
//!   the `timeout` each call is given (the tower layers use it unless the
//!   code sets its own) and whether callers wait for a slot (`max_wait`:
//!   set, they wait up to it, unless `wait = false`). See
//!   [`LimiterConfig`].
//! - A limiter's `timeout` is typed (`timeout = "800ms"`) or learned from
//!   the dependency's latencies ([`crate::timeout`]): `timeout = "auto"`
//!   (never above 15 s), or a table of how it is learned,
//!   `timeout = { ceiling = "2s", quantile = 0.99 }`, whose keys
//!   (`ceiling`, `quantile`, `margin`, `floor`, `share`, `window`,
//!   `min_samples`, `cut_early`) may each be left out.
//! - A limiter listed under `limiters` names its own policy: `default` is
//!   for the names the file does not list, and is not merged into a listed
//!   one.
//!
//! A file is checked as a whole when it is loaded: a syntax error, an
//! unknown field, a value of the wrong type and a value out of range are all
//! a [`ConfigFileError`] naming the field (as a path in the file:
//! `limiters.payments.policy.backoff`), the reason, and where it can be
//! found, the line. Every error of the file is reported at once, in file
//! order (up to [`MAX_ERRORS`]); a value is shown as the file wrote it,
//! and a number out of range with the field's own range.
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
//!
//! A timeout in each of its three forms, and a learned one's field out of
//! range:
//!
//! ```
//! use std::time::Duration;
//! use rheostat::config::LimitersConfig;
//!
//! let file = LimitersConfig::from_toml(r#"
//!     [limiters.typed]
//!     timeout = "800ms"
//!     policy = { policy = "aimd" }
//!
//!     [limiters.auto]
//!     timeout = "auto"
//!     policy = { policy = "aimd" }
//!
//!     [limiters.tuned]
//!     timeout = { ceiling = "2s", quantile = 0.99 }
//!     policy = { policy = "aimd" }
//! "#)?;
//! let ceiling = |name| file.build(name).map(|l| l.timeouts().ceiling);
//! assert_eq!(ceiling("typed")?, Some(Duration::from_millis(800)));
//! assert_eq!(ceiling("auto")?, Some(Duration::from_secs(15)));
//! assert_eq!(ceiling("tuned")?, Some(Duration::from_secs(2)));
//! assert_eq!(file.limiters["tuned"].timeout.unwrap().as_learned().unwrap().quantile, 0.99);
//!
//! let err = LimitersConfig::from_toml(r#"
//!     [limiters.payments]
//!     policy = { policy = "aimd" }
//!     timeout = { quantile = 1.5 }
//! "#).unwrap_err();
//! assert_eq!(err.field(), "limiters.payments.timeout.quantile");
//! assert_eq!(err.reason(), "found 1.5, expected a number in (0, 1)");
//! assert_eq!(err.line(), Some(4));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod file;
#[cfg(feature = "redis")]
pub mod fleet;
mod gather;
mod grpc;
mod keyed;
mod limiter;
mod live;
mod locate;
mod overrides;
mod parse;
mod paths;
mod policy;
mod read;
mod server;
mod spelling;
mod timeout;
mod tree;
mod wording;

pub use file::{ConfigFileError, MAX_FILE_BYTES};
pub use gather::MAX_ERRORS;
pub use grpc::GrpcConfig;
pub use keyed::KeyedConfig;
pub use limiter::{LimiterConfig, LimitersConfig};
pub use live::{LiveLimiters, LiveOptions};
pub use overrides::{OverrideConfig, OverrideKind, MAX_OVERRIDES};
pub use policy::PolicyConfig;
pub use server::ServerConfig;

use tree::Format;

/// Read any type serde reads from TOML, with this module's errors: the
/// field's path, the value as written, what is allowed, and the line. For
/// a service's own configuration file that embeds limiters (or anything
/// else).
///
/// # Errors
///
/// A [`ConfigFileError`] for a syntax error or a field serde refuses.
///
/// # Examples
///
/// ```
/// use rheostat::config::{parse_toml, PolicyConfig};
///
/// #[derive(serde::Deserialize)]
/// struct Service {
///     port: u16,
///     payments: PolicyConfig,
/// }
///
/// let err = parse_toml::<Service>("port = 8080\n[payments]\npolicy = \"aimd\"\nbackof = 0.5")
///     .err()
///     .unwrap();
/// assert_eq!((err.field(), err.line()), ("payments.backof", Some(4)));
/// ```
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, ConfigFileError> {
    parse::parse(text, Format::Toml)
}

/// The line (from 1) of the deepest part of `field` (a dotted path, `[i]`
/// for an array element) that the TOML document `text` holds; `None` if
/// none of it is there or the text does not parse. For errors of one's own
/// that name a field of a file, with its line.
///
/// ```
/// let text = "[limiters.payments.policy]\npolicy = \"aimd\"\nbackoff = 0.5\n";
/// assert_eq!(rheostat::config::toml_line(text, "limiters.payments.policy.backoff"), Some(3));
/// ```
pub fn toml_line(text: &str, field: &str) -> Option<usize> {
    locate::Document::parse(text, Format::Toml).find(field).line
}
