//! The latency mode of [`Aimd`](super::Aimd): its round trips, baseline,
//! slow start and outages (the rules are on `Aimd`'s documentation).

use std::time::{Duration, Instant};

use super::{AimdConfig, Core};
use crate::latency::background::{Background, Seen, Tally, Verdict};
use crate::latency::missing::{served_and_missing, MISSING};
use crate::latency::outage::Episode;
use crate::latency::recent::Recent;
use crate::latency::secs_to_duration;
use crate::latency::window::{Window, WindowSummary};
use crate::{ConfigError, Outcome, Sample};

/// The shortest round-trip time the arithmetic uses, in seconds (1 ns): a
/// zero latency is read as this, so ratios stay finite.
const MIN_RTT: f64 = 1e-9;

/// A drop faster than this fraction of the baseline round-trip time is a
/// *fast failure* (a refused connection, an immediate error): the dependency
/// did not queue the call.
const FAST_FAILURE: f64 = 0.25;

/// A drop slower than this many baseline round trips, while successes are
/// fast, is *stale*: see `Rounds::on_drop`.
const LATE: f64 = 2.0;

/// How far a round trip without queueing moves the baseline toward the
/// upper end of its band when that is lower...
const BASELINE_FALL: f64 = 1.0 / 16.0;

/// ...and when it is higher: the baseline follows a fall within a few
/// round trips and a rise only slowly, so the caller's own standing queue
/// is not taken as normal.
const BASELINE_RISE: f64 = 1.0 / 2048.0;

/// While the caller's concurrency has halved since the latency rose, a
/// latency still above this fraction of the one seen when it rose says the
/// rise is the dependency's, not a queue the caller built: queueing delay
/// falls with the calls queued.
const STILL_SLOW: f64 = 0.75;

/// How many of its own average latencies must separate a window's close
/// from the start of the flow of calls it belongs to before it may judge
/// the baseline: the first calls of a flow to finish are its fastest, so
/// the first windows of a flow (at start, after an outage) read low.
const SETTLE: u32 = 3;

/// How many of the latest growths of the limit the latency mode remembers,
/// to cut a late drop from the limit its call was admitted under.
const GROWTHS_KEPT: usize = 8;

/// About how many calls the latency mode measures its drop rate over.
const LOSS_SPAN: f64 = 50.0;

/// What the latency mode keeps besides: its round trips.
#[derive(Clone, Debug)]
pub(super) struct Rounds {
    pub(super) window: Window,
    recent: Recent,
    /// The round-trip time without queueing, in seconds.
    pub(super) baseline: Option<f64>,
    /// When the limit last changed.
    changed_at: Option<Instant>,
    /// The successes of the open window admitted since the limit last
    /// changed.
    fresh: u32,
    /// The drops of the open window that were not fast failures.
    slow_drops: u32,
    /// Whether the open window holds a drop beyond the loss tolerance.
    congested: bool,
    /// When the earliest success of the open window started.
    window_first: Option<Instant>,
    /// When the first success of the current flow of calls started; reset
    /// by a window without successes.
    flow_start: Option<Instant>,
    /// Whether the baseline comes from windows read before the flow
    /// settled, to be replaced by the first one after.
    provisional: bool,
    /// Since the baseline took a slower dependency's latency from one
    /// window: the next window's may raise it at once.
    relearn: bool,
    /// The share of recent calls that were drops, and how many calls have
    /// been seen (up to the span).
    loss: f64,
    calls: f64,
    /// While the limit regrows multiplicatively (slow start, or after an
    /// outage): the limit it regrows to before growing one per round trip
    /// again.
    pub(super) regrow: Option<f64>,
    /// The limit before the latest doubling, while that was the latest
    /// change.
    doubled_from: Option<f64>,
    /// Since the latency rose beyond the noise: the most calls in flight
    /// and the latency then.
    rise: Option<(u32, f64)>,
    /// Since when every window has read queueing, at a latency no longer
    /// rising, while the limit did not bind (`congestion::app_limited`),
    /// and the upper end of the band then.
    unbound_rise: Option<(Instant, f64)>,
    /// Since a window held nothing but failures: while it lasts, fast
    /// failures hold the limit and slow ones cut it no lower than a
    /// decaying floor (see `crate::latency::outage`, which Vegas and Gradient follow).
    episode: Episode,
    /// The latest growths of the limit: when, and the limit before (at most
    /// [`GROWTHS_KEPT`]).
    grown: Vec<(Instant, f64)>,
    /// The drops that sending less does not cure (`crate::latency::background`).
    background: Background,
    /// The calls in flight that go missing whatever the caller sends (hangs
    /// that do not depend on load), tried the same way.
    missing: Background,
    /// The calls a second of the latest closed window.
    rate: f64,
    /// How much the next growth adds per round trip beyond `knee`: doubled
    /// by each growth there, back to one at every cut.
    step: f64,
    /// The limit the latest cut was made from: below it, the knee is near.
    knee: f64,
    /// When the limit last rose by a multiple (a doubling, a restore).
    jumped_at: Option<Instant>,
    /// Whether the latest cut was on a latency reading alone: below
    /// `knee`, the limit then goes half the way back per round trip.
    halving: bool,
    /// While the open start lasts (`AimdConfig::open_start`).
    open: Option<Open>,
    /// Calls started before this are told as ignored: they were admitted
    /// by an open start that ended in drops.
    ignore_before: Option<Instant>,
}

/// What the open start keeps until the flow is steady.
#[derive(Clone, Debug, Default)]
struct Open {
    /// The most calls in flight.
    peak: u32,
    /// The slowest success, in seconds.
    slowest: f64,
    /// The upper end of the latest window's band.
    upper: Option<f64>,
}

impl Rounds {
    /// The latency mode's state for `config`, in slow start if configured.
    pub(super) fn new(config: &AimdConfig) -> Result<Self, ConfigError> {
        Ok(Rounds {
            window: Window::new(config.window.clone()).map_err(|e| e.within("aimd"))?,
            recent: Recent::new(config.window.min_samples),
            baseline: None,
            changed_at: None,
            fresh: 0,
            slow_drops: 0,
            congested: false,
            window_first: None,
            flow_start: None,
            provisional: false,
            relearn: false,
            loss: 0.0,
            calls: 0.0,
            // Slow start: the first limit is a guess, so double until
            // the first sign of queueing.
            regrow: (config.slow_start && !config.open_start).then_some(f64::from(config.max)),
            doubled_from: None,
            rise: None,
            unbound_rise: None,
            episode: Episode::default(),
            grown: Vec::new(),
            background: Background::default(),
            missing: Background::default(),
            rate: 0.0,
            step: 1.0,
            knee: 0.0,
            jumped_at: None,
            halving: false,
            open: config.open_start.then(Open::default),
            ignore_before: None,
        })
    }

    /// The open start met drops beyond the tolerance before its flow was
    /// steady: what it let in may have built a queue that only timeouts
    /// tell of. Begin again from `initial`, as without it, and count only
    /// calls admitted from `now`.
    fn restart(&mut self, core: &mut Core, now: Instant) {
        let config = &core.config;
        *self = Rounds {
            ignore_before: Some(now),
            changed_at: Some(now),
            open: None,
            regrow: config.slow_start.then_some(f64::from(config.max)),
            ..Rounds::new(config).unwrap_or_else(|_| unreachable!("validated before"))
        };
        core.limit = f64::from(config.initial);
        core.last_backoff = Some(now);
    }

    /// A window closed while the open start lasts, the first success of
    /// its calls started at `first`: end it once the flow is steady.
    fn open_window(
        &mut self,
        core: &mut Core,
        now: Instant,
        summary: &WindowSummary,
        first: Option<Instant>,
    ) {
        self.rate = summary.rate();
        // Taken out, and put back unless the flow is steady.
        let Some(mut open) = self.open.take() else {
            return;
        };
        open.peak = open.peak.max(summary.max_in_flight);
        if summary.successes() == 0 {
            self.flow_start = None;
            open.upper = None;
            self.open = Some(open);
            return;
        }
        let Some((_, lower, upper)) = self.band(core) else {
            self.open = Some(open);
            return;
        };
        let flow_start = self.flow_started(summary, first);
        // Every call the flow holds has had time to answer, and the
        // latency has stopped rising: what it reads is the dependency's,
        // not a queue still building.
        let age = summary.closed.saturating_duration_since(flow_start);
        let steady = age.as_secs_f64() >= f64::from(SETTLE) * open.slowest;
        let before = open.upper.replace(upper);
        let Some(before) = before.filter(|&before| steady && lower <= before) else {
            self.open = Some(open);
            return;
        };
        let peak = f64::from(open.peak);
        self.baseline = Some(upper.max(before));
        self.provisional = false;
        self.episode = Episode::default();
        core.set_limit((2.0 * peak).max(f64::from(core.config.initial)));
        self.changed_at = Some(now);
        // As if a slow start had doubled to it from what was in use: the
        // first sign of queueing goes back to that, and a caller that comes
        // to use the limit doubles it again.
        self.doubled_from = Some(core.limit / 2.0);
        self.regrow = core.config.slow_start.then_some(f64::from(core.config.max));
    }

    /// The recent round trips' latency and its noise band, `(x, lower,
    /// upper)`; `None` before any.
    fn band(&self, core: &Core) -> Option<(f64, f64, f64)> {
        let x = self.recent.latency()?.max(MIN_RTT);
        let band = core.config.noise * self.recent.relative_error();
        Some((x, x * (1.0 - band), x * (1.0 + band)))
    }

    /// When the current flow of calls began: the first success of the
    /// window that began it (`first`), else that window's start.
    fn flow_started(&mut self, summary: &WindowSummary, first: Option<Instant>) -> Instant {
        *self
            .flow_start
            .get_or_insert(first.unwrap_or(summary.started))
    }

    /// `sample` as evidence: ignored if its call was admitted by an open
    /// start that ended in drops.
    fn told(&self, now: Instant, sample: &Sample) -> Sample {
        if self
            .ignore_before
            .is_some_and(|before| sample.started(now) < before)
        {
            Sample {
                outcome: Outcome::Ignore,
                ..*sample
            }
        } else {
            *sample
        }
    }

    /// Whether a drop is a fast failure: far faster than the baseline, or
    /// with no baseline yet to compare it with.
    fn is_fast_failure(&self, sample: &Sample) -> bool {
        sample.outcome == Outcome::Overload
            && self
                .baseline
                .is_none_or(|b| sample.latency.as_secs_f64() < FAST_FAILURE * b)
    }

    /// Cut the limit at `now`, on a latency reading alone or not.
    fn back_off(&mut self, core: &mut Core, now: Instant, on_latency: bool) {
        self.cut_from(core.limit, on_latency);
        core.back_off(now);
        self.changed_at = Some(now);
        self.doubled_from = None;
    }

    /// A cut from `limit`, on a latency reading alone or not: it is the
    /// knee now, growth back to it goes half the way per round trip after
    /// a cut on latency and one per round trip after any other, and past
    /// it starts again at one.
    fn cut_from(&mut self, limit: f64, on_latency: bool) {
        self.knee = limit;
        self.step = 1.0;
        self.halving = on_latency;
    }

    pub(super) fn on_sample(&mut self, core: &mut Core, now: Instant, sample: &Sample) {
        let sample = &self.told(now, sample);
        if let Some(open) = self.open.as_mut() {
            open.peak = open.peak.max(sample.in_flight);
            if sample.outcome == Outcome::Success && !core.is_drop(sample) {
                open.slowest = open.slowest.max(sample.latency.as_secs_f64());
            }
        }
        if sample.outcome != Outcome::Ignore {
            let started = sample.started(now);
            let dropped = core.is_drop(sample);
            self.calls = (self.calls + 1.0).min(LOSS_SPAN);
            let target = if dropped { 1.0 } else { 0.0 };
            self.loss += (target - self.loss) / self.calls;
            if dropped {
                let fast = self.is_fast_failure(sample);
                if !fast {
                    self.slow_drops = self.slow_drops.saturating_add(1);
                }
                // A drop that took over LATE round trips while the calls
                // that succeed are fast started long before them, and met no
                // queue: what it met in flight is not the load now.
                let stale = !fast
                    && self
                        .baseline
                        .is_some_and(|b| sample.latency.as_secs_f64() > LATE * b)
                    && self.recent.calm(self.baseline, core.config.noise);
                self.on_drop(core, now, started, sample.in_flight, fast, stale);
            } else {
                self.window_first = Some(self.window_first.map_or(started, |f| f.min(started)));
                if self.changed_at.is_none_or(|changed| started >= changed) {
                    self.fresh = self.fresh.saturating_add(1);
                }
            }
        }
        // An ignored call is not evidence, but it came back: the window
        // counts its time out as answered (Little's law).
        self.window.add(now, &self.told(now, sample));
        self.handle_timeout(core, now);
    }

    pub(super) fn handle_timeout(&mut self, core: &mut Core, now: Instant) {
        if let Some(summary) = self.window.close_if_due(now) {
            self.on_window(core, now, &summary);
        }
    }

    /// A drop at `now` of a call started at `started` with `in_flight`
    /// calls in flight: one cut per flight and per round trip.
    fn on_drop(
        &mut self,
        core: &mut Core,
        now: Instant,
        started: Instant,
        in_flight: u32,
        fast: bool,
        stale: bool,
    ) {
        if self.loss <= self.background.tolerated(core.config.loss_tolerance) {
            return;
        }
        if self.open.is_some() {
            // A flood the open start let in ends in most calls dropping;
            // a drop among its first calls is no more than a drop.
            if self.calls >= LOSS_SPAN {
                self.restart(core, now);
            }
            return;
        }
        if fast && self.baseline.is_some() {
            // A refused connection, an instant error: the dependency is
            // down or turning calls away, not queueing them. Hold; the
            // latency of what it does serve tells of any queue.
            return;
        }
        let floor = self.episode.floor(now).unwrap_or(0.0);
        self.congested = true;
        if !fast {
            self.regrow = None;
        }
        if core.config.one_backoff_per_flight {
            if let Some(cut) = core.last_backoff {
                let round_trip = self.baseline.map_or(Duration::ZERO, secs_to_duration);
                let next = cut.checked_add(round_trip).unwrap_or(cut);
                if started < cut || now < next {
                    return;
                }
            }
        }
        let before = core.limit;
        self.background.cut(self.rate, before);
        // A drop cuts from what the call met, when that was less than the
        // limit now: the limit it was admitted under, if the limit has
        // grown since (a timeout reports a slow start's overshoot only once
        // it expires, doublings later), or the calls then in flight, if the
        // caller was using at least half of that limit.
        let then = self
            .grown
            .iter()
            .find(|&&(at, _)| at > started)
            .map_or(core.limit, |&(_, then)| then.min(core.limit));
        let met = f64::from(in_flight);
        let from = if !stale && met > 0.0 && met * 2.0 >= then {
            met.min(then)
        } else {
            then
        };
        if from < core.limit.floor() {
            core.set_limit(from);
        }
        self.back_off(core, now, false);
        if core.limit < floor {
            core.set_limit(floor.min(before));
        }
    }

    fn on_window(&mut self, core: &mut Core, now: Instant, summary: &WindowSummary) {
        // The window judges the current limit only if most of its
        // successes were admitted under it.
        let current = u64::from(self.fresh) * 2 >= u64::from(summary.successes());
        self.fresh = 0;
        let slow_drops = std::mem::take(&mut self.slow_drops);
        let congested = std::mem::take(&mut self.congested);
        let first = self.window_first.take();
        self.recent.update(summary);
        if self.open.is_some() {
            self.open_window(core, now, summary, first);
            return;
        }
        if self.background_restores(core, now, summary) {
            return;
        }
        if summary.successes() == 0 && summary.drops > 0 {
            self.episode.failed(now, core.limit, slow_drops == 0);
            // Refused, then taken but answered slower than the caller
            // waits: most likely a cold start, which warms only with the
            // traffic it is given. For a floor's half-life, a limit in use
            // doubles, up to the ceiling, as if the dependency answered;
            // after it, a dependency that still answers nothing is not
            // warming, and the doubling bought nothing: back to the floor.
            if slow_drops > 0 && self.episode.refused() {
                if self.episode.warming(now) {
                    // Up to twice the limit the episode began with: the
                    // limit has no ceiling but what it measured.
                    let cap = self.episode.began_with().map_or(f64::INFINITY, |b| 2.0 * b);
                    if summary.max_in_flight >= core.gate().limit && core.limit < cap {
                        core.set_limit((core.limit * 2.0).min(cap));
                        self.changed_at = Some(now);
                        self.jumped_at = Some(now);
                    }
                    return;
                }
                if let Some(floor) = self.episode.floor(now).filter(|&f| core.limit > f) {
                    core.set_limit(floor);
                    self.step = 1.0;
                    self.changed_at = Some(now);
                }
            }
        } else if let Some(began) = self.episode.end() {
            // Answering again after an episode that cut the limit: regrow,
            // to where it began.
            if core.limit < began {
                self.regrow = Some(self.regrow.map_or(began, |to| to.max(began)));
            }
        }
        if summary.successes() == 0 {
            self.flow_start = None;
            // Nothing but fast failures: the dependency is down, not
            // queueing. When it answers again, regrow.
            if summary.drops > 0 && slow_drops == 0 {
                self.regrow = Some(f64::from(core.config.max));
            }
            return;
        }
        let Some((x, lower, upper)) = self.band(core) else {
            return;
        };
        let flow_start = self.flow_started(summary, first);
        let settled = summary.average.is_some_and(|average| {
            average.checked_mul(SETTLE).is_some_and(|settle| {
                summary.closed.saturating_duration_since(flow_start) >= settle
            })
        });
        if !settled {
            // The flow's first calls to finish are its fastest: this window
            // reads low. It may stand in for a baseline not yet known, and
            // decides nothing.
            if self.baseline.is_none() || self.provisional {
                self.baseline = Some(upper);
                self.provisional = true;
            }
            return;
        }
        if std::mem::take(&mut self.provisional) {
            self.baseline = None;
        }
        let Some(mut baseline) = self.baseline else {
            // The first baseline. From a window of fewer calls than a window
            // wants (a slow start from a low limit), its band is wide and
            // its upper end far above the latency: it stands in only until a
            // full window, which then replaces it.
            self.baseline = Some(upper);
            self.provisional = summary.successes() < core.config.window.min_samples;
            if !congested {
                self.grow(core, now, summary, current);
            }
            return;
        };
        if std::mem::take(&mut self.relearn) {
            // The window that found the dependency slower is one sample of
            // its new latency, and may have been a fast one.
            baseline = baseline.max(upper);
        }
        let mut queueing = lower > baseline;
        if queueing {
            let in_flight = summary.max_in_flight;
            let at_floor = core.limit <= f64::from(core.config.min);
            match self.rise {
                None => self.rise = Some((in_flight, x)),
                Some((peak, then)) if u64::from(in_flight) * 2 <= u64::from(peak) || at_floor => {
                    if x >= STILL_SLOW * then {
                        // Half the calls (or as few as the floor allows),
                        // hardly faster: the dependency is slower, not
                        // queueing the caller's calls. The baseline takes
                        // the new latency, and the limit regrows, doubling,
                        // to the concurrency the slower calls take (Little's
                        // law: as many more as they are slower), until the
                        // first sign of queueing.
                        baseline = upper.max(baseline);
                        queueing = false;
                        self.relearn = true;
                        self.regrow = Some(f64::from(core.config.max));
                    }
                    self.rise = queueing.then_some((in_flight, x));
                }
                Some((peak, then)) => self.rise = Some((peak.max(in_flight), then)),
            }
        } else {
            self.unbound_rise = None;
            // A rise ends when the latency is back at the baseline, not at
            // the first window whose band reaches down to it: a window of
            // few calls is noisy.
            if x <= baseline {
                self.rise = None;
            }
            let weight = (f64::from(summary.successes())
                / f64::from(core.config.window.min_samples.max(1)))
            .min(1.0);
            // A flow that has just grown by a multiple reads low, as a new
            // flow does: its answers are those of the calls sent last that
            // were fast, the slow ones not answered yet. For as long as a
            // new flow is not trusted, such windows do not lower the
            // baseline.
            let grown = self.jumped_at.is_some_and(|at| {
                now.saturating_duration_since(at) < secs_to_duration(f64::from(SETTLE) * x)
            });
            let step = if upper >= baseline {
                BASELINE_RISE
            } else if grown {
                0.0
            } else {
                BASELINE_FALL
            };
            baseline += step * weight * (upper - baseline);
        }
        self.baseline = Some(baseline);

        if queueing {
            if !current && core.config.one_backoff_per_flight {
                return;
            }
            // Under half the limit at the window's peak, or on average over
            // its calls: a burst that reached the limit by chance, at a
            // small busy dependency whose queue forms and drains by chance,
            // is not a queue the caller keeps standing. (Not after a
            // doubling: its calls ramp in, and the first sign of queueing
            // ends it.)
            let app_limited = crate::latency::congestion::app_limited(summary, core.limit)
                || (self.doubled_from.is_none() && summary.mean_in_flight() * 2.0 < core.limit);
            if app_limited && lower <= 2.0 * baseline {
                // A latency that stays above the baseline, and stops
                // rising, for round trips while the limit does not bind is
                // not a queue the caller built: the baseline was learned low
                // (a growing flow's first answers are its fastest, more so
                // the heavier the tail). It is the dependency's, and learned
                // as such. A latency still rising is a queue growing, and
                // relearns nothing.
                match self.unbound_rise {
                    Some((since, top))
                        if lower <= top
                            && now.saturating_duration_since(since)
                                >= secs_to_duration(f64::from(SETTLE) * x) =>
                    {
                        self.baseline = Some(upper.max(baseline));
                        self.rise = None;
                        self.unbound_rise = None;
                    }
                    Some((_, top)) if lower <= top => {}
                    _ => self.unbound_rise = Some((now, upper)),
                }
                return;
            }
            self.unbound_rise = None;
            self.regrow = None;
            match self.doubled_from.take() {
                // The doubling overshot: back to the limit before it.
                Some(before) => {
                    self.cut_from(core.limit, true);
                    core.set_limit(before);
                    core.last_backoff = Some(now);
                    self.changed_at = Some(now);
                }
                // A cut by what the window proves, if that is more than
                // the backoff: of the calls in flight at a latency no
                // lower than `lower`, the dependency serves about
                // `baseline / lower` without queueing them (Little's law),
                // and queues the rest. One cut then takes a queue of any
                // depth down to what the dependency holds, never below
                // half; a rise that noise made, just past the band, is
                // cut by the backoff alone. Only a full window (a window's
                // `min_samples` successes) measures the depth: fewer calls
                // prove a queue, not how deep it is, and at a call a
                // second a burst that queued at a healthy dependency read
                // as one to halve three times in 12 s.
                None => {
                    let before = core.limit;
                    self.back_off(core, now, true);
                    if summary.successes() >= core.config.window.min_samples {
                        let proven = before * (baseline / lower).max(0.5);
                        core.set_limit(core.limit.min(proven));
                    }
                }
            }
            return;
        }
        if !congested {
            self.grow(core, now, summary, current);
        }
    }

    /// Tell both backgrounds of a closed window; if either found its loss to
    /// be the dependency's, put the limit back where its trial began and
    /// say so (the window decides nothing else).
    fn background_restores(
        &mut self,
        core: &mut Core,
        now: Instant,
        summary: &WindowSummary,
    ) -> bool {
        let at_floor = core.limit <= f64::from(core.config.min);
        self.rate = summary.rate();
        // Successes no slower than the baseline allows: nothing queues.
        let calm = self.recent.calm(self.baseline, core.config.noise);
        let dropped = self.background.window(
            Seen::of(summary, self.loss, at_floor, calm),
            core.config.loss_tolerance,
        );
        // The window's share of calls missing is its own: a trial of it
        // compares the same.
        let missing_share = served_and_missing(summary).map(|(_, share)| share);
        let missing = missing_share.map_or(Verdict::None, |share| {
            let seen = Seen {
                own: Tally {
                    lost: share * f64::from(summary.samples),
                    of: f64::from(summary.samples),
                },
                ..Seen::of(summary, share, at_floor, calm)
            };
            self.missing.window(seen, MISSING)
        });
        let to = match (dropped, missing) {
            (Verdict::Restore(a), Verdict::Restore(b)) => a.max(b),
            // Drops that are the dependency's explain the calls that went
            // missing before them: a trial of those ends with them.
            (Verdict::Restore(a), Verdict::None) => {
                self.missing.conclude(missing_share).map_or(a, |b| a.max(b))
            }
            (Verdict::None, Verdict::Restore(b)) => b,
            (Verdict::None, Verdict::None) => return false,
        };
        if to > core.limit {
            core.set_limit(to);
            self.changed_at = Some(now);
            self.doubled_from = None;
            self.jumped_at = Some(now);
        }
        true
    }

    /// A round trip without queueing or drops: one more, or twice as many
    /// while regrowing, if the limit was in use.
    fn grow(&mut self, core: &mut Core, now: Instant, summary: &WindowSummary, current: bool) {
        // Headroom: a caller using at least half its limit may need more
        // before long. A limit a healthy caller only reaches by chance
        // refuses that chance, and below half of it the latency test is
        // blind to noise (`congestion::app_limited`); so in health the
        // limit settles at twice the most calls in flight.
        let in_use = !crate::latency::congestion::app_limited(summary, core.limit);
        if !current || !in_use {
            return;
        }
        let missing = served_and_missing(summary)
            .filter(|&(_, share)| share > self.missing.tolerated(MISSING));
        if let Some((served, _)) = missing {
            self.missing.cut(summary.rate(), core.limit);
            // Far fewer calls served than were in flight: calls are stuck
            // (dropped, to time out later). Not a time for more, and a slow
            // start's doubling would only add to them: back to twice what
            // was served.
            self.regrow = None;
            let to = (2.0 * served).max(f64::from(core.config.min));
            if to < core.limit {
                self.cut_from(core.limit, false);
                core.set_limit(to);
                core.last_backoff = Some(now);
                self.changed_at = Some(now);
            }
            return;
        }
        let before = core.limit;
        if let Some(to) = self.regrow.filter(|&to| before < to) {
            core.set_limit((before * 2.0).min(to));
            self.doubled_from = Some(before);
            self.jumped_at = Some(now);
        } else {
            self.regrow = None;
            // One per round trip the window spanned, no more than its calls
            // could fill at half the limit each.
            let span = summary.closed.saturating_duration_since(summary.started);
            let round_trip = self.baseline.unwrap_or(f64::INFINITY).max(MIN_RTT);
            let round_trips = (span.as_secs_f64() / round_trip)
                .min(2.0 * f64::from(summary.samples) / before.max(1.0))
                .max(1.0);
            // Below the limit the last cut was made from, half the way back
            // to it per round trip (at least one, at most a doubling): a
            // binary search for the knee, as TCP BIC's, so a cut that
            // noise made costs a few round trips at any size, and a knee
            // that is real is probed more gently the nearer it is. Beyond
            // it, the step doubles with each growth: the knee has moved,
            // and one of any size is found in a number of round trips that
            // grows with its logarithm, not with its size.
            if before < self.knee {
                self.step = 1.0;
                let back = if self.halving {
                    (self.knee - before) * (1.0 - 0.5f64.powf(round_trips))
                } else {
                    0.0
                };
                core.set_limit(before + back.min(before).max(round_trips));
            } else {
                core.set_limit(before + round_trips * self.step);
                self.step = (self.step * 2.0).min(before.max(1.0));
            }
            self.doubled_from = None;
        }
        if core.limit != before {
            self.changed_at = Some(now);
            if self.grown.len() == GROWTHS_KEPT {
                self.grown.remove(0);
            }
            self.grown.push((now, before));
        }
        if self.regrow.is_some_and(|to| core.limit >= to) {
            self.regrow = None;
        }
    }
}
