//! A call's end: its slot given back, and what the policy learns from it
//! (nothing, a batched success, a quiet success, or a sample under its
//! lock).
use std::time::{Duration, Instant};

use super::*;

/// Batched successes at which the finishing call hands them over itself.
pub(super) const BATCH_FLUSH: u64 = 1 << 31;

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    /// Record the end of an admitted call and release its slot. What needs
    /// no clock is done here, inline; the rest in
    /// [`Limiter::finish_timed`].
    #[inline(always)]
    pub(crate) fn finish(&self, ticket: &Ticket, outcome: Outcome) {
        self.release_class(ticket);
        let feedback = self.feedback();
        if feedback == Feedback::Nothing && self.until.load(Ordering::SeqCst) == u64::MAX {
            // The policy learns nothing from it, and no observer is set (an
            // observer raises the feedback to `Timed`).
            self.release_slot();
            return;
        }
        let batchable = outcome == Outcome::Success
            && ticket.start.is_none()
            && !ticket.probe()
            && ticket.generation() == self.generation();
        let batch_until = if batchable {
            self.batch_until.load(Ordering::SeqCst)
        } else {
            0
        };
        if batch_until == u64::MAX {
            // Batched whenever it finishes: no need to know when.
            self.finish_batched();
            return;
        }
        self.finish_timed(ticket, outcome, feedback, batch_until);
    }

    /// [`Limiter::finish`] for a call the policy may learn from: read the
    /// clock, then batch it, let it pass as quiet, or hand it over.
    #[inline(never)]
    pub(super) fn finish_timed(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        feedback: Feedback,
        batch_until: u64,
    ) {
        let now = self.clock.now();
        if batch_until != 0 && self.nanos(now) < batch_until {
            self.finish_batched();
            return;
        }
        let latency = ticket
            .start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start));
        let quiet = self.quiet.load(Ordering::SeqCst);
        if outcome == Outcome::Success
            && !ticket.probe()
            && u64::from(ticket.in_flight()) <= quiet >> 32
        {
            // Rounded up, against a bound rounded down: never quiet by
            // rounding.
            let micros = latency
                .as_secs()
                .saturating_mul(1_000_000)
                .saturating_add(u64::from(latency.subsec_nanos().div_ceil(1_000)));
            if micros <= quiet & 0xFFFF_FFFF {
                // It would change nothing: the policy is not told.
                self.release_observed(outcome, latency);
                return;
            }
        }
        if outcome == Outcome::Success
            && self.defer_until.load(Ordering::SeqCst) != 0
            && ticket.start.is_some()
            && !ticket.probe()
            && ticket.generation() == self.generation()
        {
            let at = self.nanos(now);
            if self.deferral_covers(at, latency) {
                if self.deferred.is_set_up() {
                    self.finish_deferred(ticket, latency, now);
                } else {
                    self.finish_covered(ticket, latency, now, at);
                }
                return;
            }
        }
        self.finish_locked(ticket, outcome, latency, feedback, now);
    }

    /// Whether the policy's deferral, as last published, covers a success
    /// that took `latency` and finished `at` nanoseconds after the epoch.
    #[inline]
    fn deferral_covers(&self, at: u64, latency: Duration) -> bool {
        let until = self.defer_until.load(Ordering::SeqCst);
        until != 0
            && (until == u64::MAX || at < until)
            && u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX)
                <= self.defer_latency.load(Ordering::SeqCst)
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
        let transitions = self.learn_sample(sample, now, Some((latency, at)));
        self.release_observed(Outcome::Success, latency);
        self.report(transitions);
    }

    /// Whether, under the policy's lock, something must reach the policy
    /// before the next call, or the policy is due to be woken `at`
    /// nanoseconds after the epoch.
    #[inline]
    fn pending(&self, at: u64) -> bool {
        self.rejected.load(Ordering::Relaxed) != 0
            || self.slots.load(Ordering::SeqCst) >> 32 != 0
            || self.slots.shards.get().is_some()
            || !self.deferred.is_empty()
            || at >= self.until.load(Ordering::SeqCst)
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
        self.learn_sample(self.sample(ticket, outcome, latency), now, None)
    }

    /// Tell the policy of `sample`, under its lock, and publish what it
    /// makes of it — unless it is a success, of the `covered` latency and
    /// finish (in nanoseconds after the epoch), that the policy's deferral
    /// covers as the lock finds it, with nothing else pending: then nothing
    /// the policy publishes moves (the deferral's promise), and it is asked
    /// nothing.
    #[inline]
    fn learn_sample(
        &self,
        sample: Sample,
        now: Instant,
        covered: Option<(Duration, u64)>,
    ) -> Vec<Transition> {
        let mut policy = self.lock_or_defer();
        if covered
            .is_some_and(|(latency, at)| self.deferral_covers(at, latency) && !self.pending(at))
        {
            policy.on_sample(now, &sample);
            return Vec::new();
        }
        self.catch_up(&mut policy, now);
        policy.on_sample(now, &sample);
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
            .with_in_flight_at_finish(slots_of(self.slots.load(Ordering::Relaxed)))
            .with_probe(ticket.probe())
            .with_stale(ticket.generation() != self.generation())
    }

    /// Give back the slot of a success the policy lets us count for it
    /// without its lock.
    #[inline]
    pub(super) fn finish_batched(&self) {
        // Only an untimed call is batched, and no call is untimed while an
        // observer is set: there is no one to tell.
        let batched = if let Some(parked) = self.park(1) {
            self.after_parking(&parked);
            parked.batched
        } else {
            let before = self.slots.fetch_add(ONE_BATCHED - 1, Ordering::SeqCst);
            self.wake_waiters();
            before >> 32
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
        self.slots.fetch_sub(1, Ordering::SeqCst);
        self.wake_waiters();
    }

    pub(super) fn after_parking(&self, parked: &Parked<'_>) {
        if !self.waiters.is_empty() {
            // A waiter may have looked for parked slots before this one was
            // parked: it goes back to the shared count, for the waiters to
            // be served from.
            let slots = parked.unpark_all();
            if slots != 0 {
                self.slots.fetch_sub(u64::from(slots), Ordering::SeqCst);
            }
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
        self.waiters.serve(|class| {
            if class == classes::NO_CLASS {
                self.admit(now, false, false)
            } else {
                self.admit_as(class, false, Some(now))
            }
        });
    }

    pub(crate) fn on_drop_outcome(&self) -> Outcome {
        self.options.on_drop
    }

    pub(crate) fn max_waiters(&self) -> usize {
        self.options.max_waiters
    }
}
