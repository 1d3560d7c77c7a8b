//! The policy behind its lock, and everything done under it: the successes
//! held and the rejections counted handed over first, the answer stored on
//! the board (`board.rs`) after, the transitions counted and reported; the
//! re-evaluation of a gate whose time has come; an operator's override
//! ([`crate::overrides`]) set, cleared and ended when its time runs out;
//! probe tokens granted to a fleet's instance; and waiting until the gate
//! admits again, with an active probe while the breaker is half-open
//! (`ready.rs`).
//!
//! This file owns the lock. What was batched for the policy is handed over
//! before it hears anything new (`catch_up`), and every change made from
//! outside (an update, an override, probe tokens) goes through `with_held`,
//! which then publishes the answer the change leaves, reports its
//! transitions and wakes any waiter it lets through.
use std::time::{Duration, Instant};

use super::board::Last;
use super::ready::{ActiveProbe, Probing, Readiness, ReadyWaiter};
use super::{Limiter, Snapshot};
use crate::algorithms::{
    Algorithm, ConfigError, Outcome, Published, Sample, Transition, MAX_LIMIT,
};
use crate::clock::Clock;
use crate::observe::Observer;
use crate::overrides::{Override, MAX_OVERRIDE};
use crate::sync::{MutexGuard, Ordering, PoisonError, TryLockError};
use crate::timeout::{Given, Learner};

/// The policy, behind the limiter's lock, with the instants it last
/// published, so that an answer that has not moved is not converted again.
pub(super) struct Held<A> {
    pub(super) policy: A,
    pub(super) last: Last,
    /// The held successes being handed over (kept for its allocation).
    scratch: Vec<(Instant, Sample)>,
    /// The attempt timeout's learner, if it is learned: told every call the
    /// policy is told, through [`Limiter::tell`].
    learner: Option<Box<Learner>>,
    /// An operator's override and when it ends ([`crate::overrides`]):
    /// applied to every answer published while it lasts, ended by the
    /// first event at or after its end ([`Limiter::catch_up`]).
    pub(super) overriding: Option<(Override, Instant)>,
    /// Probe tokens granted from outside and when they lapse
    /// ([`Limiter::grant_probes`]); read only with shared probes.
    pub(super) probe_tokens: (u32, Option<Instant>),
}

impl<A> Held<A> {
    /// Since when the learned timeout's ceiling has cut every call, if it
    /// has for a window ([`Limiter::ceiling_cutting_since`]).
    pub(super) fn ceiling_cutting_since(&self) -> Option<Instant> {
        self.learner
            .as_ref()
            .and_then(|learner| learner.cutting_since())
    }
}

impl<A: Algorithm> Held<A> {
    pub(super) fn new(policy: A, learner: Option<Box<Learner>>) -> Self {
        Held {
            last: Last::new(policy.members()),
            policy,
            scratch: Vec::new(),
            learner,
            overriding: None,
            probe_tokens: (0, None),
        }
    }

    /// The policy's snapshot with what is kept beside it: the override in
    /// force, and since when the learned timeout's ceiling cuts every call.
    pub(super) fn view(&self) -> Snapshot {
        Snapshot {
            overridden: self.overriding,
            ceiling_cutting_since: self.ceiling_cutting_since(),
            ..Snapshot::of_policy(self.policy.snapshot())
        }
    }

    /// The policy's answer, under the override while one lasts: what the
    /// board shows, and what every path that publishes reads.
    #[inline]
    pub(super) fn publish(&self) -> Published {
        let published = self.policy.publish();
        match self.overriding {
            None => published,
            Some((overriding, until)) => overriding.apply(published, until),
        }
    }
}

impl<A> std::ops::Deref for Held<A> {
    type Target = A;
    fn deref(&self) -> &A {
        &self.policy
    }
}

impl<A> std::ops::DerefMut for Held<A> {
    fn deref_mut(&mut self) -> &mut A {
        &mut self.policy
    }
}

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    #[inline]
    pub(crate) fn refresh_if_due(&self, now: Instant) {
        if self.board.wake_due(now) {
            self.refresh(now);
        }
    }

    /// Re-evaluate a gate whose `until` has passed.
    #[cold]
    pub(super) fn refresh(&self, now: Instant) {
        let transitions = {
            let mut policy = self.lock();
            self.catch_up(&mut policy, now);
            if policy.publish().wake_at.is_some_and(|t| t <= now) {
                policy.handle_timeout(now);
            }
            let transitions = self.drain(&mut policy);
            self.publish(&mut policy);
            transitions
        };
        self.report(transitions);
        // A waiter may be admissible under the new gate; don't serve waiters
        // from inside an admission (the queue may be locked by our caller).
    }

    /// Before any event reaches the policy: hand over the successes held
    /// and batched for it, then the rejections counted since it last heard.
    #[inline]
    pub(super) fn catch_up(&self, held: &mut Held<A>, now: Instant) {
        if held.overriding.is_some_and(|(_, until)| now >= until) {
            self.end_override(held, now, true);
        }
        if !self.deferred.is_empty() {
            self.hand_over(held);
        }
        let policy = &mut held.policy;
        let batched = self.slots.take_batched();
        if batched > 0 {
            policy.on_successes(now, batched);
        }
        if self.rejected.load(Ordering::Relaxed) > 0 {
            let count = self.rejected.swap(0, Ordering::Relaxed);
            if count > 0 {
                policy.on_rejected(now, count);
            }
        }
    }

    /// Hand the successes held for the policy over, oldest first.
    #[cold]
    fn hand_over(&self, held: &mut Held<A>) {
        let mut scratch = std::mem::take(&mut held.scratch);
        self.deferred.take(&mut scratch);
        for (at, sample) in scratch.drain(..) {
            // No call that kept its caller's own timeout, nor one given a
            // learned timeout's ceiling, is held (`finish.rs`).
            self.tell(held, at, &sample, Given::Learned);
        }
        held.scratch = scratch;
    }

    /// Tell the policy, and the timeout's learner if any, how a call ended
    /// at `at`, `given` which timeout; show the learned timeout if it
    /// moved, and tell the observer if the ceiling began or ceased to cut
    /// every call. Every sample reaches the policy through here, so the
    /// learner sees what the policy sees; the learner first says whether a
    /// call its timeout cut is evidence ([`crate::timeout`], "What an
    /// expiry says").
    ///
    /// The observer is told under the lock, as it is of the timeout in
    /// force: both are rare (the value is read at most 60 times a window,
    /// the ceiling's state changes at most twice a window).
    #[inline]
    pub(super) fn tell(&self, held: &mut Held<A>, at: Instant, sample: &Sample, given: Given) {
        let Some(learner) = &mut held.learner else {
            held.policy.on_sample(at, sample);
            return;
        };
        let outcome = learner.judge(at, sample.outcome, sample.latency, given);
        if outcome == sample.outcome {
            held.policy.on_sample(at, sample);
        } else {
            let mut judged = *sample;
            judged.outcome = outcome;
            held.policy.on_sample(at, &judged);
        }
        if learner.tell(at, sample.outcome, sample.latency, given) {
            self.show_learned(learner);
        }
        if let Some(cutting) = learner.watch(at, sample.outcome, sample.latency) {
            if let Some(observer) = &self.observer {
                observer.ceiling_cutting(learner.ceiling(), cutting);
            }
        }
    }

    /// Show what `learner` has just learned: the timeout and the hedge
    /// delay, on the board and to the observer.
    fn show_learned(&self, learner: &Learner) {
        self.board.set_learned(learner.value());
        let hedge = learner.hedge();
        if hedge != self.board.hedge() {
            self.board.set_hedge(hedge);
            if let (Some(observer), Some(hedge)) = (&self.observer, hedge) {
                observer.hedge_delay_changed(hedge);
            }
        }
        if let (Some(observer), Some(in_force), true) =
            (&self.observer, self.timeout_in_force(), self.cuts_early())
        {
            observer.timeout_changed(in_force);
        }
    }

    /// An attempt that lost a hedge race ran for `latency` until `at`, and
    /// was cancelled: its own latency is at least that. The policy learns
    /// nothing of it (it is released as ignored), but if it ran for the
    /// hedge delay or longer, the learned latencies count it as a success
    /// that slow, so that the slow calls hedges cut short still weigh in
    /// the timeout and the hedge delay learned, as they would have
    /// unhedged. One outrun sooner (a hedge the first attempt beat) is
    /// known only to be slower than a time shorter than most answers:
    /// counted, it would pull what is learned down.
    pub(crate) fn tell_outrun(&self, at: Instant, latency: Duration) {
        if self.hedge_delay().is_none_or(|delay| latency < delay) {
            return;
        }
        let mut held = self.lock();
        if let Some(learner) = &mut held.learner {
            if learner.tell(at, Outcome::Success, latency, Given::Own) {
                self.show_learned(learner);
            }
        }
    }

    /// Ask the policy for its answer and copy it where the hot path reads it.
    #[inline]
    pub(super) fn publish(&self, held: &mut Held<A>) {
        let published = held.publish();
        self.store(&published, &mut held.last);
    }

    /// Copy the policy's answer where the hot path reads it, and tell
    /// whoever waits for the gate to change.
    #[inline(always)]
    pub(super) fn store(&self, published: &Published, last: &mut Last) {
        if self.board.store(published, last) {
            if self.ready_waiters.load(Ordering::SeqCst) > 0 {
                self.changed.notify_waiters();
            }
            if let Some(observer) = &self.observer {
                observer.gate_changed(&published.gate.sanitized());
            }
        }
    }

    /// Take the policy's transitions; count them into the generation, so
    /// that calls admitted before them are marked stale when they finish.
    #[inline]
    pub(super) fn drain(&self, policy: &mut A) -> Vec<Transition> {
        let mut out = Vec::new();
        while let Some(t) = policy.poll_transition() {
            out.push(t);
        }
        if !out.is_empty() {
            self.board.next_generation();
        }
        out
    }

    #[inline]
    pub(super) fn report(&self, transitions: Vec<Transition>) {
        for t in &transitions {
            if let Some(hook) = self.options.on_transition() {
                hook(t);
            }
            if let Some(observer) = &self.observer {
                observer.transition(t);
            }
        }
    }

    /// [`Overrides::set`](super::Overrides::set): the override checked, then
    /// put in force under the lock.
    pub(super) fn set_override(
        &self,
        overriding: Override,
        lasting: Duration,
    ) -> Result<(), ConfigError> {
        if lasting.is_zero() || lasting > MAX_OVERRIDE {
            return Err(ConfigError::new(
                "override.lasting",
                format_args!("{lasting:?}"),
                "a duration above 0 and at most 7 days",
            ));
        }
        if let Override::Cap(limit) = overriding {
            if limit == 0 || limit > MAX_LIMIT {
                return Err(ConfigError::new(
                    "override.cap",
                    limit,
                    format!(
                        "a whole number in [1, {MAX_LIMIT}] (refusing every call is `force_open`)"
                    ),
                ));
            }
        }
        let now = self.clock.now();
        let until = now.checked_add(lasting).unwrap_or(now);
        self.with_held(now, |held| {
            self.start_override(held, now, overriding, until, lasting)
        })
    }

    fn start_override(
        &self,
        held: &mut Held<A>,
        now: Instant,
        overriding: Override,
        until: Instant,
        lasting: Duration,
    ) -> Result<(), ConfigError> {
        let was_held = matches!(held.overriding, Some((Override::ForceClosed, _)));
        if overriding == Override::ForceClosed && !was_held && !held.policy.hold_closed(now, true) {
            return Err(ConfigError::new(
                "override.kind",
                "force_closed",
                format!(
                    "an override a policy without a breaker can take (this one's is `{}`): \
                     force_open, cap or metrics_only",
                    held.policy.name()
                ),
            ));
        }
        if let Some((previous, _)) = held.overriding {
            if previous == Override::ForceClosed && overriding != Override::ForceClosed {
                held.policy.hold_closed(now, false);
            }
            if let Some(observer) = &self.observer {
                observer.override_ended(previous, false);
            }
        }
        held.overriding = Some((overriding, until));
        if let Some(observer) = &self.observer {
            observer.override_applied(overriding, lasting);
        }
        Ok(())
    }

    /// End the override in force (`expired`: its time ran out), letting go
    /// of a breaker it held closed.
    pub(super) fn end_override(&self, held: &mut Held<A>, now: Instant, expired: bool) {
        if let Some((overriding, _)) = held.overriding.take() {
            if overriding == Override::ForceClosed {
                held.policy.hold_closed(now, false);
            }
            if let Some(observer) = &self.observer {
                observer.override_ended(overriding, expired);
            }
        }
    }

    /// Run `f` on the policy and what is kept beside it (an override, probe
    /// tokens) under the lock at `now`, after catching the policy up; then
    /// publish, report its transitions and wake any waiter it lets through.
    /// Every change made from outside goes through here.
    pub(super) fn with_held<R>(&self, now: Instant, f: impl FnOnce(&mut Held<A>) -> R) -> R {
        let (result, transitions) = {
            let mut held = self.lock();
            self.catch_up(&mut held, now);
            let result = f(&mut held);
            let transitions = self.drain(&mut held);
            self.publish(&mut held);
            (result, transitions)
        };
        self.report(transitions);
        self.wake_waiters();
        result
    }

    /// Lock the policy to tell it of a finished call; if another thread
    /// holds the lock, set up the buffers that hold successes for it from
    /// now on (see `deferred.rs`).
    #[inline]
    pub(super) fn lock_or_defer(&self) -> MutexGuard<'_, Held<A>> {
        match self.policy.try_lock() {
            Ok(held) => held,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                self.deferred.set_up();
                self.lock()
            }
        }
    }

    #[inline]
    pub(super) fn lock(&self) -> MutexGuard<'_, Held<A>> {
        // A policy that panicked mid-update is still the best information we
        // have; a poisoned lock must not take the caller down with it.
        self.policy.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// [`Ready::now`](super::Ready::now).
    pub(super) fn readiness(&self) -> Readiness {
        let now = self.clock().now();
        self.refresh_if_due(now);
        let gate = self.gate();
        if gate.is_shut() {
            Readiness::Shut {
                retry_after: gate.until.map(|u| u.saturating_duration_since(now)),
            }
        } else if gate.probe {
            Readiness::Probing
        } else {
            Readiness::Ready
        }
    }

    /// [`Ready::wait`](super::Ready::wait).
    pub(super) async fn wait_ready(&self) {
        self.ready_waiters.fetch_add(1, Ordering::SeqCst);
        let _leave = ReadyWaiter(self);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.readiness() {
                Readiness::Ready => return,
                Readiness::Probing => {
                    let Some(probe) = self.active_probe() else {
                        return;
                    };
                    if !self.probing.swap(true, Ordering::SeqCst) {
                        let _running = Probing(&self.probing);
                        self.run_active_probe(probe).await;
                        continue;
                    }
                    changed.await;
                }
                Readiness::Shut { retry_after } => match retry_after {
                    Some(after) => {
                        // Wake a hair after the deadline so it has passed
                        // by the clock's reckoning too.
                        let nap = after.saturating_add(Duration::from_millis(1));
                        let nap = nap.min(Duration::from_secs(86_400));
                        tokio::select! {
                            () = tokio::time::sleep(nap) => {}
                            () = &mut changed => {}
                        }
                    }
                    None => changed.await,
                },
            }
        }
    }

    /// [`Ready::drive`](super::Ready::drive).
    pub(super) async fn drive(&self) {
        loop {
            self.wait_ready().await;
            // Ready (or probing with no active probe): wait for the gate to
            // change before looking again.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.readiness() == Readiness::Ready {
                changed.await;
            } else if self.active_probe().is_none() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    async fn run_active_probe(&self, probe: ActiveProbe) {
        let Ok(permit) = self.try_acquire_probe() else {
            return;
        };
        let outcome = match tokio::time::timeout(probe.timeout, (probe.check)()).await {
            Ok(outcome) => outcome,
            Err(_elapsed) => Outcome::Overload,
        };
        permit.record(outcome);
    }
}
