//! Taking a slot: the gate's limit and admit probability, a class's share
//! and reserve ([`crate::priority`]), a probe while the breaker allows one,
//! the queue for a caller that waits, and the rejection that says why not.
//!
//! This file owns every way into a slot. Each path that admits takes its
//! slot through `slots.rs` (at the limit the count does not move) or is
//! handed one by a releaser through `queue.rs`, and returns the [`Ticket`]
//! that `finish.rs` gives back; each path that refuses took nothing, or
//! gave back what it took before returning its rejection.

use std::ops::Deref;
use std::time::{Duration, Instant};

use super::classes::Classes;
use super::gate::ALWAYS;
use super::permit::{Permit, Ticket};
use super::queue::{Joined, Place};
use super::ready::ActiveProbe;
use super::Limiter;
use crate::algorithms::{Algorithm, Feedback, Refusal};
use crate::clock::Clock;
use crate::error::{RejectReason, Rejection};
use crate::priority::Class;
use crate::sync::Ordering;

/// Leaves the queue when the acquire future is dropped, and gives back a slot
/// handed over but never taken.
struct Leave<'a, A, C> {
    limiter: &'a Limiter<A, C>,
    place: &'a Place<'a>,
    armed: bool,
    /// Gives a slot back ([`Limiter::release_granted`]), chosen where the
    /// limiter's bounds hold.
    release: fn(&Limiter<A, C>, &Ticket),
}

impl<A, C> Drop for Leave<'_, A, C> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Some(Ok(ticket)) = self.place.leave() {
            (self.release)(self.limiter, &ticket);
        }
    }
}

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
            Some(in_flight) => Ok(self.ticket(Some(now), in_flight, false)),
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
        Ok(self.ticket(start, in_flight, false))
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
        if !policy.admit_probe(now, self.options.shared_probes()) {
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
        Ok(self.ticket(Some(now), in_flight, probe))
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
        self.refusals.fetch_add(1, Ordering::Relaxed);
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

    /// The class a call asking for `class` is admitted as: `class` (the
    /// last if past it), the default class if `None`; `None` for a limiter
    /// without classes.
    #[inline]
    pub(crate) fn class_of(&self, class: Option<Class>) -> Option<Class> {
        self.classes.as_ref().map(|classes| {
            Class(class.map_or(classes.default_class(), |class| classes.clamp(class)))
        })
    }

    /// Admit a call of `class` (as [`Limiter::class_of`] gives it) at `now`.
    pub(crate) fn admit_waiting(
        &self,
        now: Instant,
        draw: bool,
        class: Option<Class>,
    ) -> Result<Ticket, Rejection> {
        match class {
            Some(class) => self.admit_as(class.0, draw, Some(now)),
            None => self.admit(now, draw, false),
        }
    }

    /// `rejection`, of a call of `class` if it has one.
    fn classed(&self, rejection: Rejection, class: Option<Class>) -> Rejection {
        match class {
            Some(class) => rejection.with_class(class),
            None => rejection,
        }
    }

    /// Admit a call asking for `class`, waiting in the queue at most
    /// `max_wait` (`None`: no limit) if the limit is reached.
    pub(crate) async fn wait_for_slot(
        &self,
        max_wait: Option<Duration>,
        class: Option<Class>,
    ) -> Result<Ticket, Rejection> {
        let class = self.class_of(class);
        let now = self.clock().now();
        let first = self.admit_waiting(now, true, class);
        match first {
            Ok(ticket) => return Ok(ticket),
            Err(rejection) if rejection.reason() != RejectReason::LimitReached => {
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            Err(rejection) => {
                if max_wait.is_some_and(|d| d.is_zero()) {
                    self.count_rejection(&rejection);
                    return Err(rejection);
                }
            }
        }
        // A wait that ends past the clock's range has no end.
        let deadline = max_wait.and_then(|d| tokio::time::Instant::now().checked_add(d));

        let look_again = || self.admit_waiting(self.clock().now(), false, class);
        let place = match self.waiters.join(class, self.max_waiters(), look_again) {
            Joined::Queued(place) => place,
            Joined::Answered(Ok(ticket)) => return Ok(ticket),
            Joined::Answered(Err(rejection)) => {
                self.count_rejection(&rejection);
                return Err(rejection);
            }
            Joined::Full => {
                let rejection = self.classed(self.rejection(RejectReason::QueueFull), class);
                self.count_rejection(&rejection);
                return Err(rejection);
            }
        };

        let mut leave = Leave {
            limiter: self,
            place: &place,
            armed: true,
            release: Self::release_granted,
        };
        let wait = place.granted();
        let result = match deadline {
            None => wait.await,
            Some(deadline) => match tokio::time::timeout_at(deadline, wait).await {
                Ok(result) => result,
                Err(_elapsed) => match place.leave() {
                    // Handed a slot just as the deadline passed: use it.
                    Some(result) => result,
                    None => {
                        self.starved(class);
                        Err(self.classed(self.rejection(RejectReason::TimedOut), class))
                    }
                },
            },
        };
        leave.armed = false;
        drop(leave);
        if let Err(rejection) = &result {
            self.count_rejection(rejection);
        }
        result
    }

    /// Admit a call of class `c` (a limiter with classes), reading the
    /// clock at `now` if given. `draw`: whether it takes its chance against
    /// the admit probability (a waiter being handed a slot already did).
    ///
    /// Inlined, with every refusal and every gate but an open one out of
    /// line: the ticket of an admitted call then stays in registers, as
    /// [`Limiter::admit_fast`]'s does (out of line, moving the returned
    /// ticket through memory cost about 10 ns a call).
    #[inline(always)]
    pub(crate) fn admit_as(
        &self,
        c: u8,
        draw: bool,
        now: Option<Instant>,
    ) -> Result<Ticket, Rejection> {
        let Some(classes) = &self.classes else {
            return match now {
                Some(now) => self.admit(now, draw, false),
                None => self.admit_fast(self.board.feedback() == Feedback::Timed),
            };
        };
        let gate = self.board.gate();
        if gate.limit() == 0 || gate.probe() || self.board.expires() {
            return self.admit_as_timed(classes, c, draw, now);
        }
        if draw && gate.admit() != ALWAYS {
            self.throttle_as(classes, c, gate.admit())?;
        }
        let limit = gate.limit();
        let need = classes.need(c, limit);
        if need > 0 && self.slots.taken().saturating_add(need) >= limit {
            return Err(self.kept_for_others(classes, c));
        }
        let Some(in_flight) = self.slots.take(limit) else {
            return Err(self.full_as(classes, c, draw, limit));
        };
        let counted = classes.took(c);
        let start = match now {
            Some(now) => Some(now),
            None if self.board.feedback() == Feedback::Timed => {
                let now = self.clock.now();
                self.refresh_if_due(now);
                Some(now)
            }
            None => None,
        };
        // What the call tells the policy it met: the calls in flight and the
        // slots it had to leave free for the classes above it. A policy that
        // grows only when its limit is in use (AIMD) sees the limit as full
        // where a class was held back by the reserves; told the bare count,
        // it read the kept slots as a caller that needs no more, and held
        // its limit low (mixed-criticality: 0.80 of the bound, against 0.96).
        let met = in_flight.saturating_add(need).min(limit);
        Ok(self.ticket(start, met, false).with_class(Class(c), counted))
    }

    /// The ticket of a call admitted at `start` with `in_flight`.
    #[inline(always)]
    fn ticket(&self, start: Option<Instant>, in_flight: u32, probe: bool) -> Ticket {
        Ticket::new(start, in_flight, probe, self.board.generation())
    }

    /// [`Limiter::admit_as`] under a gate that needs the time first: a shut
    /// gate refuses every class; a probe goes to whoever comes; an expiring
    /// gate is brought up to date.
    #[cold]
    #[inline(never)]
    fn admit_as_timed(
        &self,
        classes: &Classes,
        c: u8,
        draw: bool,
        now: Option<Instant>,
    ) -> Result<Ticket, Rejection> {
        let now = now.unwrap_or_else(|| self.clock.now());
        let ticket = self
            .admit(now, draw, false)
            .map_err(|r| r.with_class(Class(c)))?;
        let counted = classes.took(c);
        Ok(ticket.with_class(Class(c), counted))
    }

    /// A call of class `c` takes its chance under a gate that admits
    /// `admit` in 2^32 of all calls.
    #[inline(never)]
    fn throttle_as(&self, classes: &Classes, c: u8, admit: u32) -> Result<(), Rejection> {
        // Arrivals are counted only while they are split: a gate that admits
        // every call needs no shares.
        classes.arrive(c);
        let p = f64::from(admit) / 4_294_967_296.0;
        let fraction = classes.fraction(c, p);
        if f64::from(self.draw()) >= fraction * 4_294_967_296.0 {
            return Err(self.rejection(RejectReason::Throttled).with_class(Class(c)));
        }
        Ok(())
    }

    /// A call of class `c` turned away to keep slots for the classes above.
    #[cold]
    #[inline(never)]
    fn kept_for_others(&self, classes: &Classes, c: u8) -> Rejection {
        classes.shrink_above(c);
        self.rejection(RejectReason::LimitReached)
            .with_class(Class(c))
    }

    /// A call of class `c` found the limit full. Its reserve grows once per
    /// call (`draw`): not again when it looks again on joining the queue,
    /// nor each time the queue is served.
    #[cold]
    #[inline(never)]
    fn full_as(&self, classes: &Classes, c: u8, draw: bool, limit: u32) -> Rejection {
        if draw {
            classes.grow(c, limit, self.in_flight());
        }
        self.rejection(RejectReason::LimitReached)
            .with_class(Class(c))
    }

    /// A waiter of class `class` timed out: if slots were free under the
    /// limit, the classes above kept them for nothing (see
    /// [`Classes::starved`]).
    pub(crate) fn starved(&self, class: Option<Class>) {
        if let (Some(classes), Some(class)) = (&self.classes, class) {
            if self.in_flight() < self.gate().limit {
                classes.starved(class.0);
            }
        }
    }

    /// Admit a call of `class` (the default class if `None`) now through
    /// `handle`, failing fast, reading the clock if the policy times calls
    /// or `timed`, keeping its caller's timeout unless it may be
    /// `cut_early`; a refusal is counted.
    ///
    /// Always inlined, as [`Limiter::admit_as`] is: out of line, its ticket
    /// is returned through memory; and the permit is made, or the refusal
    /// counted, in the one match on the admission.
    #[inline(always)]
    pub(crate) fn permit_now<L: Deref<Target = Self>>(
        handle: L,
        class: Option<Class>,
        timed: bool,
        cut_early: bool,
    ) -> Result<Permit<L>, Rejection> {
        let limiter: &Self = &handle;
        let admitted = match &limiter.classes {
            Some(classes) => {
                let c = class.map_or(classes.default_class(), |class| classes.clamp(class));
                limiter.admit_as(c, true, timed.then(|| limiter.clock.now()))
            }
            None if timed => limiter.admit(limiter.clock.now(), true, false),
            None => limiter.admit_fast(limiter.board.feedback() == Feedback::Timed),
        };
        match admitted {
            Ok(ticket) => Ok(Permit::new(handle, ticket, cut_early)),
            Err(rejection) => {
                limiter.count_rejection(&rejection);
                Err(rejection)
            }
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
