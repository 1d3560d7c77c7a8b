//! One limiter per key — per dependency, route, tenant or model — created
//! from configuration on first use.
//!
//! [`KeyedLimiters`] hands out an `Arc<DynLimiter<C>>` per key, building it the
//! first time the key is asked for from the key's own [`LimiterConfig`] or
//! the default, and named after the key. The number of keys is capped; limiters left idle are evicted to make
//! room, but never one that is in use or whose breaker is not closed:
//!
//! - a limiter is **idle** when nobody holds it (no `Arc` handed out is still
//!   alive, so no call, permit or service is using it), no call is in
//!   flight, and it has not been asked for in the idle timeout;
//! - a limiter whose breaker is open, half-open or forced open, or whose
//!   gate is shut, is **kept**: evicting it would forget an outage and send
//!   a fresh, closed limiter's full traffic at a dependency that is down.
//!
//! Eviction runs when a new key finds the map full, and whenever
//! [`KeyedLimiters::evict_idle`] is called (from a periodic task, say). A
//! full map first evicts the idle limiters; if none is, it evicts the least
//! recently used eighth of those that may go (not held, nothing in flight,
//! not kept), idle timeout or not, so that a flood of new keys — junk keys
//! from a hostile client, re-touched to stay recent — cannot lock out the
//! next legitimate one: a new key is refused with [`KeyedError::Full`] only
//! when every limiter held is in use or kept. The price, under such a
//! flood, is that limiters not in use lose what they learnt (an adaptive
//! limit starts again from its initial value); what they must not forget,
//! an open breaker, is kept. The scan that finds the eighth is linear in
//! the keys held and runs once per eighth of the cap, so a new key costs
//! a constant amount on average however hard the map is flooded.
//!
//! Each key costs about 0.9 KB with a fixed limit, 1.6 KB with a breaker
//! and 1.7 KB with AIMD, its name and its place in the map included (peak
//! resident memory of a process holding 100,000 keys, divided by them): at
//! the default cap of 10,000 keys, under 20 MB. Keys come from requests: key by what
//! the server knows (a configured route, an authenticated tenant) where
//! you can, not by a value the client writes.
//!
//! Metrics, with `KeyedBuilder::metrics` (the `metrics` feature), are
//! labelled by configuration, not by key: a key configured by name has
//! series labelled with it, and every key made from the default shares the
//! label `limiter="default"`, its counters and in-flight summed. A series
//! cannot be removed once published, so this keeps the number of series
//! bounded by the names in the configuration while keys chosen by clients
//! come and are evicted (the `metrics` module lists the series).
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use rheostat::algorithms::AimdConfig;
//! use rheostat::config::{LimiterConfig, PolicyConfig};
//! use rheostat::keyed::KeyedLimiters;
//!
//! let models = KeyedLimiters::<String>::builder(LimiterConfig::new(AimdConfig::default()))
//!     .key("gpt-large".to_owned(), LimiterConfig::new(PolicyConfig::Fixed { limit: 4 }))
//!     .max_keys(100)
//!     .idle_timeout(Duration::from_secs(600))
//!     .build()?;
//!
//! let large = models.get("gpt-large")?;
//! assert_eq!(large.gate().limit, 4);
//! assert_eq!(large.name(), "gpt-large");
//! let small = models.get("gpt-small")?; // the default: AIMD
//! assert_eq!(small.snapshot().policy, "aimd");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::algorithms::{check, Algorithm, BreakerState, ConfigError};
use crate::clock::{Clock, DefaultClock};
use crate::config::{LimiterConfig, LimitersConfig};
use crate::limiter::{Builder, DynLimiter};

// Defined with the core errors: `CallError::NoLimiter` carries it whatever
// the features, and the core does not import this module.
pub use crate::error::KeyedError;

/// The keys a [`KeyedLimiters`] holds at most, unless told otherwise.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// How long a limiter must go unasked-for before it may be evicted, unless
/// told otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

type Configure<K> =
    Box<dyn Fn(&K, Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>> + Send + Sync>;

/// Attaches an adapter (metrics) to a limiter about to be built, told
/// whether its key has a configuration of its own.
pub(crate) type Instrument =
    Box<dyn Fn(bool, Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>> + Send + Sync>;

/// One limiter per key, created on first use; see the [module
/// documentation](self).
///
/// The clock `C` is every limiter's clock and tells how long a limiter has
/// been idle: with a [`ManualClock`](crate::ManualClock), keyed limiters run
/// in virtual time.
pub struct KeyedLimiters<K, C = DefaultClock> {
    default: LimiterConfig,
    overrides: HashMap<K, LimiterConfig>,
    configure: Option<Configure<K>>,
    instrument: Option<Instrument>,
    max_keys: usize,
    idle_timeout: Duration,
    clock: C,
    entries: Mutex<HashMap<K, Entry<C>>>,
}

struct Entry<C> {
    limiter: Arc<DynLimiter<C>>,
    last_used: Instant,
}

/// Builds a [`KeyedLimiters`]; see [`KeyedLimiters::builder`].
#[must_use]
pub struct KeyedBuilder<K, C = DefaultClock> {
    default: LimiterConfig,
    overrides: HashMap<K, LimiterConfig>,
    configure: Option<Configure<K>>,
    instrument: Option<Instrument>,
    max_keys: usize,
    idle_timeout: Duration,
    clock: C,
}

impl<K> KeyedLimiters<K, DefaultClock>
where
    K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
{
    /// Start building: keys without a configuration of their own get a
    /// limiter made from `default`.
    pub fn builder(default: LimiterConfig) -> KeyedBuilder<K, DefaultClock> {
        KeyedBuilder {
            default,
            overrides: HashMap::new(),
            configure: None,
            instrument: None,
            max_keys: DEFAULT_MAX_KEYS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            clock: DefaultClock::default(),
        }
    }
}

impl KeyedBuilder<String, DefaultClock> {
    /// Start building from a file: its `default` for unlisted keys, its
    /// `limiters` by name.
    ///
    /// # Errors
    ///
    /// With field `default` if the file has none.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::config::LimitersConfig;
    /// use rheostat::keyed::KeyedBuilder;
    ///
    /// let file = LimitersConfig::from_toml(r#"
    ///     [default.policy]
    ///     policy = "aimd"
    ///     [limiters.search.policy]
    ///     policy = "fixed"
    ///     limit = 3
    /// "#)?;
    /// let routes = KeyedBuilder::from_config(&file)?.build()?;
    /// assert_eq!(routes.get("search")?.gate().limit, 3);
    /// assert_eq!(routes.get("/checkout")?.snapshot().policy, "aimd");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_config(file: &LimitersConfig) -> Result<Self, ConfigError> {
        let Some(default) = file.default.clone() else {
            return Err(ConfigError::new(
                "default",
                "nothing",
                "a default limiter for keys not listed",
            ));
        };
        let mut builder = KeyedLimiters::builder(default);
        builder.overrides = file
            .limiters
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Ok(builder)
    }
}

impl<K, C> KeyedBuilder<K, C>
where
    K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
    C: Clock,
{
    /// Give `key` its own configuration instead of the default.
    pub fn key(mut self, key: K, config: LimiterConfig) -> Self {
        self.overrides.insert(key, config);
        self
    }

    /// Hold at most `max_keys` limiters (default [`DEFAULT_MAX_KEYS`]).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Let a limiter be evicted once it has not been asked for in
    /// `idle_timeout` (default [`DEFAULT_IDLE_TIMEOUT`]) and is idle.
    pub fn idle_timeout(mut self, idle_timeout: Duration) -> Self {
        self.idle_timeout = idle_timeout;
        self
    }

    /// Adjust each limiter's [`Builder`] before it is built, given its key:
    /// attach an observer, set an option. It is already named after the key
    /// and has the options of its configuration. For metrics, prefer
    /// `KeyedBuilder::metrics` (the `metrics` feature): a `.metrics()` here
    /// labels each key's series with the key, and they stay published after
    /// the key is evicted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::algorithms::AimdConfig;
    /// use rheostat::config::LimiterConfig;
    /// use rheostat::keyed::KeyedLimiters;
    ///
    /// let tenants = KeyedLimiters::<u64>::builder(LimiterConfig::new(AimdConfig::default()))
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
        self.configure = Some(Box::new(configure));
        self
    }

    /// Attach `instrument` to every limiter before it is built, ahead of
    /// [`KeyedBuilder::configure`] (`KeyedBuilder::metrics` does).
    #[cfg_attr(
        not(feature = "metrics"),
        allow(dead_code, reason = "used by the metrics adapter")
    )]
    pub(crate) fn instrument(mut self, instrument: Instrument) -> Self {
        self.instrument = Some(instrument);
        self
    }

    /// Read time from `clock` instead of the system clock: each limiter's
    /// clock, and the one idle time is told by.
    pub fn clock<D: Clock + Clone>(self, clock: D) -> KeyedBuilder<K, D> {
        KeyedBuilder {
            default: self.default,
            overrides: self.overrides,
            configure: self.configure,
            instrument: self.instrument,
            max_keys: self.max_keys,
            idle_timeout: self.idle_timeout,
            clock,
        }
    }

    /// Check every configuration and build.
    ///
    /// # Errors
    ///
    /// `keyed.max_keys` of 0, `keyed.idle_timeout` zero or over a year, or a
    /// field of the default or of a key's configuration (named
    /// `default.policy.backoff`, `<key>.policy.backoff`).
    pub fn build(self) -> Result<KeyedLimiters<K, C>, ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                "keyed.max_keys",
                0,
                "a whole number above 0",
            ));
        }
        check::duration("keyed.idle_timeout", self.idle_timeout)?;
        self.default.validate().map_err(|e| e.within("default"))?;
        for (key, config) in &self.overrides {
            config.validate().map_err(|e| e.within(&key.to_string()))?;
        }
        Ok(KeyedLimiters {
            default: self.default,
            overrides: self.overrides,
            configure: self.configure,
            instrument: self.instrument,
            max_keys: self.max_keys,
            idle_timeout: self.idle_timeout,
            clock: self.clock,
            entries: Mutex::new(HashMap::new()),
        })
    }
}

impl<K, C> KeyedLimiters<K, C>
where
    K: Eq + Hash + Clone + fmt::Display + Send + Sync + 'static,
    C: Clock + Clone,
{
    /// The limiter for `key`, built on first use.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Full`] if `key` is new and, after evicting idle
    /// limiters, the cap is still reached; [`KeyedError::Config`] if the
    /// limiter cannot be built.
    pub fn get<Q>(&self, key: &Q) -> Result<Arc<DynLimiter<C>>, KeyedError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = self.clock.now();
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(key) {
            entry.last_used = now;
            return Ok(Arc::clone(&entry.limiter));
        }
        if entries.len() >= self.max_keys && !self.make_room(&mut entries, now) {
            return Err(KeyedError::Full {
                max_keys: self.max_keys,
            });
        }
        let own = self.overrides.get(key);
        let key = key.to_owned();
        let mut builder = own.unwrap_or(&self.default).builder(key.to_string())?;
        if let Some(instrument) = &self.instrument {
            builder = instrument(own.is_some(), builder);
        }
        if let Some(configure) = &self.configure {
            builder = configure(&key, builder);
        }
        let limiter = Arc::new(builder.clock(self.clock.clone()).build()?);
        entries.insert(
            key,
            Entry {
                limiter: Arc::clone(&limiter),
                last_used: now,
            },
        );
        Ok(limiter)
    }

    /// Evict every idle limiter (see the [module documentation](self)) and
    /// say how many went.
    pub fn evict_idle(&self) -> usize {
        let now = self.clock.now();
        let mut entries = self.lock();
        self.evict(&mut entries, now)
    }

    /// How many limiters are held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no limiter is held.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Whether a limiter for `key` is held now.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.lock().contains_key(key)
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    fn evict(&self, entries: &mut HashMap<K, Entry<C>>, now: Instant) -> usize {
        let before = entries.len();
        entries.retain(|_, entry| {
            now.saturating_duration_since(entry.last_used) < self.idle_timeout
                || !self.may_go(entry)
        });
        before - entries.len()
    }

    /// Room for one more key in a full map: the idle limiters go, or else
    /// the least recently used eighth of the cap (at least one) of those
    /// that may go. False if none may.
    fn make_room(&self, entries: &mut HashMap<K, Entry<C>>, now: Instant) -> bool {
        if self.evict(entries, now) > 0 {
            return true;
        }
        let mut candidates: Vec<(Instant, &K)> = entries
            .iter()
            .filter(|(_, entry)| self.may_go(entry))
            .map(|(key, entry)| (entry.last_used, key))
            .collect();
        if candidates.is_empty() {
            return false;
        }
        let n = (self.max_keys / 8).clamp(1, candidates.len());
        candidates.select_nth_unstable_by_key(n - 1, |&(used, _)| used);
        let going: Vec<K> = candidates[..n].iter().map(|&(_, k)| k.clone()).collect();
        for key in &going {
            entries.remove(key);
        }
        true
    }

    /// Whether a limiter may be evicted, idle or not: nobody holds it,
    /// nothing is in flight, and it is not kept.
    fn may_go(&self, entry: &Entry<C>) -> bool {
        let limiter = &entry.limiter;
        // Held elsewhere: a caller, an owned permit or a service still uses
        // it. New handles are only made under the map's lock, which is held.
        if Arc::strong_count(limiter) > 1 || limiter.in_flight() > 0 {
            return false;
        }
        // Apply a cooldown that has run out before judging the breaker.
        limiter.handle_timeout();
        let kept = matches!(
            limiter.snapshot().state,
            Some(BreakerState::Open | BreakerState::HalfOpen | BreakerState::ForcedOpen)
        );
        !kept && limiter.gate().limit > 0
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<K, Entry<C>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<K, C: fmt::Debug> fmt::Debug for KeyedLimiters<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        f.debug_struct("KeyedLimiters")
            .field("held", &held)
            .field("max_keys", &self.max_keys)
            .field("idle_timeout", &self.idle_timeout)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl<K, C: fmt::Debug> fmt::Debug for KeyedBuilder<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBuilder")
            .field("default", &self.default)
            .field("overrides", &self.overrides.len())
            .field("max_keys", &self.max_keys)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}
