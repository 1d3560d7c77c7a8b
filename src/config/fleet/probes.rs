//! [`RedisProbes`]: a fleet's probe allowance, claimed from Redis.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis::AsyncCommands as _;

use super::report::{self, Throttle};
use super::{bounded, LiveLimiters};
use crate::limiter::{ProbeAllowance, ProbeClaims};

/// Claim up to `ARGV[1]` of the cycle's `ARGV[2]` probes from counter
/// `KEYS[1]`, which lapses `ARGV[3]` milliseconds after its first claim;
/// `ARGV[4]` instead, uncounted, while `KEYS[2]` (an instance saw the
/// dependency recover) stands. Returns how many were granted:
/// [`ProbeAllowance::granted`], counted atomically.
///
/// The counter never passes `ARGV[2]` (a claim takes only what is left),
/// and lapses at most `ARGV[3]` ahead: one that holds anything but a whole
/// number in `[1, ARGV[2]]`, or that lasts longer, was not written by a
/// claim, and the script answers -1 without touching it.
const CLAIM: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return tonumber(ARGV[4]) end
local per_instance, fleet, lapse = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local counter = redis.call('GET', KEYS[1])
local claimed = 0
if counter then
  local ttl = redis.call('PTTL', KEYS[1])
  if not string.match(counter, '^[0-9]+$') or ttl < 0 or ttl > lapse then return -1 end
  claimed = tonumber(counter)
  if claimed < 1 or claimed > fleet then return -1 end
end
local left = math.min(per_instance, fleet - claimed)
if left <= 0 then return 0 end
if counter then
  redis.call('INCRBY', KEYS[1], left)
else
  redis.call('SET', KEYS[1], left, 'PX', lapse)
end
return left
";

/// A fleet's probe allowance, shared through Redis: each limiter claims
/// its probes when [`ProbeClaims`] says (shortly before its breaker's
/// cooldown ends, and each later cycle while it is half-open without a
/// token) from a per-limiter counter for the cycle, the wall clock's time
/// since the Unix epoch in cycles, so that the fleet as a whole sends
/// `allowance.fleet` probes a cycle; it grants what it got to the limiter
/// ([`Limiter::grant_probes`]), built with [`Builder::shared_probes`]. When
/// Redis does not answer within [`REQUEST_TIMEOUT`](super::REQUEST_TIMEOUT),
/// the instance grants itself `allowance.fallback` (its share as
/// `fleet_size` would scale it).
/// An instance whose breaker closed after a claim
/// ([`ProbeClaims::recovered`]) sets the limiter's recovered key for
/// [`ProbeAllowance::recovered_for`]; while it stands, every claim is
/// granted `allowance.fallback`, uncounted.
///
/// A counter the allowance could not have reached (above `fleet`, below 1,
/// not a whole number, or lasting longer than two cycles: written by
/// something other than a claim) is taken as absent: the instance grants
/// itself `allowance.fallback`, as without Redis, so the fleet never loses
/// its probes to what the store holds. Each claim is counted in
/// `rheostat_fleet_probe_claims_total{prefix, result}` (`claimed`,
/// `implausible`, `unanswered`), each Redis error in
/// `rheostat_fleet_errors_total{prefix, kind}`, and both are logged (with
/// the `tracing` feature) at most once per [`LOG_EVERY`](super::LOG_EVERY)
/// for each reason.
///
/// [`Limiter::grant_probes`]: crate::limiter::Overrides::grant_probes
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
        let mut logs = Throttle::default();
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
                if claims.recovered(&*limiter) {
                    if let Err(e) = self.recovered(&mut connection, &name).await {
                        self.error(&mut logs, &mut connection, &e);
                    }
                }
                let Some(claim) = claims.due(&*limiter, since) else {
                    continue;
                };
                let granted = match self.claim(&mut connection, &name, claim.cycle).await {
                    Ok(granted) => match u32::try_from(granted) {
                        Ok(granted) => {
                            report::claim(&self.prefix, "claimed");
                            granted
                        }
                        Err(_) => {
                            report::claim(&self.prefix, "implausible");
                            logs.log("implausible", |_left_out| {
                                #[cfg(feature = "tracing")]
                                ::tracing::warn!(key = %self.counter_key(&name, claim.cycle), left_out = _left_out, "a probe counter the allowance could not have reached, taken as absent");
                            });
                            self.allowance.fallback
                        }
                    },
                    Err(e) => {
                        self.error(&mut logs, &mut connection, &e);
                        report::claim(&self.prefix, "unanswered");
                        self.allowance.fallback
                    }
                };
                limiter.overrides().grant_probes(granted, Some(claim.lapse));
            }
        }
    }

    /// Count and log an error Redis answered; drop the connection if it
    /// is lost.
    fn error(
        &self,
        logs: &mut Throttle,
        connection: &mut Option<redis::aio::MultiplexedConnection>,
        e: &redis::RedisError,
    ) {
        let kind = report::error_kind(e);
        report::error(&self.prefix, kind);
        logs.log(kind, |_left_out| {
            #[cfg(feature = "tracing")]
            ::tracing::warn!(prefix = %self.prefix, kind, error = %e, left_out = _left_out, "fleet probes: Redis error");
        });
        if report::ends_session(e) {
            *connection = None;
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

    fn counter_key(&self, name: &str, cycle: u64) -> String {
        format!("{}:probes:{name}:{cycle}", self.prefix)
    }

    /// Claim this instance's probes for `cycle`: how many were granted, or
    /// -1 for a counter the allowance could not have reached.
    async fn claim(
        &self,
        connection: &mut Option<redis::aio::MultiplexedConnection>,
        name: &str,
        cycle: u64,
    ) -> redis::RedisResult<i64> {
        let con = connect(&self.client, connection).await?;
        bounded(
            redis::Script::new(CLAIM)
                .key(self.counter_key(name, cycle))
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
