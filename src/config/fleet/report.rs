//! What the fleet's tasks count and log: reads of the document by result,
//! Redis errors by kind and probe claims by result, each counted every
//! time and logged at most once per [`LOG_EVERY`] for each reason.

use std::collections::BTreeMap;
use std::time::Instant;

use super::LOG_EVERY;

/// The kind of a Redis error, as `rheostat_fleet_errors_total` labels it:
/// one of a few fixed names, whatever the server says.
pub(super) fn error_kind(e: &redis::RedisError) -> &'static str {
    if e.is_timeout() {
        return "timeout";
    }
    match e.code() {
        Some("WRONGTYPE") => return "wrong_type",
        Some("NOSCRIPT") => return "no_script",
        Some("LOADING") => return "loading",
        Some("READONLY") => return "read_only",
        Some("OOM") => return "out_of_memory",
        Some("BUSY") => return "busy",
        Some("NOAUTH" | "WRONGPASS" | "NOPERM") => return "auth",
        _ => {}
    }
    match e.kind() {
        redis::ErrorKind::IoError => "io",
        redis::ErrorKind::AuthenticationFailed => "auth",
        redis::ErrorKind::ResponseError => "response",
        redis::ErrorKind::TypeError => "type",
        redis::ErrorKind::ParseError => "parse",
        redis::ErrorKind::ClientError | redis::ErrorKind::InvalidClientConfig => "client",
        redis::ErrorKind::ExtensionError => "server",
        _ => "other",
    }
}

/// Whether `e` ends a session: the connection is lost or silent, and is
/// made again. An error about the data (a key of the wrong type, a script
/// refused) leaves it open.
pub(super) fn ends_session(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_unrecoverable_error()
}

/// Count a read of the document under `prefix` by `result`, and the
/// version applied.
pub(super) fn read(_prefix: &str, _result: &'static str, _version: Option<u64>) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::describe_counter!(
            "rheostat_fleet_reads_total",
            "Reads of the fleet's overrides from the store, by result: applied, unchanged, refused, too_large or stale"
        );
        ::metrics::describe_gauge!(
            "rheostat_fleet_version",
            "The version of the fleet's overrides this instance applied"
        );
        ::metrics::counter!(
            "rheostat_fleet_reads_total",
            "prefix" => _prefix.to_owned(),
            "result" => _result
        )
        .increment(1);
        if let Some(version) = _version {
            #[allow(clippy::cast_precision_loss, reason = "a version count")]
            ::metrics::gauge!("rheostat_fleet_version", "prefix" => _prefix.to_owned())
                .set(version as f64);
        }
    }
}

/// Count a Redis error of `kind` under `prefix`.
pub(super) fn error(_prefix: &str, _kind: &'static str) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::describe_counter!(
            "rheostat_fleet_errors_total",
            "Errors Redis answered the fleet's tasks, by kind"
        );
        ::metrics::counter!(
            "rheostat_fleet_errors_total",
            "prefix" => _prefix.to_owned(),
            "kind" => _kind
        )
        .increment(1);
    }
}

/// Count a claim of probes under `prefix` by `result`: `claimed`,
/// `implausible` (a counter the allowance could not have reached, taken as
/// absent) or `unanswered`.
pub(super) fn claim(_prefix: &str, _result: &'static str) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::describe_counter!(
            "rheostat_fleet_probe_claims_total",
            "Claims of a fleet's shared probes, by result: claimed, implausible or unanswered"
        );
        ::metrics::counter!(
            "rheostat_fleet_probe_claims_total",
            "prefix" => _prefix.to_owned(),
            "result" => _result
        )
        .increment(1);
    }
}

/// Log lines at most once per [`LOG_EVERY`] for each reason, saying how
/// many were left out. Sans I/O: told the time.
#[derive(Debug, Default)]
pub(super) struct Throttle {
    /// For each reason, when it was last logged and how many of its
    /// events were left out since.
    last: BTreeMap<&'static str, (Instant, u64)>,
}

impl Throttle {
    /// Whether an event of `reason` at `now` is logged: `Some` with how
    /// many of its events were left out since its last line, `None` within
    /// [`LOG_EVERY`] of that line.
    pub(super) fn allow(&mut self, reason: &'static str, now: Instant) -> Option<u64> {
        match self.last.get_mut(reason) {
            Some((at, left_out)) if now.saturating_duration_since(*at) < LOG_EVERY => {
                *left_out += 1;
                None
            }
            Some((at, left_out)) => {
                *at = now;
                Some(std::mem::take(left_out))
            }
            None => {
                self.last.insert(reason, (now, 0));
                Some(0)
            }
        }
    }

    /// Call `log` with the count left out if an event of `reason` is
    /// logged now.
    pub(super) fn log(&mut self, reason: &'static str, log: impl FnOnce(u64)) {
        if let Some(left_out) = self.allow(reason, Instant::now()) {
            log(left_out);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_reason_is_logged_once_per_period_with_the_count_left_out() {
        let mut throttle = Throttle::default();
        let t0 = Instant::now();
        assert_eq!(throttle.allow("refused", t0), Some(0));
        for i in 1..=1000 {
            assert_eq!(
                throttle.allow("refused", t0 + Duration::from_millis(i)),
                None
            );
        }
        // Another reason has its own period.
        assert_eq!(throttle.allow("stale", t0), Some(0));
        assert_eq!(throttle.allow("refused", t0 + LOG_EVERY), Some(1000));
        assert_eq!(throttle.allow("refused", t0 + LOG_EVERY), None);
    }

    #[test]
    fn errors_are_named_by_a_few_fixed_kinds() {
        let timeout = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer",
        ));
        assert_eq!(error_kind(&timeout), "timeout");
        assert!(ends_session(&timeout));
        let refused = redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "refused",
        ));
        assert_eq!(error_kind(&refused), "io");
        let wrong_type = redis::make_extension_error("WRONGTYPE".to_owned(), None);
        assert_eq!(error_kind(&wrong_type), "wrong_type");
        assert!(!ends_session(&wrong_type));
    }
}
