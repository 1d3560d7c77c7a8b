//! Admission: the gate's limit, its admit probability, probes, and the
//! rejection that says why not.
use std::time::Instant;

use super::gate::ALWAYS;
use super::permit::{Permit, Ticket};
use super::ready::ActiveProbe;
use super::Limiter;
use crate::algorithms::{Algorithm, Refusal};
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::sync::Ordering;

impl<A: Algorithm, C: Clock> Limiter<A, C> {
    #[inline]
    pub(super) fn draw(&self) -> u32 {
        let z = crate::sync::splitmix(&self.rng);
        #[allow(clippy::cast_possible_truncation, reason = "take the high half")]
        let high = (z >> 32) as u32;
        high
    }

    /// Admit one call at `now` or say why not. `draw` is false for a waiter
    /// being handed a slot: it was already drawn for when it arrived.
    /// `prober` is true only for the limiter's own active probe.
    #[inline]
    pub(crate) fn admit(
        &self,
        now: Instant,
        draw: bool,
        prober: bool,
    ) -> Result<Ticket, Rejection> {
        self.refresh_if_due(now);
        let gate = self.board.gate();
        if gate.limit() == 0 {
            return Err(self.reject(RejectReason::Open, Refusal::Shut, now));
        }
        if gate.probe() {
            return self.admit_probe(now, draw, prober);
        }
        if draw && gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            return Err(self.reject(RejectReason::Throttled, Refusal::Throttle, now));
        }
        match self.slots.take(gate.limit()) {
            Some(in_flight) => Ok(Ticket::new(
                Some(now),
                in_flight,
                false,
                self.board.generation(),
            )),
            None => Err(self.reject(RejectReason::LimitReached, Refusal::Limit, now)),
        }
    }

    /// [`Limiter::admit`] reading the clock only for a call it admits, and
    /// only if `timed`: a refusal under a gate that does not expire by
    /// itself reads no clock (nothing but a finishing call or an event told
    /// to the policy can loosen such a gate, and each of those reads the
    /// time and applies what is due). Falls back to [`Limiter::admit`] for
    /// anything that needs the time first: a gate that expires, a shut gate
    /// (its retry-after), a probe. A wake-up the policy asked for that has
    /// come due is applied right after the admission, as if the call had
    /// arrived just before it.
    ///
    /// Always inlined, so that the ticket of an admitted call stays in
    /// registers (see [`Limiter::admit_as`]).
    #[inline(always)]
    pub(super) fn admit_fast(&self, timed: bool) -> Result<Ticket, Rejection> {
        let gate = self.board.gate();
        if gate.limit() == 0 || gate.probe() || self.board.expires() {
            return self.admit(self.clock.now(), true, false);
        }
        if gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            return Err(self.rejection(RejectReason::Throttled));
        }
        let Some(in_flight) = self.slots.take(gate.limit()) else {
            return Err(self.rejection(RejectReason::LimitReached));
        };
        let start = if timed {
            let now = self.clock.now();
            self.refresh_if_due(now);
            Some(now)
        } else {
            None
        };
        Ok(Ticket::new(
            start,
            in_flight,
            false,
            self.board.generation(),
        ))
    }

    /// `ticket`, keeping its caller's own timeout unless it may be
    /// `cut_early` (nor is any call of a limiter whose learned timeout says
    /// `cut_early = false`, which needs no share: it censors nothing);
    /// else drawn into the share of calls given the ceiling if the timeout
    /// is learned ([`crate::timeout`]): a `share` of calls, with at most
    /// `share` of the limit's slots (at least one) held by such calls at
    /// once.
    #[inline]
    pub(super) fn given_timeout(&self, ticket: Ticket, cut_early: bool) -> Ticket {
        if !cut_early {
            return ticket.kept();
        }
        match self.options.learned() {
            Some(learned)
                if learned.cut_early
                    && self.draw() < learned.share_threshold()
                    && self
                        .board
                        .start_uncut(learned.uncut_slots(self.board.gate().limit())) =>
            {
                ticket.uncut()
            }
            _ => ticket,
        }
    }

    /// A probe gate: every admission is counted by the policy under its lock.
    #[cold]
    pub(super) fn admit_probe(
        &self,
        now: Instant,
        draw: bool,
        prober: bool,
    ) -> Result<Ticket, Rejection> {
        if self.options.active_probe().is_some() && !prober {
            // The health check probes; user calls are not gambled.
            return Err(self.reject(RejectReason::Open, Refusal::Probe, now));
        }
        let mut policy = self.lock();
        let gate = self.board.gate();
        if gate.limit() == 0 {
            drop(policy);
            return Err(self.reject(RejectReason::Open, Refusal::Shut, now));
        }
        if draw && gate.admit() != ALWAYS && self.draw() >= gate.admit() {
            drop(policy);
            return Err(self.reject(RejectReason::Throttled, Refusal::Throttle, now));
        }
        let Some(in_flight) = self.slots.take(gate.limit()) else {
            drop(policy);
            return Err(self.reject(RejectReason::LimitReached, Refusal::Limit, now));
        };
        let probe = gate.probe();
        self.catch_up(&mut policy, now);
        let shared = self.options.shared_probes();
        if shared && !policy.take_probe_token(now) {
            self.slots.give_back();
            drop(policy);
            return Err(self.reject(RejectReason::Open, Refusal::Probe, now));
        }
        if !policy.on_admit(now) {
            if shared {
                policy.probe_tokens.0 += 1;
            }
            self.slots.give_back();
            let transitions = self.drain(&mut policy);
            self.publish(&mut policy);
            drop(policy);
            self.report(transitions);
            return Err(self.reject(RejectReason::Open, Refusal::Probe, now));
        }
        let transitions = self.drain(&mut policy);
        self.publish(&mut policy);
        drop(policy);
        self.report(transitions);
        Ok(Ticket::new(
            Some(now),
            in_flight,
            probe,
            self.board.generation(),
        ))
    }

    #[inline]
    pub(super) fn reject(&self, reason: RejectReason, refusal: Refusal, now: Instant) -> Rejection {
        let retry_after = if reason == RejectReason::Open {
            self.board.retry_after(now)
        } else {
            None
        };
        let policy = self.board.culprit(refusal);
        Rejection::new(ramping(reason, policy), policy, retry_after)
    }

    #[inline]
    pub(crate) fn count_rejection(&self, rejection: &Rejection) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        if let Some(observer) = &self.observer {
            observer.rejected(rejection);
        }
    }

    #[inline]
    pub(crate) fn observe_admit(&self, ticket: &Ticket) {
        if let Some(observer) = &self.observer {
            match ticket.class() {
                None => observer.admitted(ticket.in_flight(), ticket.probe()),
                Some(class) => observer.admitted_as(class, ticket.in_flight(), ticket.probe()),
            }
        }
    }

    #[inline]
    pub(crate) fn rejection(&self, reason: RejectReason) -> Rejection {
        let refusal = match reason {
            RejectReason::Open => Refusal::Shut,
            RejectReason::Throttled => Refusal::Throttle,
            _ => Refusal::Limit,
        };
        let policy = self.board.culprit(refusal);
        Rejection::new(ramping(reason, policy), policy, None)
    }

    pub(crate) fn active_probe(&self) -> Option<ActiveProbe> {
        self.options.active_probe().cloned()
    }

    /// Take a probe slot for the limiter's own active probe.
    pub(crate) fn try_acquire_probe(&self) -> Result<Permit<&Self>, Rejection> {
        let now = self.clock.now();
        match self.admit(now, false, true) {
            Ok(ticket) if ticket.probe() => Ok(Permit::new(self, ticket, true)),
            Ok(ticket) => {
                // The gate stopped probing in the meantime: not a probe.
                Permit::new(self, ticket, true).ignore();
                Err(self.rejection(RejectReason::Open))
            }
            Err(rejection) => Err(rejection),
        }
    }
}

/// A fraction refused by a breaker is its ramp after closing, not
/// throttling: the reason says so.
#[inline]
pub(super) fn ramping(reason: RejectReason, policy: &str) -> RejectReason {
    if reason == RejectReason::Throttled && policy == "breaker" {
        RejectReason::Ramping
    } else {
        reason
    }
}
