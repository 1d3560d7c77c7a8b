//! Checks shared by every policy's configuration.

use crate::{ConfigError, MAX_DURATION, MAX_LIMIT};
use std::time::Duration;

/// A limit in `[lo, MAX_LIMIT]`.
pub fn limit(field: &'static str, value: u32, lo: u32) -> Result<u32, ConfigError> {
    whole(field, value, lo, MAX_LIMIT)
}

/// A whole number in `[lo, hi]`.
pub fn whole(field: &'static str, value: u32, lo: u32, hi: u32) -> Result<u32, ConfigError> {
    if value < lo || value > hi {
        return Err(ConfigError::new(
            field,
            value,
            format!("a whole number in [{lo}, {hi}]"),
        ));
    }
    Ok(value)
}

/// A share: a finite number in `(0, 1]`.
pub fn share(field: &'static str, value: f64) -> Result<f64, ConfigError> {
    in_share(value).ok_or_else(|| ConfigError::new(field, value, "a number in (0, 1]"))
}

/// A rate (of failures, of slow calls): a finite number in `(0, 1]`.
pub fn rate(field: &'static str, value: f64) -> Result<f64, ConfigError> {
    in_share(value).ok_or_else(|| ConfigError::new(field, value, "a rate in (0, 1]"))
}

fn in_share(value: f64) -> Option<f64> {
    (value.is_finite() && value > 0.0 && value <= 1.0).then_some(value)
}

/// A finite number strictly between `lo` and `hi`.
pub fn open_unit(field: &'static str, value: f64, lo: f64, hi: f64) -> Result<f64, ConfigError> {
    if value.is_finite() && value > lo && value < hi {
        Ok(value)
    } else {
        Err(ConfigError::new(
            field,
            value,
            format!("a number in ({lo}, {hi})"),
        ))
    }
}

/// A finite number in `[lo, hi]`.
pub fn closed(field: &'static str, value: f64, lo: f64, hi: f64) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= lo && value <= hi {
        Ok(value)
    } else {
        Err(ConfigError::new(
            field,
            value,
            format!("a number in [{lo}, {hi}]"),
        ))
    }
}

/// A finite number in `[lo, hi]` where a bound is another field's value:
/// `(name, value)`, with an empty name for a constant. The range names
/// the field it comes from (`a number in [alpha, 1000] = [10, 1000]`).
pub fn closed_by(
    field: &'static str,
    value: f64,
    lo: (&str, f64),
    hi: (&str, f64),
) -> Result<f64, ConfigError> {
    if value.is_finite() && value >= lo.1 && value <= hi.1 {
        return Ok(value);
    }
    let name = |(name, bound): (&str, f64)| {
        if name.is_empty() {
            bound.to_string()
        } else {
            name.to_owned()
        }
    };
    Err(ConfigError::new(
        field,
        value,
        format!(
            "a number in [{}, {}] = [{}, {}]",
            name(lo),
            name(hi),
            lo.1,
            hi.1
        ),
    ))
}

/// A duration above zero and at most [`MAX_DURATION`].
pub fn duration(field: &'static str, value: Duration) -> Result<Duration, ConfigError> {
    if value.is_zero() || value > MAX_DURATION {
        return Err(ConfigError::new(
            field,
            format_args!("{value:?}"),
            "a duration above 0 and at most 365 days",
        ));
    }
    Ok(value)
}

/// A policy's `min`, `max` and `initial` limits: each in
/// `[1, MAX_LIMIT]`, `min` at most `max`, `initial` within them. The
/// fields are named `<policy>.min` and so on.
pub fn bounds(
    fields: [&'static str; 3],
    min: u32,
    max: u32,
    initial: u32,
) -> Result<(), ConfigError> {
    let [min_field, max_field, initial_field] = fields;
    limit(min_field, min, 1)?;
    limit(max_field, max, 1)?;
    ordered(min_field, min, max_field, max)?;
    if initial < min || initial > max {
        return Err(ConfigError::new(
            initial_field,
            initial,
            format!("a whole number in [min, max] = [{min}, {max}]"),
        ));
    }
    Ok(())
}

/// `low` must not exceed `high`.
pub fn ordered(
    low_field: &'static str,
    low: u32,
    high_field: &'static str,
    high: u32,
) -> Result<(), ConfigError> {
    if low > high {
        return Err(ConfigError::new(
            low_field,
            low,
            format!("at most `{high_field}` ({high})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_field_and_the_range() {
        let e = open_unit("aimd.backoff", 1.5, 0.0, 1.0).expect_err("1.5 > 1");
        assert_eq!(e.field(), "aimd.backoff");
        assert_eq!(
            e.to_string(),
            "invalid `aimd.backoff`: found 1.5, expected a number in (0, 1)"
        );
        assert_eq!(e.within("payments").field(), "payments.aimd.backoff");
        let e = duration("aimd.timeout", Duration::MAX).expect_err("too long");
        assert!(e.allowed().contains("365 days"), "{e}");
        assert!(duration("x", Duration::ZERO).is_err());
    }
}
