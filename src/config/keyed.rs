//! [`KeyedConfig`]: keyed limiters made from configuration, a default and
//! a configuration per key.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;

use super::{LimiterConfig, LimitersConfig};
use crate::algorithms::{Algorithm, ConfigError};
use crate::keyed::{KeyedBuilder, KeyedLimiters};
use crate::limiter::Builder;
#[cfg(feature = "metrics")]
use crate::metrics::SummedMetrics;

type Configure<K> =
    Arc<dyn Fn(&K, Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>> + Send + Sync>;

/// The factory of [keyed limiters](crate::keyed) that a configuration
/// describes: a key with a configuration of its own gets a limiter made
/// from it, every other key one made from the default, each named after its
/// key.
///
/// [`LimitersConfig::keyed`] reads one from a file (its `default` for keys
/// it does not list, its `limiters` by name); [`KeyedConfig::builder`]
/// checks every configuration and hands the factory to a
/// [`KeyedBuilder`], whose cap on keys, idle timeout and clock are set
/// there.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::algorithms::AimdConfig;
/// use rheostat::config::{KeyedConfig, LimiterConfig, PolicyConfig};
///
/// let models = KeyedConfig::new(LimiterConfig::new(AimdConfig::default()))
///     .key("gpt-large".to_owned(), LimiterConfig::new(PolicyConfig::Fixed { limit: 4 }))
///     .builder()?
///     .max_keys(100)
///     .idle_timeout(Duration::from_secs(600))
///     .build()?;
///
/// let large = models.get("gpt-large")?;
/// assert_eq!(large.gate().limit, 4);
/// assert_eq!(large.name(), "gpt-large");
/// let small = models.get("gpt-small")?; // the default: AIMD
/// assert_eq!(small.snapshot().policy, "aimd");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[must_use]
pub struct KeyedConfig<K = String> {
    /// `None` only when read from a file without a `default`, which
    /// [`KeyedConfig::validate`] refuses.
    default: Option<LimiterConfig>,
    overrides: HashMap<K, LimiterConfig>,
    configure: Option<Configure<K>>,
    /// The series the keys made from the default share.
    #[cfg(feature = "metrics")]
    metrics: Option<SummedMetrics>,
}

impl<K> KeyedConfig<K>
where
    K: Eq + Hash + fmt::Display + Send + Sync + 'static,
{
    /// Keys without a configuration of their own get a limiter made from
    /// `default`.
    pub fn new(default: LimiterConfig) -> Self {
        KeyedConfig {
            default: Some(default),
            overrides: HashMap::new(),
            configure: None,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Give `key` its own configuration instead of the default.
    pub fn key(mut self, key: K, config: LimiterConfig) -> Self {
        self.overrides.insert(key, config);
        self
    }

    /// Adjust each limiter's [`Builder`] before it is built, given its key:
    /// attach an observer, set an option. It is already named after the key
    /// and has the options of its configuration (and the metrics of
    /// `KeyedConfig::metrics`, the `metrics` feature). For metrics, prefer
    /// `KeyedConfig::metrics`: a `.metrics()` here labels each key's series
    /// with the key, and they stay published after the key is evicted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::AimdConfig;
    /// use rheostat::config::{KeyedConfig, LimiterConfig};
    ///
    /// let tenants = KeyedConfig::<u64>::new(LimiterConfig::new(AimdConfig::default()))
    ///     .configure(|_tenant, limiter| limiter.max_wait(Duration::from_millis(50)))
    ///     .build()?;
    /// assert_eq!(tenants.get(&42)?.name(), "42");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configure(
        mut self,
        configure: impl Fn(&K, Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(configure));
        self
    }

    /// Record the keyed limiters' metrics through the `metrics` facade
    /// with a bounded number of series, whatever keys callers send: a key
    /// with a configuration of its own ([`KeyedConfig::key`], a file's
    /// `[limiters.NAME]`) is labelled `limiter=<key>`, as
    /// [`Builder::metrics`] labels it; every key made from the default
    /// shares the label `limiter="default"` (see
    /// [`KeyedConfig::metrics_labelled`]), whose counters, latencies and
    /// in-flight are summed over those keys, and which has no gauge of a
    /// limiter's own ([`SummedMetrics`]). See [`crate::metrics`].
    ///
    /// The shared series are registered now, with the recorder installed
    /// now: install it first (those of retries and classes, when the
    /// first key made from the default is built). A configured key's
    /// are registered when its limiter is built.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::config::{KeyedConfig, LimiterConfig, PolicyConfig};
    ///
    /// let hosts = KeyedConfig::<String>::new(LimiterConfig::new(PolicyConfig::Fixed { limit: 8 }))
    ///     .key("payments.example".to_owned(), LimiterConfig::new(PolicyConfig::Fixed { limit: 2 }))
    ///     .metrics()
    ///     .build()?;
    /// // Labelled `limiter="payments.example"`.
    /// hosts.get("payments.example")?.try_acquire()?.success();
    /// // Both labelled `limiter="default"`.
    /// hosts.get("a.example")?.try_acquire()?.success();
    /// hosts.get("b.example")?.try_acquire()?.success();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics(self) -> Self {
        self.metrics_labelled("default")
    }

    /// As [`KeyedConfig::metrics`], with the keys made from the default
    /// labelled `limiter=<label>` (pick a label that no configured key
    /// has, or their series mix).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::algorithms::AimdConfig;
    /// use rheostat::config::{KeyedConfig, LimiterConfig};
    ///
    /// let tenants = KeyedConfig::<u64>::new(LimiterConfig::new(AimdConfig::default()))
    ///     .metrics_labelled("tenants")
    ///     .build()?;
    /// tenants.get(&42)?.try_acquire()?.success(); // labelled `limiter="tenants"`
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "metrics")]
    pub fn metrics_labelled(mut self, label: impl Into<std::borrow::Cow<'static, str>>) -> Self {
        self.metrics = Some(SummedMetrics::new(label));
        self
    }

    /// Check the default and every key's configuration.
    ///
    /// # Errors
    ///
    /// With field `default` if there is none (a file without a `default`);
    /// otherwise a field of the default or of a key's configuration, named
    /// after it (`default.policy.backoff`, `<key>.policy.backoff`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let default = self.default.as_ref().ok_or_else(no_default)?;
        default.validate().map_err(|e| e.within("default"))?;
        for (key, config) in &self.overrides {
            config.validate().map_err(|e| e.within(&key.to_string()))?;
        }
        Ok(())
    }

    /// Check every configuration, and start building the keyed limiters
    /// with this as their factory.
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`].
    pub fn builder(self) -> Result<KeyedBuilder<K>, ConfigError> {
        self.validate()?;
        Ok(KeyedLimiters::builder(move |key: &K| self.make(key)))
    }

    /// Check every configuration and build the keyed limiters, with the
    /// default options of a [`KeyedBuilder`].
    ///
    /// # Errors
    ///
    /// As [`KeyedConfig::validate`].
    pub fn build(self) -> Result<KeyedLimiters<K>, ConfigError> {
        self.builder()?.build()
    }

    /// The builder of `key`'s limiter: from its own configuration or the
    /// default, named after it, with metrics and `configure` applied.
    fn make(&self, key: &K) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> {
        let own = self.overrides.get(key);
        let config = own.or(self.default.as_ref()).ok_or_else(no_default)?;
        let mut builder = config.builder(key.to_string())?;
        #[cfg(feature = "metrics")]
        if let Some(shared) = &self.metrics {
            builder = if own.is_some() {
                builder.metrics()
            } else {
                builder.metrics_summed(shared)
            };
        }
        if let Some(configure) = &self.configure {
            builder = configure(key, builder);
        }
        Ok(builder)
    }
}

impl LimitersConfig {
    /// The factory of keyed limiters this file describes: its `default`
    /// for the keys it does not list, its `limiters` by name. A file
    /// without a `default` is refused when it is checked
    /// ([`KeyedConfig::builder`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::config::LimitersConfig;
    ///
    /// let file = LimitersConfig::from_toml(r#"
    ///     [default.policy]
    ///     policy = "aimd"
    ///     [limiters.search.policy]
    ///     policy = "fixed"
    ///     limit = 3
    /// "#)?;
    /// let routes = file.keyed().build()?;
    /// assert_eq!(routes.get("search")?.gate().limit, 3);
    /// assert_eq!(routes.get("/checkout")?.snapshot().policy, "aimd");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keyed(&self) -> KeyedConfig<String> {
        KeyedConfig {
            default: self.default.clone(),
            overrides: self
                .limiters
                .iter()
                .map(|(name, config)| (name.clone(), config.clone()))
                .collect(),
            configure: None,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }
}

/// The error of a configuration without a default.
fn no_default() -> ConfigError {
    ConfigError::new(
        "default",
        "nothing",
        "a default limiter for keys not listed",
    )
}

impl<K> fmt::Debug for KeyedConfig<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("KeyedConfig");
        d.field("default", &self.default)
            .field("overrides", &self.overrides.len())
            .field("configure", &self.configure.is_some());
        #[cfg(feature = "metrics")]
        d.field("metrics", &self.metrics);
        d.finish()
    }
}
