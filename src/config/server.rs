//! [`ServerConfig`]: how a server answers the requests its limiter refuses.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::algorithms::ConfigError;
#[cfg(feature = "http")]
use crate::{algorithms::Algorithm, clock::Clock, tower::ShedLayer};

/// How a server sheds its own load through a limiter (the `http` feature's
/// `ShedLayer`, which `ServerConfig::apply` sets up): the `server` table
/// of a limiter in a file.
///
/// A limiter with a `server` table waits newest first (`queue = "lifo"`)
/// and at most 100 ms (`max_wait`) unless its table says otherwise: the
/// newest request is the one whose caller is still waiting.
///
/// # Examples
///
/// ```
/// use rheostat::config::LimitersConfig;
///
/// let file = LimitersConfig::from_toml(r#"
///     [limiters.api.policy]
///     policy = "gradient"
///
///     [limiters.api.server]
///     status = 429
///     retry_after = "2s"
///     grpc_status = "resource_exhausted"   # for gRPC requests
///     request_timeout = "30s"              # the longest a request holds its slot
/// "#)?;
/// let api = &file.limiters["api"];
/// assert_eq!(api.server.as_ref().unwrap().status, 429);
/// assert_eq!(api.queue, rheostat::limiter::QueueOrder::Lifo);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// The status of a refusal: a 4xx or a 5xx (default 503).
    pub status: u16,
    /// The `Retry-After` of a refusal whose rejection does not say how long
    /// to wait (default 1 s; an open breaker says how long).
    #[serde(with = "humantime_serde")]
    pub retry_after: Duration,
    /// Whether a request may wait in the limiter's queue when the limit is
    /// reached (default true); false refuses at once.
    pub wait: bool,
    /// The `grpc-status` of a refused gRPC request, by name (default
    /// `"unavailable"`; `"resource_exhausted"` says the server is out of
    /// capacity, which clients may read as a quota): any code but `ok`.
    pub grpc_status: String,
    /// The longest an admitted request holds its slot before it is
    /// answered `408 Request Timeout`, above 0 and at most a year (default
    /// none here: the layer's own, 15 s; see `ShedLayer::request_timeout`).
    #[serde(with = "humantime_serde")]
    pub request_timeout: Option<Duration>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            status: 503,
            retry_after: Duration::from_secs(1),
            wait: true,
            grpc_status: String::from("unavailable"),
            request_timeout: None,
        }
    }
}

impl ServerConfig {
    /// Check every field.
    ///
    /// # Errors
    ///
    /// `server.status` not a 4xx or 5xx; `server.retry_after` over a year;
    /// `server.grpc_status` not the name of a gRPC code other than `ok`;
    /// `server.request_timeout` zero or over a year.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.grpc_code()?;
        if !(400..=599).contains(&self.status) {
            return Err(ConfigError::new(
                "server.status",
                self.status,
                "a 4xx or 5xx status",
            ));
        }
        if self.retry_after > crate::algorithms::MAX_DURATION {
            return Err(ConfigError::new(
                "server.retry_after",
                format_args!("{:?}", self.retry_after),
                "a duration of at most 365 days",
            ));
        }
        if let Some(after) = self.request_timeout {
            crate::algorithms::check::duration("server.request_timeout", after)?;
        }
        Ok(())
    }

    /// `layer` answering refusals as this table says: its status, its
    /// `Retry-After`, whether a request may wait, and its request timeout.
    ///
    /// # Errors
    ///
    /// As [`ServerConfig::validate`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use rheostat::config::LimitersConfig;
    /// use rheostat::tower::ShedLayer;
    ///
    /// let file = LimitersConfig::from_toml(r#"
    ///     [limiters.api.policy]
    ///     policy = "gradient"
    ///     [limiters.api.server]
    ///     status = 429
    /// "#)?;
    /// let limiter = Arc::new(file.build("api")?);
    /// let server = file.limiters["api"].server.as_ref().unwrap();
    /// let layer = server.apply(ShedLayer::new(limiter))?;
    /// # drop(layer);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "http")]
    pub fn apply<A: Algorithm, C: Clock, P>(
        &self,
        layer: ShedLayer<A, C, P>,
    ) -> Result<ShedLayer<A, C, P>, ConfigError> {
        self.validate()?;
        let status = http::StatusCode::from_u16(self.status)
            .map_err(|_| ConfigError::new("server.status", self.status, "a 4xx or 5xx status"))?;
        let code = self.grpc_code()?;
        let layer = layer
            .status(status)?
            .grpc_status(code)?
            .retry_after(self.retry_after);
        let layer = match self.request_timeout {
            Some(after) => layer.request_timeout(after)?,
            None => layer,
        };
        Ok(if self.wait { layer } else { layer.fail_fast() })
    }

    /// The code `grpc_status` names.
    fn grpc_code(&self) -> Result<crate::grpc::GrpcCode, ConfigError> {
        super::grpc::code(&self.grpc_status).ok_or_else(|| {
            ConfigError::new(
                "server.grpc_status",
                format_args!("{:?}", self.grpc_status),
                super::grpc::allowed(),
            )
        })
    }
}
