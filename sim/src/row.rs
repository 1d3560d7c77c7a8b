//! A row of the comparison: a name and the functions that build it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::scenario::Scenario;
use rheostat::algorithms::{Algorithm, ConfigError};
use rheostat::priority::Priorities;
use rheostat::retry::RetryConfig;
use rheostat::{limiter::ProbeAllowance, Timeout};
use std::time::Duration;

/// Builds a row's policy for one instance of a scenario's fleet: given the
/// scenario and the instance's index (0 to the fleet's size − 1, to seed a
/// policy that draws), the [`Algorithm`] its limiter runs.
pub type BuildPolicy =
    dyn Fn(&Scenario, u32) -> Result<Box<dyn Algorithm>, ConfigError> + Send + Sync;

/// What a row's limiters are built with, beside the policy: what
/// [`Row::limiter`] answers for a scenario.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct LimiterSetup {
    /// The limiter's own retry policy, if any: its callers then retry as
    /// it decides, not as the scenario's `attempts`, `backoff`,
    /// `retry_budget` and `retry_rejected` say, and the row is measured
    /// against a bound of its own where its attempts differ.
    pub retry: Option<RetryConfig>,
    /// The limiter's priorities, if any: its callers then acquire with
    /// their request's class.
    pub priorities: Option<Priorities>,
    /// The limiter's attempt timeout, if any: a [learned](rheostat::timeout)
    /// one gives each attempt the learned value below the caller's own
    /// timeout (which stays the ceiling).
    pub timeout: Option<Timeout>,
    /// The fleet's shared probe allowance, if any: the limiters are built
    /// with [`shared_probes`](rheostat::Builder::shared_probes) and their
    /// probes claimed from a store modelled as [`SharedProbes`] says.
    pub shared_probes: Option<SharedProbes>,
    /// Mixed into each limiter's seed (its retry's jitter, a throttle's
    /// draws): 0 for every shipped row but
    /// [`rows::recommended_retry_reseeded`](crate::rows::recommended_retry_reseeded),
    /// which shows how far a scenario moves when nothing changes but the
    /// draws.
    pub reseed: u64,
}

/// A fleet's probe allowance kept in a store, as the simulator models it:
/// each instance asks [`ProbeClaims::due`](rheostat::limiter::ProbeClaims::due)
/// every `every` (on the run's clock, the fleet's clock too); a claim due
/// is counted at once against its cycle's counter
/// ([`ProbeAllowance::granted`]) and its grant reaches the instance
/// `delay` later. What `config::fleet::RedisProbes` does against Redis,
/// less the network: the store here always answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedProbes {
    /// The fleet's allowance.
    pub allowance: ProbeAllowance,
    /// From a claim to its grant: a store's round trip.
    pub delay: Duration,
    /// How often each instance asks whether a claim is due.
    pub every: Duration,
}

impl Default for SharedProbes {
    /// The allowance at its defaults (5 probes a 10 s cycle for the fleet,
    /// one each), a 2 ms round trip (a store in the same region), asked
    /// every 50 ms (as `RedisProbes` asks).
    fn default() -> Self {
        SharedProbes {
            allowance: ProbeAllowance::default(),
            delay: Duration::from_millis(2),
            every: Duration::from_millis(50),
        }
    }
}

impl LimiterSetup {
    /// A limiter with its retry policy set to `retry`.
    pub fn with_retry(mut self, retry: Option<RetryConfig>) -> Self {
        self.retry = retry;
        self
    }

    /// A limiter with its priorities set to `priorities`.
    pub fn with_priorities(mut self, priorities: Option<Priorities>) -> Self {
        self.priorities = priorities;
        self
    }

    /// A limiter with its attempt timeout set to `timeout`.
    pub fn with_timeout(mut self, timeout: Option<Timeout>) -> Self {
        self.timeout = timeout;
        self
    }

    /// Limiters whose seeds have `reseed` mixed in.
    pub fn with_reseed(mut self, reseed: u64) -> Self {
        self.reseed = reseed;
        self
    }

    /// Limiters sharing their probes through a store modelled as `shared`.
    pub fn with_shared_probes(mut self, shared: Option<SharedProbes>) -> Self {
        self.shared_probes = shared;
        self
    }
}

/// Where a row's policy comes from.
#[derive(Clone)]
pub(crate) enum Policy {
    /// Built by a function of the scenario and the instance.
    Built(Arc<BuildPolicy>),
    /// A limit the simulator sets to the dependency's true concurrency.
    Clairvoyant,
}

/// A row of the comparison: a name, a function from the scenario to a
/// policy, and a function from the scenario to what the limiter around it
/// is built with. The shipped rows are values of this type
/// ([`crate::rows::all`]); a row of your own runs beside them.
///
/// # Examples
///
/// A policy of your own, compared with the shipped `aimd` row:
///
/// ```
/// use std::time::Instant;
/// use rheostat::algorithms::{Algorithm, Gate, Published, Sample};
/// use rheostat_sim::{compare, rows, Row, Scenario};
///
/// /// Admits at most half the dependency's workers.
/// #[derive(Debug)]
/// struct Half(u32);
///
/// impl Algorithm for Half {
///     fn name(&self) -> &'static str {
///         "half"
///     }
///     fn publish(&self) -> Published {
///         Published::new(Gate::limited(self.0))
///     }
///     fn on_sample(&mut self, _now: Instant, _sample: &Sample) {}
/// }
///
/// let scenario = Scenario::from_toml("inline", r#"
///     name = "tiny"
///     duration = "30s"
///     [dependency]
///     workers = 10
///     service = { median = "50ms", p99 = "100ms" }
///     [traffic]
///     rate = 20
///     timeout = "1s"
///     deadline = "1s"
/// "#)?;
/// let half = Row::new("half", |scenario: &Scenario, _instance| {
///     let workers = scenario.dependency.workers.0;
///     Ok(Box::new(Half((workers / 2).max(1))) as Box<dyn Algorithm>)
/// });
/// let (report, _stats) = compare(&[scenario], &[rows::aimd(), half], 7, |_| {})?;
/// let half = report.scenarios[0].policy("half").unwrap();
/// assert!(half.goodput_vs_bound.unwrap() <= 1.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Row {
    name: Cow<'static, str>,
    pub(crate) policy: Policy,
    limiter: fn(&Scenario) -> LimiterSetup,
    applies: fn(&Scenario) -> bool,
    policy_of: Option<&'static str>,
    adaptive: bool,
    honours_probes: bool,
}

impl Row {
    /// A row called `name` whose limiters run what `policy` builds, one
    /// for each instance of a scenario's fleet; the limiter around it at
    /// its defaults (no retry, no priorities); compared in every scenario.
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        policy: impl Fn(&Scenario, u32) -> Result<Box<dyn Algorithm>, ConfigError>
            + Send
            + Sync
            + 'static,
    ) -> Row {
        Row::with_policy(name.into(), Policy::Built(Arc::new(policy)))
    }

    fn with_policy(name: Cow<'static, str>, policy: Policy) -> Row {
        Row {
            name,
            policy,
            limiter: |_| LimiterSetup::default(),
            applies: |_| true,
            policy_of: None,
            adaptive: false,
            honours_probes: true,
        }
    }

    /// The row whose limit the simulator sets to the dependency's true
    /// concurrency at every instant.
    pub(crate) fn clairvoyant(name: &'static str) -> Row {
        Row::with_policy(Cow::Borrowed(name), Policy::Clairvoyant)
    }

    /// The same row, its limiters built with what `setup` answers for the
    /// scenario (a retry policy, priorities).
    #[must_use]
    pub fn with_limiter(mut self, setup: fn(&Scenario) -> LimiterSetup) -> Row {
        self.limiter = setup;
        self
    }

    /// The same row, compared only in the scenarios where `applies` holds.
    #[must_use]
    pub fn only_where(mut self, applies: fn(&Scenario) -> bool) -> Row {
        self.applies = applies;
        self
    }

    /// The same row, marked adaptive (it moves its gate from what it sees).
    #[must_use]
    pub fn adaptive(mut self) -> Row {
        self.adaptive = true;
        self
    }

    /// The same row, its policy replaced where a scenario writes
    /// `[policies.NAME]` for row `name`.
    #[must_use]
    pub(crate) fn overridden_as(mut self, name: &'static str) -> Row {
        self.policy_of = Some(name);
        self
    }

    /// The same row, called `name`.
    pub(crate) fn rename(&mut self, name: &'static str) {
        self.name = Cow::Borrowed(name);
    }

    /// The same row, its callers giving calls admitted as probes the
    /// ordinary timeout.
    #[must_use]
    pub(crate) fn ignoring_probes(mut self) -> Row {
        self.honours_probes = false;
        self
    }

    /// The name used on the command line and in reports.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the limiters of this row are built with in `scenario`.
    pub fn limiter(&self, scenario: &Scenario) -> LimiterSetup {
        (self.limiter)(scenario)
    }

    /// Whether this row is compared in `scenario`.
    pub fn applies_to(&self, scenario: &Scenario) -> bool {
        (self.applies)(scenario)
    }

    /// Whether it is adaptive (moves its gate from what it sees), for the
    /// headline comparison.
    pub fn is_adaptive(&self) -> bool {
        self.adaptive
    }

    /// The row whose policy it runs, by name: its own, but for the rows
    /// that differ from another only in how the limiter around the policy
    /// is built (`aimd+priorities` runs whatever `aimd` runs).
    pub fn base(&self) -> &str {
        self.policy_of.unwrap_or(&self.name)
    }

    /// Whether a scenario may replace its policy (`[policies.NAME]`).
    pub(crate) fn takes_override(&self) -> bool {
        self.policy_of == Some(self.name())
    }

    /// Whether its callers give calls admitted as probes the longer probe
    /// timeout.
    pub(crate) fn honours_probes(&self) -> bool {
        self.honours_probes
    }

    /// Whether the simulator sets its limit.
    pub(crate) fn is_clairvoyant(&self) -> bool {
        matches!(self.policy, Policy::Clairvoyant)
    }
}

impl fmt::Debug for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Row")
            .field("name", &self.name)
            .field("adaptive", &self.adaptive)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
