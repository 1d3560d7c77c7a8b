//! The shipped rows of the comparison: the policies every scenario is run
//! against, sized for the scenario. Each is a [`Row`]; a row of your own
//! is one more value beside them ([`Row::new`]).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::row::{LimiterSetup, Policy, Row, SharedProbes};
use super::scenario::Scenario;
use rheostat::algorithms::breaker::{Breaker, BreakerConfig};
use rheostat::algorithms::{
    Aimd, AimdConfig, Algorithm, ConfigError, Fixed, Gate, Gradient, GradientConfig, Published,
    Sample, Stack, Throttle, ThrottleConfig, Vegas, VegasConfig, MAX_LIMIT,
};
use rheostat::priority::Priorities;
use rheostat::retry::{Hedge, RetryConfig};
use rheostat::timeout::LearnedTimeout;

/// Every shipped row, in table order.
pub fn all() -> Vec<Row> {
    vec![
        clairvoyant(),
        none(),
        bulkhead(),
        breaker_classic(),
        breaker(),
        breaker_unscaled(),
        breaker_shared(),
        aimd(),
        vegas(),
        gradient(),
        throttle(),
        breaker_gradient(),
        breaker_gradient_retry(),
        aimd_priorities(),
        gradient_priorities(),
        recommended(),
        recommended_typed(),
        recommended_retry(),
        recommended_hedge(),
    ]
}

/// Rows that judge no policy but measure the comparison itself, run only
/// when named (`compare --policy NAME`):
/// [`recommended_retry_reseeded`].
pub fn yardsticks() -> Vec<Row> {
    vec![recommended_retry_reseeded()]
}

/// The rows a run of random families compares (`compare --families`):
/// every shipped row that applies to one caller of one class, but the
/// clairvoyant (no candidate for best) and the classic breaker (the
/// incident's fault, reproduced).
pub fn for_families() -> Vec<Row> {
    vec![
        none(),
        bulkhead(),
        breaker(),
        aimd(),
        vegas(),
        gradient(),
        throttle(),
        breaker_gradient(),
        recommended(),
        recommended_typed(),
    ]
}

/// The shipped row called `name`, if any.
pub fn named(name: &str) -> Option<Row> {
    all().into_iter().find(|row| row.name() == name)
}

/// Builds a shipped row's policy: [`crate::BuildPolicy`], as a plain function.
type Build = fn(&Scenario, u32) -> Result<Box<dyn Algorithm>, ConfigError>;

/// A shipped row: `name`, running `policy`, its policy replaced where a
/// scenario writes `[policies.NAME]` for it.
fn shipped(name: &'static str, policy: Build) -> Row {
    Row::new(name, move |scenario: &Scenario, instance| {
        match scenario.policies.override_for(name) {
            Some(config) => config.build(),
            None => policy(scenario, instance),
        }
    })
    .overridden_as(name)
}

/// A row like `base`, called `name`, its limiters built with `setup`:
/// it runs `base`'s policy (its override, if the scenario gives one).
fn around(base: Row, name: &'static str, setup: fn(&Scenario) -> LimiterSetup) -> Row {
    let mut row = base.with_limiter(setup);
    row.rename(name);
    row
}

/// A limit set by magic to the dependency's true concurrency at every
/// instant (0 while it is down): a reference row, not a bound (it can be
/// beaten, by a policy that uses the dependency's queue).
pub fn clairvoyant() -> Row {
    Row::clairvoyant("clairvoyant")
}

/// No limiter: timeouts and retries only.
pub fn none() -> Row {
    shipped("none", |_, _| Ok(Box::new(Fixed::new(MAX_LIMIT)?)))
}

/// A static bulkhead sized for the dependency's normal capacity (a
/// bulkhead has no default: sized at the dependency's workers).
pub fn bulkhead() -> Row {
    shipped("bulkhead", |scenario, _| {
        let c = share(scenario, scenario.dependency.workers.0);
        Ok(Box::new(Fixed::new(c)?))
    })
}

/// The breaker of the incident in the seed documents: one probe that is
/// an ordinary request, a doubling cooldown up to 30 minutes. Its callers
/// give a probe the ordinary timeout: that is the fault it reproduces.
pub fn breaker_classic() -> Row {
    shipped("breaker-classic", |_, instance| {
        Ok(Box::new(Breaker::new(BreakerConfig {
            seed: seed(instance),
            ..BreakerConfig::classic()
        })?))
    })
    .ignoring_probes()
}

/// The recommended breaker, its probes scaled by fleet size.
pub fn breaker() -> Row {
    shipped("breaker", |scenario, instance| {
        Ok(Box::new(Breaker::new(recommended_breaker(
            scenario,
            instance,
            instances(scenario),
        ))?))
    })
}

/// The recommended breaker without fleet scaling (fleets only).
pub fn breaker_unscaled() -> Row {
    shipped("breaker-unscaled", |scenario, instance| {
        Ok(Box::new(Breaker::new(recommended_breaker(
            scenario, instance, 1,
        ))?))
    })
    .only_where(|scenario| instances(scenario) > 1)
}

/// The recommended breaker (its probes scaled by fleet size, which is
/// what an instance falls back to without the store), its fleet's probes
/// shared through a store at the defaults of [`SharedProbes`]: 5 a cycle
/// for the fleet (fleets only).
pub fn breaker_shared() -> Row {
    around(breaker(), "breaker-shared", |_| {
        LimiterSetup::default().with_shared_probes(Some(SharedProbes::default()))
    })
    .only_where(|scenario| instances(scenario) > 1)
}

/// Loss-based adaptive limit.
pub fn aimd() -> Row {
    shipped("aimd", |_, _| {
        Ok(Box::new(Aimd::new(AimdConfig::default())?))
    })
    .adaptive()
}

/// Delay-based adaptive limit (queue estimate).
pub fn vegas() -> Row {
    shipped("vegas", |_, instance| {
        Ok(Box::new(Vegas::new(VegasConfig {
            seed: seed(instance),
            ..VegasConfig::default()
        })?))
    })
    .adaptive()
}

/// Delay-based adaptive limit (latency gradient).
pub fn gradient() -> Row {
    shipped("gradient", |_, _| {
        Ok(Box::new(Gradient::new(GradientConfig::default())?))
    })
    .adaptive()
}

/// Google SRE client-side adaptive throttling.
pub fn throttle() -> Row {
    shipped("throttle", |_, _| {
        Ok(Box::new(Throttle::new(ThrottleConfig::default())?))
    })
    .adaptive()
}

/// The recommended breaker in front of a gradient limit.
pub fn breaker_gradient() -> Row {
    shipped("breaker+gradient", |scenario, instance| {
        Ok(Box::new(
            Stack::builder()
                .push(Breaker::new(recommended_breaker(
                    scenario,
                    instance,
                    instances(scenario),
                ))?)
                .push(Gradient::new(GradientConfig::default())?)
                .build()?,
        ))
    })
    .adaptive()
}

/// The same limiter as [`breaker_gradient`], with rheostat's retry at its
/// defaults (told the callers' timeout and deadline): its callers retry as
/// the limiter's [`Retry`](rheostat::retry::Retry) decides, not as the
/// scenario's `attempts`, `backoff`, `retry_budget` and `retry_rejected`
/// say.
pub fn breaker_gradient_retry() -> Row {
    around(breaker_gradient(), "breaker+gradient+retry", |scenario| {
        LimiterSetup::default().with_retry(retry_config(scenario))
    })
}

/// [`aimd`] (its override, if the scenario gives one), its limiter built
/// with priorities at rheostat's defaults
/// ([`Priorities::default`](rheostat::priority::Priorities)): SRE's four
/// classes, no share kept for any. Compared in scenarios whose traffic has
/// classes only.
pub fn aimd_priorities() -> Row {
    around(aimd(), "aimd+priorities", with_priorities).only_where(Scenario::has_classes)
}

/// [`gradient`] with priorities, as [`aimd_priorities`].
pub fn gradient_priorities() -> Row {
    around(gradient(), "gradient+priorities", with_priorities).only_where(Scenario::has_classes)
}

/// The README's recommended configuration, at its defaults, as a
/// configuration file writes it, told nothing of the scenario:
/// `policy = "recommended"`
/// ([`AimdConfig::recommended`](rheostat::algorithms::AimdConfig::recommended))
/// and `timeout = "auto"` (the attempt timeout [learned](rheostat::timeout)
/// at its defaults: the p99.9 of recent successes times 2, 1% of calls
/// given the ceiling), below the callers' own timeout, which stays the
/// ceiling.
pub fn recommended() -> Row {
    around(recommended_typed(), "recommended", |_| learned())
}

/// The recommended policy with the callers' own timeout, typed (a file's
/// `policy = "recommended"` with no `timeout`): the recommendation without
/// its learned timeout, to show each scenario without it.
pub fn recommended_typed() -> Row {
    shipped("rec. typed", |_, _| {
        rheostat::config::PolicyConfig::Recommended.build()
    })
    .adaptive()
}

/// [`recommended`] (its learned timeout) with rheostat's retry at its
/// defaults, told the callers' timeout and deadline, as
/// [`breaker_gradient_retry`] is: the unhedged twin of
/// [`recommended_hedge`]. Compared in scenarios with interactive callers.
pub fn recommended_retry() -> Row {
    around(recommended_typed(), "rec.+retry", |scenario| {
        learned().with_retry(retry_config(scenario))
    })
    .only_where(|scenario| scenario.traffic.is_some())
}

/// [`recommended_retry`] with nothing changed but its limiters' seeds
/// (the retry's jitter): a yardstick, not a policy. Where a scenario is
/// sensitive to its history (a limit that settles in one of two regimes),
/// the smallest difference (one jitter drawn otherwise, one hedge sent)
/// moves its goodput; this row says how far, so that a difference between
/// two rows is read against it.
pub fn recommended_retry_reseeded() -> Row {
    around(recommended_typed(), "rec.+retry reseeded", |scenario| {
        learned()
            .with_retry(retry_config(scenario))
            .with_reseed(0x5EED)
    })
    .only_where(|scenario| scenario.traffic.is_some())
}

/// [`recommended_retry`] with hedged requests at their defaults
/// (`hedge = "auto"`: a second attempt sent once the first has run for
/// the p95 of recent successes, [`Hedge::default`]), the first answer
/// winning. Compared in scenarios with interactive callers.
pub fn recommended_hedge() -> Row {
    around(recommended_typed(), "rec.+hedge", |scenario| {
        learned().with_retry(retry_config(scenario).map(|retry| RetryConfig {
            hedge: Some(Hedge::default()),
            ..retry
        }))
    })
    .only_where(|scenario| scenario.traffic.is_some())
}

/// A limiter whose attempt timeout is learned at its defaults, as the
/// recommended row's.
fn learned() -> LimiterSetup {
    LimiterSetup::default().with_timeout(Some(LearnedTimeout::default().into()))
}

fn with_priorities(_: &Scenario) -> LimiterSetup {
    LimiterSetup::default().with_priorities(Some(Priorities::default()))
}

/// The seed of instance `instance`'s policy.
fn seed(instance: u32) -> u64 {
    0x5EED_0000 + u64::from(instance)
}

/// The recommended breaker at its defaults. Told two facts a user knows
/// and a breaker cannot guess: how many instances share the dependency,
/// and, where the scenario says what slow is (`[policies] slow_call`),
/// that a slow success is a failure.
fn recommended_breaker(scenario: &Scenario, instance: u32, fleet_size: u32) -> BreakerConfig {
    BreakerConfig {
        slow_call_rate: scenario.policies.slow_call.map(|_| 0.5),
        slow_call_duration: slow_call(scenario),
        fleet_size,
        seed: seed(instance),
        ..BreakerConfig::recommended()
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

/// The retry policy of the row with the limiter's retry: rheostat's
/// defaults, told the two facts of the caller a user passes (each
/// attempt's timeout and the request's deadline; an attempt never outlasts
/// the deadline, so a timeout past it is the deadline).
fn retry_config(scenario: &Scenario) -> Option<RetryConfig> {
    let traffic = scenario.traffic.as_ref()?;
    Some(RetryConfig {
        timeout: Some(traffic.timeout.min(traffic.deadline)),
        deadline: Some(traffic.deadline),
        ..RetryConfig::default()
    })
}

/// Build `row`'s policy for instance `instance` of `scenario`.
/// `clairvoyant` is the limit cell the clairvoyant row reads.
pub(crate) fn build(
    row: &Row,
    scenario: &Scenario,
    instance: u32,
    clairvoyant: &Arc<AtomicU32>,
) -> Result<Box<dyn Algorithm>, ConfigError> {
    match &row.policy {
        Policy::Built(build) => build(scenario, instance),
        Policy::Clairvoyant => Ok(Box::new(Clairvoyant {
            limit: Arc::clone(clairvoyant),
        })),
    }
}
