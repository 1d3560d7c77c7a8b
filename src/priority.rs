//! Classes of calls, so that throttling is gradual by how much a call is
//! worth: the least critical class loses its calls first.
//!
//! A limiter built with [`Builder::priorities`](crate::Builder::priorities)
//! sorts calls into ordered classes, most critical first: by default
//! Google SRE's four ([`Priority`]), or named partitions of your own. A call
//! admitted with a class ([`Admission::class`](crate::Admission::class)) is
//! admitted by these rules:
//!
//! - **Under a concurrency limit**, a call is admitted only while the slots
//!   kept for more critical classes stay free: each class has a *reserve*,
//!   and a call of class `c` is admitted only if, after it, the calls in
//!   flight plus the unused part of every more critical class's reserve fit
//!   in the limit. A class's reserve is at least its configured `share` of
//!   the limit, and grows by itself: by one slot each time a call of that
//!   class finds the limit full while a less critical class holds slots;
//!   it drains by a 64th of a slot each time one of the class's calls ends
//!   while it uses under three quarters of it, by a slot each time it
//!   turns away a less critical call while the class holds nothing, and by
//!   a slot each time a less critical caller waits its whole `max_wait` and
//!   times out beside free slots while the class uses less than it keeps
//!   (the waiter watched those slots go unused all the while). So a class
//!   that needs room gets it, and room it does not use is lent to the
//!   classes below it, waiting callers included.
//! - **Under an admit probability** (a throttle, a breaker's ramp), the
//!   fraction the gate admits is spent on the most critical classes first,
//!   in proportion to their recent share of calls: the least critical class
//!   is refused entirely before a more critical one loses anything.
//! - **The wait queue** serves the most critical waiter first (in the
//!   queue's order within a class); a waiter is handed a slot only where its
//!   class could take one.
//! - **An open breaker** refuses every class: no call is worth sending to a
//!   dependency the breaker says is down. A half-open breaker's probes go to
//!   whichever calls come first.
//!
//! The reserves and the split of the admit fraction follow pure rules, with
//! the reasons for each, in [`algorithms::classes`](crate::algorithms::classes).
//!
//! A call acquired without a class ([`Limiter::try_acquire`](crate::Limiter::try_acquire))
//! on such a limiter counts as the default class ([`Priority::Critical`]
//! with the default classes, the first otherwise). A limiter without
//! priorities ignores classes and behaves as before (its admission and release
//! each take one branch more).
//!
//! # Examples
//!
//! ```
//! use rheostat::{algorithms::Fixed, priority::{Priorities, Priority}, Limiter, RejectReason};
//!
//! let limiter = Limiter::builder(Fixed::new(10)?)
//!     .priorities(Priorities::default().share(Priority::Critical, 0.3)?)
//!     .build()?;
//! // Sheddable calls may take the 7 slots not kept for critical ones…
//! let shed: Vec<_> = (0..7).map(|_| limiter.admission().class(Priority::Sheddable).try_acquire()).collect::<Result<_, _>>()?;
//! let eighth = limiter.admission().class(Priority::Sheddable).try_acquire();
//! assert_eq!(eighth.unwrap_err().reason(), RejectReason::LimitReached);
//! // …and critical ones still find room.
//! let critical = limiter.admission().class(Priority::Critical).try_acquire()?;
//! # drop((shed, critical));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use crate::algorithms::ConfigError;

/// How critical a call is: Google SRE's four classes, most critical first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(rename_all = "snake_case"))]
pub enum Priority {
    /// The most critical: a failure is user-visible and severe.
    CriticalPlus,
    /// The default: a failure is user-visible.
    #[default]
    Critical,
    /// A failure is tolerable, and the call may be retried later.
    SheddablePlus,
    /// Shed first: prefetches, batch work, anything that may wait.
    Sheddable,
}

impl Priority {
    /// The four, most critical first.
    pub const ALL: [Priority; 4] = [
        Priority::CriticalPlus,
        Priority::Critical,
        Priority::SheddablePlus,
        Priority::Sheddable,
    ];

    /// The longest name ([`Priority::as_str`]), in bytes: `sheddable_plus`.
    /// [`Priority::parse`] refuses a longer value before reading it.
    pub const LONGEST_NAME: usize = {
        let mut longest = 0;
        let mut i = 0;
        while i < Priority::ALL.len() {
            let len = Priority::ALL[i].as_str().len();
            if len > longest {
                longest = len;
            }
            i += 1;
        }
        longest
    };

    /// Its name in files, headers and metric labels.
    pub const fn as_str(self) -> &'static str {
        match self {
            Priority::CriticalPlus => "critical_plus",
            Priority::Critical => "critical",
            Priority::SheddablePlus => "sheddable_plus",
            Priority::Sheddable => "sheddable",
        }
    }

    /// The priority named `name`: as [`Priority::as_str`] writes it, in
    /// any case, `-` accepted for `_` (`critical_plus`, `CRITICAL-PLUS`);
    /// anything else, surrounding whitespace included, is `None`.
    ///
    /// `name` may be a `&str` or bytes, such as an `http::HeaderValue`
    /// (no need to check it is text first). A value longer than the longest
    /// name ([`Priority::LONGEST_NAME`]) is refused by its length alone,
    /// without reading it, and a shorter one is compared in place: parsing
    /// costs the same for a 400 KB header as for `critical`, and never
    /// allocates. A header is written by the client, though, so it says
    /// what a request asks for, not what it is owed: see
    /// `tower::lower_only` (the `tower` feature) for a server.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat::priority::Priority;
    ///
    /// assert_eq!(Priority::parse("sheddable"), Some(Priority::Sheddable));
    /// assert_eq!(Priority::parse("CRITICAL-PLUS"), Some(Priority::CriticalPlus));
    /// assert_eq!(Priority::parse(b"Sheddable_Plus"), Some(Priority::SheddablePlus));
    /// assert_eq!(Priority::parse(" critical"), None);
    /// assert_eq!(Priority::parse("critical".repeat(50_000)), None);
    /// ```
    pub fn parse(name: impl AsRef<[u8]>) -> Option<Priority> {
        let name = name.as_ref();
        if name.len() > Priority::LONGEST_NAME {
            return None;
        }
        Priority::ALL.into_iter().find(|p| {
            let known = p.as_str().as_bytes();
            known.len() == name.len()
                && known.iter().zip(name).all(|(&k, &b)| {
                    k == if b == b'-' {
                        b'_'
                    } else {
                        b.to_ascii_lowercase()
                    }
                })
        })
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A class of calls: its place among a limiter's classes, most critical
/// first (0). With the default classes, `Class::from(priority)` is the
/// priority's class; with named partitions, ask the limiter
/// ([`Limiter::classes`](crate::Limiter::classes)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Class(pub(crate) u8);

impl Class {
    /// The class at `index` (0 the most critical).
    pub const fn new(index: u8) -> Class {
        Class(index)
    }

    /// Its place, 0 the most critical.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl From<Priority> for Class {
    fn from(priority: Priority) -> Class {
        Class(priority as u8)
    }
}

/// So that a [`Priority`] can be given where a class is optional
/// ([`Admission::class`](crate::Admission::class)).
impl From<Priority> for Option<Class> {
    fn from(priority: Priority) -> Option<Class> {
        Some(Class::from(priority))
    }
}

/// One class: its name and the share of the limit kept for it.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(deny_unknown_fields))]
pub struct ClassConfig {
    /// Its name (a metric label; how a file or a header names it).
    pub name: String,
    /// The share of the limit kept for it against less critical classes,
    /// in `[0, 1]`: a floor under its reserve, which also grows by itself
    /// while the class needs room. Default 0.
    #[cfg_attr(feature = "config", serde(default))]
    pub share: f64,
}

/// Most classes a limiter may have.
pub const MAX_CLASSES: usize = 16;

/// A limiter's classes, most critical first.
///
/// The default is Google SRE's four ([`Priority`]), no share kept for any:
/// each class's reserve grows from nothing as it needs room.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "config", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "config", serde(default, deny_unknown_fields))]
pub struct Priorities {
    /// The classes, most critical first: 1 to [`MAX_CLASSES`], names
    /// unique, shares summing to at most 1.
    pub classes: Vec<ClassConfig>,
    /// The class of a call acquired without one: by name; the default is
    /// `critical` if there is such a class, else the first.
    #[cfg_attr(
        feature = "config",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub default: Option<String>,
}

impl Default for Priorities {
    fn default() -> Self {
        Priorities {
            classes: Priority::ALL
                .iter()
                .map(|p| ClassConfig {
                    name: p.as_str().to_owned(),
                    share: 0.0,
                })
                .collect(),
            default: None,
        }
    }
}

impl Priorities {
    /// Named partitions, most critical first, each with the share of the
    /// limit kept for it.
    ///
    /// # Errors
    ///
    /// As [`Priorities::validate`].
    pub fn partitions<'a>(
        partitions: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Result<Self, ConfigError> {
        let priorities = Priorities {
            classes: partitions
                .into_iter()
                .map(|(name, share)| ClassConfig {
                    name: name.to_owned(),
                    share,
                })
                .collect(),
            default: None,
        };
        priorities.validate()?;
        Ok(priorities)
    }

    /// The same classes, with `share` of the limit kept for `class`.
    ///
    /// # Errors
    ///
    /// As [`Priorities::validate`], and `priorities.classes` if there is no
    /// such class.
    pub fn share(mut self, class: impl Into<Class>, share: f64) -> Result<Self, ConfigError> {
        let class = class.into();
        let Some(entry) = self.classes.get_mut(class.index()) else {
            return Err(ConfigError::new(
                "priorities.classes",
                format_args!("no class {}", class.index()),
                format!("a class in [0, {})", self.classes.len()),
            ));
        };
        entry.share = share;
        self.validate()?;
        Ok(self)
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the field: `priorities.classes` (none, or
    /// more than [`MAX_CLASSES`]), `priorities.classes[i].name` (empty or
    /// repeated), `priorities.classes[i].share` (outside `[0, 1]`, or the
    /// shares summing past 1), `priorities.default` (no such class).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let n = self.classes.len();
        if n == 0 || n > MAX_CLASSES {
            return Err(ConfigError::new(
                "priorities.classes",
                format_args!("{n} classes"),
                format!("1 to {MAX_CLASSES} classes"),
            ));
        }
        let mut sum = 0.0;
        for (i, class) in self.classes.iter().enumerate() {
            if class.name.trim().is_empty()
                || self.classes[..i].iter().any(|c| c.name == class.name)
            {
                return Err(ConfigError::new(
                    format!("priorities.classes[{i}].name"),
                    format_args!("{:?}", class.name),
                    "a name no other class has",
                ));
            }
            if !(class.share.is_finite() && (0.0..=1.0).contains(&class.share)) {
                return Err(ConfigError::new(
                    format!("priorities.classes[{i}].share"),
                    class.share,
                    "a number in [0, 1]",
                ));
            }
            sum += class.share;
            if sum > 1.0 + 1e-9 {
                return Err(ConfigError::new(
                    format!("priorities.classes[{i}].share"),
                    class.share,
                    "shares summing to at most 1",
                ));
            }
        }
        if let Some(default) = &self.default {
            if !self.classes.iter().any(|c| &c.name == default) {
                return Err(ConfigError::new(
                    "priorities.default",
                    format_args!("{default:?}"),
                    "the name of a class",
                ));
            }
        }
        Ok(())
    }

    /// The class named `name`, if any.
    pub fn class(&self, name: &str) -> Option<Class> {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .and_then(|i| u8::try_from(i).ok())
            .map(Class)
    }

    /// The class of a call acquired without one.
    pub fn default_class(&self) -> Class {
        match &self.default {
            Some(name) => self.class(name),
            None => self.class("critical"),
        }
        .unwrap_or(Class(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_name_is_the_bound_parse_refuses_beyond() {
        let longest = Priority::ALL.map(|p| p.as_str().len());
        assert_eq!(Some(&Priority::LONGEST_NAME), longest.iter().max());
        for p in Priority::ALL {
            assert_eq!(Priority::parse(p.as_str()), Some(p));
            assert_eq!(Priority::parse(p.as_str().to_ascii_uppercase()), Some(p));
            assert_eq!(Priority::parse(p.as_str().replace('_', "-")), Some(p));
            // One byte more than the name, or than the longest, is refused.
            assert_eq!(Priority::parse(format!("{}x", p.as_str())), None);
            assert_eq!(Priority::parse(format!(" {} ", p.as_str())), None);
        }
        assert_eq!(Priority::parse("critical_plus!"), None);
        assert_eq!(Priority::parse(""), None);
        assert_eq!(Priority::parse("sheddable\u{e9}"), None);
    }

    #[test]
    fn a_400_kb_value_that_names_a_priority_once_trimmed_is_refused() {
        // What a client could send to be read as `critical_plus` when a
        // value was trimmed, lowercased and copied before it was compared.
        let pad = " ".repeat(200 * 1024);
        for name in ["CRITICAL-PLUS", "critical_plus", "critical"] {
            let value = format!("{pad}{name}{pad}");
            assert!(value.len() > 400 * 1024);
            assert_eq!(Priority::parse(&value), None, "{name} padded");
            assert_eq!(Priority::parse(value.as_bytes()), None, "{name} padded");
        }
        assert_eq!(Priority::parse("x".repeat(400 * 1024)), None);
    }
}
