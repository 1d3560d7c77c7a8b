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
use crate::{ProbeAllowance, ProbeClaims};

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

/// Claim up to `ARGV[1]` of the cycle's `ARGV[2]` probes from counter
/// `KEYS[1]`, which lapses `ARGV[3]` milliseconds after its first claim;
/// `ARGV[4]` instead, uncounted, while `KEYS[2]` (an instance saw the
/// dependency recover) stands. Returns how many were granted:
/// [`ProbeAllowance::granted`], counted atomically.
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return tonumber(ARGV[4]) end
local n = redis.call('INCRBY', KEYS[1], ARGV[1])
if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
local left = tonumber(ARGV[2]) - (n - tonumber(ARGV[1]))
if left < 0 then left = 0 end
if left > tonumber(ARGV[1]) then left = tonumber(ARGV[1]) end
return left
";

/// A fleet's probe allowance, shared through Redis: each limiter claims
/// its probes when [`ProbeClaims`] says (shortly before its breaker's
/// cooldown ends, and each later cycle while it is half-open without a
/// token) from a per-limiter counter for the cycle, the wall clock's time
/// since the Unix epoch in cycles, so that the fleet as a whole sends
/// `allowance.fleet` probes a cycle; it grants what it got to the limiter
/// ([`Limiter::grant_probes`]), built with [`Builder::shared_probes`]. When
/// Redis does not answer within [`REQUEST_TIMEOUT`], the instance grants
/// itself `allowance.fallback` (its share as `fleet_size` would scale it).
/// An instance whose breaker closed after a claim
/// ([`ProbeClaims::recovered`]) sets the limiter's recovered key for
/// [`ProbeAllowance::recovered_for`]; while it stands, every claim is
/// granted `allowance.fallback`, uncounted.
///
/// [`Limiter::grant_probes`]: crate::Limiter::grant_probes
/// [`Builder::shared_probes`]: crate::Builder::shared_probes
#[derive(Debug)]
pub struct RedisProbes {
    client: redis::Client,
    prefix: String,
    live: Arc<LiveLimiters>,
    /// The fleet's allowance: at its defaults, 5 probes a cycle for the
    /// fleet, one per instance, one without Redis, cycles of 10 s.
    pub allowance: ProbeAllowance,
    every: Duration,
}

impl RedisProbes {
    /// Claims for `live`'s limiters from the Redis at `url` under
    /// `prefix`, the allowance at its defaults.
    ///
    /// # Errors
    ///
    /// A `url` Redis does not take.
    pub fn new(url: &str, prefix: &str, live: Arc<LiveLimiters>) -> redis::RedisResult<Self> {
        Ok(RedisProbes {
            client: redis::Client::open(url)?,
            prefix: prefix.to_owned(),
            live,
            allowance: ProbeAllowance::default(),
            every: Duration::from_millis(50),
        })
    }

    /// Claim until dropped: spawn it. Each limiter is asked every 50 ms
    /// whether a claim is due ([`ProbeClaims::due`]).
    pub async fn run(self) {
        let mut claims: std::collections::BTreeMap<String, ProbeClaims> = Default::default();
        let mut connection = None;
        loop {
            tokio::time::sleep(self.every).await;
            for name in self.live.names() {
                let Some(limiter) = self.live.get(&name) else {
                    continue;
                };
                let since = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap_or_default();
                let claims = claims
                    .entry(name.clone())
                    .or_insert_with(|| ProbeClaims::new(self.allowance.cycle));
                if claims.recovered(&*limiter)
                    && self.recovered(&mut connection, &name).await.is_err()
                {
                    connection = None;
                }
                let Some(claim) = claims.due(&*limiter, since) else {
                    continue;
                };
                let granted = match self.claim(&mut connection, &name, claim.cycle).await {
                    Ok(granted) => granted,
                    Err(_) => {
                        connection = None;
                        self.allowance.fallback
                    }
                };
                limiter.grant_probes(granted, Some(claim.lapse));
            }
        }
    }

    /// Tell the fleet this instance's breaker for `name` closed.
    async fn recovered(
        &self,
        connection: &mut Option<redis::aio::MultiplexedConnection>,
        name: &str,
    ) -> redis::RedisResult<()> {
        let con = connect(&self.client, connection).await?;
        let lapse = millis(self.allowance.recovered_for());
        bounded(con.pset_ex(self.recovered_key(name), 1, lapse)).await
    }

    fn recovered_key(&self, name: &str) -> String {
        format!("{}:probes:{name}:recovered", self.prefix)
    }

    /// Claim this instance's probes for `cycle`.
    async fn claim(
        &self,
        connection: &mut Option<redis::aio::MultiplexedConnection>,
        name: &str,
        cycle: u64,
    ) -> redis::RedisResult<u32> {
        let con = connect(&self.client, connection).await?;
        let key = format!("{}:probes:{name}:{cycle}", self.prefix);
        bounded(
            redis::Script::new(CLAIM)
                .key(key)
                .key(self.recovered_key(name))
                .arg(self.allowance.per_instance)
                .arg(self.allowance.fleet)
                .arg(millis(self.allowance.cycle.saturating_mul(2)))
                .arg(self.allowance.fallback)
                .invoke_async(con),
        )
        .await
    }
}

/// The connection, opened if it is not.
async fn connect<'c>(
    client: &redis::Client,
    connection: &'c mut Option<redis::aio::MultiplexedConnection>,
) -> redis::RedisResult<&'c mut redis::aio::MultiplexedConnection> {
    if connection.is_none() {
        *connection = Some(bounded(client.get_multiplexed_async_connection()).await?);
    }
    Ok(connection
        .as_mut()
        .unwrap_or_else(|| unreachable!("just set")))
}

/// `d` in whole milliseconds, at least one (what `PX` takes).
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
