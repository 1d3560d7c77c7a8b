//! [`AimdConfig`] and [`AimdMode`]: what an [`Aimd`](super::Aimd) is told,
//! its defaults, the recommended configuration, and their checks.

use std::time::Duration;

use crate::window::WindowConfig;
use crate::{check, ConfigError};

/// Which rule set an [`Aimd`](super::Aimd) follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum AimdMode {
    /// Per round trip, from latency and drops, in the manner of Vector's
    /// adaptive concurrency controller (see [`Aimd`](super::Aimd)). The default.
    #[default]
    Latency,
    /// Netflix concurrency-limits' `AIMDLimit`, per call: a drop or a
    /// success slower than `timeout` multiplies the limit by `backoff`; any
    /// other success adds one while at least half the limit is in use.
    /// [`AimdConfig::netflix`] has its defaults.
    Netflix,
}

/// The parameters of [`Aimd`](super::Aimd).
///
/// The defaults: the latency mode, a slow start from 10, min 1, no
/// ceiling ([`MAX_LIMIT`](crate::MAX_LIMIT)) but the one the limit
/// measures, backoff 0.9, 2 standard errors of latency read as noise,
/// drops cutting once they are over 10% of recent calls, slow-call timeout
/// 5 s, one backoff per flight, and the [`WindowConfig`] defaults for the
/// round trips.
///
/// Why a slow start from 10: any first limit is a guess; doubling from it
/// until the first sign of queueing finds a dependency's knee in a few
/// round trips, and one that never queues gets its calls at once. From 20
/// without it, Vector's test suite (`sim/tests/vector.rs`) saw a shallow knee
/// run at 2.7 × its unloaded round trip (1.1 × now). Why 10 and not
/// Vector's 1: from 1, a caller sending 40 calls a second to a healthy
/// 50 ms dependency had 47 calls refused in its first seconds while the
/// limit grew; from 10 (TCP's initial window), none. The price: a link
/// whose latency grows with every call from the first (Vector's slow-link)
/// is first measured already loaded, and a dependency that needs
/// thousands of calls in flight is refused part of its first dozen round
/// trips. An [`open_start`](Self::open_start) refuses such a dependency
/// nothing, but lets a backlog sent at once through whole.
///
/// Why no ceiling: a fixed ceiling encodes a workload. Sized for one
/// dependency (150 calls in flight for a pool of 200), it refused a third
/// of the calls of a healthy one that needed 220. The latency mode keeps
/// its own: it grows only while the caller uses at least half of it, so a
/// healthy caller's limit settles at about twice the most calls it puts
/// in flight (Little's law measures that, not a constant). Set `max` to
/// the share of the caller's own pool or memory one dependency may take,
/// where the caller knows it.
///
/// Why a floor of 1: a floor of 20 holds 20 calls against a dependency that
/// can serve 5. Why 2 standard errors: against the modelled log-normal
/// dependency of `tests/aimd.rs` (median 400 ms, p99 1 s, mean 436 ms), at
/// 1.5 a healthy caller needing 44 calls in flight refused 7 to 11% of its
/// calls on noise alone; at 2.5 a caller offered twice what 50 workers serve
/// let a standing queue build over an hour (limit 85, median latency
/// 710 ms); at 2 the limit held near 60 all hour (median 470 ms) and the
/// healthy caller refused under 1%. Why a loss tolerance: in front of that
/// healthy dependency failing 1% of 100 calls a second at random, cutting
/// at every drop held the limit near half of what the caller needed.
///
/// [`AimdConfig::netflix`] gives Netflix's rule set with Netflix's defaults
/// (initial 20, min 20, max 200, one backoff per drop). In a configuration
/// file, `mode = "netflix"` keeps the other defaults here: add
/// `initial = 20`, `min = 20`, `max = 200` and
/// `one_backoff_per_flight = false` for exactly Netflix's.
///
/// # Examples
///
/// ```
/// use rheostat_algorithms::{Aimd, AimdConfig, AimdMode};
///
/// let netflix = AimdConfig::netflix();
/// assert_eq!((netflix.mode, netflix.initial, netflix.min, netflix.max), (AimdMode::Netflix, 20, 20, 200));
/// assert_eq!(AimdConfig::default().max, rheostat_algorithms::MAX_LIMIT);
///
/// let err = Aimd::new(AimdConfig { noise: 11.0, ..AimdConfig::default() }).unwrap_err();
/// assert_eq!(err.to_string(), "invalid `aimd.noise`: found 11, expected a number in [0, 10]");
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default, deny_unknown_fields))]
pub struct AimdConfig {
    /// The rule set: `latency` (the default) or `netflix`.
    pub mode: AimdMode,
    /// The limit to start at, in `[min, max]`.
    pub initial: u32,
    /// The limit never falls below this; at least 1.
    pub min: u32,
    /// The limit never rises above this.
    pub max: u32,
    /// The factor a congestion event multiplies the limit by, in `(0, 1)`.
    pub backoff: f64,
    /// A success slower than this counts as a drop (a *slow call*), in both
    /// modes.
    #[cfg_attr(feature = "serde", serde(with = "humantime_serde"))]
    pub timeout: Duration,
    /// When set (the default), drops from calls that were already in flight
    /// when the limit was last cut do not cut it again: a burst of timeouts
    /// from one congested moment is one congestion event, as in TCP, instead
    /// of `n` compounding backoffs that drive the limit to `min`. In the
    /// latency mode it also holds the limit to one cut per round trip (a
    /// latency cut waits for a round trip of calls admitted since the last
    /// change). Clear it for one backoff per drop.
    pub one_backoff_per_flight: bool,
    /// Latency mode: how many standard errors of a round trip's latency are
    /// read as noise, in `[0, 10]`. A round trip counts as queueing only when
    /// the lower end of its band lies above the baseline. 0 reads every
    /// rise as queueing.
    pub noise: f64,
    /// Latency mode: the share of recent calls (about the last 50) that
    /// may be drops before a drop cuts the limit, in `[0, 1)`: a steady
    /// trickle of errors from a healthy dependency is not congestion. 0
    /// cuts at every drop. Until 50 calls have been seen the share is of
    /// all of them, so a drop among the first calls does cut.
    pub loss_tolerance: f64,
    /// Latency mode: how calls are gathered into round trips.
    pub window: WindowConfig,
    /// Latency mode: whether to start by doubling the limit every round
    /// trip in use until the first sign of queueing or a drop (a *slow
    /// start*, as TCP's), instead of growing from `initial` as after a
    /// cut.
    pub slow_start: bool,
    /// Latency mode: whether to start with no limit until the first flow of
    /// calls is steady (an *open start*), instead of from `initial`. A flow
    /// is steady once it is older than three of its slowest successes and a
    /// round trip's latency is no higher than the one before; the limit is
    /// then twice the most calls it put in flight, as if a slow start had
    /// doubled to it. Drops beyond the loss tolerance over at least 50
    /// calls before that begin again from `initial`, in slow start if set,
    /// counting only calls admitted after. Off by default, on in the
    /// [recommendation](Self::recommended).
    ///
    /// For a caller whose calls arrive as they come (requests to a
    /// service): it refuses a healthy dependency nothing from the first
    /// call, where a start from 10 refuses part of its first round trips.
    /// Not for a caller that sends a backlog at once (a batch, a queue
    /// consumer), above all one that holds a slot across its retries: the
    /// whole backlog goes out before the first answer, and against a
    /// dependency that defers or drops calls above a small concurrency,
    /// Vector's suite took 120 to 130 times as long as Vector's controller
    /// (`docs/results.md`, "The open start, measured").
    pub open_start: bool,
}

impl Default for AimdConfig {
    fn default() -> Self {
        AimdConfig {
            mode: AimdMode::Latency,
            initial: 10,
            min: 1,
            max: crate::MAX_LIMIT,
            backoff: 0.9,
            timeout: Duration::from_secs(5),
            one_backoff_per_flight: true,
            noise: 2.0,
            loss_tolerance: 0.1,
            window: WindowConfig::default(),
            slow_start: true,
            open_start: false,
        }
    }
}

/// The recommended configuration's loss tolerance: drops cut the limit
/// only once they are over 80% of recent calls.
///
/// Measured on random families (`docs/results.md`, "Choosing the
/// recommendation"): of the tolerances tried (0.1, the default; 0.5; 0.8;
/// 0.9), 0.8 and 0.9 held the most cells and left the fewest under half of
/// the best row; 0.1 held the fewest. Loss from a queue the caller builds
/// comes with latency, which cuts first; loss at random or from hangs does
/// not fall when the caller sends less, and each trial that finds so
/// halves the caller's rate for a few round trips.
const RECOMMENDED_LOSS_TOLERANCE: f64 = 0.8;

impl AimdConfig {
    /// The recommended configuration for the interactive path to a
    /// dependency the caller does not control (payments, a model API): the
    /// defaults. What it is may improve from one version to the next; the
    /// comparison's `recommended` row measures it, and a configuration file
    /// names it `policy = "recommended"`.
    ///
    /// It is the defaults but for three:
    ///
    /// - a [`loss_tolerance`](Self::loss_tolerance) of 0.8, where the
    ///   default is 0.1. Loss cuts the limit only when most calls fail;
    ///   below that, queueing shows as latency (the learned timeout turns a
    ///   growing queue into slow calls first), and a share of calls failing
    ///   at random or hanging costs nothing to send into. Chosen on random
    ///   families (`docs/results.md`, "Choosing the recommendation").
    /// - an [`open_start`](Self::open_start): no limit until the first flow
    ///   of calls is steady, then twice the most it put in flight. Any
    ///   first limit is a guess, and a guess below what a healthy
    ///   dependency needs refuses its calls until the limit has grown: from
    ///   10, a healthy server taking 150 calls in flight over loopback HTTP
    ///   lost 0.16 of its first six seconds, and a busy, slow one (3,000
    ///   calls a second of 1.5 s) a dozen round trips of over a second. The
    ///   price is a caller that sends a backlog at once, above all one that
    ///   holds a slot across its retries: all of it goes out before the
    ///   first answer, as without a limiter. Such a caller (a batch, a
    ///   queue consumer) starts from `initial`: `open_start = false`
    ///   (`docs/results.md`, "The open start in the recommendation").
    /// - no slow-call rule: a [`timeout`](Self::timeout) of 365 days, the
    ///   most a duration may be, where the default is 5 s. Any such figure
    ///   is a latency, and a latency is a workload's: in front of a
    ///   dependency whose calls take longer (a model API, a report), every
    ///   success counts as a drop, and the loss it reads is the caller's
    ///   own number. What is too slow is said by the caller's timeout and
    ///   by rheostat's learned timeout, learned from the dependency; a
    ///   queue shows as latency before it shows as slow calls. A busy
    ///   dependency slowed to 6.8 s was served 0.10 of what no limiter
    ///   serves with the 5 s rule (`docs/results.md`, "Slower, not
    ///   smaller").
    ///
    /// Why these rules: the latency mode cuts for what load causes — a
    /// round trip that rises with what is in flight, drops that fall when
    /// the caller sends less — and not for what it does not: drops that
    /// stay when the caller's concurrency halves (errors at random, calls
    /// that hang) are learnt as the dependency's background, and a latency
    /// that stays is learnt as the dependency's new speed (see [`Aimd`](super::Aimd)).
    /// So a dependency that still works keeps the concurrency it takes.
    /// It has no ceiling of its own: its limit keeps about twice what the
    /// caller puts in flight while healthy, measured, whatever the
    /// dependency's size.
    ///
    /// # Examples
    ///
    /// ```
    /// use rheostat_algorithms::{AimdConfig, AimdMode};
    ///
    /// let c = AimdConfig::recommended();
    /// assert_eq!(c.mode, AimdMode::Latency);
    /// assert_eq!((c.loss_tolerance, c.open_start), (0.8, true));
    /// assert_eq!(c.timeout, rheostat_algorithms::MAX_DURATION);
    /// let default = AimdConfig {
    ///     loss_tolerance: 0.1,
    ///     open_start: false,
    ///     timeout: std::time::Duration::from_secs(5),
    ///     ..c
    /// };
    /// assert_eq!(default, AimdConfig::default());
    /// ```
    pub fn recommended() -> Self {
        AimdConfig {
            loss_tolerance: RECOMMENDED_LOSS_TOLERANCE,
            open_start: true,
            timeout: crate::MAX_DURATION,
            ..AimdConfig::default()
        }
    }

    /// Netflix concurrency-limits' `AIMDLimit` with its defaults: initial 20,
    /// min 20, max 200, backoff 0.9, timeout 5 s, one backoff per drop.
    ///
    /// One difference remains: the limit is kept as a float and rounded
    /// down when published, where Netflix truncates it at every step (20 →
    /// 18 → 16.2 here, 20 → 18 → 16 there). Set `one_backoff_per_flight` to
    /// count a burst of drops from one flight as one congestion event.
    pub fn netflix() -> Self {
        AimdConfig {
            mode: AimdMode::Netflix,
            initial: 20,
            min: 20,
            max: 200,
            backoff: 0.9,
            timeout: Duration::from_secs(5),
            one_backoff_per_flight: false,
            ..AimdConfig::default()
        }
    }

    /// Check every field.
    ///
    /// # Errors
    ///
    /// The first field outside its range, named `aimd.<field>` (and
    /// `aimd.window.<field>` for the window): `min` 0, `min` above `max`,
    /// `initial` outside `[min, max]`, `backoff` outside `(0, 1)` or NaN,
    /// `timeout` zero or above a year, `noise` outside `[0, 10]`,
    /// `loss_tolerance` outside `[0, 1)`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check::bounds(
            ["aimd.min", "aimd.max", "aimd.initial"],
            self.min,
            self.max,
            self.initial,
        )?;
        check::open_unit("aimd.backoff", self.backoff, 0.0, 1.0)?;
        check::duration("aimd.timeout", self.timeout)?;
        check::closed("aimd.noise", self.noise, 0.0, 10.0)?;
        crate::latency::check_loss_tolerance("aimd.loss_tolerance", self.loss_tolerance)?;
        self.window.validate().map_err(|e| e.within("aimd"))
    }
}
