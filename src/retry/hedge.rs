//! [`Hedge`]: a second attempt beside one that has not answered, and how
//! a file writes it.

use std::time::Duration;

use super::MAX_ATTEMPTS;
use crate::algorithms::{check, ConfigError};

/// Hedged requests: when an attempt has not answered after a delay, a
/// second one is sent beside it, and the first answer wins (Dean and
/// Barroso, "The Tail at Scale").
///
/// A hedge cannot become load. It is sent only:
///
/// - for a call that may be sent twice (idempotent: never, by default, an
///   HTTP `POST`), within the call's attempts and its deadline;
/// - with a free permit: it never waits in the queue, so it never takes a
///   slot a first attempt is waiting for;
/// - out of the retry budget, which it spends as a retry does (so
///   attempts stay within `(1 + ratio) × calls + min_per_second × ttl`,
///   hedges and retries together);
/// - while the policy sees no congestion: not once the limit has last moved
///   down, a breaker is not closed, or a throttle refuses any share.
///
/// The attempt that loses is cancelled and recorded as
/// [`Outcome::Ignore`](crate::Outcome::Ignore): it teaches the policy
/// nothing, and is not an overload.
///
/// The delay is learned by default: the `quantile` (p95) of the successes'
/// latencies over the learned timeout's window, so that about one call in
/// twenty is hedged; until enough successes have been seen, nothing is
/// hedged. A limiter whose timeout is not learned has no such window: give
/// it a `delay`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::retry::{Hedge, RetryConfig};
///
/// // Learned: the p95 of recent successes.
/// let auto = RetryConfig { hedge: Some(Hedge::default()), ..RetryConfig::default() };
/// auto.validate()?;
/// // Typed: 40 ms.
/// let typed = Hedge { delay: Some(Duration::from_millis(40)), ..Hedge::default() };
/// assert_eq!(typed.max, 1);
/// # Ok::<(), rheostat::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hedge {
    /// How long an attempt runs before a hedge is sent beside it; `None`
    /// (the default) to learn it from the latencies.
    pub delay: Option<Duration>,
    /// The quantile of recent successes' latencies a learned delay is, in
    /// `[0.5, 0.999]`; 0.95 by default.
    pub quantile: f64,
    /// The most hedges per call, in `[1, 9]`; 1 by default. Each is an
    /// attempt: a call's hedges and retries together never exceed its
    /// `attempts`.
    pub max: u32,
}

impl Default for Hedge {
    fn default() -> Self {
        Hedge {
            delay: None,
            quantile: 0.95,
            max: 1,
        }
    }
}

impl Hedge {
    /// A hedge sent after a typed `delay`.
    pub fn after(delay: Duration) -> Self {
        Hedge {
            delay: Some(delay),
            ..Hedge::default()
        }
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming the first field out of range
    /// (`retry.hedge.delay`, `retry.hedge.quantile`, `retry.hedge.max`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(delay) = self.delay {
            check::duration("retry.hedge.delay", delay)?;
        }
        check::closed("retry.hedge.quantile", self.quantile, 0.5, 0.999)?;
        check::whole("retry.hedge.max", self.max, 1, MAX_ATTEMPTS - 1)?;
        Ok(())
    }

    /// Check that a learned delay has latencies to learn from: a limiter
    /// whose timeout is `learned` keeps them; any other needs a typed
    /// `delay`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] naming `retry.hedge`.
    pub(crate) fn check_source(&self, learned: bool) -> Result<(), ConfigError> {
        if self.delay.is_some() || learned {
            return Ok(());
        }
        Err(ConfigError::new(
            "retry.hedge",
            format_args!("learned (quantile {})", self.quantile),
            "a typed `delay`: a limiter whose `timeout` is not \"auto\" (learned) has no \
             latencies to learn it from",
        ))
    }
}

/// A retry's `hedge` as a file writes it: `"auto"` (the delay learned at
/// [`Hedge::default`]) or a table (`{ delay = "40ms" }`,
/// `{ quantile = 0.9, max = 2 }`, every key optional). Read, a value is
/// only parsed: its range is checked with the limiter's other options
/// ([`Hedge::validate`]), reported by its path in the file and its line.
#[cfg(feature = "config")]
pub(super) mod file {
    use std::fmt;
    use std::time::Duration;

    use humantime_serde::re::humantime;
    use serde::de::{
        self, value::MapAccessDeserializer, Deserializer, MapAccess, Unexpected, Visitor,
    };
    use serde::ser::{SerializeMap, Serializer};
    use serde::Deserialize;

    use super::Hedge;

    /// The word for a hedge at its defaults.
    const AUTO: &str = "auto";

    /// Read a retry's `hedge`: `None` for a JSON `null`, as when it is left out.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Hedge>, D::Error> {
        d.deserialize_any(HedgeVisitor)
    }

    /// Write a retry's `hedge` as a file would: `"auto"` at its defaults, else
    /// a table of the fields that differ from them.
    pub(crate) fn serialize<S: Serializer>(hedge: &Option<Hedge>, s: S) -> Result<S::Ok, S::Error> {
        let Some(hedge) = hedge else {
            return s.serialize_none();
        };
        let defaults = Hedge::default();
        if *hedge == defaults {
            return s.serialize_str(AUTO);
        }
        let mut map = s.serialize_map(None)?;
        if let Some(delay) = hedge.delay {
            map.serialize_entry("delay", &humantime::format_duration(delay).to_string())?;
        }
        if hedge.quantile.to_bits() != defaults.quantile.to_bits() {
            map.serialize_entry("quantile", &hedge.quantile)?;
        }
        if hedge.max != defaults.max {
            map.serialize_entry("max", &hedge.max)?;
        }
        map.end()
    }

    struct HedgeVisitor;

    impl<'de> Visitor<'de> for HedgeVisitor {
        type Value = Option<Hedge>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(
                f,
                "\"{AUTO}\", a delay learned from the dependency's latencies (their p95); or a \
                 table ({{ delay = \"40ms\" }}, {{ quantile = 0.9, max = 2 }})"
            )
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            if s == AUTO {
                return Ok(Some(Hedge::default()));
            }
            Err(E::invalid_value(Unexpected::Str(s), &self))
        }

        fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Self::Value, M::Error> {
            let fields = HedgeFields::deserialize(MapAccessDeserializer::new(map))?;
            let defaults = Hedge::default();
            Ok(Some(Hedge {
                delay: fields.delay,
                quantile: fields.quantile.unwrap_or(defaults.quantile),
                max: fields.max.unwrap_or(defaults.max),
            }))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    /// A hedge's table: each key left out takes [`Hedge::default`]'s.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct HedgeFields {
        #[serde(default, with = "humantime_serde::option")]
        delay: Option<Duration>,
        #[serde(default)]
        quantile: Option<f64>,
        #[serde(default)]
        max: Option<u32>,
    }
}
