//! Giving a slot back: a call's end, its slot released (to a waiter first,
//! through `queue.rs`) and what the policy learns from it (nothing, a
//! success held for it, or a sample under its lock); an attempt's end, for
//! a call that keeps its slot across retries (`Permit::record_attempt`); and
//! a slot handed to a waiter that had gone, or held by a class.
//!
//! This file owns every way out of a slot. Each takes a [`Ticket`] that
//! `admit.rs` returned, and a permit calls one of them exactly once
//! (`permit.rs`), so no slot is given back twice or never.

use std::time::{Duration, Instant};

use super::permit::Ticket;
use super::shards::Parked;
use super::Limiter;
use crate::algorithms::{Algorithm, Feedback, Outcome, Sample, Transition};
use crate::clock::Clock;
use crate::sync::Ordering;
use crate::timeout::Given;

/// Successes held as a count at which the finishing call hands them over
/// itself.
pub(super) const BATCH_FLUSH: u64 = 1 << 31;

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Record the end of an admitted call and release its slot. What needs
    /// no clock is done here, inline; the rest in
    /// [`Limiter::finish_timed`].
    #[inline(always)]
    pub(crate) fn finish(&self, ticket: &Ticket, outcome: Outcome) {
        self.release_class(ticket);
        if ticket.is_uncut() {
            self.board.end_uncut();
        }
        let feedback = self.board.feedback();
        if feedback == Feedback::Nothing && !self.board.wakes() {
            // The policy learns nothing from it, no observer is set and the
            // timeout is not learned (either raises the feedback to `Timed`).
            self.release_slot();
            return;
        }
        let held_until = self.held_until(ticket, outcome, feedback);
        if held_until == u64::MAX && ticket.start.is_none() {
            // Held whenever it finishes, and untimed: only counted, with no
            // need to know when.
            self.finish_batched();
            return;
        }
        self.finish_timed(ticket, outcome, feedback, held_until);
    }

    /// Until when (in nanoseconds after the epoch) the policy's deferral,
    /// as last published, lets this call be held: 0 if it cannot be (not a
    /// success, a probe, a call that kept its caller's own timeout or was
    /// given a learned timeout's ceiling, which the timeout's learner must
    /// know of, stale, admitted with more calls in flight than the deferral
    /// allows, or untimed while the policy needs latencies),
    /// `u64::MAX` whenever it finishes.
    #[inline(always)]
    fn held_until(&self, ticket: &Ticket, outcome: Outcome, feedback: Feedback) -> u64 {
        if outcome == Outcome::Success
            && !ticket.probe()
            && !ticket.is_kept()
            && !ticket.is_uncut()
            && (ticket.start.is_some() || feedback != Feedback::Timed)
        {
            self.board
                .may_hold_until(ticket.generation(), ticket.in_flight())
        } else {
            0
        }
    }

    /// [`Limiter::finish`] for a call the policy may learn from: read the
    /// clock, then hold it for the policy or hand it over. A success held
    /// that was not timed is only counted: all the policy would learn from
    /// it is one more success.
    #[inline(never)]
    pub(super) fn finish_timed(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        feedback: Feedback,
        held_until: u64,
    ) {
        let now = self.clock.now();
        if held_until != 0 && ticket.start.is_none() && self.board.nanos(now) < held_until {
            self.finish_batched();
            return;
        }
        let latency = ticket
            .start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        if held_until != 0 && ticket.start.is_some() {
            // A success (held only if one), its instant read once for both.
            let at = self.board.nanos(now);
            self.board.succeeded_at(at, latency);
            if self.board.covers(at, latency, ticket.in_flight()) {
                if self.deferred.is_set_up() {
                    self.finish_deferred(ticket, latency, now);
                } else {
                    self.finish_covered(ticket, latency, now, at);
                }
                return;
            }
        }
        if held_until == 0 {
            self.note_success(ticket, outcome);
        }
        self.finish_locked(ticket, outcome, latency, feedback, now);
    }

    /// Tell the policy of a success its deferral covers, under its lock,
    /// and ask it nothing: by the deferral's promise, nothing it publishes
    /// moves. If another thread holds the lock, set up the buffers that
    /// hold such successes from now on. If anything else is waiting to be
    /// handed over first, or the policy is due to be woken, it goes the
    /// whole way.
    #[inline]
    fn finish_covered(&self, ticket: &Ticket, latency: Duration, now: Instant, at: u64) {
        let sample = self.sample(ticket, Outcome::Success, latency);
        let transitions = self.learn_sample(sample, now, Some(at), ticket.given());
        self.release_observed(Outcome::Success, latency);
        self.report(transitions);
    }

    /// Whether, under the policy's lock, something must reach the policy
    /// before the next call, or the policy is due to be woken `at`
    /// nanoseconds after the epoch.
    #[inline]
    fn pending(&self, at: u64) -> bool {
        self.rejected.load(Ordering::Relaxed) != 0
            || self.slots.may_hold_batched()
            || !self.deferred.is_empty()
            || self.board.wake_due_at(at)
    }

    /// Hold a success for the policy, without its lock; hand the held ones
    /// over if this thread's buffer is full.
    #[inline]
    fn finish_deferred(&self, ticket: &Ticket, latency: Duration, now: Instant) {
        let full = self
            .deferred
            .push(now, self.sample(ticket, Outcome::Success, latency));
        self.release_observed(Outcome::Success, latency);
        if full {
            self.refresh(now);
        }
    }

    /// Hand a finished call to the policy, under its lock.
    #[inline(never)]
    pub(super) fn finish_locked(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        latency: Duration,
        feedback: Feedback,
        now: Instant,
    ) {
        // Admitted untimed, and the policy has come to need latency since (a
        // policy swapped by `update`): not evidence.
        let outcome = if ticket.start.is_none() && feedback == Feedback::Timed {
            Outcome::Ignore
        } else {
            outcome
        };
        let transitions = self.learn(ticket, outcome, latency, now);
        self.release_observed(outcome, latency);
        self.report(transitions);
    }

    /// Give back a finished call's slot, then tell the observer, if any, how
    /// it ended.
    #[inline]
    fn release_observed(&self, outcome: Outcome, latency: Duration) {
        self.release_slot();
        if let Some(observer) = &self.observer {
            observer.finished(outcome, latency, self.in_flight());
        }
    }

    /// Tell the policy how one call (or one attempt of it) went, under its
    /// lock, and publish what it makes of it.
    #[inline]
    pub(super) fn learn(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        latency: Duration,
        now: Instant,
    ) -> Vec<Transition> {
        self.learn_sample(
            self.sample(ticket, outcome, latency),
            now,
            None,
            ticket.given(),
        )
    }

    /// Tell the policy of `sample`, under its lock, and publish what it
    /// makes of it — unless it is a success, finished `covered` (in
    /// nanoseconds after the epoch), that the policy's deferral covers as
    /// the lock finds it, with nothing else pending: then nothing the
    /// policy publishes moves (the deferral's promise), and it is asked
    /// nothing.
    #[inline]
    fn learn_sample(
        &self,
        sample: Sample,
        now: Instant,
        covered: Option<u64>,
        given: Given,
    ) -> Vec<Transition> {
        let mut policy = self.lock_or_defer();
        if covered.is_some_and(|at| {
            self.board.covers(at, sample.latency, sample.in_flight) && !self.pending(at)
        }) {
            self.tell(&mut policy, now, &sample, given);
            return Vec::new();
        }
        self.catch_up(&mut policy, now);
        self.tell(&mut policy, now, &sample, given);
        let mut published = policy.publish();
        if published.wake_at.is_some_and(|t| t <= now) {
            policy.handle_timeout(now);
            published = policy.publish();
        }
        let transitions = self.drain(&mut policy);
        self.store(&published, &mut policy.last);
        transitions
    }

    /// What the policy is told of a call that ends now.
    #[inline]
    fn sample(&self, ticket: &Ticket, outcome: Outcome, latency: Duration) -> Sample {
        Sample::new(outcome, latency, ticket.in_flight())
            // Counted as at admission (slots parked on other cores
            // included): one load, not a walk over the shards.
            .with_in_flight_at_finish(self.slots.taken_relaxed())
            .with_probe(ticket.probe())
            .with_stale(ticket.generation() != self.board.generation())
    }

    /// Give back the slot of a success held for the policy as a count,
    /// without its lock.
    #[inline]
    pub(super) fn finish_batched(&self) {
        // Only an untimed call is counted, and no call is untimed while an
        // observer is set: there is no one to tell.
        let batched = if let Some(parked) = self.park(1) {
            self.after_parking(&parked);
            parked.batched
        } else {
            let before = self.slots.give_back_batching();
            self.wake_waiters();
            before
        };
        if batched >= BATCH_FLUSH {
            // Hand the batch over long before the count could overflow.
            self.update(|_| ());
        }
    }

    /// Give back a slot without a sample (a waiter that was handed a slot and
    /// then cancelled, or a probe the policy refused).
    #[inline]
    pub(crate) fn release_slot(&self) {
        if let Some(parked) = self.park(0) {
            self.after_parking(&parked);
            return;
        }
        self.slots.give_back();
        self.wake_waiters();
    }

    /// Park a released slot, with `successes` batched beside it, on this
    /// thread's shard, if the slots are sharded and the gate's limit leaves
    /// room (see `shards.rs`).
    #[inline]
    fn park(&self, successes: u64) -> Option<Parked<'_>> {
        self.slots.park(successes, || self.board.gate().limit())
    }

    fn after_parking(&self, parked: &Parked<'_>) {
        if !self.waiters.is_empty() {
            // A waiter may have looked for parked slots before this one was
            // parked: it goes back to the shared count, for the waiters to
            // be served from.
            self.slots.unpark_to_word(parked);
            self.wake_waiters();
        }
    }

    #[inline]
    pub(crate) fn wake_waiters(&self) {
        if self.waiters.is_empty() {
            return;
        }
        self.serve_waiters();
    }

    #[cold]
    pub(super) fn serve_waiters(&self) {
        let now = self.clock.now();
        self.waiters
            .serve(|class| self.admit_waiting(now, false, class));
    }

    /// Give back the slot of a permit dropped without a record, as the
    /// limiter's drop outcome ([`Builder::on_drop`]).
    pub(super) fn release_unrecorded(&self, ticket: &Ticket) {
        self.finish(ticket, self.on_drop_outcome());
    }

    pub(crate) fn on_drop_outcome(&self) -> Outcome {
        self.options.on_drop
    }

    pub(crate) fn max_waiters(&self) -> usize {
        self.options.max_waiters
    }

    /// One attempt of a call ended with `outcome` and the call keeps its
    /// slot for another: the policy learns from the attempt, timed from
    /// the ticket's start, and the ticket's next attempt is timed from now.
    /// A probe's first attempt answers for the probe; the attempts after it
    /// are ordinary calls.
    pub(crate) fn attempt_ended(&self, ticket: &mut Ticket, outcome: Outcome) {
        self.note_success(ticket, outcome);
        let timed = ticket.start.is_some();
        let feedback = self.board.feedback();
        if feedback == Feedback::Nothing || (feedback == Feedback::Timed && !timed) {
            // The policy learns nothing from it (or it was admitted untimed
            // and the policy has come to need latency since).
            return;
        }
        let now = self.clock.now();
        let latency = ticket
            .start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        let transitions = self.learn(ticket, outcome, latency, now);
        ticket.next_attempt(now);
        self.report(transitions);
    }

    /// Note a success for hedges: the calls sent before it have been
    /// overtaken ([`Limiter::late`]). (A success held for the policy is
    /// noted where its instant is read: [`Limiter::finish_timed`].)
    #[inline(always)]
    fn note_success(&self, ticket: &Ticket, outcome: Outcome) {
        if let (Outcome::Success, Some(start)) = (outcome, ticket.start) {
            self.board.succeeded(start);
        }
    }

    /// Time the ticket's next attempt from now (a retry starting after a
    /// backoff).
    pub(crate) fn restart(&self, ticket: &mut Ticket) {
        if ticket.start.is_some() {
            ticket.start = Some(self.clock.now());
        }
    }

    /// A slot handed to a waiter that left without it goes back.
    pub(crate) fn release_granted(&self, ticket: &Ticket) {
        self.release_class(ticket);
        self.release_slot();
    }

    /// A finished or abandoned call no longer holds a slot: its class's
    /// count, if its class counted it, goes back.
    #[inline]
    pub(crate) fn release_class(&self, ticket: &Ticket) {
        if let (Some(class), Some(classes)) = (ticket.counted_class(), &self.classes) {
            classes.released(class.0);
        }
    }
}
