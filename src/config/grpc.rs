//! [`GrpcConfig`]: how a gRPC dependency's statuses are classified, the
//! `grpc` table of a limiter in a file.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::algorithms::{ConfigError, MAX_DURATION};
use crate::grpc::GrpcCode;
#[cfg(feature = "http")]
use crate::{algorithms::Outcome, tower::GrpcClassifier};

/// What the names in a list must be: every code's name but `ok`, from
/// the one list of codes ([`GrpcCode::ALL`]).
pub(super) fn allowed() -> String {
    let names: Vec<&str> = GrpcCode::ALL.iter().skip(1).map(|c| c.name()).collect();
    let (last, rest) = names.split_last().unwrap_or((&"", &[]));
    format!(
        "a gRPC status code other than ok: {} or {last}",
        rest.join(", ")
    )
}

/// How the calls to a gRPC dependency are classified (the `http` feature's
/// `GrpcClassifier`, which `GrpcConfig::classifier` builds): the `grpc`
/// table of a limiter in a file, beside its policy.
///
/// Codes are written by name, in lower case (`"resource_exhausted"`). Left
/// out, each field is `GrpcClassifier::new()`'s: `UNKNOWN`,
/// `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `INTERNAL`, `UNAVAILABLE`
/// and `DATA_LOSS` are overloads, `UNAVAILABLE` alone is retryable, no
/// success is too slow, and a retry waits at most 10 s for a server's
/// pushback.
///
/// # Examples
///
/// ```
/// use rheostat::config::LimitersConfig;
///
/// let file = LimitersConfig::from_toml(r#"
///     [limiters.search.policy]
///     policy = "recommended"
///
///     [limiters.search.grpc]
///     overload = ["unavailable", "deadline_exceeded", "internal", "unknown", "data_loss"]
///     slow_after = "2s"
/// "#)?;
/// // RESOURCE_EXHAUSTED is a per-caller quota here: not an overload.
/// let grpc = file.limiters["search"].grpc.as_ref().unwrap();
/// assert!(!grpc.overload.iter().any(|code| code == "resource_exhausted"));
///
/// let err = LimitersConfig::from_toml(r#"
///     [limiters.search.policy]
///     policy = "recommended"
///     [limiters.search.grpc]
///     overload = ["unavailable", "UNAVAILABLE", "busy"]
/// "#).unwrap_err();
/// assert!(err.to_string().starts_with(
///     "line 5: invalid `limiters.search.grpc.overload[2]`: found \"busy\", expected a gRPC status code other than ok"
/// ), "{err}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GrpcConfig {
    /// The codes counted as overloads; every other code but `ok` is
    /// ignored.
    pub overload: Vec<String>,
    /// The codes after which a retry may follow (gRPC's
    /// `retryableStatusCodes`).
    pub retryable: Vec<String>,
    /// An `ok` whose status came later than this after admission is a slow
    /// call, an overload; never, if left out.
    #[serde(
        default,
        with = "humantime_serde::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub slow_after: Option<Duration>,
    /// The longest `grpc-retry-pushback-ms` a retry waits for.
    #[serde(with = "humantime_serde")]
    pub max_pushback: Duration,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        GrpcConfig {
            overload: [
                "unknown",
                "deadline_exceeded",
                "resource_exhausted",
                "internal",
                "unavailable",
                "data_loss",
            ]
            .map(String::from)
            .to_vec(),
            retryable: vec![String::from("unavailable")],
            slow_after: None,
            max_pushback: Duration::from_secs(10),
        }
    }
}

/// The code a file names `name` (in lower case, or as gRPC writes it), if
/// it is one other than `ok`.
pub(super) fn code(name: &str) -> Option<GrpcCode> {
    GrpcCode::from_name(name).filter(|&code| code != GrpcCode::Ok)
}

/// The codes `names` lists, the first name that is none refused as
/// `field[index]`.
fn codes(field: &str, names: &[String]) -> Result<Vec<GrpcCode>, ConfigError> {
    names
        .iter()
        .enumerate()
        .map(|(index, name)| {
            code(name).ok_or_else(|| {
                ConfigError::new(format!("{field}[{index}]"), format!("{name:?}"), allowed())
            })
        })
        .collect()
}

impl GrpcConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// `grpc.overload[i]` or `grpc.retryable[i]` not the name of a code
    /// other than `ok`; `grpc.slow_after` zero or over a year;
    /// `grpc.max_pushback` zero or over a year.
    pub fn validate(&self) -> Result<(), ConfigError> {
        codes("grpc.overload", &self.overload)?;
        codes("grpc.retryable", &self.retryable)?;
        for (field, duration) in [
            ("grpc.slow_after", self.slow_after),
            ("grpc.max_pushback", Some(self.max_pushback)),
        ] {
            if let Some(duration) = duration {
                if duration.is_zero() || duration > MAX_DURATION {
                    return Err(ConfigError::new(
                        field,
                        format_args!("{duration:?}"),
                        "a duration above 0 and at most 365 days",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The classifier this table describes, for
    /// `RheostatLayer::classify`.
    ///
    /// # Errors
    ///
    /// As [`GrpcConfig::validate`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::config::GrpcConfig;
    /// use rheostat::grpc::GrpcCode;
    /// use rheostat::Outcome;
    ///
    /// let config = GrpcConfig { overload: vec!["unavailable".into()], ..GrpcConfig::default() };
    /// let classifier = config.classifier()?;
    /// assert_eq!(classifier.outcome(GrpcCode::Unavailable, Duration::ZERO), Outcome::Overload);
    /// assert_eq!(classifier.outcome(GrpcCode::Internal, Duration::ZERO), Outcome::Ignore);
    /// # Ok::<(), rheostat::ConfigError>(())
    /// ```
    #[cfg(feature = "http")]
    pub fn classifier(&self) -> Result<GrpcClassifier, ConfigError> {
        self.validate()?;
        let overload = codes("grpc.overload", &self.overload)?;
        let mut classifier = GrpcClassifier::new();
        for code in GrpcCode::ALL.into_iter().skip(1) {
            let outcome = if overload.contains(&code) {
                Outcome::Overload
            } else {
                Outcome::Ignore
            };
            classifier = classifier.with_outcome(code, outcome)?;
        }
        let retryable = codes("grpc.retryable", &self.retryable)?;
        classifier = classifier
            .retryable(retryable)?
            .max_pushback(self.max_pushback)?;
        if let Some(slow) = self.slow_after {
            classifier = classifier.slow_after(slow)?;
        }
        Ok(classifier)
    }
}

#[cfg(test)]
mod tests {
    use super::{allowed, code, GrpcConfig};
    use crate::grpc::GrpcCode;

    #[test]
    fn a_file_names_every_code_but_ok_as_the_one_list_does() {
        for c in GrpcCode::ALL.into_iter().skip(1) {
            assert_eq!(code(c.name()), Some(c));
            assert_eq!(code(&c.name().to_uppercase()), Some(c));
            assert!(allowed().contains(c.name()), "{}", allowed());
        }
        assert_eq!(code("ok"), None);
        assert_eq!(
            allowed(),
            "a gRPC status code other than ok: cancelled, unknown, invalid_argument, \
             deadline_exceeded, not_found, already_exists, permission_denied, \
             resource_exhausted, failed_precondition, aborted, out_of_range, unimplemented, \
             internal, unavailable, data_loss or unauthenticated"
        );
    }

    #[test]
    fn ok_and_unknown_names_are_refused_with_their_index() {
        let config = GrpcConfig {
            retryable: vec!["unavailable".into(), "ok".into()],
            ..GrpcConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(err.field(), "grpc.retryable[1]");
        let config = GrpcConfig {
            overload: vec!["Unavailable".into(), "INTERNAL".into(), "".into()],
            ..GrpcConfig::default()
        };
        let err = config.validate().unwrap_err();
        assert_eq!(err.field(), "grpc.overload[2]");
        assert!(GrpcConfig::default().validate().is_ok());
        let config = GrpcConfig {
            slow_after: Some(std::time::Duration::ZERO),
            ..GrpcConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().field(), "grpc.slow_after");
    }
}
