//! A limiter's `timeout` as a file writes it: a duration (`"800ms"`, typed),
//! `"auto"` (learned, at [`LearnedTimeout::default`]) or a table of how it
//! is learned (`{ ceiling = "2s", quantile = 0.99 }`, every key optional;
//! `cut_early = false` for a route no call to which is safe to cut early).
//!
//! Read, a value is only parsed: its range is checked with the limiter's
//! other options ([`Timeout::validate`]), so that each field out of range
//! is reported with the file's other errors, by its path in the file
//! (`limiters.payments.timeout.quantile`) and its line.

use std::fmt;
use std::time::Duration;

use humantime_serde::re::humantime;
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Unexpected, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::Deserialize;

use crate::timeout::{LearnedTimeout, Timeout, DEFAULT_CEILING};

/// The word for a timeout learned at its defaults.
const AUTO: &str = "auto";

/// Read a limiter's `timeout`: `None` for a JSON `null`, as when it is left
/// out.
pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timeout>, D::Error> {
    d.deserialize_any(TimeoutVisitor)
}

/// Write a limiter's `timeout` as a file would: a typed one as its duration
/// (`"800ms"`), a learned one as `"auto"` if it is
/// [`LearnedTimeout::default`], else as a table of its ceiling and of the
/// fields that differ from [`LearnedTimeout::new`]'s defaults.
pub(super) fn serialize<S: Serializer>(timeout: &Option<Timeout>, s: S) -> Result<S::Ok, S::Error> {
    match timeout {
        None => s.serialize_none(),
        Some(Timeout::Typed(timeout)) => s.collect_str(&humantime::format_duration(*timeout)),
        Some(Timeout::Learned(learned)) if *learned == LearnedTimeout::default() => {
            s.serialize_str(AUTO)
        }
        Some(Timeout::Learned(learned)) => {
            let defaults = LearnedTimeout::new(learned.ceiling);
            let duration = |d: Duration| humantime::format_duration(d).to_string();
            // In the order of `LearnedTimeout`'s fields; a number compared
            // bit for bit (a NaN differs from the default, and is written).
            let differs = |value: f64, default: f64| value.to_bits() != default.to_bits();
            let mut map = s.serialize_map(None)?;
            map.serialize_entry("ceiling", &duration(learned.ceiling))?;
            if differs(learned.quantile, defaults.quantile) {
                map.serialize_entry("quantile", &learned.quantile)?;
            }
            if differs(learned.margin, defaults.margin) {
                map.serialize_entry("margin", &learned.margin)?;
            }
            if learned.floor != defaults.floor {
                map.serialize_entry("floor", &duration(learned.floor))?;
            }
            if differs(learned.share, defaults.share) {
                map.serialize_entry("share", &learned.share)?;
            }
            if learned.window != defaults.window {
                map.serialize_entry("window", &duration(learned.window))?;
            }
            if learned.min_samples != defaults.min_samples {
                map.serialize_entry("min_samples", &learned.min_samples)?;
            }
            if learned.cut_early != defaults.cut_early {
                map.serialize_entry("cut_early", &learned.cut_early)?;
            }
            map.end()
        }
    }
}

/// Refuse the limiter's `probe_timeout`, which is now the breaker's.
pub(super) fn moved_probe_timeout<'de, D: Deserializer<'de>>(_: D) -> Result<(), D::Error> {
    Err(de::Error::custom(
        "not a limiter option any more: a probe is given its breaker's \
         `probe_timeout` (30 s by default), the deadline the breaker holds it to; \
         set `probe_timeout` in the breaker's `policy` table instead",
    ))
}

/// Refuse `cut_early` beside the limiter's `timeout`, where it would say
/// nothing: it is a key of the learned timeout's table.
pub(super) fn misplaced_cut_early<'de, D: Deserializer<'de>>(_: D) -> Result<(), D::Error> {
    Err(de::Error::custom(
        "not a limiter option: a key of its learned `timeout` table, \
         `timeout = { ceiling = \"15s\", cut_early = false }` (a typed timeout \
         never cuts a call early)",
    ))
}

struct TimeoutVisitor;

impl<'de> Visitor<'de> for TimeoutVisitor {
    type Value = Option<Timeout>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a duration such as \"800ms\", \"30s\", \"2m\" or \"1h 30m\"; \"{AUTO}\", learned \
             from the dependency's latencies, never above {}; or a table of how it is learned \
             ({{ ceiling = \"2s\", quantile = 0.99 }})",
            humantime::format_duration(DEFAULT_CEILING)
        )
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        if s == AUTO {
            return Ok(Some(Timeout::Learned(LearnedTimeout::default())));
        }
        humantime::parse_duration(s)
            .map(|timeout| Some(Timeout::Typed(timeout)))
            .map_err(|_| E::invalid_value(Unexpected::Str(s), &self))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Self::Value, M::Error> {
        let fields = LearnedFields::deserialize(MapAccessDeserializer::new(map))?;
        Ok(Some(Timeout::Learned(fields.into())))
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

/// A learned timeout's table: each key left out takes
/// [`LearnedTimeout::new`]'s default (the ceiling, [`DEFAULT_CEILING`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LearnedFields {
    #[serde(default, with = "humantime_serde::option")]
    ceiling: Option<Duration>,
    #[serde(default)]
    quantile: Option<f64>,
    #[serde(default)]
    margin: Option<f64>,
    #[serde(default, with = "humantime_serde::option")]
    floor: Option<Duration>,
    #[serde(default)]
    share: Option<f64>,
    #[serde(default, with = "humantime_serde::option")]
    window: Option<Duration>,
    #[serde(default)]
    min_samples: Option<u32>,
    #[serde(default)]
    cut_early: Option<bool>,
}

impl From<LearnedFields> for LearnedTimeout {
    fn from(f: LearnedFields) -> Self {
        let mut learned = LearnedTimeout::new(f.ceiling.unwrap_or(DEFAULT_CEILING));
        if let Some(quantile) = f.quantile {
            learned.quantile = quantile;
        }
        if let Some(margin) = f.margin {
            learned.margin = margin;
        }
        if let Some(floor) = f.floor {
            learned.floor = floor;
        }
        if let Some(share) = f.share {
            learned.share = share;
        }
        if let Some(window) = f.window {
            learned.window = window;
        }
        if let Some(min_samples) = f.min_samples {
            learned.min_samples = min_samples;
        }
        if let Some(cut_early) = f.cut_early {
            learned.cut_early = cut_early;
        }
        learned
    }
}
