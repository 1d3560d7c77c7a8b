//! An optional rate as configuration files write it: a number, or `"off"`.
//!
//! TOML has no null, so an unset rate (a breaker that never trips on
//! failures) is written `"off"`; JSON may also say `null`. A rate is written
//! back as a number, or `"off"` when unset.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Serializer;

/// The word that stands for an unset rate.
const OFF: &str = "off";

#[allow(
    clippy::ref_option,
    reason = "serde's `with` hands the field over by reference"
)]
pub(crate) fn serialize<S: Serializer>(rate: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match rate {
        Some(r) => s.serialize_f64(*r),
        None => s.serialize_str(OFF),
    }
}

pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    d.deserialize_any(RateVisitor)
}

struct RateVisitor;

impl<'de> Visitor<'de> for RateVisitor {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a rate in (0, 1] or \"off\"")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    #[allow(
        clippy::cast_precision_loss,
        reason = "an integer rate is 0 or 1, or refused by validation anyway"
    )]
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }

    #[allow(
        clippy::cast_precision_loss,
        reason = "an integer rate is 0 or 1, or refused by validation anyway"
    )]
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v as f64))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        if v == OFF {
            Ok(None)
        } else {
            Err(E::invalid_value(de::Unexpected::Str(v), &self))
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(RateVisitor)
    }
}
