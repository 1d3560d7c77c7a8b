//! The trait every policy implements: events in, one answer out.

use std::time::{Duration, Instant};

use crate::{Outcome, Published, Sample, Snapshot, Transition};

/// An admission policy: learns from events, answers with one [`Published`]
/// value.
///
/// The runtime tells the policy what happens (a call finished, calls were
/// batched, a probe is about to be admitted, calls were refused locally,
/// time passed) and, after each event, reads one answer:
/// [`Algorithm::publish`]. Methods take `now`; none may block, sleep or
/// read a clock, and the runtime serialises calls to them. Optional events
/// have default bodies that are right for any policy.
///
/// # Examples
///
/// A policy driven by hand:
///
/// ```
/// use std::time::{Duration, Instant};
/// use rheostat_algorithms::{Aimd, AimdConfig, Algorithm, Outcome, Sample};
///
/// let mut aimd = Aimd::new(AimdConfig { initial: 20, ..AimdConfig::default() })?;
/// let t0 = Instant::now();
/// aimd.on_sample(t0, &Sample::new(Outcome::Overload, Duration::from_millis(30), 20));
/// assert_eq!(aimd.publish().gate.limit, 18);
/// # Ok::<(), rheostat_algorithms::ConfigError>(())
/// ```
///
/// A policy of one's own needs a name, an answer and a way to learn:
///
/// ```
/// use std::time::Instant;
/// use rheostat_algorithms::{Algorithm, Feedback, Gate, Hints, Outcome, Published, Sample};
///
/// /// Shuts after three overloads in a row, for good.
/// struct ThreeStrikes { run: u32 }
///
/// impl Algorithm for ThreeStrikes {
///     fn name(&self) -> &'static str { "three-strikes" }
///     fn publish(&self) -> Published {
///         let gate = if self.run >= 3 { Gate::shut(None) } else { Gate::unlimited() };
///         // Outcomes are enough: latency is never looked at.
///         Published::new(gate).with_hints(Hints::default().with_feedback(Feedback::Outcomes))
///     }
///     fn on_sample(&mut self, _now: Instant, sample: &Sample) {
///         match sample.outcome {
///             Outcome::Overload => self.run += 1,
///             Outcome::Success => self.run = 0,
///             Outcome::Ignore => {}
///         }
///     }
/// }
/// # let mut p = ThreeStrikes { run: 0 };
/// # for _ in 0..3 { p.on_sample(Instant::now(), &Sample::new(Outcome::Overload, Default::default(), 1)); }
/// # assert!(p.publish().gate.is_shut());
/// ```
pub trait Algorithm: Send {
    /// A short, stable name for logs and metrics (`"aimd"`).
    fn name(&self) -> &'static str;

    /// The one answer, read after every event: the gate, when to wake, what
    /// to report and who refuses. It must depend only on the policy's state.
    fn publish(&self) -> Published;

    /// Learn from one finished call.
    fn on_sample(&mut self, now: Instant, sample: &Sample);

    /// Learn from `count` successes the runtime held for the policy under
    /// its [`Hints::deferral`](crate::Hints::deferral) and only counted,
    /// since it did not time them (the policy's feedback was
    /// [`Outcomes`](crate::Feedback::Outcomes)): as many calls of
    /// [`Outcome::Success`] that were not probes, not stale and not timed,
    /// all covered by the [`Deferral`](crate::Deferral) published when they
    /// finished. Called at `now`, before any other event.
    ///
    /// The default replays them through [`Algorithm::on_sample`], one by
    /// one, as successes of zero latency with one call in flight, so no
    /// policy loses a call by not overriding this. A policy whose deferral
    /// covers untimed successes overrides it to count them at once. A
    /// success that finished just as the policy changed (or was swapped for
    /// another by the runtime's `update`) may arrive here after the policy
    /// stopped letting successes be held.
    fn on_successes(&mut self, now: Instant, count: u64) {
        let success = Sample::new(Outcome::Success, Duration::ZERO, 1);
        for _ in 0..count {
            self.on_sample(now, &success);
        }
    }

    /// Asked for each admission while the published gate has `probe` set.
    /// Return `false` to refuse the call (for example, the probe allowance is
    /// spent). A refused call is not sent.
    fn on_admit(&mut self, now: Instant) -> bool {
        let _ = now;
        true
    }

    /// Told how many calls the runtime refused locally since the last time
    /// it said (throttles count them as requests).
    fn on_rejected(&mut self, now: Instant, count: u64) {
        let _ = (now, count);
    }

    /// Apply time-driven changes due at or before `now`. The runtime calls
    /// it once the published [`wake_at`](Published::wake_at) has passed.
    fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }

    /// The next state transition the policy has made since it was last
    /// asked, oldest first. Breakers report here; the runtime drains this
    /// after every event and hands each transition to its observers.
    fn poll_transition(&mut self) -> Option<Transition> {
        None
    }

    /// How long a call admitted as a probe may take (default `None`: the
    /// policy never probes). A breaker counts a probe that has not reported
    /// by then as failed, so the runtime gives a probe this as its attempt
    /// timeout in place of the caller's ordinary one: `Limiter::call`, the
    /// tower layer and `permit.timeout(ordinary)` all do. Read when a probe
    /// is admitted.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use rheostat_algorithms::{Algorithm, Fixed};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let breaker = Breaker::new(BreakerConfig::recommended())?;
    /// assert_eq!(breaker.probe_timeout(), Some(Duration::from_secs(30)));
    /// assert_eq!(Fixed::new(8)?.probe_timeout(), None);
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    fn probe_timeout(&self) -> Option<Duration> {
        None
    }

    /// Hold the policy's breaker closed (`hold`), or let it go back to
    /// judging for itself (`!hold`), at `now`: whether the policy has a
    /// breaker to hold (default `false`, none). A breaker held closed
    /// admits every call it would and never opens; let go, it starts
    /// closed with a fresh window.
    ///
    /// It is the one breaker operation on this trait, because a breaker
    /// may sit among the boxed members of a [`Stack`](crate::Stack),
    /// where nothing else reaches it; a stack forwards it to every member.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Instant;
    /// use rheostat_algorithms::{Algorithm, BreakerState, Fixed};
    /// use rheostat_algorithms::breaker::{Breaker, BreakerConfig};
    ///
    /// let now = Instant::now();
    /// let mut breaker = Breaker::new(BreakerConfig::recommended())?;
    /// breaker.force_open(now);
    /// assert!(breaker.hold_closed(now, true));
    /// assert_eq!(breaker.state(), BreakerState::ForcedClosed);
    /// assert!(breaker.hold_closed(now, false));
    /// assert_eq!(breaker.state(), BreakerState::Closed);
    /// assert!(!Fixed::new(8)?.hold_closed(now, true));
    /// # Ok::<(), rheostat_algorithms::ConfigError>(())
    /// ```
    fn hold_closed(&mut self, now: Instant, hold: bool) -> bool {
        let _ = (now, hold);
        false
    }

    /// A view of the policy for metrics and logs.
    fn snapshot(&self) -> Snapshot {
        Snapshot::new(self.name(), self.publish().gate)
    }

    /// The names of the policies this one is made of, in order, which
    /// [`Published::refusers`] index. A single policy is made of itself; a
    /// stack lists its members. The runtime reads this when the limiter
    /// is built and again whenever the policy is changed from outside (a
    /// policy swapped for another), never in between: a policy's members
    /// change only with it.
    fn members(&self) -> Vec<&'static str> {
        vec![self.name()]
    }
}

impl<A: Algorithm + ?Sized> Algorithm for Box<A> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn publish(&self) -> Published {
        (**self).publish()
    }
    fn on_sample(&mut self, now: Instant, sample: &Sample) {
        (**self).on_sample(now, sample);
    }
    fn on_successes(&mut self, now: Instant, count: u64) {
        (**self).on_successes(now, count);
    }
    fn on_admit(&mut self, now: Instant) -> bool {
        (**self).on_admit(now)
    }
    fn on_rejected(&mut self, now: Instant, count: u64) {
        (**self).on_rejected(now, count);
    }
    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now);
    }
    fn poll_transition(&mut self) -> Option<Transition> {
        (**self).poll_transition()
    }
    fn probe_timeout(&self) -> Option<Duration> {
        (**self).probe_timeout()
    }
    fn hold_closed(&mut self, now: Instant, hold: bool) -> bool {
        (**self).hold_closed(now, hold)
    }
    fn snapshot(&self) -> Snapshot {
        (**self).snapshot()
    }
    fn members(&self) -> Vec<&'static str> {
        (**self).members()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Deferral, Feedback, Gate, Hints};

    /// Counts successes, and lets them be held (and so, untimed, counted),
    /// without overriding `on_successes`.
    struct Counter(u64);

    impl Algorithm for Counter {
        fn name(&self) -> &'static str {
            "counter"
        }
        fn publish(&self) -> Published {
            Published::new(Gate::unlimited()).with_hints(
                Hints::default()
                    .with_feedback(Feedback::Outcomes)
                    .with_deferral(Some(Deferral::ALL)),
            )
        }
        fn on_sample(&mut self, _now: Instant, sample: &Sample) {
            if sample.outcome == Outcome::Success {
                self.0 += 1;
            }
        }
    }

    #[test]
    fn the_default_on_successes_loses_no_call() {
        let mut counter = Counter(0);
        counter.on_successes(Instant::now(), 7);
        assert_eq!(counter.0, 7);
        let mut boxed: Box<dyn Algorithm> = Box::new(Counter(0));
        boxed.on_successes(Instant::now(), 3);
        assert_eq!(boxed.snapshot().gate, Gate::unlimited());
    }
}
