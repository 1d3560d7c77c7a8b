//! [`HttpClassifier`]: HTTP responses (status, slowness, `Retry-After`)
//! as outcomes and verdicts.

use std::time::Duration;

use super::Classify;
use crate::algorithms::{check, ConfigError, Outcome};
use crate::retry::Verdict;

/// Classifies HTTP responses.
///
/// | result | outcome |
/// | --- | --- |
/// | an error from the inner service (a refused or reset connection, a timeout, a broken body) | `Overload` |
/// | 5xx | `Overload` |
/// | 429 Too Many Requests | `Overload` by default, see [`too_many_requests`](Self::too_many_requests) |
/// | any other 4xx | `Ignore`: the caller's fault, not the dependency's |
/// | 1xx–3xx slower than [`slow_after`](Self::slow_after) | `Overload` (a *slow call*) |
/// | 1xx–3xx | `Success` |
///
/// A 429 is the dependency saying it is overloaded, which is what an
/// adaptive limit should back off on; if it means instead that *you* spent a
/// quota the dependency enforces per caller, whatever its health, make it
/// [`Outcome::Ignore`] so that it does not trip a breaker.
///
/// An error is always an overload: the classifier cannot see inside an
/// arbitrary error type. Write a closure (see [`ClassifyFn`](super::ClassifyFn)) to tell errors
/// apart.
///
/// # Retries
///
/// What a [retry](crate::retry) makes of a response
/// ([`Classify::verdict`]):
///
/// | result | retryable |
/// | --- | --- |
/// | an error from the inner service | yes |
/// | 5xx | yes, but 501 Not Implemented and 505 HTTP Version Not Supported, which no retry changes |
/// | 4xx, 429 included | no: the request itself is refused, whatever a 429 counts as for the limiter |
/// | 1xx–3xx, slow or not | no: the server answered |
/// | any response with a `Retry-After` longer than [`max_retry_after`](Self::max_retry_after) | no |
///
/// A `Retry-After` header (delay-seconds, or an HTTP-date taken against the
/// system clock) sets [`Verdict::retry_after`]: no retry starts sooner. A
/// header that is neither (garbage, a negative or fractional number) is
/// ignored, as is any but the first.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::tower::{Classify, HttpClassifier};
/// use rheostat::Outcome;
///
/// let classify = HttpClassifier::new()
///     .too_many_requests(Outcome::Ignore)
///     .slow_after(Duration::from_secs(2))?;
/// let response = |status: u16| Ok::<_, std::io::Error>(http::Response::builder().status(status).body(()).unwrap());
/// let fast = Duration::from_millis(20);
/// assert_eq!(classify.classify(&response(200), fast), Outcome::Success);
/// assert_eq!(classify.classify(&response(200), Duration::from_secs(3)), Outcome::Overload);
/// assert_eq!(classify.classify(&response(503), fast), Outcome::Overload);
/// assert_eq!(classify.classify(&response(404), fast), Outcome::Ignore);
/// assert_eq!(classify.classify(&response(429), fast), Outcome::Ignore);
/// # Ok::<(), rheostat::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    too_many_requests: Outcome,
    slow_after: Option<Duration>,
    max_retry_after: Duration,
}

impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier::new()
    }
}

impl HttpClassifier {
    /// 5xx, 429 and errors are overloads, other 4xx are ignored, no
    /// success is too slow, and a retry waits at most 10 s for a server's
    /// `Retry-After`.
    pub fn new() -> Self {
        HttpClassifier {
            too_many_requests: Outcome::Overload,
            slow_after: None,
            max_retry_after: Self::DEFAULT_MAX_RETRY_AFTER,
        }
    }

    /// The longest `Retry-After` a retry waits for by default: 10 s.
    pub const DEFAULT_MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

    /// The longest `Retry-After` a retry waits for (default
    /// [`DEFAULT_MAX_RETRY_AFTER`](Self::DEFAULT_MAX_RETRY_AFTER)): a
    /// response asking for a longer pause is not retried, and is returned
    /// as it is. (A retry's deadline, if it has one, also stops a retry that
    /// could not start before it.)
    ///
    /// # Errors
    ///
    /// `http.max_retry_after` of zero or over a year.
    pub fn max_retry_after(mut self, longest: Duration) -> Result<Self, ConfigError> {
        self.max_retry_after = check::duration("http.max_retry_after", longest)?;
        Ok(self)
    }

    /// What a 429 counts as (default [`Outcome::Overload`]).
    #[must_use]
    pub fn too_many_requests(mut self, outcome: Outcome) -> Self {
        self.too_many_requests = outcome;
        self
    }

    /// Count a successful response that took longer than `threshold` as an
    /// overload (default: never).
    ///
    /// # Errors
    ///
    /// `http.slow_after` of zero (every success would be an overload) or
    /// over a year, as every duration is checked.
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::tower::HttpClassifier;
    ///
    /// let err = HttpClassifier::new().slow_after(Duration::ZERO).unwrap_err();
    /// assert_eq!(err.field(), "http.slow_after");
    /// ```
    pub fn slow_after(mut self, threshold: Duration) -> Result<Self, ConfigError> {
        self.slow_after = Some(check::duration("http.slow_after", threshold)?);
        Ok(self)
    }

    /// What a response with `status`, after `latency`, counts as.
    pub fn status(&self, status: http::StatusCode, latency: Duration) -> Outcome {
        if status.is_server_error() {
            Outcome::Overload
        } else if status == http::StatusCode::TOO_MANY_REQUESTS {
            self.too_many_requests
        } else if status.is_client_error() {
            Outcome::Ignore
        } else if self.slow_after.is_some_and(|t| latency > t) {
            Outcome::Overload
        } else {
            Outcome::Success
        }
    }

    /// Whether a response with `status` could be answered otherwise if the
    /// request were sent again: a 5xx but 501 and 505.
    pub fn retryable_status(status: http::StatusCode) -> bool {
        status.is_server_error()
            && status != http::StatusCode::NOT_IMPLEMENTED
            && status != http::StatusCode::HTTP_VERSION_NOT_SUPPORTED
    }

    /// The pause a `Retry-After` header's value asks for, `now` being the
    /// system time (for an HTTP-date); `None` if the value is neither
    /// delay-seconds nor an HTTP-date. A date in the past asks for no
    /// pause; a number of seconds too large for a `u64` asks for
    /// `u64::MAX` seconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use http::HeaderValue;
    /// use rheostat::tower::HttpClassifier;
    ///
    /// let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480); // 2015-10-21 07:28:00 UTC
    /// let parse = |v: &'static str| HttpClassifier::parse_retry_after(&HeaderValue::from_static(v), now);
    /// assert_eq!(parse("120"), Some(Duration::from_secs(120)));
    /// assert_eq!(parse("Wed, 21 Oct 2015 07:28:30 GMT"), Some(Duration::from_secs(30)));
    /// assert_eq!(parse("soon"), None);
    /// assert_eq!(parse("-1"), None);
    /// ```
    pub fn parse_retry_after(
        value: &http::HeaderValue,
        now: std::time::SystemTime,
    ) -> Option<Duration> {
        let text = value.to_str().ok()?.trim();
        if text.is_empty() {
            return None;
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            // Only digits: a number too large for a u64 is still a number.
            return Some(Duration::from_secs(text.parse().unwrap_or(u64::MAX)));
        }
        let date = httpdate::parse_http_date(text).ok()?;
        Some(date.duration_since(now).unwrap_or(Duration::ZERO))
    }
}

impl<B, E> Classify<http::Response<B>, E> for HttpClassifier {
    type End = ();

    fn classify(&self, result: &Result<http::Response<B>, E>, latency: Duration) -> Outcome {
        match result {
            Ok(response) => self.status(response.status(), latency),
            Err(_) => Outcome::Overload,
        }
    }

    fn verdict(&self, result: &Result<http::Response<B>, E>, latency: Duration) -> Verdict {
        let head = result.as_ref().ok().map(|r| (r.status(), r.headers()));
        self.head_verdict(head, latency)
    }
}

impl HttpClassifier {
    /// [`Classify::verdict`] of a response whose head is `head` (its status
    /// and headers; `None` for an error), after `latency`: for any client
    /// whose responses are not `http::Response`s (reqwest's).
    pub(crate) fn head_verdict(
        &self,
        head: Option<(http::StatusCode, &http::HeaderMap)>,
        latency: Duration,
    ) -> Verdict {
        let Some((status, headers)) = head else {
            return Verdict::new(Outcome::Overload);
        };
        let verdict = Verdict::new(self.status(status, latency));
        let mut verdict = if Self::retryable_status(status) {
            verdict
        } else {
            verdict.not_retryable()
        };
        let after = headers
            .get(http::header::RETRY_AFTER)
            .and_then(|v| Self::parse_retry_after(v, std::time::SystemTime::now()));
        if let Some(after) = after {
            if after > self.max_retry_after {
                verdict = verdict.not_retryable();
            }
            verdict = verdict.retry_after(after);
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use http::{HeaderValue, Response, StatusCode};
    use proptest::prelude::*;

    use super::{Classify, HttpClassifier};
    use crate::algorithms::Outcome;

    /// 2015-10-21 07:28:00 UTC.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_480)
    }

    fn parse(value: &[u8]) -> Option<Duration> {
        let value = HeaderValue::from_bytes(value).unwrap_or_else(|e| panic!("{value:?}: {e}"));
        HttpClassifier::parse_retry_after(&value, now())
    }

    fn response(status: u16, retry_after: &[&str]) -> Result<Response<()>, &'static str> {
        let mut builder = Response::builder().status(status);
        for value in retry_after {
            builder = builder.header(http::header::RETRY_AFTER, *value);
        }
        Ok(builder.body(()).unwrap_or_else(|e| panic!("{e}")))
    }

    const FAST: Duration = Duration::from_millis(5);

    #[test]
    fn delay_seconds_are_read_and_whitespace_around_them_ignored() {
        assert_eq!(parse(b"0"), Some(Duration::ZERO));
        assert_eq!(parse(b"120"), Some(Duration::from_secs(120)));
        assert_eq!(parse(b" 7 "), Some(Duration::from_secs(7)));
        assert_eq!(parse(b"007"), Some(Duration::from_secs(7)));
        // Too many digits for a u64 is still a (very long) delay.
        assert_eq!(
            parse(b"99999999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
    }

    #[test]
    fn http_dates_in_each_of_the_three_formats_are_read_against_now() {
        let thirty = Some(Duration::from_secs(30));
        assert_eq!(parse(b"Wed, 21 Oct 2015 07:28:30 GMT"), thirty);
        assert_eq!(parse(b"Wednesday, 21-Oct-15 07:28:30 GMT"), thirty);
        assert_eq!(parse(b"Wed Oct 21 07:28:30 2015"), thirty);
        // A date already past asks for no wait.
        assert_eq!(
            parse(b"Tue, 20 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn garbage_is_ignored() {
        for garbage in [
            &b""[..],
            b"   ",
            b"-1",
            b"+5",
            b"1.5",
            b"1e3",
            b"5 s",
            b"soon",
            b"0x10",
            b"Wed, 32 Oct 2015 07:28:30 GMT",
            b"Wed, 21 Oct 2015 07:28:30",
            b"Wed, 21 Oct 2015 25:28:30 GMT",
            b"\xff\xfe",
            "\u{0660}".as_bytes(), // an Arabic-Indic zero is no ASCII digit
        ] {
            assert_eq!(parse(garbage), None, "{garbage:?}");
        }
    }

    proptest! {
        #[test]
        fn any_header_value_parses_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let parsed = HttpClassifier::parse_retry_after(&value, now());
                let text = String::from_utf8_lossy(&bytes);
                let digits = text.trim_matches(|c| c == ' ' || c == '\t');
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                    prop_assert!(parsed.is_some());
                }
            }
        }

        #[test]
        fn delay_seconds_round_trip(secs in any::<u64>()) {
            prop_assert_eq!(parse(secs.to_string().as_bytes()), Some(Duration::from_secs(secs)));
        }
    }

    #[test]
    fn a_5xx_or_an_error_may_be_retried_but_not_501_or_505() {
        let classify = HttpClassifier::new();
        for status in [500, 502, 503, 504, 599] {
            let verdict = classify.verdict(&response(status, &[]), FAST);
            assert_eq!(verdict.outcome, Outcome::Overload, "{status}");
            assert!(verdict.may_retry(), "{status}");
            assert_eq!(verdict.retry_after, None);
        }
        for status in [501, 505] {
            let verdict = classify.verdict(&response(status, &[]), FAST);
            assert_eq!(verdict.outcome, Outcome::Overload, "{status}");
            assert!(!verdict.may_retry(), "{status}");
        }
        let verdict = classify.verdict(&Err::<Response<()>, _>("reset"), FAST);
        assert_eq!(verdict.outcome, Outcome::Overload);
        assert!(verdict.may_retry());
    }

    #[test]
    fn a_4xx_is_never_retried_429_included_whatever_it_counts_as() {
        for classify in [
            HttpClassifier::new(),
            HttpClassifier::new().too_many_requests(Outcome::Ignore),
        ] {
            for status in [400, 401, 404, 409, 429] {
                let verdict = classify.verdict(&response(status, &["1"]), FAST);
                assert_eq!(
                    verdict.outcome,
                    classify.classify(&response(status, &["1"]), FAST),
                    "{status}"
                );
                assert!(!verdict.may_retry(), "{status}");
                assert_eq!(verdict.retry_after, Some(Duration::from_secs(1)));
            }
        }
        let verdict = HttpClassifier::new().verdict(&response(429, &[]), FAST);
        assert_eq!(verdict.outcome, Outcome::Overload);
        assert!(!verdict.retryable);
    }

    #[test]
    fn an_answer_is_never_retried_even_a_slow_one() {
        let classify = HttpClassifier::new()
            .slow_after(Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{e}"));
        for status in [200, 204, 301, 304] {
            let fast = classify.verdict(&response(status, &[]), FAST);
            assert_eq!(fast.outcome, Outcome::Success);
            assert!(!fast.may_retry());
            let slow = classify.verdict(&response(status, &[]), Duration::from_secs(2));
            assert_eq!(slow.outcome, Outcome::Overload, "still a slow call");
            assert!(!slow.may_retry(), "{status}");
        }
    }

    #[test]
    fn a_retry_after_sets_the_floor_and_one_too_long_ends_the_retries() {
        let classify = HttpClassifier::new();
        let verdict = classify.verdict(&response(503, &["3"]), FAST);
        assert!(verdict.may_retry());
        assert_eq!(verdict.retry_after, Some(Duration::from_secs(3)));
        // Only the first header counts.
        let verdict = classify.verdict(&response(503, &["2", "4"]), FAST);
        assert_eq!(verdict.retry_after, Some(Duration::from_secs(2)));
        // Garbage: retried as if there were none.
        for garbage in ["soon", "-3", "1.5", ""] {
            let verdict = classify.verdict(&response(503, &[garbage]), FAST);
            assert!(verdict.may_retry(), "{garbage:?}");
            assert_eq!(verdict.retry_after, None, "{garbage:?}");
        }
        // Longer than the 10 s a retry waits by default: not retried.
        let verdict = classify.verdict(&response(503, &["11"]), FAST);
        assert!(!verdict.may_retry());
        assert_eq!(verdict.retry_after, Some(Duration::from_secs(11)));
        let verdict = classify.verdict(&response(503, &["10"]), FAST);
        assert!(verdict.may_retry());
        let patient = classify
            .max_retry_after(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(patient.verdict(&response(503, &["11"]), FAST).may_retry());
        assert!(!patient
            .verdict(&response(503, &["99999999999999999999999"]), FAST)
            .may_retry());
        let err = HttpClassifier::new()
            .max_retry_after(Duration::ZERO)
            .unwrap_err();
        assert_eq!(err.field(), "http.max_retry_after");
    }

    #[test]
    fn status_codes_outside_what_http_defines_are_not_retried() {
        // `http` accepts 100..=999; a 6xx is no server error.
        let status = StatusCode::from_u16(600).unwrap_or_else(|e| panic!("{e}"));
        assert!(!HttpClassifier::retryable_status(status));
    }
}
