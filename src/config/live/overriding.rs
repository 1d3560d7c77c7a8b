//! The overrides a [`LiveLimiters`] sets: which of the file's and the
//! fleet's wins for each limiter, and the fleet's, checked and handed
//! over with work in proportion to what changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use super::{LiveLimiters, Located, State};
use crate::algorithms::ConfigError;
use crate::config::overrides::MAX_OVERRIDES;
use crate::config::paths::located;
use crate::config::{LimiterConfig, LimitersConfig, OverrideConfig, OverrideKind};
use crate::overrides::Override;

/// Which limiters of one version of the file have a breaker for
/// `force_closed` to hold, as far as asked: each limiter's policy is built
/// once per version to find out, however many overrides name it.
#[derive(Debug, Default)]
pub(super) struct Breakers {
    /// The version of the file it answers for.
    pub(super) version: u64,
    known: BTreeMap<String, bool>,
}

impl Breakers {
    /// Forget what it knew unless it answers for `version`.
    pub(super) fn renew(&mut self, version: u64) {
        if self.version != version {
            *self = Breakers {
                version,
                known: BTreeMap::new(),
            };
        }
    }

    /// Whether `file`'s limiter `name` has a breaker.
    fn has(&mut self, file: &LimitersConfig, name: &str) -> bool {
        if let Some(&known) = self.known.get(name) {
            return known;
        }
        let known = file.limiters.get(name).is_some_and(has_breaker);
        self.known.insert(name.to_owned(), known);
        known
    }
}

/// The fleet's overrides, as last handed over and checked.
#[derive(Debug, Default)]
pub(super) struct Fleet {
    /// The overrides, shared so that a new list is compared with them
    /// outside the lock.
    pub(super) overrides: Arc<Vec<OverrideConfig>>,
    /// The version of the file they were checked against.
    checked_at: u64,
    /// For the file in force.
    pub(super) breakers: Breakers,
}

/// At most [`MAX_OVERRIDES`] in one list.
fn bounded(count: usize) -> Result<(), ConfigError> {
    if count > MAX_OVERRIDES {
        return Err(ConfigError::new(
            "overrides",
            format_args!("{count} overrides"),
            format!(
                "at most {MAX_OVERRIDES} overrides in one file or document: \
                 an incident's worth, each checked and applied on every change"
            ),
        ));
    }
    Ok(())
}

impl LiveLimiters {
    /// The override the file and the fleet set on each limiter on this
    /// instance now: the last in order (the file's, then the fleet's) that
    /// applies and has not ended.
    pub(super) fn wanted(
        &self,
        file: &LimitersConfig,
        fleet: &[OverrideConfig],
        breakers: &mut Breakers,
        now: SystemTime,
    ) -> BTreeMap<String, (Override, SystemTime)> {
        let mut wanted = BTreeMap::new();
        for o in file.overrides.iter().chain(fleet).rev() {
            if wanted.contains_key(&o.limiter)
                // A fleet's override of a limiter this file no longer lists.
                || !file.limiters.contains_key(&o.limiter)
                || !o.applies_to(&self.labels)
                || o.lasting(now).is_none()
            {
                continue;
            }
            let Ok(overriding) = o.overriding() else {
                continue;
            };
            // A fleet's, on a limiter this file made a policy without a
            // breaker since (a file's is refused).
            if overriding == Override::ForceClosed && !breakers.has(file, &o.limiter) {
                continue;
            }
            wanted.insert(o.limiter.clone(), (overriding, o.until));
        }
        wanted
    }

    /// `overrides` (the file's) are at most [`MAX_OVERRIDES`], and every
    /// one that applies here now and holds a breaker closed names a
    /// limiter of `file` with a breaker.
    pub(super) fn check_overrides(
        &self,
        file: &LimitersConfig,
        overrides: &[OverrideConfig],
        breakers: &mut Breakers,
        now: SystemTime,
    ) -> Result<(), Located> {
        bounded(overrides.len()).map_err(|e| Located(String::new(), e))?;
        for (i, o) in overrides.iter().enumerate() {
            if file.limiters.contains_key(&o.limiter) {
                self.check_force_closed(file, o, breakers, now)
                    .map_err(|e| Located(format!("overrides[{i}]"), e))?;
            }
        }
        Ok(())
    }

    /// `o`, if it applies here now and holds a breaker closed, names a
    /// limiter of `file` with a breaker.
    fn check_force_closed(
        &self,
        file: &LimitersConfig,
        o: &OverrideConfig,
        breakers: &mut Breakers,
        now: SystemTime,
    ) -> Result<(), ConfigError> {
        if o.kind == OverrideKind::ForceClosed
            && o.applies_to(&self.labels)
            && o.lasting(now).is_some()
            && !breakers.has(file, &o.limiter)
        {
            return Err(ConfigError::new(
                "kind",
                "\"force_closed\"",
                "an override a policy without a breaker can take: force_open, cap or metrics_only",
            ));
        }
        Ok(())
    }

    /// The fleet's override `o` names a limiter of `file` that can take it.
    fn check_fleet_override(
        &self,
        file: &LimitersConfig,
        o: &OverrideConfig,
        breakers: &mut Breakers,
        now: SystemTime,
    ) -> Result<(), ConfigError> {
        if !file.limiters.contains_key(&o.limiter) {
            return Err(ConfigError::new(
                "limiter",
                format_args!("`{}`", o.limiter),
                "a limiter this instance's file lists",
            ));
        }
        self.check_force_closed(file, o, breakers, now)
    }

    /// Set on each limiter the override `wanted` holds for it, clearing
    /// one it no longer holds.
    pub(super) fn set_overrides(
        &self,
        state: &mut State,
        wanted: BTreeMap<String, (Override, SystemTime)>,
        now: SystemTime,
    ) {
        state
            .overridden
            .retain(|name, _| state.limiters.contains_key(name));
        for (name, limiter) in &state.limiters {
            let want = wanted.get(name);
            if want == state.overridden.get(name) {
                continue;
            }
            match want.and_then(|&(o, until)| Some((o, until.duration_since(now).ok()?))) {
                Some((overriding, lasting)) => {
                    // Checked: a kind the policy takes, a lasting in range.
                    let _ = limiter.overrides().set(overriding, lasting);
                }
                None => limiter.overrides().clear(),
            }
        }
        state.overridden = wanted;
    }

    /// The fleet's overrides (from Redis, `config::fleet` with the `redis`
    /// feature, or from any store), checked as a whole at `now` (as
    /// [`check_fleet_overrides`](Self::check_fleet_overrides)) and applied
    /// with the file's, after them (the fleet's win for a limiter both
    /// name): `true` if a limiter's override changed.
    ///
    /// Only the overrides not in the list last handed over are checked
    /// (all of them after the file changed), outside the lock the limiters
    /// are looked up under, and only the limiters whose override changed
    /// are touched.
    ///
    /// # Errors
    ///
    /// More than [`MAX_OVERRIDES`](crate::config::MAX_OVERRIDES) overrides
    /// (field `overrides`), or an override naming a limiter the file does
    /// not list, out of range, or holding closed a policy without a
    /// breaker, named by its place in the list (`overrides[2].cap`). The
    /// overrides in force stay.
    pub fn set_fleet_overrides(
        &self,
        overrides: Vec<OverrideConfig>,
        now: SystemTime,
    ) -> Result<bool, ConfigError> {
        bounded(overrides.len())?;
        let (previous, checked_at) = {
            let state = self.lock();
            (Arc::clone(&state.fleet.overrides), state.fleet.checked_at)
        };
        // An override where the list last handed over held the same one
        // was checked then: edits in place and additions at the end are
        // checked alone.
        let changed: Vec<usize> = (0..overrides.len())
            .filter(|&i| previous.get(i) != Some(&overrides[i]))
            .collect();
        for &i in &changed {
            overrides[i]
                .validate(now)
                .map_err(|e| located(&format!("overrides[{i}]"), &e))?;
        }
        let same = changed.is_empty() && previous.len() == overrides.len();
        let mut guard = self.lock();
        let state = &mut *guard;
        state.fleet.breakers.renew(state.version);
        let file_changed = checked_at != state.version;
        if same && !file_changed && Arc::ptr_eq(&previous, &state.fleet.overrides) {
            return Ok(false);
        }
        let to_check: Box<dyn Iterator<Item = usize>> = if file_changed {
            Box::new(0..overrides.len())
        } else {
            Box::new(changed.into_iter())
        };
        for i in to_check {
            self.check_fleet_override(&state.file, &overrides[i], &mut state.fleet.breakers, now)
                .map_err(|e| located(&format!("overrides[{i}]"), &e))?;
        }
        state.fleet.overrides = Arc::new(overrides);
        state.fleet.checked_at = state.version;
        let wanted = self.wanted(
            &state.file,
            &state.fleet.overrides,
            &mut state.fleet.breakers,
            now,
        );
        if wanted == state.overridden {
            return Ok(false);
        }
        self.set_overrides(state, wanted, now);
        Ok(true)
    }

    /// Check `overrides` as [`set_fleet_overrides`](Self::set_fleet_overrides)
    /// would at `now`, and apply nothing: for an operator's endpoint to
    /// refuse what the instances would, before it is published.
    ///
    /// # Errors
    ///
    /// As [`set_fleet_overrides`](Self::set_fleet_overrides).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use rheostat::config::{LiveLimiters, OverrideConfig, OverrideKind};
    ///
    /// let dir = std::env::temp_dir().join(format!("rheostat-check-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("limits.toml");
    /// std::fs::write(&path, "[limiters.payments.policy]\npolicy = \"fixed\"\nlimit = 8\n")?;
    /// let live = LiveLimiters::load(&path)?;
    /// let now = SystemTime::now();
    /// let cap = |cap| OverrideConfig {
    ///     limiter: "payments".into(),
    ///     kind: OverrideKind::Cap,
    ///     cap: Some(cap),
    ///     until: now + Duration::from_secs(600),
    ///     instances: Default::default(),
    ///     reason: None,
    /// };
    /// live.check_fleet_overrides(&[cap(2)], now)?;
    /// let e = live.check_fleet_overrides(&[cap(2), cap(0)], now).unwrap_err();
    /// assert_eq!(e.field(), "overrides[1].cap");
    /// // Nothing was applied.
    /// assert_eq!(live.get("payments").unwrap().overrides().in_force(), None);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn check_fleet_overrides(
        &self,
        overrides: &[OverrideConfig],
        now: SystemTime,
    ) -> Result<(), ConfigError> {
        bounded(overrides.len())?;
        for (i, o) in overrides.iter().enumerate() {
            o.validate(now)
                .map_err(|e| located(&format!("overrides[{i}]"), &e))?;
        }
        let mut guard = self.lock();
        let state = &mut *guard;
        state.fleet.breakers.renew(state.version);
        for (i, o) in overrides.iter().enumerate() {
            self.check_fleet_override(&state.file, o, &mut state.fleet.breakers, now)
                .map_err(|e| located(&format!("overrides[{i}]"), &e))?;
        }
        Ok(())
    }
}

/// Whether `config`'s policy has a breaker for `force_closed` to hold.
fn has_breaker(config: &LimiterConfig) -> bool {
    config
        .policy
        .build()
        .is_ok_and(|mut policy| policy.hold_closed(std::time::Instant::now(), true))
}
