//! How a finished call becomes an [`Outcome`].

use std::time::Duration;

use crate::algorithms::Outcome;
#[cfg(feature = "http")]
use crate::algorithms::{check, ConfigError};

/// Turns the result of a call, and how long it took, into what it says
/// about the dependency.
///
/// Wrap a closure in [`ClassifyFn`] to use it as one.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::tower::{Classify, ClassifyFn};
/// use rheostat::Outcome;
///
/// // A gRPC-ish classifier: only "unavailable" is the dependency's fault.
/// let classify = ClassifyFn(|r: &Result<u32, &str>, _latency: Duration| match r {
///     Ok(_) => Outcome::Success,
///     Err(e) if *e == "unavailable" => Outcome::Overload,
///     Err(_) => Outcome::Ignore,
/// });
/// assert_eq!(classify.classify(&Err("unavailable"), Duration::ZERO), Outcome::Overload);
/// ```
pub trait Classify<Res, E> {
    /// What `result`, which took `latency`, says about the dependency.
    fn classify(&self, result: &Result<Res, E>, latency: Duration) -> Outcome;
}

/// A closure `Fn(&Result<Res, E>, Duration) -> Outcome` as a [`Classify`].
///
/// (A wrapper rather than an implementation for every closure: such a
/// blanket implementation makes the compiler fail to prove that futures
/// using the service are `Send`.)
#[derive(Clone, Copy, Debug, Default)]
pub struct ClassifyFn<F>(pub F);

impl<F, Res, E> Classify<Res, E> for ClassifyFn<F>
where
    F: Fn(&Result<Res, E>, Duration) -> Outcome,
{
    fn classify(&self, result: &Result<Res, E>, latency: Duration) -> Outcome {
        (self.0)(result, latency)
    }
}

/// The default classifier: a response is a success, an error an overload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultClassifier;

impl<Res, E> Classify<Res, E> for ResultClassifier {
    fn classify(&self, result: &Result<Res, E>, _latency: Duration) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(_) => Outcome::Overload,
        }
    }
}

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
/// arbitrary error type. Write a closure (see [`ClassifyFn`]) to tell errors
/// apart.
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
#[cfg(feature = "http")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpClassifier {
    too_many_requests: Outcome,
    slow_after: Option<Duration>,
}

#[cfg(feature = "http")]
impl Default for HttpClassifier {
    fn default() -> Self {
        HttpClassifier::new()
    }
}

#[cfg(feature = "http")]
impl HttpClassifier {
    /// 5xx, 429 and errors are overloads, other 4xx are ignored, and no
    /// success is too slow.
    pub fn new() -> Self {
        HttpClassifier {
            too_many_requests: Outcome::Overload,
            slow_after: None,
        }
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
}

#[cfg(feature = "http")]
impl<B, E> Classify<http::Response<B>, E> for HttpClassifier {
    fn classify(&self, result: &Result<http::Response<B>, E>, latency: Duration) -> Outcome {
        match result {
            Ok(response) => self.status(response.status(), latency),
            Err(_) => Outcome::Overload,
        }
    }
}
