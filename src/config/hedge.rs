//! A retry's `hedge` as a file writes it: `"auto"` (the delay learned at
//! [`Hedge::default`]) or a table (`{ delay = "40ms" }`,
//! `{ quantile = 0.9, max = 2 }`, every key optional). Read, a value is
//! only parsed: its range is checked with the limiter's other options
//! ([`Hedge::validate`]), reported by its path in the file and its line.

use std::fmt;
use std::time::Duration;

use humantime_serde::re::humantime;
use serde::de::{self, value::MapAccessDeserializer, Deserializer, MapAccess, Unexpected, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::Deserialize;

use crate::retry::Hedge;

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
