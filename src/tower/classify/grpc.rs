//! [`GrpcClassifier`]: gRPC statuses, read from a trailers-only response's
//! headers or from the trailers after the body, as outcomes and verdicts.

use std::fmt;
use std::time::Duration;

use super::{AtBodyEnd, BodyEnd, Classify, ClassifyEnd};
use crate::algorithms::{check, ConfigError, Outcome};
use crate::retry::Verdict;

pub(crate) use crate::grpc::GrpcCode;

/// The header of a gRPC status, in a trailers-only response's headers or
/// in the trailers.
pub(crate) const GRPC_STATUS: &str = "grpc-status";

/// The header by which a gRPC server asks a client to wait before a retry
/// (in milliseconds), or, negative or malformed, not to retry.
pub(crate) const GRPC_PUSHBACK: &str = "grpc-retry-pushback-ms";

/// Classifies gRPC calls by their status, wherever it arrives.
///
/// A gRPC call answers HTTP 200 and puts its status in `grpc-status`: in
/// the response's headers when the server fails before sending a message
/// (a *trailers-only* response), otherwise in the trailers after the body.
/// Given to [`RheostatLayer::classify`](crate::tower::RheostatLayer::classify),
/// it reads the status from the headers where it is there, and otherwise
/// has the layer hold the call's permit until the body ends, to read it
/// from the trailers: the latency the limiter learns is the time to the
/// status. (Its [`Classify::End`] is the body's end; its
/// [`Classify::classify`], asked about a response alone, says what the
/// headers say, and [`Outcome::Ignore`] for a status still to come.)
///
/// Each of the 17 codes counts as this by default:
///
/// | code | outcome | why |
/// | --- | --- | --- |
/// | `OK` (0) | `Success`, or `Overload` if slower than [`slow_after`](Self::slow_after) | answered |
/// | `CANCELLED` (1) | `Ignore` | the caller gave up, not the dependency |
/// | `UNKNOWN` (2) | `Overload` | the server failed and could not say why: as an HTTP 500 |
/// | `INVALID_ARGUMENT` (3) | `Ignore` | the caller's request |
/// | `DEADLINE_EXCEEDED` (4) | `Overload` | too slow: a timeout |
/// | `NOT_FOUND` (5) | `Ignore` | the caller's request |
/// | `ALREADY_EXISTS` (6) | `Ignore` | the caller's request |
/// | `PERMISSION_DENIED` (7) | `Ignore` | the caller's credentials |
/// | `RESOURCE_EXHAUSTED` (8) | `Overload`, see [`resource_exhausted`](Self::resource_exhausted) | out of capacity, as an HTTP 429 |
/// | `FAILED_PRECONDITION` (9) | `Ignore` | the state the caller's request needs |
/// | `ABORTED` (10) | `Ignore` | a conflict between callers (a transaction), retried above |
/// | `OUT_OF_RANGE` (11) | `Ignore` | the caller's request |
/// | `UNIMPLEMENTED` (12) | `Ignore` | the caller asked for what the server does not have |
/// | `INTERNAL` (13) | `Overload` | the server is broken: as an HTTP 500 |
/// | `UNAVAILABLE` (14) | `Overload` | the server says it is overloaded or down |
/// | `DATA_LOSS` (15) | `Overload` | the server is broken |
/// | `UNAUTHENTICATED` (16) | `Ignore` | the caller's credentials |
/// | an error from the inner service (a refused or reset connection), a body that fails or ends without a status | `Overload` | |
///
/// [`with_outcome`](Self::with_outcome) changes any code but `OK`. A
/// `grpc-status` that is not a number from 0 to 16 is `UNKNOWN`; a
/// response with an HTTP status other than 200 and no `grpc-status` is
/// the code gRPC maps it to ([`GrpcCode::from_http`]: a 503 is
/// `UNAVAILABLE`).
///
/// A `RESOURCE_EXHAUSTED` is the dependency saying it ran out of capacity,
/// what an adaptive limit backs off on; if it means instead that *you* spent
/// a quota the dependency keeps per caller, make it [`Outcome::Ignore`].
///
/// # Retries
///
/// As gRPC's retry design (A6) says, [`verdict`](Self::verdict) allows
/// another attempt only for a code configured as retryable
/// ([`retryable`](Self::retryable); `UNAVAILABLE` by default), and honours
/// the server's `grpc-retry-pushback-ms`: no retry starts sooner, none if
/// it asks for longer than [`max_pushback`](Self::max_pushback), and none
/// if it is negative or malformed (the server asking not to be retried).
/// An attempt is retried only if its method is idempotent: the verdict is
/// for a retrying [`Limiter::call`](crate::Limiter::call) around one call
/// of such a method; never give it for one that is not (its outcome as
/// `Verdict::new(outcome).not_retryable()` says what it is without
/// allowing a retry). The tower layer does not retry gRPC calls: a tonic
/// request's body cannot be sent twice.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::grpc::GrpcCode;
/// use rheostat::tower::GrpcClassifier;
/// use rheostat::Outcome;
///
/// let classify = GrpcClassifier::new()
///     .resource_exhausted(Outcome::Ignore)
///     .slow_after(Duration::from_secs(1))?;
/// let fast = Duration::from_millis(20);
/// assert_eq!(classify.outcome(GrpcCode::Ok, fast), Outcome::Success);
/// assert_eq!(classify.outcome(GrpcCode::Ok, Duration::from_secs(2)), Outcome::Overload);
/// assert_eq!(classify.outcome(GrpcCode::Unavailable, fast), Outcome::Overload);
/// assert_eq!(classify.outcome(GrpcCode::NotFound, fast), Outcome::Ignore);
/// assert_eq!(classify.outcome(GrpcCode::ResourceExhausted, fast), Outcome::Ignore);
///
/// // Retried after the server's pushback; not at all if it says no.
/// let verdict = classify.verdict(GrpcCode::Unavailable, Some(b"250"), fast);
/// assert!(verdict.may_retry());
/// assert_eq!(verdict.retry_after, Some(Duration::from_millis(250)));
/// assert!(!classify.verdict(GrpcCode::Unavailable, Some(b"-1"), fast).may_retry());
/// assert!(!classify.verdict(GrpcCode::Internal, None, fast).may_retry());
/// # Ok::<(), rheostat::ConfigError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct GrpcClassifier {
    /// What each code counts as, by number (`OK`'s is `Success`).
    outcomes: [Outcome; 17],
    /// The codes a retry may follow, one bit per number.
    retryable: u32,
    slow_after: Option<Duration>,
    max_pushback: Duration,
}

impl Default for GrpcClassifier {
    fn default() -> Self {
        GrpcClassifier::new()
    }
}

impl GrpcClassifier {
    /// The longest `grpc-retry-pushback-ms` a retry waits for by default:
    /// 10 s.
    pub const DEFAULT_MAX_PUSHBACK: Duration = Duration::from_secs(10);

    /// The codes counted as overloads by default: `UNKNOWN`,
    /// `DEADLINE_EXCEEDED`, `RESOURCE_EXHAUSTED`, `INTERNAL`,
    /// `UNAVAILABLE` and `DATA_LOSS`.
    pub const DEFAULT_OVERLOAD: [GrpcCode; 6] = [
        GrpcCode::Unknown,
        GrpcCode::DeadlineExceeded,
        GrpcCode::ResourceExhausted,
        GrpcCode::Internal,
        GrpcCode::Unavailable,
        GrpcCode::DataLoss,
    ];

    /// Each code as the [table](Self) says, `UNAVAILABLE` the only
    /// retryable code, no success too slow, and a retry waiting at most
    /// 10 s for a server's pushback.
    pub fn new() -> Self {
        let mut outcomes = [Outcome::Ignore; 17];
        outcomes[GrpcCode::Ok as usize] = Outcome::Success;
        for code in Self::DEFAULT_OVERLOAD {
            outcomes[code as usize] = Outcome::Overload;
        }
        GrpcClassifier {
            outcomes,
            retryable: GrpcCode::Unavailable.bit(),
            slow_after: None,
            max_pushback: Self::DEFAULT_MAX_PUSHBACK,
        }
    }

    /// What a `RESOURCE_EXHAUSTED` counts as (default
    /// [`Outcome::Overload`]): [`Outcome::Ignore`] where it means a quota
    /// the caller spent rather than a server out of capacity.
    #[must_use]
    pub fn resource_exhausted(mut self, outcome: Outcome) -> Self {
        self.outcomes[GrpcCode::ResourceExhausted as usize] = outcome;
        self
    }

    /// Count `code` as `outcome`.
    ///
    /// # Errors
    ///
    /// `grpc.code` `OK`: a call that answered is a success (or a slow
    /// call, see [`slow_after`](Self::slow_after)).
    pub fn with_outcome(mut self, code: GrpcCode, outcome: Outcome) -> Result<Self, ConfigError> {
        if code == GrpcCode::Ok {
            return Err(ConfigError::new(
                "grpc.code",
                code,
                "a code other than ok, which is a success",
            ));
        }
        self.outcomes[code as usize] = outcome;
        Ok(self)
    }

    /// The codes after which a retry may follow (default `UNAVAILABLE`
    /// alone), as an A6 retry policy's `retryableStatusCodes`. Only a code
    /// counted as an overload is retried, whatever this says.
    ///
    /// # Errors
    ///
    /// `grpc.retryable` holding `OK`.
    pub fn retryable(
        mut self,
        codes: impl IntoIterator<Item = GrpcCode>,
    ) -> Result<Self, ConfigError> {
        let mut bits = 0;
        for code in codes {
            if code == GrpcCode::Ok {
                return Err(ConfigError::new(
                    "grpc.retryable",
                    code,
                    "codes other than ok, which is not a failure",
                ));
            }
            bits |= code.bit();
        }
        self.retryable = bits;
        Ok(self)
    }

    /// Count an `OK` whose status came later than `threshold` after
    /// admission as an overload (default: never).
    ///
    /// # Errors
    ///
    /// `grpc.slow_after` of zero or over a year.
    pub fn slow_after(mut self, threshold: Duration) -> Result<Self, ConfigError> {
        self.slow_after = Some(check::duration("grpc.slow_after", threshold)?);
        Ok(self)
    }

    /// The longest `grpc-retry-pushback-ms` a retry waits for (default
    /// [`DEFAULT_MAX_PUSHBACK`](Self::DEFAULT_MAX_PUSHBACK)): a call asking
    /// for a longer pause is not retried.
    ///
    /// # Errors
    ///
    /// `grpc.max_pushback` of zero or over a year.
    pub fn max_pushback(mut self, longest: Duration) -> Result<Self, ConfigError> {
        self.max_pushback = check::duration("grpc.max_pushback", longest)?;
        Ok(self)
    }

    /// What a call that ended with `code`, `latency` after admission,
    /// counts as.
    pub fn outcome(&self, code: GrpcCode, latency: Duration) -> Outcome {
        let outcome = self.outcomes[code as usize];
        if code == GrpcCode::Ok && self.slow_after.is_some_and(|t| latency > t) {
            Outcome::Overload
        } else {
            outcome
        }
    }

    /// What a call of an idempotent method that ended with `code` says to
    /// a retry (see [Retries](Self#retries)), given the value of its
    /// `grpc-retry-pushback-ms`, if it had one.
    pub fn verdict(&self, code: GrpcCode, pushback: Option<&[u8]>, latency: Duration) -> Verdict {
        let verdict = Verdict::new(self.outcome(code, latency));
        let verdict = if self.retryable & code.bit() == 0 {
            verdict.not_retryable()
        } else {
            verdict
        };
        match pushback.map(Self::parse_pushback) {
            None => verdict,
            // Negative or malformed: the server asks not to be retried.
            Some(None) => verdict.not_retryable(),
            Some(Some(after)) if after > self.max_pushback => {
                verdict.not_retryable().retry_after(after)
            }
            Some(Some(after)) => verdict.retry_after(after),
        }
    }

    /// The pause a `grpc-retry-pushback-ms` value asks for: `None` unless
    /// it is a non-negative whole number of milliseconds in ASCII digits
    /// (A6: anything else asks the client not to retry). A number too large
    /// for a `u64` asks for `u64::MAX` milliseconds.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::tower::GrpcClassifier;
    ///
    /// assert_eq!(GrpcClassifier::parse_pushback(b"1500"), Some(Duration::from_millis(1500)));
    /// assert_eq!(GrpcClassifier::parse_pushback(b"-1"), None);
    /// assert_eq!(GrpcClassifier::parse_pushback(b"soon"), None);
    /// ```
    pub fn parse_pushback(value: &[u8]) -> Option<Duration> {
        if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let millis = std::str::from_utf8(value)
            .ok()
            .and_then(|text| text.parse().ok())
            .unwrap_or(u64::MAX);
        Some(Duration::from_millis(millis))
    }

    /// The code a response's headers give, if its status is known from
    /// them: its `grpc-status` (the first), or, without one, the code its
    /// HTTP status maps to if that is not 200.
    fn head_code<B>(response: &http::Response<B>) -> Option<GrpcCode> {
        match response.headers().get(GRPC_STATUS) {
            Some(value) => Some(GrpcCode::parse(value.as_bytes())),
            None if response.status() != http::StatusCode::OK => {
                Some(GrpcCode::from_http(response.status()))
            }
            None => None,
        }
    }
}

/// A response's outcome as far as its headers say it: the layer asks the
/// rest of it at the end of the body.
impl<B, E> Classify<http::Response<B>, E> for GrpcClassifier {
    type End = AtBodyEnd;

    fn classify(&self, result: &Result<http::Response<B>, E>, latency: Duration) -> Outcome {
        self.head(result, latency).unwrap_or(Outcome::Ignore)
    }
}

impl ClassifyEnd for GrpcClassifier {
    fn head<B, E>(
        &self,
        result: &Result<http::Response<B>, E>,
        latency: Duration,
    ) -> Option<Outcome> {
        match result {
            Ok(response) => Self::head_code(response).map(|code| self.outcome(code, latency)),
            Err(_) => Some(Outcome::Overload),
        }
    }

    fn end(&self, end: BodyEnd<'_>, latency: Duration) -> Outcome {
        match end {
            BodyEnd::Trailers(trailers) => match trailers.get(GRPC_STATUS) {
                Some(value) => self.outcome(GrpcCode::parse(value.as_bytes()), latency),
                // A gRPC body must end with a status.
                None => Outcome::Overload,
            },
            BodyEnd::Finished | BodyEnd::Failed => Outcome::Overload,
        }
    }
}

impl fmt::Debug for GrpcClassifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let codes = |outcome: Outcome| -> Vec<GrpcCode> {
            GrpcCode::ALL
                .into_iter()
                .filter(|code| *code != GrpcCode::Ok && self.outcomes[*code as usize] == outcome)
                .collect()
        };
        let retryable: Vec<GrpcCode> = GrpcCode::ALL
            .into_iter()
            .filter(|code| self.retryable & code.bit() != 0)
            .collect();
        f.debug_struct("GrpcClassifier")
            .field("overload", &codes(Outcome::Overload))
            .field("success", &codes(Outcome::Success))
            .field("retryable", &retryable)
            .field("slow_after", &self.slow_after)
            .field("max_pushback", &self.max_pushback)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::{HeaderMap, Response, StatusCode};
    use proptest::prelude::*;

    use super::{GrpcClassifier, GrpcCode};
    use crate::algorithms::Outcome;
    use crate::tower::classify::{BodyEnd, ClassifyEnd};

    const FAST: Duration = Duration::from_millis(5);

    fn head(status: u16, grpc_status: Option<&str>) -> Result<Response<()>, &'static str> {
        let mut builder = Response::builder().status(status);
        if let Some(value) = grpc_status {
            builder = builder.header("grpc-status", value);
        }
        Ok(builder.body(()).unwrap_or_else(|e| panic!("{e}")))
    }

    fn trailers(grpc_status: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(
            "grpc-status",
            grpc_status.parse().unwrap_or_else(|e| panic!("{e}")),
        );
        map
    }

    #[test]
    fn every_code_counts_as_the_table_says() {
        use GrpcCode::*;
        let classify = GrpcClassifier::new();
        let expected = [
            (Ok, Outcome::Success),
            (Cancelled, Outcome::Ignore),
            (Unknown, Outcome::Overload),
            (InvalidArgument, Outcome::Ignore),
            (DeadlineExceeded, Outcome::Overload),
            (NotFound, Outcome::Ignore),
            (AlreadyExists, Outcome::Ignore),
            (PermissionDenied, Outcome::Ignore),
            (ResourceExhausted, Outcome::Overload),
            (FailedPrecondition, Outcome::Ignore),
            (Aborted, Outcome::Ignore),
            (OutOfRange, Outcome::Ignore),
            (Unimplemented, Outcome::Ignore),
            (Internal, Outcome::Overload),
            (Unavailable, Outcome::Overload),
            (DataLoss, Outcome::Overload),
            (Unauthenticated, Outcome::Ignore),
        ];
        assert_eq!(expected.len(), GrpcCode::ALL.len());
        for (code, outcome) in expected {
            assert_eq!(classify.outcome(code, FAST), outcome, "{code}");
            // The same from the headers of a trailers-only response and
            // from the trailers.
            let number = code.as_i32().to_string();
            let at_head = classify.head(&head(200, Some(&number)), FAST);
            assert_eq!(at_head, Some(outcome), "{code}");
            let at_end = classify.end(BodyEnd::Trailers(&trailers(&number)), FAST);
            assert_eq!(at_end, outcome, "{code}");
        }
    }

    #[test]
    fn a_response_without_a_status_waits_for_its_trailers() {
        let classify = GrpcClassifier::new();
        assert_eq!(classify.head(&head(200, None), FAST), None);
        // An error, a broken body and a body without a status are overloads.
        assert_eq!(
            classify.head(&Err::<Response<()>, _>("reset"), FAST),
            Some(Outcome::Overload)
        );
        for end in [
            BodyEnd::Failed,
            BodyEnd::Finished,
            BodyEnd::Trailers(&HeaderMap::new()),
        ] {
            assert_eq!(classify.end(end, FAST), Outcome::Overload);
        }
    }

    #[test]
    fn an_http_status_without_grpc_status_is_the_code_grpc_maps_it_to() {
        let classify = GrpcClassifier::new();
        for (status, outcome) in [
            (503, Outcome::Overload),
            (429, Outcome::Overload),
            (502, Outcome::Overload),
            (500, Outcome::Overload),
            (404, Outcome::Ignore),
            (401, Outcome::Ignore),
            (403, Outcome::Ignore),
            (400, Outcome::Overload),
        ] {
            let at_head = classify.head(&head(status, None), FAST);
            assert_eq!(at_head, Some(outcome), "{status}");
        }
        assert_eq!(
            GrpcCode::from_http(StatusCode::SERVICE_UNAVAILABLE),
            GrpcCode::Unavailable
        );
    }

    #[test]
    fn a_slow_ok_is_a_slow_call_and_nothing_else_is_slowed() {
        let classify = GrpcClassifier::new()
            .slow_after(Duration::from_secs(1))
            .unwrap_or_else(|e| panic!("{e}"));
        let slow = Duration::from_secs(2);
        assert_eq!(classify.outcome(GrpcCode::Ok, slow), Outcome::Overload);
        assert_eq!(classify.outcome(GrpcCode::NotFound, slow), Outcome::Ignore);
        assert_eq!(
            classify.outcome(GrpcCode::Ok, Duration::from_secs(1)),
            Outcome::Success
        );
        let err = GrpcClassifier::new()
            .slow_after(Duration::ZERO)
            .unwrap_err();
        assert_eq!(err.field(), "grpc.slow_after");
    }

    #[test]
    fn outcomes_are_configurable_but_ok_is_always_a_success() {
        let classify = GrpcClassifier::new()
            .resource_exhausted(Outcome::Ignore)
            .with_outcome(GrpcCode::Aborted, Outcome::Overload)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            classify.outcome(GrpcCode::ResourceExhausted, FAST),
            Outcome::Ignore
        );
        assert_eq!(classify.outcome(GrpcCode::Aborted, FAST), Outcome::Overload);
        let err = GrpcClassifier::new()
            .with_outcome(GrpcCode::Ok, Outcome::Overload)
            .unwrap_err();
        assert_eq!(err.field(), "grpc.code");
        let err = GrpcClassifier::new().retryable([GrpcCode::Ok]).unwrap_err();
        assert_eq!(err.field(), "grpc.retryable");
    }

    #[test]
    fn only_retryable_overloads_are_retried_after_the_pushback() {
        let classify = GrpcClassifier::new();
        assert!(classify
            .verdict(GrpcCode::Unavailable, None, FAST)
            .may_retry());
        for code in [
            GrpcCode::Internal,
            GrpcCode::ResourceExhausted,
            GrpcCode::NotFound,
            GrpcCode::Ok,
        ] {
            assert!(!classify.verdict(code, None, FAST).may_retry(), "{code}");
        }
        let more = classify
            .retryable([
                GrpcCode::Unavailable,
                GrpcCode::ResourceExhausted,
                GrpcCode::NotFound,
            ])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(more
            .verdict(GrpcCode::ResourceExhausted, None, FAST)
            .may_retry());
        // Retryable, but ignored: an ignored outcome is never retried.
        assert!(!more.verdict(GrpcCode::NotFound, None, FAST).may_retry());

        let verdict = classify.verdict(GrpcCode::Unavailable, Some(b"300"), FAST);
        assert!(verdict.may_retry());
        assert_eq!(verdict.retry_after, Some(Duration::from_millis(300)));
        for refusal in [&b"-1"[..], b"", b"soon", b"1.5", b" 5", b"+5"] {
            let verdict = classify.verdict(GrpcCode::Unavailable, Some(refusal), FAST);
            assert!(!verdict.may_retry(), "{refusal:?}");
            assert_eq!(verdict.outcome, Outcome::Overload);
        }
        // Longer than the 10 s waited for by default.
        assert!(!classify
            .verdict(GrpcCode::Unavailable, Some(b"10001"), FAST)
            .may_retry());
        assert!(classify
            .verdict(GrpcCode::Unavailable, Some(b"10000"), FAST)
            .may_retry());
        assert!(!classify
            .verdict(
                GrpcCode::Unavailable,
                Some(b"99999999999999999999999"),
                FAST
            )
            .may_retry());
        let err = GrpcClassifier::new()
            .max_pushback(Duration::ZERO)
            .unwrap_err();
        assert_eq!(err.field(), "grpc.max_pushback");
    }

    proptest! {
        #[test]
        fn any_status_or_pushback_parses_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..30)) {
            let code = GrpcCode::parse(&bytes);
            prop_assert!(GrpcCode::ALL.contains(&code));
            let pushback = GrpcClassifier::parse_pushback(&bytes);
            prop_assert_eq!(pushback.is_some(), !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit));
            let _ = GrpcClassifier::new().verdict(code, Some(&bytes), Duration::ZERO);
        }
    }
}
