//! The policy behind its lock, and what is done under it: the successes
//! held and the rejections counted handed over first, the answer stored on
//! the board (`board.rs`) after, the transitions counted and reported; and
//! the re-evaluation of a gate whose time has come.
use std::time::Instant;

use super::board::Last;
use super::Limiter;
use crate::algorithms::{Algorithm, Published, Sample, Snapshot, Transition};
use crate::clock::Clock;
use crate::overrides::Override;
use crate::sync::Ordering;
use crate::timeout::Given;
use crate::timeout::Learner;

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
        self.policy
            .snapshot()
            .with_override(self.overriding)
            .with_ceiling_cutting_since(self.ceiling_cutting_since())
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
            self.board.set_learned(learner.value());
            if let (Some(observer), Some(in_force), true) =
                (&self.observer, self.timeout_in_force(), self.cuts_early())
            {
                observer.timeout_changed(in_force);
            }
        }
        if let Some(cutting) = learner.watch(at, sample.outcome, sample.latency) {
            if let Some(observer) = &self.observer {
                observer.ceiling_cutting(learner.ceiling(), cutting);
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
}
