//! One limiter per key — per dependency, route, tenant or model — made by a
//! factory on first use.
//!
//! [`KeyedLimiters`] hands out an `Arc<DynLimiter<C>>` per key, building it
//! the first time the key is asked for from the [`Builder`] its factory
//! makes for the key: a closure from the key to a builder, which picks the
//! policy, names the limiter, and attaches what it observes with. The
//! number of keys is capped; limiters left idle are evicted to make room,
//! but never one that is in use or whose breaker is not closed:
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
//! Metrics are the factory's to attach, and a series cannot be removed
//! once published: a factory that gives each key `Builder::metrics`
//! labels its series with the key, and they stay after the key is evicted.
//! To keep the number of series bounded whatever keys clients send, let
//! the keys share one set of series, labelled by what the factory chose
//! rather than by the key (`Builder::metrics_summed` with the `metrics`
//! feature; the `config` feature's `KeyedConfig::metrics` labels a key
//! configured by name with its name and every other key
//! `limiter="default"`). The `metrics` module lists the series.
//!
//! With the `config` feature, `KeyedConfig` is a factory read from a
//! configuration: a default and a configuration per key.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use rheostat::algorithms::{Aimd, AimdConfig, Algorithm, Fixed};
//! use rheostat::keyed::KeyedLimiters;
//! use rheostat::Limiter;
//!
//! // A fixed limit for the large model, AIMD for every other.
//! let models = KeyedLimiters::builder(|model: &String| {
//!     let policy: Box<dyn Algorithm> = match model.as_str() {
//!         "gpt-large" => Box::new(Fixed::new(4)?),
//!         _ => Box::new(Aimd::new(AimdConfig::default())?),
//!     };
//!     Ok(Limiter::builder(policy).name(model.clone()))
//! })
//! .max_keys(100)
//! .idle_timeout(Duration::from_secs(600))
//! .build()?;
//!
//! let large = models.get("gpt-large")?;
//! assert_eq!(large.gate().limit, 4);
//! assert_eq!(large.name(), "gpt-large");
//! let small = models.get("gpt-small")?;
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
use crate::limiter::{Builder, DynLimiter};

// Defined with the core errors: `CallError::NoLimiter` carries it, and the
// core does not import this module.
pub use crate::error::KeyedError;

/// The keys a [`KeyedLimiters`] holds at most, unless told otherwise.
pub const DEFAULT_MAX_KEYS: usize = 10_000;

/// How long a limiter must go unasked-for before it may be evicted, unless
/// told otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// The factory: the builder of a key's limiter.
type Make<K> = Box<dyn Fn(&K) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> + Send + Sync>;

/// One limiter per key, created on first use; see the [module
/// documentation](self).
///
/// The clock `C` is every limiter's clock and tells how long a limiter has
/// been idle: with a [`ManualClock`](crate::ManualClock), keyed limiters run
/// in virtual time.
pub struct KeyedLimiters<K, C = DefaultClock> {
    make: Make<K>,
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
    make: Make<K>,
    max_keys: usize,
    idle_timeout: Duration,
    clock: C,
}

impl<K> KeyedLimiters<K, DefaultClock> {
    /// Start building: the limiter of a key is built, the first time the
    /// key is asked for, from the [`Builder`] `make` returns for it.
    ///
    /// `make` picks the policy and the options, names the limiter (after
    /// the key, say: a builder not named is `"default"`) and attaches its
    /// observers; the keyed set gives the builder its [clock](KeyedBuilder::clock)
    /// and builds it. It runs under the lock of the keyed set's map, once
    /// per new key: keep it short, and never ask the same set for a key
    /// from it.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::algorithms::{Algorithm, Fixed};
    /// use rheostat::keyed::KeyedLimiters;
    /// use rheostat::Limiter;
    ///
    /// let tenants = KeyedLimiters::builder(|tenant: &u64| {
    ///     let policy: Box<dyn Algorithm> = Box::new(Fixed::new(8)?);
    ///     Ok(Limiter::builder(policy).name(tenant.to_string()))
    /// })
    /// .build()?;
    /// assert_eq!(tenants.get(&42)?.name(), "42");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn builder<F>(make: F) -> KeyedBuilder<K, DefaultClock>
    where
        F: Fn(&K) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> + Send + Sync + 'static,
    {
        KeyedBuilder {
            make: Box::new(make),
            max_keys: DEFAULT_MAX_KEYS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            clock: DefaultClock::default(),
        }
    }
}

impl<K, C: Clock> KeyedBuilder<K, C> {
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

    /// Read time from `clock` instead of the system clock: each limiter's
    /// clock (over the one its builder had), and the one idle time is told
    /// by.
    pub fn clock<D: Clock + Clone>(self, clock: D) -> KeyedBuilder<K, D> {
        KeyedBuilder {
            make: self.make,
            max_keys: self.max_keys,
            idle_timeout: self.idle_timeout,
            clock,
        }
    }

    /// Check the options and build. Each key's limiter is built, and its
    /// options checked, when the key is first asked for.
    ///
    /// # Errors
    ///
    /// `keyed.max_keys` of 0, `keyed.idle_timeout` zero or over a year.
    pub fn build(self) -> Result<KeyedLimiters<K, C>, ConfigError> {
        if self.max_keys == 0 {
            return Err(ConfigError::new(
                "keyed.max_keys",
                0,
                "a whole number above 0",
            ));
        }
        check::duration("keyed.idle_timeout", self.idle_timeout)?;
        Ok(KeyedLimiters {
            make: self.make,
            max_keys: self.max_keys,
            idle_timeout: self.idle_timeout,
            clock: self.clock,
            entries: Mutex::new(HashMap::new()),
        })
    }
}

impl<K, C> KeyedLimiters<K, C>
where
    K: Eq + Hash + Clone,
    C: Clock + Clone,
{
    /// The limiter for `key`, built on first use.
    ///
    /// # Errors
    ///
    /// [`KeyedError::Full`] if `key` is new and, after evicting idle
    /// limiters, the cap is still reached; [`KeyedError::Config`] if the
    /// factory refuses the key, or the builder it returns cannot build.
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
        let key = key.to_owned();
        let limiter = Arc::new((self.make)(&key)?.clock(self.clock.clone()).build()?);
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
            .field("max_keys", &self.max_keys)
            .field("idle_timeout", &self.idle_timeout)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}
