//! A fleet's overrides from Redis: one operator's switch for every
//! instance, never on the call path.
//!
//! An operator writes a fleet's [overrides](crate::overrides) to one Redis
//! key ([`publish`]); each instance's [`RedisOverrides`] task reads it when
//! told of a change (a pub/sub message) and every period besides, and hands
//! it to the instance's [`LiveLimiters`], which sets each override that
//! applies to the instance's labels on its limiter, as a file's are.
//!
//! What the store can change, and what it cannot:
//!
//! - It can set and clear overrides, each with its end: at most a week
//!   ahead, as any override.
//! - It is never asked anything on the call path: an admission reads the
//!   limiter's gate, and the task reads Redis beside it. Redis slow,
//!   partitioned or down adds no latency to a call and changes no
//!   decision: the overrides last read stay until their ends, then the
//!   limiters decide alone, as they do without a store.
//! - Every read is bounded by a timeout; a connection lost is made again
//!   every period until Redis answers, and the document is read again at
//!   once.
//! - A document that does not read or names a limiter this instance does
//!   not have is refused as a whole, counted
//!   (`rheostat_fleet_reads_total{prefix, result="refused"}`) and logged (with the
//!   `tracing` feature); the overrides in force stay. The version applied
//!   is the gauge `rheostat_fleet_version{prefix}`, so an operator can see which
//!   instances obeyed.
//!
//! # The document
//!
//! Key `<prefix>:overrides`, JSON: `{"version": 7, "overrides": [...]}`,
//! each override as a file's `[[overrides]]` writes it
//! ([`OverrideConfig`]). [`publish`] writes it with the next version and
//! publishes the version on channel `<prefix>:changed`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt as _;
use redis::AsyncCommands as _;
use serde::{Deserialize, Serialize};

use super::{LiveLimiters, OverrideConfig};

/// How often a [`RedisOverrides`] reads the document with no message, and
/// tries again after Redis stops answering: 5 s.
pub const REREAD_EVERY: Duration = Duration::from_secs(5);

/// The longest a [`RedisOverrides`] waits for Redis to answer one request:
/// 1 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// A fleet's overrides, as stored under `<prefix>:overrides`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetOverrides {
    /// Counted up by each [`publish`]: which version an instance applied.
    pub version: u64,
    /// The overrides, as a file's `[[overrides]]` writes them.
    #[serde(default)]
    pub overrides: Vec<OverrideConfig>,
}

/// The key of the document under `prefix`.
pub fn overrides_key(prefix: &str) -> String {
    format!("{prefix}:overrides")
}

/// The channel a change is announced on under `prefix`.
pub fn changed_channel(prefix: &str) -> String {
    format!("{prefix}:changed")
}

/// Write `overrides` as the fleet's, under `prefix`, with the next version,
/// and announce it: the operator's side. Returns the version written.
///
/// # Errors
///
/// Redis's error, or its silence past [`REQUEST_TIMEOUT`] for one request.
pub async fn publish(
    connection: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    overrides: Vec<OverrideConfig>,
) -> redis::RedisResult<u64> {
    let version: u64 = bounded(connection.incr(format!("{prefix}:version"), 1)).await?;
    let document = FleetOverrides { version, overrides };
    let json = serde_json::to_string(&document).map_err(|e| {
        redis::RedisError::from((redis::ErrorKind::TypeError, "serialize", e.to_string()))
    })?;
    bounded(connection.set::<_, _, ()>(overrides_key(prefix), json)).await?;
    bounded(connection.publish::<_, _, ()>(changed_channel(prefix), version)).await?;
    Ok(version)
}

/// A Redis request given at most [`REQUEST_TIMEOUT`].
async fn bounded<T>(
    request: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(result) => result,
        Err(_) => Err(redis::RedisError::from((
            redis::ErrorKind::IoError,
            "no answer within the request timeout",
        ))),
    }
}

/// One instance's reader of the fleet's overrides; see the [module
/// documentation](self).
///
/// # Examples
///
/// ```no_run
/// use std::sync::Arc;
/// use rheostat::config::LiveLimiters;
/// use rheostat::config::fleet::RedisOverrides;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let live = Arc::new(LiveLimiters::options("limits.toml").label("region", "eu-west").load()?);
/// let fleet = RedisOverrides::new("redis://127.0.0.1:6379/", "rheostat", Arc::clone(&live))?;
/// tokio::spawn(fleet.run());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct RedisOverrides {
    client: redis::Client,
    prefix: String,
    live: Arc<LiveLimiters>,
    every: Duration,
}

impl RedisOverrides {
    /// A reader of the document under `prefix` in the Redis at `url`, for
    /// `live`'s limiters; it connects when [run](RedisOverrides::run).
    ///
    /// # Errors
    ///
    /// A `url` Redis does not take.
    pub fn new(url: &str, prefix: &str, live: Arc<LiveLimiters>) -> redis::RedisResult<Self> {
        Ok(RedisOverrides {
            client: redis::Client::open(url)?,
            prefix: prefix.to_owned(),
            live,
            every: REREAD_EVERY,
        })
    }

    /// Read the document every `every` with no message, and try again
    /// after Redis stops answering, instead of [`REREAD_EVERY`].
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(10));
        self
    }

    /// Follow the fleet's overrides until dropped: spawn it.
    pub async fn run(self) {
        loop {
            // Errors end a session; the next one begins after a period.
            let _ = self.session().await;
            tokio::time::sleep(self.every).await;
        }
    }

    /// One connection's worth: subscribe, read, and read again on each
    /// message and each period, until Redis fails to answer.
    async fn session(&self) -> redis::RedisResult<()> {
        let mut pubsub = bounded(self.client.get_async_pubsub()).await?;
        bounded(pubsub.subscribe(changed_channel(&self.prefix))).await?;
        let mut connection = bounded(self.client.get_multiplexed_async_connection()).await?;
        self.read(&mut connection).await?;
        let mut messages = pubsub.on_message();
        let mut period = tokio::time::interval(self.every);
        period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = messages.next() => match message {
                    Some(_) => self.read(&mut connection).await?,
                    None => return Ok(()),
                },
                _ = period.tick() => self.read(&mut connection).await?,
            }
        }
    }

    /// Read the document and hand it to the limiters. A document that
    /// does not read is refused and counted; Redis's silence ends the
    /// session.
    async fn read(
        &self,
        connection: &mut redis::aio::MultiplexedConnection,
    ) -> redis::RedisResult<()> {
        let text: Option<String> = bounded(connection.get(overrides_key(&self.prefix))).await?;
        let document = match text.as_deref().map(serde_json::from_str::<FleetOverrides>) {
            None => FleetOverrides::default(),
            Some(Ok(document)) => document,
            Some(Err(_e)) => {
                count(&self.prefix, "refused", None);
                #[cfg(feature = "tracing")]
                ::tracing::warn!(key = %overrides_key(&self.prefix), error = %_e, "fleet overrides refused");
                return Ok(());
            }
        };
        match self
            .live
            .set_fleet_overrides(document.overrides, SystemTime::now())
        {
            Ok(_) => count(&self.prefix, "applied", Some(document.version)),
            Err(_e) => {
                count(&self.prefix, "refused", None);
                #[cfg(feature = "tracing")]
                ::tracing::warn!(key = %overrides_key(&self.prefix), error = %_e, "fleet overrides refused");
            }
        }
        Ok(())
    }
}

/// Count a read of the document, and the version applied.
fn count(_prefix: &str, _result: &'static str, _version: Option<u64>) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::describe_counter!(
            "rheostat_fleet_reads_total",
            "Reads of the fleet's overrides from the store, by result: applied or refused"
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
