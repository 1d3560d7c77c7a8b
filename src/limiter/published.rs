//! What the policy published, copied into atomics the hot path reads
//! without a lock: the gate, when to re-evaluate it, how calls are to be
//! reported; and the re-evaluation, the transitions and their report.
use std::time::Instant;

use super::*;

/// The policy, behind the limiter's lock, with the instants it last
/// published, so that an answer that has not moved is not converted again.
pub(super) struct Held<A> {
    pub(super) policy: A,
    pub(super) last: Last,
    /// The held successes being handed over (kept for its allocation).
    scratch: Vec<(Instant, Sample)>,
}

/// The instants of the answer last stored (as `u64::MAX` in the atomics
/// while `None`).
#[derive(Default)]
pub(super) struct Last {
    wake_at: Option<Instant>,
    expires: Option<Instant>,
    deferral: Option<Deferral>,
}

impl<A> Held<A> {
    pub(super) fn new(policy: A) -> Self {
        Held {
            policy,
            last: Last::default(),
            scratch: Vec::new(),
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
    pub(super) fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1)
    }

    /// How many times the policy has reported transitions, modulo 2^23 (as
    /// a ticket keeps it).
    #[inline]
    pub(super) fn generation(&self) -> u32 {
        self.generation.load(Ordering::SeqCst) & permit::GENERATION
    }

    #[inline]
    pub(super) fn feedback(&self) -> Feedback {
        match self.feedback.load(Ordering::Relaxed) {
            0 => Feedback::Nothing,
            1 => Feedback::Outcomes,
            _ => Feedback::Timed,
        }
    }

    #[inline]
    pub(crate) fn refresh_if_due(&self, now: Instant) {
        let until = self.until.load(Ordering::SeqCst);
        // Most gates never expire: skip the clock arithmetic for them.
        if until != u64::MAX && self.nanos(now) >= until {
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
        if !self.deferred.is_empty() {
            self.hand_over(held);
        }
        let policy = &mut held.policy;
        let mut batched = 0;
        if self.slots.load(Ordering::SeqCst) >> 32 != 0 {
            batched = self.slots.fetch_and(SLOTS, Ordering::SeqCst) >> 32;
        }
        if let Some(shards) = self.slots.shards.get() {
            batched += shards.take_batched();
        }
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
        let Held {
            policy, scratch, ..
        } = held;
        self.deferred.take(scratch);
        for (at, sample) in scratch.drain(..) {
            policy.on_sample(at, &sample);
        }
    }

    /// Ask the policy for its answer and copy it where the hot path reads it.
    #[inline]
    pub(super) fn publish(&self, held: &mut Held<A>) {
        let published = held.policy.publish();
        self.store(&published, &mut held.last);
    }

    /// Copy the policy's answer where the hot path reads it.
    #[inline(always)]
    pub(super) fn store(&self, published: &Published, last: &mut Last) {
        let Hints {
            feedback, deferral, ..
        } = published.hints;
        let feedback = if self.observer.is_some() {
            Feedback::Timed
        } else {
            feedback
        } as u8;
        if self.feedback.load(Ordering::Relaxed) != feedback {
            self.feedback.store(feedback, Ordering::Relaxed);
        }
        if last.deferral != deferral {
            last.deferral = deferral;
            let (until, latency, in_flight) = match deferral {
                None => (0, 0, 0),
                Some(Deferral {
                    until,
                    max_latency,
                    max_in_flight,
                }) => (
                    until.map_or(u64::MAX, |t| self.nanos(t)),
                    u64::try_from(max_latency.as_nanos()).unwrap_or(u64::MAX),
                    max_in_flight,
                ),
            };
            self.defer_latency.store(latency, Ordering::SeqCst);
            self.defer_in_flight.store(in_flight, Ordering::SeqCst);
            self.defer_until.store(until, Ordering::SeqCst);
        }
        let gate = published.gate;
        if self.gate.store(Packed::new(&gate)) {
            if self.ready_waiters.load(Ordering::SeqCst) > 0 {
                self.changed.notify_waiters();
            }
            if let Some(observer) = &self.observer {
                observer.gate_changed(&gate.sanitized());
            }
        }
        if last.expires != gate.until {
            last.expires = gate.until;
            let expires = gate.until.map_or(u64::MAX, |t| self.nanos(t));
            self.expires.store(expires, Ordering::SeqCst);
        }
        if last.wake_at != published.wake_at {
            last.wake_at = published.wake_at;
            let until = published.wake_at.map_or(u64::MAX, |t| self.nanos(t));
            self.until.store(until, Ordering::SeqCst);
        }
        if self.members.len() > 1 {
            let index = |r| published.refusers.get(r).min(0xFFFF) as u64;
            let packed = index(Refusal::Shut)
                | (index(Refusal::Limit) << 16)
                | (index(Refusal::Throttle) << 32)
                | (index(Refusal::Probe) << 48);
            if self.culprits.load(Ordering::Relaxed) != packed {
                self.culprits.store(packed, Ordering::Relaxed);
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
            self.generation.fetch_add(1, Ordering::SeqCst);
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
