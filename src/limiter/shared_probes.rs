//! Probes a fleet shares ([`Builder::shared_probes`]): tokens granted from
//! outside, one spent by each probe admitted; and, sans I/O, when an
//! instance claims its share of the fleet's allowance and what a store's
//! counter answers ([`ProbeClaims`], [`ProbeAllowance`]).
use std::time::{Duration, Instant};

use super::published::Held;
use super::Limiter;
use crate::algorithms::{Algorithm, ConfigError, MAX_DURATION};
use crate::clock::Clock;

impl<A: Algorithm> Held<A> {
    /// Ask to admit one call under a probe gate at `now`: with `shared`
    /// probes, only by spending a token granted from outside (one left and
    /// not lapsed), and then only as the policy allows
    /// ([`Algorithm::on_admit`]), which the token is spent on only if it
    /// admits.
    pub(super) fn admit_probe(&mut self, now: Instant, shared: bool) -> bool {
        if !shared {
            return self.policy.on_admit(now);
        }
        let (left, until) = self.probe_tokens;
        if left == 0 || until.is_some_and(|until| now >= until) || !self.policy.on_admit(now) {
            return false;
        }
        self.probe_tokens.0 -= 1;
        true
    }
}

/// How much earlier than a breaker's cooldown ends its instance claims its
/// probes ([`ProbeClaims`]): 250 ms, time for a store's answer to arrive
/// before the first call finds the breaker half-open.
pub const CLAIM_LEAD: Duration = Duration::from_millis(250);

/// A fleet's probe allowance: what the store's counter hands out each
/// cycle, and what an instance does without an answer.
///
/// Breakers whose cooldowns end in the same cycle share `fleet` probes,
/// `per_instance` to each instance that asks until they run out; an
/// instance the store does not answer grants itself `fallback`, what
/// [`fleet_size`](crate::algorithms::BreakerConfig::fleet_size) scaling
/// gives each instance. The defaults, 5 for the fleet, 1 each, 1 without a
/// store and cycles of 10 s, stake on a dependency that is down what one
/// breaker at its defaults would.
///
/// Once an instance's probes have closed its breaker, it tells the store
/// ([`ProbeClaims::recovered`]), and for two cycles every claim is granted
/// `fallback`, as without a store: the allowance saves probes sent into a
/// dependency nobody has seen answer, not the probes that find it
/// recovered. Each breaker still judges its own probes.
///
/// # Examples
///
/// ```
/// use rheostat::limiter::ProbeAllowance;
///
/// let allowance = ProbeAllowance::default();
/// // What the store answers the 1st, 5th and 6th instances to ask in a cycle.
/// assert_eq!(allowance.granted(0, false), 1);
/// assert_eq!(allowance.granted(4, false), 1);
/// assert_eq!(allowance.granted(5, false), 0);
/// // The same, after an instance has seen the dependency recover.
/// assert_eq!(allowance.granted(5, true), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeAllowance {
    /// Probes the fleet sends a cycle.
    pub fleet: u32,
    /// Probes one instance claims a cycle.
    pub per_instance: u32,
    /// Probes an instance grants itself when the store does not answer.
    pub fallback: u32,
    /// The length of a cycle: cooldowns ending in the same one share its
    /// allowance.
    pub cycle: Duration,
}

impl Default for ProbeAllowance {
    fn default() -> Self {
        ProbeAllowance {
            fleet: 5,
            per_instance: 1,
            fallback: 1,
            cycle: Duration::from_secs(10),
        }
    }
}

impl ProbeAllowance {
    /// What a cycle's counter grants an instance that asks after
    /// `claimed_before` probes of the cycle were claimed: `per_instance`,
    /// or what is left of `fleet` if less; `fallback` if an instance saw
    /// the dependency recover in the last two cycles (`recovered`). A store
    /// does this atomically (`config::fleet::RedisProbes` runs it as one
    /// script).
    pub fn granted(&self, claimed_before: u32, recovered: bool) -> u32 {
        if recovered {
            return self.fallback;
        }
        self.fleet
            .saturating_sub(claimed_before)
            .min(self.per_instance)
    }

    /// How long the store keeps an instance's word that the dependency
    /// recovered: two cycles.
    pub fn recovered_for(&self) -> Duration {
        self.cycle.saturating_mul(2)
    }

    /// Check it, naming the field `allowance.cycle`.
    ///
    /// [`ProbeClaims::new`] takes any cycle, bounded to
    /// [1 ms, 365 days]; this says whether the one given was meant.
    ///
    /// # Errors
    ///
    /// A `cycle` below 1 ms or above 365 days.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat::limiter::ProbeAllowance;
    ///
    /// assert!(ProbeAllowance::default().validate().is_ok());
    /// let forever = ProbeAllowance { cycle: Duration::MAX, ..ProbeAllowance::default() };
    /// assert_eq!(forever.validate().unwrap_err().field(), "allowance.cycle");
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.cycle < MIN_CYCLE || self.cycle > MAX_DURATION {
            return Err(ConfigError::new(
                "allowance.cycle",
                format_args!("{:?}", self.cycle),
                "a duration of at least 1 ms and at most 365 days",
            ));
        }
        Ok(())
    }
}

/// The shortest cycle [`ProbeClaims`] counts: 1 ms, the resolution of the
/// store's expiries (`PX`).
const MIN_CYCLE: Duration = Duration::from_millis(1);

/// When one limiter claims its share of a fleet's probes: once a cycle,
/// [`CLAIM_LEAD`] before its breaker's cooldown ends, and again in each
/// later cycle while it is half-open with no token left (an instance the
/// fleet's allowance passed over tries the next cycle). Sans I/O: a task
/// beside the limiter asks [`due`](Self::due) now and then (every 50 ms,
/// say), claims from the store for the cycle it answers, and grants what it
/// got with [`Overrides::grant_probes`](super::Overrides::grant_probes) until the claim's lapse; and it asks
/// [`recovered`](Self::recovered), to tell the store when the limiter's
/// probes have closed its breaker.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use rheostat::algorithms::breaker::{Breaker, BreakerConfig, Cooldown};
/// use rheostat::clock::{Clock as _, ManualClock};
/// use rheostat::limiter::{ProbeAllowance, ProbeClaims};
/// use rheostat::Limiter;
///
/// let clock = ManualClock::new();
/// // One instance of five: its breaker judges one probe.
/// let breaker = Breaker::new(BreakerConfig {
///     cooldown: Cooldown::Fixed(Duration::from_secs(10)),
///     cooldown_jitter: 0.0,
///     fleet_size: 5,
///     ..BreakerConfig::recommended()
/// })?;
/// let limiter = Limiter::builder(breaker).clock(clock.clone()).shared_probes().build()?;
/// for _ in 0..10 {
///     limiter.try_acquire()?.overload(); // the breaker opens
/// }
/// let allowance = ProbeAllowance::default();
/// let mut claims = ProbeClaims::new(allowance.cycle);
/// // `since` is the fleet's clock, the same on every instance (the wall
/// // clock's time since the Unix epoch, say): here 0 when it opened.
/// assert_eq!(claims.due(&limiter, Duration::ZERO), None);
/// clock.advance(Duration::from_millis(9_800));
/// let claim = claims.due(&limiter, Duration::from_millis(9_800)).expect("due");
/// assert_eq!(claim.cycle, 1); // the cooldown ends at 10 s, in cycle 1
/// assert_eq!(claims.due(&limiter, Duration::from_millis(9_850)), None);
/// limiter.overrides().grant_probes(allowance.granted(0, false), Some(claim.lapse));
/// clock.advance(Duration::from_millis(200));
/// let probe = limiter.try_acquire()?;
/// assert!(probe.is_probe());
/// assert!(limiter.try_acquire().is_err()); // one token, one probe
/// probe.success(); // the breaker closes
/// // Tell the store once: the fleet's next claims are granted as without it.
/// assert!(claims.recovered(&limiter));
/// assert!(!claims.recovered(&limiter));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ProbeClaims {
    cycle: Duration,
    claimed: Option<u64>,
    /// A claim was made and the breaker has not closed since.
    waiting: bool,
}

/// A claim [`ProbeClaims::due`] calls for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claim {
    /// The cycle to claim from: the store's counter for it.
    pub cycle: u64,
    /// When the granted tokens lapse: a cycle after the probes could start.
    pub lapse: Instant,
}

impl ProbeClaims {
    /// Claims for one limiter, in cycles of `cycle`, taken within [1 ms,
    /// 365 days] (a shorter one as 1 ms, a longer one as 365 days:
    /// [`ProbeAllowance::validate`] refuses both by name).
    pub fn new(cycle: Duration) -> Self {
        ProbeClaims {
            cycle: cycle.clamp(MIN_CYCLE, MAX_DURATION),
            claimed: None,
            waiting: false,
        }
    }

    /// The claim due for `limiter` now, if any; `since` is now on the
    /// fleet's clock, the one every instance reads the same (cycles are
    /// counted from its zero). At most one claim a cycle.
    pub fn due<A: Algorithm, C: Clock>(
        &mut self,
        limiter: &Limiter<A, C>,
        since: Duration,
    ) -> Option<Claim> {
        let now = limiter.clock.now();
        let gate = limiter.gate();
        let at = match gate.until {
            Some(end) if gate.is_shut() && end.saturating_duration_since(now) <= CLAIM_LEAD => end,
            _ if gate.probe && limiter.overrides().probe_tokens().0 == 0 => now,
            _ => return None,
        };
        let on_fleet_clock = since.saturating_add(at.saturating_duration_since(now));
        let cycle =
            u64::try_from(on_fleet_clock.as_nanos() / self.cycle.as_nanos()).unwrap_or(u64::MAX);
        if self.claimed == Some(cycle) {
            return None;
        }
        self.claimed = Some(cycle);
        self.waiting = true;
        Some(Claim {
            cycle,
            // The cycle is at most 365 days: past the clock's range only
            // for a clock that is itself at its end, where the tokens
            // lapse at once.
            lapse: at.checked_add(self.cycle).unwrap_or(at),
        })
    }

    /// Whether the limiter's breaker has closed since its last claim:
    /// `true` once, when it has (the store is told, and the fleet's claims
    /// for the next two cycles are granted as without a store).
    pub fn recovered<A: Algorithm, C: Clock>(&mut self, limiter: &Limiter<A, C>) -> bool {
        if !self.waiting {
            return false;
        }
        let gate = limiter.gate();
        if gate.is_shut() || gate.probe {
            return false;
        }
        self.waiting = false;
        true
    }
}
