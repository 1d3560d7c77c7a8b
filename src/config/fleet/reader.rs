//! [`RedisOverrides`]: one instance's reader of the fleet's document.

use std::hash::{BuildHasher as _, RandomState};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures_util::StreamExt as _;

use super::report::{self, Throttle};
use super::{
    bounded, changed_channel, overrides_key, version_key, FleetOverrides, LiveLimiters,
    MAX_FILE_BYTES, READ_GAP, REREAD_EVERY,
};

/// Fetch the document `KEYS[1]` unless it is longer than `ARGV[1]` bytes,
/// with the version counter `KEYS[2]`, in one step: its length, the
/// document (nil when absent or too long) and the counter (nil when
/// absent).
const FETCH: &str = r"
local length = redis.call('STRLEN', KEYS[1])
local document = false
if length <= tonumber(ARGV[1]) then document = redis.call('GET', KEYS[1]) end
return {length, document, redis.call('GET', KEYS[2])}
";

/// What [`FETCH`] answers.
type Fetched = (u64, Option<Vec<u8>>, Option<String>);

/// One instance's reader of the fleet's overrides; see the [module
/// documentation](super).
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

/// What a reader keeps from one session to the next.
#[derive(Debug, Default)]
struct Follower {
    /// The version in force and a hash of the document that holds it.
    in_force: Option<(u64, u64)>,
    /// A hash of the last document that did not parse, not parsed again.
    unreadable: Option<u64>,
    /// Keyed at random per process, so that a writer cannot aim at it.
    hasher: RandomState,
    logs: Throttle,
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
        let mut follower = Follower::default();
        loop {
            // An error that ends a session is counted and logged; the next
            // session begins after a period.
            if let Err(e) = self.session(&mut follower).await {
                self.error(&mut follower, &e);
            }
            tokio::time::sleep(self.every).await;
        }
    }

    /// One connection's worth: subscribe, read, and read again on each
    /// message and each period, until the connection is lost. A message
    /// only marks a read pending: one read is in flight at most, one more
    /// pending, and reads are [`READ_GAP`] apart.
    async fn session(&self, follower: &mut Follower) -> redis::RedisResult<()> {
        let mut pubsub = bounded(self.client.get_async_pubsub()).await?;
        bounded(pubsub.subscribe(changed_channel(&self.prefix))).await?;
        let connection = bounded(self.client.get_multiplexed_async_connection()).await?;
        let mut messages = pubsub.on_message();
        let mut period = tokio::time::interval(self.every);
        period.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pending = true;
        let mut next_read = tokio::time::Instant::now();
        let mut reading = None;
        loop {
            tokio::select! {
                // The message's body is dropped unread.
                message = messages.next() => match message {
                    Some(_) => pending = true,
                    None => {
                        return Err(redis::RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "the subscription ended",
                        )))
                    }
                },
                _ = period.tick() => pending = true,
                () = tokio::time::sleep_until(next_read), if pending && reading.is_none() => {
                    pending = false;
                    next_read = tokio::time::Instant::now() + READ_GAP;
                    reading = Some(Box::pin(self.fetch(connection.clone())));
                }
                fetched = async {
                    match reading.as_mut() {
                        Some(read) => read.await,
                        None => std::future::pending().await,
                    }
                }, if reading.is_some() => {
                    reading = None;
                    match fetched {
                        Ok(fetched) => self.take(follower, fetched),
                        Err(e) if report::ends_session(&e) => return Err(e),
                        Err(e) => self.error(follower, &e),
                    }
                }
            }
        }
    }

    /// The document's length, the document if it is not too long, and the
    /// version counter.
    async fn fetch(
        &self,
        mut connection: redis::aio::MultiplexedConnection,
    ) -> redis::RedisResult<Fetched> {
        bounded(
            redis::Script::new(FETCH)
                .key(overrides_key(&self.prefix))
                .key(version_key(&self.prefix))
                .arg(MAX_FILE_BYTES)
                .invoke_async(&mut connection),
        )
        .await
    }

    /// Hand the document fetched to the limiters, unless it is the one in
    /// force, older than it, too long or does not read or check. Each read
    /// is counted by its result.
    fn take(&self, follower: &mut Follower, (length, document, counter): Fetched) {
        if document.is_none() && length > 0 {
            report::read(&self.prefix, "too_large", None);
            follower.logs.log("too_large", |_left_out| {
                #[cfg(feature = "tracing")]
                ::tracing::warn!(key = %overrides_key(&self.prefix), bytes = length, max = MAX_FILE_BYTES, left_out = _left_out, "fleet overrides refused: the document is too large");
            });
            return;
        }
        let hash = follower.hasher.hash_one(document.as_deref());
        if follower.in_force.is_some_and(|(_, h)| h == hash) {
            report::read(&self.prefix, "unchanged", None);
            return;
        }
        let parsed = match &document {
            None => Ok(FleetOverrides::default()),
            Some(_) if follower.unreadable == Some(hash) => {
                report::read(&self.prefix, "refused", None);
                return;
            }
            Some(bytes) => serde_json::from_slice::<FleetOverrides>(bytes),
        };
        let document = match parsed {
            Ok(document) => document,
            Err(_e) => {
                follower.unreadable = Some(hash);
                report::read(&self.prefix, "refused", None);
                follower.logs.log("refused", |_left_out| {
                    #[cfg(feature = "tracing")]
                    ::tracing::warn!(key = %overrides_key(&self.prefix), error = %_e, left_out = _left_out, "fleet overrides refused");
                });
                return;
            }
        };
        let in_force = follower.in_force.map_or(0, |(version, _)| version);
        let counter = counter.and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
        let older = document.version < in_force;
        if older && counter >= in_force {
            report::read(&self.prefix, "stale", None);
            follower.logs.log("stale", |_left_out| {
                #[cfg(feature = "tracing")]
                ::tracing::warn!(key = %overrides_key(&self.prefix), version = document.version, in_force, left_out = _left_out, "fleet overrides refused: older than the version in force");
            });
            return;
        }
        if older {
            follower.logs.log("went_back", |_left_out| {
                #[cfg(feature = "tracing")]
                ::tracing::info!(key = %overrides_key(&self.prefix), version = document.version, in_force, counter, left_out = _left_out, "the store's version counter went back: following its document");
            });
        }
        match self
            .live
            .set_fleet_overrides(document.overrides, SystemTime::now())
        {
            Ok(_) => {
                follower.in_force = Some((document.version, hash));
                report::read(&self.prefix, "applied", Some(document.version));
            }
            Err(_e) => {
                report::read(&self.prefix, "refused", None);
                follower.logs.log("refused", |_left_out| {
                    #[cfg(feature = "tracing")]
                    ::tracing::warn!(key = %overrides_key(&self.prefix), error = %_e, left_out = _left_out, "fleet overrides refused");
                });
            }
        }
    }

    /// Count and log an error Redis answered.
    fn error(&self, follower: &mut Follower, e: &redis::RedisError) {
        let kind = report::error_kind(e);
        report::error(&self.prefix, kind);
        follower.logs.log(kind, |_left_out| {
            #[cfg(feature = "tracing")]
            ::tracing::warn!(prefix = %self.prefix, kind, error = %e, left_out = _left_out, "fleet overrides: Redis error");
        });
    }
}
