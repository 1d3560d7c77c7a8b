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
//!   ahead, as any override, and at most [`MAX_OVERRIDES`] in a document.
//! - It is never asked anything on the call path: an admission reads the
//!   limiter's gate, and the task reads Redis beside it. Redis slow,
//!   partitioned or down adds no latency to a call and changes no
//!   decision: the overrides last read stay until their ends, then the
//!   limiters decide alone, as they do without a store.
//! - Every read is bounded by a timeout; a connection lost is made again
//!   every period until Redis answers, and the document is read again at
//!   once.
//! - Messages on the channel only say "read again": their bodies are
//!   dropped unread, one read is in flight at most and one more pending,
//!   and reads are at least [`READ_GAP`] apart, so a flood of messages
//!   costs a few reads, not one each, and no memory.
//! - A document over [`MAX_FILE_BYTES`] is refused before it is fetched
//!   (its length is asked first, in the same script that fetches it).
//! - A document older than the one in force (a lower version, while the
//!   store's version counter has not gone back) is refused: a reader never
//!   goes back to an older document. A counter below the version in force
//!   means the store lost its data, and then its document is followed.
//! - A document that does not read, is too large, or names a limiter this
//!   instance does not have is refused as a whole, counted and logged (with
//!   the `tracing` feature, at most once per [`LOG_EVERY`] for each
//!   reason); the overrides in force stay. Reads are counted in
//!   `rheostat_fleet_reads_total{prefix, result}`, `result` one of
//!   `applied`, `unchanged` (the document in force, not parsed again),
//!   `refused`, `too_large` and `stale`. The version applied is the gauge
//!   `rheostat_fleet_version{prefix}`, so an operator can see which
//!   instances obeyed.
//! - Every error Redis answers (a key of the wrong type, a script refused,
//!   no answer in time, a connection lost) is counted in
//!   `rheostat_fleet_errors_total{prefix, kind}` and logged, at most once
//!   per [`LOG_EVERY`] for each kind. An error about the data leaves the
//!   session open; one about the connection ends it, and the next begins a
//!   period later.
//!
//! # The document
//!
//! Key `<prefix>:overrides`, JSON: `{"version": 7, "overrides": [...]}`,
//! each override as a file's `[[overrides]]` writes it
//! ([`OverrideConfig`]). [`publish`] counts up `<prefix>:version` and
//! writes the document with that version in one script, so that the
//! document in the store is always the last one published, and publishes
//! the version on channel `<prefix>:changed`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{LiveLimiters, OverrideConfig, MAX_FILE_BYTES, MAX_OVERRIDES};

mod probes;
mod reader;
mod report;

pub use probes::RedisProbes;
pub use reader::RedisOverrides;

/// How often a [`RedisOverrides`] reads the document with no message, and
/// tries again after Redis stops answering: 5 s.
pub const REREAD_EVERY: Duration = Duration::from_secs(5);

/// The longest a [`RedisOverrides`] waits for Redis to answer one request:
/// 1 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// The least time between two reads of the document by one
/// [`RedisOverrides`]: 100 ms. A change still reaches an instance within a
/// read of its announcement (a message after a quiet spell is read at
/// once), and a flood of messages costs at most ten reads a second.
pub const READ_GAP: Duration = Duration::from_millis(100);

/// The least time between two log lines for the same reason (a document
/// refused, a Redis error of one kind, a probe counter refused): 10 s. The
/// counters count every one; the log says how many it left out.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

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

/// The key of the version counter under `prefix`.
fn version_key(prefix: &str) -> String {
    format!("{prefix}:version")
}

/// Count up the version `KEYS[1]`, write the document `KEYS[2]` with it
/// and the overrides `ARGV[1]` (a JSON list), and announce the version on
/// channel `ARGV[2]`, all at once: two publishers racing leave the later
/// version's document in the store. The version is written as an integer
/// (`%d`), whatever its size.
const PUBLISH: &str = r#"
local version = redis.call('INCR', KEYS[1])
local document = '{"version":' .. string.format('%d', version) .. ',"overrides":' .. ARGV[1] .. '}'
redis.call('SET', KEYS[2], document)
redis.call('PUBLISH', ARGV[2], version)
return version
"#;

/// Write `overrides` as the fleet's, under `prefix`, with the next version,
/// and announce it: the operator's side. Returns the version written. The
/// version and the document are written in one script, so two publishers
/// racing leave the later version's document in the store.
///
/// Check the list first as the instances will
/// ([`LiveLimiters::check_fleet_overrides`]): an instance refuses a
/// document that does not check, as a whole.
///
/// # Errors
///
/// More than [`MAX_OVERRIDES`] overrides or a
/// document over [`MAX_FILE_BYTES`] (a client
/// error: the instances would refuse it), Redis's error, or its silence
/// past [`REQUEST_TIMEOUT`].
pub async fn publish(
    connection: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
    overrides: Vec<OverrideConfig>,
) -> redis::RedisResult<u64> {
    if overrides.len() > MAX_OVERRIDES {
        return Err(redis::RedisError::from((
            redis::ErrorKind::ClientError,
            "too many overrides",
            format!("{} overrides, at most {MAX_OVERRIDES}", overrides.len()),
        )));
    }
    let json = serde_json::to_string(&overrides).map_err(|e| {
        redis::RedisError::from((redis::ErrorKind::TypeError, "serialize", e.to_string()))
    })?;
    // `{"version":`, at most 20 digits, `,"overrides":` and `}`.
    let bytes = json.len() + 45;
    if bytes > MAX_FILE_BYTES {
        return Err(redis::RedisError::from((
            redis::ErrorKind::ClientError,
            "document too large",
            format!("{bytes} bytes, at most {MAX_FILE_BYTES}"),
        )));
    }
    bounded(
        redis::Script::new(PUBLISH)
            .key(version_key(prefix))
            .key(overrides_key(prefix))
            .arg(json)
            .arg(changed_channel(prefix))
            .invoke_async(connection),
    )
    .await
}

/// A Redis request given at most [`REQUEST_TIMEOUT`].
async fn bounded<T>(
    request: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    match tokio::time::timeout(REQUEST_TIMEOUT, request).await {
        Ok(result) => result,
        Err(_) => Err(redis::RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            "no answer within the request timeout",
        ))),
    }
}
