//! The policies every scenario is run against, sized for the scenario.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::scenario::Scenario;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, ConfigError, Fixed, Gate, Gradient, GradientConfig, Published,
    Sample, Stack, Throttle, ThrottleConfig, Vegas, VegasConfig, MAX_LIMIT,
};
use rheostat::retry::RetryConfig;

/// A policy in the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum PolicyKind {
    /// A limit set by magic to the dependency's true concurrency at every
    /// instant (0 while it is down): a reference row, not a bound (it can
    /// be beaten, by a policy that uses the dependency's queue).
    Clairvoyant,
    /// No limiter: timeouts and retries only.
    None,
    /// A static bulkhead sized for the dependency's normal capacity.
    Bulkhead,
    /// The breaker of the incident in the seed documents: one probe that is
    /// an ordinary request, a doubling cooldown up to 30 minutes.
    BreakerClassic,
    /// The recommended breaker, its probes scaled by fleet size.
    Breaker,
    /// The recommended breaker without fleet scaling (fleets only).
    BreakerUnscaled,
    /// Loss-based adaptive limit.
    Aimd,
    /// Delay-based adaptive limit (queue estimate).
    Vegas,
    /// Delay-based adaptive limit (latency gradient).
    Gradient,
    /// Google SRE client-side adaptive throttling.
    Throttle,
    /// The recommended breaker in front of a gradient limit.
    BreakerGradient,
    /// The same limiter as [`PolicyKind::BreakerGradient`], with rheostat's
    /// retry at its defaults (told the callers' timeout and deadline): its
    /// callers retry as the limiter's [`Retry`](rheostat::retry::Retry)
    /// decides, not as the scenario's `attempts`, `backoff`,
    /// `retry_budget` and `retry_rejected` say.
    BreakerGradientRetry,
    /// [`PolicyKind::Aimd`] (its override, if the scenario gives one), its
    /// limiter built with priorities at rheostat's defaults
    /// ([`Priorities::default`](rheostat::priority::Priorities)): SRE's four
    /// classes, no share kept for any. Compared in scenarios whose traffic
    /// has classes only.
    AimdPriorities,
    /// [`PolicyKind::Gradient`] with priorities, as `aimd+priorities`.
    GradientPriorities,
    /// The README's first recommendation, at its defaults, as a
    /// configuration file names it (`policy = "recommended"`:
    /// [`AimdConfig::recommended`](rheostat::algorithms::AimdConfig::recommended)),
    /// told nothing of the scenario.
    Recommended,
}

impl PolicyKind {
    /// Every policy, in table order.
    pub const ALL: [PolicyKind; 15] = [
        PolicyKind::Clairvoyant,
        PolicyKind::None,
        PolicyKind::Bulkhead,
        PolicyKind::BreakerClassic,
        PolicyKind::Breaker,
        PolicyKind::BreakerUnscaled,
        PolicyKind::Aimd,
        PolicyKind::Vegas,
        PolicyKind::Gradient,
        PolicyKind::Throttle,
        PolicyKind::BreakerGradient,
        PolicyKind::BreakerGradientRetry,
        PolicyKind::AimdPriorities,
        PolicyKind::GradientPriorities,
        PolicyKind::Recommended,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Clairvoyant => "clairvoyant",
            PolicyKind::None => "none",
            PolicyKind::Bulkhead => "bulkhead",
            PolicyKind::BreakerClassic => "breaker-classic",
            PolicyKind::Breaker => "breaker",
            PolicyKind::BreakerUnscaled => "breaker-unscaled",
            PolicyKind::Aimd => "aimd",
            PolicyKind::Vegas => "vegas",
            PolicyKind::Gradient => "gradient",
            PolicyKind::Throttle => "throttle",
            PolicyKind::BreakerGradient => "breaker+gradient",
            PolicyKind::BreakerGradientRetry => "breaker+gradient+retry",
            PolicyKind::AimdPriorities => "aimd+priorities",
            PolicyKind::GradientPriorities => "gradient+priorities",
            PolicyKind::Recommended => "recommended",
        }
    }

    /// The policy called `name`, if any.
    pub fn from_name(name: &str) -> Option<PolicyKind> {
        PolicyKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether this policy is compared in `scenario` (the unscaled breaker
    /// only where there is a fleet; the rows with priorities only where the
    /// traffic has classes).
    pub fn applies_to(self, scenario: &Scenario) -> bool {
        if self.has_priorities() {
            return scenario.has_classes();
        }
        self != PolicyKind::BreakerUnscaled || instances(scenario) > 1
    }

    /// Whether its limiters are built with priorities (and its callers
    /// acquire with their request's class).
    pub fn has_priorities(self) -> bool {
        matches!(
            self,
            PolicyKind::AimdPriorities | PolicyKind::GradientPriorities
        )
    }

    /// The row whose policy it runs: itself, but for the rows that differ
    /// from another only in how the limiter around the policy is built.
    pub fn base(self) -> PolicyKind {
        match self {
            PolicyKind::BreakerGradientRetry => PolicyKind::BreakerGradient,
            PolicyKind::AimdPriorities => PolicyKind::Aimd,
            PolicyKind::GradientPriorities => PolicyKind::Gradient,
            other => other,
        }
    }

    /// Whether it is adaptive (moves its gate from what it sees), for the
    /// headline comparison.
    pub fn is_adaptive(self) -> bool {
        matches!(
            self.base(),
            PolicyKind::Aimd
                | PolicyKind::Vegas
                | PolicyKind::Gradient
                | PolicyKind::Throttle
                | PolicyKind::BreakerGradient
                | PolicyKind::BreakerGradientRetry
                | PolicyKind::Recommended
        )
    }

    /// Whether its callers give calls admitted as probes the longer probe
    /// timeout. The classic breaker's probe is an ordinary request with the
    /// ordinary timeout: that is the fault it reproduces.
    pub fn honours_probes(self) -> bool {
        self != PolicyKind::BreakerClassic
    }

    /// Whether a scenario may replace its policy (`[policies.NAME]`): every
    /// row but the clairvoyant one, whose limit the simulator sets, and the
    /// rows that run another row's policy (`breaker+gradient+retry` runs
    /// whatever `breaker+gradient` runs, `aimd+priorities` whatever `aimd`
    /// runs, and so on).
    pub fn takes_override(self) -> bool {
        self != PolicyKind::Clairvoyant && self.base() == self
    }

    /// Whether its callers retry as the limiter's own retry policy decides
    /// ([`rheostat::retry`]) instead of as the scenario says.
    pub fn retries_in_limiter(self) -> bool {
        self == PolicyKind::BreakerGradientRetry
    }

    /// Whether it is a breaker.
    pub fn is_breaker(self) -> bool {
        matches!(
            self.base(),
            PolicyKind::BreakerClassic
                | PolicyKind::Breaker
                | PolicyKind::BreakerUnscaled
                | PolicyKind::BreakerGradient
                | PolicyKind::BreakerGradientRetry
        )
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

pub(crate) fn instances(scenario: &Scenario) -> u32 {
    scenario.instances()
}

/// The dependency's normal concurrency share per instance.
pub(crate) fn share(scenario: &Scenario, workers: u32) -> u32 {
    workers.div_ceil(instances(scenario)).max(1)
}

/// A limit the simulator sets to the dependency's true concurrency at
/// every instant.
#[derive(Debug)]
pub(crate) struct Clairvoyant {
    pub(crate) limit: Arc<AtomicU32>,
}

impl Algorithm for Clairvoyant {
    fn name(&self) -> &'static str {
        "clairvoyant"
    }
    fn publish(&self) -> Published {
        Published::new(match self.limit.load(Ordering::Relaxed) {
            0 => Gate::shut(None),
            n => Gate::limited(n),
        })
    }
    fn on_sample(&mut self, _now: Instant, _sample: &Sample) {}
}

/// The slow-call threshold for a scenario.
pub(crate) fn slow_call(scenario: &Scenario) -> Duration {
    scenario
        .policies
        .slow_call
        .unwrap_or(scenario.dependency.service.median * 4)
}

/// The retry policy row `kind`'s limiters are built with, if any:
/// rheostat's defaults, told the two facts of the caller a user passes
/// (each attempt's timeout and the request's deadline; an attempt never
/// outlasts the deadline, so a timeout past it is the deadline).
pub(crate) fn retry_config(kind: PolicyKind, scenario: &Scenario) -> Option<RetryConfig> {
    let traffic = scenario.traffic.as_ref()?;
    kind.retries_in_limiter().then(|| RetryConfig {
        timeout: Some(traffic.timeout.min(traffic.deadline)),
        deadline: Some(traffic.deadline),
        ..RetryConfig::default()
    })
}

/// Build `kind` for instance `instance` of `scenario`: the scenario's
/// override if it has one, else the row's policy sized for the scenario.
/// `clairvoyant` is the limit cell the clairvoyant row reads. The row with
/// the limiter's retry runs the `breaker+gradient` row's policy.
pub(crate) fn build(
    kind: PolicyKind,
    scenario: &Scenario,
    instance: u32,
    clairvoyant: &Arc<AtomicU32>,
) -> Result<Box<dyn Algorithm>, ConfigError> {
    let kind = kind.base();
    if let Some(config) = scenario.policies.override_for(kind) {
        return config.build();
    }
    let c = share(scenario, scenario.dependency.workers.0);
    let slow = slow_call(scenario);
    let fleet = instances(scenario);
    let seed = 0x5EED_0000 + u64::from(instance);
    // The recommended breaker at its defaults. Told two facts a user knows
    // and a breaker cannot guess: how many instances share the dependency,
    // and, where the scenario says what slow is (`[policies] slow_call`),
    // that a slow success is a failure.
    let recommended = |fleet_size: u32| BreakerConfig {
        slow_call_rate: scenario.policies.slow_call.map(|_| 0.5),
        slow_call_duration: slow,
        fleet_size,
        seed,
        ..BreakerConfig::recommended()
    };
    Ok(match kind {
        PolicyKind::Clairvoyant => Box::new(Clairvoyant {
            limit: Arc::clone(clairvoyant),
        }),
        PolicyKind::None => Box::new(Fixed::new(MAX_LIMIT)?),
        // A bulkhead has no default: sized at the dependency's workers.
        PolicyKind::Bulkhead => Box::new(Fixed::new(c)?),
        PolicyKind::BreakerClassic => Box::new(Breaker::new(BreakerConfig {
            seed,
            ..BreakerConfig::classic()
        })?),
        PolicyKind::Breaker => Box::new(Breaker::new(recommended(fleet))?),
        PolicyKind::BreakerUnscaled => Box::new(Breaker::new(recommended(1))?),
        PolicyKind::Aimd | PolicyKind::AimdPriorities => {
            Box::new(Aimd::new(AimdConfig::default())?)
        }
        PolicyKind::Vegas => Box::new(Vegas::new(VegasConfig {
            seed,
            ..VegasConfig::default()
        })?),
        PolicyKind::Gradient | PolicyKind::GradientPriorities => {
            Box::new(Gradient::new(GradientConfig::default())?)
        }
        PolicyKind::Throttle => Box::new(Throttle::new(ThrottleConfig::default())?),
        PolicyKind::BreakerGradient | PolicyKind::BreakerGradientRetry => Box::new(
            Stack::builder()
                .push(Breaker::new(recommended(fleet))?)
                .push(Gradient::new(GradientConfig::default())?)
                .build()?,
        ),
        // As a user writes it: `policy = "recommended"`.
        PolicyKind::Recommended => rheostat::config::PolicyConfig::Recommended.build()?,
    })
}
