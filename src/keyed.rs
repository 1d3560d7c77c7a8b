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
//! A key held is looked up under the map's read lock alone: the scan runs
//! under that read lock too (and a lock of its own, which new keys take
//! one at a time), and the map is locked to write only to insert the new
//! key and remove those going, so a lookup never waits behind a scan. A
//! map found full of limiters that may not go (10,000 open breakers, say)
//! is not scanned again for each new key: new keys are refused at once
//! until a second has passed, or until a sixteenth as many keys as the
//! scan judged have been refused, whichever comes first. A refused new key
//! then costs, on average, the judging of 16 limiters however large the
//! map, and room made meanwhile (a last handle dropped, a breaker closed),
//! which nothing announces, is found within that second.
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
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
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

/// How long, at most, a full map that a scan found with nothing that may go
/// refuses new keys without scanning again. It bounds how long room made
/// since (a limiter's last handle dropped, its breaker closed), which
/// nothing announces, goes unused. A second: next to a map full of outages
/// it is short, and a scan a second of 10,000 kept limiters is a few
/// milliseconds of work a second, off the lookups' path.
const FULL_RECHECK_AFTER: Duration = Duration::from_secs(1);

/// What a refused new key pays, on average, in limiters judged, in a full
/// map where nothing may go: a scan that judged `n` limiters is made again
/// only after `n / 16` new keys have been refused (or after
/// [`FULL_RECHECK_AFTER`]). 16 keeps a refusal's cost near that of a
/// few lookups however large the map, and a map of fewer than 16 keys is
/// scanned again for every new key, as if nothing were remembered.
const FULL_RECHECK_COST: usize = 16;

/// The factory: the builder of a key's limiter.
type Make<K> = Box<dyn Fn(&K) -> Result<Builder<Box<dyn Algorithm>>, ConfigError> + Send + Sync>;

/// One limiter per key, created on first use; see the [module
/// documentation](self).
///
/// The clock `C` is every limiter's clock and tells how long a limiter has
/// been idle: with a [`ManualClock`](crate::clock::ManualClock), keyed limiters run
/// in virtual time.
pub struct KeyedLimiters<K, C = DefaultClock> {
    make: Make<K>,
    max_keys: usize,
    idle_timeout: Duration,
    clock: C,
    /// The instant each entry's `last_used` counts from.
    epoch: Instant,
    /// The limiters by key. A lookup of a key held takes it to read; it is
    /// taken to write only to insert or remove keys, never for a scan.
    entries: RwLock<HashMap<K, Entry<C>>>,
    /// Taken to add a key or to evict, one at a time. A scan runs under it
    /// and under the map's read lock, so lookups of keys held go on.
    admit: Mutex<FullMap>,
}

struct Entry<C> {
    limiter: Arc<DynLimiter<C>>,
    /// When it was last asked for, in nanoseconds since `epoch`.
    last_used: AtomicU64,
    /// Asked for since the last scan judged it: a handle made since may have
    /// changed it (tripped its breaker) and been dropped, so it stays.
    touched: AtomicBool,
}

/// What the last scan of a full map found when nothing could go.
#[derive(Default)]
struct FullMap {
    /// When that scan ran, and how many limiters it judged.
    found: Option<(Instant, usize)>,
    /// New keys refused since, without a scan.
    refused: usize,
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
    /// and builds it. It runs under the lock new keys are added under, once
    /// per new key (lookups of keys held go on meanwhile): keep it short,
    /// and never ask the same set for a key from it.
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
            epoch: self.clock.now(),
            clock: self.clock,
            entries: RwLock::new(HashMap::new()),
            admit: Mutex::new(FullMap::default()),
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
    /// A key held is looked up under the map's read lock alone: it never
    /// waits for a new key's eviction scan.
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
        if let Some(limiter) = self.lookup(key, now) {
            return Ok(limiter);
        }
        let mut full = self.admit();
        // Added by another caller while this one waited.
        if let Some(limiter) = self.lookup(key, now) {
            return Ok(limiter);
        }
        if self.read().len() >= self.max_keys && !self.make_room(&mut full, now) {
            return Err(KeyedError::Full {
                max_keys: self.max_keys,
            });
        }
        let key = key.to_owned();
        let limiter = Arc::new((self.make)(&key)?.clock(self.clock.clone()).build()?);
        let entry = Entry {
            limiter: Arc::clone(&limiter),
            last_used: AtomicU64::new(self.tick(now)),
            touched: AtomicBool::new(true),
        };
        self.write().insert(key, entry);
        Ok(limiter)
    }

    /// Evict every idle limiter (see the [module documentation](self)) and
    /// say how many went.
    pub fn evict_idle(&self) -> usize {
        let now = self.clock.now();
        let mut full = self.admit();
        let (idle, _) = self.candidates(now, true);
        self.remove(&mut full, &idle)
    }

    /// How many limiters are held.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// Whether no limiter is held.
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Whether a limiter for `key` is held now.
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.read().contains_key(key)
    }

    /// The cap on keys.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The limiter held for `key`, marked as asked for `now`.
    fn lookup<Q>(&self, key: &Q, now: Instant) -> Option<Arc<DynLimiter<C>>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let entries = self.read();
        let entry = entries.get(key)?;
        let limiter = Arc::clone(&entry.limiter);
        entry.last_used.fetch_max(self.tick(now), Ordering::Relaxed);
        // After the handle is made: a scan that takes this mark sees the
        // handle, and one that comes before it is told by the mark.
        entry.touched.store(true, Ordering::SeqCst);
        Some(limiter)
    }

    /// Room for one more key in a full map: the idle limiters go, or else
    /// the least recently used eighth of the cap (at least one) of those
    /// that may go. False if none may.
    ///
    /// A scan that finds none is remembered: new keys are refused without
    /// one until [`FULL_RECHECK_AFTER`] has passed or a share of the
    /// limiters judged ([`FULL_RECHECK_COST`]) has been refused, so that a
    /// refusal costs a constant amount on average.
    fn make_room(&self, full: &mut FullMap, now: Instant) -> bool {
        if let Some((at, judged)) = full.found {
            let recent = now.saturating_duration_since(at) < FULL_RECHECK_AFTER;
            if recent && full.refused < judged / FULL_RECHECK_COST {
                full.refused += 1;
                return false;
            }
        }
        let (going, judged) = self.candidates(now, false);
        if self.remove(full, &going) > 0 {
            return true;
        }
        full.found = Some((now, judged));
        full.refused = 0;
        false
    }

    /// The limiters that may go, judged under the map's read lock: the idle
    /// ones, or (unless `only_idle`) if there are none, the least recently
    /// used eighth of the cap; and how many were judged.
    fn candidates(&self, now: Instant, only_idle: bool) -> (Vec<K>, usize) {
        let now = self.tick(now);
        let idle_for = u64::try_from(self.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
        let entries = self.read();
        let mut idle = Vec::new();
        let mut free: Vec<(u64, &K)> = Vec::new();
        for (key, entry) in entries.iter() {
            // Taken before judging: a handle made before this is seen below,
            // one made after marks the entry again.
            entry.touched.swap(false, Ordering::SeqCst);
            if !may_go(&entry.limiter) {
                continue;
            }
            let used = entry.last_used.load(Ordering::Relaxed);
            if now.saturating_sub(used) >= idle_for {
                idle.push(key.clone());
            } else if !only_idle {
                free.push((used, key));
            }
        }
        if idle.is_empty() && !free.is_empty() {
            let n = (self.max_keys / 8).clamp(1, free.len());
            free.select_nth_unstable_by_key(n - 1, |&(used, _)| used);
            idle = free[..n].iter().map(|&(_, key)| key.clone()).collect();
        }
        (idle, entries.len())
    }

    /// Remove `going`, but for a limiter asked for since it was judged, and
    /// say how many went.
    fn remove(&self, full: &mut FullMap, going: &[K]) -> usize {
        if going.is_empty() {
            return 0;
        }
        let mut entries = self.write();
        let before = entries.len();
        for key in going {
            let still = entries.get(key).is_some_and(|entry| {
                !entry.touched.load(Ordering::SeqCst) && Arc::strong_count(&entry.limiter) == 1
            });
            if still {
                entries.remove(key);
            }
        }
        let removed = before - entries.len();
        if removed > 0 {
            full.found = None;
        }
        removed
    }

    /// Nanoseconds from `epoch` to `now`.
    fn tick(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<K, Entry<C>>> {
        self.entries.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<K, Entry<C>>> {
        self.entries.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self) -> MutexGuard<'_, FullMap> {
        self.admit.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a limiter may be evicted, idle or not: nobody holds it, nothing
/// is in flight, and it is not kept.
fn may_go<C: Clock>(limiter: &Arc<DynLimiter<C>>) -> bool {
    // Held elsewhere: a caller, an owned permit or a service still uses it.
    if Arc::strong_count(limiter) > 1 || limiter.in_flight() > 0 {
        return false;
    }
    // What a handle dropped did to the limiter (tripped its breaker) is
    // seen below.
    fence(Ordering::Acquire);
    // Apply a cooldown that has run out before judging the breaker.
    limiter.wake();
    let kept = matches!(
        limiter.snapshot().state,
        Some(BreakerState::Open | BreakerState::HalfOpen | BreakerState::ForcedOpen)
    );
    !kept && limiter.gate().limit > 0
}

impl<K, C: fmt::Debug> fmt::Debug for KeyedLimiters<K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self
            .entries
            .read()
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
