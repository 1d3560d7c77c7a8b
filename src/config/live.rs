//! [`LiveLimiters`]: the limiters of a file that can change while they run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};
use std::time::{Duration, SystemTime};

use super::read::{Reading, Seen};
use super::tree::Format;
use super::{ConfigFileError, LimiterConfig, LimitersConfig};
use crate::algorithms::{Algorithm, ConfigError};
use crate::limiter::{Builder, DynLimiter};
use crate::overrides::Override;

mod overriding;

use overriding::{Breakers, Fleet};

/// What each limiter is given before it is built: observers, metrics.
type Each = dyn Fn(Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>> + Send + Sync;

/// The limiters of a configuration file, kept up to date with it while
/// they run: the embedded way to change a limit, a policy or an override
/// without a deploy, on one machine.
///
/// [`LiveLimiters::reload`] reads the file again and applies it as a
/// whole, or not at all:
///
/// - a limiter whose `policy` table changed gets the new policy, swapped
///   in as [`Limiter::update`](crate::Limiter::update) swaps one: calls in
///   flight finish and are counted against the limit as before (the
///   in-flight count is the limiter's, not the policy's); the new policy
///   starts from its own initial state (a breaker closed, an adaptive limit
///   at its `initial`);
/// - a limiter the file now lists is built; one it no longer lists leaves
///   the set (callers holding it keep a working limiter, no longer
///   updated);
/// - each limiter's [`[[overrides]]`](super::OverrideConfig) that applies to this
///   instance's labels and has not ended is set on it, and one the file no
///   longer holds is cleared;
/// - a change to a limiter's other options (its queue, timeout, retry,
///   priorities…) is refused: they are fixed when a limiter is built, and
///   the error says so, naming the field;
/// - a file that does not read, does not check, or was deleted is refused
///   with the usual error ([`ConfigFileError`]: the file, the field, the
///   line), and the last good configuration stays in force; so is
///   anything at the path but a regular file (a symbolic link to one is
///   followed): a FIFO, a device, a socket or a directory is refused
///   before it is opened, and the file is opened without waiting, so
///   nothing put in its place can block the reader;
/// - bytes as last read are not parsed again: a file whose size, times and
///   inode are as when last read, once it had been quiet for 2 s, is not
///   even read; otherwise its bytes are compared, by a hash, with those
///   last read. Bytes unchanged that applied apply only what time changes
///   (an override ended); bytes unchanged that were refused are refused
///   again, and parsed again once a minute (a refusal can lapse: an
///   override too far ahead comes within a week).
///
/// **Write the file elsewhere and rename it into place** (`mv new.toml
/// limits.toml`, on the same file system): a rename is atomic, so a reader
/// sees the old file or the new one, never part of one. A file edited in
/// place is read until it is settled: one changed in the last 2 s is read
/// again 100 ms later, and applies only when two reads agree (after 10
/// reads that do not, the reload is refused), so a writer that truncates
/// the file and writes it in a few calls in a row is never applied half
/// written; one that pauses longer mid-file can be.
///
/// [`LiveLimiters::watch`] does this every period on a thread of its own,
/// and ends overrides on time with no traffic; it logs each reload refused
/// (with the `tracing` feature, at `WARN`) and counts reloads in
/// `rheostat_config_reloads_total{file, result}` (with the `metrics`
/// feature), by what they did, not by what was read:
///
/// - `"applied"`: a change applied, which makes a new version (a
///   limiter's policy swapped, a limiter built or gone, an override set,
///   cleared or ended): [`LiveLimiters::reload`] answered `Ok(true)`;
/// - `"unchanged"`: nothing to apply (`Ok(false)`): the bytes in force,
///   not parsed again, or new bytes that say what is in force (a comment,
///   spacing, keys in another order, a value written as its default);
/// - `"refused"`: an error, the last good configuration kept.
///
/// A file polled every period and never edited counts only `"unchanged"`;
/// the reloads counted `"applied"` are the versions after the first, as
/// `rheostat_config_version{file}` shows them (the version in force: 1
/// after loading, one more per change applied).
///
/// # Examples
///
/// ```
/// use rheostat::config::LiveLimiters;
///
/// let dir = std::env::temp_dir().join(format!("rheostat-live-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("limits.toml");
/// std::fs::write(&path, "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 8\n")?;
/// let live = LiveLimiters::load(&path)?;
/// let payments = live.get("payments").unwrap();
/// assert_eq!(payments.gate().limit, 8);
/// // An operator edits the file: the running limiter follows.
/// std::fs::write(&path, "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 3\n")?;
/// assert!(live.reload()?);
/// assert_eq!(payments.gate().limit, 3);
/// // A bad edit is refused, with its line; the last good file stays.
/// std::fs::write(&path, "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 0\n")?;
/// let e = live.reload().unwrap_err();
/// assert_eq!((e.field(), e.line()), ("limiters.payments.policy.limit", Some(3)));
/// assert_eq!(payments.gate().limit, 3);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct LiveLimiters {
    path: PathBuf,
    labels: BTreeMap<String, String>,
    each: Option<Box<Each>>,
    state: Mutex<State>,
    /// What the last read of the file found; held while a reload reads and
    /// parses, outside the state's lock.
    seen: Mutex<Seen>,
}

/// What the file last applied.
struct State {
    file: LimitersConfig,
    limiters: BTreeMap<String, Arc<DynLimiter>>,
    /// The override the file or the fleet set on each limiter, and its end.
    overridden: BTreeMap<String, (Override, SystemTime)>,
    /// The fleet's overrides, last handed over
    /// ([`LiveLimiters::set_fleet_overrides`]).
    fleet: Fleet,
    version: u64,
}

/// How to load a [`LiveLimiters`]: this instance's labels, and what each
/// limiter is given before it is built.
#[must_use]
pub struct LiveOptions {
    path: PathBuf,
    labels: BTreeMap<String, String>,
    each: Option<Box<Each>>,
}

impl LiveOptions {
    /// This instance carries the label `key = value`: the overrides whose
    /// `instances` name labels apply only where every one matches.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Give each limiter `f` before it is built (`|b| b.metrics()`), on
    /// load and whenever a reload builds one.
    pub fn each(
        mut self,
        f: impl Fn(Builder<Box<dyn Algorithm>>) -> Builder<Box<dyn Algorithm>> + Send + Sync + 'static,
    ) -> Self {
        self.each = Some(Box::new(f));
        self
    }

    /// Read the file, check it and build its limiters.
    ///
    /// # Errors
    ///
    /// The file's [`ConfigFileError`]; or a limiter that does not build,
    /// or an override it cannot take, named by its place in the file.
    pub fn load(self) -> Result<LiveLimiters, ConfigFileError> {
        let live = LiveLimiters {
            path: self.path,
            labels: self.labels,
            each: self.each,
            state: Mutex::new(State {
                file: LimitersConfig::default(),
                limiters: BTreeMap::new(),
                overridden: BTreeMap::new(),
                fleet: Fleet::default(),
                version: 0,
            }),
            seen: Mutex::new(Seen::new()),
        };
        live.read_and_apply()?;
        Ok(live)
    }
}

impl LiveLimiters {
    /// The limiters of the file at `path`, with no labels.
    ///
    /// # Errors
    ///
    /// As [`LiveOptions::load`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ConfigFileError> {
        Self::options(path).load()
    }

    /// Options for the file at `path`, to [`load`](LiveOptions::load).
    pub fn options(path: impl AsRef<Path>) -> LiveOptions {
        LiveOptions {
            path: path.as_ref().to_path_buf(),
            labels: BTreeMap::new(),
            each: None,
        }
    }

    /// The limiter the file lists as `name`. It takes a lock: keep the
    /// `Arc` (it follows every later version of the file) rather than ask
    /// on every call.
    pub fn get(&self, name: &str) -> Option<Arc<DynLimiter>> {
        self.lock().limiters.get(name).cloned()
    }

    /// The names of the limiters, in order.
    pub fn names(&self) -> Vec<String> {
        self.lock().limiters.keys().cloned().collect()
    }

    /// How many versions of the file have been applied (1 after loading).
    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// The configuration in force: the last file applied.
    pub fn config(&self) -> LimitersConfig {
        self.lock().file.clone()
    }

    /// Read the file again and apply it, as a whole or not at all: `true`
    /// if it changed anything, `false` if it is as last applied. Bytes as
    /// last read are not parsed again; a file changed in the last 2 s is
    /// read until two reads 100 ms apart agree (see [`LiveLimiters`]: write
    /// the file elsewhere and rename it into place).
    ///
    /// It blocks while it reads, waits for the file to settle (a second at
    /// most) and parses: from async code, call it where blocking is allowed
    /// (`tokio::task::spawn_blocking`), or let [`LiveLimiters::watch`] call
    /// it on a thread of its own.
    ///
    /// # Errors
    ///
    /// The file's [`ConfigFileError`] (unreadable, deleted, invalid), or a
    /// change that cannot be applied to a running limiter, with its place
    /// in the file. The last good configuration stays in force.
    pub fn reload(&self) -> Result<bool, ConfigFileError> {
        let result = self.read_and_apply();
        self.count(&result);
        result
    }

    /// Read the file, unless it is as last read, and apply it: whether it
    /// changed anything.
    fn read_and_apply(&self) -> Result<bool, ConfigFileError> {
        let format = LimitersConfig::format_of(&self.path)?;
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match seen.read(&self.path)? {
            Reading::Unchanged => {
                // The bytes in force, not parsed again: only what time
                // changes (an override that ended) is applied.
                let file = self.config();
                self.apply(file)
                    .map_err(|e| e.in_text("", format, &self.path))
            }
            Reading::Refused(e) => Err(e),
            Reading::Changed(read) => {
                let result = LimitersConfig::parse(&read.text, format)
                    .map_err(|e| e.in_file(&self.path))
                    .and_then(|file| {
                        self.apply(file)
                            .map_err(|e| e.in_text(&read.text, format, &self.path))
                    });
                seen.record(&read, result.as_ref().err());
                result
            }
        }
    }

    /// Reload every `every` (an unchanged file applies nothing), logging
    /// and counting each reload refused, and end each override on time.
    /// Runs until dropped: spawn it.
    ///
    /// Each reload runs on a thread of its own (the file read, settled,
    /// parsed and applied there), and one still under way when the next
    /// period comes is left to finish rather than started again: nothing
    /// at the file's path, however slow or hostile, stalls the runtime the
    /// watch runs on.
    ///
    /// ```no_run
    /// # async fn run(live: std::sync::Arc<rheostat::config::LiveLimiters>) {
    /// tokio::spawn(std::sync::Arc::clone(&live).watch(std::time::Duration::from_secs(5)));
    /// # }
    /// ```
    pub async fn watch(self: Arc<Self>, every: Duration) {
        let every = every.max(Duration::from_millis(10));
        let mut reading: Option<std::thread::JoinHandle<()>> = None;
        loop {
            tokio::time::sleep(every).await;
            // Read, parse and apply on a thread of their own, one at a time:
            // nothing the file does (a FIFO, a slow disk, a large file) stalls
            // this task's thread, and a reload still under way is not started
            // again.
            if reading
                .as_ref()
                .is_none_or(std::thread::JoinHandle::is_finished)
            {
                let live = Arc::clone(&self);
                reading = std::thread::Builder::new()
                    .name("rheostat-live".to_owned())
                    .spawn(move || live.reload_logged())
                    .ok();
            }
            // Not while a reload holds the state: the next period will.
            let limiters: Vec<_> = match self.state.try_lock() {
                Ok(state) => state.limiters.values().cloned().collect(),
                Err(TryLockError::Poisoned(state)) => {
                    state.into_inner().limiters.values().cloned().collect()
                }
                Err(TryLockError::WouldBlock) => continue,
            };
            for limiter in limiters {
                limiter.wake();
            }
        }
    }

    /// [`LiveLimiters::reload`], logging a refusal.
    fn reload_logged(&self) {
        if let Err(_e) = self.reload() {
            #[cfg(feature = "tracing")]
            ::tracing::warn!(file = %self.path.display(), error = %_e, "configuration reload refused");
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Count a reload by what it did: a change applied, nothing to apply,
    /// or refused (see [`LiveLimiters`]).
    fn count(&self, _result: &Result<bool, ConfigFileError>) {
        #[cfg(feature = "metrics")]
        {
            ::metrics::describe_counter!(
                "rheostat_config_reloads_total",
                "Reloads of a live configuration file, by result: applied (a change, a new version), unchanged (nothing to apply) or refused"
            );
            ::metrics::describe_gauge!(
                "rheostat_config_version",
                "How many versions of the live configuration file have been applied"
            );
            let result = match _result {
                Ok(true) => "applied",
                Ok(false) => "unchanged",
                Err(_) => "refused",
            };
            let file = self.path.display().to_string();
            ::metrics::counter!(
                "rheostat_config_reloads_total",
                "file" => file.clone(),
                "result" => result
            )
            .increment(1);
            #[allow(clippy::cast_precision_loss, reason = "a count of reloads")]
            ::metrics::gauge!("rheostat_config_version", "file" => file).set(self.version() as f64);
        }
    }

    /// Apply `file` to the running limiters, or nothing of it.
    fn apply(&self, file: LimitersConfig) -> Result<bool, Located> {
        let mut state = self.lock();
        let now = SystemTime::now();
        let mut breakers = Breakers::default();
        let overrides = self.wanted(&file, &state.fleet.overrides, &mut breakers, now);
        if state.version > 0 && file == state.file && overrides == state.overridden {
            return Ok(false);
        }
        // Everything that can fail, first.
        let mut swaps = Vec::new();
        let mut built = Vec::new();
        for (name, config) in &file.limiters {
            let location = format!("limiters.{name}");
            match (state.limiters.get(name), state.file.limiters.get(name)) {
                (Some(limiter), Some(old)) if old != config => {
                    same_options(old, config).map_err(|e| Located(location.clone(), e))?;
                    let policy = config
                        .policy
                        .build()
                        .map_err(|e| Located(format!("{location}.policy"), e))?;
                    swaps.push((Arc::clone(limiter), policy));
                }
                (Some(_), _) => {}
                (None, _) => {
                    let builder = file.builder(name).map_err(|e| Located(String::new(), e))?;
                    let builder = match &self.each {
                        Some(each) => each(builder),
                        None => builder,
                    };
                    let limiter = builder.build().map_err(|e| Located(location.clone(), e))?;
                    built.push((name.clone(), Arc::new(limiter)));
                }
            }
        }
        self.check_overrides(&file, &file.overrides, &mut breakers, now)?;
        // Then the changes, none of which fails.
        for (limiter, policy) in swaps {
            limiter.update(move |running| *running = policy);
        }
        state.limiters.extend(built);
        state
            .limiters
            .retain(|name, _| file.limiters.contains_key(name));
        self.set_overrides(&mut state, overrides, now);
        state.file = file;
        state.version += 1;
        breakers.version = state.version;
        state.fleet.breakers = breakers;
        #[cfg(feature = "tracing")]
        ::tracing::info!(file = %self.path.display(), version = state.version, "configuration applied");
        Ok(true)
    }
}

impl fmt::Debug for LiveOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveOptions")
            .field("path", &self.path)
            .field("labels", &self.labels)
            .field("each", &self.each.is_some())
            .finish()
    }
}

impl fmt::Debug for LiveLimiters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("LiveLimiters")
            .field("path", &self.path)
            .field("labels", &self.labels)
            .field("limiters", &state.limiters.keys().collect::<Vec<_>>())
            .field("version", &state.version)
            .finish_non_exhaustive()
    }
}

/// An error at a place in the file.
struct Located(String, ConfigError);

impl Located {
    /// The error of the file at `path`, whose `text` it was found in, with
    /// its line.
    fn in_text(self, text: &str, format: Format, path: &Path) -> ConfigFileError {
        ConfigFileError::invalid(text, format, &self.0, &self.1).in_file(path)
    }
}

/// The options of `new` other than its policy are those of `old`; the first
/// that is not is named.
fn same_options(old: &LimiterConfig, new: &LimiterConfig) -> Result<(), ConfigError> {
    let as_table = |c: &LimiterConfig| {
        let mut c = c.clone();
        c.policy = old.policy.clone();
        serde_json::to_value(c).unwrap_or_default()
    };
    let (old_table, new_table) = (as_table(old), as_table(new));
    let (Some(a), Some(b)) = (old_table.as_object(), new_table.as_object()) else {
        return Ok(());
    };
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        if a.get(key) != b.get(key) {
            let shown = |v: Option<&serde_json::Value>| {
                v.map_or_else(|| "its default".to_owned(), ToString::to_string)
            };
            return Err(ConfigError::new(
                key.clone(),
                format_args!("{} (was {})", shown(b.get(key)), shown(a.get(key))),
                "the value it had when the limiter was built: only `policy` and `[[overrides]]` change while it runs; restart for the rest",
            ));
        }
    }
    Ok(())
}
